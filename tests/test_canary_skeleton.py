"""The contract of the canary-audit run skeleton (dputils.audit.canary.run_canary_audit, CanaryStrategy): a toy
canary type runs through it with both trainers, and bad input gets a DPValueError naming what is wrong.

The toy ("zero-feature Dirac canaries"): logistic regression on data whose last features are always 0, so the
gradient of every weight on those features is exactly 0 for every data point; canary j is the gradient C e_k on
one of those weights, added at every DP-SGD step (or in one DP-FTRL leaf) for the IN canaries. The clean sum at
the canary coordinates is then exactly C for an IN canary and 0 for an OUT one, at every step: an exact,
independent check that the skeleton injects the strategy's rows and hands each step to its observer. The
theoretical epsilon is checked against the closed forms of q and T and, for DP-FTRL, the closed-form GDP curve.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from dputils import data  # noqa: E402
from dputils.audit import whitebox  # noqa: E402
from dputils.audit.canary import (  # noqa: E402
    Canaries,
    CanaryConfig,
    CanaryRun,
    CanaryStrategy,
    TrainingData,
    draw_canaries,
    ftrl_sigma_node,
    run_canary_audit,
)
from dputils.audit.model1 import theoretical_epsilon  # noqa: E402
from dputils.errors import DPValueError  # noqa: E402

DIM, ZERO_FROM, K = 10, 4, 3  # features 4..9 are always 0; K classes; 6 * 3 = 18 zero-gradient weights
N_ZERO = (DIM - ZERO_FROM) * K


def zero_feature_coords():
    """Flat indices of the weights W[c, f] (nn.Linear(DIM, K): weight first, row-major) on the zero features."""
    return np.array([c * DIM + f for c in range(K) for f in range(ZERO_FROM, DIM)])


class ZeroFeatureCanaries(CanaryStrategy):
    """The toy canary type of the module docstring, recording every hook call and every step's observations."""

    def __init__(self, mechanism="dpsgd", extra_records=0, inject_leaf=None):
        self.mechanism = mechanism
        self.extra_records = extra_records
        self.inject_leaf = inject_leaf  # DP-FTRL: the one leaf that holds the IN canaries
        self.calls = []
        self.clean, self.noisy = [], []

    def data(self, run):
        self.calls.append("data")
        rng = np.random.default_rng(run.cfg.seed)
        n = run.cfg.n_train if self.mechanism == "dpsgd" else run.cfg.T * run.cfg.batch_size
        X = np.zeros((n, DIM), dtype=np.float32)
        X[:, :ZERO_FROM] = rng.standard_normal((n, ZERO_FROM))
        return TrainingData(X, rng.integers(0, K, size=n), DIM, K, "toy")

    def model(self, run):
        self.calls.append("model")
        return super().model(run)

    def canaries(self, run):
        self.calls.append("canaries")
        can = draw_canaries(run.cfg, stream=3)
        return Canaries(is_in=can.is_in, coords=zero_feature_coords()[: run.cfg.m])

    def training_set(self, run):
        self.calls.append("training_set")
        X, y = run.data.X, run.data.y
        return np.concatenate([X, X[: self.extra_records]]), np.concatenate([y, y[: self.extra_records]])

    def start(self, run):
        self.calls.append("start")
        assert run.model is not None and run.device is not None and run.T > 0

    def extra_gradients(self, run, step):
        self.calls.append("extra")
        if self.mechanism == "ftrl" and step.t != self.inject_leaf:
            return None
        coords = run.canaries.coords[run.is_in]
        rows = torch.zeros(len(coords), run.n_params)
        rows[torch.arange(len(coords)), torch.as_tensor(coords)] = run.cfg.clip
        return rows

    def observe(self, run, step):
        self.calls.append("observe")
        coords = torch.as_tensor(run.canaries.coords)
        if self.mechanism == "dpsgd":
            self.clean.append(step.clean_sum[coords].double().numpy())
            self.noisy.append((step.released - step.clean_sum)[coords].double().numpy())
        else:
            self.steps = getattr(self, "steps", []) + [step.t]
            self.clean.append(step.leaf[coords].double().numpy())
            a, b = step.span  # the released node covers leaves a..b: its noise is the node minus their sum
            self.noisy.append(step.node[coords].double().numpy() - np.sum(self.clean[a - 1 : b], axis=0))

    def record(self, run):
        self.calls.append("record")
        return run


def dpsgd_cfg(**kw):
    base = dict(m=N_ZERO, sigma=1.5, clip=2.0, epochs=2, batch_size=10, n_train=50, hidden=0, lr=0.1, seed=5)
    return CanaryConfig.validated("dpsgd", device="cpu", progress=False, **{**base, **kw})


