"""Tests of the Edgeworth accountant (dputils.accountants.edgeworth) and of the Fourier truth (dputils.charfn).

Independent references: closed forms (Gaussian mechanism / mu-GDP), the published value of the
Derumigny-Girard-Guyonvarch R package README, the moments of dputils.cumulants (a different quadrature
written by another developer), the foundation's PLD accountant (certified bracket), and the numbers of the
team's note (computed with dp_accounting PLD / prv_accountant; marked as anchors).
"""

import argparse
import math

import numpy as np
import pytest

from dputils import cumulants as C
from dputils.accountants.edgeworth import (
    EdgeworthAccountant,
    SubsampledLaplaceMechanism,
    dgg_bound_iid_skew,
    loss_moments,
)
from dputils.charfn import fourier_delta, fourier_epsilon
from dputils.curves import gdp_delta, gdp_epsilon
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism


def test_dgg_port_reproduces_package_readme():
    # BoundEdgeworth README: iid, no continuity, n=1000, K4=9 -> 0.1626857 (K3 = K4^(3/4), lambda3 = 0.621 K3)
    K4 = 9.0
    K3 = K4**0.75
    assert dgg_bound_iid_skew(1000, K3, K3 + 1, K4, 0.621 * K3) == pytest.approx(0.1626857, abs=5e-8)


def test_cumulants_match_note_T8_and_cumulants_module():
    pr = SubsampledGaussianMechanism(0.8, 0.01).pair("remove")
    # note T8 (paper's X = our loss under Q, paper's Y = our loss under P), rel. tol 1e-5
    ref = {"q": (-1.67165e-4, 3.17105e-4, 8.3368, 161.087), "p": (1.76653e-4, 3.74280e-4, 9.6413, 226.49)}
    for under, (k1, k2, l3, l4) in ref.items():
        k = loss_moments(pr, under).cumulants
        assert k[0] == pytest.approx(k1, rel=1e-5)
        assert k[1] == pytest.approx(k2, rel=1e-5)
        assert k[2] / k[1] ** 1.5 == pytest.approx(l3, rel=1e-5)
        assert k[3] / k[1] ** 2 == pytest.approx(l4, rel=1e-5)  # standardized 4th cumulant
    # independent implementation (trapezoid grid of dputils.cumulants): under P = tilt 0, under Q = tilt -1
    for d in ("remove", "add"):
        pair = SubsampledGaussianMechanism(0.8, 0.01).pair(d)
        for under, t in (("p", 0.0), ("q", -1.0)):
            mine = np.array(loss_moments(pair, under).cumulants)
            theirs = np.asarray(C.cgf_derivatives(pair, t, order=6))[1:]
            np.testing.assert_allclose(mine, theirs, rtol=1e-8)


def test_gaussian_closed_form_moments_match_quadrature():
    pr = GaussianMechanism(1.3).pair("remove")
    for under in "pq":
        a = loss_moments(pr, under)
        b = loss_moments(pr, under, force_quadrature=True)
        assert a.mean == pytest.approx(b.mean, rel=1e-12)
        np.testing.assert_allclose(a.central, b.central, rtol=1e-10, atol=1e-12)
        assert a.abs1 == pytest.approx(b.abs1, rel=1e-10)
        assert a.abs3 == pytest.approx(b.abs3, rel=1e-10)


@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_T1_gaussian_all_orders_equal_gdp(order):
    acc = EdgeworthAccountant(order=order).compose(GaussianMechanism(10.0), 100)
    assert acc.get_epsilon(1e-5).value == pytest.approx(gdp_epsilon(1e-5, 1.0), abs=1e-6)
    assert gdp_epsilon(1e-5, 1.0) == pytest.approx(4.377178, abs=1e-6)  # note T1


def test_aea_orders_match_note_fig2_left():
    acc = EdgeworthAccountant().compose(SubsampledGaussianMechanism(0.8, 0.01), 1000)
    got = [acc.epsilon_direction(0.015, "remove", k) for k in range(4)]
    np.testing.assert_allclose(got, [1.3272, 1.2287, 1.1482, 1.1531], atol=2e-4)  # note table, 4 digits
    assert acc.get_epsilon(0.015).value == pytest.approx(got[2])


