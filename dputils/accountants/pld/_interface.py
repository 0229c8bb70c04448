"""The one interface of a composed PLD: the FFT power (:class:`ComposedPLD`) and the spectral composition
(:class:`SpectralPLD`) both answer the accountant's questions through it, so the pairing of the two
(:class:`_DirectionPLD`) never asks which one it holds."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

from ...errors import DPValueError, NumericalError


class GridLimitError(DPValueError):
    """The grid would need more points or memory than the limits allow; a coarser grid fits.

    The accountant's grid choice branches on this type (never on the message): with the default grid it tries
    a coarser one, or stops refining and reports why."""


class ResolutionError(NumericalError):
    """The certified bracket at this grid cannot resolve the query (the floating-point error bound, or the
    truncated tails, exceed half of delta). The default grid retries coarser (fewer points, less rounding)
    or with smaller tails; an explicit grid refuses."""


def coarser_discretization(h: float, n_points: int, limit: int) -> float:
    """The grid width to advise when ``n_points`` points at width ``h`` are over ``limit``: strictly larger than ``h``.

    The grid covers a fixed loss range of at most ``(n_points - 1) h`` plus up to three guard points, so a width
    ``h' >= h n_points / (limit - 4)`` needs at most ``(n_points - 1) (limit - 4) / n_points + 3 < limit`` points.
    The value is rounded *up* to two significant digits, so that the two digits printed are the advice itself
    (rounding to nearest printed "at least 0.0001" at width 1e-4 when 1.00001e-4 was needed: issue 36).
    """
    need = h * n_points / (limit - 4)
    scale = 10.0 ** (math.floor(math.log10(need)) - 1)
    out = math.ceil(need / scale * (1 - 1e-12)) * scale
    while out <= h:  # the ceiling at two digits is never below need > h; guard the floating-point edge anyway
        out += scale
    return float(f"{out:.2g}") if float(f"{out:.2g}") > h else out


class CertifiedComposition(ABC):
    r"""A composed privacy-loss PMF with certified bounds on its privacy profile and their inverses.

    For the composed PMF :math:`m` on the loss grid (window tails ``outside`` and the mass ``inf_mass`` at
    :math:`+\infty` included), :math:`\delta(\varepsilon) = \sum_j m_j (1 - e^{\varepsilon - l_j})_+ +
    m_\infty` is bracketed by :meth:`cert_lower` and :meth:`cert_upper` with every floating-point error
    bounded; :meth:`epsilon_upper` and :meth:`epsilon_lower` invert those bounds. Implementations:
    :class:`~dputils.accountants.pld.ComposedPLD` (FFT power) and
    :class:`~dputils.accountants.pld.SpectralPLD` (a few Fourier coefficients).
    """

    #: the composition's name in messages ("FFT" or "spectral")
    path: str = ""
    #: bound on the composed mass outside the window (both sides), added to upper and taken from lower bounds
    outside: float
    #: composed mass at +infinity
    inf_mass: float

    @property
    @abstractmethod
    def window_points(self) -> int:
        """Grid points in the composed window."""

    @abstractmethod
    def cert_upper(self, eps: float) -> float:
        """Certified upper bound on delta(eps)."""

    @abstractmethod
    def cert_lower(self, eps: float, eta: float = 0.0) -> float:
        """Certified lower bound on delta(eps), less ``eta`` (a Chernoff slack the caller subtracts)."""

    @abstractmethod
    def cert_bracket(self, eps: float) -> tuple[float, float]:
        """(cert_lower, cert_upper) at eps."""

    @abstractmethod
    def _epsilon_upper_and_error(self, delta: float) -> tuple[float, float]:
        """An eps with cert_upper(eps) <= delta (as small as the inversion gives) and the bound on the
        floating-point error plus window tails at it (for the resolution check of :meth:`epsilon_upper`)."""

    @abstractmethod
    def epsilon_lower(self, target: float, guess: float | None = None) -> float | None:
        """An eps with cert_lower(eps) >= target (as large as the inversion gives), or None where there is
        none. ``guess``: a nearby answer (the upper bound's), which may save evaluations."""

    def second_certificate(self, max_window: int) -> bool:
        """Whether the FFT power of the same PMFs may serve as a second certificate for this composition
        (only a spectral one on a window of at most ``max_window`` points; the FFT power is its own)."""
        return False

    def rounding_width(self, eps: float) -> float:
        """Width of the certified bracket on delta(eps) due to rounding (window tails excluded)."""
        lo, up = self.cert_bracket(eps)
        return max(up - lo - 2.0 * self.outside, 0.0)

    def epsilon_upper(self, delta: float) -> float:
        """Certified upper bound on epsilon(delta).

        Raises:
            ResolutionError: delta is at or below the resolution (infinite-loss mass plus window tails), or the
                bound on the floating-point error at the answer exceeds half of delta.
        """
        floor = self.outside + self.inf_mass
        if delta <= floor:
            raise ResolutionError(
                f"delta={delta:g} is below the PLD accountant's resolution ({floor:.2g}: infinite-loss mass and "
                "window tails); use the saddle-point or Edgeworth accountant"
            )
        eps, err = self._epsilon_upper_and_error(delta)
        if err > 0.5 * delta:
            raise ResolutionError(
                f"delta={delta:g} is below the PLD accountant's resolution: the bound on the floating-point error "
                f"of the {self.path} composition ({err:.2g} at epsilon={eps:.6g}) exceeds half of delta; use a "
                "coarser discretization, or the saddle-point or Edgeworth accountant"
            )
        return eps
