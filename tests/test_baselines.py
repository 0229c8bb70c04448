"""The chapters' baselines: CLT mu (closed form), RDP (peer library), the shared log-space helper."""

import math

import dp_accounting
import numpy as np
import pytest

from dputils.baselines import clt_mu, subsampled_gaussian_rdp_epsilon
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, SubsampledGaussianMechanism
from dputils.numerics import log_diff_exp


def test_clt_mu_closed_form_and_refusals():
    # Bu et al.: mu = p sqrt(m (e^{1/sigma^2} - 1)); at sigma = 1, p = 0.05, m = 200: 0.05 sqrt(200 (e - 1))
    assert clt_mu(1.0, 0.05, 200) == pytest.approx(0.05 * math.sqrt(200 * (math.e - 1)), rel=1e-14)
    for bad in (dict(sigma=0.0, p=0.1, m=10), dict(sigma=1.0, p=1.5, m=10), dict(sigma=1.0, p=0.1, m=0)):
        with pytest.raises(DPValueError):
            clt_mu(**bad)


def test_subsampled_gaussian_rdp_epsilon_is_at_most_dp_accountings_and_close_to_it():
    orders = list(np.linspace(1.01, 8, 300)) + list(np.arange(8.5, 256.5, 0.5))
    for sigma, p, m in ((0.8, 0.01, 1000), (1.0, 0.05, 200), (1.5, 1.0, 30)):
        acc = dp_accounting.rdp.RdpAccountant(orders)
        ev = dp_accounting.GaussianDpEvent(sigma)
        acc.compose(dp_accounting.PoissonSampledDpEvent(p, ev) if p < 1 else ev, m)
        theirs = acc.get_epsilon(1e-5)
        ours = subsampled_gaussian_rdp_epsilon(sigma, p, m, 1e-5)
        assert ours <= theirs * (1 + 1e-9)
        assert ours == pytest.approx(theirs, rel=2e-3)


def test_log_diff_exp_against_direct_evaluation_and_edges():
    a = np.array([0.0, -1.0, -700.0, 5.0])
    b = np.array([-1.0, -30.0, -701.0, 5.0 - 1e-12])
    direct = [math.log(math.exp(x) - math.exp(y)) for x, y in zip(a[:2], b[:2])]
    out = log_diff_exp(a, b)
    assert out[:2] == pytest.approx(direct, rel=1e-14)
    assert out[2] == pytest.approx(-700.0 + math.log(1 - math.exp(-1.0)), rel=1e-14)  # no underflow
    assert out[3] == pytest.approx(5.0 + math.log(1e-12), rel=1e-3)
    assert np.isneginf(log_diff_exp(1.0, 1.0)) and np.isneginf(log_diff_exp(1.0, 2.0))
    assert np.isneginf(log_diff_exp(-np.inf, -np.inf))


def test_eeai_contains_truth_contract():
    from dputils.baselines import eeai_contains_truth

    row = {"truth": 1.0, "truth_err": 1e-7, "ew_low": 0.9, "ew_upp": math.inf}
    assert eeai_contains_truth(row)
    assert not eeai_contains_truth({**row, "truth_err": 1e-4})  # the truth is not converged
    assert not eeai_contains_truth({**row, "ew_low": 1.01})  # the lower end above the truth
    assert not eeai_contains_truth({**row, "ew_upp": 0.99})  # the upper end below it
    assert eeai_contains_truth({**row, "ew_low": 1.0 + 5e-8})  # within the truth's own error


def test_prv_epsilon_brackets_the_contour_integral_truth_and_its_grid_grows_with_m():
    from dputils.baselines import prv_epsilon
    from dputils.truth import composition_epsilon

    low, est, up, grid = prv_epsilon(1.0, 0.05, 200, 1e-5, 0.05)
    truth, _ = composition_epsilon([(SubsampledGaussianMechanism(1.0, 0.05), 200)], 1e-5)
    assert low <= truth <= up and abs(est - truth) < 0.05
    assert prv_epsilon(1.0, 0.05, 2000, 1e-5, 0.05)[3] > grid > 0
    with pytest.raises(DPValueError):
        prv_epsilon(1.0, 0.05, 200, 1e-5, 0.0)


