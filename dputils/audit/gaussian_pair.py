"""Privacy profile of a pair of one-dimensional Gaussians, vectorised over many pairs.

The Gaussian auditor evaluates ``eps_theta(delta)`` at thousands of parameter points
``theta = (mu_out, sigma_out, mu_in, sigma_in)`` while it searches a confidence region, so this module
computes the hockey-stick divergence in log space for whole arrays of pairs at once and inverts it with
a vectorised bisection.

Maths. For ``P = N(m_p, s_p^2)`` and ``Q = N(m_q, s_q^2)`` the privacy loss is quadratic,

    l(x) = log p(x)/q(x) = A x^2 + B x + c0,
    A  = (1/s_q^2 - 1/s_p^2) / 2,   B = m_p/s_p^2 - m_q/s_q^2,
    c0 = (m_q^2/s_q^2 - m_p^2/s_p^2) / 2 + log(s_q/s_p),

and the hockey-stick divergence is ``H_{e^eps}(P||Q) = P(R) - e^eps Q(R)`` with ``R = {l > eps}``
(the supremum over events is attained at the likelihood-ratio set). ``R`` is the interval between
the roots of ``A x^2 + B x + c0 - eps`` when ``A < 0`` (P narrower: this is Lemma 1 of
{cite}`gauss_audit`, Eq. (1)), the complement of that interval when ``A > 0`` (P wider: two tails),
and a half-line when ``A = 0`` (equal variances: mu-GDP). Lemma 1 covers one orientation only; an
(eps, delta) guarantee for add/remove neighbours needs both, so the auditor uses

    delta_sym(eps) = max(H(P||Q), H(Q||P)),   eps_theta(delta) = inf{eps >= 0 : delta_sym(eps) <= delta}

(Eq. (2) of the paper, symmetrised). All tail masses are computed with ``log_ndtr`` and the
difference ``P(R) - e^eps Q(R)`` as ``log P(R) + log1p(-exp(eps + log Q(R) - log P(R)))``.
Everything here is exact up to floating point; nothing is an approximation.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf, log_ndtr

from ..errors import DPValueError, NumericalError, check_choice, check_delta

__all__ = ["log_delta_directed", "log_delta_pair", "delta_pair", "epsilon_pair", "DIRECTIONS"]

#: ``"both"``: max over the two orientations (valid for add/remove DP); ``"in_out"``: H(IN||OUT);
#: ``"out_in"``: H(OUT||IN).
DIRECTIONS = ("both", "in_out", "out_in")

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
            la, lb = log_ndtr(-a[upper]), log_ndtr(-b[upper])
            out[upper] = la + np.log1p(-np.exp(lb - la))
        if np.any(lower):
            la, lb = log_ndtr(a[lower]), log_ndtr(b[lower])
            out[lower] = lb + np.log1p(-np.exp(la - lb))
        if np.any(mid):
            # a <= 0 <= b: Phi(b) - Phi(a) = (erf(b/sqrt2) + erf(-a/sqrt2)) / 2, a sum of two non-negatives.
            out[mid] = np.log(0.5 * (erf(b[mid] * _SQRT1_2) + erf(-a[mid] * _SQRT1_2)))
    return out


def log_delta_directed(eps, mu_p, s_p, mu_q, s_q) -> np.ndarray:
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
            log_p[m_int] = _log_interval_mass((lo[m_int] - mu_p[m_int]) / s_p[m_int], (hi[m_int] - mu_p[m_int]) / s_p[m_int])
            log_q[m_int] = _log_interval_mass((lo[m_int] - mu_q[m_int]) / s_q[m_int], (hi[m_int] - mu_q[m_int]) / s_q[m_int])
        # A > 0: two tails if disc > 0, else the whole line
        m_two = (~a_zero) & (A > 0) & (disc > 0)
        if np.any(m_two):
            zl_p, zh_p = (lo[m_two] - mu_p[m_two]) / s_p[m_two], (hi[m_two] - mu_p[m_two]) / s_p[m_two]
            zl_q, zh_q = (lo[m_two] - mu_q[m_two]) / s_q[m_two], (hi[m_two] - mu_q[m_two]) / s_q[m_two]
            log_p[m_two] = np.logaddexp(log_ndtr(zl_p), log_ndtr(-zh_p))
            log_q[m_two] = np.logaddexp(log_ndtr(zl_q), log_ndtr(-zh_q))
        whole |= (~a_zero) & (A > 0) & ~(disc > 0)
        # A = 0: half-line {B x + c > 0}
        m_half = a_zero & (B != 0)
        if np.any(m_half):
            x0 = -c[m_half] / B[m_half]
            up = B[m_half] > 0
            zp = (x0 - mu_p[m_half]) / s_p[m_half]
            zq = (x0 - mu_q[m_half]) / s_q[m_half]
            log_p[m_half] = np.where(up, log_ndtr(-zp), log_ndtr(zp))
            log_q[m_half] = np.where(up, log_ndtr(-zq), log_ndtr(zq))
        whole |= a_zero & (B == 0) & (c > 0)
        log_p[whole] = 0.0
        log_q[whole] = 0.0

        t = eps + log_q - log_p
        out = np.where((log_p > -np.inf) & (t < 0), log_p + np.log1p(-np.exp(t)), -np.inf)
    if np.any(np.isnan(out)):
        raise NumericalError("hockey-stick divergence of a Gaussian pair evaluated to NaN")
    return out.reshape(shape)


def log_delta_pair(eps, mu_out, s_out, mu_in, s_in, direction: str = "both") -> np.ndarray:
    """log delta(eps) of the score pair OUT = N(mu_out, s_out^2), IN = N(mu_in, s_in^2).

    ``direction="both"`` (default) is log max(H(IN||OUT), H(OUT||IN)), the valid symmetric profile.
    """
    check_choice("direction", direction, DIRECTIONS)
    if direction == "in_out":
        return log_delta_directed(eps, mu_in, s_in, mu_out, s_out)
    if direction == "out_in":
        return log_delta_directed(eps, mu_out, s_out, mu_in, s_in)
    return np.maximum(
        log_delta_directed(eps, mu_in, s_in, mu_out, s_out), log_delta_directed(eps, mu_out, s_out, mu_in, s_in)
    )


def delta_pair(eps, mu_out, s_out, mu_in, s_in, direction: str = "both") -> np.ndarray:
    """delta(eps) of the Gaussian score pair (see :func:`log_delta_pair`)."""
    return np.exp(log_delta_pair(eps, mu_out, s_out, mu_in, s_in, direction))


def _epsilon_pair_raw(delta: float, mu_out, s_out, mu_in, s_in, direction: str = "both",
                      eps_max: float = 4096.0, n_iter: int = 80, tol: float = 1e-9) -> np.ndarray:
    """Vectorised eps_theta(delta); ``inf`` where no eps <= eps_max reaches delta (no exception)."""
    arrs = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (mu_out, s_out, mu_in, s_in)))
    shape = arrs[0].shape
    mu_out, s_out, mu_in, s_in = (a.ravel() for a in arrs)
    ld = np.log(delta)
    n = mu_out.size
    out = np.zeros(n)
    f0 = log_delta_pair(0.0, mu_out, s_out, mu_in, s_in, direction)
    todo = f0 > ld  # at eps = 0 delta is the TV distance; if already <= delta, eps_theta = 0
    if not np.any(todo):
        return out.reshape(shape)
    idx = np.flatnonzero(todo)
    mo, so, mi, si = mu_out[idx], s_out[idx], mu_in[idx], s_in[idx]
    lo = np.zeros(idx.size)
    hi = np.ones(idx.size)
    # doubling bracket: delta(eps) is non-increasing in eps
    while True:
        above = log_delta_pair(hi, mo, so, mi, si, direction) > ld
        if not np.any(above):
            break
        lo = np.where(above, hi, lo)
        hi = np.where(above, 2 * hi, hi)
        if np.all(hi[above] > eps_max):
            break
    bad = hi > eps_max
    hi = np.minimum(hi, 2 * eps_max)
    for _ in range(n_iter):
        if np.all(hi - lo <= tol * np.maximum(hi, 1.0)):
            break
        mid = 0.5 * (lo + hi)
        above = log_delta_pair(mid, mo, so, mi, si, direction) > ld
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    res = hi  # delta(hi) <= delta: the conservative (upper) end of the final bracket
    res[bad] = np.inf
    out[idx] = res
    return out.reshape(shape)


def epsilon_pair(delta: float, mu_out, s_out, mu_in, s_in, direction: str = "both") -> np.ndarray | float:
    """eps_theta(delta) = inf{eps >= 0 : delta_theta(eps) <= delta} for Gaussian score pairs (Eq. (2)).

    Vectorised over the parameters (broadcast). Bisection on log delta to 1e-9 (relative above eps = 1) after a
    doubling bracket; the returned value is the upper end of the final bracket. Raises
    :class:`NumericalError` where eps_theta exceeds 4096 (no bracket).
    """
    delta = check_delta(delta)
    res = _epsilon_pair_raw(delta, mu_out, s_out, mu_in, s_in, direction)
    if np.any(~np.isfinite(res)):
        raise NumericalError("eps_theta(delta) > 4096 for some Gaussian pair: no root could be bracketed")
    return float(res) if np.ndim(res) == 0 else res
