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

**Floating-point error of the cells.** :math:`a_i` is a difference of log-masses of size up to ~70 (tails near
1e-30), so its absolute rounding error (~1e-14) is not small next to :math:`a_i - \varepsilon` near the loss's
supremum, where the hockey-stick weights :math:`1 - e^{\varepsilon - a_i}` are ~1e-5: uncorrected, the upper end
fell ~1e-9 (relative) below the exact delta at delta ~1e-30. Each bin's log P-mass and :math:`a_i` carry a
propagated error bound (``_discretise._log_bin_error``: the log-tails assumed accurate to 16 ulps of
:math:`|v| + 1`, checked against mpmath, and :math:`1/(1 - e^{y-x})` amplification of the tail difference); the
upper PMF splits the atom as if at :math:`a_i` plus its bound (capped at the bin's right end) with its P-mass
rounded up, the lower PMF rounds the mass and the rounding error :math:`a_i - \varepsilon_{i-1}` down. Both only
move the PMFs outward, so the brackets stay certified composed or not; the widening measured ~1e-7 relative.
(The computed boundaries :math:`x^*(\varepsilon_i)` themselves carry rounding, which only changes the partition
being merged, a post-processing like any other.)

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
error. A composition refuses (:class:`ResolutionError`, a NumericalError) when this bound plus the window tails
exceeds half of the target delta, e.g. at tiny deltas where float64 FFT accountants lose precision; the
accountant then answers with the tilted composition below.

**One step** is the discretized PMF itself (no FFT, no rounding noise, no window tails).

**Tiny deltas: exponential tilting** (:mod:`~dputils.accountants.pld._tilt`). The FFT power of the PMFs tilted
by :math:`e^{t l}` (t the Chernoff/saddle-point parameter of the query) is the tilt of the composition; untilted,
its rounding error is relative to the masses near the answer, so delta down to 1e-30 (and below) is resolved.
The single-step truncation ``tail`` is lowered per query to :math:`10^{-4}\,\mathrm{rtol}\,\delta / T`.

**Grid choice.** The default grid refines the discretization per query until the certified bracket's relative
width is at most ``rtol`` (see :class:`PLDAccountant`); the decisions branch on the exception types
:class:`GridLimitError` (a DPValueError: over the point or memory limits) and :class:`ResolutionError`.

**Spectral composition (long compositions).** With the window's length N as the period, the aliased
composed PMF is :math:`\mathrm{circ}_r = \frac1N\sum_k F(k) e^{2\pi i k r/N}` with
:math:`F(k) = \prod_p f_p(k)^{c_p}`, and :math:`\delta(\varepsilon)` over the window is the linear functional
:math:`\frac1N \sum_k F(k) V_\varepsilon(k)` where :math:`V_\varepsilon(k)` (the transform of the hockey-stick
weights) is a difference of two geometric sums in closed form. After T steps :math:`|F(k)|` is negligible
except at a few tens of frequencies (the composed loss is smooth on the grid): a certified bound on
:math:`|f_p/s_p|` (the Taylor inequality :math:`|e^{iy} - 1 - iy + y^2/2| \le |y|^3/6` near zero; elsewhere an
FFT of the PMF folded to a short length, plus a Lipschitz term) shows :math:`|F(k)| \le 10^{-30} S` beyond
some K, so only :math:`|k| \le K` are computed, directly, as :math:`f_p = s_p(1 - \zeta_p)`. All rounding
is bounded relative to :math:`\zeta_p` (not to 1), so the bound does not grow like :math:`T u`: at T = 1e7 the
upper bound is within 1e-7 of the uncertified connect-the-dots value, where the FFT power's bound cost
1e-3. Cost: O(K n) per part, independent of T; no array of the window's size. The FFT power below is the
fallback when K would be large (short compositions of sharp PMFs); for windows under ``_BOTH_WINDOW`` points
it is also the second certificate where the spectral one refuses a query or its rounding width exceeds 1e-5 of
the answer (built on first need, so the common case holds no array of the window's size).

**Infinite loss.** The composed mass at +infinity is 1 - prod (1 - x_p)^{c_p}, computed as
-expm1(sum c_p log1p(-x_p)) and rounded outward: forming the product directly rounds away masses like
T x = 1e-13 (x = 1e-20 per step, T = 1e7).

Both directions (add and remove) are computed and the worse one is reported unless ``direction`` says
otherwise.

**The package.** One module per job: ``_discretise`` (bin merging, log-MGFs), ``_compose`` (window and choice
of path), ``_fft`` (the FFT power, :class:`ComposedPLD`), ``_spectral`` (:class:`SpectralPLD`), ``_invert``
(epsilon from delta), ``_pairs`` (one direction's upper and lower compositions and the second certificate), ``_tilt`` (the tilted
composition, :class:`TiltedPLD`);
both composition kinds implement :class:`CertifiedComposition` (``cert_bracket``, ``epsilon_upper``,
``epsilon_lower``, ...), and the accountant is here.
"""

from __future__ import annotations

from ...errors import DPValueError, check_positive
from ...mechanisms import Mechanism
from ..base import Accountant, AccountingResult
from ..registry import COMMON_EVENTS, register
from ._compose import MAX_WINDOW
from ._discretise import DiscretePLD, discretize
from ._fft import ComposedPLD
from ._interface import CertifiedComposition, GridLimitError, ResolutionError
from ._pairs import _DirectionPLD
from ._spectral import SpectralPLD
from ._tilt import TiltedPLD, choose_tilt

__all__ = [
    "PLDAccountant",
    "CertifiedComposition",
    "ComposedPLD",
    "SpectralPLD",
    "TiltedPLD",
    "DiscretePLD",
    "discretize",
    "MAX_WINDOW",
    "GridLimitError",
    "ResolutionError",
]

#: the default grid's first width (as dp_accounting), refined from there (or coarsened to fit the limits)
_H_DEFAULT = 1e-4
#: finest grid the refinement goes to, and the most passes one query makes
_H_MIN = 1e-9
_MAX_PASSES = 8
#: composed windows (grid points) the refinement may go to: a finer grid than this is not tried
_REFINE_WINDOW = 1 << 24
#: queries with a delta (target, or upper bound found) below this use the tilted composition
_TILT_BELOW = 1e-12
#: delta queries whose (untilted) upper bound is below this use the tilted composition
_TILT_BELOW_DELTA = 1e-14
#: the smallest delta scale the tails are set for (tails about 1e-4 rtol of it): delta below it is reported as an
#: upper bound near it with lower end 0 (the float range ends at 1e-308)
_SCALE_MIN = 1e-280
#: epsilon queries at a delta at least this may use the FFT power where the
#: spectral composition would cost more (short compositions; issue 35 item 6)
_PREFER_FFT_ABOVE = 1e-8


@register(
    "pld",
    label="PLD",
    answer="bracket",
    events=COMMON_EVENTS,
    cost="moderate",
    rank=10,
    color="#1f77b4",
    help="privacy-loss distribution (FFT), certified lower/upper bracket",
)
class PLDAccountant(Accountant):
    """Privacy-loss-distribution accountant with certified brackets.

    ``get_delta`` / ``get_epsilon`` return the pessimistic (upper) value in ``value`` and the bracket in
    ``lower``/``upper``. Supports any :class:`~dputils.mechanisms.Mechanism` of this package, heterogeneous
    compositions included.

    **Grid choice.** With the default grid each query starts at discretization 1e-4 and refines it (a width
    ``h * min(1/2, max(1/64, rtol / (2 w)))`` after a bracket of relative width ``w``, since the width is about
    proportional to ``h``) until the certified bracket's relative width ``(upper - lower) / upper`` is at most
    ``rtol``. A grid over the limits (``GridLimitError``: single-step points, window points, memory) or
    unresolved by floating point (``ResolutionError``) on the first pass is coarsened by factors of 4 (up to 1)
    instead, and then not refined. The truncation of each step's loss (``tail``) is lowered to
    ``1e-4 rtol delta / T`` where that is smaller, so the truncated mass never matters, and queries at delta
    below 1e-12 (epsilon queries; for delta queries an upper bound below 1e-14, or below 1e-9 with a lower bound under
    half of it; more than one step) use the exponentially tilted composition (:class:`TiltedPLD`), whose
    rounding error is relative to the tail rather than to the bulk: delta down to 1e-30 and below is answered.
    Where lowering the tails drops the upper bound by more than 1e6 (the truncated tails' own mass, not the
    answer) they go straight to those of delta ``_SCALE_MIN`` = 1e-280; a delta below about 1e-277 is answered
    with that certified upper end and lower end 0 (the float range ends there), without refining. The refinement
    also stops when two grids in a row resolve no lower end. Every pass gives a certified bracket; the narrowest
    one (the smaller upper end among equal widths) is returned. ``details`` says which grid answered
    (``"discretization"``), ``"rtol"``, ``"rtol_met"`` and, when it is False (the refinement stopped at a
    limit, or an explicit grid was too coarse), ``"rtol_reason"``. Each query's grid depends on the query and
    the ledger alone, never on earlier queries. Epsilon queries at delta >= 1e-8 take the FFT power instead of the
    spectral composition where the latter's coefficients would cost 4x more (short compositions, e.g. T 100).

    Args:
        direction: ``"both"`` (default; the worse of add and remove), ``"add"`` or ``"remove"``.
        discretization: grid width ``h`` of the loss axis. Default ``None``: chosen per query as above. A number
            given here is used as is (no refinement, no coarsening); a composition too large for it is refused
            (``GridLimitError``, a ``DPValueError`` naming the coarsest grid that fits).
        tail: single-step loss range: P-mass outside it is at most ``tail`` (and handled exactly); lowered per
            query as above.
        window_tail: Chernoff bound on the composed mass outside the FFT window, per side (lowered likewise).
        rtol: the relative width of the certified bracket the default grid refines to, in (0, 1); default 1e-3.
    """

    name = "pld"
    #: use the spectral composition where it applies (False: always the FFT power; for tests and comparison)
    _spectral = True

    def __init__(
        self,
        direction: str = "both",
        discretization: float | None = None,
        tail: float = 1e-20,
        window_tail: float = 1e-20,
        rtol: float = 1e-3,
    ) -> None:
        super().__init__(direction)
        self.auto_h = discretization is None
        self.h = _H_DEFAULT if discretization is None else check_positive("discretization", discretization)
        for tname, tval in (("tail", tail), ("window_tail", window_tail)):  # tail masses in (0, 1e-3]
            if not 0 < check_positive(tname, tval) <= 1e-3:
                raise DPValueError(f"{tname} must be in (0, 0.001], got {float(tval)!r}")
        if not 0 < check_positive("rtol", rtol) < 1:
            raise DPValueError(f"rtol must be in (0, 1), got {float(rtol)!r}")
        self.tail = float(tail)
        self.window_tail = float(window_tail)
        self.rtol = float(rtol)
        #: compositions by (direction, h, tail, window_tail, tilt); ``_cache`` maps a direction to the one that
        #: answered the last query
        self._grids: dict[tuple, _DirectionPLD] = {}
        self._cache: dict[str, _DirectionPLD] = {}

    def _check_supported(self, mechanism) -> None:
        if not isinstance(mechanism, Mechanism):
            raise DPValueError(f"mechanism must be a dputils.mechanisms.Mechanism, got {type(mechanism).__name__}")
        for d in self.directions:
            if not getattr(mechanism.pair(d), "has_tails", True):
                raise DPValueError(
                    f"pld: {type(mechanism).__name__} has no privacy-loss tails to discretize "
                    "(use the spa or edgeworth accountant)"
                )

    def _invalidate(self) -> None:
        self._grids.clear()
        self._cache.clear()

    def _merged(self) -> dict[Mechanism, int]:
        self._require_ledger()
        merged: dict[Mechanism, int] = {}
        for mech, count in self.ledger:
            merged[mech] = merged.get(mech, 0) + count
        return merged

    def _parts(self, direction: str, h: float, tail: float):
        return [(discretize(m.pair(direction), h, tail), c) for m, c in self._merged().items()]

    def _direction(
        self,
        direction: str,
        h: float | None = None,
        tail: float | None = None,
        wtail: float | None = None,
        tilt=None,
        prefer_fft: bool = False,
    ) -> _DirectionPLD:
        """The composition of one direction on grid ``h`` with truncation ``tail``, window tail ``wtail``,
        ``tilt`` (a number, or a callable of the discretized parts giving it) and ``prefer_fft`` (see
        :func:`~dputils.accountants.pld._compose._compose`), cached. Raises GridLimitError when the grid is over
        the limits."""
        h = self.h if h is None else h
        tail = self.tail if tail is None else tail
        wtail = self.window_tail if wtail is None else wtail
        parts = None
        if callable(tilt):
            parts = self._parts(direction, h, tail)
            tilt = tilt(parts)
        tilt = float(tilt or 0.0)
        key = (direction, h, tail, wtail, tilt, prefer_fft)
        if key not in self._grids:
            other = ("add" if direction == "remove" else "remove",) + key[1:]
            if other in self._grids and all(getattr(m, "symmetric", False) for m, _ in self.ledger):
                # symmetric mechanisms: both directions have the same privacy-loss distribution
                self._grids[key] = self._grids[other]
            else:
                if parts is None:
                    parts = self._parts(direction, h, tail)
                self._grids[key] = _DirectionPLD(parts, wtail, self._spectral, tilt, prefer_fft)
            if len(self._grids) > 8:  # keep the memory bounded: drop the oldest grids
                for k in list(self._grids)[: len(self._grids) - 8]:
                    del self._grids[k]
        return self._grids[key]

    def window_points(self) -> int:
        """The largest composed window (grid points) among the directions that answered the last query (0 if none).

        A measure of the resolution the accountant worked at: the FFT path holds arrays of this size, the
        spectral path only a few tens of Fourier coefficients of it.
        """
        return max((max(dp.up.window_points, dp.down.window_points) for dp in self._cache.values()), default=0)

    @staticmethod
    def _summation_rtol(dps) -> float:
        r"""Relative error bound of the running sums over the window (``np.cumsum`` / ``lfilter`` of n
        non-negative terms, summed from the small tail upwards): :math:`\gamma_n \le 2 n u` with
        :math:`u = 2^{-53}`, n the largest window. About 1e-9 at 3 million points: invisible for small deltas,
        but near delta = 1 it is the whole answer (38 Gaussians of sigma 0.16 at delta 1 - 1e-12 gave
        epsilon [0, 0] where the exact value is 468.05), so it is counted: delta bounds are widened by it and
        epsilon is solved at delta / (1 +- it)."""
        n = max((max(dp.up.window_points, dp.down.window_points) for dp in dps.values()), default=1)
        return 2.0 * max(n, 1) * 2.0**-53

    # one pass: every direction on one grid ------------------------------------------------------------
    def _tails(self, scale: float) -> tuple[float, float]:
        """(tail, window_tail) for a query whose delta is about ``scale``: the defaults, lowered so that the
        truncated masses (T tail at infinity, 2 window_tail aliased) stay below 1e-4 rtol scale."""
        total = sum(c for _, c in self.ledger)
        small = 1e-4 * self.rtol * max(scale, _SCALE_MIN)
        return max(min(self.tail, small / total), 1e-300), min(self.window_tail, small)

    def _pass(self, quantity: str, x: float, h: float, scale: float, tilted: bool) -> AccountingResult:
        tail, wtail = self._tails(scale)
        if tilted:
            # the window tails are of the tilted PMF: they change delta by 2 wtail e^{K - t eps} (see TiltedPLD),
            # e^{K - t eps} being within a modest factor of delta near the saddle point for smooth losses (not for
            # atoms at the largest loss): the default window_tail, not lowered
            wtail = self.window_tail
            tilt = lambda parts: choose_tilt(parts, quantity, x)  # noqa: E731
        else:
            tilt = 0.0
        # the FFT power where it is cheaper than the spectral coefficients, for deltas its rounding cannot touch
        fast = quantity == "epsilon" and scale >= _PREFER_FFT_ABOVE
        dps = {d: self._direction(d, h, tail, wtail, tilt, fast) for d in self.directions}
        t = self._summation_rtol(dps)
        ups, lows = {}, {}
        for d, dp in dps.items():
            if quantity == "epsilon":
                d_up, d_lo = x / (1 + t), x / (1 - t)
                ups[d] = float(dp.epsilon_upper(d_up))
                lows[d] = min(float(dp.epsilon_lower(d_lo)) if d_lo < 1 else 0.0, ups[d])
            else:
                up = float(dp.delta_upper(x))
                ups[d] = min(1.0, up * (1 + t))
                lo = dp.delta_lower(x, up if up < _TILT_BELOW_DELTA else None)
                lows[d] = min(max(0.0, float(lo) * (1 - t)), ups[d])
        worst = max(ups, key=ups.get)
        up, lo = ups[worst], max(lows.values())
        self._cache = dict(dps)
        # the composed mass at +infinity (from the truncated single-step tails, and the pairs' own)
        details = {"direction": worst, "discretization": h, "_inf": max(float(dp.up.inf_mass) for dp in dps.values())}
        if tilted:
            details["tilt"] = dps[worst].tilt
        return AccountingResult(up, lo, up, "upper-bound", self.name, quantity, details)

    def _pass_any(self, quantity: str, x: float, h: float, hint: tuple[float, bool] | None) -> AccountingResult:
        """One pass at grid h: untilted, or tilted for tiny deltas (also where the untilted one cannot
        resolve the query). Delta queries set the tails (and the path) from an upper bound: that of the
        previous pass (``hint``: its scale and path), else a first pass with the default tails."""
        several = sum(c for _, c in self.ledger) > 1
        if quantity == "epsilon":
            if several and x < _TILT_BELOW:
                return self._pass(quantity, x, h, x, True)
            try:
                return self._pass(quantity, x, h, x, False)
            except ResolutionError:
                if not several:
                    raise
                return self._pass(quantity, x, h, x, True)
        scale, tilted = hint if hint is not None else (1.0, False)
        res = self._pass(quantity, x, h, scale, tilted)
        for _ in range(4):  # tails and path from the last upper bound, until they are right for it
            if res.upper <= 0.0:
                break
            # tilted below 1e-14, or below 1e-9 where the untilted bracket lost the answer to rounding
            lost = res.upper < 1e-9 and res.lower < 0.5 * res.upper
            want = several and (res.upper < _TILT_BELOW_DELTA or lost)
            # tails at most 10x too large for the answer keep their mass below 1e-3 rtol of it
            tails_ok = res.upper > 0.1 * scale or self._tails(res.upper) == self._tails(scale)
            if tails_ok and tilted == want:
                break
            # an upper bound that fell by more than 1e6 when the tails were lowered and is mostly the composed mass
            # at +infinity is the truncated tails' own mass (T tail), not the answer: go straight to the smallest
            # tails (issue 35: 10,000 Gaussians of sigma 100 at eps 100, exact delta 6.149e-2155, took ~10 passes
            # of 1e-10 each)
            floor = res.upper < 1e-6 * scale and res.details.get("_inf", 0.0) >= 0.5 * res.upper
            scale, tilted = (_SCALE_MIN if floor else res.upper), want
            res = self._pass(quantity, x, h, scale, tilted)
        res.details["_hint"] = (scale, tilted)
        res.details.pop("_inf", None)
        return res

    @staticmethod
    def _rel_width(res: AccountingResult) -> float:
        return (res.upper - res.lower) / res.upper if res.upper > 0 else 0.0

    def _query(self, quantity: str, x: float) -> AccountingResult:
        """The grid loop (see the class docstring)."""
        self._require_ledger()
        h = self.h
        best, reason, coarsened, hint = None, None, False, None
        for _ in range(_MAX_PASSES):
            try:
                res = self._pass_any(quantity, x, h, hint)
                hint = res.details.pop("_hint", None)
                res.details.pop("_inf", None)
            except (GridLimitError, ResolutionError) as exc:
                if not self.auto_h:
                    raise
                if best is None:  # the first grid does not fit or cannot resolve: coarser
                    if h * 4 > 1.0:
                        raise
                    h, coarsened = h * 4, True
                    continue
                reason = f"refinement stopped at discretization {h:.3g}: {exc}"
                break
            w = self._rel_width(res)
            no_lower = best is not None and res.lower <= 0.0 and best.lower <= 0.0
            if best is None or w < self._rel_width(best) or (w == self._rel_width(best) and res.upper < best.upper):
                best = res
            if w <= self.rtol:
                break
            if quantity == "delta" and res.upper < 1e3 * _SCALE_MIN:
                reason = (
                    f"delta is below {1e3 * _SCALE_MIN:.0e}, near the end of the floating-point range: the upper end "
                    "is certified, the lower end 0 (a finer grid cannot resolve it)"
                )
                break
            if no_lower:
                reason = f"no lower end resolved at two grids (down to {h:.3g}); the upper end is certified"
                break
            if not self.auto_h:
                reason = f"the explicit discretization {h:g} gives a relative width of {w:.3g}"
                break
            if coarsened:
                reason = f"the grid was coarsened to {h:g} to fit the limits; a finer one does not fit"
                break
            h_next = h * min(0.5, max(1.0 / 64, 0.5 * self.rtol / w))
            n_next = self.window_points() * h / h_next
            if h_next < _H_MIN or n_next > _REFINE_WINDOW:
                reason = (
                    f"the next grid ({h_next:.3g}, about {n_next:.3g} window points) is over the refinement limits "
                    f"(discretization >= {_H_MIN:g}, window <= {_REFINE_WINDOW:,} points)"
                )
                break
            h = h_next
        else:
            reason = f"{_MAX_PASSES} refinements"
        details = dict(best.details, rtol=self.rtol, rtol_met=self._rel_width(best) <= self.rtol)
        if not details["rtol_met"]:
            details["rtol_reason"] = reason
        return AccountingResult(best.value, best.lower, best.upper, best.kind, best.accountant, best.quantity, details)

    def get_delta(self, epsilon: float) -> AccountingResult:
        return self._query("delta", self._checked_epsilon(epsilon))

    def get_epsilon(self, delta: float) -> AccountingResult:
        return self._query("epsilon", self._checked_delta(delta))
