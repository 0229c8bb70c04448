"""The chapters' comparisons moved from the chapter modules into the library (issue 26, item 3):
dputils.baselines (SPA, foundations and Edgeworth comparisons) and dputils.truth (the profile and erratum
checks). Each is checked against something it does not compute itself: the Gaussian's closed-form profile
(Dong et al., Cor. 2.13), a published epsilon (the TensorFlow Privacy MNIST tutorial), the identity
E_Q[dP/dQ] = 1, dp_accounting, or counts made by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from dputils import baselines as bl
from dputils import truth
from dputils.accountants.spa import spa_delta
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism


def gaussian_delta(eps, mu):
    """delta(eps) of mu-GDP, written out here (not dputils.curves)."""
    return stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def gaussian_epsilon(delta, mu):
    return optimize.brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, 50.0, xtol=1e-15, rtol=1e-15)


# n Gaussian steps of noise 4: mu = sqrt(16)/4 = 1
SIGMA, N = 4.0, 16
GAUSS = GaussianMechanism(SIGMA)
LEDGER = [(GAUSS.pair("remove"), N)]


def test_spa_delta_curves_and_truth_errors_on_the_gaussian_closed_form():
    pytest.importorskip("dp_accounting")
    eps = np.array([0.25, 1.0, 2.0])
    exact = gaussian_delta(eps, 1.0)
    curve, mu, pld = bl.spa_delta_curves(GAUSS, LEDGER, eps, N, SIGMA, 1.0)
    assert mu == pytest.approx(math.sqrt(N * math.expm1(1 / SIGMA**2)), rel=1e-15)  # Bu et al.'s CLT mu at q = 1
    assert np.allclose(curve["clt"], exact, rtol=1e-9, atol=0)  # SP-CLT is exact for Gaussians
    assert np.all(curve["lo"] <= exact * (1 + 1e-12)) and np.all(exact <= curve["hi"] * (1 + 1e-12))
    assert np.all(curve["ma"] >= exact) and np.all(curve["ma"] < 10 * exact)  # a bound, not too loose
    assert np.allclose(curve["pld"], exact, rtol=1e-3) and pld.get_delta(1.0) == curve["pld"][1]
    assert set(curve) == {"clt", "lo", "hi", "msd0", "msd1", "ma", "gdp", "pld"}
    tr, pts, rel, ma_t, gdp_t = bl.spa_truth_errors(LEDGER, eps, 1.0)
    assert np.allclose(tr, exact, rtol=1e-9, atol=0)  # the contour-integral truth against the closed form
    assert np.allclose(gdp_t, exact, rtol=1e-12)  # mu = 1 is the exact GDP here
    assert max(rel["clt"]) < 1e-8 and max(rel["gdp"]) < 1e-8 and len(pts) == 3
    assert np.all(ma_t > tr) and rel["ma"] == pytest.approx(np.abs(ma_t / tr - 1))
    with pytest.raises(DPValueError):
        bl.spa_delta_curves(GAUSS, LEDGER, eps, 0, SIGMA, 1.0)


def test_spa_epsilon_rows_and_truth_in_brackets_on_the_gaussian_closed_form():
    ns = [4, 16, 64]
    ref = [gaussian_epsilon(1e-5, math.sqrt(n) / SIGMA) for n in ns]
    rows = bl.spa_epsilon_rows(GAUSS.pair("remove"), ns, 1e-5, SIGMA, 1.0, [2 * r for r in ref], label="twice")
    for row, r in zip(rows, ref):
        assert row["clt"] == pytest.approx(r, rel=1e-8) and row["lower"] <= r * (1 + 1e-9) <= row["upper"] * (1 + 2e-9)
        # the expansions are approximations (SP-CLT is exact for Gaussians); each higher order is closer here
        err = {k: abs(row[k] / r - 1) for k in ("k3", "msd1", "msd0")}
        assert err["k3"] < err["msd1"] < err["msd0"] < 1e-3 and row["ma"] > r
        assert row["twice"] == 2 * r and row["rel_clt"] == pytest.approx(0.5, rel=1e-7)
    assert [r["n"] for r in rows] == ns
    got = bl.truth_epsilons_in_brackets(GAUSS.pair("remove"), rows, 1e-5, 2)
    assert sorted(got) == [4, 64]  # two rows, evenly spread: the first and the last
    for n, e in got.items():
        assert e == pytest.approx(gaussian_epsilon(1e-5, math.sqrt(n) / SIGMA), rel=1e-9)
    with pytest.raises(ValueError):
        bl.spa_epsilon_rows(GAUSS.pair("remove"), ns, 1e-5, SIGMA, 1.0, ref[:2])  # one reference per n


def test_spa_tiny_delta_rows_use_the_given_truth_and_bracket_it_with_prv():
    dp_accounting = pytest.importorskip("dp_accounting")
    pytest.importorskip("prv_accountant")
    sigma, q, n = 1.0, 0.05, 200
    mech = SubsampledGaussianMechanism(sigma, q)
    led = [(mech.pair("remove"), n)]
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(mech.to_dp_event(), n)
    d2 = truth.truth_delta(led, 2.0)
    rows = bl.spa_tiny_delta_rows(led, sigma, q, n, [1.0, 2.0], {2.0: d2}, pld)
    r1, r2 = rows
    assert r2["truth"] == d2 and r1["truth"] == pytest.approx(truth.truth_delta(led, 1.0), rel=1e-12)
    assert r1["prv_lower"] <= r1["truth"] <= r1["prv_upper"] and r1["prv_rel"] < 0.05
    # SP-CLT is an estimate (about 2 % off at this small n); PLD's connect-the-dots delta is pessimistic
    p1 = spa_delta(led, 1.0)
    assert r1["spa"] == p1.delta_clt and p1.lower <= r1["truth"] <= p1.upper and r1["spa_rel"] < 0.05
    assert r1["pld"] >= r1["truth"] * (1 - 1e-6)
    assert r1["spa_rel"] == abs(r1["spa"] / r1["truth"] - 1)


def test_accurate_from_by_hand():
    rows = [dict(epochs=e, rel_clt=r) for e, r in ((0.5, 1e-4), (1, 1e-2), (2, 1e-4), (4, 1e-5))]
    assert bl.accurate_from(rows, 1e-3) == 2  # 0.5 is accurate but a later row is not
    assert bl.accurate_from(rows, 1e-1) == 0.5 and bl.accurate_from(rows, 1e-6) == math.inf


def test_gaussian_pld_brackets_hold_the_closed_form():
    rows = bl.gaussian_pld_brackets(1e-3, cases=((math.sqrt(3.0), 3),), epsilons=(0.0, 1.0))
    assert [(s, T, e) for s, T, e, *_ in rows] == [(math.sqrt(3.0), 3, 0.0), (math.sqrt(3.0), 3, 1.0)]
    for *_, e, lo, exact, up in rows:
        assert exact == pytest.approx(gaussian_delta(e, 1.0), rel=1e-12) and lo <= exact <= up
    assert rows[1][4] == pytest.approx(0.126936, abs=1e-6)  # dp_accounting's test value


def test_monte_carlo_pld_rows_agree_within_the_sampling_error():
    mech = SubsampledGaussianMechanism(0.8, 0.05)
    rows = bl.monte_carlo_pld_rows(mech, 10, 4000, np.random.default_rng(1))
    assert [(d, e) for d, e, *_ in rows] == [(d, e) for d in ("remove", "add") for e in (0.25, 0.5, 1.0)]
    for _, _, est, se, lo, up in rows:
        assert se >= 0 and lo - 5 * se - 3 / 4000 <= est <= up + 5 * se + 3 / 4000
    again = bl.monte_carlo_pld_rows(mech, 10, 4000, np.random.default_rng(1))
    assert again == rows  # deterministic given the generator


def test_dp_accounting_comparison_rows_agree_with_dp_accounting():
    pytest.importorskip("dp_accounting")
    (row,) = bl.dp_accounting_comparison_rows([(LaplaceMechanism(2.0), 20)], 1e-5, 1e-4)
    name, T, lo, up, theirs, r1, r2 = row
    assert name == "Laplace b=2" and T == 20
    assert abs(up - theirs) / theirs < 1e-3 and lo <= theirs * (1 + 1e-9) and abs(r1 - r2) / r2 < 1e-9


def test_mnist_dpsgd_rows_reproduce_the_published_epsilon():
    # TensorFlow Privacy's MNIST tutorial: noise 1.1, 60 epochs, q = 256/60000 -> eps = 3.01 at delta 1e-5
    (row,) = bl.mnist_dpsgd_rows(grid=1e-3, settings=[(1.1, 60, 3.01)])
    assert row["steps"] == math.ceil(60 / (256 / 60000)) and row["published"] == 3.01
    assert abs(row["rdp_classic"] - 3.01) <= 0.005
    assert row["pld_lower"] <= row["pld"] <= row["rdp"] <= row["rdp_integer"] * (1 + 1e-12)
    assert row["gdp"] < row["pld"]  # the CLT approximation lies below the certified bound here


def test_epsilon_against_steps_grow_with_the_steps():
    curves, t_pld = bl.epsilon_against_steps(SubsampledGaussianMechanism(1.0, 0.05), [10, 100], 1e-5, 1e-3)
    assert set(curves) == {"pld", "pld_lower", "rdp", "rdp-old", "gdp"} and t_pld > 0
    for k in ("pld", "rdp", "rdp-old"):
        assert curves[k][0] < curves[k][1]
    assert all(lo <= up <= r for lo, up, r in zip(curves["pld_lower"], curves["pld"], curves["rdp"]))


def test_schedule_comparison_rows_follow_the_schedules():
    assert bl.SAMPLING_SCHEDULES["left"](10**4) == pytest.approx(0.004)
    assert bl.SAMPLING_SCHEDULES["right"](10**4) == pytest.approx(0.1 * math.log(10**4) / 10**4)
    out = bl.schedule_comparison_rows([200, 1000], rdp=False)
    assert [r["m"] for r in out["left"]] == [200, 1000] and [r["m"] for r in out["mid_b"]] == [1000]
    assert all(bl.eeai_contains_truth(r) for r in out["left"] + out["mid_a"])
    assert "rdp" not in out["left"][0] and out["mid_b"][0]["truth_lower"] <= out["mid_b"][0]["truth_upper"]


def test_prv_work_rows_grid_grows_as_eps_error_shrinks():
    pytest.importorskip("prv_accountant")
    rows = bl.prv_work_rows([1000], [0.1, 0.2])
    assert [(r["m"], r["eps_error"]) for r in rows] == [(1000, 0.1), (10000, 0.1), (10000, 0.2)]
    assert rows[1]["grid points"] > rows[2]["grid points"] and rows[1]["grid points"] > rows[0]["grid points"]
    assert all(r["seconds"] > 0 and r["PRV ε"] > 0 for r in rows)


def test_profile_check_against_mpmath_and_erratum_means():
    rows, worst = truth.subsampled_gaussian_profile_check(SubsampledGaussianMechanism(1.0, 0.1), 1.0, 0.1, 2)
    assert [(d, round(e, 12)) for d, e, *_ in rows] == [
        ("remove", -0.2),
        ("remove", 2.0),
        ("add", -0.2),
        ("add", round(-0.9 * math.log1p(-0.1), 12)),
    ]
    assert worst < 1e-9 and all(o > 0 and r > 0 for *_, o, r in rows)
    with pytest.raises(DPValueError):
        truth.subsampled_gaussian_profile_check(SubsampledGaussianMechanism(1.0, 0.1), 1.0, 0.1, 0)
    # E_Q[dP/dQ] = 1 for the law Q of the pair; the law printed in the paper (weights swapped) breaks it
    for s, p in ((0.8, 0.01), (1.5, 0.2)):
        ok, typo = truth.subsampled_gaussian_erratum_means(s, p)
        assert abs(ok - 1) < 1e-9 and abs(typo - 1) > 1e-3
