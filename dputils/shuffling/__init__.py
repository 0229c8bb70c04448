"""f-DP of generalized DP-SGD with shuffling and batch clipping, under the paper's strong adversary.

Reference: van Dijk, Nguyen, Nguyen, Nguyen, "Generalizing DP-SGD with Shuffling and Batch Clipping"
(book key ``vandijk_shuffling``). Equation, lemma and theorem numbers below are the paper's.

The strong adversary knows every sampling coin (permutations, rounds, sub-batches), so a round in which
``k`` of the ``m`` sub-batches contain a differentiating sample is exactly the Gaussian trade-off
``G_{k/sigma}`` (noise std ``2 C sigma``, sensitivity ``2 k C``).  Counting over all rounds and epochs,
``c^2 = sum_k c_k k^2`` is a random integer with law ``q_E`` (Def 5.1) and the mechanism is the
*labelled* mixture ``sum_c q_E(c) G_{c/sigma}`` (eq. 14).  Its trade-off function is Def 5.2 /
Lemma B.5; its privacy profile is the ``q_E``-mixture of Gaussian privacy profiles.

What is here:

* Gaussian trade-off ``G_mu`` and the (eps, delta) conversion of mu-GDP (eq. 7), in log space;
* the headline bound ``G_{sqrt(gE)/sigma}`` for batch clipping with shuffling (Thm F.1) and the generic
  group-privacy transform ``G_{g sqrt(E)/sigma}`` it improves on;
* the laws of ``c^2``: exact occupancy law (batch clipping + shuffling), the law *as printed* in
  Thm F.1 (stars and bars; wrong), the partition law (individual clipping + shuffling), Binomial laws
  for subsampling (Lemma E.2, E.5), a Monte Carlo sampler of Algorithm 1's index sampling, and
  composition over epochs by convolution in ``c^2``;
* the exact trade-off function (Def 5.2), its privacy profile delta(eps) and eps(delta);
* the bound functions of Def 5.3 (upper, with its closed-form convex envelope) and Def 5.4 (lower);
* Lemmas E.2/E.3/E.5 *as printed* (their Hoeffding step is wrong) and corrected versions using exact
  Binomial tails;
* conversions to RDP / zCDP / tCDP (Section 2) and the generic group transforms;
* standard-model comparisons: the Dong-Roth-Su CLT (uniform and Poisson sampling) and the integer-order
  RDP of the Poisson-subsampled Gaussian with the classic and the improved conversion;
* training runs as mechanism objects (:class:`ShuffledBatchClipping`, :class:`ShuffledIndividualClipping`,
  :class:`SubsampledBatchClipping`) and two accountants of the one family
  (:class:`dputils.accountants.base.Accountant`) that compose them: :class:`GDPBoundAccountant`
  (the headline bound, upper bounds) and :class:`MixtureAccountant` (the exact mixture);
* accountants for the command line: ``shuffle-batch-clip`` (headline bound) and the refined
  ``shuffle-batch-clip-exact``, ``shuffle-batch-clip-as-printed``, ``shuffle-individual-clip-exact``,
  ``subsample-batch-clip-exact``.

The package's modules: :mod:`.laws` (the laws of c^2), :mod:`.tradeoff` (Gaussian trade-offs, mu-GDP, the
mixture of Def 5.2, Defs 5.3/5.4), :mod:`.appendix` (Appendix E and Thm F.1's tails), :mod:`.conversions`
(Section 2 and the standard-model comparisons), :mod:`.mechanisms` and :mod:`.accountants`
(their command-line options are in :mod:`dputils.cli.runs`).

mu-GDP delta/epsilon, the Gaussian hockey-stick divergence, the inversion of a privacy profile and the
subsampled-Gaussian RDP come from the foundation (:mod:`dputils.curves`, :mod:`dputils.accountants.rdp`).
"""

from __future__ import annotations

