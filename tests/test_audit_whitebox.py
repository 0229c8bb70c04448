"""White-box DP-SGD audit with Dirac gradient canaries (dputils.audit.whitebox), checked against independent
references: the closed-form mean shift q C T of the raw scores (Proposition 1 of the note), the Binomial(T, q)
law of the canary sampling counts, the noise floor sigma C of the OUT scores, Google's dp_accounting PLD for
the theoretical epsilon, and the validity / power of the existing auditors (lower bounds below the PLD
epsilon on correct runs; the Gaussian auditor flags a run whose noise is 4x too small)."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch

from dputils.audit.whitebox import WhiteboxRun, audit_whitebox, run_whitebox_audit
from dputils.errors import DPValueError

torch.set_num_threads(1)
HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None

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


@pytest.mark.parametrize(
    "kw",
    [
        dict(m=3),
        dict(m=10_000),
        dict(sigma=0.0),
        dict(sigma=-1.0),
        dict(batch_size=600),
        dict(p_in=1.0),
        dict(delta=1.5),
        dict(noise_multiplier_scale=0.0),
        dict(hidden=-1),
        dict(epochs=0),
    ],
)
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
    run = run_whitebox_audit(
        300,
        sigma=1.0,
        epochs=2,
        batch_size=16,
        n_train=80,
        model="cnn",
        data_dir=str(folder),
        microbatch=8,
        progress=False,
        seed=1,
    )
    assert run.model == "cnn" and run.data.startswith("cifar10:") and run.T == 10
    assert run.n_params > 100_000
    diff, se = _diff_and_se(run.in_sums, run.out_sums)
    assert abs(diff - run.expected_shift) < 5 * se
    synth = run_whitebox_audit(
        300,
        sigma=1.0,
        epochs=1,
        batch_size=16,
        n_train=80,
        model="cnn",
        data_dir=str(tmp_path / "absent"),
        progress=False,
    )
    assert synth.data == "synthetic-images"
    with pytest.raises(DPValueError, match="model"):
        run_whitebox_audit(300, model="vgg", progress=False)
    with pytest.raises(DPValueError, match="microbatch"):
        run_whitebox_audit(300, microbatch=-2, progress=False)


def _fake_fashion_mnist(folder, n_train=60, n_test=4):
    from dputils import data

    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("test", n_test)):
        img, lab = data.FASHION_MNIST_FILES[split]
        data.write_idx(folder / (img + ".gz"), rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8))
        data.write_idx(folder / (lab + ".gz"), rng.integers(0, 10, size=n, dtype=np.uint8))
    return folder


def test_mlp_on_fashion_mnist_files_and_the_fallbacks(tmp_path, monkeypatch, hide_sklearn):
    """dataset="fashion-mnist" trains on the IDX files of the folder (784 inputs, 10 classes) and says so;
    without the files on scikit-learn's digits (64 inputs) with a warning, and without scikit-learn on blobs
    with a warning; the run's data field says which."""
    folder = _fake_fashion_mnist(tmp_path / "fm")
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(folder))
    kw = dict(sigma=1.0, epochs=1, batch_size=10, n_train=50, hidden=4, progress=False, dataset="fashion-mnist")
    run = run_whitebox_audit(100, **kw)
    assert run.data.startswith("fashion-mnist:") and str(folder) in run.data
    assert run.n_params == 784 * 4 + 4 + 4 * 10 + 10
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(tmp_path / "nowhere"))
    if HAS_SKLEARN:
        with pytest.warns(UserWarning, match="Fashion-MNIST not found.*handwritten digits"):
            digits = run_whitebox_audit(100, **kw)
        assert digits.data.startswith("sklearn-digits:scikit-learn ")
        assert digits.n_params == 64 * 4 + 4 + 4 * 10 + 10
        with pytest.raises(DPValueError, match="n_train"):  # 1797 digits: 1 test image, at most 1796 to train
            run_whitebox_audit(100, **{**kw, "n_train": 1797})
    hide_sklearn()
    with pytest.warns(UserWarning, match="Fashion-MNIST not found.*scikit-learn not importable"):
        fallback = run_whitebox_audit(100, **kw)
    assert fallback.data == "gaussian-blobs (no Fashion-MNIST files, no scikit-learn)"
    assert fallback.n_params == 20 * 4 + 4 + 4 * 10 + 10  # the blobs keep dim = 20, n_classes = 10
    with pytest.raises(DPValueError, match="dataset"):
        run_whitebox_audit(100, dataset="mnist", progress=False)


@pytest.mark.parametrize("dim,n_classes,hidden", [(20, 10, 32), (64, 10, 32), (784, 10, 32), (20, 2, 0), (5, 3, 7)])
def test_mlp_parameter_count_is_torchs(dim, n_classes, hidden):
    from dputils.audit.whitebox import mlp_parameter_count
    from dputils.training import make_mlp

    net = make_mlp(dim, n_classes, hidden)
    assert mlp_parameter_count(dim, n_classes, hidden) == sum(p.numel() for p in net.parameters())


