"""dputils: the package behind dpbook, an executable book on differential-privacy accounting and auditing.

Public names are re-exported here; the modules are named by concept:

* :mod:`dputils.mechanisms`: privacy-loss pairs of the Gaussian, Laplace and Poisson-subsampled Gaussian.
* :mod:`dputils.curves`: closed-form privacy profiles, mu-GDP, trade-off curves, robust inversion.
* :mod:`dputils.accountants`: PLD (reference, certified brackets), RDP, GDP and the book's accountants.
* :mod:`dputils.book.results`: JSON artifacts of the notebooks; :mod:`dputils.book.plotting`: one figure style.
* :mod:`dputils.book.run` and :mod:`dputils.cli`: the papermill runner and ``python -m dputils``.

``import dputils`` needs numpy, scipy and mpmath alone (the light install): it imports neither matplotlib nor
torch. :mod:`dputils.book.plotting` is loaded on first use (``dputils.book.plotting`` or ``from dputils import plotting``);
the modules that need an optional dependency say which ``pip install`` brings it (:mod:`dputils.optional`).
"""

import importlib as _importlib

from . import curves, mechanisms
from ._version import __version__
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
from .mechanisms import (
    GaussianMechanism,
    GaussianMixtureMechanism,
    LaplaceMechanism,
    SubsampledGaussianMechanism,
    make_mechanism,
)

#: tooling modules that ``dputils.NAME`` still reaches (they live in :mod:`dputils.book`)
_BOOK_MODULES = ("plotting", "results", "tables", "scorecard")


def __getattr__(name: str):
    """Load :mod:`dputils.book.plotting` (matplotlib) only when it is asked for."""
    if name in _BOOK_MODULES:
        return _importlib.import_module(f".book.{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ``plotting`` is left out of __all__ so that ``from dputils import *`` stays light (no matplotlib).
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
    "__version__",
    "curves",
    "epsilon_from_delta",
    "gaussian_delta",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "gdp_tradeoff",
    "make_mechanism",
    "mechanisms",
    "profile_from_tradeoff",
    "results",
    "tradeoff_from_profile",
]
