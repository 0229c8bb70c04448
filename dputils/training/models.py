"""Models for the book's training runs. None uses BatchNorm: it mixes the examples of a batch, which breaks
per-example clipping (and so the privacy analysis); GroupNorm normalises each example on its own.

* :func:`wide_resnet`: WideResNet-depth-width (Zagoruyko & Komodakis 2016) with GroupNorm, the CIFAR-10 model of
  the one-run auditing paper ({cite}`gauss_audit`, WRN-16-4) and of De et al. (2022);
* :func:`small_cnn`: a four-convolution GroupNorm network for CPU-sized image runs;
* :func:`make_model`: one entry point by name (``"mlp"``, ``"cnn"``, ``"wrn16-4"``).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import DPValueError, check_choice, check_positive_int

__all__ = ["make_mlp", "wide_resnet", "small_cnn", "make_model", "MODELS"]

MODELS = ("mlp", "cnn", "wrn16-4")


def make_mlp(in_dim: int, n_classes: int, hidden: int = 0) -> nn.Module:
    """Logistic regression (``hidden=0``) or a one-hidden-layer tanh MLP. No BatchNorm (it would couple samples)."""
    in_dim = check_positive_int("in_dim", in_dim)
    n_classes = check_positive_int("n_classes", n_classes)
    if hidden:
        return nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, n_classes))
    return nn.Linear(in_dim, n_classes)


class _WideBlock(nn.Module):
    """Pre-activation residual block: GN-ReLU-conv3x3-GN-ReLU-conv3x3 plus a (1x1-conv when shapes differ) skip."""

    def __init__(self, cin: int, cout: int, stride: int, groups: int = 16):
        super().__init__()
        self.n1 = nn.GroupNorm(min(groups, cin), cin)
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.n2 = nn.GroupNorm(min(groups, cout), cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.short = None if (cin == cout and stride == 1) else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        o = torch.relu(self.n1(x))
        y = self.c2(torch.relu(self.n2(self.c1(o))))
        return y + (x if self.short is None else self.short(o))


def wide_resnet(depth: int = 16, width: int = 4, n_classes: int = 10, in_channels: int = 3) -> nn.Module:
    """WideResNet-``depth``-``width`` for 32x32 images: three stages of ``(depth - 4) / 6`` blocks with
    ``16 width``, ``32 width`` and ``64 width`` channels (strides 1, 2, 2), GroupNorm instead of BatchNorm.
    WRN-16-4 has 2.75 M parameters."""
    depth = check_positive_int("depth", depth)
    if depth < 10 or (depth - 4) % 6:
        raise DPValueError(f"depth must be 6n + 4 with n >= 1 (10, 16, 22, 28, ...), got {depth}")
    width = check_positive_int("width", width)
    n_classes = check_positive_int("n_classes", n_classes)
    n = (depth - 4) // 6
    chans = [16, 16 * width, 32 * width, 64 * width]
    layers: list[nn.Module] = [nn.Conv2d(check_positive_int("in_channels", in_channels), chans[0], 3, 1, 1, bias=False)]
    cin = chans[0]
    for stage, cout in enumerate(chans[1:]):
        for j in range(n):
            layers.append(_WideBlock(cin, cout, 2 if (stage > 0 and j == 0) else 1))
            cin = cout
    layers += [nn.GroupNorm(16, cin), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, n_classes)]
    return nn.Sequential(*layers)


def small_cnn(n_classes: int = 10, in_channels: int = 3) -> nn.Module:
    """Four 3x3 convolutions (32, 64, 64, 128 channels) with GroupNorm, ReLU and pooling, then a linear head."""
    n_classes = check_positive_int("n_classes", n_classes)
    return nn.Sequential(
        nn.Conv2d(check_positive_int("in_channels", in_channels), 32, 3, 1, 1),
        nn.GroupNorm(8, 32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, 1, 1),
        nn.GroupNorm(8, 64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 64, 3, 1, 1),
        nn.GroupNorm(8, 64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, 1, 1),
        nn.GroupNorm(8, 128),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, n_classes),
    )


def make_model(name: str, *, in_dim: int | None = None, n_classes: int = 10, hidden: int = 0) -> nn.Module:
    """A model by name: ``"mlp"`` (:func:`make_mlp` on flat inputs of size ``in_dim``),
    ``"cnn"`` (:func:`small_cnn`) or ``"wrn16-4"`` (:func:`wide_resnet` 16-4), the last two on 3x32x32 images."""
    check_choice("model", name, MODELS)
    if name == "mlp":
        if in_dim is None:
            raise DPValueError("in_dim is required for model='mlp'")
        return make_mlp(in_dim, n_classes, hidden)
    if name == "cnn":
        return small_cnn(n_classes)
    return wide_resnet(16, 4, n_classes)
