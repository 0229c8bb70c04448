r"""The saddle-point accountant (SPA) of Alghamdi et al. {cite}`alghamdi_spa`.

For independent privacy losses :math:`L = \sum_j L_j` with CGF :math:`K = \sum_j c_j K_j` (``c_j`` the
counts of the ledger), the privacy profile is

.. math:: \delta(\varepsilon) = \mathbb{E}\big[(1 - e^{\varepsilon - L})_+\big]
          = e^{K(t) - t\varepsilon}\, \mathbb{E}\big[\theta_t(L_t - \varepsilon)\big],
          \qquad \theta_t(x) = (e^{-tx} - e^{-(1+t)x})\,1\{x > 0\},

for every tilt :math:`t > 0` (eq. 34/39), where :math:`L_t` is the exponentially tilted loss (mean
:math:`K'(t)`, variance :math:`K''(t)`). Equivalently :math:`\delta(\varepsilon) = \frac{1}{2\pi i}
\int_{t - i\infty}^{t + i\infty} e^{F_\varepsilon(z)} dz` with
:math:`F_\varepsilon(z) = K(z) - \varepsilon z - \log z - \log(1 + z)` (eq. 48-49).

* **Saddle point** (eq. 6/50): :math:`\hat t` is the unique root on :math:`(0, \infty)` of
  :math:`K'(t) = \varepsilon + 1/t + 1/(1+t)`; it exists iff :math:`\varepsilon` is below the
  essential supremum of :math:`L` (otherwise :math:`\delta = 0`).
* **SP-MSD0** (eq. 7/60): :math:`\delta \approx e^{F(\hat t)}/\sqrt{2\pi F''(\hat t)}`.
* **SP-MSD1** (eq. 61): SP-MSD0 times :math:`1 + F^{(4)}/(8F''^2) - 5F'''^2/(24F''^3)`, with
  :math:`F^{(k)}(t) = K^{(k)}(t) + (-1)^k (k-1)!\,[t^{-k} + (1+t)^{-k}]` (:math:`k \ge 2`).
* **SP-CLT** (eq. 8/66, closed form Prop. 6, eq. 78-79): the tilted loss replaced by a Gaussian,
  :math:`\delta_{\rm CLT} = e^{K - t\varepsilon - \gamma^2/2}\,(R(a) - R(b))/\sqrt{2\pi}`, with
  :math:`s = \sqrt{K''}`, :math:`\gamma = (K' - \varepsilon)/s`, :math:`a = ts - \gamma`,
  :math:`b = a + s` and Mills' ratio :math:`R(x) = \bar\Phi(x)/\phi(x)`.
* **Certified error** (Theorem 5, eq. 75-76): for every :math:`t > 0`,
  :math:`|\delta - \delta_{\rm CLT}(t)| \le 1.12\, e^{K - t\varepsilon}\, t^t (1+t)^{-(1+t)}\,
  P_t / K''(t)^{3/2}` with :math:`P_t = \sum_j c_j \mathbb{E}|L_{j,t} - K_j'(t)|^3` (Berry-Esseen with
  Shevtsova's constant 0.56 for non-identical summands, applied twice). The upper bound is further
  capped by the rigorous moments-accountant refinement :math:`e^{K - t\varepsilon} t^t/(1+t)^{1+t}`
  (eq. 43) and by 1. For a composition of plain Gaussians the tilted loss *is* Gaussian and SP-CLT is
  exact (error term 0).

SP-CLT is an **approximation with a certified bracket** (``kind="estimate"``); SP-MSD0/1 are
approximations without a certificate (available from :func:`spa_delta` / :func:`spa_epsilon`).

Degraded regime. For the subsampled Gaussian, at tilts near :math:`2\sigma^2\log(1/q)/\Delta^2` the
tilted loss is bimodal and strongly skewed; SP-CLT/MSD errors grow to 1e-3..1e-1 and the MSD1 factor can
turn negative (seen at small n with tiny delta). The accountant then emits :class:`SaddlePointWarning`
and records ``degraded=True``; the Theorem-5 bracket stays valid there (it holds for any tilt), it is
only wide. MSD1 is reported as ``None`` when its factor is not positive.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr

from ..cumulants import clear_cache, composed_cgf_derivatives, evaluation_count, loss_sup, pair_key
from ..errors import (
    DPValueError,
    NumericalError,
    check_choice,
    check_delta,
    check_epsilon,
    check_positive,
    check_positive_int,
)
from ..mechanisms import GaussianMechanism
from .base import Accountant, AccountingResult
from .certified import FALLBACKS, PLDFallbackMixin
from .registry import COMMON_EVENTS, register

__all__ = [
    "SaddlePointAccountant",
    "SaddlePointWarning",
    "SPAPoint",
    "saddle_point",
    "spa_terms",
    "spa_delta",
    "spa_epsilon",
    "ma_delta",
    "ma_epsilon",
    "spa_epsilon_methods",
    "msd_order3",
    "msd_order3_epsilon",
    "spa_gaussian_asymptotics",
    "spa_tilt_gain",
    "spa_work",
]

BE_CONSTANT = 0.56  # Shevtsova (2010): Berry-Esseen constant for non-identically distributed summands
_LOG_2PI = math.log(2.0 * math.pi)
_T_MIN, _T_MAX = 1e-12, 1e5
METHODS = ("clt", "msd0", "msd1")


class SaddlePointWarning(UserWarning):
    """The saddle-point approximation is in its degraded regime; the certified bracket is wide."""


Ledger = Sequence[tuple[Any, int]]


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
def _log_mills(x: float) -> float:
    """log R(x), R(x) = Phibar(x)/phi(x) = sqrt(2 pi) e^{x^2/2} Phibar(x)."""
    return 0.5 * _LOG_2PI + float(log_ndtr(-x)) + 0.5 * x * x


def _log_mills_diff(a: float, s: float) -> float:
    """log(R(a) - R(a + s)) for s > 0 (R is decreasing); mpmath for tiny s to avoid cancellation."""
    if s < 1e-4:
        import mpmath as mp

        with mp.workdps(40):
            A, B = mp.mpf(a), mp.mpf(a) + mp.mpf(s)
            R = lambda x: mp.sqrt(2 * mp.pi) * mp.exp(x * x / 2) * mp.ncdf(-x)  # noqa: E731
            return float(mp.log(R(A) - R(B)))
    la, lb = _log_mills(a), _log_mills(a + s)
    if lb >= la:
        raise NumericalError("Mills ratio difference lost all precision")
    return la + math.log(-math.expm1(lb - la))


def _ledger_tuple(ledger: Ledger) -> list[tuple[Any, int]]:
    items = [(p, int(c)) for p, c in ledger]
    if not items:
        raise DPValueError("ledger must contain at least one (pair, count) entry")
    for p, _ in items:
        pair_key(p)  # raises DPValueError for unsupported pairs
    return items


def _total_count(ledger: Ledger) -> int:
    return int(sum(c for _, c in ledger))


def _all_gaussian(ledger: Ledger) -> bool:
    return all(pair_key(p)[0] == "gm" and pair_key(p)[2] == 1.0 for p, _ in ledger)


def ess_sup(ledger: Ledger) -> float:
    """The largest privacy loss of the composition: the sum over the ledger of count x each pair's loss supremum."""
    return float(sum(c * loss_sup(p) for p, c in ledger))


