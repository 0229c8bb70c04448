"""Tests of dputils.shuffling against independent references.

References used: mpmath at 40 digits (GDP eps), brute-force enumeration of all placements (laws of c^2),
Monte Carlo of Algorithm 1's index sampling, SLSQP minimisation of the mixture infimum (Lemma B.1),
a numerical lower convex envelope (Def 5.3), Monte Carlo of the privacy loss and dp_accounting's PLD
(mixture delta), dp_accounting's RDP accountant, and the numbers of section 8 of the team's note
(seed004), which were computed independently with scipy/mpmath.
"""

from __future__ import annotations

import argparse
import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from scipy import optimize, special

from dputils import shuffling as sh
from dputils.errors import DPValueError, NumericalError

# ------------------------------------------------------------------------------------------ GDP


def _mp_gdp_epsilon(delta, mu):
    mp.mp.dps = 40
    mu = mp.mpf(mu)
    f = lambda e: mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2) - mp.mpf(delta)  # noqa: E731
    lo, hi = mp.mpf(0), mp.mpf(400)  # delta(eps) is decreasing: bisection
    for _ in range(120):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return float((lo + hi) / 2)


@pytest.mark.parametrize(
    "mu, eps_note",
    [(0.5, 1.9931), (1.0, 4.3772), (2.0, 9.9973), (3.0, 16.6755), (math.sqrt(50) / 2, 20.6755), (5.0, 33.1037)],
)
def test_gdp_epsilon_note_target1_and_mpmath(mu, eps_note):
    eps = sh.gdp_epsilon(1e-5, mu)
    assert abs(eps - eps_note) < 1e-3  # note target 1, tolerance +-1e-3
    assert abs(eps - _mp_gdp_epsilon(1e-5, mu)) < 1e-8  # mpmath 40 digits
    try:
        from dputils import curves
    except ImportError:  # pragma: no cover
        return
    assert abs(eps - float(curves.gdp_epsilon(1e-5, mu))) < 1e-6  # the foundation's independent implementation


def test_gdp_delta_at_mu1_eps1():
    assert abs(sh.gdp_delta(1.0, 1.0) - 0.12694) < 1e-5  # note target 1


def test_gdp_delta_tiny_is_stable():
    # deep tail: log-space formula vs mpmath, relative 1e-6
    mp.mp.dps = 60
    mu, eps = 1.0, 30.0
    ref = mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)
    assert abs(sh.gdp_delta(eps, mu) / float(ref) - 1) < 1e-6


@pytest.mark.parametrize(
    "sigma, E, g, eps_note", [(2, 50, 1, 20.68), (2, 50, 4, 54.38), (2, 10, 4, 17.86), (4, 50, 1, 8.60)]
)
def test_headline_target2(sigma, E, g, eps_note):
    mu = sh.bc_shuffle_mu(sigma, E, g)
    assert abs(mu - math.sqrt(g * E) / sigma) < 1e-12
    assert abs(sh.gdp_epsilon(1e-5, mu) - eps_note) < 0.01  # tolerance +-0.01


def test_generic_group_target2():
    assert abs(sh.gdp_epsilon(1e-5, sh.generic_group_mu(2, 50, 4)) - 159.44) < 0.01
    assert abs(sh.gdp_epsilon(1e-5, sh.generic_group_mu(2, 50, 8)) - 519.70) < 0.01


def test_f_eps_delta_typo():
    a = np.linspace(0, 1, 101)
    f = sh.f_eps_delta(a, 1.0, 1e-3)
    assert f[0] == pytest.approx(1 - 1e-3) and f[-1] == 0.0 and np.all(np.diff(f) <= 1e-15)
    assert np.all(sh.f_eps_delta_as_printed(a, 1.0, 1e-3) <= 0)  # the printed 'min' is no trade-off function


def test_gaussian_tradeoff_basics():
    a = np.linspace(0, 1, 201)
    G = sh.gaussian_tradeoff(a, 1.3)
    assert G[0] == 1.0 and G[-1] == 0.0
    assert np.all(G <= 1 - a + 1e-15)
    assert np.all(np.diff(G, 2) >= -1e-12)  # convex
    assert np.allclose(sh.gaussian_tradeoff(G, 1.3), a, atol=1e-10)  # symmetric


def test_gaussian_tradeoff_tiny_alpha_against_mpmath():
    # forming 1 - alpha first would lose alpha: G_10(1e-20) = Phi(Phi^-1(1 - 1e-20) - 10) = 0.2304, not 1
    mp.mp.dps = 350  # 1 - 2 alpha must be exact in mpmath for alpha down to 1e-300
    for alpha, mu in ((1e-20, 10.0), (1e-12, 9.0), (1e-300, 40.0)):
        ref = mp.ncdf(mp.sqrt(2) * mp.erfinv(1 - 2 * mp.mpf(alpha)) - mu)
        assert 1e-4 < ref < 0.5  # a value that a lost alpha (G = 1) would miss
        assert sh.gaussian_tradeoff(alpha, mu) == pytest.approx(float(ref), rel=1e-9)
    assert sh.gaussian_tradeoff(0.3, 0.0) == pytest.approx(0.7, rel=1e-15)  # G_0, the c = 0 component


# ------------------------------------------------------------------------------------------ laws


