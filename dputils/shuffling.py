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
* accountants for the command line: ``shuffle-batch-clip`` (headline bound) and the refined
  ``shuffle-batch-clip-exact``, ``shuffle-batch-clip-as-printed``, ``shuffle-individual-clip-exact``,
  ``subsample-batch-clip-exact``.

mu-GDP delta/epsilon and the subsampled-Gaussian RDP come from the foundation (:mod:`dputils.curves`,
:mod:`dputils.accountants.rdp`); ``_log_gauss_hockey`` below is the same formula vectorized over the
mixture components' mu.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterable

import numpy as np
from scipy import optimize, special, stats

from .errors import (
    DPValueError,
    NumericalError,
    check_choice,
    check_delta,
    check_epsilon,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_probability,
)
from . import curves
from .accountants import rdp as _rdp
from .resources import check_memory, check_work
from .accountants.base import AccountingResult

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
]


# ---------------------------------------------------------------------------------------------
# Gaussian trade-off functions and mu-GDP
# ---------------------------------------------------------------------------------------------


def gaussian_tradeoff(alpha, mu: float):
    """``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` (Section 4), computed as
    ``ndtr(-ndtri(alpha) - mu)`` which keeps precision for alpha down to 1e-300."""
    mu = check_nonnegative("mu", mu)
    a = np.asarray(alpha, dtype=float)
    if np.any((a < 0) | (a > 1)) or np.any(np.isnan(a)):
        raise DPValueError("alpha must be in [0, 1]")
    out = special.ndtr(-special.ndtri(a) - mu)
    return out if out.ndim else float(out)


def f_eps_delta(alpha, epsilon: float, delta: float):
    """The (eps, delta)-DP trade-off ``max{0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)}``
    (Wasserman-Zhou; DRS Prop 2.5).  The paper prints ``min``: that is a typo (see
    :func:`f_eps_delta_as_printed`)."""
    epsilon = check_epsilon(epsilon)
    delta = check_probability("delta", delta, allow_zero=True)
    a = np.asarray(alpha, dtype=float)
    out = np.maximum(0.0, np.maximum(1 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1 - delta - a)))
    return out if out.ndim else float(out)


def f_eps_delta_as_printed(alpha, epsilon: float, delta: float):
    """The paper's printed ``min{0, ...}``: identically <= 0, so not a trade-off function (typo)."""
    epsilon = check_epsilon(epsilon)
    delta = check_probability("delta", delta, allow_zero=True)
    a = np.asarray(alpha, dtype=float)
    out = np.minimum(0.0, np.minimum(1 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1 - delta - a)))
    return out if out.ndim else float(out)


def _log_gauss_hockey(eps: float, mu: np.ndarray) -> np.ndarray:
    """log of ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` for each mu > 0 (eq. 7), stable:
    ``log Phi(a) + log(-expm1(eps + log Phi(b) - log Phi(a)))``."""
    mu = np.asarray(mu, dtype=float)
    la = special.log_ndtr(-eps / mu + mu / 2)
    lb = special.log_ndtr(-eps / mu - mu / 2) + eps
    d = lb - la  # < 0 for mu > 0
    with np.errstate(divide="ignore"):
        return la + np.log(-np.expm1(np.minimum(d, -1e-300)))


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of mu-GDP, eq. (7); the foundation's :func:`dputils.curves.gdp_delta` (0 for mu = 0)."""
    epsilon = check_epsilon(epsilon)
    mu = check_nonnegative("mu", mu)
    return 0.0 if mu == 0 else float(curves.gdp_delta(epsilon, mu))


#: Elementary operations counted for one Python-level step with big integers (for the work estimates).
_PY_OP = 300.0
#: Cap on the steps of every bracket expansion / certification loop of the root finders below.
_MAX_SEARCH_STEPS = 200


def _brentq(fn: Callable[[float], float], a: float, b: float, what: str, **kw) -> float:
    """``scipy.optimize.brentq`` with its failures (no sign change, no convergence within ``maxiter``, a nan)
    reported as :class:`NumericalError` naming ``what``."""
    kw.setdefault("maxiter", 500)
    try:
        return optimize.brentq(fn, a, b, **kw)
    except (RuntimeError, ValueError) as exc:
        raise NumericalError(f"{what}: root search failed ({' '.join(str(exc).split())})") from None


def _invert_decreasing(log_delta_fn: Callable[[float], float], delta: float, what: str) -> tuple[float, float]:
    """Bracket eps with log_delta_fn(eps) = log(delta) for a non-increasing delta(eps).

    Returns (lo, hi) with delta(lo) >= delta >= delta(hi) and hi - lo tiny; (0, 0) if delta(0) <= delta.
    Every loop is bounded (:data:`_MAX_SEARCH_STEPS`); :class:`NumericalError` when one does not end.
    """
    target = math.log(delta)

    def fn(e: float) -> float:
        v = log_delta_fn(e) - target
        if math.isnan(v):
            raise NumericalError(f"{what}: log delta is nan at epsilon={e!r}")
        return v

    if fn(0.0) <= 0:
        return 0.0, 0.0
    hi = 1.0
    while fn(hi) > 0:
        hi *= 2
        if hi > 1e7:
            raise NumericalError(f"{what}: no epsilon below 1e7 reaches delta={delta!r}")
    lo = 0.0 if hi == 1.0 else hi / 2
    root = _brentq(fn, lo, hi, what, xtol=1e-12, rtol=1e-12)
    # certify the bracket around the root (doubling steps: ends within ~60 steps unless fn is broken)
    step = max(1e-11, 1e-11 * root)
    lo_b, hi_b = max(0.0, root - step), root + step
    for _ in range(_MAX_SEARCH_STEPS):
        if not fn(hi_b) > 0:
            break
        hi_b = min(hi_b + step, hi)
        step *= 2
    else:
        raise NumericalError(f"{what}: could not certify the upper end of the epsilon bracket")
    step = max(1e-11, 1e-11 * root)
    for _ in range(_MAX_SEARCH_STEPS):
        if not (lo_b > 0 and fn(lo_b) < 0):
            break
        lo_b = max(lo, lo_b - step)
        step *= 2
    else:
        raise NumericalError(f"{what}: could not certify the lower end of the epsilon bracket")
    return lo_b, hi_b