def _phase_transition_tilt(ledger: Ledger) -> float:
    """Smallest tilt where a subsampled-Gaussian summand's tilted law turns bimodal (inf if none)."""
    out = math.inf
    for p, _ in ledger:
        k = pair_key(p)
        if k[0] == "gm" and k[2] < 1.0:
            _, sigma, q, d, _dir = k
            out = min(out, 2.0 * sigma * sigma * math.log(1.0 / q) / (d * d))
    return out


# ------------------------------------------------------------------------------------------------
# the terms at one tilt
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SPAPoint:
    """All SPA quantities at one tilt ``t`` for one threshold ``epsilon`` (logs of deltas).

    ``log_delta_clt``: SP-CLT; ``log_err``: Theorem-5 error bound; ``log_msd0``: SP-MSD0;
    ``msd1_factor``: SP-MSD1 / SP-MSD0 (may be <= 0 in the degraded regime); ``log_ma``: the refined
    moments-accountant bound at this tilt (eq. 43); ``log_lower``/``log_upper``: the certified bracket;
    ``saddle``: whether ``t`` is the saddle point of ``epsilon``; ``degraded``: see the module docstring.
    """

    t: float
    epsilon: float
    K: float
    K1: float
    K2: float
    K3: float
    K4: float
    P3: float
    log_delta_clt: float
    log_err: float
    log_msd0: float
    msd1_factor: float
    log_ma: float
    log_lower: float
    log_upper: float
    saddle: bool
    degraded: bool

    @property
    def delta_clt(self) -> float:
        return math.exp(self.log_delta_clt)

    @property
    def delta_msd0(self) -> float:
        return math.exp(self.log_msd0)

    @property
    def delta_msd1(self) -> float | None:
        return math.exp(self.log_msd0) * self.msd1_factor if self.msd1_factor > 0 else None

    @property
    def err(self) -> float:
        return math.exp(self.log_err)

    @property
    def lower(self) -> float:
        return math.exp(self.log_lower)

    @property
    def upper(self) -> float:
        return math.exp(self.log_upper)

    def log_delta(self, method: str) -> float:
        if method == "clt":
            return self.log_delta_clt
        if method == "msd0":
            return self.log_msd0
        if method == "msd1":
            if self.msd1_factor <= 0:
                raise NumericalError(
                    f"SP-MSD1 correction factor is {self.msd1_factor:.3g} <= 0 at t={self.t:.4g} (degraded regime)"
                )
            return self.log_msd0 + math.log(self.msd1_factor)
        if method == "lower":
            return self.log_lower
        if method == "upper":
            return self.log_upper
        raise DPValueError(f"method must be one of clt, msd0, msd1, lower, upper; got {method!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            delta_clt=self.delta_clt,
            delta_msd0=self.delta_msd0,
            delta_msd1=self.delta_msd1,
            err=self.err,
            lower=self.lower,
            upper=self.upper,
        )
        return d


