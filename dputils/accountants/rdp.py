r"""Rényi-DP (RDP) accountant (Mironov 2017; Mironov, Talwar, Zhang 2019).

Per mechanism the Rényi divergence of order :math:`\alpha`, :math:`D_\alpha(P\|Q) =
\frac{1}{\alpha - 1}\log \mathbb{E}_Q[(p/q)^\alpha]`, composes by addition. Closed forms:

* Gaussian, :math:`\mu = \Delta/\sigma`: :math:`\alpha\mu^2/2`.
* Laplace, :math:`b` = scale/sensitivity (Mironov 2017, Prop. 6):
  :math:`\frac{1}{\alpha-1}\log\big(\frac{\alpha}{2\alpha-1}e^{(\alpha-1)/b} + \frac{\alpha-1}{2\alpha-1}e^{-\alpha/b}\big)`.
* Poisson-subsampled Gaussian (Mironov, Talwar, Zhang 2019, Sec. 3.3): for integer orders
  :math:`A_\alpha = \sum_{k=0}^{\alpha}\binom{\alpha}{k}(1-q)^{\alpha-k}q^k e^{(k^2-k)/(2\sigma^2)}`
  (log-sum-exp), for fractional orders the same expectation
  :math:`\mathbb{E}_{x\sim N(0,\sigma^2)}[(1 - q + q e^{(2x-1)/(2\sigma^2)})^\alpha]` by adaptive quadrature
  in log scale. :math:`A_\alpha` bounds both the add and the remove direction (their Theorem 5), so
  the reported RDP covers add-or-remove adjacency.

Conversion to (epsilon, delta), the choice matters and is explicit:

* ``"modern"`` (default; Balle et al. 2020, Thm 21, also Canonne, Kamath, Steinke 2020):
  :math:`\varepsilon = r_\alpha + \log(1 - 1/\alpha) - \frac{\log\delta + \log\alpha}{\alpha - 1}`.
* ``"classic"`` (Mironov 2017, Prop. 3; what produced the TF-Privacy tutorial's 1.19 / 3.01 / 7.10):
  :math:`\varepsilon = r_\alpha + \frac{\log(1/\delta)}{\alpha - 1}`.

The result is minimised over the orders and is an upper bound (``kind="upper-bound"``, no lower bound).
"""

from __future__ import annotations

import argparse
import math
import warnings
from functools import lru_cache

import numpy as np
from scipy import integrate, special

from ..errors import DPValueError, NumericalError, check_choice, check_delta, check_epsilon, check_finite
from ..mechanisms import GaussianMechanism, LaplaceMechanism, Mechanism, SubsampledGaussianMechanism
from .base import Accountant, AccountingResult

#: Default orders: a few fractional ones near 1 plus the integers 2..256 and a few large ones.
DEFAULT_ORDERS = tuple([1.25, 1.5, 1.75] + list(range(2, 65)) + [80, 96, 128, 160, 192, 256, 512, 1024])
#: Integer orders only, as in the dp_accounting comparisons.
INTEGER_ORDERS = tuple(range(2, 257))


def _log_a_int(q: float, sigma: float, alpha: int) -> float:
    """log A_alpha for integer alpha by the binomial expansion (log-sum-exp)."""
    k = np.arange(alpha + 1, dtype=float)
    log_binom = special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
    log1mq = math.log1p(-q) if q < 1 else -math.inf
    with np.errstate(invalid="ignore"):
        terms = log_binom + (alpha - k) * log1mq + k * math.log(q) + (k * k - k) / (2 * sigma**2)
    if q == 1.0:
        terms = np.where(k == alpha, (alpha * alpha - alpha) / (2 * sigma**2), -np.inf)
    return float(special.logsumexp(terms))


def _log_a_frac(q: float, sigma: float, alpha: float) -> float:
    """log A_alpha for fractional alpha > 1 by quadrature of the log-scaled integrand."""
    log1mq = math.log1p(-q)
    logq = math.log(q)

    def log_f(x: float) -> float:
        t = (2 * x - 1) / (2 * sigma**2)
        return alpha * float(np.logaddexp(log1mq, logq + t)) - 0.5 * (x / sigma) ** 2 - 0.5 * math.log(2 * math.pi * sigma**2)

    # locate the peak to scale the integrand
    xs = np.linspace(-12 * sigma, (alpha + 12) * max(sigma, 1.0), 4001)
    vals = np.array([log_f(x) for x in xs])
    peak = float(vals.max())
    x0 = float(xs[int(vals.argmax())])
    lo, hi = float(xs[0]), float(xs[-1])
    parts = [(lo, x0), (x0, hi)]
    total = 0.0
    for a, b in parts:
        v, _ = integrate.quad(lambda x: math.exp(log_f(x) - peak), a, b, limit=200, epsabs=0, epsrel=1e-12)
        total += v
    return peak + math.log(total)


