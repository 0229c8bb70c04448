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

The accountants offered (:data:`NAMES`) are read from the registry (:mod:`dputils.accountants.registry`): every
registered accountant, no variant of another, that composes all four leaf mechanisms above (today pld, rdp, spa
and edgeworth; gdp composes no Laplace mechanism). Which events a composition may mix is each accountant's own
rule: the adapter asks the dputils accountant and passes its refusal on as the error message.

Only the add-or-remove-one neighbouring relation is offered (``NeighboringRelation.ADD_OR_REMOVE_ONE``), and
the accountant reports the worse of the add and remove directions, as dp_accounting's PLD accountant does.

What ``get_epsilon`` returns: dp_accounting expects one number, and a privacy claim needs an upper bound, so
it returns the **certified upper end** of the dputils answer (``report="upper"``, the default): the PLD's
upper bound, the RDP bound, the upper end of the saddle-point accountant's Theorem-5 bracket or of the
Edgeworth interval. Where the saddle-point or Edgeworth bracket is vacuous, wide (over 10% of its upper
end) or its computation fails, the PLD accountant is run on the same events and the two certified brackets
are intersected (``details["fallback"] == "pld"``; see :mod:`dputils.interop._certified`; the PLD takes every
event the adapter understands, the Poisson-sampled Laplace included); where the fallback fails as well
``NumericalError`` is raised naming ``report="estimate"``.
``report="estimate"`` returns the point estimate instead (an approximation for ``spa`` and ``edgeworth``).
The whole answer, with its certified lower and upper bounds, is ``get_epsilon_bracket(delta)`` /
``get_delta_bracket(epsilon)`` (an :class:`~dputils.accountants.base.AccountingResult`).

