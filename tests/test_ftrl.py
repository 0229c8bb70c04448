"""DP-FTRL with tree aggregation (dputils.training.ftrl), its one-run audit (dputils.audit.ftrl_audit) and
input-space canaries for DP-SGD (dputils.audit.input_canary), checked against independent references:
brute-force dyadic decompositions, the closed-form noise covariance of the prefix sums, the note's sigma_node
values and an independent scipy evaluation of the analytic Gaussian mechanism (Balle and Wang), the exact
Gaussian law of the canary scores, and the validity / power of the auditors (a run with 4x too little noise
must be flagged)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from dputils.audit.ftrl_audit import FTRLAuditRun, audit_ftrl, run_ftrl_audit, simulate_ftrl_audit
from dputils.audit.input_canary import InputCanaryRun, audit_input_canaries, make_input_canaries, run_input_canary_audit
from dputils.errors import DPValueError
from dputils.training import evaluate, make_mlp
from dputils.training.ftrl import (
    FTRLConfig,
    TreeAggregator,
    calibrate_sigma_node,
    max_released_ancestors,
    node_span,
    prefix_noise_variance,
    released_ancestors,
    train_ftrl,
    tree_depth,
    tree_epsilon,
    tree_mu,
)

torch.set_num_threads(1)

NOTE_SIGMA_NODE = {1.0: 10.5518, 2.0: 5.6394, 4.0: 3.0580, 8.0: 1.6977}  # note Sec. 3.2 / target 9 (T 128, C 1)


# the tree --------------------------------------------------------------------------------------------
def test_released_nodes_decompose_every_prefix_and_ancestor_counts():
    for T in range(1, 70):
        for t in range(1, T + 1):  # walking u -> u - lowbit(u) from t covers [1, t] with disjoint released nodes
            covered, u = [], t
            while u > 0:
                a, b = node_span(u)
                covered.extend(range(a, b + 1))
                u = a - 1
            assert sorted(covered) == list(range(1, t + 1))
        counts = [len(released_ancestors(leaf, T)) for leaf in range(1, T + 1)]
        # brute force: released nodes containing each leaf
        brute = [sum(node_span(u)[0] <= leaf <= u for u in range(1, T + 1)) for leaf in range(1, T + 1)]
        assert counts == brute
        assert max(counts) == counts[0] == max_released_ancestors(T) == math.floor(math.log2(T)) + 1
        L = tree_depth(T)
        assert L == math.ceil(math.log2(T)) + 1
        assert max(counts) == (L if T & (T - 1) == 0 else L - 1)  # tight exactly at powers of two
    assert released_ancestors(1, 128) == [1, 2, 4, 8, 16, 32, 64, 128]


def test_prefix_sums_are_exact_without_noise():
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(37, 5, generator=g, dtype=torch.float64)
    tree = TreeAggregator(5, 0.0, dtype=torch.float64)
    for t in range(37):
        s = tree.add(xs[t])
        torch.testing.assert_close(s, xs[: t + 1].sum(0), rtol=0, atol=1e-12)
        assert tree.last_span == node_span(t + 1)
        torch.testing.assert_close(tree.last_node_clean, xs[tree.last_span[0] - 1 : t + 1].sum(0), rtol=0, atol=1e-12)


def test_prefix_noise_covariance_matches_closed_form():
    T, sigma, d = 16, 2.0, 40_000  # d independent coordinates serve as Monte Carlo replicates
    tree = TreeAggregator(d, sigma, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    S = torch.stack([tree.add(torch.zeros(d, dtype=torch.float64)) for _ in range(T)]).numpy()  # (T, d)
    var = S.var(axis=1, ddof=1)
    expected = prefix_noise_variance(np.arange(1, T + 1), sigma)  # popcount(t) sigma^2
    np.testing.assert_allclose(expected[[0, 2, 6, 14, 15]], [4.0, 8.0, 12.0, 16.0, 4.0])
    # sample variance of d Gaussians: relative sd sqrt(2/d) = 0.7%; tolerance 5 sd
    np.testing.assert_allclose(var, expected, rtol=5 * math.sqrt(2 / d))
    # covariance = sigma^2 * number of shared released nodes: s_5 = nu_4 + nu_5 shares nu_4 with s_4 = nu_4,
    # s_3 = nu_2 + nu_3 shares nothing with s_4
    cov = np.cov(S)
    tol = 5 * sigma**2 * math.sqrt(2 / d) * 2
    assert abs(cov[3, 4] - sigma**2) < tol and abs(cov[2, 3]) < tol and abs(cov[6, 7]) < tol  # s_7, s_8 share none
    assert abs(cov[11, 13] - 2 * sigma**2) < 2 * tol  # s_12 = nu_8 + nu_12, s_14 = nu_8 + nu_12 + nu_14


# privacy ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", sorted(NOTE_SIGMA_NODE))
def test_sigma_node_calibration_matches_note_and_analytic_gaussian(eps):
    s = calibrate_sigma_node(eps, 1e-5, 128)
    assert s == pytest.approx(NOTE_SIGMA_NODE[eps], abs=1e-4)
    assert tree_depth(128) == 8 and tree_mu(s, 128) == pytest.approx(math.sqrt(8) / s)
    # independent: Balle-Wang Thm 8 for the Gaussian mechanism with sensitivity sqrt(L) C and noise s, via scipy
    D = math.sqrt(8.0)
    delta = stats.norm.cdf(D / (2 * s) - eps * s / D) - math.exp(eps) * stats.norm.cdf(-D / (2 * s) - eps * s / D)
    assert delta == pytest.approx(1e-5, rel=1e-6)
    assert tree_epsilon(s, 128, 1e-5) == pytest.approx(eps, abs=1e-8)
    # C scales sigma_node linearly; larger T needs more noise (more levels)
    assert calibrate_sigma_node(eps, 1e-5, 128, clip=3.0) == pytest.approx(3 * s)
    assert calibrate_sigma_node(eps, 1e-5, 256) == pytest.approx(s * 3 / math.sqrt(8))


# idealised audit ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ideal():
    return {eps: simulate_ftrl_audit(2000, epsilon=eps, T=128, seed=0) for eps in (1.0, 2.0, 4.0, 8.0)}


def test_idealised_scores_have_the_exact_gaussian_law(ideal):
    for eps, r in ideal.items():
        assert isinstance(r, FTRLAuditRun) and r.n_ancestors == 8 and r.kind == "ideal"
        assert r.ceiling == pytest.approx(eps, abs=1e-8) == pytest.approx(r.epsilon_theory, abs=1e-8)  # target 9
        n_i, n_o = len(r.in_scores), len(r.out_scores)
        se = r.sigma_node * math.sqrt(1 / n_i + 1 / n_o)
        assert abs(r.in_scores.mean() - r.out_scores.mean() - math.sqrt(8)) < 4 * se  # shift sqrt(L) C
        assert abs(r.out_scores.mean()) < 4 * r.sigma_node / math.sqrt(n_o)
        for sc in (r.in_scores, r.out_scores):  # sd = sigma_node: chi-square interval at 1e-4 two-sided
            n = len(sc)
            lo = math.sqrt(stats.chi2.ppf(5e-5, n - 1) / (n - 1))
            hi = math.sqrt(stats.chi2.ppf(1 - 5e-5, n - 1) / (n - 1))
            assert lo < sc.std(ddof=1) / r.sigma_node < hi


def test_idealised_audit_is_valid_powerful_and_beats_andrew(ideal):
    for eps, r in ideal.items():
        b = audit_ftrl(r, 0.05, n_bootstrap=300)
        assert 0 <= b["gauss-bonferroni"] <= eps and 0 <= b["gauss"] <= eps, (eps, b)
        if eps >= 4:
            assert b["gauss"] > 0.75 * eps  # the note: ~3.6 / 7.45 at m 5000; m 2000 a bit lower
            assert b["gauss"] > b["andrew"]  # max-cosine statistic loses the ancestor-sum information


def test_too_little_noise_is_flagged():
    r = simulate_ftrl_audit(2000, epsilon=2.0, noise_scale=0.25, seed=1)  # actual noise sigma_node / 4
    assert r.epsilon_theory == pytest.approx(2.0, abs=1e-8) and r.ceiling > 8
    b = audit_ftrl(r, 0.05, n_bootstrap=300)
    assert b["gauss"] > 2.0 and b["gauss-bonferroni"] > 2.0


# real DP-FTRL training ---------------------------------------------------------------------------------
def test_train_ftrl_iterates_are_theta0_minus_lr_prefix_over_B():
    X = torch.randn(64 * 8, 6, generator=torch.Generator().manual_seed(0))
    y = (X[:, 0] > 0).long()
    torch.manual_seed(0)
    model = make_mlp(6, 2, 0)
    w0 = torch.cat([p.detach().flatten() for p in model.parameters()]).clone()
    loss0 = evaluate(model, X, y)["loss"]
    seen, log = [], []

    def on_step(s):
        seen.append(s.indices.clone())
        log.append((s.t, s.params.clone(), s.prefix.clone(), s.leaf.clone(), s.span))

    cfg = FTRLConfig(steps=8, batch_size=64, clip=0.5, sigma_node=0.0, lr=0.3, device="auto", seed=0)
    res = train_ftrl(model, X, y, cfg, on_step=on_step)
    assert res.steps == 8 and len(res.history) == 1 and res.final["train_loss"] < loss0  # noiseless FTRL learns
    idx = torch.cat(seen)
    assert len(torch.unique(idx)) == len(idx) == 512  # single pass: each example in one leaf
    leaves = torch.stack([lg[3] for lg in log])
    for k, (t, params, prefix, leaf, span) in enumerate(log):
        torch.testing.assert_close(prefix, leaves[: k + 1].sum(0), rtol=1e-5, atol=1e-5)  # sigma 0: exact sums
        assert float(leaf.norm()) <= 64 * 0.5 + 1e-4  # B clipped gradients of norm <= C
        if k:
            torch.testing.assert_close(params, w0.to(params.device) - 0.3 / 64 * log[k - 1][2], rtol=1e-6, atol=1e-6)
    with pytest.raises(DPValueError):
        train_ftrl(make_mlp(6, 2, 0), X, y, FTRLConfig(steps=9, batch_size=64))  # 576 > 512: no single pass


@pytest.fixture(scope="module")
def trained():
    kw = dict(T=32, batch_size=16, dim=10, n_classes=4, hidden=32, lr=0.5, progress=False, seed=0)
    return {
        "ok": run_ftrl_audit(400, epsilon=4.0, **kw),
        "broken": run_ftrl_audit(400, epsilon=4.0, noise_scale=0.25, **kw),
    }


def test_trained_ftrl_scores_match_the_mechanism(trained):
    r = trained["ok"]
    assert r.kind == "train" and r.n_ancestors == tree_depth(32) == 6 and r.dim == 10 * 32 + 32 + 32 * 4 + 4
    assert r.grad_mode == "ghost"  # the audit's training runs take the ghost path (no per-example gradients)
    n_i, n_o = len(r.in_scores), len(r.out_scores)
    se = r.sigma_node * math.sqrt(1 / n_i + 1 / n_o)
    assert abs(r.in_scores.mean() - r.out_scores.mean() - r.expected_shift) < 4 * se
    n = n_o  # background removed: OUT scores are exactly N(0, sigma_node^2) (chi-square interval at 1e-4)
    lo, hi = (math.sqrt(stats.chi2.ppf(p, n - 1) / (n - 1)) for p in (5e-5, 1 - 5e-5))
    assert lo < r.out_scores.std(ddof=1) / r.sigma_node < hi
    assert r.out_raw.std(ddof=1) >= r.out_scores.std(ddof=1) * lo  # the background only adds spread
    for score in ("ours", "raw"):
        b = audit_ftrl(r, 0.05, score=score, n_bootstrap=300)
        assert all(0 <= v <= r.epsilon_theory for k, v in b.items() if k != "andrew"), (score, b)


def test_trained_ftrl_with_too_little_noise_is_flagged(trained):
    b = audit_ftrl(trained["broken"], 0.05, n_bootstrap=300)
    assert b["gauss"] > trained["broken"].epsilon_theory == pytest.approx(4.0, abs=1e-8)


# input-space canaries (DP-SGD) ------------------------------------------------------------------------
def test_make_input_canaries():
    Xf = np.random.default_rng(0).standard_normal((50, 8))
    yf = np.arange(50) % 5
    Xm, ym = make_input_canaries("mislabeled", Xf, yf, 5)
    assert np.array_equal(Xm, Xf.astype(np.float32)) and np.all(ym != yf) and set(ym) <= set(range(5))
    Xo, yo = make_input_canaries("ood", Xf, yf, 5, ood_scale=4.0)
    np.testing.assert_allclose(np.linalg.norm(Xo, axis=1), 4.0 * math.sqrt(8), rtol=1e-5)
    with pytest.raises(DPValueError):
        make_input_canaries("pixels", Xf, yf, 5)


@pytest.mark.parametrize("kind", ["mislabeled", "ood"])
def test_input_canary_run(kind):
    r = run_input_canary_audit(
        200,
        kind=kind,
        sigma=1.0,
        epochs=10,
        batch_size=50,
        n_train=500,
        dim=20,
        n_classes=10,
        hidden=32,
        progress=False,
        seed=0,
    )
    assert isinstance(r, InputCanaryRun) and len(r.in_sums) + len(r.out_sums) == 200 == len(r.in_loss) + len(r.out_loss)
    assert r.T == 10 * round((500 + len(r.in_sums)) / 50) and 0 < r.saturation <= 1 + 1e-6
    d = r.in_scores.mean() - r.out_scores.mean()
    se = math.sqrt(r.in_scores.var(ddof=1) / len(r.in_scores) + r.out_scores.var(ddof=1) / len(r.out_scores))
    assert 3 * se < d < r.model1_shift + 4 * se  # signal, but at most the saturated Model-1 shift sqrt(T) q C
    assert r.out_scores.std(ddof=1) > r.sigma * r.clip * 0.8  # noise floor sigma C (sampling tolerance)
    for score in ("gradient", "loss"):
        b = audit_input_canaries(r, 0.05, score=score, n_bootstrap=200)
        assert all(0 <= v <= r.epsilon_theory for v in b.values()), (score, b)


@pytest.mark.parametrize(
    "kw",
    [
        dict(m=3),
        dict(epsilon=0.0),
        dict(sigma_node=-1.0),
        dict(delta=2.0),
        dict(canary_leaf=200),
        dict(noise_scale=0.0),
        dict(p_in=1.0),
        dict(dim=10),
        dict(epsilon=1.0, sigma_node=2.0),
        dict(epsilon=None),
    ],
)
def test_bad_input_raises(kw):
    args = {"m": 100, "epsilon": 2.0, **kw}
    with pytest.raises(DPValueError):
        simulate_ftrl_audit(**args)


def test_bad_inputs_elsewhere():
    with pytest.raises(DPValueError):
        calibrate_sigma_node(0.0, 1e-5, 128)
    with pytest.raises(DPValueError):
        tree_depth(0)
    with pytest.raises(DPValueError):
        TreeAggregator(3, 1.0).add(torch.zeros(4))
    with pytest.raises(DPValueError):
        audit_ftrl(simulate_ftrl_audit(100, epsilon=2.0), score="raw")  # idealised runs have no raw scores
    with pytest.raises(DPValueError):
        run_input_canary_audit(10, kind="blur", progress=False)
    with pytest.raises(DPValueError):
        audit_input_canaries({"in": [1.0]})


def test_streamed_scores_equal_offline_recomputation():
    # ours = sum of the released ancestor nodes [1, 2^j] = s_{2^j} (leaf 1), over sqrt(L); andrew = the package's
    # andrew_statistic on the stored prefix sums
    from dputils.audit import andrew_statistic

    r = simulate_ftrl_audit(50, sigma_node=3.0, T=16, dim=120, keep_release=True, seed=3)
    assert r.release.shape == (16, 120)
    ours = r.release[[0, 1, 3, 7, 15]].sum(0) / math.sqrt(5)
    np.testing.assert_allclose(r.in_scores, ours[r.in_coords], rtol=1e-12)
    np.testing.assert_allclose(r.out_scores, ours[r.out_coords], rtol=1e-12)
    np.testing.assert_allclose(r.in_andrew, andrew_statistic(r.release, r.in_coords), rtol=1e-12)
    np.testing.assert_allclose(r.out_andrew, andrew_statistic(r.release, r.out_coords), rtol=1e-12)
