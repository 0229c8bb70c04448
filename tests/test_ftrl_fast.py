"""DP-FTRL's leaves on the ghost path (dputils.training.fastgrad) against the vmap path and a naive per-example loop.

The reference forms every example's gradient with its own ``loss.backward()`` in float64, clips it at C and sums
the leaf; the full-run reference also rebuilds the tree release independently (node t = the leaves of
``[t - lowbit(t) + 1, t]`` plus the t-th draw of the noise generator, ``s_t`` = the nodes of the binary
decomposition of t, ``theta_t = theta_0 - eta s_t / B``). Float64 models run in float64 end to end, so the paths
must agree to rounding (1e-9 relative here); float32 runs agree to float32 rounding."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from dputils import data
from dputils.errors import DPValueError
from dputils.training import fastgrad, make_mlp
from dputils.training.ftrl import FTRLConfig, _leaf_sum, train_ftrl
from dputils.training.models import small_cnn

torch.set_num_threads(1)

RTOL = 1e-9  # float64 throughout: the paths differ only by the order of the additions


def _close(a, b, rtol=RTOL):
    """|a - b| <= rtol * max|b| elementwise (relative to the vector's scale: entries near 0 are not singled out)."""
    scale = float(b.abs().max())
    torch.testing.assert_close(a, b, rtol=0, atol=rtol * max(scale, 1e-30))


def _model(kind):
    torch.manual_seed(5)
    if kind == "mlp":
        return make_mlp(6, 3, hidden=9).double(), (6,)
    if kind == "odd":  # strides, dilation, no bias, GroupNorm, LayerNorm over (C, H, W) and over features
        return nn.Sequential(
            nn.Conv2d(3, 4, 3, stride=2, padding=1),
            nn.GroupNorm(2, 4),
            nn.Tanh(),
            nn.Conv2d(4, 6, (3, 2), stride=(1, 2), dilation=(2, 1), padding=(1, 0), bias=False),
            nn.LayerNorm([6, 2, 2]),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(24, 8),
            nn.LayerNorm(8),
            nn.Linear(8, 3),
        ).double(), (3, 7, 8)
    return small_cnn(3).double(), (3, 16, 16)


def _flat_grad(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def _naive_clipped(model, X, y, C):
    """Per-example gradients by a loop of single-example backward passes, each clipped at C (written out)."""
    rows = []
    for i in range(len(X)):
        model.zero_grad()
        nn.functional.cross_entropy(model(X[i : i + 1]), y[i : i + 1]).backward()
        rows.append(_flat_grad(model).detach().clone())
    G = torch.stack(rows)
    norms = G.norm(dim=1)
    scale = torch.where(norms > C, C / norms, torch.ones_like(norms))
    return (G * scale[:, None]).sum(0), norms


@pytest.mark.parametrize("ghost", ["rule", "always", "never"])
@pytest.mark.parametrize("kind", ["mlp", "cnn", "odd"])
def test_leaf_sum_equals_vmap_and_a_naive_loop(monkeypatch, kind, ghost):
    if ghost != "rule":  # both norm formulas of every layer: ghost norm and materialised layer gradient
        monkeypatch.setattr(fastgrad, "_ghost_is_cheaper", lambda n, a, b: ghost == "always")
    model, shape = _model(kind)
    gen = torch.Generator().manual_seed(3)
    n = 20
    X = torch.randn(n, *shape, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (n,), generator=gen)
    idx = torch.randperm(n, generator=gen)[:11]
    _, norms = _naive_clipped(model, X[idx], y[idx], 1.0)
    C = float(norms.median())  # some examples clipped, some not
    ref, _ = _naive_clipped(model, X[idx], y[idx], C)
    assert (norms < C).any() and (norms > C).any()
    p = {k: v.detach() for k, v in model.named_parameters()}
    w = torch.cat([v.flatten() for v in p.values()])
    for mode in ("ghost", "vmap"):
        for mb in (0, 4, 11, 50):  # whole leaf, chunks with a remainder, exactly one chunk, more than the leaf
            got = _leaf_sum(model, p, X, y, idx, C, mb, mode, w)
            assert got.dtype == torch.float64 and got.shape == ref.shape
            _close(got, ref)


def _naive_ftrl(model, X, y, cfg: FTRLConfig, extra=None):
    """DP-FTRL written out: leaves by the per-example loop, the tree release rebuilt from its definition."""
    T, B, C = cfg.steps, cfg.batch_size, cfg.clip
    order = torch.randperm(len(X), generator=torch.Generator().manual_seed(cfg.seed))[: T * B]
    noise = torch.Generator().manual_seed(cfg.seed + 1)
    params = list(model.parameters())
    w0 = torch.cat([q.detach().flatten() for q in params]).clone()
    w = w0.clone()
    leaves, nodes, prefixes, clipped = [], {}, [], 0
    for t in range(1, T + 1):
        with torch.no_grad():
            i = 0
            for q in params:
                q.copy_(w[i : i + q.numel()].view_as(q))
                i += q.numel()
        rows = order[(t - 1) * B : t * B]
        leaf, norms = _naive_clipped(model, X[rows], y[rows], C)
        clipped += int((norms > C).sum())
        if extra is not None and extra(t) is not None:
            e = extra(t)
            leaf = leaf + (e / torch.clamp(e.norm(dim=1, keepdim=True) / C, min=1.0)).sum(0)
        leaves.append(leaf)
        low = t & -t
        z = torch.randn(len(w), generator=noise, dtype=torch.float64) if cfg.sigma_node > 0 else 0.0
        nodes[t] = torch.stack(leaves[t - low : t]).sum(0) + cfg.sigma_node * z
        s, u = torch.zeros_like(w), t
        while u:
            s, u = s + nodes[u], u - (u & -u)
        prefixes.append(s)
        w = w0 - cfg.lr / B * s
    return w, leaves, prefixes, clipped


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("microbatch", [0, 5])
def test_float64_ftrl_run_is_the_same_on_both_paths_and_the_naive_loop(kind, microbatch):
    model, shape = _model(kind)
    T, B = 6, 8  # node 4 = leaves [1, 4], node 6 = [5, 6]: merged clean sums on both paths
    gen = torch.Generator().manual_seed(11)
    n = T * B + 5
    X = torch.randn(n, *shape, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (n,), generator=gen)
    D = sum(q.numel() for q in model.parameters())
    canary = torch.zeros(2, D, dtype=torch.float64)
    canary[0, 3], canary[1, 7] = 50.0, 0.01  # one clipped, one not
    C = {"mlp": 1.6, "cnn": 12.4}[kind]  # about the median gradient norm at the start

    def extra_t(t):
        return canary if t == 2 else None

    cfg = dict(steps=T, batch_size=B, clip=C, sigma_node=0.3 * C, lr=0.5, device="cpu", seed=2, microbatch=microbatch)
    ref_w, ref_leaves, ref_prefixes, clipped = _naive_ftrl(copy.deepcopy(model), X, y, FTRLConfig(**cfg), extra_t)
    assert 0 < clipped < T * B  # some gradients clipped, some not
    finals = {}
    for mode in ("ghost", "vmap"):
        twin = copy.deepcopy(model)
        seen = []
        res = train_ftrl(
            twin,
            X,
            y,
            FTRLConfig(grad_mode=mode, **cfg),
            on_step=lambda st: seen.append((st.leaf.clone(), st.prefix.clone(), st.data_sum.clone())),
            extra_gradients=lambda st: extra_t(st.t),
        )
        assert res.grad_mode == mode and len(seen) == T
        for (leaf, prefix, data_sum), rl, rp in zip(seen, ref_leaves, ref_prefixes):
            assert leaf.dtype == torch.float64
            _close(leaf, rl)
            _close(prefix, rp)
        _close(seen[1][0] - seen[1][2], (canary / canary.norm(dim=1, keepdim=True).clamp_min(C) * C).sum(0))
        finals[mode] = torch.cat([q.detach().flatten() for q in twin.parameters()])
        _close(finals[mode], ref_w)
    _close(finals["ghost"], finals["vmap"])


def test_float32_ftrl_runs_agree_and_auto_takes_the_ghost_path():
    X, y = data.gaussian_blobs(16 * 8, dim=10, n_classes=4, seed=1)
    torch.manual_seed(0)
    model = make_mlp(10, 4, hidden=32)
    twin = copy.deepcopy(model)
    cfg = dict(steps=8, batch_size=16, clip=0.5, sigma_node=1.0, lr=0.5, device="cpu", seed=3)
    r_fast = train_ftrl(model, X, y, FTRLConfig(**cfg), eval_every=4)
    r_ref = train_ftrl(twin, X, y, FTRLConfig(grad_mode="vmap", **cfg), eval_every=4)
    assert r_fast.grad_mode == "ghost" and r_ref.grad_mode == "vmap"
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    for ha, hb in zip(r_fast.history, r_ref.history, strict=True):
        assert ha == pytest.approx(hb, rel=1e-5, abs=1e-6)


def test_unsupported_models_fall_back_and_bad_options_are_refused():
    X, y = data.gaussian_blobs(32, dim=4, n_classes=4, seed=0)

    def shared():  # a layer used twice: ghost norms would need the cross term
        lin = nn.Linear(4, 4)
        return nn.Sequential(lin, nn.Tanh(), lin)

    res = train_ftrl(shared(), X, y, FTRLConfig(steps=4, batch_size=8, sigma_node=0.5, device="cpu"))
    assert res.grad_mode == "vmap" and np.isfinite(res.final["train_loss"])
    with pytest.raises(DPValueError, match="grad_mode"):
        train_ftrl(shared(), X, y, FTRLConfig(steps=4, batch_size=8, device="cpu", grad_mode="ghost"))
    with pytest.raises(DPValueError, match="grad_mode"):
        train_ftrl(make_mlp(4, 4), X, y, FTRLConfig(steps=4, batch_size=8, device="cpu", grad_mode="fast"))
    with pytest.raises(DPValueError, match="microbatch"):
        train_ftrl(make_mlp(4, 4), X, y, FTRLConfig(steps=4, batch_size=8, device="cpu", microbatch=-1))


@pytest.mark.parametrize("microbatch", [0, 6])
def test_runs_without_hooks_reuse_the_leaf_buffers_and_give_the_same_numbers(microbatch):
    # without hooks the leaf's buffers are reused from step to step (the tree copies each leaf); with a hook every
    # leaf is a new tensor; history=False skips the evaluation but still writes the final parameters
    X, y = data.gaussian_blobs(16 * 8, dim=10, n_classes=4, seed=1)
    torch.manual_seed(0)
    model = make_mlp(10, 4, hidden=32)
    twin, quiet = copy.deepcopy(model), copy.deepcopy(model)
    cfg = dict(steps=8, batch_size=16, clip=0.5, sigma_node=1.0, lr=0.5, device="cpu", seed=3, microbatch=microbatch)
    leaves = []
    r_plain = train_ftrl(model, X, y, FTRLConfig(**cfg))
    r_hook = train_ftrl(twin, X, y, FTRLConfig(**cfg), on_step=lambda st: leaves.append(st.data_sum))
    r_quiet = train_ftrl(quiet, X, y, FTRLConfig(history=False, **cfg))
    assert r_plain.history == r_hook.history and len(r_plain.history) == 1 and r_quiet.history == []
    assert len({id(v) for v in leaves}) == len(leaves) == 8  # each hook saw its own leaf
    for p, q, r in zip(model.parameters(), twin.parameters(), quiet.parameters()):
        assert torch.equal(p, q) and torch.equal(p, r)
