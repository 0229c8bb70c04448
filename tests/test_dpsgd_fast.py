"""The ghost path of DP-SGD (dputils.training.fastgrad) against a naive per-example loop and against the vmap path.

The reference clips and sums gradients formed one example at a time with plain autograd (``loss.backward()`` on
each example, in float64), grouped as Algorithm 1 groups them: sub-batch means a_h over s examples, ``[a_h]_C``,
summed. Both branches of every layer's norm (ghost and materialised) are forced in turn, so each formula is checked
on every layer type, and the clip is set at the median norm so that some groups are clipped and some are not."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from dputils import data
from dputils.errors import DPValueError
from dputils.training import DPSGDConfig, fastgrad, make_mlp, train
from dputils.training.dpsgd import _ghost_sum, resolve_grad_mode
from dputils.training.models import small_cnn, wide_resnet

torch.set_num_threads(1)


def _naive_group_terms(model, X, y, m, s):
    """(m, D) sub-batch mean gradients a_h from a loop of single-example backward passes."""
    rows = []
    for i in range(len(X)):
        model.zero_grad()
        nn.functional.cross_entropy(model(X[i : i + 1]), y[i : i + 1]).backward()
        rows.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    return torch.stack(rows).view(m, s, -1).mean(1)


def _naive_clipped_sum(A, C):
    norms = A.norm(dim=1)
    scale = torch.where(norms > C, C / norms, torch.ones_like(norms))  # [x]_C, written out
    return (A * scale[:, None]).sum(0), norms


def _model(kind):
    torch.manual_seed(5)
    if kind == "mlp":
        return make_mlp(6, 3, hidden=9).double(), (6,)
    if kind == "mlp-wide":  # layer 1 keeps the ghost norm with several rows per group
        return make_mlp(12, 3, hidden=40).double(), (12,)
    if kind == "odd":  # strides, dilation, a rectangular kernel, no bias, LayerNorm over (C, H, W) and over features
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
    return small_cnn(3).double(), (3, 16, 16)  # 16x16: conv1 by grouped convolution, the others by patches


@pytest.mark.parametrize("ghost", ["rule", "always", "never"])
@pytest.mark.parametrize("kind", ["mlp", "mlp-wide", "cnn", "odd"])
@pytest.mark.parametrize("m, s", [(8, 1), (1, 8), (3, 4)])
def test_clipped_group_sum_equals_a_naive_loop(monkeypatch, kind, m, s, ghost):
    if ghost != "rule":
        monkeypatch.setattr(fastgrad, "_ghost_is_cheaper", lambda n, a, b: ghost == "always")
    model, shape = _model(kind)
    gen = torch.Generator().manual_seed(m * 10 + s)
    X = torch.randn(m * s, *shape, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (m * s,), generator=gen)
    A = _naive_group_terms(model, X, y, m, s)
    ref_norms = A.norm(dim=1)
    # clip between the smallest and the largest norm: some groups clipped, some left as they are
    C = float(ref_norms.median()) if m > 1 else float(ref_norms[0]) * 0.5
    ref_U, _ = _naive_clipped_sum(A, C)
    params = {k: v.detach() for k, v in model.named_parameters()}
    U, norms = fastgrad.clipped_group_sum(model, params, X, y, C, m, s)
    torch.testing.assert_close(norms, ref_norms, rtol=0, atol=1e-6 * max(1.0, float(ref_norms.max())))
    flat = torch.cat([U[k].flatten() for k in params])
    assert flat.shape == ref_U.shape
    torch.testing.assert_close(flat, ref_U, rtol=0, atol=1e-6)
    # and with a clip above every norm: the plain sum of the group means
    U2, _ = fastgrad.clipped_group_sum(model, params, X, y, 10 * float(ref_norms.max()), m, s)
    torch.testing.assert_close(torch.cat([U2[k].flatten() for k in params]), A.sum(0), rtol=0, atol=1e-6)
    if m > 1:
        assert (ref_norms < C).any() and (ref_norms > C).any()


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("m, s, microbatch", [(12, 1, 5), (4, 3, 7), (1, 6, 4)])
def test_microbatched_ghost_sum_equals_a_naive_loop(kind, m, s, microbatch):
    # chunks of whole sub-batches (at most `microbatch` rows, at least one sub-batch) add up to the same U
    model, shape = _model(kind)
    gen = torch.Generator().manual_seed(7)
    n = 40
    X = torch.randn(n, *shape, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (n,), generator=gen)
    idx = torch.randperm(n, generator=gen)[: m * s].view(m, s)
    A = _naive_group_terms(model, X[idx.flatten()], y[idx.flatten()], m, s)
    C = float(A.norm(dim=1).median())
    ref, _ = _naive_clipped_sum(A, C)
    p = {k: v.detach() for k, v in model.named_parameters()}
    w = torch.cat([v.flatten() for v in p.values()])
    for mb in (0, microbatch):
        U = _ghost_sum(model, p, X, y, idx, s, C, mb, w)
        torch.testing.assert_close(U, ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "k, stride, dil, pad", [(3, 1, 1, 1), (3, 2, 1, 1), (5, 2, 2, 3), (1, 2, 1, 0), ((3, 2), (2, 1), (1, 2), (0, 1))]
)
def test_patches_equal_unfold(k, stride, dil, pad):
    conv = nn.Conv2d(4, 5, k, stride, pad, dilation=dil)
    a = torch.randn(3, 4, 13, 11)
    ref = nn.functional.unfold(a, conv.kernel_size, dilation=conv.dilation, padding=conv.padding, stride=conv.stride)
    got = fastgrad._patches(a, conv)
    assert torch.equal(got, ref.transpose(1, 2))
    out = conv(a)
    assert got.shape[1] == out.shape[2] * out.shape[3]


def _run(model, X, y, mode, **kw):
    released, clean = [], []
    extra = kw.pop("extra", None)

    def on_round(info):
        released.append(info.released.clone())
        clean.append(info.clean_sum.clone())

    cfg = DPSGDConfig(seed=4, lr=0.2, grad_mode=mode, noise_multiplier_scale=1.0, **kw)
    res = train(model, X, y, cfg, on_round=on_round, extra_gradients=extra)
    return res, released, clean


@pytest.mark.parametrize(
    "kw",
    [
        dict(sub_batches=24, sub_batch_size=1, epochs=2, clip=0.3, sigma=0.5),  # individual, shuffle
        dict(sub_batches=24, sub_batch_size=1, epochs=2, clip=0.3, sigma=0.5, sampler="poisson", microbatch=7),
        dict(sub_batches=1, sub_batch_size=12, epochs=2, clip=0.05, sigma=0.5),  # batch clipping
        dict(sub_batches=3, sub_batch_size=4, epochs=2, clip=0.1, sigma=0.5, sampler="subsample", microbatch=5),
        dict(sub_batches=6, sub_batch_size=4, epochs=1, clip=0.2, sigma=0.0, outer_momentum=0.5),
    ],
)
def test_train_gives_the_same_model_on_both_paths(kw):
    X, y = data.gaussian_blobs(48, dim=5, n_classes=3, seed=2)
    torch.manual_seed(1)
    model = make_mlp(5, 3, hidden=16)
    twin = copy.deepcopy(model)
    r_fast, rel_fast, clean_fast = _run(model, X, y, "auto", **kw)
    r_ref, rel_ref, clean_ref = _run(twin, X, y, "vmap", **kw)
    assert r_fast.grad_mode == "ghost" and r_ref.grad_mode == "vmap"
    assert len(rel_fast) == len(rel_ref) == r_ref.rounds > 0
    for a, b in zip(clean_fast, clean_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(rel_fast, rel_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    for ha, hb in zip(r_fast.history, r_ref.history, strict=True):
        assert ha == pytest.approx(hb, rel=1e-4, abs=1e-5)


def test_cnn_train_and_canary_hook_on_both_paths():
    # image model, Poisson sampling, microbatches and a canary row added through extra_gradients (the white-box
    # audit's use): the same released sums and the same model on both paths
    gen = np.random.default_rng(3)
    X = gen.standard_normal((32, 3, 16, 16)).astype(np.float32)
    y = gen.integers(0, 10, 32)
    torch.manual_seed(2)
    model = small_cnn()
    twin = copy.deepcopy(model)
    D = sum(p.numel() for p in model.parameters())

    def extra(info):
        row = torch.zeros(2, D)
        row[0, 11], row[1, 5] = 3.0, 0.2  # one clipped, one not
        return row

    kw = dict(sub_batches=8, sub_batch_size=1, epochs=1, clip=0.5, sigma=1.0, sampler="poisson", microbatch=3)
    r_fast, rel_fast, clean_fast = _run(model, X, y, "ghost", extra=extra, **kw)
    r_ref, rel_ref, clean_ref = _run(twin, X, y, "vmap", extra=extra, **kw)
    assert r_fast.grad_mode == "ghost" and r_ref.grad_mode == "vmap"
    for a, b in zip(rel_fast, rel_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_auto_picks_the_path_where_it_is_exact():
    cfg = DPSGDConfig(sub_batches=4)
    assert resolve_grad_mode(make_mlp(5, 3, hidden=4), cfg) == "ghost"
    assert resolve_grad_mode(small_cnn(), cfg) == "ghost"
    assert resolve_grad_mode(wide_resnet(10, 1), cfg) == "ghost"
    # sequential inner procedures are not gradients of the sub-batch: vmap path; at s = 1 they are
    assert resolve_grad_mode(make_mlp(5, 3), DPSGDConfig(sub_batch_size=3, inner="sgd")) == "vmap"
    assert resolve_grad_mode(make_mlp(5, 3), DPSGDConfig(sub_batch_size=1, inner="momentum")) == "ghost"
    with pytest.raises(DPValueError, match="grad_mode"):
        resolve_grad_mode(make_mlp(5, 3), DPSGDConfig(sub_batch_size=3, inner="sgd", grad_mode="ghost"))
    lin = nn.Linear(4, 4)
    unsupported = {
        "batchnorm": nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)),
        "inplace": nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2)),
        "shared": nn.Sequential(lin, nn.Tanh(), lin),
        "custom": nn.Bilinear(3, 3, 2),
    }
    for name, mdl in unsupported.items():
        assert fastgrad.fast_path_unsupported(mdl) is not None, name
        assert resolve_grad_mode(mdl, cfg) == "vmap", name
        with pytest.raises(DPValueError, match="grad_mode"):
            resolve_grad_mode(mdl, DPSGDConfig(grad_mode="ghost"))
    with pytest.raises(DPValueError, match="grad_mode"):
        DPSGDConfig(sub_batches=4, grad_mode="fast").validate(8)


def test_shared_layer_falls_back_and_trains():
    # a layer used twice: auto takes the vmap path (ghost norms would need the cross term)
    X, y = data.gaussian_blobs(16, dim=4, n_classes=4, seed=0)
    lin = nn.Linear(4, 4)
    res = train(nn.Sequential(lin, nn.Tanh(), lin), X, y, DPSGDConfig(sub_batches=8, sigma=0.0, device="cpu"))
    assert res.grad_mode == "vmap" and np.isfinite(res.final["train_loss"])


def test_wrong_row_count_is_refused():
    model = make_mlp(3, 2)
    p = {k: v.detach() for k, v in model.named_parameters()}
    with pytest.raises(DPValueError, match="sub_batches"):
        fastgrad.clipped_group_sum(model, p, torch.zeros(5, 3), torch.zeros(5, dtype=torch.long), 1.0, 2, 2)


@pytest.mark.parametrize("kind", ["mlp", "cnn", "odd"])
def test_clipped_group_sum_into_a_flat_buffer(kind):
    # out=: the products write straight into the caller's buffer (params order); same numbers, bit for bit
    model, shape = _model(kind)
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(12, *shape, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 3, (12,), generator=gen)
    p = {k: v.detach() for k, v in model.named_parameters()}
    D = sum(v.numel() for v in p.values())
    for m, s in ((12, 1), (3, 4)):
        ref, ref_norms = fastgrad.clipped_group_sum(model, p, X, y, 0.5, m, s)
        buf = torch.full((D,), float("nan"), dtype=torch.float64)
        got, norms = fastgrad.clipped_group_sum(model, p, X, y, 0.5, m, s, out=buf)
        assert list(got) == list(ref) == list(p) and torch.equal(norms, ref_norms)
        assert torch.equal(buf, torch.cat([v.flatten() for v in ref.values()]))
        assert all(v.data_ptr() >= buf.data_ptr() and v.shape == p[k].shape for k, v in got.items())  # views
    with pytest.raises(DPValueError, match="out"):
        fastgrad.clipped_group_sum(model, p, X, y, 0.5, 12, 1, out=torch.zeros(D + 1, dtype=torch.float64))


@pytest.mark.parametrize(
    "kw",
    [
        dict(sub_batches=24, sub_batch_size=1, epochs=2, clip=0.3, sigma=0.5),
        dict(sub_batches=24, sub_batch_size=1, epochs=2, clip=0.3, sigma=0.5, sampler="poisson", microbatch=7),
        dict(sub_batches=3, sub_batch_size=4, epochs=2, clip=0.1, sigma=0.5, microbatch=5),
        dict(sub_batches=6, sub_batch_size=4, epochs=1, clip=0.2, sigma=1.0, outer_momentum=0.5),
    ],
)
@pytest.mark.parametrize("mode", ["ghost", "vmap"])
def test_runs_without_hooks_reuse_buffers_and_give_the_same_numbers(kw, mode):
    # without hooks train updates w in place and keeps U, the noise and the gathered rows in buffers reused between
    # rounds; with a hook (which may keep info.params, clean_sum, released) every round's tensors are new: the
    # two runs must agree bit for bit
    X, y = data.gaussian_blobs(48, dim=5, n_classes=3, seed=2)
    torch.manual_seed(1)
    model = make_mlp(5, 3, hidden=16)
    twin = copy.deepcopy(model)
    cfg = DPSGDConfig(seed=4, lr=0.2, grad_mode=mode, **kw)
    kept = []
    r_plain = train(model, X, y, cfg)
    r_hook = train(twin, X, y, cfg, on_round=lambda info: kept.append((info.params, info.clean_sum, info.released)))
    assert r_plain.noise_to_signal == r_hook.noise_to_signal and r_plain.history == r_hook.history
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.equal(p, q)
    # what the hook kept is each round's own: the params of round t + 1 are those of round t minus the step
    for (w0, _, rel), (w1, _, _) in zip(kept, kept[1:]):
        if not kw.get("outer_momentum"):
            torch.testing.assert_close(w1, w0 - 0.2 * rel / kw["sub_batches"], rtol=0, atol=1e-6)
