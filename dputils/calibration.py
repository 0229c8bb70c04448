"""One calibration for every accountant: the noise multiplier (or number of steps, or sampling rate) at which a
privacy target is met, by Brent's method on a bracket, returning the end of the bracket that meets the target.

The quantity searched, ``x``, must move the accountant's answer monotonically: a noise multiplier lowers
epsilon (``monotone="decreasing"``), a number of steps or a sampling rate raises it (``"increasing"``). The
search works on ``g(x) = log(value(x)) - log(target)`` over ``log x``:

1. **Bracket.** From ``start``, step by factors of 2 (or 1 for integers) until one end meets the target
   (``value <= target``) and the other fails, within ``limits``.
2. **Brent.** ``scipy.optimize.brentq`` narrows the bracket on ``log x`` to the relative width ``rel_tol``.
3. **Conservative end.** The answer is the end of the final bracket that *meets* the target, checked by
   evaluating the accountant there: for a noise multiplier the upper end, for steps or a rate the lower end.
   So an upper-bound accountant gives a certified answer; the bracket and the value achieved are reported.

``method="secant"`` replaces steps 1-2 by secant steps on the same ``g`` (the search of the matrix chapter's
noise curves, :func:`dputils.matrix.noise_curves.secant_calibrate`): from ``start`` the bracket is found with
secant steps of at most 0.4 in ``log x``, then each round evaluates ``g`` just either side of the secant
estimate (so one round usually closes the bracket to ``rel_tol``) and bisects once when a round removed less
than half of it. From a good ``start`` (e.g. the answer at a neighbouring target) and on a smooth ``log value``
this needs about half the evaluations of a bisection; the answer is again an end of the final bracket at which
the target was met (step 3), so both methods give the same guarantee.

An evaluation that raises :class:`~dputils.errors.NumericalError`, or returns infinity or NaN, counts as not
meeting the target. The number of accountant evaluations is bounded (``max_evaluations``) and reported.

The front doors :func:`calibrate_noise`, :func:`dputils.audit.model1.calibrate_sigma`,
:func:`dputils.matrix.allocation.calibrate_sigma`, :func:`dputils.matrix.condcomp.calibrate` and
:func:`dputils.matrix.noise_curves.secant_calibrate` are thin wrappers over :func:`calibrate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scipy import optimize

from .errors import (
    DPValueError,
    NumericalError,
    check_choice,
    check_delta,
    check_finite,
    check_positive,
    check_positive_int,
)
from .numerics import bisect_monotone

__all__ = [
    "Calibration",
    "calibrate",
    "calibrate_noise",
    "check_rel_tol",
    "REL_TOL_RANGE",
    "MAX_EVALUATIONS",
    "METHODS",
]

#: Allowed relative width of the final bracket.
REL_TOL_RANGE = (1e-12, 0.5)
#: Default bound on accountant evaluations.
MAX_EVALUATIONS = 200
#: The searches of :func:`calibrate`: Brent's method (default) or secant steps (module docstring).
METHODS = ("brent", "secant")
#: Largest secant step in ``log x`` (a factor 1.5), and where :func:`calibrate`'s secant floors the value.
_SECANT_MAX_STEP, _SECANT_FLOOR = 0.4, 1e-300


@dataclass(frozen=True)
class Calibration:
    """The answer of :func:`calibrate`.

    Attributes:
        value: the end of the final bracket that meets the target (use this one).
        achieved: the accountant's number at ``value`` (``<= target``).
        bracket: ``(lo, hi)``, one end meeting the target and the other not, ``hi / lo - 1 <= rel_tol`` (or
            adjacent integers).
        target: the target that was met.
        evaluations: accountant evaluations spent.
        rel_tol: the relative width asked for.
    """

    value: float
    achieved: float
    bracket: tuple[float, float]
    target: float
    evaluations: int
    rel_tol: float
    details: dict[str, Any] = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.value)


def check_rel_tol(rel_tol: Any) -> float:
    """A relative tolerance in :data:`REL_TOL_RANGE` (finite; 0, negative, nan or below 1e-12 are refused)."""
    t = check_finite("rel_tol", rel_tol)
    lo, hi = REL_TOL_RANGE
    if not lo <= t <= hi:
        raise DPValueError(f"rel_tol must be in [{lo:g}, {hi:g}], got {t!r}")
    return t


def calibrate(
    value: Callable[[float], float],
    target: float,
    *,
    monotone: str = "decreasing",
    start: float = 1.0,
    limits: tuple[float, float] = (1e-3, 1e4),
    rel_tol: float = 1e-3,
    integer: bool = False,
    max_evaluations: int = MAX_EVALUATIONS,
    name: str = "x",
    failures: str = "miss",
    method: str = "brent",
    secant_step: float = 0.03,
) -> Calibration:
    """The ``x`` in ``limits`` at which ``value(x) <= target`` holds at the conservative end (module docstring).

    Args:
        value: ``x -> `` the accountant's upper bound (epsilon at a fixed delta, or delta at a fixed epsilon).
        target: the largest acceptable value (> 0).
        monotone: ``"decreasing"`` when larger ``x`` is more private (noise), ``"increasing"`` when larger ``x``
            is less private (steps, sampling rate).
        start: first point of the bracket search; limits: the range searched (``0 < lo < hi``).
        rel_tol: relative width of the final bracket, in :data:`REL_TOL_RANGE`; ignored for integers, which
            stop at adjacent values.
        integer: search integers (e.g. steps).
        max_evaluations: bound on calls of ``value``; :class:`NumericalError` beyond it.
        name: the parameter's name in messages.
        failures: ``"miss"`` (default): an evaluation raising :class:`NumericalError` counts as not meeting
            the target; ``"raise"``: it propagates.
        method: ``"brent"`` (default: bracket by factors of 2, then Brent) or ``"secant"`` (secant steps on
            ``log value`` against ``log x`` from ``start``, module docstring; real ``x`` only). With
            ``"secant"`` the search raises :class:`NumericalError` when a bracket step leaves ``limits``
            (instead of reporting an answer at a limit).
        secant_step: the first step in ``log x`` of the secant's bracket search (``method="secant"``).
    """
    target = check_positive("target", target)
    check_choice("monotone", monotone, ("decreasing", "increasing"))
    check_choice("failures", failures, ("miss", "raise"))
    check_choice("method", method, METHODS)
    if method == "secant":
        secant_step = check_positive("secant_step", secant_step)
        if integer:
            raise DPValueError("calibrate: method='secant' searches a real x; use method='brent' for integers")
    rel_tol = check_rel_tol(rel_tol)
    max_evaluations = check_positive_int("max_evaluations", max_evaluations)
    if isinstance(limits, (str, bytes)) or not hasattr(limits, "__len__") or len(limits) != 2:
        raise DPValueError(f"limits must be a pair (lo, hi) with 0 < lo < hi < inf, got {limits!r}")
    lo_lim, hi_lim = check_finite("limits[0]", limits[0]), check_finite("limits[1]", limits[1])
    if not 0 < lo_lim < hi_lim or not math.isfinite(hi_lim):
        raise DPValueError(f"limits must satisfy 0 < lo < hi < inf, got {limits!r}")
    start = check_positive("start", start)
    if not lo_lim <= start <= hi_lim:
        raise DPValueError(f"start must lie in the limits [{lo_lim:g}, {hi_lim:g}], got {start!r}")
    if integer:
        lo_lim, hi_lim, start = math.ceil(lo_lim), math.floor(hi_lim), round(start)
    increasing = monotone == "increasing"
    cache: dict[float, float] = {}

    def f(x: float) -> float:
        if x in cache:
            return cache[x]
        if len(cache) >= max_evaluations:
            raise NumericalError(
                f"calibrate {name}: no convergence within {max_evaluations} accountant "
                "evaluations; use a larger rel_tol"
            )
        try:
            v = float(value(int(x) if integer else x))
        except NumericalError:
            if failures == "raise":
                raise
            v = math.inf
        cache[x] = math.inf if math.isnan(v) else v
        return cache[x]

    def meets(x: float) -> bool:
        return f(x) <= target

    if method == "secant":
        good, other = _secant(f, target, start, (lo_lim, hi_lim), rel_tol, increasing, secant_step, name)
        lo, hi = sorted((good, other))
        return _result(good, f(good), target, len(cache), rel_tol, {"bracket": (lo, hi), "method": "secant"})

    # 1. bracket: `good` meets the target, `bad` does not
    factor = 2.0
    x = start
    if meets(x):
        good = x
        while True:  # move towards less privacy until the target fails
            x = good * factor if increasing else good / factor
            if integer:
                x = float(round(x)) if x != good else good + (1 if increasing else -1)
            if x > hi_lim or x < lo_lim:
                edge = "largest" if increasing else "smallest"
                return _result(
                    good,
                    f(good),
                    target,
                    len(cache),
                    rel_tol,
                    {"at_limit": True, "note": f"the target is met at the {edge} {name} searched ({good:g})"},
                )
            if meets(x):
                good = x
            else:
                bad = x
                break
    else:
        bad = x
        while True:  # move towards more privacy until the target is met
            x = bad / factor if increasing else bad * factor
            if integer:
                x = float(round(x)) if round(x) != bad else bad + (-1 if increasing else 1)
            if x > hi_lim or x < lo_lim:
                raise NumericalError(
                    f"calibrate {name}: no {name} in [{lo_lim:g}, {hi_lim:g}] meets the target "
                    f"{target:g} (the accountant gives {f(bad):g} at {name}={bad:g})"
                )
            if meets(x):
                good = x
                break
            bad = x

    # 2. Brent on log x, with g = log value - log target (+large where the value is infinite)
    def g(u: float) -> float:
        xv = math.exp(u)
        if integer:
            xv = float(round(xv))
        v = f(xv)
        if v <= 0:
            return -50.0
        return 50.0 if not math.isfinite(v) else math.log(v) - math.log(target)

    lo, hi = sorted((good, bad))
    if integer:
        # keep an end on each side of the crossing: the ends' outcomes differ (met below or above)
        met_lo = meets(lo)
        lo, hi = bisect_monotone(
            lambda x: meets(x) != met_lo, lo, hi, keep="hi", integer=True, ends_checked=True, return_bracket=True
        )
    elif hi / lo - 1 > rel_tol:
        try:
            root = optimize.brentq(
                g,
                math.log(lo),
                math.log(hi),
                xtol=rel_tol / 4,
                rtol=4 * 2.3e-16,
                maxiter=max(1, max_evaluations - len(cache)),
            )
        except NumericalError:
            raise
        except RuntimeError:  # brentq's maxiter: the evaluation budget is spent
            raise NumericalError(
                f"calibrate {name}: no convergence within {max_evaluations} accountant "
                "evaluations; use a larger rel_tol"
            ) from None
        except ValueError as exc:  # no sign change in g despite the bracket: a non-monotone value
            raise NumericalError(f"calibrate {name}: Brent's method failed on [{lo:g}, {hi:g}]: {exc}") from None
        r = math.exp(root)
        # 3. a bracket of relative width <= rel_tol around the root, ends checked by evaluation
        k = math.sqrt(1 + 0.999 * rel_tol)  # b / a = k^2, a little under 1 + rel_tol (rounding)
        a, b = max(lo, r / k), min(hi, r * k)
        for _ in range(60):
            ok_a, ok_b = meets(a), meets(b)
            if ok_a != ok_b:
                lo, hi = a, b
                break
            # both ends on one side (the root estimate is off by more than width): widen towards it
            if ok_a == (not increasing):  # the crossing is below a
                a, b = max(lo, a / (k * k)), a
            else:
                a, b = b, min(hi, b * k * k)
        else:
            raise NumericalError(f"calibrate {name}: could not bracket the crossing near {r:g}")
    good = hi if meets(hi) else lo
    return _result(good, f(good), target, len(cache), rel_tol, {"bracket": (lo, hi)})


def _secant(
    f: Callable[[float], float],
    target: float,
    start: float,
    limits: tuple[float, float],
    rel_tol: float,
    increasing: bool,
    step: float,
    name: str,
) -> tuple[float, float]:
    """:func:`calibrate`'s secant search: ``(good, bad)``, the ends of the final bracket that meet and miss the target.

    It works on ``u = log x`` (``u = -log x`` when ``increasing``, so that ``h(u) = log max(value, 1e-300) -
    log target`` is non-increasing in ``u`` either way), keeps ``h(lo) > 0 >= h(hi)`` and stops at
    ``hi - lo <= log(1 + rel_tol)``; ``hi`` is the end that meets the target.
    """
    sgn = -1.0 if increasing else 1.0
    tol, log_t = math.log1p(rel_tol), math.log(target)
    u_min, u_max = sorted((sgn * math.log(limits[0]), sgn * math.log(limits[1])))

    def x_of(u: float) -> float:
        return math.exp(-u) if increasing else math.exp(u)

    def h(u: float) -> float:
        return math.log(max(f(x_of(u)), _SECANT_FLOOR)) - log_t

    def inside(u: float) -> float:
        if not u_min <= u <= u_max:
            raise NumericalError(
                f"calibrate {name}: no bracket of the target {target:g} within [{limits[0]:g}, {limits[1]:g}] "
                f"(secant steps from {name} = {start:g})"
            )
        return u

    u0 = sgn * math.log(start)
    ua, ha = u0, h(u0)
    ub = inside(ua + (step if ha > 0 else -step))
    hb = h(ub)
    while (ha > 0) == (hb > 0):  # bracket: secant steps, at most _SECANT_MAX_STEP each
        us = ub - hb * (ub - ua) / (hb - ha) if hb != ha else ub + (ub - ua)
        if (us - ub) * (ub - ua) > 0:
            us = ub + max(min(us - ub, _SECANT_MAX_STEP), -_SECANT_MAX_STEP)
        else:
            us = ub + (ub - ua)
        ua, ha, ub = ub, hb, inside(us)
        hb = h(ub)
    (lo, hlo), (hi, hhi) = sorted([(ua, ha), (ub, hb)])  # h(lo) > 0 >= h(hi)
    while hi - lo > tol:
        width = hi - lo
        us = lo + width * hlo / (hlo - hhi)  # linear interpolation of log value
        for u in (us - 0.45 * tol, us + 0.45 * tol):  # straddle the estimate: one round usually closes it
            u = min(max(u, lo + 0.05 * width), hi - 0.05 * width)
            if hi - lo <= tol or not lo < u < hi:
                continue
            hu = h(u)
            if hu > 0:
                lo, hlo = u, hu
            else:
                hi, hhi = u, hu
        if hi - lo > 0.5 * width and hi - lo > tol:  # slow progress: bisect once
            u = 0.5 * (lo + hi)
            hu = h(u)
            if hu > 0:
                lo, hlo = u, hu
            else:
                hi, hhi = u, hu
    return x_of(hi), x_of(lo)


def _result(
    value: float, achieved: float, target: float, n: int, rel_tol: float, details: dict[str, Any]
) -> Calibration:
    bracket = tuple(details.pop("bracket", (value, value)))
    return Calibration(
        value=float(value),
        achieved=float(achieved),
        bracket=(float(bracket[0]), float(bracket[1])),
        target=float(target),
        evaluations=n,
        rel_tol=rel_tol,
        details=details,
    )


def calibrate_noise(
    make_accountant: Callable[[float], Any],
    epsilon: float,
    delta: float,
    *,
    use: str = "upper",
    start: float = 1.0,
    limits: tuple[float, float] = (1e-3, 1e4),
    rel_tol: float = 1e-3,
    quantity: str = "epsilon",
    max_evaluations: int = MAX_EVALUATIONS,
) -> Calibration:
    """The smallest noise multiplier sigma (to ``rel_tol``, rounded up) at which the accountant
    ``make_accountant(sigma)`` certifies (epsilon, delta): a thin wrapper over :func:`calibrate`
    (``monotone="decreasing"``, Brent's method).

    ``quantity="epsilon"`` compares ``get_epsilon(delta)`` with epsilon; ``"delta"`` compares
    ``get_delta(epsilon)`` with delta (one evaluation is then a single delta(eps), which is cheaper for some
    accountants). ``use="upper"`` compares the upper end of the accountant's answer (certified where the
    accountant certifies), ``"value"`` its reported value (e.g. a Monte Carlo point estimate).
    """

    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    check_choice("use", use, ("upper", "value"))
    check_choice("quantity", quantity, ("epsilon", "delta"))

    def value(sigma: float) -> float:
        acc = make_accountant(sigma)
        r = acc.get_epsilon(delta) if quantity == "epsilon" else acc.get_delta(epsilon)
        up = getattr(r, "upper", None)
        return float(up if use == "upper" and up is not None else getattr(r, "value", r))

    return calibrate(
        value,
        epsilon if quantity == "epsilon" else delta,
        monotone="decreasing",
        start=start,
        limits=limits,
        rel_tol=rel_tol,
        max_evaluations=max_evaluations,
        name="sigma",
    )