def test_fit_whitebox_sizes_on_each_data_path(tmp_path, monkeypatch, hide_sklearn):
    """The book's full profile (m 2000, n_train 2400, batch 200, hidden 32, blobs 20 inputs / 10 classes; 10
    parameters per canary: D >= 20000): unchanged on Fashion-MNIST (D = 25450); on the digits 12 steps per epoch
    of 149 (T and q = 1/12 kept) and hidden ceil(19990 / 75) = 267 (D = 65 * 267 + 268 * 10 = 20035); on blobs
    hidden ceil(19990 / 31) = 645 (1002 parameters before, 21 * 645 + 646 * 10 = 20005 now).
    Values worked out by hand from the rules in the docstring."""
    from dputils.audit.whitebox import fit_whitebox_sizes

    book = dict(n_train=2400, batch_size=200, hidden=32, dim=20, n_classes=10, dataset="fashion-mnist")
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(_fake_fashion_mnist(tmp_path / "fm")))
    fm = fit_whitebox_sizes(2000, **book)
    assert (fm.data, fm.m, fm.n_train, fm.batch_size, fm.hidden, fm.dim, fm.n_params) == (
        "fashion-mnist",
        2000,
        2400,
        200,
        32,
        784,
        25450,
    ) and fm.changes == ()
    assert fm.kwargs() == dict(n_train=2400, batch_size=200, hidden=32, dim=784, n_classes=10)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(empty))
    if HAS_SKLEARN:
        dg = fit_whitebox_sizes(2000, **book)
        assert (dg.data, dg.m, dg.n_train, dg.batch_size, dg.hidden, dg.dim, dg.n_params) == (
            "sklearn-digits",
            2000,
            1788,
            149,
            267,
            64,
            20035,
        )
        assert len(dg.changes) == 2 and "12 steps per epoch" in dg.changes[0] and "2410 parameters" in dg.changes[1]
        # the smoke profile: 500 images fit; D >= 4000 needs hidden ceil(3990 / 75) = 54 (D = 4060)
        small = fit_whitebox_sizes(400, **{**book, "n_train": 500, "batch_size": 50, "n_classes": 2})
        assert (small.n_train, small.batch_size, small.hidden, small.n_params) == (500, 50, 54, 4060)
        exact = fit_whitebox_sizes(2000, **book, params_per_canary=1)  # only distinct: 2410 >= 2000 already
        assert (exact.hidden, exact.n_params) == (32, 2410)
    bl = fit_whitebox_sizes(2000, **{**book, "dataset": "blobs"})
    assert (bl.data, bl.m, bl.n_train, bl.batch_size, bl.hidden, bl.n_params) == (
        "gaussian-blobs",
        2000,
        2400,
        200,
        645,
        20005,
    )
    assert "1002 parameters" in bl.changes[0]
    bl1 = fit_whitebox_sizes(2000, **{**book, "dataset": "blobs"}, params_per_canary=1)
    assert (bl1.hidden, bl1.n_params) == (65, 2025)  # ceil(1990 / 31) = 65: the user's 1002 were too few
    lr = fit_whitebox_sizes(2000, **{**book, "dataset": "blobs", "hidden": 0})
    assert (lr.m, lr.hidden, lr.n_params) == (21, 0, 210)  # logistic regression: m = floor(210 / 10)
    hide_sklearn()
    nb = fit_whitebox_sizes(2000, **book)
    assert (nb.data, nb.hidden, nb.dim, nb.n_params) == ("synthetic-blobs", 645, 20, 20005)
    img = fit_whitebox_sizes(5000, **{**book, "model": "cnn"})
    assert (img.data, img.m, img.n_train, img.changes) == ("images", 5000, 2400, ())
    with pytest.raises(DPValueError, match="dataset"):
        fit_whitebox_sizes(100, n_train=10, batch_size=5, hidden=1, dataset="mnist")
    with pytest.raises(DPValueError, match="m"):
        fit_whitebox_sizes(2000, n_train=10, batch_size=5, hidden=0, dim=1, n_classes=10, dataset="blobs")
    with pytest.raises(DPValueError, match="params_per_canary"):
        fit_whitebox_sizes(100, n_train=10, batch_size=5, hidden=1, params_per_canary=0.5)


def test_fitted_sizes_run(tmp_path, monkeypatch, hide_sklearn):
    """A run at sizes chosen by fit_whitebox_sizes on the blobs that were too small for m (the user's failure:
    m 2000 on 1002 parameters) starts, has m distinct canaries and T = epochs * n_train / batch_size."""
    from dputils.audit.whitebox import fit_whitebox_sizes

    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(tmp_path / "none"))
    hide_sklearn()
    kw = dict(n_train=240, batch_size=20, hidden=32, dim=20, n_classes=10, dataset="fashion-mnist")
    with pytest.raises(DPValueError, match="m must be <= the number of model parameters"):
        with pytest.warns(UserWarning):
            run_whitebox_audit(2000, epochs=1, progress=False, **kw)
    fit = fit_whitebox_sizes(2000, **kw)
    with pytest.warns(UserWarning, match="Gaussian blobs"):
        run = run_whitebox_audit(fit.m, epochs=1, progress=False, **fit.kwargs(), dataset="fashion-mnist")
    assert run.n_params == fit.n_params == 20005 and len(run.in_sums) + len(run.out_sums) == 2000
    assert len(set(run.in_coords) | set(run.out_coords)) == 2000 and run.T == 12
