"""Tests of dputils.matrix: strategies, the Renyi dynamic program, conversion, calibration, Monte Carlo.

References are independent of the code under test: brute-force enumeration of Eq. 5, an mpmath
partition sum (Feldman-Shenfeld form), closed-form Gaussian formulas, dp_accounting's RDP conversion,
and anchors from the notes (computed by a separate scratch implementation).
"""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import norm

from dputils.accountants.rdp import rdp_to_delta, rdp_to_epsilon
from dputils.errors import DPValueError
from dputils.matrix import (
    build_strategy,
    feldman_shenfeld_rdp,
    log_partition_bruteforce,
    log_partition_dp,
    rho_add_lemma34,
    rho_remove,
    truncate_gram,
)
from dputils.matrix.allocation import MatrixMonteCarloAccountant, MatrixRenyiAccountant, calibrate_sigma
from dputils.matrix.mechanism import BallsInBinsMatrixMechanism


# The accountants take only method options and compose a mechanism; most tests account one run.
def _acc_renyi(strategy, sigma, **options):
    return MatrixRenyiAccountant(**options).compose(BallsInBinsMatrixMechanism(strategy, sigma))


def _acc_tight(strategy, sigma, **options):
    return MatrixRenyiTightAccountant(**options).compose(BallsInBinsMatrixMechanism(strategy, sigma))


def _acc_mc(strategy, sigma, **options):
    return MatrixMonteCarloAccountant(**options).compose(BallsInBinsMatrixMechanism(strategy, sigma))


# ------------------------------------------------------------------------------------ Gram anchors (note, sec. 3)
@pytest.mark.parametrize(
    "name,k,p,row,taus",
    [
        ("bsr", 1, 4, [1.4883, 1.4883, 0.8047, 0.5312, 0.3125, 0.0, 0.0], [0.8047, 0.5312, 0.3125, 0, 0, 0, 0]),
        ("bsr", 10, 4, [14.8828, 14.8828, 8.0469, 5.3125, 3.1250, 0.0, 7.2422], [8.0469, 5.3125, 3.125, 0, 0, 0, 0]),
        (
            "bisr",
            1,
            4,
            [1.6224, 1.6224, 0.9810, 0.7546, 0.6013, 0.4563, 0.0],
            [0.981, 0.7546, 0.6013, 0.4563, 0.3505, 0.2699, 0.2073],
        ),
        (
            "bisr",
            10,
            4,
            [16.2240, 16.2240, 9.8099, 7.5461, 6.0133, 4.5630, 8.8289],
            [9.81, 7.546, 6.013, 4.563, 3.505, 2.699, 2.073],
        ),
        (
            "bsr",
            1,
            64,
            [2.3888, 2.3099, 1.6701, 1.4546, 1.3240, 1.2296, 0.0],
            [1.7497, 1.535, 1.4051, 1.3115, 1.2382, 1.1776, 1.1259],
        ),
    ],
)
def test_gram_anchors(name, k, p, row, taus):
    G = build_strategy(name, k, 100, p).gram
    got = [G[0, 0], G[50, 50], G[50, 51], G[50, 52], G[50, 53], G[50, 54], G[0, 99]]
    np.testing.assert_allclose(got, row, atol=6e-4)  # anchors printed to 4 decimals
    np.testing.assert_allclose([truncate_gram(G, q)[1] for q in range(1, 8)], taus, atol=6e-4, rtol=1e-3)


def test_identity_gram_is_k_identity():
    G = build_strategy("identity", 3, 7).gram
    np.testing.assert_array_equal(G, 3 * np.eye(7))


def test_bisr_coefficients():
    c = build_strategy("bisr", 1, 10, 4).coefs
    np.testing.assert_allclose(c[:8], [1, 0.5, 0.375, 0.3125, 0.234375, 0.1796875, 0.13867188, 0.10644531], rtol=1e-7)


