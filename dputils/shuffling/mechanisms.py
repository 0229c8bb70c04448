"""Training runs of generalized DP-SGD (Algorithm 1 of ``vandijk_shuffling``) as mechanism objects.

Each run is a frozen dataclass validated on construction: noise multiplier ``sigma`` (Gaussian noise of
standard deviation ``2 C sigma`` per round, the paper's convention), ``epochs`` E, the size g of the
differentiating group (``group_size = 1`` is ordinary DP), and where the refined accountants need them the
data-set size N and the number of samples per round. Under the paper's strong adversary (every sampling
coin known) a run is the labelled Gaussian mixture ``sum_c q(c) G_{c/sigma}`` (eq. 14) where ``q`` is the
law of ``c^2`` over the whole run (Def 5.1), returned by :meth:`c2_law`.

* :class:`ShuffledBatchClipping`: shuffling, batch clipping (m = 1 sub-batch of s samples per round);
  ``G_{sqrt(gE)/sigma}``-DP for groups of g (Thm F.1), exactly the occupancy mixture.
* :class:`ShuffledIndividualClipping`: shuffling, individual clipping (s = 1, m samples per round);
  ``G_{sqrt(E)/sigma}`` for g = 1 (Lemma F.2), the partition mixture for any g.
* :class:`SubsampledBatchClipping`: each round draws its s samples afresh, batch clipping (Lemma E.5):
  the Binomial mixture over ``T = round(N E / s)`` rounds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import DPValueError, check_positive, check_positive_int
from .laws import C2Law, bc_shuffle_law, bc_shuffle_law_as_printed, ic_shuffle_law, shuffle_sizes, subsample_bc_law
from .tradeoff import gdp_epsilon, shuffle_g1_mu


@dataclass(frozen=True)
class _TrainingRun:
    """A training run of Algorithm 1: noise multiplier, epochs, group size and (optional) sizes."""

    sigma: float
    epochs: int
    group_size: int = 1
    dataset_size: int | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        object.__setattr__(self, "epochs", check_positive_int("epochs", self.epochs))
        object.__setattr__(self, "group_size", check_positive_int("group_size", self.group_size))

    def _sizes_given(self, required: bool) -> bool:
        """Whether both sizes are given; one without the other (or none where ``required``) is refused."""
        if self.dataset_size is None and self.batch_size is None and not required:
            return False
        if self.dataset_size is None or self.batch_size is None:
            missing = "dataset_size" if self.dataset_size is None else "batch_size"
            raise DPValueError(
                f"{missing} must be given ({type(self).__name__} needs both dataset_size and "
                "batch_size" + ("" if required else ", or neither") + ")"
            )
        return True

    @property
    def has_sizes(self) -> bool:
        """Whether the data-set size and batch size are known (the refined accountants need them)."""
        return self.dataset_size is not None and self.batch_size is not None

    def as_dict(self) -> dict[str, Any]:
        """The run's parameters (the ``None`` ones left out), for the accountants' ``details``."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def c2_law(self) -> C2Law:  # pragma: no cover - every concrete run overrides it
        raise NotImplementedError


@dataclass(frozen=True)
class _ShuffledRun(_TrainingRun):
    """A shuffled run: the sizes are optional, and where given N is a multiple of the round size."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self._sizes_given(required=False):
            N, b, _, _ = shuffle_sizes(self.dataset_size, self.batch_size, self.group_size)
            object.__setattr__(self, "dataset_size", N)
            object.__setattr__(self, "batch_size", b)


@dataclass(frozen=True)
class ShuffledBatchClipping(_ShuffledRun):
    """E epochs of shuffling with batch clipping: each epoch permutes the N samples into ``N/s`` rounds of
    ``batch_size = s`` samples and clips the round's summed gradient once (m = 1).

    ``dataset_size`` and ``batch_size`` are optional for the headline bound ``G_{sqrt(gE)/sigma}``
    (Thm F.1 holds for any N and s) and required for the exact mixture (N a multiple of s)."""

    @property
    def mu(self) -> float:
        """``sqrt(g E)/sigma``: the run is ``G_mu``-DP for groups of g (Thm F.1), tight for g = 1."""
        return math.sqrt(self.group_size * self.epochs) / self.sigma

    def c2_law(self) -> C2Law:
        """The exact occupancy law of one epoch, convolved over the E epochs."""
        return bc_shuffle_law(self.dataset_size, self.batch_size, self.group_size).compose(self.epochs)

    def c2_law_as_printed(self) -> C2Law:
        """Thm F.1's printed (stars-and-bars) per-epoch law, convolved over the E epochs (erratum)."""
        return bc_shuffle_law_as_printed(self.dataset_size, self.batch_size, self.group_size).compose(self.epochs)


