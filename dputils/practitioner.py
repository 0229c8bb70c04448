"""A training run in a practitioner's terms, accounted by every accountant of the library that applies.

A DP-SGD run is described by the data-set size ``N``, the batch size ``B``, the number of epochs ``E``, the
noise multiplier ``sigma`` (Gaussian noise of standard deviation ``sigma C`` on the sum of gradients clipped
to norm ``C``) and the **sampler** that forms the batches:

* ``"poisson"``: every step includes each record independently with probability ``q = B / N``;
  ``T = ceil(E N / B)`` steps (:func:`poisson_schedule`, the rule of the command line's ``--epochs --batch-size
  --dataset-size``: E epochs of N / B expected batches, a last partial step counted whole). The run is the Poisson-subsampled Gaussian mechanism composed ``T`` times
  (:class:`~dputils.mechanisms.SubsampledGaussianMechanism`), accounted by every registered accountant of the
  event ``"subsampled-gaussian"`` (PLD, SPA, Edgeworth, RDP, GDP/CLT).
* ``"shuffling"``: every epoch permutes the data and cuts it into ``floor(N / B)`` batches of ``B`` (the
  ``N mod B`` records left over sit the epoch out). The library's accountant of shuffling is the strong-
  adversary analysis of {cite}`vandijk_shuffling` (the adversary knows the permutation): each record is in
  exactly one batch per epoch, so the run is ``G_mu``-DP with ``mu = sqrt(E) / sigma`` (Lemma F.2), with no
  amplification at all. Registered accountants of the event ``"shuffled-individual-clipping"`` answer, with
  ``ShuffledIndividualClipping(sigma, E, 1, floor(N / B) B, B)``. (That class writes the noise as ``2 C sigma``
  for a sensitivity ``2 C`` under replacement; the per-round ``mu = 1/sigma`` is the same as ours under
  add/remove, so ``sigma`` passes unchanged.)
* ``"random-allocation"``: every epoch places each record in one of its ``b = floor(N / B)`` batches, uniformly
  and independently of the other records and epochs (balls in bins). One epoch is the
  :class:`~dputils.matrix.mechanism.BallsInBinsMatrixMechanism` of the identity strategy with ``b`` batches
  (Lemma 2.8 of {cite}`schuchardt_kalinin`); the ``E`` epochs, allocated independently, are its ``E``-fold
  composition. Answering today: :class:`~dputils.matrix.allocation.MatrixRenyiTightAccountant` (a certified
  upper bound that composes repeats), and every accountant registered with the event ``"random-allocation"``
  or ``"balls-in-bins"`` (:func:`accountants_for`), so an accountant registered later appears without a change
  here. (The conditional-composition accountant accounts one run and refuses ``E`` independent epochs; a
  strategy with ``epochs=E`` would be one allocation *reused* every epoch, a different sampler.)

:func:`account` asks each accountant for ``epsilon(delta)`` and returns its value, its bracket where it gives
one, the guarantee of the number (the registry's ``answer``) and the seconds it took; a refusal is returned
with its message, never as a silent number. :func:`calibrate_sigma` finds the smallest ``sigma`` (to
``rel_tol``) at which one accountant's upper end meets a target epsilon (:func:`dputils.calibration.calibrate_noise`).
:func:`simulated_audit` audits the Poisson run once with simulated white-box canary scores (Model 1 of
{cite}`gauss_audit`, :func:`dputils.audit.model1.simulate_scores`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from .accountants import registry
from .calibration import Calibration, calibrate_noise
from .errors import DPValueError, NumericalError, check_choice, check_delta, check_positive, check_positive_int

__all__ = [
    "poisson_schedule",
    "SAMPLERS",
    "SAMPLER_EVENTS",
    "TrainingRun",
    "Answer",
    "accountants_for",
    "make_accountant",
    "account",
    "calibrate_sigma",
    "simulated_audit",
]


def poisson_schedule(epochs: Fraction | int | float, batch_size: int, dataset_size: int) -> tuple[float, int]:
    """``(q, T) = (B / N, ceil(E N / B))`` for E epochs of Poisson-sampled batches of expected size B out of N.

    Validates every argument (DPValueError naming it): E > 0 finite, B and N positive integers, B <= N. ``T`` is
    computed exactly (``E`` as a fraction: ``ceil(0.1 * 60000 / 100) = 60``, where floating point gives 61), so a
    whole number of steps is never rounded up by one. The command line's ``--epochs --batch-size --dataset-size``
    and :class:`TrainingRun` both use it, so the same words give the same T everywhere.
    """
    B = check_positive_int("batch-size", batch_size)
    N = check_positive_int("dataset-size", dataset_size)
    if B > N:
        raise DPValueError(f"batch-size must be at most dataset-size ({N}), got {B}")
    if isinstance(epochs, float) and not math.isfinite(epochs):
        raise DPValueError(f"epochs must be a finite number > 0, got {epochs!r}")
    E = Fraction(epochs)
    if not E > 0:
        raise DPValueError(f"epochs must be > 0, got {float(E):g}")
    return B / N, int(math.ceil(E * N / B))


#: The samplers of a training run (module docstring).
SAMPLERS = ("poisson", "shuffling", "random-allocation")
#: The registry events whose accountants answer for each sampler.
SAMPLER_EVENTS = {
    "poisson": ("subsampled-gaussian",),
    "shuffling": ("shuffled-individual-clipping",),
    "random-allocation": ("random-allocation", "balls-in-bins"),
}
#: Accountants of a sampler that are not (yet) class registrations: name -> (label, answer, factory).
_BUILTIN: dict[str, dict[str, tuple[str, str, Callable[[], Any]]]] = {}


def _matrix_renyi_tight() -> Any:
    from .matrix.allocation import MatrixRenyiTightAccountant

    return MatrixRenyiTightAccountant(range(2, 129))


_BUILTIN["random-allocation"] = {
    "matrix-renyi-tight": ("Rényi, tight add (random allocation)", "upper-bound", _matrix_renyi_tight)
}


@dataclass(frozen=True)
class TrainingRun:
    """One DP-SGD run: ``dataset_size`` N, ``batch_size`` B (1 <= B <= N), ``epochs`` E, noise multiplier
    ``sigma`` and ``sampler`` (one of :data:`SAMPLERS`). Rate ``q = B / N``; the Poisson run has
    ``T = ceil(E N / B)`` steps (:func:`poisson_schedule`), shuffling and random allocation ``floor(N / B)`` equal
    batches per epoch (``E floor(N / B)`` steps)."""

    dataset_size: int
    batch_size: int
    epochs: int
    sigma: float
    sampler: str = "poisson"

    def __post_init__(self) -> None:
        n = check_positive_int("dataset_size", self.dataset_size)
        b = check_positive_int("batch_size", self.batch_size)
        if b > n:
            raise DPValueError(f"batch_size must be at most dataset_size ({n}), got {b}")
        object.__setattr__(self, "dataset_size", n)
        object.__setattr__(self, "batch_size", b)
        object.__setattr__(self, "epochs", check_positive_int("epochs", self.epochs))
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        check_choice("sampler", self.sampler, SAMPLERS)

    @property
    def steps_per_epoch(self) -> int:
        """``floor(N / B)``."""
        return self.dataset_size // self.batch_size

    @property
    def steps(self) -> int:
        """The steps of the run: ``ceil(E N / B)`` for Poisson sampling (:func:`poisson_schedule`), else
        ``E floor(N / B)`` (equal batches; the ``N mod B`` records left over sit the epoch out)."""
        if self.sampler == "poisson":
            return poisson_schedule(self.epochs, self.batch_size, self.dataset_size)[1]
        return self.epochs * self.steps_per_epoch

    @property
    def q(self) -> float:
        """The Poisson rate ``B / N`` (the expected batch size is B)."""
        return self.batch_size / self.dataset_size

    def with_sigma(self, sigma: float) -> TrainingRun:
        """The same run at another noise multiplier."""
        return replace(self, sigma=sigma)

    def with_sampler(self, sampler: str) -> TrainingRun:
        """The same run with another sampler."""
        return replace(self, sampler=sampler)

    def mechanism(self) -> tuple[Any, int]:
        """``(mechanism, count)``: what the sampler's accountants compose, and how many times."""
        if self.sampler == "poisson":
            from .mechanisms import SubsampledGaussianMechanism

            return SubsampledGaussianMechanism(self.sigma, self.q), self.steps
        if self.sampler == "shuffling":
            from .shuffling.mechanisms import ShuffledIndividualClipping

            b = self.batch_size
            return ShuffledIndividualClipping(self.sigma, self.epochs, 1, self.steps_per_epoch * b, b), 1
        from .matrix.factorizations import build_strategy
        from .matrix.mechanism import BallsInBinsMatrixMechanism

        return BallsInBinsMatrixMechanism(build_strategy("identity", 1, self.steps_per_epoch), self.sigma), self.epochs