def gdp_epsilon(delta: float, mu: float) -> float:
    """eps(delta) of mu-GDP; the foundation's conservative :func:`dputils.curves.gdp_epsilon` (0 for mu = 0)."""
    delta = check_delta(delta)
    mu = check_nonnegative("mu", mu)
    return 0.0 if mu == 0 else float(curves.gdp_epsilon(delta, mu))


def bc_shuffle_mu(sigma: float, epochs: int, group_size: int = 1) -> float:
    """``mu = sqrt(g E)/sigma``: batch clipping (m = 1) with shuffling is ``G_{sqrt(gE)/sigma}``-DP for groups
    of size g (Thm F.1).  At most g rounds per epoch contain a differentiating sample, each is
    ``G_{1/sigma}``, and ``G`` composes as ``G_{sqrt(sum mu_i^2)}``.  Any s and N."""
    sigma = check_positive("sigma", sigma)
    E = check_positive_int("epochs", epochs)
    g = check_positive_int("group_size", group_size)
    return math.sqrt(g * E) / sigma


def shuffle_g1_mu(sigma: float, epochs: int) -> float:
    """``mu = sqrt(E)/sigma``: any clipping with shuffling, g = 1, tight for the strong adversary (Lemma F.2)."""
    return bc_shuffle_mu(sigma, epochs, 1)


def generic_group_mu(sigma: float, epochs: int, group_size: int) -> float:
    """``mu = g sqrt(E)/sigma``: the generic f-DP group transform of ``G_{sqrt(E)/sigma}`` (DRS Thm 2.14)."""
    return check_positive_int("group_size", group_size) * shuffle_g1_mu(sigma, epochs)


# ---------------------------------------------------------------------------------------------
# Laws of c^2 (Def 5.1)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class C2Law:
    """A law of the integer ``c^2 = sum_k c_k k^2``: ``pmf[j] = P(c^2 = j)``, j = 0..len(pmf)-1."""

    pmf: np.ndarray
    label: str = ""

    def __post_init__(self) -> None:
        p = np.asarray(self.pmf, dtype=float)
        if p.ndim != 1 or p.size == 0 or np.any(p < 0) or not np.all(np.isfinite(p)):
            raise DPValueError("pmf must be a non-empty 1-d array of non-negative numbers")
        s = p.sum()
        if abs(s - 1) > 1e-9:
            raise DPValueError(f"pmf must sum to 1, sums to {s!r}")
        object.__setattr__(self, "pmf", p / s)

    @property
    def support(self) -> np.ndarray:
        """The values of c^2 with positive probability."""
        return np.nonzero(self.pmf > 0)[0]

    @property
    def mean(self) -> float:
        return float(np.dot(np.arange(self.pmf.size), self.pmf))

    @property
    def max_c2(self) -> int:
        return int(self.support.max())

    def sf(self, k: float) -> float:
        """P(c^2 > k)."""
        j = np.arange(self.pmf.size)
        return float(self.pmf[j > k].sum())

    def cdf_below(self, k: float) -> float:
        """P(c^2 < k)."""
        j = np.arange(self.pmf.size)
        return float(self.pmf[j < k].sum())

    def compose(self, epochs: int) -> "C2Law":
        """The law of the sum over ``epochs`` independent epochs: E-fold convolution in c^2 (App. C.15).

        For labelled Gaussian mixtures this is exactly the f-DP composition ``f^{(x)E}``."""
        E = check_positive_int("epochs", epochs)
        n_final = (self.pmf.size - 1) * float(E) + 1  # length of the composed pmf
        check_memory("epochs", 8.0 * 4 * n_final, f"the {E}-fold composed law of c^2 ({n_final:.3g} values)",
                     hint="use fewer epochs")
        # direct convolutions by repeated squaring: at most ~2 n_final^2 multiply-adds in all
        check_work("epochs", 2.0 * n_final * n_final, "multiply-adds",
                   hint="use fewer epochs")
        result = np.array([1.0])
        base = self.pmf
        while E:
            if E & 1:
                result = np.convolve(result, base)
            E >>= 1
            if E:
                base = np.convolve(base, base)
        result = np.clip(result, 0.0, None)
        return C2Law(result / result.sum(), f"{self.label} x{epochs}" if self.label else "")

    def as_dict(self) -> dict[int, float]:
        return {int(j): float(self.pmf[j]) for j in self.support}


def _falling(x: int, k: int) -> int:
    out = 1
    for i in range(k):
        out *= x - i
    return out


def _check_divisible(N: int, b: int, what: str) -> int:
    if N % b:
        raise DPValueError(f"dataset_size must be a multiple of {what} ({b}); got {N}")
    return N // b


def bc_shuffle_law(dataset_size: int, batch_size: int, group_size: int) -> C2Law:
    """Per-epoch law of c^2 for batch clipping (m = 1) with shuffling: exact occupancy law.

    A uniformly random permutation places the g differentiating samples in g distinct positions among
    N = B s (B = N/s rounds of s samples).  ``c^2 = j`` = the number of rounds hit, and

        P(j) = binom(B, j) sum_{i=0}^{j} (-1)^i binom(j, i) ((j - i) s)_g / (N)_g

    (inclusion-exclusion over the rounds that stay empty; ``(x)_g`` the falling factorial).  Exact
    rational arithmetic.  This replaces the stars-and-bars ``q_j`` printed in Thm F.1."""
    N = check_positive_int("dataset_size", dataset_size)
    s = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    if g > N:
        raise DPValueError(f"group_size must be <= dataset_size ({N}); got {g}")
    B = _check_divisible(N, s, "batch_size")
    J = min(g, B)
    # J^2/2 inclusion-exclusion terms, each a falling factorial of g big-integer products
    check_work("group_size", _PY_OP * (J * (J + 1) / 2.0) * g, "operations",
               hint=f"the exact occupancy law with g={g} in {B} rounds; use a smaller group size")
    denom = _falling(N, g)
    pmf = np.zeros(min(g, B) + 1)
    for j in range(1, min(g, B) + 1):
        num = sum((-1) ** i * math.comb(j, i) * _falling((j - i) * s, g) for i in range(j + 1))
        pmf[j] = float(Fraction(math.comb(B, j) * num, denom))
    return C2Law(pmf, f"BC+SH exact (N={N}, s={s}, g={g})")


