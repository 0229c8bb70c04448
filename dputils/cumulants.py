r"""Cumulant generating functions of privacy-loss random variables.

For a privacy-loss pair :math:`(P, Q)` with loss :math:`L = \log p(X)/q(X)`, :math:`X \sim P`, the
cumulant generating function (CGF) is

.. math:: K(t) = \log \mathbb{E}_P\big[e^{tL}\big] = \log \mathbb{E}_Q\big[(p/q)^{1+t}\big],

so :math:`K(0) = K(-1) = 0` and :math:`K(t) = t\,D_{1+t}(P\|Q)` (Renyi divergence of order
:math:`1+t`). Its derivatives at :math:`t` are the cumulants of the **exponentially tilted** loss
:math:`L_t` with law :math:`P(L_t \in A) = \mathbb{E}[e^{tL - K(t)} 1\{L \in A\}]` (Alghamdi et al.,
eq. 29-31 {cite}`alghamdi_spa`): :math:`K'(t) = \mathbb{E} L_t`, :math:`K''(t) = \mathrm{Var}\,L_t`,
:math:`K'''(t)` is the third central moment, and so on.

How they are computed (no finite differences anywhere):

* **Gaussian** (``GaussianMixturePair`` with ``q == 1``): :math:`L \sim N(\eta, 2\eta)`,
  :math:`\eta = \Delta^2/(2\sigma^2)`, so :math:`K(t) = \eta t(1+t)` in closed form.
* **Poisson-subsampled Gaussian** (``q < 1``): with :math:`r(x) = 1 - q + q e^{(2x\Delta-\Delta^2)/(2\sigma^2)}`
  the loss is :math:`\log r` ("remove", :math:`X` from the mixture) or :math:`-\log r` ("add",
  :math:`X \sim N(0,\sigma^2)`). The law of :math:`L` is represented by weighted points: a trapezoid
  grid in :math:`x` whose range is chosen from the log-weights so that it covers both the untilted and
  the tilted mass down to :math:`e^{-745}` of the peak, with step :math:`\min(\sigma, \sigma^2/\Delta)/12`.
  The integrand is analytic in a strip of half-width :math:`\pi\sigma^2/\Delta` (zeros of :math:`r`),
  so the trapezoid rule converges geometrically; all sums are log-sum-exp, and :math:`K` near 0 is
  formed as :math:`\log(1 + \sum_i \pi_i\,\mathrm{expm1}(tL_i))` to keep its relative accuracy.
  The exact binomial sum at integer orders (:func:`subsampled_gaussian_cgf_binomial`) is the cross-check.
* **Laplace** (``LaplacePair``): with :math:`s = \Delta/b`, :math:`L` has atoms :math:`+s` (mass 1/2),
  :math:`-s` (mass :math:`e^{-s}/2`) and density :math:`\tfrac14 e^{(l-s)/2}` on :math:`(-s, s)`, so
  :math:`M(t) = [(1+t)e^{ts} + t e^{-(1+t)s}]/(1+2t)`. The density part is integrated with
  Gauss-Legendre nodes (exact up to rounding for these exponentials).

Moments are computed as central moments of the tilted weights and converted to cumulants, which avoids
the cancellation of the MGF-derivative route. Results are cached per pair parameters and tilt, so the
cost of a query does not depend on how many times the pair is composed.

Public API: :func:`cgf`, :func:`cgf_derivatives`, :func:`cumulants`, :func:`composed_cgf`,
:func:`composed_cgf_derivatives`, :func:`tilted_abs_third_moment`, :func:`loss_sup`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np
from scipy.special import comb, logsumexp

from .errors import DPValueError, NumericalError, check_finite, check_positive_int

__all__ = [
    "cgf",
    "cgf_derivatives",
    "cumulants",
    "composed_cgf",
    "composed_cgf_derivatives",
    "tilted_abs_third_moment",
    "tilted_points",
    "loss_sup",
    "pair_key",
    "subsampled_gaussian_cgf_binomial",
]

#: Largest order of derivative supported by :func:`cgf_derivatives`.
MAX_ORDER = 8
_LOG_TINY = -745.0  # log of the smallest positive double (relative cut-off of the grids)


# ------------------------------------------------------------------------------------------------
# pair identification
# ------------------------------------------------------------------------------------------------
def pair_key(pair: Any) -> tuple:
    """A hashable key of a privacy-loss pair from its parameters (used for caching).

    Supported: ``GaussianMixturePair(sigma, q, sensitivity, direction)`` and
    ``LaplacePair(scale, sensitivity, direction)`` from :mod:`dputils.mechanisms`.
    """
    name = type(pair).__name__
    if name == "GaussianMixturePair":
        return ("gm", float(pair.sigma), float(pair.q), float(pair.sensitivity), str(pair.direction))
    if name == "LaplacePair":
        # the Laplace PLRV is the same in both directions
        return ("laplace", float(pair.scale), float(pair.sensitivity))
    raise DPValueError(
        f"pair must be a GaussianMixturePair or LaplacePair from dputils.mechanisms, got {type(pair).__name__}"
    )


def loss_sup(pair: Any) -> float:
    """The essential supremum of the privacy loss L under P (``inf`` if unbounded)."""
    key = pair_key(pair)
    if key[0] == "gm":
        _, sigma, q, d, direction = key
        if q == 1.0 or direction == "remove":
            return math.inf
        return -math.log1p(-q)
    _, b, d = key
    return d / b


def _check_t(t: Any) -> float:
    x = check_finite("t", t)
    if abs(x) > 1e6:
        raise DPValueError(f"t must satisfy |t| <= 1e6 (the range where the CGF is evaluated), got {x!r}")
    return x


# ------------------------------------------------------------------------------------------------
# weighted-point representations of L under P
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Points:
    """Law of L under P as weighted points: ``values`` L_i and normalised ``log_weights`` (sum exp = 1)."""

    values: np.ndarray
    log_weights: np.ndarray


def _gm_loss(x: np.ndarray, sigma: float, q: float, d: float) -> np.ndarray:
    """log r(x), r = 1 - q + q exp((2 x d - d^2)/(2 sigma^2)), with full relative accuracy."""
    s = (2.0 * x * d - d * d) / (2.0 * sigma * sigma)
    with np.errstate(over="ignore"):
        small = np.log1p(q * np.expm1(np.minimum(s, 30.0)))
    big = np.logaddexp(math.log1p(-q), math.log(q) + s)
    return np.where(s < 30.0, small, big)


def _gm_points(sigma: float, q: float, d: float, direction: str, t: float, refine: float = 1.0) -> Points:
    """Trapezoid grid in x covering the untilted and the t-tilted mass of the subsampled Gaussian."""
    sign = 1.0 if direction == "remove" else -1.0
    # log-weights under P of a point x: log phi(x) + (remove: log r(x); add: 0)
    a_eff = (t + 1.0) if direction == "remove" else -t  # tilted weight ~ phi(x) r(x)^a_eff
    lo = min(0.0, a_eff * d) - 60.0 * sigma - 10.0 * d
    hi = max(0.0, a_eff * d) + d + 60.0 * sigma + 10.0 * d
    xc = np.linspace(lo, hi, 801)
    lphi_c = -0.5 * (xc / sigma) ** 2
    ell_c = _gm_loss(xc, sigma, q, d)
    keep = np.zeros(xc.shape, dtype=bool)
    for a in ((1.0 if direction == "remove" else 0.0), a_eff):
        lw = lphi_c + a * ell_c
        keep |= lw > lw.max() + _LOG_TINY
    idx = np.nonzero(keep)[0]
    step_c = xc[1] - xc[0]
    x0 = xc[idx[0]] - 3 * step_c
    x1 = xc[idx[-1]] + 3 * step_c
    h = min(sigma, sigma * sigma / d) / (12.0 * refine)
    m = int(math.ceil((x1 - x0) / h)) + 1
    if m > 2_000_000:
        raise NumericalError(f"CGF grid too large ({m} points) at t={t!r}; the tilt is out of the usable range")
    x = np.linspace(x0, x1, m)
    ell = _gm_loss(x, sigma, q, d)
    lw = -0.5 * (x / sigma) ** 2 + (ell if direction == "remove" else 0.0)
    lw = lw - logsumexp(lw)
    return Points(sign * ell, lw)


def _laplace_points(b: float, d: float, t: float) -> Points:
    """Atoms at +-s and Gauss-Legendre nodes for the density (1/4) e^{(l-s)/2} on (-s, s)."""
    s = d / b
    c = abs(t + 0.5) * s
    nodes_n = int(min(4000, 64 + 3 * c))
    u, w = np.polynomial.legendre.leggauss(nodes_n)
    vals = s * u
    lw_dens = np.log(w * s) + math.log(0.25) + 0.5 * (vals - s)
    values = np.concatenate([[s, -s], vals])
    lw = np.concatenate([[math.log(0.5), -s - math.log(2.0)], lw_dens])
    lw = lw - logsumexp(lw)
    return Points(values, lw)


def tilted_points(pair: Any, t: float, refine: float = 1.0) -> Points:
    """The law of L under P as weighted points, accurate both untilted and tilted by ``t``.

    ``refine`` > 1 shrinks the grid step (used by the truth evaluator, whose integrand oscillates).
    Not available for the plain Gaussian (closed form everywhere).
    """
    key = pair_key(pair)
    if key[0] == "gm":
        _, sigma, q, d, direction = key
        if q == 1.0:
            raise DPValueError("tilted_points: the Gaussian pair (q = 1) is handled in closed form")
        return _gm_points(sigma, q, d, direction, t, refine)
    _, b, d = key
    return _laplace_points(b, d, t)


# ------------------------------------------------------------------------------------------------
# core evaluation (cached)
# ------------------------------------------------------------------------------------------------
def _moments_to_cumulants(mean: float, central: Sequence[float], order: int) -> list[float]:
    """Cumulants kappa_1..kappa_order from the mean and central moments mu_2..mu_order.

    Uses the recursion kappa_n = mu_n - sum_{m=2}^{n-2} C(n-1, m-1) kappa_m mu_{n-m} on central
    moments (mu_1 = 0, so terms with mu_1 vanish).
    """
    mu = {0: 1.0, 1: 0.0}
    for k in range(2, order + 1):
        mu[k] = central[k - 2]
    kap = {1: 0.0}
    for k in range(2, order + 1):
        s = mu[k]
        for m in range(2, k - 1):
            s -= comb(k - 1, m - 1, exact=True) * kap[m] * mu[k - m]
        kap[k] = s
    kap[1] = mean
    return [kap[k] for k in range(1, order + 1)]


def _points_eval(pts: Points, t: float, order: int) -> tuple[np.ndarray, float]:
    """[K(t), K'(t), ..., K^(order)(t)] and the tilted E|L_t - K'(t)|^3 from weighted points."""
    L = pts.values
    lw = pts.log_weights
    z = lw + t * L
    lse = logsumexp(z)
    K = float(lse)
    if abs(K) < 0.5:
        # K = log1p(sum_i pi_i expm1(t L_i)), exact in relative terms for small K
        tl = t * L
        with np.errstate(over="ignore"):
            terms = np.where(tl > 700.0, np.exp(np.minimum(z, 700.0)), np.exp(lw) * np.expm1(np.minimum(tl, 700.0)))
        K = float(np.log1p(np.sum(terms)))
    pi = np.exp(z - lse)
    pi = pi / pi.sum()
    mean = float(np.dot(pi, L))
    c = L - mean
    # refine the mean once (removes the rounding of the first pass)
    corr = float(np.dot(pi, c))
    mean += corr
    c = c - corr
    central = []
    ck = c * c
    for k in range(2, max(order, 3) + 1):
        central.append(float(np.dot(pi, ck)))
        ck = ck * c
    abs3 = float(np.dot(pi, np.abs(c) ** 3))
    kap = _moments_to_cumulants(mean, central, max(order, 1))
    out = np.array([K] + kap[:order], dtype=float)
    if not np.all(np.isfinite(out)) or not math.isfinite(abs3):
        raise NumericalError(f"CGF derivatives are not finite at t={t!r}")
    return out, abs3


def _gaussian_eval(sigma: float, d: float, t: float, order: int) -> tuple[np.ndarray, float]:
    eta = d * d / (2.0 * sigma * sigma)
    vals = [eta * t * (1.0 + t), eta * (1.0 + 2.0 * t), 2.0 * eta] + [0.0] * max(0, order - 2)
    # E|Z|^3 for Z ~ N(0, 2 eta): (2 eta)^{3/2} 2 sqrt(2/pi)
    abs3 = (2.0 * eta) ** 1.5 * 2.0 * math.sqrt(2.0 / math.pi)
    return np.array(vals[: order + 1], dtype=float), abs3


@lru_cache(maxsize=65536)
def _eval_cached(key: tuple, t: float, order: int) -> tuple[tuple[float, ...], float]:
    if key[0] == "gm":
        _, sigma, q, d, direction = key
        if q == 1.0:
            out, abs3 = _gaussian_eval(sigma, d, t, order)
        else:
            out, abs3 = _points_eval(_gm_points(sigma, q, d, direction, t), t, order)
    else:
        _, b, d = key
        out, abs3 = _points_eval(_laplace_points(b, d, t), t, order)
    return tuple(float(v) for v in out), abs3


def _eval(pair: Any, t: float, order: int) -> tuple[np.ndarray, float]:
    key = pair_key(pair)
    # one cache entry per order level: compute at least order 4 so that the common calls share it
    o = max(4, order)
    vals, abs3 = _eval_cached(key, float(t), o)
    return np.array(vals[: order + 1]), abs3


# ------------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------------
def cgf(pair: Any, t: Any):
    """K(t) = log E_P[exp(t L)] of the privacy loss of ``pair``, vectorized over real ``t``.

    Finite for every real t for the supported pairs (the loss of the subsampled Gaussian is bounded
    on one side and Gaussian-tailed on the other; the Laplace loss is bounded). ``t`` must be finite
    with |t| <= 1e6, otherwise :class:`~dputils.errors.DPValueError`.
    """
    pair_key(pair)
    arr = np.asarray(t, dtype=float)
    flat = [float(_eval(pair, _check_t(v), 0)[0][0]) for v in arr.ravel()]
    out = np.array(flat, dtype=float).reshape(arr.shape)
    return float(out) if arr.ndim == 0 else out


def cgf_derivatives(pair: Any, t: float, order: int = 4) -> np.ndarray:
    """``[K(t), K'(t), ..., K^(order)(t)]`` at one real ``t`` (``order`` from 0 to 8).

    The derivatives are the cumulants of the tilted loss L_t (eq. 31 of {cite}`alghamdi_spa`),
    computed from tilted central moments; accuracy about 1e-10 relative where the value is not tiny.
    """
    t = _check_t(t)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 0 <= order <= MAX_ORDER:
        raise DPValueError(f"order must be an integer in [0, {MAX_ORDER}], got {order!r}")
    return _eval(pair, t, int(order))[0]


def cumulants(pair: Any, order: int = 6) -> np.ndarray:
    """``[kappa_1, ..., kappa_order]`` of L under P (the derivatives of K at t = 0)."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= MAX_ORDER:
        raise DPValueError(f"order must be an integer in [1, {MAX_ORDER}], got {order!r}")
    return cgf_derivatives(pair, 0.0, int(order))[1:]


def tilted_abs_third_moment(pair: Any, t: float) -> float:
    """E|L_t - K'(t)|^3: the absolute third central moment of the tilted loss (eq. 73 of the paper).

    For the grid-based pairs the kink of |x|^3 limits the trapezoid rule to about 1e-8 relative accuracy.
    """
    t = _check_t(t)
    return float(_eval(pair, t, 4)[1])


def _ledger_items(ledger: Iterable) -> list[tuple[Any, int]]:
    items = []
    for entry in ledger:
        try:
            pair, count = entry
        except (TypeError, ValueError):
            raise DPValueError("ledger must be a sequence of (pair, count) tuples") from None
        items.append((pair, check_positive_int("count", count)))
    if not items:
        raise DPValueError("ledger must contain at least one (pair, count) entry")
    return items


def composed_cgf(ledger: Iterable, t: Any):
    """CGF of the sum of independent losses: sum over ``(pair, count)`` of ``count * K_pair(t)``."""
    items = _ledger_items(ledger)
    total = None
    for pair, count in items:
        v = count * np.asarray(cgf(pair, t), dtype=float)
        total = v if total is None else total + v
    return float(total) if np.ndim(total) == 0 else total


def composed_cgf_derivatives(ledger: Iterable, t: float, order: int = 4) -> tuple[np.ndarray, float]:
    """``([K, K', ..., K^(order)], P_t)`` of the composition: counts times per-pair values.

    ``P_t`` is the sum of the tilted absolute third central moments of the summands (the quantity of
    eq. 73, used by the Berry-Esseen bound of Theorem 5).
    """
    items = _ledger_items(ledger)
    t = _check_t(t)
    total = np.zeros(order + 1)
    p3 = 0.0
    for pair, count in items:
        vals, a3 = _eval(pair, t, order)
        total = total + count * vals
        p3 += count * a3
    return total, p3


def subsampled_gaussian_cgf_binomial(sigma: float, q: float, alpha: int, sensitivity: float = 1.0) -> float:
    r"""Exact CGF value at an integer order for the subsampled Gaussian (independent cross-check).

    .. math:: \log \sum_{i=0}^{\alpha} \binom{\alpha}{i} q^i (1-q)^{\alpha-i} e^{(i^2 - i)\Delta^2/(2\sigma^2)}
              = \log E_{N(0,\sigma^2)}[r(X)^\alpha]

    for integer :math:`\alpha \ge 1` (binomial expansion of :math:`r^\alpha`, Mironov et al. 2019). This is
    :math:`K(\alpha - 1)` for the "remove" pair and :math:`K(-\alpha)` for the "add" pair.
    """
    alpha = check_positive_int("alpha", alpha)
    if not 0 < q < 1:
        raise DPValueError(f"q must be in (0, 1) for the binomial CGF, got {q!r}")
    eta = sensitivity * sensitivity / (2.0 * sigma * sigma)
    i = np.arange(alpha + 1, dtype=float)
    logc = np.array([math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1) for k in range(alpha + 1)])
    terms = logc + i * math.log(q) + (alpha - i) * math.log1p(-q) + (i * i - i) * eta
    return float(logsumexp(terms))
