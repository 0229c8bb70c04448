"""Discretisation: one pair's privacy loss merged into bins of width h on the grid i h, as an upper
(connect-the-dots) and a lower (rounded-down) PMF, and the log-MGFs that size the composed window and
give the Chernoff bound on the rounding errors (see :mod:`dputils.accountants.pld`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import check_positive
from ...mechanisms import PrivacyLossPair
from ...numerics import log_diff_exp
from ._interface import GridLimitError, coarser_discretization


@dataclass
class DiscretePLD:
    """One pair's discretized privacy-loss distribution on the grid ``i * h`` for ``i`` in [i0, i0 + len)."""

    h: float
    i0: int
    upper: np.ndarray  # P-masses, pessimistic (connect-the-dots)
    upper_inf: float  # P-mass at +infinity, pessimistic
    lower: np.ndarray  # P-masses, rounded down (optimistic)
    lower_err: np.ndarray  # rounding error a - eps_floor of each lower atom, in [0, h]
    lower_inf: float

    @property
    def losses(self) -> np.ndarray:
        return (self.i0 + np.arange(self.upper.size)) * self.h


def discretize(pair: PrivacyLossPair, h: float, tail: float = 1e-20) -> DiscretePLD:
    """Bin-merge ``pair``'s privacy loss on the grid ``i * h`` (see the module docstring).

    Floating-point: each bin's log P-mass and merged loss a carry the bound of :func:`_log_bin_error`; the upper PMF
    splits the atom as if at a + bound (capped at the bin's right end) with the P-mass rounded up, the lower one
    rounds the P-mass and the rounding error a - eps_{k-1} down. Bins whose tail difference is not resolved (the
    bound infinite, e.g. Q-tails that round to 1 in the low-loss tail) go wholly to the right end in the upper PMF
    and count rounding error 0 in the lower one."""
    h = check_positive("discretization", h)
    lo, hi = pair.loss_quantile_range(tail)
    i_lo = math.floor(lo / h) - 1
    i_hi = math.ceil(hi / h) + 1
    n = i_hi - i_lo + 1
    if n > 5_000_000:
        raise GridLimitError(
            f"discretization: the single-step privacy loss spans [{lo:.3g}, {hi:.3g}], {n:,} grid points at "
            f"discretization {h:g}, over the limit of 5,000,000; use a discretization of at least {coarser_discretization(h, n, 5_000_000):.2g}"
        )
    grid = (i_lo + np.arange(n)) * h  # eps_{i_lo} .. eps_{i_hi}
    lsf_p = np.asarray(pair.log_sf_p(grid), dtype=float)
    lsf_q = np.asarray(pair.log_sf_q(grid), dtype=float)
    lcdf_p = np.asarray(pair.log_cdf_p(grid), dtype=float)
    # bins k = 1..n-1 are (grid[k-1], grid[k]]; log P(bin) from whichever side is more accurate
    upper_side = lsf_p[:-1] < math.log(0.5)
    lp_bin = np.where(
        upper_side,
        log_diff_exp(lsf_p[:-1], np.minimum(lsf_p[1:], lsf_p[:-1])),
        log_diff_exp(lcdf_p[1:], np.minimum(lcdf_p[:-1], lcdf_p[1:])),
    )
    lq_bin = log_diff_exp(lsf_q[:-1], np.minimum(lsf_q[1:], lsf_q[:-1]))
    with np.errstate(invalid="ignore"):
        a_raw = lp_bin - lq_bin - grid[:-1]  # a_k - eps_{k-1}, should lie in [0, h]
    # floating-point error of the merged loss (see _log_bin_error): the upper PMF places each atom at
    # a_k + err_a (capped at the bin's right end), which moves P-mass to larger losses only
    with np.errstate(invalid="ignore", over="ignore"):
        err_lp = np.where(
            upper_side, _log_bin_error(lsf_p[:-1], lsf_p[1:], lp_bin), _log_bin_error(lcdf_p[1:], lcdf_p[:-1], lp_bin)
        )
        err_a = err_lp + _log_bin_error(lsf_q[:-1], lsf_q[1:], lq_bin) + 2 * _U * np.abs(grid[:-1])
    a_up = np.where(np.isfinite(a_raw) & np.isfinite(err_a), np.clip(a_raw + err_a, 0.0, h), h)
    p_bin = np.exp(lp_bin)
    # upper: split each bin's P-mass between its endpoints: fraction to the right end is
    # theta * e^{h} / (e^{a})  (P-mass = e^eps * Q-mass); theta = expm1(a)/expm1(h), a = a_up; the P-mass is
    # rounded up by its error bound (more mass only raises the profile, composed or not)
    p_bin_up = p_bin * np.exp(np.where(np.isfinite(err_lp), np.minimum(err_lp, 1e-3), 1e-3))
    theta = np.expm1(a_up) / math.expm1(h)
    right_share = theta * np.exp(h - a_up)  # share of the bin's P-mass sent to grid[k]
    right_share = np.clip(right_share, 0.0, 1.0)
    upper = np.zeros(n)
    upper[1:] += p_bin_up * right_share
    upper[:-1] += p_bin_up * (1.0 - right_share)
    # below grid[0]: all P-mass at grid[0] (chord from x = 0); above grid[-1]: delta(grid[-1]) at +inf,
    # and the rest of that bin's P-mass at grid[-1]
    p_below = float(np.exp(lcdf_p[0]))
    upper[0] += p_below
    delta_top = float(pair.delta(grid[-1]))
    p_above = float(np.exp(lsf_p[-1]))
    upper[-1] += max(p_above - delta_top, 0.0)
    upper_inf = delta_top + pair.infinity_mass
    # lower: bin (grid[k-1], grid[k]] at grid[k-1]; mass below grid[0] dropped (moved to -inf);
    # mass above grid[-1] at grid[-1] with rounding error counted as 0 (conservative)
    # (the masses rounded down and the rounding errors a_k - eps_{k-1} taken at their low ends, both by the
    # floating-point bounds above, so that neither the mass nor the Chernoff correction is overstated)
    lower = np.zeros(n)
    lower[:-1] = p_bin * np.exp(-np.where(np.isfinite(err_lp), err_lp, np.inf))
    lower[-1] = p_above * math.exp(-_TAIL_ULPS * _U * (abs(float(lsf_p[-1])) + 1.0) - 2 * _U)
    err = np.zeros(n)
    err[:-1] = np.where(np.isfinite(a_raw) & np.isfinite(err_a), np.clip(a_raw - err_a, 0.0, h), 0.0)
    return DiscretePLD(h, i_lo, upper, upper_inf, lower, err, pair.infinity_mass)