def bc_shuffle_law_as_printed(dataset_size: int, batch_size: int, group_size: int) -> C2Law:
    """The per-epoch law printed in Thm F.1: ``q_j = binom(N/s, j) binom(g-1, j-1) / binom(N/s - 1 + g, g)``.

    This is the Bose-Einstein (stars-and-bars) count of multisets of rounds, not the law of a random
    permutation: it over-weights collisions and is slightly optimistic.  Kept to show the erratum."""
    N = check_positive_int("dataset_size", dataset_size)
    s = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    B = _check_divisible(N, s, "batch_size")
    check_memory("group_size", 8.0 * (g + 1), "the printed law of c^2")
    check_work("group_size", _PY_OP * float(g) * g, "operations",
               hint="g big binomial coefficients of g digits each; use a smaller group size")
    denom = math.comb(B - 1 + g, g)
    pmf = np.zeros(g + 1)
    for j in range(1, g + 1):
        pmf[j] = float(Fraction(math.comb(B, j) * math.comb(g - 1, j - 1), denom))
    return C2Law(pmf, f"BC+SH as printed (N={N}, s={s}, g={g})")


def _partitions(n: int, max_part: int | None = None) -> Iterable[tuple[int, ...]]:
    max_part = n if max_part is None else max_part
    if n == 0:
        yield ()
        return
    for k in range(min(n, max_part), 0, -1):
        for rest in _partitions(n - k, k):
            yield (k,) + rest