@pytest.mark.parametrize("name", ["bandmf", "blt"])
def test_optimised_strategies_nonnegative_and_better_than_bsr(name):
    # both are optimised for the error objective, bandmf from the BSR start: neither may be worse than BSR
    # with 4 bands (BLT is dense, so it is not limited to 4 bands: at b = 50 it gives 4.42 against BSR's 9.05)
    s = build_strategy(name, 1, 50, 4)
    assert (s.C >= 0).all()
    assert s.error() <= build_strategy("bsr", 1, 50, 4).error() * (1 + 1e-9)
    assert s.error() < build_strategy("identity", 1, 50).error()


# ------------------------------------------------------------------------------------ DP = brute force (target 1)
def _cases():
    rng = np.random.default_rng(1)
    for b in range(2, 8):
        for p in (1, 2, 3, 4):
            for alpha in (2, 3, 4, 5):
                if b**alpha <= 20000:
                    X = rng.random((b, 6))
                    yield b, p, alpha, X @ X.T, float(rng.uniform(0.6, 1.5))


@pytest.mark.parametrize("b,p,alpha,G,sigma", list(_cases()))
def test_dp_matches_bruteforce(b, p, alpha, G, sigma):
    Gp, _ = truncate_gram(G, p)  # random dense G: wrap-around entries present for p >= 2
    dp = log_partition_dp(Gp, sigma, alpha, p)[alpha]
    bf = log_partition_bruteforce(Gp, sigma, alpha)
    assert dp == pytest.approx(bf, rel=1e-9, abs=1e-12)


def test_truncation_is_upper_bound_and_monotone_in_p():
    G = build_strategy("bisr", 1, 6, 4).gram
    sigma, alpha = 0.9, 4
    exact = log_partition_bruteforce(G, sigma, alpha)
    prev = np.inf
    for p in (1, 2, 3, 4):
        Gp, tau = truncate_gram(G, p)
        bound = log_partition_dp(Gp, sigma, alpha, p)[alpha] + alpha * (alpha - 1) * tau / (2 * sigma**2)
        assert bound >= exact - 1e-12
        assert bound <= prev + 1e-12
        prev = bound
    assert prev == pytest.approx(exact, rel=1e-12)  # p = 4 covers every cyclic distance of b = 6: tau = 0


# ------------------------------------------------------------------------------------ Feldman-Shenfeld (target 2)
@pytest.mark.parametrize(
    "b,sigma,alpha,anchor", [(100, 1.0, 5, 0.0439635), (100, 0.7, 20, 15.80299), (1000, 2.0, 30, 0.0042630)]
)
def test_dpsgd_equals_feldman_shenfeld(b, sigma, alpha, anchor):
    rho, tau = rho_remove(np.eye(b), sigma, [alpha], 1)
    ref = feldman_shenfeld_rdp(b, sigma, alpha)  # mpmath partition sum, independent algorithm
    assert tau == 0
    assert rho[0] == pytest.approx(ref, rel=1e-9)
    assert rho[0] == pytest.approx(anchor, rel=2e-6)  # anchor printed to 6 significant digits


def test_add_bound_anchor():
    assert rho_add_lemma34(np.eye(100), 1.0, [2])[0] == pytest.approx(0.505, rel=1e-12)


# ------------------------------------------------------------------------------------ BSR / BISR rho table (sec. 4.4)
@pytest.mark.parametrize(
    "name,alpha,by_p,add",
    [
        ("bsr", 2, [0.81431, 0.55301, 0.35115, 0.07613], 0.76357),
        ("bsr", 3, [1.22152, 0.82974, 0.52750, 0.11772], 0.78711),
        ("bsr", 5, [2.03602, 1.38382, 0.88275, 0.22075], 0.83420),
        ("bisr", 2, [0.98970, 0.77277, 0.63027, 0.49984], 0.85216),
        ("bisr", 5, [2.47442, 1.93275, 1.57783, 1.25495], 0.99834),
    ],
)
def test_rho_table_anchors(name, alpha, by_p, add):
    G = build_strategy(name, 1, 100, 4).gram
    for p, ref in zip((1, 2, 3, 4), by_p):
        assert rho_remove(G, 1.0, [alpha], p)[0][0] == pytest.approx(ref, abs=6e-5)
    assert rho_add_lemma34(G, 1.0, [alpha])[0] == pytest.approx(add, abs=6e-5)