@dataclass(frozen=True)
class Answer:
    """One accountant's answer for a run: ``epsilon`` (None where it refused, with ``error``), its bracket
    ``[lower, upper]`` (None where it gives no end; an infinite upper end is a vacuous bracket), ``answer``
    the registry's guarantee (``bracket``, ``upper-bound``, ``estimate``, ``approximation``) and ``seconds``."""

    name: str
    label: str
    answer: str
    epsilon: float | None
    lower: float | None
    upper: float | None
    seconds: float
    error: str = ""
    note: str = ""

    @property
    def certified_upper(self) -> float | None:
        """The upper end when it is a certified bound (``bracket``/``upper-bound``/``estimate`` answers)."""
        if self.answer == "approximation" or self.upper is None or not math.isfinite(self.upper):
            return None
        return self.upper


def accountants_for(sampler: str) -> list[tuple[str, str, str, Callable[[], Any]]]:
    """``[(name, label, answer, factory)]`` of the accountants that apply to ``sampler``: the class
    registrations of its events (:data:`SAMPLER_EVENTS`, no variants, in the registry's order), then the
    built-in ones not registered under the same name."""
    check_choice("sampler", sampler, SAMPLERS)
    out: list[tuple[str, str, str, Callable[[], Any]]] = []
    seen: set[str] = set()
    for event in SAMPLER_EVENTS[sampler]:
        for r in registry.select(events={event}, variants=False):
            if r.name not in seen:
                seen.add(r.name)
                out.append((r.name, r.label, r.answer, r.create))
    for name, (label, answer, factory) in _BUILTIN.get(sampler, {}).items():
        if name not in seen:
            out.append((name, label, answer, factory))
    return out


