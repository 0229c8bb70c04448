"""The binned moment-generating function of the PLD's rounding errors (``_pairs._log_mgf_errors``, issue 35 item 2:
the speed of small-T queries) is an upper bound on the exact one, and a close one. Truth: the exact
log sum_i m_i exp(-lam e_i) at 40 digits (mpmath), term by term."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from dputils.accountants.pld._discretise import discretize
from dputils.accountants.pld._pairs import _log_mgf_errors
from dputils.mechanisms import GaussianMechanism, SubsampledGaussianMechanism


def _exact(m, e, lam):
    with mp.workdps(40):
        return [
            float(mp.log(mp.fsum(mp.mpf(mi) * mp.exp(-mp.mpf(lv) * mp.mpf(ei)) for mi, ei in zip(m, e)))) for lv in lam
        ]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_errors_upper_bound_and_close(seed):
    rng = np.random.default_rng(seed)
    h = 1e-4
    n = 300
    m = rng.dirichlet(np.ones(n))
    e = rng.uniform(0, h, n)
    e[:5] = [0.0, h, h / 8192, 2 * h / 8192, h * (1 - 1e-15)]  # cell ends and the interval's ends
    lam = np.logspace(-1, 7, 12) / h
    got = _log_mgf_errors(m, e, h, lam)
    ex = np.array(_exact(m, e, lam))
    assert np.all(got >= ex - 1e-13)  # an upper bound (up to the last bits of the double sum)
    # and no looser than moving every error down by one cell (3 h / 8192): what it costs s_eta = (log eta - logM) / lam
    assert np.all(got - ex <= lam * 3 * h / 8192 + 1e-12)


@pytest.mark.parametrize("mech", [SubsampledGaussianMechanism(1.0, 0.01), GaussianMechanism(2.0)])
def test_discretized_pld_errors(mech):
    d = discretize(mech.pair("remove"), 1e-3, 1e-12)
    pos = d.lower > 0
    m, e = d.lower[pos], d.lower_err[pos]
    lam = np.array([10.0, 1e3, 1e5, 1e7]) / d.h
    got = _log_mgf_errors(m, e, d.h, lam)
    ex = np.array(_exact(m, e, lam))
    assert np.all(got >= ex - 1e-13) and np.all(got - ex <= 1e-3)  # the real errors: within 1e-3 in log
