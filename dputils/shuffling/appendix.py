"""Appendix E and Theorem F.1 of van Dijk et al. (``vandijk_shuffling``), as printed and corrected.

Lemmas E.2, E.3 and E.5 bound the tails of the law of ``c^2`` under subsampling with a misapplied
Hoeffding step (``exp(-2 t^2)`` where ``exp(-2 t^2 / n)`` is right): they are kept as printed next to the
exact Binomial tails and valid Def 5.3/5.4 parameters read off the exact law. Lemma E.4 (a Chernoff
bound) and the tails of Thm F.1 are kept as printed; the tests check them against exact laws.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DPValueError, check_positive, check_positive_int, check_probability
from .laws import (
    C2Law,
    _check_divisible,
    bc_shuffle_law,
    bc_shuffle_law_as_printed,
    ic_shuffle_law,
    subsample_ic_g1_law,
    subsample_ic_law,
)
from .tradeoff import (
    bc_shuffle_mu,
    gdp_epsilon,
    generic_group_mu,
    lower_bound_delta,
    lower_bound_epsilon,
    lower_bound_tradeoff,
    mixture_delta,
    mixture_epsilon,
    mixture_tradeoff,
)


def lemma_e2_as_printed(epochs: float) -> dict[str, float]:
    """Lemma E.2/E.3 (g = 1, subsampling) as printed: ``(c^L)^2 = (1 + 1/sqrt(2E)) E`` with
    ``l = e^{-E}`` and ``(c^U)^2 = (1 - 1/sqrt(2E)) E`` with ``u = e^{-E}``.  The tails come from a
    misapplied Hoeffding bound (``exp(-2 t^2)`` instead of ``exp(-2 t^2 / n)``): *not valid*."""
    E = check_positive("epochs", epochs)
    return {
        "cL2": (1 + 1 / math.sqrt(2 * E)) * E,
        "l": math.exp(-E),
        "cU2": (1 - 1 / math.sqrt(2 * E)) * E,
        "u": math.exp(-E),
    }


def lemma_e5_as_printed(dataset_size: int, batch_size: int, group_size: int, epochs: int) -> dict[str, float]:
    """Lemma E.5 (batch clipping, subsampling, group g) as printed: Lemma E.2 with E replaced by qE,
    ``q = (N/s)(1 - binom(N-g, s)/binom(N, s))``.  Same Hoeffding error."""
    N = check_positive_int("dataset_size", dataset_size)
    s = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    E = check_positive_int("epochs", epochs)
    log_miss = sum(math.log((N - s - j) / (N - j)) for j in range(g))
    q = N / s * (-math.expm1(log_miss))
    out = lemma_e2_as_printed(q * E)
    out["q"] = q
    return out


def lemma_e4_as_printed(
    dataset_size: int, batch_size: int, group_size: int, epochs: int, gamma: float = 1.0
) -> dict[str, float]:
    """Lemma E.4 (individual clipping, subsampling, group g; a Chernoff-type argument):
    ``beta = e^{N/(N-g-m)} + gamma``, ``(c^L)^2 = beta min(m, g) g E``, ``l = e^{-gamma g E}``.
    Unlike E.2/E.3/E.5 this tail bound is a genuine Chernoff bound (checked against exact tails in the tests)."""
    N = check_positive_int("dataset_size", dataset_size)
    m = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    E = check_positive_int("epochs", epochs)
    gamma = check_positive("gamma", gamma)
    if N - g - m <= 0:
        raise DPValueError("dataset_size must exceed batch_size + group_size")
    beta = math.exp(N / (N - g - m)) + gamma
    return {"beta": beta, "cL2": beta * min(m, g) * g * E, "l": math.exp(-gamma * g * E)}


def subsampling_tail_probabilities(law: C2Law, epochs_equiv: float) -> dict[str, float]:
    """Exact tails of the c^2 law at the printed thresholds of Lemma E.2 (``E`` -> ``qE`` for E.5):
    ``P(c^2 > (c^L)^2)``, ``P(c^2 < (c^U)^2)`` next to the printed ``e^{-E}``, and the correct Hoeffding
    bound ``exp(-2 t^2 / n)`` (n = number of rounds) for the same deviation t."""
    pr = lemma_e2_as_printed(epochs_equiv)
    n = law.pmf.size - 1
    t = pr["cL2"] - epochs_equiv
    return {
        "P_above_cL2": law.sf(pr["cL2"]),
        "P_below_cU2": law.cdf_below(pr["cU2"]),
        "printed": pr["l"],
        "hoeffding_correct": math.exp(-2 * t * t / n),
    }


def subsampling_bounds_corrected(law: C2Law, tail: float) -> dict[str, float]:
    """Valid Def 5.3/5.4 parameters from the *exact* law: the smallest integer ``(c^L)^2`` whose right
    tail ``P(c^2 > (c^L)^2)`` is <= ``tail`` (then ``l`` = that exact tail), and the largest ``(c^U)^2``
    with ``P(c^2 < (c^U)^2) <= tail`` (then ``u`` = that exact tail)."""
    tail = check_probability("tail", tail)
    pmf = law.pmf
    sf = np.concatenate([np.cumsum(pmf[::-1])[::-1][1:], [0.0]])  # P(c2 > j)
    below = np.concatenate([[0.0], np.cumsum(pmf)[:-1]])  # P(c2 < j)
    cL2 = int(np.nonzero(sf <= tail)[0][0])
    ok = np.nonzero(below <= tail)[0]
    cU2 = int(ok[-1])
    return {"cL2": float(cL2), "l": float(sf[cL2]), "cU2": float(cU2), "u": float(below[cU2])}


def thm_f1_ic_tail(dataset_size: int, sub_batches: int, sub_batch_size: int, group_size: int) -> float:
    """Thm F.1 (general clipping, shuffling, group g): per-epoch ``l = g^2 m s / (N - g)`` bounding the
    probability that two differentiating samples share a round; ``c^L = sqrt(g)``."""
    N = check_positive_int("dataset_size", dataset_size)
    m = check_positive_int("sub_batches", sub_batches)
    s = check_positive_int("sub_batch_size", sub_batch_size)
    g = check_positive_int("group_size", group_size)
    if g >= N:
        raise DPValueError(f"group_size must be < dataset_size ({N})")
    return g * g * m * s / (N - g)


def thm_f1_bc_upper_u(dataset_size: int, batch_size: int, group_size: int) -> float:
    """Thm F.1 (batch clipping, g <= s) upper-bound tail ``u = g^2/(N/s - g - g^2)`` with ``c^U = sqrt(g)``."""
    N = check_positive_int("dataset_size", dataset_size)
    s = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    B = _check_divisible(N, s, "batch_size")
    den = B - g - g * g
    if den <= 0:
        raise DPValueError("dataset_size/batch_size must exceed group_size + group_size^2")
    return g * g / den


def lemma_e4_proof_steps(
    dataset_size: int, batch_size: int, group_size: int, epochs: int, gamma: float = 1.0
) -> dict[str, float]:
    """Two steps of the proof of Lemma E.4, as they should read and as printed (two misprints).

    With ``beta`` of :func:`lemma_e4_as_printed` and ``x = g beta / (N - g - m)``: the multinomial sum is
    ``(1 + x)^{m (N/m) E} = (1 + x)^{N E}`` (``log_sum``), printed once with the exponent ``(N/m) E``
    (``log_printed``); the last line's base is ``e^{N/(N-g-m)} / beta = 1 - gamma / beta`` (``base``), printed
    as ``e^{(N/(N-g-m))/beta} / beta`` (``base_printed``). Returns the four numbers and ``beta``."""
    e4 = lemma_e4_as_printed(dataset_size, batch_size, group_size, epochs, gamma)
    N, m, g, E, beta = dataset_size, batch_size, group_size, epochs, e4["beta"]
    x = g * beta / (N - g - m)
    return {
        "beta": beta,
        "log_sum": N * E * math.log1p(x),
        "log_printed": N / m * E * math.log1p(x),
        "base": math.exp(N / (N - g - m)) / beta,
        "base_printed": math.exp(N / (N - g - m) / beta) / beta,
    }


def group_privacy_epsilons(
    group_size: int,
    dataset_size: int,
    batch_size: int,
    sigma: float,
    epochs: int,
    delta: float,
    printed: bool = True,
    individual: bool = True,
) -> tuple:
    """ε at ``delta`` of a group of ``g`` examples after ``E`` epochs, five ways (Thm F.1 and Section 5):

    ``(g, bound, bc_exact, bc_printed, ic_exact, generic)``: the headline bound ``G_{sqrt(gE)/sigma}``; the
    exact mixture (Def 5.2) of batch clipping with shuffling under the occupancy law
    (:func:`~dputils.shuffling.laws.bc_shuffle_law`) and under the law printed in Thm F.1; the exact mixture
    of individual clipping with shuffling (partition law); and the generic group transform
    ``G_{g sqrt(E)/sigma}``. The per-epoch laws are composed over ``E`` epochs; ``printed=False`` or
    ``individual=False`` leaves that entry ``None``."""

    g = check_positive_int("group_size", group_size)

    def eps(law: C2Law) -> float:
        return mixture_epsilon(delta, law.compose(epochs), sigma)[1]

    return (
        g,
        gdp_epsilon(delta, bc_shuffle_mu(sigma, epochs, g)),
        eps(bc_shuffle_law(dataset_size, batch_size, g)),
        eps(bc_shuffle_law_as_printed(dataset_size, batch_size, g)) if printed else None,
        eps(ic_shuffle_law(dataset_size, batch_size, g)) if individual else None,
        gdp_epsilon(delta, generic_group_mu(sigma, epochs, g)),
    )


def subsampling_tails(dataset_size: int, batch_size: int, epochs: int) -> dict[str, float]:
    """The tails of Lemmas E.2/E.3 on the exact law, for subsampling with g = 1 at (N, m, E).

    ``c^2 ~ Binomial(n, m/N)`` with ``n = NE/m`` rounds (:func:`~dputils.shuffling.laws.subsample_ic_g1_law`).
    Returns ``rounds`` (n) and, from :func:`subsampling_tail_probabilities` at the printed thresholds
    ``(c^L)^2 = (1 + 1/sqrt(2E)) E`` and ``(c^U)^2 = (1 - 1/sqrt(2E)) E``: the exact ``P(c^2 > (c^L)^2)``
    (``P_above_cL2``) and ``P(c^2 < (c^U)^2)`` (``P_below_cU2``), the paper's ``e^{-E}`` (``printed``) and the
    correct Hoeffding bound ``exp(-2 t^2 / n)`` with ``t = E / sqrt(2E)`` (``hoeffding_correct``)."""
    law = subsample_ic_g1_law(dataset_size, batch_size, epochs)
    return {"rounds": law.pmf.size - 1, **subsampling_tail_probabilities(law, epochs)}


def lemma_e2_deltas(
    epsilon: float, sigma: float, epochs: int, dataset_size: int = 60000, batch_size: int = 256
) -> dict[str, float]:
    """δ at ``epsilon`` of subsampling with g = 1 (the notes' example N = 60000, m = 256 by default), three ways.

    ``exact``: the exact mixture (Def 5.2, :func:`~dputils.shuffling.tradeoff.mixture_delta`) under the Binomial
    law of c^2; ``claimed``: the lower-bound function of Def 5.4 with the parameters Lemma E.2 prints
    (:func:`lemma_e2_as_printed`: ``(c^L)^2 = (1 + 1/sqrt(2E)) E``, ``l = e^{-E}``), which must not exceed the
    exact δ if the lemma held; ``corrected``: Def 5.4 with ``(c^L)^2`` the smallest integer whose exact right
    tail is at most ``e^{-E}`` and ``l`` that tail (:func:`subsampling_bounds_corrected`), returned as
    ``cL2_corrected``."""
    law = subsample_ic_g1_law(dataset_size, batch_size, epochs)
    pr = lemma_e2_as_printed(epochs)
    fix = subsampling_bounds_corrected(law, math.exp(-epochs))
    return dict(
        exact=mixture_delta(epsilon, law, sigma),
        claimed=lower_bound_delta(epsilon, math.sqrt(pr["cL2"]), pr["l"], sigma),
        corrected=lower_bound_delta(epsilon, math.sqrt(fix["cL2"]), fix["l"], sigma),
        cL2_corrected=fix["cL2"],
    )


def lemma_e2_tradeoff_excess(
    alpha, sigma: float, epochs: int, dataset_size: int = 60000, batch_size: int = 256
) -> np.ndarray:
    """The lower-bound function Lemma E.2 claims minus the exact trade-off function, at each of ``alpha``.

    Claimed: Def 5.4's ``G_{c^L/sigma}(min{1, alpha + l})`` (:func:`~dputils.shuffling.tradeoff.lower_bound_tradeoff`)
    with the printed ``(c^L)^2 = (1 + 1/sqrt(2E)) E`` and ``l = e^{-E}``; exact: Def 5.2 under the Binomial law
    of c^2 (subsampling, g = 1). A valid lower bound makes every entry <= 0; a positive entry is a violation."""
    pr = lemma_e2_as_printed(epochs)
    law = subsample_ic_g1_law(dataset_size, batch_size, epochs)
    a = np.asarray(alpha, dtype=float)
    return lower_bound_tradeoff(a, math.sqrt(pr["cL2"]), pr["l"], sigma) - mixture_tradeoff(a, law, sigma)


def lemma_e4_against_exact(
    dataset_size: int,
    batch_size: int,
    group_size: int,
    epochs: int,
    gamma: float = 1.0,
    sigma: float = 2.0,
    delta: float = 1e-5,
) -> dict[str, float]:
    """Lemma E.4 (individual clipping, subsampling, a group of g) against the exact law of ``c^2 = sum_r K_r^2``
    (``K_r`` hypergeometric, :func:`~dputils.shuffling.laws.subsample_ic_law`).

    Returns ``mean_c2`` (the exact E[c^2]), the lemma's ``cL2 = beta min(m, g) g E`` and ``l = e^{-gamma g E}``
    (:func:`lemma_e4_as_printed`), the exact tail ``P(c^2 > (c^L)^2)`` (``exact_tail``, at most ``l`` when the
    lemma holds), the ε at ``delta`` of Def 5.4 with these parameters (``eps_lemma``; infinite where
    ``l >= delta``: an additive tail certifies nothing below it) and the exact mixture's ε (``eps_exact``,
    the upper end of :func:`~dputils.shuffling.tradeoff.mixture_epsilon`'s bracket)."""
    law = subsample_ic_law(dataset_size, batch_size, group_size, epochs)
    e4 = lemma_e4_as_printed(dataset_size, batch_size, group_size, epochs, gamma=gamma)
    eps_e4 = lower_bound_epsilon(delta, math.sqrt(e4["cL2"]), e4["l"], sigma) if e4["l"] < delta else math.inf
    return {
        "mean_c2": law.mean,
        "cL2": e4["cL2"],
        "l": e4["l"],
        "exact_tail": law.sf(e4["cL2"]),
        "eps_lemma": eps_e4,
        "eps_exact": mixture_epsilon(delta, law, sigma)[1],
    }