def _log_a_frac_checked(q: float, sigma: float, alpha: float) -> float:
    """log A_alpha for fractional alpha, never below the truth by a failed quadrature.

    ``log A_alpha`` is convex in alpha (a cumulant generating function) with ``log A_1 = 0``, so the chord
    through the neighbouring integer orders is an upper bound, and for alpha > 2 the extrapolated chord of
    the two integer orders below is a lower bound. The quadrature is used when it is finite, ran without
    warnings and lies between these; otherwise the chord (a valid, slightly larger bound) is used. This
    keeps extreme inputs (e.g. sigma = 1e-6, where the integrand is a spike the quadrature misses) from
    failing with "math domain error" or, worse, from under-reporting the RDP.
    """
    n = math.floor(alpha)
    theta = alpha - n
    la_n = 0.0 if n == 1 else _log_a_int(q, sigma, n)
    la_n1 = _log_a_int(q, sigma, n + 1)
    chord = (1 - theta) * la_n + theta * la_n1
    floor = -math.inf
    if n >= 2:
        la_nm1 = 0.0 if n == 2 else _log_a_int(q, sigma, n - 1)
        floor = la_n + theta * (la_n - la_nm1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                la = _log_a_frac(q, sigma, alpha)
    except (ArithmeticError, ValueError, Warning):
        return chord
    tol = 1e-9 * max(1.0, abs(chord))
    if not math.isfinite(la) or la > chord + tol or la < floor - tol:
        return chord
    return min(la, chord)


@lru_cache(maxsize=4096)
def subsampled_gaussian_rdp(q: float, sigma: float, alpha: float) -> float:
    """RDP of order alpha of the Poisson-subsampled Gaussian (sensitivity 1, noise multiplier sigma)."""
    if q == 1.0:
        return alpha / (2 * sigma**2)
    if float(alpha).is_integer():
        la = _log_a_int(q, sigma, int(alpha))
    else:
        la = _log_a_frac_checked(q, sigma, alpha)
    return max(la, 0.0) / (alpha - 1)


def mechanism_rdp(mech: Mechanism, alpha: float) -> float:
    """RDP of order alpha (> 1) of one run of ``mech``."""
    if isinstance(mech, GaussianMechanism):
        return alpha * mech.mu**2 / 2
    if isinstance(mech, SubsampledGaussianMechanism):
        return subsampled_gaussian_rdp(mech.q, mech.sigma / mech.sensitivity, float(alpha))
    if isinstance(mech, LaplaceMechanism):
        b = mech.scale / mech.sensitivity
        a = alpha
        t1 = math.log(a / (2 * a - 1)) + (a - 1) / b
        t2 = math.log((a - 1) / (2 * a - 1)) - a / b
        return float(np.logaddexp(t1, t2)) / (a - 1)
    raise DPValueError(f"rdp: unsupported mechanism {type(mech).__name__}")


def _conversion_inputs(orders, rdp, conversion: str) -> tuple[np.ndarray, np.ndarray]:
    """Orders (> 1) and RDP values as matching 1-d float arrays; the conversion name checked."""
    check_choice("conversion", conversion, ("modern", "classic"))
    a = np.atleast_1d(np.asarray(orders, dtype=float))
    r = np.atleast_1d(np.asarray(rdp, dtype=float))
    if a.ndim != 1 or a.size == 0 or not np.all(a > 1):
        raise DPValueError(f"orders must be a non-empty sequence of numbers > 1, got {orders!r}")
    if r.shape != a.shape:
        raise DPValueError(f"rdp must have one value per order ({a.size}), got shape {r.shape}")
    return a, r


def rdp_to_epsilon(orders, rdp, delta: float, conversion: str = "modern") -> tuple[float, float]:
    r"""Smallest epsilon over the orders and the order that attains it: ``(epsilon, order)``.

    A mechanism with Renyi divergence at most ``r_alpha`` of order ``alpha`` is (epsilon, delta)-DP with

    * ``"modern"`` (Balle et al. 2020, Thm 21; Canonne, Kamath & Steinke 2020, Prop. 12; Theorem 3.1 /
      Eq. 4 of Schuchardt & Kalinin solved for epsilon):
      :math:`\varepsilon = r_\alpha + \log(1 - 1/\alpha) - (\log\delta + \log\alpha)/(\alpha - 1)`;
    * ``"classic"`` (Mironov 2017, Prop. 3): :math:`\varepsilon = r_\alpha + \log(1/\delta)/(\alpha - 1)`.

    Epsilon is clipped at 0 (valid: the hockey-stick divergence is non-increasing in epsilon). The one
    implementation in the book: the RDP accountant and the matrix accountants use it.
    """
    delta = check_delta(delta)
    a, r = _conversion_inputs(orders, rdp, conversion)
    if conversion == "modern":
        eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1)
    else:
        eps = r + math.log(1.0 / delta) / (a - 1)
    if not np.any(np.isfinite(eps)):
        raise NumericalError("rdp: the composed RDP overflowed at every order (noise too small for these orders); "
                             "epsilon cannot be computed")
    i = int(np.nanargmin(eps))
    return max(float(eps[i]), 0.0), float(a[i])