def ftrl_cfg(**kw):
    base = dict(m=N_ZERO, epsilon=3.0, T=8, batch_size=4, clip=1.5, hidden=0, lr=0.1, seed=2)
    return CanaryConfig.validated("ftrl", device="cpu", progress=False, **{**base, **kw})


def test_toy_dpsgd_strategy_runs_the_steps_in_order_with_its_hooks():
    toy = ZeroFeatureCanaries(extra_records=7)
    cfg = dpsgd_cfg()
    run = run_canary_audit(cfg, toy)
    assert isinstance(run, CanaryRun)
    # q and T of the training set (the data plus the strategy's 7 records): n = 57, q = 10/57, T = 2 * round(5.7)
    assert run.q == 10 / 57 and run.T == 2 * 6 and run.result.rounds == run.T
    assert (run.epsilon, run.accountant) == tuple(
        theoretical_epsilon(1.5, 10 / 57, 12, 1e-5, discretization=1e-3)[k] for k in ("epsilon", "accountant")
    )
    assert run.n_params == DIM * K + K and run.data.source == "toy" and run.device_name == "cpu"
    before = ["data", "model", "canaries", "training_set", "start"]
    assert toy.calls[:5] == before and toy.calls[-1] == "record"
    assert toy.calls[5:-1] == ["extra", "observe"] * run.T
    # exact: every step's clean sum at a canary coordinate is C for an IN canary, 0 for an OUT one
    expected = np.where(run.is_in, cfg.clip, 0.0)
    for clean in toy.clean:
        np.testing.assert_array_equal(clean, expected)
    # the noise at the canary coordinates is N(0, (sigma C)^2): its sample variance over T * m draws lies in the
    # two-sided chi-square interval at level 1e-6 (here about [0.60, 1.54]: a std off by 1.5x falls outside)
    z = np.concatenate(toy.noisy) / (cfg.sigma * cfg.clip)
    lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], z.size) / z.size
    assert lo < float(np.mean(z**2)) < hi
    # the same seed gives the same run: the skeleton seeds the model and the strategy's streams
    again = run_canary_audit(cfg, ZeroFeatureCanaries(extra_records=7))
    assert np.array_equal(again.canaries.is_in, run.canaries.is_in)
    for a, b in zip(again.model.parameters(), run.model.parameters()):
        assert torch.equal(a, b)


def test_toy_dpsgd_observations_see_the_actual_noise_scale():
    # noise_multiplier_scale < 1: the trainer adds less noise than the accountant is told (a broken run);
    # the epsilon stays that of the claimed sigma, the noise at the canary coordinates has std scale * sigma * C
    toy = ZeroFeatureCanaries()
    cfg = dpsgd_cfg(noise_multiplier_scale=0.25, epochs=4)
    run = run_canary_audit(cfg, toy)
    assert run.epsilon == theoretical_epsilon(1.5, 0.2, 20, 1e-5, discretization=1e-3)["epsilon"]
    z = np.concatenate(toy.noisy) / (0.25 * cfg.sigma * cfg.clip)
    lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], z.size) / z.size
    assert lo < float(np.mean(z**2)) < hi


@pytest.mark.parametrize("given", ["epsilon", "sigma_node"])
def test_toy_ftrl_strategy_injects_one_leaf_and_reports_the_tree_bound(given):
    toy = ZeroFeatureCanaries("ftrl", inject_leaf=3)
    cfg = ftrl_cfg() if given == "epsilon" else ftrl_cfg(epsilon=None, sigma_node=2.5, noise_scale=0.5)
    run = run_canary_audit(cfg, toy)
    assert run.q is None and run.T == 8 and toy.steps == list(range(1, 9))
    assert toy.calls[:5] == ["data", "model", "canaries", "training_set", "start"]
    assert toy.calls[5:-1] == ["extra", "observe"] * 8
    # exact: leaf 3 holds C at the IN canaries' coordinates, every other leaf 0 there
    for t, leaf in enumerate(toy.clean, start=1):
        np.testing.assert_array_equal(leaf, np.where(run.is_in, cfg.clip, 0.0) if t == 3 else 0.0)
    # the closed-form mu-GDP curve (eq. T4): mu = sqrt(L) C / sigma_node, L = ceil(log2 T) + 1 = 4, and
    # delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) at the reported epsilon is the run's delta
    mu = math.sqrt(4) * cfg.clip / run.sigma_node
    e = run.epsilon
    delta = stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)
    assert delta == pytest.approx(cfg.delta, rel=1e-6)
    # every released node's noise is N(0, (noise_scale sigma_node)^2) (the accountant was told sigma_node):
    # the sample variance of its 8 * 18 draws lies in the chi-square interval at level 1e-6
    z = np.concatenate(toy.noisy) / (cfg.noise_scale * run.sigma_node)
    lo, hi = stats.chi2.ppf([5e-7, 1 - 5e-7], z.size) / z.size
    assert lo < float(np.mean(z**2)) < hi
    if given == "epsilon":  # sigma_node calibrated to the requested epsilon
        assert e == pytest.approx(3.0, rel=1e-6)
    else:
        assert run.sigma_node == 2.5 == ftrl_sigma_node(cfg)


