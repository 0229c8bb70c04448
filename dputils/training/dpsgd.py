"""Algorithm 1 of van Dijk et al. (``vandijk_shuffling``): generalized DP-SGD in torch.

One round b of epoch e (round index t):

    S_b      = the b-th block of ms indices of a fresh permutation   (sampler="shuffle")
             | a fresh uniform subset of ms indices                   (sampler="subsample")
             | each index independently with probability ms/N         (sampler="poisson")
    S_b      -> m sub-batches S_{b,h} of s indices each (uniformly at random)
    a_h      = A(w, S_{b,h})            inner first-order procedure (see ``inner``)
    U        = sum_h [a_h]_C            [x]_C = x / max(1, ||x||_2 / C), norm over ALL parameters
    Ubar     = U + N(0, (noise_multiplier_scale * C * sigma)^2 I)   i.i.d. per coordinate; scale 2 (default)
               is the paper's analysis (replacement-style neighbours, sensitivity 2C)
    w       <- w - eta_t * Ubar / m     (optionally through momentum on the released Ubar/m: post-processing)

Individual clipping (eq. 1) is s = 1 with m the batch size; batch clipping (eq. 2-4) is m = 1 with s the
batch size.  ``inner``:

* ``"mean-gradient"`` (eq. 4): ``a_h = (1/s) sum_{i in S_{b,h}} grad f(w, xi_i)``; vectorized over the m
  sub-batches with vmap (for s = 1 this is the per-sample gradient of eq. 1);
* ``"sgd"`` (eq. 2): s sequential SGD steps from w with step ``inner_lr``, ``a_h = sum_j grad f(w_j, xi_j)``;
* ``"momentum"``: the same with heavy-ball momentum, state fresh for every call of A (so that ``a_h``
  depends only on w and ``S_{b,h}``).

How U is computed (``grad_mode``): ``"ghost"`` forms U without the (m x D) matrix of the a_h, from one forward
and one backward pass (per-layer norms from activations and backprops, then one re-weighted product per layer;
:mod:`dputils.training.fastgrad`), exact for the ``mean-gradient`` inner procedure (and any inner procedure at
s = 1, where all three give the one gradient) on models of supported layers; ``"vmap"`` stacks the a_h with
``torch.func`` (vmap + grad) and clips the rows; ``"auto"`` (default) takes ``"ghost"`` where it is exact and
``"vmap"`` otherwise.  Both give the same U up to float rounding.

Hooks for auditing: ``extra_gradients(info)`` may return extra per-example gradient vectors (k, D)
that are clipped and summed into U like any other term (a canary's gradient); ``on_round(info)`` sees
every round's indices, clean sum U and released Ubar.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from ..errors import (
    DPValueError,
    check_choice,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
)
from .fastgrad import clipped_group_sum, fast_path_unsupported
from .models import make_mlp  # noqa: F401  (public here too: dputils.training.make_mlp)

__all__ = [
    "DPSGDConfig",
    "RoundInfo",
    "TrainResult",
    "resolve_device",
    "per_sample_gradients",
    "clip_rows",
    "train",
    "evaluate",
    "make_mlp",
    "resolve_grad_mode",
    "GRAD_MODES",
]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; anything else is passed to ``torch.device``."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


GRAD_MODES = ("auto", "ghost", "vmap")


@dataclass
class DPSGDConfig:
    """Hyper-parameters of Algorithm 1 (names follow the paper: E, s, m, C, sigma, eta)."""

    epochs: int = 1  # E
    sub_batch_size: int = 1  # s
    sub_batches: int = 64  # m
    clip: float = 1.0  # C
    sigma: float = 1.0  # noise multiplier
    lr: float = 0.1  # eta (outer step size)
    sampler: str = "shuffle"  # shuffle | subsample | poisson
    inner: str = "mean-gradient"  # mean-gradient | sgd | momentum
    inner_lr: float = 0.05  # step of the local procedure A (sgd / momentum)
    inner_momentum: float = 0.9
    outer_momentum: float = 0.0  # momentum on the released updates (post-processing)
    noise_multiplier_scale: float = 2.0  # noise std = scale * C * sigma; 2 = the paper's analysis
    lr_schedule: Callable[[int], float] | None = None  # t -> eta_t (overrides lr)
    device: str = "auto"
    seed: int = 0
    microbatch: int = 0  # per-sample gradients in chunks of this many rows (0 = all at once); whole sub-batches
    grad_mode: str = "auto"  # auto | ghost | vmap: how U is computed (module docstring)
    history: bool = True  # evaluate train (and test) loss and accuracy at the end of every epoch

    def validate(self, n: int) -> None:
        check_positive_int("epochs", self.epochs)
        check_nonnegative_int("microbatch", self.microbatch)
        check_positive_int("sub_batch_size", self.sub_batch_size)
        check_positive_int("sub_batches", self.sub_batches)
        check_positive("clip", self.clip)
        check_nonnegative("sigma", self.sigma)
        check_positive("lr", self.lr)
        check_choice("sampler", self.sampler, ("shuffle", "subsample", "poisson"))
        check_choice("inner", self.inner, ("mean-gradient", "sgd", "momentum"))
        check_choice("grad_mode", self.grad_mode, GRAD_MODES)
        check_nonnegative("noise_multiplier_scale", self.noise_multiplier_scale)
        if not 0 <= self.outer_momentum < 1:
            raise DPValueError(f"outer_momentum must be in [0, 1), got {self.outer_momentum!r}")
        ms = self.sub_batches * self.sub_batch_size
        if self.sampler != "poisson" and n % ms:
            raise DPValueError(f"dataset size ({n}) must be a multiple of sub_batches * sub_batch_size ({ms})")
        if self.sampler == "poisson" and self.sub_batch_size != 1:
            raise DPValueError("sub_batch_size must be 1 with sampler='poisson' (individual clipping)")

    @property
    def clipping(self) -> str:
        """``"individual"`` (s = 1), ``"batch"`` (m = 1) or ``"general"`` (eq. 5)."""
        if self.sub_batch_size == 1:
            return "individual"
        return "batch" if self.sub_batches == 1 else "general"


@dataclass
class RoundInfo:
    """What a training hook sees after each round: the epoch, the round t (from 0 over all epochs), the round's
    sample indices (sub-batches of shape (m, s), or (k,) under Poisson sampling) and, where the hook asks for
    them, the clipped sum U, the released noisy sum Ubar and the flat parameters w before the update."""

    epoch: int
    round: int  # t, counted from 0 over all epochs
    indices: torch.Tensor  # the round's sample indices, grouped as sub-batches (m, s) or (k,) for poisson
    clean_sum: torch.Tensor | None = None  # U
    released: torch.Tensor | None = None  # Ubar
    params: torch.Tensor | None = None  # flat w before the update


@dataclass
class TrainResult:
    """The result of :func:`train`: the trained model, the evaluation history (one dict per evaluation), the
    ratio ||noise|| / ||U|| of each round, the number of rounds, the configuration and the clipped-sum path
    that ran (``"ghost"`` or ``"vmap"``); ``final`` is the last evaluation."""

    model: nn.Module
    history: list[dict[str, float]] = field(default_factory=list)
    noise_to_signal: list[float] = field(default_factory=list)  # ||noise|| / ||U|| per round
    rounds: int = 0
    config: DPSGDConfig | None = None
    grad_mode: str = ""  # the path that ran: "ghost" or "vmap"

    @property
    def final(self) -> dict[str, float]:
        return self.history[-1] if self.history else {}


def flatten_params(tensors: dict[str, torch.Tensor], batch_dims: int = 0) -> torch.Tensor:
    """The tensors of a parameter dict concatenated into one vector (after ``batch_dims`` leading batch axes)."""
    parts = [t.reshape(*t.shape[:batch_dims], -1) for t in tensors.values()]
    return torch.cat(parts, dim=-1)


def unflatten_params(vec: torch.Tensor, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of :func:`flatten_params`: ``vec`` cut into tensors shaped like the values of ``like``."""
    out, i = {}, 0
    for k, v in like.items():
        n = v.numel()
        out[k] = vec[i : i + n].view_as(v)
        i += n
    return out


