r"""Privacy profiles and trade-off curves in closed form, and robust conversions between them.

* :func:`gaussian_delta`: the exact hockey-stick divergence
  :math:`H_{e^\varepsilon}(P\|Q) = \sup_S P(S) - e^\varepsilon Q(S)` of two one-dimensional Gaussians
  :math:`P = N(\mu_P, \sigma_P^2)`, :math:`Q = N(\mu_Q, \sigma_Q^2)`, variances allowed to differ
  (the Gaussian auditor of "Let's Ask Gauss" needs both orders of the pair).
* mu-GDP (Dong, Roth, Su): :math:`\delta_\mu(\varepsilon) = \Phi(-\varepsilon/\mu + \mu/2)
  - e^\varepsilon \Phi(-\varepsilon/\mu - \mu/2)` (their Corollary 2.13), its inverse in epsilon and in mu,
  and the trade-off curve :math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1-\alpha) - \mu)`.
* :func:`epsilon_from_delta`: the inverse of any non-increasing privacy profile, bracketed and bisected,
  conservative (the epsilon returned satisfies ``delta_fn(eps) <= delta``) and loud when no root exists.
* :func:`tradeoff_from_profile`, :func:`profile_from_tradeoff`: the f-DP <-> (eps, delta) duality
  :math:`f(\alpha) = \sup_\varepsilon\, 1 - \delta(\varepsilon) - e^\varepsilon\alpha` and
  :math:`\delta(\varepsilon) = \sup_\alpha\, 1 - f(\alpha) - e^\varepsilon \alpha` (Dong et al., Prop. 2.12).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

from .errors import DPValueError, NumericalError, check_delta, check_finite, check_nonnegative, check_positive
from .numerics import bisect_monotone, log_diff_exp

_LOG_NDTR = special.log_ndtr


_SQRT1_2 = np.sqrt(0.5)


def _log_interval_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Phi(b) - Phi(a)) for a <= b (standard normal), stable in both tails and near zero."""
    out = np.full(np.broadcast(a, b).shape, -np.inf)
    a, b = np.broadcast_arrays(a, b)
    upper = a > 0  # both in the upper tail: use survival functions
    lower = b < 0  # both in the lower tail: use CDFs
    mid = ~(upper | lower)
    with np.errstate(all="ignore"):
        if np.any(upper):
            la, lb = _LOG_NDTR(-a[upper]), _LOG_NDTR(-b[upper])
            out[upper] = la + np.log1p(-np.exp(lb - la))
        if np.any(lower):
            la, lb = _LOG_NDTR(a[lower]), _LOG_NDTR(b[lower])
            out[lower] = lb + np.log1p(-np.exp(la - lb))
        if np.any(mid):
            # a <= 0 <= b: Phi(b) - Phi(a) = (erf(b/sqrt2) + erf(-a/sqrt2)) / 2, a sum of two non-negatives.
            out[mid] = np.log(0.5 * (special.erf(b[mid] * _SQRT1_2) + special.erf(-a[mid] * _SQRT1_2)))
    return out


