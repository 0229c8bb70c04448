"""Accountants: each answers ``get_epsilon(delta)`` and ``get_delta(epsilon)`` for a composition.

* :class:`~dputils.accountants.pld.PLDAccountant` (``pld``): the reference, certified brackets.
* :class:`~dputils.accountants.rdp.RDPAccountant` (``rdp``, ``rdp-classic``): Renyi DP, upper bounds.
* :class:`~dputils.accountants.gdp.GDPAccountant` (``gdp``): Gaussian DP (CLT approximation).

Further accountants (saddle point, Edgeworth, matrix mechanisms, shuffling) register themselves by name in
:mod:`dputils.accountants.registry` for the command line.
"""

from .base import Accountant, AccountingResult
from .gdp import GDPAccountant
from .pld import PLDAccountant
from .rdp import RDPAccountant

__all__ = ["Accountant", "AccountingResult", "GDPAccountant", "PLDAccountant", "RDPAccountant"]
