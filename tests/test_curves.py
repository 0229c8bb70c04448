"""Closed-form curves against mpmath; inversion and duality."""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dputils import curves
from dputils.errors import DPValueError, NumericalError

mp.mp.dps = 40


def _mp_gauss_hs(mp_p, sp, mq, sq, eps):
    """int (p - e^eps q)_+ for two normal densities, integrating between the (quadratic's) roots."""
    mp_p, sp, mq, sq, eps = map(mp.mpf, (mp_p, sp, mq, sq, eps))
    f = lambda x: mp.npdf(x, mp_p, sp) - mp.e**eps * mp.npdf(x, mq, sq)
    A = 1 / (2 * sq**2) - 1 / (2 * sp**2)
    B = mp_p / sp**2 - mq / sq**2
    C = mq**2 / (2 * sq**2) - mp_p**2 / (2 * sp**2) + mp.log(sq / sp) - eps
    pts = []
    if abs(A) < mp.mpf(10) ** -30:
        if B != 0:
            pts = [-C / B]
    else:
        disc = B * B - 4 * A * C
        if disc > 0:
            r = mp.sqrt(disc)
            pts = sorted([(-B - r) / (2 * A), (-B + r) / (2 * A)])
    edges = [mp.ninf, *pts, mp.inf]
    total = mp.mpf(0)
    for a, b in zip(edges[:-1], edges[1:]):
        mid = (
            (a + b) / 2
            if (mp.isfinite(a) and mp.isfinite(b))
            else (b - 1 if mp.isfinite(b) else (a + 1 if mp.isfinite(a) else 0))
        )
        if f(mid) > 0:
            total += mp.quad(f, [a, mid, b])
    return total


@pytest.mark.parametrize(
    "mu_p,sp,mu_q,sq,eps",
    [
        (1, 1, 0, 1, 0.0),
        (1, 1, 0, 1, 1.0),
        (0, 1, 1, 1, 2.0),
        (0.5, 1.3, 0, 1, 0.0),
        (0.5, 1.3, 0, 1, 1.0),
        (0.5, 1.3, 0, 1, -1.0),
        (0.5, 0.7, 0, 1, 0.3),
        (0.5, 0.7, 0, 1, -0.2),
        (3.0, 2.0, 0.0, 1.0, 2.5),
        (2.0, 1.0, 0.0, 1.0, 6.0),
        (0.0, 1.0, 0.0, 2.0, 0.1),
        (0.0, 2.0, 0.0, 1.0, 0.1),
    ],
)
def test_gaussian_delta_matches_mpmath(mu_p, sp, mu_q, sq, eps):
    ref = float(_mp_gauss_hs(mu_p, sp, mu_q, sq, eps))
    got = float(curves.gaussian_delta(eps, mu_p, sp, mu_q, sq))
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-16)


def test_gaussian_delta_identical_distributions():
    assert curves.gaussian_delta(0.5, 1.0, 1.0, 1.0, 1.0) == 0.0
    assert curves.gaussian_delta(-0.5, 1.0, 1.0, 1.0, 1.0) == pytest.approx(1 - math.exp(-0.5))


@pytest.mark.parametrize("mu,eps", [(0.5, 0.0), (1.0, 1.0), (2.0, 3.0), (1.0, 12.0), (4.0, 0.5)])
def test_gdp_delta_matches_mpmath(mu, eps):
    ref = mp.ncdf(-mp.mpf(eps) / mu + mp.mpf(mu) / 2) - mp.e ** mp.mpf(eps) * mp.ncdf(
        -mp.mpf(eps) / mu - mp.mpf(mu) / 2
    )
    assert curves.gdp_delta(eps, mu) == pytest.approx(float(ref), rel=1e-9)


def test_gdp_epsilon_inverts_and_is_conservative():
    for mu in (0.3, 1.0, 3.0):
        for d in (1e-3, 1e-5, 1e-10):
            e = curves.gdp_epsilon(d, mu)
            assert curves.gdp_delta(e, mu) <= d
            assert curves.gdp_delta(e - 1e-7, mu) > d or e == 0.0


def test_gdp_mu_is_the_inverse_in_mu():
    mu = curves.gdp_mu(1.0, 1e-5)
    assert curves.gdp_delta(1.0, mu) == pytest.approx(1e-5, rel=1e-9)


def test_tradeoff_matches_mpmath():
    for mu in (0.5, 2.0):
        for a in (0.01, 0.3, 0.9):
            ref = mp.ncdf(mp.sqrt(2) * mp.erfinv(1 - 2 * mp.mpf(1 - a)) * -1 - mu)  # Phi(Phi^-1(1-a) - mu)
            assert curves.gdp_tradeoff(a, mu) == pytest.approx(float(ref), rel=1e-10)


def test_profile_tradeoff_duality_round_trip():
    eg = np.linspace(-6, 6, 3001)
    al = np.linspace(0, 1, 3001)
    f = curves.tradeoff_from_profile(al, eg, curves.gdp_delta(eg, 1.5))
    back = curves.profile_from_tradeoff(np.array([0.0, 0.5, 1.0, 2.0]), al, f)
    np.testing.assert_allclose(back, curves.gdp_delta(np.array([0.0, 0.5, 1.0, 2.0]), 1.5), atol=2e-3)


def test_epsilon_from_delta_raises_without_a_bracket():
    with pytest.raises(NumericalError, match="no epsilon"):
        curves.epsilon_from_delta(lambda e: 0.5, 1e-3)  # e.g. an infinite-loss mass of 0.5
    with pytest.raises(NumericalError, match="NaN"):
        curves.epsilon_from_delta(lambda e: float("nan"), 1e-3)
    with pytest.raises(DPValueError, match="delta"):
        curves.epsilon_from_delta(lambda e: 0.1, 1.5)


@given(st.floats(0.05, 10.0), st.floats(1e-12, 0.5))
def test_gdp_epsilon_monotone_in_mu(mu, delta):
    assert curves.gdp_epsilon(delta, mu) <= curves.gdp_epsilon(delta, mu * 1.1) + 1e-9


def test_bad_inputs():
    with pytest.raises(DPValueError, match="mu"):
        curves.gdp_delta(1.0, 0.0)
    with pytest.raises(DPValueError, match="sigma_p"):
        curves.gaussian_delta(1.0, 0, -1, 0, 1)
    with pytest.raises(DPValueError, match="alpha"):
        curves.gdp_tradeoff(1.5, 1.0)


def test_gdp_delta_refuses_nan_epsilon():
    from dputils.errors import DPValueError

    with pytest.raises(DPValueError, match="eps"):
        curves.gdp_delta(float("nan"), 1.0)
    with pytest.raises(DPValueError, match="eps"):
        curves.gdp_delta([0.5, float("nan")], 1.0)
