r"""Opacus accountants for shuffled (fixed-size, disjoint) batches: ``dputils-shuffle`` and ``dputils-shuffle-bc``.

Opacus's accountants (and ``dputils-pld``/``-rdp``/...) account Poisson sampling: each example joins each batch
independently with probability q, which is what ``PrivacyEngine.make_private`` runs by default (its
``DPDataLoader``). Many runs instead pass ``poisson_sampling=False`` and keep a ``DataLoader(batch_size=b,
shuffle=True)``: every epoch is a permutation of the N examples cut into ``N/b`` disjoint batches, so each
example is used exactly once per epoch. The accountants here account that sampler with the analysis of the
shuffling chapter (van Dijk, Nguyen, Nguyen, Nguyen, "Generalizing DP-SGD with Shuffling and Batch Clipping",
book key ``vandijk_shuffling``; :mod:`dputils.shuffling`), under its strong adversary, who knows the
permutations and so every batch's membership (a guarantee against it holds against any weaker adversary):

* ``dputils-shuffle``: individual (per-example) clipping, what Opacus's ``DPOptimizer`` does;
* ``dputils-shuffle-bc``: batch clipping (one clipped update per batch: the summed or averaged batch gradient
  clipped to C, then noised), for users who train with batch clipping.

**Noise and neighbouring.** The chapter's analysis is for replace-one neighbours with N fixed (its sensitivity
2C, noise std ``2 C sigma``). Opacus adds noise of std ``noise_multiplier * C`` to the sum of clipped terms, so a
step with Opacus's ``noise_multiplier`` is the chapter's round with ``sigma = noise_multiplier / 2``: a round
that holds the replaced example is ``G_{2/noise_multiplier}``. (Opacus's Poisson accountants use add/remove
neighbours, sensitivity C; replace-one is the neighbouring a fixed-size sampler keeps, and it costs a factor 2
in mu. The strong adversary also forfeits the amplification by the batch's secrecy: these epsilons are much
larger than a Poisson accountant's at the same noise, by design, not by looseness of the code.)

**What is composed.** A step with ``sample_rate`` r is a fraction r of an epoch (Opacus steps a loader of
``len(data_loader)`` batches at r = 1/len(data_loader), times the gradient-accumulation count). The history's
steps are cut into epochs of ``1/r`` steps; a last, partial epoch counts as a whole one (its released rounds are
a prefix of a whole epoch's, i.e. a post-processing of it, so the whole epoch's guarantee covers it). Then:

* without ``dataset_size``/``batch_size`` (the default): the headline bound. Individual clipping, groups of 1:
  ``G_{sqrt(E)/sigma}`` (Lemma F.2, exact under the strong adversary); batch clipping, groups of g:
  ``G_{sqrt(gE)/sigma}`` (Thm F.1; any N and b). An epoch whose steps have different noise counts at its
  smallest (the example's one round in it may be any of them), and epochs compose in mu-GDP,
  ``mu^2 = sum_e 1/sigma_e^2`` (times g for batch clipping): :class:`dputils.shuffling.GDPBoundAccountant`.
  epsilon(delta) of ``G_mu`` (eq. 7) is a certified upper bound.
* with ``dataset_size`` N and ``batch_size`` b (samples per optimizer step, N a multiple of b): the exact
  strong-adversary mixture ``sum_c q(c) G_{c/sigma}`` (Def 5.2) with the corrected law of ``c^2``
  (:class:`dputils.shuffling.MixtureAccountant`, ``law="exact"``): the occupancy law for batch clipping (Thm F.1's
  printed stars-and-bars law is wrong, see the chapter's errata) and the partition law for individual clipping,
  over E epochs of one noise. This is what groups g > 1 with individual clipping need. The law assumes a
  uniformly random permutation per epoch (``shuffle=True``); with g = 1 it equals the bound.

**What is refused** (``DPValueError`` naming the cause): a step whose ``sample_rate`` is not 1/k for an integer
k, or different rates in one history (the epochs would not be whole); for the exact mixture, different noise
multipliers, sizes whose ``N/b`` is not the ``1/r`` the steps say; individual clipping with g > 1 and no sizes;
and, through the optimizer hook that ``PrivacyEngine.make_private`` attaches, a **Poisson data loader**: an
accountant only sees ``(noise_multiplier, sample_rate)`` per step, identical for both samplers, so the hook
also reads each step's batch size (the per-sample gradients' first dimension) and refuses a step whose batch
differs from the epoch's first one (other than the epoch's last batch, which may be smaller): Opacus's Poisson
loader draws a new size each step (for batches of mean 64, two in a row agree with probability about 0.05), so a
run made with the default ``poisson_sampling=True`` is refused within its first steps, naming
``poisson_sampling=False`` and ``dputils-pld``. (Where no per-sample gradients exist, e.g. ghost clipping, the
batch size cannot be read, and the accountant relies on the caller's ``poisson_sampling=False``.)

**Why a table of their own.** These two names are not entries of :mod:`dputils.accountants.registry`: an
Opacus name here stands for a data loader and a clipping, and picks from its options and the history one of
two registered accountants (``shuffle-batch-clip``'s :class:`~dputils.shuffling.GDPBoundAccountant` or the
exact mixture's :class:`~dputils.shuffling.MixtureAccountant`), composed over epochs cut from Opacus's steps;
the registry's shuffling names are those accountants, each for one kind of training run.

Options cannot be passed through ``PrivacyEngine(accountant=NAME)``, which constructs the accountant with none;
set ``engine.accountant = ShuffleOpacusAccountant(dataset_size=N, batch_size=b, group_size=g)`` before
``make_private`` for the exact mixture or groups.
"""