def log_theta_max(t: float) -> float:
    r""":math:`\log\max_{x>0}\theta_t(x) = t\log t - (1+t)\log(1+t)` for the kernel
    :math:`\theta_t(x) = (e^{-tx} - e^{-(1+t)x})\,1\{x>0\}` of eq. (39), ``t > 0``: the constant of the refined
    moments bound (eq. 42-43). :math:`\theta_t` is unimodal on :math:`x > 0` (the paper's Fig. 2 and Appendix B),
    its maximum at :math:`x = \log(1 + 1/t)`. Exact (a closed form)."""
    return t * math.log(t) - (1.0 + t) * math.log1p(t)


def spa_terms(ledger: Ledger, t: float, epsilon: float | None = None) -> SPAPoint:
    """SPA quantities at tilt ``t`` > 0 for threshold ``epsilon``.

    With ``epsilon=None`` the threshold is the one for which ``t`` is the saddle point,
    :math:`\\varepsilon(t) = K'(t) - 1/t - 1/(1+t)` (increasing in t); this parametrisation makes
    epsilon(delta) a single root-find in t.
    """
    ledger = _ledger_tuple(ledger)
    if not (t > 0 and math.isfinite(t)):
        raise DPValueError(f"t must be > 0 and finite, got {t!r}")
    d, P3 = composed_cgf_derivatives(ledger, t, 4)
    K, K1, K2, K3, K4 = (float(v) for v in d)
    eps_saddle = K1 - 1.0 / t - 1.0 / (1.0 + t)
    saddle = epsilon is None
    eps = eps_saddle if saddle else float(epsilon)
    if not K2 > 0:
        raise NumericalError(f"tilted variance K''(t) = {K2!r} is not positive at t={t!r}")
    log_pref = K - t * eps
    s = math.sqrt(K2)
    gamma = (K1 - eps) / s
    a = t * s - gamma
    log_clt = log_pref - 0.5 * gamma * gamma + _log_mills_diff(a, s) - 0.5 * _LOG_2PI
    log_ma = log_pref + log_theta_max(t)
    n_tot = _total_count(ledger)
    if _all_gaussian(ledger):
        log_err = -math.inf  # the tilted sum is exactly Gaussian: SP-CLT is exact
    else:
        # 1e-6 relative inflation covers the quadrature error of P3 (kink of |x|^3)
        log_err = math.log(2 * BE_CONSTANT) + log_ma + math.log(P3 * (1 + 1e-6)) - 1.5 * math.log(K2)
    F2 = K2 + t**-2 + (1.0 + t) ** -2
    F3 = K3 - 2.0 * t**-3 - 2.0 * (1.0 + t) ** -3
    F4 = K4 + 6.0 * t**-4 + 6.0 * (1.0 + t) ** -4
    log_msd0 = log_pref - math.log(t) - math.log1p(t) - 0.5 * (_LOG_2PI + math.log(F2))
    msd1_factor = 1.0 + F4 / (8.0 * F2 * F2) - 5.0 * F3 * F3 / (24.0 * F2**3)
    # certified bracket, widened by the floating-point slack of K (relative 1e-13 per composition step)
    slack = 1e-9 + 1e-13 * n_tot * max(1.0, abs(K) / max(n_tot, 1))
    if math.isinf(log_err):
        log_hi, log_lo = log_clt + slack, log_clt - slack
    else:
        big = max(log_clt, log_err)
        log_hi = big + math.log(math.exp(log_clt - big) + math.exp(log_err - big)) + slack
        if log_err >= log_clt:
            log_lo = -math.inf
        else:
            log_lo = log_clt + math.log(-math.expm1(log_err - log_clt)) - slack
    log_hi = min(log_hi, log_ma + slack, 0.0)
    log_lo = min(log_lo, log_hi)
    degraded = bool(t >= 0.8 * _phase_transition_tilt(ledger) or not (0.5 < msd1_factor < 1.5))
    return SPAPoint(
        t, eps, K, K1, K2, K3, K4, P3, log_clt, log_err, log_msd0, msd1_factor, log_ma, log_lo, log_hi, saddle, degraded
    )


