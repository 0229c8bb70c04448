"""The functions the matrix chapter calls from dputils.matrix.panels (issue 26, item 5), against independent truths:
closed forms, a different algorithm (the dynamic program against Monte Carlo, quadrature against Monte Carlo),
counts worked out by hand, and the contracts (shapes, monotonicity, errors) of the pure refactors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dputils.errors import DPValueError
from dputils.matrix import BallsInBinsMatrixMechanism, ConditionalCompositionAccountant, build_strategy, rho_remove
from dputils.matrix import noise_curves as nc
from dputils.matrix import panels as pn
from dputils.matrix.renyi import rho_add_exact_independent


def test_bruteforce_agreement_counts_the_cases_and_agrees():
    # every (b, p, alpha) with b = 2..7, p = 1..4, alpha = 2..5 and b**alpha <= 2e4, counted by hand:
    # alpha = 2, 3: all 6 b; alpha = 4: b <= 11 -> 6; alpha = 5: b <= 7 (7**5 = 16807) -> 6; times 4 bands
    worst, cases = pn.bruteforce_agreement(np.random.default_rng(3))
    assert cases == 4 * 4 * 6
    assert worst < 1e-9
    # a budget of 100 terms: b = 2 at every order (2**5 = 32), b = 3 up to alpha = 4 (81; 3**5 = 243): 7 cases
    _, small = pn.bruteforce_agreement(np.random.default_rng(3), max_slots=3, bands=(1,), max_terms=100)
    assert small == 7


def test_remove_divergence_mc_matches_the_dynamic_program():
    s = build_strategy("bsr", 1, 6, 2)
    dp = rho_remove(s.gram, 1.5, [2], 2)[0][0]
    mc = pn.remove_divergence_mc(s, 1.5, 2, 200_000, np.random.default_rng(0))
    assert abs(mc - dp) < 0.03 * dp


def test_add_r2_mc_matches_the_exact_add_divergence():
    exact = rho_add_exact_independent(np.eye(10), 1.0, [2])[0]
    est, se, w = pn.add_r2_mc_dpsgd(10, 100_000, np.random.default_rng(1))
    assert w.shape == (100_000,) and se > 0
    assert abs(est - exact) <= 4 * se


def test_add_divergence_mc_closed_form_for_gaussian_losses():
    # L ~ N(mu, s^2): log E[e^{(a-1) L}] / (a-1) = mu + (a-1) s^2 / 2
    mu, s = -0.3, 0.4
    L = np.random.default_rng(2).normal(mu, s, 400_000)
    for a, (est, se) in zip((2, 3), pn.add_divergence_mc(L, (2, 3))):
        assert abs(est - (mu + (a - 1) * s * s / 2)) <= 4 * se


def test_dp_cost_shape():
    t = pn.dp_cost([1, 2], [5, 10], 4)
    assert t.shape == (4, 4)
    assert t[:, 0].tolist() == [1, 1, 2, 2] and t[:, 1].tolist() == [5, 10, 5, 10]
    assert np.all(t[:, 2] >= 0) and np.all(t[:, 3] > 0)


def test_importance_sampling_agrees_with_plain_monte_carlo():
    for plain, imp, se in pn.importance_vs_plain(8, 0.8, (1.0,), 100_000, 20_000, 0):
        assert plain > 0 and abs(plain - imp) <= 4 * se


def test_importance_mc_sigmas_contract():
    s = build_strategy("identity", 1, 10)
    starts = nc.renyi_sigma(s, range(2, 33), [1.0, 4.0], 1e-5, rel_tol=1e-2, tier_budget=2e8)
    mc = pn.importance_mc_sigmas(s, [1.0, 4.0], 1e-5, starts, 5_000, 0)
    assert set(mc) == {"sigma", "se", "remove", "rel_se", "add"}
    assert mc["sigma"][0] > mc["sigma"][1] > 0
    # Monte Carlo estimates the pair the Renyi accountant bounds: never far above the bound's sigma
    assert all(m <= r * 1.02 for m, r in zip(mc["sigma"], starts))
    assert all(0 < v < 1e-4 for v in mc["remove"]) and all(se > 0 for se in mc["se"])


def test_plain_gaussian_sigma_closed_form():
    # one step, sensitivity 1 (identity, b = 1): rho(a) = a / (2 sigma^2); at sigma the bound of Theorem 3.1 meets delta
    s = build_strategy("identity", 1, 1)
    sig = pn.plain_gaussian_sigma(s, 1.0, 1e-5, 3.0, 1e-4, 64)
    a = np.arange(2, 65)

    def delta_at(x):
        rho = a / (2 * x * x)
        return np.min(np.exp((a - 1) * (rho - 1.0)) / (a - 1) * (1 - 1 / a) ** a)

    assert delta_at(sig) <= 1e-5 < delta_at(sig / (1 + 1e-4) ** 2)


def test_participant_weights_start_at_the_prior_and_grow():
    b = 8
    acc = ConditionalCompositionAccountant(delta_e=5e-6, progress=False).compose(
        BallsInBinsMatrixMechanism(build_strategy("identity", 1, b), 1.0)
    )
    q = pn.participant_weights(acc, 5e-6)
    for v in q.values():
        assert v.shape == (b,) and abs(v[0] - 1 / b) < 1e-12 and np.all(np.diff(v) >= 0)


def test_gram_shape_on_a_hand_made_matrix():
    G = np.array([[2.0, 1.0, 0.0, 0.5], [1.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 1.0], [0.5, 0.0, 1.0, 2.0]])
    sh = pn.gram_shape({"g": G}, 2)  # cyclic distance 2 only between slots 0-2 and 1-3: both zero
    assert sh["banded"]["g"] and sh["out_of_band"]["g"] == 0.0 and sh["corner"]["g"] == 0.25
    sh1 = pn.gram_shape({"g": G}, 1)
    assert not sh1["banded"]["g"] and sh1["out_of_band"]["g"] == 0.5


def test_gram_matrices_bsr_is_cyclically_banded():
    grams = pn.gram_matrices(("bsr", "bandmf", "bisr"), 60, 3, 4)
    assert all(G.shape == (20, 20) for G in grams.values())
    sh = pn.gram_shape(grams, 4)
    assert sh["banded"]["bsr"] and sh["banded"]["bandmf"] and not sh["banded"]["bisr"]
    assert sh["corner"]["bsr"] > 0
    np.testing.assert_allclose(grams["bsr"], build_strategy("bsr", 3, 20, 4).gram)


def test_renyi_sigma_curve_and_optimal_order():
    s = build_strategy("bsr", 1, 10, 2)
    out = pn.renyi_sigma_curve(s, range(2, 17), [1.0, 2.0, 4.0], 1e-5, rel_tol=1e-2, tier_budget=2e8)
    assert out["sigma"] == nc.renyi_sigma(s, range(2, 17), [1.0, 2.0, 4.0], 1e-5, rel_tol=1e-2, tier_budget=2e8)
    assert out["dominant_mid"] in ("remove", "add") and 1 <= out["bands_mid"] <= 2
    order = pn.renyi_optimal_order(s, out["sigma"][1], 2.0, range(2, 17), 2, 2e8)
    assert 2 <= order <= 16


def test_distances_to_participant_dpsgd():
    # DP-SGD, b = 5, 3 epochs: in epoch e the squared distances are 2e - 1 or 2e - 2 (Appendix E.1)
    M = build_strategy("identity", 3, 5).means
    for n in range(2, 16):
        e = (n - 1) // 5 + 1
        assert set(np.unique(pn.distances_to_participant(M, n))) <= {2 * e - 1, 2 * e - 2}


def test_condcomp_allocations_contract():
    s = build_strategy("identity", 2, 6)
    out = pn.condcomp_allocations(s, 1.0, 1e-5)
    assert set(out) == {"union", "hybrid"}
    for r in out.values():
        assert r["epsilon"] > 0 and 1 / 6 <= r["q_last"] <= 1
    with pytest.raises(DPValueError):
        pn.condcomp_allocations(s, -1.0, 1e-5)


def test_errata_numbers_closed_forms():
    e = pn.errata_numbers(4, 100)
    assert math.isclose(e["sign_bad"] - e["sign_ok"], 2 * 5 * math.log(100) / 4, rel_tol=1e-12)
    assert e["sign_plain"] == 2.5 and e["sign_rel"] < 1e-8
    # Lemma 3.4 for G = I: tr G / (2 b s^2) + (a - 1) sum G / (2 b^2 s^2) = (1 + (a - 1) / b) / (2 s^2)
    assert math.isclose(e["l34_value"], (1 + 19 / 100) / (2 * 0.49), rel_tol=1e-12)
    assert math.isclose(e["l34_r2"], (1 + 1 / 100) / 2, rel_tol=1e-12)
    # the printed n mod b + 1 equals the epoch floor((n - 1) / b) + 1 only at n = 100 (1, 1), 101 (2, 2),
    # 202 (3, 3) and 303 (4, 4), by hand: 400 - 4 steps differ
    assert e["epoch_n"] == 400 and e["epoch_wrong"] == 396
    assert e["epoch_max"] == 100 and e["l34_exact"] < e["l34_r2"]


def test_bad_input_is_refused():
    s = build_strategy("identity", 1, 4)
    with pytest.raises(DPValueError):
        pn.remove_divergence_mc(s, 0.0, 2, 10, np.random.default_rng(0))
    with pytest.raises(DPValueError):
        pn.add_r2_mc_dpsgd(0, 10, np.random.default_rng(0))
    with pytest.raises(DPValueError):
        pn.importance_mc_sigmas(s, [1.0], 2.0, [1.0], 100)
    with pytest.raises(DPValueError):
        pn.errata_numbers(0, 100)
    with pytest.raises(DPValueError):
        pn.gram_matrices(("bsr",), 10, 0, 2)


def test_ternary_loss_spread_contract():
    M = build_strategy("identity", 3, 6).means
    out = pn.ternary_loss_spread(M, 5.0, [6, 7, 12, 13], 6, 2_000, np.random.default_rng(4))
    assert list(out) == [6, 7, 12, 13] and [d["epoch"] for d in out.values()] == [1, 2, 2, 3]
    for d in out.values():
        assert d["samples"].shape == (2_000,) and d["std"] > 0 and d["iqr"] > 0
    # the same stream gives the same samples, drawn in the order of the steps
    again = pn.ternary_loss_spread(M, 5.0, [6, 7], 6, 2_000, np.random.default_rng(4))
    np.testing.assert_array_equal(again[7]["samples"], out[7]["samples"])