from .accountants import GDPBoundAccountant, MixtureAccountant
from .appendix import (
    group_privacy_epsilons,
    lemma_e2_as_printed,
    lemma_e2_deltas,
    lemma_e2_tradeoff_excess,
    lemma_e4_against_exact,
    lemma_e4_as_printed,
    lemma_e4_proof_steps,
    lemma_e5_as_printed,
    subsampling_bounds_corrected,
    subsampling_tail_probabilities,
    subsampling_tails,
    thm_f1_bc_upper_u,
    thm_f1_ic_tail,
)
from .conversions import (
    clt_mu_poisson,
    clt_mu_uniform,
    epsilon_against_batch_size,
    gaussian_renyi_by_quadrature,
    gdp_to_rdp,
    gdp_to_tcdp,
    gdp_to_zcdp,
    generic_group_eps_delta,
    rdp_epsilon,
    rdp_poisson_gaussian,
    strong_vs_standard_epsilons,
    tcdp_as_printed,
)
from .laws import (
    C2Law,
    bc_shuffle_law,
    bc_shuffle_law_as_printed,
    binomial_law,
    ic_shuffle_law,
    law_deviation,
    monte_carlo_c2_law,
    subsample_bc_law,
    subsample_ic_g1_law,
    subsample_ic_law,
)
from .mechanisms import (
    TRAINING_RUNS,
    ShuffledBatchClipping,
    ShuffledIndividualClipping,
    SubsampledBatchClipping,
    clipping_accuracy,
    clipping_accuracy_gap,
    clipping_sweep,
)
from .tradeoff import (  # noqa: F401  (_brentq, _invert_decreasing: the bounded searches, tested by name)
    _brentq,
    _invert_decreasing,
    bc_shuffle_mu,
    f_eps_delta,
    f_eps_delta_as_printed,
    gaussian_tradeoff,
    gdp_delta,
    gdp_delta_three_ways,
    gdp_epsilon,
    generic_group_mu,
    lower_bound_beta,
    lower_bound_delta,
    lower_bound_epsilon,
    lower_bound_tradeoff,
    lower_convex_envelope,
    mixture_delta,
    mixture_epsilon,
    mixture_tradeoff,
    mixture_tradeoff_by_optimization,
    mixture_tradeoff_curve,
    mixture_tradeoff_two_ways,
    monte_carlo_mixture_delta,
    shuffle_g1_mu,
    strong_adversary_tradeoff_curves,
    strong_adversary_tradeoffs,
    upper_bound_betas,
    upper_bound_envelope_gap,
    upper_bound_tradeoff,
    upper_bound_tradeoff_numerical,
)

__all__ = [
    "gaussian_tradeoff",
    "f_eps_delta",
    "f_eps_delta_as_printed",
    "gdp_delta",
    "gdp_epsilon",
    "bc_shuffle_mu",
    "shuffle_g1_mu",
    "generic_group_mu",
    "C2Law",
    "bc_shuffle_law",
    "bc_shuffle_law_as_printed",
    "ic_shuffle_law",
    "binomial_law",
    "subsample_ic_g1_law",
    "subsample_bc_law",
    "subsample_ic_law",
    "monte_carlo_c2_law",
    "mixture_tradeoff",
    "mixture_tradeoff_curve",
    "mixture_delta",
    "mixture_epsilon",
    "upper_bound_betas",
    "upper_bound_tradeoff",
    "lower_bound_beta",
    "lower_bound_tradeoff",
    "lower_bound_delta",
    "lower_bound_epsilon",
    "lemma_e2_as_printed",
    "lemma_e5_as_printed",
    "lemma_e4_as_printed",
    "subsampling_tail_probabilities",
    "subsampling_bounds_corrected",
    "thm_f1_ic_tail",
    "thm_f1_bc_upper_u",
    "gdp_to_rdp",
    "gdp_to_zcdp",
    "gdp_to_tcdp",
    "generic_group_eps_delta",
    "clt_mu_uniform",
    "clt_mu_poisson",
    "rdp_poisson_gaussian",
    "rdp_epsilon",
    "GDPBoundAccountant",
    "MixtureAccountant",
    "ShuffledBatchClipping",
    "ShuffledIndividualClipping",
    "SubsampledBatchClipping",
    "TRAINING_RUNS",
    "lower_convex_envelope",
    "upper_bound_tradeoff_numerical",
    "mixture_tradeoff_by_optimization",
    "monte_carlo_mixture_delta",
    "group_privacy_epsilons",
    "lemma_e4_proof_steps",
    "strong_vs_standard_epsilons",
    "clipping_accuracy",
    "clipping_sweep",
    "law_deviation",
    "gdp_delta_three_ways",
    "mixture_tradeoff_two_ways",
    "upper_bound_envelope_gap",
    "strong_adversary_tradeoffs",
    "subsampling_tails",
    "lemma_e2_deltas",
    "lemma_e2_tradeoff_excess",
    "lemma_e4_against_exact",
    "gaussian_renyi_by_quadrature",
    "epsilon_against_batch_size",
    "clipping_accuracy_gap",
    "tcdp_as_printed",
    "strong_adversary_tradeoff_curves",
]
