r"""Gaussian-DP accountant: exact for Gaussian mechanisms, the CLT approximation for subsampling.

* A composition of Gaussian mechanisms with :math:`\mu_i = \Delta_i/\sigma_i` is exactly
  :math:`\mu`-GDP with :math:`\mu = \sqrt{\sum_i \mu_i^2}` (Dong, Roth, Su 2022, Cor. 3.3), so the
  answer is exact (``kind="exact"``): epsilon is solved to a few ulps by
  :func:`dputils.curves.gdp_epsilon_bracket`, and ``lower``/``upper`` widen that bracket by
  :data:`EXACT_REL_MARGIN` (relative) for the rounding of ``log_ndtr`` (observed errors against mpmath:
  below 2e-13 relative down to mu = 0.01, below 1e-15 for mu >= 0.5).
* T steps of the Poisson-subsampled Gaussian are approximated by :math:`\mu`-GDP with
  :math:`\mu = q\sqrt{T(e^{1/\sigma^2} - 1)}` (Bu, Dong, Long, Su 2020, Cor. 4; the central limit
  theorem of Dong et al., Thm 3.5, as :math:`q\sqrt{T}` stays fixed). **This is an approximation, not a
  bound**: it is known to under-estimate epsilon at moderate T (see the foundations chapter).

delta(eps) then follows from the mu-GDP profile :func:`dputils.curves.gdp_delta`.
"""

from __future__ import annotations

import math

from ..curves import gdp_delta, gdp_epsilon_bracket
from ..errors import DPValueError, NumericalError
from ..mechanisms import GaussianMechanism, SubsampledGaussianMechanism
from .base import Accountant, AccountingResult
from .registry import register

#: Relative margin around the solved epsilon (or delta) of an exact Gaussian composition.
EXACT_REL_MARGIN = 1e-10


@register(
    "gdp",
    label="GDP/CLT",
    answer="approximation",
    events={"gaussian", "subsampled-gaussian"},
    cost="cheap",
    rank=30,
    color="#2ca02c",
    help="Gaussian DP: exact for Gaussians, CLT approximation (not a bound) for subsampling",
)
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
            try:
                if isinstance(m, GaussianMechanism) or (isinstance(m, SubsampledGaussianMechanism) and m.q == 1.0):
                    mu2 += c * (m.sensitivity / m.sigma) ** 2
                else:
                    s = m.sigma / m.sensitivity
                    mu2 += c * m.q**2 * math.expm1(1.0 / s**2)
                    exact = False
            except OverflowError:
                mu2 = math.inf
            if not math.isfinite(mu2):
                raise NumericalError(
                    f"gdp: mu overflows at sigma={m.sigma:g} (mu^2 = T (sensitivity/sigma)^2, or q^2 T (e^(1/sigma^2) - 1) "
                    "for subsampling, exceeds the float range); use the pld or rdp accountant"
                )
        return math.sqrt(mu2), exact

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        mu, exact = self.mu()
        d = float(gdp_delta(eps, mu))
        kind = "exact" if exact else "approximation"
        lo, hi = (d * (1 - EXACT_REL_MARGIN), min(1.0, d * (1 + EXACT_REL_MARGIN))) if exact else (None, None)
        return AccountingResult(d, lo, hi, kind, self.name, "delta", {"mu": mu})

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        mu, exact = self.mu()
        lo, hi = gdp_epsilon_bracket(delta, mu)
        if not exact:
            return AccountingResult(hi, None, None, "approximation", self.name, "epsilon", {"mu": mu})
        # delta_mu is evaluated to ~1e-15 relative; where epsilon is ill-conditioned in delta (delta near 1,
        # where delta_mu is nearly flat: at 1 - 1e-12 a 1e-16 error moves epsilon by ~5e-5) the certified
        # bracket is the epsilons of delta (1 -+ margin), so it holds whatever the conditioning
        d_hi = delta * (1 + EXACT_REL_MARGIN)
        lo_c = 0.0 if d_hi >= 1 else min(lo, gdp_epsilon_bracket(d_hi, mu)[0])
        hi_c = max(hi, gdp_epsilon_bracket(delta * (1 - EXACT_REL_MARGIN), mu)[1])
        return AccountingResult(
            hi, lo_c * (1 - EXACT_REL_MARGIN), hi_c * (1 + EXACT_REL_MARGIN), "exact", self.name, "epsilon", {"mu": mu}
        )
