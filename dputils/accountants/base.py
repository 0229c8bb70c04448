"""The accountant interface shared by every accountant in the book.

An accountant answers two questions about a composition of mechanisms:

* ``get_delta(epsilon)``: the smallest delta such that the composition is (epsilon, delta)-DP,
* ``get_epsilon(delta)``: the smallest epsilon such that it is (epsilon, delta)-DP.

Every answer is an :class:`AccountingResult`. Its ``value`` is what the accountant reports (an upper
bound unless ``kind`` says otherwise) and, where the method certifies them, ``lower`` and ``upper``
bracket the exact value. Results behave like floats (``float(result)``) so they drop into arithmetic.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .._records import record_init
from .._version import __version__
from ..errors import DPValueError, NumericalError, check_choice, check_delta, check_epsilon, check_positive_int
from ..state import (
    STATE_FORMAT,
    STATE_VERSION,
    _class_at,
    _path,
    _plain,
    check_state,
    mechanism_from_state,
    mechanism_state,
)

#: The kinds of answers an accountant may give.
KINDS = ("upper-bound", "lower-bound", "estimate", "approximation", "exact")


@dataclass(frozen=True)
class AccountingResult:
    """One answer of an accountant.

    Attributes:
        value: the reported number. For ``kind == "upper-bound"`` it is a certified upper bound on the
            exact epsilon or delta; for ``"estimate"`` it comes with a certified ``lower``/``upper``
            bracket; for ``"approximation"`` nothing is certified (e.g. the CLT/GDP accountant).
        lower: certified lower bound on the exact value, or None when the method has none.
        upper: certified upper bound on the exact value, or None (``math.inf`` when the bound is vacuous).
        kind: one of :data:`KINDS`.
        accountant: the accountant's registered name.
        quantity: ``"epsilon"`` or ``"delta"``.
        details: method-specific extras (direction that attained the max, grid sizes, orders, ...).
    """

    value: float
    lower: float | None
    upper: float | None
    kind: str
    accountant: str
    quantity: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.quantity not in ("epsilon", "delta"):
            raise ValueError(f"quantity must be 'epsilon' or 'delta', got {self.quantity!r}")
        if not (isinstance(self.value, (int, float)) and not math.isnan(self.value)):
            raise NumericalError(f"{self.accountant}: {self.quantity} is not a number ({self.value!r})")
        if self.value < 0:
            raise NumericalError(f"{self.accountant}: negative {self.quantity} ({self.value!r})")
        lo = -math.inf if self.lower is None else self.lower
        hi = math.inf if self.upper is None else self.upper
        if lo > hi * (1 + 1e-12) + 1e-300:
            raise NumericalError(f"{self.accountant}: empty bracket for {self.quantity}: lower {lo!r} > upper {hi!r}")

    def __float__(self) -> float:
        return float(self.value)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{quantity: value, "lower", "upper", "kind", "accountant", **details}``."""
        out: dict[str, Any] = {
            self.quantity: self.value,
            "lower": self.lower,
            "upper": self.upper,
            "kind": self.kind,
            "accountant": self.accountant,
        }
        out.update(self.details)
        return out


class Accountant(ABC):
    """Base class: a ledger of (mechanism, count) pairs and the two queries.

    Subclasses implement :meth:`get_delta` and :meth:`get_epsilon`; they may override
    :meth:`_check_supported` to reject mechanisms they cannot handle (raise ``ValueError``).
    ``direction`` selects the neighbouring relation: ``"both"`` (default) reports the worse of
    the add and remove directions, ``"add"`` or ``"remove"`` only that one.
    """

    name: ClassVar[str] = "abstract"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        record_init(cls)  # the constructor's arguments, for state_dict()

    def __init__(self, direction: str = "both") -> None:
        self.ledger: list[tuple[Any, int]] = []
        self.direction = check_choice("direction", direction, ("both", "add", "remove"))

    @property
    def directions(self) -> tuple[str, ...]:
        return ("remove", "add") if self.direction == "both" else (self.direction,)

    def compose(self, mechanism: Any, count: int = 1) -> Accountant:
        """Add ``count`` adaptive compositions of ``mechanism``; returns ``self`` for chaining."""
        count = check_positive_int("count", count)
        self._check_supported(mechanism)
        self.ledger.append((mechanism, count))
        self._invalidate()
        return self

    def _check_supported(self, mechanism: Any) -> None:  # pragma: no cover - default accepts all
        return None

    def check_supported(self, mechanism: Any) -> None:
        """Raise ``DPValueError`` naming the problem when this accountant cannot compose ``mechanism``."""
        self._check_supported(mechanism)

    def supports(self, mechanism: Any) -> bool:
        """Whether this accountant can compose ``mechanism`` (see :meth:`check_supported` for the reason)."""
        try:
            self._check_supported(mechanism)
        except (DPValueError, ValueError):
            return False
        return True

    def _invalidate(self) -> None:
        """Drop cached state after the ledger changed."""
        return None

    def _require_ledger(self) -> None:
        if not self.ledger:
            raise DPValueError(
                f"{self.name}: nothing composed yet; call compose(mechanism, count) before get_epsilon/get_delta"
            )

    @abstractmethod
    def get_delta(self, epsilon: float) -> AccountingResult:
        """delta(epsilon) of the composition."""

    @abstractmethod
    def get_epsilon(self, delta: float) -> AccountingResult:
        """epsilon(delta) of the composition."""

    # helpers for subclasses -------------------------------------------------------------------
    @staticmethod
    def _checked_epsilon(epsilon: float) -> float:
        return check_epsilon(epsilon)

    @staticmethod
    def _checked_delta(delta: float) -> float:
        return check_delta(delta)

    # saving and loading the ledger (dputils.state) ------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The accountant as strict JSON: its class, constructor options and ledger (mechanisms and counts), with
        a format name and version; :meth:`from_state_dict` rebuilds it (see :mod:`dputils.state`)."""
        opts = self.__dict__.get("_init_options", {"direction": self.direction})
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "dputils": __version__,
            "accountant": _path(self),
            "options": _plain(opts, "options"),
            "ledger": [
                {"mechanism": mechanism_state(m, f"ledger[{i}]"), "count": int(c)}
                for i, (m, c) in enumerate(self.ledger)
            ],
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Accountant:
        """The accountant a :meth:`state_dict` describes (``Accountant.from_state_dict`` takes any class;
        ``PLDAccountant.from_state_dict`` only a PLD accountant). Bad states raise DPValueError naming the field."""
        options, ledger = check_state(state)
        klass = _class_at(state.get("accountant"), cls, "state.accountant")
        try:
            acc = klass(**options)
        except TypeError as exc:
            raise DPValueError(f"state.options do not fit {klass.__name__}: {exc}") from None
        for i, entry in enumerate(ledger):
            acc.compose(mechanism_from_state(entry["mechanism"], f"state.ledger[{i}].mechanism"), entry["count"])
        return acc

    def __repr__(self) -> str:
        items = ", ".join(f"{m!r} x{c}" for m, c in self.ledger)
        return f"{type(self).__name__}(direction={self.direction!r}, ledger=[{items}])"


# the base constructor records its arguments too (accountants that add no options of their own)

record_init(Accountant)
