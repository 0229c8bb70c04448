"""Privacy profile of a pair of one-dimensional Gaussians, vectorised over many pairs.

The Gaussian auditor evaluates ``eps_theta(delta)`` at thousands of parameter points
``theta = (mu_out, sigma_out, mu_in, sigma_in)`` while it searches a confidence region, so this module
computes the hockey-stick divergence in log space for whole arrays of pairs at once and inverts it with
the package's certified bisection, vectorised (:func:`dputils.numerics.bisect_monotone`).

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

from .. import curves as _curves
from ..errors import NumericalError, check_choice, check_delta, check_positive_int
from ..numerics import bisect_monotone
from ..truth import gaussian_pair_hockey_stick_mpmath

__all__ = ["log_delta_directed", "log_delta_pair", "delta_pair", "epsilon_pair", "delta_crosscheck", "DIRECTIONS"]

#: ``"both"``: max over the two orientations (valid for add/remove DP); ``"in_out"``: H(IN||OUT);
#: ``"out_in"``: H(OUT||IN).
DIRECTIONS = ("both", "in_out", "out_in")

# the vectorised hockey-stick divergence lives in the foundation (one implementation for the book)
log_delta_directed = _curves.gaussian_log_delta_vec


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


def _epsilon_pair_raw(
    delta: float,
    mu_out,
    s_out,
    mu_in,
    s_in,
    direction: str = "both",
    eps_max: float = 4096.0,
    n_iter: int = 80,
    tol: float = 1e-9,
) -> np.ndarray:
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
    # lockstep bisection of "delta(eps) <= delta" (written "not above", so a NaN counts as meeting it, as the
    # bracket above does), width tol relative above eps = 1; the upper end: delta(hi) <= delta, conservative
    res = bisect_monotone(
        lambda e: ~(log_delta_pair(e, mo, so, mi, si, direction) > ld),
        lo,
        hi,
        keep="hi",
        tol=tol,
        max_iter=n_iter,
        ends_checked=True,
    )
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


def delta_crosscheck(rng: np.random.Generator, n_pairs: int = 8, eps=(0.0, 1.0, 3.0)) -> dict[str, np.ndarray]:
    """One orientation's delta of random Gaussian pairs, three independent ways (the validation of Lemma 1 and
    Eq. (1) of {cite}`gauss_audit`).

    For each of ``n_pairs`` pairs, drawn from ``rng`` as means ``(m_p, m_q) ~ N(0, 2^2)`` and then sds
    ``(s_p, s_q) ~ U(0.5, 2.5)``, and each ``eps`` of ``eps``, ``H_{e^eps}(N(m_p, s_p^2) || N(m_q, s_q^2))`` by
    :func:`log_delta_directed` (this module's log-space closed form, exponentiated: ``ours``), by mpmath
    quadrature at 30 digits split at the real roots of the quadratic log-ratio
    (:func:`dputils.truth.gaussian_pair_hockey_stick_mpmath`: ``mpmath``) and by the foundation's scalar
    closed form (:func:`dputils.curves.gaussian_delta`: ``scalar``). Returns the three arrays, pair-major."""
    n_pairs = check_positive_int("n_pairs", n_pairs)
    out: dict[str, list[float]] = {"ours": [], "mpmath": [], "scalar": []}
    for _ in range(n_pairs):
        mp_, mq = rng.normal(0, 2, 2)
        sp, sq = rng.uniform(0.5, 2.5, 2)
        for e in eps:
            out["mpmath"].append(gaussian_pair_hockey_stick_mpmath(e, mp_, sp, mq, sq))
            out["ours"].append(float(np.exp(log_delta_directed(e, mp_, sp, mq, sq))))
            out["scalar"].append(float(_curves.gaussian_delta(e, mp_, sp, mq, sq)))
    return {k: np.asarray(v) for k, v in out.items()}
