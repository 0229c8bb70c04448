"""BandInvMF, Option 2 of Appendix F and the panel functions (dputils.matrix.panels), against independent truths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit, logit, ndtr

from dputils.errors import DPValueError
from dputils.matrix import build_strategy, reverse_hazard_bounds, sample_ternary_loss
from dputils.matrix.condcomp import option2_hazard_bound
from dputils.matrix.factorizations import bandinvmf_coefs, inv_sqrt_series, prefix_workload
from dputils.matrix.panels import family_bounds, hybrid_best_fraction
from dputils.matrix.posterior_paths import allocation_paths


# ------------------------------------------------------------------------------------------------ BandInvMF
def _objective(C: np.ndarray, epochs: int, batches: int) -> float:
    """(1/N)||A C^{-1}||_F^2 * max_i ||m_i||^2 from dense linear algebra (not the module's series code)."""
    n = C.shape[0]
    B = prefix_workload(n) @ np.linalg.inv(C)
    m = np.abs(C).reshape(n, epochs, batches).sum(axis=1).T
    return float(np.sum(B * B) / n * np.max(np.sum(m * m, axis=1)))


@pytest.mark.parametrize("p", [2, 4])
def test_bandinvmf_inverse_is_banded_nonnegative_and_better_than_bisr(p):
    st = build_strategy("bandinvmf", 1, 40, p)
    C = st.C
    assert np.all(C >= 0) and C[0, 0] == 1.0
    inv = np.linalg.inv(C)
    i, j = np.indices(inv.shape)
    assert np.max(np.abs(inv[(i - j) >= p])) < 1e-9  # C^{-1} has p bands (dense inverse, independent)
    assert np.max(np.abs(inv[j > i])) == 0.0
    np.testing.assert_allclose(np.diag(inv, -1)[0], st.info["inverse_coefs"][1], rtol=1e-9)
    bisr = build_strategy("bisr", 1, 40, p).C
    # the optimiser starts at BISR, so it must not end worse (objective from dense algebra)
    assert _objective(C, 1, 40) <= _objective(bisr, 1, 40) * (1 + 1e-12)
    np.testing.assert_allclose(_objective(C, 1, 40), st.error(), rtol=1e-9)


def test_bandinvmf_one_band_is_identity_and_start_is_bisr_series():
    c, a = bandinvmf_coefs(10, 1, 1, 10)
    assert list(c) == [1.0] and list(a) == [1.0]
    assert inv_sqrt_series(3)[1] == -0.5  # the BISR start a_1 = -1/2


# ------------------------------------------------------------------------------------------------ Option 2
def _two_slot_truth(mu: np.ndarray, s: float, beta: float) -> float:
    """b = 2: L_1 = log N(x|mu_0)/N(x|mu_1) is exactly Gaussian under each reference N(mu_k, s^2 I)."""
    d = mu[0] - mu[1]
    sd = np.linalg.norm(d) / s
    means = [(mu[k] @ d - 0.5 * (mu[0] @ mu[0] - mu[1] @ mu[1])) / s**2 for k in range(2)]
    tau = optimize.brentq(lambda t: 0.5 * sum(ndtr((t - m) / sd) for m in means) - beta, -100, 100, xtol=1e-14)
    return float(expit(-tau))  # sigmoid(-log(1) - tau)


def test_option2_two_slots_closed_form():
    # slot 1 has the larger step-3 mean, so it is sorted component 1
    M = np.array([[0.3, 0.9, 0.1], [0.7, 0.2, 0.8]])
    for s in (0.5, 1.0):
        truth = _two_slot_truth(M[:, :2], s, 1e-3)
        assert option2_hazard_bound(M, s, 3, 1e-3) == pytest.approx(truth, rel=1e-8)


def test_option2_without_option2_matches_the_accountants_bound():
    rng = np.random.default_rng(3)
    M = rng.uniform(0, 1, size=(6, 5))
    for n in (2, 5):
        ref = reverse_hazard_bounds(M, 0.8, n, 1e-4, "remove", components=[5])[0][-1]
        got = option2_hazard_bound(M, 0.8, n, 1e-4, option2_temperatures=())
        assert got == pytest.approx(ref, rel=1e-9)
        assert option2_hazard_bound(M, 0.8, n, 1e-4) <= got * (1 + 1e-12)  # a larger family


def test_option2_bound_holds_by_monte_carlo():
    rng = np.random.default_rng(7)
    M = rng.uniform(0, 1, size=(5, 4))
    beta, i = 0.2, 4  # beta_i = beta / (b - 1) = 0.05
    lam = option2_hazard_bound(M, 0.7, 4, beta, component=i)
    tau = -math.log(i) - float(logit(lam))
    L = sample_ternary_loss(M, 0.7, 4, 200_000, "remove", component=i, rng=11)
    frac = float(np.mean(L <= tau))
    se = math.sqrt(0.05 * 0.95 / L.size)
    assert frac <= 0.05 + 4 * se
    assert frac > 0.005  # not vacuous: the bound sits in the bulk of the tail


def test_option2_errors():
    M = np.ones((3, 3))
    with pytest.raises(DPValueError):
        option2_hazard_bound(M, 1.0, 2, 1e-3, component=0)
    with pytest.raises(DPValueError):
        option2_hazard_bound(M, 1.0, 2, 1e-3, shared_temperatures=(), option2_temperatures=())
    with pytest.raises(DPValueError):
        option2_hazard_bound(M, 1.0, 2, 1e-3, option2_temperatures=(-1.0,))


# ------------------------------------------------------------------------------------------------ panels
def test_allocation_paths_of_bsr_structure():
    M = build_strategy("bsr", 2, 20, 3).means
    cur = allocation_paths(M, 2.0, 1e-5, 2)
    np.testing.assert_array_equal(cur["hybrid (e ≥ 2)"][:20], cur["union"][:20])
    assert np.ptp(cur["global max"]) == 0.0
    assert cur["union"][0] == pytest.approx(1 / 20, rel=1e-9)  # step 1: the prior 1/b
    assert 0.0 <= hybrid_best_fraction(cur) <= 1.0
    with pytest.raises(DPValueError):
        allocation_paths(M, 2.0, 1e-5, 3)


def test_family_bounds_option1_and_ordering():
    M = build_strategy("bisr", 2, 10, 2).means
    fb = family_bounds(M, 2.0, 1e-5, 2)
    for e, n in enumerate((10, 20)):
        ref = reverse_hazard_bounds(M, 2.0, n, 1e-5 / 20, "remove", temperatures=(math.inf,), components=[9])
        assert fb["Option 1"][e] == pytest.approx(ref[0][-1], rel=1e-9)
    assert np.all(fb["Options 1+3"] <= fb["Option 1"] * (1 + 1e-12))
    assert np.all(fb["Options 1+2+3"] <= fb["Options 1+3"] * (1 + 1e-12))


# ------------------------------------------------------------------------------------------------ fast path
def test_min_over_psi_before_the_normal_cdf_is_bitwise_the_same():
    """The tail-bound bisection takes min_psi on z before ndtr: exact when ndtr is non-decreasing in floats."""
    from scipy.special import ndtr as _ndtr

    rng = np.random.default_rng(5)
    x = np.sort(np.concatenate([rng.uniform(-40, 40, 400_000), np.linspace(-2, 2, 400_001)]))
    assert np.all(np.diff(_ndtr(x)) >= 0)
    z = rng.normal(0, 3, size=(6, 50, 80))
    z[:, :5] = np.where(rng.uniform(size=(6, 5, 80)) < 0.3, -np.inf, z[:, :5])
    np.testing.assert_array_equal(np.min(_ndtr(z), axis=0), _ndtr(np.min(z, axis=0)))
