"""One-run audit of DP-SGD with input-space canaries ({cite}`gauss_audit`, Definitions 1-2; issue item 3).

Unlike Dirac gradient canaries, an input-space canary is an *example* ``x*_j = (x_j, y_j)`` that joins the
training set when IN (probability 1/2) and is then Poisson-sampled like every other record (rate
``q = B / n``, n counting the IN canaries). Two kinds (:func:`make_input_canaries`):

* ``"mislabeled"``: a fresh point of the data distribution with a wrong label (uniform over the other classes);
* ``"ood"``: an out-of-distribution input ``r u`` (u uniform on the sphere, ``r = ood_scale sqrt(dim)``, far
  from the data) with a uniform random label.

Scores.

* ``gradient`` (white box; Definition 1 of the note): at step t the auditor, who sees ``theta_{t-1}``,
  computes the canary's clipped gradient ``c_t = clip_C(grad l(theta_{t-1}; x*))`` and its direction
  ``u_t = c_t / ||c_t||`` (a fixed unit vector ``u_bar`` when ``c_t = 0``, pitfall 16), and observes
  ``X_t = <u_t, Ubar_t>`` on the released noisy sum ``Ubar_t``. ``u_t`` depends only on ``theta_{t-1}``, so
  ``<u_t, Z_t> ~ N(0, sigma^2 C^2)`` exactly; the score is ``S_T = T^{-1/2} sum_t X_t`` (Definition 2). When IN
  and sampled the canary contributes ``||c_t|| <= C``: the Model-1 shift ``sqrt(T) q C`` is reached only when
  the canary's gradient saturates the clip norm (pitfall 13); :attr:`InputCanaryRun.saturation` reports
  the mean of ``||c_t|| / C``. Background examples and the *other* canaries also project on ``u_t`` (canaries
  of one kind share directions), which widens both groups; the background's mean can be subtracted
  (``centre=True``, see :func:`run_input_canary_audit`).
* ``loss`` (black box): minus the final model's loss on the canary (IN canaries are fitted a little); not
  Gaussian, so it is audited with the threshold baselines only.

The theoretical epsilon is the PLD upper bound of Poisson-subsampled Gaussian DP-SGD at the run's q, T, sigma
(:func:`dputils.audit.model1.theoretical_epsilon`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import data
from ..errors import DPValueError, check_choice, check_positive, check_positive_int
from .canary import (
    Canaries,
    CanaryConfig,
    CanaryRun,
    CanaryStrategy,
    ScoreSums,
    TrainingData,
    draw_canaries,
    run_canary_audit,
)
from .methods import audit_all, run_method

__all__ = ["KINDS", "InputCanaryRun", "make_input_canaries", "run_input_canary_audit", "audit_input_canaries"]

KINDS = ("mislabeled", "ood")


def make_input_canaries(
    kind: str, X_fresh, y_fresh, n_classes: int, *, ood_scale: float = 3.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """One canary per row of ``X_fresh`` (fresh points of the data distribution, never trained on, with their
    true labels ``y_fresh``): ``"mislabeled"`` keeps the input and draws a wrong label uniformly from the
    other ``n_classes - 1`` classes; ``"ood"`` replaces the input by ``ood_scale * sqrt(dim) * u`` with u
    uniform on the unit sphere and draws a uniform label. Returns ``(X float32 (m, dim), y int64 (m,))``."""
    check_choice("kind", kind, KINDS)
    n_classes = check_positive_int("n_classes", n_classes)
    if n_classes < 2:
        raise DPValueError(f"n_classes must be >= 2, got {n_classes}")
    ood_scale = check_positive("ood_scale", ood_scale)
    X = np.asarray(X_fresh, dtype=np.float64)
    y = np.asarray(y_fresh)
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] < 1:
        raise DPValueError(f"X_fresh must be (m, dim) and y_fresh (m,), got {X.shape} and {y.shape}")
    m, dim = X.shape
    rng = np.random.default_rng([seed, 23])
    if kind == "mislabeled":
        y_new = (y.astype(np.int64) + rng.integers(1, n_classes, size=m)) % n_classes
        return X.astype(np.float32), y_new.astype(np.int64)
    u = rng.standard_normal((m, dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return ((ood_scale * math.sqrt(dim)) * u).astype(np.float32), rng.integers(0, n_classes, size=m).astype(np.int64)


@dataclass
class InputCanaryRun(ScoreSums):
    """Result of :func:`run_input_canary_audit`. ``*_sums`` are ``sum_t X_t`` (Definition 1), ``*_loss`` final losses."""

    in_sums: np.ndarray
    out_sums: np.ndarray
    in_loss: np.ndarray
    out_loss: np.ndarray
    kind: str
    T: int
    q: float
    sigma: float
    clip: float
    delta: float
    epsilon_theory: float
    accountant: str
    saturation: float  # mean over steps and canaries of ||c_t|| / C (1 = the canaries saturate the clip norm)
    n_params: int
    train_seconds: float
    device: str
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def model1_shift(self) -> float:
        """Model-1 mean difference of the scores if the canaries saturated the clip norm: ``sqrt(T) q C``."""
        return math.sqrt(self.T) * self.q * self.clip


def run_input_canary_audit(
    m: int = 200,
    *,
    kind: str = "mislabeled",
    sigma: float = 1.0,
    clip: float = 1.0,
    epochs: int = 10,
    batch_size: int = 50,
    n_train: int = 1000,
    dim: int = 20,
    n_classes: int = 10,
    hidden: int = 32,
    lr: float = 0.5,
    ood_scale: float = 3.0,
    centre: bool = True,
    delta: float = 1e-5,
    p_in: float = 0.5,
    pld_discretization: float = 1e-3,
    device: str = "auto",
    seed: int = 0,
    progress: bool = True,
) -> InputCanaryRun:
    """Poisson DP-SGD (:func:`dputils.training.train`, individual clipping, noise std ``sigma C``) on
    ``n_train`` blobs plus the IN canaries of ``m`` input-space canaries of ``kind``; returns the white-box
    gradient-aligned sums and the final losses of all canaries (module docstring).
    ``q = batch_size / (n_train + #IN)``, ``T = epochs * round((n_train + #IN) / batch_size)``.

    ``centre=True`` projects ``Ubar_t - q G_D(theta_{t-1})`` instead of ``Ubar_t``, where
    ``G_D = sum_{x in D} clip_C(grad l(theta_{t-1}; x))`` is the clipped-gradient sum of the background data
    (known to the strong adversary of DP, and a function of the released iterate: post-processing). It
    removes the background's mean drift along ``u_t`` (large for mislabeled canaries, whose gradients oppose
    those of their true class); the sampling fluctuation of the background remains."""
    cfg = CanaryConfig.of_call("dpsgd", locals())  # the arguments above, validated
    return run_canary_audit(cfg, _InputDPSGD())


class _InputDPSGD(CanaryStrategy):
    """Input-space canaries in DP-SGD (module docstring): the IN canaries are records of the training set, and
    every canary observes ``X_t = <u_t, Ubar_t>`` along its own clipped gradient's direction."""

    mechanism = "dpsgd"

    def data(self, run: CanaryRun) -> TrainingData:
        cfg, n = run.cfg, run.cfg.n_train
        Xall, yall = data.gaussian_blobs(n + cfg.m, dim=cfg.dim, n_classes=cfg.n_classes, seed=cfg.seed)
        self.Xc, self.yc = make_input_canaries(
            cfg.kind, Xall[n:], yall[n:], cfg.n_classes, ood_scale=cfg.ood_scale, seed=cfg.seed
        )
        return TrainingData(Xall[:n], yall[:n], cfg.dim, cfg.n_classes)

    def canaries(self, run: CanaryRun) -> Canaries:
        return draw_canaries(run.cfg, stream=29)

    def training_set(self, run: CanaryRun):
        # the IN canaries are records of the data set: q and T count them
        is_in = run.is_in
        return np.concatenate([run.data.X, self.Xc[is_in]]), np.concatenate([run.data.y, self.yc[is_in]])

    def start(self, run: CanaryRun) -> None:
        import torch

        dev = run.device
        self.params = {k: v.detach() for k, v in run.model.named_parameters()}
        self.Xc_t = torch.as_tensor(self.Xc, device=dev)
        self.yc_t = torch.as_tensor(self.yc, device=dev)
        self.u_bar = torch.zeros(run.n_params, device=dev)
        self.u_bar[0] = 1.0  # fixed fallback direction for a zero canary gradient
        self.sums = torch.zeros(run.cfg.m, dtype=torch.float64, device=dev)
        self.sat = torch.zeros((), dtype=torch.float64, device=dev)
        self.X_bg = torch.as_tensor(run.data.X, device=dev)
        self.y_bg = torch.as_tensor(run.data.y, device=dev)

    def observe(self, run: CanaryRun, info) -> None:
        import torch

        from ..training import clip_rows, per_sample_gradients
        from ..training.dpsgd import unflatten_params

        clip, model = run.cfg.clip, run.model
        p = unflatten_params(info.params, self.params)
        c = clip_rows(per_sample_gradients(model, p, self.Xc_t, self.yc_t), clip)  # c_t
        norms = c.norm(dim=1, keepdim=True)
        u = torch.where(norms > 0, c / torch.clamp(norms, min=torch.finfo(c.dtype).tiny), self.u_bar)
        released = info.released
        if run.cfg.centre:  # minus the expected background sum q * sum_{x in D} clip_C(grad l(theta_{t-1}; x))
            released = released - run.q * clip_rows(per_sample_gradients(model, p, self.X_bg, self.y_bg), clip).sum(0)
        self.sums.add_((u @ released).double())  # X_t = <u_t, Ubar_t (- centring)> for every canary
        self.sat = self.sat + (norms / clip).mean().double()

    def describe(self, run: CanaryRun) -> str:
        return f"DP-SGD, {run.cfg.kind} input canaries (eps_PLD={run.epsilon:.2f})"

    def record(self, run: CanaryRun) -> InputCanaryRun:
        import torch

        with torch.no_grad():
            logits = run.model(self.Xc_t)
            loss = torch.nn.functional.cross_entropy(logits, self.yc_t, reduction="none").double().cpu().numpy()
        s = self.sums.cpu().numpy()
        if not (np.isfinite(s).all() and np.isfinite(loss).all()):
            raise DPValueError("non-finite canary scores (diverged training: lower lr)")
        in_sums, out_sums = run.split(s)
        in_loss, out_loss = run.split(loss)
        return InputCanaryRun(
            in_sums=in_sums,
            out_sums=out_sums,
            in_loss=in_loss,
            out_loss=out_loss,
            kind=run.cfg.kind,
            T=run.T,
            q=run.q,
            sigma=run.cfg.sigma,
            clip=run.cfg.clip,
            delta=run.cfg.delta,
            epsilon_theory=run.epsilon,
            accountant=run.accountant,
            saturation=float(self.sat) / run.T,
            n_params=run.n_params,
            train_seconds=run.seconds,
            device=run.device_name,
            history=run.result.history,
        )


def audit_input_canaries(
    run: InputCanaryRun,
    alpha: float = 0.05,
    *,
    score: str = "gradient",
    n_bootstrap: int = 2000,
    selection: str = "split",
    seed: int = 0,
) -> dict[str, float]:
    """Lower bounds at ``run.delta``: for ``score="gradient"`` the four auditors of
    :func:`dputils.audit.audit_all` on the Definition-2 scores; for ``score="loss"`` (scores = minus the final
    loss, not Gaussian) the Steinke et al. and f-DP threshold audits only."""

    if not isinstance(run, InputCanaryRun):
        raise DPValueError(f"run must be an InputCanaryRun, got {type(run).__name__}")
    check_choice("score", score, ("gradient", "loss"))
    if score == "gradient":
        return audit_all(
            run.in_scores, run.out_scores, run.delta, alpha, selection=selection, n_bootstrap=n_bootstrap, seed=seed
        )
    return {
        method: run_method(
            method, -run.in_loss, -run.out_loss, run.delta, alpha, selection=selection, seed=seed
        ).epsilon_lower
        for method in ("steinke", "fdp")
    }
