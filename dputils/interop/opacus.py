"""dputils accountants as Opacus accountants.

Importing this module registers, with Opacus's ``register_accountant``, one Opacus accountant ``dputils-NAME``
per accountant ``NAME`` of :mod:`dputils.accountants.registry` that composes the Gaussian and the
Poisson-subsampled Gaussian mechanisms and is no variant of another (:data:`MECHANISMS`); today five:

* ``"dputils-pld"``: the PLD accountant (certified upper bound, with a certified lower bound alongside);
* ``"dputils-spa"``: the saddle-point accountant; ``get_epsilon`` returns the upper end of its certified
  Theorem-5 bracket;
* ``"dputils-edgeworth"``: the Edgeworth accountant; ``get_epsilon`` returns the upper end of its interval;
* ``"dputils-rdp"``: the RDP accountant (an upper bound), by default on Opacus's own order grid
  (``opacus.accountants.RDPAccountant.DEFAULT_ALPHAS``) with the same conversion (Balle et al. 2020, Thm 21)
  and no refinement between orders, so that it answers the number Opacus's ``"rdp"`` answers (computed by our
  code: the subsampled Gaussian's RDP at fractional orders by quadrature, not Opacus's series);
  ``orders=``/``refine=True`` choose otherwise, and ``get_epsilon(delta, alphas=...)`` takes Opacus's
  per-query order grid;
* ``"dputils-gdp"``: the mu-GDP accountant: exact for full-batch (q = 1) Gaussian steps, and for Poisson
  subsampling the central-limit approximation mu = q sqrt(T (e^(1/sigma^2) - 1)) (Bu et al. 2020, Cor. 4),
  the quantity Opacus's ``"gdp"`` (``GaussianAccountant``, Poisson) computes. **An approximation, not a
  bound**: it can under-estimate epsilon, and says so with a ``UserWarning`` as Opacus's does.

Shuffled (not Poisson) batches have their own accountants, ``dputils-shuffle`` and ``dputils-shuffle-bc``
(:mod:`dputils.interop.opacus_shuffle`, registered on import of this module too).

For the last two, where the certified bracket is vacuous (Edgeworth's error bound above delta), wide (over
10% of its upper end) or its computation fails, the PLD accountant's certified bracket on the same steps
narrows it (:mod:`dputils.interop._certified`; ``report="estimate"`` gives the approximation instead).

so that, in three lines::

    import dputils.interop.opacus  # registers the names
    from opacus import PrivacyEngine
    engine = PrivacyEngine(accountant="dputils-pld")

and ``opacus.accountants.utils.get_noise_multiplier(..., accountant="dputils-pld")`` work. Each step of
Opacus's DP-SGD is accounted as a Poisson-subsampled Gaussian mechanism with noise multiplier sigma and
sampling rate q (add/remove neighbours, the worse of the two directions), or as a plain Gaussian mechanism
when q = 1.

The accountants keep Opacus's ``history`` format, a list of ``(noise_multiplier, sample_rate, steps)``
tuples, and read it afresh in every ``get_epsilon`` call: Opacus's ``get_noise_multiplier`` writes
``history`` directly.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

from opacus.accountants import RDPAccountant as _OpacusRDP
from opacus.accountants import register_accountant

from ..accountants import registry
from ..accountants.base import AccountingResult
from ._opacus_base import DputilsOpacusAccountant

__all__ = [
    "DputilsOpacusAccountant",
    "PLDOpacusAccountant",
    "SPAOpacusAccountant",
    "EdgeworthOpacusAccountant",
    "RDPOpacusAccountant",
    "GDPOpacusAccountant",
    "MECHANISMS",
]


class PLDOpacusAccountant(DputilsOpacusAccountant):
    """Opacus accountant ``"dputils-pld"``: dputils's PLD accountant (a certified upper bound)."""

    NAME = "pld"
    MECHANISM = "dputils-pld"


class SPAOpacusAccountant(DputilsOpacusAccountant):
    """Opacus accountant ``"dputils-spa"``: the saddle-point accountant (upper end of its certified bracket)."""

    NAME = "spa"
    MECHANISM = "dputils-spa"


