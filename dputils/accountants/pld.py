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
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy.signal import lfilter

from ..errors import DPValueError, NumericalError, check_positive
from ..mechanisms import Mechanism, PrivacyLossPair
from ..numerics import log_diff_exp
from ..resources import check_memory
from .base import Accountant, AccountingResult
from .registry import COMMON_EVENTS, register

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

    def loss(self, k: int) -> float:
        """The loss of window point k, (j0 + k) h, without materialising the grid."""
        return (self.j0 + k) * self.h

    @property
    def window_points(self) -> int:
        """Grid points in the composed window."""
        return int(self.masses.size)

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

    def _grid_profile(self, noise: bool) -> np.ndarray:
        """delta at the window points l_k (plus ``noise_pp * beyond(l_k)`` when ``noise``), cached.

        beyond(l_k) = r - e^{-h} (1 - e^{-h r}) / (1 - e^{-h}) with r = n - 1 - k points above l_k.
        """
        cache = self.__dict__.setdefault("_profiles", {})
        if noise not in cache:
            self._prepare()
            D = self._D + self.inf_mass
            if noise:
                n = self.masses.size
                r = np.arange(n - 1, -1, -1, dtype=float)  # points strictly above l_k
                D = D + self.noise_pp * np.maximum(
                    r - math.exp(-self.h) * (-np.expm1(-self.h * r)) / (-math.expm1(-self.h)), 0.0
                )
            cache[noise] = D
        return cache[noise]

    def _locate(self, eps: float) -> tuple[int, float]:
        """(k, a) with eps in (l_{k-1}, l_k] and a = e^{eps - l_k} (k clipped to [0, n])."""
        x = eps / self.h - self.j0
        n = self.masses.size
        if not x < n:  # eps above the last window point (eps / h may be infinite: eps 1e308)
            return n, 0.0
        k = math.ceil(x)
        if k <= 0:
            return 0, math.exp(eps - self.j0 * self.h)
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
            return (
                float((1 - a) * tot + a * self._D[0]) + self.inf_mass
                if a <= 1
                else float(np.dot(self.masses, -np.expm1(np.minimum(eps - self.losses, 0.0)))) + self.inf_mass
            )
        if k >= n:
            return self.inf_mass
        return float((1 - a) * self._A[k - 1] + a * self._D[k]) + self.inf_mass


# ---------------------------------------------------------------------------------------------------------
# Spectral composition: the composed PMF's Fourier coefficients at the few frequencies that matter.
# ---------------------------------------------------------------------------------------------------------

_U = np.finfo(float).eps / 2  # unit round-off
_LOG_DROP = math.log(1e-30)  # |Phi(k)| bound on every dropped frequency


def _pairwise_sum(x: np.ndarray) -> np.ndarray:
    """Sum over axis 0 by halving (zero-padded to a power of two): error <= ceil(log2 n) u sum |x_i|."""
    n = x.shape[0]
    p = 1 << max(0, (n - 1).bit_length())
    if p != n:
        x = np.concatenate([x, np.zeros((p - n,) + x.shape[1:])])
    while x.shape[0] > 1:
        half = x.shape[0] // 2
        x = x[:half] + x[half:]
    return x[0]


def _sym_angle(p: np.ndarray, N: int) -> np.ndarray:
    """2 pi p / N for integers p, reduced exactly to p in (-N/2, N/2] first (|angle| <= pi, rel. error <= 3u)."""
    p = np.mod(p, N)
    p = np.where(2 * p > N, p - N, p)
    return p * (2.0 * math.pi / N)


_HALF_B = 32  # block length of :func:`_half_zeta`


