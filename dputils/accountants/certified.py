"""A certified answer from the estimate accountants, with the PLD's certified bracket where theirs says nothing.

The saddle-point (``spa``) and Edgeworth (``edgeworth``) accountants give an estimate with a certified
bracket, and in some regimes the bracket is vacuous (the Edgeworth error bound exceeds delta, so its upper
epsilon is infinite; its delta upper end is 1), very wide (Theorem 5 of the saddle-point paper far from the
CLT regime: at sigma 1, q 0.01, delta 1e-5 and T 1 to 10 its epsilon bracket is [0, ~1] around an SP-CLT
estimate three times the exact value), or the method fails numerically (no saddle point, a quadrature grid
over its limit). A certified number that is infinite, or an estimate three times off, is no answer. So, by
default (``fallback="pld"`` of both accountants, and the ``report="upper"`` mode of the adapters of
:mod:`dputils.interop`), the PLD accountant (a certified bracket of its own, on the same ledger and
neighbouring directions) is run as well when

* the method raised :class:`~dputils.errors.NumericalError`, or
* its certified upper end is vacuous (epsilon infinite, delta >= 1), or
* its bracket is wide: ``upper - lower > rtol * upper`` (``rtol`` 0.1),

and the result is the intersection of the two certified brackets (each contains the exact value, so their
intersection does), the method's estimate clipped into it as the value. ``details["fallback"]`` is
``"pld"`` then, with ``fallback_reason``, ``own_value`` (the method's own estimate), ``own_bracket`` and
``pld_bracket``. Where the PLD cannot take the ledger and the method has no useful certified number,
:class:`~dputils.errors.NumericalError` is raised (the method's own answer stays available with
``fallback="none"``).

The saddle-point accountant's :class:`~dputils.accountants.spa.SaddlePointWarning` (its SP-CLT *estimate* may
be off in the degraded regime) is passed on only when the method's own answer is returned; where the PLD's
bracket replaces a wide one, the estimate has been clipped into a narrow certified bracket and the warning
no longer applies.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

from ..errors import DPValueError, NumericalError
from .base import Accountant, AccountingResult

#: relative width of a certified bracket above which the PLD is consulted as well
RTOL = 0.1
#: the choices of the ``fallback`` option of the estimate accountants
FALLBACKS = ("pld", "none")


def own_query(acc: Accountant, quantity: str, target: float) -> AccountingResult:
    """The accountant's answer (``get_epsilon``/``get_delta``); a bare arithmetic failure inside it (overflow,
    division by zero, a root finder's NaN: extreme inputs such as sigma 1e-100) becomes ``NumericalError``
    naming the accountant."""
    fn = acc.get_epsilon if quantity == "epsilon" else acc.get_delta
    return _guarded(acc.name, quantity, lambda: fn(target))


def _guarded(name: str, quantity: str, fn: Callable[[], AccountingResult]) -> AccountingResult:
    try:
        return fn()
    except (DPValueError, NumericalError):
        raise
    except (ArithmeticError, ValueError) as exc:
        raise NumericalError(
            f"{name}: {quantity} could not be computed for this composition ({type(exc).__name__}: {exc})"
        ) from exc


def _vacuous(res: AccountingResult | None, quantity: str) -> bool:
    return (
        res is None
        or res.upper is None
        or (quantity == "epsilon" and not math.isfinite(res.upper))
        or (quantity == "delta" and res.upper >= 1)
    )


def useless(res: AccountingResult | None, quantity: str) -> bool:
    """Whether ``res`` needs the PLD: failed, vacuous or wider than :data:`RTOL` of its upper end."""
    if _vacuous(res, quantity):
        return True
    lo = 0.0 if res.lower is None else res.lower
    return res.upper - lo > RTOL * res.upper


def _fallback_pld(acc: Accountant) -> Accountant:
    """The PLD accountant on ``acc``'s ledger, built once per ledger and kept on ``acc`` (a calibration or a
    sweep of queries asks the same composition many times; the PLD caches its composed distribution)."""
    from .pld import PLDAccountant  # the PLD package imports the registry; imported when first needed

    key = (acc.direction, tuple((id(m), c) for m, c in acc.ledger))
    cached = getattr(acc, "_dputils_pld_fallback", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    pld = PLDAccountant(direction=acc.direction)
    for mech, count in acc.ledger:
        pld.compose(mech, count)
    acc._dputils_pld_fallback = (key, pld)
    return pld


def with_pld_fallback(
    acc: Accountant, quantity: str, target: float, own: Callable[[], AccountingResult]
) -> AccountingResult:
    """``own()`` (the method's answer for ``quantity`` at ``target``), its certified bracket intersected with the
    PLD's where it failed, is vacuous or is wide (see the module docstring)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res, failure = _guarded(acc.name, quantity, own), None
        except NumericalError as exc:
            res, failure = None, exc
    if not useless(res, quantity):
        for w in caught:  # the method's own answer is returned: its warnings apply
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return res
    try:
        pld = _fallback_pld(acc)
    except DPValueError as exc:
        if not _vacuous(res, quantity):
            return res  # wide but certified, and nothing to narrow it with
        why = f"it failed ({failure})" if failure is not None else "its certified bound is vacuous here"
        raise NumericalError(
            f"{acc.name}: no certified {quantity} for this composition: {why}, and the PLD "
            f"fallback cannot take it ({exc}); use fallback='none' (report='estimate') for the approximation"
        ) from exc
    ref = own_query(pld, quantity, target)
    upper = ref.upper if res is None or res.upper is None else min(res.upper, ref.upper)
    lower = ref.lower if res is None or res.lower is None else max(res.lower, ref.lower or 0.0)
    lower = min(lower, upper)
    value = upper if res is None else min(max(res.value, lower), upper)
    details = dict(res.details) if res is not None else {}
    details.update(
        fallback="pld",
        fallback_reason=("failed: " + str(failure))
        if failure is not None
        else ("vacuous" if _vacuous(res, quantity) else "wide bracket"),
        own_value=None if res is None else res.value,
        own_bracket=None if res is None else [res.lower, res.upper],
        pld_bracket=[ref.lower, ref.upper],
        discretization=ref.details.get("discretization"),
    )
    kind = "upper-bound" if res is None else "estimate"
    return AccountingResult(value, lower, upper, kind, acc.name, quantity, details)


class PLDFallbackMixin:
    """``get_delta``/``get_epsilon`` of an estimate accountant with a ``fallback`` option (``"pld"`` or
    ``"none"``, :data:`FALLBACKS`): the checked query, then the method's own answer (``_own_delta``/``_own_epsilon``,
    which the accountant defines) narrowed by the PLD's certified bracket where it is vacuous, wide or failed
    (:func:`with_pld_fallback`) when ``fallback == "pld"``, or the own answer alone. One helper for the
    saddle-point and Edgeworth accountants (listed before :class:`~dputils.accountants.base.Accountant` in
    their bases)."""

    fallback: str

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        self._require_ledger()
        if self.fallback == "pld":
            return with_pld_fallback(self, "delta", eps, lambda: self._own_delta(eps))
        return self._own_delta(eps)

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        self._require_ledger()
        if self.fallback == "pld":
            return with_pld_fallback(self, "epsilon", delta, lambda: self._own_epsilon(delta))
        return self._own_epsilon(delta)


def certified_answer(acc: Accountant, quantity: str, target: float) -> AccountingResult:
    """``acc``'s answer for ``quantity`` at ``target``; for an estimate accountant of the common mechanisms
    (``spa``, ``edgeworth``) its certified bracket narrowed by the PLD's where it is vacuous, wide or failed
    (:func:`with_pld_fallback`, whatever the accountant's own ``fallback`` option). Others as they are."""
    from . import registry

    reg = registry.get(acc.name)
    if not (reg.answer == "estimate" and reg.common_events):
        return own_query(acc, quantity, target)
    return with_pld_fallback(acc, quantity, target, lambda: own_query(acc, quantity, target))
