"""The base class of the dputils Opacus accountants (:mod:`dputils.interop.opacus`, ``opacus_shuffle``): a
dputils accountant behind Opacus's ``IAccountant`` interface. Kept apart so that the modules that define and
register the accountants import it without importing each other."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from opacus.accountants import IAccountant

from ..accountants import registry
from ..accountants.base import Accountant, AccountingResult
from ..errors import DPValueError, check_choice, check_delta, check_nonnegative, check_positive_int, check_probability
from ..mechanisms import GaussianMechanism, SubsampledGaussianMechanism
from ._certified import _query, certified_answer


class OpacusHistory(IAccountant):
    """Opacus's step history of every dputils Opacus accountant: ``history`` is a list of
    ``(noise_multiplier, sample_rate, steps)`` with consecutive equal steps merged; ``mechanism()`` is the class's
    ``MECHANISM`` name; the history and ``state_dict`` checks refuse bad entries by name (``DPValueError``)."""

    MECHANISM = "dputils-abstract"

    def __init__(self) -> None:
        super().__init__()
        self.history: list[tuple[float, float, int]] = []

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

    @staticmethod
    def _checked_history(history: Any) -> list[tuple[float, float, int]]:
        """``history`` as a list of ``(noise_multiplier, sample_rate, steps)``, or ``DPValueError`` naming
        the first bad entry (noise_multiplier finite and >= 0, sample_rate in [0, 1], steps an integer >= 1)."""
        if isinstance(history, (str, bytes)) or not isinstance(history, (list, tuple)):
            raise DPValueError(
                f"history must be a list of (noise_multiplier, sample_rate, steps) tuples, got {type(history).__name__}"
            )
        out = []
        for k, entry in enumerate(history):
            if isinstance(entry, (str, bytes)) or not isinstance(entry, (list, tuple)) or len(entry) != 3:
                raise DPValueError(f"history[{k}] must be (noise_multiplier, sample_rate, steps), got {entry!r}")
            sigma, q, n = entry
            sigma = check_nonnegative(f"history[{k}] noise_multiplier", sigma)
            q = check_probability(f"history[{k}] sample_rate", q, allow_zero=True)
            n = check_positive_int(f"history[{k}] steps", n)
            out.append((sigma, q, n))
        return out

    def _check_state_keys(self, state_dict: Any) -> None:
        """A non-empty mapping with ``history`` and this accountant's ``mechanism``, or ``DPValueError``."""
        if not isinstance(state_dict, Mapping) or not state_dict:
            raise DPValueError(
                f"state_dict must be a non-empty mapping with 'history' and 'mechanism', got "
                f"{type(state_dict).__name__}"
            )
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise DPValueError(f"state_dict has no key {key!r}; cannot load it into {self.MECHANISM}")
        if state_dict["mechanism"] != self.MECHANISM:
            raise DPValueError(f"state_dict is of the accountant {state_dict['mechanism']!r}, not {self.MECHANISM!r}")


class DputilsOpacusAccountant(OpacusHistory):
    """Base of the Opacus accountants backed by a dputils accountant (``NAME``, a name of
    :mod:`dputils.accountants.registry`, picks which).

    Args:
        report: ``"upper"`` (default): ``get_epsilon`` returns the certified upper end; ``"estimate"``: the
            point estimate (an approximation for spa and edgeworth).
        **options: passed to the dputils accountant (e.g. ``discretization=1e-4`` for the PLD).
    """

    NAME = "abstract"
    MECHANISM = "dputils-abstract"
    #: constructor options of the dputils accountant that the user's options override
    DEFAULTS: ClassVar[dict] = {}

    def __init__(self, report: str = "upper", **options: Any) -> None:
        super().__init__()
        self.report = check_choice("report", report, ("upper", "estimate"))
        self.options = dict(options)
        try:
            self._make()  # check the options now rather than at the first get_epsilon
        except TypeError:
            raise DPValueError(f"{self.MECHANISM}: unknown option(s) {sorted(options)}") from None

    def _make(self) -> Accountant:
        """A fresh dputils accountant of the registered name ``NAME`` with ``DEFAULTS`` and the options."""
        return registry.create(self.NAME, **{**self.DEFAULTS, **self.options})

    def _composed(self) -> tuple[Accountant, bool]:
        """The dputils accountant of the history, and whether a step without noise was taken (epsilon
        infinite: noise_multiplier 0 with a sample_rate above 0)."""

        acc = self._make()
        infinite = False
        for sigma, q, n in self._checked_history(self.history):
            if q == 0:
                continue
            if sigma == 0:
                infinite = True
                continue
            try:
                mech = GaussianMechanism(sigma) if q == 1 else SubsampledGaussianMechanism(sigma, q)
            except DPValueError as exc:
                raise DPValueError(f"history: {exc}") from None
            acc.compose(mech, n)
        return acc, infinite

    def get_epsilon_bracket(self, delta: float) -> AccountingResult:
        """The whole dputils answer for epsilon(delta): value, certified lower and upper bounds, kind.

        With ``report="upper"`` a vacuous, wide or failed saddle-point / Edgeworth bracket is narrowed by
        the PLD's (:mod:`dputils.interop._certified`)."""
        delta = check_delta(delta)
        acc, infinite = self._composed()
        if infinite:
            return AccountingResult(
                math.inf,
                math.inf,
                math.inf,
                "exact",
                self.NAME,
                "epsilon",
                {"reason": "a step with noise_multiplier 0"},
            )
        if not acc.ledger:
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.NAME, "epsilon", {"reason": "no steps"})
        if self.report == "upper":
            return certified_answer(acc, "epsilon", delta)
        return _query(acc, "epsilon", delta)

    def load_state_dict(self, state_dict: Any) -> None:
        """Load ``state_dict()`` output: a mapping with ``history`` (checked entry by entry) and ``mechanism``
        equal to this accountant's name; anything else raises ``DPValueError`` (a ``ValueError``, as Opacus's
        own accountants raise) and leaves the accountant unchanged."""
        self._check_state_keys(state_dict)
        self.history = self._checked_history(state_dict["history"])

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        """epsilon(delta) of the steps so far: the certified upper end (``report="upper"``) or the estimate."""
        if kwargs:
            raise TypeError(f"{self.MECHANISM}: unexpected arguments {sorted(kwargs)} (options go to the constructor)")
        res = self.get_epsilon_bracket(delta)
        if self.report == "estimate" or res.upper is None:
            return float(res.value)
        return float(res.upper) if not math.isnan(res.upper) else math.inf