# ------------------------------------------------------------------------------------------------
# saddle point, delta(eps), eps(delta)
# ------------------------------------------------------------------------------------------------
def _eps_of_t(ledger: Ledger, t: float) -> float:
    d, _ = composed_cgf_derivatives(ledger, t, 1)
    return float(d[1]) - 1.0 / t - 1.0 / (1.0 + t)


def saddle_point(ledger: Ledger, epsilon: float) -> float:
    """The saddle point: unique root on (0, inf) of K'(t) = epsilon + 1/t + 1/(1+t) (eq. 6/50).

    Brent's method in log t on a bracket grown from [1e-12, 1]; F' is increasing (F strictly convex,
    App. E eq. 137). Raises :class:`NumericalError` when no root exists below t = 1e5.
    """
    ledger = _ledger_tuple(ledger)
    eps = float(epsilon)

    def g(u: float) -> float:
        return _eps_of_t(ledger, math.exp(u)) - eps

    # bracket by unit steps in log t from t = 1, so the work is the same at every n
    lo, hi = 0.0, 0.0
    if g(0.0) < 0:
        while True:
            lo, hi = hi, hi + 1.0
            if hi > math.log(_T_MAX):
                raise NumericalError(
                    f"no saddle point below t = {_T_MAX:g} for epsilon={eps!r} (epsilon too close to the "
                    f"largest privacy loss {ess_sup(ledger):.6g})"
                )
            if g(hi) >= 0:
                break
    else:
        while True:
            lo, hi = lo - 1.0, lo
            if lo < math.log(_T_MIN):
                raise NumericalError(f"saddle point below t = {_T_MIN} for epsilon={eps!r}")
            if g(lo) < 0:
                break
    u = optimize.brentq(g, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=200)
    return math.exp(u)


def spa_delta(ledger: Ledger, epsilon: float) -> SPAPoint | None:
    """All SPA approximations of delta(epsilon) at the saddle point, or None when delta = 0 exactly
    (epsilon at or above the largest privacy loss of a bounded composition)."""
    ledger = _ledger_tuple(ledger)
    eps = check_epsilon(epsilon)
    if eps >= ess_sup(ledger) * (1 - 1e-12):
        return None
    t = saddle_point(ledger, eps)
    return spa_terms(ledger, t, eps)


def _t_at_eps_zero(ledger: Ledger) -> float:
    return saddle_point(ledger, 0.0)


#: grid points of the scan for the first crossing of the certified upper delta-bound (:func:`_first_crossing`)
_UPPER_SCAN = 64


def _first_crossing(h, u0: float, u: float) -> float:
    """The first root of ``h`` on the path from ``u0`` (where ``h > 0``) up to the root ``u`` found.

    The certified upper delta-bound along the saddle-point path is not monotone in the degraded regime, so
    ``h`` may cross 0 more than once; every eps with upper-delta(eps) <= delta is a certified upper bound on
    eps(delta), and the smallest is the best. A root finder returns whichever crossing its bracket holds, so
    the answer jumped between crossings as sigma moved by 1e-12 (1.4647 and 1.5428 at q 0.002, T 26000,
    delta 1e-6), which made calibrations by bisection loop. Here ``h`` is scanned on :data:`_UPPER_SCAN`
    equal steps of log t from ``u0`` to ``u``, and the first step where it is <= 0 is refined; a dip below
    0 narrower than one step can still be missed (the answer is then the next crossing: certified, less tight).
    """
    if not u > u0:
        return u
    prev = u0
    for k in range(1, _UPPER_SCAN):
        x = u0 + (u - u0) * k / _UPPER_SCAN
        if h(x) <= 0:
            return optimize.brentq(h, prev, x, xtol=1e-13, rtol=1e-14, maxiter=200)
        prev = x
    return u


