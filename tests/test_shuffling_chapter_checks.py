"""The computations the shuffling chapter shows, moved from its notebook and tooling module into dputils.shuffling
(issue 26, item 5): each against an independent computation (scipy.stats distributions, mpmath, a brute-force
grid, SLSQP on Lemma B.1, hand-computed numbers) or, for presentation-free glue, its contract."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import optimize, stats

from dputils import shuffling as sh
from dputils.errors import DPValueError


def _gauss_tradeoff(alpha, mu):
    """G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu), straight from scipy.stats."""
    return stats.norm.cdf(stats.norm.ppf(1 - np.asarray(alpha, dtype=float)) - mu)


def _gauss_delta_mp(eps, mu):
    """Eq. (7) in 50-digit arithmetic."""
    mpmath.mp.dps = 50
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    return float(mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2))


def _mixture_delta_direct(eps, weights, sigma):
    """delta(eps) = sum_j q_j [Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)], mu = sqrt(j)/sigma, in scipy."""
    total = 0.0
    for j, q in enumerate(weights):
        if j == 0 or q == 0:
            continue
        mu = math.sqrt(j) / sigma
        total += q * (stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))
    return total


# -- laws ------------------------------------------------------------------------------------------------------


def test_law_deviation_by_hand():
    gap, se = sh.law_deviation(sh.C2Law(np.array([0.5, 0.5])), sh.C2Law(np.array([0.25, 0.5, 0.25])), 100)
    assert np.allclose(gap, [0.25, 0.0, 0.25], atol=1e-15)
    assert np.allclose(se, [math.sqrt(0.25 * 0.75 / 100), 0.05, math.sqrt(0.25 * 0.75 / 100)], rtol=1e-14)


def test_law_deviation_of_multinomial_frequencies_stays_within_five_standard_errors():
    q = np.array([0.1, 0.0, 0.3, 0.6])
    rng = np.random.default_rng(11)
    for _ in range(20):
        freq = rng.multinomial(5000, q) / 5000
        gap, se = sh.law_deviation(sh.C2Law(freq), sh.C2Law(q), 5000)
        assert np.all(gap <= 5 * se)  # 5 s.e. of a Binomial frequency: fails with probability ~1e-6 per entry
    freq_wrong = np.array([0.3, 0.0, 0.3, 0.4])  # off by 0.2 >> 5 s.e. = 0.035
    gap, se = sh.law_deviation(sh.C2Law(freq_wrong), sh.C2Law(q), 5000)
    assert gap.max() > 20 * se.max()


def test_law_deviation_refuses_bad_input():
    law = sh.C2Law(np.array([1.0]))
    with pytest.raises(DPValueError):
        sh.law_deviation(np.array([1.0]), law, 10)
    with pytest.raises(DPValueError):
        sh.law_deviation(law, law, 0)


# -- trade-off functions -----------------------------------------------------------------------------------------


def test_gdp_delta_three_ways_against_mpmath_and_a_scalar_maximiser():
    mus, epss = (0.5, 1.0, 3.0), (0.5, 2.0, 8.0)
    got = sh.gdp_delta_three_ways(mus, epss)
    kept = [(m, e) for m in mus for e in epss if _gauss_delta_mp(e, m) >= 1e-8]
    assert len(got) == len(kept) < len(mus) * len(epss)  # the pairs whose delta cancels are left out
    for (mu, e), (d7, grid_sup, at_star) in zip(kept, got):
        assert d7 == pytest.approx(_gauss_delta_mp(e, mu), rel=1e-9)
        # the supremum of 1 - G_mu(alpha) - e^eps alpha by a bounded scalar maximiser (no use of alpha*)
        res = optimize.minimize_scalar(
            lambda a: -(1 - _gauss_tradeoff(a, mu) - math.exp(e) * a),
            bounds=(0, 1),
            method="bounded",
            options={"xatol": 1e-13},
        )
        assert -res.fun == pytest.approx(d7, rel=1e-6)
        assert grid_sup <= d7 * (1 + 1e-9) + 1e-15 and abs(grid_sup - d7) < 1e-3 * d7
        assert at_star == pytest.approx(d7, rel=1e-9)


def test_gdp_delta_three_ways_grid_argument_and_errors():
    ((d7, grid_sup, at_star),) = sh.gdp_delta_three_ways([1.0], [1.0], alphas=[0.0, 1.0])
    assert grid_sup == pytest.approx(0.0, abs=1e-15)  # 1 - G(0) - 0 = 0 and 1 - G(1) - e = 1 - e < 0
    assert at_star == pytest.approx(d7, rel=1e-12)
    with pytest.raises(DPValueError):
        sh.gdp_delta_three_ways([1.0], [1.0], alphas=[0.5, 1.5])
    with pytest.raises(DPValueError):
        sh.gdp_delta_three_ways([0.0], [1.0])


def test_mixture_tradeoff_two_ways_single_component_is_gaussian():
    law = sh.C2Law(np.array([0.0, 0.0, 0.0, 0.0, 1.0]))  # c = 2 always
    alphas = [0.01, 0.1, 0.5]
    closed, num = sh.mixture_tradeoff_two_ways(alphas, law, 2.0)
    want = _gauss_tradeoff(alphas, 1.0)
    assert np.allclose(closed, want, atol=1e-10)
    assert np.allclose(num, want, atol=2e-5)


def test_mixture_tradeoff_two_ways_chapter_toy():
    law = sh.C2Law(np.array([0.2, 0.5, 0, 0, 0, 0, 0, 0, 0, 0.3]))
    closed, num = sh.mixture_tradeoff_two_ways([0.01, 0.05, 0.2, 0.5, 0.8], law, 1.5)
    assert closed.shape == num.shape == (5,)
    assert np.all(closed <= num + 1e-7) and np.max(np.abs(closed - num)) < 2e-5
    assert np.all(np.diff(closed) < 0)  # a trade-off function decreases


def test_upper_bound_envelope_gap_shrinks_with_the_grid():
    fine = sh.upper_bound_envelope_gap(np.linspace(0, 1, 20_001), 2.0, 0.2, 1.0)
    coarse = sh.upper_bound_envelope_gap(np.linspace(0, 1, 51), 2.0, 0.2, 1.0)
    assert 0 <= fine < 1e-5 < coarse


def test_strong_adversary_tradeoffs_against_scipy_and_lemma_b1():
    alphas = np.array([0.01, 0.1, 0.3])
    got = sh.strong_adversary_tradeoffs(alphas)
    assert list(got) == ["shuffle_g1", "subsample_g1", "bc_shuffle", "bc_shuffle_bound"]
    assert np.allclose(got["shuffle_g1"], _gauss_tradeoff(alphas, math.sqrt(10) / 2), atol=1e-12)
    assert np.allclose(got["bc_shuffle_bound"], _gauss_tradeoff(alphas, math.sqrt(40) / 2), atol=1e-12)
    assert np.all(got["bc_shuffle"] >= got["bc_shuffle_bound"] - 1e-12)  # c^2 <= gE: above its bound
    # a small setting: c^2 ~ Binomial(2, 1/2) (N = 100, b = 50, E = 1); Lemma B.1 by SLSQP on math.comb weights
    small = sh.strong_adversary_tradeoffs(alphas, dataset_size=100, batch_size=50, sigma=1.0, epochs=1, group_size=1)
    w = [math.comb(2, k) / 4 for k in range(3)]
    for a, f in zip(alphas, small["subsample_g1"]):
        num = sh.mixture_tradeoff_by_optimization(float(a), w, np.sqrt([0.0, 1.0, 2.0]))
        assert f <= num + 1e-7 and abs(f - num) < 2e-5


# -- Appendix E ------------------------------------------------------------------------------------------------


def test_subsampling_tails_against_scipy_binomial():
    t = sh.subsampling_tails(6000, 60, 5)  # n = 500 rounds, p = 0.01
    assert t["rounds"] == 500
    cl2, cu2 = (1 + 1 / math.sqrt(10)) * 5, (1 - 1 / math.sqrt(10)) * 5  # 6.58, 3.42
    assert t["P_above_cL2"] == pytest.approx(stats.binom.sf(6, 500, 0.01), rel=1e-12)
    assert t["P_below_cU2"] == pytest.approx(stats.binom.cdf(3, 500, 0.01), rel=1e-12)
    assert t["printed"] == pytest.approx(math.exp(-5), rel=1e-15)
    assert t["hoeffding_correct"] == pytest.approx(math.exp(-2 * (cl2 - 5) ** 2 / 500), rel=1e-12)
    assert cu2 < 5 < cl2


def test_lemma_e2_deltas_the_erratum_and_the_correction():
    for sigma, E, eps in [(1.0, 10, 16.0), (1.0, 10, 20.0)]:
        r = sh.lemma_e2_deltas(eps, sigma, E)
        n = round(60000 * E / 256)
        w = stats.binom.pmf(np.arange(n + 1), n, 256 / 60000)
        assert r["exact"] == pytest.approx(_mixture_delta_direct(eps, w, sigma), rel=1e-8)
        assert r["exact"] > r["claimed"]  # Lemma E.2's bound is violated
        assert r["corrected"] >= r["exact"]
        # the corrected (c^L)^2: smallest integer whose exact right tail is at most e^{-E}
        k = r["cL2_corrected"]
        assert stats.binom.sf(k, n, 256 / 60000) <= math.exp(-E) < stats.binom.sf(k - 1, n, 256 / 60000)


def test_lemma_e2_deltas_claimed_against_a_brute_force_supremum():
    r = sh.lemma_e2_deltas(16.0, 1.0, 10)
    cl, l = math.sqrt((1 + 1 / math.sqrt(20)) * 10), math.exp(-10)
    a = np.concatenate([np.geomspace(1e-16, 1e-3, 200_001), np.linspace(1e-3, 1, 20_001)])
    fhat = _gauss_tradeoff(np.minimum(1.0, a + l), cl)
    finv = np.where(a < 1 - l, np.maximum(_gauss_tradeoff(a, cl) - l, 0.0), 0.0)
    f_l = np.maximum(fhat, finv)  # Def 5.4: max{hat f, hat f^{-1}}
    brute = np.max(1 - f_l - math.exp(16.0) * a)
    assert r["claimed"] == pytest.approx(brute, rel=1e-3)


def test_lemma_e2_tradeoff_excess_small_setting_and_the_erratum():
    # c^2 ~ Binomial(2, 1/2): the exact f by Lemma B.1 (SLSQP); the claimed bound from scipy
    alphas = np.array([0.05, 0.2, 0.5])
    got = sh.lemma_e2_tradeoff_excess(alphas, 1.0, 1, dataset_size=100, batch_size=50)
    cl, l = math.sqrt(1 + 1 / math.sqrt(2)), math.exp(-1)
    beta = optimize.brentq(lambda b: _gauss_tradeoff(b, cl) - l - b, 0, 1, xtol=1e-15)
    claimed = np.where(
        alphas <= beta, np.maximum(_gauss_tradeoff(alphas, cl) - l, 0), _gauss_tradeoff(np.minimum(1, alphas + l), cl)
    )
    w = [0.25, 0.5, 0.25]
    exact = [sh.mixture_tradeoff_by_optimization(float(a), w, np.sqrt([0.0, 1.0, 2.0])) for a in alphas]
    assert np.allclose(got, claimed - np.array(exact), atol=3e-5)
    # the chapter's setting: the claimed lower bound exceeds the exact f somewhere (Lemma E.2 is wrong)
    assert sh.lemma_e2_tradeoff_excess(np.geomspace(1e-14, 0.5, 300), 1.0, 10).max() > 1e-5


def test_lemma_e4_against_exact_by_hand_and_scipy():
    N, m, E = 60000, 256, 10
    for g in (1, 2):
        r = sh.lemma_e4_against_exact(N, m, g, E)
        T = round(N * E / m)
        hg = stats.hypergeom(N, g, m)
        assert r["mean_c2"] == pytest.approx(T * hg.moment(2), rel=1e-9)
        beta = math.exp(N / (N - g - m)) + 1.0
        assert r["cL2"] == pytest.approx(beta * min(m, g) * g * E, rel=1e-14)
        assert r["l"] == pytest.approx(math.exp(-g * E), rel=1e-14)
        assert r["exact_tail"] <= r["l"]  # the lemma holds
        # the exact epsilon: delta at it, computed directly from the law, is the target 1e-5
        w = sh.subsample_ic_law(N, m, g, E).pmf
        assert _mixture_delta_direct(r["eps_exact"], w, 2.0) == pytest.approx(1e-5, rel=1e-6)
    assert sh.lemma_e4_against_exact(N, m, 1, E)["eps_lemma"] == math.inf  # l = e^-10 > delta
    r2 = sh.lemma_e4_against_exact(N, m, 2, E)  # l = e^-20 < delta: finite, and looser than exact
    assert math.isfinite(r2["eps_lemma"]) and r2["eps_lemma"] > r2["eps_exact"]


# -- conversions and the standard model ----------------------------------------------------------------------


@pytest.mark.parametrize("mu, order", [(0.5, 2.0), (1.0, 3.0), (2.5, 1.5)])
def test_gaussian_renyi_by_quadrature_is_the_closed_form(mu, order):
    assert sh.gaussian_renyi_by_quadrature(mu, order) == pytest.approx(order * mu * mu / 2, rel=1e-9)


def test_gaussian_renyi_by_quadrature_refuses_order_one():
    with pytest.raises(DPValueError):
        sh.gaussian_renyi_by_quadrature(1.0, 1.0)
    with pytest.raises(DPValueError):
        sh.gaussian_renyi_by_quadrature(-1.0, 2.0)


def test_epsilon_against_batch_size_against_direct_computations():
    N, sigma, E, delta = 50000, 2.0, 2, 1e-5
    batches = [250, 1000]
    strong, standard = sh.epsilon_against_batch_size(N, batches, sigma, E, delta)
    assert len(strong) == len(standard) == 2
    for b, e_strong, e_std in zip(batches, strong, standard):
        n = round(N * E / b)
        w = stats.binom.pmf(np.arange(n + 1), n, b / N)
        assert _mixture_delta_direct(e_strong, w, sigma) == pytest.approx(delta, rel=1e-6)
        v = math.exp(1 / sigma**2) * stats.norm.cdf(1.5 / sigma) + 3 * stats.norm.cdf(-0.5 / sigma) - 2
        mu = b / N * math.sqrt(n * v)  # the Bu-Dong-Long-Su CLT for Poisson sampling
        assert _gauss_delta_mp(e_std, mu) == pytest.approx(delta, rel=1e-6)
    assert standard[1] > standard[0]  # larger batches, larger standard-model epsilon


def test_clipping_accuracy_gap_contract():
    rows = [dict(sigma=1.0, acc_ic=0.8, acc_bc=0.7), dict(sigma=2.0, acc_ic=0.75, acc_bc=0.5)]
    assert sh.clipping_accuracy_gap(rows, 2.0) == pytest.approx(-25.0, rel=1e-12)
    assert sh.clipping_accuracy_gap(rows, 1.0) == pytest.approx(-10.0, rel=1e-12)
    with pytest.raises(DPValueError):
        sh.clipping_accuracy_gap(rows, 4.0)


def test_tcdp_as_printed_is_omega_times_the_true_parameter():
    rho_pr, omega = sh.tcdp_as_printed(2.0, 50, 4, 10.0)
    assert omega == 10.0 and rho_pr == pytest.approx(4 * 50 / 8 * 10, rel=1e-15)
    rho, _ = sh.gdp_to_tcdp(math.sqrt(4 * 50) / 2.0, 10.0)
    assert rho_pr / rho == pytest.approx(omega, rel=1e-12)
    with pytest.raises(DPValueError):
        sh.tcdp_as_printed(2.0, 50, 4, 1.0)


def test_strong_adversary_tradeoff_curves_lie_on_def52_and_on_the_bound():
    curves = sh.strong_adversary_tradeoff_curves(6000, 60, 2.0, 3, n_points=60)
    assert list(curves) == ["bc_shuffle_g1", "bound_g1", "bc_shuffle_g4", "bound_g4", "subsample_g1"]
    for g in (1, 4):
        a, f = curves[f"bound_g{g}"]
        assert np.allclose(f, _gauss_tradeoff(a, math.sqrt(3 * g) / 2.0), atol=1e-12)
    law = sh.bc_shuffle_law(6000, 60, 4).compose(3)
    for key, lw in (("bc_shuffle_g4", law), ("subsample_g1", sh.subsample_ic_g1_law(6000, 60, 3))):
        al, be = curves[key]
        assert np.all(np.diff(al) >= 0) and np.all(np.diff(be) <= 1e-12)  # sorted by alpha, decreasing
        inner = (al > 1e-6) & (al < 1 - 1e-6)
        # the parametric curve (in Lambda) against the root-solved f(alpha) of Def 5.2 at the same alpha
        assert np.allclose(be[inner], sh.mixture_tradeoff(al[inner], lw, 2.0), atol=1e-9)
    a1, f1 = curves["bc_shuffle_g1"]
    assert np.allclose(f1, _gauss_tradeoff(a1, math.sqrt(3) / 2.0), atol=1e-9)  # g = 1: c^2 = E, exactly G
