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
(epsilon from delta), ``_pairs`` (one direction's upper and lower compositions and the second certificate);
both composition kinds implement :class:`CertifiedComposition` (``cert_bracket``, ``epsilon_upper``,
``epsilon_lower``, ...), and the accountant is here.
"""

from __future__ import annotations

from ...errors import DPValueError, NumericalError, check_positive
from ...mechanisms import Mechanism
from ..base import Accountant, AccountingResult
from ..registry import COMMON_EVENTS, register
from ._compose import MAX_WINDOW
from ._discretise import DiscretePLD, discretize
from ._fft import ComposedPLD
from ._interface import CertifiedComposition
from ._pairs import _DirectionPLD
from ._spectral import SpectralPLD

__all__ = [
    "PLDAccountant",
    "CertifiedComposition",
    "ComposedPLD",
    "SpectralPLD",
    "DiscretePLD",
    "discretize",
    "MAX_WINDOW",
]


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

    Args:
        direction: ``"both"`` (default; the worse of add and remove), ``"add"`` or ``"remove"``.
        discretization: grid width ``h`` of the loss axis. Default ``None``: 1e-4 (as dp_accounting), made
            coarser (by factors of 4, up to 1) for a direction whose loss range needs more grid points or
            memory than the limits allow; every grid gives a certified bracket, a coarser one is only wider
            (``details["discretization"]`` says which grid answered). A number given here is used as is and
            such a composition is refused, naming the coarsest grid that fits.
        tail: single-step loss range: P-mass outside it is at most ``tail`` (and handled exactly).
        window_tail: Chernoff bound on the composed mass outside the FFT window, per side.
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
    ) -> None:
        super().__init__(direction)
        self.auto_h = discretization is None
        self.h = 1e-4 if discretization is None else check_positive("discretization", discretization)
        self._h_used: dict[str, float] = {}
        self._h_floor = self.h  # the default grid's current width (raised when a query needs a coarser one)
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
                raise DPValueError(
                    f"pld: {type(mechanism).__name__} has no privacy-loss tails to discretize "
                    "(use the spa or edgeworth accountant)"
                )

    def _invalidate(self) -> None:
        self._cache.clear()
        self._h_used.clear()
        self._h_floor = self.h

    def _direction(self, direction: str) -> _DirectionPLD:
        if direction not in self._cache:
            self._require_ledger()
            other = "add" if direction == "remove" else "remove"
            if other in self._cache and all(getattr(m, "symmetric", False) for m, _ in self.ledger):
                # symmetric mechanisms: both directions have the same privacy-loss distribution
                self._cache[direction] = self._cache[other]
                self._h_used[direction] = self._h_used.get(other, self.h)
                return self._cache[direction]
            merged: dict[Mechanism, int] = {}
            for mech, count in self.ledger:
                merged[mech] = merged.get(mech, 0) + count
            h = max(self.h, self._h_floor)
            while True:
                try:
                    parts = [(discretize(m.pair(direction), h, self.tail), c) for m, c in merged.items()]
                    self._cache[direction] = _DirectionPLD(parts, self.window_tail, self._spectral)
                    break
                except DPValueError as exc:
                    # only the grid-size and memory refusals name "discretization"; coarser grids fit them
                    if not self.auto_h or not str(exc).startswith("discretization") or h * 4 > 1.0:
                        raise
                    h *= 4
            self._h_used[direction] = h
        return self._cache[direction]

    def window_points(self) -> int:
        """The largest composed window (grid points) among the directions computed so far (0 if none).

        A measure of the resolution the accountant worked at: the FFT path holds arrays of this size, the
        spectral path only a few tens of Fourier coefficients of it.
        """
        return max((max(dp.up.window_points, dp.down.window_points) for dp in self._cache.values()), default=0)

    def _worst(self, quantity: str, upper_fn, lower_fn) -> AccountingResult:
        """Upper bound of the worse direction and the largest lower bound, over ``self.directions``.

        delta_both(eps) = max over directions, so both its bounds are maxima; eps(delta) likewise. With the
        default grid, a query refused because the floating-point error bound of the composition exceeds
        half of delta is retried on grids 4, 16, ... times coarser (fewer points, less rounding), up to 1.
        """
        while True:
            try:
                return self._worst_once(quantity, upper_fn, lower_fn)
            except NumericalError as exc:
                if not (self.auto_h and "coarser discretization" in str(exc) and self._h_floor * 4 <= 1.0):
                    raise
                self._h_floor = max(self._h_used.values(), default=self._h_floor) * 4
                self._cache.clear()
                self._h_used.clear()

    def _worst_once(self, quantity: str, upper_fn, lower_fn) -> AccountingResult:
        ups, lows = {}, {}
        for d in self.directions:
            dp = self._direction(d)
            ups[d] = float(upper_fn(dp))
            lows[d] = min(float(lower_fn(dp)), ups[d])
        worst = max(ups, key=ups.get)
        up, lo = ups[worst], max(lows.values())
        h = max(self._h_used.get(d, self.h) for d in self.directions)
        return AccountingResult(
            up, lo, up, "upper-bound", self.name, quantity, {"direction": worst, "discretization": h}
        )

    def _summation_rtol(self) -> float:
        r"""Relative error bound of the running sums over the window (``np.cumsum`` / ``lfilter`` of n
        non-negative terms, summed from the small tail upwards): :math:`\gamma_n \le 2 n u` with
        :math:`u = 2^{-53}`, n the largest window. About 1e-9 at 3 million points: invisible for small deltas,
        but near delta = 1 it is the whole answer (38 Gaussians of sigma 0.16 at delta 1 - 1e-12 gave
        epsilon [0, 0] where the exact value is 468.05), so it is counted: delta bounds are widened by it and
        epsilon is solved at delta / (1 +- it)."""
        for d in self.directions:
            self._direction(d)
        return 2.0 * max(self.window_points(), 1) * 2.0**-53

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        res = self._worst("delta", lambda dp: dp.delta_upper(eps), lambda dp: dp.delta_lower(eps))
        t = self._summation_rtol()  # of the grid that answered (_worst may have coarsened it)
        up = min(1.0, res.upper * (1 + t))
        lo = min(max(0.0, res.lower * (1 - t)), up)
        return AccountingResult(up, lo, up, res.kind, res.accountant, res.quantity, res.details)

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        t = self._summation_rtol()
        d_up = delta / (1 + t)
        d_lo = delta / (1 - t)
        res = self._worst(
            "epsilon", lambda dp: dp.epsilon_upper(d_up), lambda dp: dp.epsilon_lower(d_lo) if d_lo < 1 else 0.0
        )
        return res
