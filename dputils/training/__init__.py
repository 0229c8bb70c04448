"""Generalized DP-SGD (Algorithm 1 of ``vandijk_shuffling``) in torch: individual or batch clipping,
shuffling, subsampling or Poisson sampling, inner first-order procedures, canary hooks, clipped sums without
per-example gradients (:mod:`.fastgrad`), ``device="auto"``; single-pass DP-FTRL with tree-aggregated noise
(:mod:`.ftrl`)."""

from ..optional import require as _require

_require("torch", "dputils.training")  # one line naming `pip install "dputils[train]"` when torch is missing

from .dpsgd import (  # noqa: E402
    DPSGDConfig,
    RoundInfo,
    TrainResult,
    clip_rows,
    evaluate,
    make_mlp,
    per_sample_gradients,
    resolve_device,
    resolve_grad_mode,
    train,
)
from .ftrl import (
    FTRLConfig,
    FTRLResult,
    FTRLStep,
    TreeAggregator,
    calibrate_sigma_node,
    prefix_noise_variance,
    released_ancestors,
    train_ftrl,
    tree_depth,
    tree_epsilon,
    tree_mu,
)

__all__ = [
    "DPSGDConfig",
    "RoundInfo",
    "TrainResult",
    "clip_rows",
    "evaluate",
    "make_mlp",
    "per_sample_gradients",
    "resolve_device",
    "resolve_grad_mode",
    "train",
    "FTRLConfig",
    "FTRLResult",
    "FTRLStep",
    "TreeAggregator",
    "calibrate_sigma_node",
    "prefix_noise_variance",
    "released_ancestors",
    "train_ftrl",
    "tree_depth",
    "tree_epsilon",
    "tree_mu",
]
