"""Repeated white-box audits (dputils.audit.repeated, issue 16): n tiny DP-SGD trainings with Dirac canaries in
seeded chunks. The answer is the same serially, on a ProcessPoolExecutor of 2 workers and on a Dask LocalCluster
of 2 worker processes on loopback; run i is the run whose seeds come from SeedSequence(seed).spawn(n)[i]
(recomputed here by hand); the combination (mean, standard error, exceedance of the PLD epsilon) is checked
against numpy on the per-run bounds; correct runs never exceed the theoretical epsilon, a run whose noise is 4x
too small does."""

from __future__ import annotations

import math
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
import torch

from dputils.audit import repeated_audit
from dputils.audit.repeated import run_seeds
from dputils.audit.whitebox import audit_whitebox, run_whitebox_audit
from dputils.book.sweep import local_cluster
from dputils.errors import DPValueError

pytestmark = pytest.mark.timeout(600)

# 200 canaries on a 232-parameter MLP, q = 50/500 = 0.1, T = 10 epochs * 10 rounds = 100 steps: about 1.5 s a run
M = 200
RUN = dict(sigma=1.0, epochs=10, batch_size=50, n_train=500, dim=20, n_classes=2, hidden=10, device="cpu")
N_BOOT = 100
N = 3


def _same(a: dict) -> dict:
    """Everything but the wall-clock times."""
    return {k: v for k, v in a.items() if k not in ("train_seconds", "threads_restored")}


@pytest.fixture(scope="module")
def serial():
    threads = torch.get_num_threads()
    out = repeated_audit(N, M, seed=5, n_bootstrap=N_BOOT, **RUN)
    out["threads_restored"] = torch.get_num_threads() == threads  # runs on 1 thread, then torch's setting again
    return out


def test_runs_follow_seed_sequence_spawn_and_redo_by_hand(serial):
    kids = np.random.SeedSequence(5).spawn(N)
    seeds = [tuple(int(w) >> 1 for w in k.generate_state(2, dtype=np.uint32)) for k in kids]
    assert list(zip(serial["seeds"], serial["audit_seeds"])) == seeds == [run_seeds(k) for k in kids]
    assert len(set(serial["seeds"])) == N
    assert serial["threads_restored"]
    # the last run, redone with the public functions and its two seeds (on one torch thread, as repeated_audit
    # runs it: another thread count changes the last bits of the float32 training)
    i = N - 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run = run_whitebox_audit(M, seed=serial["seeds"][i], progress=False, **RUN)
    finally:
        torch.set_num_threads(threads)
    bounds = audit_whitebox(run, 0.05, n_bootstrap=N_BOOT, seed=serial["audit_seeds"][i])
    assert {k: v[i] for k, v in serial["bounds"].items()} == bounds
    assert serial["epsilon_theory"] == run.epsilon_theory


def test_combination_mean_se_and_exceedance(serial):
    assert set(serial["bounds"]) == {"gauss", "gauss-bonferroni", "steinke", "fdp"}
    eps = serial["epsilon_theory"]
    for k, b in serial["bounds"].items():
        b = np.asarray(b)
        assert len(b) == N and np.all(b >= 0)
        assert serial["mean"][k] == pytest.approx(b.mean(), rel=1e-12)
        assert serial["se"][k] == pytest.approx(b.std(ddof=1) / math.sqrt(N), rel=1e-12)
        # a correct implementation: no run's lower bound above the PLD epsilon
        assert np.all(b <= eps) and serial["exceed"][k] == 0.0
        assert 0.0 < serial["exceed_upper95"][k] < 1.0
    assert max(serial["bounds"]["gauss"]) > 0  # the bounds are not all trivially zero at this size


def test_executor_with_two_workers_equals_serial(serial):
    with ProcessPoolExecutor(max_workers=2) as ex:
        par = repeated_audit(N, M, seed=5, n_bootstrap=N_BOOT, executor=ex, **RUN)
    assert _same(par) == _same(serial)


def test_dask_local_cluster_with_two_workers_equals_serial(serial):
    distributed = pytest.importorskip("distributed")
    with local_cluster(2) as cluster, distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        par = repeated_audit(N, M, seed=5, n_bootstrap=N_BOOT, client=client, **RUN)
        two = repeated_audit(N, M, seed=5, n_bootstrap=N_BOOT, chunk=2, client=client, **RUN)
    assert _same(par) == _same(serial)
    # chunks of 2 draw other seeds (a chunk's children), the same ones serially and on Dask
    assert two["seeds"] != serial["seeds"]
    assert _same(two) == _same(repeated_audit(N, M, seed=5, n_bootstrap=N_BOOT, chunk=2, **RUN))


def test_noise_divided_by_four_exceeds_the_claimed_epsilon():
    # sigma 4 claimed, noise of sigma 1 actually added (the broken implementation of test_audit_whitebox)
    bad = dict(RUN, sigma=4.0, epochs=20, hidden=20)
    r = repeated_audit(2, 400, seed=1, n_bootstrap=N_BOOT, noise_multiplier_scale=0.25, **bad)
    assert r["exceed"]["gauss"] >= 0.5, (r["bounds"]["gauss"], r["epsilon_theory"])
    assert max(r["bounds"]["gauss"]) > r["epsilon_theory"]


@pytest.mark.parametrize(
    "kw,fragment",
    [
        (dict(n_repeats=0), "n_repeats"),
        (dict(audit="blackbox"), "audit"),
        (dict(alpha=1.0), "alpha"),
        (dict(seed=-1), "seed"),
        (dict(chunk=0), "chunk"),
        (dict(torch_threads=0), "torch_threads"),
        (dict(client=object(), executor=object()), "not both"),
        (dict(progress=True), "progress"),
        (dict(audit_kwargs={"seed": 1}), "audit_kwargs"),
    ],
)
def test_bad_input_is_refused_before_any_run(kw, fragment):
    args = dict(n_repeats=2, m=M, **RUN)
    args.update(kw)
    with pytest.raises(DPValueError, match=fragment):
        repeated_audit(**args)


@pytest.mark.parametrize(
    "audit,m,kw,methods",
    [
        (
            "input",
            20,
            dict(sigma=1.0, epochs=2, batch_size=20, n_train=200, dim=5, n_classes=2, hidden=8),
            {"gauss", "gauss-bonferroni", "steinke", "fdp"},
        ),
        (
            "ftrl",
            40,
            dict(sigma_node=2.0, T=8, batch_size=8, dim=5, n_classes=2, hidden=8),
            {"gauss", "gauss-bonferroni", "andrew"},
        ),
    ],
)
def test_the_other_white_box_audits_repeat_too(audit, m, kw, methods):
    r = repeated_audit(2, m, audit=audit, seed=3, n_bootstrap=N_BOOT, device="cpu", **kw)
    assert r["audit"] == audit and set(r["bounds"]) == methods and len(r["seeds"]) == 2
    eps = np.asarray(r.get("epsilon_theory_runs", [r["epsilon_theory"]] * 2))
    for k in methods - {"andrew"}:  # andrew is a point estimate, not a bound
        assert np.all(np.asarray(r["bounds"][k]) <= eps) and r["exceed"][k] == 0.0
