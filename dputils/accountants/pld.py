r"""Privacy-loss-distribution (PLD) accountant with certified upper and lower brackets.

The reference accountant of the book. For one ordered pair (P, Q) with privacy loss L the privacy
profile is :math:`\delta(\varepsilon) = \mathbb{E}_P[(1 - e^{\varepsilon - L})_+]` and composition adds
independent losses, so the composed profile is this expectation under the convolution of the PLRVs.

**Discretization.** Cut the loss axis into bins :math:`(\varepsilon_{i-1}, \varepsilon_i]` of width
``h`` on the common grid :math:`\varepsilon_i = i h`. Merging each bin into one outcome is a
post-processing of the mechanism; the merged outcome has loss
:math:`a_i = \log P(\text{bin}) / Q(\text{bin}) \in (\varepsilon_{i-1}, \varepsilon_i]`, computed in log space
from the closed-form tails of :mod:`dputils.mechanisms`.

* *Upper (pessimistic) PMF*: the merged atom is split between the two grid points so that both its
  P- and Q-mass are preserved: the point :math:`\varepsilon_i` receives Q-mass
  :math:`\theta_i Q(\text{bin})` with :math:`\theta_i = \mathrm{expm1}(a_i - \varepsilon_{i-1})/\mathrm{expm1}(h)`,
  and :math:`\varepsilon_{i-1}` the rest. Its privacy profile is the chord interpolation of the true
  (convex in :math:`e^\varepsilon`) profile through the grid points, so the pair dominates the mechanism
  for every epsilon and hence under composition. This is the "connect the dots" construction of
  Doroshenko et al. (2022), reached through bin merging, which makes every mass a convex combination
  (never negative) and keeps full relative precision.
* *Lower (optimistic) PMF*: the merged atom is moved down to :math:`\varepsilon_{i-1}`. The rounding errors
  :math:`e = a_i - \varepsilon_{i-1} \in [0, h]` are independent across compositions; a Chernoff bound on
  their sum gives :math:`s_\eta` with :math:`P[\sum e < s_\eta] \le \eta`, and
  :math:`\delta(\varepsilon) \ge \delta_{\rm down}(\varepsilon - s_\eta) - \eta`. The bracket is
  maximised over a grid of :math:`\eta`. Without this correction the rounding drift (up to
  :math:`T h` after T steps) would make the lower bound useless at large T.

**Composition** by FFT on a window of the composed loss chosen by Chernoff bounds so that at most
``window_tail`` of mass falls outside on either side; that mass (which the circular convolution aliases
into the window) is added to the upper bound and subtracted from the lower one.

**Floating-point error.** Raising the Fourier transform of a step's PMF to the power T multiplies the
relative error of each coefficient by T, which leaves an absolute error of order
:math:`T u \log_2 n \cdot \max_j m_j` on *every* mass of the window (u the unit round-off) -- invisible
in the bulk, dominant in the far tail at large T (it broke the certificate at epsilon ~ 3e4 before it was
accounted for). Each computed mass is given the error bound
:math:`u \log_2(n) (\sum_i T_i + 1) \tfrac1n \sum_k |\hat S(k)|` (from a relative error of at most
:math:`u\log_2 n` per Fourier coefficient), and delta(eps) is widened by that bound times
:math:`\sum_{l_j > \varepsilon} (1 - e^{\varepsilon - l_j})` (a geometric sum in closed form), on both
ends of the bracket. Checked against an 80-bit recomputation: the bound is 30-50x above the observed
error. ``get_epsilon`` refuses (NumericalError) when this bound plus the window tails exceeds half of
the target delta, e.g. at tiny deltas where float64 FFT accountants lose precision (see the
saddle-point chapter).

Both directions (add and remove) are computed and the worse one is reported unless ``direction`` says
otherwise.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy.signal import lfilter
from scipy.special import logsumexp

from ..errors import DPValueError, NumericalError, check_positive
from ..mechanisms import Mechanism, PrivacyLossPair
from ..numerics import log_diff_exp
from ..resources import check_memory
from .base import Accountant, AccountingResult

_ETA_FACTORS = np.array([0.3, 0.1, 1e-2, 1e-3, 1e-5])  # eta relative to the target delta
_ETAS_ABS = np.logspace(-24, -2, 12)  # eta grid for get_delta


#: Largest composed window (grid points) one FFT composition may use: ~5 GiB and about a minute here.
MAX_WINDOW = 2**26


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
    """Bin-merge ``pair``'s privacy loss on the grid ``i * h`` (see the module docstring)."""
    h = check_positive("discretization", h)
    lo, hi = pair.loss_quantile_range(tail)
    i_lo = math.floor(lo / h) - 1
    i_hi = math.ceil(hi / h) + 1
    n = i_hi - i_lo + 1
    if n > 5_000_000:
        raise DPValueError(
            f"discretization: the single-step privacy loss spans [{lo:.3g}, {hi:.3g}], {n:,} grid points at "
            f"discretization {h:g}, over the limit of 5,000,000; use a discretization of at least {h * n / 5e6:.2g}"
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
        a_rel = lp_bin - lq_bin - grid[:-1]  # a_k - eps_{k-1}, should lie in [0, h]
    a_rel = np.where(np.isfinite(a_rel), np.clip(a_rel, 0.0, h), 0.0)
    p_bin = np.exp(lp_bin)
    # upper: split each bin's P-mass between its endpoints: fraction to the right end is
    # theta * e^{h} / (e^{a_rel})  (P-mass = e^eps * Q-mass); theta = expm1(a_rel)/expm1(h)
    theta = np.expm1(a_rel) / math.expm1(h)
    right_share = theta * np.exp(h - a_rel)  # share of the bin's P-mass sent to grid[k]
    right_share = np.clip(right_share, 0.0, 1.0)
    upper = np.zeros(n)
    upper[1:] += p_bin * right_share
    upper[:-1] += p_bin * (1.0 - right_share)
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
    lower = np.zeros(n)
    lower[:-1] = p_bin
    lower[-1] = p_above
    err = np.zeros(n)
    err[:-1] = a_rel
    return DiscretePLD(h, i_lo, upper, upper_inf, lower, err, pair.infinity_mass)


def _log_mgf(masses: np.ndarray, losses: np.ndarray, t: np.ndarray) -> np.ndarray:
    """log sum_i m_i exp(t l_i) for each t (masses may sum to < 1)."""
    pos = masses > 0
    lm = np.log(masses[pos])
    ll = losses[pos]
    if lm.size * t.size <= 4_000_000:
        # log-sum-exp by hand (max, shift, sum, log): scipy's logsumexp costs about twice the arithmetic in
        # argument handling, and this runs for every composed part (linear in the number of distinct parts)
        x = lm[None, :] + t[:, None] * ll[None, :]
        mx = np.max(x, axis=1, keepdims=True)
        return (mx + np.log(np.sum(np.exp(x - mx), axis=1, keepdims=True)))[:, 0]
    return np.array([logsumexp(lm + ti * ll) for ti in t])  # one t at a time: no (len(t), n) temporary


@dataclass
class ComposedPLD:
    """A composed PMF on the window of grid indices [j0, j0 + len).

    ``noise_pp`` bounds the floating-point error of each computed mass (see :func:`_compose`); the error
    it causes in ``delta(eps)`` is at most ``noise_pp * beyond(eps)``, where ``beyond(eps)`` counts the
    window points above eps with their hockey-stick weights (see :meth:`noise`).
    """

    h: float
    j0: int
    masses: np.ndarray
    inf_mass: float
    outside: float  # Chernoff bound on the mass outside the window (both sides)
    noise_pp: float  # bound on the absolute floating-point error of each mass

    @property
    def losses(self) -> np.ndarray:
        return (self.j0 + np.arange(self.masses.size)) * self.h

    @property
    def fft_noise(self) -> float:
        """Bound on the summed floating-point error of all masses (the noise at the bottom of the window)."""
        return self.noise_pp * self.masses.size

    def _prepare(self) -> None:
        if getattr(self, "_A", None) is not None:
            return
        m = self.masses
        eh = math.exp(-self.h)
        # A[k] = sum_{j>k} m_j ; D[k] = delta(l_k) - inf = sum_{j>k} m_j (1 - e^{l_k - l_j});
        # G[k] = sum_{j>k} m_j e^{l_k - l_j}. Recurrences (all terms positive, no cancellation):
        # D[k] = (1 - e^-h) A[k] + e^-h D[k+1],  G[k] = e^-h (m[k+1] + G[k+1]).
        A = np.empty_like(m)
        A[-1] = 0.0
        A[:-1] = np.cumsum(m[::-1])[::-1][1:]
        self._A = A
        self._D = lfilter([-math.expm1(-self.h)], [1.0, -eh], A[::-1])[::-1]
        shifted = np.concatenate([m[1:], [0.0]])
        self._G = lfilter([eh], [1.0, -eh], shifted[::-1])[::-1]

    def _locate(self, eps: float) -> tuple[int, float]:
        """(k, a) with eps in (l_{k-1}, l_k] and a = e^{eps - l_k} (k clipped to [0, n])."""
        k = math.ceil(eps / self.h - self.j0)
        n = self.masses.size
        if k <= 0:
            return 0, math.exp(eps - self.j0 * self.h)
        if k >= n:
            return n, 0.0
        return k, math.exp(eps - (self.j0 + k) * self.h)

    def beyond(self, eps: float) -> float:
        """sum over window points l_j > eps of (1 - e^{eps - l_j}), in closed form (a geometric sum)."""
        k, a = self._locate(eps)
        n = self.masses.size
        if k >= n:
            return 0.0
        r = n - k
        return max(0.0, r - a * (-math.expm1(-self.h * r)) / (-math.expm1(-self.h)))

    def noise(self, eps: float) -> float:
        """Bound on the floating-point error of :meth:`delta` at eps."""
        return self.noise_pp * self.beyond(eps)

    def delta(self, eps: float) -> float:
        """sum_j m_j (1 - e^{eps - l_j})_+ + inf_mass (no error terms), in O(1) after preparation.

        For eps in (l_{k-1}, l_k] with a = e^{eps - l_k}: delta = (1 - a) A[k-1] + a D[k], a sum of
        non-negative terms.
        """
        self._prepare()
        k, a = self._locate(eps)
        n = self.masses.size
        if k == 0:
            # eps at or below the first atom: every atom has l_j >= eps
            tot = self._A[0] + self.masses[0]
            return float((1 - a) * tot + a * self._D[0]) + self.inf_mass if a <= 1 else float(
                np.dot(self.masses, -np.expm1(np.minimum(eps - self.losses, 0.0)))) + self.inf_mass
        if k >= n:
            return self.inf_mass
        return float((1 - a) * self._A[k - 1] + a * self._D[k]) + self.inf_mass


def _compose(parts: list[tuple[DiscretePLD, int]], which: str, window_tail: float) -> ComposedPLD:
    """FFT composition of the 'upper' or 'lower' PMFs of the parts, each self-composed ``count`` times."""
    h = parts[0][0].h
    t = np.logspace(-2, 2.5, 28)
    K_pos = np.zeros_like(t)
    K_neg = np.zeros_like(t)
    inf_keep = 1.0
    offset = 0
    span = 0
    for d, c in parts:
        m = d.upper if which == "upper" else d.lower
        l = d.losses
        K_pos += c * _log_mgf(m, l, t)
        K_neg += c * _log_mgf(m, l, -t)
        inf_keep *= (1.0 - (d.upper_inf if which == "upper" else d.lower_inf)) ** c
        offset += c * d.i0
        span += c * (m.size - 1)
    log_tail = math.log(window_tail)
    u_hi = float(np.min((K_pos - log_tail) / t))
    u_lo = float(np.max((log_tail - K_neg) / t))
    j_lo = max(math.floor(u_lo / h) - 1, offset)
    j_hi = min(math.ceil(u_hi / h) + 1, offset + span)
    n_win = j_hi - j_lo + 1
    if n_win > MAX_WINDOW:
        raise DPValueError(
            f"discretization: the composed privacy loss spans [{j_lo * h:.6g}, {j_hi * h:.6g}], {n_win:,} grid points "
            f"at discretization {h:g}, over the limit of {MAX_WINDOW:,} (about a minute and 5 GiB); use a "
            f"discretization of at least {h * n_win / MAX_WINDOW:.2g}")
    # the FFT length must hold every single-part support as well as the window
    n_fft = sp_fft.next_fast_len(max(n_win, max(d.upper.size for d, _ in parts)), real=True)
    # about 80 bytes per point at the peak (input, half spectrum, powers, inverse, window, indices)
    check_memory("discretization", 80.0 * n_fft, f"the PLD's FFT window of {n_fft:,} points",
                 hint=f"use a coarser discretization than {h:g}")
    spec = None
    for d, c in parts:
        m = d.upper if which == "upper" else d.lower
        a = np.zeros(n_fft)
        a[: m.size] = m
        f = sp_fft.rfft(a)
        fc = f**c if c > 1 else f
        spec = fc if spec is None else spec * fc
    circ = sp_fft.irfft(spec, n_fft)
    # linear index K = j - offset sits at circ[K mod n_fft]
    idx = (np.arange(j_lo, j_hi + 1) - offset) % n_fft
    window = circ[idx]
    # Floating-point error of each mass. Raising a Fourier coefficient to the power c multiplies its
    # relative error by c, so the masses carry an absolute error that grows with the number of
    # compositions, spread over the whole window (it is not visible as negative entries in the bulk).
    # With a relative error of at most log2(n) u per computed coefficient (the worst-case growth of the
    # FFT) the error of spec(k) is at most u log2(n) (sum_c + 1) |spec(k)|, and the inverse transform
    # turns that into at most (1/n) sum_k of it at every point. Observed errors (against an 80-bit
    # recomputation) are 30-50x below this bound. The most negative entry is a floor.
    u = np.finfo(float).eps / 2
    mag = np.abs(spec)
    total_abs = float(mag[0] + 2.0 * mag[1:].sum() - (mag[-1] if n_fft % 2 == 0 else 0.0))
    growth = math.log2(max(n_fft, 2)) * (sum(c for _, c in parts) + 1)
    neg = window[window < 0]
    noise_pp = max(float(-neg.min()) if neg.size else 0.0, u * growth * total_abs / n_fft)
    if which == "upper":
        window = np.maximum(window, 0.0)
    outside = 2.0 * window_tail
    return ComposedPLD(h, j_lo, window, 1.0 - inf_keep, outside, noise_pp)


class _DirectionPLD:
    """The upper and lower composed PMFs of one direction, plus the rounding-error MGF."""

    def __init__(self, parts: list[tuple[DiscretePLD, int]], window_tail: float):
        self.up = _compose(parts, "upper", window_tail)
        self.down = _compose(parts, "lower", window_tail)
        # s_eta: a lower quantile of the summed rounding errors. Chernoff:
        # P[sum e <= s] <= exp(log M(-lam) + lam s), log M(-lam) = sum_c c log E[exp(-lam e)].
        # Mass outside the lower atoms (dropped bottom bin, infinity) is given error 0, the smallest
        # possible value, which keeps the bound valid.
        lam = np.logspace(-1, 7, 40) / parts[0][0].h
        logM = np.zeros_like(lam)
        for d, c in parts:
            m = d.lower
            pos = m > 0
            rest = max(0.0, 1.0 - float(m[pos].sum()))
            # log E[exp(-lam e)] is _log_mgf of the rounding errors at -lam (chunked for long supports)
            lse = _log_mgf(m, d.lower_err, -lam)
            logM += c * np.minimum(np.logaddexp(lse, math.log(rest)) if rest > 0 else lse, 0.0)
        self._lam = lam
        self._logM = logM

    def s_eta(self, eta: float) -> float:
        """The largest s with exp(log M + lam s) <= eta, best over the lam grid (>= 0)."""
        return max(0.0, float(np.max((math.log(eta) - self._logM) / self._lam)))

    def delta_upper(self, eps: float) -> float:
        u = self.up
        return min(1.0, u.delta(eps) + u.outside + u.noise(eps))

    def delta_lower(self, eps: float) -> float:
        d = self.down
        best = 0.0
        for eta in _ETAS_ABS:
            e = eps - self.s_eta(eta)
            v = d.delta(e) - eta - d.outside - d.noise(e)
            best = max(best, v)
        return best

    def epsilon_upper(self, delta: float) -> float:
        u = self.up
        floor = u.outside + u.inf_mass
        if delta <= floor:
            raise NumericalError(
                f"delta={delta:g} is below the PLD accountant's resolution ({floor:.2g}: infinite-loss mass and "
                "window tails); use the saddle-point or Edgeworth accountant"
            )
        eps = _invert(u, delta - u.outside, noise=True)
        err = u.outside + u.noise(eps)
        if err > 0.5 * delta:
            raise NumericalError(
                f"delta={delta:g} is below the PLD accountant's resolution: the bound on the floating-point error "
                f"of the FFT composition ({err:.2g} at epsilon={eps:.6g}) exceeds half of delta; use a coarser "
                "discretization, or the saddle-point or Edgeworth accountant"
            )
        return eps

    def epsilon_lower(self, delta: float) -> float:
        d = self.down
        best = 0.0
        for eta in delta * _ETA_FACTORS:
            target = delta + eta + d.outside
            e = _invert_lower(d, target)
            if e is not None:
                best = max(best, e + self.s_eta(eta))
        return best


def _invert_lower(c: ComposedPLD, target: float) -> float | None:
    """An eps with ``c.delta(eps) - c.noise(eps) >= target`` (as large as a few refinements give), or None.

    Start from the inversion with the whole window's noise; each refinement inverts with the noise
    beyond the previous answer, which can only move right while keeping the inequality (the noise term is
    non-increasing in eps). The answer is checked by direct evaluation.
    """
    noise = c.noise_pp * c.masses.size
    best = None
    for _ in range(4):
        t = target + noise
        if t >= 1.0:
            break
        try:
            e = _invert(c, t, clamp_zero=False)
        except NumericalError:
            break
        if c.delta(e) - c.noise(e) >= target:
            best = e if best is None else max(best, e)
        new_noise = c.noise(e)
        if new_noise >= noise * (1 - 1e-9):
            break
        noise = new_noise
    return best


def _invert(c: ComposedPLD, target: float, clamp_zero: bool = True, noise: bool = False) -> float:
    """Smallest eps with c.delta(eps) [+ c.noise(eps) when ``noise``] <= target.

    Search the grid, then solve exactly on one piece: on (l_{k-1}, l_k] with a = e^{eps - l_k} both
    delta and the noise term are affine in a. The answer is checked by direct evaluation (falling back
    to the grid point l_k, where the inequality holds by the search).
    """
    if c.inf_mass > target:
        raise NumericalError(f"infinite-loss mass {c.inf_mass:g} exceeds delta={target:g}: no finite epsilon")
    c._prepare()
    n = c.masses.size
    p = c.noise_pp if noise else 0.0

    def total(e: float) -> float:
        return c.delta(e) + (p * c.beyond(e) if noise else 0.0)

    D = c._D + c.inf_mass  # delta at the grid points, non-increasing
    if noise:
        r = np.arange(n - 1, -1, -1, dtype=float)  # points strictly above l_k
        D = D + p * np.maximum(r - math.exp(-c.h) * (-np.expm1(-c.h * r)) / (-math.expm1(-c.h)), 0.0)
    lo_eps = 0.0 if clamp_zero else float(c.losses[0] - c.h)
    if total(lo_eps) <= target:
        return lo_eps
    # first k with D[k] <= target
    k = int(np.searchsorted(-D, -target, side="left"))
    if k >= n:
        raise NumericalError("delta target not reached inside the PLD window")
    if k == 0:
        return max(float(c.losses[0]), 0.0) if clamp_zero else float(c.losses[0])
    # on (l_{k-1}, l_k]: delta + noise = A + p (n - k) - a (m_k + G[k] + p S),  S = sum_{i<n-k} e^{-i h}
    A = c._A[k - 1] + c.inf_mass + p * (n - k)
    S = (-math.expm1(-c.h * (n - k))) / (-math.expm1(-c.h))
    denom = c.masses[k] + c._G[k] + p * S  # = A[k-1] - D[k] - inf (+ noise), without cancellation
    a = (A - target) / denom if denom > 0 else 1.0
    a = min(max(a, math.exp(-c.h)), 1.0)
    l_k = float(c.losses[k])
    eps = l_k + math.log(a)
    step = 4.0 * math.ulp(max(abs(l_k), c.h))
    for _ in range(30):  # rounding of the piece solve: move right by growing steps, at most to l_k
        if eps >= l_k or total(eps) <= target:
            break
        eps += step
        step *= 2.0
    eps = min(eps, l_k)
    return max(eps, 0.0) if clamp_zero else eps


class PLDAccountant(Accountant):
    """Privacy-loss-distribution accountant with certified brackets.

    ``get_delta`` / ``get_epsilon`` return the pessimistic (upper) value in ``value`` and the bracket in
    ``lower``/``upper``. Supports any :class:`~dputils.mechanisms.Mechanism` of this package, heterogeneous
    compositions included.

    Args:
        direction: ``"both"`` (default; the worse of add and remove), ``"add"`` or ``"remove"``.
        discretization: grid width ``h`` of the loss axis (default 1e-4, as dp_accounting).
        tail: single-step loss range: P-mass outside it is at most ``tail`` (and handled exactly).
        window_tail: Chernoff bound on the composed mass outside the FFT window, per side.
    """

    name = "pld"

    def __init__(self, direction: str = "both", discretization: float = 1e-4, tail: float = 1e-20,
                 window_tail: float = 1e-20) -> None:
        super().__init__(direction)
        self.h = check_positive("discretization", discretization)
        for tname, tval in (("tail", tail), ("window_tail", window_tail)):  # tail masses in (0, 1e-3]
            if not 0 < check_positive(tname, tval) <= 1e-3:
                raise DPValueError(f"{tname} must be in (0, 0.001], got {float(tval)!r}")
        self.tail = float(tail)
        self.window_tail = float(window_tail)
        self._cache: dict[str, _DirectionPLD] = {}

    def _check_supported(self, mechanism) -> None:
        if not isinstance(mechanism, Mechanism):
            raise DPValueError(f"mechanism must be a dputils.mechanisms.Mechanism, got {type(mechanism).__name__}")
        for d in self.directions:
            if not getattr(mechanism.pair(d), "has_tails", True):
                raise DPValueError(f"pld: {type(mechanism).__name__} has no privacy-loss tails to discretize "
                                   "(use the spa or edgeworth accountant)")

    def _invalidate(self) -> None:
        self._cache.clear()

    def _direction(self, direction: str) -> _DirectionPLD:
        if direction not in self._cache:
            self._require_ledger()
            other = "add" if direction == "remove" else "remove"
            if other in self._cache and all(getattr(m, "symmetric", False) for m, _ in self.ledger):
                # symmetric mechanisms: both directions have the same privacy-loss distribution
                self._cache[direction] = self._cache[other]
                return self._cache[direction]
            merged: dict[Mechanism, int] = {}
            for mech, count in self.ledger:
                merged[mech] = merged.get(mech, 0) + count
            parts = [(discretize(m.pair(direction), self.h, self.tail), c) for m, c in merged.items()]
            self._cache[direction] = _DirectionPLD(parts, self.window_tail)
        return self._cache[direction]

    def _worst(self, quantity: str, upper_fn, lower_fn) -> AccountingResult:
        """Upper bound of the worse direction and the largest lower bound, over ``self.directions``.

        delta_both(eps) = max over directions, so both its bounds are maxima; eps(delta) likewise.
        """
        ups, lows = {}, {}
        for d in self.directions:
            dp = self._direction(d)
            ups[d] = float(upper_fn(dp))
            lows[d] = min(float(lower_fn(dp)), ups[d])
        worst = max(ups, key=ups.get)
        up, lo = ups[worst], max(lows.values())
        return AccountingResult(up, lo, up, "upper-bound", self.name, quantity,
                                {"direction": worst, "discretization": self.h})

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        return self._worst("delta", lambda dp: dp.delta_upper(eps), lambda dp: dp.delta_lower(eps))

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        return self._worst("epsilon", lambda dp: dp.epsilon_upper(delta), lambda dp: dp.epsilon_lower(delta))


def _build(args: argparse.Namespace) -> PLDAccountant:
    from .registry import mechanism_from_args

    acc = PLDAccountant(direction=args.direction, discretization=args.discretization)
    return acc.compose(mechanism_from_args(args), args.steps)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--discretization", type=float, default=1e-4,
                        help="grid width of the privacy-loss axis (default 1e-4)")


from .registry import register  # noqa: E402

register("pld", help="privacy-loss distribution (FFT), certified lower/upper bracket", build=_build,
         add_arguments=_add_arguments)
