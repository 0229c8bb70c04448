"""The matrix accountants as members of the one accountant family (issue 14).

Each accountant is built from method options only and composes a ``BallsInBinsMatrixMechanism``. The
numbers are checked against references that do not use the code under test: the mpmath partition sum of
Feldman & Shenfeld for the remove divergence of DP-SGD, Lemma 3.4 written out here, Theorem 3.1 (Eq. 4) as
printed in the paper, dp_accounting's RDP conversion, the closed-form Gaussian profile, and the
PLD accountant's Gaussian profile.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dputils import GaussianMechanism, PLDAccountant, RDPAccountant, SubsampledGaussianMechanism
from dputils.accountants.edgeworth import EdgeworthAccountant
from dputils.accountants.gdp import GDPAccountant
from dputils.accountants.rdp import rdp_to_delta, rdp_to_epsilon
from dputils.accountants.spa import SaddlePointAccountant
from dputils.errors import DPValueError
from dputils.matrix import (
    BallsInBinsMatrixMechanism,
    ConditionalCompositionAccountant,
    MatrixMonteCarloAccountant,
    MatrixRenyiAccountant,
    MatrixRenyiTightAccountant,
    build_strategy,
    feldman_shenfeld_rdp,
    rho_add_exact_independent,
)

ORDERS = range(2, 13)
MATRIX_ACCOUNTANTS = {
    "matrix-renyi": lambda: MatrixRenyiAccountant(orders=ORDERS),
    "matrix-renyi-tight": lambda: MatrixRenyiTightAccountant(orders=ORDERS),
    "matrix-mc": lambda: MatrixMonteCarloAccountant(samples=20_000, seed=1),
    "matrix-condcomp": lambda: ConditionalCompositionAccountant(delta_e=1e-6, discretization=1e-2, progress=False),
}


def _mech(b: int = 10, sigma: float = 1.0, name: str = "identity", epochs: int = 1, bands: int = 1):
    return BallsInBinsMatrixMechanism(build_strategy(name, epochs, b, bands), sigma)


# ------------------------------------------------------------------------------- references written out here
def _eq4_delta(orders, rho, eps):
    """Theorem 3.1 (Eq. 4) as printed: exp((a-1)(rho-eps)) (1-1/a)^a / (a-1), min over orders, capped at 1
    (its logarithm is minimised, so that large orders do not overflow)."""
    logs = [(a - 1) * (r - eps) + a * math.log(1 - 1 / a) - math.log(a - 1) for a, r in zip(orders, rho)]
    i = int(np.argmin(logs))
    return min(math.exp(min(logs[i], 0.0)), 1.0), list(orders)[i]


def _eq4_epsilon(orders, rho, delta):
    """Eq. 4 solved for epsilon: rho + log((a-1)/a) - (log delta + log a)/(a-1), min over orders, >= 0."""
    vals = [r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1) for a, r in zip(orders, rho)]
    i = int(np.argmin(vals))
    return max(vals[i], 0.0), list(orders)[i]


def _lemma34_identity(b, sigma, orders):
    """Lemma 3.4 for C = I, one epoch (G = I_b): tr G/(2 b s^2) + (a-1) sum G/(2 b^2 s^2)."""
    return np.array([1 / (2 * sigma**2) + (a - 1) / (2 * b * sigma**2) for a in orders])


def _fs_remove(b, sigma, orders):
    return np.array([feldman_shenfeld_rdp(b, sigma, a) for a in orders])


def _gaussian_delta(mu, eps):
    """Exact delta(eps) of N(mu, 1) vs N(0, 1) (Balle & Wang 2018, Thm 8)."""
    return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)


# ------------------------------------------------------------------------------- the mechanism object
def test_mechanism_validated_on_construction_and_readable():
    s = build_strategy("bsr", 2, 8, 3)
    m = BallsInBinsMatrixMechanism(s, 1.5)
    assert repr(m) == "BallsInBinsMatrixMechanism(matrix='bsr', epochs=2, batches=8, bands=3, sigma=1.5)"
    assert (m.steps, m.epochs, m.batches, m.bands, m.matrix) == (16, 2, 8, 3, "bsr")
    assert m == BallsInBinsMatrixMechanism(s, 1.5) and m != BallsInBinsMatrixMechanism(s, 1.4)
    assert len({m, BallsInBinsMatrixMechanism(s, 1.5)}) == 1
    for bad in (0.0, -1.0, math.nan, math.inf, True, "x"):
        with pytest.raises(DPValueError, match="sigma"):
            BallsInBinsMatrixMechanism(s, bad)
    with pytest.raises(DPValueError, match="strategy"):
        BallsInBinsMatrixMechanism(np.eye(8), 1.0)
    with pytest.raises(AttributeError):
        m.sigma = 2.0  # frozen


# ------------------------------------------------------------------------------- one family: supports / refuse
@pytest.mark.parametrize("name", sorted(MATRIX_ACCOUNTANTS))
def test_supports_the_matrix_mechanism_only(name):
    acc = MATRIX_ACCOUNTANTS[name]()
    assert acc.name == name
    assert acc.supports(_mech(b=4)) is True
    sg = SubsampledGaussianMechanism(1.0, q=0.1)
    assert acc.supports(sg) is False
    with pytest.raises(DPValueError, match=f"{name}: unsupported mechanism SubsampledGaussianMechanism"):
        acc.check_supported(sg)
    with pytest.raises(DPValueError, match="SubsampledGaussianMechanism"):
        acc.compose(sg)
    assert acc.ledger == []


@pytest.mark.parametrize("name", sorted(MATRIX_ACCOUNTANTS))
def test_nothing_composed_is_the_base_class_error(name):
    acc = MATRIX_ACCOUNTANTS[name]()
    for q in (lambda: acc.get_epsilon(1e-5), lambda: acc.get_delta(1.0)):
        with pytest.raises(DPValueError, match="nothing composed yet; call compose"):
            q()


@pytest.mark.parametrize(
    "make", [PLDAccountant, RDPAccountant, GDPAccountant, SaddlePointAccountant, EdgeworthAccountant]
)
def test_scalar_accountants_refuse_the_matrix_mechanism_by_name(make):
    acc = make()
    m = _mech(b=4)
    assert acc.supports(m) is False
    with pytest.raises(DPValueError, match="BallsInBinsMatrixMechanism"):
        acc.compose(m)
    assert acc.ledger == []


@pytest.mark.parametrize(
    "make,bad",
    [
        (lambda: MatrixRenyiAccountant(direction="sideways"), "direction"),
        (lambda: MatrixRenyiAccountant(orders=[1]), "orders"),
        (lambda: MatrixRenyiAccountant(effective_bands=0), "effective_bands"),
        (lambda: MatrixRenyiTightAccountant(add_classes=[]), "add_classes"),
        (lambda: MatrixMonteCarloAccountant(samples=1), "samples"),
        (lambda: MatrixMonteCarloAccountant(direction="up"), "direction"),
        (lambda: ConditionalCompositionAccountant(direction="up"), "direction"),
        (lambda: ConditionalCompositionAccountant(delta_e=0.0), "delta_e"),
        (lambda: MatrixRenyiAccountant().compose(_mech(b=4), 0), "count"),
    ],
)
def test_bad_options_name_the_parameter(make, bad):
    with pytest.raises(DPValueError, match=bad):
        make()


# ------------------------------------------------------------------------------- Renyi: compose == paper values
def test_renyi_compose_matches_independent_rho_and_eq4():
    b, sigma = 10, 1.0
    acc = MatrixRenyiAccountant(orders=ORDERS).compose(_mech(b, sigma))
    rem, add = _fs_remove(b, sigma, ORDERS), _lemma34_identity(b, sigma, ORDERS)
    r = acc.rdp()
    np.testing.assert_allclose(r["remove"], rem, rtol=1e-9)
    np.testing.assert_allclose(r["add"], add, rtol=1e-12)
    rho = np.maximum(rem, add)
    for eps in (0.5, 2.0, 5.0):
        ref, a = _eq4_delta(ORDERS, rho, eps)
        res = acc.get_delta(eps)
        assert res.value == pytest.approx(ref, rel=1e-8) and res.details["order"] == a
        assert res.kind == "upper-bound" and res.upper == res.value and res.lower is None
    for delta in (1e-5, 1e-3):
        ref, a = _eq4_epsilon(ORDERS, rho, delta)
        res = acc.get_epsilon(delta)
        assert res.value == pytest.approx(ref, rel=1e-9) and res.details["order"] == a


def test_renyi_count_and_ledger_add_rho():
    b, s1, s2 = 10, 1.0, 1.7
    m1, m2 = _mech(b, s1), _mech(b, s2)
    rem1, add1 = _fs_remove(b, s1, ORDERS), _lemma34_identity(b, s1, ORDERS)
    rem2, add2 = _fs_remove(b, s2, ORDERS), _lemma34_identity(b, s2, ORDERS)

    twice = MatrixRenyiAccountant(orders=ORDERS).compose(m1, count=2)
    np.testing.assert_allclose(twice.rdp()["remove"], 2 * rem1, rtol=1e-9)
    np.testing.assert_allclose(twice.rdp()["add"], 2 * add1, rtol=1e-12)
    np.testing.assert_allclose(twice.rdp()["rho"], 2 * np.maximum(rem1, add1), rtol=1e-9)
    again = MatrixRenyiAccountant(orders=ORDERS).compose(m1).compose(m1)
    np.testing.assert_array_equal(again.rdp()["rho"], twice.rdp()["rho"])
    ref, _ = _eq4_epsilon(ORDERS, 2 * np.maximum(rem1, add1), 1e-5)
    assert twice.get_epsilon(1e-5).value == pytest.approx(ref, rel=1e-9)

    # the cache follows the ledger: one run, then a different second run composed on the same accountant
    acc = MatrixRenyiAccountant(orders=ORDERS).compose(m1)
    one = acc.get_epsilon(1e-5).value
    assert one == pytest.approx(_eq4_epsilon(ORDERS, np.maximum(rem1, add1), 1e-5)[0], rel=1e-9)
    acc.compose(m2)
    het = acc.get_epsilon(1e-5)
    # the same neighbouring pair in both runs: each direction's divergences add, then the max per order
    rho = np.maximum(rem1 + rem2, add1 + add2)
    assert het.value == pytest.approx(_eq4_epsilon(ORDERS, rho, 1e-5)[0], rel=1e-9)
    assert het.value > one and het.details["sigma"] == [s1, s2]


def test_renyi_single_directions_are_genuine():
    b, sigma = 10, 0.9
    m = _mech(b, sigma)
    rem, add = _fs_remove(b, sigma, ORDERS), _lemma34_identity(b, sigma, ORDERS)
    e_rem = MatrixRenyiAccountant(orders=ORDERS, direction="remove").compose(m).get_epsilon(1e-5)
    e_add = MatrixRenyiAccountant(orders=ORDERS, direction="add").compose(m).get_epsilon(1e-5)
    e_both = MatrixRenyiAccountant(orders=ORDERS).compose(m).get_epsilon(1e-5)
    assert e_rem.value == pytest.approx(_eq4_epsilon(ORDERS, rem, 1e-5)[0], rel=1e-9)
    assert e_add.value == pytest.approx(_eq4_epsilon(ORDERS, add, 1e-5)[0], rel=1e-12)
    assert "rho_add" not in e_rem.details and "rho_remove" not in e_add.details
    assert e_both.value >= max(e_rem.value, e_add.value) * (1 - 1e-12)  # max per order, then min over orders


def test_renyi_tight_compose_matches_exact_add_moment():
    # independent slots: the tight add bound is the exact negative lognormal moment (a separate Gamma-integral
    # code path), the remove bound the mpmath partition sum; two runs double both
    b, sigma = 10, 1.0
    m = _mech(b, sigma)
    rem, add = _fs_remove(b, sigma, ORDERS), rho_add_exact_independent(np.eye(b), sigma, ORDERS)
    acc = MatrixRenyiTightAccountant(orders=ORDERS).compose(m, count=2)
    np.testing.assert_allclose(acc.rdp()["add"], 2 * add, rtol=1e-9)
    np.testing.assert_allclose(acc.rdp()["remove"], 2 * rem, rtol=1e-9)
    ref, _ = _eq4_epsilon(ORDERS, 2 * np.maximum(rem, add), 1e-5)
    assert acc.get_epsilon(1e-5).value == pytest.approx(ref, rel=1e-8)


# ------------------------------------------------------------------------------- one-run accountants
def test_mc_compose_matches_the_gaussian_profile():
    # b = 1 slot: the pair is N(1, s^2) vs N(0, s^2) exactly; the empirical-Bernstein bracket must contain it
    sigma = 1.2
    acc = MatrixMonteCarloAccountant(samples=200_000, seed=5).compose(_mech(1, sigma))
    for eps in (0.0, 0.5, 1.5):
        r = acc.get_delta(eps)
        exact = _gaussian_delta(1 / sigma, eps)
        assert r.lower <= exact <= r.upper, (eps, r, exact)
        assert r.value == pytest.approx(exact, rel=0.05)
    ref = PLDAccountant(discretization=1e-4).compose(GaussianMechanism(sigma)).get_epsilon(1e-2)
    r = acc.get_epsilon(1e-2)
    assert r.lower <= ref.upper and ref.lower <= r.upper


@pytest.mark.parametrize("name", ["matrix-mc", "matrix-condcomp"])
def test_one_run_accountants_refuse_repeats(name):
    acc = MATRIX_ACCOUNTANTS[name]()
    m = _mech(b=4)
    with pytest.raises(DPValueError, match=f"{name}: count must be 1.*epochs"):
        acc.compose(m, count=2)
    assert acc.ledger == []
    acc.compose(m)
    with pytest.raises(DPValueError, match=f"{name}: accounts for exactly one.*already composed.*epochs"):
        acc.compose(m)
    assert len(acc.ledger) == 1 and acc.mechanism is m
    assert acc.get_delta(1.0).value > 0


def test_condcomp_directions_and_both_is_the_worse():
    m = _mech(b=6, sigma=1.0)
    kw = dict(delta_e=1e-6, discretization=1e-2, progress=False)
    res = {d: ConditionalCompositionAccountant(direction=d, **kw).compose(m) for d in ("both", "remove", "add")}
    for eps in (0.5, 2.0):
        dv = {d: a.get_delta(eps).value for d, a in res.items()}
        assert dv["both"] == pytest.approx(max(dv["remove"], dv["add"]), rel=1e-12)
    ev = {d: a.get_epsilon(1e-4) for d, a in res.items()}
    assert ev["both"].value == pytest.approx(max(ev["remove"].value, ev["add"].value), rel=1e-12)
    assert ev["remove"].details["direction"] == "remove" and ev["add"].details["direction"] == "add"


# ------------------------------------------------------------------------------- the one RDP conversion
def _curves():
    a = np.arange(2, 65)
    return a, [
        a / (2 * 0.7**2),  # Gaussian, sigma 0.7
        a / (2 * 3.0**2),  # Gaussian, sigma 3
        _lemma34_identity(100, 1.0, a),  # Lemma 3.4, affine in a
        np.log1p(a / 5.0) + 0.01 * a,  # concave-plus-linear curve
        np.full(a.size, 1e-9),  # nearly zero: epsilon clipped at 0, delta capped at 1
    ]


@pytest.mark.parametrize("i", range(5))
def test_rdp_conversion_is_eq4_as_printed(i):
    a, curves = _curves()
    rho = curves[i]
    for eps in (0.0, 0.3, 1.0, 4.0):
        d, order = rdp_to_delta(a, rho, eps)
        ref, ref_a = _eq4_delta(a, rho, eps)
        assert d == pytest.approx(ref, rel=1e-12) and order == ref_a
    for delta in (1e-10, 1e-5, 0.1):
        e, order = rdp_to_epsilon(a, rho, delta)
        ref, ref_a = _eq4_epsilon(a, rho, delta)
        assert e == pytest.approx(ref, rel=1e-12, abs=1e-15)
        if ref > 0:
            assert order == ref_a


def test_rdp_conversion_of_a_gaussian_is_above_its_exact_profile_and_dp_accounting():
    from dp_accounting.rdp import rdp_privacy_accountant as ra

    a = np.arange(2, 257)
    for sigma in (0.8, 2.0, 5.0):
        rho = a / (2 * sigma**2)
        for eps in (0.5, 1.0, 3.0):
            d, _ = rdp_to_delta(a, rho, eps)
            exact = _gaussian_delta(1 / sigma, eps)
            assert exact <= d <= 1.0
            assert d == pytest.approx(ra.compute_delta(a, rho, eps)[0], rel=1e-9)
        e, _ = rdp_to_epsilon(a, rho, 1e-6)
        assert e == pytest.approx(ra.compute_epsilon(a, rho, 1e-6)[0], rel=1e-9)


@pytest.mark.parametrize(
    "call,word",
    [
        (lambda: rdp_to_epsilon([2, 3], [0.1, 0.2], 0.0), "delta"),
        (lambda: rdp_to_epsilon([2, 3], [0.1, 0.2], 1.5), "delta"),
        (lambda: rdp_to_delta([2, 3], [0.1, 0.2], -1.0), "epsilon"),
        (lambda: rdp_to_delta([2, 3], [0.1, 0.2], math.nan), "epsilon"),
        (lambda: rdp_to_delta([0.5, 3], [0.1, 0.2], 1.0), "orders"),  # order 1 is accepted (no bound), as dp_accounting
        (lambda: rdp_to_delta([], [], 1.0), "orders"),
        (lambda: rdp_to_delta([2, 3], [0.1], 1.0), "rdp"),
        (lambda: rdp_to_delta([2, 3], [0.1, 0.2], 1.0, conversion="new"), "conversion"),
    ],
)
def test_rdp_conversion_refuses_bad_input(call, word):
    with pytest.raises(DPValueError, match=word):
        call()


def test_monte_carlo_samples_do_not_depend_on_where_the_chunks_run():
    """Issue 16: seeded chunks (SeedSequence.spawn) give the same losses serially, on threads and on processes;
    and the chunk losses equal a direct draw from each chunk's own seed (independent of the accountant)."""
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    mech = _mech(4, 0.9, name="bsr", epochs=2, bands=2)
    opts = dict(samples=5_000, seed=3, chunk=1_200)
    serial = MatrixMonteCarloAccountant(**opts).compose(mech).losses()
    with ThreadPoolExecutor(2) as ex:
        threads = MatrixMonteCarloAccountant(**opts, executor=ex).compose(mech).losses()
    with ProcessPoolExecutor(2) as ex:
        procs = MatrixMonteCarloAccountant(**opts, executor=ex).compose(mech).losses()
    for d in ("remove", "add"):
        assert serial[d].shape == (5_000,)
        np.testing.assert_array_equal(serial[d], threads[d])
        np.testing.assert_array_equal(serial[d], procs[d])
    # chunk 2 (samples 2400..3599) by hand from the third spawned seed: the add loss -log mean_i exp(y_i/s^2 - G_ii/2s^2)
    G = mech.gram
    ss = np.random.SeedSequence(3).spawn(5)[2]
    rng = np.random.default_rng(ss)
    xi = rng.standard_normal((1_200, G.shape[0]))
    w, U = np.linalg.eigh(G)
    y = 0.9 * xi @ (U * np.sqrt(np.clip(w, 0, None))).T
    by_hand = -np.log(np.mean(np.exp(y / 0.81 - np.diag(G) / (2 * 0.81)), axis=1))
    np.testing.assert_allclose(serial["add"][2_400:3_600], by_hand, rtol=1e-12)
    with pytest.raises(DPValueError, match="client or executor"):
        MatrixMonteCarloAccountant(client=object(), executor=object())
