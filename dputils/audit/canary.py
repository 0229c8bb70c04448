"""The shared plumbing of the one-run canary audits ({cite}`gauss_audit`, Sec. 5): one validated configuration
and one run skeleton for :func:`dputils.audit.whitebox.run_whitebox_audit` (DP-SGD, Dirac gradient canaries),
:func:`dputils.audit.input_canary.run_input_canary_audit` (DP-SGD, input-space canaries) and
:func:`dputils.audit.ftrl_audit.run_ftrl_audit` (DP-FTRL, Dirac canaries in one leaf).

Every trained run takes the same steps, in this order (:func:`run_canary_audit`):

1. *Validate* the arguments once (:class:`CanaryConfig`, :class:`dputils.errors.DPValueError` naming the parameter).
2. *Data*: the background training set (:meth:`CanaryStrategy.data`).
3. *Model*: built after ``torch.manual_seed(seed)`` (:meth:`CanaryStrategy.model`; an MLP by default), with
   ``D`` parameters.
4. *Canaries* (:meth:`CanaryStrategy.canaries`, usually :func:`draw_canaries`): canary j is IN with probability
   ``p_in`` independently (paper: 1/2), from a numpy stream ``default_rng([seed, stream])`` of its own, so a
   runner's data, model and noise never shift the draw; when every canary falls on one side (probability
   ``p_in^m + (1 - p_in)^m``) canary 0 is made IN and canary 1 OUT, because the auditors need both groups. Dirac
   canaries also get ``m`` distinct coordinates out of the ``D`` parameters (exactly orthogonal canaries, the
   paper's Fig. 4(a)). Input-space canaries then join the training set (:meth:`CanaryStrategy.training_set`).
5. *Theoretical epsilon*, an upper bound from the mechanism's accountant: DP-SGD with Poisson rate
   ``q = B / n`` and ``T = epochs * max(1, round(n / B))`` steps, n the training set's size, is accounted by the
   PLD upper bound of the subsampled Gaussian composed T times
   (:func:`dputils.audit.model1.theoretical_epsilon`); DP-FTRL by the tree-aggregation bound
   :func:`dputils.training.ftrl.tree_epsilon` (eq. T4) at the claimed node noise ``sigma_node``, given or
   calibrated to ``epsilon``.
6. *Train* with the canaries injected (:meth:`CanaryStrategy.extra_gradients`) and observed after every step
   (:meth:`CanaryStrategy.observe`): :func:`train_dpsgd` or :func:`dputils.training.train_ftrl`.
7. *Assemble the run record* (:meth:`CanaryStrategy.record`); its scores (Definition 2,
   ``S_T = T^{-1/2} sum_t X_t``, :class:`ScoreSums`) are audited with the package's auditors (the runners'
   ``audit_*`` functions).

A canary type is one :class:`CanaryStrategy` (the kind-specific parts); the skeleton owns the order of the
steps, the seeding, the accountant, the device and the trainer. The idealised DP-FTRL release
(:func:`dputils.audit.ftrl_audit.simulate_ftrl_audit`) is not a trained run: it has no data, no model, no
device and no trainer (the stream of T leaves is zero but for the canary leaf), so it shares steps 1, 4, 5 and
7 (:func:`ftrl_sigma_node`, :func:`draw_canaries`) but not the skeleton.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import (
    DPValueError,
    check_choice,
    check_delta,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
    check_probability,
)
from .model1 import theoretical_epsilon

__all__ = [
    "CanaryConfig",
    "Canaries",
    "ScoreSums",
    "TrainingData",
    "CanaryRun",
    "CanaryStrategy",
    "run_canary_audit",
    "draw_canaries",
    "ftrl_sigma_node",
    "train_dpsgd",
    "device_label",
    "mean_shift",
]

MECHANISMS = ("dpsgd", "ftrl", "ftrl-ideal")
_DATASETS = ("blobs", "fashion-mnist")
_INPUT_KINDS = ("mislabeled", "ood")


class ScoreSums:
    """Definition 2 scores of a run that records the raw sums ``in_sums``/``out_sums`` over ``T`` steps."""

    in_sums: np.ndarray
    out_sums: np.ndarray
    T: int

    @property
    def in_scores(self) -> np.ndarray:
        """Definition 2: ``S_T = sum_t X_t / sqrt(T)`` for the IN canaries."""
        return self.in_sums / math.sqrt(self.T)

    @property
    def out_scores(self) -> np.ndarray:
        """Definition 2 for the OUT canaries."""
        return self.out_sums / math.sqrt(self.T)


@dataclass(frozen=True)
class CanaryConfig:
    """The arguments of one canary-audit run, validated once (:meth:`validated`).

    ``mechanism`` says which fields apply: ``"dpsgd"`` (Poisson DP-SGD: ``sigma``, ``epochs``, ``batch_size``,
    ``n_train``, ``lr``, ``noise_multiplier_scale``, ``pld_discretization``; Dirac runs also ``model``,
    ``microbatch``, ``dataset``, ``data_dir``; input-space runs ``kind``, ``ood_scale``, ``centre``), ``"ftrl"``
    (trained DP-FTRL: ``T``, exactly one of ``epsilon`` and ``sigma_node``, ``batch_size``, ``lr``,
    ``canary_leaf``, ``noise_scale``) or ``"ftrl-ideal"`` (the idealised release: as ``"ftrl"`` without model,
    ``dim`` None meaning ``4 m``). Fields that do not apply keep their defaults and are not checked."""

    mechanism: str
    m: int
    clip: float = 1.0
    delta: float = 1e-5
    p_in: float = 0.5
    seed: int = 0
    device: str = "auto"
    progress: bool = True
    dim: int | None = 20
    n_classes: int = 10
    hidden: int = 64
    lr: float = 0.5
    batch_size: int = 50
    # DP-SGD
    sigma: float | None = None
    epochs: int = 10
    n_train: int = 1000
    noise_multiplier_scale: float = 1.0
    pld_discretization: float = 1e-3
    model: str = "mlp"
    microbatch: int = 0
    dataset: str = "blobs"
    data_dir: str | None = None
    kind: str | None = None  # input-space canaries: "mislabeled" or "ood"; None for Dirac canaries
    ood_scale: float = 3.0
    centre: bool = True
    # DP-FTRL
    T: int | None = None
    epsilon: float | None = None
    sigma_node: float | None = None
    canary_leaf: int = 1
    noise_scale: float = 1.0

    def __post_init__(self) -> None:
        for name, value in _validate(self).items():
            object.__setattr__(self, name, value)

    @classmethod
    def validated(cls, mechanism: str, **kwargs: Any) -> CanaryConfig:
        """The configuration of ``kwargs`` (a runner's keyword arguments), or a DPValueError naming the first bad
        parameter. Unknown names are a DPValueError too (not a TypeError), so a misspelt option is named."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise DPValueError(f"unknown canary-audit option(s): {', '.join(unknown)}")
        return cls(mechanism=mechanism, **kwargs)

    @classmethod
    def of_call(cls, mechanism: str, args: dict[str, Any], *, ignore: tuple[str, ...] = ()) -> CanaryConfig:
        """:meth:`validated` of a runner's arguments: ``args`` is ``locals()`` taken as the runner's first statement
        (every parameter is a field, but those named in ``ignore``)."""
        return cls.validated(mechanism, **{k: v for k, v in args.items() if k not in ignore})

    @property
    def q(self) -> float:
        """DP-SGD's Poisson rate ``batch_size / n_train`` (before input-space canaries join the data)."""
        return self.batch_size / self.n_train

    @property
    def steps(self) -> int:
        """DP-SGD's number of steps ``T = epochs * max(1, round(n_train / batch_size))``; DP-FTRL's ``T``."""
        if self.mechanism == "dpsgd":
            return self.epochs * max(1, round(self.n_train / self.batch_size))
        return self.T


def _validate(c: CanaryConfig) -> dict[str, Any]:
    """The one validation routine: the checked (normalised) value of every field that applies to ``c.mechanism``;
    a DPValueError naming the parameter and its allowed range otherwise."""
    check_choice("mechanism", c.mechanism, MECHANISMS)
    v: dict[str, Any] = {}
    v["m"] = check_positive_int("m", c.m)
    if v["m"] < 4:
        raise DPValueError(f"m must be >= 4 (the auditors need IN and OUT canaries), got {c.m}")
    if c.mechanism == "dpsgd":
        v["epochs"] = check_positive_int("epochs", c.epochs)
        v["batch_size"] = check_positive_int("batch_size", c.batch_size)
        v["n_train"] = check_positive_int("n_train", c.n_train)
        if v["batch_size"] > v["n_train"]:
            raise DPValueError(f"batch_size must be <= n_train ({v['n_train']}), got {c.batch_size}")
        v["sigma"] = check_positive("sigma", c.sigma)
        v["clip"] = check_positive("clip", c.clip)
        v["lr"] = check_positive("lr", c.lr)
        v["delta"] = check_delta(c.delta)
        v["p_in"] = check_probability("p_in", c.p_in, allow_zero=False, allow_one=False)
        v["noise_multiplier_scale"] = check_positive("noise_multiplier_scale", c.noise_multiplier_scale)
        v["pld_discretization"] = check_positive("pld_discretization", c.pld_discretization)
        if c.kind is None:  # Dirac gradient canaries
            from ..training.models import MODELS

            check_choice("model", c.model, MODELS)
            v["microbatch"] = check_nonnegative_int("microbatch", c.microbatch)
            check_choice("dataset", c.dataset, _DATASETS)
        else:
            check_choice("kind", c.kind, _INPUT_KINDS)
            v["ood_scale"] = check_positive("ood_scale", c.ood_scale)
    else:
        v["T"] = check_positive_int("T", c.T)
        v["delta"] = check_delta(c.delta)
        if (c.sigma_node is None) == (c.epsilon is None):
            raise DPValueError("give exactly one of sigma_node and epsilon")
        if c.sigma_node is not None:
            v["sigma_node"] = check_positive("sigma_node", c.sigma_node)
        else:
            v["epsilon"] = check_positive("epsilon", c.epsilon)
        v["clip"] = check_positive("clip", c.clip)
        v["p_in"] = check_probability("p_in", c.p_in, allow_zero=False, allow_one=False)
        v["noise_scale"] = check_positive("noise_scale", c.noise_scale)
        v["canary_leaf"] = check_positive_int("canary_leaf", c.canary_leaf)
        if v["canary_leaf"] > v["T"]:
            raise DPValueError(f"canary_leaf must be in [1, T={v['T']}], got {c.canary_leaf}")
        if c.mechanism == "ftrl":
            v["batch_size"] = check_positive_int("batch_size", c.batch_size)
        elif c.dim is not None:
            v["dim"] = check_positive_int("dim", c.dim)
            if v["dim"] < v["m"]:
                raise DPValueError(f"dim must be >= m ({v['m']}) for distinct Dirac canaries, got {c.dim}")
    if c.mechanism != "ftrl-ideal":
        hidden = int(c.hidden)
        if hidden < 0:
            raise DPValueError(f"hidden must be >= 0, got {hidden}")
        v["hidden"] = hidden
    return v


@dataclass(frozen=True)
class Canaries:
    """Step 2 of a run: which canaries are IN, and the Dirac canaries' distinct coordinates (None otherwise)."""

    is_in: np.ndarray  # bool (m,)
    coords: np.ndarray | None = None  # int (m,), distinct, in [0, D)


def draw_canaries(cfg: CanaryConfig, *, stream: int, n_coords: int | None = None, coord_stream: int | None = None):
    """Draw the canaries of a run (module docstring, step 2).

    ``stream``: the membership draw is ``default_rng([seed, stream]).random(m) < p_in``. With ``n_coords = D``
    the Dirac coordinates are ``rng.choice(D, m, replace=False)`` from ``default_rng([seed, coord_stream])``, drawn
    *before* the membership when both use one stream (``coord_stream`` None or equal to ``stream``); ``m > D`` is
    a DPValueError (no room for distinct coordinates)."""
    m = cfg.m
    coords = None
    rng = np.random.default_rng([cfg.seed, stream])
    if n_coords is not None:
        if m > n_coords:
            raise DPValueError(
                f"m must be <= the number of model parameters ({n_coords}) for distinct Dirac canaries, got {m}"
            )
        same = coord_stream is None or coord_stream == stream
        coord_rng = rng if same else np.random.default_rng([cfg.seed, coord_stream])
        coords = coord_rng.choice(n_coords, size=m, replace=False)
    is_in = rng.random(m) < cfg.p_in
    if is_in.all() or not is_in.any():  # the auditors need both groups
        is_in[0], is_in[1] = True, False
    return Canaries(is_in=is_in, coords=coords)


def device_label(dev) -> str:
    """``"cpu"``, or ``"cuda (<device name>)"`` for a CUDA device, as the runs record it."""
    if dev.type != "cuda":
        return str(dev)
    import torch

    return f"cuda ({torch.cuda.get_device_name(dev)})"


def progress_bar(cfg: CanaryConfig, total: int, desc: str):
    """A plain tqdm bar over the run's steps when ``cfg.progress`` (it honours ``TQDM_DISABLE``), else None."""
    if not cfg.progress:
        return None
    from tqdm.std import tqdm  # plain bar: no widget warning in the book

    return tqdm(total=total, desc=desc, unit="step")


def train_dpsgd(cfg: CanaryConfig, model, X, y, T: int, dev, *, bar=None, extra_gradients=None, on_round=None):
    """Step 3 for DP-SGD: :func:`dputils.training.train` with Poisson sampling at rate ``batch_size / len(X)``,
    individual clipping at ``cfg.clip`` and noise std ``noise_multiplier_scale * clip * sigma``, the canaries
    injected and observed by the hooks. Returns ``(result, seconds)`` (CUDA synchronised before the clock
    stops); closes ``bar``; checks that the run took the ``T`` steps the accountant was told."""
    import torch

    from ..training import DPSGDConfig, train

    config = DPSGDConfig(
        epochs=cfg.epochs,
        sub_batch_size=1,
        sub_batches=cfg.batch_size,
        clip=cfg.clip,
        sigma=cfg.sigma,
        lr=cfg.lr,
        sampler="poisson",
        noise_multiplier_scale=cfg.noise_multiplier_scale,
        device=str(dev),
        seed=cfg.seed,
        microbatch=cfg.microbatch,
    )
    t0 = time.perf_counter()
    res = train(model, X, y, config, extra_gradients=extra_gradients, on_round=on_round)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    if res.rounds != T:  # pragma: no cover - guards the T formula against changes in train()
        raise DPValueError(f"internal: expected {T} rounds, train() ran {res.rounds}")
    return res, seconds


def ftrl_sigma_node(cfg: CanaryConfig) -> float:
    """DP-FTRL's claimed per-node noise std: ``cfg.sigma_node``, or the one calibrated to ``cfg.epsilon`` at
    ``(cfg.delta, cfg.T, cfg.clip)`` (:func:`dputils.training.ftrl.calibrate_sigma_node`, inverting eq. T4)."""
    if cfg.mechanism not in ("ftrl", "ftrl-ideal"):
        raise DPValueError(f"ftrl_sigma_node needs a DP-FTRL configuration, got mechanism {cfg.mechanism!r}")
    if cfg.sigma_node is not None:
        return cfg.sigma_node
    from ..training.ftrl import calibrate_sigma_node

    return calibrate_sigma_node(cfg.epsilon, cfg.delta, cfg.T, cfg.clip)


# ---------------------------------------------------------------------------------------------------------
# The run skeleton: the steps every trained canary audit takes, with the kind-specific parts in a strategy.
# ---------------------------------------------------------------------------------------------------------


@dataclass
class TrainingData:
    """Step 2 of a run: the background training set ``(X, y)``, the input dimension and number of classes the
    model is built for, and what the data are (``source``, recorded by the runs)."""

    X: Any
    y: Any
    dim: int
    n_classes: int
    source: str = "gaussian-blobs"


@dataclass
class CanaryRun:
    """The state of one run, filled in step by step by :func:`run_canary_audit` (module docstring) and read by
    the strategy: ``data`` (step 2), ``model`` and its ``n_params`` (3), ``canaries`` (4) and the training set
    ``X_train``/``y_train`` (the data plus any IN input-space canaries), ``T``, ``q`` (DP-SGD's Poisson rate,
    None for DP-FTRL), ``sigma_node`` (DP-FTRL's claimed node noise, None for DP-SGD), ``epsilon`` and
    ``accountant`` (5), ``device`` (a ``torch.device``), then ``result`` (the trainer's result) and ``seconds``
    (its wall time) after step 6."""

    cfg: CanaryConfig
    data: TrainingData | None = None
    model: Any = None
    n_params: int = 0
    canaries: Canaries | None = None
    X_train: Any = None
    y_train: Any = None
    T: int = 0
    q: float | None = None
    sigma_node: float | None = None
    epsilon: float = math.nan
    accountant: str = ""
    device: Any = None
    result: Any = None
    seconds: float = math.nan

    @property
    def is_in(self) -> np.ndarray:
        """The canaries' membership (bool, ``(m,)``)."""
        return self.canaries.is_in

    def split(self, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(values[is_in], values[~is_in])``: per-canary values (length m) cut into the IN and OUT groups."""
        values = np.asarray(values)
        if values.shape[:1] != self.is_in.shape:
            raise DPValueError(f"split needs one value per canary ({self.cfg.m}), got shape {values.shape}")
        return values[self.is_in], values[~self.is_in]

    @property
    def device_name(self) -> str:
        """The device as the run records say it (:func:`device_label`)."""
        return device_label(self.device)


class CanaryStrategy(abc.ABC):
    """One canary type: the parts of a trained canary audit that differ between types; :func:`run_canary_audit`
    calls them in the order of the module docstring. A subclass sets ``mechanism`` (``"dpsgd"`` or ``"ftrl"``:
    the trainer and the accountant) and implements :meth:`data`, :meth:`canaries`, :meth:`observe` and
    :meth:`record` (a subclass missing one cannot be instantiated: TypeError naming it); the other steps have
    defaults. Every method gets the :class:`CanaryRun` filled so far; state
    that the hooks accumulate (score sums) lives on the strategy, so an instance serves one run."""

    mechanism: str = "dpsgd"

    @abc.abstractmethod
    def data(self, run: CanaryRun) -> TrainingData:
        """Step 2: the background training set."""

    def model(self, run: CanaryRun):
        """Step 3, called right after ``torch.manual_seed(cfg.seed)``: by default
        :func:`dputils.training.models.make_model` of ``cfg.model`` (an MLP with ``cfg.hidden`` units) for the
        data's ``dim`` and ``n_classes``."""
        from ..training.models import make_model

        return make_model(run.cfg.model, in_dim=run.data.dim, n_classes=run.data.n_classes, hidden=run.cfg.hidden)

    @abc.abstractmethod
    def canaries(self, run: CanaryRun) -> Canaries:
        """Step 4: which canaries are IN (and the Dirac coordinates), usually :func:`draw_canaries`."""

    def training_set(self, run: CanaryRun) -> tuple[Any, Any]:
        """The ``(X, y)`` the model is trained on: the data by default; input-space canaries add the IN ones
        (they then count in DP-SGD's ``n``, hence in q and T)."""
        return run.data.X, run.data.y

    def start(self, run: CanaryRun) -> None:
        """Before the first step, with ``run.device`` set and the model on it: allocate the accumulators (nothing
        by default)."""
        return None

    def extra_gradients(self, run: CanaryRun, step) -> Any:
        """The canaries' per-example gradients ``(k, D)`` to add at this step (clipped at C by the trainer), or
        None. ``step`` is the trainer's :class:`dputils.training.RoundInfo` (DP-SGD) or
        :class:`dputils.training.ftrl.FTRLStep` (DP-FTRL). None by default (input-space canaries are records)."""
        return None

    @abc.abstractmethod
    def observe(self, run: CanaryRun, step) -> None:
        """After each step: record the canaries' observations ``X_t`` from the released quantities of ``step``."""

    def describe(self, run: CanaryRun) -> str:
        """The DP-SGD progress bar's label (DP-FTRL's trainer draws its own bar)."""
        return f"{type(self).__name__} (eps={run.epsilon:.2f})"

    def postfix(self, run: CanaryRun, t: int) -> dict[str, str] | None:
        """What the DP-SGD progress bar shows next to the count after step ``t`` (1-based), or None."""
        return None

    @abc.abstractmethod
    def record(self, run: CanaryRun):
        """Step 7: the run record (the runner's result type) from ``run`` and the accumulated observations."""


def run_canary_audit(cfg: CanaryConfig, strategy: CanaryStrategy):
    """Run one trained canary audit: the steps of the module docstring, with ``strategy``'s kind-specific parts.
    Returns ``strategy.record(run)``.

    ``cfg`` must be a :class:`CanaryConfig` of a trained mechanism (``"dpsgd"`` or ``"ftrl"``; the idealised
    ``"ftrl-ideal"`` release trains nothing) equal to ``strategy.mechanism``. DP-SGD: q and T are those of the
    training set's size n (``q = B / n``, ``T = epochs * max(1, round(n / B))``; :attr:`CanaryConfig.q` and
    :attr:`CanaryConfig.steps` when ``n = n_train``) and the epsilon is the PLD upper bound
    :func:`dputils.audit.model1.theoretical_epsilon`. DP-FTRL: ``T = cfg.T``, the node noise is
    :func:`ftrl_sigma_node` (times ``cfg.noise_scale`` in training: the accountant is told the claim) and the
    epsilon is :func:`dputils.training.ftrl.tree_epsilon` (eq. T4)."""
    if not isinstance(cfg, CanaryConfig):
        raise DPValueError(f"cfg must be a CanaryConfig, got {type(cfg).__name__}")
    if not isinstance(strategy, CanaryStrategy):
        raise DPValueError(f"strategy must be a CanaryStrategy, got {type(strategy).__name__}")
    if cfg.mechanism not in _MECHANISMS:
        raise DPValueError(
            f"run_canary_audit trains a model: mechanism must be one of {', '.join(_MECHANISMS)}, got "
            f"{cfg.mechanism!r} (the idealised DP-FTRL release is simulate_ftrl_audit)"
        )
    if strategy.mechanism != cfg.mechanism:
        raise DPValueError(
            f"{type(strategy).__name__} is a {strategy.mechanism!r} strategy, the configuration is {cfg.mechanism!r}"
        )
    account, train = _MECHANISMS[cfg.mechanism]

    import torch

    from ..training import resolve_device

    run = CanaryRun(cfg)
    run.data = _checked_data(strategy.data(run))
    torch.manual_seed(cfg.seed)
    run.model = strategy.model(run)
    run.n_params = sum(p.numel() for p in run.model.parameters())
    run.canaries = _checked_canaries(strategy.canaries(run), cfg.m)
    run.X_train, run.y_train = strategy.training_set(run)
    account(run)
    run.device = resolve_device(cfg.device)
    run.model.to(run.device)
    strategy.start(run)
    train(run, strategy)
    return strategy.record(run)


def _checked_data(d: Any) -> TrainingData:
    if not isinstance(d, TrainingData):
        raise DPValueError(f"a strategy's data() must return TrainingData, got {type(d).__name__}")
    if len(d.X) != len(d.y) or len(d.X) == 0:
        raise DPValueError(f"the training data need as many labels as inputs, at least one: {len(d.X)} vs {len(d.y)}")
    return d


def _checked_canaries(c: Any, m: int) -> Canaries:
    if not isinstance(c, Canaries):
        raise DPValueError(f"a strategy's canaries() must return Canaries, got {type(c).__name__}")
    is_in = np.asarray(c.is_in)
    if is_in.dtype != bool or is_in.shape != (m,):
        raise DPValueError(f"Canaries.is_in must be a bool array of shape ({m},), got {is_in.dtype} {is_in.shape}")
    if is_in.all() or not is_in.any():
        raise DPValueError("the canaries need both IN and OUT members (the auditors compare the two groups)")
    return c


def _account_dpsgd(run: CanaryRun) -> None:
    """Step 5 for DP-SGD: q and T of the training set's size, the PLD upper bound at ``(sigma, q, T, delta)``."""
    cfg = run.cfg
    n = len(run.X_train)
    run.q = cfg.batch_size / n
    run.T = cfg.epochs * max(1, round(n / cfg.batch_size))
    eps = theoretical_epsilon(cfg.sigma, run.q, run.T, cfg.delta, discretization=cfg.pld_discretization)
    run.epsilon, run.accountant = eps["epsilon"], eps["accountant"]


def _train_dpsgd(run: CanaryRun, strategy: CanaryStrategy) -> None:
    """Step 6 for DP-SGD: :func:`train_dpsgd` with the strategy's hooks and a progress bar over the T steps."""
    bar = progress_bar(run.cfg, run.T, strategy.describe(run))

    def on_round(info) -> None:
        strategy.observe(run, info)
        if bar is not None:
            bar.update(1)
            note = strategy.postfix(run, info.round + 1)
            if note:
                bar.set_postfix(**note)

    run.result, run.seconds = train_dpsgd(
        run.cfg,
        run.model,
        run.X_train,
        run.y_train,
        run.T,
        run.device,
        bar=bar,
        extra_gradients=lambda info: strategy.extra_gradients(run, info),
        on_round=on_round,
    )


def _account_ftrl(run: CanaryRun) -> None:
    """Step 5 for DP-FTRL: the claimed node noise and the tree-aggregation bound (eq. T4) at ``(T, delta, C)``."""
    from ..training.ftrl import tree_epsilon

    cfg = run.cfg
    run.sigma_node = ftrl_sigma_node(cfg)
    run.T = cfg.T
    run.epsilon = tree_epsilon(run.sigma_node, cfg.T, cfg.delta, cfg.clip)
    run.accountant = "tree aggregation (mu-GDP, eq. T4)"


def _train_ftrl(run: CanaryRun, strategy: CanaryStrategy) -> None:
    """Step 6 for DP-FTRL: single-pass :func:`dputils.training.train_ftrl` with node noise
    ``noise_scale * sigma_node`` (the accountant was told ``sigma_node``) and the strategy's hooks."""
    from ..training.ftrl import FTRLConfig, train_ftrl

    cfg = run.cfg
    config = FTRLConfig(
        steps=run.T,
        batch_size=cfg.batch_size,
        clip=cfg.clip,
        sigma_node=cfg.noise_scale * run.sigma_node,
        lr=cfg.lr,
        device=str(run.device),
        seed=cfg.seed,
    )
    run.result = train_ftrl(
        run.model,
        run.X_train,
        run.y_train,
        config,
        extra_gradients=lambda step: strategy.extra_gradients(run, step),
        on_step=lambda step: strategy.observe(run, step),
        progress=cfg.progress,
    )
    run.seconds = run.result.seconds


# the trained mechanisms: (step 5, step 6)
_MECHANISMS = {"dpsgd": (_account_dpsgd, _train_dpsgd), "ftrl": (_account_ftrl, _train_ftrl)}


def mean_shift(in_values: Any, out_values: Any) -> tuple[float, float]:
    r"""The IN-minus-OUT mean shift of canary scores (or raw sums) and its standard error:
    :math:`d = \bar x_{IN} - \bar x_{OUT}`,
    :math:`\mathrm{SE} = \sqrt{s^2_{IN}/n_{IN} + s^2_{OUT}/n_{OUT}}` (sample variances, ``ddof=1``).

    Model 1 of {cite}`gauss_audit` (Proposition 1) predicts :math:`d = qCT` for the raw sums of Dirac canaries
    (:math:`\sqrt T qC` for the scores); the chapter checks the trained runs' shifts against it in units of SE.
    Needs at least two values in each group."""
    i, o = np.asarray(in_values), np.asarray(out_values)
    if i.ndim != 1 or o.ndim != 1 or i.size < 2 or o.size < 2:
        raise DPValueError("mean_shift needs two 1-d arrays of at least 2 values each")
    d = float(i.mean() - o.mean())
    se = math.sqrt(i.var(ddof=1) / len(i) + o.var(ddof=1) / len(o))
    return d, se
