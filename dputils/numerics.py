"""Small numerical helpers shared by the mechanisms, the curves, the accountants and the calibration.

* :func:`log_diff_exp`: privacy-loss tails and deltas span hundreds of decades; it keeps differences of tiny
  probabilities at full relative accuracy instead of cancelling to zero.
* :func:`bisect_monotone`: the one certified bisection: the answer is a point where the monotone condition was
  evaluated to hold, so an epsilon or a calibrated parameter stays on the safe side of the crossing.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .errors import DPValueError, NumericalError

__all__ = ["BISECT_SCALES", "bisect_monotone", "log_diff_exp"]


def log_diff_exp(a, b):
    r"""Elementwise :math:`\log(e^a - e^b)` for :math:`a \ge b`, computed as :math:`a + \log(-\mathrm{expm1}(b - a))`.

    Returns ``-inf`` where ``a == b``, where ``a`` is ``-inf``, and where ``b > a`` (the difference of
    two probabilities that rounding made equal or inverted is treated as zero, never as NaN).
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        d = b - a
        out = a + np.log(-np.expm1(np.minimum(d, 0.0)))
    return np.where(np.isneginf(a) | (d >= 0), -np.inf, out)


#: How :func:`bisect_monotone` measures the bracket's width against ``tol`` (see its ``scale`` argument).
BISECT_SCALES = ("ends", "lo")