def spa_epsilon(
    ledger: Ledger, delta: float, method: str = "clt", t_start: float | None = None
) -> tuple[float, SPAPoint | None]:
    """epsilon(delta) for ``method`` in clt, msd0, msd1, lower, upper, with the SPA point there.

    One root-find in the tilt t along the saddle-point path eps(t) = K'(t) - 1/t - 1/(1+t).
    ``"upper"``: the returned epsilon satisfies upper-delta(epsilon) <= delta, so it is a certified
    upper bound on the exact epsilon(delta); ``"lower"``: lower-delta(epsilon) >= delta, a certified
    lower bound (0 when the lower delta-bound is below ``delta`` already at epsilon = 0).
    ``t_start``: optional tilt near the answer, from which the root is bracketed.
    """
    ledger = _ledger_tuple(ledger)
    delta = check_delta(delta)
    check_choice("method", method, METHODS + ("lower", "upper"))
    log_target = math.log(delta)
    t0 = _t_at_eps_zero(ledger)

    def h(u: float) -> float:
        return spa_terms(ledger, math.exp(u)).log_delta(method) - log_target

    u0 = math.log(t0)
    if h(u0) <= 0:
        return 0.0, spa_terms(ledger, t0)
    if t_start is not None and t_start > t0:
        # bracket outwards from a nearby tilt (e.g. the SP-CLT solution when solving for the bounds)
        us, step = math.log(t_start), 0.02
        if h(us) > 0:
            lo, hi = us, us + step
            while h(hi) > 0:
                lo, step = hi, step * 2.0
                hi = lo + step
                if hi > math.log(_T_MAX):
                    raise NumericalError(f"could not bracket epsilon for delta={delta!r} ({method})")
        else:
            lo, hi = max(u0, us - step), us
            while lo > u0 and h(lo) <= 0:
                hi, step = lo, step * 2.0
                lo = max(u0, lo - step)
    else:
        lo, hi, step = u0, u0 + 0.5, 0.5
        while h(hi) > 0:
            lo = hi
            step *= 1.5
            hi += step
            if hi > math.log(_T_MAX):
                raise NumericalError(f"could not bracket epsilon for delta={delta!r} ({method})")
    u = optimize.brentq(h, lo, hi, xtol=1e-13, rtol=1e-14, maxiter=200)
    if method == "upper":
        u = _first_crossing(h, u0, u)
    if method in ("upper", "clt", "msd0", "msd1"):
        # move right until the condition delta_X(eps) <= delta holds at the returned point
        k = 0
        while h(u) > 0:
            u += 1e-13 * 2**k
            k += 1
    if method == "lower":
        k = 0
        while h(u) < 0:
            u -= 1e-13 * 2**k
            k += 1
    pt = spa_terms(ledger, math.exp(u))
    return max(pt.epsilon, 0.0), pt


def spa_epsilon_methods(ledger: Ledger, delta: float) -> dict[str, Any]:
    """epsilon(delta) of every SPA variant at once, with the saddle point of the SP-CLT solution.

    Keys: ``clt``, ``msd0``, ``msd1`` (eq. 8, 60, 61), ``lower`` and ``upper`` (the certified Theorem-5
    bracket, see :func:`spa_epsilon`), ``t`` (the tilt of the SP-CLT solution), ``msd1_factor`` (SP-MSD1 /
    SP-MSD0 there) and ``degraded``. ``msd1`` is NaN where the SP-MSD1 factor is not positive along the
    whole path (the degraded regime: eq. 61 has no root in epsilon), and that is the only NaN.
    """
    e_clt, p = spa_epsilon(ledger, delta, "clt")
    out: dict[str, Any] = {"clt": e_clt, "t": p.t, "msd1_factor": p.msd1_factor, "degraded": p.degraded}
    out["lower"] = spa_epsilon(ledger, delta, "lower")[0]
    out["upper"] = spa_epsilon(ledger, delta, "upper")[0]
    out["msd0"] = spa_epsilon(ledger, delta, "msd0")[0]
    try:
        out["msd1"] = spa_epsilon(ledger, delta, "msd1")[0]
    except NumericalError:
        out["msd1"] = math.nan
    return out


# ------------------------------------------------------------------------------------------------
# moments-accountant baselines (same CGF)
# ------------------------------------------------------------------------------------------------
def ma_delta(ledger: Ledger, epsilon: float, refined: bool = True) -> float:
    """Moments-accountant upper bound inf_t exp(K(t) - t eps) [* t^t/(1+t)^(1+t) if refined] (eq. 40/43).

    The refined form is the conversion used by modern RDP accountants; both are rigorous upper bounds
    of delta(epsilon). Minimised over continuous t > 0 (bounded Brent search in log t).
    """
    ledger = _ledger_tuple(ledger)
    eps = check_epsilon(epsilon)

    def f(u: float) -> float:
        t = math.exp(u)
        d, _ = composed_cgf_derivatives(ledger, t, 0)
        v = float(d[0]) - t * eps
        if refined:
            v += t * math.log(t) - (1 + t) * math.log1p(t)
        return v

    grid = np.linspace(math.log(1e-6), math.log(2e3), 60)
    vals = [f(u) for u in grid]
    i = int(np.argmin(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-10})
    return float(min(1.0, math.exp(min(res.fun, vals[i]))))


