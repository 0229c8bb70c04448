"""A one-run white-box audit of a user's own Opacus training ({cite}`gauss_audit`, Sec. 5.1; issue 27, item 1).

:class:`OpacusCanaryAudit` attaches to the optimizer that ``PrivacyEngine.make_private`` returns, plants ``m``
Dirac gradient canaries (or ``m`` input-space canaries: below), records their scores while the user trains as
usual, and at the end audits the scores
with the package's Gaussian auditor (:class:`dputils.audit.CanaryScoreAuditor`, both directions, 95% confidence
by default) next to the epsilon of the engine's accountant.

The canaries (as in :mod:`dputils.audit.whitebox`, the book's white-box chapter). Canary j owns one coordinate
``k_j`` of the flattened trainable parameters (distinct coordinates, drawn at random, so the canaries are exactly
orthogonal); it is IN with probability 1/2. At every logical step each IN canary joins the Poisson batch
independently with probability ``q`` (the data loader's sample rate, the accountant's ``sample_rate``): its
per-sample gradient ``g_j = a C e_{k_j}`` (``C = max_grad_norm``, ``a = canary_scale >= 1``) is appended to the
per-sample gradients ``p.grad_sample`` *before* the optimizer's ``pre_step``, so it goes through Opacus's own
clipping (to norm ``C / (1 + 1e-6 / (a C))``, at most C), summation and noise ``N(0, (sigma C)^2 I)``. The
coordinates, the IN/OUT coins and the per-step inclusion coins come from the audit's own generators (seeded by
``seed``), independent of the data, of the model and of Opacus's noise: the independence the chapter's Model 1
assumes.

The observation (Definition 1 of the paper, repository instantiation) of canary j at step t is the released
noisy sum's coordinate ``X_t = Ubar_t[k_j]``: Opacus's privatised gradient ``p.grad`` after ``pre_step``, times
``expected_batch_size * accumulated_iterations`` when ``loss_reduction="mean"`` (undoing ``scale_grad``), so that
the noise on it has standard deviation ``sigma C``. It is recorded for IN and OUT canaries alike; the score is
``S_j = T^{-1/2} sum_t X_t`` (Definition 2). The released gradient, not the parameter change, is observed: the
white-box threat model of the paper sees ``Ubar_t``, and whatever the optimizer (momentum, Adam) does with it is
post-processing. Under Model 1 (Proposition 1) ``E[S(IN)] - E[S(OUT)] = sqrt(T) q C`` and ``S(OUT)`` has
standard deviation ``sigma C``; a run whose noise is smaller than claimed, or whose clipping lets a canary
through with a norm above C (``canary_scale > 1`` makes that visible), shifts the IN scores further and the
auditor's lower bound above the accountant's epsilon.

Validity. The lower bound is the (1 - alpha) bound of Algorithm 1 (Proposition 2) on the epsilon of the Gaussian
pair fitted to the scores; the pair's epsilon is at most the mechanism's (post-processing of the transcript) when
the scores follow Model 1, which needs the canaries independent of the rest (above) and a model with room for
them: at least ``params_per_canary`` (default 10, the chapter's :func:`dputils.audit.whitebox.fit_whitebox_sizes`)
trainable parameters per canary. The ``"gauss"`` ellipsoid is asymptotic (it under-covers at small m, see the
chapter); ``"gauss-bonferroni"`` is valid at every m and is reported next to it.

Input-space canaries (``canaries=(X, y)``, with ``model`` and ``loss_fn``): canary j is an example
``x*_j = (x_j, y_j)`` (e.g. :func:`dputils.audit.make_input_canaries`: mislabeled or out-of-distribution), IN with
probability 1/2; an IN canary joins each logical batch with probability q, and its per-sample gradient at the
current parameters, ``grad l(theta_{t-1}; x*_j)`` (computed with ``torch.func`` on the wrapped module, Opacus's
hooks paused), is appended like the Dirac rows, so Opacus clips and noises it as it would the example's own
gradient: the example is in the Poisson batch. The observation is Definition 1 literally (as in
:mod:`dputils.audit.input_canary`): ``X_t = <u_t, Ubar_t>`` with ``u_t`` the unit direction of the canary's
gradient at ``theta_{t-1}`` (a fixed unit vector when that gradient is 0), for IN and OUT canaries alike; the
contribution of a sampled IN canary is ``||clip_C(g)|| <= C``, the Model-1 shift only when its gradient saturates
the clip norm (``details["saturation"]`` reports the mean of ``min(1, ||g|| / C)``). The canaries of one kind share
directions and project on the data's gradients: both groups widen, and the scores of different canaries are
dependent, so Model 1's independence holds only approximately (the chapter measures input canaries certifying a
small fraction of the accountant's epsilon). ``background`` centres the observation as the chapter does.

Supported: Opacus's ``DPOptimizer`` (flat clipping, one process, ``grad_sample_mode`` ``"hooks"``), Poisson
sampling (``poisson_sampling=True``, a ``DPDataLoader``), virtual steps (``BatchMemoryManager``: canaries join the
last physical batch of each logical step). Not supported: per-layer or adaptive clipping, ghost clipping (no
per-sample gradients to append to), distributed optimizers; input canaries need a model ``torch.func`` can call
(no buffers updated in forward, e.g. no batch norm, which Opacus refuses anyway).
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..audit.gauss import AuditResult
from ..audit.methods import CanaryScoreAuditor
from ..audit.whitebox import ScoreSums
from ..errors import DPValueError, check_delta, check_positive, check_positive_int, check_probability

__all__ = ["OpacusAuditReport", "OpacusCanaryAudit"]


@dataclass
class OpacusAuditReport(ScoreSums):
    """The outcome of :meth:`OpacusCanaryAudit.report`.

    ``epsilon_lower`` is the (1 - alpha) empirical lower bound of ``method``; ``epsilon_accountant`` the engine
    accountant's epsilon at ``delta`` (an upper bound for ``dputils-pld`` and ``rdp``); ``flagged`` is True when
    the lower bound exceeds it (the run is not as private as accounted, with confidence 1 - alpha under Model 1).
    ``bounds`` holds every method asked for; ``in_sums``/``out_sums`` the raw scores ``sum_t X_t``.
    """

    epsilon_lower: float
    epsilon_accountant: float
    method: str
    alpha: float
    delta: float
    bounds: dict[str, float]
    audit: AuditResult
    in_sums: np.ndarray
    out_sums: np.ndarray
    in_counts: np.ndarray  # steps each IN canary was sampled in (Binomial(T, q))
    T: int
    q: float
    clip: float
    noise_multiplier: float
    accountant: str
    accountant_steps: int  # steps the accountant has recorded (T when the audit was attached before training)
    n_params: int
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def flagged(self) -> bool:
        """True when the empirical lower bound is above the accountant's epsilon."""
        return self.epsilon_lower > self.epsilon_accountant

    @property
    def expected_shift(self) -> float:
        """Model-1 mean difference of the raw sums, IN minus OUT: ``q C T``."""
        return self.q * self.clip * self.T

    def __str__(self) -> str:
        verdict = "FLAGGED: above the accountant" if self.flagged else "consistent with the accountant"
        return (
            f"one-run audit ({self.method}, {100 * (1 - self.alpha):g}% confidence, delta={self.delta:g}, "
            f"{self.audit.n_in} IN / {self.audit.n_out} OUT canaries, T={self.T}): epsilon >= "
            f"{self.epsilon_lower:.3f}; accountant {self.accountant!r}: epsilon <= "
            f"{self.epsilon_accountant:.3f} ({verdict})"
        )


