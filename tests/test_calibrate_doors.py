"""The calibration front doors (issue 26, item 3): each is a thin wrapper over dputils.calibration.calibrate (or,
for the tree release, a closed form over the certified bisection), and each answer agrees with an independent
computation and lies on the safe side of it.

Truth: the analytic Gaussian mechanism (Balle and Wang 2018, Thm. 8),
``delta(eps; s) = Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s)`` for sensitivity 1 and noise s, written here
with scipy.stats and solved for s by scipy.optimize.brentq to 1e-14; nothing from dputils is used for it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from dputils.calibration import calibrate, calibrate_noise
from dputils.errors import DPValueError, NumericalError


def gauss_delta(eps: float, s: float, sens: float = 1.0) -> float:
    """Balle-Wang Thm. 8 for sensitivity ``sens`` and noise ``s`` (independent of dputils)."""
    a = sens / (2 * s)
    b = eps * s / sens
    return float(stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b))


def gauss_eps(delta: float, s: float) -> float:
    """The exact epsilon of the Gaussian mechanism at delta (brentq on the closed form)."""
    if gauss_delta(0.0, s) <= delta:
        return 0.0
    if gauss_delta(700.0, s) > delta:  # beyond what exp() represents: a miss for any sensible target
        return math.inf
    return optimize.brentq(lambda e: gauss_delta(e, s) - delta, 0.0, 700.0, xtol=1e-15, rtol=1e-15)


def exact_sigma(eps: float, delta: float, sens: float = 1.0) -> float:
    """The noise at which the Gaussian mechanism is exactly (eps, delta)-DP (delta(eps) decreases in s)."""
    return optimize.brentq(lambda s: gauss_delta(eps, s, sens) - delta, 1e-3, 1e4, xtol=1e-14, rtol=1e-14)


class ExactGaussian:
    """A test-local 'accountant' of one Gaussian release, from the closed form above."""

    def __init__(self, sigma: float):
        self.sigma = sigma

    def get_delta(self, eps: float) -> float:
        return gauss_delta(eps, self.sigma)

    def get_epsilon(self, delta: float) -> float:
        return gauss_eps(delta, self.sigma)


CASES = [(0.5, 1e-6), (1.0, 1e-5), (3.0, 1e-5), (8.0, 1e-3)]


@pytest.mark.parametrize("eps, delta", CASES)
def test_calibrate_noise_brackets_the_analytic_gaussian_sigma(eps, delta):
    exact = exact_sigma(eps, delta)
    for quantity in ("epsilon", "delta"):
        c = calibrate_noise(ExactGaussian, eps, delta, rel_tol=1e-6, quantity=quantity, use="value")
        lo, hi = c.bracket
        assert lo <= exact * (1 + 1e-12) and exact <= hi * (1 + 1e-12) and hi / lo - 1 <= 1e-6 * (1 + 1e-9)
        assert c.value == hi and gauss_delta(eps, c.value) <= delta  # the safe side: more noise than exact


@pytest.mark.parametrize("eps, delta", CASES)
def test_allocation_door_brackets_the_analytic_gaussian_sigma(eps, delta):
    from dputils.matrix.allocation import calibrate_sigma

    exact = exact_sigma(eps, delta)
    s = calibrate_sigma(ExactGaussian, eps, delta, rel_tol=1e-5)
    assert exact <= s * (1 + 1e-12) <= exact * (1 + 1e-5) * (1 + 1e-12)
    assert gauss_delta(eps, s) <= delta


@pytest.mark.parametrize("eps, delta", CASES)
def test_secant_door_brackets_the_analytic_gaussian_sigma(eps, delta):
    from dputils.matrix.noise_curves import secant_calibrate

    exact = exact_sigma(eps, delta)
    for guess in (0.2, 1.0, 30.0):
        hi, lo = secant_calibrate(ExactGaussian, eps, delta, guess, 1e-5, bracket=True)
        assert lo < exact * (1 + 1e-12) and exact <= hi * (1 + 1e-12) and hi / lo - 1 <= 1e-5 * (1 + 1e-9)
        assert gauss_delta(eps, hi) <= delta < gauss_delta(eps, lo)


@pytest.mark.parametrize("eps, delta", [(1.0, 1e-5), (4.0, 1e-6)])
def test_the_secant_is_a_method_of_calibrate_with_the_same_guarantee_as_brent(eps, delta):
    exact = exact_sigma(eps, delta)
    value = lambda s: gauss_delta(eps, s)
    brent = calibrate(value, delta, rel_tol=1e-4, start=1.0)
    secant = calibrate(value, delta, rel_tol=1e-4, start=1.0, method="secant")
    for c in (brent, secant):
        lo, hi = c.bracket
        assert lo <= exact * (1 + 1e-12) and exact <= hi * (1 + 1e-12) and hi / lo - 1 <= 1e-4 * (1 + 1e-9)
        assert c.value == hi and c.achieved == value(hi) <= delta
    assert secant.details["method"] == "secant"


def test_secant_for_an_increasing_quantity_keeps_the_lower_end():
    # epsilon of k Gaussian releases at noise 10 (mu = sqrt(k)/10) grows with k (a real k here): the largest k
    # with eps <= 1, exact from the closed form, is bracketed and the lower end (the safe one) returned
    sigma, delta, target = 10.0, 1e-5, 1.0

    def eps_k(k: float) -> float:
        return gauss_eps(delta, sigma / math.sqrt(k))

    exact = optimize.brentq(lambda k: eps_k(k) - target, 1.0, 1e4, xtol=1e-12, rtol=1e-14)
    c = calibrate(eps_k, target, monotone="increasing", start=5.0, limits=(1.0, 1e4), rel_tol=1e-5, method="secant")
    lo, hi = c.bracket
    assert c.value == lo and lo <= exact * (1 + 1e-12) and exact <= hi * (1 + 1e-12) and hi / lo - 1 <= 1e-5 * 1.01
    assert eps_k(c.value) <= target


def test_secant_refusals():
    with pytest.raises(DPValueError, match="integers"):
        calibrate(lambda n: n, 3, monotone="increasing", integer=True, method="secant")
    with pytest.raises(DPValueError):
        calibrate(lambda x: 1 / x, 0.5, method="newton")
    with pytest.raises(DPValueError):
        calibrate(lambda x: 1 / x, 0.5, method="secant", secant_step=0.0)
    # the target is met nowhere in the limits: the secant's bracket search stops at them
    with pytest.raises(NumericalError, match="no bracket"):
        calibrate(lambda x: 1 / x, 1e-6, method="secant", limits=(1e-2, 1e2))
    from dputils.matrix.noise_curves import secant_calibrate

    with pytest.raises(DPValueError, match="step"):
        secant_calibrate(ExactGaussian, 1.0, 1e-5, 1.0, 1e-3, step=0.0)


def test_secant_nan_counts_as_a_miss():
    # a value that is NaN below sigma = 2 (say a numerical breakdown): NaN must not be taken as meeting the target
    def value(s):
        return math.nan if s < 2.0 else 1e-9 / s

    c = calibrate(value, 1e-9, method="secant", start=1.0, rel_tol=1e-3)
    assert c.value >= 2.0 * (1 - 1e-12) and value(c.value) <= 1e-9


def test_model1_door_is_at_or_above_the_analytic_sigma():
    # one unsubsampled step (q = 1, T = 1) is the Gaussian mechanism; the PLD bound is >= the exact epsilon, so the
    # calibrated sigma is at or above the exact one (the safe side), and close to it
    from dputils.audit.model1 import calibrate_sigma

    eps, delta = 1.0, 1e-5
    exact = exact_sigma(eps, delta)
    s = calibrate_sigma(eps, 1.0, 1, delta, rel_tol=1e-4)
    assert exact * (1 - 1e-12) <= s <= exact * 1.01
    assert gauss_delta(eps, s) <= delta


def test_condcomp_door_is_the_allocation_search_and_on_the_safe_side():
    # one step, one slot: the balls-in-bins mechanism is a single Gaussian release of sensitivity 1, and the
    # conditional-composition accountant (an upper bound) asks for at least the exact sigma at delta - delta_E
    from dputils.matrix import condcomp
    from dputils.matrix.factorizations import build_strategy

    st = build_strategy("identity", 1, 1)
    eps, delta = 2.0, 1e-5
    s = condcomp.calibrate(st, eps, delta, rel_tol=1e-3)
    assert s >= exact_sigma(eps, delta) * (1 - 1e-12)
    assert gauss_delta(eps, s) <= delta
    acc = condcomp.ConditionalCompositionAccountant(delta_e=0.5 * delta, progress=False)
    acc.compose(condcomp.BallsInBinsMatrixMechanism(st, s))
    assert float(acc.get_delta(eps)) <= delta  # the accountant itself meets the target there


@pytest.mark.parametrize("eps, T", [(1.0, 128), (4.0, 100), (0.3, 7)])
def test_ftrl_sigma_node_is_the_analytic_gaussian_at_the_tree_sensitivity(eps, T):
    from dputils.training.ftrl import calibrate_sigma_node

    levels = math.ceil(math.log2(T)) + 1  # the complete binary tree over T leaves
    sens = math.sqrt(levels) * 2.0
    s = calibrate_sigma_node(eps, 1e-6, T, clip=2.0)
    exact = exact_sigma(eps, 1e-6, sens)
    assert s == pytest.approx(exact, rel=1e-9)
    # the safe side: the certified GDP parameter is the lower end, so the noise is at or above the exact one
    # (up to the closed form's own rounding)
    assert gauss_delta(eps, s, sens) <= 1e-6 * (1 + 1e-9)


def test_gdp_mu_is_the_lower_end_of_a_relative_bracket():
    from dputils.curves import gdp_mu

    for eps, delta in [(0.0, 1e-3), (0.2, 1e-5), (1.0, 1e-5), (10.0, 1e-10)]:
        mu = gdp_mu(eps, delta)
        # mu-GDP is the Gaussian mechanism with noise 1/mu
        exact = 1.0 / exact_sigma(eps, delta) if eps > 0 else None
        if exact is not None:
            assert mu == pytest.approx(exact, rel=1e-9)
        assert gauss_delta(eps, 1.0 / mu) <= delta * (1 + 1e-9)
        assert gauss_delta(eps, 1.0 / (mu * (1 + 1e-12))) > delta * (1 - 1e-9) or mu > 1e3


def test_vectorised_pair_epsilon_matches_brentq_and_is_conservative():
    # equal variances: the pair is mu-GDP with mu = |mu_in - mu_out| / s, i.e. a Gaussian mechanism of noise 1/mu
    from dputils.audit.gaussian_pair import epsilon_pair

    mu_in = np.array([0.3, 1.0, 2.5, 4.0])
    e = epsilon_pair(1e-5, 0.0, 1.0, mu_in, 1.0)
    for m, got in zip(mu_in, e):
        ref = gauss_eps(1e-5, 1.0 / m)
        assert ref <= got <= ref + 1e-9 * max(1.0, ref) + 1e-12
