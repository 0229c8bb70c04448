"""Privacy-loss pairs: closed forms against mpmath quadrature, tails against Monte Carlo, bad input."""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dputils.errors import DPValueError
from dputils.mechanisms import (
    GaussianMechanism,
    GaussianMixturePair,
    LaplaceMechanism,
    LaplacePair,
    SubsampledGaussianMechanism,
    make_mechanism,
)

mp.mp.dps = 40


def _mp_densities(sigma, q, direction):
    s, qq = mp.mpf(sigma), mp.mpf(q)
    base = lambda x: mp.npdf(x, 0, s)
    mix = lambda x: (1 - qq) * mp.npdf(x, 0, s) + qq * mp.npdf(x, 1, s)
    return (mix, base) if direction == "remove" else (base, mix)


def _mp_hockey_stick(p, q, eps, lo, hi):
    """int (p - e^eps q)_+ with the sign changes located by mpmath root finding on a fine scan."""
    f = lambda x: p(x) - mp.e ** mp.mpf(eps) * q(x)
    xs = np.linspace(lo, hi, 801) + 0.01234567  # offset so no crossing sits exactly on the scan grid
    vals = [f(mp.mpf(float(x))) for x in xs]
    roots = [mp.findroot(f, (mp.mpf(float(xs[i])), mp.mpf(float(xs[i + 1]))), solver="anderson")
             for i in range(len(xs) - 1) if vals[i] * vals[i + 1] < 0]
    edges = [mp.ninf, *roots, mp.inf]
    total = mp.mpf(0)
    for a, b in zip(edges[:-1], edges[1:]):
        if mp.isinf(a) and mp.isinf(b):
            mid = mp.mpf(0)
        elif mp.isinf(a):
            mid = b - 1
        elif mp.isinf(b):
            mid = a + 1
        else:
            mid = (a + b) / 2
        if f(mid) > 0:
            total += mp.quad(f, [a, mid, b])
    return total


@pytest.mark.parametrize("sigma,q,direction,eps", [
    (1.0, 0.01, "remove", 0.5), (1.0, 0.01, "add", 0.005), (2.0, 0.3, "add", 0.1), (0.5, 0.5, "remove", 2.0),
    (1.0, 1.0, "remove", 1.0), (1.0, 1.0, "add", 1.0), (1.0, 0.01, "remove", -0.5), (1.0, 0.01, "add", -0.5),
    (0.8, 0.1, "remove", -0.05), (2.0, 0.01, "remove", 0.3), (0.7, 0.2, "remove", 6.0),
])
def test_subsampled_gaussian_profile_matches_mpmath(sigma, q, direction, eps):
    pair = GaussianMixturePair(sigma, q, 1.0, direction)
    p, qd = _mp_densities(sigma, q, direction)
    ref = float(_mp_hockey_stick(p, qd, eps, -15 * sigma, 15 * sigma + 10))
    got = float(pair.delta(eps))
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-300)


def test_gaussian_profile_tiny_delta_keeps_relative_accuracy():
    # delta ~ 1e-40: closed form Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2) evaluated by mpmath
    mu, eps = 1.0, 13.0
    ref = mp.ncdf(-eps / mu + mu / 2) - mp.e ** eps * mp.ncdf(-eps / mu - mu / 2)
    got = float(GaussianMechanism(1.0).pair("remove").delta(eps))
    assert 0 < got < 1e-30
    assert got == pytest.approx(float(ref), rel=1e-8)


@pytest.mark.parametrize("eps", [-2.0, -1.0, -0.5, 0.0, 0.5, 0.99, 1.0, 1.5])
def test_laplace_profile_matches_mpmath(eps):
    b = 1.0
    p = lambda x: mp.e ** (-abs(x - 1) / b) / (2 * b)
    qd = lambda x: mp.e ** (-abs(x) / b) / (2 * b)
    f = lambda x: max(p(x) - mp.e ** mp.mpf(eps) * qd(x), 0)
    ref = float(mp.quad(f, [mp.ninf, 0, (b * eps + 1) / 2 if -1 < eps < 1 else 0.5, 1, mp.inf]))
    got = float(LaplaceMechanism(b).pair("remove").delta(eps))
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_tails_match_monte_carlo(direction):
    rng = np.random.default_rng(1)
    pair = GaussianMixturePair(0.9, 0.1, 1.0, direction)
    n = 400_000
    lp = pair.sample_loss(n, rng, "p")
    lq = pair.loss(pair.sample(n, rng, "q"))
    for e in (-0.05, 0.0, 0.05, 0.3):
        for est, exact in (((lp > e).mean(), pair.sf_p(e)), ((lq > e).mean(), pair.sf_q(e))):
            se = math.sqrt(max(exact * (1 - exact), 1e-12) / n)
            assert abs(est - exact) < 5 * se + 1e-6
        assert pair.sf_p(e) + pair.cdf_p(e) == pytest.approx(1.0, abs=1e-12)


def test_loss_is_log_density_ratio():
    x = np.linspace(-5, 6, 101)
    for pair in (GaussianMixturePair(1.3, 0.2, 2.0, "remove"), GaussianMixturePair(1.3, 0.2, 2.0, "add"),
                 LaplacePair(0.7, 1.5, "remove"), LaplacePair(0.7, 1.5, "add")):
        np.testing.assert_allclose(pair.loss(x), pair.log_p(x) - pair.log_q(x), rtol=1e-12, atol=1e-12)


def test_add_and_remove_are_related_by_the_duality_identity():
    # H_g(P||Q) = g H_{1/g}(Q||P) + 1 - g for probability measures
    m = SubsampledGaussianMechanism(1.0, 0.05)
    for e in (-0.3, 0.0, 0.02, 0.2):
        lhs = m.pair("add").delta(e)
        rhs = math.exp(e) * m.pair("remove").delta(-e) + 1 - math.exp(e)
        assert lhs == pytest.approx(rhs, abs=1e-13)


@given(st.floats(0.3, 5.0), st.floats(1e-4, 1.0), st.sampled_from(["add", "remove"]),
       st.lists(st.floats(-3.0, 10.0), min_size=2, max_size=8))
def test_profile_is_nonincreasing_and_in_unit_interval(sigma, q, direction, eps):
    pair = GaussianMixturePair(sigma, q, 1.0, direction)
    e = np.sort(np.asarray(eps))
    d = pair.delta(e)
    assert np.all(np.isfinite(d)) and np.all(d >= 0) and np.all(d <= 1)
    assert np.all(np.diff(d) <= 1e-15)


@pytest.mark.parametrize("kwargs,match", [
    (dict(name="gaussian", sigma=0.0), "sigma"), (dict(name="gaussian", sigma=-1.0), "sigma"),
    (dict(name="gaussian", sigma=float("nan")), "sigma"), (dict(name="subsampled-gaussian", sigma=1.0, q=0.0), "q"),
    (dict(name="subsampled-gaussian", sigma=1.0, q=1.5), "q"), (dict(name="laplace", scale=float("inf")), "scale"),
    (dict(name="laplace"), "scale"), (dict(name="nope", sigma=1.0), "mechanism"),
])
def test_bad_parameters_name_the_parameter(kwargs, match):
    name = kwargs.pop("name")
    with pytest.raises(DPValueError, match=match):
        make_mechanism(name, **kwargs)
