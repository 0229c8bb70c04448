"""The shared plumbing of the one-run canary audits ({cite}`gauss_audit`, Sec. 5): one validated configuration
and one run skeleton for :func:`dputils.audit.whitebox.run_whitebox_audit` (DP-SGD, Dirac gradient canaries),
:func:`dputils.audit.input_canary.run_input_canary_audit` (DP-SGD, input-space canaries) and
:func:`dputils.audit.ftrl_audit.run_ftrl_audit` / :func:`~dputils.audit.ftrl_audit.simulate_ftrl_audit` (DP-FTRL).

Every run has the same four steps:

1. *Validate* the arguments once (:class:`CanaryConfig`, :class:`dputils.errors.DPValueError` naming the parameter).
2. *Draw the canaries* (:func:`draw_canaries`): canary j is IN with probability ``p_in`` independently (paper:
   1/2), from a numpy stream ``default_rng([seed, stream])`` of its own, so a runner's data, model and noise
   never shift the draw; when every canary falls on one side (probability ``p_in^m + (1 - p_in)^m``) canary 0
   is made IN and canary 1 OUT, because the auditors need both groups. Dirac canaries also get ``m`` distinct
   coordinates out of the ``D`` parameters (exactly orthogonal canaries, the paper's Fig. 4(a)).
3. *Train* with the canaries injected, recording per-canary observations (:func:`train_dpsgd` for DP-SGD).
4. *Score* (Definition 2, ``S_T = T^{-1/2} sum_t X_t``, in :class:`ScoreSums`) and *audit* with the package's
   auditors (the runners' ``audit_*`` functions).
"""

from __future__ import annotations

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

__all__ = ["CanaryConfig", "Canaries", "ScoreSums", "draw_canaries", "train_dpsgd", "device_label", "mean_shift"]

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
