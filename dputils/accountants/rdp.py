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
* Poisson-subsampled Laplace, :math:`s = \Delta/b`, :math:`A = \mathrm{Lap}(0, b)`,
  :math:`t(x) = (|x| - |x - \Delta|)/b \in [-s, s]` (so the likelihood ratio of the mixture to A is
  :math:`1 - q + q e^{t}`); integer orders, the worse of the two directions:

  - remove, :math:`D_\alpha(\text{mix}\,\|\,A) = \frac{1}{\alpha-1}\log\mathbb{E}_A[(1-q+qe^{t})^\alpha]` exactly by
    the binomial expansion :math:`\sum_k \binom{\alpha}{k}(1-q)^{\alpha-k}q^k M_k` with
    :math:`M_k = \mathbb{E}_A[e^{kt}] = \tfrac12 e^{-ks}\,\frac{2k-2+e^{(2k-1)s}}{2k-1} + \tfrac12 e^{(k-1)s}`
    (:math:`M_0 = 1`; the atoms :math:`x \le 0`, :math:`x \ge \Delta` and the integral over :math:`(0, \Delta)`),
    written as 1 plus the excess :math:`\sum_{k\ge2}\binom{\alpha}{k}(1-q)^{\alpha-k}q^k(M_k - 1)`, every
    term nonnegative as :math:`M_k \ge M_1^k = 1`, so small q keeps its relative accuracy;
  - add, :math:`D_\alpha(A\,\|\,\text{mix}) = \frac{1}{\alpha-1}\log\mathbb{E}_A[(1-q+qe^{t})^{-(\alpha-1)}]`: as
    :math:`\mathbb{E}_A[e^t] = 1`, the moment is :math:`1 + \mathbb{E}_A[\psi(t)]` with
    :math:`\psi(u) = (1-q+qe^{u})^{-(\alpha-1)} - 1 + (\alpha-1)q(e^u - 1) \ge 0` (convexity), decreasing on
    :math:`[-s, 0]` and increasing on :math:`[0, s]`; t has the atoms :math:`-s`, :math:`s` with A-masses 1/2 and
    :math:`e^{-s}/2` and the decreasing density :math:`w(u) = \tfrac14 e^{-(u+s)/2}` between, so on :math:`2^{14}`
    panels :math:`\int\psi w` is bounded above by :math:`\psi(u_i)w(u_i)` on :math:`[-s, 0]` and
    :math:`\psi(u_{i+1})w(u_i)` on :math:`[0, s]` (every term nonnegative: small q keeps its relative accuracy),
    plus a bound of the rounding of :math:`\psi`; where :math:`(\alpha-1)|g(-s)|` or s exceeds 600 the moment itself is
    bounded by the left Riemann sum of its decreasing integrand, in log space;

  the excesses carry a relative margin of 1e-9 and the moments an absolute one of 1e-13 for their rounding.
  Fractional orders take the value at :math:`\lceil\alpha\rceil` (the Rényi divergence is nondecreasing in
  the order), so they are valid but not tight. The largest order used is the orders' grid's (1024 by default).

Conversion to (epsilon, delta), the choice matters and is explicit:

* ``"modern"`` (default; Balle et al. 2020, Thm 21, also Canonne, Kamath, Steinke 2020):
  :math:`\varepsilon = r_\alpha + \log(1 - 1/\alpha) - \frac{\log\delta + \log\alpha}{\alpha - 1}`.
* ``"classic"`` (Mironov 2017, Prop. 3; what produced the TF-Privacy tutorial's 1.19 / 3.01 / 7.10):
  :math:`\varepsilon = r_\alpha + \frac{\log(1/\delta)}{\alpha - 1}`.

The result is minimised over the grid of orders and then, by default, over a continuous order between
the best grid order's neighbours (every order gives a valid bound, so this only tightens it; at T = 1e6
or 1e7 the best order lies between grid points near 1, where a fixed grid loses 1-6%). It is an upper
bound (``kind="upper-bound"``, no lower bound). Pass ``refine=False`` to reproduce a fixed-grid number.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np
from scipy import integrate, optimize, special

from ..errors import DPValueError, NumericalError, check_choice, check_delta, check_epsilon, check_finite
from ..mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    SubsampledGaussianMechanism,
    SubsampledLaplaceMechanism,
)
from .base import Accountant, AccountingResult
from .registry import COMMON_EVENTS, register

