"""Library functions that replaced computations of the gauss_audit chapter's cells, each against something
independent of it: mpmath quadrature, closed forms (mu-GDP, the analytic Gaussian mechanism), numbers printed in
the paper (Corollary 1 of Agrawal et al.), the exact Binomial mixture, or, for the pure refactors, their contract
(shapes, ordering, errors)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dputils import curves
from dputils.audit import gaussian_pair, model1, simulate, whitebox
from dputils.errors import DPValueError
from dputils.truth import gaussian_pair_hockey_stick_mpmath


def test_delta_crosscheck_draws_the_documented_pairs_and_agrees_with_mpmath():
    x = gaussian_pair.delta_crosscheck(np.random.default_rng(3), n_pairs=2, eps=(0.0, 2.0))
    assert all(v.shape == (4,) for v in x.values())
    # the first pair as documented: means from N(0, 2^2), then sds from U(0.5, 2.5)
    rng = np.random.default_rng(3)
    mp_, mq = rng.normal(0, 2, 2)
    sp, sq = rng.uniform(0.5, 2.5, 2)
    assert x["mpmath"][1] == gaussian_pair_hockey_stick_mpmath(2.0, mp_, sp, mq, sq)
    assert np.allclose(x["ours"], x["mpmath"], rtol=1e-8, atol=1e-14)
    assert np.allclose(x["scalar"], x["mpmath"], rtol=1e-8, atol=1e-14)
    with pytest.raises(DPValueError):
        gaussian_pair.delta_crosscheck(np.random.default_rng(0), n_pairs=0)


def test_pooled_surrogate_is_the_mu_gdp_pair():
    # pooled sds s: N(0, s^2) vs N(sqrt(T) q, s^2) is mu-GDP with mu = sqrt(T) q / s (closed form in curves)
    T, q, sigma, delta = 50, 0.08192, 0.7409, 1e-5
    s = math.sqrt((sigma**2 + sigma**2 + q * (1 - q)) / 2)
    e = model1.gaussian_score_epsilon(delta, T, q, sigma, pooled=True)
    assert e == pytest.approx(curves.gdp_epsilon(delta, math.sqrt(T) * q / s), rel=1e-6)
    # unequal variances add a quadratic term to the privacy loss: the unpooled pair is less private here
    assert model1.gaussian_score_epsilon(delta, T, q, sigma) > e


def test_gaussian_surrogate_approaches_the_exact_score_pair_at_large_T():
    # the exact Binomial-mixture pair (root finding on the monotone privacy loss) is an independent computation
    e_gauss = model1.gaussian_score_epsilon(1e-5, 2500, 0.0819, 2.6245)
    e_exact = model1.exact_score_epsilon(1e-5, 2500, 0.0819, 2.6245)
    assert abs(e_gauss - e_exact) < 2e-3
    assert e_exact == pytest.approx(7.5164, abs=1e-3)  # our notes' independent integration


def test_edgeworth_deviations_reproduce_the_papers_corollary_1():
    d = model1.edgeworth_deviations(2500, 0.0819, 2.6245, x0s=(3, 4))
    assert d["prefactor"] == pytest.approx(1.14e-5, rel=5e-3)  # the paper's Corollary 1
    assert d["lead"] == pytest.approx(d["prefactor"] / math.sqrt(2 * math.pi), rel=1e-12)
    assert [r["x0"] for r in d["tails"]] == [3, 4]
    # the paper's table: leading term 4.04e-7 at x0 = 3 and 2.29e-8 at x0 = 4 (three digits printed)
    assert d["tails"][0]["leading term"] == pytest.approx(4.04e-7, rel=5e-3)
    assert d["tails"][1]["leading term"] == pytest.approx(2.29e-8, rel=5e-3)
    phi3 = stats.norm.pdf(3) * 8
    assert d["tails"][0]["leading term"] == pytest.approx(d["prefactor"] * phi3, rel=1e-12)
    assert abs(d["exact"] / d["lead"] - 1) < 0.02  # Theorem 1 on the exact mixture


def test_kolmogorov_rates_follow_theorem_1():
    r = model1.kolmogorov_rates([1000, 4000, 16000], q0=0.0819, sigma=1.0, T0=2500)
    assert np.allclose(r["q_scaled"], 0.0819 * np.sqrt(2500 / np.array([1000, 4000, 16000])))
    assert np.allclose(r["exact_fixed"], r["lead_fixed"], rtol=1e-3)
    assert np.allclose(r["exact_scaled"], r["lead_scaled"], rtol=1e-3)
    assert abs(r["slope_fixed"] + 0.5) < 0.01  # T^{-1/2} with q fixed
    # q ~ T^{-1/2}: the distance falls like q(1-q)|1-2q| / sqrt(T), nearly 1/T (the slope of the leading terms,
    # which tends to -1 as q -> 0; on this short grid it is about -0.84)
    lead_slope = np.polyfit(np.log([1000, 4000, 16000]), np.log(r["lead_scaled"]), 1)[0]
    assert abs(r["slope_scaled"] - lead_slope) < 0.01 and r["slope_scaled"] < -0.8


def test_budget_curve_audits_the_whole_run_once_at_its_own_size():
    i, o = model1.simulate_scores(300, 200, 0.1, 1.3, rng=np.random.default_rng(1))
    assert len(i) + len(o) == 300
    kw = dict(delta=1e-5, alpha=0.05, n_bootstrap=50, seed=4)
    meth = ("gauss-bonferroni", "steinke")
    budgets, curve = simulate.budget_curve(i, o, [100, 300, 1000], 2, meth, **kw)
    assert budgets == [100, 300] and all(v.shape == (2,) for v in curve.values())
    sub = simulate.subsample_curve(i, o, [100], 2, meth, **kw)
    whole = simulate.audit_methods(i, o, meth, 1e-5, 0.05, 50, 4)
    for k in meth:
        assert curve[k][0] == sub[k][0] and curve[k][1] == whole[k]
    given = {k: -1.0 for k in meth}
    _, curve2 = simulate.budget_curve(i, o, [100, 300], 2, meth, whole=given, **kw)
    assert all(curve2[k][1] == -1.0 for k in meth)
    budgets3, curve3 = simulate.budget_curve(i, o, [100, 200], 2, meth, **kw)
    assert budgets3 == [100, 200] and all(v.shape == (2,) for v in curve3.values())


def _fake_run(rng, m=4000, T=400, q=0.05, sigma=1.5, clip=1.0, drift=0.3):
    i, o = model1.simulate_scores(m, T, q, sigma, clip, rng=rng)
    coords = rng.permutation(10 * m)[:m]
    return whitebox.WhiteboxRun(
        in_sums=(i + drift) * math.sqrt(T),
        out_sums=(o + drift) * math.sqrt(T),
        in_counts=np.zeros(len(i)),
        in_coords=coords[: len(i)],
        out_coords=coords[len(i) :],
        T=T,
        q=q,
        sigma=sigma,
        clip=clip,
        delta=1e-5,
        epsilon_theory=1.0,
        accountant="test",
        steps_per_second=1.0,
        train_seconds=1.0,
        device="cpu",
        n_params=10 * m,
    )


def test_model1_fit_standardises_model_1_scores():
    run = _fake_run(np.random.default_rng(2))
    fit = whitebox.model1_fit(run)
    assert fit["drift"] == pytest.approx(0.3, abs=4 * 1.5 / math.sqrt(len(run.out_sums)))
    th = model1.score_pair_theta(run.T, run.q, run.sigma, run.clip)  # Proposition 1
    assert fit["in_model"][1] == pytest.approx(th["sigma_in"], rel=1e-12)
    assert fit["in_model"][0] - fit["drift"] == pytest.approx(th["mu_in"], rel=1e-12)
    assert fit["out_model"] == (fit["drift"], run.sigma * run.clip)
    z = fit["z_ordered"]
    assert z.size == len(run.in_sums) + len(run.out_sums)
    # scores drawn from Model 1 itself standardise to about N(0, 1) (KS test at 1e-3)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    # ordered by parameter coordinate: the smallest coordinate's canary comes first
    coords = np.concatenate([run.in_coords, run.out_coords])
    first = int(np.argmin(coords))
    scores = np.concatenate([run.in_scores, run.out_scores])
    is_in = first < len(run.in_sums)
    mod = fit["in_model"] if is_in else fit["out_model"]
    assert z[0] == pytest.approx((scores[first] - mod[0]) / mod[1], rel=1e-12)
    with pytest.raises(DPValueError):
        whitebox.model1_fit("not a run")