class EdgeworthOpacusAccountant(DputilsOpacusAccountant):
    """Opacus accountant ``"dputils-edgeworth"``: the Edgeworth accountant (upper end of its interval)."""

    NAME = "edgeworth"
    MECHANISM = "dputils-edgeworth"


class RDPOpacusAccountant(DputilsOpacusAccountant):
    """Opacus accountant ``"dputils-rdp"``: dputils's RDP accountant (an upper bound), by default on Opacus's
    order grid without refinement (Opacus's ``"rdp"`` number; see the module docstring).

    ``get_epsilon(delta, alphas=None)``: ``alphas``, as in Opacus's ``RDPAccountant.get_epsilon``, replaces the
    order grid for this query."""

    NAME = "rdp"
    MECHANISM = "dputils-rdp"
    DEFAULTS: ClassVar[dict] = {"orders": tuple(_OpacusRDP.DEFAULT_ALPHAS), "refine": False}

    def get_epsilon(self, delta: float, alphas: Any = None, **kwargs: Any) -> float:
        if alphas is None:
            return super().get_epsilon(delta, **kwargs)
        saved = self.options
        self.options = {**saved, "orders": tuple(alphas)}
        try:
            return super().get_epsilon(delta, **kwargs)
        finally:
            self.options = saved


class GDPOpacusAccountant(DputilsOpacusAccountant):
    """Opacus accountant ``"dputils-gdp"``: the mu-GDP accountant, exact for q = 1 steps and the CLT
    approximation (not a bound; a ``UserWarning`` says so) for Poisson-subsampled ones, as Opacus's ``"gdp"``."""

    NAME = "gdp"
    MECHANISM = "dputils-gdp"

    def get_epsilon_bracket(self, delta: float) -> AccountingResult:
        res = super().get_epsilon_bracket(delta)
        if res.kind == "approximation":
            warnings.warn(
                "dputils-gdp: the CLT approximation of the subsampled Gaussian (Bu et al. 2020, Cor. 4) "
                "is not an upper bound and can under-estimate epsilon; use dputils-pld for a certified "
                "one",
                UserWarning,
                stacklevel=3,
            )
        return res


#: The steps of Opacus's DP-SGD as dputils mechanisms (names of :mod:`dputils.mechanisms`).
EVENTS = frozenset({"gaussian", "subsampled-gaussian"})
#: The classes above, by registered name; an accountant registered later without one gets a plain subclass.
_CLASSES = {
    c.NAME: c
    for c in (
        PLDOpacusAccountant,
        SPAOpacusAccountant,
        EdgeworthOpacusAccountant,
        RDPOpacusAccountant,
        GDPOpacusAccountant,
    )
}


def _opacus_class(reg: registry.Registration) -> type[DputilsOpacusAccountant]:
    cls = _CLASSES.get(reg.name)
    if cls is not None:
        return cls
    doc = f"Opacus accountant ``dputils-{reg.name}``: dputils's {reg.label} accountant ({reg.answer})."
    return type(
        f"{reg.name.title().replace('-', '')}OpacusAccountant",
        (DputilsOpacusAccountant,),
        {"NAME": reg.name, "MECHANISM": f"dputils-{reg.name}", "__doc__": doc, "__module__": __name__},
    )


#: Opacus name -> class, registered on import: ``dputils-NAME`` for every registered accountant of :data:`EVENTS`
#: that is no variant (in the registry's order).
MECHANISMS = {f"dputils-{r.name}": _opacus_class(r) for r in registry.select(events=EVENTS, variants=False)}

for _name, _cls in MECHANISMS.items():
    register_accountant(_name, _cls, force=True)

from . import opacus_shuffle  # noqa: E402,F401  (registers dputils-shuffle and dputils-shuffle-bc)

# the one-run audit of a training loop (issue 27, item 1)
from .opacus_audit import OpacusAuditReport, OpacusCanaryAudit  # noqa: F401