#: Default orders: fractional ones down to 1.01 (long compositions want orders near 1), the integers
#: 2..64 and a few large ones. With ``refine=True`` (the default) they are only the starting grid.
DEFAULT_ORDERS = tuple(
    [1.01, 1.02, 1.05, 1.1, 1.25, 1.5, 1.75] + list(range(2, 65)) + [80, 96, 128, 160, 192, 256, 512, 1024]
)
#: Integer orders only, as in the dp_accounting comparisons.
INTEGER_ORDERS = tuple(range(2, 257))


@lru_cache(maxsize=65536)
def _log_a_int(q: float, sigma: float, alpha: int) -> float:
    """log A_alpha for integer alpha by the binomial expansion (log-sum-exp)."""
    k = np.arange(alpha + 1, dtype=float)
    log_binom = special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
    log1mq = math.log1p(-q) if q < 1 else -math.inf
    with np.errstate(invalid="ignore"):
        terms = log_binom + (alpha - k) * log1mq + k * math.log(q) + (k * k - k) / (2 * sigma**2)
    if q == 1.0:
        terms = np.where(k == alpha, (alpha * alpha - alpha) / (2 * sigma**2), -np.inf)
    top = float(np.max(terms))  # log-sum-exp inline: scipy's costs ~0.3 ms of overhead a call
    return top + math.log(float(np.sum(np.exp(terms - top))))


def _log_a_frac_logspace(q: float, sigma: float, alpha: float) -> float:
    r"""log A_alpha for fractional alpha > 1: the trapezoid rule on a uniform grid, checked against half the grid.

    The integrand :math:`\varphi_\sigma(x)(1 - q + q e^{(2x-1)/(2\sigma^2)})^\alpha` is analytic and decays
    like a Gaussian, so the trapezoid rule converges geometrically in 1/h; the grid spans
    ``[-12 sigma, alpha + 12 max(sigma, 1)]`` (beyond it the integrand is below e^-72 of its peak) with step
    ``h = sigma / 16``. The value is accepted when the rule on every other node agrees to 1e-13 relative
    (its error is then far below that); otherwise adaptive quadrature (scipy ``quad``, split at the peak)
    is used. Vectorised: a fraction of a millisecond per order where ``quad`` takes tens.
    """
    log1mq = math.log1p(-q)
    logq = math.log(q)
    log_norm = 0.5 * math.log(2 * math.pi * sigma**2)

    def log_f_vec(x: np.ndarray) -> np.ndarray:
        t = (2 * x - 1) / (2 * sigma**2)
        with np.errstate(under="ignore"):  # exp underflow inside logaddexp is harmless
            return alpha * np.logaddexp(log1mq, logq + t) - 0.5 * (x / sigma) ** 2 - log_norm

    lo, hi = -12.0 * sigma, (alpha + 12.0) * max(sigma, 1.0)
    n = int(math.ceil((hi - lo) / (sigma / 16.0)))
    if n <= 200_000:
        n += n % 2  # an even number of intervals, so that every other node is the 2h rule
        xs = np.linspace(lo, hi, n + 1)
        vals = log_f_vec(xs)
        peak = float(vals.max())
        with np.errstate(under="ignore"):
            w = np.exp(vals - peak)
        h = (hi - lo) / n
        fine = h * (w.sum() - 0.5 * (w[0] + w[-1]))
        coarse = 2 * h * (w[::2].sum() - 0.5 * (w[0] + w[-1]))
        if fine > 0 and abs(fine - coarse) <= 1e-13 * fine:
            return peak + math.log(fine)

    def log_f(x: float) -> float:
        t = (2 * x - 1) / (2 * sigma**2)
        return alpha * float(np.logaddexp(log1mq, logq + t)) - 0.5 * (x / sigma) ** 2 - log_norm

    xs = np.linspace(lo, hi, 4001)
    vals = log_f_vec(xs)
    peak = float(vals.max())
    x0 = float(xs[int(vals.argmax())])
    total = 0.0
    for a, b in ((lo, x0), (x0, hi)):
        v, _ = integrate.quad(lambda x: math.exp(log_f(x) - peak), a, b, limit=200, epsabs=0, epsrel=1e-12)
        total += v
    return peak + math.log(total)