def bisect_monotone(
    pred: Callable,
    lo,
    hi,
    *,
    keep: str,
    tol: float = 1e-12,
    max_iter: int = 200,
    log: bool = False,
    integer: bool = False,
    ends_checked: bool = False,
    return_bracket: bool = False,
    scale: str = "ends",
    floor: float = 1.0,
    min_halvings: int = 0,
):
    r"""Certified bisection of a monotone predicate: the end of the final bracket on the side where ``pred`` holds.

    ``pred`` is monotone on ``[lo, hi]``: with ``keep="hi"`` it is false below some crossing :math:`x^*` and true
    above (e.g. ``cert_upper(eps) <= delta``: every eps above the crossing is a valid epsilon upper bound, or
    ``accountant_eps(sigma) <= target``); with ``keep="lo"`` it is true below and false above (e.g.
    ``cert_lower(eps) >= delta``). The bracket is halved, keeping one end on each side, and the end on the true
    side is returned. That point is always one where ``pred`` was evaluated true (or the given end, see
    ``ends_checked``), never an interpolated estimate, so a calibrated sigma or epsilon stays on the safe side of
    the crossing: the answer can only be loose by the final width, never wrong.

    **Vectorised.** When ``lo`` or ``hi`` is an array, many brackets are halved in lockstep: ``pred`` takes the
    array of midpoints and returns a boolean array, each bracket keeps its own ends, and the halving goes on
    until *every* bracket meets the stopping rule (a bracket that is already narrow enough is still halved
    while others are not, so each answer is at least as tight as asked). Arrays of ends come back.

    Args:
        pred: the monotone predicate (vectorised: elementwise on an array).
        lo, hi: the bracket, ``lo <= hi`` (floats, or arrays that broadcast together).
        keep: ``"hi"`` (``pred`` true above the crossing; the upper end is returned) or ``"lo"``.
        tol: stop once ``hi - lo <= tol * s`` with ``s`` set by ``scale``. With ``log``: once
            ``hi <= lo (1 + tol)``. ``tol = 0`` halves until ``max_iter`` (or until no float lies between the
            ends).
        max_iter: at most this many halvings; reaching it is not an error (the returned end is still on the true
            side, the bracket is only wider than ``tol``). Bisection also stops when the midpoint rounds to an
            end (adjacent floats; vectorised: for every bracket).
        log: halve in log space (midpoint :math:`\sqrt{lo\,hi}`; needs ``0 < lo``), for quantities spanning
            decades (noise multipliers, deltas).
        integer: integer bisection (midpoint :math:`\lfloor (lo + hi)/2 \rfloor`, stops when ``hi - lo <= 1``;
            ``tol``, ``log`` and ``scale`` are ignored; scalars only).
        ends_checked: the caller has evaluated ``pred`` at both ends, or knows its value there (false on the
            ``lo`` side's end for ``keep="hi"``, true on ``hi``; mirrored for ``keep="lo"``). Otherwise both ends
            are evaluated here.
        return_bracket: return the final bracket ``(lo, hi)`` (the crossing lies in it; ``pred`` holds at the
            ``keep`` end) instead of its ``keep`` end.
        scale: what the width is relative to: ``"ends"`` (default) :math:`s = \max(f, |lo|, |hi|)`, ``"lo"``:
            :math:`s = \max(f, |lo|)`, with :math:`f` = ``floor``.
        floor: the magnitude below which ``tol`` is an absolute width (default 1: relative above 1, absolute
            below; 0: relative at every magnitude, for a positive quantity such as a GDP parameter).
        min_halvings: halve at least this many times before the width is first tested (a caller whose
            starting bracket may already be narrow but wants it narrowed anyway).

    Raises:
        DPValueError: ``keep`` not ``"hi"``/``"lo"``, a bracket with ``lo > hi`` or non-finite ends, ``log`` with
            ``lo <= 0``, an unknown ``scale``, a negative ``floor`` or ``min_halvings``, or integer bisection of
            arrays.
        NumericalError: (when the ends are evaluated here) the bracket does not contain a crossing: ``pred`` is
            false at the end that should hold, or true at the other one (vectorised: for some bracket).
    """
    if keep not in ("hi", "lo"):
        raise DPValueError(f"bisect_monotone: keep must be 'hi' or 'lo', got {keep!r}")
    if scale not in BISECT_SCALES:
        raise DPValueError(f"bisect_monotone: scale must be one of {BISECT_SCALES}, got {scale!r}")
    if not (math.isfinite(floor) and floor >= 0):
        raise DPValueError(f"bisect_monotone: floor must be finite and >= 0, got {floor!r}")
    if isinstance(min_halvings, bool) or not isinstance(min_halvings, int) or min_halvings < 0:
        raise DPValueError(f"bisect_monotone: min_halvings must be an integer >= 0, got {min_halvings!r}")
    if np.ndim(lo) or np.ndim(hi):
        if integer:
            raise DPValueError("bisect_monotone: integer bisection takes scalar ends, not arrays")
        return _bisect_arrays(
            pred, lo, hi, keep, tol, max_iter, log, ends_checked, return_bracket, scale, floor, min_halvings
        )
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise DPValueError(f"bisect_monotone: need a finite bracket lo <= hi, got [{lo!r}, {hi!r}]")
    if log and not integer and not lo > 0:
        raise DPValueError(f"bisect_monotone: log-space bisection needs lo > 0, got {lo!r}")
    upper = keep == "hi"
    if not ends_checked:
        if not pred(hi if upper else lo):
            raise NumericalError(
                f"bisect_monotone: the predicate is false at the {keep} end of [{lo:g}, {hi:g}]: no crossing inside"
            )
        if pred(lo if upper else hi):
            raise NumericalError(
                f"bisect_monotone: the predicate is already true at the other end of [{lo:g}, {hi:g}]: "
                "no crossing inside"
            )
    for i in range(max_iter):
        if integer:
            if hi - lo <= 1:
                break
            mid = float((int(lo) + int(hi)) // 2)
        elif log:
            if i >= min_halvings and not hi > lo * (1.0 + tol):
                break
            mid = math.sqrt(lo) * math.sqrt(hi)
        else:
            if i >= min_halvings and not hi - lo > tol * _width_scale(scale, floor, lo, hi):
                break
            mid = 0.5 * (lo + hi)
        if not lo < mid < hi:  # adjacent floats: nothing left to halve
            break
        if pred(mid) == upper:
            hi = mid
        else:
            lo = mid
    if return_bracket:
        return lo, hi
    return hi if upper else lo


def _width_scale(scale: str, floor: float, lo, hi):
    """The ``s`` of :func:`bisect_monotone`'s stopping rule ``hi - lo <= tol * s`` (floats or arrays)."""
    if np.ndim(lo):
        if scale == "lo":
            return np.maximum(floor, np.abs(lo))
        return np.maximum(floor, np.maximum(np.abs(lo), np.abs(hi)))
    return max(floor, abs(lo)) if scale == "lo" else max(floor, abs(lo), abs(hi))


def _bisect_arrays(pred, lo, hi, keep, tol, max_iter, log, ends_checked, return_bracket, scale, floor, min_halvings):
    """:func:`bisect_monotone` over arrays of brackets, halved in lockstep (its docstring)."""
    lo, hi = (np.array(a, dtype=float) for a in np.broadcast_arrays(np.asarray(lo, float), np.asarray(hi, float)))
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
        raise DPValueError("bisect_monotone: need finite brackets lo <= hi (elementwise)")
    if log and not np.all(lo > 0):
        raise DPValueError("bisect_monotone: log-space bisection needs lo > 0 (elementwise)")
    upper = keep == "hi"
    if not ends_checked:
        if not np.all(np.asarray(pred(hi if upper else lo), dtype=bool)):
            raise NumericalError(f"bisect_monotone: the predicate is false at the {keep} end of some bracket")
        if np.any(np.asarray(pred(lo if upper else hi), dtype=bool)):
            raise NumericalError("bisect_monotone: the predicate is already true at the other end of some bracket")
    for i in range(max_iter):
        if i >= min_halvings:
            wide = hi > lo * (1.0 + tol) if log else hi - lo > tol * _width_scale(scale, floor, lo, hi)
            if not np.any(wide):
                break
        mid = np.sqrt(lo) * np.sqrt(hi) if log else 0.5 * (lo + hi)
        if not np.any((lo < mid) & (mid < hi)):  # adjacent floats everywhere
            break
        to_hi = np.asarray(pred(mid), dtype=bool)
        if not upper:
            to_hi = ~to_hi
        hi = np.where(to_hi, mid, hi)
        lo = np.where(to_hi, lo, mid)
    if return_bracket:
        return lo, hi
    return hi if upper else lo