def ma_epsilon(ledger: Ledger, delta: float, refined: bool = True) -> float:
    """Moments-accountant epsilon(delta): inf_t [K(t) + log(1/delta) (+ refinement)] / t."""
    ledger = _ledger_tuple(ledger)
    delta = check_delta(delta)
    ld = math.log(delta)

    def f(u: float) -> float:
        t = math.exp(u)
        d, _ = composed_cgf_derivatives(ledger, t, 0)
        v = float(d[0]) - ld
        if refined:
            v += t * math.log(t) - (1 + t) * math.log1p(t)
        return v / t

    grid = np.linspace(math.log(1e-6), math.log(2e3), 60)
    vals = [f(u) for u in grid]
    i = int(np.argmin(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-10})
    return float(max(0.0, min(res.fun, vals[i])))


# ------------------------------------------------------------------------------------------------
# the order-3 expansion, the Gaussian asymptotics (Theorem 7, Prop. 8) and the work of one evaluation
# ------------------------------------------------------------------------------------------------
def msd_order3(ledger, t: float) -> tuple[float, float]:
    r"""``(epsilon, log delta)`` of the order-3 steepest-descent expansion of the SPA at tilt ``t``.

    With :math:`F(z) = K(z) - \varepsilon z - \log z - \log(1+z)` (Alghamdi et al., eq. 48-49) and the
    saddle-point equation :math:`K'(t) = \varepsilon + 1/t + 1/(1+t)` (eq. 6, 50) giving ε of ``t``, the
    expansion is SP-MSD0 (eq. 60), :math:`e^{F(t)}/\sqrt{2\pi F''(t)}`, times :math:`1 + \beta_2 + \beta_3`
    with :math:`\beta_2 = F^{(4)}/(8F''^2)` and :math:`\beta_3 = -(F^{(6)} + 10F'''^2)/(48F''^3)`: the
    :math:`k = 3` expansion of the ICML version ("The Saddle-Point Method in Differential Privacy").
    ``log delta`` is ``-inf`` where the factor is not positive (the expansion has broken down).
    """

    d, _ = composed_cgf_derivatives(ledger, t, 6)
    eps = float(d[1]) - 1 / t - 1 / (1 + t)
    F = {k: float(d[k]) + (-1) ** k * math.factorial(k - 1) * (t**-k + (1 + t) ** -k) for k in (2, 3, 4, 6)}
    factor = 1 + F[4] / (8 * F[2] ** 2) - (F[6] + 10 * F[3] ** 2) / (48 * F[2] ** 3)
    log_msd0 = float(d[0]) - t * eps - math.log(t) - math.log1p(t) - 0.5 * math.log(2 * math.pi * F[2])
    return eps, (log_msd0 + math.log(factor) if factor > 0 else -math.inf)


def msd_order3_epsilon(ledger, delta: float, t_start: float) -> float:
    """epsilon(delta) of the order-3 expansion (:func:`msd_order3`) along the saddle-point path.

    Solves ``log delta(t) = log delta`` by Brent's method in ``u = log t``, widening a bracket around
    ``t_start`` (e.g. the SP-CLT saddle point) by 0.05 on each side up to 40 times; returns NaN where no sign
    change is found (the expansion does not reach delta there).
    """
    target = math.log(check_delta(delta))

    def h(u):
        return msd_order3(ledger, math.exp(u))[1] - target

    u0 = math.log(check_positive("t_start", t_start))
    lo, hi = u0 - 0.05, u0 + 0.05
    for _ in range(40):
        if h(lo) > 0 and h(hi) < 0:
            return msd_order3(ledger, math.exp(optimize.brentq(h, lo, hi, xtol=1e-14, rtol=1e-15)))[0]
        lo, hi = (lo - 0.05 if h(lo) <= 0 else lo), (hi + 0.05 if h(hi) >= 0 else hi)
    return float("nan")


