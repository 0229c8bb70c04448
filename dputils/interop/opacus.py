"""dputils accountants as Opacus accountants.

Importing this module registers five accountants with Opacus's ``register_accountant``:

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

import math
import warnings
from typing import Any, ClassVar

from opacus.accountants import IAccountant, register_accountant
from opacus.accountants import RDPAccountant as _OpacusRDP

from ..accountants.base import Accountant, AccountingResult
from ..errors import DPValueError, check_choice, check_delta, check_nonnegative, check_positive_int, check_probability
from ._certified import _query, certified_answer

__all__ = ["DputilsOpacusAccountant", "PLDOpacusAccountant", "SPAOpacusAccountant", "EdgeworthOpacusAccountant",
           "RDPOpacusAccountant", "GDPOpacusAccountant", "MECHANISMS"]


class DputilsOpacusAccountant(IAccountant):
    """Base of the Opacus accountants backed by a dputils accountant (``NAME`` picks which).

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
        self.history: list[tuple[float, float, int]] = []
        self.report = check_choice("report", report, ("upper", "estimate"))
        self.options = dict(options)
        try:
            self._make()  # check the options now rather than at the first get_epsilon
        except TypeError:
            raise DPValueError(f"{self.MECHANISM}: unknown option(s) {sorted(options)}") from None

    def _make(self) -> Accountant:
        from ..accountants.edgeworth import EdgeworthAccountant
        from ..accountants.gdp import GDPAccountant
        from ..accountants.pld import PLDAccountant
        from ..accountants.rdp import RDPAccountant
        from ..accountants.spa import SaddlePointAccountant

        cls = {"pld": PLDAccountant, "spa": SaddlePointAccountant, "edgeworth": EdgeworthAccountant,
               "rdp": RDPAccountant, "gdp": GDPAccountant}[self.NAME]
        return cls(**{**self.DEFAULTS, **self.options})

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
            raise DPValueError(f"history must be a list of (noise_multiplier, sample_rate, steps) tuples, got "
                               f"{type(history).__name__}")
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

    def _composed(self) -> tuple[Accountant, bool]:
        """The dputils accountant of the history, and whether a step without noise was taken (epsilon
        infinite: noise_multiplier 0 with a sample_rate above 0)."""
        from ..mechanisms import GaussianMechanism, SubsampledGaussianMechanism

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
            return AccountingResult(math.inf, math.inf, math.inf, "exact", self.NAME, "epsilon",
                                    {"reason": "a step with noise_multiplier 0"})
        if not acc.ledger:
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.NAME, "epsilon", {"reason": "no steps"})
        if self.report == "upper":
            return certified_answer(acc, "epsilon", delta)
        return _query(acc, "epsilon", delta)

    def load_state_dict(self, state_dict: Any) -> None:
        """Load ``state_dict()`` output: a mapping with ``history`` (checked entry by entry) and ``mechanism``
        equal to this accountant's name; anything else raises ``DPValueError`` (a ``ValueError``, as Opacus's
        own accountants raise) and leaves the accountant unchanged."""
        from collections.abc import Mapping

        if not isinstance(state_dict, Mapping) or not state_dict:
            raise DPValueError(f"state_dict must be a non-empty mapping with 'history' and 'mechanism', got "
                               f"{type(state_dict).__name__}")
        for key in ("history", "mechanism"):
            if key not in state_dict:
                raise DPValueError(f"state_dict has no key {key!r}; cannot load it into {self.MECHANISM}")
        if state_dict["mechanism"] != self.MECHANISM:
            raise DPValueError(f"state_dict is of the accountant {state_dict['mechanism']!r}, not {self.MECHANISM!r}")
        self.history = self._checked_history(state_dict["history"])

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
            warnings.warn("dputils-gdp: the CLT approximation of the subsampled Gaussian (Bu et al. 2020, Cor. 4) "
                          "is not an upper bound and can under-estimate epsilon; use dputils-pld for a certified "
                          "one", UserWarning, stacklevel=3)
        return res


#: Opacus name -> class, registered on import.
MECHANISMS = {c.MECHANISM: c for c in (PLDOpacusAccountant, SPAOpacusAccountant, EdgeworthOpacusAccountant,
                                       RDPOpacusAccountant, GDPOpacusAccountant)}

for _name, _cls in MECHANISMS.items():
    register_accountant(_name, _cls, force=True)

from . import opacus_shuffle  # noqa: E402,F401  (registers dputils-shuffle and dputils-shuffle-bc)

# the one-run audit of a training loop (issue 27, item 1)
from .opacus_audit import OpacusAuditReport, OpacusCanaryAudit  # noqa: F401
