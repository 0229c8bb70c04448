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
into the window) is added to the upper bound and subtracted from the lower one. The floating-point noise
of the FFT is estimated from the size of the negative entries it produces and widens both ends too,
so the bracket is honest at tiny deltas (where float64 FFT accountants lose precision, see the
saddle-point chapter); ``get_epsilon`` refuses targets below that noise floor.

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
from ..mechanisms import Mechanism, PrivacyLossPair, _log_diff_exp
from .base import Accountant, AccountingResult

_ETA_FACTORS = np.array([0.3, 0.1, 1e-2, 1e-3, 1e-5])  # eta relative to the target delta
_ETAS_ABS = np.logspace(-24, -2, 12)  # eta grid for get_delta


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
        raise NumericalError(
            f"the single-step privacy loss spans [{lo:.3g}, {hi:.3g}]: {n} grid points at h={h:g}; use a coarser grid"
        )
    grid = (i_lo + np.arange(n)) * h  # eps_{i_lo} .. eps_{i_hi}
    lsf_p = np.asarray(pair.log_sf_p(grid), dtype=float)
    lsf_q = np.asarray(pair.log_sf_q(grid), dtype=float)
    lcdf_p = np.asarray(pair.log_cdf_p(grid), dtype=float)
    # bins k = 1..n-1 are (grid[k-1], grid[k]]; log P(bin) from whichever side is more accurate
    upper_side = lsf_p[:-1] < math.log(0.5)
    lp_bin = np.where(
        upper_side,
        _log_diff_exp(lsf_p[:-1], np.minimum(lsf_p[1:], lsf_p[:-1])),
        _log_diff_exp(lcdf_p[1:], np.minimum(lcdf_p[:-1], lcdf_p[1:])),
    )
    lq_bin = _log_diff_exp(lsf_q[:-1], np.minimum(lsf_q[1:], lsf_q[:-1]))
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
    return logsumexp(lm[None, :] + t[:, None] * ll[None, :], axis=1)


@dataclass
class ComposedPLD:
    """A composed PMF on the window of grid indices [j0, j0 + len)."""

    h: float
    j0: int
    masses: np.ndarray
    inf_mass: float
    outside: float  # Chernoff bound on the mass outside the window (both sides)
    fft_noise: float  # estimated absolute floating-point error of the masses, summed

    @property
    def losses(self) -> np.ndarray:
        return (self.j0 + np.arange(self.masses.size)) * self.h

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

    def delta(self, eps: float) -> float:
        """sum_j m_j (1 - e^{eps - l_j})_+ + inf_mass (no error terms), in O(1) after preparation.

        For eps in (l_{k-1}, l_k] with a = e^{eps - l_k}: delta = (1 - a) A[k-1] + a D[k], a sum of
        non-negative terms.
        """
        self._prepare()
        x = eps / self.h - self.j0
        k = math.ceil(x)
        n = self.masses.size
        if k <= 0:
            # eps at or below the first atom: every atom has l_j >= eps
            a = math.exp(eps - self.j0 * self.h)
            tot = self._A[0] + self.masses[0]
            return float((1 - a) * tot + a * self._D[0]) + self.inf_mass if a <= 1 else float(
                np.dot(self.masses, -np.expm1(np.minimum(eps - self.losses, 0.0)))) + self.inf_mass
        if k >= n:
            return self.inf_mass
        a = math.exp(eps - (self.j0 + k) * self.h)
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
    if n_win > 2**27:
        raise NumericalError(f"PLD window of {n_win} points is too large; use a coarser discretization")
    # the FFT length must hold every single-part support as well as the window
    n_fft = sp_fft.next_fast_len(max(n_win, max(d.upper.size for d, _ in parts)), real=True)
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
    neg = window[window < 0]
    peak = float(np.max(np.abs(window))) if window.size else 0.0
    noise_level = max(float(-neg.min()) if neg.size else 0.0, 4 * np.finfo(float).eps * peak)
    fft_noise = noise_level * window.size
    if which == "upper":
        window = np.maximum(window, 0.0)
    outside = 2.0 * window_tail
    return ComposedPLD(h, j_lo, window, 1.0 - inf_keep, outside, fft_noise)


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
            terms = np.log(m[pos])[None, :] - lam[:, None] * d.lower_err[pos][None, :]
            lse = logsumexp(terms, axis=1)
            logM += c * np.minimum(np.logaddexp(lse, math.log(rest)) if rest > 0 else lse, 0.0)
        self._lam = lam
        self._logM = logM

    def s_eta(self, eta: float) -> float:
        """The largest s with exp(log M + lam s) <= eta, best over the lam grid (>= 0)."""
        return max(0.0, float(np.max((math.log(eta) - self._logM) / self._lam)))

    def delta_upper(self, eps: float) -> float:
        u = self.up
        return min(1.0, u.delta(eps) + u.outside + u.fft_noise)

    def delta_lower(self, eps: float) -> float:
        d = self.down
        best = 0.0
        for eta in _ETAS_ABS:
            v = d.delta(eps - self.s_eta(eta)) - eta - d.outside - d.fft_noise
            best = max(best, v)
        return best

    def epsilon_upper(self, delta: float) -> float:
        u = self.up
        floor = u.outside + u.fft_noise + u.inf_mass
        if delta <= floor:
            raise NumericalError(
                f"delta={delta:g} is below the PLD accountant's resolution ({floor:.2g}: infinite-loss mass, "
                "window tails and floating-point noise of the FFT); use the saddle-point or Edgeworth accountant"
            )
        return _invert(u, delta - (u.outside + u.fft_noise))

    def epsilon_lower(self, delta: float) -> float:
        d = self.down
        best = 0.0
        for eta in delta * _ETA_FACTORS:
            target = delta + eta + d.outside + d.fft_noise
            if target >= 1.0:
                continue
            e = _invert(d, target, clamp_zero=False)
            best = max(best, e + self.s_eta(eta))
        return best


