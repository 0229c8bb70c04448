"""Tests of the Edgeworth accountant (dputils.accountants.edgeworth) and of its use of the shared truth
(dputils.truth.composition_delta / composition_epsilon).

Independent references: closed forms (Gaussian mechanism / mu-GDP, Gaussian moments), the published value of
the Derumigny-Girard-Guyonvarch R package README, the foundation's PLD accountant (certified bracket), and the
numbers of the team's note (computed with scipy quadrature, dp_accounting PLD and prv_accountant; marked as
anchors). The one-step moments themselves (dputils.cumulants.loss_moments) are validated against mpmath in
tests/test_cumulants.py.
"""

import argparse
import math

import numpy as np
import pytest

from dputils.accountants.edgeworth import EdgeworthAccountant, dgg_bound_iid_skew, prop45_tail_bound, summarize
from dputils.cumulants import loss_moments
from dputils.curves import gdp_delta, gdp_epsilon
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, SubsampledGaussianMechanism, SubsampledLaplaceMechanism
from dputils.truth import composition_delta, composition_epsilon


def test_dgg_port_reproduces_package_readme():
    # BoundEdgeworth README: iid, no continuity, n=1000, K4=9 -> 0.1626857 (K3 = K4^(3/4), lambda3 = 0.621 K3)
    K4 = 9.0
    K3 = K4**0.75
    assert dgg_bound_iid_skew(1000, K3, K3 + 1, K4, 0.621 * K3) == pytest.approx(0.1626857, abs=5e-8)


def test_cumulants_match_note_T8():
    pr = SubsampledGaussianMechanism(0.8, 0.01).pair("remove")
    # note T8 (paper's X = our loss under Q, paper's Y = our loss under P; the note used scipy quad), rel. tol 1e-5
    ref = {"q": (-1.67165e-4, 3.17105e-4, 8.3368, 161.087), "p": (1.76653e-4, 3.74280e-4, 9.6413, 226.49)}
    for under, (k1, k2, l3, l4) in ref.items():
        k = loss_moments(pr, under).cumulants
        assert k[0] == pytest.approx(k1, rel=1e-5)
        assert k[1] == pytest.approx(k2, rel=1e-5)
        assert k[2] / k[1] ** 1.5 == pytest.approx(l3, rel=1e-5)
        assert k[3] / k[1] ** 2 == pytest.approx(l4, rel=1e-5)  # standardized 4th cumulant


def test_lemma43_inputs_gaussian_closed_form():
    # L ~ N(mu^2/2, mu^2): K3 = E|Z|^3 = 2 sqrt(2/pi), K4 = E Z^4 = 3, K3tilde = K3 + E|Z| = 3 sqrt(2/pi),
    # lambda3 = 0, whatever the number of steps and the law (P or Q)
    pr = GaussianMechanism(1.3).pair("remove")
    for under in "pq":
        s = summarize([(loss_moments(pr, under), 7)])
        c = math.sqrt(2 / math.pi)
        assert (s.K3, s.K3tilde, s.K4, s.lam3) == pytest.approx((2 * c, 3 * c, 3.0, 0.0), rel=1e-13, abs=1e-15)
        assert s.mean == pytest.approx(7 * (1 if under == "p" else -1) / (2 * 1.3**2), rel=1e-14)


@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_T1_gaussian_all_orders_equal_gdp(order):
    acc = EdgeworthAccountant(order=order).compose(GaussianMechanism(10.0), 100)
    assert acc.get_epsilon(1e-5).value == pytest.approx(gdp_epsilon(1e-5, 1.0), abs=1e-6)
    assert gdp_epsilon(1e-5, 1.0) == pytest.approx(4.377178, abs=1e-6)  # note T1


def test_aea_orders_match_note_fig2_left():
    acc = EdgeworthAccountant(fallback="none").compose(SubsampledGaussianMechanism(0.8, 0.01), 1000)
    got = [acc.epsilon_direction(0.015, "remove", k) for k in range(4)]
    np.testing.assert_allclose(got, [1.3272, 1.2287, 1.1482, 1.1531], atol=2e-4)  # note table, 4 digits
    assert acc.get_epsilon(0.015).value == pytest.approx(got[2])


def test_truth_against_closed_forms_and_pld():
    g = GaussianMechanism(10.0)
    d, err = composition_delta([(g, 100)], 2.0)
    assert d == pytest.approx(gdp_delta(2.0, 1.0), rel=1e-9)
    e, _ = composition_epsilon([(g, 100)], 1e-5, eps_guess=4.0)
    assert e == pytest.approx(gdp_epsilon(1e-5, 1.0), abs=1e-8)
    # subsampled Gaussian vs the foundation's certified PLD bracket (different algorithm)
    from dputils.accountants.pld import PLDAccountant

    mech = SubsampledGaussianMechanism(0.8, 0.01)
    r = PLDAccountant(discretization=1e-4).compose(mech, 1000).get_delta(1.0)
    d, _ = composition_delta([(mech, 1000)], 1.0)
    assert r.lower <= d <= r.upper


def test_eeai_brackets_truth_T7():
    m = 10**5
    mech = SubsampledGaussianMechanism(0.8, 0.4 / math.sqrt(m))
    acc = EdgeworthAccountant(fallback="none").compose(mech, m)
    dP, dQ = acc.error_bounds()["remove"]
    assert dP == pytest.approx(0.031, rel=0.05)  # note T7, Delta_Y at 1e5
    r = acc.get_epsilon(0.1)
    truth, _ = composition_epsilon([(mech, m)], 0.1, eps_guess=0.72)
    assert r.lower <= truth <= r.upper
    assert r.lower == pytest.approx(0.413, abs=0.02) and r.upper == pytest.approx(1.455, abs=0.02)
    assert truth == pytest.approx(0.7257, abs=5e-4)  # note T6
    # delta bracket at a fixed eps contains the truth as well
    rd = acc.get_delta(0.7)
    td, _ = composition_delta([(mech, m)], 0.7)
    assert rd.lower <= td <= rd.upper


