"""Composition: the window of the composed loss (Chernoff bounds on both tails), the composed mass at
infinity, and the choice between the spectral composition and the FFT power (see
:mod:`dputils.accountants.pld`)."""

from __future__ import annotations

import math

import numpy as np

from ...errors import NumericalError
from ._discretise import DiscretePLD, _log_mgf_grid
from ._fft import ComposedPLD, _fft_power
from ._interface import CertifiedComposition, GridLimitError, coarser_discretization
from ._spectral import _U, _spectral
from ._tilt import _tilted

#: Largest composed window (grid points) one FFT composition may use: ~5 GiB and about a minute here.
MAX_WINDOW = 2**26
#: with ``prefer_fft``, the FFT power replaces the spectral composition when K n > this times n_fft log2 n_fft
#: (at T 100, q 0.01, sigma 1, h 1e-4 the ratio is ~10 and the FFT power 3x faster; at T 1000 ~1.5, near parity)
_FFT_RATIO = 4.0
#: with ``prefer_fft``, compositions of at most this many steps go to the FFT power without trying the spectral
#: path: its attempt (Fourier samples of each part on up to 2^20 points) cost ~40% of a 10-step query and it was
#: refused by the cost test at every T <= 10 tried (Gaussian sigma 0.5, 3, 20; subsampled Gaussian (1, 0.01),
#: (0.5, 0.1), (2, 0.5); Laplace 1; first accepted at T 20). The FFT power's bracket is certified as always.
_FFT_ONLY_STEPS = 10


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


def _window(parts: list[tuple[np.ndarray, int, int]], h: float, window_tail: float) -> tuple[int, int, int, int]:
    """(j_lo, j_hi, offset, span) of the composed window: parts are (masses, i0, count); at most ``window_tail``
    of the composed mass lies below j_lo h, and at most as much above j_hi h (Chernoff bounds from the
    log-MGFs, inflated for their rounding).

    Raises:
        GridLimitError: the window has more than ``MAX_WINDOW`` points.
    """
    t = np.logspace(-2, 2.5, 28)
    K_pos = np.zeros_like(t)
    K_neg = np.zeros_like(t)
    offset = 0
    span = 0
    for m, i0, c in parts:
        K_pos += c * _log_mgf_grid(m, i0, h, t)
        K_neg += c * _log_mgf_grid(m, i0, h, -t)
        offset += c * i0
        span += c * (m.size - 1)
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
        raise GridLimitError(
            f"discretization: the composed privacy loss spans [{j_lo * h:.6g}, {j_hi * h:.6g}], {n_win:,} grid points "
            f"at discretization {h:g}, over the limit of {MAX_WINDOW:,} (about a minute and 5 GiB); use a "
            f"discretization of at least {coarser_discretization(h, n_win, MAX_WINDOW):.2g}"
        )
    return j_lo, j_hi, offset, span


def _compose(
    parts: list[tuple[DiscretePLD, int]],
    which: str,
    window_tail: float,
    spectral: bool = True,
    tilt: float = 0.0,
    prefer_fft: bool = False,
) -> CertifiedComposition:
    """Composition of the 'upper' or 'lower' PMFs of the parts, each self-composed ``count`` times.

    One step (a single part of count 1): the PMF itself, exactly (:class:`ComposedPLD` without rounding noise or
    window tails). ``tilt`` > 0: the FFT power of the exponentially tilted PMFs (:class:`TiltedPLD`, relative
    accuracy in the far tail). Otherwise spectral (:class:`SpectralPLD`) when few Fourier coefficients suffice
    (long compositions) and ``spectral`` is set, else one FFT power on the window (:class:`ComposedPLD`).
    ``prefer_fft`` (queries at delta >= 1e-8, where the FFT power's rounding bound is far below any width that
    matters): the FFT power also where the spectral coefficients would cost ``_FFT_RATIO`` times more, and for
    at most ``_FFT_ONLY_STEPS`` steps without trying the spectral path.
    """
    h = parts[0][0].h
    inf_mass = _composed_inf_mass(
        [(d.upper_inf if which == "upper" else d.lower_inf, c) for d, c in parts], round_up=(which == "upper")
    )
    if len(parts) == 1 and parts[0][1] == 1:
        d = parts[0][0]
        m = d.upper if which == "upper" else d.lower
        return ComposedPLD(h, d.i0, np.maximum(m, 0.0), inf_mass, 0.0, 0.0)
    if tilt > 0:
        return _tilted(parts, which, window_tail, tilt, inf_mass, _window)
    masses = [(d.upper if which == "upper" else d.lower, d.i0, c) for d, c in parts]
    j_lo, j_hi, offset, _ = _window(masses, h, window_tail)
    n_win = j_hi - j_lo + 1
    if spectral and not (prefer_fft and sum(c for _, _, c in masses) <= _FFT_ONLY_STEPS):
        sp = _spectral(masses, h, j_lo, j_hi, offset, inf_mass, 2.0 * window_tail, _FFT_RATIO if prefer_fft else None)
        if sp is not None:
            return sp
    return _fft_power(parts, which, h, j_lo, n_win, offset, inf_mass, window_tail)
