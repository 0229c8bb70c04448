"""dputils accountants behind dp_accounting's ``PrivacyAccountant`` interface.

A pipeline that describes its training run with dp_accounting's ``DpEvent`` objects can swap in a dputils
accountant in one line::

    import dp_accounting
    from dputils.interop.dp_accounting import make_accountant

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)), 1000)
    eps = make_accountant("pld").compose(event).get_epsilon(1e-5)

and ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism(lambda: make_accountant("spa"), ...)`` works
unchanged.

Events understood (anything else is reported by ``supports()`` and raises ``UnsupportedEventError`` on
``compose``, naming the sub-event):

* ``GaussianDpEvent(noise_multiplier)``: the Gaussian mechanism with sensitivity 1 and noise standard
  deviation ``noise_multiplier`` (0 means no noise: epsilon is infinite);
* ``LaplaceDpEvent(noise_multiplier)``: the Laplace mechanism with scale ``noise_multiplier``;
* ``PoissonSampledDpEvent(q, Gaussian or Laplace)``: Poisson subsampling at rate ``q``;
* ``SelfComposedDpEvent``, ``ComposedDpEvent`` (heterogeneous parts), ``NoOpDpEvent``.

Which of these a given accountant takes is its own rule (the RDP accountant has no subsampled Laplace, for
example): the adapter asks the dputils accountant and passes its refusal on as the error message.

Only the add-or-remove-one neighbouring relation is offered (``NeighboringRelation.ADD_OR_REMOVE_ONE``), and
the accountant reports the worse of the add and remove directions, as dp_accounting's PLD accountant does.

What ``get_epsilon`` returns: dp_accounting expects one number, and a privacy claim needs an upper bound, so
it returns the **certified upper end** of the dputils answer (``report="upper"``, the default): the PLD's
upper bound, the upper end of the saddle-point accountant's Theorem-5 bracket, the upper end of the
Edgeworth interval (which can be infinite where the expansion certifies nothing), the RDP bound.
``report="estimate"`` returns the point estimate instead (an approximation for ``spa`` and ``edgeworth``).
The whole answer, with its certified lower and upper bounds, is ``get_epsilon_bracket(delta)`` /
``get_delta_bracket(epsilon)`` (an :class:`~dputils.accountants.base.AccountingResult`).
"""

from __future__ import annotations

import math
from typing import Any

from dp_accounting import dp_event
from dp_accounting.privacy_accountant import NeighboringRelation, PrivacyAccountant

from ..accountants.base import Accountant, AccountingResult
from ..errors import DPValueError, check_choice, check_delta, check_epsilon

__all__ = ["ACCOUNTANTS", "DputilsPrivacyAccountant", "make_accountant"]


def _accountant_classes() -> dict[str, type[Accountant]]:
    from ..accountants.edgeworth import EdgeworthAccountant
    from ..accountants.pld import PLDAccountant
    from ..accountants.rdp import RDPAccountant
    from ..accountants.spa import SaddlePointAccountant

    return {"pld": PLDAccountant, "spa": SaddlePointAccountant, "edgeworth": EdgeworthAccountant,
            "rdp": RDPAccountant}


#: The dputils accountants this adapter offers.
ACCOUNTANTS = ("pld", "spa", "edgeworth", "rdp")