def _binomial_excess(u: np.ndarray, alpha: float) -> np.ndarray:
    """``(1 + u)^alpha - 1 - alpha u`` elementwise for ``u > -1``, without cancellation (>= 0 for alpha > 1).

    Direct formula where ``|u| >= 0.01``; the binomial series to the 9th power below (relative error < 1e-15).
    """
    u = np.asarray(u, dtype=float)
    small = np.abs(u) < 0.01
    with np.errstate(over="ignore", invalid="ignore"):
        direct = np.expm1(alpha * np.log1p(u)) - alpha * u
    us = np.where(small, u, 0.0)
    series = np.zeros_like(us)
    coef = alpha
    power = us.copy()
    for k in range(2, 10):
        coef *= (alpha - k + 1) / k
        power = power * us
        series += coef * power
    return np.where(small, series, direct)


def _log_a_frac(q: float, sigma: float, alpha: float) -> float:
    r"""log A_alpha for fractional alpha > 1, to full relative precision also when it is tiny.

    Where ``log A >= 1e-3`` the log-space rule (:func:`_log_a_frac_logspace`) is used. Below, ``log A`` is
    ``log1p(A - 1)`` with :math:`A - 1 = \mathbb{E}[r^\alpha - 1 - \alpha(r - 1)]`, ``r = 1 - q + q e^{(2x-1)/(2\sigma^2)}``
    and :math:`x \sim N(0, \sigma^2)` (the linear term has mean zero as :math:`\mathbb{E} r = 1`): the integrand is
    non-negative (convexity of :math:`r^\alpha`), so nothing cancels, whereas ``log(A)`` formed from ``A`` keeps
    only ~1e-16 absolute precision (relative 1e-3 at ``log A ~ 1e-13``). Trapezoid rule with the half-grid
    check as in the log-space rule, adaptive quadrature as the fallback.
    """
    la = _log_a_frac_logspace(q, sigma, alpha)
    if la >= 1e-3:
        return la
    log_norm = 0.5 * math.log(2 * math.pi * sigma**2)

    log1mq, logq = math.log1p(-q), math.log(q)

    def integrand(x):
        # w(x) [(1 + u)^alpha - 1 - alpha u] with u = q (e^t - 1), t = (2x - 1)/(2 sigma^2). Where |u| < 0.01
        # the binomial series; elsewhere each term is formed with the Gaussian weight inside the exponential
        # (w (1 + u)^alpha = exp(lw + alpha log(1 + u)), w u = q (e^(t + lw) - w)), so that a large t (small
        # sigma: e^t overflows) meets the weight's e^(-x^2 / (2 sigma^2)) before it is exponentiated.
        x = np.asarray(x, dtype=float)
        t = (2 * x - 1) / (2 * sigma**2)
        lw = -0.5 * (x / sigma) ** 2 - log_norm
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # underflow to 0 is harmless here
            w = np.exp(lw)
            u = q * np.expm1(np.minimum(t, 700.0))
            small = np.abs(u) < 0.01
            series = w * _binomial_excess(np.where(small, u, 0.0), alpha)
            log1pu = np.logaddexp(log1mq, logq + t)
            wu = q * (np.exp(t + lw) - w)
            direct = np.exp(lw + alpha * log1pu) - w - alpha * wu
        return np.where(small, series, direct)

    lo, hi = -12.0 * sigma, (alpha + 12.0) * max(sigma, 1.0)
    n = int(math.ceil((hi - lo) / (sigma / 16.0)))
    if n <= 200_000:
        n += n % 2
        xs = np.linspace(lo, hi, n + 1)
        w = integrand(xs)
        h = (hi - lo) / n
        fine = h * (w.sum() - 0.5 * (w[0] + w[-1]))
        coarse = 2 * h * (w[::2].sum() - 0.5 * (w[0] + w[-1]))
        if np.all(np.isfinite(w)) and fine > 0 and abs(fine - coarse) <= 1e-12 * fine:
            return math.log1p(fine)
    total, _ = integrate.quad(
        lambda x: float(integrand(x)), lo, hi, points=[0.0, 0.5, alpha], limit=400, epsabs=0, epsrel=1e-12
    )
    return math.log1p(total)


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