def test_fourier_truth_against_closed_forms_and_pld():
    g = GaussianMechanism(10.0)
    d, err = fourier_delta([(g, 100)], 2.0)
    assert d == pytest.approx(gdp_delta(2.0, 1.0), rel=1e-9)
    e, _ = fourier_epsilon([(g, 100)], 1e-5, eps_guess=4.0)
    assert e == pytest.approx(gdp_epsilon(1e-5, 1.0), abs=1e-8)
    # subsampled Gaussian vs the foundation's certified PLD bracket (different algorithm)
    from dputils.accountants.pld import PLDAccountant

    mech = SubsampledGaussianMechanism(0.8, 0.01)
    r = PLDAccountant(discretization=1e-4).compose(mech, 1000).get_delta(1.0)
    d, _ = fourier_delta([(mech, 1000)], 1.0)
    assert r.lower <= d <= r.upper


def test_eeai_brackets_truth_T7():
    m = 10**5
    mech = SubsampledGaussianMechanism(0.8, 0.4 / math.sqrt(m))
    acc = EdgeworthAccountant().compose(mech, m)
    dP, dQ = acc.error_bounds()["remove"]
    assert dP == pytest.approx(0.031, rel=0.05)  # note T7, Delta_Y at 1e5
    r = acc.get_epsilon(0.1)
    truth, _ = fourier_epsilon([(mech, m)], 0.1, eps_guess=0.72)
    assert r.lower <= truth <= r.upper
    assert r.lower == pytest.approx(0.413, abs=0.02) and r.upper == pytest.approx(1.455, abs=0.02)
    assert truth == pytest.approx(0.7257, abs=5e-4)  # note T6
    # delta bracket at a fixed eps contains the truth as well
    rd = acc.get_delta(0.7)
    td, _ = fourier_delta([(mech, m)], 0.7)
    assert rd.lower <= td <= rd.upper


def test_eeai_vacuous_upper_is_inf():
    acc = EdgeworthAccountant().compose(SubsampledGaussianMechanism(0.8, 0.01), 1000)
    r = acc.get_epsilon(0.015)
    assert r.upper == math.inf and r.lower == 0.0 and r.kind == "approximation"


def test_heterogeneous_composition_sums_cumulants():
    a, b = SubsampledGaussianMechanism(0.8, 0.01), SubsampledGaussianMechanism(1.2, 0.02)
    acc = EdgeworthAccountant().compose(a, 500).compose(b, 500)
    s = acc.summaries()["remove"]["p"]
    ma, mb = loss_moments(a.pair("remove"), "p"), loss_moments(b.pair("remove"), "p")
    assert s.mean == pytest.approx(500 * (ma.mean + mb.mean), rel=1e-12)
    assert s.sd**2 == pytest.approx(500 * (ma.var + mb.var), rel=1e-12)
    # against the Fourier truth of the same heterogeneous composition, at a larger m where the AEA is good
    acc2 = EdgeworthAccountant().compose(a, 5000).compose(b, 5000)
    truth, err = fourier_epsilon([(a, 5000), (b, 5000)], 0.1, eps_guess=3.6)
    assert err < 1e-6
    assert acc2.get_epsilon(0.1).value == pytest.approx(truth, abs=1e-3)


def test_subsampled_laplace_against_note_anchor():
    mech = SubsampledLaplaceMechanism(1.0, 0.05)
    acc = EdgeworthAccountant().compose(mech, 1000)
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
    from dputils.accountants import registry

    spec = registry.get("edgeworth")
    args = argparse.Namespace(mechanism="subsampled-gaussian", sigma=0.8, q=0.01, scale=None, steps=1000,
                              direction="both", order=2)
    r = spec.build(args).get_epsilon(0.015)
    assert r.value == pytest.approx(1.1482, abs=2e-4)
    assert 0 <= r.value and (r.upper is None or r.value <= r.upper)


def test_delta_monotone_and_value_inside_bracket():
    acc = EdgeworthAccountant().compose(SubsampledGaussianMechanism(0.8, 0.0004), 10**6)
    for eps in (0.3, 0.7, 1.2):
        r = acc.get_delta(eps)
        assert r.lower <= r.value <= r.upper
    lo, up = acc.delta_bounds_curve(np.linspace(0, 3, 200))
    assert np.all(np.diff(up) <= 0) and np.all(np.diff(lo) <= 0) and np.all(lo <= up)
