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

__all__ = ["bisect_monotone", "log_diff_exp"]


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


def bisect_monotone(
    pred: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    keep: str,
    tol: float = 1e-12,
    max_iter: int = 200,
    log: bool = False,
    integer: bool = False,
    ends_checked: bool = False,
    return_bracket: bool = False,
) -> float | tuple[float, float]:
    r"""Certified bisection of a monotone predicate: the end of the final bracket on the side where ``pred`` holds.

    ``pred`` is monotone on ``[lo, hi]``: with ``keep="hi"`` it is false below some crossing :math:`x^*` and true
    above (e.g. ``cert_upper(eps) <= delta``: every eps above the crossing is a valid epsilon upper bound, or
    ``accountant_eps(sigma) <= target``); with ``keep="lo"`` it is true below and false above (e.g.
    ``cert_lower(eps) >= delta``). The bracket is halved, keeping one end on each side, and the end on the true
    side is returned. That point is always one where ``pred`` was evaluated true (or the given end, see
    ``ends_checked``), never an interpolated estimate, so a calibrated sigma or epsilon stays on the safe side of
    the crossing: the answer can only be loose by the final width, never wrong.

    Args:
        pred: the monotone predicate.
        lo, hi: the bracket, ``lo <= hi``.
        keep: ``"hi"`` (``pred`` true above the crossing; the upper end is returned) or ``"lo"``.
        tol: stop once ``hi - lo <= tol * max(1, |lo|, |hi|)`` (a relative width, absolute below 1). With ``log``:
            once ``hi <= lo (1 + tol)``. ``tol = 0`` halves until ``max_iter`` (or until no float lies between the
            ends).
        max_iter: at most this many halvings; reaching it is not an error (the returned end is still on the true
            side, the bracket is only wider than ``tol``). Bisection also stops when the midpoint rounds to an
            end (adjacent floats).
        log: halve in log space (midpoint :math:`\sqrt{lo\,hi}`; needs ``0 < lo``), for quantities spanning
            decades (noise multipliers, deltas).
        integer: integer bisection (midpoint :math:`\lfloor (lo + hi)/2 \rfloor`, stops when ``hi - lo <= 1``;
            ``tol`` and ``log`` are ignored).
        ends_checked: the caller has evaluated ``pred`` at both ends (false on the ``lo`` side's end for
            ``keep="hi"``, true on ``hi``; mirrored for ``keep="lo"``). Otherwise both ends are evaluated here.
        return_bracket: return the final bracket ``(lo, hi)`` (the crossing lies in it; ``pred`` holds at the
            ``keep`` end) instead of its ``keep`` end.

    Raises:
        DPValueError: ``keep`` not ``"hi"``/``"lo"``, a bracket with ``lo > hi`` or non-finite ends, or
            ``log`` with ``lo <= 0``.
        NumericalError: (when the ends are evaluated here) the bracket does not contain a crossing: ``pred`` is
            false at the end that should hold, or true at the other one.
    """
    if keep not in ("hi", "lo"):
        raise DPValueError(f"bisect_monotone: keep must be 'hi' or 'lo', got {keep!r}")
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
    for _ in range(max_iter):
        if integer:
            if hi - lo <= 1:
                break
            mid = float((int(lo) + int(hi)) // 2)
        elif log:
            if not hi > lo * (1.0 + tol):
                break
            mid = math.sqrt(lo) * math.sqrt(hi)
        else:
            if not hi - lo > tol * max(1.0, abs(lo), abs(hi)):
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
