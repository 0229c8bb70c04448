"""Library functions that replaced loops of the gauss_audit chapter: canary.mean_shift (against Welch's t of
scipy), ftrl_audit.ideal_ftrl_bounds (its contract and equality with the direct calls it replaces) and
ftrl_audit.ftrl_score_law (holds on exact-law runs, rejects a run with a quarter of the noise)."""

import numpy as np
import pytest
from scipy import stats

from dputils.audit.canary import mean_shift
from dputils.audit.ftrl_audit import audit_ftrl, ftrl_score_law, ideal_ftrl_bounds, simulate_ftrl_audit
from dputils.errors import DPValueError
from dputils.training.ftrl import tree_depth


def test_mean_shift_is_welch_t():
    rng = np.random.default_rng(1)
    a, b = rng.normal(1.0, 2.0, 37), rng.normal(0.0, 0.5, 61)
    d, se = mean_shift(a, b)
    assert d == pytest.approx(a.mean() - b.mean(), rel=1e-14)
    assert d / se == pytest.approx(stats.ttest_ind(a, b, equal_var=False).statistic, rel=1e-12)
    with pytest.raises(DPValueError):
        mean_shift([1.0], b)


def test_ideal_ftrl_bounds_contract():
    eps, reps, m, T = [2.0, 8.0], 1, 400, 16
    b, ceil, anc = ideal_ftrl_bounds(m, eps, reps, T=T, n_bootstrap=100, seed=3)
    assert set(b) == {"gauss", "gauss-bonferroni", "andrew", "steinke", "fdp"}
    assert all(v.shape == (2, 1) for v in b.values())
    assert np.allclose(ceil, np.array(eps)[:, None], atol=1e-8)
    assert np.all(anc == tree_depth(T))
    assert np.all(b["gauss-bonferroni"] <= np.array(eps)[:, None])
    # the same as the direct calls, seeds seed + 100 r + i (run) and seed + r (audit)
    run = simulate_ftrl_audit(m, epsilon=8.0, T=T, seed=3 + 100 * 0 + 1)
    direct = audit_ftrl(run, 0.05, n_bootstrap=100, seed=3 + 0, baselines=True)
    assert {k: b[k][1, 0] for k in b} == direct


def test_ftrl_score_law_holds_and_flags_less_noise():
    ok = ftrl_score_law(simulate_ftrl_audit(2000, epsilon=2.0, T=16, seed=0))
    assert ok["shift_ok"] and ok["sd_ok"]
    bad = ftrl_score_law(simulate_ftrl_audit(2000, epsilon=2.0, T=16, noise_scale=0.25, seed=0))
    assert not bad["sd_ok"]
    assert bad["sd_ratio"] == pytest.approx(0.25, rel=0.1)
    with pytest.raises(DPValueError):
        ftrl_score_law("not a run")