def test_a_strategy_must_implement_the_kind_specific_steps():
    class NoObserver(CanaryStrategy):
        def data(self, run):
            return None

        def canaries(self, run):
            return None

        def record(self, run):
            return None

    with pytest.raises(TypeError, match="observe"):
        NoObserver()


def test_bad_input_gets_a_named_error():
    cfg = dpsgd_cfg()
    with pytest.raises(DPValueError, match="cfg must be a CanaryConfig"):
        run_canary_audit(dict(m=10), ZeroFeatureCanaries())
    with pytest.raises(DPValueError, match="strategy must be a CanaryStrategy"):
        run_canary_audit(cfg, object())
    with pytest.raises(DPValueError, match="'dpsgd' strategy, the configuration is 'ftrl'"):
        run_canary_audit(ftrl_cfg(), ZeroFeatureCanaries())
    ideal = CanaryConfig.validated("ftrl-ideal", m=10, epsilon=1.0, T=8)
    with pytest.raises(DPValueError, match="simulate_ftrl_audit"):
        run_canary_audit(ideal, ZeroFeatureCanaries("ftrl-ideal"))
    with pytest.raises(DPValueError, match="DP-FTRL configuration"):
        ftrl_sigma_node(cfg)


class Broken(ZeroFeatureCanaries):
    """The toy with one step returning something malformed."""

    def __init__(self, what):
        super().__init__()
        self.what = what

    def data(self, run):
        d = super().data(run)
        if self.what == "data type":
            return (d.X, d.y)
        if self.what == "labels":
            return TrainingData(d.X, d.y[:-1], DIM, K)
        return d

    def canaries(self, run):
        c = super().canaries(run)
        if self.what == "shape":
            return Canaries(is_in=c.is_in[:-1], coords=c.coords)
        if self.what == "dtype":
            return Canaries(is_in=c.is_in.astype(int), coords=c.coords)
        if self.what == "one side":
            return Canaries(is_in=np.ones(run.cfg.m, dtype=bool), coords=c.coords)
        if self.what == "canaries type":
            return c.is_in
        return c


@pytest.mark.parametrize(
    "what, message",
    [
        ("data type", "must return TrainingData, got tuple"),
        ("labels", "as many labels as inputs"),
        ("canaries type", "must return Canaries, got ndarray"),
        ("shape", r"shape \(18,\)"),
        ("dtype", "bool array"),
        ("one side", "both IN and OUT"),
    ],
)
def test_malformed_strategy_output_is_named(what, message):
    with pytest.raises(DPValueError, match=message):
        run_canary_audit(dpsgd_cfg(), Broken(what))


def test_run_split_checks_the_length():
    run = CanaryRun(dpsgd_cfg(m=4), canaries=Canaries(is_in=np.array([True, False, True, False])))
    i, o = run.split(np.arange(4.0))
    assert i.tolist() == [0.0, 2.0] and o.tolist() == [1.0, 3.0]
    with pytest.raises(DPValueError, match="one value per canary"):
        run.split(np.arange(5.0))


def test_whitebox_fallback_warning_points_at_the_caller(monkeypatch):
    # the data step runs inside the skeleton; the digits-fallback warning must still name the runner's caller
    X, y = data.gaussian_blobs(40, dim=12, n_classes=10, seed=0)
    monkeypatch.setattr(data, "classification_kind", lambda: "sklearn-digits")
    monkeypatch.setattr(data, "fashion_mnist_data", lambda n, n_test, seed=0: (X[:n], y[:n], None, None, "stub"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = whitebox.run_whitebox_audit(
            10, epochs=1, batch_size=10, n_train=40, hidden=0, dataset="fashion-mnist", device="cpu", progress=False
        )
    assert run.data == "stub" and run.n_params == 12 * 10 + 10
    found = [w for w in caught if "handwritten digits" in str(w.message)]
    assert len(found) == 1 and found[0].filename == __file__
