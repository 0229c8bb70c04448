"""Generalized DP-SGD (Algorithm 1 of ``vandijk_shuffling``) in torch: individual or batch clipping,
shuffling, subsampling or Poisson sampling, inner first-order procedures, canary hooks, ``device="auto"``."""

from .dpsgd import (
    DPSGDConfig,
    RoundInfo,
    TrainResult,
    clip_rows,
    evaluate,
    make_mlp,
    per_sample_gradients,
    resolve_device,
    train,
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
    "train",
]
