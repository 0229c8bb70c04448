"""dputils.numerics.bisect_monotone: the one certified bisection. Truth: closed-form roots (cube root, logarithm,
powers of two) and the Gaussian mechanism's exact privacy profile (Balle & Wang 2018, Thm. 8) at 50 digits with
mpmath, solved for sigma by mpmath's own root finder, independent of the code under test."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dputils.curves import gdp_delta
from dputils.errors import DPValueError, NumericalError
from dputils.numerics import bisect_monotone


class Recorder:
    """A predicate that remembers where it was evaluated and with what outcome."""

    def __init__(self, f):
        self.f, self.seen = f, {}

    def __call__(self, x):
        v = bool(self.f(x))
        self.seen[x] = v
        return v


@pytest.mark.parametrize("target", [0.5, 2.0, 7.0, 1e3])
def test_keep_hi_returns_a_point_above_the_cube_root_within_tol(target):
    root = target ** (1.0 / 3.0)
    pred = Recorder(lambda x: x**3 >= target)
    x = bisect_monotone(pred, 0.0, 20.0, keep="hi", tol=1e-12)
    assert pred.seen[x] is True  # evaluated there, and the condition held
    assert x**3 >= target
    assert 0.0 <= x - root <= 1e-12 * max(1.0, x) + 4 * math.ulp(root)


@pytest.mark.parametrize("level", [0.9, 0.3, 1e-3])
def test_keep_lo_returns_a_point_below_the_logarithm_within_tol(level):
    root = -math.log(level)  # exp(-x) >= level  <=>  x <= -log(level)
    pred = Recorder(lambda x: math.exp(-x) >= level)
    x = bisect_monotone(pred, -1.0, 50.0, keep="lo", tol=1e-10)
    assert pred.seen[x] is True and math.exp(-x) >= level
    assert 0.0 <= root - x <= 1e-10 * max(1.0, abs(root)) + 4 * math.ulp(root)


def test_log_space_resolves_a_root_decades_below_the_bracket_relatively():
    # 1/x^2 <= 1e-20 <=> x >= 1e10, bracketed by [1e-5, 1e30]: in log space the answer is within 1e-12 relative
    pred = Recorder(lambda x: 1.0 / (x * x) <= 1e-20)
    x = bisect_monotone(pred, 1e-5, 1e30, keep="hi", tol=1e-12, log=True)
    assert pred.seen[x] is True and x >= 1e10 * (1 - 1e-15)
    assert x / 1e10 - 1 <= 1e-12 + 1e-15
    assert len(pred.seen) < 120  # ~log2(35 decades in log / 1e-12) evaluations, not a linear scan


def test_log_space_for_a_small_root():
    # delta-like quantity: x <= 3e-15 <=> keep lo, bracket [1e-300, 1]
    x = bisect_monotone(lambda x: x <= 3e-15, 1e-300, 1.0, keep="lo", tol=1e-9, log=True)
    assert x <= 3e-15 and 3e-15 / x - 1 <= 1e-9 + 1e-15


def test_integer_bisection_gives_the_smallest_power_and_the_bracket():
    pred = Recorder(lambda n: 2**n >= 1000)  # smallest n: 10 (2^10 = 1024)
    assert bisect_monotone(pred, 0.0, 64.0, keep="hi", integer=True) == 10.0
    assert bisect_monotone(pred, 0.0, 64.0, keep="hi", integer=True, return_bracket=True) == (9.0, 10.0)
    assert all(float(n).is_integer() for n in pred.seen)


def test_the_result_stays_on_the_certified_side_for_a_calibrated_sigma():
    # sigma of one Gaussian release (sensitivity 1) with delta(eps = 1) <= 1e-6: the profile is decreasing in
    # sigma, so the calibrated sigma is returned at or above the exact one, never below
    eps, target = 1.0, 1e-6
    with mp.workdps(50):

        def delta_mp(s):
            mu = 1 / s
            return mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2)

        exact = float(mp.findroot(lambda s: mp.log(delta_mp(s) / target), (2.0, 8.0), solver="illinois"))
    pred = Recorder(lambda s: gdp_delta(eps, 1.0 / s) <= target)
    s = bisect_monotone(pred, 0.5, 100.0, keep="hi", tol=1e-13, log=True)
    assert pred.seen[s] is True
    assert s >= exact * (1 - 1e-12)  # the certified side, up to the float evaluation of the profile
    assert s / exact - 1 <= 1e-11


def test_max_iter_stops_early_on_the_true_side():
    x = bisect_monotone(lambda x: x >= math.pi, 0.0, 4.0, keep="hi", tol=0.0, max_iter=5)
    assert x >= math.pi and x - math.pi <= 4.0 / 2**5
    # tol = 0 halves until the ends are adjacent floats
    y = bisect_monotone(lambda x: x >= math.pi, 0.0, 4.0, keep="hi", tol=0.0, max_iter=10_000)
    assert y == math.nextafter(math.pi, 5.0) or y == math.pi


@pytest.mark.parametrize(
    "pred, keep",
    [
        (lambda x: x >= 10.0, "hi"),  # false at both ends: no crossing in [0, 1]
        (lambda x: x >= -1.0, "hi"),  # true at both ends
        (lambda x: x <= -1.0, "lo"),
        (lambda x: x <= 5.0, "lo"),
    ],
)
def test_a_bracket_without_a_crossing_is_refused(pred, keep):
    with pytest.raises(NumericalError, match="no crossing"):
        bisect_monotone(pred, 0.0, 1.0, keep=keep)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lo": 0.0, "hi": 1.0, "keep": "up"},
        {"lo": 2.0, "hi": 1.0, "keep": "hi"},
        {"lo": math.nan, "hi": 1.0, "keep": "hi"},
        {"lo": 0.0, "hi": math.inf, "keep": "hi"},
        {"lo": 0.0, "hi": 1.0, "keep": "hi", "log": True},
    ],
)
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(DPValueError):
        bisect_monotone(lambda x: x > 0.5, **kwargs)


# vectorised brackets, the stopping scales and min_halvings -----------------------------------------------------------
def test_vectorised_brackets_each_end_on_the_true_side_of_its_cube_root():
    targets = np.array([0.5, 2.0, 7.0, 1e3, 5e3])
    seen = []

    def pred(x):
        seen.append(x.copy())
        return x**3 >= targets

    x = bisect_monotone(pred, np.zeros(5), np.full(5, 20.0), keep="hi", tol=1e-12)
    roots = np.cbrt(targets)
    assert np.all(x**3 >= targets)
    assert np.all(x - roots >= 0) and np.all(x - roots <= 1e-12 * np.maximum(1.0, x) + 4 * np.spacing(roots))
    # every returned end is a point where the predicate was evaluated true (or the given upper end)
    evaluated = np.array(seen)
    assert all(np.any(evaluated[:, i] == x[i]) for i in range(5))
    lo, hi = bisect_monotone(pred, np.zeros(5), np.full(5, 20.0), keep="hi", tol=1e-12, return_bracket=True)
    assert np.all(lo < roots) and np.all(roots <= hi) and np.array_equal(hi, x)


def test_vectorised_keep_lo_and_scalar_agree_elementwise_when_run_to_the_same_width():
    levels = np.array([0.9, 0.3, 1e-3])
    vec = bisect_monotone(lambda x: np.exp(-x) >= levels, -1.0, np.full(3, 50.0), keep="lo", tol=0.0, max_iter=60)
    for lv, v in zip(levels, vec):
        s = bisect_monotone(lambda x: np.exp(-x) >= lv, -1.0, 50.0, keep="lo", tol=0.0, max_iter=60)
        assert v == s and np.exp(-v) >= lv and 0 <= -math.log(lv) - v <= 51 * 2.0**-60 + 4 * math.ulp(7.0)


def test_vectorised_refusals():
    with pytest.raises(NumericalError, match="some bracket"):
        bisect_monotone(lambda x: x >= np.array([1.0, 30.0]), np.zeros(2), np.full(2, 20.0), keep="hi")
    with pytest.raises(DPValueError, match="integer"):
        bisect_monotone(lambda x: x >= 3, np.zeros(2), np.full(2, 20.0), keep="hi", integer=True)
    with pytest.raises(DPValueError, match="lo <= hi"):
        bisect_monotone(lambda x: x >= 3, np.array([0.0, 5.0]), np.array([1.0, 4.0]), keep="hi", ends_checked=True)


def test_floor_zero_resolves_a_small_root_relatively():
    # x >= 3e-9 on [0, 1]: with the default scale the width stops at tol absolute (below 1), far above the root's
    # own size; floor = 0 narrows to tol times the root
    root = 3e-9
    x_ends = bisect_monotone(lambda x: x >= root, 0.0, 1.0, keep="hi", tol=1e-6)
    x_rel = bisect_monotone(lambda x: x >= root, 1e-12, 1.0, keep="hi", tol=1e-6, floor=0.0)
    assert x_ends - root > 1e-7  # absolute: much wider than the root
    assert 0 <= x_rel - root <= 1e-6 * x_rel


def test_lo_scale_and_min_halvings():
    # scale "lo" measures the width against max(1, |lo|) only: on [10, 30] with tol 1e-3 it stops once the width
    # is <= 0.01, where "ends" (max(1, |lo|, |hi|) ~ 20) allows up to 0.02
    root = 20.0 + 1 / 3
    w_lo = bisect_monotone(lambda x: x >= root, 10.0, 30.0, keep="hi", tol=1e-3, scale="lo", return_bracket=True)
    assert w_lo[1] - w_lo[0] <= 1e-3 * w_lo[0] and w_lo[0] < root <= w_lo[1]
    # a bracket already narrower than tol is returned as it is, unless min_halvings asks for halvings anyway
    calls = []
    pred = lambda x: calls.append(x) or x >= root
    assert bisect_monotone(pred, 20.0, 20.5, keep="hi", tol=0.1, ends_checked=True) == 20.5 and not calls
    out = bisect_monotone(pred, 20.0, 20.5, keep="hi", tol=0.1, ends_checked=True, min_halvings=3)
    assert len(calls) == 3 and out == 20.375 and out >= root


@pytest.mark.parametrize(
    "kwargs", [dict(scale="abs"), dict(floor=-1.0), dict(floor=math.nan), dict(min_halvings=-1), dict(min_halvings=1.5)]
)
def test_bad_scale_floor_or_min_halvings_is_refused(kwargs):
    with pytest.raises(DPValueError):
        bisect_monotone(lambda x: x >= 1, 0.0, 2.0, keep="hi", **kwargs)
