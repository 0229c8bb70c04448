"""Accountants of shuffled and subsampled training runs under the strong adversary of ``vandijk_shuffling``.

Both compose the training runs of :mod:`dputils.shuffling.mechanisms` and answer with an
:class:`~dputils.accountants.base.AccountingResult`.

* :class:`GDPBoundAccountant` (``shuffle-batch-clip``): a run of batch clipping with shuffling is
  ``G_mu``-DP with ``mu = sqrt(g E)/sigma`` for groups of g (Thm F.1), individual clipping with g = 1 is
  ``G_{sqrt(E)/sigma}`` (Lemma F.2). Runs compose exactly in mu-GDP: ``G_{mu_1} (x) G_{mu_2} =
  G_{sqrt(mu_1^2 + mu_2^2)}`` (Dong-Roth-Su Cor. 3.3), so ``count`` repetitions and several runs give
  ``mu^2 = sum_i count_i mu_i^2``. Each ``G_{mu_i}`` is a lower bound on the run's trade-off function, and
  composition is monotone, so the composed ``G_mu`` is too: epsilon(delta) and delta(eps) of ``G_mu``
  (eq. 7, :mod:`dputils.curves`) are **upper bounds** on the strong adversary's (and any weaker one's).
* :class:`MixtureAccountant`: the exact strong-adversary mechanism, the labelled mixture
  ``sum_c q(c) G_{c/sigma}`` (Def 5.2) with the law ``q`` of ``c^2`` of the run. The adversary sees the
  labels, so independent runs with the same sigma compose exactly by convolving their laws
  (``mu^2 = c^2/sigma^2`` adds per pair of labels). With ``law="exact"`` the answer is exact (a bisection
  bracket on epsilon, widened like the GDP accountant's for rounding); ``law="as-printed"`` uses Thm F.1's
  printed law, which is wrong (slightly optimistic): an ``approximation``, not a bound.

What they refuse (``supports()`` is False, ``check_supported()`` says why): mechanisms that are not these
training runs; runs whose group size differs from the runs already composed (the runs must share one
neighbouring relation: the same group of g examples); for the mixture, runs without data-set and batch
sizes and runs with a different sigma (the law of ``c^2`` is kept on the integer grid of one sigma; a mix
of sigmas composes exactly too, but not on that grid); for the bound, individual clipping with g > 1
(no ``G_{sqrt(gE)/sigma}`` result) and subsampling (a round can be hit more than once per epoch).
"""

from __future__ import annotations

import math
from typing import Any

from .. import curves
from ..accountants.base import Accountant, AccountingResult
from ..accountants.gdp import EXACT_REL_MARGIN
from ..accountants.registry import register
from ..errors import DPValueError, check_choice, check_positive_int
from .laws import C2Law
from .mechanisms import TRAINING_RUNS, ShuffledBatchClipping, ShuffledIndividualClipping
from .tradeoff import gdp_delta, mixture_delta, mixture_epsilon

_RUN_NAMES = ", ".join(cls.__name__ for cls in TRAINING_RUNS)


def _details(ledger: list[tuple[Any, int]]) -> dict[str, Any]:
    """The run's parameters for one run composed once, otherwise the list of runs with their counts."""
    if len(ledger) == 1 and ledger[0][1] == 1:
        return ledger[0][0].as_dict()
    return {"runs": [dict(m.as_dict(), mechanism=type(m).__name__, count=c) for m, c in ledger]}


class _RunAccountant(Accountant):
    """Shared checks: the mechanism is one of the training runs and keeps the ledger's group size."""

    def __init__(self) -> None:
        super().__init__()  # the strong-adversary results are symmetric: no direction option

    def _refuse(self, mechanism: Any, why: str) -> None:
        raise DPValueError(f"{self.name} cannot compose {type(mechanism).__name__}: {why}")

    def _check_run(self, mechanism: Any) -> None:
        if not isinstance(mechanism, TRAINING_RUNS):
            self._refuse(mechanism, f"it accounts the training runs {_RUN_NAMES} of dputils.shuffling")
        if self.ledger and mechanism.group_size != self.ledger[0][0].group_size:
            self._refuse(
                mechanism,
                f"group_size {mechanism.group_size} differs from the group_size "
                f"{self.ledger[0][0].group_size} already composed (composed runs must "
                "protect the same group of examples)",
            )


