"""DP-FTRL with the streaming binary-tree (Honaker) mechanism (Kairouz et al. 2021; {cite}`honaker_tree`),
as audited in Sec. 5.2 of {cite}`gauss_audit`.

**Tree aggregation.** The stream of leaf vectors ``x_1, ..., x_T`` (leaf t = the sum of the clipped
gradients of step t) is summarised by dyadic nodes ``[a, b] = [k 2^j + 1, (k + 1) 2^j]``. With
``lowbit(u) = u & -u`` (the largest power of two dividing u), the prefix ``[1, t]`` is the disjoint union of
the nodes ``[u - lowbit(u) + 1, u]`` for ``u = t, t - lowbit(t), ...`` (one per set bit of t), so the
noisy prefix sums obey the recurrence

    s_t = s_{t - lowbit(t)} + nu_t,     nu_t = sum_{i = t - lowbit(t) + 1}^{t} x_i + Z_t,    Z_t ~ N(0, sigma_node^2 I)   (T1)

Only the T nodes ``nu_1, ..., nu_T`` are ever released (each gets fresh noise once, when it closes);
they are the left children of the complete tree plus its root (right children are never needed).
The noise of ``s_t`` is the sum of ``popcount(t)`` independent node noises:

    Var(s_t - sum_{i <= t} x_i) = popcount(t) sigma_node^2  per coordinate                               (T2)

**Privacy** (derivation; Kairouz et al. 2021, Thm. C.1 and D.1 argue the same way). Single pass: each
example sits in exactly one leaf, and its clipped gradient has norm at most C. The released nodes are
a subset of the nodes of the complete binary tree over ``2^ceil(log2 T)`` leaves, which has

    L = ceil(log2 T) + 1  levels,                                                                         (T3)

and a leaf lies in exactly one node per level. So adding or removing one example changes the vector
of released node sums ``(sum_{i in node} x_i)_node`` by at most ``C`` in at most L nodes: its L2
sensitivity is ``Delta = sqrt(L) C``. The gradients are adaptive (leaf t depends on the earlier
releases through the model), but each node is a Gaussian mechanism whose sensitivity for a given
example is fixed in advance (C if the example's leaf is in the node, 0 otherwise), so by the adaptive
composition of Gaussian DP (Dong, Roth and Su {cite}`dong_gdp`, Cor. 3.3) the whole release is

    mu-GDP with mu = sqrt(L) C / sigma_node                                                                (T4)

and (eps, delta)-DP exactly on the Gaussian curve ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``
(the analytic Gaussian mechanism of Balle and Wang, = :func:`dputils.curves.gdp_delta`). The sigma_node of
the paper (its "Balle-Wang on the combined sensitivity sqrt(L) C") is ``sqrt(L) C / mu(eps, delta)``;
at T = 128 (L = 8), delta = 1e-5, C = 1: 10.552, 5.639, 3.058, 1.698 for eps = 1, 2, 4, 8.

The bound is tight when T is a power of two: the example in leaf 1 lies in the released nodes
``[1, 1], [1, 2], [1, 4], ..., [1, T]`` (= the prefix sums ``s_{2^j}``), i.e. in L of them, so the auditor who
sums those node values along the canary's direction sees exactly ``N(0, L sigma^2)`` vs ``N(L C, L sigma^2)``.
For other T the worst leaf touches only ``floor(log2 T) + 1 = L - 1`` released nodes
(:func:`max_released_ancestors`), so (T3) is then conservative by one level, as the paper's calibration is.

**DP-FTRL** (Kairouz et al. 2021, Alg. 1 without momentum): FTRL with the quadratic regulariser
``||theta - theta_0||^2 / (2 eta)`` on the linearised losses has the closed form

    theta_t = theta_0 - eta * s_t / B                                                                    (T5)

(B the batch size, so ``eta`` is the step size on the mean gradient); every iterate is a post-processing
of the released prefix sums.

**The leaf** ``x_t = sum_{i in leaf t} [grad f(theta_{t-1}, x_i)]_C`` is computed as in DP-SGD with individual
clipping (``grad_mode``, as in :class:`dputils.training.DPSGDConfig`): ``"ghost"`` forms it from one forward and
one backward pass without the per-example gradients (:func:`dputils.training.fastgrad.clipped_group_sum`),
``"vmap"`` stacks them (``torch.func``) and clips the rows; ``"auto"`` (default) takes ghost when every module of
the model is supported. ``microbatch`` bounds the rows handled at once on either path. Both paths give the same
leaves up to float rounding.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..curves import gdp_epsilon, gdp_mu
from ..errors import (
    DPValueError,
    check_choice,
    check_delta,
    check_nonnegative,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
)
from .dpsgd import (
    GRAD_MODES,
    _ghost_sum,
    clip_rows,
    evaluate,
    flatten_params,
    per_sample_gradients,
    resolve_grad_mode,
    setup_run,
    unflatten_params,
)

__all__ = [
    "tree_depth",
    "lowbit",
    "node_span",
    "released_ancestors",
    "max_released_ancestors",
    "prefix_noise_variance",
    "tree_sensitivity",
    "tree_mu",
    "tree_epsilon",
    "calibrate_sigma_node",
    "TreeAggregator",
    "FTRLConfig",
    "FTRLStep",
    "FTRLResult",
    "train_ftrl",
]


# the tree --------------------------------------------------------------------------------------------
def tree_depth(T: int) -> int:
    """L = ceil(log2 T) + 1, the number of levels of the complete tree over T leaves (eq. T3; paper Sec. 5.2)."""
    T = check_positive_int("T", T)
    return (T - 1).bit_length() + 1  # ceil(log2 T) + 1, exact in integers


def lowbit(u: int) -> int:
    """The largest power of two dividing u >= 1 (the length of the node released at step u)."""
    u = check_positive_int("u", u)
    return u & -u


def node_span(u: int) -> tuple[int, int]:
    """The leaves ``(a, b)`` (1-based, inclusive) of the node released at step u: ``(u - lowbit(u) + 1, u)``."""
    return u - lowbit(u) + 1, u


def released_ancestors(leaf: int, T: int) -> list[int]:
    """The steps u <= T whose released node contains ``leaf`` (1-based): ``u - lowbit(u) < leaf <= u``."""
    T = check_positive_int("T", T)
    leaf = check_positive_int("leaf", leaf)
    if leaf > T:
        raise DPValueError(f"leaf must be in [1, T={T}], got {leaf}")
    return [u for u in range(leaf, T + 1) if u - (u & -u) < leaf]


def max_released_ancestors(T: int) -> int:
    """max over leaves of ``len(released_ancestors(leaf, T))`` = floor(log2 T) + 1 (attained by leaf 1).

    Equals :func:`tree_depth` when T is a power of two and ``tree_depth(T) - 1`` otherwise."""
    T = check_positive_int("T", T)
    return T.bit_length()


def prefix_noise_variance(t, sigma_node: float):
    """Per-coordinate variance of the noise of s_t: ``popcount(t) sigma_node^2`` (eq. T2); vectorised over t."""
    sigma_node = check_nonnegative("sigma_node", sigma_node)
    t = np.asarray(t)
    if not np.issubdtype(t.dtype, np.integer) or np.any(t < 1):
        raise DPValueError("t must hold integers >= 1")
    pc = np.vectorize(lambda v: bin(int(v)).count("1"), otypes=[float])(t)
    return pc * sigma_node**2


# privacy ---------------------------------------------------------------------------------------------
def tree_sensitivity(T: int, clip: float = 1.0) -> float:
    """L2 sensitivity of the released node sums to one example (single pass): ``sqrt(L) C`` (eq. T3-T4)."""
    clip = check_positive("clip", clip)
    return math.sqrt(tree_depth(T)) * clip


def tree_mu(sigma_node: float, T: int, clip: float = 1.0) -> float:
    """The GDP parameter ``mu = sqrt(L) C / sigma_node`` of the whole DP-FTRL release (eq. T4)."""
    sigma_node = check_positive("sigma_node", sigma_node)
    return tree_sensitivity(T, clip) / sigma_node


def tree_epsilon(sigma_node: float, T: int, delta: float, clip: float = 1.0) -> float:
    """Exact epsilon(delta) of single-pass tree-aggregated DP-FTRL: the mu-GDP curve of eq. (T4)."""
    return gdp_epsilon(check_delta(delta), tree_mu(sigma_node, T, clip))


def calibrate_sigma_node(epsilon: float, delta: float, T: int, clip: float = 1.0) -> float:
    """Per-node noise std (absolute, includes C) for exact (epsilon, delta)-DP: ``sqrt(L) C / mu(epsilon, delta)``,
    with ``mu(epsilon, delta)`` the largest GDP parameter meeting (epsilon, delta) (Balle-Wang analytic Gaussian).
    At T = 128, delta = 1e-5, C = 1: 10.5518 / 5.6394 / 3.0580 / 1.6977 for epsilon = 1 / 2 / 4 / 8.

    Not a search over an accountant, so not :func:`dputils.calibration.calibrate`: the tree release is a
    Gaussian mechanism of L2 sensitivity ``sqrt(L) C``, whose profile is the closed-form GDP curve, so the
    noise is the closed form above and the one search is :func:`dputils.curves.gdp_mu`'s certified bisection
    (:func:`dputils.numerics.bisect_monotone`, 1e-14 relative, on the side that meets (epsilon, delta)):
    ``calibrate``'s Brent search stops at 1e-12 relative at best and would move the chapter's numbers."""
    epsilon = check_positive("epsilon", epsilon)
    return tree_sensitivity(T, clip) / gdp_mu(epsilon, check_delta(delta))


class TreeAggregator:
    """Streaming binary-tree aggregation (eq. T1): ``add(x_t)`` returns the noisy prefix sum ``s_t``.

    Keeps the stack of the nodes of the current prefix decomposition (at most ``floor(log2 t) + 1``
    vectors, their clean and noisy sums). When leaf t arrives, the nodes of the stack that it closes
    (``log2 lowbit(t)`` of them) are merged *on their clean sums* with the leaf, and the closed node gets fresh
    noise ``N(0, sigma_node^2 I)`` exactly once. After :meth:`add`, ``last_node`` / ``last_node_clean`` /
    ``last_span`` describe the node released at this step. ``sigma_node = 0`` gives exact prefix sums.
    """

    def __init__(
        self,
        dim: int,
        sigma_node: float,
        *,
        generator: torch.Generator | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ):
        self.dim = check_positive_int("dim", dim)
        self.sigma_node = check_nonnegative("sigma_node", sigma_node)
        self.device = torch.device(device)
        self.dtype = dtype
        self.generator = generator
        self.t = 0
        self._stack: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # (level, clean, noisy)
        self.last_node: torch.Tensor | None = None
        self.last_node_clean: torch.Tensor | None = None
        self.last_span: tuple[int, int] | None = None

    def add(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x, dtype=self.dtype, device=self.device).reshape(-1)
        if x.numel() != self.dim:
            raise DPValueError(f"leaf must have {self.dim} entries, got {x.numel()}")
        self.t += 1
        level, clean = 0, x.clone()
        while self._stack and self._stack[-1][0] == level:
            _, c, _ = self._stack.pop()
            clean = c + clean  # left sibling's clean sum + this subtree
            level += 1
        if self.sigma_node > 0:
            z = torch.randn(self.dim, generator=self.generator, device=self.device, dtype=self.dtype)
            noisy = clean + self.sigma_node * z
        else:
            noisy = clean.clone()
        self._stack.append((level, clean, noisy))
        self.last_node, self.last_node_clean = noisy, clean
        self.last_span = node_span(self.t)
        if (1 << level) != self.last_span[1] - self.last_span[0] + 1:  # pragma: no cover - internal invariant
            raise AssertionError("tree aggregation: node length and level disagree")
        return self.prefix()

    def prefix(self) -> torch.Tensor:
        """``s_t`` = sum of the noisy nodes of the current decomposition of [1, t]."""
        if not self._stack:
            return torch.zeros(self.dim, dtype=self.dtype, device=self.device)
        out = self._stack[0][2].clone()
        for _, _, nz in self._stack[1:]:
            out += nz
        return out


# DP-FTRL training ------------------------------------------------------------------------------------
@dataclass
class FTRLConfig:
    """Single-pass DP-FTRL: ``steps`` leaves of ``batch_size`` examples, clip C, per-node noise std sigma_node."""

    steps: int = 128  # T (number of leaves)
    batch_size: int = 32  # B
    clip: float = 1.0  # C
    sigma_node: float = 1.0  # absolute per-node noise std (the paper's sigma_node at C = 1)
    lr: float = 0.5  # eta in theta_t = theta_0 - eta s_t / B  (eq. T5)
    device: str = "auto"
    seed: int = 0
    microbatch: int = 0  # clipped gradients of the leaf in chunks of this many rows (0 = the whole leaf at once)
    grad_mode: str = "auto"  # auto | ghost | vmap: how the leaf is computed (module docstring)
    history: bool = True  # evaluate train (and test) loss and accuracy at the end (and every eval_every steps)

    def validate(self, n: int) -> None:
        check_positive_int("steps", self.steps)
        check_positive_int("batch_size", self.batch_size)
        check_positive("clip", self.clip)
        check_nonnegative("sigma_node", self.sigma_node)
        check_positive("lr", self.lr)
        check_nonnegative_int("microbatch", self.microbatch)
        check_choice("grad_mode", self.grad_mode, GRAD_MODES)
        if n < self.steps * self.batch_size:
            raise DPValueError(
                f"single pass needs steps * batch_size <= n = {n}, got "
                f"{self.steps} * {self.batch_size} = {self.steps * self.batch_size}"
            )


@dataclass
class FTRLStep:
    """What the hooks see at step ``t`` (1-based leaf index)."""

    t: int
    indices: torch.Tensor  # the leaf's example indices
    params: torch.Tensor  # flat theta_{t-1} at which the leaf's gradients are taken
    data_sum: torch.Tensor | None = None  # clipped gradients of the data examples, summed (no extras)
    leaf: torch.Tensor | None = None  # x_t = data_sum + clipped extra gradients
    node: torch.Tensor | None = None  # nu_t, the noisy node released at this step
    span: tuple[int, int] | None = None  # leaves of nu_t
    prefix: torch.Tensor | None = None  # s_t


@dataclass
class FTRLResult:
    """The result of :func:`train_ftrl`: the trained model, the evaluation history, the number of steps, the
    configuration, the wall time and the clipped-sum path that ran (``"ghost"`` or ``"vmap"``)."""

    model: nn.Module
    history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    config: FTRLConfig | None = None
    seconds: float = 0.0
    grad_mode: str = ""  # the path that ran: "ghost" or "vmap"

    @property
    def final(self) -> dict[str, float]:
        return self.history[-1] if self.history else {}


def _leaf_sum(
    model, p, X, y, idx: torch.Tensor, C: float, microbatch: int, mode: str, w: torch.Tensor, bufs: dict | None = None
) -> torch.Tensor:
    """``sum_{i in idx} [grad f(p, x_i)]_C`` (flat), in chunks of at most ``microbatch`` rows (0: all at once): by
    :func:`dputils.training.fastgrad.clipped_group_sum` (``mode="ghost"``, no per-example gradient is formed) or by
    clipping the rows of :func:`dputils.training.per_sample_gradients` (``"vmap"``)."""
    if mode == "ghost":
        return _ghost_sum(model, p, X, y, idx, 1, C, microbatch, w, bufs)
    if not microbatch or idx.numel() <= microbatch:
        return clip_rows(per_sample_gradients(model, p, X[idx], y[idx]), C).sum(0)
    U = torch.zeros_like(w)
    for chunk in torch.split(idx, int(microbatch)):
        U += clip_rows(per_sample_gradients(model, p, X[chunk], y[chunk]), C).sum(0)
    return U


def train_ftrl(
    model: nn.Module,
    X: np.ndarray | torch.Tensor,
    y: np.ndarray | torch.Tensor,
    config: FTRLConfig,
    X_test: Any = None,
    y_test: Any = None,
    extra_gradients: Callable[[FTRLStep], torch.Tensor | None] | None = None,
    on_step: Callable[[FTRLStep], None] | None = None,
    progress: bool = False,
    eval_every: int = 0,
) -> FTRLResult:
    """Single-pass DP-FTRL (eq. T5) with tree-aggregated noise (eq. T1) on ``model`` (modified in place).

    The leaves are consecutive blocks of ``batch_size`` examples of one seeded permutation (each example is
    used at most once). The leaf is the sum of the examples' cross-entropy gradients clipped at C, by the path
    ``config.grad_mode`` selects (:func:`dputils.training.resolve_grad_mode`; ``result.grad_mode`` says which ran).
    Hooks, as in :func:`dputils.training.train`: ``extra_gradients(step)``
    may return extra per-example gradients (k, D), clipped and added to the leaf (canaries);
    ``on_step(step)`` sees the released node and prefix sum. Privacy: :func:`tree_epsilon` (eq. T4).
    ``eval_every > 0`` records train/test metrics every that many steps (always at the end, unless
    ``config.history`` is False)."""
    n = len(X)
    config.validate(n)
    device, gen, noise_gen, X, y, X_test, y_test, params = setup_run(model, X, y, X_test, y_test, config)
    w0 = flatten_params(params)
    w = w0.clone()
    D = w.numel()
    T, B, C = config.steps, config.batch_size, float(config.clip)
    tree = TreeAggregator(D, config.sigma_node * 1.0, generator=noise_gen, device=device, dtype=w.dtype)
    order = torch.randperm(n, generator=gen)[: T * B].to(device)
    mode = resolve_grad_mode(model, config)
    result = FTRLResult(model=model, config=config, grad_mode=mode)
    # without hooks nothing sees a leaf after the tree has added it (add copies): the leaf's buffers are reused
    bufs = {} if on_step is None and extra_gradients is None else None

    def record(t: int) -> None:
        with torch.no_grad():
            named = dict(model.named_parameters())
            for k, v in unflatten_params(w, params).items():
                named[k].copy_(v)
        if not config.history:
            return
        rec = {"step": t}
        rec.update({f"train_{k}": v for k, v in evaluate(model, X, y).items()})
        if X_test is not None:
            rec.update({f"test_{k}": v for k, v in evaluate(model, X_test, y_test).items()})
        result.history.append(rec)

    it = range(1, T + 1)
    if progress:
        from tqdm.std import tqdm  # plain bar: honours TQDM_DISABLE, no widget warning in the book

        it = tqdm(it, desc=f"DP-FTRL (sigma_node={config.sigma_node:.3g})", unit="step")
    t0 = time.perf_counter()
    for t in it:
        idx = order[(t - 1) * B : t * B]
        p = unflatten_params(w, params)
        data_sum = _leaf_sum(model, p, X, y, idx, C, config.microbatch, mode, w, bufs)
        step = FTRLStep(t=t, indices=idx, params=w, data_sum=data_sum)
        leaf = data_sum
        if extra_gradients is not None:
            extra = extra_gradients(step)
            if extra is not None:
                extra = torch.as_tensor(extra, dtype=w.dtype, device=device).reshape(-1, D)
                if extra.shape[0]:
                    leaf = data_sum + clip_rows(extra, C).sum(0)
        s_t = tree.add(leaf)
        step.leaf, step.node, step.span, step.prefix = leaf, tree.last_node, tree.last_span, s_t
        if on_step is not None:
            on_step(step)
        w = w0 - (config.lr / B) * s_t  # eq. (T5)
        if eval_every and t % eval_every == 0 and t != T:
            record(t)
    record(T)
    if device.type == "cuda":
        torch.cuda.synchronize()
    result.seconds = time.perf_counter() - t0
    result.steps = T
    return result