def spa_gaussian_asymptotics(r: float, n: int) -> dict[str, float]:
    r"""Proposition 8 and Theorem 7 of Alghamdi et al. on the Gaussian loss (mechanism noise 1: L ~ N(1/2, 1)).

    At :math:`\varepsilon_n = n\mu + r\sqrt n` (:math:`\mu = 1/2`, :math:`v = 1`) returns ``sqrt_n_t``
    (:math:`\sqrt n\,\hat t_n`, the saddle point of :func:`saddle_point`) and its
    limit ``tau`` :math:`= (r + \sqrt{r^2 + 4v})/(2v)` (Prop. 8); ``err_sqrt_n``, the Theorem-5 bound
    :math:`\mathrm{err}_{SP} = 1.12\,e^{K(t) - t\varepsilon}\,t^t(1+t)^{-(1+t)}\,P_t/K''(t)^{3/2}` (eq. 73) at
    :math:`\hat t_n` times :math:`\sqrt n`, and its limit ``C_r`` :math:`= 1.12\,P\,v^{-3/2}e^{(1 - r\tau)/2}`
    with :math:`P = 2\sqrt{2/\pi}\,v^{3/2}`, the third absolute central moment of a Gaussian (Thm. 7).
    """

    mu1, v1 = 0.5, 1.0
    n = check_positive_int("n", n)
    tau = (r + math.sqrt(r**2 + 4 * v1)) / (2 * v1)
    led = [(GaussianMechanism(1.0).pair("remove"), n)]
    eps_n = n * mu1 + r * math.sqrt(n)
    t_n = saddle_point(led, eps_n)
    d, P_t = composed_cgf_derivatives(led, t_n, 2)
    log_err = (
        math.log(1.12)
        + d[0]
        - t_n * eps_n
        + t_n * math.log(t_n)
        - (1 + t_n) * math.log1p(t_n)
        + math.log(P_t)
        - 1.5 * math.log(d[2])
    )
    P1 = 2 * math.sqrt(2 / math.pi) * v1**1.5
    C_r = 1.12 * P1 * v1**-1.5 * math.exp((1 - r * tau) / 2)
    return {"sqrt_n_t": math.sqrt(n) * t_n, "tau": tau, "err_sqrt_n": math.exp(log_err) * math.sqrt(n), "C_r": C_r}


def spa_tilt_gain(limit_delta: float) -> float:
    r"""The factor :math:`e^{(1 - r\tau)/2}` that the tilted Berry-Esseen bound gains over the untilted one.

    Alghamdi et al., eq. 90: it depends only on the limiting :math:`\delta = Q(r/\sqrt v)`, through
    :math:`r\tau = z(z + \sqrt{z^2 + 4})/2` with :math:`z = Q^{-1}(\delta)`.
    """
    z = stats.norm.isf(check_delta(limit_delta))
    return math.exp((1 - z * (z + math.sqrt(z * z + 4)) / 2) / 2)