def test_gaussian_limit_one_slot():
    s = build_strategy("bsr", 4, 1, 3)  # b = 1: P and Q are single Gaussians
    G = s.gram
    orders = [2, 3, 7]
    exact = np.array(orders) * G[0, 0] / (2 * 1.3**2)
    np.testing.assert_allclose(rho_remove(G, 1.3, orders, 1)[0], exact, rtol=1e-12)
    np.testing.assert_allclose(rho_add_lemma34(G, 1.3, orders), exact, rtol=1e-12)


def test_epoch_identity():
    orders = range(2, 40)
    r1 = rho_remove(np.eye(50), 1.1, orders, 1)[0]
    rk = rho_remove(build_strategy("identity", 10, 50).gram, 1.1 * math.sqrt(10), orders, 1)[0]
    np.testing.assert_allclose(rk, r1, rtol=1e-12)


def test_rho_monotone_in_order_and_sigma():
    G = build_strategy("bsr", 1, 40, 3).gram
    r = rho_remove(G, 0.8, range(2, 30), 3)[0]
    assert np.all(np.diff(r) >= -1e-12)
    assert np.all(rho_remove(G, 1.0, range(2, 30), 3)[0] <= r + 1e-12)


# ------------------------------------------------------------------------------------ conversion
def test_conversion_matches_dp_accounting():
    from dp_accounting.rdp import rdp_privacy_accountant as ra

    orders = np.arange(2, 129)
    rho = orders * 1.0 / (2 * 3.0**2)  # plain Gaussian
    eps, a = rdp_to_epsilon(orders, rho, 1e-5)
    eps_ref, a_ref = ra.compute_epsilon(orders, rho, 1e-5)
    assert eps == pytest.approx(eps_ref, rel=1e-10) and a == a_ref
    d, _ = rdp_to_delta(orders, rho, eps)
    assert d == pytest.approx(1e-5, rel=1e-8)


# ------------------------------------------------------------------------------------ calibration (targets 3, 4)
@pytest.mark.parametrize("eps,anchor", [(0.5, 1.686), (1, 1.201), (2, 0.862), (4, 0.628), (8, 0.439)])
def test_calibrated_sigma_dpsgd_n100(eps, anchor):
    s = build_strategy("identity", 1, 100)
    sig = calibrate_sigma(lambda x: _acc_renyi(s, x), eps, 1e-5, rel_tol=1e-4)
    assert sig == pytest.approx(anchor, rel=5e-3)
    assert float(_acc_renyi(s, sig).get_delta(eps)) <= 1e-5  # conservative by construction


def test_calibrated_sigma_epoch_identity():
    s1 = build_strategy("identity", 1, 100)
    s10 = build_strategy("identity", 10, 100)
    a = calibrate_sigma(lambda x: _acc_renyi(s1, x), 2.0, 1e-5, rel_tol=1e-6)
    b = calibrate_sigma(lambda x: _acc_renyi(s10, x), 2.0, 1e-5, rel_tol=1e-6)
    assert b == pytest.approx(math.sqrt(10) * a, rel=3e-6)
    assert b == pytest.approx(2.727, rel=5e-3)


# ------------------------------------------------------------------------------------ Monte Carlo
def test_mc_one_slot_matches_gaussian_closed_form():
    s = build_strategy("identity", 1, 1)  # b = 1: N(1, sigma^2) vs N(0, sigma^2)
    sigma, eps = 1.0, 1.0
    mc = _acc_mc(s, sigma, samples=400_000, seed=3).get_delta(eps)
    mu = 1 / sigma
    exact = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert mc.lower <= exact <= mc.upper
    assert float(mc) == pytest.approx(exact, rel=0.03)


def test_mc_below_renyi_bound():
    s = build_strategy("identity", 1, 20)
    sigma, eps = 1.0, 1.0
    mc = _acc_mc(s, sigma, samples=200_000, seed=0).get_delta(eps)
    rn = _acc_renyi(s, sigma).get_delta(eps)
    assert mc.lower <= float(rn)