def per_sample_gradients(
    model: nn.Module, params: dict[str, torch.Tensor], X: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """Rows = flattened gradients of the cross-entropy loss of each sample, via ``vmap(grad(...))``."""

    def loss_one(p, x, t):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return nn.functional.cross_entropy(out, t.unsqueeze(0))

    g = vmap(grad(loss_one), in_dims=(None, 0, 0))(params, X, y)
    return flatten_params(g, batch_dims=1)


def _sub_batch_mean_gradients(model, params, X, y) -> torch.Tensor:
    """X: (m, s, ...) -> (m, D) mean gradients per sub-batch (eq. 4 inside each sub-batch)."""

    def loss_sub(p, xs, ts):
        return nn.functional.cross_entropy(functional_call(model, p, (xs,)), ts)

    g = vmap(grad(loss_sub), in_dims=(None, 0, 0))(params, X, y)
    return flatten_params(g, batch_dims=1)


def _local_procedure(model, params, X, y, lr: float, momentum: float) -> torch.Tensor:
    """Eq. (2): sequential SGD (optionally heavy-ball, fresh state) over the s samples of one sub-batch;
    returns ``a = sum_j v_j`` = ``(w_1 - w_{s+1}) / lr`` where v_j is the step direction."""

    def loss_one(p, x, t):
        return nn.functional.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), t.unsqueeze(0))

    gfn = grad(loss_one)
    w = {k: v.detach() for k, v in params.items()}
    buf = None
    total = None
    for j in range(X.shape[0]):
        gj = flatten_params(gfn(w, X[j], y[j]))
        step = gj if buf is None or momentum == 0 else momentum * buf + gj
        buf = step
        total = step.clone() if total is None else total + step
        w = unflatten_params(flatten_params(w) - lr * step, w)
    return total