#: relative margin on the computed excess (moment - 1) of the subsampled Laplace, and an absolute one on the
#: moment: they cover the float rounding of the sums (at most ~1e-12 relative) and of log M_k
_SLAP_REL_MARGIN = 1e-9
_SLAP_ABS_MARGIN = 1e-13
#: panels of the Riemann sums of the add-direction moment (half on each side of u = 0)
_SLAP_PANELS = 1 << 14


def _slap_g(q: float, u: np.ndarray) -> np.ndarray:
    """g(u) = log(1 - q + q e^u), the subsampled Laplace's remove-direction loss at t = u."""
    u = np.asarray(u, dtype=float)
    if q == 1.0:
        return u
    with np.errstate(over="ignore"):
        small = np.log1p(q * np.expm1(np.minimum(u, 30.0)))
    return np.where(u < 30.0, small, np.logaddexp(math.log1p(-q), math.log(q) + u))


def _slap_log_moment(log_excess: float) -> float:
    """log(1 + excess) from log(excess), with the margins added."""
    return float(np.logaddexp(0.0, np.logaddexp(log_excess + _SLAP_REL_MARGIN, math.log(_SLAP_ABS_MARGIN))))


@lru_cache(maxsize=65536)
def _slap_log_moment_remove(q: float, s: float, alpha: int) -> float:
    """An upper bound of log E_A[(1 - q + q e^t)^alpha]: the binomial expansion of the excess over 1, every
    term nonnegative (see the module docstring)."""
    k = np.arange(2, alpha + 1, dtype=float)
    if k.size == 0:
        return _slap_log_moment(-math.inf)
    log_binom = special.gammaln(alpha + 1) - special.gammaln(k + 1) - special.gammaln(alpha - k + 1)
    log_mid = np.logaddexp(np.log(2 * k - 2), (2 * k - 1) * s) - np.log(2 * k - 1)
    log_m = np.logaddexp(-k * s + log_mid, (k - 1) * s) - math.log(2.0)  # log M_k >= 0 (Jensen)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_m1 = log_m + np.log(-np.expm1(-np.maximum(log_m, 0.0)))  # log(M_k - 1)
        log1mq = math.log1p(-q) if q < 1 else -math.inf
        terms = log_binom + (alpha - k) * log1mq + k * math.log(q) + log_m1
    if q == 1.0:
        terms = np.where(k == alpha, log_m1, -np.inf)
    return _slap_log_moment(float(special.logsumexp(terms)))


@lru_cache(maxsize=65536)
def _slap_log_moment_add(q: float, s: float, alpha: int) -> float:
    """An upper bound of log E_A[(1 - q + q e^t)^{-(alpha-1)}] (see the module docstring)."""
    m = alpha - 1
    n = _SLAP_PANELS // 2
    width = s / n
    g_lo, g_hi = float(_slap_g(q, -s)), float(_slap_g(q, s))
    if m * abs(g_lo) <= 600.0 and s <= 600.0:  # psi and its parts stay finite
        # the excess over 1 is E_A[psi(t)], psi(u) = (1-q+qe^u)^{-m} - 1 + m q (e^u - 1) >= 0 (E_A[e^t] = 1),
        # decreasing on [-s, 0] and increasing on [0, s]; t has atoms 1/2 at -s and e^{-s}/2 at s and the
        # density w(u) = e^{-(u+s)/2}/4 between, w decreasing
        def psi(u):
            phi = np.expm1(-m * _slap_g(q, u))
            lin = m * q * np.expm1(u)
            return phi + lin, np.abs(phi), np.abs(lin)

        def w(u):
            return 0.25 * np.exp(-0.5 * (u + s))

        ends = np.array([-s, s])
        neg = -s + width * np.arange(n)  # panels of [-s, 0]: psi(u_i) w(u_i) bounds psi w
        pos = width * np.arange(1, n + 1)  # panels of [0, s]: psi(u_{i+1}) w(u_i) bounds psi w
        (p_e, a_e, l_e), (p_n, a_n, l_n), (p_p, a_p, l_p) = psi(ends), psi(neg), psi(pos)
        weights = np.concatenate([[0.5, 0.5 * math.exp(-s)], width * w(neg), width * w(pos - width)])
        vals = np.concatenate([p_e, p_n, p_p])
        # rounding: phi = expm1(-m g) is accurate to 4u(1 + m|g|) of |phi|, the linear part to 4u
        growth = 4.0 * (1.0 + m * max(abs(g_lo), abs(g_hi)))
        mags = growth * np.concatenate([a_e, a_n, a_p]) + 4.0 * np.concatenate([l_e, l_n, l_p])
        excess = math.fsum(weights * np.maximum(vals, 0.0))
        err = float(np.sum(weights * mags)) * 2.0**-53 * 2.0
        return math.log1p(excess * (1.0 + _SLAP_REL_MARGIN) + err + _SLAP_ABS_MARGIN)
    # large orders: the moment itself, in log space; the integrand decreases, so its left sum bounds it
    w2 = 2.0 * s / _SLAP_PANELS
    u = -s + w2 * np.arange(_SLAP_PANELS)
    atoms = [-math.log(2.0) - m * g_lo, -math.log(2.0) - s - m * g_hi]
    mid = math.log(w2 / 4.0) + float(special.logsumexp(-m * _slap_g(q, u) - 0.5 * (u + s)))
    return float(special.logsumexp(atoms + [mid])) + _SLAP_REL_MARGIN