def test_mc_renyi_divergence_matches_dp():
    # E_Q[(p/q)^alpha] = exp((alpha-1) R_alpha(P||Q)) estimated from Gaussian samples vs the DP value
    s = build_strategy("bsr", 1, 8, 2)
    G, sigma, alpha = s.gram, 1.5, 3
    rho = rho_remove(G, sigma, [alpha], 2)[0][0]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400_000, s.n)) * sigma
    m = s.means
    logratio = np.log(np.mean(np.exp((x @ m.T) / sigma**2 - (m * m).sum(1) / (2 * sigma**2)), axis=1))
    est = np.log(np.mean(np.exp(alpha * logratio))) / (alpha - 1)
    assert est == pytest.approx(rho, rel=0.03)


# ------------------------------------------------------------------------------------ errors and CLI
def test_bad_inputs():
    with pytest.raises(DPValueError, match="matrix"):
        build_strategy("nope", 1, 10)
    with pytest.raises(DPValueError, match="epochs"):
        build_strategy("bsr", 0, 10, 2)
    with pytest.raises(DPValueError, match="sigma"):
        _acc_renyi(build_strategy("identity", 1, 10), -1.0)
    with pytest.raises(DPValueError, match="delta"):
        _acc_renyi(build_strategy("identity", 1, 10), 1.0).get_epsilon(2.0)
    with pytest.raises(DPValueError, match="budget"):
        G = build_strategy("bsr", 1, 100, 4).gram
        log_partition_dp(truncate_gram(G, 4)[0], 1.0, 200, 4)


def test_cli_epsilon():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dputils",
            "epsilon",
            "--accountant",
            "matrix-renyi",
            "--mechanism",
            "balls-in-bins",
            "--matrix",
            "identity",
            "--epochs",
            "1",
            "--batches",
            "100",
            "--sigma",
            "1.2014",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    res = json.loads(out.stdout)
    assert res["epsilon"] == pytest.approx(1.0, abs=2e-3)
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "dputils",
            "epsilon",
            "--accountant",
            "matrix-renyi",
            "--mechanism",
            "gaussian",
            "--sigma",
            "1",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "mechanism" in (bad.stderr + bad.stdout)


# ------------------------------------------------------------------------------------ tight add direction
from dputils.matrix.allocation import MatrixRenyiTightAccountant  # noqa: E402
from dputils.matrix.renyi import (  # noqa: E402
    log_neg_moment_independent,
    rho_add_class_bound,
    rho_add_exact_independent,
    rho_add_tight,
    slot_classes,
)


def _mp_two_slot_log_moment(v, r):
    """log E[((W1 + W2)/2)^-r] for independent mean-one lognormals of log-variance v, in mpmath.

    Rotating (z1, z2) to u = (z1+z2)/sqrt2, w = (z1-z2)/sqrt2: (W1+W2)/2 = e^{-v/2} e^{a u/sqrt2} cosh(a w/sqrt2),
    so the moment is exp(r v/2 + r^2 v/4) E[cosh(a w / sqrt2)^-r] (a = sqrt v): a 1-d integral.
    """
    import mpmath as mp

    with mp.workdps(30):
        a = mp.sqrt(v)
        f = lambda w: mp.exp(-w * w / 2) / mp.sqrt(2 * mp.pi) * mp.cosh(a * w / mp.sqrt(2)) ** (-r)  # noqa: E731
        return float(r * v / 2 + r * r * v / 4 + mp.log(mp.quad(f, [-mp.inf, -5, 0, 5, mp.inf])))


@pytest.mark.parametrize(
    "v,r", [(1.0, 1), (1.0, 3), (0.25, 5), (4.0, 6), (9.0, 30), (25.0, 60), (0.01, 100), (1.0, 127)]
)
def test_negative_moment_two_slots_matches_mpmath(v, r):
    ours, err = log_neg_moment_independent([v, v], [r], return_error=True)
    ref = _mp_two_slot_log_moment(v, r)
    assert ours[0] >= ref - 1e-12 * abs(ref)  # an upper bound (margin added) ...
    assert ours[0] - ref <= 2e-9 * (1 + abs(ref))  # ... and exact up to the margin 1e-10 (1 + |value|)
    assert err[0] < 1e-8 * (1 + abs(ref))