@register(
    "shuffle-batch-clip",
    label="shuffling bound",
    answer="upper-bound",
    events={"shuffled-batch-clipping"},
    cost="cheap",
    rank=70,
    help="van Dijk et al.: batch clipping + shuffling is G_{sqrt(gE)/sigma}-DP (strong adversary; upper bound on eps)",
)
class GDPBoundAccountant(_RunAccountant):
    """mu-GDP bound of shuffled runs, turned into (eps, delta) by eq. (7): certified upper bounds."""

    name = "shuffle-batch-clip"

    def _check_supported(self, mechanism: Any) -> None:
        self._check_run(mechanism)
        if isinstance(mechanism, ShuffledIndividualClipping) and mechanism.group_size != 1:
            self._refuse(
                mechanism,
                f"group_size={mechanism.group_size}: G_(sqrt(gE)/sigma) holds for batch "
                "clipping; with individual clipping a round holding k group members is "
                "G_(k/sigma) (use MixtureAccountant, shuffle-individual-clip-exact)",
            )
        if not isinstance(mechanism, (ShuffledBatchClipping, ShuffledIndividualClipping)):
            self._refuse(
                mechanism,
                "with subsampling a round can be hit more than once, so Thm F.1's "
                "G_(sqrt(gE)/sigma) does not apply (use MixtureAccountant, "
                "subsample-batch-clip-exact)",
            )

    def mu(self) -> float:
        """``sqrt(sum_i count_i mu_i^2)``: the composed mu-GDP parameter."""
        self._require_ledger()
        return math.sqrt(sum(c * m.mu**2 for m, c in self.ledger))

    def _details(self, mu: float) -> dict[str, Any]:
        return dict(_details(self.ledger), mu=mu)

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        mu = self.mu()
        d = gdp_delta(eps, mu)
        return AccountingResult(d, None, d, "upper-bound", self.name, "delta", self._details(mu))

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        mu = self.mu()
        lo, hi = curves.gdp_epsilon_bracket(delta, mu)
        e = float(curves.gdp_epsilon(delta, mu))  # the bracket's upper end, nudged so delta(e) <= delta
        return AccountingResult(
            e, None, e, "upper-bound", self.name, "epsilon", dict(self._details(mu), bracket=[lo, hi])
        )