class DputilsPrivacyAccountant(PrivacyAccountant):
    """A ``dp_accounting.PrivacyAccountant`` whose arithmetic is a dputils accountant (see the module
    docstring for the events it takes and what ``get_epsilon`` returns).

    Args:
        name: ``"pld"``, ``"spa"``, ``"edgeworth"`` or ``"rdp"``.
        neighboring_relation: only ``NeighboringRelation.ADD_OR_REMOVE_ONE``.
        report: ``"upper"`` (default, the certified upper end) or ``"estimate"``.
        **options: passed to the dputils accountant (e.g. ``discretization=1e-4`` for ``pld``,
            ``orders=...`` for ``rdp``).
    """

    def __init__(self, name: str = "pld",
                 neighboring_relation: NeighboringRelation = NeighboringRelation.ADD_OR_REMOVE_ONE,
                 report: str = "upper", **options: Any) -> None:
        check_choice("name", name, ACCOUNTANTS)
        if neighboring_relation != NeighboringRelation.ADD_OR_REMOVE_ONE:
            raise DPValueError(f"dputils accountants support NeighboringRelation.ADD_OR_REMOVE_ONE only, got "
                               f"{neighboring_relation}")
        self.report = check_choice("report", report, ("upper", "estimate"))
        super().__init__(neighboring_relation)
        self.name = name
        self.options = dict(options)
        self.inner: Accountant = _accountant_classes()[name](**options)
        self._infinite = False  # a composed event without noise (noise_multiplier 0, or q = 1 of it)

    # --------------------------------------------------------------------------------- events
    def _mechanism(self, event: dp_event.DpEvent) -> Any:
        """The dputils mechanism of a leaf event, ``None`` for one that releases everything, or a string
        saying why the event is not supported."""
        from ..mechanisms import SubsampledLaplaceMechanism
        from ..mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism

        if isinstance(event, dp_event.GaussianDpEvent):
            s = float(event.noise_multiplier)
            if not s >= 0 or math.isinf(s):
                return f"noise_multiplier must be finite and >= 0, got {event.noise_multiplier!r}"
            return None if s == 0 else GaussianMechanism(s)
        if isinstance(event, dp_event.LaplaceDpEvent):
            b = float(event.noise_multiplier)
            if not b >= 0 or math.isinf(b):
                return f"noise_multiplier must be finite and >= 0, got {event.noise_multiplier!r}"
            return None if b == 0 else LaplaceMechanism(b)
        if isinstance(event, dp_event.PoissonSampledDpEvent):
            q = float(event.sampling_probability)
            if not 0 <= q <= 1:
                return f"sampling_probability must lie in [0, 1], got {event.sampling_probability!r}"
            inner = event.event
            if not isinstance(inner, (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent)):
                return f"Poisson sampling of {type(inner).__name__} (only Gaussian and Laplace)"
            if q == 1:
                return self._mechanism(inner)
            noise = float(inner.noise_multiplier)
            if not noise > 0 or math.isinf(noise):
                return f"the sampled event needs a finite noise_multiplier > 0, got {inner.noise_multiplier!r}"
            if isinstance(inner, dp_event.GaussianDpEvent):
                return SubsampledGaussianMechanism(noise, q)
            return SubsampledLaplaceMechanism(noise, q)
        return f"{type(event).__name__} is not supported by the dputils adapter"

    def _maybe_compose(self, event: dp_event.DpEvent, count: int,
                       do_compose: bool) -> PrivacyAccountant.CompositionErrorDetails | None:
        def error(msg: str, ev: dp_event.DpEvent = event) -> PrivacyAccountant.CompositionErrorDetails:
            return PrivacyAccountant.CompositionErrorDetails(invalid_event=ev, error_message=msg)

        if isinstance(event, dp_event.NoOpDpEvent):
            return None
        if isinstance(event, dp_event.NonPrivateDpEvent):
            if do_compose and count > 0:
                self._infinite = True
            return None
        if isinstance(event, dp_event.SelfComposedDpEvent):
            return self._maybe_compose(event.event, count * int(event.count), do_compose)
        if isinstance(event, dp_event.ComposedDpEvent):
            for part in event.events:
                err = self._maybe_compose(part, count, do_compose)
                if err is not None:
                    return err
            return None
        if isinstance(event, dp_event.PoissonSampledDpEvent) and float(event.sampling_probability) == 0:
            return None  # never sampled: releases nothing about anyone
        mech = self._mechanism(event)
        if isinstance(mech, str):
            return error(mech)
        if mech is None:  # no noise: the composition has infinite epsilon
            if do_compose and count > 0:
                self._infinite = True
            return None
        try:
            self.inner.check_supported(mech)
        except (DPValueError, ValueError) as exc:
            msg = str(exc)
            return error(msg if msg.startswith(f"{self.name}:") else f"{self.name}: {msg}")
        if do_compose and count > 0:
            self.inner.compose(mech, count)
        return None

    # --------------------------------------------------------------------------------- queries
    def _empty(self) -> bool:
        return not self.inner.ledger

    def get_epsilon_bracket(self, target_delta: float) -> AccountingResult:
        """The dputils answer for epsilon(target_delta): value, certified lower/upper, kind, details."""
        target_delta = check_delta(target_delta)
        if self._infinite:
            return AccountingResult(math.inf, math.inf, math.inf, "exact", self.name, "epsilon",
                                    {"reason": "an event without noise was composed"})
        if self._empty():
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.name, "epsilon", {"reason": "nothing composed"})
        return self.inner.get_epsilon(target_delta)

    def get_delta_bracket(self, target_epsilon: float) -> AccountingResult:
        """The dputils answer for delta(target_epsilon): value, certified lower/upper, kind, details."""
        target_epsilon = check_epsilon(target_epsilon)
        if self._infinite:
            return AccountingResult(1.0, 1.0, 1.0, "exact", self.name, "delta",
                                    {"reason": "an event without noise was composed"})
        if self._empty():
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.name, "delta", {"reason": "nothing composed"})
        return self.inner.get_delta(target_epsilon)

    def _pick(self, res: AccountingResult) -> float:
        if self.report == "estimate" or res.upper is None:
            return float(res.value)
        return float(res.upper)

    def get_epsilon(self, target_delta: float) -> float:
        """epsilon(target_delta): the certified upper end (``report="upper"``) or the estimate."""
        return self._pick(self.get_epsilon_bracket(target_delta))

    def get_delta(self, target_epsilon: float) -> float:
        """delta(target_epsilon): the certified upper end (``report="upper"``, capped at 1) or the estimate."""
        return min(1.0, self._pick(self.get_delta_bracket(target_epsilon)))

    def __repr__(self) -> str:
        return f"DputilsPrivacyAccountant(name={self.name!r}, report={self.report!r}, options={self.options!r})"


def make_accountant(name: str = "pld", **options: Any) -> DputilsPrivacyAccountant:
    """A fresh ``dp_accounting.PrivacyAccountant`` backed by the dputils accountant ``name``
    (``pld``, ``spa``, ``edgeworth`` or ``rdp``); ``options`` as for :class:`DputilsPrivacyAccountant`."""
    return DputilsPrivacyAccountant(name, **options)