def _enumerate_law(N, s, m, g):
    """All ordered placements of g distinct samples into N slots (rounds of m*s, sub-batches of s)."""
    counts = {}
    for pos in itertools.permutations(range(N), g):
        rounds = {}
        for p in pos:
            rounds.setdefault(p // (m * s), set()).add(p // s)
        c2 = sum(len(v) ** 2 for v in rounds.values())
        counts[c2] = counts.get(c2, 0) + 1
    tot = sum(counts.values())
    return {k: v / tot for k, v in counts.items()}


@pytest.mark.parametrize("N, s, g", [(12, 3, 2), (12, 3, 3), (12, 4, 4), (10, 5, 3)])
def test_bc_shuffle_law_brute_force(N, s, g):
    ref = _enumerate_law(N, s, 1, g)
    law = sh.bc_shuffle_law(N, s, g).as_dict()
    assert set(ref) == set(law)
    for k in ref:
        assert abs(ref[k] - law[k]) < 1e-12


@pytest.mark.parametrize("N, m, g", [(12, 3, 2), (12, 3, 3), (12, 4, 4), (10, 5, 4)])
def test_ic_shuffle_law_brute_force(N, m, g):
    ref = _enumerate_law(N, 1, m, g)
    law = sh.ic_shuffle_law(N, m, g).as_dict()
    assert set(ref) == set(law)
    for k in ref:
        assert abs(ref[k] - law[k]) < 1e-12


def test_printed_law_is_not_the_permutation_law():
    ref = _enumerate_law(12, 3, 1, 3)
    printed = sh.bc_shuffle_law_as_printed(12, 3, 3).as_dict()
    assert max(abs(ref.get(k, 0) - printed.get(k, 0)) for k in set(ref) | set(printed)) > 0.05


def test_laws_target3():
    ex = sh.bc_shuffle_law(60000, 250, 2).as_dict()
    pr = sh.bc_shuffle_law_as_printed(60000, 250, 2).as_dict()
    assert abs(ex[1] - 0.004150) < 1e-6 and abs(pr[1] - 0.008299) < 1e-6
    ex = sh.bc_shuffle_law(1000, 100, 4).pmf
    pr = sh.bc_shuffle_law_as_printed(1000, 100, 4).pmf
    assert np.allclose(ex[1:], [0.000947, 0.061760, 0.430257, 0.507037], atol=1e-6)
    assert np.allclose(pr[1:], [0.013986, 0.188811, 0.503497, 0.293706], atol=1e-6)
    ic = sh.ic_shuffle_law(1000, 100, 4).as_dict()
    for k, v in {4: 0.50704, 6: 0.43026, 8: 0.02662, 10: 0.03514, 16: 0.00095}.items():
        assert abs(ic[k] - v) < 1e-5


def test_monte_carlo_law_matches_exact_and_rejects_printed():
    rng = np.random.default_rng(1)
    n = 100_000
    mc = sh.monte_carlo_c2_law(1000, 100, 1, 4, n, rng).pmf
    ex = sh.bc_shuffle_law(1000, 100, 4).pmf
    pr = sh.bc_shuffle_law_as_printed(1000, 100, 4).pmf
    se = np.sqrt(ex * (1 - ex) / n)
    assert np.all(np.abs(mc[: ex.size] - ex) < 5 * se + 1e-4)  # 5 standard errors
    assert np.max(np.abs(mc[: pr.size] - pr)) > 0.1  # the printed law is far off
    mc_ic = sh.monte_carlo_c2_law(1000, 1, 100, 4, n, rng).pmf
    ex_ic = sh.ic_shuffle_law(1000, 100, 4).pmf
    se = np.sqrt(ex_ic * (1 - ex_ic) / n)
    assert np.all(np.abs(mc_ic[: ex_ic.size] - ex_ic[: mc_ic.size]) < 5 * se[: mc_ic.size] + 1e-4)


def test_shuffle_g1_law_is_point_mass():
    # Lemma F.2: with g = 1 every epoch has c^2 = 1 exactly, whatever m, s, N
    for N, s in [(100, 10), (60000, 250)]:
        assert sh.bc_shuffle_law(N, s, 1).as_dict() == {1: 1.0}
        assert sh.ic_shuffle_law(N, s, 1).as_dict() == {1: 1.0}
    rng = np.random.default_rng(0)
    mc = sh.monte_carlo_c2_law(60, 3, 4, 1, 2000, rng, epochs=5)
    assert mc.as_dict() == {5: 1.0}


def test_monte_carlo_subsampling_binomial():
    rng = np.random.default_rng(2)
    N, b, E = 100, 10, 2
    mc = sh.monte_carlo_c2_law(N, 1, b, 1, 20_000, rng, sampler="subsample", epochs=E).pmf
    ex = sh.subsample_ic_g1_law(N, b, E).pmf
    k = min(mc.size, ex.size)
    assert np.max(np.abs(mc[:k] - ex[:k])) < 0.015


def test_compose_is_convolution():
    law = sh.bc_shuffle_law(1000, 100, 4)
    two = law.compose(2).pmf
    ref = np.convolve(law.pmf, law.pmf)
    assert np.allclose(two, ref, atol=1e-15)
    assert abs(law.compose(7).mean - 7 * law.mean) < 1e-10


# ------------------------------------------------------------------------------------------ Def 5.2


def _slsqp_mixture(alpha, q, mus):
    """Brute force of Lemma B.1: min sum q_i G_{mu_i}(a_i) s.t. sum q_i a_i = alpha, 0 <= a_i <= 1."""
    q, mus = np.asarray(q), np.asarray(mus)

    def G(a, mu):
        return special.ndtr(-special.ndtri(np.clip(a, 1e-300, 1)) - mu) if mu > 0 else 1 - a

    best = np.inf
    for start in (np.full(q.size, alpha), np.linspace(0.1, 0.9, q.size) * 0 + alpha):
        res = optimize.minimize(
            lambda a: float(sum(qi * G(ai, mi) for qi, ai, mi in zip(q, a, mus))),
            start,
            method="SLSQP",
            bounds=[(0, 1)] * q.size,
            constraints=[{"type": "eq", "fun": lambda a: float(np.dot(q, a) - alpha)}],
            options={"ftol": 1e-14, "maxiter": 500},
        )
        best = min(best, res.fun)
    return best


@pytest.mark.parametrize(
    "pmf, sigma", [({1: 0.3, 4: 0.7}, 1.0), ({0: 0.2, 1: 0.5, 9: 0.3}, 1.5), ({0: 0.1, 2: 0.3, 3: 0.4, 5: 0.2}, 0.8)]
)
def test_mixture_tradeoff_vs_slsqp(pmf, sigma):
    arr = np.zeros(max(pmf) + 1)
    for k, v in pmf.items():
        arr[k] = v
    law = sh.C2Law(arr)
    q = np.array(list(pmf.values()))
    mus = np.sqrt(np.array(list(pmf.keys()), float)) / sigma
    for alpha in (0.01, 0.05, 0.2, 0.5, 0.8):
        f = sh.mixture_tradeoff(alpha, law, sigma)
        ref = _slsqp_mixture(alpha, q, mus)
        assert f <= ref + 1e-7  # the closed form is the infimum
        assert abs(f - ref) < 2e-5  # SLSQP reaches it to 2e-5


def test_mixture_tradeoff_symmetric_convex():
    law = sh.C2Law(np.array([0.1, 0.3, 0.0, 0.0, 0.6]))
    a = np.linspace(0, 1, 401)
    f = sh.mixture_tradeoff(a, law, 1.0)
    assert np.all(np.diff(f, 2) >= -1e-9)
    assert np.allclose(sh.mixture_tradeoff(f, law, 1.0), a, atol=1e-8)
    assert np.all(f <= 1 - a + 1e-12)


def test_mixture_point_mass_is_gaussian():
    law = sh.bc_shuffle_law(60000, 250, 1).compose(10)
    a = np.array([1e-12, 1e-3, 0.3, 0.9])
    assert np.allclose(sh.mixture_tradeoff(a, law, 2.0), sh.gaussian_tradeoff(a, math.sqrt(10) / 2), rtol=1e-9)


def test_tradeoff_values_target7():
    al = np.array([1e-3, 0.01, 0.05, 0.1, 0.3])
    rows = {
        "G": (sh.gaussian_tradeoff(al, math.sqrt(10) / 2), [0.93436, 0.77193, 0.52540, 0.38225, 0.14532]),
        "ss": (
            sh.mixture_tradeoff(al, sh.subsample_ic_g1_law(60000, 250, 10), 2),
            [0.92600, 0.76737, 0.53195, 0.39268, 0.15267],
        ),
        "bc4": (
            sh.mixture_tradeoff(al, sh.bc_shuffle_law(60000, 250, 4).compose(10), 2),
            [0.47522, 0.20443, 0.06586, 0.03069, 0.00430],
        ),
        "G4": (sh.gaussian_tradeoff(al, math.sqrt(40) / 2), [0.47128, 0.20160, 0.06458, 0.03000, 0.00417]),
    }
    for name, (got, want) in rows.items():
        assert np.max(np.abs(got - np.array(want))) < 2e-4, name  # tolerance +-2e-4


def test_mixture_delta_vs_curve_sup_mc_and_dp_accounting():
    law = sh.bc_shuffle_law(1000, 100, 4).compose(3)
    sigma = 1.5
    # (a) sup over the parametric trade-off curve
    al, be = sh.mixture_tradeoff_curve(law, sigma, n_points=4000)
    for eps in (0.5, 2.0, 4.0):
        d = sh.mixture_delta(eps, law, sigma)
        sup = float(np.max(1 - be - math.exp(eps) * al))
        assert sup <= d * (1 + 1e-9) + 1e-15 and abs(sup - d) < 1e-4 * d + 1e-12
    # (b) Monte Carlo of the privacy loss of the labelled pair: delta = E_P[(1 - e^{eps - L})_+]
    rng = np.random.default_rng(3)
    n = 400_000
    c2 = rng.choice(law.pmf.size, size=n, p=law.pmf)
    mu = np.sqrt(c2) / sigma
    x = rng.standard_normal(n) + mu
    L = mu * x - mu**2 / 2
    for eps in (0.5, 2.0):
        vals = np.clip(1 - np.exp(eps - L), 0, None)
        est, se = vals.mean(), vals.std() / math.sqrt(n)
        assert abs(est - sh.mixture_delta(eps, law, sigma)) < 5 * se
    # (c) dp_accounting's PLD for each Gaussian component, mixed with q
    from dp_accounting.pld import privacy_loss_distribution as pld

    eps = 2.0
    ref = sum(
        law.pmf[j]
        * pld.from_gaussian_mechanism(
            sigma, sensitivity=math.sqrt(j), value_discretization_interval=1e-3
        ).get_delta_for_epsilon(eps)
        for j in law.support
        if j > 0
    )
    d = sh.mixture_delta(eps, law, sigma)
    assert d <= ref * (1 + 1e-9) and ref - d < 5e-3 * d  # PLD (grid 1e-3) is pessimistic by < 0.5%


def test_group_privacy_target5():
    N, s, sig, E = 50000, 250, 2.0, 50
    want = {
        1: (20.68, 20.68, 20.68, 20.68, 20.68),
        2: (33.10, 33.05, 33.00, 33.24, 54.38),
        4: (54.38, 54.09, 53.82, 55.04, 159.44),
        8: (91.82, 90.63, 89.48, 94.48, 519.70),
    }
    for g, w in want.items():
        got = (
            sh.gdp_epsilon(1e-5, sh.bc_shuffle_mu(sig, E, g)),
            sh.mixture_epsilon(1e-5, sh.bc_shuffle_law(N, s, g).compose(E), sig)[1],
            sh.mixture_epsilon(1e-5, sh.bc_shuffle_law_as_printed(N, s, g).compose(E), sig)[1],
            sh.mixture_epsilon(1e-5, sh.ic_shuffle_law(N, s, g).compose(E), sig)[1],
            sh.gdp_epsilon(1e-5, sh.generic_group_mu(sig, E, g)),
        )
        assert np.max(np.abs(np.array(got) - np.array(w))) < 0.05  # tolerance +-0.05
        # ordering (equalities at g=1 hold up to the 1e-10 relative bracket of the two epsilon inversions)
        assert got[1] <= got[0] + 1e-7 and got[0] <= got[3] + 1e-7 and got[3] <= got[4] + 1e-7
        if g >= 2:
            assert got[2] < got[1]  # the printed law is optimistic


def test_headline_bound_dominates_exact_curve():
    for g in (2, 4, 8):
        for law in (
            sh.bc_shuffle_law(50000, 250, g).compose(5),
            sh.bc_shuffle_law_as_printed(50000, 250, g).compose(5),
        ):
            a = np.geomspace(1e-9, 0.999, 60)
            assert np.all(sh.mixture_tradeoff(a, law, 2.0) >= sh.gaussian_tradeoff(a, math.sqrt(5 * g) / 2) - 1e-12)


def test_monotonicity():
    e = lambda sig, E, g: sh.mixture_epsilon(1e-5, sh.bc_shuffle_law(10000, 100, g).compose(E), sig)[1]  # noqa: E731
    assert e(2, 10, 2) > e(3, 10, 2)
    assert e(2, 20, 2) > e(2, 10, 2)
    assert e(2, 10, 4) > e(2, 10, 2)
    # f decreases with g for every alpha (Thm 5.6)
    a = np.linspace(0.01, 0.99, 30)
    f2 = sh.mixture_tradeoff(a, sh.bc_shuffle_law(10000, 100, 2).compose(4), 2.0)
    f4 = sh.mixture_tradeoff(a, sh.bc_shuffle_law(10000, 100, 4).compose(4), 2.0)
    assert np.all(f4 <= f2 + 1e-12)


# ------------------------------------------------------------------------------------------ Def 5.3 / 5.4


@pytest.mark.parametrize(
    "c, sigma, u, b0, b1",
    [(1, 1, 0.05, 0.29072, 0.36048), (2, 1, 0.2, 0.13316, 0.34972), (math.sqrt(10), 2, 0.01, 0.21275, 0.22429)],
)
def test_def53_betas_and_envelope(c, sigma, u, b0, b1):
    got = sh.upper_bound_betas(c, u, sigma)
    assert abs(got[0] - b0) < 1e-5 and abs(got[1] - b1) < 1e-5  # note target 4
    x = np.linspace(0, 1, 200_001)
    mu = c / sigma
    fhat = u + (1 - u) * sh.gaussian_tradeoff(x, mu)
    finv = np.where(x < u, 1.0, sh.gaussian_tradeoff(np.clip((x - u) / (1 - u), 0, 1), mu))
    env = sh.lower_convex_envelope(x, np.minimum(fhat, finv))  # checked by brute force in test_shuffling_checks
    assert np.max(np.abs(env - sh.upper_bound_tradeoff(x, c, u, sigma))) < 1e-6  # grid resolution


def test_def54_beta_target4():
    beta = sh.lower_bound_beta(math.sqrt(2), 0.02, 1.0)
    assert abs(beta - 0.22986) < 1e-5
    assert abs(sh.gaussian_tradeoff(beta, math.sqrt(2)) - 0.02 - beta) < 1e-12


def test_lower_bound_delta_vs_grid():
    for c, l, sigma, eps in [(math.sqrt(12.2), math.exp(-10), 1.0, 16.0), (2.0, 0.05, 1.0, 0.3), (1.0, 0.01, 1.0, 1.0)]:
        a = np.concatenate([np.geomspace(1e-300, 1, 200_000), np.linspace(0, 1, 200_001)])
        sup = float(np.max(1 - sh.lower_bound_tradeoff(a, c, l, sigma) - math.exp(eps) * a))
        got = sh.lower_bound_delta(eps, c, l, sigma)
        assert got >= sup - 1e-12 and got - sup < 1e-6 * max(got, 1e-12) + 1e-9


def test_lower_bound_valid_where_tail_is_exact():
    # with the exact tail l = P(c^2 > cL^2), f >= f^L must hold (Thm 5.6)
    law = sh.subsample_ic_g1_law(6000, 60, 5)
    par = sh.subsampling_bounds_corrected(law, 1e-3)
    a = np.geomspace(1e-10, 0.999, 80)
    f = sh.mixture_tradeoff(a, law, 1.0)
    fl = sh.lower_bound_tradeoff(a, math.sqrt(par["cL2"]), par["l"], 1.0)
    assert np.all(f >= fl - 1e-12)
    fu = sh.upper_bound_tradeoff(a, math.sqrt(max(par["cU2"], 1e-9)), par["u"], 1.0)
    assert np.all(f <= fu + 1e-9)


# ------------------------------------------------------------------------------------------ errata


TAILS = [
    (60000, 256, 1, 0.2637, 0.3677),
    (60000, 256, 2, 0.1427, 0.1346),
    (60000, 256, 5, 0.2376, 0.2644),
    (60000, 256, 10, 0.2081, 0.2195),
    (60000, 256, 20, 0.2122, 0.2204),
    (60000, 256, 50, 0.2151, 0.2205),
    (60000, 256, 100, 0.2240, 0.2282),
    (50000, 128, 10, 0.2081, 0.2199),
]


@pytest.mark.parametrize("N, m, E, above, below", TAILS)
def test_hoeffding_tail_table(N, m, E, above, below):
    t = sh.subsampling_tail_probabilities(sh.subsample_ic_g1_law(N, m, E), E)
    assert abs(t["P_above_cL2"] - above) < 0.005 and abs(t["P_below_cU2"] - below) < 0.005  # +-0.005
    assert t["hoeffding_correct"] > 0.99  # the correct Hoeffding bound is vacuous here
    if E >= 10:
        assert t["P_above_cL2"] > 1000 * t["printed"]


@pytest.mark.parametrize(
    "sigma, E, eps, exact, claimed",
    [(1, 10, 16, 2.098e-3, 1.270e-3), (1, 10, 20, 1.359e-4, 6.16e-5), (4, 50, 12, 1.082e-8, 3.54e-9)],
)
def test_hoeffding_counterexample_target6(sigma, E, eps, exact, claimed):
    law = sh.subsample_ic_g1_law(60000, 256, E)
    pr = sh.lemma_e2_as_printed(E)
    d_exact = sh.mixture_delta(eps, law, sigma)
    d_claim = sh.lower_bound_delta(eps, math.sqrt(pr["cL2"]), pr["l"], sigma)
    assert abs(d_exact / exact - 1) < 1e-3 and abs(d_claim / claimed - 1) < 2e-3
    assert d_exact > d_claim  # the claimed lower bound on f is violated by the exact f
    # corrected bound: exact tails give a valid (larger) delta
    par = sh.subsampling_bounds_corrected(law, math.exp(-E))
    assert sh.lower_bound_delta(eps, math.sqrt(par["cL2"]), par["l"], sigma) >= d_exact


def test_lemma_e5_q():
    assert abs(sh.lemma_e5_as_printed(60000, 250, 4, 10)["q"] - 3.9752) < 1e-4


# ------------------------------------------------------------------------------------------ standard model


def test_standard_comparison_target8():
    N, m, sig, E = 50000, 250, 2.0, 50
    T, p = E * N // m, m / N
    assert abs(sh.clt_mu_uniform(p, T, sig) - 0.266) < 1e-3
    assert abs(sh.gdp_epsilon(1e-5, sh.clt_mu_uniform(p, T, sig)) - 0.99) < 0.02
    assert abs(sh.clt_mu_poisson(p, T, sig) - 0.222) < 1e-3
    assert abs(sh.gdp_epsilon(1e-5, sh.clt_mu_poisson(p, T, sig)) - 0.81) < 0.02
    orders = list(range(2, 257))
    r = T * sh.rdp_poisson_gaussian(p, sig, orders)
    assert abs(sh.rdp_epsilon(r, orders, 1e-5) - 1.33) < 0.02
    assert abs(sh.rdp_epsilon(r, orders, 1e-5, "modern") - 1.10) < 0.02
    assert abs(sh.mixture_epsilon(1e-5, sh.subsample_ic_g1_law(N, m, E), sig)[1] - 22.46) < 0.02


def test_rdp_vs_dp_accounting():
    import dp_accounting
    from dp_accounting import rdp

    orders = list(range(2, 257))
    r = 14062 * sh.rdp_poisson_gaussian(256 / 60000, 1.1, orders)
    assert abs(sh.rdp_epsilon(r, orders, 1e-5) - 3.009) < 1e-3  # note's sanity value
    acc = rdp.RdpAccountant(orders=orders)
    acc.compose(dp_accounting.PoissonSampledDpEvent(256 / 60000, dp_accounting.GaussianDpEvent(1.1)), 14062)
    assert abs(sh.rdp_epsilon(r, orders, 1e-5, "modern") - acc.get_epsilon(1e-5)) < 1e-6
    with pytest.warns(DeprecationWarning, match="modern"):
        assert sh.rdp_epsilon(r, orders, 1e-5, "improved") == sh.rdp_epsilon(r, orders, 1e-5, "modern")


def test_conversions():
    mu = sh.bc_shuffle_mu(2.0, 50, 4)
    assert sh.gdp_to_zcdp(mu) == pytest.approx(4 * 50 / (2 * 4.0))
    assert sh.gdp_to_rdp(mu, 3.0) == pytest.approx(3 * 4 * 50 / 8)
    assert sh.gdp_to_tcdp(mu, 5.0) == (pytest.approx(25.0), 5.0)
    # zCDP from the sqrt(g) result is g times smaller than the generic g^2 rho
    rho1 = sh.gdp_to_zcdp(sh.shuffle_g1_mu(2.0, 50))
    assert sh.gdp_to_zcdp(mu) * 4 == pytest.approx(4**2 * rho1)


# ------------------------------------------------------------------------------------------ accountants, errors


def _ns(**kw):
    base = dict(sigma=2.0, epochs=50, group_size=1, dataset_size=50000, batch_size=250, delta=1e-5)
    base.update(kw)
    return argparse.Namespace(**base)


def test_registered_accountants():
    from dputils import cli  # noqa: F401  (registers the command-line hooks)
    from dputils.accountants import registry

    names = registry.names()
    for n in (
        "shuffle-batch-clip",
        "shuffle-batch-clip-exact",
        "shuffle-batch-clip-as-printed",
        "shuffle-individual-clip-exact",
        "subsample-batch-clip-exact",
    ):
        assert n in names and registry.get(n).uses_mechanism is False
    acc = registry.get("shuffle-batch-clip").build(_ns(group_size=4))
    r = acc.get_epsilon(1e-5)
    assert abs(r.value - 54.38) < 0.01 and r.kind == "upper-bound"
    d = acc.get_delta(r.value)
    assert abs(d.value - 1e-5) < 1e-9
    ex = registry.get("shuffle-batch-clip-exact").build(_ns(group_size=4)).get_epsilon(1e-5)
    assert ex.lower <= ex.value and abs(ex.value - 54.09) < 0.05 and ex.value < r.value
    pr = registry.get("shuffle-batch-clip-as-printed").build(_ns(group_size=4)).get_epsilon(1e-5)
    assert pr.kind == "approximation" and pr.value < ex.value
    ic = registry.get("shuffle-individual-clip-exact").build(_ns(group_size=4)).get_epsilon(1e-5)
    assert abs(ic.value - 55.04) < 0.05
    ss = registry.get("subsample-batch-clip-exact").build(_ns()).get_epsilon(1e-5)
    assert abs(ss.value - 22.46) < 0.02
    # add_arguments is idempotent and parses the documented options
    p = argparse.ArgumentParser()
    registry.get("shuffle-batch-clip").add_arguments(p)
    registry.get("shuffle-batch-clip-exact").add_arguments(p)
    a = p.parse_args(["--epochs", "10", "--group-size", "4", "--dataset-size", "60000", "--batch-size", "250"])
    assert (a.epochs, a.group_size, a.dataset_size, a.batch_size) == (10, 4, 60000, 250)


def test_bad_inputs():
    with pytest.raises(DPValueError, match="sigma"):
        sh.bc_shuffle_mu(0.0, 10, 1)
    with pytest.raises(DPValueError, match="epochs"):
        sh.bc_shuffle_mu(1.0, 0, 1)
    with pytest.raises(DPValueError, match="dataset_size"):
        sh.bc_shuffle_law(1001, 100, 2)
    with pytest.raises(DPValueError, match="delta"):
        sh.gdp_epsilon(0.0, 1.0)
    with pytest.raises(DPValueError, match="alpha"):
        sh.mixture_tradeoff(1.5, sh.bc_shuffle_law(100, 10, 2), 1.0)
    with pytest.raises(DPValueError, match="epochs"):
        from dputils.accountants import registry

        registry.get("shuffle-batch-clip").build(_ns(epochs=None))
    with pytest.raises(NumericalError):
        sh.lower_bound_epsilon(1e-5, 2.0, 1e-3, 1.0)  # delta below the additive tail


def test_thm_f1_upper_bound_dominates_exact_epoch():
    # Thm 5.5: any valid h, in particular the exact per-epoch f, lies below f^U with c^U = sqrt(g), u of Thm F.1
    for N, s, g in [(60000, 250, 2), (50000, 250, 4), (10000, 50, 3)]:
        u = sh.thm_f1_bc_upper_u(N, s, g)
        law = sh.bc_shuffle_law(N, s, g)
        assert law.cdf_below(g) <= u  # u bounds the left tail P(c^2 < g) (exact law)
        a = np.linspace(0, 1, 301)
        assert np.all(sh.mixture_tradeoff(a, law, 1.5) <= sh.upper_bound_tradeoff(a, math.sqrt(g), u, 1.5) + 1e-9)


def test_thm_f1_ic_tail_values():
    for g, want in {2: 0.020, 4: 0.080, 8: 0.320}.items():
        assert abs(sh.thm_f1_ic_tail(50000, 250, 1, g) - want) < 5e-4  # note section 2.6
    # it does bound the probability that two group members share a round (exact partition law, per epoch)
    for g in (2, 4, 8):
        law = sh.ic_shuffle_law(50000, 250, g)
        assert law.sf(g) <= sh.thm_f1_ic_tail(50000, 250, 1, g)


def test_cli_epsilon_shuffle_batch_clip():
    import json
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "dputils",
        "epsilon",
        "--accountant",
        "shuffle-batch-clip",
        "--sigma",
        "2",
        "--epochs",
        "50",
        "--group-size",
        "4",
        "--delta",
        "1e-5",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0 and "invalid choice" in out.stderr:  # pragma: no cover - CLI not in this checkout
        pytest.skip("dputils CLI without the epsilon command")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert abs(res["epsilon"] - 54.38) < 0.01 and res["accountant"] == "shuffle-batch-clip"  # note target 2
    bad = subprocess.run(
        cmd[:-6] + ["--group-size", "4", "--delta", "1e-5"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode != 0 and "epochs" in bad.stderr


def test_lemma_e4_example_and_validity():
    r = sh.lemma_e4_as_printed(60000, 256, 1, 10, gamma=1.0)
    assert (
        abs(r["beta"] - 3.730) < 1e-3 and abs(math.sqrt(r["cL2"]) - 6.107) < 1e-3 and abs(r["l"] - 4.54e-5) < 1e-7
    )  # note 2.5
    # for g = 1 the exact Binomial tail beyond (c^L)^2 is indeed below l (the Chernoff step is sound)
    for E in (1, 5, 10, 50):
        r = sh.lemma_e4_as_printed(60000, 256, 1, E)
        assert sh.subsample_ic_g1_law(60000, 256, E).sf(r["cL2"]) <= r["l"]


# ------------------------------------------------------------------------------------------ one accountant family
# The training runs are mechanisms and the two accountants compose them (issue 14). Anchors: the numbers the
# pre-package code gave (recorded from results/shuffling_batch_clipping.json of a smoke run before the change:
# sigma = 2, E = 10, N = 50000, s = 250, delta = 1e-5), mpmath, brute-force enumeration and the note's numbers.

_OLD_PATH = {  # g -> (bound, exact occupancy mixture, printed law, individual clipping) before the refactor
    1: (7.511275900744781, 7.511275900819896, 7.511275900819896, 7.511275900819896),
    4: (17.856586830107627, 17.78362863187617, 17.711482015333054, 18.103344474142762),
}


def _mp_gdp_delta(eps, mu):
    mp.mp.dps = 40
    mu = mp.mpf(mu)
    return float(mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2))


@pytest.mark.parametrize("g", sorted(_OLD_PATH))
def test_compose_path_equals_the_old_path(g):
    bound, exact, printed, ic = _OLD_PATH[g]
    run = sh.ShuffledBatchClipping(2.0, 10, g, 50000, 250)
    r = sh.GDPBoundAccountant().compose(run).get_epsilon(1e-5)
    assert r.kind == "upper-bound" and r.upper == r.value and r.lower is None
    assert r.value == pytest.approx(bound, rel=1e-11)
    assert abs(r.value - _mp_gdp_epsilon(1e-5, math.sqrt(10 * g) / 2)) < 1e-8  # mpmath, independent
    # the old path's bracket had a 1e-11 step: the new bisection brackets to 1e-12 relative
    m = sh.MixtureAccountant().compose(run).get_epsilon(1e-5)
    assert m.kind == "exact" and m.lower <= m.value <= m.upper and m.upper - m.lower < 1e-9 * m.value
    assert m.value == pytest.approx(exact, rel=2e-11)
    p = sh.MixtureAccountant("as-printed").compose(run).get_epsilon(1e-5)
    assert p.kind == "approximation" and p.lower is None and p.value == pytest.approx(printed, rel=2e-11)
    i = sh.MixtureAccountant().compose(sh.ShuffledIndividualClipping(2.0, 10, g, 50000, 250)).get_epsilon(1e-5)
    assert i.value == pytest.approx(ic, rel=2e-11)
    if g == 1:  # c^2 = E deterministically: the exact mixture is G_(sqrt(E)/sigma), the bound is tight
        assert m.lower <= r.value <= m.upper * (1 + 1e-12)


def test_compose_note_anchors():
    # the note's section 8 numbers (sigma = 2, E = 50, N = 50000, s = 250), as the registry test above
    g4 = sh.ShuffledBatchClipping(2.0, 50, 4, 50000, 250)
    assert abs(sh.GDPBoundAccountant().compose(g4).get_epsilon(1e-5).value - 54.38) < 0.01
    assert abs(sh.MixtureAccountant().compose(g4).get_epsilon(1e-5).value - 54.09) < 0.05
    ic = sh.ShuffledIndividualClipping(2.0, 50, 4, 50000, 250)
    assert abs(sh.MixtureAccountant().compose(ic).get_epsilon(1e-5).value - 55.04) < 0.05
    ss = sh.SubsampledBatchClipping(2.0, 50, 1, 50000, 250)
    assert abs(sh.MixtureAccountant().compose(ss).get_epsilon(1e-5).value - 22.46) < 0.02


def test_gdp_bound_composition_adds_mu_in_quadrature():
    acc = sh.GDPBoundAccountant()
    acc.compose(sh.ShuffledBatchClipping(2.0, 10, 4), count=3).compose(sh.ShuffledBatchClipping(3.0, 7, 4))
    mu = math.sqrt(3 * 4 * 10 / 2.0**2 + 4 * 7 / 3.0**2)  # closed form: G_a (x) G_b = G_sqrt(a^2 + b^2)
    assert acc.mu() == pytest.approx(mu, rel=1e-14)
    assert abs(acc.get_epsilon(1e-6).value - _mp_gdp_epsilon(1e-6, mu)) < 1e-8
    for eps in (0.5, 3.0, 10.0):
        assert acc.get_delta(eps).value == pytest.approx(_mp_gdp_delta(eps, mu), rel=1e-10)
    # count = k is k epochs more; individual clipping with g = 1 is G_(sqrt(E)/sigma) (Lemma F.2)
    a = sh.GDPBoundAccountant().compose(sh.ShuffledBatchClipping(2.0, 5, 1), count=4)
    b = sh.GDPBoundAccountant().compose(sh.ShuffledIndividualClipping(2.0, 20))
    assert a.mu() == pytest.approx(math.sqrt(20) / 2, rel=1e-15) == b.mu()
    assert a.get_epsilon(1e-5).details["runs"][0]["count"] == 4


def test_mixture_composition_is_the_labelled_product():
    # a shuffled run twice and a subsampled run once, sigma 1.5, g = 2, N = 12, s = 3. Reference: the shuffle
    # law by enumerating all placements, the subsample law as Binomial(T = N E / s, 1 - C(N-g, s)/C(N, s))
    # written out here, and delta = sum over the labels of the product law of the mpmath GDP delta at
    # mu = sqrt(c1^2 + c2^2 + c3^2)/sigma.
    N, s, g, sig = 12, 3, 2, 1.5
    shuf = _enumerate_law(N, s, 1, g)
    q1 = 1 - math.comb(N - g, s) / math.comb(N, s)
    T = N * 2 // s  # two epochs of subsampling
    sub = {k: math.comb(T, k) * q1**k * (1 - q1) ** (T - k) for k in range(T + 1)}
    acc = sh.MixtureAccountant()
    acc.compose(sh.ShuffledBatchClipping(sig, 1, g, N, s), count=2)
    acc.compose(sh.SubsampledBatchClipping(sig, 2, g, N, s))
    for eps in (0.0, 0.7, 2.5):
        ref = sum(
            pa * pb * pc * (_mp_gdp_delta(eps, math.sqrt(a + b + c) / sig) if a + b + c else 0.0)
            for a, pa in shuf.items()
            for b, pb in shuf.items()
            for c, pc in sub.items()
        )
        r = acc.get_delta(eps)
        assert r.kind == "exact" and r.lower <= ref * (1 + 1e-12) and ref <= r.upper * (1 + 1e-12)
        assert r.value == pytest.approx(ref, rel=1e-10)
    # count = k equals k epochs (the per-epoch law convolved): the same answers, not just the same law
    a = sh.MixtureAccountant().compose(sh.ShuffledBatchClipping(2.0, 2, 4, 50000, 250), count=5)
    b = sh.MixtureAccountant().compose(sh.ShuffledBatchClipping(2.0, 10, 4, 50000, 250))
    assert a.get_epsilon(1e-5).value == pytest.approx(b.get_epsilon(1e-5).value, rel=1e-12)
    assert a.law.max_c2 == 40


def test_supports_and_refusals_name_the_mechanism():
    from dputils import GaussianMechanism

    bc = sh.ShuffledBatchClipping(2.0, 10, 4, 1000, 10)
    bc_no_sizes = sh.ShuffledBatchClipping(2.0, 10, 4)
    ic4 = sh.ShuffledIndividualClipping(2.0, 10, 4, 1000, 10)
    ss = sh.SubsampledBatchClipping(2.0, 10, 4, 1000, 10)
    gdp, mix, printed = sh.GDPBoundAccountant(), sh.MixtureAccountant(), sh.MixtureAccountant("as-printed")
    assert gdp.supports(bc) and gdp.supports(bc_no_sizes) and gdp.supports(sh.ShuffledIndividualClipping(1.0, 3))
    assert not gdp.supports(ic4) and not gdp.supports(ss) and not gdp.supports(GaussianMechanism(1.0))
    assert mix.supports(bc) and mix.supports(ic4) and mix.supports(ss) and not mix.supports(bc_no_sizes)
    assert printed.supports(bc) and not printed.supports(ic4) and not printed.supports(ss)
    cases = [
        (gdp, ic4, "ShuffledIndividualClipping.*group_size=4"),
        (gdp, ss, "SubsampledBatchClipping.*subsampling"),
        (gdp, GaussianMechanism(1.0), "GaussianMechanism"),
        (mix, bc_no_sizes, "ShuffledBatchClipping.*dataset_size and batch_size"),
        (mix, GaussianMechanism(1.0), "GaussianMechanism"),
        (printed, ic4, "ShuffledIndividualClipping.*printed law"),
    ]
    for acc, mech, msg in cases:
        with pytest.raises(DPValueError, match=msg):
            acc.check_supported(mech)
        with pytest.raises(DPValueError, match=msg):
            acc.compose(mech)
    assert not gdp.ledger and not mix.ledger  # refused runs leave the ledger as it was
    # composition that is not exact (or not on our grid) is refused, saying why
    mix.compose(bc)
    with pytest.raises(DPValueError, match="sigma 3.0 differs .* integer grid of one sigma"):
        mix.compose(sh.ShuffledBatchClipping(3.0, 10, 4, 1000, 10))
    with pytest.raises(DPValueError, match="group_size 2 differs .* same group"):
        mix.compose(sh.ShuffledBatchClipping(2.0, 10, 2, 1000, 10))
    gdp.compose(bc)
    assert gdp.supports(sh.ShuffledBatchClipping(5.0, 1, 4)) and not gdp.supports(sh.ShuffledBatchClipping(5.0, 1, 2))
    with pytest.raises(DPValueError, match="count"):
        gdp.compose(bc, count=0)
    assert len(mix.ledger) == 1 and len(gdp.ledger) == 1
    for fresh in (sh.GDPBoundAccountant(), sh.MixtureAccountant()):
        with pytest.raises(DPValueError, match="nothing composed yet"):
            fresh.get_epsilon(1e-5)
    with pytest.raises(DPValueError, match="law"):
        sh.MixtureAccountant("printed")


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: sh.ShuffledBatchClipping(0.0, 10), "sigma"),
        (lambda: sh.ShuffledBatchClipping(1.0, 0), "epochs"),
        (lambda: sh.ShuffledBatchClipping(1.0, 2.5), "epochs"),
        (lambda: sh.ShuffledBatchClipping(1.0, 10, 0), "group_size"),
        (lambda: sh.ShuffledBatchClipping(1.0, 10, 1, 1000), "batch_size must be given"),
        (lambda: sh.ShuffledBatchClipping(1.0, 10, 1, None, 10), "dataset_size must be given"),
        (lambda: sh.ShuffledBatchClipping(1.0, 10, 1, 1001, 10), "dataset_size must be a multiple of batch_size"),
        (lambda: sh.ShuffledIndividualClipping(1.0, 10, 20, 10, 5), "group_size must be <= dataset_size"),
        (lambda: sh.ShuffledIndividualClipping(1.0, 10, 2).mu, "group_size must be 1"),
        (lambda: sh.SubsampledBatchClipping(1.0, 10, 1), "dataset_size must be given"),
        (lambda: sh.SubsampledBatchClipping(1.0, 10, 5, 10, 6), "batch_size \\+ group_size"),
    ],
)
def test_training_runs_are_validated_on_construction(call, word):
    with pytest.raises(DPValueError, match=word):
        call()