def clip_rows(G: torch.Tensor, clip: float) -> torch.Tensor:
    """``[x]_C = x / max(1, ||x||_2 / C)`` for each row (global L2 norm over all parameters)."""
    norms = G.norm(dim=1, keepdim=True)
    return G / torch.clamp(norms / clip, min=1.0)


@torch.no_grad()
def evaluate(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """The mean cross-entropy loss and the accuracy of ``model`` on ``(X, y)``, as floats."""
    out = model(X)
    return {"loss": float(nn.functional.cross_entropy(out, y)), "accuracy": float((out.argmax(1) == y).float().mean())}


def resolve_grad_mode(model: nn.Module, config) -> str:
    """The path :func:`train` (``config`` a :class:`DPSGDConfig`) or :func:`dputils.training.train_ftrl` (an
    ``FTRLConfig``: individual clipping, s = 1) takes: ``"ghost"`` (:mod:`.fastgrad`) or ``"vmap"``. ``"auto"``
    picks ghost when it is exact: the inner procedure is the mean gradient (or s = 1) and every module of
    ``model`` is supported."""
    mode = check_choice("grad_mode", config.grad_mode, GRAD_MODES)
    if mode == "vmap":
        return "vmap"
    why = None
    s, inner = getattr(config, "sub_batch_size", 1), getattr(config, "inner", "mean-gradient")
    if s > 1 and inner != "mean-gradient":
        why = f"inner={inner!r} with sub_batch_size > 1 is a sequential procedure, not a gradient"
    else:
        why = fast_path_unsupported(model)
    if why is None:
        return "ghost"
    if mode == "ghost":
        raise DPValueError(f"grad_mode='ghost' does not apply: {why}")
    return "vmap"


def _buffer(bufs: dict | None, key: str, shape, like: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` (dtype and device of ``like``): ``bufs[key]`` reused across calls when
    ``bufs`` is a dict and the shape matches (the caller guarantees the previous contents are dead), else new."""
    shape = tuple(shape)
    if bufs is None:
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    b = bufs.get(key)
    if b is None or tuple(b.shape) != shape:
        b = bufs[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
    return b


def _ghost_sum(
    model, p, X, y, idx: torch.Tensor, s: int, C: float, microbatch: int, w: torch.Tensor, bufs: dict | None = None
) -> torch.Tensor:
    """U = sum_h [a_h]_C over the groups of ``idx`` ((m, s), or (k,) rows for s = 1), in chunks of whole groups
    holding at most ``microbatch`` rows (0: all at once). With ``bufs`` (a dict kept by the caller between
    rounds, when nothing keeps the previous U), U, the partial sums and the gathered rows of X live in buffers
    reused from round to round (no allocation per round of the big tensors)."""
    groups = idx.reshape(-1, s)
    step = groups.shape[0] if not microbatch else max(1, int(microbatch) // s)
    U = part = None  # the products of clipped_group_sum write into U (first chunk), then into part (added to U)
    for chunk in torch.split(groups, step):
        rows = chunk.flatten()
        Xr = torch.index_select(X, 0, rows, out=_buffer(bufs, "X", (len(rows), *X.shape[1:]), X))
        if U is None:
            U = _buffer(bufs, "U", w.shape, w)
            clipped_group_sum(model, p, Xr, y[rows], C, chunk.shape[0], s, out=U)
        else:
            part = _buffer(bufs, "part", w.shape, w)
            clipped_group_sum(model, p, Xr, y[rows], C, chunk.shape[0], s, out=part)
            U += part
    return U if U is not None else torch.zeros_like(w)


def setup_run(model: nn.Module, X, y, X_test, y_test, config) -> tuple:
    """Shared start of a training run (DP-SGD and DP-FTRL): the device, the sampling generator (CPU, seeded
    with ``config.seed``: coins public to the strong adversary), the noise generator (on the device, seed + 1),
    the data as tensors on the device (float32, or float64 when the model's parameters are: a float64 run is
    exact enough to compare the gradient paths), the model moved there and its parameters, detached (their
    shapes and starting values; :func:`flatten_params` copies them)."""
    device = resolve_device(config.device)
    gen = torch.Generator(device="cpu").manual_seed(int(config.seed))
    noise_gen = torch.Generator(device=device).manual_seed(int(config.seed) + 1)
    dtype = torch.float64 if any(v.dtype == torch.float64 for v in model.parameters()) else torch.float32
    X = torch.as_tensor(X, dtype=dtype).to(device)
    y = torch.as_tensor(y, dtype=torch.long).to(device)
    if X_test is not None:
        X_test = torch.as_tensor(X_test, dtype=dtype).to(device)
        y_test = torch.as_tensor(y_test, dtype=torch.long).to(device)
    model.to(device)
    params = {k: v.detach() for k, v in model.named_parameters()}  # the starting values: flatten_params copies
    return device, gen, noise_gen, X, y, X_test, y_test, params


def train(
    model: nn.Module,
    X: np.ndarray | torch.Tensor,
    y: np.ndarray | torch.Tensor,
    config: DPSGDConfig,
    X_test: Any = None,
    y_test: Any = None,
    extra_gradients: Callable[[RoundInfo], torch.Tensor | None] | None = None,
    on_round: Callable[[RoundInfo], None] | None = None,
    progress: bool = False,
) -> TrainResult:
    """Run Algorithm 1 on ``model`` (modified in place) and return its history.

    Privacy (strong adversary, ``noise_multiplier_scale=2``): shuffling with g = 1 gives ``G_{sqrt(E)/sigma}``
    (Lemma F.2); batch clipping with shuffling gives ``G_{sqrt(gE)/sigma}`` for groups (Thm F.1); see
    :mod:`dputils.shuffling`.  With ``sampler="poisson"`` and scale 1 this is Opacus-style DP-SGD under
    add/remove adjacency, accounted with the standard PLD/RDP accountants."""
    n = len(X)
    config.validate(n)
    device, gen, noise_gen, X, y, X_test, y_test, params = setup_run(model, X, y, X_test, y_test, config)
    w = flatten_params(params)
    m, s, C = config.sub_batches, config.sub_batch_size, float(config.clip)
    noise_std = config.noise_multiplier_scale * C * float(config.sigma)
    ms = m * s
    R = max(1, round(n / ms))
    velocity = torch.zeros_like(w) if config.outer_momentum else None
    # without hooks nothing holds on to an old w (info.params) or to U after the round: update both in place
    in_place = on_round is None and extra_gradients is None
    bufs = {} if in_place else None  # then the round's big tensors live in buffers reused between rounds
    mode = resolve_grad_mode(model, config)
    result = TrainResult(model=model, config=config, grad_mode=mode)
    t = 0
    it = range(config.epochs)
    if progress:
        from tqdm.std import tqdm  # plain bar: honours TQDM_DISABLE, no widget warning in the book

        it = tqdm(it, desc="epochs")
    for e in it:
        perm = torch.randperm(n, generator=gen).to(device)
        for b in range(R):
            if config.sampler == "shuffle":
                idx = perm[b * ms : (b + 1) * ms]
            elif config.sampler == "subsample":
                idx = torch.randperm(n, generator=gen)[:ms].to(device)
            else:
                idx = torch.nonzero(torch.rand(n, generator=gen) < ms / n).flatten().to(device)
            if config.sampler != "poisson":
                idx = idx[torch.randperm(ms, generator=gen).to(device)].view(m, s)  # random split into sub-batches
            p = unflatten_params(w, params)
            U_pre = None  # clipped sum computed chunk by chunk (config.microbatch), or by the ghost path
            if idx.numel() == 0:
                A = torch.zeros(0, w.numel(), device=device)
            elif mode == "ghost":
                U_pre = _ghost_sum(
                    model, p, X, y, idx, 1 if config.sampler == "poisson" else s, C, config.microbatch, w, bufs
                )
                A = torch.zeros(0, w.numel(), device=device)
            elif config.sampler == "poisson" or s == 1:
                flat_idx = idx.flatten()
                if config.microbatch and flat_idx.numel() > config.microbatch:
                    # same sum of clipped rows, without holding the (batch x parameters) matrix: memory for
                    # large models (WRN-16-4 has 2.7 M parameters; 4096 rows would take 45 GB in float32)
                    U_pre = torch.zeros_like(w)
                    for chunk in torch.split(flat_idx, int(config.microbatch)):
                        U_pre += clip_rows(per_sample_gradients(model, p, X[chunk], y[chunk]), C).sum(0)
                    A = torch.zeros(0, w.numel(), device=device)
                else:
                    A = per_sample_gradients(model, p, X[flat_idx], y[flat_idx])
            elif config.inner == "mean-gradient":
                A = _sub_batch_mean_gradients(model, p, X[idx], y[idx])
            else:
                mom = config.inner_momentum if config.inner == "momentum" else 0.0
                A = torch.stack([_local_procedure(model, p, X[row], y[row], config.inner_lr, mom) for row in idx])
            info = RoundInfo(epoch=e, round=t, indices=idx, params=w)
            if extra_gradients is not None:
                extra = extra_gradients(info)
                if extra is not None:
                    A = torch.cat([A, torch.as_tensor(extra, dtype=w.dtype, device=device).reshape(-1, w.numel())])
            if A.shape[0]:
                U = clip_rows(A, C).sum(0)
                if U_pre is not None:
                    U = U + U_pre
            else:
                U = U_pre if U_pre is not None else torch.zeros_like(w)
            noise = _buffer(bufs, "noise", w.shape, w).normal_(generator=noise_gen).mul_(noise_std)
            un = float(U.norm())
            result.noise_to_signal.append(float(noise.norm()) / un if un > 0 else math.inf)
            Ubar = noise.add_(U)  # U + noise, in the noise buffer (no further use of the noise alone)
            info.clean_sum, info.released = U, Ubar
            if on_round is not None:
                on_round(info)
            eta = config.lr_schedule(t) if config.lr_schedule is not None else config.lr
            if config.outer_momentum:
                velocity = config.outer_momentum * velocity + Ubar / m
                w = w - eta * velocity
            elif in_place:  # w - eta * Ubar / m in one pass over the D coordinates, in w's own buffer
                w.add_(Ubar, alpha=-eta / m)
            else:  # the same into a new tensor: info.params keeps the old w
                w = torch.add(w, Ubar, alpha=-eta / m)
            t += 1
        with torch.no_grad():
            named = dict(model.named_parameters())
            for k, v in unflatten_params(w, params).items():
                named[k].copy_(v)
        if not config.history:
            continue
        rec = {"epoch": e + 1}
        rec.update({f"train_{k}": v for k, v in evaluate(model, X, y).items()})
        if X_test is not None:
            rec.update({f"test_{k}": v for k, v in evaluate(model, X_test, y_test).items()})
        result.history.append(rec)
    result.rounds = t
    return result
