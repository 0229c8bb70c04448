"""The chapters' baselines: CLT mu (closed form), RDP (peer library), the shared log-space helper."""

import math

import dp_accounting
import numpy as np
import pytest

from dputils.baselines import clt_mu, rdp_epsilon
from dputils.errors import DPValueError
from dputils.numerics import log_diff_exp


def test_clt_mu_closed_form_and_refusals():
    # Bu et al.: mu = p sqrt(m (e^{1/sigma^2} - 1)); at sigma = 1, p = 0.05, m = 200: 0.05 sqrt(200 (e - 1))
    assert clt_mu(1.0, 0.05, 200) == pytest.approx(0.05 * math.sqrt(200 * (math.e - 1)), rel=1e-14)
    for bad in (dict(sigma=0.0, p=0.1, m=10), dict(sigma=1.0, p=1.5, m=10), dict(sigma=1.0, p=0.1, m=0)):
        with pytest.raises(DPValueError):
            clt_mu(**bad)


def test_rdp_epsilon_is_at_most_dp_accountings_and_close_to_it():
    orders = list(np.linspace(1.01, 8, 300)) + list(np.arange(8.5, 256.5, 0.5))
    for sigma, p, m in ((0.8, 0.01, 1000), (1.0, 0.05, 200), (1.5, 1.0, 30)):
        acc = dp_accounting.rdp.RdpAccountant(orders)
        ev = dp_accounting.GaussianDpEvent(sigma)
        acc.compose(dp_accounting.PoissonSampledDpEvent(p, ev) if p < 1 else ev, m)
        theirs = acc.get_epsilon(1e-5)
        ours = rdp_epsilon(sigma, p, m, 1e-5)
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