def _check_optimizer(optimizer: Any) -> None:
    from opacus.optimizers import DPOptimizer

    if not isinstance(optimizer, DPOptimizer):
        raise DPValueError(
            f"optimizer must be the DPOptimizer returned by PrivacyEngine.make_private, got {type(optimizer).__name__}"
        )
    if type(optimizer) is not DPOptimizer:
        raise DPValueError(
            f"optimizer {type(optimizer).__name__} is not supported: the audit needs Opacus's "
            "DPOptimizer (flat clipping, one process, grad_sample_mode 'hooks' or 'functorch'); "
            "per-layer, adaptive, ghost and distributed clipping are not"
        )
    if getattr(optimizer, "_dputils_canary_audit", None) is not None:
        raise DPValueError("optimizer already has an OpacusCanaryAudit attached; detach() it first")


class OpacusCanaryAudit:
    """Dirac gradient canaries in an Opacus training loop, and the one-run Gaussian audit of their scores.

    Attach after ``PrivacyEngine.make_private`` and before training; train as usual (``optimizer.step()``);
    then :meth:`report`. See the module docstring for the canaries, the scores and the validity conditions.

    Args:
        optimizer: the ``DPOptimizer`` from ``make_private``.
        data_loader: its ``DPDataLoader`` (Poisson sampling); its ``sample_rate`` is the canaries' q. Or give
            ``sample_rate`` instead.
        m: number of canaries (>= 4; at most ``n_params / params_per_canary``).
        engine: the ``PrivacyEngine`` (its accountant gives the epsilon the audit is compared with); or give
            ``accountant``.
        p_in: probability that a canary is IN (the paper: 1/2).
        canary_scale: the canary gradient's norm in units of ``max_grad_norm`` (>= 1). Correct clipping brings it
            to ``max_grad_norm``, so a correct run does not depend on it; a clipping that lets more through shows.
        params_per_canary: the least number of trainable parameters per canary (the chapter's 10).
        seed: seed of the canary coordinates, the IN/OUT coins and the inclusion coins.
        canaries: ``(X, y)`` of m input-space canaries (instead of ``m`` Dirac canaries), with ``model`` (the
            ``GradSampleModule`` from ``make_private``) and ``loss_fn(output, target)`` (the training loss, mean
            over the batch, e.g. ``torch.nn.functional.cross_entropy``); ``canary_scale`` and
            ``params_per_canary`` are for Dirac canaries only.
        background: input canaries only: ``(X, y)``, the whole training set (without canaries). When given, the
            observation is centred as in the chapter: ``X_t = <u_t, Ubar_t - q G_D(theta_{t-1})>`` with
            ``G_D`` the sum of the training examples' clipped gradients at ``theta_{t-1}`` (known data and the
            released iterate: post-processing); it removes the data's mean drift along ``u_t`` at the cost of
            the whole set's per-sample gradients at every step.
    """

    def __init__(
        self,
        optimizer: Any,
        data_loader: Any = None,
        *,
        m: int | None = None,
        engine: Any = None,
        accountant: Any = None,
        sample_rate: float | None = None,
        p_in: float = 0.5,
        canary_scale: float = 10.0,
        params_per_canary: float = 10.0,
        seed: int = 0,
        canaries: tuple[Any, Any] | None = None,
        model: Any = None,
        loss_fn: Any = None,
        background: tuple[Any, Any] | None = None,
    ) -> None:
        _check_optimizer(optimizer)
        self.kind = "dirac" if canaries is None else "input"
        self.model = model
        self.background = None
        if self.kind == "input":
            m = self._setup_inputs(canaries, model, loss_fn, m)
            self.background = None if background is None else self._as_pair("background", background)
        elif model is not None or loss_fn is not None or background is not None:
            raise DPValueError(
                "model, loss_fn and background are for input canaries (canaries=(X, y)); Dirac "
                "canaries need none of them"
            )
        elif m is None:
            raise DPValueError("give m (the number of Dirac canaries) or canaries=(X, y) (input canaries)")
        m = check_positive_int("m", m)
        if m < 4:
            raise DPValueError(f"m must be >= 4 (the auditor needs IN and OUT canaries), got {m}")
        p_in = check_probability("p_in", p_in, allow_zero=False, allow_one=False)
        self.canary_scale = check_positive("canary_scale", canary_scale)
        if self.canary_scale < 1:
            raise DPValueError(
                f"canary_scale must be >= 1 (a canary below the clipping norm is a weaker audit), got {canary_scale}"
            )
        r = check_positive("params_per_canary", params_per_canary)
        if r < 1:
            raise DPValueError(f"params_per_canary must be >= 1 (distinct Dirac canaries), got {params_per_canary}")
        if (data_loader is None) == (sample_rate is None):
            raise DPValueError("give exactly one of data_loader (Opacus's DPDataLoader) and sample_rate")
        if data_loader is not None:
            from opacus.data_loader import DPDataLoader

            if not isinstance(data_loader, DPDataLoader):
                raise DPValueError(
                    f"data_loader must be the DPDataLoader of make_private(poisson_sampling=True) "
                    f"(the canaries are Poisson-sampled as the accountant assumes), got "
                    f"{type(data_loader).__name__}"
                )
            sample_rate = data_loader.sample_rate
        self.q = check_probability("sample_rate", sample_rate, allow_zero=False)
        if engine is not None and accountant is not None:
            raise DPValueError("give engine or accountant, not both")
        self.accountant = engine.accountant if engine is not None else accountant
        if self.accountant is None:
            raise DPValueError("give engine (the PrivacyEngine) or accountant: the audit compares with its epsilon")
        self.seed = int(seed)

        self.optimizer = optimizer
        self.params = list(optimizer.params)
        sizes = [p.numel() for p in self.params]
        D = int(sum(sizes))
        need = math.ceil(r * m)
        if self.kind == "dirac" and D < need:
            raise DPValueError(
                f"m: the model has {D} trainable parameters, room for {int(D // r)} canaries at "
                f"{r:g} parameters each (the chapter's rule), got m = {m}"
            )
        self.m, self.n_params = m, D
        rng = np.random.default_rng([self.seed, 7])
        # Dirac canaries: distinct coordinates (input canaries draw none, the same IN/OUT coins follow)
        coords = rng.choice(D, size=m, replace=False) if self.kind == "dirac" else np.zeros(0, dtype=np.int64)
        is_in = rng.random(m) < p_in
        if is_in.all() or not is_in.any():  # both groups are needed (probability 2^(1-m))
            is_in[0], is_in[1] = True, False
        self.coords, self.is_in = coords, is_in
        self.n_in = int(is_in.sum())
        # canary j -> (parameter index, flat offset inside it)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        pidx = np.searchsorted(starts, coords, side="right") - 1
        self._by_param = []  # (param index, canary indices, offsets) for params holding canaries
        for i in np.unique(pidx):
            sel = np.flatnonzero(pidx == i)
            self._by_param.append((int(i), sel, coords[sel] - starts[i]))
        in_idx = np.flatnonzero(is_in) if self.kind == "dirac" else np.zeros(0, dtype=np.int64)
        self._in_param = pidx[in_idx]
        self._in_offset = coords[in_idx] - starts[pidx[in_idx]]
        self._gen = torch.Generator(device="cpu").manual_seed(self.seed + 17)
        self._saturation = [0.0, 0]  # sum of min(1, ||g|| / C) over IN canaries' inclusions, and their number
        self._G: torch.Tensor | None = None  # input canaries: this step's (m, D) gradients
        self._center: torch.Tensor | None = None  # and q G_D(theta_{t-1}) when background is given
        self.sums = np.zeros(m)
        self.in_counts = np.zeros(self.n_in, dtype=np.int64)
        self.T = 0
        self.accountant_steps_at_start = self._accountant_steps()
        self._own_pre_step = vars(optimizer).get("pre_step")  # an instance attribute to restore, if any
        self._orig_pre_step = optimizer.pre_step
        optimizer.pre_step = self._pre_step
        optimizer._dputils_canary_audit = self

    def _accountant_steps(self) -> int:
        """Steps the accountant has recorded: the sum of the step counts of its ``history`` of
        ``(noise_multiplier, sample_rate, steps)`` (Opacus's ``len`` counts history entries), or -1."""
        try:
            return int(sum(int(h[2]) for h in self.accountant.history))
        except (AttributeError, TypeError, ValueError, IndexError):  # no such history
            return -1

    def _setup_inputs(self, canaries, model, loss_fn, m) -> int:
        from opacus import GradSampleModule

        self.model = model
        X, y = self._as_pair("canaries", canaries)
        if m is not None and int(m) != X.shape[0]:
            raise DPValueError(f"m ({m}) differs from the number of input canaries ({X.shape[0]}); leave m out")
        if not isinstance(model, GradSampleModule):
            raise DPValueError(
                f"model must be the GradSampleModule returned by make_private (input canaries need it), "
                f"got {type(model).__name__}"
            )
        if not callable(loss_fn):
            raise DPValueError("loss_fn(output, target) must be given for input canaries")
        self.loss_fn = loss_fn
        self.X_canary, self.y_canary = X, y
        return int(X.shape[0])

    def _as_pair(self, name: str, pair: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise DPValueError(f"{name} must be a pair (X, y) of inputs and targets")
        X, y = (torch.as_tensor(np.asarray(a)) if not isinstance(a, torch.Tensor) else a for a in pair)
        if X.ndim < 1 or y.shape[:1] != X.shape[:1] or X.shape[0] < 1:
            raise DPValueError(
                f"{name}: X and y must have the same first dimension, got {tuple(X.shape)} and {tuple(y.shape)}"
            )
        if X.is_floating_point() and self.model is not None:
            X = X.to(next(iter(self.model.parameters())).dtype)
        return X, y

    def _canary_gradients(self, X: torch.Tensor | None = None, y: torch.Tensor | None = None) -> torch.Tensor:
        """Per-example gradients at the current parameters, flattened in the optimizer's order: (rows, D); by
        default those of the m input canaries."""
        from torch.func import functional_call, grad, vmap

        inner = self.model._module
        names = {id(p): n for n, p in inner.named_parameters()}
        try:
            keys = [names[id(p)] for p in self.params]
        except KeyError:
            raise DPValueError(
                "the optimizer holds a parameter that is not the model's: pass the model given to make_private"
            ) from None
        frozen = {n: p.detach() for n, p in inner.named_parameters() if id(p) not in {id(q) for q in self.params}}
        dev = self.params[0].device

        def loss_one(theta, x, y):
            out = functional_call(inner, {**frozen, **dict(zip(keys, theta, strict=True))}, (x.unsqueeze(0),))
            return self.loss_fn(out, y.unsqueeze(0))

        theta = tuple(p.detach() for p in self.params)
        # Opacus's module hooks (activation capture, full backward hooks) are paused: torch.func cannot run the
        # latter, and the canaries' gradients must not be written into grad_sample
        hook_attrs = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
        saved = [(mod, {a: getattr(mod, a) for a in hook_attrs}) for mod in inner.modules()]
        try:
            for mod, _ in saved:
                for a in hook_attrs:
                    setattr(mod, a, OrderedDict())
            if X is None:
                X, y = self.X_canary, self.y_canary
            g = vmap(grad(loss_one), in_dims=(None, 0, 0))(theta, X.to(dev), y.to(dev))
        finally:
            for mod, hooks in saved:
                for a, h in hooks.items():
                    setattr(mod, a, h)
        return torch.cat([t.reshape(t.shape[0], -1) for t in g], dim=1).detach()

    # --- the hook -------------------------------------------------------------------------------------------

    def _inject(self) -> None:
        """Append this step's sampled IN canaries as extra per-sample gradients (rows) to every parameter."""
        opt = self.optimizer
        hit = (torch.rand(self.n_in, generator=self._gen) < self.q).numpy()
        self.in_counts += hit
        k = int(hit.sum())
        norm = self.canary_scale * float(opt.max_grad_norm)
        rows_in = None
        if self.kind == "input":
            self._G = self._canary_gradients()
            if self.background is not None:  # q G_D(theta_{t-1}): the data's expected clipped-gradient sum
                C = float(opt.max_grad_norm)
                center = torch.zeros(self.n_params, dtype=self._G.dtype, device=self._G.device)
                Xb, yb = self.background
                for a in range(0, Xb.shape[0], 1024):
                    g = self._canary_gradients(Xb[a : a + 1024], yb[a : a + 1024])
                    g = g * (C / (g.norm(dim=1, keepdim=True) + 1e-6)).clamp(max=1.0)  # Opacus's clipping
                    center += g.sum(0)
                self._center = self.q * center
            in_idx = torch.as_tensor(np.flatnonzero(self.is_in)[hit], device=self._G.device)
            rows_in = self._G[in_idx]
            if k:
                n = rows_in.norm(dim=1) / float(opt.max_grad_norm)
                self._saturation[0] += float(n.clamp(max=1.0).sum())
                self._saturation[1] += k
        start = 0
        for i, p in enumerate(self.params):
            gs = p.grad_sample
            last = gs[-1] if isinstance(gs, list) else gs
            if last is None:
                raise DPValueError(
                    "a parameter has no per-sample gradient at optimizer.step(): the audit needs "
                    "Opacus's GradSampleModule (grad_sample_mode 'hooks' or 'functorch')"
                )
            if rows_in is not None:
                rows = rows_in[:, start : start + p.numel()].reshape(k, *p.shape).to(last.dtype)
                start += p.numel()
            else:
                rows = torch.zeros((k, *p.shape), dtype=last.dtype, device=last.device)
            if k and rows_in is None:
                sel = np.flatnonzero(self._in_param[hit] == i)
                if sel.size:
                    flat = rows.view(k, -1)
                    flat[torch.as_tensor(sel), torch.as_tensor(self._in_offset[hit][sel])] = norm
            new = torch.cat([last, rows], dim=0)
            if isinstance(gs, list):
                gs[-1] = new
            else:
                p.grad_sample = new

    def _record(self, scale: float) -> None:
        if self.kind == "input":  # Definition 1: X_t = <u_t, Ubar_t>, u_t the canary gradient's direction
            ubar = torch.cat([p.grad.detach().reshape(-1) for p in self.params]).to(self._G.dtype) * scale
            if self._center is not None:
                ubar = ubar - self._center
            norms = self._G.norm(dim=1, keepdim=True)
            u = torch.where(norms > 0, self._G / norms.clamp(min=1e-30), torch.zeros_like(self._G))
            u[(norms[:, 0] == 0), 0] = 1.0  # a fixed unit vector u_bar where the gradient vanishes
            self.sums += (u @ ubar).double().cpu().numpy()
            self._G = self._center = None
            return
        for i, sel, offs in self._by_param:
            g = self.params[i].grad.detach().reshape(-1)[torch.as_tensor(offs, device=self.params[i].grad.device)]
            self.sums[sel] += g.double().cpu().numpy() * scale

    def _pre_step(self, closure=None):
        opt = self.optimizer
        if opt._check_skip_next_step(pop_next=False) or not self.params:
            return self._orig_pre_step(closure)  # a physical batch inside a logical step: no noise released yet
        self._inject()
        scale = float(opt.expected_batch_size * opt.accumulated_iterations) if opt.loss_reduction == "mean" else 1.0
        released = self._orig_pre_step(closure)
        if released:
            self._record(scale)
            self.T += 1
        return released

    def detach(self) -> None:
        """Stop planting canaries (the optimizer's own ``pre_step`` is restored); the scores so far are kept."""
        if getattr(self.optimizer, "_dputils_canary_audit", None) is self:
            if self._own_pre_step is None:
                del self.optimizer.pre_step  # the class's method again
            else:
                self.optimizer.pre_step = self._own_pre_step
            self.optimizer._dputils_canary_audit = None

    # --- the audit ------------------------------------------------------------------------------------------

    @property
    def in_sums(self) -> np.ndarray:
        return self.sums[self.is_in].copy()

    @property
    def out_sums(self) -> np.ndarray:
        return self.sums[~self.is_in].copy()

    def report(
        self,
        delta: float = 1e-5,
        alpha: float = 0.05,
        *,
        method: str = "gauss",
        methods: tuple[str, ...] = ("gauss", "gauss-bonferroni"),
        n_bootstrap: int = 2000,
    ) -> OpacusAuditReport:
        """Audit the scores so far: the (1 - alpha) lower bound of ``method`` (and of every name in ``methods``,
        all through :class:`dputils.audit.CanaryScoreAuditor`: both directions of the Gaussian pair) at ``delta``,
        next to the accountant's ``get_epsilon(delta)``."""
        delta = check_delta(delta)
        alpha = check_probability("alpha", alpha, allow_one=False)
        if self.T < 1:
            raise DPValueError("no step was taken with the audit attached: train (optimizer.step()) first")
        steps = self._accountant_steps()
        if steps >= 0 and steps - self.accountant_steps_at_start != self.T:
            warnings.warn(
                f"the accountant recorded {steps - self.accountant_steps_at_start} steps while the audit saw {self.T}",
                stacklevel=2,
            )
        eps_acc = float(self.accountant.get_epsilon(delta))
        s = 1.0 / math.sqrt(self.T)
        auditor = CanaryScoreAuditor(self.in_sums * s, self.out_sums * s)
        names = tuple(dict.fromkeys((method, *methods)))
        results = {name: auditor.audit(name, alpha, delta, n_bootstrap=n_bootstrap, seed=self.seed) for name in names}
        opt = self.optimizer
        return OpacusAuditReport(
            epsilon_lower=float(results[method].epsilon_lower),
            epsilon_accountant=eps_acc,
            method=method,
            alpha=alpha,
            delta=delta,
            bounds={k: float(v.epsilon_lower) for k, v in results.items()},
            audit=results[method],
            in_sums=self.in_sums,
            out_sums=self.out_sums,
            in_counts=self.in_counts.copy(),
            T=self.T,
            q=self.q,
            clip=float(opt.max_grad_norm),
            noise_multiplier=float(opt.noise_multiplier),
            accountant=str(getattr(self.accountant, "mechanism", lambda: type(self.accountant).__name__)()),
            accountant_steps=steps,
            n_params=self.n_params,
            details={
                "kind": self.kind,
                "centred": self.background is not None,
                "canary_scale": self.canary_scale if self.kind == "dirac" else None,
                "m": self.m,
                "seed": self.seed,
                "saturation": (self._saturation[0] / self._saturation[1] if self._saturation[1] else None)
                if self.kind == "input"
                else 1.0,
            },
        )
