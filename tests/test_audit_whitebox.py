"""White-box DP-SGD audit with Dirac gradient canaries (dputils.audit.whitebox), checked against independent
references: the closed-form mean shift q C T of the raw scores (Proposition 1 of the note), the Binomial(T, q)
law of the canary sampling counts, the noise floor sigma C of the OUT scores, Google's dp_accounting PLD for
the theoretical epsilon, and the validity / power of the existing auditors (lower bounds below the PLD
epsilon on correct runs; the Gaussian auditor flags a run whose noise is 4x too small)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dputils.audit.whitebox import WhiteboxRun, audit_whitebox, run_whitebox_audit
from dputils.errors import DPValueError

torch.set_num_threads(1)

# 400 canaries on a 738-parameter MLP, q = 50/500 = 0.1, T = 20 epochs * 10 rounds = 200 steps
SMALL = dict(epochs=20, batch_size=50, n_train=500, dim=20, n_classes=2, hidden=32, progress=False, seed=0)
M = 400
N_BOOT = 200


@pytest.fixture(scope="module")
def runs():
    return {
        "sigma1": run_whitebox_audit(M, sigma=1.0, **SMALL),
        "sigma4": run_whitebox_audit(M, sigma=4.0, **SMALL),
        "broken": run_whitebox_audit(M, sigma=4.0, noise_multiplier_scale=0.25, **SMALL),  # noise / 4
    }


@pytest.fixture(scope="module")
def audits(runs):
    return {k: audit_whitebox(r, 0.05, n_bootstrap=N_BOOT) for k, r in runs.items()}


def _diff_and_se(a, b):
    return a.mean() - b.mean(), math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))


def test_shapes_schedule_and_device(runs):
    r = runs["sigma1"]
    assert isinstance(r, WhiteboxRun)
    assert r.T == 200 and r.q == pytest.approx(0.1) and r.n_params == 20 * 32 + 32 + 32 * 2 + 2
    assert len(r.in_sums) + len(r.out_sums) == M and len(r.in_counts) == len(r.in_sums)
    coords = np.concatenate([r.in_coords, r.out_coords])
    assert len(np.unique(coords)) == M  # distinct Dirac coordinates: exactly orthogonal canaries
    assert abs(len(r.in_sums) - M / 2) < 4 * math.sqrt(M / 4)  # IN ~ Binomial(m, 1/2)
    assert r.device.startswith("cuda" if torch.cuda.is_available() else "cpu")  # device="auto"
    assert r.steps_per_second > 0 and np.isfinite(r.in_sums).all() and np.isfinite(r.out_sums).all()
    np.testing.assert_allclose(r.in_scores, r.in_sums / math.sqrt(r.T))  # Definition 2


def test_canary_counts_are_binomial_T_q(runs):
    r = runs["sigma1"]
    k = r.in_counts
    # each K_j ~ Binomial(T, q): mean qT, variance q(1-q)T (tolerance: 4 standard errors)
    assert abs(k.mean() - r.q * r.T) < 4 * math.sqrt(r.q * (1 - r.q) * r.T / len(k))
    assert k.var(ddof=1) == pytest.approx(r.q * (1 - r.q) * r.T, rel=0.3)


@pytest.mark.parametrize("name", ["sigma1", "sigma4"])
def test_in_minus_out_mean_is_q_C_T(runs, name):
    r = runs[name]
    d, se = _diff_and_se(r.in_sums, r.out_sums)
    assert abs(d - r.expected_shift) < 4 * se, (d, r.expected_shift, se)  # closed form q C T, 4 MC standard errors
    # removing the canaries' own contribution C K_j leaves IN and OUT with the same mean (background + noise)
    d0, se0 = _diff_and_se(r.in_sums - r.clip * r.in_counts, r.out_sums)
    assert abs(d0) < 4 * se0


@pytest.mark.parametrize("name", ["sigma1", "sigma4"])
def test_out_scores_have_at_least_the_noise_floor(runs, name):
    # OUT score = (background drift + sum of T noises N(0, sigma^2 C^2)) / sqrt(T): spread >= sigma C
    r = runs[name]
    n = len(r.out_scores)
    assert r.out_scores.std(ddof=1) > r.sigma * r.clip * (1 - 4 / math.sqrt(2 * (n - 1)))


def test_broken_run_is_the_correct_run_at_the_actual_noise(runs):
    # noise_multiplier_scale only rescales the noise: sigma 4 with noise / 4 is sigma 1, same seeds
    np.testing.assert_allclose(runs["broken"].in_sums, runs["sigma1"].in_sums, rtol=1e-5, atol=1e-3)
    assert runs["broken"].epsilon_theory == runs["sigma4"].epsilon_theory < runs["sigma1"].epsilon_theory


def test_theoretical_epsilon_matches_dp_accounting(runs):
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    for name in ("sigma1", "sigma4"):
        r = runs[name]
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
        acc.compose(dpa.PoissonSampledDpEvent(r.q, dpa.GaussianDpEvent(r.sigma)), r.T)
        assert r.accountant == "dputils-pld"
        assert r.epsilon_theory == pytest.approx(acc.get_epsilon(r.delta), rel=0.02)


@pytest.mark.parametrize("name", ["sigma1", "sigma4"])
def test_auditors_stay_below_the_pld_epsilon_on_correct_runs(audits, runs, name):
    bounds = audits[name]
    assert set(bounds) == {"gauss", "gauss-bonferroni", "steinke", "fdp"}
    for method, eps in bounds.items():
        assert 0 <= eps <= runs[name].epsilon_theory, (method, eps, runs[name].epsilon_theory)


def test_noise_divided_by_four_is_flagged(audits, runs):
    claimed = runs["broken"].epsilon_theory
    assert audits["broken"]["gauss"] > claimed
    assert audits["broken"]["gauss-bonferroni"] > claimed


@pytest.mark.parametrize("kw", [dict(m=3), dict(m=10_000), dict(sigma=0.0), dict(sigma=-1.0), dict(batch_size=600),
                                dict(p_in=1.0), dict(delta=1.5), dict(noise_multiplier_scale=0.0), dict(hidden=-1),
                                dict(epochs=0)])
def test_bad_input_raises(kw):
    args = {**SMALL, "m": 10, **kw}
    m = args.pop("m")
    with pytest.raises(DPValueError):
        run_whitebox_audit(m, **args)


def test_audit_whitebox_rejects_non_runs():
    with pytest.raises(DPValueError):
        audit_whitebox({"in": [1.0], "out": [0.0]})


def test_image_model_on_a_cifar_folder_with_microbatches(tmp_path):
    # the paper profile's path (CNN/WRN on CIFAR-10 from a local folder, per-sample gradients in chunks) on a tiny
    # generated CIFAR-10 folder: the data source is reported, the IN - OUT mean shift is q C T within 5 SE
    from dputils.data import write_cifar10_like

    folder = write_cifar10_like(tmp_path / "cifar-10-batches-py", n_per_batch=40, batches=2)
    run = run_whitebox_audit(300, sigma=1.0, epochs=2, batch_size=16, n_train=80, model="cnn", data_dir=str(folder),
                             microbatch=8, progress=False, seed=1)
    assert run.model == "cnn" and run.data.startswith("cifar10:") and run.T == 10
    assert run.n_params > 100_000
    diff, se = _diff_and_se(run.in_sums, run.out_sums)
    assert abs(diff - run.expected_shift) < 5 * se
    synth = run_whitebox_audit(300, sigma=1.0, epochs=1, batch_size=16, n_train=80, model="cnn",
                               data_dir=str(tmp_path / "absent"), progress=False)
    assert synth.data == "synthetic-images"
    with pytest.raises(DPValueError, match="model"):
        run_whitebox_audit(300, model="vgg", progress=False)
    with pytest.raises(DPValueError, match="microbatch"):
        run_whitebox_audit(300, microbatch=-2, progress=False)


def test_mlp_on_fashion_mnist_files_and_the_fallback(tmp_path, monkeypatch):
    """dataset="fashion-mnist" trains on the IDX files of the folder (784 inputs, 10 classes) and says so;
    without the files it falls back to blobs with a warning and says that too."""
    from dputils import data

    rng = np.random.default_rng(0)
    folder = tmp_path / "fm"
    for split, n in (("train", 60), ("test", 4)):
        img, lab = data.FASHION_MNIST_FILES[split]
        data.write_idx(folder / (img + ".gz"), rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8))
        data.write_idx(folder / (lab + ".gz"), rng.integers(0, 10, size=n, dtype=np.uint8))
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(folder))
    kw = dict(sigma=1.0, epochs=1, batch_size=10, n_train=50, hidden=4, progress=False, dataset="fashion-mnist")
    run = run_whitebox_audit(100, **kw)
    assert run.data.startswith("fashion-mnist:") and str(folder) in run.data
    assert run.n_params == 784 * 4 + 4 + 4 * 10 + 10
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(tmp_path / "nowhere"))
    with pytest.warns(UserWarning, match="Fashion-MNIST not found"):
        fallback = run_whitebox_audit(100, **kw)
    assert fallback.data.startswith("gaussian-blobs (Fashion-MNIST not found")
    with pytest.raises(DPValueError, match="dataset"):
        run_whitebox_audit(100, dataset="mnist", progress=False)