def test_negative_moment_one_slot_closed_form():
    r = np.array([1, 4, 50])
    np.testing.assert_allclose(log_neg_moment_independent([0.7], r), r * (r + 1) * 0.7 / 2, rtol=1e-15)


def _gh_log_moment(Sigma, r, nodes):
    """log E[((1/b) sum_i exp(Y_i - Sigma_ii/2))^-r], Y ~ N(0, Sigma), by tensor Gauss-Hermite (b <= 3)."""
    from itertools import product as iproduct

    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    b = Sigma.shape[0]
    L = np.linalg.cholesky(Sigma + 1e-300 * np.eye(b))
    Z = np.array(list(iproduct(x, repeat=b)))
    W = np.prod(np.array(list(iproduct(w, repeat=b))), axis=1)
    Y = Z @ L.T
    S = np.mean(np.exp(Y - np.diag(Sigma) / 2), axis=1)
    return float(np.log(np.sum(W * S ** (-r))))


@pytest.mark.parametrize(
    "G,sigma",
    [
        (np.array([[1.0, 0.6], [0.6, 1.0]]), 1.0),  # exchangeable pair: c = 1 is exact
        (np.array([[2.0, 0.3], [0.3, 2.0]]), 1.5),
        (np.array([[1.0, 1.2], [1.2, 2.0]]), 1.0),  # G_12 > G_11: the variance raise of step 2 is needed
        (np.array([[1.0, 0.5, 0.1], [0.5, 1.2, 0.4], [0.1, 0.4, 0.8]]), 1.0),
    ],
)
def test_class_bound_against_quadrature(G, sigma):
    orders = [2, 3, 4]
    r = np.array(orders) - 1.0
    b = G.shape[0]
    nodes = 60 if b == 2 else 36
    exact = np.array([_gh_log_moment(G / sigma**2, rr, nodes) for rr in r]) / r
    check = np.array([_gh_log_moment(G / sigma**2, rr, nodes + 12) for rr in r]) / r
    np.testing.assert_allclose(exact, check, rtol=1e-9)  # the reference itself is converged
    for c in range(1, b + 1):
        bound = rho_add_class_bound(G, sigma, orders, slot_classes(b, c))
        assert np.all(bound >= exact - 1e-12)
    tight = rho_add_tight(G, sigma, orders)
    assert np.all(tight >= exact - 1e-12)
    assert np.all(tight <= rho_add_lemma34(G, sigma, orders) + 1e-15)
    if b == 2 and G[0, 0] == G[1, 1]:
        # equal variances, one class: raising the covariance to G_12 changes nothing, so the bound is exact
        np.testing.assert_allclose(rho_add_class_bound(G, sigma, orders, slot_classes(2, 1)), exact, rtol=1e-8)


def _mc_add_divergence(strategy, sigma, orders, samples, seed):
    """Monte Carlo estimate of R_alpha(Q||P) and its standard error (delta method), per order."""
    L = _acc_mc(strategy, sigma, samples=samples, seed=seed, direction="add").losses()["add"]
    est, se = [], []
    for a in orders:
        x = np.exp((a - 1) * (L - L.max()))
        m = x.mean()
        est.append((np.log(m) + (a - 1) * L.max()) / (a - 1))
        se.append(x.std(ddof=1) / (m * math.sqrt(x.size)) / (a - 1))
    return np.array(est), np.array(se)


