"""A one-run white-box audit of a user's own Opacus training ({cite}`gauss_audit`, Sec. 5.1; issue 27, item 1).

:class:`OpacusCanaryAudit` attaches to the optimizer that ``PrivacyEngine.make_private`` returns, plants ``m``
Dirac gradient canaries, records their scores while the user trains as usual, and at the end audits the scores
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

Supported: Opacus's ``DPOptimizer`` (flat clipping, one process, ``grad_sample_mode`` ``"hooks"`` or
``"functorch"``), Poisson sampling (``poisson_sampling=True``, a ``DPDataLoader``), virtual steps
(``BatchMemoryManager``: canaries join the last physical batch of each logical step). Not supported: per-layer or
adaptive clipping, ghost clipping (no per-sample gradients to append to), distributed optimizers. Input-space
canaries (examples added to a user's dataset) need each canary's gradient at every step (Definition 1), which
the book computes for its own trainer (:mod:`dputils.audit.input_canary`); they are not offered here.
"""

from __future__ import annotations

import math
import warnings
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
        return (f"one-run audit ({self.method}, {100 * (1 - self.alpha):g}% confidence, delta={self.delta:g}, "
                f"{self.audit.n_in} IN / {self.audit.n_out} OUT canaries, T={self.T}): epsilon >= "
                f"{self.epsilon_lower:.3f}; accountant {self.accountant!r}: epsilon <= "
                f"{self.epsilon_accountant:.3f} ({verdict})")


def _check_optimizer(optimizer: Any) -> None:
    from opacus.optimizers import DPOptimizer

    if not isinstance(optimizer, DPOptimizer):
        raise DPValueError(f"optimizer must be the DPOptimizer returned by PrivacyEngine.make_private, got "
                           f"{type(optimizer).__name__}")
    if type(optimizer) is not DPOptimizer:
        raise DPValueError(f"optimizer {type(optimizer).__name__} is not supported: the audit needs Opacus's "
                           "DPOptimizer (flat clipping, one process, grad_sample_mode 'hooks' or 'functorch'); "
                           "per-layer, adaptive, ghost and distributed clipping are not")
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
    """

    def __init__(self, optimizer: Any, data_loader: Any = None, *, m: int, engine: Any = None,
                 accountant: Any = None, sample_rate: float | None = None, p_in: float = 0.5,
                 canary_scale: float = 10.0, params_per_canary: float = 10.0, seed: int = 0) -> None:
        _check_optimizer(optimizer)
        m = check_positive_int("m", m)
        if m < 4:
            raise DPValueError(f"m must be >= 4 (the auditor needs IN and OUT canaries), got {m}")
        p_in = check_probability("p_in", p_in, allow_zero=False, allow_one=False)
        self.canary_scale = check_positive("canary_scale", canary_scale)
        if self.canary_scale < 1:
            raise DPValueError(f"canary_scale must be >= 1 (a canary below the clipping norm is a weaker audit), "
                               f"got {canary_scale}")
        r = check_positive("params_per_canary", params_per_canary)
        if r < 1:
            raise DPValueError(f"params_per_canary must be >= 1 (distinct Dirac canaries), got {params_per_canary}")
        if (data_loader is None) == (sample_rate is None):
            raise DPValueError("give exactly one of data_loader (Opacus's DPDataLoader) and sample_rate")
        if data_loader is not None:
            from opacus.data_loader import DPDataLoader

            if not isinstance(data_loader, DPDataLoader):
                raise DPValueError(f"data_loader must be the DPDataLoader of make_private(poisson_sampling=True) "
                                   f"(the canaries are Poisson-sampled as the accountant assumes), got "
                                   f"{type(data_loader).__name__}")
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
        if D < need:
            raise DPValueError(f"m: the model has {D} trainable parameters, room for {int(D // r)} canaries at "
                               f"{r:g} parameters each (the chapter's rule), got m = {m}")
        self.m, self.n_params = m, D
        rng = np.random.default_rng([self.seed, 7])
        coords = rng.choice(D, size=m, replace=False)
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
        in_idx = np.flatnonzero(is_in)
        self._in_param = pidx[in_idx]
        self._in_offset = coords[in_idx] - starts[pidx[in_idx]]
        self._gen = torch.Generator(device="cpu").manual_seed(self.seed + 17)
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

    # --- the hook -------------------------------------------------------------------------------------------

    def _inject(self) -> None:
        """Append this step's sampled IN canaries as extra per-sample gradients (rows) to every parameter."""
        opt = self.optimizer
        hit = (torch.rand(self.n_in, generator=self._gen) < self.q).numpy()
        self.in_counts += hit
        k = int(hit.sum())
        norm = self.canary_scale * float(opt.max_grad_norm)
        for i, p in enumerate(self.params):
            gs = p.grad_sample
            last = gs[-1] if isinstance(gs, list) else gs
            if last is None:
                raise DPValueError("a parameter has no per-sample gradient at optimizer.step(): the audit needs "
                                   "Opacus's GradSampleModule (grad_sample_mode 'hooks' or 'functorch')")
            rows = torch.zeros((k, *p.shape), dtype=last.dtype, device=last.device)
            if k:
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

    def report(self, delta: float = 1e-5, alpha: float = 0.05, *, method: str = "gauss",
               methods: tuple[str, ...] = ("gauss", "gauss-bonferroni"), n_bootstrap: int = 2000) -> OpacusAuditReport:
        """Audit the scores so far: the (1 - alpha) lower bound of ``method`` (and of every name in ``methods``,
        all through :class:`dputils.audit.CanaryScoreAuditor`: both directions of the Gaussian pair) at ``delta``,
        next to the accountant's ``get_epsilon(delta)``."""
        delta = check_delta(delta)
        alpha = check_probability("alpha", alpha, allow_one=False)
        if self.T < 1:
            raise DPValueError("no step was taken with the audit attached: train (optimizer.step()) first")
        steps = self._accountant_steps()
        if steps >= 0 and steps - self.accountant_steps_at_start != self.T:
            warnings.warn(f"the accountant recorded {steps - self.accountant_steps_at_start} steps while the audit "
                          f"saw {self.T}", stacklevel=2)
        eps_acc = float(self.accountant.get_epsilon(delta))
        s = 1.0 / math.sqrt(self.T)
        auditor = CanaryScoreAuditor(self.in_sums * s, self.out_sums * s)
        names = tuple(dict.fromkeys((method, *methods)))
        results = {name: auditor.audit(name, alpha, delta, n_bootstrap=n_bootstrap, seed=self.seed) for name in names}
        opt = self.optimizer
        return OpacusAuditReport(
            epsilon_lower=float(results[method].epsilon_lower), epsilon_accountant=eps_acc, method=method,
            alpha=alpha, delta=delta, bounds={k: float(v.epsilon_lower) for k, v in results.items()},
            audit=results[method], in_sums=self.in_sums, out_sums=self.out_sums, in_counts=self.in_counts.copy(),
            T=self.T, q=self.q, clip=float(opt.max_grad_norm), noise_multiplier=float(opt.noise_multiplier),
            accountant=str(getattr(self.accountant, "mechanism", lambda: type(self.accountant).__name__)()),
            accountant_steps=steps, n_params=self.n_params,
            details={"canary_scale": self.canary_scale, "m": self.m, "seed": self.seed})
