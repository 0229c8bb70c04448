"""RDP against dp_accounting and mpmath; GDP exactness and its labelling."""

import math

import dp_accounting
import mpmath as mp
import pytest

from dputils.accountants import GDPAccountant, RDPAccountant
from dputils.accountants.rdp import subsampled_gaussian_rdp
from dputils.curves import gdp_epsilon
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism

ORDERS = [1.25, 1.5, 1.75] + list(range(2, 65))


@pytest.mark.parametrize("mech,T", [
    (SubsampledGaussianMechanism(1.1, 256 / 60000), 14063), (SubsampledGaussianMechanism(0.7, 0.01), 1000),
    (GaussianMechanism(2.0), 10), (LaplaceMechanism(2.0), 10),
])
def test_rdp_matches_dp_accounting(mech, T):
    a = dp_accounting.rdp.RdpAccountant(ORDERS)
    a.compose(mech.to_dp_event(), T)
    ours = RDPAccountant(ORDERS, refine=False).compose(mech, T)
    assert ours.get_epsilon(1e-5).value == pytest.approx(a.get_epsilon(1e-5), rel=1e-9)
    assert ours.get_delta(1.0).value == pytest.approx(a.get_delta(1.0), rel=1e-6)


@pytest.mark.parametrize("alpha", [1.5, 2, 3.7, 10])
def test_subsampled_rdp_matches_mpmath_integral(alpha):
    mp.mp.dps = 30
    q, s = mp.mpf("0.05"), mp.mpf("0.9")
    f = lambda x: mp.npdf(x, 0, s) * ((1 - q) + q * mp.e ** ((2 * x - 1) / (2 * s**2))) ** alpha
    ref = mp.log(mp.quad(f, [mp.ninf, 0, 1, 5, mp.inf])) / (alpha - 1)
    assert subsampled_gaussian_rdp(0.05, 0.9, float(alpha)) == pytest.approx(float(ref), rel=1e-8)


def test_classic_conversion_reproduces_published_mnist_table():
    q = 256 / 60000
    for sigma, epochs, published in ((1.1, 60, 3.01), (1.3, 15, 1.19), (0.7, 45, 7.10)):
        T = math.ceil(epochs / q)
        e = RDPAccountant(range(2, 257), conversion="classic", refine=False).compose(SubsampledGaussianMechanism(sigma, q), T)
        assert e.get_epsilon(1e-5).value == pytest.approx(published, abs=0.03)


def test_gdp_exact_for_gaussians_and_labelled_approximation_otherwise():
    r = GDPAccountant().compose(GaussianMechanism(2.0), 4).get_epsilon(1e-5)
    assert r.kind == "exact" and r.value == pytest.approx(gdp_epsilon(1e-5, 1.0))
    r = GDPAccountant().compose(SubsampledGaussianMechanism(1.5, 0.04), 2250).get_epsilon(1e-5)
    assert r.kind == "approximation" and r.lower is None
    assert 6.59 < r.value < 6.61  # Opacus pins its GDP accountant at 6.59-6.6 on this setting
    with pytest.raises(DPValueError, match="gdp"):
        GDPAccountant().compose(LaplaceMechanism(1.0), 1)


def test_rdp_rejects_bad_orders():
    with pytest.raises(DPValueError, match="orders"):
        RDPAccountant(orders=[1.0, 2.0])


DENSE = [float(a) for a in list(__import__("numpy").linspace(1.01, 8, 300)) + list(range(9, 257))]


@pytest.mark.parametrize("sigma,q,T,delta", [(0.8, 0.01, 1000, 1e-5), (1.0, 0.1, 100, 1e-5),
                                             (0.5, 0.001, 10_000, 1e-10), (2.0, 1.0, 50, 1e-5)])
def test_refined_order_is_never_looser_than_a_dense_grid_and_is_exact_at_its_order(sigma, q, T, delta):
    mech = SubsampledGaussianMechanism(sigma, q) if q < 1 else GaussianMechanism(sigma)
    grid = RDPAccountant(refine=False).compose(mech, T).get_epsilon(delta)
    refined = RDPAccountant(refine=True).compose(mech, T).get_epsilon(delta)
    # dp_accounting's 548-order grid (300 fractional orders below 8) is the peer to beat
    dpa = dp_accounting.rdp.RdpAccountant(DENSE)
    dpa.compose(mech.to_dp_event(), T)
    assert refined.value <= grid.value and refined.value <= dpa.get_epsilon(delta) * (1 + 1e-9)
    assert refined.details["refined"] and refined.details["refine_evaluations"] <= 100
    # the reported value is the modern conversion at the reported order, with the RDP from mpmath
    a = refined.details["order"]
    mp.mp.dps = 30
    if q < 1:
        qq, s = mp.mpf(q), mp.mpf(sigma)
        f = lambda x: mp.npdf(x, 0, s) * ((1 - qq) + qq * mp.e ** ((2 * x - 1) / (2 * s**2))) ** a
        rho = T * mp.log(mp.quad(f, [mp.ninf, -10, 0, 1, 5, 20, mp.inf])) / (a - 1)
    else:
        rho = T * mp.mpf(a) / (2 * mp.mpf(sigma) ** 2)
    eps = rho + mp.log1p(-1 / mp.mpf(a)) - (mp.log(delta) + mp.log(a)) / (a - 1)
    assert refined.value == pytest.approx(float(eps), rel=1e-9)
    # and delta at that epsilon comes back to the target
    back = RDPAccountant(refine=True).compose(mech, T).get_delta(refined.value)
    assert back.value == pytest.approx(delta, rel=1e-6)


def test_refine_must_be_a_bool():
    with pytest.raises(DPValueError, match="refine"):
        RDPAccountant(refine="yes")


@pytest.mark.parametrize("q,sigma,alpha", [(1e-4, 20.0, 1.01), (1e-4, 3.0, 1.1), (0.01, 20.0, 1.37),
                                           (0.3, 0.5, 1.5), (0.05, 1.0, 33.5)])
def test_fractional_orders_keep_relative_precision_when_the_rdp_is_tiny(q, sigma, alpha):
    # log A ~ 1e-13 here: formed as log(A) it would keep ~1e-16 absolute, i.e. 1e-3 relative
    mp.mp.dps = 40
    qq, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)
    f = lambda x: mp.npdf(x, 0, s) * ((1 - qq) + qq * mp.e ** ((2 * x - 1) / (2 * s**2))) ** a
    ref = mp.log(mp.quad(f, [mp.ninf, -10 * s, 0, 0.5, a, a + 10 * s, mp.inf])) / (a - 1)
    assert subsampled_gaussian_rdp(q, sigma, alpha) == pytest.approx(float(ref), rel=1e-10)
