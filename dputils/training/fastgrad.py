"""Clipped sums of per-example (or per-sub-batch) gradients without the (batch x parameters) matrix.

For a layer whose output for example i is ``z_i = a_i W^T + b`` (``a_i``: (T, d_in) rows of the input, T = 1
for a flat Linear input, T = output positions for a convolution after ``unfold``), the gradient of the
example's loss ``f_i`` is ``dW_i = g_i^T a_i`` and ``db_i = sum_t g_it`` with ``g_i = df_i/dz_i`` (T, d_out),
the "backprop" of the example.  One forward and one backward pass of ``sum_i f_i`` give every ``a_i`` and
``g_i`` (the backward stops at the layer outputs: no parameter gradient is formed).  Then, per layer:

* the squared norm of the example's gradient, either from the materialised layer gradient
  ``||g_i^T a_i||_F^2`` (cost T d_in d_out per example) or without it ("ghost norm"),
  ``||g_i^T a_i||_F^2 = sum_{t,t'} (a_i a_i^T)_{tt'} (g_i g_i^T)_{tt'}`` (cost T^2 (d_in + d_out)); for T = 1
  this is ``||a_i||^2 ||g_i||^2``. The cheaper of the two is used, layer by layer;
* the squared norms add over layers to ``||grad f_i||^2`` (the global L2 norm over all parameters);
* the clipped sum ``sum_i c_i grad f_i`` with ``c_i = 1 / max(1, ||grad f_i|| / C)`` is, per layer,
  ``sum_i c_i g_i^T a_i`` = one matrix product of the re-weighted backprops with the inputs (or the
  ``c``-weighted sum of the materialised per-example layer gradients).

Group (sub-batch) clipping, eq. (4)-(5) of ``vandijk_shuffling``: with B = m s examples in m sub-batches of s,
the clipped term of sub-batch h is ``[a_h]_C`` with ``a_h = (1/s) sum_{i in h} grad f_i``.  Per layer
``a_h = (1/s) sum_{i in h} g_i^T a_i = G_h^T A_h`` where ``A_h`` stacks the s examples' rows (s T, d_in) and
``G_h`` their backprops divided by s: a sub-batch is one "example" with s T rows, and everything above applies
unchanged (s = 1 is individual clipping, m = 1 batch clipping).

GroupNorm and LayerNorm (``y = x_hat * gamma + beta``): ``dgamma_i = sum g_i * x_hat_i`` and
``dbeta_i = sum g_i`` over the non-channel positions, materialised (they are small).

Supported: models built from ``nn.Linear``, ``nn.Conv2d`` (integer padding, zeros padding mode), ``nn.GroupNorm``,
``nn.LayerNorm`` and parameter-free layers that act on each example separately (activations, pooling, flatten),
inside ``nn.Sequential`` containers (and the book's WideResNet block), each parameterised layer called once per
forward pass.  :func:`fast_path_unsupported` says why a model is not.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from ..errors import DPValueError
from .models import _WideBlock  # custom forward, reviewed: per-example, no in-place ops, each layer once

__all__ = ["fast_path_unsupported", "supports_fast_path", "clipped_group_sum"]

_PARAM_LAYERS = (nn.Linear, nn.Conv2d, nn.GroupNorm, nn.LayerNorm)
# parameter-free layers that treat every example on its own
_FREE_LAYERS = (
    nn.ReLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.GELU,
    nn.SiLU,
    nn.ELU,
    nn.LeakyReLU,
    nn.Softplus,
    nn.Identity,
    nn.Flatten,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
)


def _containers() -> tuple[type, ...]:
    return (nn.Sequential, _WideBlock)


def fast_path_unsupported(model: nn.Module) -> str | None:
    """None when :func:`clipped_group_sum` applies to ``model``, else the reason (the first offending module)."""
    containers = _containers()
    counts: dict[int, int] = {}
    for _, mod in model.named_modules(remove_duplicate=False):
        counts[id(mod)] = counts.get(id(mod), 0) + 1
    for name, mod in model.named_modules():
        if counts[id(mod)] > 1 and list(mod.parameters(recurse=False)):
            return f"{name or 'the model'} is used at {counts[id(mod)]} places (shared parameters)"
        label = name or "the model"
        if getattr(mod, "inplace", False):
            return f"{label} ({type(mod).__name__}) works in place"
        if isinstance(mod, _PARAM_LAYERS):
            if isinstance(mod, nn.Conv2d) and (
                mod.groups != 1 or mod.padding_mode != "zeros" or isinstance(mod.padding, str)
            ):
                return f"{label}: Conv2d with groups, string padding or a non-zero padding mode"
            continue
        if isinstance(mod, _FREE_LAYERS):
            continue
        if type(mod) in containers:
            if list(mod.parameters(recurse=False)):
                return f"{label} ({type(mod).__name__}) holds its own parameters"
            continue
        return f"{label}: unsupported module {type(mod).__name__}"
    return None


def supports_fast_path(model: nn.Module) -> bool:
    """True when every module of ``model`` is one :func:`clipped_group_sum` handles exactly."""
    return fast_path_unsupported(model) is None


def _sqnorm(T: torch.Tensor) -> torch.Tensor:
    """Squared L2 norm of each row of T (m, ...), without a squared temporary."""
    v = T.reshape(T.shape[0], -1)
    return torch.linalg.vector_norm(v, dim=1).square()


_ALIGN = {"cpu": 64, "cuda": 512}  # bytes: the alignment of a fresh tensor (CPU allocator, CUDA caching allocator)


def _matmul(a: torch.Tensor, b: torch.Tensor, dest: torch.Tensor | None) -> torch.Tensor:
    """``a @ b``, written into ``dest`` (a contiguous tensor of as many entries, e.g. a block of the caller's flat
    buffer) when given. Straight into ``dest`` (no temporary, no copy) when it is aligned like a fresh tensor:
    BLAS kernels may round differently into a less aligned output, and the numbers must not depend on where a
    block sits in the buffer; otherwise into a fresh tensor, copied."""
    if dest is None:
        return a @ b
    shape = (a.shape[0], b.shape[1]) if a.dim() == 2 else (1, b.shape[1])
    if dest.data_ptr() % _ALIGN.get(dest.device.type, 512):
        return dest.view(a.shape[:-1] + b.shape[1:]).copy_(a @ b)
    # (k,) @ (k, n) is (1, k) @ (k, n), the product ``a @ b`` itself forms
    out = torch.mm(a if a.dim() == 2 else a.unsqueeze(0), b, out=dest.view(shape))
    return out if a.dim() == 2 else out.view(b.shape[1])


def _ghost_is_cheaper(n: int, d_in: int, d_out: int) -> bool:
    """Ghost norm (n^2 (d_in + d_out) per group) against the layer gradient (n d_in d_out per group)."""
    return n * (d_in + d_out) < d_in * d_out


def _linear_term(A: torch.Tensor, G: torch.Tensor, has_bias: bool):
    """A: (m, n, d_in) inputs, G: (m, n, d_out) backprops (sums over the group, not yet divided by s) of m groups
    of n rows. Returns the groups' squared norms (m,) of ``sum_rows g^T a`` and ``finish(c, wdest, bdest) ->
    (weight grad (d_out, d_in), bias grad or None)`` = ``sum_h c_h (group h's gradient)``, written into the
    destinations where given (see :func:`_matmul`)."""
    m, n, d_in = A.shape
    d_out = G.shape[2]
    bias = G.sum(1) if has_bias else None  # (m, d_out) per-group bias gradients
    if _ghost_is_cheaper(n, d_in, d_out):
        if n == 1:
            sq = _sqnorm(A) * _sqnorm(G)
        else:
            sq = (torch.bmm(A, A.transpose(1, 2)) * torch.bmm(G, G.transpose(1, 2))).sum((1, 2))

        def finish(c, wdest=None, bdest=None):
            Gc = (G * c[:, None, None]).reshape(m * n, d_out)
            return (_matmul(Gc.t(), A.reshape(m * n, d_in), wdest), None if bias is None else _matmul(c, bias, bdest))
    else:
        Wg = torch.bmm(G.transpose(1, 2), A)  # (m, d_out, d_in) per-group layer gradients
        sq = _sqnorm(Wg)

        def finish(c, wdest=None, bdest=None):
            return (
                _matmul(c, Wg.reshape(m, -1), wdest).view(d_out, d_in),
                None if bias is None else _matmul(c, bias, bdest),
            )

    if bias is not None:
        sq = sq + _sqnorm(bias)
    return sq, finish


def _patches(a: torch.Tensor, mod: nn.Conv2d) -> torch.Tensor:
    """(B, L, C_in kh kw) input patches of a convolution, columns ordered as ``weight.view(C_out, -1)``: the rows
    of ``F.unfold(a).transpose(1, 2)``, formed by one strided copy (faster than ``im2col`` on a busy CPU)."""
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = mod.kernel_size, mod.stride, mod.dilation, mod.padding
    x = F.pad(a, (pw, pw, ph, ph)) if ph or pw else a
    v = x.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)  # (B, C, Ho, Wo, span_h, span_w)
    if dh > 1 or dw > 1:
        v = v[..., ::dh, ::dw]
    B, C, Ho, Wo = v.shape[:4]
    return v.permute(0, 2, 3, 1, 4, 5).reshape(B, Ho * Wo, C * kh * kw)


def _layer_terms(mod: nn.Module, a: torch.Tensor, g: torch.Tensor, m: int, s: int):
    """Squared norms (m,) of ``mod``'s part of the per-group gradient SUMS ``sum_{i in h} grad f_i`` (s times
    the means) and a finisher mapping coefficients c (m,) to ``{param_name: sum_h c_h (group h's sum)}``; given
    ``dest`` ({param_name: a tensor shaped like the parameter}), the finisher writes the blocks there."""
    B = a.shape[0]
    if isinstance(mod, nn.Linear):
        A = a.reshape(m, -1, a.shape[-1])
        G = g.reshape(m, -1, g.shape[-1])
        sq, fin = _linear_term(A, G, mod.bias is not None)

        def finish(c, dest=None):
            wg, bg = fin(c, *((dest["weight"], dest.get("bias")) if dest else ()))
            return {"weight": wg.view_as(mod.weight)} | ({} if bg is None else {"bias": bg})

        return sq, finish
    if isinstance(mod, nn.Conv2d):
        L = g.shape[2] * g.shape[3]
        d_out, d_in = mod.weight.shape[0], mod.weight[0].numel()
        if L >= 256 and a.shape[1] >= 16 and not _ghost_is_cheaper(s * L, d_in, d_out):
            # per-group weight gradients by one grouped convolution: groups = sub-batches, batch = position
            # in the sub-batch (a_(h, j) -> batch j, channel block h); faster than patches at large resolution
            # (measured on CPU; with few input channels, e.g. RGB, the grouped kernel is slow: patches instead)
            cin, H, W = a.shape[1:]
            ag = a.view(m, s, cin, H, W).transpose(0, 1).reshape(s, m * cin, H, W)
            gg = g.view(m, s, d_out, *g.shape[2:]).transpose(0, 1).reshape(s, m * d_out, *g.shape[2:])
            Wg = torch.nn.grad.conv2d_weight(
                ag,
                (m * d_out, cin, *mod.kernel_size),
                gg,
                stride=mod.stride,
                padding=mod.padding,
                dilation=mod.dilation,
                groups=m,
            )
            Wg = Wg.view(m, -1)
            bias = g.sum((3, 2)).view(m, s, d_out).sum(1) if mod.bias is not None else None
            sq = _sqnorm(Wg) + (_sqnorm(bias) if bias is not None else 0)

            def finish(c, dest=None):
                dest = dest or {}
                return {"weight": _matmul(c, Wg, dest.get("weight")).view_as(mod.weight)} | (
                    {} if bias is None else {"bias": _matmul(c, bias, dest.get("bias"))}
                )

            return sq, finish
        A = _patches(a, mod).reshape(m, s * L, d_in)
        G = g.reshape(B, g.shape[1], L).transpose(1, 2).reshape(m, s * L, g.shape[1])
        sq, fin = _linear_term(A, G, mod.bias is not None)

        def finish(c, dest=None):
            wg, bg = fin(c, *((dest["weight"], dest.get("bias")) if dest else ()))
            return {"weight": wg.view_as(mod.weight)} | ({} if bg is None else {"bias": bg})

        return sq, finish
    # GroupNorm / LayerNorm: y = x_hat * gamma + beta
    if isinstance(mod, nn.GroupNorm):
        xh = F.group_norm(a, mod.num_groups, None, None, mod.eps)
        if a.dim() > 2:  # sum over positions, keep (B, C): a batched dot product, no (B, C, H, W) temporary
            gf, xf = g.reshape(B * a.shape[1], 1, -1), xh.reshape(B * a.shape[1], -1, 1)
            gam = torch.bmm(gf, xf).view(B, a.shape[1])
            bet = gf.sum(2).view(B, a.shape[1])
        else:
            gam, bet = g * xh, g
    else:  # LayerNorm over the trailing normalized_shape, summed over the positions in between
        xh = F.layer_norm(a, mod.normalized_shape, None, None, mod.eps)
        dims = tuple(range(1, a.dim() - len(mod.normalized_shape)))
        gam = (g * xh).sum(dims) if dims else g * xh
        bet = g.sum(dims) if dims else g
    out = {}
    if mod.weight is not None:
        out["weight"] = gam.reshape(m, s, -1).sum(1)
    if mod.bias is not None:
        out["bias"] = bet.reshape(m, s, -1).sum(1)
    sq = sum(_sqnorm(v) for v in out.values()) if out else torch.zeros(m, dtype=a.dtype, device=a.device)
    shapes = {k: getattr(mod, k).shape for k in out}

    def finish(c, dest=None):
        dest = dest or {}
        return {k: _matmul(c, v, dest.get(k)).view(shapes[k]) for k, v in out.items()}

    return sq, finish


def clipped_group_sum(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    X: torch.Tensor,
    y: torch.Tensor,
    clip: float,
    sub_batches: int,
    sub_batch_size: int = 1,
    loss: Callable | None = None,
    out: torch.Tensor | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``U = sum_h [a_h]_C`` over m = ``sub_batches`` groups of s = ``sub_batch_size`` consecutive rows of X,
    ``a_h = (1/s) sum_{i in h} grad f(w, x_i)`` (cross-entropy by default), ``[x]_C = x / max(1, ||x|| / C)``
    with the norm over all parameters. Returns ``({name: U's block}, norms)`` with ``norms[h] = ||a_h||``.

    ``params`` are the values of ``model``'s named parameters (used through ``functional_call``); the model
    must pass :func:`fast_path_unsupported`. One forward, one backward to the layer outputs (the layer formulas
    of the module docstring applied to each backprop as it arrives), then one product per layer; no (B x D)
    matrix is formed. ``out``: a flat buffer of D entries (the parameters in ``params`` order) that receives U;
    the products write straight into it, and the returned blocks are views of it."""
    m, s = int(sub_batches), int(sub_batch_size)
    if X.shape[0] != m * s:
        raise DPValueError(f"X must have sub_batches * sub_batch_size = {m * s} rows, got {X.shape[0]}")
    loss = loss or (lambda out, t: F.cross_entropy(out, t, reduction="sum"))
    owners: dict[nn.Module, str] = {}
    for name, mod in model.named_modules():
        if isinstance(mod, _PARAM_LAYERS) and list(mod.parameters(recurse=False)):
            owners[mod] = name
    called: set[nn.Module] = set()
    terms: list[tuple[str, torch.Tensor, Callable]] = []
    # every layer output gets "+ z" with z a scalar zero leaf: the backward to z passes through every layer
    # output (and no parameter gradient is formed); a hook on each output turns its backprop g into the layer's
    # norms and finisher as soon as it arrives, so no layer's g outlives its own step of the backward pass
    z = torch.zeros((), dtype=X.dtype, device=X.device, requires_grad=True)

    def hook(mod, inp, out):
        if mod in called:
            raise DPValueError(
                f"module {owners[mod] or type(mod).__name__} is called twice in one forward pass: "
                "grad_mode='ghost' needs each layer once (use grad_mode='vmap')"
            )
        called.add(mod)
        a = inp[0].detach()
        out = out + z

        def on_backprop(g):
            terms.append((owners[mod], *_layer_terms(mod, a, g.detach(), m, s)))

        out.register_hook(on_backprop)
        return out

    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    handles = [mod.register_forward_hook(hook) for mod in owners]
    try:
        with torch.enable_grad():
            total = loss(functional_call(model, leaves, (X,)), y)
            torch.autograd.grad(total, [z], allow_unused=True)
    finally:
        for h in handles:
            h.remove()
    sq = torch.zeros(m, dtype=X.dtype, device=X.device)
    for _, q, _ in terms:
        sq = sq + q
    norms = sq.clamp_min(0).sqrt() / s  # ||a_h|| = ||group sum|| / s
    c = 1.0 / (s * torch.clamp(norms / float(clip), min=1.0))  # [a_h]_C = (group sum) / (s max(1, ||a_h|| / C))
    blocks = None
    if out is not None:
        D = sum(v.numel() for v in params.values())
        if out.shape != (D,) or not out.is_contiguous():
            raise DPValueError(f"out must be a contiguous vector of {D} entries, got shape {tuple(out.shape)}")
        blocks, i = {}, 0
        for k, v in params.items():
            blocks[k] = out[i : i + v.numel()].view_as(v)
            i += v.numel()
    U: dict[str, torch.Tensor] = {}
    for prefix, _, fin in terms:
        full = {k: f"{prefix}.{k}" if prefix else k for k in ("weight", "bias")}
        dest = None if blocks is None else {k: blocks[f] for k, f in full.items() if f in blocks}
        for k, v in fin(c, dest).items():
            U[full[k]] = v
    for k, v in params.items():  # parameters without a term (none on a supported model that uses them all)
        if k not in U:
            U[k] = blocks[k].zero_() if blocks is not None else torch.zeros_like(v)
    return {k: U[k] for k in params}, norms
