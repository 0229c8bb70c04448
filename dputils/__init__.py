"""dputils: the package behind dpbook, an executable book on differential-privacy accounting and auditing.

Public names are re-exported here; the modules are named by concept:

* :mod:`dputils.mechanisms`: privacy-loss pairs of the Gaussian, Laplace and Poisson-subsampled Gaussian.
* :mod:`dputils.curves`: closed-form privacy profiles, mu-GDP, trade-off curves, robust inversion.
* :mod:`dputils.accountants`: PLD (reference, certified brackets), RDP, GDP and the book's accountants.
* :mod:`dputils.results`: JSON artifacts of the notebooks; :mod:`dputils.plotting`: one figure style.
* :mod:`dputils.run` and :mod:`dputils.cli`: the papermill runner and ``python -m dputils``.
"""

from . import curves, mechanisms, plotting, results
from .accountants import Accountant, AccountingResult, GDPAccountant, PLDAccountant, RDPAccountant
from .curves import (
    epsilon_from_delta,
    gaussian_delta,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    gdp_tradeoff,
    profile_from_tradeoff,
    tradeoff_from_profile,
)
from .errors import DPValueError, NumericalError
from .mechanisms import (GaussianMechanism, GaussianMixtureMechanism, LaplaceMechanism, SubsampledGaussianMechanism,
                         make_mechanism)

__version__ = "0.1.0"

__all__ = [
    "Accountant",
    "AccountingResult",
    "DPValueError",
    "GDPAccountant",
    "GaussianMechanism",
    "GaussianMixtureMechanism",
    "LaplaceMechanism",
    "NumericalError",
    "PLDAccountant",
    "RDPAccountant",
    "SubsampledGaussianMechanism",
    "curves",
    "epsilon_from_delta",
    "gaussian_delta",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_tradeoff",
    "make_mechanism",
    "mechanisms",
    "plotting",
    "profile_from_tradeoff",
    "results",
    "tradeoff_from_profile",
]