def test_eeai_vacuous_upper_is_inf():
    acc = EdgeworthAccountant(fallback="none").compose(SubsampledGaussianMechanism(0.8, 0.01), 1000)
    r = acc.get_epsilon(0.015)
    assert r.upper == math.inf and r.lower == 0.0 and r.kind == "approximation"


def test_heterogeneous_composition_sums_cumulants():
    a, b = SubsampledGaussianMechanism(0.8, 0.01), SubsampledGaussianMechanism(1.2, 0.02)
    acc = EdgeworthAccountant().compose(a, 500).compose(b, 500)
    s = acc.summaries()["remove"]["p"]
    ma, mb = loss_moments(a.pair("remove"), "p"), loss_moments(b.pair("remove"), "p")
    assert s.mean == pytest.approx(500 * (ma.mean + mb.mean), rel=1e-12)
    assert s.sd**2 == pytest.approx(500 * (ma.var + mb.var), rel=1e-12)
    # against the truth of the same heterogeneous composition, at a larger m where the AEA is good
    acc2 = EdgeworthAccountant().compose(a, 5000).compose(b, 5000)
    truth, err = composition_epsilon([(a, 5000), (b, 5000)], 0.1, eps_guess=3.6)
    assert err < 1e-6
    assert acc2.get_epsilon(0.1).value == pytest.approx(truth, abs=1e-3)


def test_subsampled_laplace_against_note_anchor():
    mech = SubsampledLaplaceMechanism(1.0, 0.05)
    acc = EdgeworthAccountant(fallback="none").compose(mech, 1000)
    assert acc.get_epsilon(1e-5).value == pytest.approx(6.9573, abs=2e-3)  # note section 5 item 12 (EW order 2)


def test_bad_input_and_cli():
    acc = EdgeworthAccountant().compose(GaussianMechanism(1.0), 10)
    with pytest.raises(DPValueError):
        acc.get_epsilon(0.0)
    with pytest.raises(DPValueError):
        acc.get_delta(-1.0)
    with pytest.raises(DPValueError):
        EdgeworthAccountant(order=5)
    with pytest.raises(ValueError):
        EdgeworthAccountant().get_epsilon(1e-5)
    from dputils import cli

    spec = cli.front("edgeworth")
    args = argparse.Namespace(
        mechanism="subsampled-gaussian", sigma=0.8, q=0.01, scale=None, steps=1000, direction="both", order=2
    )
    r = spec.build(args).get_epsilon(0.015)
    # the AEA (1.1482) lies outside the certified bracket here; the default answer is the PLD-narrowed one
    assert r.details["own_value"] == pytest.approx(1.1482, abs=2e-4)
    assert r.details["fallback"] == "pld" and math.isfinite(r.upper)
    assert 0 <= r.lower <= r.value <= r.upper


def test_delta_monotone_and_value_inside_bracket():
    acc = EdgeworthAccountant().compose(SubsampledGaussianMechanism(0.8, 0.0004), 10**6)
    for eps in (0.3, 0.7, 1.2):
        r = acc.get_delta(eps)
        assert r.lower <= r.value <= r.upper
    lo, up = acc.delta_bounds_curve(np.linspace(0, 3, 200))
    assert np.all(np.diff(up) <= 0) and np.all(np.diff(lo) <= 0) and np.all(lo <= up)


def test_prop45_hoeffding_tail_bound():
    import mpmath as mp

    b, p, m = 1.0, 0.3, 20
    mech = SubsampledLaplaceMechanism(b, p)
    eps = np.array([-1.0, 0.0, 1.0, 2.5])
    got = prop45_tail_bound(mech, m, eps)
    # the exponent from mpmath integrals of the paper's definitions (eta = -max E X, tau = range of X)
    with mp.workdps(30):
        mu, pp = mp.mpf(1) / b, mp.mpf(p)
        lap = lambda x, c: mp.exp(-abs(x - c)) / 2  # noqa: E731
        ell = lambda x: mp.log(1 - pp + pp * mp.exp(abs(x) - abs(x - mu)))  # noqa: E731
        ex1 = mp.quad(lambda x: lap(x, 0) * ell(x), [-mp.inf, 0, mu, mp.inf])
        ex2 = -mp.quad(lambda x: ((1 - pp) * lap(x, 0) + pp * lap(x, mu)) * ell(x), [-mp.inf, 0, mu, mp.inf])
        eta = -max(ex1, ex2)
        tau = mp.log(1 - pp + pp * mp.e**mu) - mp.log(1 - pp + pp * mp.e**-mu)
        ref = [float(mp.exp(-2 * (e + m * eta) ** 2 / (m * tau**2))) if e + m * eta >= 0 else 1.0 for e in eps]
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    # and it bounds the Monte Carlo tails of both sums (200k sums of m = 20 losses under Q)
    rng = np.random.default_rng(0)
    for d in ("remove", "add"):
        pair = mech.pair(d)
        S = pair.loss(pair.sample(200_000 * m, rng, under="q")).reshape(-1, m).sum(axis=1)
        freq = (S[:, None] >= eps[None, :]).mean(axis=0)
        assert np.all(freq <= got), (d, freq, got)
    with pytest.raises(DPValueError):
        prop45_tail_bound(GaussianMechanism(1.0), 10, 1.0)
