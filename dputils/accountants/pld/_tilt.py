r"""Exponential tilting: the far tail of a composed PMF to full relative precision.

The FFT power's rounding error is absolute, about :math:`u \log_2 n\, T` times the largest composed mass, so a
delta far below that (1e-15, 1e-30) is out of its reach. Tilting moves the bulk of the composed PMF to the
answer: with :math:`k_p(t) = \log\sum_i m_{p,i} e^{t l_i}` each part's PMF becomes
:math:`\tilde m_{p,i} = m_{p,i} e^{t l_i - k_p(t)}` (a PMF with mean near the target epsilon when t is the
saddle point), and since :math:`e^{t(l + l')} = e^{tl} e^{tl'}` the composition of the tilted PMFs is the tilt
of the composition: :math:`m_j = \tilde m_j e^{K - t l_j}` with :math:`K = \sum_p c_p k_p(t)`. The FFT power
of the tilted PMFs carries its absolute error bound (:func:`~dputils.accountants.pld._fft._fft_power`) on
:math:`\tilde m_j`; untilted, the error at :math:`l_j` is that bound times :math:`e^{K - t l_j}`, relative to
the masses near the answer, not to the largest one.

The window is chosen for the tilted composition (at most ``window_tail`` of its mass outside on each side);
the aliased tilted mass (at most twice that) lands at window points, and the true mass above the window's top
lies above it, so for :math:`t > 0` they change :math:`\delta(\varepsilon)` by at most
:math:`2\,\mathrm{window\_tail}\, e^{K - t \max(\varepsilon, l_0)}` (:meth:`TiltedPLD.out`; :math:`l_0` the
window's first point). Below the window nothing is known about the untilted mass, so the upper bound there
is 1. Every rounding of the tilt and untilt (logs and exponentials of arguments up to a few thousand) is
bounded relative to the masses (``rel``); masses below 1e-300 (subnormal) are covered by an absolute term.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from ._discretise import DiscretePLD, _log_mgf_grid
from ._fft import ComposedPLD, _fft_power
from ._interface import CertifiedComposition, ResolutionError
from ._invert import _bisect_lower, _bisect_upper

_U = np.finfo(float).eps / 2
#: tilts tried when choosing one (the Chernoff parameter grid; the choice needs no precision). Up to 1e5: the saddle
#: point of a tiny delta with a narrow composed loss is in the thousands (q 0.00038, sigma 4, T 1000 at 1.13e-18:
#: 2818; the grid's old top, 316, left that query without a lower end)
_TILTS = np.logspace(-2, 5, 141)


def choose_tilt(parts: list[tuple[DiscretePLD, int]], quantity: str, target: float) -> float:
    r"""The tilt for a query: the t minimising the Chernoff bound of the upper PMF's composition.

    ``quantity == "epsilon"`` (target delta): :math:`\arg\min_t (K(t) - \log\delta)/t`, whose tilted mean
    :math:`K'(t)` is the Chernoff epsilon, just above the answer; ``"delta"`` (target epsilon):
    :math:`\arg\min_t K(t) - t\varepsilon`, the saddle point (tilted mean at epsilon). Any t > 0 gives
    certified bounds; this one makes them tight.
    """
    h = parts[0][0].h
    K = np.zeros_like(_TILTS)
    for d, c in parts:
        K += c * _log_mgf_grid(d.upper, d.i0, h, _TILTS)
    obj = (K - math.log(target)) / _TILTS if quantity == "epsilon" else K - _TILTS * target
    return float(_TILTS[int(np.argmin(obj))])


class TiltedPLD(CertifiedComposition):
    """A composed PMF on the window [j0, j0 + n) from the FFT power of tilted PMFs (see the module docstring).

    ``hi``/``lo`` are the untilted masses with the FFT's error bound added/subtracted (each capped at 1, which
    no true mass exceeds); the bounds on delta(eps) are their hockey-stick sums, widened by the relative
    rounding ``rel``, the subnormal term and the window tails :meth:`out`.
    """

    path = "tilted FFT"
    outside = 0.0  # the window tails depend on eps here: see out()

    def __init__(self, h, j0, hi, lo, inf_mass, log_out, tilt, rel):
        self.h, self.j0 = h, j0
        self._hi = ComposedPLD(h, j0, hi, 0.0, 0.0, 0.0)
        self._lo = ComposedPLD(h, j0, lo, 0.0, 0.0, 0.0)
        self.inf_mass = inf_mass
        self.tilt, self.rel = tilt, rel
        self._log_out = log_out
        self._under = hi.size * 1e-300

    @property
    def window_points(self) -> int:
        return int(self._hi.masses.size)

    def top(self) -> float:
        return (self.j0 + self.window_points) * self.h

    def out(self, eps: float) -> float:
        """Bound on the change of delta(eps) by the tilted mass outside the window (aliased or above the top)."""
        return math.exp(min(self._log_out - self.tilt * max(eps, self.j0 * self.h), 0.0))

    def cert_upper(self, eps: float) -> float:
        if eps < self.j0 * self.h:  # below the window the untilted mass is not bounded
            return 1.0
        v = self._hi.delta(eps) * (1 + self.rel) + self._under + self.inf_mass + self.out(eps)
        return min(1.0, v)

    def cert_lower(self, eps: float, eta: float = 0.0) -> float:
        return self._lo.delta(eps) * (1 - self.rel) - self._under + self.inf_mass - self.out(eps) - eta

    def cert_bracket(self, eps: float) -> tuple[float, float]:
        return self.cert_lower(eps), self.cert_upper(eps)

    def _epsilon_upper_and_error(self, delta: float) -> tuple[float, float]:
        top = self.top()
        if self.cert_upper(top) > delta:
            raise ResolutionError(
                f"delta={delta:g} is below the PLD accountant's resolution: the tilted window's tails "
                f"({self.out(top):.2g}) and infinite-loss mass ({self.inf_mass:.2g}) exceed it"
            )
        eps = _bisect_upper(self, delta)
        lo, up = self.cert_bracket(eps)
        return eps, up - max(lo, 0.0)

    def epsilon_lower(self, target: float, guess: float | None = None) -> float | None:
        return _bisect_lower(self, target, guess)


def _tilted(
    parts: list[tuple[DiscretePLD, int]],
    which: str,
    window_tail: float,
    tilt: float,
    inf_mass: float,
    window: Callable[..., tuple[int, int, int, int]],
) -> TiltedPLD:
    """The composition of the 'upper' or 'lower' PMFs of ``parts`` tilted by ``tilt`` > 0 (see the module
    docstring); ``inf_mass``: the composed mass at +infinity (untilted). ``window``: the composition's window
    helper (``_compose._window``, passed in so that this module does not import its caller)."""
    _window = window

    h = parts[0][0].h
    tparts = []
    K = 0.0
    K_abs = 0.0
    r_parts = 0.0
    for d, c in parts:
        m = d.upper if which == "upper" else d.lower
        pos = m > 0
        with np.errstate(divide="ignore"):
            lw = np.log(m) + tilt * d.losses
        k = float(logsumexp(lw[pos]))
        mt = np.exp(lw - k)  # 0 where m is 0
        # each tilted mass: the exponent's rounding (a few ulps of each term) plus exp's own, relative
        r_parts += c * 4 * _U * (float(np.max(np.abs(lw[pos]))) + abs(k) + 2.0) * 2.0
        tparts.append((DiscretePLD(h, d.i0, mt, 0.0, mt, np.zeros(0), 0.0), c))
        K += c * k
        K_abs += c * abs(k)
    j_lo, j_hi, offset, _ = _window([(d.upper, d.i0, c) for d, c in tparts], h, window_tail)
    n_win = j_hi - j_lo + 1
    comp = _fft_power(tparts, "upper", h, j_lo, n_win, offset, 0.0, window_tail)
    w, npp = comp.masses, comp.noise_pp
    base = K - tilt * ((j_lo + np.arange(n_win)) * h)
    with np.errstate(divide="ignore"):
        lhi = np.log(w + npp) + base
        llo = np.log(np.maximum(w - npp, 0.0)) + base
    hi = np.exp(np.minimum(lhi, 0.0))
    lo = np.exp(np.minimum(llo, 0.0))
    # the untilt's rounding: the sum K (len(parts) + 1 ulps of sum |c k|), the exponent's terms, exp's own
    fin = np.isfinite(lhi)
    arg = float(np.max(np.abs(lhi[fin]) + np.abs(base[fin]))) if fin.any() else 0.0
    r_untilt = 4 * _U * (arg + (len(parts) + 1) * K_abs + 2.0) * 2.0
    # a composed mass is a sum of products of c tilted masses: relative error at most expm1(sum c r_p)
    rel = math.expm1(r_parts + r_untilt)
    if not rel <= 1e-6:
        raise ResolutionError(f"the tilt {tilt:g} loses too much precision (relative rounding {rel:.2g})")
    log_out = math.log(2.0 * window_tail) + K + 1e-6 + rel
    return TiltedPLD(h, j_lo, hi, lo, inf_mass, log_out, tilt, rel)
