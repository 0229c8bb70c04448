"""dputils.calibration: one search for every accountant. Truth: the closed-form mu-GDP epsilon of Gaussian
composition, solved for sigma (or steps) by an independent root finder on the closed form."""

from __future__ import annotations

import math

import pytest
from scipy.optimize import brentq

from dputils import curves
from dputils.calibration import calibrate, calibrate_noise
from dputils.errors import DPValueError, NumericalError


def eps_gauss(sigma, steps, delta=1e-5):
    return curves.gdp_epsilon(delta, math.sqrt(steps) / sigma)


@pytest.mark.parametrize("target, steps, rel_tol", [(2.0, 100, 1e-3), (0.5, 10, 1e-8), (8.0, 10000, 1e-4)])
def test_noise_matches_the_closed_form_and_meets_the_target(target, steps, rel_tol):
    exact = brentq(lambda s: eps_gauss(s, steps) - target, 1e-3, 1e4, xtol=1e-15, rtol=1e-15)
    c = calibrate(lambda s: eps_gauss(s, steps), target, rel_tol=rel_tol)
    lo, hi = c.bracket
    assert lo <= exact <= hi and hi / lo - 1 <= rel_tol * (1 + 1e-9)
    assert c.value == hi and c.achieved <= target and eps_gauss(c.value, steps) <= target
    assert c.evaluations <= 40


def test_steps_and_rates_increase_epsilon():
    sigma, target = 10.0, 2.0
    c = calibrate(lambda t: eps_gauss(sigma, t), target, monotone="increasing", integer=True, start=10, limits=(1, 1e7))
    assert eps_gauss(sigma, c.value) <= target < eps_gauss(sigma, c.value + 1)  # the largest number of steps
    assert c.bracket == (c.value, c.value + 1)
    c = calibrate(
        lambda q: curves.gdp_epsilon(1e-5, q * math.sqrt(1000) / 1.0),
        1.0,
        monotone="increasing",
        start=0.5,
        limits=(1e-6, 1.0),
        rel_tol=1e-6,
    )
    exact = brentq(lambda q: curves.gdp_epsilon(1e-5, q * math.sqrt(1000)) - 1.0, 1e-6, 1.0, xtol=1e-16)
    assert c.value <= exact <= c.bracket[1] and c.value == c.bracket[0]


def test_calibrate_noise_with_an_accountant_and_failures_counting_as_misses():
    from dputils.accountants.pld import PLDAccountant
    from dputils.mechanisms import GaussianMechanism

    c = calibrate_noise(lambda s: PLDAccountant().compose(GaussianMechanism(s), 100), 2.0, 1e-5, rel_tol=1e-3)
    exact = brentq(lambda s: eps_gauss(s, 100) - 2.0, 1, 100, xtol=1e-14)
    assert exact <= c.value <= exact * (1 + 2e-3)  # PLD is an upper bound: never below the exact sigma

    def flaky(s):
        if s < 5:
            raise NumericalError("cannot compute here")
        return eps_gauss(s, 100)

    c = calibrate(flaky, 0.5, start=1.0)  # failures below sigma 5 count as not meeting the target
    assert eps_gauss(c.value, 100) <= 0.5


def test_bounded_and_refusing():
    with pytest.raises(NumericalError, match="no convergence within 4"):
        calibrate(lambda s: eps_gauss(s, 100), 2.0, rel_tol=1e-12, max_evaluations=4)
    with pytest.raises(NumericalError, match="meets the target"):
        calibrate(lambda s: eps_gauss(s, 100), 1e-9, limits=(1e-3, 10.0))
    at_limit = calibrate(lambda s: eps_gauss(s, 100), 1e9)
    assert at_limit.details["at_limit"] and at_limit.value < 2e-3
    for kw, name in [
        (dict(rel_tol=0.0), "rel_tol"),
        (dict(rel_tol=0.9), "rel_tol"),
        (dict(monotone="up"), "monotone"),
        (dict(limits=(2.0, 1.0)), "limits"),
        (dict(start=1e6), "start"),
    ]:
        with pytest.raises(DPValueError, match=name):
            calibrate(lambda s: eps_gauss(s, 100), 2.0, **kw)
    with pytest.raises(DPValueError, match="target"):
        calibrate(lambda s: 1.0, -1.0)
    nan_count = []

    def nan(s):
        nan_count.append(s)
        return float("nan")

    with pytest.raises(NumericalError):
        calibrate(nan, 1.0)
    assert len(nan_count) <= 200


def test_model1_calibration_uses_the_shared_search():
    from dputils.audit.model1 import calibrate_sigma, theoretical_epsilon

    s = calibrate_sigma(2.0, 0.1, 10, 1e-5, rel_tol=1e-3)
    assert theoretical_epsilon(s, 0.1, 10, 1e-5)["epsilon"] <= 2.0
    assert theoretical_epsilon(s / (1 + 1e-3), 0.1, 10, 1e-5)["epsilon"] > 2.0


@pytest.mark.parametrize("limits", [("a", 2), None, "ab", (1, 2, 3), (1, float("nan"))])
def test_malformed_limits_are_named(limits):
    # issue 24 fuzz: calibrate(limits=('a', 2)) raised a bare ValueError from float()
    with pytest.raises(DPValueError, match="limits"):
        calibrate(lambda x: 1 / x, 0.5, limits=limits)