def make_accountant(name: str, run: TrainingRun) -> Any:
    """The accountant ``name`` (one of :func:`accountants_for` of the run's sampler) with the run composed."""
    for n, _, _, factory in accountants_for(run.sampler):
        if n == name:
            mech, count = run.mechanism()
            return factory().compose(mech, count)
    names = [n for n, *_ in accountants_for(run.sampler)]
    raise DPValueError(f"accountant {name!r} does not apply to sampler {run.sampler!r}; those that do: {names}")


def _float(x: Any) -> float | None:
    return None if x is None else float(x)


def account(run: TrainingRun, delta: float, names: Iterable[str] | None = None) -> list[Answer]:
    """``epsilon(delta)`` of ``run`` by each accountant of :func:`accountants_for` (or only ``names``), timed.

    The bracket is the accountant's reported ``[lower, upper]``; an ``upper-bound`` answer has no lower end,
    an ``approximation`` none at all (even where the result object carries numbers there). A refusal or a
    numerical failure (a ``ValueError`` such as :class:`~dputils.errors.DPValueError`, or a
    :class:`~dputils.errors.NumericalError`) is an :class:`Answer` with ``epsilon=None`` and the message.

    Each answer is the accountant's **own**: where the saddle-point or Edgeworth accountant's default answer
    consults the PLD (``details["fallback"] == "pld"``, :mod:`dputils.accountants.certified`), the method's own
    estimate and bracket are reported, with ``note`` saying so, since the PLD answers in the same list."""
    delta = check_delta(delta)
    wanted = None if names is None else list(names)
    out = []
    for name, label, answer, factory in accountants_for(run.sampler):
        if wanted is not None and name not in wanted:
            continue
        t0 = time.perf_counter()
        try:
            mech, count = run.mechanism()
            r = factory().compose(mech, count).get_epsilon(delta)
        except (ValueError, NumericalError) as exc:
            out.append(Answer(name, label, answer, None, None, None, time.perf_counter() - t0, str(exc)))
            continue
        seconds = time.perf_counter() - t0
        lo, up = _float(getattr(r, "lower", None)), _float(getattr(r, "upper", None))
        value, note = float(r.value), ""
        details = getattr(r, "details", None) or {}
        if details.get("fallback") == "pld":
            # the method's own answer: its default one is the PLD's bracket intersected with its own, which
            # would compare the PLD with itself (dputils.accountants.certified)
            value = float(details["own_value"])
            lo, up = (_float(x) for x in details["own_bracket"])
            note = f"own answer; its default answer consults the PLD ({details.get('fallback_reason', '')})"
        if answer == "approximation":
            lo = up = None
        elif answer == "upper-bound":
            lo = None
            up = float(r.value) if up is None else up
        out.append(Answer(name, label, answer, value, lo, up, seconds, note=note))
    if wanted is not None:
        missing = sorted(set(wanted) - {a.name for a in out})
        if missing:
            raise DPValueError(f"names {missing} do not apply to sampler {run.sampler!r}")
    return out