@lru_cache(maxsize=4096)
def subsampled_laplace_rdp(q: float, b: float, alpha: float) -> float:
    """An upper bound of the RDP of order alpha (> 1) of the Poisson-subsampled Laplace mechanism (scale b in
    units of the sensitivity), the worse of the add and remove directions; fractional orders use
    ceil(alpha) (the Renyi divergence is nondecreasing in its order)."""
    a = math.ceil(alpha)
    s = 1.0 / b
    log_m = max(_slap_log_moment_remove(q, s, a), _slap_log_moment_add(q, s, a))
    if math.isnan(log_m):  # pragma: no cover - every branch above keeps its terms finite
        raise NumericalError(f"rdp: the RDP of the subsampled Laplace (q {q}, scale {b}) at order {a} is not finite")
    return max(log_m, 0.0) / (a - 1)


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
    if isinstance(mech, SubsampledLaplaceMechanism):
        return subsampled_laplace_rdp(mech.q, mech.scale / mech.sensitivity, float(alpha))
    raise DPValueError(f"rdp: unsupported mechanism {type(mech).__name__}")


def _conversion_inputs(orders, rdp, conversion: str) -> tuple[np.ndarray, np.ndarray]:
    """Orders (>= 1, infinity allowed) and RDP values as matching 1-d float arrays; the conversion checked."""
    check_choice("conversion", conversion, ("modern", "classic"))
    a = np.atleast_1d(np.asarray(orders, dtype=float))
    r = np.atleast_1d(np.asarray(rdp, dtype=float))
    if a.ndim != 1 or a.size == 0 or not np.all(a >= 1):
        raise DPValueError(f"orders must be a non-empty sequence of numbers >= 1, got {orders!r}")
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
    mid = (a > 1) & np.isfinite(a)
    am = np.where(mid, a, 2.0)
    with np.errstate(invalid="ignore"):
        if conversion == "modern":
            eps = r + np.log1p(-1.0 / am) - (math.log(delta) + np.log(am)) / (am - 1)
        else:
            eps = r + math.log(1.0 / delta) / (am - 1)
    # order infinity: the pure-DP epsilon r_inf (the limit of both conversions); order 1 (KL): no bound
    eps = np.where(np.isinf(a), r, np.where(a == 1, math.inf, eps))
    if not np.any(np.isfinite(eps)) and not np.any(mid):  # only orders 1 / infinity: no bound is the answer
        return math.inf, float(a[0])
    if not np.any(np.isfinite(eps)):
        raise NumericalError(
            "rdp: the composed RDP overflowed at every order (noise too small for these orders); "
            "epsilon cannot be computed"
        )
    i = int(np.nanargmin(eps))
    return max(float(eps[i]), 0.0), float(a[i])


def rdp_to_delta(orders, rdp, epsilon: float, conversion: str = "modern") -> tuple[float, float]:
    """See :func:`_rdp_to_delta`: ``(delta, order)``."""
    d, a, _ = _rdp_to_delta(orders, rdp, epsilon, conversion)
    return d, a