def gaussian_log_delta_vec(eps, mu_p, s_p, mu_q, s_q) -> np.ndarray:
    """log H_{e^eps}(N(mu_p, s_p^2) || N(mu_q, s_q^2)), ``-inf`` where the divergence is 0.

    Vectorised: all arguments broadcast. ``eps`` may be any real number. ``s_p, s_q`` must be > 0.
    See the module docstring for the maths (privacy-loss region of a quadratic loss).
    """
    eps, mu_p, s_p, mu_q, s_q = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (eps, mu_p, s_p, mu_q, s_q)))
    shape = eps.shape
    eps, mu_p, s_p, mu_q, s_q = (v.ravel() for v in (eps, mu_p, s_p, mu_q, s_q))
    if np.any(~(s_p > 0)) or np.any(~(s_q > 0)):
        raise DPValueError("standard deviations of the Gaussian pair must be > 0")
    with np.errstate(all="ignore"):
        ip, iq = 1.0 / s_p**2, 1.0 / s_q**2
        A = 0.5 * (iq - ip)
        B = mu_p * ip - mu_q * iq
        c = 0.5 * (mu_q**2 * iq - mu_p**2 * ip) + np.log(s_q / s_p) - eps
        # treat A as zero when it is at rounding level relative to the precisions
        a_zero = np.abs(A) <= 1e-13 * (ip + iq)
        disc = B * B - 4.0 * A * c
        sq = np.sqrt(np.where(disc > 0, disc, 0.0))
        sgn = np.where(B >= 0, 1.0, -1.0)
        qq = -0.5 * (B + sgn * sq)
        r1 = np.where(qq != 0, c / qq, 0.0)  # the root that stays finite as A -> 0
        r2 = np.where(A != 0, qq / A, np.inf)
        lo = np.minimum(r1, r2)
        hi = np.maximum(r1, r2)

        log_p = np.full(eps.shape, -np.inf)
        log_q = np.full(eps.shape, -np.inf)
        whole = np.zeros(eps.shape, dtype=bool)

        # A < 0: interval (lo, hi) if disc > 0, else empty
        m_int = (~a_zero) & (A < 0) & (disc > 0)
        if np.any(m_int):
            log_p[m_int] = _log_interval_mass(
                (lo[m_int] - mu_p[m_int]) / s_p[m_int], (hi[m_int] - mu_p[m_int]) / s_p[m_int]
            )
            log_q[m_int] = _log_interval_mass(
                (lo[m_int] - mu_q[m_int]) / s_q[m_int], (hi[m_int] - mu_q[m_int]) / s_q[m_int]
            )
        # A > 0: two tails if disc > 0, else the whole line
        m_two = (~a_zero) & (A > 0) & (disc > 0)
        if np.any(m_two):
            zl_p, zh_p = (lo[m_two] - mu_p[m_two]) / s_p[m_two], (hi[m_two] - mu_p[m_two]) / s_p[m_two]
            zl_q, zh_q = (lo[m_two] - mu_q[m_two]) / s_q[m_two], (hi[m_two] - mu_q[m_two]) / s_q[m_two]
            log_p[m_two] = np.logaddexp(_LOG_NDTR(zl_p), _LOG_NDTR(-zh_p))
            log_q[m_two] = np.logaddexp(_LOG_NDTR(zl_q), _LOG_NDTR(-zh_q))
        whole |= (~a_zero) & (A > 0) & ~(disc > 0)
        # A = 0: half-line {B x + c > 0}
        m_half = a_zero & (B != 0)
        if np.any(m_half):
            x0 = -c[m_half] / B[m_half]
            up = B[m_half] > 0
            zp = (x0 - mu_p[m_half]) / s_p[m_half]
            zq = (x0 - mu_q[m_half]) / s_q[m_half]
            log_p[m_half] = np.where(up, _LOG_NDTR(-zp), _LOG_NDTR(zp))
            log_q[m_half] = np.where(up, _LOG_NDTR(-zq), _LOG_NDTR(zq))
        whole |= a_zero & (B == 0) & (c > 0)
        log_p[whole] = 0.0
        log_q[whole] = 0.0

        t = eps + log_q - log_p
        out = np.where((log_p > -np.inf) & (t < 0), log_p + np.log1p(-np.exp(t)), -np.inf)
    if np.any(np.isnan(out)):
        raise NumericalError("hockey-stick divergence of a Gaussian pair evaluated to NaN")
    return out.reshape(shape)


def gaussian_log_delta(eps, mu_p: float, sigma_p: float, mu_q: float, sigma_q: float):
    r"""log of :func:`gaussian_delta` (``-inf`` where the divergence is 0); scalar pair, any array of eps."""
    mu_p = check_finite("mu_p", mu_p)
    mu_q = check_finite("mu_q", mu_q)
    sp = check_positive("sigma_p", sigma_p)
    sq = check_positive("sigma_q", sigma_q)
    e = np.asarray(eps, dtype=float)
    if np.any(~np.isfinite(e)):
        raise DPValueError("eps must be finite")
    out = gaussian_log_delta_vec(e, mu_p, sp, mu_q, sq)
    return float(out) if e.ndim == 0 else out


def gaussian_delta(eps, mu_p: float, sigma_p: float, mu_q: float, sigma_q: float):
    r"""Exact hockey-stick divergence :math:`H_{e^\varepsilon}(N(\mu_P,\sigma_P^2)\,\|\,N(\mu_Q,\sigma_Q^2))`.

    The log-likelihood ratio is the quadratic :math:`A x^2 + Bx + C` with
    :math:`A = \tfrac{1}{2\sigma_Q^2} - \tfrac{1}{2\sigma_P^2}`; the optimal set
    :math:`S = \{x : Ax^2 + Bx + C > \varepsilon\}` is a half-line (equal variances), the complement of an
    interval (:math:`\sigma_P > \sigma_Q`) or an interval (:math:`\sigma_P < \sigma_Q`), and
    :math:`\delta = P(S) - e^\varepsilon Q(S)` is evaluated in log space. Vectorized over ``eps`` (any real).
    """
    return np.exp(gaussian_log_delta(eps, mu_p, sigma_p, mu_q, sigma_q))