def calibrate_sigma(
    run: TrainingRun, epsilon: float, delta: float, accountant: str = "pld", *, rel_tol: float = 1e-3
) -> Calibration:
    """The smallest noise multiplier (to ``rel_tol``, rounded up) at which ``accountant`` certifies
    ``(epsilon, delta)`` for the run at that sigma: :func:`dputils.calibration.calibrate_noise` on the upper end
    of the accountant's answer (a certified calibration where the accountant certifies its upper end)."""
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    return calibrate_noise(
        lambda s: make_accountant(accountant, run.with_sigma(s)), epsilon, delta, start=run.sigma, rel_tol=rel_tol
    )


def simulated_audit(
    run: TrainingRun,
    canaries: int,
    delta: float,
    *,
    methods: Sequence[str] = ("gauss", "steinke"),
    alpha: float = 0.05,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """One audit of the Poisson run from ``canaries`` simulated white-box canaries (half IN on average).

    The scores are drawn exactly from Model 1 of {cite}`gauss_audit` at the run's ``(T, q, sigma)``
    (:func:`dputils.audit.model1.simulate_scores`: a canary gradient of norm C present at each step with
    probability q, the score the sum of the noisy canary-aligned updates over sqrt(T)); each method of
    :func:`dputils.audit.methods.run_method` turns them into a ``(1 - alpha)`` lower bound on epsilon.
    Returns ``{"lower": {method: eps}, "ceiling": eps_score, "n_in", "n_out"}`` where ``ceiling`` is the exact
    epsilon of the score pair (:func:`dputils.audit.model1.exact_score_epsilon`): no auditor of this score
    exceeds it, whatever the number of canaries. Only the Poisson sampler is simulated (refused otherwise)."""
    from .audit.methods import run_method
    from .audit.model1 import exact_score_epsilon, simulate_scores

    if run.sampler != "poisson":
        raise DPValueError(f"sampler must be 'poisson' for the simulated audit (Model 1), got {run.sampler!r}")
    m = check_positive_int("canaries", canaries)
    delta = check_delta(delta)
    ins, outs = simulate_scores(m, run.steps, run.q, run.sigma, rng=seed)
    lower = {
        meth: float(run_method(meth, ins, outs, delta, alpha, n_bootstrap=n_bootstrap, seed=seed).epsilon_lower)
        for meth in methods
    }
    ceiling = float(exact_score_epsilon(delta, run.steps, run.q, run.sigma))
    return {"lower": lower, "ceiling": ceiling, "n_in": len(ins), "n_out": len(outs)}
