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
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import (DPValueError, check_choice, check_delta, check_nonnegative_int, check_positive,
                      check_positive_int, check_probability)

__all__ = ["WhiteboxRun", "run_whitebox_audit", "audit_whitebox"]


class ScoreSums:
    """Definition 2 scores of a run that records the raw sums ``in_sums``/``out_sums`` over ``T`` steps."""

    in_sums: np.ndarray
    out_sums: np.ndarray
    T: int

    @property
    def in_scores(self) -> np.ndarray:
        """Definition 2: ``S_T = sum_t X_t / sqrt(T)`` for the IN canaries."""
        return self.in_sums / math.sqrt(self.T)

    @property
    def out_scores(self) -> np.ndarray:
        """Definition 2 for the OUT canaries."""
        return self.out_sums / math.sqrt(self.T)


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
    data: str = "gaussian-blobs"  # what it was trained on: gaussian-blobs, cifar10:FOLDER or synthetic-images

    @property
    def expected_shift(self) -> float:
        """Model-1 mean difference of the raw sums, IN minus OUT: ``q C T``."""
        return self.q * self.clip * self.T


def check_canary_run(m, sigma, clip, epochs, batch_size, n_train, lr, delta, p_in) -> tuple:
    """Validate the common arguments of a canary training run (DPValueError naming the parameter)."""
    m = check_positive_int("m", m)
    if m < 4:
        raise DPValueError(f"m must be >= 4 (the auditors need IN and OUT canaries), got {m}")
    epochs = check_positive_int("epochs", epochs)
    batch_size = check_positive_int("batch_size", batch_size)
    n_train = check_positive_int("n_train", n_train)
    if batch_size > n_train:
        raise DPValueError(f"batch_size must be <= n_train ({n_train}), got {batch_size}")
    return (m, check_positive("sigma", sigma), check_positive("clip", clip), epochs, batch_size, n_train,
            check_positive("lr", lr), check_delta(delta),
            check_probability("p_in", p_in, allow_zero=False, allow_one=False))


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
    (``dataset="blobs"``) or ``n_train`` random Fashion-MNIST training images, flattened to 784 inputs
    (``dataset="fashion-mnist"``, :func:`dputils.data.fashion_mnist_data`; blobs with a warning when the files
    are missing);
    for the image models (``"cnn"``, ``"wrn16-4"``, the paper's WideResNet-16-4) the first ``n_train`` CIFAR-10
    training images of ``data_dir`` when it holds a CIFAR-10 python folder, else CIFAR-shaped synthetic images
    (:func:`dputils.data.image_data`; the run's ``data`` field says which).

    Args:
        m: number of canaries (distinct coordinates, so ``m <= `` number of model parameters).
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
        dataset: ``"blobs"`` or ``"fashion-mnist"`` (the MLP's data; ``dim`` and ``n_classes`` are then 784 and
            10). The run's ``data`` field says what was used, including a fallback.
    """
    import torch

    from .. import data
    from ..training import DPSGDConfig, resolve_device, train
    from ..training.models import MODELS, make_model
    from .model1 import theoretical_epsilon

    m, sigma, clip, epochs, batch_size, n_train, lr, delta, p_in = check_canary_run(
        m, sigma, clip, epochs, batch_size, n_train, lr, delta, p_in)
    noise_multiplier_scale = check_positive("noise_multiplier_scale", noise_multiplier_scale)
    hidden = int(hidden)
    if hidden < 0:
        raise DPValueError(f"hidden must be >= 0, got {hidden}")

    check_choice("model", model, MODELS)
    microbatch = check_nonnegative_int("microbatch", microbatch)

    q = batch_size / n_train
    T = epochs * max(1, round(n_train / batch_size))
    check_choice("dataset", dataset, ("blobs", "fashion-mnist"))
    if model == "mlp" and dataset == "fashion-mnist" and data.fashion_mnist_available():
        X, y, _, _, source = data.fashion_mnist_data(n_train, 1, seed=seed)
        dim, n_classes = X.shape[1], 10
    elif model == "mlp":
        X, y = data.gaussian_blobs(n_train, dim=dim, n_classes=n_classes, seed=seed)
        source = "gaussian-blobs"
        if dataset == "fashion-mnist":
            source += f" (Fashion-MNIST not found in {data.fashion_mnist_root()})"
            warnings.warn(f"Fashion-MNIST not found in {data.fashion_mnist_root()}: training on Gaussian blobs "
                          "(Debian: apt-get install dataset-fashion-mnist)", stacklevel=2)
    else:
        folder = None if not data_dir else Path(data_dir).expanduser()
        X, y, source = data.image_data(folder, n_train, seed=seed)
        n_classes = 10
    torch.manual_seed(seed)
    net = make_model(model, in_dim=dim, n_classes=n_classes, hidden=hidden)
    D = sum(p.numel() for p in net.parameters())
    if m > D:
        raise DPValueError(f"m must be <= the number of model parameters ({D}) for distinct Dirac canaries, got {m}")

    rng = np.random.default_rng([seed, 7])
    coords = rng.choice(D, size=m, replace=False)
    is_in = rng.random(m) < p_in
    if is_in.all() or not is_in.any():  # the auditors need both groups (probability 2^(1-m))
        is_in[0], is_in[1] = True, False

    eps = theoretical_epsilon(sigma, q, T, delta, discretization=pld_discretization)
    dev = resolve_device(device)
    coords_t = torch.as_tensor(coords, device=dev)
    in_coords_t = coords_t[torch.as_tensor(is_in, device=dev)]
    n_in = int(is_in.sum())
    canary_gen = torch.Generator(device="cpu").manual_seed(int(seed) + 17)  # canary sampling coins
    sums = torch.zeros(m, dtype=torch.float32, device=dev)
    counts = torch.zeros(n_in, dtype=torch.int64)

    bar = None
    if progress:
        from tqdm.std import tqdm  # plain bar: honours TQDM_DISABLE, no widget warning in the book

        from ..accountants.rdp import INTEGER_ORDERS, rdp_to_epsilon, subsampled_gaussian_rdp

        bar = tqdm(total=T, desc=f"white-box DP-SGD (final eps_PLD={eps['epsilon']:.2f})", unit="step")
        # the privacy spent so far, shown as the run goes: RDP composes by addition, so after t steps it is
        # t * rdp_1 (one cheap conversion per update); an upper bound, looser than the final PLD figure
        rdp_orders = np.array(INTEGER_ORDERS[:63], dtype=float)  # orders 2..64
        rdp_one = np.array([subsampled_gaussian_rdp(q, sigma, a) for a in rdp_orders])
        every = max(1, T // 50)

    def extra_gradients(info):
        nonlocal counts
        hit = torch.rand(n_in, generator=canary_gen) < q
        counts += hit.long()
        rows = torch.zeros(int(hit.sum()), D, device=dev)
        if rows.shape[0]:
            rows[torch.arange(rows.shape[0], device=dev), in_coords_t[hit.to(dev)]] = clip
        return rows

    def on_round(info):
        sums.add_(info.released[coords_t])  # X_t = Ubar_t[k_j] for every canary, IN and OUT
        if bar is not None:
            bar.update(1)
            t = info.round + 1
            if t % every == 0 or t == T:
                bar.set_postfix(eps_spent_rdp=f"{rdp_to_epsilon(rdp_orders, t * rdp_one, delta)[0]:.3f}")

    config = DPSGDConfig(epochs=epochs, sub_batch_size=1, sub_batches=batch_size, clip=clip, sigma=sigma, lr=lr,
                         sampler="poisson", noise_multiplier_scale=noise_multiplier_scale, device=str(dev), seed=seed,
                         microbatch=microbatch)
    t0 = time.perf_counter()
    res = train(net, X, y, config, extra_gradients=extra_gradients, on_round=on_round)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    if res.rounds != T:  # pragma: no cover - guards the T formula against changes in train()
        raise DPValueError(f"internal: expected {T} rounds, train() ran {res.rounds}")
    s = sums.double().cpu().numpy()
    return WhiteboxRun(
        in_sums=s[is_in], out_sums=s[~is_in], in_counts=counts.numpy(), in_coords=coords[is_in],
        out_coords=coords[~is_in], T=T, q=q, sigma=sigma, clip=clip, delta=delta, epsilon_theory=eps["epsilon"],
        accountant=eps["accountant"], steps_per_second=T / seconds, train_seconds=seconds,
        device=str(dev) if dev.type != "cuda" else f"cuda ({torch.cuda.get_device_name(dev)})", n_params=D,
        noise_multiplier_scale=noise_multiplier_scale, history=res.history, model=model, data=source,
    )


def audit_whitebox(run: WhiteboxRun, alpha: float = 0.05, *, n_bootstrap: int = 2000, selection: str = "split",
                   seed: int = 0) -> dict[str, float]:
    """Empirical lower bounds from :func:`dputils.audit.audit_all` on the Definition-2 scores of ``run``
    (Gaussian ellipsoid and Bonferroni box, Steinke et al., f-DP) at ``run.delta``."""
    from . import audit_all

    if not isinstance(run, WhiteboxRun):
        raise DPValueError(f"run must be a WhiteboxRun, got {type(run).__name__}")
    return audit_all(run.in_scores, run.out_scores, run.delta, alpha, selection=selection,
                     n_bootstrap=n_bootstrap, seed=seed)