# mu-GDP -----------------------------------------------------------------------------------------
def gdp_log_delta(eps, mu: float):
    """log delta_mu(eps) of mu-GDP, stable for tiny deltas (vectorized over eps)."""
    mu = check_positive("mu", mu)
    e = np.asarray(eps, dtype=float)
    if np.any(np.isnan(e)):
        raise DPValueError("eps must not be NaN")
    with np.errstate(invalid="ignore"):  # eps = -inf: b = -inf + inf; the minimum below keeps a
        a = _LOG_NDTR(-e / mu + mu / 2.0)
        b = e + _LOG_NDTR(-e / mu - mu / 2.0)
        b = np.where(np.isnan(b), -np.inf, b)
    out = log_diff_exp(a, np.minimum(a, b))
    return float(out) if np.ndim(eps) == 0 else out


def gdp_delta(eps, mu: float):
    r"""delta(eps) of mu-GDP: :math:`\Phi(-\varepsilon/\mu + \mu/2) - e^\varepsilon\Phi(-\varepsilon/\mu - \mu/2)`.

    Dong, Roth and Su (2022), Corollary 2.13. This is also the exact privacy profile of the Gaussian
    mechanism with sensitivity/sigma = mu.
    """
    return np.exp(gdp_log_delta(eps, mu))


def gdp_epsilon_bracket(delta: float, mu: float) -> tuple[float, float]:
    r"""(lo, hi) around the exact eps with :math:`\delta_\mu(\varepsilon) = \delta`, a few ulps wide.

    Safeguarded Newton iteration on :math:`\log\delta_\mu(\varepsilon) - \log\delta` with the exact
    derivative :math:`\delta_\mu'(\varepsilon) = -e^{\varepsilon}\Phi(-\varepsilon/\mu - \mu/2)`, inside a
    bracket kept by sign; no range limit (mu = 300 has eps near 45 000). The starting upper end
    :math:`\mu^2/2 + \mu\sqrt{2\log(1/\delta)}` comes from :math:`\delta_\mu(\varepsilon) \le
    \Phi(\mu/2 - \varepsilon/\mu)` and the Gaussian tail bound. Accuracy is that of ``log_ndtr``
    (about 1e-15 relative; checked against mpmath in the tests).
    """
    delta = check_delta(delta)
    mu = check_positive("mu", mu)
    target = math.log(delta)

    def f(e: float) -> tuple[float, float]:
        ld = float(gdp_log_delta(e, mu))
        if math.isnan(ld):
            raise NumericalError(f"gdp: log delta is NaN at eps={e!r}, mu={mu!r}")
        b = e + float(_LOG_NDTR(-e / mu - mu / 2.0))
        return ld - target, -math.exp(b - ld) if ld > -math.inf else -math.inf

    f0, _ = f(0.0)
    if f0 <= 0:
        return 0.0, 0.0
    lo, hi = 0.0, max(1.0, mu * mu / 2.0 + mu * math.sqrt(2.0 * -target))
    for _ in range(64):
        fh, _ = f(hi)
        if fh <= 0:
            break
        lo, hi = hi, 2.0 * hi
    else:  # pragma: no cover - the start is provably above the root
        raise NumericalError(f"gdp: could not bracket epsilon for delta={delta:g}, mu={mu:g}")
    e = 0.5 * (lo + hi)
    for _ in range(200):
        fe, de = f(e)
        if fe == 0:
            lo = hi = e
            break
        if fe > 0:
            lo = e
        else:
            hi = e
        if hi - lo <= 4.0 * math.ulp(hi):
            break
        step = e - fe / de if de < 0 and math.isfinite(de) else math.nan
        e = step if lo < step < hi else 0.5 * (lo + hi)
        if e in (lo, hi):
            e = 0.5 * (lo + hi)
    else:  # pragma: no cover
        raise NumericalError(f"gdp: epsilon did not converge for delta={delta:g}, mu={mu:g}")
    return lo, hi