def rdp_to_delta(orders, rdp, epsilon: float, conversion: str = "modern") -> tuple[float, float]:
    r"""Smallest delta over the orders (the inverse of :func:`rdp_to_epsilon` per order), capped at 1.

    ``"modern"``: :math:`\delta = \exp((\alpha-1)(r_\alpha - \varepsilon + \log(1 - 1/\alpha)))/\alpha`,
    which is Theorem 3.1 (Eq. 4) of Schuchardt & Kalinin,
    :math:`e^{(\alpha-1)(r_\alpha-\varepsilon)}(1-1/\alpha)^\alpha/(\alpha-1)`, rewritten;
    ``"classic"``: :math:`\delta = \exp((\alpha-1)(r_\alpha - \varepsilon))`. Returns ``(delta, order)``.
    """
    epsilon = check_epsilon(epsilon)
    a, r = _conversion_inputs(orders, rdp, conversion)
    if conversion == "modern":
        logd = (a - 1) * (r - epsilon + np.log1p(-1.0 / a)) - np.log(a)
    else:
        logd = (a - 1) * (r - epsilon)
    if np.all(np.isnan(logd)):
        raise NumericalError("rdp: the composed RDP is undefined at every order; delta cannot be computed")
    i = int(np.nanargmin(logd))
    return min(1.0, math.exp(min(float(logd[i]), 0.0))), float(a[i])


class RDPAccountant(Accountant):
    """Rényi-DP accountant. Upper bounds only; the conversion is ``"modern"`` or ``"classic"``."""

    name = "rdp"

    def __init__(self, orders=DEFAULT_ORDERS, conversion: str = "modern", direction: str = "both") -> None:
        super().__init__(direction)
        if isinstance(orders, (str, bytes)) or not hasattr(orders, "__iter__"):
            raise DPValueError(f"orders must be a non-empty sequence of finite numbers > 1, got {orders!r}")
        self.orders = tuple(check_finite("orders", o) for o in orders)
        if not self.orders or min(self.orders) <= 1:
            raise DPValueError(f"orders must be a non-empty sequence of finite numbers > 1, got {list(orders)!r}")
        self.conversion = check_choice("conversion", conversion, ("modern", "classic"))

    def _check_supported(self, mechanism) -> None:
        if not isinstance(mechanism, (GaussianMechanism, SubsampledGaussianMechanism, LaplaceMechanism)):
            raise DPValueError(f"rdp: unsupported mechanism {type(mechanism).__name__}")

    def rdp(self) -> np.ndarray:
        """The composed RDP at each order."""
        self._require_ledger()
        return np.array([sum(c * mechanism_rdp(m, a) for m, c in self.ledger) for a in self.orders])

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        eps, order = rdp_to_epsilon(self.orders, self.rdp(), delta, self.conversion)
        name = self.name if self.conversion == "modern" else "rdp-classic"
        return AccountingResult(eps, None, eps, "upper-bound", name, "epsilon",
                                {"order": order, "conversion": self.conversion})

    def get_delta(self, epsilon: float) -> AccountingResult:
        epsilon = self._checked_epsilon(epsilon)
        d, order = rdp_to_delta(self.orders, self.rdp(), epsilon, self.conversion)
        name = self.name if self.conversion == "modern" else "rdp-classic"
        return AccountingResult(d, None, d, "upper-bound", name, "delta",
                                {"order": order, "conversion": self.conversion})


def _build(conversion: str):
    def build(args: argparse.Namespace) -> RDPAccountant:
        from ..mechanisms import mechanism_from_args

        acc = RDPAccountant(conversion=conversion, direction=args.direction)
        return acc.compose(mechanism_from_args(args), args.steps)

    return build


from .registry import register  # noqa: E402

register("rdp", help="Renyi DP, modern conversion (Balle et al. 2020), upper bound", build=_build("modern"))
register("rdp-classic", help="Renyi DP, classic conversion (Mironov 2017), upper bound", build=_build("classic"))
