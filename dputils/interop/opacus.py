"""dputils accountants as Opacus accountants.

Importing this module registers three accountants with Opacus's ``register_accountant``:

* ``"dputils-pld"``: the PLD accountant (certified upper bound, with a certified lower bound alongside);
* ``"dputils-spa"``: the saddle-point accountant; ``get_epsilon`` returns the upper end of its certified
  Theorem-5 bracket;
* ``"dputils-edgeworth"``: the Edgeworth accountant; ``get_epsilon`` returns the upper end of its interval
  (infinite where the expansion certifies nothing; ``report="estimate"`` gives the approximation).

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

import math
from typing import Any

from opacus.accountants import IAccountant, register_accountant

from ..accountants.base import Accountant, AccountingResult
from ..errors import DPValueError, check_choice, check_delta, check_positive_int, check_probability

__all__ = ["DputilsOpacusAccountant", "PLDOpacusAccountant", "SPAOpacusAccountant", "EdgeworthOpacusAccountant",
           "MECHANISMS"]


class DputilsOpacusAccountant(IAccountant):
    """Base of the Opacus accountants backed by a dputils accountant (``NAME`` picks which).

    Args:
        report: ``"upper"`` (default): ``get_epsilon`` returns the certified upper end; ``"estimate"``: the
            point estimate (an approximation for spa and edgeworth).
        **options: passed to the dputils accountant (e.g. ``discretization=1e-4`` for the PLD).
    """

    NAME = "abstract"
    MECHANISM = "dputils-abstract"

    def __init__(self, report: str = "upper", **options: Any) -> None:
        self.history: list[tuple[float, float, int]] = []
        self.report = check_choice("report", report, ("upper", "estimate"))
        self.options = dict(options)
        self._make()  # check the options now rather than at the first get_epsilon

    def _make(self) -> Accountant:
        from ..accountants.edgeworth import EdgeworthAccountant
        from ..accountants.pld import PLDAccountant
        from ..accountants.spa import SaddlePointAccountant

        cls = {"pld": PLDAccountant, "spa": SaddlePointAccountant, "edgeworth": EdgeworthAccountant}[self.NAME]
        return cls(**self.options)

    @classmethod
    def mechanism(cls) -> str:
        return cls.MECHANISM

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """One DP-SGD step at this noise multiplier and sampling rate (consecutive equal steps are merged)."""
        if self.history and self.history[-1][0] == noise_multiplier and self.history[-1][1] == sample_rate:
            nm, sr, n = self.history[-1]
            self.history[-1] = (nm, sr, n + 1)
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def __len__(self) -> int:
        return int(sum(n for _, _, n in self.history))

    def _composed(self) -> Accountant:
        from ..mechanisms import GaussianMechanism, SubsampledGaussianMechanism

        acc = self._make()
        for k, entry in enumerate(self.history):
            try:
                sigma, q, n = entry
            except (TypeError, ValueError):
                raise DPValueError(f"history[{k}] must be (noise_multiplier, sample_rate, steps), got {entry!r}")
            n = check_positive_int(f"history[{k}] steps", n)
            q = check_probability(f"history[{k}] sample_rate", q)
            if q == 0:
                continue
            mech = GaussianMechanism(sigma) if q == 1 else SubsampledGaussianMechanism(sigma, q)
            acc.compose(mech, n)
        return acc

    def get_epsilon_bracket(self, delta: float) -> AccountingResult:
        """The whole dputils answer for epsilon(delta): value, certified lower and upper bounds, kind."""
        delta = check_delta(delta)
        acc = self._composed()
        if not acc.ledger:
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.NAME, "epsilon", {"reason": "no steps"})
        return acc.get_epsilon(delta)

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        """epsilon(delta) of the steps so far: the certified upper end (``report="upper"``) or the estimate."""
        if kwargs:
            raise TypeError(f"{self.MECHANISM}: unexpected arguments {sorted(kwargs)} (options go to the "
                            "constructor)")
        res = self.get_epsilon_bracket(delta)
        if self.report == "estimate" or res.upper is None:
            return float(res.value)
        return float(res.upper) if not math.isnan(res.upper) else math.inf


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


#: Opacus name -> class, registered on import.
MECHANISMS = {c.MECHANISM: c for c in (PLDOpacusAccountant, SPAOpacusAccountant, EdgeworthOpacusAccountant)}

for _name, _cls in MECHANISMS.items():
    register_accountant(_name, _cls, force=True)