def gdp_epsilon(delta: float, mu: float) -> float:
    """The smallest eps with delta_mu(eps) <= delta: the upper end of :func:`gdp_epsilon_bracket`.

    Nudged up by ulps where needed so that ``gdp_delta(result, mu) <= delta`` holds as evaluated. ``mu = 0``
    (no privacy loss) gives 0. The one GDP conversion of the package (:mod:`dputils.shuffling` re-exports it).
    """
    delta = check_delta(delta)
    if check_nonnegative("mu", mu) == 0:
        return 0.0
    e = gdp_epsilon_bracket(delta, mu)[1]
    for _ in range(64):
        if e == 0.0 or float(gdp_delta(e, mu)) <= delta:
            break
        e = math.nextafter(e, math.inf) + 2.0 * math.ulp(e)
    return e


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest mu such that mu-GDP implies (epsilon, delta)-DP (delta_mu(eps) is increasing in mu)."""
    epsilon = check_finite("epsilon", epsilon)
    if epsilon < 0:
        raise DPValueError(f"epsilon must be >= 0, got {epsilon!r}")
    delta = check_delta(delta)
    lo, hi = 1e-8, 1.0
    while gdp_delta(epsilon, hi) < delta:
        hi *= 2.0
        if hi > 1e6:
            raise NumericalError("gdp_mu: could not bracket mu")
    # certified bisection to 1e-14 relative; the lower end: delta_mu(eps) <= delta there
    return bisect_monotone(
        lambda mu: gdp_delta(epsilon, mu) <= delta, lo, hi, keep="lo", tol=1e-14, ends_checked=True, floor=0.0
    )


def gdp_tradeoff(alpha, mu: float):
    r"""Trade-off curve :math:`G_\mu(\alpha) = \Phi(\Phi^{-1}(1 - \alpha) - \mu)` for alpha in [0, 1], mu >= 0.

    Evaluated as :math:`\Phi(-\Phi^{-1}(\alpha) - \mu)` (symmetry of the normal), which keeps full precision
    for alpha down to 1e-300: forming ``1 - alpha`` first would round alpha < 1e-16 to zero (at mu = 10,
    alpha = 1e-20 it would return 1.0 instead of 0.2304). ``mu = 0`` is the identity curve ``1 - alpha``.
    A float for a scalar alpha, an array otherwise.
    """
    mu = check_nonnegative("mu", mu)
    a = np.asarray(alpha, dtype=float)
    if np.any((a < 0) | (a > 1) | ~np.isfinite(a)):
        raise DPValueError("alpha must lie in [0, 1]")
    out = special.ndtr(-special.ndtri(a) - mu)
    return out if out.ndim else float(out)


# inversion and duality --------------------------------------------------------------------------
def epsilon_from_delta(
    delta_fn: Callable[[float], float],
    delta: float,
    *,
    eps_max: float = 1e4,
    tol: float = 1e-10,
    log_delta_fn: Callable[[float], float] | None = None,
) -> float:
    """Invert a non-increasing privacy profile: the smallest eps >= 0 with ``delta_fn(eps) <= delta``.

    Brackets the root by doubling from eps = 1 up to ``eps_max``, then bisects (on log delta when
    ``log_delta_fn`` is given, which is better conditioned for tiny deltas) until the bracket is narrower
    than ``tol`` (absolute, or relative for eps > 1). Returns the **upper** end of the final bracket, so
    the answer is conservative: ``delta_fn(result) <= delta`` always holds.

    Raises:
        DPValueError: delta outside (0, 1).
        NumericalError: ``delta_fn`` returns NaN, or stays above ``delta`` up to ``eps_max``
            (e.g. an infinite-loss mass larger than delta).
    """
    delta = check_delta(delta)
    f = log_delta_fn if log_delta_fn is not None else delta_fn
    target = math.log(delta) if log_delta_fn is not None else delta

    def val(e: float) -> float:
        v = float(f(e))
        if math.isnan(v):
            raise NumericalError(f"the privacy profile returned NaN at eps={e!r}")
        return v

    if val(0.0) <= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while val(hi) > target:
        lo = hi
        hi *= 2.0
        if hi > eps_max:
            raise NumericalError(
                f"no epsilon <= {eps_max:g} achieves delta={delta:g} (delta(eps={eps_max:g}) is still above it)"
            )
    # certified bisection (width tol, relative above eps = 1); the upper end meets the target
    return bisect_monotone(lambda e: val(e) <= target, lo, hi, keep="hi", tol=tol, max_iter=300, ends_checked=True)


def tradeoff_from_profile(alpha, eps_grid, delta_values):
    r"""Lower envelope :math:`f(\alpha) = \max(0, \max_i 1 - \delta(\varepsilon_i) - e^{\varepsilon_i}\alpha)`.

    With the profile sampled on a grid of eps (include negative values for the part of the curve above
    the diagonal's reflection) this is a valid lower bound on the trade-off curve, exact in the limit of
    a fine grid (Dong et al. 2022, Proposition 2.12).
    """
    a = np.asarray(alpha, dtype=float)[..., None]
    e = np.asarray(eps_grid, dtype=float)
    d = np.asarray(delta_values, dtype=float)
    vals = 1.0 - d - np.exp(e) * a
    return np.maximum(vals.max(axis=-1), 0.0)


def profile_from_tradeoff(eps, alpha_grid, f_values):
    r""":math:`\delta(\varepsilon) = \max(0, \max_j 1 - f(\alpha_j) - e^\varepsilon\alpha_j)` from a sampled trade-off curve.

    A grid that includes alpha = 0 and 1 gives a lower bound that converges to the exact profile.
    """
    e = np.asarray(eps, dtype=float)[..., None]
    al = np.asarray(alpha_grid, dtype=float)
    fv = np.asarray(f_values, dtype=float)
    vals = 1.0 - fv - np.exp(e) * al
    return np.maximum(vals.max(axis=-1), 0.0)
