"""dputils.truth.hockey_stick_mpmath, the quadrature reference of the foundations chapter, against closed forms."""

from __future__ import annotations

import mpmath as mp
import pytest

from dputils import curves
from dputils.mechanisms import SubsampledGaussianMechanism
from dputils.truth import hockey_stick_mpmath, subsampled_gaussian_logs_mpmath


@pytest.mark.parametrize("mu, eps", [(1.0, 0.5), (2.0, 1.0), (0.5, -0.2)])
def test_gaussian_pair_meets_the_gdp_closed_form(mu, eps):
    def log_p(x):
        return mp.log(mp.npdf(x, mu, 1))

    def log_q(x):
        return mp.log(mp.npdf(x, 0, 1))

    got = float(hockey_stick_mpmath(log_p, log_q, eps, (-12.0, 12.0 + mu), grid=201))
    assert got == pytest.approx(float(curves.gdp_delta(eps, mu)), rel=1e-12)


def test_subsampled_gaussian_logs_give_both_directions():
    mix, base = subsampled_gaussian_logs_mpmath(1.0, 0.01)
    mech = SubsampledGaussianMechanism(1.0, 0.01)
    for (lp, lq), direction, eps in (((mix, base), "remove", 1.0), ((base, mix), "add", 0.005)):
        got = float(hockey_stick_mpmath(lp, lq, eps, (-12.0, 13.0), grid=201))
        assert got == pytest.approx(float(mech.pair(direction).delta(eps)), rel=1e-9)


def test_subsampled_gaussian_profile_mpmath_at_q_one_is_the_gaussian_profile():
    # q = 1: the remove pair is N(1, sigma^2) against N(0, sigma^2), i.e. mu-GDP with mu = 1/sigma; the add pair
    # is its mirror image with the same profile
    from dputils.errors import DPValueError
    from dputils.truth import subsampled_gaussian_profile_mpmath

    for eps in (0.0, 0.7):
        exact = float(curves.gdp_delta(eps, 0.5))
        for d in ("remove", "add"):
            assert subsampled_gaussian_profile_mpmath(2.0, 1.0, d, eps, dps=30) == pytest.approx(exact, rel=1e-10)
    with pytest.raises(DPValueError):
        subsampled_gaussian_profile_mpmath(2.0, 0.5, "both", 0.0)