def test_add_divergence_dpsgd_anchor_and_mc():
    # note 2.3.5: R_2(Q||P) ~ 0.0165 for DP-SGD, b = 100, sigma = 1 (MC, 1e6 samples); exact here
    s = build_strategy("identity", 1, 100)
    orders = [2, 3, 5]
    exact = rho_add_exact_independent(s.gram, 1.0, orders)
    mc, se = _mc_add_divergence(s, 1.0, orders, 1_000_000, 0)
    assert exact[0] == pytest.approx(0.0165, abs=5e-4)
    assert np.all(np.abs(exact - mc) <= 4 * se), (exact, mc, se)
    np.testing.assert_allclose(rho_add_tight(s.gram, 1.0, orders), exact, rtol=1e-12)  # c = 1 is exact


def test_add_exact_independent_epoch_identity():
    orders = range(2, 30)
    a = rho_add_exact_independent(np.eye(50), 1.1, orders)
    b = rho_add_exact_independent(build_strategy("identity", 10, 50).gram, 1.1 * math.sqrt(10), orders)
    np.testing.assert_allclose(a, b, rtol=1e-9)
    with pytest.raises(DPValueError, match="diagonal"):
        rho_add_exact_independent(build_strategy("bsr", 1, 10, 2).gram, 1.0, [2])


@pytest.mark.parametrize(
    "name,k,p,sigma", [("bsr", 1, 4, 1.0), ("bisr", 1, 4, 1.0), ("blt", 1, 1, 1.5), ("bsr", 10, 4, 4.0)]
)
def test_tight_add_bound_above_mc_and_below_lemma34(name, k, p, sigma):
    s = build_strategy(name, k, 100, p)
    orders = [2, 3, 5]
    tight, det = rho_add_tight(s.gram, sigma, orders, return_details=True)
    l34 = rho_add_lemma34(s.gram, sigma, orders)
    mc, se = _mc_add_divergence(s, sigma, orders, 300_000, 1)
    assert np.all(tight >= mc - 4 * se), (tight, mc, se)  # a valid bound cannot fall below the estimate
    assert np.all(tight <= l34)
    if name == "bsr":
        assert tight[0] < 0.25 * l34[0]  # the classes i mod 4 are independent: a large gain
        assert det["classes"][0] == 4


def test_tight_never_above_lemma34_random():
    rng = np.random.default_rng(5)
    for _ in range(6):
        b = int(rng.integers(2, 12))
        X = rng.random((b, 5)) * rng.random((1, 5))
        G = X @ X.T
        sigma = float(rng.uniform(0.5, 2.0))
        assert np.all(rho_add_tight(G, sigma, range(2, 20)) <= rho_add_lemma34(G, sigma, range(2, 20)))


def test_tight_add_gaussian_limit_one_slot():
    s = build_strategy("bsr", 4, 1, 3)
    orders = [2, 3, 7]
    np.testing.assert_allclose(
        rho_add_tight(s.gram, 1.3, orders), np.array(orders) * s.gram[0, 0] / (2 * 1.3**2), rtol=1e-9
    )


def test_slot_classes_cyclic_separation():
    for b, c in [(100, 4), (101, 4), (103, 4), (30, 7)]:
        lab = slot_classes(b, c)
        assert lab.shape == (b,)
        d = np.abs(np.arange(b)[:, None] - np.arange(b)[None, :])
        d = np.minimum(d, b - d)
        same = (lab[:, None] == lab[None, :]) & ~np.eye(b, dtype=bool)
        assert d[same].min() >= c  # members of a class are at cyclic distance >= c


def test_tight_accountant_calibration_dpsgd():
    s = build_strategy("identity", 1, 100)
    sig_t = calibrate_sigma(lambda x: _acc_tight(s, x), 2.0, 1e-5, rel_tol=1e-4)
    sig_r = calibrate_sigma(lambda x: _acc_renyi(s, x), 2.0, 1e-5, rel_tol=1e-4)
    assert sig_t < sig_r
    assert sig_t >= 0.8063 * (1 - 2e-4)  # remove-only sigma of the note is a lower limit (rho >= rho_remove)
    assert sig_t >= 0.713 * 0.98  # Monte Carlo sigma (estimate, +-2%)
    acc = _acc_tight(s, sig_t)
    assert float(acc.get_delta(2.0)) <= 1e-5
    assert acc.get_epsilon(1e-5).details["add_bound"] == "tight"


