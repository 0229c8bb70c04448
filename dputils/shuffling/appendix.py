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
from .laws import C2Law, _check_divisible, bc_shuffle_law, bc_shuffle_law_as_printed, ic_shuffle_law
from .tradeoff import bc_shuffle_mu, gdp_epsilon, generic_group_mu, mixture_epsilon


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