def _half_zeta(w: np.ndarray, N: int, K: int) -> tuple[np.ndarray, int]:
    """H(k) = sum_{j >= 0} w_j d(x j), x = 2 pi k / N, k = 1..K, and the levels of its block sum.

    Blocked: j = aB + b (a >= 0, 0 <= b < B): d(x(aB + b)) = d(x aB) + e^{-ix aB} d(x b), so with
    W_a = sum_b w_ab and I_a = sum_b w_ab d(x b) (a small matrix product),
    H = sum_a [d(x aB) W_a + e^{-ix aB} I_a]. Each d comes from an exactly reduced angle with relative error
    <= 12u and |d(y)| <= |y|, and aB + b = j: every term's rounding is a small multiple of u x w_j j.
    (A (K, A + B) set of sines instead of (K, n); the products are O(K n) multiply-adds.)
    """
    B = _HALF_B
    n = w.size
    A = -(-n // B)
    mp = np.zeros(A * B)
    mp[:n] = w
    mp = mp.reshape(A, B)
    ks = np.arange(1, K + 1, dtype=np.int64)
    Wa = mp.sum(axis=1)
    aB = np.arange(A, dtype=np.int64) * B
    z = np.empty(K, complex)
    kc = max(1, 16_384 // A)  # frequencies per block: (A, kc) temporaries of at most 256 KiB
    for k0 in range(0, K, kc):
        kb = ks[k0 : k0 + kc]
        xb = _sym_angle(np.multiply.outer(np.arange(B, dtype=np.int64), kb), N)  # (B, kc)
        xa = _sym_angle(np.multiply.outer(aB, kb), N)  # (A, kc)
        sb = np.sin(0.5 * xb)
        sa = np.sin(0.5 * xa)
        # matrix products by einsum's own loop, not BLAS: tiny products, and a threaded BLAS only
        # contends with other work (measured 2x slower on a loaded 2-core machine)
        inner = np.einsum("ab,bk->ak", mp, 2.0 * sb * sb) + 1j * np.einsum("ab,bk->ak", mp, np.sin(xb))
        terms = ((2.0 * sa * sa) + 1j * np.sin(xa)) * Wa[:, None] + (np.cos(xa) - 1j * np.sin(xa)) * inner
        z[k0 : k0 + kc] = _pairwise_sum(terms.real) + 1j * _pairwise_sum(terms.imag)
    return z, max(1, (A - 1).bit_length())


class _Part:
    """One discretized PMF, its count, and what the spectral composition needs from it.

    Indices are relative to ``ctr`` (the rounded mean index). ``M1, M2, M3, A1`` are the normalised moments
    E(X-ctr), E(X-ctr)^2, E|X-ctr|^3, E|X-ctr| of the index X (sums of non-negative terms except M1, with
    relative error far below the 1e-9 slack applied: M2 shrunk, M3 and A1 grown, |M1| grown by 1e-9 A1).
    """

    def __init__(self, m: np.ndarray, i0: int, count: int):
        self.m, self.c, self.n = m, count, m.size
        self.L = max(1, (m.size - 1).bit_length())  # levels of the pairwise sums
        self.s = float(_pairwise_sum(m))
        idx = np.arange(m.size, dtype=float)
        self.ctr = int(round(float(_pairwise_sum(m * idx)) / self.s))
        self.i0 = i0
        x = idx - self.ctr
        ax = np.abs(x)
        s = self.s
        self.M1 = float(_pairwise_sum(m * x)) / s
        self.A1 = float(_pairwise_sum(m * ax)) / s * (1 + 1e-9)
        self.M1 = abs(self.M1) + 1e-9 * self.A1
        self.M2 = float(_pairwise_sum(m * x * x)) / s * (1 - 1e-9)
        self.M3 = float(_pairwise_sum(m * ax * ax * ax)) / s * (1 + 1e-9)
        self.x = x.astype(np.int64)

    def taylor(self, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """Bound on sup |phi| over [alpha, beta] (phi = f/s, 0 <= alpha <= beta), +inf where not valid.

        From |e^{iy} - 1 - iy + y^2/2| <= |y|^3/6 with y = w (X - ctr):
        |phi(w)| <= |1 - w^2 M2/2| + |w| |M1| + |w|^3 M3/6, and 1 - w^2 M2/2 is decreasing while w^2 M2 <= 2.
        """
        b = 1.0 - alpha * alpha * self.M2 / 2 + beta * self.M1 + beta**3 * self.M3 / 6
        return np.where(beta * beta * self.M2 <= 2.0, b * (1 + 4 * _U), np.inf)

    def samples(self, Ms: int) -> np.ndarray:
        """Bound on |phi| on each cell [(r - 1/2) 2pi/Ms, (r + 1/2) 2pi/Ms], r = 0..Ms/2.

        phi at the cell centre from an FFT of the PMF folded modulo Ms (exact sampling of the transform),
        plus the FFT's error (a generous 10 log2(Ms) u sqrt(Ms) ||g||_2 / s, from the l2 error bound of
        the FFT), plus the Lipschitz term A1 pi / Ms (|d/dw (phi(w) e^{i w ctr})| <= E|X - ctr| = A1).
        """
        g = np.bincount(np.arange(self.n) % Ms, weights=self.m, minlength=Ms)
        y = np.abs(sp_fft.rfft(g)) / self.s
        err = 10 * math.log2(Ms) * _U * math.sqrt(Ms) * math.sqrt(float(np.sum(g * g))) / self.s
        # the fold: each bin is a running sum of at most ceil(n / Ms) masses, error <= ceil(n / Ms) u times
        # their total, so the folded sequence is off by at most that times s in l1 and its transform too;
        # dividing by the computed s (L levels of pairwise sums) adds (L + 2) u relative
        err += (-(-self.n // Ms) + self.L + 2) * _U * 1.01
        return y * (1 + 4 * _U) + err + self.A1 * math.pi / Ms * (1 + 4 * _U)

    def zeta(self, N: int, K: int) -> tuple[np.ndarray, np.ndarray]:
        """zeta(k) = 1 - f(k)/s for k = 1..K (f(k) = sum_i m_i e^{-2 pi i k (i - ctr)/N}) and an error bound.

        With x = 2 pi k/N and d(y) = 1 - e^{-iy} = 2 sin^2(y/2) + i sin y, s zeta = sum_i m_i d(x (i - ctr)).
        The two sides of ctr are summed separately, as H(right) + conj(H(left)) (d(-y) = conj d(y)), where
        H(w) = sum_{j >= 0} w_j d(x j) for the masses at distance j = |i - ctr|; see :func:`_half_zeta`.
        Every rounding error of H is at most a multiple of u x sum_j w_j j (exactly, no blocking overhead),
        so |computed - exact| <= (B + L_a + 32) u x s A1 in total, and the division by the computed s adds
        (L + 3) u |zeta| (L: levels of the pairwise sum giving s).
        """
        x = self.x  # i - ctr, increasing by 1; ctr (the rounded mean) lies inside [x[0], x[-1]]
        c0 = int(-x[0])
        right = self.m[c0:]  # distances 0, 1, ...
        left = np.concatenate([[0.0], self.m[:c0][::-1]])  # distances 0 (empty), 1, 2, ...
        hr, La_r = _half_zeta(right, N, K)
        hl, La_l = _half_zeta(left, N, K)
        z = (hr + np.conj(hl)) / self.s
        ks = np.arange(1, K + 1, dtype=np.int64)
        theta = ks * (2.0 * math.pi / N)
        La = max(La_r, La_l) + 1
        err = ((_HALF_B + La + 32) * _U * theta * self.A1 + (self.L + 3) * _U * np.abs(z)) * 1.01
        return z, err


class SpectralPLD:
    """A composed PMF on the window [j0, j0 + N) represented by its Fourier coefficients at |k| <= K.

    With period N equal to the window length, the circular (aliased) composition of the parts is
    circ[r] = (1/N) sum_k F(k) e^{2 pi i k r / N}, F(k) = prod_p f_p(k)^{c_p} = S Phi(k) with
    S = prod_p s_p^{c_p} (the total finite mass) and Phi(k) = prod_p (1 - zeta_p(k))^{c_p}. The window
    masses are circ at the window points, as in the FFT path. For delta(eps) only the hockey-stick sum is
    needed: sum_{j > eps} (1 - e^{eps - l_j}) circ_j = (S/N) sum_k Phi(k) V(k), where V(k) is a pair of
    geometric sums in closed form. Frequencies with |k| > K are dropped: a bound on |phi_p| (Taylor near
    zero, FFT samples plus a Lipschitz term elsewhere; see :class:`_Part`) shows |Phi(k)| <= 1e-30 there,
    and |V(k)| <= V(0), so they change delta by at most 1e-30 V(0). Every rounding error is bounded (see
    :meth:`_bounds`); the bounds are relative to zeta, not to 1, so they do not grow like T u as the FFT
    power's do.
    """

    def __init__(self, h, j_lo, N, offset, parts, K, inf_mass, outside):
        self.h, self.j0, self.N, self.offset, self.K = h, j_lo, N, offset, K
        self.inf_mass, self.outside = inf_mass, outside
        logS = sum(p.c * math.log(p.s) for p in parts)
        slack = sum(p.c * (p.L + 3) * _U for p in parts) + 4 * _U * abs(logS) + 4 * _U
        self.S, self.S_hi, self.S_lo = math.exp(logS), math.exp(logS + slack), math.exp(logS - slack)
        if K == 0:
            self.phi = np.zeros(0, complex)
            self.phi_err = np.zeros(0)
            return
        logphi = np.zeros(K, complex)
        lam = np.zeros(K)
        absl = np.zeros(K)
        bad = np.zeros(K, bool)
        upper_mod = np.zeros(K)
        for p in parts:
            z, dz = p.zeta(N, K)
            om = 1.0 - z
            am = np.abs(om)
            with np.errstate(divide="ignore", invalid="ignore"):
                lr = 0.5 * np.log1p(-2.0 * z.real + z.real**2 + z.imag**2)
                li = np.arctan2(-z.imag, 1.0 - z.real)
                az = np.abs(z)
                # rounding of log1p(-2 Re + |z|^2) / 2 and atan2(-Im, 1 - Re): relative to the result, plus
                # the argument's rounding propagated (<= 3u (|z| + |z|^2) / |1 - z|^2 and u |z| / |1 - z|)
                ev = 8 * _U * (az + az * az) / (am * am) + 3 * _U * np.hypot(lr, li)
                prop = dz / (am - dz)
            bad |= ~(am > dz) | ~np.isfinite(lr)
            logphi += p.c * np.where(bad, 0.0, lr + 1j * li)
            lam += p.c * (np.where(bad, 0.0, prop) + ev)
            absl += p.c * np.where(bad, 0.0, np.hypot(lr, li))
            upper_mod += p.c * np.log(am + dz)
        lam += (len(parts) + 3) * _U * absl + 4 * _U
        bad |= ~np.isfinite(lam) | (lam > 1.0)
        phi = np.exp(logphi)
        err = np.expm1(np.where(bad, 0.0, lam)) * np.abs(phi) * (1 + 1e-6)
        # unresolved coefficients: value 0, error the bound on the modulus
        self.phi = np.where(bad, 0.0, phi)
        self.phi_err = np.where(bad, np.exp(np.minimum(upper_mod, 0.0)), err)
        self._theta = np.arange(1, K + 1) * (2.0 * math.pi / N)
        self._ks = np.arange(1, K + 1, dtype=np.int64)

    def _bounds(self, eps: float) -> tuple[float, float]:
        """(D, E): sum_{window j, l_j > eps} (1 - e^{eps - l_j}) circ_j / S lies in [D - E, D + E]."""
        h, N = self.h, self.N
        j_hi = self.j0 + N - 1
        if not eps / h < j_hi:  # eps at or above the last window point (eps / h may be infinite)
            return 0.0, 0.0
        ja = max(self.j0, math.floor(eps / h) + 1)
        while ja * h <= eps:
            ja += 1
        R = j_hi - ja + 1
        if R <= 0:
            return 0.0, 0.0
        a = math.exp(eps - ja * h)
        e_a = 4 * _U * (abs(eps) + abs(ja * h) + 1)  # relative error of a (the exponent's rounding)
        SR = (-math.expm1(-h * R)) / (-math.expm1(-h))
        V0 = R - a * SR
        eV0 = 8 * _U * (R + a * SR) + e_a * a * SR
        D = V0
        # the N - 2K - 1 dropped frequencies: each |Phi(k)| <= 1e-30 and |V(k)| <= V(0) (V is a sum of
        # non-negative weights times unit phases), so together at most (N - 2K - 1) 1e-30 V(0) before the 1/N
        E = eV0 + max(N - 2 * self.K - 1, 0) * math.exp(_LOG_DROP) * (abs(V0) + eV0)
        if self.K:
            th = self._theta
            phiR = _sym_angle(self._ks * R, N)
            psi = _sym_angle(self._ks * ((ja - self.offset) % N), N)
            st = np.sin(0.5 * th)
            sp = np.sin(0.5 * phiR)
            one_z = 2 * st * st - 1j * np.sin(th)
            one_zR = 2 * sp * sp - 1j * np.sin(phiR)
            eh, ehR = math.exp(-h), math.exp(-h * R)
            one_w = (-math.expm1(-h) + eh * 2 * st * st) - 1j * eh * np.sin(th)
            one_wR = (-math.expm1(-h * R) + ehR * 2 * sp * sp) - 1j * ehR * np.sin(phiR)
            Gz = one_zR / one_z
            Gw = one_wR / one_w
            V = np.exp(1j * psi) * (Gz - a * Gw)
            aV = np.abs(V)
            eV = 64 * _U * (np.abs(Gz) + a * np.abs(Gw) + aV) + e_a * a * np.abs(Gw)
            aphi = np.abs(self.phi)
            D += 2.0 * float(np.sum((self.phi * V).real))
            E += 2.0 * float(np.sum(self.phi_err * (aV + eV) + aphi * eV))
            E += (self.K + 4) * _U * 1.01 * (abs(V0) + 2.0 * float(np.sum(aphi * aV)))
        return D / N, E / N * (1 + 4 * _U)

    def cert_upper(self, eps: float) -> float:
        """Certified upper bound on delta(eps) of the composed PMF (window tails and infinity included)."""
        return self._upper(*self._bounds(eps))

    def cert_lower(self, eps: float) -> float:
        """Certified lower bound on delta(eps) of the composed PMF."""
        return self._lower(*self._bounds(eps))

    def cert_bracket(self, eps: float) -> tuple[float, float]:
        """(cert_lower, cert_upper) at eps from one evaluation of the spectral sums."""
        D, E = self._bounds(eps)
        return self._lower(D, E), self._upper(D, E)

    def _upper(self, D: float, E: float) -> float:
        return min(1.0, self.S_hi * max(D + E, 0.0) * (1 + 2 * _U) + self.inf_mass + self.outside)

    def _lower(self, D: float, E: float) -> float:
        return self.S_lo * max(D - E, 0.0) * (1 - 2 * _U) + self.inf_mass - self.outside

    def plain(self, eps: float) -> float:
        """The estimate without error terms (for the resolution check)."""
        return self.S * max(self._bounds(eps)[0], 0.0) + self.inf_mass

    def top(self) -> float:
        return (self.j0 + self.N) * self.h

    @property
    def window_points(self) -> int:
        """Grid points in the composed window (the period N; only 2K + 1 coefficients are stored)."""
        return int(self.N)


def _spectral(
    parts: list[tuple[np.ndarray, int, int]],
    h: float,
    j_lo: int,
    j_hi: int,
    offset0: int,
    inf_mass: float,
    outside: float,
) -> SpectralPLD | None:
    """The spectral composition when few frequencies suffice, else None (the caller uses the FFT path).

    parts: (masses, absolute grid index of masses[0], count). The kept set |k| <= K is the smallest for
    which every cell of frequencies beyond 2 pi K / N has prod_p bound_p^{c_p} <= 1e-30.
    """
    N = j_hi - j_lo + 1
    ps = [_Part(m, i0, c) for m, i0, c in parts]
    if any(p.s <= 0 for p in ps):
        return None
    A1 = max(p.A1 for p in ps)
    Ms = 1 << int(min(20, max(12, math.ceil(math.log2(500 * math.pi * A1 + 1)))))
    d = 2 * math.pi / Ms
    r = np.arange(Ms // 2 + 1)
    lo = np.maximum(r - 0.5, 0.0) * d
    hi = (r + 0.5) * d
    samp = [p.samples(Ms) for p in ps]

    def cell_log(alpha: np.ndarray, idx: np.ndarray) -> np.ndarray:
        tot = np.zeros(idx.size)
        for p, sm in zip(ps, samp):
            b = np.minimum(np.minimum(sm[idx], p.taylor(alpha, hi[idx])), 1.0)
            with np.errstate(divide="ignore"):
                tot += p.c * np.log(b)
        return tot

    lam = cell_log(lo, r)
    suf = np.maximum.accumulate(lam[::-1])[::-1]  # max over cells >= r
    ok = np.concatenate([suf[1:], [-np.inf]]) <= _LOG_DROP  # every cell after r is fine
    if not ok.any():
        return None
    r0 = int(np.argmax(ok))
    if lam[r0] <= _LOG_DROP:
        om_K = lo[r0]
    elif cell_log(np.array([hi[r0]]), np.array([r0]))[0] > _LOG_DROP:
        om_K = hi[r0]
    else:
        a, b = lo[r0], hi[r0]
        for _ in range(50):
            mid = 0.5 * (a + b)
            if cell_log(np.array([mid]), np.array([r0]))[0] <= _LOG_DROP:
                b = mid
            else:
                a = mid
        om_K = b
    K = int(math.floor(om_K * N / (2 * math.pi) * (1 + 1e-12))) + 1
    if 2 * K + 1 > N // 4 or K * sum(p.n for p in ps) > 4e7:
        return None
    offset = offset0 + sum(p.c * p.ctr for p in ps)
    return SpectralPLD(h, j_lo, N, offset, ps, K, inf_mass, outside)


def _composed_inf_mass(parts: list[tuple[float, int]], round_up: bool) -> float:
    """1 - prod_p (1 - x_p)^{c_p}: the probability that at least one of the composed steps has infinite loss.

    Computed as -expm1(sum_p c_p log1p(-x_p)), accurate to a few ulps even when every x_p is tiny (the
    direct product rounds (1 - 1e-20)^{c} to 1 and loses the mass c x entirely: 1e-13 at c = 1e7). Each log1p
    and product has relative error <= 2u, the sum of P terms (P + 1) u, and -expm1 turns a relative error r of
    its argument into at most r (|y| e^{-y} / (1 - e^{-y}) <= 1), so the result is within (P + 4) u relative:
    it is inflated (``round_up``, for the upper PMF) or deflated (lower PMF) by 8 (P + 4) u to be a bound.
    """
    L = 0.0
    for x, c in parts:
        if not 0.0 <= x <= 1.0:
            raise NumericalError(f"infinite-loss mass {x!r} outside [0, 1]")
        if x >= 1.0:
            return 1.0
        L += c * math.log1p(-x)
    v = -math.expm1(L)
    slack = 8 * (len(parts) + 4) * _U
    return min(1.0, v * (1 + slack)) if round_up else max(0.0, v * (1 - slack))


def _compose(
    parts: list[tuple[DiscretePLD, int]], which: str, window_tail: float, spectral: bool = True
) -> ComposedPLD | SpectralPLD:
    """Composition of the 'upper' or 'lower' PMFs of the parts, each self-composed ``count`` times.

    Spectral (:class:`SpectralPLD`) when few Fourier coefficients suffice (long compositions) and
    ``spectral`` is set, else one FFT power on the window (:class:`ComposedPLD`).
    """
    h = parts[0][0].h
    t = np.logspace(-2, 2.5, 28)
    K_pos = np.zeros_like(t)
    K_neg = np.zeros_like(t)
    offset = 0
    span = 0
    for d, c in parts:
        m = d.upper if which == "upper" else d.lower
        K_pos += c * _log_mgf_grid(m, d.i0, h, t)
        K_neg += c * _log_mgf_grid(m, d.i0, h, -t)
        offset += c * d.i0
        span += c * (m.size - 1)
    inf_mass = _composed_inf_mass(
        [(d.upper_inf if which == "upper" else d.lower_inf, c) for d, c in parts], round_up=(which == "upper")
    )
    # rounding of the log-MGFs (~1e-13 relative): inflate them, which only widens the window
    K_pos = K_pos + 1e-9 * (1.0 + np.abs(K_pos))
    K_neg = K_neg + 1e-9 * (1.0 + np.abs(K_neg))
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
            f"discretization of at least {h * n_win / MAX_WINDOW:.2g}"
        )
    if spectral:
        sp = _spectral(
            [(d.upper if which == "upper" else d.lower, d.i0, c) for d, c in parts],
            h,
            j_lo,
            j_hi,
            offset,
            inf_mass,
            2.0 * window_tail,
        )
        if sp is not None:
            return sp
    # the FFT length must hold every single-part support as well as the window
    n_fft = sp_fft.next_fast_len(max(n_win, max(d.upper.size for d, _ in parts)), real=True)
    # about 80 bytes per point at the peak (input, half spectrum, powers, inverse, window, indices)
    check_memory(
        "discretization",
        80.0 * n_fft,
        f"the PLD's FFT window of {n_fft:,} points",
        hint=f"use a coarser discretization than {h:g}",
    )
    spec = None
    for d, c in parts:
        m = d.upper if which == "upper" else d.lower
        a = np.zeros(n_fft)
        a[: m.size] = m
        f = sp_fft.rfft(a)
        fc = f**c if c > 1 else f
        spec = fc if spec is None else spec * fc
    circ = sp_fft.irfft(spec, n_fft)
    # linear index K = j - offset sits at circ[K mod n_fft]: the window is one contiguous run of the
    # circular array, wrapping at most once (n_win <= n_fft)
    start = (j_lo - offset) % n_fft
    if start + n_win <= n_fft:
        window = circ[start : start + n_win].copy()
    else:
        window = np.concatenate([circ[start:], circ[: start + n_win - n_fft]])
    del circ
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
    noise_pp = max(-min(float(window.min()), 0.0), u * growth * total_abs / n_fft)
    if which == "upper":
        window = np.maximum(window, 0.0)
    outside = 2.0 * window_tail
    return ComposedPLD(h, j_lo, window, inf_mass, outside, noise_pp)


#: Spectral compositions with windows up to this many points get the FFT power of the same PMFs as a second
#: certificate where they need one (see :class:`_DirectionPLD`); the FFT power is built on first need.
_BOTH_WINDOW = 1 << 17
#: A query needs the second certificate when the spectral composition refuses it or when its own rounding width
#: at the query exceeds this fraction of the answer. The spectral path is almost always the tighter one; the
#: FFT power was tighter (by ~1e-6 relative in epsilon) where the spectral width was 3e-4 of delta (atlas point
#: sigma 4, q 0.01, T 100, delta 1e-10), and the benchmark's widths are 1e-8..5e-8 of delta.
_PAIR_RATIO = 1e-5


def _rounding_width(c: SpectralPLD, eps: float) -> float:
    """Width of a spectral composition's certified bracket on delta(eps) due to its rounding (tails excluded)."""
    lo, up = c.cert_bracket(eps)
    return max(up - lo - 2.0 * c.outside, 0.0)


class _DirectionPLD:
    """The upper and lower composed PMFs of one direction, plus the rounding-error MGF.

    ``up``/``down`` are the compositions of the upper and lower PMFs (spectral or FFT power, see
    :func:`_compose`). A spectral one on a window of at most ``_BOTH_WINDOW`` points gets the FFT power of
    the same PMFs as a second certificate for a query where it refuses or where its own rounding width
    exceeds ``_PAIR_RATIO`` of the answer; the bound is then the better of the two (a minimum of upper bounds,
    a maximum of lower bounds). Whether the FFT power is used depends on the query alone, never on earlier
    queries (it is only built once): the same question always gets the same answer. Built on first need, the
    FFT power costs no memory in the common case.
    """

    def __init__(self, parts: list[tuple[DiscretePLD, int]], window_tail: float, spectral: bool = True):
        self._window_tail = window_tail
        self.up = _compose(parts, "upper", window_tail, spectral)
        self.down = _compose(parts, "lower", window_tail, spectral)
        self._fft: dict[str, ComposedPLD] = {}
        # the single-step PMFs are kept only where an FFT power may still be built from them
        self._parts = parts if self._pairable("upper") or self._pairable("lower") else None
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
        self._hint: dict[float, float] = {}

    def s_eta(self, eta: float) -> float:
        """The largest s with exp(log M + lam s) <= eta, best over the lam grid (>= 0)."""
        return max(0.0, float(np.max((math.log(eta) - self._logM) / self._lam)))

    def _pairable(self, which: str) -> bool:
        c = self.up if which == "upper" else self.down
        return isinstance(c, SpectralPLD) and c.window_points <= _BOTH_WINDOW

    def _fft_power(self, which: str) -> ComposedPLD:
        if which not in self._fft:
            self._fft[which] = _compose(self._parts, which, self._window_tail, False)
        return self._fft[which]

    @staticmethod
    def _delta_upper_one(u, eps: float) -> float:
        if isinstance(u, SpectralPLD):
            return u.cert_upper(eps)
        return min(1.0, u.delta(eps) + u.outside + u.noise(eps))

    def _delta_lower_one(self, d, eps: float) -> float:
        best = 0.0
        for eta in _ETAS_ABS:
            e = eps - self.s_eta(eta)
            if isinstance(d, SpectralPLD):
                v = d.cert_lower(e) - eta
            else:
                v = d.delta(e) - eta - d.outside - d.noise(e)
            best = max(best, v)
        return best

    def delta_upper(self, eps: float) -> float:
        if not self._pairable("upper"):
            return self._delta_upper_one(self.up, eps)
        lo, v = self.up.cert_bracket(eps)
        if v - lo - 2.0 * self.up.outside > _PAIR_RATIO * v:
            v = min(v, self._delta_upper_one(self._fft_power("upper"), eps))
        return v

    def delta_lower(self, eps: float) -> float:
        v = self._delta_lower_one(self.down, eps)
        if self._pairable("lower"):
            lo, up = self.down.cert_bracket(eps)
            if up - lo - 2.0 * self.down.outside > _PAIR_RATIO * max(v, up):
                v = max(v, self._delta_lower_one(self._fft_power("lower"), eps))
        return v

    def epsilon_upper(self, delta: float) -> float:
        if delta <= self.up.outside + self.up.inf_mass:  # below both paths' floor: the refusal, no FFT power
            return self._epsilon_upper_one(self.up, delta)
        try:
            eps = self._epsilon_upper_one(self.up, delta)
            pair = self._pairable("upper") and _rounding_width(self.up, eps) > _PAIR_RATIO * delta
        except NumericalError as exc:
            if not self._pairable("upper"):
                raise
            eps, refusal, pair = None, exc, True
        if pair:
            try:
                e2 = self._epsilon_upper_one(self._fft_power("upper"), delta)
                eps = e2 if eps is None else min(eps, e2)
            except NumericalError:
                if eps is None:
                    raise refusal from None
        self._hint[delta] = eps
        return eps

    @staticmethod
    def _epsilon_upper_one(u, delta: float) -> float:
        floor = u.outside + u.inf_mass
        if delta <= floor:
            raise NumericalError(
                f"delta={delta:g} is below the PLD accountant's resolution ({floor:.2g}: infinite-loss mass and "
                "window tails); use the saddle-point or Edgeworth accountant"
            )
        if isinstance(u, SpectralPLD):
            eps = _bisect_upper(u, delta)
            err = u.cert_upper(eps) - u.plain(eps)
        else:
            eps = _invert(u, delta - u.outside, noise=True)
            err = u.outside + u.noise(eps)
        if err > 0.5 * delta:
            path = "spectral" if isinstance(u, SpectralPLD) else "FFT"
            raise NumericalError(
                f"delta={delta:g} is below the PLD accountant's resolution: the bound on the floating-point error "
                f"of the {path} composition ({err:.2g} at epsilon={eps:.6g}) exceeds half of delta; use a coarser "
                "discretization, or the saddle-point or Edgeworth accountant"
            )
        return eps

    def _epsilon_lower_one(self, d, delta: float) -> float:
        best = 0.0
        guess = self._hint.get(delta)  # the upper bound's answer, when computed: the lower one is close
        for eta in delta * _ETA_FACTORS:
            if isinstance(d, SpectralPLD):
                e = _bisect_lower(d, delta + eta, guess)
                guess = e if e is not None else guess
            else:
                e = _invert_lower(d, delta + eta + d.outside)
            if e is not None:
                best = max(best, e + self.s_eta(eta))
        return best

    def epsilon_lower(self, delta: float) -> float:
        best = self._epsilon_lower_one(self.down, delta)
        if self._pairable("lower") and _rounding_width(self.down, best) > _PAIR_RATIO * delta:
            best = max(best, self._epsilon_lower_one(self._fft_power("lower"), delta))
        return best


def _bisect_upper(c: SpectralPLD, target: float) -> float:
    """An eps >= 0 with ``c.cert_upper(eps) <= target``, as small as bisection to 1e-12 relative gives.

    At the window's top only infinity and the tails remain, which the caller checked to be below target;
    the returned point is always one where the inequality was evaluated to hold.
    """
    if c.cert_upper(0.0) <= target:
        return 0.0
    lo, hi = 0.0, c.top()
    if c.cert_upper(hi) > target:
        raise NumericalError("delta target not reached inside the PLD window")
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if c.cert_upper(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _bisect_lower(c: SpectralPLD, target: float, guess: float | None = None) -> float | None:
    """An eps with ``c.cert_lower(eps) >= target``, as large as bisection gives, or None.

    With a ``guess`` the bracket is first found by steps of h, 2h, 4h, ... around it (fewer evaluations);
    the answer is always a point where the inequality was evaluated to hold.
    """
    lo, hi = (c.j0 - 1) * c.h, c.top()
    if c.cert_lower(lo) < target:
        return None
    if c.cert_lower(hi) >= target:
        return hi
    if guess is not None and lo < guess < hi:
        step = c.h
        if c.cert_lower(guess) >= target:
            lo = guess
            while lo + step < hi and c.cert_lower(lo + step) >= target:
                lo, step = lo + step, 2 * step
            hi = min(hi, lo + step)
        else:
            hi = guess
            while hi - step > lo and c.cert_lower(hi - step) < target:
                hi, step = hi - step, 2 * step
            lo = max(lo, hi - step)
    while hi - lo > 1e-12 * max(1.0, abs(lo), abs(hi)):
        mid = 0.5 * (lo + hi)
        if c.cert_lower(mid) >= target:
            lo = mid
        else:
            hi = mid
    return lo


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

    D = c._grid_profile(noise)  # delta (+ noise) at the grid points, non-increasing
    lo_eps = 0.0 if clamp_zero else c.loss(-1)
    if total(lo_eps) <= target:
        return lo_eps
    # first k with D[k] <= target
    k = int(np.searchsorted(-D, -target, side="left"))
    if k >= n:
        raise NumericalError("delta target not reached inside the PLD window")
    if k == 0:
        return max(c.loss(0), 0.0) if clamp_zero else c.loss(0)
    # on (l_{k-1}, l_k]: delta + noise = A + p (n - k) - a (m_k + G[k] + p S),  S = sum_{i<n-k} e^{-i h}
    A = c._A[k - 1] + c.inf_mass + p * (n - k)
    S = (-math.expm1(-c.h * (n - k))) / (-math.expm1(-c.h))
    denom = c.masses[k] + c._G[k] + p * S  # = A[k-1] - D[k] - inf (+ noise), without cancellation
    a = (A - target) / denom if denom > 0 else 1.0
    a = min(max(a, math.exp(-c.h)), 1.0)
    l_k = c.loss(k)
    eps = l_k + math.log(a)
    step = 4.0 * math.ulp(max(abs(l_k), c.h))
    for _ in range(30):  # rounding of the piece solve: move right by growing steps, at most to l_k
        if eps >= l_k or total(eps) <= target:
            break
        eps += step
        step *= 2.0
    eps = min(eps, l_k)
    return max(eps, 0.0) if clamp_zero else eps


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


def _build(args: argparse.Namespace) -> PLDAccountant:
    from .registry import mechanism_from_args

    acc = PLDAccountant(direction=args.direction, discretization=args.discretization)
    return acc.compose(mechanism_from_args(args), args.steps)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--discretization", type=float, default=1e-4, help="grid width of the privacy-loss axis (default 1e-4)"
    )


from .registry import register  # noqa: E402

register(
    "pld",
    help="privacy-loss distribution (FFT), certified lower/upper bracket",
    build=_build,
    add_arguments=_add_arguments,
)