def test_dp_accounting_pld_epsilon_against_closed_forms():
    from dputils.baselines import dp_accounting_pld_epsilon
    from dputils.curves import gdp_epsilon
    from dputils.mechanisms import LaplaceMechanism

    # the Gaussian mechanism: mu = sqrt(m) / sigma, analytic GDP epsilon; the PLD grid is pessimistic
    ours = dp_accounting_pld_epsilon(GaussianMechanism(2.0), 4, 1e-5)
    exact = gdp_epsilon(1e-5, 1.0)
    assert exact - 1e-6 <= ours <= exact + 1e-3
    # the Laplace mechanism of scale 2 is pure (1/2)-DP: delta(1/2) = 0, and delta(eps) > 0 below it
    lap = dp_accounting_pld_epsilon(LaplaceMechanism(2.0), 1, 1e-9)
    assert 0.4 < lap <= 0.5 + 1e-3
    with pytest.raises(DPValueError):
        dp_accounting_pld_epsilon(object(), 1, 1e-5)


def test_edgeworth_work_is_flat_in_m():
    from dputils.accountants.edgeworth import edgeworth_work

    mech = SubsampledGaussianMechanism(0.8, 0.01)
    s1, n1 = edgeworth_work(mech, 1000, 0.1)
    s2, n2 = edgeworth_work(mech, 10**7, 0.1)
    _, n3 = edgeworth_work(mech, 10**6, 0.1, eeai=True)
    assert n1 == n2 > 0 and n1 <= n3 <= n1 + 2 and s1 > 0 and s2 > 0


def test_spa_against_rows_brackets_the_truth():
    from dputils.baselines import spa_against_rows
    from dputils.truth import composition_epsilon

    mech = SubsampledGaussianMechanism(1.0, 0.05)
    truth, _ = composition_epsilon([(mech, 400)], 1e-5)
    (row,) = spa_against_rows(lambda m: mech, [{"m": 400, "truth": truth, "ew2": truth + 0.1}], 1e-5)
    assert row["spa_lower"] - 1e-6 <= truth <= row["spa_upper"] + 1e-6
    assert abs(row["spa_err"]) < 0.05 and row["ew2_err"] == pytest.approx(0.1)
    assert row["spa_err"] == row["spa"] - truth and row["delta"] == 1e-5 and row["m"] == 400


def test_msd_order3_epsilon_against_the_contour_integral_truth():
    # far from the phase transition (n = 4500, sigma 2, q 0.01, delta 1e-15) the order-3 expansion is accurate
    # to ~2e-8 relative (the ICML paper's Fig. 3); the truth is an unrelated algorithm (Bromwich inversion)
    from dputils.accountants.spa import msd_order3, msd_order3_epsilon, spa_epsilon
    from dputils.truth import truth_epsilon

    led = [(SubsampledGaussianMechanism(2.0, 0.01).pair("remove"), 4500)]
    e_clt, p = spa_epsilon(led, 1e-15, "clt")
    ours = msd_order3_epsilon(led, 1e-15, p.t)
    assert abs(ours / truth_epsilon(led, 1e-15) - 1) < 1e-6
    eps, log_d = msd_order3(led, p.t)  # the point on the path at the SP-CLT tilt: epsilon of eq. 50
    assert eps == pytest.approx(e_clt, rel=1e-8) and log_d < 0
    with pytest.raises(DPValueError):
        msd_order3_epsilon(led, 0.0, p.t)


def test_spa_work_counts_do_not_grow_with_n():
    from dputils.accountants.spa import spa_work

    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("remove")
    rows = [spa_work(pair, n, 1e-5) for n in (1000, 10**7)]
    evals = [r["delta_evals"] + r["epsilon_evals"] for r in rows]
    assert max(evals) <= 2 * min(evals) and min(evals) > 0
    assert set(rows[0]) == {"n", "delta_evals", "delta_ms", "epsilon_evals", "epsilon_ms", "eps"}
    assert rows[1]["eps"] > rows[0]["eps"] > 0 and rows[0]["delta_ms"] > 0


def test_prv_delta_brackets_the_truth_where_delta_is_large():
    from dputils.baselines import prv_delta
    from dputils.truth import truth_delta

    pair = SubsampledGaussianMechanism(1.0, 0.05).pair("remove")
    (low, est, up), (low2, _, _) = prv_delta(1.0, 0.05, 200, [1.0, 2.0], eps_error=0.05, delta_error=1e-10)
    truth = truth_delta([(pair, 200)], 1.0)
    assert low <= truth <= up and abs(est / truth - 1) < 0.05 and low2 < low