def _rdp_to_delta(orders, rdp, epsilon: float, conversion: str = "modern") -> tuple[float, float, float]:
    r"""Smallest delta over the orders (the inverse of :func:`rdp_to_epsilon` per order), capped at 1.

    ``"modern"``: :math:`\delta = \exp((\alpha-1)(r_\alpha - \varepsilon + \log(1 - 1/\alpha)))/\alpha`,
    which is Theorem 3.1 (Eq. 4) of Schuchardt & Kalinin,
    :math:`e^{(\alpha-1)(r_\alpha-\varepsilon)}(1-1/\alpha)^\alpha/(\alpha-1)`, rewritten;
    ``"classic"``: :math:`\delta = \exp((\alpha-1)(r_\alpha - \varepsilon))`. Returns ``(delta, order, log delta
    before the cap at 1)``; the uncapped log delta lets the order refinement see a slope where every grid
    order gives delta >= 1.
    """
    epsilon = check_epsilon(epsilon)
    a, r = _conversion_inputs(orders, rdp, conversion)
    mid = (a > 1) & np.isfinite(a)
    am = np.where(mid, a, 2.0)
    with np.errstate(invalid="ignore"):
        if conversion == "modern":
            logd = (am - 1) * (r - epsilon + np.log1p(-1.0 / am)) - np.log(am)
        else:
            logd = (am - 1) * (r - epsilon)
    # order infinity: delta 0 once epsilon reaches the pure-DP epsilon r_inf, else no bound; order 1: none
    logd = np.where(np.isinf(a), np.where(r <= epsilon, -math.inf, 0.0), np.where(a == 1, 0.0, logd))
    if np.all(np.isnan(logd)):
        raise NumericalError("rdp: the composed RDP is undefined at every order; delta cannot be computed")
    i = int(np.nanargmin(logd))
    return min(1.0, math.exp(min(float(logd[i]), 0.0))), float(a[i]), float(logd[i])


