"""Accountants: each answers ``get_epsilon(delta)`` and ``get_delta(epsilon)`` for a composition.

* :class:`~dputils.accountants.pld.PLDAccountant` (``pld``): the reference, certified brackets.
* :class:`~dputils.accountants.rdp.RDPAccountant` (``rdp``, ``rdp-classic``): Renyi DP, upper bounds.
* :class:`~dputils.accountants.gdp.GDPAccountant` (``gdp``): Gaussian DP (CLT approximation).

Every accountant class registers itself by name (``@register``) in :mod:`dputils.accountants.registry`, the
one table that the command line, the interoperability adapters, the atlas, the benchmarks and the figures
read (saddle point, Edgeworth, matrix mechanisms and shuffling included).
"""

from .base import Accountant, AccountingResult
from .gdp import GDPAccountant
from .pld import PLDAccountant
from .rdp import RDPAccountant

__all__ = ["Accountant", "AccountingResult", "GDPAccountant", "PLDAccountant", "RDPAccountant"]
