"""Tests of dputils.audit: Gaussian-pair profile, the Gaussian auditor, the one-run baselines, Model 1, CLI.

References are independent of the code under test: mpmath quadrature at 30 digits, the foundation's
closed-form mu-GDP, exact binomial sums, numbers from the paper
and the team's note (anchors marked [D] in seed000-gauss-audit.md), Monte Carlo and the dp_accounting PLD.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dputils.audit import (
    andrew_epsilon,
    andrew_statistic,
    bonferroni_box,
    delta_pair,
    epsilon_of_theta,
    epsilon_pair,
    fdp_epsilon,
    gauss_audit,
    log_delta_directed,
    model1,
    steinke_epsilon,
    steinke_p_value,
    threshold_audit,
)
from dputils.audit.gauss import _M, bootstrap_ellipsoid
from dputils.audit.onerun import fdp_margin, gaussian_mu_for
from dputils.errors import DPValueError

mp.mp.dps = 30


def _mp_hockey(eps, mp_, sp, mq, sq):
    """sup_S P(S) - e^eps Q(S) = integral of (p - e^eps q)_+ by mpmath quadrature, split at the roots."""
    eps, mp_, sp, mq, sq = (mp.mpf(x) for x in (eps, mp_, sp, mq, sq))

    def pdf(x, m, s):
        return mp.exp(-((x - m) ** 2) / (2 * s * s)) / (s * mp.sqrt(2 * mp.pi))

    f = lambda x: max(pdf(x, mp_, sp) - mp.exp(eps) * pdf(x, mq, sq), 0)  # noqa: E731
    # roots of the quadratic privacy loss - eps, as break points for the quadrature
    A = (1 / sq**2 - 1 / sp**2) / 2
    B = mp_ / sp**2 - mq / sq**2
    c = (mq**2 / sq**2 - mp_**2 / sp**2) / 2 + mp.log(sq / sp) - eps
    pts = [-mp.inf]
    if abs(A) > 1e-25:
        d = B * B - 4 * A * c
        if d > 0:
            pts += sorted([(-B - mp.sqrt(d)) / (2 * A), (-B + mp.sqrt(d)) / (2 * A)])
    elif B != 0:
        pts.append(-c / B)
    pts.append(mp.inf)
    return mp.quad(f, pts)


# --- Gaussian-pair profile -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_pair_delta_matches_mpmath_quadrature(seed):
    rng = np.random.default_rng(seed)
    mp_, mq = rng.normal(0, 2, 2)
    sp, sq = rng.uniform(0.5, 2.5, 2)
    for eps in (0.0, 0.5, 2.0):
        ref = float(_mp_hockey(eps, mp_, sp, mq, sq))
        got = float(np.exp(log_delta_directed(eps, mp_, sp, mq, sq)))
        assert got == pytest.approx(ref, rel=1e-8, abs=1e-14)  # tolerance: 1e-8 relative


def test_equal_variance_is_gdp_closed_form():
    from scipy.special import ndtr

    for mu in (0.3, 1.5603, 4.0):
        eps = np.linspace(0, 8, 9)
        ref = ndtr(-eps / mu + mu / 2) - np.exp(eps) * ndtr(-eps / mu - mu / 2)  # Dong-Roth-Su Cor. 2.13
        got = delta_pair(eps, 0.0, 1.0, mu, 1.0)
        assert np.allclose(got, ref, rtol=1e-9, atol=1e-300)
    # continuity as the variances merge
    e1 = epsilon_pair(1e-5, 0.0, 1.0, 1.5, 1.0)
    e2 = epsilon_pair(1e-5, 0.0, 1.0, 1.5, 1.0 + 1e-9)
    assert abs(e1 - e2) < 1e-6


def test_identical_pair_and_total_variation():
    assert epsilon_pair(1e-5, 0.3, 1.2, 0.3, 1.2) == 0.0
    # delta(0) is the total-variation distance: integral of |p - q| / 2 (mpmath)
    p = lambda x: mp.npdf(x, 0, 1)  # noqa: E731
    q = lambda x: mp.npdf(x, 0.7, 1.6)  # noqa: E731
    # break points at the two crossings of the densities (roots of the quadratic log-ratio)
    A, B = 0.5 * (1 / 1.6**2 - 1), -0.7 / 1.6**2
    c = 0.5 * 0.7**2 / 1.6**2 + math.log(1.6)
    roots = sorted(np.roots([A, B, c]).real)
    tv = float(mp.quad(lambda x: abs(p(x) - q(x)), [-mp.inf, *roots, mp.inf]) / 2)
    assert float(delta_pair(0.0, 0.0, 1.0, 0.7, 1.6)) == pytest.approx(tv, rel=1e-8)


def test_note_anchors_for_epsilon_of_the_paper_pair():
    # note, section 7.1 [D]: OUT N(0, 2.6245^2), IN N(4.095, 2.63879^2), delta 1e-5; tolerance 1e-3
    assert epsilon_pair(1e-5, 0, 2.6245, 4.095, 2.63879) == pytest.approx(7.5154, abs=1e-3)
    assert epsilon_pair(1e-5, 0, 2.6245, 4.095, 2.63879, "out_in") == pytest.approx(7.2232, abs=1e-3)
    assert epsilon_pair(1e-5, 0, 1.0, 1.5603, 1.0) == pytest.approx(7.3925, abs=1e-3)


def test_epsilon_round_trip_and_monotonicity():
    rng = np.random.default_rng(3)
    mo, so, mi, si = 0.0, rng.uniform(1, 2, 50), rng.uniform(0.5, 5, 50), rng.uniform(1, 2, 50)
    e = epsilon_pair(1e-5, mo, so, mi, si)
    d = delta_pair(e, mo, so, mi, si)
    pos = e > 0
    assert np.allclose(d[pos], 1e-5, rtol=1e-6)
    # eps decreasing in delta, increasing in the mean gap
    assert np.all(epsilon_pair(1e-3, mo, so, mi, si) <= e + 1e-12)
    assert np.all(epsilon_pair(1e-5, mo, so, mi + 0.1, si) >= e - 1e-12)


# --- the Gaussian auditor ---------------------------------------------------------------------------


def test_bonferroni_box_constants():
    # note section 2.7 [D]: alpha 0.05, n 2500: t = 2.4995, chi2 quantiles 2325.92 and 2679.07
    rng = np.random.default_rng(0)
    x, y = rng.normal(1, 2, 2500), rng.normal(0, 2, 2500)
    box = bonferroni_box(x, y, 0.05)
    s = x.std(ddof=1)
    assert box["upper"][0] - x.mean() == pytest.approx(2.4995 * s / 50, rel=1e-4)
    assert box["upper"][1] == pytest.approx(math.sqrt(2499 * s * s / 2325.92), rel=1e-5)
    assert box["lower"][1] == pytest.approx(math.sqrt(2499 * s * s / 2679.07), rel=1e-5)


@pytest.mark.parametrize("region", ["ellipsoid", "bonferroni"])
def test_gauss_audit_infimum_is_reliable(region):
    i, o = model1.simulate_scores(1000, 2500, 0.0819, 2.6245, rng=11)
    res = gauss_audit(i, o, 1e-5, 0.05, region=region, n_bootstrap=500, seed=1)
    lb = res.epsilon_lower
    assert 0 < lb <= res.details["epsilon_point_estimate"]
    # an independent dense random search over the same region never finds a smaller value
    rng = np.random.default_rng(99)
    if region == "ellipsoid":
        ell = bootstrap_ellipsoid(i, o, 0.05, 500, np.random.default_rng(1))
        # the auditor draws the bootstrap from its own generator seeded with 1: same ellipsoid
        assert np.allclose(ell["cov"], res.details["cov"])
        S3, c3 = _M @ ell["cov"] @ _M.T, _M @ ell["center"]
        L = np.linalg.cholesky(S3)
        U = rng.standard_normal((40000, 3))
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        rad = np.sqrt(rng.uniform(0.3, 1, (40000, 1)))
        P = c3 + math.sqrt(ell["radius2"]) * rad * (U @ L.T)
        argmin = np.array([res.details[k] for k in ("argmin_d", "argmin_sigma_out", "argmin_sigma_in")])
        dist = (argmin - c3) @ np.linalg.solve(S3, argmin - c3)
        assert dist <= ell["radius2"] * (1 + 1e-6)  # the minimiser lies inside the region
    else:
        lo, hi = res.details["box_lower"], res.details["box_upper"]
        T4 = rng.uniform(lo, hi, (40000, 4))
        P = T4 @ _M.T
    th = np.stack([P[:, 0], P[:, 2], np.zeros(len(P)), P[:, 1]], axis=1)  # back to (mu_in, s_in, mu_out, s_out)
    dense = epsilon_of_theta(1e-5, th)
    assert np.min(dense) >= lb - 1e-6
    # the value at the minimiser, recomputed with the foundation's scalar implementation (brentq)
    curves = pytest.importorskip("dputils.curves")
    from scipy.optimize import brentq

    d, so, si = (res.details[k] for k in ("argmin_d", "argmin_sigma_out", "argmin_sigma_in"))
    f = lambda e: (
        max(curves.gaussian_log_delta(e, d, si, 0.0, so), curves.gaussian_log_delta(e, 0.0, so, d, si)) - math.log(1e-5)
    )  # noqa: E731
    assert brentq(f, 0.0, 50.0, xtol=1e-10) == pytest.approx(lb, abs=1e-6)


def test_gauss_audit_null_scores_give_zero_mostly():
    zeros = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        i, o = rng.normal(0, 1, 500), rng.normal(0, 1, 500)
        zeros += gauss_audit(i, o, 1e-5, 0.05, region="bonferroni").epsilon_lower == 0.0
    assert zeros >= 8  # P[nonzero] <= alpha = 0.05 per rep; 3+ nonzero of 10 has prob. < 0.012


def test_gauss_audit_headline_model1():
    # note section 7.3: Model-1 at the CIFAR-10 settings, m = 5000: ellipsoid 6.75 +- 0.3, Bonferroni 6.46 +- 0.3
    i, o = model1.simulate_scores(5000, 2500, 0.0819, 2.6245, rng=2024)
    e = gauss_audit(i, o, 1e-5, 0.05, n_bootstrap=1000).epsilon_lower
    b = gauss_audit(i, o, 1e-5, 0.05, region="bonferroni").epsilon_lower
    assert 6.3 < e < 7.3 and 6.0 < b < 7.0 and b <= e + 0.2
    assert e < 7.5164  # below the exact score-pair ceiling


# --- one-run baselines ------------------------------------------------------------------------------


def test_steinke_anchor_and_binomial_tail():
    # note section 5.15 [D]: m 1000, r = v = 600, delta 1e-5, alpha 0.05 -> 5.270 (5.297 at delta 0)
    assert steinke_epsilon(1000, 600, 600, 1e-5, 0.05) == pytest.approx(5.270, abs=2e-3)
    assert steinke_epsilon(1000, 600, 600, 0.0, 0.05) == pytest.approx(5.297, abs=2e-3)
    # at delta = 0 the p-value is the binomial tail, summed exactly with mpmath
    r, v, eps = 300, 200, 0.5
    p = mp.e**eps / (1 + mp.e**eps)
    tail = mp.fsum(mp.binomial(r, k) * p**k * (1 - p) ** (r - k) for k in range(v, r + 1))
    assert steinke_p_value(1000, r, v, eps, 0.0) == pytest.approx(float(tail), rel=1e-9)
    ps = [steinke_p_value(1000, r, v, e, 1e-5) for e in (0.1, 0.5, 1.0, 2.0)]
    assert all(a <= b for a, b in zip(ps, ps[1:]))
    # the 2 m delta floor: with delta > 0 the p-value is at least 2 m delta Pr[W < v] / v
    assert (
        steinke_p_value(1000, 50, 50, 20.0, 1e-3)
        >= 2 * 1000 * 1e-3 / 50 * (1 - stats.binom.pmf(50, 50, 1 / (1 + math.exp(-20.0)))) * 0.999
    )


def test_fdp_gaussian_mu_and_monotonicity():
    curves = pytest.importorskip("dputils.curves")
    for eps in (0.5, 2.0, 8.0):
        assert gaussian_mu_for(eps, 1e-5) == pytest.approx(curves.gdp_mu(eps, 1e-5), rel=1e-9)
    margins = [fdp_margin(1000, 300, 280, e, 1e-5, 0.05) for e in (0.5, 1.0, 2.0, 4.0, 8.0)]
    assert all(a >= b - 1e-15 for a, b in zip(margins, margins[1:]))  # falsification gets harder with eps
    e = fdp_epsilon(1000, 300, 280, 1e-5, 0.05)
    assert fdp_margin(1000, 300, 280, e, 1e-5, 0.05) > 0 >= fdp_margin(1000, 300, 280, e + 1e-3, 1e-5, 0.05)


def _gdp_scores(m, mu, rng):
    inn = rng.random(m) < 0.5
    s = rng.standard_normal(m) + mu * inn
    return s[inn], s[~inn]


@pytest.mark.parametrize("method", ["steinke", "fdp"])
def test_threshold_audit_valid_selection_covers_true_epsilon(method):
    # exact mu-GDP scores (the DP-FTRL situation): the true epsilon is known in closed form
    curves = pytest.importorskip("dputils.curves")
    mu = 1.0
    eps_true = curves.gdp_epsilon(1e-5, mu)
    rng = np.random.default_rng(5)
    exceed = 0
    n = 30
    for _ in range(n):
        i, o = _gdp_scores(1000, mu, rng)
        exceed += (
            threshold_audit(
                i, o, 1e-5, 0.05, method=method, selection="split", seed=int(rng.integers(1 << 30))
            ).epsilon_lower
            > eps_true
        )
    # alpha = 0.05; P[Bin(30, 0.05) >= 5] = 0.016
    assert exceed <= 4


def test_threshold_audit_uncorrected_sweep_reproduces_paper_baselines():
    # note section 7.3: Steinke 3.4 +- 0.5, f-DP 4.8 +- 0.7 (repo-style uncorrected sweep, m = 5000)
    i, o = model1.simulate_scores(5000, 2500, 0.0819, 2.6245, rng=2024)
    s = threshold_audit(i, o, 1e-5, 0.05, method="steinke", selection="none").epsilon_lower
    f = threshold_audit(i, o, 1e-5, 0.05, method="fdp", selection="none").epsilon_lower
    assert 2.9 < s < 3.9 and 4.1 < f < 5.5


def test_threshold_audit_null_gives_small_bounds():
    rng = np.random.default_rng(1)
    i, o = rng.normal(0, 1, 500), rng.normal(0, 1, 500)
    assert threshold_audit(i, o, 1e-5, 0.05, method="steinke", selection="bonferroni-grid").epsilon_lower == 0.0
    assert threshold_audit(i, o, 1e-5, 0.05, method="fdp", selection="split").epsilon_lower < 0.5


# --- Andrew et al. -----------------------------------------------------------------------------------


def test_andrew_statistic_and_point_estimate():
    G = np.array([[3.0, 4.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    s = andrew_statistic(G, np.array([0, 2]))
    assert np.allclose(s, [0.6, 1 / math.sqrt(3)])
    rng = np.random.default_rng(0)
    i, o = rng.normal(2, 1, 400), rng.normal(0, 1, 400)
    res = andrew_epsilon(i, o, 1e-5)
    ref = epsilon_pair(1e-5, o.mean(), o.std(ddof=1), i.mean(), i.std(ddof=1))
    assert res.epsilon_lower == pytest.approx(ref, rel=1e-9)
    with pytest.raises(DPValueError):
        andrew_statistic(G, np.array([5]))


# --- Model 1 and convergence ---------------------------------------------------------------------------


def test_model1_direct_sampler_matches_stepwise_and_proposition1():
    T, q, sigma = 200, 0.1, 1.3
    i1, o1 = model1.simulate_scores(20000, T, q, sigma, rng=1)
    i2, o2 = model1.simulate_scores_stepwise(4000, T, q, sigma, rng=2)
    assert stats.ks_2samp(i1, i2).pvalue > 1e-3 and stats.ks_2samp(o1, o2).pvalue > 1e-3
    th = model1.score_pair_theta(T, q, sigma)
    n = i1.size
    assert abs(i1.mean() - th["mu_in"]) < 4 * th["sigma_in"] / math.sqrt(n)  # 4 standard errors
    assert abs(i1.var(ddof=1) / th["sigma_in"] ** 2 - 1) < 4 * math.sqrt(2 / n) + 0.01
    assert abs(o1.std(ddof=1) / sigma - 1) < 4 / math.sqrt(2 * o1.size)


def test_exact_score_pair_ceiling_anchor():
    # note section 3.5 [D]: exact Model-1 pair 7.5164 (OUT||IN 7.2250); tolerance 1e-3
    assert model1.exact_score_epsilon(1e-5, 2500, 0.0819, 2.6245) == pytest.approx(7.5164, abs=1e-3)
    assert model1.exact_score_epsilon(1e-5, 2500, 0.0819, 2.6245, direction="out_in") == pytest.approx(7.2250, abs=1e-3)
    # ... and the Gaussian surrogate (Proposition 1 moments) is within 2e-3 of it
    th = model1.score_pair_theta(2500, 0.0819, 2.6245)
    assert epsilon_pair(1e-5, 0, th["sigma_out"], th["mu_in"], th["sigma_in"]) == pytest.approx(7.5164, abs=2e-3)


def test_exact_score_delta_matches_quadrature_at_small_T():
    T, q, sigma = 5, 0.3, 0.8
    eps = 1.0
    got = math.exp(model1.exact_score_log_delta(eps, T, q, sigma))
    w = [mp.binomial(T, k) * mp.mpf(q) ** k * (1 - mp.mpf(q)) ** (T - k) for k in range(T + 1)]
    p = lambda x: mp.fsum(w[k] * mp.npdf(x, k / mp.sqrt(T), sigma) for k in range(T + 1))  # noqa: E731
    f = lambda x: max(p(x) - mp.e**eps * mp.npdf(x, 0, sigma), 0)  # noqa: E731
    # the kink of (p - e^eps q)_+ found independently with mpmath's root finder
    xk = mp.findroot(lambda x: p(x) - mp.e**eps * mp.npdf(x, 0, sigma), 1.0)
    ref = float(mp.quad(f, [-mp.inf, xk, mp.inf]))
    assert got == pytest.approx(ref, rel=1e-6)


def test_theorem1_and_corollary1():
    T, q, sigma = 2500, 0.0819, 2.6245
    lead = model1.kolmogorov_leading_term(T, q, sigma)
    assert lead == pytest.approx(4.55e-6, rel=5e-3)  # paper / note: 4.55e-6
    exact = model1.exact_sup_deviation(T, q, sigma)
    assert exact == pytest.approx(lead, rel=0.02)  # exact mixture vs leading Edgeworth term: 2%
    for x0, paper in ((3, 4.04e-7), (4, 2.29e-8), (5, 4.08e-10)):
        assert model1.tail_deviation_leading_term(x0, T, q, sigma) == pytest.approx(paper, rel=0.01)
        assert model1.exact_sup_deviation(T, q, sigma, x0=x0) == pytest.approx(paper, rel=0.02)


def test_theoretical_epsilon_matches_dp_accounting_anchor():
    # note section 3.5 [D]: dp_accounting PLD, T 2500, q 0.0819, sigma 2.6245 -> 7.805
    e = model1.theoretical_epsilon(2.6245, 0.0819, 2500, 1e-5, discretization=1e-3)["epsilon"]
    assert 7.79 < e < 7.83


# --- input checks and the command line --------------------------------------------------------------------


def test_bad_inputs_raise_dpvalueerror():
    x = np.ones(10)
    with pytest.raises(DPValueError, match="alpha"):
        gauss_audit(x, x + 1, 1e-5, 1.5)
    with pytest.raises(DPValueError, match="delta"):
        gauss_audit(x, x + 1, 0.0)
    with pytest.raises(DPValueError, match="in_scores"):
        gauss_audit([1.0], x)
    with pytest.raises(DPValueError, match="out_scores"):
        threshold_audit(x, [np.nan, 1.0])
    with pytest.raises(DPValueError, match="selection"):
        threshold_audit(x, x, selection="max")
    with pytest.raises(DPValueError, match="region"):
        gauss_audit(x, x + np.arange(10), region="circle")
    with pytest.raises(DPValueError, match="v"):
        steinke_p_value(10, 5, 6, 1.0, 1e-5)
    with pytest.raises(DPValueError, match="m"):
        model1.simulate_scores(0, 10, 0.1, 1.0)


def test_cli_prints_json_and_fails_cleanly(tmp_path):
    i, o = model1.simulate_scores(600, 500, 0.1, 1.5, rng=4)
    np.save(tmp_path / "in.npy", i)
    np.savetxt(tmp_path / "out.txt", o)
    import argparse

    from dputils.cli import audit as cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    for method in ("gauss", "gauss-bonferroni", "steinke", "fdp"):
        argv = [
            "--in-scores",
            str(tmp_path / "in.npy"),
            "--out-scores",
            str(tmp_path / "out.txt"),
            "--method",
            method,
            "--n-bootstrap",
            "200",
            "--claimed-epsilon",
            "100",
        ]
        out = cli.run(parser.parse_args(argv))
        assert out["method"] == method and 0 <= out["epsilon_lower"] < 100 and out["violation"] is False
        json.dumps(out, allow_nan=False)
    # one real process: prints one JSON object
    cp = subprocess.run([sys.executable, "-m", "dputils.audit", *argv], capture_output=True, text=True, check=True)
    assert json.loads(cp.stdout)["method"] == "fdp"
    cp = subprocess.run(
        [
            sys.executable,
            "-m",
            "dputils.audit",
            "--in-scores",
            str(tmp_path / "in.npy"),
            "--out-scores",
            str(tmp_path / "out.txt"),
            "--alpha",
            "2",
        ],
        capture_output=True,
        text=True,
    )
    assert cp.returncode != 0 and "alpha" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1


# --- Model-1 experiment helpers ------------------------------------------------------------------------


def test_simulate_helpers_small():
    from dputils.audit import simulate

    r = simulate.replicate(300, 500, 0.1, 1.5, 2, ("gauss-bonferroni", "steinke"), n_bootstrap=100, seed=1)
    assert set(r) == {"gauss-bonferroni", "steinke"} and r["steinke"].shape == (2,)
    ceiling = model1.exact_score_epsilon(1e-5, 500, 0.1, 1.5)
    assert np.all(r["gauss-bonferroni"] <= ceiling)
    i, o = model1.simulate_scores(400, 500, 0.1, 1.5, rng=3)
    c = simulate.subsample_curve(i, o, [50, 200], 2, ("gauss-bonferroni",), seed=2)
    assert c["gauss-bonferroni"].shape == (2,)
    cov = simulate.coverage(200, 500, 0.1, 1.5, 3, {"exact": ceiling}, methods=("gauss-bonferroni",), n_bootstrap=100)
    assert 0 <= cov["exceed"]["gauss-bonferroni>exact"] <= 1 and cov["exceed_upper95"]["gauss-bonferroni>exact"] > 0
    assert simulate.mc_upper(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-9)  # exact CP bound at k = 0


# --- up-front work estimate of the threshold audits (steinke, fdp): their sweep is quadratic in the scores ---
def test_threshold_audit_work_is_estimated_and_refused_up_front(monkeypatch):
    import time

    from dputils.audit.onerun import threshold_audit, threshold_work

    # the estimate: the swept half squared (split), all scores squared (none), linear for the Bonferroni grid
    assert threshold_work("steinke", "split", 3_000_000) == 1.5e6**2 + 50 * 1.5e6
    assert threshold_work("fdp", "none", 1000) == 1e6
    assert threshold_work("steinke", "bonferroni-grid", 10**6) == 10 * 50 * 5e5
    rng = np.random.default_rng(0)
    i, o = rng.normal(1, 1, 1_500_000), rng.normal(0, 1, 1_500_000)  # 3e6 scores: hours before, refused now
    for method in ("steinke", "fdp"):
        t0 = time.perf_counter()
        with pytest.raises(
            DPValueError,
            match=r"scores: would need about 2.25e\+12 operations .*over the limit of "
            r"1e\+12.*selection bonferroni-grid",
        ):
            threshold_audit(i, o, method=method)
        assert time.perf_counter() - t0 < 5
    # the limit is the one of dputils.resources (DPUTILS_MAX_WORK): a small audit passes under a small limit,
    # a larger one is refused by the same rule
    monkeypatch.setenv("DPUTILS_MAX_WORK", "1e6")
    assert threshold_audit(i[:500], o[:500], method="steinke").epsilon_lower > 0  # 500^2 + 50 * 500 operations
    with pytest.raises(DPValueError, match="over the limit of 1e\\+06"):
        threshold_audit(i[:1000], o[:1000], method="steinke")  # 1000^2 + 50 * 1000
    assert threshold_audit(i[:1000], o[:1000], method="steinke", selection="bonferroni-grid").epsilon_lower > 0


# --- the authors' Fig. 1(b) protocol: pooled variances, 50 subsamples ----------------------------------------


def _gdp_epsilon_mp(mu: float, delta: float) -> float:
    """Independent mu-GDP epsilon at delta (Dong-Roth-Su Cor. 2.13), by mpmath root finding."""
    with mp.workdps(40):
        f = lambda e: mp.ncdf(-e / mu + mu / 2) - mp.e**e * mp.ncdf(-e / mu - mu / 2) - delta
        lo, hi = mp.mpf(0), mp.mpf(60)  # delta(eps) decreases in eps: bisection
        for _ in range(120):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        return float(lo)


def test_pooled_epsilon_is_the_gdp_curve_of_the_pooled_sd():
    from dputils.audit import epsilon_of_theta

    # theta = (mu_in, s_in, mu_out, s_out); pooled: s = sqrt((s_in^2 + s_out^2) / 2), mu = |mu_in - mu_out| / s
    for th in ((4.095, 2.63879, 0.0, 2.6245), (1.2, 0.8, -0.3, 1.3), (3.0, 2.0, 0.5, 1.0)):
        s = math.sqrt((th[1] ** 2 + th[3] ** 2) / 2)
        want = _gdp_epsilon_mp(abs(th[0] - th[2]) / s, 1e-5)
        got = float(epsilon_of_theta(1e-5, np.array(th), pool_variance=True))
        assert got == pytest.approx(want, rel=1e-6, abs=1e-6)
    # the paper's pair: pooling lowers the unequal-variance epsilon 7.515 to 7.368 (our notes, Sec. 3.5)
    assert float(epsilon_of_theta(1e-5, np.array([4.095, 2.63879, 0.0, 2.6245]), pool_variance=True)) == pytest.approx(
        7.3684, abs=1e-3
    )


def test_paper_subsample_curve():
    from dputils.audit import simulate

    rng = np.random.default_rng(5)
    mu = 1.5  # exact Gaussian scores, equal variances: the pooled pair is the true pair
    inn = rng.random(800) < 0.5
    s = rng.standard_normal(800) + mu * inn
    i, o = s[inn], s[~inn]
    r = simulate.paper_subsample_curve(i, o, [100, 400], 2, unpooled_ms=[100], n_bootstrap=100, seed=1)
    assert list(r["m"]) == [100, 400] and np.isnan(r["gauss"][1]) and not np.isnan(r["gauss"][0])
    truth = _gdp_epsilon_mp(mu, 1e-5)
    for k in ("gauss-pooled", "steinke-uncorrected", "fdp-uncorrected"):
        assert r[k].shape == (2,) and np.all(r[k] >= 0)
    assert np.all(r["gauss-pooled"] <= truth)  # means of 95% lower bounds, under the true epsilon
    assert r["gauss-pooled"][1] > r["gauss-pooled"][0]  # more canaries, a tighter bound
    one = simulate.paper_subsample_curve(i, o, [100], 1, n_bootstrap=100, seed=2)
    again = simulate.paper_subsample_curve(i, o, [100], 1, n_bootstrap=100, seed=2)
    assert all(np.array_equal(one[k], again[k], equal_nan=True) for k in one)  # seeded
    with pytest.raises(DPValueError, match="unpooled_ms"):
        simulate.paper_subsample_curve(i, o, [100], 2, unpooled_ms=[50])
    assert simulate.PAPER_N_SUB == 50


def test_binomial_acceptance_bounds_against_direct_summation():
    """simulate.binom_accept_min / binom_accept_max against sums of math.comb terms (no scipy)."""
    import math as _m

    from dputils.audit import simulate as _sim

    def pmf(k, n, p):
        return _m.comb(n, k) * p**k * (1 - p) ** (n - k)

    for n, p0 in ((50, 0.05), (400, 0.95), (20, 0.05), (1000, 0.95)):
        pmfs = [pmf(j, n, p0) for j in range(n + 1)]
        cdf = [sum(pmfs[: k + 1]) for k in range(n + 1)]
        sf_ge = [sum(pmfs[k:]) for k in range(n + 1)]
        k_min = min(k for k in range(n + 1) if cdf[k] >= 0.01)
        k_max = max(k for k in range(n + 1) if sf_ge[k] >= 0.01)
        assert _sim.binom_accept_min(n, p0) == k_min
        assert _sim.binom_accept_max(n, p0) == k_max
    with pytest.raises(DPValueError):
        _sim.binom_accept_max(0, 0.05)


def test_region_coverage_and_null_counts_contract():
    from dputils.audit import simulate as _sim

    hits = _sim.region_coverage(200, 100, 0.1, 1.0, 40, n_bootstrap=200, seed=3)
    assert set(hits) == {"Bonferroni box", "bootstrap ellipsoid"}
    assert all(0 <= v <= 40 for v in hits.values())
    # the Bonferroni box is exact for Gaussian coordinates: 40 seeds at 95% cannot fall below 32 (p < 1e-3)
    assert hits["Bonferroni box"] >= 32
    assert hits == _sim.region_coverage(200, 100, 0.1, 1.0, 40, n_bootstrap=200, seed=3)  # seeded
    zero = _sim.null_zero_counts(400, 2.0, 5, ("gauss-bonferroni", "steinke"), n_bootstrap=100, seed=1)
    assert set(zero) == {"gauss-bonferroni", "steinke"} and all(0 <= v <= 5 for v in zero.values())
    # valid bounds on scores with no signal: zero in almost every run
    assert min(zero.values()) >= 4