@register(
    "rdp",
    label="RDP",
    answer="upper-bound",
    events=COMMON_EVENTS,
    cost="cheap",
    rank=20,
    color="#d62728",
    options={"conversion": "modern"},
    help="Renyi DP, modern conversion (Balle et al. 2020), upper bound",
)
@register(
    "rdp-classic",
    label="RDP classic",
    answer="upper-bound",
    events=COMMON_EVENTS,
    cost="cheap",
    rank=21,
    variant_of="rdp",
    options={"conversion": "classic"},
    help="Renyi DP, classic conversion (Mironov 2017), upper bound",
)
class RDPAccountant(Accountant):
    """Rényi-DP accountant. Upper bounds only; the conversion is ``"modern"`` or ``"classic"``.

    Args:
        orders: the orders of the grid (>= 1). Order 1 (the KL divergence) converts to no (epsilon, delta)
            bound with delta < 1, so it is kept with the trivial RDP value infinity; order ``math.inf`` is
            pure DP, the largest privacy loss (1/b per Laplace mechanism, infinite for a Gaussian), which
            converts to epsilon = r_inf at every delta.
        conversion: ``"modern"`` (Balle et al. 2020, Thm 21) or ``"classic"`` (Mironov 2017, Prop. 3).
        refine: (default True) after the grid, minimise the converted epsilon (or log delta) over a continuous order
            between the best grid order's neighbours (bounded Brent search, :func:`refine_order`). Each
            conversion holds at *every* order > 1, so the refined value is still an upper bound as long as
            the RDP at that order is computed accurately (closed forms; checked quadrature for fractional
            orders of the subsampled Gaussian). Never larger than the grid's answer.
    """

    name = "rdp"

    def __init__(
        self, orders=DEFAULT_ORDERS, conversion: str = "modern", direction: str = "both", refine: bool = True
    ) -> None:
        super().__init__(direction)
        if isinstance(orders, (str, bytes)) or not hasattr(orders, "__iter__"):
            raise DPValueError(f"orders must be a non-empty sequence of numbers >= 1, got {orders!r}")

        def order(o):
            if isinstance(o, (int, float, np.floating, np.integer)) and not isinstance(o, bool) and o == math.inf:
                return math.inf
            return check_finite("orders", o)

        self.orders = tuple(order(o) for o in orders)
        if not self.orders or min(self.orders) < 1:
            raise DPValueError(
                f"orders must be a non-empty sequence of numbers >= 1 (infinity allowed), got {list(orders)!r}"
            )
        self.conversion = check_choice("conversion", conversion, ("modern", "classic"))
        if not isinstance(refine, bool):
            raise DPValueError(f"refine must be True or False, got {refine!r}")
        self.refine = refine

    def _check_supported(self, mechanism) -> None:
        if not isinstance(
            mechanism, (GaussianMechanism, SubsampledGaussianMechanism, LaplaceMechanism, SubsampledLaplaceMechanism)
        ):
            raise DPValueError(f"rdp: unsupported mechanism {type(mechanism).__name__}")

    def rdp_at(self, alpha: float) -> float:
        """The composed RDP at one order ``alpha >= 1`` (1: infinity, the trivial bound; infinity: the
        largest privacy loss, the worse of the two directions)."""
        self._require_ledger()
        if alpha == 1:
            return math.inf
        if alpha == math.inf:
            return max(
                sum(c * max(float(m.pair(d).loss_support[1]), 0.0) for m, c in self.ledger) for d in ("remove", "add")
            )
        return float(sum(c * mechanism_rdp(m, alpha) for m, c in self.ledger))

    def rdp(self) -> np.ndarray:
        """The composed RDP at each order of the grid."""
        self._require_ledger()
        return np.array([self.rdp_at(a) for a in self.orders])

    def _answer(self, quantity: str, target: float) -> AccountingResult:
        if quantity == "epsilon":
            value, order = rdp_to_epsilon(self.orders, self.rdp(), target, self.conversion)

            def objective(a):
                return rdp_to_epsilon((a,), (self.rdp_at(a),), target, self.conversion)[0]

            score = value
        else:
            value, order, score = _rdp_to_delta(self.orders, self.rdp(), target, self.conversion)

            def objective(a):  # log delta before the cap at 1, so that the search sees a slope
                return _rdp_to_delta((a,), (self.rdp_at(a),), target, self.conversion)[2]

        details: dict = {"order": order, "conversion": self.conversion}
        inner = [a for a in self.orders if 1 < a < math.inf]
        if self.refine and 1 < order < math.inf and inner:
            score, order, n = refine_order(objective, inner, order, score)
            value = score if quantity == "epsilon" else min(1.0, math.exp(min(score, 0.0)))
            details.update(order=order, refined=True, refine_evaluations=n)
        name = self.name if self.conversion == "modern" else "rdp-classic"
        return AccountingResult(value, None, value, "upper-bound", name, quantity, details)

    def get_epsilon(self, delta: float) -> AccountingResult:
        return self._answer("epsilon", self._checked_delta(delta))

    def get_delta(self, epsilon: float) -> AccountingResult:
        return self._answer("delta", self._checked_epsilon(epsilon))


def refine_order(
    value_at, orders, best_order: float, best_value: float, xatol: float = 1e-7
) -> tuple[float, float, int]:
    """Minimise ``value_at(alpha)`` over the continuous orders between the grid neighbours of ``best_order``.

    The converted epsilon (or delta) is unimodal in the order near its grid minimum in practice, but
    nothing here relies on it: every evaluated order gives a valid bound, and the smallest value seen
    (never larger than ``best_value``, the grid's) is returned with its order and the number of
    evaluations. Orders above the grid's largest are not tried; below the smallest, the search goes down
    to ``(1 + min) / 2`` (still > 1).
    """
    grid = np.unique(np.asarray(orders, dtype=float))
    i = int(np.searchsorted(grid, best_order))
    lo = grid[i - 1] if i > 0 else 0.5 * (1.0 + grid[0])
    hi = grid[i + 1] if i + 1 < grid.size else grid[-1]
    seen = {float(best_order): float(best_value)}

    def f(a: float) -> float:
        a = float(a)
        if a not in seen:
            try:
                v = float(value_at(a))
            except NumericalError:
                v = math.inf
            seen[a] = v if math.isfinite(v) else math.inf
        return seen[a]

    if hi > lo:
        optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": xatol, "maxiter": 100})
    order = min(seen, key=seen.get)
    return seen[order], order, len(seen) - 1
