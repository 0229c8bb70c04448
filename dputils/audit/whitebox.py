"""White-box one-run audit of real DP-SGD training with Dirac gradient canaries ({cite}`gauss_audit`, Sec. 5.1).

Training is :func:`dputils.training.train` with Poisson sampling (rate ``q = batch_size / n_train``),
individual clipping at norm C and noise ``N(0, (C sigma)^2 I)`` (``noise_multiplier_scale = 1``: add/remove
adjacency, the setting of the PLD accountant).  Canary j is a *gradient* ``C e_{k_j}`` on its own parameter
coordinate ``k_j`` (distinct coordinates, so the canaries are exactly orthogonal, the paper's Fig. 4(a));
it is IN with probability 1/2 and, when IN, joins each step's batch independently with probability q
(injected with the ``extra_gradients`` hook; its norm is exactly C, so clipping leaves it unchanged).

Observations and scores (the note's Definitions 1-2, repository instantiation): for a Dirac canary the
unit direction is ``u_t = e_{k_j}`` at every step, so the canary-aligned observation is the ``k_j``-th
coordinate of the released noisy sum, ``X_t = Ubar_t[k_j]`` (before any division by the batch size; the
noise on it has std ``sigma C``), recorded for IN and OUT canaries alike.  The raw score is
``sum_t X_t`` and the normalised score (Definition 2) is ``S_T = sum_t X_t / sqrt(T)``.  Under Model 1
(Proposition 1) ``E[S_T(1)] - E[S_T(0)] = sqrt(T) q C``, i.e. the raw sums differ by ``q C T`` on average;
real training adds, at each canary coordinate, the clipped gradients of the background data (a drift
common to IN and OUT, and extra spread across coordinates).

The scores are audited with the package's auditors (:func:`dputils.audit.audit_all`: Gaussian ellipsoid
and Bonferroni box, Steinke et al., f-DP); the theoretical epsilon is the PLD accountant's upper bound
for ``SubsampledGaussianMechanism(sigma, q)`` composed T times (:func:`dputils.audit.model1.theoretical_epsilon`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import data
from ..accountants.rdp import INTEGER_ORDERS, rdp_to_epsilon, subsampled_gaussian_rdp
from ..errors import DPValueError, check_choice, check_nonnegative_int, check_positive, check_positive_int
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
from .methods import audit_all

__all__ = [
    "WhiteboxRun",
    "run_whitebox_audit",
    "audit_whitebox",
    "WhiteboxSizes",
    "fit_whitebox_sizes",
    "mlp_parameter_count",
    "model1_fit",
]


@dataclass
class WhiteboxRun(ScoreSums):
    """Result of :func:`run_whitebox_audit`. ``in_sums``/``out_sums`` are the raw scores ``sum_t Ubar_t[k_j]``."""

    in_sums: np.ndarray
    out_sums: np.ndarray
    in_counts: np.ndarray  # how many steps each IN canary was sampled in (K_j ~ Binomial(T, q))
    in_coords: np.ndarray
    out_coords: np.ndarray
    T: int
    q: float
    sigma: float
    clip: float
    delta: float
    epsilon_theory: float  # PLD upper bound at delta for the claimed (sigma, q, T)
    accountant: str
    steps_per_second: float
    train_seconds: float
    device: str
    n_params: int
    noise_multiplier_scale: float = 1.0  # actual noise std / (C sigma); 1 for a correct run
    history: list[dict[str, float]] = field(default_factory=list)
    model: str = "mlp"  # the trained network (dputils.training.models)
    data: str = "gaussian-blobs"  # what it was trained on: gaussian-blobs, fashion-mnist:FOLDER,
    # sklearn-digits:VERSION, cifar10:FOLDER or synthetic-images

    @property
    def expected_shift(self) -> float:
        """Model-1 mean difference of the raw sums, IN minus OUT: ``q C T``."""
        return self.q * self.clip * self.T


def mlp_parameter_count(dim: int, n_classes: int, hidden: int) -> int:
    """Parameters of :func:`dputils.training.make_mlp`: ``(dim + 1) hidden + (hidden + 1) n_classes`` with a
    hidden layer, ``(dim + 1) n_classes`` for logistic regression (``hidden = 0``)."""
    dim = check_positive_int("dim", dim)
    n_classes = check_positive_int("n_classes", n_classes)
    hidden = check_nonnegative_int("hidden", hidden)
    return (dim + 1) * hidden + (hidden + 1) * n_classes if hidden else (dim + 1) * n_classes


@dataclass(frozen=True)
class WhiteboxSizes:
    """Sizes of a white-box run that fit its data (:func:`fit_whitebox_sizes`)."""

    data: str  # fashion-mnist, sklearn-digits, synthetic-blobs (the fallback), gaussian-blobs, or images
    m: int
    n_train: int
    batch_size: int
    hidden: int
    dim: int
    n_classes: int
    n_params: int | None  # of the MLP (None for the image models)
    changes: tuple[str, ...] = ()  # one sentence per size changed from the request, with the reason

    def kwargs(self) -> dict:
        """The keyword arguments of :func:`run_whitebox_audit` these sizes set (``m`` is positional)."""
        return dict(
            n_train=self.n_train, batch_size=self.batch_size, hidden=self.hidden, dim=self.dim, n_classes=self.n_classes
        )


def fit_whitebox_sizes(
    m: int,
    *,
    n_train: int,
    batch_size: int,
    hidden: int,
    dim: int = 20,
    n_classes: int = 10,
    model: str = "mlp",
    dataset: str = "blobs",
    params_per_canary: float = 10.0,
) -> WhiteboxSizes:
    """Sizes for :func:`run_whitebox_audit` that fit the data the run will get; the requested ones when they fit
    (always so on Fashion-MNIST at the book's profiles).

    The data: ``dataset="fashion-mnist"`` gets Fashion-MNIST, else scikit-learn's digits, else blobs
    (:func:`dputils.data.classification_kind`), with their input dimension and classes (784/10, 64/10; the blobs
    keep ``dim``/``n_classes``); ``dataset="blobs"`` gets blobs. Two rules, applied in this order:

    1. *Training points.* The digits hold N = 1796 training images (one of the 1797 is drawn as the unused test
       point). When ``n_train > N`` the number of steps per epoch ``k = max(1, round(n_train / batch_size))`` is
       kept and ``batch_size' = floor(N / k)``, ``n_train' = k batch_size'``: T is unchanged and ``q' = 1 / k``
       (equal to q when ``n_train`` was a multiple of ``batch_size``), so the PLD epsilon is the same.
    2. *Room for the canaries.* Distinct Dirac canaries need ``m <= D``, D the MLP's parameters
       (:func:`mlp_parameter_count`), and the scores stay close to Model 1 only when the canaries are a small
       fraction of the coordinates: ``D >= r m`` with ``r = params_per_canary`` (default 10; the book's
       Fashion-MNIST run has D / m = 25450 / 2000 = 12.7). Each example's clipped gradient (norm <= C) is spread
       over D coordinates, so the background gradients that training adds at a canary's coordinate shrink as D
       grows. Measured at the book's profile on the digits (m 2000, T 1200, q 1/12, sigma 2): with D = 2410 the
       OUT scores' sd was 3.09 against sigma C = 2 and the run with the noise divided by 4 was *not* flagged
       (Gaussian bound 4.7 < the claimed 7.42); with D = 20035 the sd was 2.17 and it was flagged (15.9).
       When ``D < r m`` the hidden layer is widened to the smallest ``h`` with
       ``(dim + 1) h + (h + 1) n_classes >= ceil(r m)``, i.e. ``h = ceil((ceil(r m) - n_classes) / (dim + 1 +
       n_classes))``, so the audit keeps its m canaries; logistic regression (``hidden = 0``) has no layer to
       widen and keeps its architecture with ``m' = floor(D / r)`` canaries.

    The image models (``"cnn"``, ``"wrn16-4"``) are returned unchanged (their data are CIFAR-10 or synthetic
    images of any size). ``changes`` says, per changed size, what and why."""
    from ..training.models import MODELS

    m = check_positive_int("m", m)
    n_train = check_positive_int("n_train", n_train)
    batch_size = check_positive_int("batch_size", batch_size)
    hidden = check_nonnegative_int("hidden", hidden)
    dim = check_positive_int("dim", dim)
    n_classes = check_positive_int("n_classes", n_classes)
    check_choice("model", model, MODELS)
    check_choice("dataset", dataset, ("blobs", "fashion-mnist"))
    if model != "mlp":
        return WhiteboxSizes("images", m, n_train, batch_size, hidden, dim, n_classes, None)
    kind = data.classification_kind() if dataset == "fashion-mnist" else "gaussian-blobs"
    if kind in ("fashion-mnist", "sklearn-digits"):
        dim, n_classes = (784, 10) if kind == "fashion-mnist" else (64, 10)
    changes = []
    n_max = {"fashion-mnist": 60000, "sklearn-digits": data.DIGITS_SIZE - 1}.get(kind)
    if n_max is not None and n_train > n_max:
        k = max(1, round(n_train / batch_size))
        b = n_max // k
        if b < 1:
            raise DPValueError(
                f"batch_size {batch_size} with n_train {n_train} gives {k} steps per epoch, more "
                f"than the {n_max} training points of {kind}"
            )
        changes.append(
            f"n_train {n_train} -> {k * b} and batch_size {batch_size} -> {b} ({kind} has {n_max} "
            f"training points; {k} steps per epoch kept, q = {b / (k * b):.4g})"
        )
        n_train, batch_size = k * b, b
    r = check_positive("params_per_canary", params_per_canary)
    if r < 1:
        raise DPValueError(f"params_per_canary must be >= 1 (distinct Dirac canaries), got {params_per_canary}")
    D = mlp_parameter_count(dim, n_classes, hidden)
    need = math.ceil(r * m)
    if D < need:
        if hidden:
            h = -(-(need - n_classes) // (dim + 1 + n_classes))  # ceil
            D_new = mlp_parameter_count(dim, n_classes, h)
            changes.append(
                f"hidden {hidden} -> {h} ({D} parameters on {dim} inputs are fewer than {r:g} per "
                f"canary for m = {m} Dirac canaries; now {D_new})"
            )
            hidden, D = h, D_new
        else:
            m_new = math.floor(D / r)
            if m_new < 4:
                raise DPValueError(
                    f"m: logistic regression on {dim} inputs has {D} parameters, room for "
                    f"{m_new} canaries at {r:g} parameters each, fewer than the 4 an audit needs"
                )
            changes.append(
                f"m {m} -> {m_new} (logistic regression on {dim} inputs has {D} parameters, {r:g} per canary)"
            )
            m = m_new
    return WhiteboxSizes(kind, m, n_train, batch_size, hidden, dim, n_classes, D, tuple(changes))


def run_whitebox_audit(
    m: int = 1000,
    *,
    sigma: float = 1.0,
    clip: float = 1.0,
    epochs: int = 10,
    batch_size: int = 50,
    n_train: int = 1000,
    dim: int = 20,
    n_classes: int = 10,
    hidden: int = 64,
    lr: float = 0.5,
    delta: float = 1e-5,
    p_in: float = 0.5,
    noise_multiplier_scale: float = 1.0,
    pld_discretization: float = 1e-3,
    device: str = "auto",
    seed: int = 0,
    progress: bool = True,
    model: str = "mlp",
    data_dir: str | None = None,
    microbatch: int = 0,
    dataset: str = "blobs",
) -> WhiteboxRun:
    """Train with DP-SGD (Poisson, individual clipping) with ``m`` Dirac gradient canaries and return their
    scores (see the module docstring). The data for ``model="mlp"`` are :func:`dputils.data.gaussian_blobs`
    (``dataset="blobs"``) or, for ``dataset="fashion-mnist"``, the best data at hand
    (:func:`dputils.data.fashion_mnist_data`): ``n_train`` random Fashion-MNIST training images, flattened to 784
    inputs; without the files, with a warning, ``n_train`` random images of scikit-learn's handwritten digits (64
    inputs, ``n_train <= 1796``); without scikit-learn, with a warning, blobs. :func:`fit_whitebox_sizes`
    chooses ``n_train``, ``batch_size``, ``hidden`` and ``m`` that fit the data a run will get;
    for the image models (``"cnn"``, ``"wrn16-4"``, the paper's WideResNet-16-4) the first ``n_train`` CIFAR-10
    training images of ``data_dir`` when it holds a CIFAR-10 python folder, else CIFAR-shaped synthetic images
    (:func:`dputils.data.image_data`; the run's ``data`` field says which).

    Args:
        m: number of canaries (distinct coordinates, so at most the number of model parameters).
        sigma: noise multiplier claimed to the accountant; clip: clipping norm C.
        epochs, batch_size, n_train: ``q = batch_size / n_train`` and ``T = epochs * round(n_train / batch_size)``.
        dim, n_classes, hidden: the data (blobs in R^dim) and the model (:func:`dputils.training.make_mlp`).
        lr: outer step size (the update is ``lr * Ubar / batch_size``).
        delta: delta of the theoretical epsilon (use the audit's delta).
        p_in: probability that a canary is IN (paper: 1/2).
        noise_multiplier_scale: the *actual* noise std is ``noise_multiplier_scale * C * sigma`` while the
            accountant is told sigma: 1 for a correct run; < 1 simulates a broken implementation.
        device: ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda"``, ...
        progress: tqdm bar over steps (the runner's ``TQDM_DISABLE=1`` silences it).
        model: ``"mlp"`` (``dim``, ``hidden`` apply), ``"cnn"`` or ``"wrn16-4"`` (:mod:`dputils.training.models`).
        data_dir: CIFAR-10 python folder for the image models (``~`` is expanded); None or missing: synthetic.
        microbatch: per-sample gradients in chunks of this many examples (0: the whole batch at once); needed
            for WRN-16-4 at the paper's batch of 4096 (:class:`dputils.training.DPSGDConfig`).
        dataset: ``"blobs"`` or ``"fashion-mnist"`` (the MLP's data; ``dim`` and ``n_classes`` are then those of
            the data found: 784 and 10, or 64 and 10 for the digits). The run's ``data`` field says what was used,
            including a fallback.
    """
    cfg = CanaryConfig.of_call("dpsgd", locals())  # the arguments above, validated
    return run_canary_audit(cfg, _DiracDPSGD())


class _DiracDPSGD(CanaryStrategy):
    """Dirac gradient canaries in DP-SGD (module docstring): canary j is the gradient ``C e_{k_j}``, each IN
    canary joins each step's batch with probability q, and every canary observes ``X_t = Ubar_t[k_j]``."""

    mechanism = "dpsgd"

    def data(self, run: CanaryRun) -> TrainingData:
        return _whitebox_data(run.cfg)

    def canaries(self, run: CanaryRun) -> Canaries:
        # distinct coordinates, then the memberships, from one stream
        return draw_canaries(run.cfg, stream=7, n_coords=run.n_params)

    def start(self, run: CanaryRun) -> None:
        import torch

        dev, is_in = run.device, run.is_in
        self.coords_t = torch.as_tensor(run.canaries.coords, device=dev)
        self.in_coords_t = self.coords_t[torch.as_tensor(is_in, device=dev)]
        self.n_in = int(is_in.sum())
        self.canary_gen = torch.Generator(device="cpu").manual_seed(int(run.cfg.seed) + 17)  # sampling coins
        self.sums = torch.zeros(run.cfg.m, dtype=torch.float32, device=dev)
        self.counts = torch.zeros(self.n_in, dtype=torch.int64)

    def extra_gradients(self, run: CanaryRun, info):
        import torch

        hit = torch.rand(self.n_in, generator=self.canary_gen) < run.q
        self.counts += hit.long()
        rows = torch.zeros(int(hit.sum()), run.n_params, device=run.device)
        if rows.shape[0]:
            rows[torch.arange(rows.shape[0], device=run.device), self.in_coords_t[hit.to(run.device)]] = run.cfg.clip
        return rows

    def observe(self, run: CanaryRun, info) -> None:
        self.sums.add_(info.released[self.coords_t])  # X_t = Ubar_t[k_j] for every canary, IN and OUT

    def describe(self, run: CanaryRun) -> str:
        return f"white-box DP-SGD (final eps_PLD={run.epsilon:.2f})"

    def postfix(self, run: CanaryRun, t: int) -> dict[str, str] | None:
        # the privacy spent so far, shown as the run goes: RDP composes by addition, so after t steps it is
        # t * rdp_1 (one cheap conversion per update); an upper bound, looser than the final PLD figure
        if t % max(1, run.T // 50) and t != run.T:
            return None
        if not hasattr(self, "rdp_one"):
            self.rdp_orders = np.array(INTEGER_ORDERS[:63], dtype=float)  # orders 2..64
            self.rdp_one = np.array([subsampled_gaussian_rdp(run.q, run.cfg.sigma, a) for a in self.rdp_orders])
        eps = rdp_to_epsilon(self.rdp_orders, t * self.rdp_one, run.cfg.delta)[0]
        return {"eps_spent_rdp": f"{eps:.3f}"}

    def record(self, run: CanaryRun) -> WhiteboxRun:
        in_sums, out_sums = run.split(self.sums.double().cpu().numpy())
        in_coords, out_coords = run.split(run.canaries.coords)
        return WhiteboxRun(
            in_sums=in_sums,
            out_sums=out_sums,
            in_counts=self.counts.numpy(),
            in_coords=in_coords,
            out_coords=out_coords,
            T=run.T,
            q=run.q,
            sigma=run.cfg.sigma,
            clip=run.cfg.clip,
            delta=run.cfg.delta,
            epsilon_theory=run.epsilon,
            accountant=run.accountant,
            steps_per_second=run.T / run.seconds,
            train_seconds=run.seconds,
            device=run.device_name,
            n_params=run.n_params,
            noise_multiplier_scale=run.cfg.noise_multiplier_scale,
            history=run.result.history,
            model=run.cfg.model,
            data=run.data.source,
        )


def _whitebox_data(cfg: CanaryConfig) -> TrainingData:
    """The training data of a white-box run (see :func:`run_whitebox_audit`)."""
    dim, n_classes, n_train, seed = cfg.dim, cfg.n_classes, cfg.n_train, cfg.seed
    kind = data.classification_kind() if cfg.model == "mlp" and cfg.dataset == "fashion-mnist" else None
    if kind in ("fashion-mnist", "sklearn-digits"):
        X, y, _, _, source = data.fashion_mnist_data(n_train, 1, seed=seed)
        if kind == "sklearn-digits":
            warnings.warn(
                f"Fashion-MNIST not found in {data.fashion_mnist_root()}: training on scikit-learn's "
                f"handwritten digits ({data.DIGITS_SIZE} 8x8 images; Debian: apt-get install "
                "dataset-fashion-mnist)",
                stacklevel=5,  # the caller of run_whitebox_audit (via the strategy and the skeleton)
            )
        return TrainingData(X, y, X.shape[1], 10, source)
    if cfg.model == "mlp":
        X, y = data.gaussian_blobs(n_train, dim=dim, n_classes=n_classes, seed=seed)
        source = "gaussian-blobs"
        if cfg.dataset == "fashion-mnist":
            source += " (no Fashion-MNIST files, no scikit-learn)"
            warnings.warn(
                f"Fashion-MNIST not found in {data.fashion_mnist_root()} and scikit-learn not importable: "
                "training on Gaussian blobs (Debian: apt-get install dataset-fashion-mnist; or pip "
                "install scikit-learn for its handwritten digits)",
                stacklevel=5,  # the caller of run_whitebox_audit (via the strategy and the skeleton)
            )
        return TrainingData(X, y, dim, n_classes, source)
    folder = None if not cfg.data_dir else Path(cfg.data_dir).expanduser()
    X, y, source = data.image_data(folder, n_train, seed=seed)
    return TrainingData(X, y, dim, 10, source)


def audit_whitebox(
    run: WhiteboxRun, alpha: float = 0.05, *, n_bootstrap: int = 2000, selection: str = "split", seed: int = 0
) -> dict[str, float]:
    """Empirical lower bounds from :func:`dputils.audit.audit_all` on the Definition-2 scores of ``run``
    (Gaussian ellipsoid and Bonferroni box, Steinke et al., f-DP) at ``run.delta``."""

    if not isinstance(run, WhiteboxRun):
        raise DPValueError(f"run must be a WhiteboxRun, got {type(run).__name__}")
    return audit_all(
        run.in_scores, run.out_scores, run.delta, alpha, selection=selection, n_bootstrap=n_bootstrap, seed=seed
    )


def model1_fit(run: WhiteboxRun) -> dict[str, object]:
    """The Gaussians that Model 1 of {cite}`gauss_audit` (Proposition 1) assigns to a trained run's scores, with
    the observed background drift, and the scores standardised by them (the paper's Figs 4(b), 5 and 6).

    ``drift`` is the mean OUT score (the background gradients at the canary coordinates);
    ``out_model = (drift, sigma C)`` and ``in_model = (drift + sqrt(T) q C, sqrt(sigma^2 C^2 + q(1-q) C^2))``
    are ``(mean, sd)`` pairs; ``z_ordered`` holds every canary's score standardised by the Gaussian of its
    side, the canaries ordered by their parameter coordinate (Fig. 6)."""
    if not isinstance(run, WhiteboxRun):
        raise DPValueError(f"run must be a WhiteboxRun, got {type(run).__name__}")
    T, q, C, s = run.T, run.q, run.clip, run.sigma
    drift = float(run.out_scores.mean())
    in_model = (drift + math.sqrt(T) * q * C, math.sqrt(s**2 * C**2 + q * (1 - q) * C**2))
    out_model = (drift, s * C)
    scores = np.concatenate([run.in_scores, run.out_scores])
    is_in = np.r_[np.ones(len(run.in_scores), bool), np.zeros(len(run.out_scores), bool)]
    order = np.argsort(np.concatenate([run.in_coords, run.out_coords]))
    z = np.where(is_in, (scores - in_model[0]) / in_model[1], (scores - out_model[0]) / out_model[1])
    return {"drift": drift, "in_model": in_model, "out_model": out_model, "z_ordered": z[order]}
