"""The one table of auditing methods (dputils.audit.methods) and CanaryScoreAuditor.

Independent references: the Gaussian auditor and the threshold audits called directly (the table must only
dispatch, never change a number), and known-epsilon Gaussian scores for the sense of the bounds."""

from __future__ import annotations

import numpy as np
import pytest

from dputils.audit import METHODS, CanaryScoreAuditor, audit_all, gauss_audit, run_method, threshold_audit
from dputils.audit.simulate import ALL_METHODS, audit_methods
from dputils.curves import gdp_epsilon
from dputils.errors import DPValueError


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(3)
    mu = 2.0  # mu-GDP scores: the true epsilon at delta is gdp_epsilon(delta, mu)
    return rng.normal(mu, 1.0, 1000), rng.normal(0.0, 1.0, 1000), mu


def test_table_dispatches_to_the_same_numbers(scores):
    i, o, _ = scores
    direct = {
        "gauss": gauss_audit(i, o, 1e-5, 0.05, n_bootstrap=300, seed=1).epsilon_lower,
        "gauss-pooled": gauss_audit(i, o, 1e-5, 0.05, n_bootstrap=300, seed=1, pool_variance=True).epsilon_lower,
        "gauss-bonferroni": gauss_audit(i, o, 1e-5, 0.05, region="bonferroni").epsilon_lower,
        "steinke": threshold_audit(i, o, 1e-5, 0.05, method="steinke", seed=1).epsilon_lower,
        "fdp": threshold_audit(i, o, 1e-5, 0.05, method="fdp", seed=1).epsilon_lower,
        "steinke-uncorrected": threshold_audit(i, o, 1e-5, 0.05, method="steinke", selection="none").epsilon_lower,
        "fdp-uncorrected": threshold_audit(i, o, 1e-5, 0.05, method="fdp", selection="none").epsilon_lower,
    }
    assert set(direct) == set(METHODS) == set(ALL_METHODS)
    via_table = {m: run_method(m, i, o, 1e-5, 0.05, n_bootstrap=300, seed=1).epsilon_lower for m in METHODS}
    assert via_table == direct
    assert audit_methods(i, o, METHODS, n_bootstrap=300, seed=1) == direct
    four = audit_all(i, o, n_bootstrap=300, seed=1)
    assert four == {m: direct[m] for m in ("gauss", "gauss-bonferroni", "steinke", "fdp")}


def test_canary_score_auditor_in_three_lines(scores):
    i, o, mu = scores
    auditor = CanaryScoreAuditor(list(i), o)
    eps = auditor.epsilon_lower_bound(method="gauss", alpha=0.05, delta=1e-5, n_bootstrap=300)
    truth = gdp_epsilon(1e-5, mu)
    assert 0 < eps <= truth  # a lower bound below the true epsilon, and informative
    res = auditor.audit("gauss-bonferroni", alpha=0.05, delta=1e-5)
    assert res.method == "gauss-bonferroni" and 0 < res.epsilon_lower <= truth
    both = auditor.all(("steinke", "fdp"), alpha=0.05, delta=1e-5)
    assert set(both) == {"steinke", "fdp"} and all(0 <= v <= truth for v in both.values())
    for m, spec in METHODS.items():
        assert spec.help and isinstance(spec.valid, bool)


def test_bad_input_is_named():
    with pytest.raises(DPValueError, match="method"):
        run_method("lira", [1.0, 2.0, 3.0], [0.0, 0.5, 0.1])
    with pytest.raises(DPValueError, match="use method steinke or fdp"):
        CanaryScoreAuditor([1.0, 1.0], [1.0, 1.0]).epsilon_lower_bound("gauss")  # constant scores
    with pytest.raises(DPValueError, match="unknown option"):
        CanaryScoreAuditor([1.0, 2.0, 3.0], [0.0, 0.5, 0.1]).audit("gauss", n_boot=10)
    with pytest.raises(DPValueError):
        CanaryScoreAuditor([1.0, np.nan], [0.0, 0.5])


def test_constant_scores_go_to_the_threshold_methods_the_refusal_advises():
    """The Gaussian methods refuse constant scores and advise steinke or fdp: the auditor must then take them
    (it refused them for every method), with the numbers of the threshold audit called directly."""
    const, o = np.full(50, 3.0), np.random.default_rng(0).normal(0.0, 1.0, 50)
    auditor = CanaryScoreAuditor(const, o)
    with pytest.raises(DPValueError, match="in_scores are constant.*use method steinke or fdp"):
        auditor.epsilon_lower_bound("gauss")
    for m in ("steinke", "fdp"):
        eps = auditor.epsilon_lower_bound(m)
        assert eps == threshold_audit(const, o, 1e-5, 0.05, method=m, seed=0).epsilon_lower and eps >= 0
