"""The two references the gauss_audit chapter used to define in the notebook, now in the library:
dputils.truth.gaussian_pair_hockey_stick_mpmath (against the closed form of equal-variance Gaussians and the
generic grid-split quadrature) and dputils.audit.simulate.ks_distance_standardised /
lilliefors_critical_value (against scipy.stats.kstest and Lilliefors' asymptotic critical value)."""

import math

import numpy as np
import pytest
from scipy import stats

from dputils.audit.simulate import ks_distance_standardised, lilliefors_critical_value
from dputils.errors import DPValueError
from dputils.truth import gaussian_pair_hockey_stick_mpmath, hockey_stick_mpmath


@pytest.mark.parametrize("eps", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("mu,s", [(1.0, 1.0), (3.0, 2.0), (-0.7, 0.5)])
def test_pair_hockey_equal_variances_closed_form(eps, mu, s):
    # H_{e^eps}(N(mu, s^2) || N(0, s^2)) = Phi(d/2 - eps/d) - e^eps Phi(-d/2 - eps/d), d = |mu| / s
    d = abs(mu) / s
    ref = stats.norm.cdf(d / 2 - eps / d) - math.exp(eps) * stats.norm.cdf(-d / 2 - eps / d)
    got = gaussian_pair_hockey_stick_mpmath(eps, mu, s, 0.0, s)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("pair", [(0.0, 1.0, 0.5, 1.7), (1.0, 2.0, 0.0, 0.8), (0.3, 0.6, 0.0, 0.6)])
def test_pair_hockey_unequal_variances_against_grid_quadrature(pair):
    mp_, sp, mq, sq = pair
    eps = 0.4

    def log_p(x):
        import mpmath as mp

        return mp.log(mp.npdf(x, mp_, sp))

    def log_q(x):
        import mpmath as mp

        return mp.log(mp.npdf(x, mq, sq))

    ref = float(hockey_stick_mpmath(log_p, log_q, eps, (-15.0, 15.0), grid=401))
    assert gaussian_pair_hockey_stick_mpmath(eps, *pair) == pytest.approx(ref, rel=1e-9, abs=1e-15)


def test_pair_hockey_refuses_bad_scale():
    with pytest.raises(DPValueError):
        gaussian_pair_hockey_stick_mpmath(1.0, 0.0, 0.0, 1.0, 1.0)


def test_ks_distance_matches_scipy_kstest():
    rng = np.random.default_rng(3)
    for n in (5, 50, 700):
        x = rng.gamma(2.0, size=n) * 3 + 1
        z = (x - x.mean()) / x.std(ddof=1)
        assert ks_distance_standardised(x) == pytest.approx(stats.kstest(z, "norm").statistic, abs=1e-14)
    stack = rng.normal(size=(4, 30))
    got = ks_distance_standardised(stack)
    assert got.shape == (4,)
    assert np.allclose(got, [ks_distance_standardised(r) for r in stack], atol=0)
    with pytest.raises(DPValueError):
        ks_distance_standardised([1.0])


def test_lilliefors_critical_value_asymptotic():
    # Lilliefors' (1967) large-n critical value at level 0.01: 1.031 / sqrt(n) (Dallal-Wilkinson 1986)
    n = 400
    crit = lilliefors_critical_value(n, 4000, np.random.default_rng(0))
    assert crit == pytest.approx(1.031 / math.sqrt(n), rel=0.05)
    # far below the known-parameter Kolmogorov value, and larger at a smaller level
    assert crit < stats.kstwo.ppf(0.99, n)
    assert lilliefors_critical_value(n, 4000, np.random.default_rng(0), level=0.001) > crit
    with pytest.raises(DPValueError):
        lilliefors_critical_value(n, 10, np.random.default_rng(0), level=1.5)