def test_training_runs_are_frozen():
    import dataclasses

    run = sh.ShuffledBatchClipping(2.0, 10, 4, 1000, 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.sigma = 1.0
    assert run.as_dict() == {"sigma": 2.0, "epochs": 10, "group_size": 4, "dataset_size": 1000, "batch_size": 10}
    assert run == sh.ShuffledBatchClipping(2, 10, 4, 1000, 10) and hash(run) == hash(
        sh.ShuffledBatchClipping(2.0, 10, 4, 1000, 10)
    )


def test_registered_shuffling_accountants_are_one_family():
    from dputils import cli  # noqa: F401  (registers the command-line hooks)
    from dputils.accountants import registry
    from dputils.accountants.base import Accountant

    for n in (
        "shuffle-batch-clip",
        "shuffle-batch-clip-exact",
        "shuffle-batch-clip-as-printed",
        "shuffle-individual-clip-exact",
        "subsample-batch-clip-exact",
    ):
        acc = registry.get(n).build(_ns(epochs=5, group_size=2, dataset_size=1000, batch_size=10))
        assert isinstance(acc, Accountant) and len(acc.ledger) == 1
        run, count = acc.ledger[0]
        assert count == 1 and isinstance(run, sh.TRAINING_RUNS) and acc.supports(run)
        assert run.as_dict()["epochs"] == 5 and run.group_size == 2


# ------------------------------------------------------------------------------------------ Lemma E.4's law
def test_subsample_ic_law_g1_is_the_binomial_of_lemma_e2():
    a = sh.subsample_ic_law(60000, 256, 1, 10).pmf
    b = sh.subsample_ic_g1_law(60000, 256, 10).pmf
    assert a.size == b.size and np.max(np.abs(a - b)) < 1e-12


def test_subsample_ic_law_matches_monte_carlo_and_brute_force():
    # independent checks: the simulation of Algorithm 1's index sampling (s = 1), and for one round a
    # brute-force count over all batches of a tiny data set
    import itertools

    rng = np.random.default_rng(3)
    n = 20000
    mc = sh.monte_carlo_c2_law(6000, 1, 60, 3, n, rng, sampler="subsample", epochs=2)
    ex = sh.subsample_ic_law(6000, 60, 3, 2)
    for k in range(0, 16):
        p = ex.sf(k)
        assert abs(mc.sf(k) - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-4, k
    N, m, g = 8, 3, 3  # group = samples 0, 1, 2; one epoch of N/m rounds is not an integer: one round only
    counts = np.zeros(10)
    for batch in itertools.combinations(range(N), m):
        k = sum(1 for i in batch if i < g)
        counts[k * k] += 1
    one_round = sh.subsample_ic_law(N * 1, m, g, 1)  # T = round(8/3) = 3 rounds
    brute = sh.C2Law(counts / counts.sum()).compose(3)
    assert np.max(np.abs(one_round.pmf - brute.pmf)) < 1e-14


def test_lemma_e4_tail_holds_for_groups():
    for g in (2, 4):
        law = sh.subsample_ic_law(60000, 256, g, 10)
        r = sh.lemma_e4_as_printed(60000, 256, g, 10)
        assert law.sf(r["cL2"]) <= r["l"]
        assert abs(law.mean - 10 * g * (1 + (g - 1) * 255 / 59999)) < 0.2  # E[K^2] = gm/N (1 + (g-1)(m-1)/(N-1))


def test_subsample_ic_law_bad_input():
    from dputils.errors import DPValueError

    with pytest.raises(DPValueError):
        sh.subsample_ic_law(10, 9, 2, 1)
    with pytest.raises(DPValueError):
        sh.subsample_ic_law(100, 10, 0, 1)