#: unit round-off of float64
_U = 2.0**-53
#: assumed accuracy of the closed-form log-tails (log_ndtr, logaddexp): |error| <= _TAIL_ULPS u (|value| + 1);
#: measured against mpmath at 50 digits for the subsampled Gaussian: at most ~3 u |value| (tests/test_pld_tiny_delta_certified.py)
_TAIL_ULPS = 16.0


def _log_bin_error(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    r"""Bound on the floating-point error of ``out = log_diff_exp(x, y)`` = log(e^x - e^y), x >= y, from the
    errors :math:`e_x, e_y \le` ``_TAIL_ULPS`` u (|.| + 1) of the log-tails x, y and the rounding of the
    subtraction, expm1, log and final addition (4 u (|out| + |x|)).

    With :math:`w = e^{y - x}`: :math:`\partial/\partial x = 1/(1-w)`, :math:`\partial/\partial y = -w/(1-w)`, so
    the propagated error is :math:`(e_x + w e_y)/(1 - w)`, taken with a factor 1.01 for second-order terms. Infinite
    where w rounds to 1 (the bin is not resolved); zero-mass bins (out = -inf) get 0.
    """
    ex = _TAIL_ULPS * _U * (np.abs(x) + 1.0)
    ey = np.where(np.isfinite(y), _TAIL_ULPS * _U * (np.abs(y) + 1.0), 0.0)
    w = np.exp(np.minimum(y - x, 0.0))
    om = -np.expm1(np.minimum(y - x, 0.0))
    err = 1.01 * (ex + w * ey) / np.where(om > 0, om, np.nan) + 4 * _U * (np.abs(out) + np.abs(x))
    err = np.where(om > 0, err, np.inf)
    return np.where(np.isneginf(out), 0.0, err)


def _log_mgf(masses: np.ndarray, losses: np.ndarray, t: np.ndarray) -> np.ndarray:
    """log sum_i m_i exp(t l_i) for each t (masses may sum to < 1).

    Computed row by row of t in blocks (no (len(t), n) temporary beyond a few MiB) as
    max + log(sum exp(. - max)); every term is at most 1 after the shift, so nothing overflows.
    """
    pos = masses > 0
    lm = np.log(masses[pos])
    ll = losses[pos]
    out = np.empty(t.size)
    rows = max(1, 400_000 // max(lm.size, 1))
    for s0 in range(0, t.size, rows):
        tb = t[s0 : s0 + rows]
        a = np.multiply.outer(tb, ll)
        a += lm
        mx = a.max(axis=1)
        a -= mx[:, None]
        np.exp(a, out=a)
        out[s0 : s0 + rows] = mx + np.log(a.sum(axis=1))
    return out


def _log_mgf_grid(masses: np.ndarray, i0: int, h: float, t: np.ndarray) -> np.ndarray:
    """log sum_i m_i exp(t h (i0 + i)) for each t, for masses on the grid (i0 + i) h.

    Blocked, i = aB + b with |t| h B <= 30: sum_a e^{t h aB} sum_b m_ab e^{t h b}, the inner sums a matrix
    product (no overflow: every factor is at most e^{30}), the outer one in log space. Only (A + B) len(t)
    exponentials instead of n len(t). Masses are scaled by their maximum first, so, as in :func:`_log_mgf`,
    only terms below ~1e-270 of the largest are lost to underflow.
    """
    n = masses.size
    B = int(max(1, min(64, 30.0 / (float(np.max(np.abs(t))) * h))))
    A = -(-n // B)
    top = float(masses.max())
    mp = np.zeros(A * B)
    mp[:n] = masses / top
    inner = np.einsum("ab,bt->at", mp.reshape(A, B), np.exp(np.multiply.outer(np.arange(B) * h, t)))  # >= 0
    with np.errstate(divide="ignore"):
        lg = np.log(inner) + np.multiply.outer(np.arange(A) * (B * h), t)
    mx = lg.max(axis=0)
    return mx + np.log(np.exp(lg - mx).sum(axis=0)) + t * (h * i0) + math.log(top)
