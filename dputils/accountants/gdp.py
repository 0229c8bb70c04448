r"""Gaussian-DP accountant: exact for Gaussian mechanisms, the CLT approximation for subsampling.

* A composition of Gaussian mechanisms with :math:`\mu_i = \Delta_i/\sigma_i` is exactly
  :math:`\mu`-GDP with :math:`\mu = \sqrt{\sum_i \mu_i^2}` (Dong, Roth, Su 2022, Cor. 3.3), so the
  answer is exact (``kind="exact"``).
* T steps of the Poisson-subsampled Gaussian are approximated by :math:`\mu`-GDP with
  :math:`\mu = q\sqrt{T(e^{1/\sigma^2} - 1)}` (Bu, Dong, Long, Su 2020, Cor. 4; the central limit
  theorem of Dong et al., Thm 3.5, as :math:`q\sqrt{T}` stays fixed). **This is an approximation, not a
  bound**: it is known to under-estimate epsilon at moderate T (see the foundations chapter).

delta(eps) then follows from the mu-GDP profile :func:`dputils.curves.gdp_delta`.
"""

from __future__ import annotations

import argparse
import math

from ..curves import gdp_delta, gdp_epsilon
from ..errors import DPValueError
from ..mechanisms import GaussianMechanism, SubsampledGaussianMechanism
from .base import Accountant, AccountingResult


class GDPAccountant(Accountant):
    """mu-GDP accountant (exact for Gaussians, CLT approximation for Poisson subsampling)."""

    name = "gdp"

    def _check_supported(self, mechanism) -> None:
        if not isinstance(mechanism, (GaussianMechanism, SubsampledGaussianMechanism)):
            raise DPValueError(
                f"gdp supports the gaussian and subsampled-gaussian mechanisms, got {type(mechanism).__name__}"
            )

    def mu(self) -> tuple[float, bool]:
        """(mu, exact): the composed GDP parameter and whether it is exact."""
        self._require_ledger()
        mu2 = 0.0
        exact = True
        for m, c in self.ledger:
            if isinstance(m, GaussianMechanism) or (isinstance(m, SubsampledGaussianMechanism) and m.q == 1.0):
                mu2 += c * (m.sensitivity / m.sigma) ** 2
            else:
                s = m.sigma / m.sensitivity
                mu2 += c * m.q**2 * math.expm1(1.0 / s**2)
                exact = False
        if not math.isfinite(mu2):
            raise DPValueError("gdp: mu overflows (sigma too small for the CLT approximation)")
        return math.sqrt(mu2), exact

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        mu, exact = self.mu()
        d = float(gdp_delta(eps, mu))
        kind = "exact" if exact else "approximation"
        return AccountingResult(d, d if exact else None, d if exact else None, kind, self.name, "delta", {"mu": mu})

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        mu, exact = self.mu()
        e = gdp_epsilon(delta, mu)
        kind = "exact" if exact else "approximation"
        return AccountingResult(e, e if exact else None, e if exact else None, kind, self.name, "epsilon", {"mu": mu})


def _build(args: argparse.Namespace) -> GDPAccountant:
    from ..mechanisms import mechanism_from_args

    return GDPAccountant(direction=args.direction).compose(mechanism_from_args(args), args.steps)


from .registry import register  # noqa: E402

register("gdp", help="Gaussian DP: exact for Gaussians, CLT approximation (not a bound) for subsampling",
         build=_build)