from __future__ import annotations

import math
from typing import Any

from opacus.accountants import register_accountant

from ..accountants.base import Accountant, AccountingResult
from ..errors import DPValueError, check_delta, check_positive_int
from ..shuffling import GDPBoundAccountant, MixtureAccountant, ShuffledBatchClipping, ShuffledIndividualClipping
from ..shuffling.laws import shuffle_sizes
from ._opacus_base import OpacusHistory

__all__ = ["SHUFFLE_MECHANISMS", "ShuffleBCOpacusAccountant", "ShuffleOpacusAccountant", "steps_per_epoch"]

#: relative tolerance on 1/sample_rate being an integer (Opacus computes r = 1/len(data_loader) in floats)
_RATE_RTOL = 1e-9


def steps_per_epoch(sample_rate: float, who: str = "dputils-shuffle") -> int:
    """The number k of steps of a shuffled epoch at ``sample_rate`` r = 1/k (``DPValueError`` unless 1/r is an
    integer to within 1e-9 relative)."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, float)) or not 0 < sample_rate <= 1:
        raise DPValueError(f"{who}: sample_rate must be in (0, 1], got {sample_rate!r}")
    k = round(1.0 / sample_rate)
    if k < 1 or abs(k * sample_rate - 1.0) > _RATE_RTOL:
        raise DPValueError(
            f"{who}: sample_rate {sample_rate!r} is not 1/k for an integer k: a shuffled epoch of "
            "disjoint batches steps at 1/len(data_loader) (times the gradient-accumulation count)"
        )
    return k


class ShuffleOpacusAccountant(OpacusHistory):
    """Opacus accountant ``"dputils-shuffle"``: shuffled batches with individual clipping (module docstring).

    Args:
        group_size: g, the size of the protected group (default 1, ordinary DP).
        dataset_size: N (with ``batch_size``): account the exact strong-adversary mixture instead of the bound.
        batch_size: samples per optimizer step (with ``dataset_size``; N a multiple of it).
    """

    MECHANISM = "dputils-shuffle"
    CLIPPING = "individual"

    def __init__(self, group_size: int = 1, dataset_size: int | None = None, batch_size: int | None = None) -> None:
        super().__init__()
        self.group_size = check_positive_int("group_size", group_size)
        if (dataset_size is None) != (batch_size is None):
            raise DPValueError(
                f"{self.MECHANISM}: give both dataset_size and batch_size (the exact mixture), or neither (the bound)"
            )
        self.dataset_size = None if dataset_size is None else check_positive_int("dataset_size", dataset_size)
        self.batch_size = None if batch_size is None else check_positive_int("batch_size", batch_size)
        if self.exact:
            shuffle_sizes(self.dataset_size, self.batch_size, self.group_size)  # N a multiple of b, g <= N
        elif self.CLIPPING == "individual" and self.group_size != 1:
            raise DPValueError(
                f"{self.MECHANISM}: group_size={self.group_size} with individual clipping has no "
                "closed-form bound (a batch holding k group members is G_(k/sigma)); give "
                "dataset_size and batch_size for the exact mixture"
            )
        self._epoch_batch: int | None = None  # the hook's record: the batch size of the current epoch's first step

    # -------------------------------------------------------------------------------- Opacus interface
    @property
    def exact(self) -> bool:
        """Whether the exact mixture is accounted (sizes given) rather than the mu-GDP bound."""
        return self.dataset_size is not None

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """One optimizer step (consecutive equal steps are merged); a rate that is not 1/k is refused now."""
        steps_per_epoch(sample_rate, self.MECHANISM)
        super().step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)

    def get_optimizer_hook_fn(self, sample_rate: float):
        """Opacus's step hook, with the check of the batch sizes that refuses a Poisson loader (module docstring)."""
        k = steps_per_epoch(sample_rate, self.MECHANISM)

        def hook_fn(optim) -> None:
            acc = optim.accumulated_iterations
            self._check_batch(_batch_size(optim), k // acc if acc and k % acc == 0 else None)
            self.step(noise_multiplier=optim.noise_multiplier, sample_rate=sample_rate * acc)

        return hook_fn

    def _check_batch(self, size: int | None, k: int | None) -> None:
        if size is None or k is None:
            return
        pos = len(self) % k
        what = (
            f"{self.MECHANISM}: step {len(self) + 1} has a batch of {size} samples where this epoch's batches "
            f"have {self._epoch_batch}: not a loader of fixed-size disjoint batches. Opacus's make_private "
            "samples Poisson batches unless poisson_sampling=False; account Poisson sampling with dputils-pld"
        )
        if size <= 0:
            raise DPValueError(what.replace(f"where this epoch's batches have {self._epoch_batch}", "(empty)"))
        if pos == 0:
            if self.exact and size != self.batch_size:
                raise DPValueError(
                    f"{self.MECHANISM}: step {len(self) + 1} has a batch of {size} samples, the "
                    f"accountant was given batch_size={self.batch_size}"
                )
            self._epoch_batch = size
        elif size > self._epoch_batch or (pos < k - 1 and size != self._epoch_batch):
            raise DPValueError(what)

    # -------------------------------------------------------------------------------- accounting
    def _epochs(self) -> list[tuple[float, int]]:
        """The history as ``[(noise_multiplier, epochs)]``: whole epochs of ``1/r`` steps (a last partial epoch
        counts as one), each at the smallest noise among its steps; consecutive epochs of one noise merged."""
        history = self._checked_history(self.history)
        if not history:
            return []
        rates = {r for _, r, _ in history}
        if len(rates) > 1:
            raise DPValueError(
                f"{self.MECHANISM}: the history has several sample rates {sorted(rates)}: the "
                "epochs of one shuffled loader all step at 1/len(data_loader)"
            )
        k = steps_per_epoch(history[0][1], self.MECHANISM)
        epochs: list[float] = []  # the smallest noise of each epoch
        pos = 0
        for sigma, _, n in history:
            while n > 0:
                if pos == 0:
                    epochs.append(sigma)
                else:
                    epochs[-1] = min(epochs[-1], sigma)
                take = min(n, k - pos)
                n -= take
                pos = (pos + take) % k
                if pos == 0 and n >= k:  # whole epochs at this noise in one go
                    whole = n // k
                    epochs.extend([sigma] * whole)
                    n -= whole * k
        out: list[tuple[float, int]] = []
        for s in epochs:
            if out and out[-1][0] == s:
                out[-1] = (s, out[-1][1] + 1)
            else:
                out.append((s, 1))
        if self.exact and self.dataset_size // self.batch_size != k:
            raise DPValueError(
                f"{self.MECHANISM}: dataset_size/batch_size = {self.dataset_size // self.batch_size} "
                f"steps per epoch, but the steps' sample_rate says {k}"
            )
        return out

    def _run(self, noise_multiplier: float, epochs: int):

        run = ShuffledBatchClipping if self.CLIPPING == "batch" else ShuffledIndividualClipping
        sizes = (self.dataset_size, self.batch_size) if self.exact else (None, None)
        return run(noise_multiplier / 2.0, epochs, self.group_size, *sizes)

    def accountant(self) -> tuple[Accountant | None, bool]:
        """The :mod:`dputils.shuffling` accountant of the history (None without private steps), and whether a
        step without noise was taken (epsilon infinite)."""

        epochs = self._epochs()
        if any(s == 0 for s, _ in epochs):
            return None, True
        if not epochs:
            return None, False
        if self.exact:
            if len(epochs) > 1:
                raise DPValueError(
                    f"{self.MECHANISM}: the exact mixture is for one noise_multiplier, the history "
                    f"has {sorted({s for s, _ in epochs})} (the bound, without dataset_size/"
                    "batch_size, composes epochs of different noise)"
                )
            acc = MixtureAccountant("exact")
        else:
            acc = GDPBoundAccountant()
        for sigma, e in epochs:
            acc.compose(self._run(sigma, e))
        return acc, False

    def get_epsilon_bracket(self, delta: float) -> AccountingResult:
        """The whole answer of the :mod:`dputils.shuffling` accountant for epsilon(delta)."""
        delta = check_delta(delta)
        acc, infinite = self.accountant()
        if infinite:
            return AccountingResult(
                math.inf,
                math.inf,
                math.inf,
                "exact",
                self.MECHANISM,
                "epsilon",
                {"reason": "a step with noise_multiplier 0"},
            )
        if acc is None:
            return AccountingResult(0.0, 0.0, 0.0, "exact", self.MECHANISM, "epsilon", {"reason": "no steps"})
        return acc.get_epsilon(delta)

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        """epsilon(delta) of the steps so far: a certified upper bound (the bracket's upper end)."""
        if kwargs:
            raise TypeError(f"{self.MECHANISM}: unexpected arguments {sorted(kwargs)} (options go to the constructor)")
        res = self.get_epsilon_bracket(delta)
        return float(res.upper if res.upper is not None else res.value)

    # -------------------------------------------------------------------------------- state
    def state_dict(self, destination: Any = None) -> Any:
        """Opacus's ``history`` and ``mechanism``, plus ``options`` (group_size, dataset_size, batch_size)."""
        destination = super().state_dict(destination)
        destination["options"] = {
            "group_size": self.group_size,
            "dataset_size": self.dataset_size,
            "batch_size": self.batch_size,
        }
        return destination

    def load_state_dict(self, state_dict: Any) -> None:
        """Load ``state_dict()`` output (history checked entry by entry, the options must equal this accountant's);
        anything else raises ``DPValueError`` and leaves the accountant unchanged."""
        self._check_state_keys(state_dict)
        options = state_dict.get("options", {"group_size": 1, "dataset_size": None, "batch_size": None})
        mine = {"group_size": self.group_size, "dataset_size": self.dataset_size, "batch_size": self.batch_size}
        if options != mine:
            raise DPValueError(f"state_dict was saved with options {options!r}, this accountant has {mine!r}")
        history = self._checked_history(state_dict["history"])
        for _, r, _ in history:
            steps_per_epoch(r, self.MECHANISM)
        self.history = history
        self._epoch_batch = None


class ShuffleBCOpacusAccountant(ShuffleOpacusAccountant):
    """Opacus accountant ``"dputils-shuffle-bc"``: shuffled batches with batch clipping (module docstring):
    ``G_{sqrt(gE)/sigma}`` (Thm F.1) without sizes, the exact occupancy mixture with them."""

    MECHANISM = "dputils-shuffle-bc"
    CLIPPING = "batch"


def _batch_size(optim) -> int | None:
    """The number of samples of the optimizer's current step (summed over accumulated batches), read from the
    first parameter's per-sample gradients; None where there are none (e.g. ghost clipping)."""
    for p in getattr(optim, "params", []):
        gs = getattr(p, "grad_sample", None)
        if gs is None:
            continue
        if isinstance(gs, (list, tuple)):
            return int(sum(int(g.shape[0]) for g in gs))
        return int(gs.shape[0])
    return None


#: Opacus name -> class, registered on import (by importing :mod:`dputils.interop.opacus` too).
SHUFFLE_MECHANISMS = {c.MECHANISM: c for c in (ShuffleOpacusAccountant, ShuffleBCOpacusAccountant)}

for _name, _cls in SHUFFLE_MECHANISMS.items():
    register_accountant(_name, _cls, force=True)
