"""The certified answer the adapters report (``report="upper"``), with a fallback where the method has none.

The saddle-point (``spa``) and Edgeworth (``edgeworth``) accountants give an estimate with a certified
bracket, and in some regimes the bracket is vacuous (the Edgeworth error bound exceeds delta, so its upper
epsilon is infinite; its delta upper end is 1), very wide (Theorem 5 of the saddle-point paper far from the
CLT regime), or the method fails numerically (no saddle point, a quadrature grid over its limit). A peer
interface wants one certified number, and infinity or 1.0 for a private mechanism is no answer. So the
adapters, in ``report="upper"`` mode, also run the PLD accountant (a certified bracket of its own, on the
same ledger and neighbouring directions) when

* the method raised :class:`~dputils.errors.NumericalError`, or
* its certified upper end is vacuous (epsilon infinite, delta >= 1), or
* its bracket is wide: ``upper - lower > rtol * upper`` (``rtol`` 0.1),

and report the intersection of the two certified brackets (each contains the exact value, so their
intersection does): the upper end is the smaller upper end. ``details["fallback"]`` is ``"pld"`` then.
Where the PLD cannot take the ledger (a mechanism without privacy-loss tails to discretize; every
mechanism of :mod:`dputils.mechanisms` that the adapters build has them, the Poisson-subsampled Laplace
included) and the method has no useful certified number, :class:`~dputils.errors.NumericalError` is
raised, naming ``report="estimate"``. The ``pld`` and ``rdp`` accountants are reported as they are.

The saddle-point accountant's :class:`~dputils.accountants.spa.SaddlePointWarning` (its SP-CLT *estimate* may
be off in the degraded regime) is not passed on here: the adapters report a certified end, never the estimate,
and a wide bracket is exactly what the fallback above narrows.
"""

from __future__ import annotations

import math
import warnings

from ..accountants import registry
from ..accountants.base import Accountant, AccountingResult
from ..accountants.pld import PLDAccountant
from ..accountants.spa import SaddlePointWarning
from ..errors import DPValueError, NumericalError

#: relative width of a certified bracket above which the PLD is consulted as well
RTOL = 0.1
#: the accountants whose certified ends may need the fallback: the registered estimates of the common mechanisms
#: (today spa and edgeworth; :mod:`dputils.accountants.registry`)
WITH_FALLBACK = tuple(r.name for r in registry.select(answers="estimate") if r.common_events)


def _query(acc: Accountant, quantity: str, target: float) -> AccountingResult:
    """The accountant's answer; a bare arithmetic failure inside it (overflow, division by zero, a root
    finder's NaN: extreme inputs such as sigma 1e-100) becomes ``NumericalError`` naming the accountant."""
    try:
        return acc.get_epsilon(target) if quantity == "epsilon" else acc.get_delta(target)
    except (DPValueError, NumericalError):
        raise
    except (ArithmeticError, ValueError) as exc:
        raise NumericalError(
            f"{acc.name}: {quantity} could not be computed for this composition ({type(exc).__name__}: {exc})"
        ) from exc


def _useless(res: AccountingResult | None, quantity: str) -> bool:
    if res is None or res.upper is None:
        return True
    if quantity == "epsilon" and not math.isfinite(res.upper):
        return True
    if quantity == "delta" and res.upper >= 1:
        return True
    lo = 0.0 if res.lower is None else res.lower
    return res.upper - lo > RTOL * res.upper


def certified_answer(acc: Accountant, quantity: str, target: float) -> AccountingResult:
    """``acc``'s answer for ``quantity`` at ``target``, its certified bracket narrowed by the PLD's where
    it is vacuous, wide or failed (see the module docstring)."""
    if acc.name not in WITH_FALLBACK:
        return _query(acc, quantity, target)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SaddlePointWarning)  # about the estimate, which is not reported
            res, failure = _query(acc, quantity, target), None
    except NumericalError as exc:
        res, failure = None, exc
    if not _useless(res, quantity):
        return res
    try:
        pld = _fallback_pld(acc)
    except DPValueError as exc:
        if (
            res is not None
            and res.upper is not None
            and ((quantity == "epsilon" and math.isfinite(res.upper)) or (quantity == "delta" and res.upper < 1))
        ):
            return res  # wide but certified, and nothing to narrow it with
        why = f"it failed ({failure})" if failure is not None else "its certified bound is vacuous here"
        raise NumericalError(
            f"{acc.name}: no certified {quantity} for this composition: {why}, and the PLD "
            f"fallback cannot take it ({exc}); use report='estimate' for the approximation"
        ) from exc
    ref = _query(pld, quantity, target)
    upper = ref.upper if res is None or res.upper is None else min(res.upper, ref.upper)
    lower = ref.lower if res is None or res.lower is None else max(res.lower, ref.lower or 0.0)
    lower = min(lower, upper)
    value = upper if res is None else min(max(res.value, lower), upper)
    details = dict(res.details) if res is not None else {}
    details.update(
        fallback="pld",
        fallback_reason=("failed: " + str(failure))
        if failure is not None
        else ("vacuous" if _useless_vacuous(res, quantity) else "wide bracket"),
        own_bracket=None if res is None else [res.lower, res.upper],
        pld_bracket=[ref.lower, ref.upper],
        discretization=ref.details.get("discretization"),
    )
    kind = "upper-bound" if res is None else res.kind
    return AccountingResult(value, lower, upper, kind, acc.name, quantity, details)


def _fallback_pld(acc: Accountant) -> Accountant:
    """The PLD accountant on ``acc``'s ledger, built once per ledger and kept on ``acc`` (a calibration or a
    sweep of queries asks the same composition many times; the PLD caches its composed distribution)."""

    key = (acc.direction, tuple((id(m), c) for m, c in acc.ledger))
    cached = getattr(acc, "_dputils_pld_fallback", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    pld = PLDAccountant(direction=acc.direction)
    for mech, count in acc.ledger:
        pld.compose(mech, count)
    acc._dputils_pld_fallback = (key, pld)
    return pld


def _useless_vacuous(res: AccountingResult | None, quantity: str) -> bool:
    return (
        res is None
        or res.upper is None
        or (quantity == "epsilon" and not math.isfinite(res.upper))
        or (quantity == "delta" and res.upper >= 1)
    )