def test_cli_epsilon_tight():
    args = [
        sys.executable,
        "-m",
        "dputils",
        "epsilon",
        "--mechanism",
        "balls-in-bins",
        "--matrix",
        "identity",
        "--epochs",
        "1",
        "--batches",
        "100",
        "--sigma",
        "1",
        "--delta",
        "1e-5",
        "--accountant",
    ]
    tight = json.loads(subprocess.run(args + ["matrix-renyi-tight"], capture_output=True, text=True, check=True).stdout)
    plain = json.loads(subprocess.run(args + ["matrix-renyi"], capture_output=True, text=True, check=True).stdout)
    assert tight["accountant"] == "matrix-renyi-tight" and tight["kind"] == "upper-bound"
    assert tight["epsilon"] < plain["epsilon"]
    bad = subprocess.run(args + ["matrix-renyi-tight", "--add-classes", "x"], capture_output=True, text=True)
    assert bad.returncode != 0 and "add-classes" in (bad.stderr + bad.stdout)


# ------------------------------------------------------------------------------------ DP backends (speed work)
from dputils.matrix import renyi as _renyi  # noqa: E402


def _backend_cases():
    yield build_strategy("bsr", 1, 30, 4).gram, 4, 14, 0.9  # single epoch, no wrap
    yield build_strategy("bsr", 10, 12, 3).gram, 3, 6, 0.6  # multi-epoch: wrap-around prefixes
    yield build_strategy("bisr", 1, 20, 3).gram, 3, 10, 0.3  # truncated dense G, small sigma
    yield build_strategy("identity", 1, 50).gram, 1, 40, 0.7  # p = 1: unfactored step
    X = np.random.default_rng(3).random((7, 4))
    yield X @ X.T, 3, 5, 1.1  # random G, b < 3p - 3 region of the closure


@pytest.mark.parametrize("case", list(range(5)))
@pytest.mark.parametrize("floor", [1e-200, 1e300])  # 1e300 forces the exact re-computation of every entry
@pytest.mark.parametrize("pivot", [True, False])  # pivot of the compiled step's linear sums
def test_dp_backends_agree(case, floor, pivot, monkeypatch):
    G, p, amax, sigma = list(_backend_cases())[case]
    monkeypatch.setattr(_renyi, "_UNDERFLOW_FLOOR", floor)
    monkeypatch.setattr(_renyi, "_NUMBA_PIVOT", pivot)
    Gp, _ = truncate_gram(G, p)
    ref = log_partition_dp(Gp, sigma, amax, p, backend="numpy")
    backends = ["vectorised"] + (["numba"] if _renyi.dp_backend("auto") == "numba" else [])
    for be in backends:
        got = log_partition_dp(Gp, sigma, amax, p, backend=be)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    if G.shape[0] <= 7:
        assert ref[amax] == pytest.approx(log_partition_bruteforce(Gp, sigma, amax), rel=1e-9)


def test_dp_backend_errors():
    with pytest.raises(DPValueError, match="backend"):
        log_partition_dp(np.eye(3), 1.0, 3, 1, backend="fortran")


def test_mc_calibration_on_the_confidence_bound_is_more_conservative():
    # the point estimate meets the target only on average; the empirical-Bernstein upper end meets it with the
    # stated confidence, so its sigma is larger, and both end at a sigma whose own number meets the target
    from dputils.matrix.allocation import calibrate_sigma

    strat = build_strategy("identity", 1, 20)
    make = lambda s: _acc_mc(strat, s, samples=20_000, seed=3)  # noqa: E731
    s_est = calibrate_sigma(make, 2.0, 1e-3, rel_tol=1e-3)
    s_up = calibrate_sigma(make, 2.0, 1e-3, rel_tol=1e-3, use="upper")
    assert s_up > s_est * 1.005
    assert make(s_up).get_delta(2.0).upper <= 1e-3 and float(make(s_est).get_delta(2.0)) <= 1e-3
    with pytest.raises(DPValueError, match="use"):
        calibrate_sigma(make, 2.0, 1e-3, use="lower")