@dataclass(frozen=True)
class ShuffledIndividualClipping(_ShuffledRun):
    """E epochs of shuffling with individual clipping: rounds of ``batch_size = m`` samples, each clipped
    on its own (s = 1). A round holding k group members has sensitivity ``2 k C``, i.e. is ``G_{k/sigma}``.

    For g = 1 the run is exactly ``G_{sqrt(E)/sigma}`` (Lemma F.2) and needs no sizes; for the exact
    partition mixture ``dataset_size`` must be a multiple of ``batch_size``."""

    @property
    def mu(self) -> float:
        """``sqrt(E)/sigma`` for g = 1 (Lemma F.2); refused for groups (no such closed form)."""
        if self.group_size != 1:
            raise DPValueError(
                f"group_size must be 1 for the closed form G_(sqrt(E)/sigma) of individual "
                f"clipping (Lemma F.2); got {self.group_size}"
            )
        return math.sqrt(self.epochs) / self.sigma

    def c2_law(self) -> C2Law:
        """The exact partition law of one epoch, convolved over the E epochs."""
        return ic_shuffle_law(self.dataset_size, self.batch_size, self.group_size).compose(self.epochs)


@dataclass(frozen=True)
class SubsampledBatchClipping(_TrainingRun):
    """Batch clipping with subsampling: ``T = round(N E / s)`` rounds, each drawing ``batch_size = s`` of the
    N samples afresh; a round holding a group member is ``G_{1/sigma}`` (Lemma E.5; for g = 1 the same
    holds for any clipping). ``dataset_size`` and ``batch_size`` are required (s + g <= N)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._sizes_given(required=True)
        N = check_positive_int("dataset_size", self.dataset_size)
        s = check_positive_int("batch_size", self.batch_size)
        if s + self.group_size > N:
            raise DPValueError(f"batch_size + group_size must be <= dataset_size ({N})")
        object.__setattr__(self, "dataset_size", N)
        object.__setattr__(self, "batch_size", s)

    def c2_law(self) -> C2Law:
        """``c^2 ~ Binomial(T, q_1)`` with ``q_1 = 1 - prod_{j<g} (N-s-j)/(N-j)``."""
        return subsample_bc_law(self.dataset_size, self.batch_size, self.epochs, self.group_size)


#: The training runs of this package (what its accountants compose).
TRAINING_RUNS = (ShuffledBatchClipping, ShuffledIndividualClipping, SubsampledBatchClipping)


def clipping_accuracy(
    X,
    y,
    X_test,
    y_test,
    clipping: str,
    sigma: float,
    *,
    epochs: int,
    batch: int,
    repeats: int,
    seed: int,
    clip: float = 1.0,
    lr: float = 0.5,
    noise_multiplier_scale: float = 2.0,
) -> tuple[float, float]:
    """Mean test accuracy over ``repeats`` seeds, and the median per-step noise-to-signal ratio, of Algorithm 1
    with shuffling (:func:`dputils.training.train`, a linear model of :func:`dputils.training.make_mlp`).

    ``clipping="IC"``: ``m = batch`` sub-batches of one example, each clipped to ``clip`` (DP-SGD);
    ``"BC"``: one sub-batch of ``batch`` examples clipped as a whole, at half the learning rate. The noise is
    ``N(0, (noise_multiplier_scale * clip * sigma)^2)`` per coordinate (``2 C sigma``, the paper's, by
    default). Run ``r`` seeds torch and the sampler with ``seed + r``."""
    import numpy as np
    import torch

    from ..training import DPSGDConfig, make_mlp, train

    if clipping not in ("IC", "BC"):
        raise DPValueError(f"clipping must be 'IC' or 'BC', got {clipping!r}")
    n_classes = int(max(y.max(), y_test.max())) + 1
    m_, s_ = (batch, 1) if clipping == "IC" else (1, batch)
    accs, nsrs = [], []
    for rep in range(check_positive_int("repeats", repeats)):
        torch.manual_seed(seed + rep)
        model = make_mlp(X.shape[1], n_classes)
        cfg = DPSGDConfig(
            epochs=epochs,
            sub_batch_size=s_,
            sub_batches=m_,
            clip=clip,
            sigma=sigma,
            lr=lr if clipping == "IC" else lr / 2,
            noise_multiplier_scale=noise_multiplier_scale,
            seed=seed + rep,
        )
        res = train(model, X, y, cfg, X_test, y_test)
        accs.append(res.final["test_accuracy"])
        nsrs.append(float(np.median(res.noise_to_signal)))
    return float(np.mean(accs)), float(np.median(nsrs))


def clipping_sweep(
    X,
    y,
    X_test,
    y_test,
    sigmas,
    delta: float,
    *,
    epochs: int,
    batch: int,
    repeats: int,
    seed: int,
    clip: float = 1.0,
    lr: float = 0.5,
) -> tuple[float, list[dict[str, float]]]:
    """Individual against batch clipping with shuffling at equal strong-adversary guarantee, over ``sigmas``.

    For g = 1 both have the guarantee ``G_{sqrt(E)/sigma}`` (Lemma F.2), whose ε at ``delta`` is ``eps``. Per
    σ: the accuracies and noise-to-signal ratios of :func:`clipping_accuracy` for IC and BC with the faithful
    noise ``2 C sigma``, and BC with the noise divided by the batch size (``acc_bc_as_implemented``, not
    private as analysed). Returns the non-private accuracy (IC, σ = 0) and one row per σ."""

    kw = dict(epochs=epochs, batch=batch, repeats=repeats, seed=seed, clip=clip, lr=lr)
    acc_np, _ = clipping_accuracy(X, y, X_test, y_test, "IC", 0.0, **kw)
    rows = []
    for sig in sigmas:
        a_ic, nsr_ic = clipping_accuracy(X, y, X_test, y_test, "IC", sig, **kw)
        a_bc, nsr_bc = clipping_accuracy(X, y, X_test, y_test, "BC", sig, **kw)
        a_impl, _ = clipping_accuracy(X, y, X_test, y_test, "BC", sig, noise_multiplier_scale=1.0 / batch, **kw)
        rows.append(
            dict(
                sigma=sig,
                eps=gdp_epsilon(delta, shuffle_g1_mu(sig, epochs)),
                acc_ic=a_ic,
                acc_bc=a_bc,
                acc_bc_as_implemented=a_impl,
                nsr_ic=nsr_ic,
                nsr_bc=nsr_bc,
            )
        )
    return acc_np, rows


def clipping_accuracy_gap(rows, sigma: float) -> float:
    """The accuracy gap in percentage points, ``100 (acc_bc - acc_ic)``, between batch and individual clipping
    (faithful noise) at noise multiplier ``sigma``, from the rows of :func:`clipping_sweep`; negative when batch
    clipping trails. Raises :class:`~dputils.errors.DPValueError` when ``sigma`` was not swept."""
    by_sigma = {r["sigma"]: r for r in rows}
    if sigma not in by_sigma:
        raise DPValueError(f"sigma = {sigma!r} is not among the swept {sorted(by_sigma)}")
    r = by_sigma[sigma]
    return 100 * (r["acc_bc"] - r["acc_ic"])
