"""Theorem 1 of the Edgeworth paper (Wang et al., Sec. 4.3) with explicit constants: ``theorem1_tail_bound``.

Independent truths: the exact tail of a sum of Gaussian losses (closed form, p = 1), the exact tails of one and
two subsampled-Gaussian losses by mpmath at 30 digits (``exact_gaussian_tail_mpmath``, a closed form and a 1-D
quadrature of it, no code shared with the bound), cross-checked against Monte Carlo, and the moment generating
function of one loss by mpmath quadrature (the sub-Gaussian inequality the proof rests on).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dputils.accountants.edgeworth import theorem1_constants, theorem1_tail_bound
from dputils.book.chapters.edgeworth import exact_gaussian_tail_mpmath
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism
from dputils.mechanisms import SubsampledGaussianMechanism as SGM
from dputils.truth import monte_carlo_tail

EPS = [-0.2, 0.0, 0.3, 1.0, 2.0, 4.0]


@pytest.mark.parametrize("sigma, m", [(0.5, 1), (1.0, 10), (2.0, 400)])
def test_gaussian_equals_chernoff_of_the_exact_tail(sigma, m):
    """p = 1: the summed loss under Q is N(-m mu^2/2, m mu^2) (closed form); the bound is its Chernoff bound
    exp(-z^2/2), above the exact tail, and its exponent is the exact tail's to leading order as z grows."""
    mu = 1.0 / sigma
    eps = np.linspace(0.0, 40.0, 41)
    z = (eps + m * mu * mu / 2) / (math.sqrt(m) * mu)
    exact = stats.norm.sf(z)
    bound = theorem1_tail_bound(GaussianMechanism(sigma), m, eps)
    assert np.all(bound >= exact)
    np.testing.assert_allclose(bound, np.exp(-z * z / 2), rtol=1e-6)  # eta = mu^2/2, v = mu^2 (closed form)
    big = z > 8
    if big.any():
        ratio = np.log(bound[big]) / stats.norm.logsf(z[big])
        assert np.all((ratio > 0.8) & (ratio <= 1.0))


@pytest.mark.parametrize("sigma, p", [(1.0, 0.3), (0.5, 0.5), (2.0, 0.05)])
@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("m", [1, 2])
def test_bounds_the_exact_subsampled_tail(sigma, p, direction, m):
    mech = SGM(sigma, p)
    bound = theorem1_tail_bound(mech, m, np.array(EPS), direction)
    for e, b in zip(EPS, bound):
        exact = exact_gaussian_tail_mpmath(sigma, p, m, e, direction)
        assert exact <= b, (e, exact, b)


def test_mpmath_truth_agrees_with_monte_carlo():
    """The truth itself, against an unrelated method (sampling the mechanism's losses)."""
    rng = np.random.default_rng(1)
    mech = SGM(1.0, 0.3)
    for d in ("remove", "add"):
        freq = monte_carlo_tail(mech.pair(d), 2, EPS[:5], 200_000, rng)
        exact = np.array([exact_gaussian_tail_mpmath(1.0, 0.3, 2, e, d) for e in EPS[:5]])
        se = np.sqrt(np.maximum(exact * (1 - exact), 1e-6) / 200_000)
        assert np.all(np.abs(freq - exact) <= 5 * se), (d, freq, exact)


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_sub_gaussian_mgf_inequality(direction):
    """The lemma of the proof: log E exp(lam (X - EX)) <= lam^2 v / 2, with the MGF by mpmath quadrature."""
    sigma, p = 1.0, 0.3
    c = theorem1_constants(SGM(sigma, p), direction)
    mp.mp.dps = 30
    P, mu = mp.mpf(p), 1 / mp.mpf(sigma)

    def g(x):
        return mp.log(1 - P + P * mp.exp(mu * x - mu * mu / 2))

    if direction == "remove":
        law = mp.npdf
        X = g
    else:

        def law(z):
            return (1 - P) * mp.npdf(z) + P * mp.npdf(z - mu)

        def X(z):
            return -g(z)

    pts = [-mp.inf, -3, 0, mu, 3 + mu, mp.inf]
    mean = mp.quad(lambda x: X(x) * law(x), pts)
    assert abs(float(-mean) / c["eta"] - 1) < 1e-8  # eta is -E X (the library's quadrature, 1e-9 shade)
    for lam in (-4.0, -2.0, -0.5, 0.5, 1.0, 2.0, 4.0, 8.0):
        L = mp.mpf(lam)
        log_mgf = mp.log(mp.quad(lambda x: mp.exp(L * (X(x) - mean)) * law(x), pts))
        assert float(log_mgf) <= lam * lam * c["v"] / 2, (lam, float(log_mgf), lam * lam * c["v"] / 2)


def test_rate_and_shape():
    mech = SGM(0.8, 0.01)
    c = theorem1_constants(mech, "remove")
    assert c["v"] == pytest.approx(1.25**2) and c["eta"] > 0
    eps = np.linspace(-5, 500, 200)
    b = theorem1_tail_bound(mech, 10_000, eps)
    assert np.all(np.diff(b) <= 0) and np.all((b > 0) & (b <= 1))
    # below -m eta the bound is 1 (trivial), above it exp(-(eps + m eta)^2 / (2 m v))
    s = 1.0 + 10_000 * c["eta"]
    assert theorem1_tail_bound(mech, 10_000, 1.0) == pytest.approx(math.exp(-s * s / (2e4 * c["v"])), rel=1e-12)
    assert theorem1_tail_bound(mech, 3, -1.0) == 1.0


def test_refuses_bad_input():
    with pytest.raises(DPValueError, match="mechanism"):
        theorem1_tail_bound(LaplaceMechanism(1.0), 10, 1.0)
    with pytest.raises(DPValueError, match="m"):
        theorem1_tail_bound(SGM(1.0, 0.1), 0, 1.0)
    with pytest.raises(DPValueError, match="eps"):
        theorem1_tail_bound(SGM(1.0, 0.1), 10, float("nan"))
    with pytest.raises(DPValueError, match="direction"):
        theorem1_tail_bound(SGM(1.0, 0.1), 10, 1.0, direction="both")
