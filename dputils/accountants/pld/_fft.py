"""The FFT power: the composed PMF on the whole window by one real FFT per part raised to its count, with a
bound on the floating-point error of every mass (see :mod:`dputils.accountants.pld`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy.signal import lfilter

from ...errors import DPValueError
from ...resources import check_memory
from ._discretise import DiscretePLD
from ._interface import CertifiedComposition, GridLimitError
from ._invert import _invert, _invert_lower


@dataclass
class ComposedPLD(CertifiedComposition):
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

    # the CertifiedComposition interface: delta with the window tails and the floating-point error bound

    path = "FFT"

    def cert_upper(self, eps: float) -> float:
        """delta(eps) + window tails + the floating-point error bound, at most 1."""
        return min(1.0, self.delta(eps) + self.outside + self.noise(eps))

    def cert_lower(self, eps: float, eta: float = 0.0) -> float:
        """delta(eps) - eta - window tails - the floating-point error bound (eta subtracted first)."""
        return self.delta(eps) - eta - self.outside - self.noise(eps)

    def cert_bracket(self, eps: float) -> tuple[float, float]:
        d, e = self.delta(eps), self.noise(eps)
        return d - self.outside - e, min(1.0, d + self.outside + e)

    def _epsilon_upper_and_error(self, delta: float) -> tuple[float, float]:
        eps = _invert(self, delta - self.outside, noise=True)
        return eps, self.outside + self.noise(eps)

    def epsilon_lower(self, target: float, guess: float | None = None) -> float | None:
        return _invert_lower(self, target + self.outside)


def _fft_power(
    parts: list[tuple[DiscretePLD, int]],
    which: str,
    h: float,
    j_lo: int,
    n_win: int,
    offset: int,
    inf_mass: float,
    window_tail: float,
) -> ComposedPLD:
    """The composed 'upper' or 'lower' PMF on the window [j_lo, j_lo + n_win) by one FFT power per part, with
    the bound on each mass's floating-point error (see the module docstring of :mod:`dputils.accountants.pld`).
    """
    # the FFT length must hold every single-part support as well as the window
    n_fft = sp_fft.next_fast_len(max(n_win, max(d.upper.size for d, _ in parts)), real=True)
    # about 80 bytes per point at the peak (input, half spectrum, powers, inverse, window, indices)
    try:
        check_memory(
            "discretization",
            80.0 * n_fft,
            f"the PLD's FFT window of {n_fft:,} points",
            hint=f"use a coarser discretization than {h:g}",
        )
    except DPValueError as exc:  # the same refusal, as the type the grid choice branches on
        raise GridLimitError(str(exc)) from None
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