def _invert(c: ComposedPLD, target: float, clamp_zero: bool = True) -> float:
    """Smallest eps with c.delta(eps) <= target: search the grid, then solve exactly on one piece."""
    if c.inf_mass > target:
        raise NumericalError(f"infinite-loss mass {c.inf_mass:g} exceeds delta={target:g}: no finite epsilon")
    c._prepare()
    D = c._D + c.inf_mass  # delta at the grid points, non-increasing
    lo_eps = 0.0 if clamp_zero else float(c.losses[0] - c.h)
    if c.delta(lo_eps) <= target:
        return lo_eps
    # first k with D[k] <= target
    k = int(np.searchsorted(-D, -target, side="left"))
    if k >= D.size:
        raise NumericalError("delta target not reached inside the PLD window")
    if k == 0:
        return max(float(c.losses[0]), 0.0) if clamp_zero else float(c.losses[0])
    # on (l_{k-1}, l_k]: delta = (1 - a) A[k-1] + a D[k],  a = e^{eps - l_k}  ->  a = (A - t)/(A - D)
    A = c._A[k - 1] + c.inf_mass
    denom = c.masses[k] + c._G[k]  # = A[k-1] - D[k] - inf, computed without cancellation
    a = (A - target) / denom if denom > 0 else 1.0
    a = min(max(a, math.exp(-c.h)), 1.0)
    eps = float(c.losses[k] + math.log(a))
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
        self.tail = tail
        self.window_tail = window_tail
        self._cache: dict[str, _DirectionPLD] = {}

    def _check_supported(self, mechanism) -> None:
        if not isinstance(mechanism, Mechanism):
            raise DPValueError(f"mechanism must be a dputils.mechanisms.Mechanism, got {type(mechanism).__name__}")

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
    from ..mechanisms import mechanism_from_args

    acc = PLDAccountant(direction=args.direction, discretization=args.discretization)
    return acc.compose(mechanism_from_args(args), args.steps)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--discretization", type=float, default=1e-4,
                        help="grid width of the privacy-loss axis (default 1e-4)")


from .registry import register  # noqa: E402

register("pld", help="privacy-loss distribution (FFT), certified lower/upper bracket", build=_build,
         add_arguments=_add_arguments)
