"""Laws of the integer ``c^2 = sum_k c_k k^2`` (Def 5.1 of van Dijk et al., ``vandijk_shuffling``).

Under the paper's strong adversary a round in which ``k`` of the ``m`` sub-batches hold a member of the
differentiating group is the Gaussian trade-off ``G_{k/sigma}``; over a whole run the mechanism is the
labelled mixture ``sum_c q(c) G_{c/sigma}`` whose weights ``q`` are the law of ``c^2`` built here:

* :func:`bc_shuffle_law`: batch clipping with shuffling, the exact occupancy law (replaces Thm F.1's
  printed ``q_j``, kept as :func:`bc_shuffle_law_as_printed`);
* :func:`ic_shuffle_law`: individual clipping with shuffling, the integer-partition law;
* :func:`subsample_ic_g1_law`, :func:`subsample_bc_law`: Binomial laws for subsampling (Lemmas E.2, E.5);
* :func:`subsample_ic_law`: individual clipping with subsampling and a group of g (Lemma E.4);
* :func:`monte_carlo_c2_law`: a simulation of Algorithm 1's index sampling, the independent check;
* :meth:`C2Law.compose` / :meth:`C2Law.convolve`: independent epochs or runs add their ``c^2``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import stats

from ..errors import DPValueError, NumericalError, check_choice, check_positive_int, check_probability
from ..resources import check_memory, check_work

#: Elementary operations counted for one Python-level step with big integers (for the work estimates).
_PY_OP = 300.0


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

    def compose(self, epochs: int) -> C2Law:
        """The law of the sum over ``epochs`` independent epochs: E-fold convolution in c^2 (App. C.15).

        For labelled Gaussian mixtures this is exactly the f-DP composition ``f^{(x)E}``."""
        E = check_positive_int("epochs", epochs)
        n_final = (self.pmf.size - 1) * float(E) + 1  # length of the composed pmf
        check_memory(
            "epochs",
            8.0 * 4 * n_final,
            f"the {E}-fold composed law of c^2 ({n_final:.3g} values)",
            hint="use fewer epochs",
        )
        # direct convolutions by repeated squaring: at most ~2 n_final^2 multiply-adds in all
        check_work("epochs", 2.0 * n_final * n_final, "multiply-adds", hint="use fewer epochs")
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

    def convolve(self, other: C2Law) -> C2Law:
        """The law of ``c^2 + c'^2`` for independent runs: ``(q * q')(j) = sum_i q(i) q'(j - i)``.

        Two labelled mixtures with the same sigma compose exactly into the labelled mixture of this law,
        because ``G_{mu_1} (x) G_{mu_2} = G_{sqrt(mu_1^2 + mu_2^2)}`` for every pair of labels (DRS Cor. 3.3)
        and ``mu^2 = c^2 / sigma^2`` adds."""
        if not isinstance(other, C2Law):
            raise DPValueError(f"other must be a C2Law, got {type(other).__name__}")
        n_final = self.pmf.size + other.pmf.size - 1.0
        check_memory("other", 8.0 * 4 * n_final, f"the convolved law of c^2 ({n_final:.3g} values)")
        check_work("other", 2.0 * self.pmf.size * other.pmf.size, "multiply-adds")
        out = np.clip(np.convolve(self.pmf, other.pmf), 0.0, None)
        label = f"{self.label} + {other.label}" if self.label and other.label else ""
        return C2Law(out / out.sum(), label)

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


def shuffle_sizes(dataset_size: int, batch_size: int, group_size: int) -> tuple[int, int, int, int]:
    """Validated ``(N, b, g, B)`` of a shuffled epoch: N a multiple of the round size b, ``B = N/b`` rounds,
    a group of ``g <= N`` examples."""
    N = check_positive_int("dataset_size", dataset_size)
    b = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    if g > N:
        raise DPValueError(f"group_size must be <= dataset_size ({N}); got {g}")
    return N, b, g, _check_divisible(N, b, "batch_size")


def bc_shuffle_law(dataset_size: int, batch_size: int, group_size: int) -> C2Law:
    """Per-epoch law of c^2 for batch clipping (m = 1) with shuffling: exact occupancy law.

    A uniformly random permutation places the g differentiating samples in g distinct positions among
    N = B s (B = N/s rounds of s samples).  ``c^2 = j`` = the number of rounds hit, and

        P(j) = binom(B, j) sum_{i=0}^{j} (-1)^i binom(j, i) ((j - i) s)_g / (N)_g

    (inclusion-exclusion over the rounds that stay empty; ``(x)_g`` the falling factorial).  Exact
    rational arithmetic.  This replaces the stars-and-bars ``q_j`` printed in Thm F.1."""
    N, s, g, B = shuffle_sizes(dataset_size, batch_size, group_size)
    J = min(g, B)
    # J^2/2 inclusion-exclusion terms, each a falling factorial of g big-integer products
    check_work(
        "group_size",
        _PY_OP * (J * (J + 1) / 2.0) * g,
        "operations",
        hint=f"the exact occupancy law with g={g} in {B} rounds; use a smaller group size",
    )
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
    check_work(
        "group_size",
        _PY_OP * float(g) * g,
        "operations",
        hint="g big binomial coefficients of g digits each; use a smaller group size",
    )
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
    N, m, g, B = shuffle_sizes(dataset_size, batch_size, group_size)
    # every integer partition of g is enumerated (about exp(pi sqrt(2g/3)) / (4 sqrt(3) g) of them)
    n_part = math.exp(min(math.pi * math.sqrt(2.0 * g / 3.0), 700.0)) / (4.0 * math.sqrt(3.0) * g)
    check_work(
        "group_size",
        _PY_OP * n_part * g,
        "operations",
        hint=f"about {n_part:.3g} integer partitions of g={g}; use a smaller group size",
    )
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
    check_memory(
        "epochs", 8.0 * 6 * (T + 1.0), f"the law of c^2 over T = N E / s = {T} rounds", hint="use fewer epochs"
    )
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


def subsample_ic_law(dataset_size: int, batch_size: int, group_size: int, epochs: int) -> C2Law:
    """Law of c^2 over all epochs for individual clipping (s = 1) with subsampling and a group of g
    (the setting of Lemma E.4): each of the ``T = round(N E / m)`` rounds draws ``m`` of the N samples
    without replacement, so the number K of group members it holds is hypergeometric,
    ``P(K = k) = binom(g, k) binom(N - g, m - k) / binom(N, m)`` (the ``q_k`` of eq. (21)); with s = 1 each
    member is its own sub-batch, the round contributes ``K^2`` and ``c^2 = sum_rounds K_r^2`` (T-fold
    convolution, :meth:`C2Law.compose`). For g = 1 this is :func:`subsample_ic_g1_law`."""
    N = check_positive_int("dataset_size", dataset_size)
    m = check_positive_int("batch_size", batch_size)
    g = check_positive_int("group_size", group_size)
    E = check_positive_int("epochs", epochs)
    if m + g > N:
        raise DPValueError(f"batch_size + group_size must be <= dataset_size ({N})")
    T = max(1, int(round(N * E / m)))
    _check_rounds(T)
    k = np.arange(min(g, m) + 1)
    round_pmf = np.zeros(int(k[-1]) ** 2 + 1)
    round_pmf[k * k] = stats.hypergeom.pmf(k, N, g, m)
    law = C2Law(round_pmf / round_pmf.sum())
    return C2Law(law.compose(T).pmf, f"IC+SS (N={N}, m={m}, g={g}, E={E})")


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
    check_memory(
        "n_draws",
        8.0 * 4 * n * g + 1.0 * 3 * n * g * g,
        f"{n} draws of {g} positions",
        hint="use fewer draws or a smaller group size",
    )
    rounds = E if sampler == "shuffle" else R * E
    check_work(
        "n_draws",
        float(rounds) * n * (10.0 * g * g + 50.0 * g),
        "operations",
        hint="use fewer draws, epochs or a smaller group size",
    )
    total = np.zeros(n, dtype=np.int64)

    def distinct_positions(rows: int, space: int, k: int) -> np.ndarray:
        pos = rng.integers(0, space, size=(rows, k))
        for _ in range(10_000):  # rejection: each round keeps a row with probability (space)_k / space^k
            srt = np.sort(pos, axis=1)
            bad = np.any(srt[:, 1:] == srt[:, :-1], axis=1) if k > 1 else np.zeros(rows, bool)
            if not bad.any():
                return pos
            pos[bad] = rng.integers(0, space, size=(int(bad.sum()), k))
        raise NumericalError(
            f"monte_carlo_c2_law: rejection sampling of {k} distinct positions among {space} "
            "did not finish in 10000 rounds; use a smaller group size"
        )

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


def law_deviation(simulated: C2Law, exact: C2Law, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """How far a simulated law of c^2 lies from an exact one, and the scale it should lie within.

    Returns, for every value j of c^2 (both pmfs padded with zeros to the longer one), ``|p_j - q_j|`` between
    the simulated frequencies ``p`` (e.g. :func:`monte_carlo_c2_law` from ``draws`` draws) and the exact law
    ``q``, and the standard error ``sqrt(q_j (1 - q_j) / draws)`` of a frequency of ``draws`` independent draws
    under ``q`` (Binomial). A correct simulation keeps each ``|p_j - q_j|`` within a few standard errors."""
    if not isinstance(simulated, C2Law) or not isinstance(exact, C2Law):
        raise DPValueError("simulated and exact must be C2Law objects")
    n = check_positive_int("draws", draws)
    size = max(simulated.pmf.size, exact.pmf.size)
    p = np.pad(simulated.pmf, (0, size - simulated.pmf.size))
    q = np.pad(exact.pmf, (0, size - exact.pmf.size))
    return np.abs(p - q), np.sqrt(q * (1 - q) / n)