Queries: ``target_delta`` in [0, 1] (0: the pure-DP epsilon, the largest privacy loss; 1: epsilon 0) and
``target_epsilon`` in [0, inf]. Invalid parameters (a negative noise multiplier, a sampling probability
outside [0, 1], a composition count that is not an integer) raise ``DPValueError``, a ``ValueError``;
``UnsupportedEventError`` is kept for events the accountant cannot account.
"""

from __future__ import annotations

import inspect
import math
import warnings
from typing import Any

from dp_accounting import dp_event
from dp_accounting.privacy_accountant import NeighboringRelation, PrivacyAccountant

from ..accountants import registry
from ..accountants.base import Accountant, AccountingResult
from ..errors import DPValueError, check_choice, check_epsilon, check_finite, check_nonnegative_int, check_positive_int
from ..mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism, SubsampledLaplaceMechanism
from ._certified import _query, certified_answer

__all__ = ["NAMES", "DputilsPrivacyAccountant", "make_accountant"]

#: The leaf mechanisms the adapter translates dp_accounting's events into (see the module docstring).
EVENTS = frozenset({"gaussian", "laplace", "subsampled-gaussian", "subsampled-laplace"})

#: The dputils accountants this adapter offers: the registered ones, no variant, that compose every mechanism
#: of :data:`EVENTS` (in the registry's order).
NAMES = tuple(r.name for r in registry.select(events=EVENTS, variants=False))


def __getattr__(name: str) -> Any:
    if name == "ACCOUNTANTS":  # the former name of NAMES (it clashed with dputils.book.atlas.ACCOUNTANTS)
        warnings.warn(
            "dputils.interop.dp_accounting.ACCOUNTANTS is deprecated; use NAMES", DeprecationWarning, stacklevel=2
        )
        return NAMES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_NOTHING = object()  # a leaf that releases nothing (Poisson sampling with probability 0)


def _noise(event: dp_event.DpEvent) -> float:
    """The noise_multiplier of a Gaussian or Laplace event: finite and >= 0, else DPValueError."""
    s = check_finite("noise_multiplier", event.noise_multiplier)
    if s < 0:
        raise DPValueError(f"Noise multiplier (noise_multiplier of {type(event).__name__}) must be >= 0, got {s!r}")
    return s


def _sampling_probability(event: dp_event.PoissonSampledDpEvent) -> float:
    q = check_finite("sampling_probability", event.sampling_probability)
    if not 0 <= q <= 1:
        raise DPValueError(
            f"Sampling rate (sampling_probability of PoissonSampledDpEvent) must be in [0, 1], got {q!r}"
        )
    return q


def _count(value: Any, name: str = "SelfComposedDpEvent.count", low: int = 0) -> int:
    """A composition count: an integer >= low (an integral float such as 3.0 is accepted)."""
    if low == 0:
        return check_nonnegative_int(name, value)

    return check_positive_int(name, value)


class DputilsPrivacyAccountant(PrivacyAccountant):
    """A ``dp_accounting.PrivacyAccountant`` whose arithmetic is a dputils accountant (see the module
    docstring for the events it takes and what ``get_epsilon`` returns).

    Args:
        name: one of :data:`NAMES` (``"pld"``, ``"rdp"``, ``"spa"``, ``"edgeworth"``).
        neighboring_relation: only ``NeighboringRelation.ADD_OR_REMOVE_ONE``.
        report: ``"upper"`` (default, the certified upper end) or ``"estimate"``.
        **options: passed to the dputils accountant (e.g. ``discretization=1e-4`` for ``pld``,
            ``orders=...`` for ``rdp``).
    """

    def __init__(
        self,
        name: str = "pld",
        neighboring_relation: NeighboringRelation = NeighboringRelation.ADD_OR_REMOVE_ONE,
        report: str = "upper",
        **options: Any,
    ) -> None:
        check_choice("name", name, NAMES)
        if neighboring_relation != NeighboringRelation.ADD_OR_REMOVE_ONE:
            raise DPValueError(
                f"dputils accountants support NeighboringRelation.ADD_OR_REMOVE_ONE only, got {neighboring_relation}"
            )
        self.report = check_choice("report", report, ("upper", "estimate"))
        super().__init__(neighboring_relation)
        self.name = name
        self.options = dict(options)
        reg = registry.get(name)
        try:
            inspect.signature(reg.cls).bind(**{**reg.options, **options})
        except TypeError:
            known = [p for p in inspect.signature(reg.cls).parameters if p not in ("self", "args", "kwargs")]
            raise DPValueError(
                f"{name}: unknown option(s) {sorted(options)}; this accountant takes {', '.join(known) or 'no options'}"
            ) from None
        self.inner: Accountant = reg.create(**options)
        self._infinite = False  # a composed event without noise (noise_multiplier 0, or q = 1 of it)

    # --------------------------------------------------------------------------------- events
    def _mechanism(self, event: dp_event.DpEvent) -> Any:
        """The dputils mechanism of a leaf event, ``None`` for one that releases everything, or a string
        saying why the event is not supported. Invalid parameters raise ``DPValueError`` (invalid is not
        unsupported)."""

        if isinstance(event, (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent)):
            s = _noise(event)
            if s == 0:
                return None
            return GaussianMechanism(s) if isinstance(event, dp_event.GaussianDpEvent) else LaplaceMechanism(s)
        if isinstance(event, dp_event.PoissonSampledDpEvent):
            q = _sampling_probability(event)
            inner = event.event
            if not isinstance(inner, (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent)):
                return f"Poisson sampling of {type(inner).__name__} (only Gaussian and Laplace)"
            noise = _noise(inner)
            if q == 0:
                return _NOTHING
            if q == 1 or noise == 0:
                # q = 1: no sampling; noise 0: the sampled record's value is released whenever it is
                # sampled, and q > 0, so epsilon is infinite (delta(eps) = q for every eps: not private)
                return self._mechanism(inner)
            if isinstance(inner, dp_event.GaussianDpEvent):
                return SubsampledGaussianMechanism(noise, q)
            return SubsampledLaplaceMechanism(noise, q)
        return f"{type(event).__name__} is not supported by the dputils adapter"

    def _leaves(self, event: dp_event.DpEvent, count: int):
        """The leaf events of ``event`` with their multiplicities, walked with an explicit stack (a chain of
        thousands of nested ``ComposedDpEvent``s does not hit Python's recursion limit)."""
        stack = [(event, count)]
        while stack:
            ev, n = stack.pop()
            if isinstance(ev, dp_event.SelfComposedDpEvent):
                stack.append((ev.event, n * _count(ev.count)))
            elif isinstance(ev, dp_event.ComposedDpEvent):
                parts = ev.events
                if not isinstance(parts, (list, tuple)):
                    raise DPValueError(f"ComposedDpEvent.events must be a list of DpEvents, got {parts!r}")
                stack.extend((part, n) for part in reversed(parts))
            elif not isinstance(ev, dp_event.DpEvent):
                raise DPValueError(f"events must be DpEvent objects, got {type(ev).__name__}")
            else:
                yield ev, n

    def _maybe_compose(
        self, event: dp_event.DpEvent, count: int, do_compose: bool
    ) -> PrivacyAccountant.CompositionErrorDetails | None:
        count = _count(count, "count", low=0)
        plan: list[tuple[Any, int]] = []
        infinite = False
        for leaf, n in self._leaves(event, count):
            if isinstance(leaf, dp_event.NoOpDpEvent):
                continue
            if isinstance(leaf, dp_event.NonPrivateDpEvent):
                infinite = infinite or n > 0
                continue
            mech = self._mechanism(leaf)
            if mech is _NOTHING:  # never sampled: releases nothing about anyone
                continue
            if isinstance(mech, str):
                return PrivacyAccountant.CompositionErrorDetails(invalid_event=leaf, error_message=mech)
            if mech is None:  # no noise: the composition has infinite epsilon
                infinite = infinite or n > 0
                continue
            try:
                self.inner.check_supported(mech)
            except (DPValueError, ValueError) as exc:
                msg = str(exc)
                return PrivacyAccountant.CompositionErrorDetails(
                    invalid_event=leaf, error_message=msg if msg.startswith(f"{self.name}:") else f"{self.name}: {msg}"
                )
            if n > 0:
                plan.append((mech, n))
        if do_compose:
            self._infinite = self._infinite or infinite
            for mech, n in plan:
                self.inner.compose(mech, n)
        return None

    def compose(self, event: dp_event.DpEvent, count: int = 1) -> DputilsPrivacyAccountant:
        """Account for ``count`` runs of ``event`` (``UnsupportedEventError`` for an event this accountant
        cannot account, ``DPValueError`` for invalid parameters or a ``count`` that is not an integer >= 1)."""
        count = _count(count, "count", low=1)
        if not isinstance(event, dp_event.DpEvent):
            raise DPValueError(f"event must be a dp_accounting DpEvent, got {type(event).__name__}")
        try:
            return super().compose(event, count)
        except RecursionError:  # dp_accounting's own ledger or the event's repr on a deeply nested event
            raise DPValueError(
                "event is nested too deeply for dp_accounting's ledger; flatten the ComposedDpEvents into one list"
            ) from None

    # --------------------------------------------------------------------------------- queries
    def _empty(self) -> bool:
        return not self.inner.ledger

    def _pure_epsilon(self) -> AccountingResult:
        """epsilon(0): the largest privacy loss the composition can reach, exactly. It is the sum over the
        ledger of each mechanism's largest loss (the supremum of L = log p/q on the support, finite only for
        bounded losses such as the Laplace mechanism's 1/b), the worse of the two directions; infinite for a
        Gaussian mechanism, whose loss is unbounded."""
        worst = 0.0
        for direction in self.inner.directions:
            total = 0.0
            for mech, n in self.inner.ledger:
                hi = float(mech.pair(direction).loss_support[1])
                total += n * max(hi, 0.0)
            worst = max(worst, total)
        return AccountingResult(
            worst,
            worst,
            worst,
            "exact",
            self.name,
            "epsilon",
            {"reason": "delta = 0: the largest privacy loss of the composition"},
        )

    def get_epsilon_bracket(self, target_delta: float) -> AccountingResult:
        """The dputils answer for epsilon(target_delta): value, certified lower/upper, kind, details.

        ``target_delta`` may be any number in [0, 1]: 1 gives epsilon 0 (every mechanism is (0, 1)-DP),
        0 the pure-DP epsilon (infinite unless every mechanism's privacy loss is bounded)."""
        target_delta = check_finite("target_delta", target_delta)
        if not 0 <= target_delta <= 1:
            raise DPValueError(f"target_delta must be in [0, 1], got {target_delta!r}")
        if self._infinite:
            return AccountingResult(
                math.inf,
                math.inf,
                math.inf,
                "exact",
                self.name,
                "epsilon",
                {"reason": "an event without noise was composed"},
            )
        if self._empty():
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.name, "epsilon", {"reason": "nothing composed"})
        if target_delta == 1:
            return AccountingResult(
                0.0, 0.0, 0.0, "exact", self.name, "epsilon", {"reason": "delta = 1: every mechanism is (0, 1)-DP"}
            )
        if target_delta == 0:
            return self._pure_epsilon()
        return (
            certified_answer(self.inner, "epsilon", target_delta)
            if self.report == "upper"
            else _query(self.inner, "epsilon", target_delta)
        )

    def get_delta_bracket(self, target_epsilon: float) -> AccountingResult:
        """The dputils answer for delta(target_epsilon): value, certified lower/upper, kind, details.

        ``target_epsilon`` may be any number in [0, inf]; at infinity delta is 0 unless an event without
        noise was composed."""
        if (
            isinstance(target_epsilon, (int, float))
            and not isinstance(target_epsilon, bool)
            and target_epsilon == math.inf
        ):
            v = 1.0 if self._infinite else 0.0
            return AccountingResult(v, v, v, "exact", self.name, "delta", {"reason": "epsilon = infinity"})
        target_epsilon = check_epsilon(target_epsilon, "target_epsilon")
        if self._infinite:
            return AccountingResult(
                1.0, 1.0, 1.0, "exact", self.name, "delta", {"reason": "an event without noise was composed"}
            )
        if self._empty():
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.name, "delta", {"reason": "nothing composed"})
        return (
            certified_answer(self.inner, "delta", target_epsilon)
            if self.report == "upper"
            else _query(self.inner, "delta", target_epsilon)
        )

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
    """A fresh ``dp_accounting.PrivacyAccountant`` backed by the dputils accountant ``name`` (one of
    :data:`NAMES`); ``options`` as for :class:`DputilsPrivacyAccountant`."""
    return DputilsPrivacyAccountant(name, **options)
