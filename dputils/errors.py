"""Input validation and the package's error types.

Every public function validates its inputs with these helpers, so a bad value fails with one line that
names the parameter and the allowed range, and never turns into a silent NaN further down.
"""

from __future__ import annotations

import math
import numbers
from typing import Any


class DPValueError(ValueError):
    """A parameter is outside its allowed range. The message names the parameter."""


class NumericalError(ArithmeticError):
    """A computation could not produce a trustworthy number (no root bracket, overflow, precision loss)."""


def _is_bool(value: Any) -> bool:
    """True for Python and numpy booleans (which ``float`` would silently turn into 0.0 / 1.0)."""
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool") and hasattr(value, "dtype")


def _as_float(name: str, value: Any) -> float:
    if _is_bool(value):
        raise DPValueError(f"{name} must be a real number, got the boolean {value!r}")
    if not isinstance(value, (numbers.Real,)):
        if isinstance(value, (numbers.Complex, bytes)) or getattr(value, "ndim", 0):
            raise DPValueError(f"{name} must be a real number, got {value!r}")
        try:
            value = float(value)
        except (TypeError, ValueError, OverflowError):
            raise DPValueError(f"{name} must be a real number, got {value!r}") from None
    try:
        x = float(value)
    except OverflowError:  # a huge int
        raise DPValueError(f"{name} must be finite, got an integer of {len(str(abs(value)))} digits") from None
    if not math.isfinite(x):
        raise DPValueError(f"{name} must be finite, got {x!r}")
    return x


def check_finite(name: str, value: Any) -> float:
    """A finite real number."""
    return _as_float(name, value)


def check_positive(name: str, value: Any) -> float:
    """A finite number > 0."""
    x = _as_float(name, value)
    if not x > 0:
        raise DPValueError(f"{name} must be > 0, got {x!r}")
    return x


def check_nonnegative(name: str, value: Any) -> float:
    """A finite number >= 0."""
    x = _as_float(name, value)
    if not x >= 0:
        raise DPValueError(f"{name} must be >= 0, got {x!r}")
    return x


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """epsilon in [0, inf) and finite."""
    return check_nonnegative(name, value)


def check_delta(value: Any, name: str = "delta") -> float:
    """delta in the open interval (0, 1)."""
    x = _as_float(name, value)
    if not 0 < x < 1:
        raise DPValueError(f"{name} must be in (0, 1), got {x!r}")
    return x


def check_probability(name: str, value: Any, *, allow_zero: bool = False, allow_one: bool = True) -> float:
    """A sampling probability in (0, 1] (or [0, 1] / (0, 1) as asked)."""
    x = _as_float(name, value)
    lo_ok = x >= 0 if allow_zero else x > 0
    hi_ok = x <= 1 if allow_one else x < 1
    if not (lo_ok and hi_ok):
        lo = "[0" if allow_zero else "(0"
        hi = "1]" if allow_one else "1)"
        raise DPValueError(f"{name} must be in {lo}, {hi}, got {x!r}")
    return x


def _check_int(name: str, value: Any, low: int) -> int:
    if (
        _is_bool(value)
        or isinstance(value, bytes)
        or (isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real))
    ):
        raise DPValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if isinstance(value, numbers.Integral):
        if int(value) < low:
            raise DPValueError(f"{name} must be an integer >= {low}, got {value!r}")
        return int(value)
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise DPValueError(f"{name} must be an integer >= {low}, got {value!r}") from None
    if not math.isfinite(x) or x != int(x) or x < low:
        raise DPValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(x)


def check_positive_int(name: str, value: Any) -> int:
    """An integer >= 1 (floats with integral values are accepted)."""
    return _check_int(name, value, 1)


def check_nonnegative_int(name: str, value: Any) -> int:
    """An integer >= 0 (floats with integral values are accepted)."""
    return _check_int(name, value, 0)


def check_choice(name: str, value: Any, choices: tuple[str, ...] | list[str]) -> str:
    """One of a fixed set of names."""
    if value not in choices:
        raise DPValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
    return value