def test_spa_gaussian_asymptotics_approach_their_limits():
    # Prop. 8: sqrt(n) t_n -> tau; Thm. 7: err_SP sqrt(n) -> C_r (both at rate ~1/sqrt(n))
    from dputils.accountants.spa import spa_gaussian_asymptotics, spa_tilt_gain

    a = spa_gaussian_asymptotics(3.0, 10**6)
    assert a["tau"] == pytest.approx((3 + math.sqrt(13)) / 2, rel=1e-15)
    assert abs(a["sqrt_n_t"] / a["tau"] - 1) < 1e-3 and abs(a["err_sqrt_n"] / a["C_r"] - 1) < 0.05
    b = spa_gaussian_asymptotics(3.0, 10**4)
    assert abs(b["sqrt_n_t"] - b["tau"]) > abs(a["sqrt_n_t"] - a["tau"])  # closer at larger n
    # eq. 90: the gain at the limiting delta Q(r / sqrt v) is e^{(1 - r tau)/2} (v = 1)
    from scipy import stats

    assert spa_tilt_gain(stats.norm.sf(3.0)) == pytest.approx(math.exp((1 - 3 * a["tau"]) / 2), rel=1e-12)


def test_pld_comparison_row_brackets_the_contour_integral_truth():
    # where both apply, the PLD bracket of pld_comparison_row contains the contour-integral truth
    from dputils.baselines import pld_comparison_row
    from dputils.truth import composition_epsilon

    mech = SubsampledGaussianMechanism(1.0, 0.05)
    row = pld_comparison_row(mech, 200, 1e-5, discretization=1e-3)
    truth, _ = composition_epsilon([(mech, 200)], 1e-5)
    assert row["truth_lower"] <= truth <= row["truth_upper"]
    assert "rdp" not in row and row["ew_low"] <= row["truth_upper"] and row["m"] == 200


def test_dp_accounting_event_epsilons_against_our_rdp_and_the_gdp_closed_form():
    # RDP on the same integer orders: dp_accounting's and ours agree to rounding (two implementations of the
    # same formula); the Gaussian mechanism composed 9 times at sigma 3 is exactly 1-GDP, so the PLD answer
    # (a pessimistic discretization) lies at or above the closed form and close to it
    from dputils.accountants import RDPAccountant
    from dputils.baselines import dp_accounting_event_epsilons
    from dputils.curves import gdp_epsilon

    m = SubsampledGaussianMechanism(1.0, 0.02)
    _, rdp = dp_accounting_event_epsilons(m, 200, 1e-5, range(2, 65))
    ours = RDPAccountant(orders=range(2, 65), refine=False).compose(m, 200).get_epsilon(1e-5).value
    assert rdp == pytest.approx(ours, rel=1e-9)
    pld, _ = dp_accounting_event_epsilons(GaussianMechanism(3.0), 9, 1e-5, range(2, 65))
    exact = gdp_epsilon(1e-5, 1.0)
    assert exact - 1e-9 <= pld <= exact * 1.01
    with pytest.raises(DPValueError):
        dp_accounting_event_epsilons(m, 0, 1e-5, range(2, 65))


def test_former_names_warn_and_point_at_the_moved_functions():
    import dputils.baselines as bl
    from dputils.accountants import edgeworth, spa

    moved = {
        "rdp_epsilon": subsampled_gaussian_rdp_epsilon,
        "msd_order3": spa.msd_order3,
        "msd_order3_epsilon": spa.msd_order3_epsilon,
        "spa_work": spa.spa_work,
        "spa_gaussian_asymptotics": spa.spa_gaussian_asymptotics,
        "spa_tilt_gain": spa.spa_tilt_gain,
        "edgeworth_work": edgeworth.edgeworth_work,
    }
    for old, new in moved.items():
        with pytest.warns(DeprecationWarning, match=f"baselines.{old} is deprecated"):
            assert getattr(bl, old) is new
    with pytest.raises(AttributeError):
        bl.no_such_name  # noqa: B018
