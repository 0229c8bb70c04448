"""Tests of dputils.training (Algorithm 1) against direct computations: per-sample gradients by a loop
with autograd, clipping norms, the empirical noise standard deviation, the shuffling schedule, the local
SGD procedure against a manual loop, and the canary hook."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from dputils import data
from dputils.errors import DPValueError
from dputils.training import DPSGDConfig, clip_rows, make_mlp, per_sample_gradients, resolve_device, train
from dputils.training.dpsgd import _local_procedure, _sub_batch_mean_gradients

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def blobs():
    X, y = data.gaussian_blobs(240, dim=5, n_classes=3, seed=1)
    return X, y


def _loop_grads(model, X, y):
    rows = []
    for i in range(len(X)):
        model.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(torch.as_tensor(X[i : i + 1])), torch.as_tensor(y[i : i + 1]))
        loss.backward()
        rows.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    return torch.stack(rows)


def test_per_sample_gradients_match_loop(blobs):
    X, y = blobs
    torch.manual_seed(0)
    model = make_mlp(5, 3, hidden=7)
    params = {k: v.detach() for k, v in model.named_parameters()}
    G = per_sample_gradients(model, params, torch.as_tensor(X[:20]), torch.as_tensor(y[:20]))
    assert torch.allclose(G, _loop_grads(model, X[:20], y[:20]), atol=1e-6)  # float32 tolerance


def test_sub_batch_mean_gradients_match_loop(blobs):
    X, y = blobs
    model = make_mlp(5, 3)
    params = {k: v.detach() for k, v in model.named_parameters()}
    Xb = torch.as_tensor(X[:12]).view(3, 4, 5)
    yb = torch.as_tensor(y[:12]).view(3, 4)
    G = _sub_batch_mean_gradients(model, params, Xb, yb)
    ref = _loop_grads(model, X[:12], y[:12]).view(3, 4, -1).mean(1)
    assert torch.allclose(G, ref, atol=1e-6)


def test_local_sgd_matches_manual_loop(blobs):
    X, y = blobs
    torch.manual_seed(0)
    model = make_mlp(5, 3)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    a = _local_procedure(model, params, torch.as_tensor(X[:6]), torch.as_tensor(y[:6]), 0.1, 0.0)
    # manual: sequential SGD on a copy; a = (w_1 - w_{s+1}) / lr
    ref_model = make_mlp(5, 3)
    ref_model.load_state_dict(model.state_dict())
    w1 = torch.cat([p.detach().flatten() for p in ref_model.parameters()])
    opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    for i in range(6):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(
            ref_model(torch.as_tensor(X[i : i + 1])), torch.as_tensor(y[i : i + 1])
        ).backward()
        opt.step()
    w7 = torch.cat([p.detach().flatten() for p in ref_model.parameters()])
    assert torch.allclose(a, (w1 - w7) / 0.1, atol=1e-5)


def test_clip_rows_global_norm():
    G = torch.randn(50, 30) * torch.linspace(0.01, 10, 50)[:, None]
    Cg = clip_rows(G, 1.5)
    assert torch.all(Cg.norm(dim=1) <= 1.5 + 1e-5)
    small = G.norm(dim=1) <= 1.5
    assert torch.allclose(Cg[small], G[small])
    big = ~small
    assert torch.allclose(Cg[big].norm(dim=1), torch.full((int(big.sum()),), 1.5), atol=1e-5)
    # direction kept
    assert torch.allclose(
        Cg[big] / Cg[big].norm(dim=1, keepdim=True), G[big] / G[big].norm(dim=1, keepdim=True), atol=1e-5
    )


@pytest.mark.parametrize("m, s", [(8, 1), (1, 8), (2, 4)])
def test_noise_std_clipping_and_shuffle_schedule(blobs, m, s):
    X, y = blobs
    model = make_mlp(5, 3, hidden=16)
    C, sigma = 0.7, 1.3
    seen, noise, norms = [], [], []

    def on_round(info):
        seen.append(info.indices.flatten().cpu().numpy())
        noise.append((info.released - info.clean_sum).cpu().numpy())
        norms.append(float(info.clean_sum.norm()))

    cfg = DPSGDConfig(epochs=2, sub_batch_size=s, sub_batches=m, clip=C, sigma=sigma, lr=0.05, seed=3)
    res = train(model, X, y, cfg, on_round=on_round)
    assert res.rounds == 2 * len(X) // (m * s)
    # every sample exactly once per epoch under shuffling
    R = len(X) // (m * s)
    for e in range(2):
        ep = np.concatenate(seen[e * R : (e + 1) * R])
        assert np.array_equal(np.sort(ep), np.arange(len(X)))
    # ||U|| <= m C (m clipped terms)
    assert max(norms) <= m * C + 1e-4
    # empirical noise std per coordinate = 2 C sigma: chi-square 99.99% band for n = rounds * D draws
    z = np.concatenate(noise)
    n = z.size
    ratio = z.std() / (2 * C * sigma)
    assert abs(ratio - 1) < 4 / math.sqrt(2 * n)
    # noise is i.i.d. per coordinate, not a broadcast scalar
    assert np.std(noise[0]) > 0.5 * 2 * C * sigma


def test_extra_gradient_hook_is_clipped_and_summed(blobs):
    X, y = blobs
    model = make_mlp(5, 3)
    twin = copy.deepcopy(model)
    D = sum(p.numel() for p in model.parameters())
    canary = torch.zeros(D)
    canary[0] = 100.0
    got = []

    def extra(info):
        return canary[None, :] if info.round == 0 else None

    def on_round(info):
        got.append(info.clean_sum.clone())

    cfg = DPSGDConfig(epochs=1, sub_batch_size=1, sub_batches=240, clip=1.0, sigma=0.0, lr=1e-12, seed=0)
    train(model, X, y, cfg, extra_gradients=extra, on_round=on_round)
    # compare with the same round without canary: difference = clipped canary = e_0 * C
    cfg2 = DPSGDConfig(epochs=1, sub_batch_size=1, sub_batches=240, clip=1.0, sigma=0.0, lr=1e-12, seed=0)
    ref = []
    train(twin, X, y, cfg2, on_round=lambda i: ref.append(i.clean_sum.clone()))
    diff = got[0] - ref[0]
    assert abs(float(diff[0]) - 1.0) < 1e-4 and float(diff[1:].abs().max()) < 1e-4


def test_training_learns_without_noise(blobs):
    X, y = data.gaussian_blobs(600, dim=10, n_classes=2, separation=4.0, seed=2)
    torch.manual_seed(0)
    model = make_mlp(10, 2)
    cfg = DPSGDConfig(epochs=3, sub_batch_size=1, sub_batches=20, clip=5.0, sigma=0.0, lr=0.05, seed=0)
    res = train(model, X, y, cfg)
    assert res.final["train_accuracy"] > 0.9  # separation 4: Bayes accuracy ~0.98


def test_poisson_and_subsample_run(blobs):
    X, y = blobs
    for sampler in ("poisson", "subsample"):
        res = train(make_mlp(5, 3), X, y, DPSGDConfig(epochs=1, sub_batches=24, sampler=sampler, sigma=1.0))
        assert res.rounds == 10 and math.isfinite(res.final["train_loss"])


def test_bad_config(blobs):
    X, y = blobs
    with pytest.raises(DPValueError, match="multiple"):
        train(make_mlp(5, 3), X, y, DPSGDConfig(sub_batches=7))
    with pytest.raises(DPValueError, match="sampler"):
        train(make_mlp(5, 3), X, y, DPSGDConfig(sub_batches=8, sampler="random"))
    with pytest.raises(DPValueError, match="clip"):
        train(make_mlp(5, 3), X, y, DPSGDConfig(sub_batches=8, clip=0))


def test_device_auto():
    dev = resolve_device("auto")
    assert dev.type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("sampler", ["poisson", "shuffle"])
def test_microbatched_clipped_sum_equals_the_full_batch(blobs, sampler):
    # per-sample gradients in chunks of 7 rows: the same released sums (up to float32 summation order) and the
    # same trajectory as one big per-sample-gradient matrix; a canary hook still adds its clipped row
    X, y = blobs
    torch.manual_seed(3)
    model = make_mlp(5, 3, hidden=8)
    twin = copy.deepcopy(model)
    D = sum(p.numel() for p in model.parameters())

    def extra(info):
        row = torch.zeros(1, D)
        row[0, 2] = 10.0
        return row

    sums = {0: [], 7: []}
    for mb, mdl in ((0, model), (7, twin)):
        cfg = DPSGDConfig(
            epochs=2,
            sub_batch_size=1,
            sub_batches=40,
            clip=0.5,
            sigma=1.0,
            lr=0.1,
            seed=0,
            sampler=sampler,
            noise_multiplier_scale=1.0,
            microbatch=mb,
        )
        train(mdl, X, y, cfg, extra_gradients=extra, on_round=lambda i, mb=mb: sums[mb].append(i.released.clone()))
    assert len(sums[0]) == len(sums[7]) == 12
    for a, b in zip(sums[0], sums[7]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for p0, p1 in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p0, p1, rtol=1e-4, atol=1e-5)
    with pytest.raises(DPValueError, match="microbatch"):
        train(make_mlp(5, 3), X, y, DPSGDConfig(sub_batches=24, microbatch=-1))