@register(
    "shuffle-batch-clip-exact",
    label="shuffling, exact",
    answer="bracket",
    events={"shuffled-batch-clipping"},
    cost="moderate",
    rank=71,
    options={"law": "exact"},
    help="batch clipping + shuffling, exact strong-adversary mixture (Def 5.2) with the exact occupancy law",
)
@register(
    "shuffle-batch-clip-as-printed",
    label="shuffling, as printed",
    answer="approximation",
    events={"shuffled-batch-clipping"},
    cost="moderate",
    rank=72,
    variant_of="shuffle-batch-clip-exact",
    options={"law": "as-printed"},
    help="batch clipping + shuffling with Thm F.1's printed (stars-and-bars) q_j: slightly optimistic, erratum",
)
@register(
    "shuffle-individual-clip-exact",
    label="individual clipping, exact",
    answer="bracket",
    events={"shuffled-individual-clipping"},
    cost="moderate",
    rank=73,
    options={"law": "exact"},
    help="individual clipping + shuffling, exact strong-adversary mixture with the partition law (--batch-size = m)",
)
@register(
    "subsample-batch-clip-exact",
    label="subsampling, exact",
    answer="bracket",
    events={"subsampled-batch-clipping"},
    cost="moderate",
    rank=74,
    options={"law": "exact"},
    help="batch clipping + subsampling (any g; = any clipping for g=1), exact strong-adversary Binomial mixture",
)
class MixtureAccountant(_RunAccountant):
    """(eps, delta) of the labelled mixture ``sum_c q(c) G_{c/sigma}`` (Def 5.2) of the composed runs.

    ``law="exact"``: the true strong-adversary law of each run (exact answers with a bracket);
    ``law="as-printed"``: Thm F.1's printed law for batch clipping with shuffling (an approximation)."""

    name = "shuffle-mixture"
    LAWS = ("exact", "as-printed")

    def __init__(self, law: str = "exact") -> None:
        super().__init__()
        self.law_kind = check_choice("law", law, self.LAWS)
        self._laws: list[C2Law] = []
        self._law: C2Law | None = None

    def _check_supported(self, mechanism: Any) -> None:
        self._check_run(mechanism)
        if self.law_kind == "as-printed" and not isinstance(mechanism, ShuffledBatchClipping):
            self._refuse(mechanism, "Thm F.1's printed law is stated for batch clipping with shuffling only")
        if not mechanism.has_sizes:
            self._refuse(mechanism, "the exact law of c^2 needs dataset_size and batch_size")
        if self.ledger and mechanism.sigma != self.ledger[0][0].sigma:
            self._refuse(
                mechanism,
                f"sigma {mechanism.sigma!r} differs from the sigma "
                f"{self.ledger[0][0].sigma!r} already composed; the law of c^2 is kept "
                "on the integer grid of one sigma (compose runs of one sigma, or use "
                "GDPBoundAccountant, which adds mu^2 across sigmas)",
            )

    def compose(self, mechanism: Any, count: int = 1) -> MixtureAccountant:
        """Add ``count`` independent repetitions of the run: its law of ``c^2`` convolved ``count`` times
        and with the laws already composed (the resource checks of the laws refuse up front)."""
        count = check_positive_int("count", count)
        self._check_supported(mechanism)
        law = mechanism.c2_law_as_printed() if self.law_kind == "as-printed" else mechanism.c2_law()
        if count > 1:
            law = law.compose(count)
        super().compose(mechanism, count)
        self._laws.append(law)
        return self

    def _invalidate(self) -> None:
        self._law = None

    @property
    def law(self) -> C2Law:
        """The law of ``c^2`` of the whole composition."""
        self._require_ledger()
        if self._law is None:
            law = self._laws[0]
            for other in self._laws[1:]:
                law = law.convolve(other)
            self._law = law
        return self._law

    @property
    def sigma(self) -> float:
        self._require_ledger()
        return self.ledger[0][0].sigma

    def _details(self) -> dict[str, Any]:
        law = self.law
        return dict(_details(self.ledger), law=self.law_kind, mean_c2=law.mean, max_c2=law.max_c2)

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = self._checked_epsilon(epsilon)
        d = mixture_delta(eps, self.law, self.sigma)
        if self.law_kind != "exact":
            return AccountingResult(d, None, None, "approximation", self.name, "delta", self._details())
        lo, hi = d * (1 - EXACT_REL_MARGIN), min(1.0, d * (1 + EXACT_REL_MARGIN))
        return AccountingResult(d, lo, hi, "exact", self.name, "delta", self._details())

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = self._checked_delta(delta)
        lo, hi = mixture_epsilon(delta, self.law, self.sigma)
        if self.law_kind != "exact":
            return AccountingResult(
                hi, None, None, "approximation", self.name, "epsilon", dict(self._details(), bracket=[lo, hi])
            )
        return AccountingResult(
            hi, lo * (1 - EXACT_REL_MARGIN), hi * (1 + EXACT_REL_MARGIN), "exact", self.name, "epsilon", self._details()
        )