def ic_shuffle_law(dataset_size: int, batch_size: int, group_size: int) -> C2Law:
    """Per-epoch law of c^2 for individual clipping (s = 1, m = batch size) with shuffling.

    A round with k differentiating samples has k affected clipped terms, sensitivity 2kC, i.e. it is
    ``G_{k/sigma}``; so ``c^2 = sum_rounds k^2``.  With B = N/m rounds and an occupancy pattern given by
    the integer partition lambda of g (l parts, multiplicities mult), the number of placements is
    ``B!/(B-l)!/prod mult! * g!/prod lambda_i! * prod (m)_{lambda_i}`` out of ``(N)_g``.  Exact."""
    N = check_positive_int("dataset_size", dataset_size)
    m = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    if g > N:
        raise DPValueError(f"group_size must be <= dataset_size ({N}); got {g}")
    B = _check_divisible(N, m, "batch_size")
    # every integer partition of g is enumerated (about exp(pi sqrt(2g/3)) / (4 sqrt(3) g) of them)
    n_part = math.exp(min(math.pi * math.sqrt(2.0 * g / 3.0), 700.0)) / (4.0 * math.sqrt(3.0) * g)
    check_work("group_size", _PY_OP * n_part * g, "operations",
               hint=f"about {n_part:.3g} integer partitions of g={g}; use a smaller group size")
    check_memory("group_size", 8.0 * (g * g + 1), "the law of c^2 (g^2 + 1 values)")
    denom = _falling(N, g)
    pmf = np.zeros(g * g + 1)
    acc: dict[int, int] = {}
    for lam in _partitions(g):
        ell = len(lam)
        if ell > B or lam[0] > m:
            continue
        mult = 1
        for v in set(lam):
            mult *= math.factorial(lam.count(v))
        num_assign = math.factorial(g)
        for part in lam:
            num_assign //= math.factorial(part)
        pos = 1
        for part in lam:
            pos *= _falling(m, part)
        count = (_falling(B, ell) // mult) * num_assign * pos
        c2 = sum(p * p for p in lam)
        acc[c2] = acc.get(c2, 0) + count
    for c2, count in acc.items():
        pmf[c2] = float(Fraction(count, denom))
    return C2Law(pmf, f"IC+SH exact (N={N}, m={m}, g={g})")


def binomial_law(n: int, p: float, label: str = "") -> C2Law:
    """c^2 ~ Binomial(n, p) (no tail truncated)."""
    n = check_positive_int("n", n)
    p = check_probability("p", p)
    check_memory("n", 8.0 * 6 * (n + 1.0), f"a Binomial law with {n} rounds", hint="use fewer rounds (epochs)")
    check_work("n", 200.0 * (n + 1.0), "operations", hint="use fewer rounds (epochs)")
    return C2Law(stats.binom.pmf(np.arange(n + 1), n, p), label)


def _check_rounds(T: int) -> None:
    """The Binomial law over T = N E / s rounds holds T + 1 probabilities (a few arrays of them)."""
    check_memory("epochs", 8.0 * 6 * (T + 1.0), f"the law of c^2 over T = N E / s = {T} rounds",
                 hint="use fewer epochs")
    check_work("epochs", 200.0 * (T + 1.0), "operations", hint="use fewer epochs")


def subsample_ic_g1_law(dataset_size: int, batch_size: int, epochs: int) -> C2Law:
    """Law of c^2 over all epochs for subsampling with g = 1 (Lemma E.2; Lemma E.3 with batch = ms):
    ``c^2 ~ Binomial(round(N E / b), b / N)`` for rounds of b samples.  N/b need not be an integer;
    the number of rounds is rounded to the nearest integer, as in the note's table."""
    N = check_positive_int("dataset_size", dataset_size)
    b = check_positive_int("batch_size", batch_size)
    E = check_positive_int("epochs", epochs)
    if b > N:
        raise DPValueError(f"batch_size must be <= dataset_size ({N}); got {b}")
    T = max(1, int(round(N * E / b)))
    _check_rounds(T)
    return binomial_law(T, b / N, f"SS g=1 (N={N}, b={b}, E={E})")


def subsample_bc_law(dataset_size: int, batch_size: int, epochs: int, group_size: int = 1) -> C2Law:
    """Law of c^2 over all epochs for batch clipping (m = 1) with subsampling (Lemma E.5):
    each of the T = N E / s rounds is hit independently with ``q_1 = 1 - prod_{j<g} (N-s-j)/(N-j)``
    and then contributes ``G_{1/sigma}``; ``c^2 ~ Binomial(T, q_1)``."""
    N = check_positive_int("dataset_size", dataset_size)
    s = check_positive_int("batch_size", batch_size)
    E = check_positive_int("epochs", epochs)
    g = check_positive_int("group_size", group_size)
    if s + g > N:
        raise DPValueError(f"batch_size + group_size must be <= dataset_size ({N})")
    T = max(1, int(round(N * E / s)))
    _check_rounds(T)
    check_work("group_size", _PY_OP * g, "operations", hint="use a smaller group size")
    log_miss = sum(math.log((N - s - j) / (N - j)) for j in range(g))
    q1 = -math.expm1(log_miss)
    return binomial_law(T, q1, f"BC+SS (N={N}, s={s}, E={E}, g={g})")


def monte_carlo_c2_law(
    dataset_size: int,
    sub_batch_size: int,
    sub_batches: int,
    group_size: int,
    n_draws: int,
    rng: np.random.Generator,
    sampler: str = "shuffle",
    epochs: int = 1,
) -> C2Law:
    """Empirical law of c^2 by simulating the index sampling of Algorithm 1 (data are irrelevant, App. C.15).

    ``shuffle``: the g differentiating samples sit at g distinct uniform positions of the permuted index
    list (rejection of repeated positions keeps the draw exact); position p is in round ``p // (m s)``
    and sub-batch ``p // s``.  ``subsample``: every round draws ``m s`` of N indices; the number of
    differentiating samples it holds is hypergeometric, and those are spread over the ``m s`` slots of
    the round.  Per round ``L`` = number of distinct sub-batches hit, ``c^2 = sum L^2``."""
    N = check_positive_int("dataset_size", dataset_size)
    s = check_positive_int("sub_batch_size", sub_batch_size)
    m = check_positive_int("sub_batches", sub_batches)
    g = check_positive_int("group_size", group_size)
    n = check_positive_int("n_draws", n_draws)
    E = check_positive_int("epochs", epochs)
    check_choice("sampler", sampler, ("shuffle", "subsample"))
    if g > N:
        raise DPValueError(f"group_size must be <= dataset_size ({N}); got {g}")
    R = _check_divisible(N, m * s, "sub_batches * sub_batch_size")
    # the c^2 of a draw compares all pairs of its g positions: n x g x g booleans at once
    check_memory("n_draws", 8.0 * 4 * n * g + 1.0 * 3 * n * g * g, f"{n} draws of {g} positions",
                 hint="use fewer draws or a smaller group size")
    rounds = E if sampler == "shuffle" else R * E
    check_work("n_draws", float(rounds) * n * (10.0 * g * g + 50.0 * g), "operations",
               hint="use fewer draws, epochs or a smaller group size")
    total = np.zeros(n, dtype=np.int64)

    def distinct_positions(rows: int, space: int, k: int) -> np.ndarray:
        pos = rng.integers(0, space, size=(rows, k))
        for _ in range(10_000):  # rejection: each round keeps a row with probability (space)_k / space^k
            srt = np.sort(pos, axis=1)
            bad = np.any(srt[:, 1:] == srt[:, :-1], axis=1) if k > 1 else np.zeros(rows, bool)
            if not bad.any():
                return pos
            pos[bad] = rng.integers(0, space, size=(int(bad.sum()), k))
        raise NumericalError(f"monte_carlo_c2_law: rejection sampling of {k} distinct positions among {space} "
                             "did not finish in 10000 rounds; use a smaller group size")

    def c2_of(sub_ids: np.ndarray, round_ids: np.ndarray) -> np.ndarray:
        # c^2 = sum over rounds of (distinct sub-batches hit)^2 = sum_{i,j} new_i new_j [round_i == round_j]
        if sub_ids.shape[1] == 1:
            return np.ones(sub_ids.shape[0], dtype=np.int64)
        order = np.argsort(sub_ids, axis=1)
        srt = np.take_along_axis(sub_ids, order, axis=1)
        rnd = np.take_along_axis(round_ids, order, axis=1)
        new = np.concatenate([np.ones((srt.shape[0], 1), bool), srt[:, 1:] != srt[:, :-1]], axis=1)
        same = rnd[:, :, None] == rnd[:, None, :]
        return (same & new[:, :, None] & new[:, None, :]).sum(axis=(1, 2)).astype(np.int64)

    if sampler == "shuffle":
        for _ in range(E):
            pos = distinct_positions(n, N, g)
            total += c2_of(pos // s, pos // (m * s))
    else:
        T = R * E
        for _ in range(T):
            k = rng.hypergeometric(g, N - g, m * s, size=n)
            c2 = np.zeros(n, dtype=np.int64)
            for kk in np.unique(k):
                if kk == 0:
                    continue
                rows = np.nonzero(k == kk)[0]
                pos = distinct_positions(rows.size, m * s, int(kk))
                sub = pos // s
                if kk == 1:
                    c2[rows] = 1
                else:
                    srt = np.sort(sub, axis=1)
                    c2[rows] = (1 + (srt[:, 1:] != srt[:, :-1]).sum(axis=1)) ** 2
            total += c2
    pmf = np.bincount(total).astype(float)
    return C2Law(pmf / n, f"Monte Carlo {sampler} (N={N}, s={s}, m={m}, g={g}, E={E}, n={n})")


# ---------------------------------------------------------------------------------------------
# The exact trade-off function of a labelled Gaussian mixture (Def 5.2 / Lemma B.5)
# ---------------------------------------------------------------------------------------------


def _components(law: C2Law, sigma: float) -> tuple[float, np.ndarray, np.ndarray]:
    sigma = check_positive("sigma", sigma)
    j = law.support
    q = law.pmf[j]
    q0 = float(q[j == 0].sum())
    pos = j > 0
    mu = np.sqrt(j[pos].astype(float)) / sigma
    return q0, np.log(q[pos]), mu


def _log_A(lam: float, logq: np.ndarray, mu: np.ndarray) -> float:
    """log sum_c q_c Phi(-Lambda/mu_c - mu_c/2): the type I error of the c > 0 components."""
    if mu.size == 0:
        return -math.inf
    return float(special.logsumexp(logq + special.log_ndtr(-lam / mu - mu / 2)))


def _log_Abar(lam: float, logq: np.ndarray, mu: np.ndarray) -> float:
    """log sum_c q_c Phi(Lambda/mu_c + mu_c/2): the c > 0 mass of 1 - alpha."""
    if mu.size == 0:
        return -math.inf
    return float(special.logsumexp(logq + special.log_ndtr(lam / mu + mu / 2)))


def _log_B(lam: float, logq: np.ndarray, mu: np.ndarray) -> float:
    """log sum_c q_c Phi(Lambda/mu_c - mu_c/2): the type II error of the c > 0 components."""
    if mu.size == 0:
        return -math.inf
    return float(special.logsumexp(logq + special.log_ndtr(lam / mu - mu / 2)))


def _solve_lambda(log_fn: Callable[[float], float], target: float, increasing: bool, lo: float, hi: float) -> float:
    """Root of log_fn(L) = target on (lo, hi) (one side open-ended; expands the bracket)."""
    f = lambda L: log_fn(L) - target  # noqa: E731
    span = 1.0
    a, b = lo, hi
    if math.isinf(a):
        a = b - span
        while (f(a) > 0) == increasing:
            span *= 2
            a = b - span
            if span > 1e9:
                raise NumericalError("mixture_tradeoff: cannot bracket Lambda")
    if math.isinf(b):
        b = a + span
        while (f(b) < 0) == increasing:
            span *= 2
            b = a + span
            if span > 1e9:
                raise NumericalError("mixture_tradeoff: cannot bracket Lambda")
    return _brentq(f, a, b, "mixture_tradeoff", xtol=1e-14, rtol=1e-15)


def mixture_tradeoff(alpha, law: C2Law, sigma: float):
    """Def 5.2: the exact trade-off function ``f(alpha)`` of the labelled mixture ``sum_c q(c) G_{c/sigma}``.

    ``f(alpha) = sum_c q(c) Phi(Lambda sigma/c - c/(2 sigma))`` with Lambda solving
    ``1 - alpha = sum_c q(c) Phi(Lambda sigma/c + c/(2 sigma))`` (Lemma B.5, Lagrange multiplier
    ``lambda = e^Lambda``).  The c = 0 component (``G_0(alpha) = 1 - alpha``) has slope -1, so it sits
    entirely at Lambda = 0 and gives a linear segment of f.  Lambda is solved in log space on whichever
    of alpha and 1 - alpha is smaller."""
    q0, logq, mu = _components(law, sigma)
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if np.any((a < 0) | (a > 1)) or np.any(np.isnan(a)):
        raise DPValueError("alpha must be in [0, 1]")
    out = np.empty_like(a)
    A0 = math.exp(_log_A(0.0, logq, mu))  # type I error of c>0 part at Lambda = 0
    B0 = math.exp(_log_B(0.0, logq, mu))
    for i, al in enumerate(a):
        if al <= 0:
            out[i] = 1.0
            continue
        if al >= 1:
            out[i] = 0.0
            continue
        if mu.size == 0 or (A0 <= al <= A0 + q0):
            # linear segment of the c = 0 component (or pure G_0)
            out[i] = B0 + q0 - (al - A0)
            continue
        if al < A0:  # Lambda > 0: alpha = A(Lambda)
            if al < 0.5:
                lam = _solve_lambda(lambda L: _log_A(L, logq, mu), math.log(al), False, 0.0, math.inf)
            else:
                lam = _solve_lambda(lambda L: math.log(math.exp(_log_Abar(L, logq, mu)) + q0), math.log1p(-al), True, 0.0, math.inf)
            out[i] = math.exp(_log_B(lam, logq, mu)) + q0
        else:  # Lambda < 0: alpha = A(Lambda) + q0, 1 - alpha = Abar(Lambda)
            if 1 - al < 0.5:
                lam = _solve_lambda(lambda L: _log_Abar(L, logq, mu), math.log1p(-al), True, -math.inf, 0.0)
            else:
                lam = _solve_lambda(lambda L: math.log(math.exp(_log_A(L, logq, mu)) + q0), math.log(al), False, -math.inf, 0.0)
            out[i] = math.exp(_log_B(lam, logq, mu))
    out = np.clip(out, 0.0, 1.0)
    return out if np.ndim(alpha) else float(out[0])


def mixture_tradeoff_curve(law: C2Law, sigma: float, n_points: int = 400, lam_max: float | None = None):
    """The parametric curve ``(alpha(Lambda), f(alpha(Lambda)))`` of Def 5.2 on a symmetric grid of Lambda
    (log-spaced towards 0 and linear outward), both end points of the c = 0 segment included.
    Returns (alpha, beta) sorted by alpha, with (0, 1) and (1, 0) appended."""
    q0, logq, mu = _components(law, sigma)
    n = check_positive_int("n_points", n_points)
    if mu.size == 0:
        return np.array([0.0, 1.0]), np.array([1.0, 0.0])
    lm = lam_max if lam_max is not None else 10 * float(mu.max()) ** 2 + 10 * float(mu.max()) + 5
    pos = np.unique(np.concatenate([np.geomspace(1e-8, lm, n // 2), np.linspace(0, lm, n // 2)[1:]]))
    lams = np.concatenate([-pos[::-1], pos])
    L = lams[:, None]
    A = np.exp(special.logsumexp(logq + special.log_ndtr(-L / mu - mu / 2), axis=1))
    Bv = np.exp(special.logsumexp(logq + special.log_ndtr(L / mu - mu / 2), axis=1))
    al = list(np.where(lams > 0, A, A + q0))
    be = list(np.where(lams > 0, Bv + q0, Bv))
    # the two ends of the Lambda = 0 segment
    A0, B0 = math.exp(_log_A(0.0, logq, mu)), math.exp(_log_B(0.0, logq, mu))
    al += [A0, A0 + q0, 0.0, 1.0]
    be += [B0 + q0, B0, 1.0, 0.0]
    order = np.argsort(al)
    return np.asarray(al)[order], np.asarray(be)[order]


def mixture_delta(epsilon: float, law: C2Law, sigma: float) -> float:
    """Exact privacy profile of the labelled mixture (Def 5.2), [ours] from the note section 2.8:
    ``delta(eps) = sum_{c>0} q(c) [Phi(-eps sigma/c + c/(2 sigma)) - e^eps Phi(-eps sigma/c - c/(2 sigma))]``.
    Labelled mixtures have the mixture of the components' hockey-stick divergences; c = 0 adds 0."""
    eps = check_epsilon(epsilon)
    _, logq, mu = _components(law, sigma)
    if mu.size == 0:
        return 0.0
    return float(np.exp(special.logsumexp(logq + _log_gauss_hockey(eps, mu))))


def _log_mixture_delta(eps: float, logq: np.ndarray, mu: np.ndarray) -> float:
    return float(special.logsumexp(logq + _log_gauss_hockey(eps, mu)))


def mixture_epsilon(delta: float, law: C2Law, sigma: float) -> tuple[float, float]:
    """eps(delta) of the labelled mixture: a bracket (lower, upper) around the root of :func:`mixture_delta`."""
    delta = check_delta(delta)
    _, logq, mu = _components(law, sigma)
    if mu.size == 0:
        return 0.0, 0.0
    return _invert_decreasing(lambda e: _log_mixture_delta(e, logq, mu), delta, "mixture_epsilon")


# ---------------------------------------------------------------------------------------------
# Def 5.3 (upper-bound functions) and Def 5.4 (lower-bound functions)
# ---------------------------------------------------------------------------------------------


def upper_bound_betas(c_u: float, u: float, sigma: float) -> tuple[float, float]:
    """Def 5.3: ``beta_0 = 1 - Phi(c/(2 sigma) - (sigma/c) ln(1-u))`` and
    ``beta_1 = u + (1-u)(1 - Phi(c/(2 sigma) + (sigma/c) ln(1-u)))``, the points of slope -1."""
    c = check_positive("c_u", c_u)
    u = check_probability("u", u, allow_zero=True, allow_one=False)
    sigma = check_positive("sigma", sigma)
    L = math.log1p(-u)
    b0 = special.ndtr(-(c / (2 * sigma) - sigma / c * L))
    b1 = u + (1 - u) * special.ndtr(-(c / (2 * sigma) + sigma / c * L))
    return float(b0), float(b1)


def upper_bound_tradeoff(alpha, c_u: float, u: float, sigma: float):
    """Def 5.3: ``f^U = min{f_hat, f_hat^{-1}}^{**}`` with ``f_hat = u + (1-u) G_{c/sigma}``, in the closed form
    ``u + (1-u) G(alpha)`` on [0, b0], ``b0 + b1 - alpha`` on [b0, b1], ``G((alpha-u)/(1-u))`` on [b1, 1]."""
    b0, b1 = upper_bound_betas(c_u, u, sigma)
    mu = c_u / sigma
    a = np.asarray(alpha, dtype=float)
    if np.any((a < 0) | (a > 1)):
        raise DPValueError("alpha must be in [0, 1]")
    left = u + (1 - u) * gaussian_tradeoff(np.clip(a, 0, 1), mu)
    mid = b0 + b1 - a
    right = gaussian_tradeoff(np.clip((a - u) / (1 - u), 0, 1), mu)
    out = np.where(a <= b0, left, np.where(a <= b1, mid, right))
    return out if out.ndim else float(out)


def lower_bound_beta(c_l: float, l: float, sigma: float) -> float:
    """Def 5.4: the unique beta with ``G_{c/sigma}(beta) - l = beta``."""
    c = check_positive("c_l", c_l)
    l = check_probability("l", l, allow_zero=True)
    sigma = check_positive("sigma", sigma)
    mu = c / sigma
    fn = lambda b: float(special.ndtr(-special.ndtri(b) - mu)) - l - b  # noqa: E731
    if fn(0.0) <= 0:
        return 0.0
    return float(_brentq(fn, 0.0, 1.0, "lower_bound_beta", xtol=1e-15))


def lower_bound_tradeoff(alpha, c_l: float, l: float, sigma: float):
    """Def 5.4: ``f^L = max{f_hat, f_hat^{-1}}`` with ``f_hat(alpha) = G_{c/sigma}(min{1, alpha + l})``:
    ``G(alpha) - l`` on [0, beta] and ``G(min{1, alpha + l})`` on [beta, 1]."""
    beta = lower_bound_beta(c_l, l, sigma)
    mu = c_l / sigma
    a = np.asarray(alpha, dtype=float)
    if np.any((a < 0) | (a > 1)):
        raise DPValueError("alpha must be in [0, 1]")
    left = np.maximum(gaussian_tradeoff(a, mu) - l, 0.0)
    right = gaussian_tradeoff(np.minimum(1.0, a + l), mu)
    out = np.where(a <= beta, left, right)
    return out if out.ndim else float(out)


def lower_bound_delta(epsilon: float, c_l: float, l: float, sigma: float) -> float:
    """``delta(eps) = sup_alpha [1 - f^L(alpha) - e^eps alpha]`` for Def 5.4's f^L, exactly.

    Both pieces of ``1 - f^L - e^eps alpha`` are concave; the unconstrained maximiser of each is where
    ``G'`` equals ``-e^eps``, i.e. at ``x* = Phi(-eps/mu - mu/2)`` (alpha = x* on the left piece,
    alpha = x* - l on the right).  Clamping to each piece's interval gives its maximum."""
    eps = check_epsilon(epsilon)
    beta = lower_bound_beta(c_l, l, sigma)
    mu = c_l / sigma
    ee = math.exp(min(eps, 700.0))
    xs = float(special.ndtr(-eps / mu - mu / 2))
    G = lambda x: float(gaussian_tradeoff(min(max(x, 0.0), 1.0), mu))  # noqa: E731
    a1 = min(max(xs, 0.0), beta)
    v1 = 1 - max(G(a1) - l, 0.0) - ee * a1
    hi2 = max(beta, 1 - l)
    a2 = min(max(xs - l, beta), hi2)
    v2 = 1 - G(min(1.0, a2 + l)) - ee * a2
    return max(0.0, v1, v2)


def lower_bound_epsilon(delta: float, c_l: float, l: float, sigma: float) -> float:
    """eps(delta) implied by Def 5.4's f^L; raises NumericalError when delta <= l (no eps certifiable)."""
    delta = check_delta(delta)
    if delta <= l:
        raise NumericalError(f"delta={delta!r} <= additive tail l={l!r}: f^L certifies no finite epsilon")
    return _invert_decreasing(lambda e: math.log(max(lower_bound_delta(e, c_l, l, sigma), 1e-320)), delta, "lower_bound_epsilon")[1]


# ---------------------------------------------------------------------------------------------
# Appendix E as printed, and corrected
# ---------------------------------------------------------------------------------------------


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


def lemma_e4_as_printed(dataset_size: int, batch_size: int, group_size: int, epochs: int, gamma: float = 1.0) -> dict[str, float]:
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


# ---------------------------------------------------------------------------------------------
# Conversions (Section 2) and generic group transforms
# ---------------------------------------------------------------------------------------------


def gdp_to_rdp(mu: float, order: float) -> float:
    """mu-GDP implies (order, order mu^2/2)-RDP for every order > 1; for ``mu = sqrt(gE)/sigma`` this is the
    paper's ``(omega, gE omega/(2 sigma^2))``."""
    mu = check_nonnegative("mu", mu)
    order = check_positive("order", order)
    if order <= 1:
        raise DPValueError(f"order must be > 1, got {order!r}")
    return order * mu * mu / 2


def gdp_to_zcdp(mu: float) -> float:
    """mu-GDP implies ``rho = mu^2/2``-zCDP (= gE/(2 sigma^2) for the headline)."""
    mu = check_nonnegative("mu", mu)
    return mu * mu / 2


def gdp_to_tcdp(mu: float, omega: float) -> tuple[float, float]:
    """(rho, omega)-tCDP with ``rho = mu^2/2`` for any omega > 1 (the paper prints the pair garbled as
    ``(gE omega/(2 sigma^2), omega)``; the correct reading is ``rho = gE/(2 sigma^2)``)."""
    omega = check_positive("omega", omega)
    if omega <= 1:
        raise DPValueError(f"omega must be > 1, got {omega!r}")
    return gdp_to_zcdp(mu), omega


def generic_group_eps_delta(epsilon: float, delta: float, group_size: int) -> tuple[float, float]:
    """Generic group privacy of (eps, delta)-DP: ``(g eps, g e^{(g-1) eps} delta)`` (Dwork-Roth; the paper writes
    ``g e^{g-1} delta`` for its normalisation)."""
    eps = check_epsilon(epsilon)
    delta = check_probability("delta", delta, allow_zero=True)
    g = check_positive_int("group_size", group_size)
    return g * eps, min(1.0, g * math.exp((g - 1) * eps) * delta)


# ---------------------------------------------------------------------------------------------
# Standard-model accountants for the comparison (section 2.9 of the note)
# ---------------------------------------------------------------------------------------------


def clt_mu_uniform(p: float, steps: int, sigma: float) -> float:
    """Dong-Roth-Su CLT for ``C_p(G_{1/sigma})^{(x)T}`` (uniform sampling): ``mu = p sqrt(T (e^{1/sigma^2} - 1))``.
    An approximation (a limit theorem), not a bound."""
    p = check_probability("p", p)
    T = check_positive_int("steps", steps)
    sigma = check_positive("sigma", sigma)
    return p * math.sqrt(T * math.expm1(1 / sigma**2))


def clt_mu_poisson(p: float, steps: int, sigma: float) -> float:
    """Bu-Dong-Long-Su CLT for Poisson sampling:
    ``mu = p sqrt(T (e^{1/sigma^2} Phi(1.5/sigma) + 3 Phi(-0.5/sigma) - 2))``.  An approximation."""
    p = check_probability("p", p)
    T = check_positive_int("steps", steps)
    sigma = check_positive("sigma", sigma)
    v = math.exp(1 / sigma**2) * special.ndtr(1.5 / sigma) + 3 * special.ndtr(-0.5 / sigma) - 2
    return p * math.sqrt(T * v)


def rdp_poisson_gaussian(q: float, sigma: float, orders: Iterable[int]) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian step at integer orders a >= 2 (Mironov-Talwar-Zhang 2019),
    from the foundation's :func:`dputils.accountants.rdp.subsampled_gaussian_rdp`."""
    q = check_probability("q", q)
    sigma = check_positive("sigma", sigma)
    out = []
    for a in orders:
        if int(a) != a or a < 2:
            raise DPValueError(f"orders must be integers >= 2, got {a}")
        out.append(_rdp.subsampled_gaussian_rdp(q, sigma, float(a)))
    return np.asarray(out)


def rdp_epsilon(rdp: np.ndarray, orders: Iterable[int], delta: float, conversion: str = "classic") -> float:
    """eps from an RDP curve: classic ``min_a [rdp(a) + log(1/delta)/(a-1)]`` (Mironov) or improved
    (Balle et al. 2020), via the foundation's :func:`dputils.accountants.rdp.rdp_to_epsilon`."""
    delta = check_delta(delta)
    check_choice("conversion", conversion, ("classic", "improved"))
    return _rdp.rdp_to_epsilon(list(orders), rdp, delta, "classic" if conversion == "classic" else "modern")[0]


# ---------------------------------------------------------------------------------------------
# Accountants (command line: python -m dputils epsilon --accountant NAME ...)
# ---------------------------------------------------------------------------------------------


class GDPBoundAccountant:
    """mu-GDP guarantee ``G_mu`` turned into (eps, delta) exactly by eq. (7).

    For ``shuffle-batch-clip`` ``mu = sqrt(gE)/sigma`` (Thm F.1): a certified upper bound on the strong-
    adversary eps (and, being a post-processing argument, on any weaker adversary's)."""

    def __init__(self, mu: float, name: str = "shuffle-batch-clip", details: dict | None = None) -> None:
        self.mu = check_nonnegative("mu", mu)
        self.name = name
        self.details = dict(details or {}, mu=self.mu)

    def get_delta(self, epsilon: float) -> AccountingResult:
        d = gdp_delta(epsilon, self.mu)
        return AccountingResult(d, None, d, "upper-bound", self.name, "delta", dict(self.details))

    def get_epsilon(self, delta: float) -> AccountingResult:
        delta = check_delta(delta)
        if self.mu == 0:
            return AccountingResult(0.0, None, 0.0, "upper-bound", self.name, "epsilon", dict(self.details))
        lo, hi = _invert_decreasing(lambda e: float(_log_gauss_hockey(e, np.array([self.mu]))[0]), delta, self.name)
        return AccountingResult(hi, None, hi, "upper-bound", self.name, "epsilon", dict(self.details, bracket=[lo, hi]))


class MixtureAccountant:
    """(eps, delta) of the labelled mixture ``sum_c q(c) G_{c/sigma}`` (Def 5.2) for a given law of c^2.

    ``kind="exact"`` when the law is the true strong-adversary law (value = certified root bracket's upper
    end, lower = its lower end); ``kind="approximation"`` for the as-printed (wrong) law."""

    def __init__(self, law: C2Law, sigma: float, name: str, kind: str = "exact", details: dict | None = None) -> None:
        self.law = law
        self.sigma = check_positive("sigma", sigma)
        self.name = name
        self.kind = kind
        self.details = dict(details or {}, mean_c2=law.mean, max_c2=law.max_c2)

    def get_delta(self, epsilon: float) -> AccountingResult:
        d = mixture_delta(epsilon, self.law, self.sigma)
        lo, hi = (d, d) if self.kind == "exact" else (None, None)
        return AccountingResult(d, lo, hi, self.kind, self.name, "delta", dict(self.details))

    def get_epsilon(self, delta: float) -> AccountingResult:
        lo, hi = mixture_epsilon(delta, self.law, self.sigma)
        if self.kind == "exact":
            return AccountingResult(hi, lo, hi, "exact", self.name, "epsilon", dict(self.details))
        return AccountingResult(hi, None, None, self.kind, self.name, "epsilon", dict(self.details, bracket=[lo, hi]))


def _add_option(parser: argparse.ArgumentParser, flag: str, **kw) -> None:
    if flag not in getattr(parser, "_option_string_actions", {}):
        parser.add_argument(flag, **kw)


def _add_bound_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shuffle-batch-clip`` (the headline bound needs no data-set or batch size)."""
    _add_option(parser, "--epochs", type=int, default=None, help="number of epochs E, an integer >= 1")
    _add_option(parser, "--group-size", type=int, default=None, help="group size g, an integer >= 1 (default 1)")


def _add_shuffle_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the refined (exact-law) accountants."""
    _add_bound_arguments(parser)
    _add_option(parser, "--dataset-size", type=int, default=None, help="data-set size N (refined accountants)")
    _add_option(
        parser, "--batch-size", type=int, default=None,
        help="samples per round: s for batch clipping, m for individual clipping (refined accountants)",
    )


def _arg(args: argparse.Namespace, name: str, required: bool = True):
    v = getattr(args, name, None)
    if v is None and required:
        raise DPValueError(f"--{name.replace('_', '-')} is required for this accountant")
    return v


def _group_size(args: argparse.Namespace) -> int:
    """``--group-size``: an integer >= 1 (default 1 when the option is absent; 0 is refused, not read as 1)."""
    g = getattr(args, "group_size", None)
    return 1 if g is None else check_positive_int("group-size", g)


def _build_bound(args: argparse.Namespace) -> GDPBoundAccountant:
    sigma = check_positive("sigma", _arg(args, "sigma"))
    E = check_positive_int("epochs", _arg(args, "epochs"))
    g = _group_size(args)
    return GDPBoundAccountant(bc_shuffle_mu(sigma, E, g), "shuffle-batch-clip", {"sigma": sigma, "epochs": E, "group_size": g})


def _refined_builder(name: str, law_fn: Callable[[int, int, int, int], C2Law], kind: str):
    def build(args: argparse.Namespace) -> MixtureAccountant:
        sigma = check_positive("sigma", _arg(args, "sigma"))
        E = check_positive_int("epochs", _arg(args, "epochs"))
        g = _group_size(args)
        N = check_positive_int("dataset-size", _arg(args, "dataset_size"))
        b = check_positive_int("batch-size", _arg(args, "batch_size"))
        law = law_fn(N, b, g, E)
        return MixtureAccountant(law, sigma, name, kind, {"sigma": sigma, "epochs": E, "group_size": g, "dataset_size": N, "batch_size": b})

    return build


def _register() -> None:
    try:
        from .accountants import registry
    except ImportError:  # pragma: no cover
        return
    # only --sigma of the common options: the mechanism is fixed by the accountant, the number of rounds by
    # --epochs (and --dataset-size/--batch-size), and the strong-adversary bounds are symmetric (no --direction)
    common = dict(add_arguments=_add_shuffle_arguments, uses_mechanism=False, noise_parameter="sigma",
                  common_flags=frozenset({"sigma"}))
    registry.register(
        "shuffle-batch-clip",
        help="van Dijk et al.: batch clipping + shuffling is G_{sqrt(gE)/sigma}-DP (strong adversary; upper bound on eps)",
        build=_build_bound,
        **dict(common, add_arguments=_add_bound_arguments),
    )
    registry.register(
        "shuffle-batch-clip-exact",
        help="batch clipping + shuffling, exact strong-adversary mixture (Def 5.2) with the exact occupancy law",
        build=_refined_builder("shuffle-batch-clip-exact", lambda N, s, g, E: bc_shuffle_law(N, s, g).compose(E), "exact"),
        **common,
    )
    registry.register(
        "shuffle-batch-clip-as-printed",
        help="batch clipping + shuffling with Thm F.1's printed (stars-and-bars) q_j: slightly optimistic, erratum",
        build=_refined_builder("shuffle-batch-clip-as-printed", lambda N, s, g, E: bc_shuffle_law_as_printed(N, s, g).compose(E), "approximation"),
        **common,
    )
    registry.register(
        "shuffle-individual-clip-exact",
        help="individual clipping + shuffling, exact strong-adversary mixture with the partition law (--batch-size = m)",
        build=_refined_builder("shuffle-individual-clip-exact", lambda N, m, g, E: ic_shuffle_law(N, m, g).compose(E), "exact"),
        **common,
    )
    registry.register(
        "subsample-batch-clip-exact",
        help="batch clipping + subsampling (any g; = any clipping for g=1), exact strong-adversary Binomial mixture",
        build=_refined_builder("subsample-batch-clip-exact", lambda N, s, g, E: subsample_bc_law(N, s, E, g), "exact"),
        **common,
    )


_register()