def spa_work(pair, n: int, delta: float, repeats: int = 1) -> dict[str, Any]:
    """Work and time of one saddle-point evaluation of n compositions of ``pair``, from a cold cache.

    The composed CGF is ``n K(t)`` (Alghamdi et al., Section 5), so the cost is the number of one-step CGF
    evaluations the root finders make (:func:`dputils.cumulants.evaluation_count`: distinct points, a
    deterministic count). Returns ``n``, the counts and best-of-``repeats`` wall-clock milliseconds of
    :func:`spa_delta` at ``eps`` (the SP-CLT epsilon(delta)) and of
    :func:`spa_epsilon` at ``delta`` (best of ``max(1, repeats // 2)``).
    """

    def best_time(fn, reps):
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            clear_cache()  # timed from a cold cache, the clearing included
            fn()
            out.append(time.perf_counter() - t0)
        return min(out)

    def evaluations(fn):
        clear_cache()
        fn()
        return evaluation_count()

    led = [(pair, check_positive_int("n", n))]
    delta = check_delta(delta)
    repeats = check_positive_int("repeats", repeats)
    eps = spa_epsilon(led, delta, "clt")[0]
    nd = evaluations(lambda: spa_delta(led, eps))
    ne = evaluations(lambda: spa_epsilon(led, delta, "clt"))
    td = best_time(lambda: spa_delta(led, eps), repeats)
    te = best_time(lambda: spa_epsilon(led, delta, "clt"), max(1, repeats // 2))
    return dict(n=int(n), delta_evals=nd, delta_ms=1e3 * td, epsilon_evals=ne, epsilon_ms=1e3 * te, eps=eps)


# ------------------------------------------------------------------------------------------------
# the accountant
# ------------------------------------------------------------------------------------------------
@register(
    "spa",
    label="SPA",
    answer="estimate",
    events=COMMON_EVENTS,
    cost="cheap",
    rank=40,
    color="#9467bd",
    help="saddle-point accountant (Alghamdi et al.): SP-CLT estimate with certified Theorem-5 bounds",
)
class SaddlePointAccountant(PLDFallbackMixin, Accountant):
    """Saddle-point accountant: SP-CLT estimate with the certified Theorem-5 bracket.

    ``get_delta``/``get_epsilon`` return ``kind="estimate"``: ``value`` is SP-CLT (eq. 8), ``lower`` and
    ``upper`` are certified (Theorem 5, capped by the refined moments bound and by 1). ``details`` holds
    the saddle point ``t_hat``, SP-MSD0 and SP-MSD1, the error bound, the direction that attained the
    maximum and ``degraded``. ``direction="both"`` reports the worse of add and remove (value, lower and
    upper are each the maximum over the two directions, which brackets the maximum of the exact values).
    Supports Gaussian, Poisson-subsampled Gaussian and Laplace mechanisms, composed heterogeneously.

    ``fallback="pld"`` (default): where the Theorem-5 bracket is wider than 10% of its upper end (far from the
    CLT regime, e.g. small T: at sigma 1, q 0.01, delta 1e-5 and T 1..10 SP-CLT gives 0.64-0.70 against an
    exact 0.20-0.38, inside a bracket [0, ~1]), is vacuous or the saddle point fails, the PLD accountant's
    certified bracket is intersected with it and the SP-CLT value clipped into the intersection;
    ``details["fallback"] == "pld"`` flags it, ``details["own_value"]`` keeps the SP-CLT value
    (:mod:`dputils.accountants.certified`). ``fallback="none"``: the method's own answer alone.
    """

    name = "spa"

    def __init__(self, direction: str = "both", fallback: str = "pld") -> None:
        super().__init__(direction)
        self.fallback = check_choice("fallback", fallback, FALLBACKS)

    def _check_supported(self, mechanism: Any) -> None:
        if not hasattr(mechanism, "pair"):
            raise DPValueError(f"mechanism must be a dputils.mechanisms.Mechanism, got {type(mechanism).__name__}")
        for d in self.directions:
            pair_key(mechanism.pair(d))

    def _ledger(self, direction: str) -> list[tuple[Any, int]]:
        return [(m.pair(direction), c) for m, c in self.ledger]

    def _warn(self, degraded_dirs: list[str], what: str) -> None:
        if degraded_dirs:
            warnings.warn(
                f"spa: {what} in the degraded saddle-point regime (direction {', '.join(degraded_dirs)}): "
                "SP-CLT/MSD may be off by 1e-3..1e-1 relative; the certified bracket remains valid but is wide",
                SaddlePointWarning,
                stacklevel=3,
            )

    def _own_delta(self, eps: float) -> AccountingResult:
        """SP-CLT delta(eps) with the Theorem-5 bracket (no fallback)."""
        per_dir, fallback = {}, {}
        for d in self.directions:
            try:
                per_dir[d] = spa_delta(self._ledger(d), eps)
            except NumericalError:
                # no usable saddle point (epsilon just below the largest loss of a bounded composition):
                # report the rigorous refined moments bound, lower bound 0
                per_dir[d] = None
                fallback[d] = ma_delta(self._ledger(d), eps)
        vals = {d: (fallback.get(d, 0.0) if p is None else p.delta_clt) for d, p in per_dir.items()}
        worst = max(vals, key=vals.get)
        lower = max(0.0 if p is None else p.lower for p in per_dir.values())
        upper = max(fallback.get(d, 0.0) if p is None else p.upper for d, p in per_dir.items())
        value = min(max(vals[worst], lower), upper)
        pw = per_dir[worst]
        degraded = [d for d, p in per_dir.items() if (p is not None and p.degraded) or d in fallback]
        self._warn(degraded, f"delta({eps:g})")
        details = {
            "direction": worst,
            "method": "moments-bound fallback" if worst in fallback else "SP-CLT",
            "degraded": bool(degraded),
        }
        if pw is not None:
            details.update(t_hat=pw.t, delta_msd0=pw.delta_msd0, delta_msd1=pw.delta_msd1, err_bound=pw.err)
        return AccountingResult(value, lower, upper, "estimate", self.name, "delta", details)

    def _own_epsilon(self, delta: float) -> AccountingResult:
        """SP-CLT epsilon(delta) with the Theorem-5 bracket (no fallback)."""
        est, lows, ups, pts = {}, {}, {}, {}
        for d in self.directions:
            led = self._ledger(d)
            est[d], pts[d] = spa_epsilon(led, delta, "clt")
            ts = None if pts[d] is None else pts[d].t
            lows[d], _ = spa_epsilon(led, delta, "lower", t_start=ts)
            ups[d], _ = spa_epsilon(led, delta, "upper", t_start=ts)
        worst = max(est, key=est.get)
        lower, upper = max(lows.values()), max(ups.values())
        value = min(max(est[worst], lower), upper)
        degraded = [d for d, p in pts.items() if p is not None and p.degraded]
        self._warn(degraded, f"epsilon({delta:g})")
        p = pts[worst]
        details = {
            "direction": worst,
            "method": "SP-CLT",
            "degraded": bool(degraded),
            "t_hat": None if p is None else p.t,
        }
        return AccountingResult(value, lower, upper, "estimate", self.name, "epsilon", details)
