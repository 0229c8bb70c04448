"""Renyi divergences of the balls-in-bins dominating pair, computed exactly by dynamic programming.

The pair (Lemma 2.8 of {cite}`schuchardt_kalinin`, from Choquette-Choo et al. 2025): with slot means
``m_0..m_{b-1}`` (see :mod:`dputils.matrix.factorizations`) and Gram matrix ``G``,

    P = (1/b) sum_i N(m_i, sigma^2 I),    Q = N(0, sigma^2 I);

"remove" is dominated by (P, Q), "add" by (Q, P).

**Remove direction (Lemma 3.2, Eq. 5; Appendix C, Eq. 12-13).** For integer ``alpha >= 2``, expanding
``(p/q)^alpha`` with the multinomial theorem and using the Gaussian moment generating function,

    R_alpha(P||Q) = [ log(alpha!) + log S_alpha - alpha log b ] / (alpha - 1),
    S_alpha = sum_{r_0+...+r_{b-1} = alpha} prod_j (1/r_j!) exp( (r^T G r - sum_j r_j G_jj) / (2 sigma^2) ).

(The paper prints ``-alpha log b / (1 - alpha)`` in Eq. 5; the sign is fixed here, as in Alg. 1 line 43.)

**Dynamic program (Lemma 3.3, Eq. 16-19, Algorithm 1).** If ``G`` is p-cyclically banded, the
exponent couples only counts of slots at cyclic distance < p. A forward pass over the slots keeps the
state ``(m, r_{q-p+2}, ..., r_q)`` (total so far and the last ``p-1`` counts) in log space and adds a new
count ``t`` with the increment (Eq. 18-19)

    t(t-1) G_qq / (2 sigma^2) + (t / sigma^2) sum_{s in window} G_{s q} r_s - log t!.

Because the terms do not depend on ``alpha`` except through the final total, one pass with
``m <= alpha_max`` yields ``S_alpha`` for **every** order up to ``alpha_max`` at once.
When the banded ``G`` has wrap-around entries (several epochs), the first ``p-1`` counts are fixed in an
outer loop (here: an extra leading axis) and the cycle is closed with the pairs ``(i, j)`` between the
prefix and the final window with **linear** distance ``j - i >= p`` only: pairs at a smaller distance
were already counted by the forward pass (Algorithm 1 as printed counts them twice when ``b < 3p - 3``;
erratum 4 of our notes). Algorithm 1 line 28 has the arguments of the log-sum-exp swapped (erratum 3);
the recursion here accumulates ``LSE(old value, new term)``.

A dense ``G`` is handled by the effective-bandwidth truncation (Alg. 1 lines 3-4):
``R_alpha <= R_alpha[G^(p)] + alpha tau / (2 sigma^2)`` with ``tau`` and ``G^(p)`` from
:func:`dputils.matrix.factorizations.truncate_gram`.

**Add direction (Lemma 3.4, Eq. 6, Algorithm 2).** The AM-GM lower bound on the mixture density gives

    R_alpha(Q||P) <= trace(G) / (2 b sigma^2) + (alpha - 1) sum_{ij} G_ij / (2 b^2 sigma^2).

**Conversion (Theorem 3.1; Canonne, Kamath & Steinke 2020, Prop. 12).** If ``R_alpha <= rho`` then
``H_{e^eps} <= exp((alpha-1)(rho - eps)) (1 - 1/alpha)^alpha / (alpha - 1)``; minimised over the orders.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import product
from typing import Iterable, Sequence

import numpy as np
from scipy.special import gammaln, logsumexp

from ..errors import DPValueError, NumericalError, check_delta, check_epsilon, check_positive, check_positive_int
from .factorizations import truncate_gram

#: Default upper limit on the work of one dynamic program (transitions x prefixes x slots).
DEFAULT_WORK_BUDGET = 4e8


# ------------------------------------------------------------------------------------------------ state spaces
def n_transitions(window: int, alpha_max: int) -> int:
    """Number of (state, t) pairs of one DP step: ``binom(alpha_max + L + 2, L + 2)`` for window L."""
    return math.comb(alpha_max + window + 2, window + 2)


def n_prefixes(window: int, alpha_max: int) -> int:
    """Number of fixed prefixes ``l in N^L`` with ``sum(l) <= alpha_max``."""
    return math.comb(alpha_max + window, window)


def dp_work(bands: int, b: int, alpha_max: int, wrap: bool) -> float:
    """Element updates of the DP for bandwidth p = ``bands`` (window p-1) over ``b`` slots."""
    L = max(min(bands, b) - 1, 0)
    return float(n_transitions(L, alpha_max)) * (n_prefixes(L, alpha_max) if wrap and L > 0 else 1) * b


@lru_cache(maxsize=16)
def _state_space(window: int, alpha_max: int):
    """States (m, r_1..r_L) with sum(r) <= m <= alpha_max and the transition table of one DP step.

    Returns ``states`` (n_states x (L+1) ints), ``src``/``tval`` (transitions sorted by destination) and
    ``starts`` (segment starts of each destination state in the sorted order; every state is a destination).
    """
    L, A = window, alpha_max
    shape = (A + 1,) * (L + 1)
    grid = np.indices(shape).reshape(L + 1, -1).T  # columns: m, r_1..r_L
    valid = grid[:, 1:].sum(axis=1) <= grid[:, 0]
    states = grid[valid]
    index = np.full(shape, -1, dtype=np.int64)
    index[tuple(states.T)] = np.arange(states.shape[0])
    srcs, ts, dests = [], [], []
    for t in range(A + 1):
        ok = states[:, 0] + t <= A
        s_idx = np.nonzero(ok)[0]
        st = states[ok]
        dest_coords = [st[:, 0] + t] + [st[:, j] for j in range(2, L + 1)] + ([np.full(st.shape[0], t)] if L > 0 else [])
        d_idx = index[tuple(dest_coords)]
        srcs.append(s_idx)
        ts.append(np.full(s_idx.size, t))
        dests.append(d_idx)
    src = np.concatenate(srcs)
    tval = np.concatenate(ts)
    dest = np.concatenate(dests)
    if (dest < 0).any():  # pragma: no cover - construction guarantees validity
        raise NumericalError("internal error: invalid DP destination state")
    order = np.argsort(dest, kind="stable")
    src, tval, dest = src[order], tval[order], dest[order]
    starts = np.flatnonzero(np.r_[True, dest[1:] != dest[:-1]])
    if starts.size != states.shape[0]:  # pragma: no cover
        raise NumericalError("internal error: unreachable DP state")
    for arr in (states, src, tval, starts):
        arr.setflags(write=False)
    return states, src, tval.astype(np.int64), starts


def _segment_lse(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Log-sum-exp of consecutive segments of the last axis of ``v`` (segments begin at ``starts``)."""
    mx = np.maximum.reduceat(v, starts, axis=-1)
    safe = np.where(np.isfinite(mx), mx, 0.0)
    seg_len = np.diff(np.r_[starts, v.shape[-1]])
    ex = np.exp(v - np.repeat(safe, seg_len, axis=-1))
    with np.errstate(divide="ignore"):
        return np.log(np.add.reduceat(ex, starts, axis=-1)) + safe


# ------------------------------------------------------------------------------------------------ log S
def _needs_wrap(Gp: np.ndarray, bands: int) -> bool:
    b = Gp.shape[0]
    i, j = np.triu_indices(b, k=bands)
    return bool(i.size and np.any(Gp[i, j] != 0))


def log_partition_dp(
    Gp: np.ndarray,
    sigma: float,
    alpha_max: int,
    bands: int,
    *,
    work_budget: float | None = DEFAULT_WORK_BUDGET,
) -> np.ndarray:
    """``log S_alpha`` for ``alpha = 0..alpha_max`` by the dynamic program of Lemma 3.3 / Algorithm 1.

    ``Gp`` must be p-cyclically banded (entries at cyclic distance >= ``bands`` are ignored: pass the
    output of :func:`~dputils.matrix.factorizations.truncate_gram`). Exact up to floating point.
    Raises ``DPValueError`` when the predicted work exceeds ``work_budget`` (None: no limit).
    """
    Gp = np.asarray(Gp, dtype=float)
    b = Gp.shape[0]
    if Gp.shape != (b, b):
        raise DPValueError(f"Gp must be square, got shape {Gp.shape}")
    sigma = check_positive("sigma", sigma)
    A = check_positive_int("alpha_max", alpha_max)
    p = min(check_positive_int("bands", bands), b)
    s2 = sigma * sigma
    wrap = _needs_wrap(Gp, p)
    if wrap and b < 2 * p - 2:
        # prefix and final window would overlap: fall back to a window over all slots (exact, no wrap)
        p, wrap = b, False
    L = p - 1
    work = dp_work(p, b, A, wrap)
    if work_budget is not None and work > work_budget:
        raise DPValueError(
            f"bands={p} with alpha_max={A} over b={b} slots needs ~{work:.2e} DP updates (> budget "
            f"{work_budget:.1e}); lower the effective bandwidth or the largest order"
        )
    states, src, tval, starts = _state_space(L, A)
    R = states[:, 1:].astype(float)  # window counts, oldest first
    tt = np.arange(A + 1, dtype=float)
    log_fact = gammaln(tt + 1)

    if not wrap:
        cur = np.full((1, states.shape[0]), -np.inf)
        cur[0, 0] = 0.0  # state (m=0, window of zeros at virtual positions < 0)
        first = 0
        prefixes = None
    else:
        # enumerate prefixes l = (r_0..r_{L-1}) with sum <= A; state at q = L-1 is (sum l, l)
        pre = np.array([c for c in product(range(A + 1), repeat=L) if sum(c) <= A], dtype=float)
        prefixes = pre
        Gpre = Gp[:L, :L]
        diag = np.diag(Gpre)
        w = (np.einsum("ni,ij,nj->n", pre, np.triu(Gpre, 1), pre) / s2
             + (pre * (pre - 1) * diag).sum(axis=1) / (2 * s2)
             - gammaln(pre + 1).sum(axis=1))
        m0 = pre.sum(axis=1).astype(np.int64)
        # state index of (m0, l): look up in the state table
        lookup = {tuple(row): i for i, row in enumerate(states.tolist())}
        idx = np.array([lookup[(int(m),) + tuple(int(x) for x in row)] for m, row in zip(m0, pre)])
        cur = np.full((pre.shape[0], states.shape[0]), -np.inf)
        cur[np.arange(pre.shape[0]), idx] = w
        first = L

    Rsrc = R[src] if L > 0 else None
    tsrc = tval.astype(float)
    for q in range(first, b):
        selfterm = Gp[q, q] * tt * (tt - 1) / (2 * s2) - log_fact
        inc = selfterm[tval]
        if L > 0:
            pos = np.arange(q - L, q)
            c = np.where(pos >= 0, Gp[q, np.clip(pos, 0, b - 1)], 0.0) / s2
            inc = inc + tsrc * (Rsrc @ c)
        v = cur[:, src] + inc
        cur = _segment_lse(v, starts)

    m = states[:, 0]
    if wrap:
        # closure: pairs (i, j), i in prefix 0..L-1, j in final window b-L..b-1, linear distance j-i >= p
        win_pos = np.arange(b - L, b)
        Gc = np.zeros((L, L))
        for a in range(L):
            for c_ in range(L):
                if win_pos[c_] - a >= p:
                    Gc[a, c_] = Gp[a, win_pos[c_]]
        close = (prefixes @ Gc @ R.T) / s2  # (n_prefix, n_states)
        cur = cur + close
    out = np.full(A + 1, -np.inf)
    for a in range(A + 1):
        sel = m == a
        out[a] = logsumexp(cur[:, sel]) if sel.any() else -np.inf
    if not np.all(np.isfinite(out)):
        raise NumericalError("log S is not finite for some order; sigma too small for float64?")
    return out


def log_partition_bruteforce(G: np.ndarray, sigma: float, alpha: int) -> float:
    """``log sum_{tuples in [b]^alpha} exp( sum_{j1 != j2} G_{r_j1 r_j2} / (2 sigma^2) ) - log(alpha!)``.

    Direct enumeration of Eq. 5 over all ``b^alpha`` ordered tuples (independent of the DP); equals
    ``log S_alpha``. Only for tiny cases (``b^alpha <= 2e6``).
    """
    G = np.asarray(G, dtype=float)
    b = G.shape[0]
    alpha = check_positive_int("alpha", alpha)
    if b**alpha > 2_000_000:
        raise DPValueError(f"brute force over b^alpha = {b**alpha} tuples is too large (max 2e6)")
    tuples = np.array(list(product(range(b), repeat=alpha)), dtype=np.int64)
    tot = np.zeros(tuples.shape[0])
    for j1 in range(alpha):
        for j2 in range(alpha):
            if j1 != j2:
                tot += G[tuples[:, j1], tuples[:, j2]]
    return float(logsumexp(tot / (2 * sigma * sigma)) - gammaln(alpha + 1))


# ------------------------------------------------------------------------------------------------ divergences
def _orders(orders: Iterable[int]) -> np.ndarray:
    a = np.asarray(sorted(set(int(x) for x in orders)), dtype=np.int64)
    if a.size == 0 or a[0] < 2:
        raise DPValueError(f"orders must be integers >= 2, got {list(orders)!r}")
    return a


def rho_remove(
    G: np.ndarray,
    sigma: float,
    orders: Iterable[int],
    bands: int,
    *,
    work_budget: float | None = DEFAULT_WORK_BUDGET,
) -> tuple[np.ndarray, float]:
    """Upper bound on ``R_alpha(P||Q)`` (remove) per order, Algorithm 1; exact when tau = 0.

    Returns ``(rho, tau)``; ``rho = (log S[G^(p)] + log alpha! - alpha log b)/(alpha-1) + alpha tau/(2 sigma^2)``.
    """
    a = _orders(orders)
    sigma = check_positive("sigma", sigma)
    G = np.asarray(G, dtype=float)
    b = G.shape[0]
    Gp, tau = truncate_gram(G, bands)
    logS = log_partition_dp(Gp, sigma, int(a[-1]), bands, work_budget=work_budget)
    rho = (logS[a] + gammaln(a + 1.0) - a * math.log(b)) / (a - 1) + a * tau / (2 * sigma * sigma)
    return np.maximum(rho, 0.0), tau


def rho_add_lemma34(G: np.ndarray, sigma: float, orders: Iterable[int]) -> np.ndarray:
    """Lemma 3.4 (Eq. 6): ``R_alpha(Q||P) <= tr(G)/(2 b s^2) + (alpha-1) sum(G)/(2 b^2 s^2)``."""
    a = _orders(orders)
    sigma = check_positive("sigma", sigma)
    G = np.asarray(G, dtype=float)
    b = G.shape[0]
    s2 = sigma * sigma
    return np.trace(G) / (2 * b * s2) + (a - 1) * G.sum() / (2 * b * b * s2)


def gaussian_rdp(sens2: float, sigma: float, orders: Iterable[int]) -> np.ndarray:
    """``alpha * sens2 / (2 sigma^2)``: Renyi divergence of two Gaussians at squared distance ``sens2``."""
    a = _orders(orders)
    return a * float(sens2) / (2 * sigma * sigma)


# ------------------------------------------------------------------------------------------------ conversion
def delta_from_rdp(orders: Sequence[int], rho: Sequence[float], epsilon: float) -> tuple[float, int]:
    """Theorem 3.1 (Eq. 4) minimised over the orders: returns ``(delta, best order)`` (delta capped at 1)."""
    eps = check_epsilon(epsilon)
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rho, dtype=float)
    logd = (a - 1) * (r - eps) - np.log(a - 1) + a * np.log1p(-1 / a)
    i = int(np.argmin(logd))
    return float(min(math.exp(min(logd[i], 0.0)), 1.0)), int(a[i])


def epsilon_from_rdp(orders: Sequence[int], rho: Sequence[float], delta: float) -> tuple[float, int]:
    """Theorem 3.1 solved for epsilon: ``rho + log((a-1)/a) - (log delta + log a)/(a-1)``, min over orders.

    Returns ``(epsilon, best order)``; epsilon is clipped at 0 (valid: the hockey-stick divergence is
    non-increasing in epsilon).
    """
    d = check_delta(delta)
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rho, dtype=float)
    eps = r + np.log((a - 1) / a) - (math.log(d) + np.log(a)) / (a - 1)
    i = int(np.argmin(eps))
    return float(max(eps[i], 0.0)), int(a[i])


# ------------------------------------------------------------------------------------------------ references
def feldman_shenfeld_rdp(b: int, sigma: float, alpha: int, epochs: int = 1, dps: int = 40) -> float:
    """Remove-direction RDP of random allocation for DP-SGD (C = I), by the partition sum, in mpmath.

    Independent reference for the DP (Feldman & Shenfeld 2025 write the remove-direction divergence of
    one-of-b random allocation as a sum over integer partitions of alpha). With ``G = k I``:
    ``S_alpha = sum_{partitions lam of alpha, len <= b} [b! / ((b - len)! prod_v mult_v!)]
    prod_i exp(k lam_i (lam_i - 1) / (2 sigma^2)) / lam_i!``.
    """
    import mpmath as mp

    b = check_positive_int("b", b)
    alpha = check_positive_int("alpha", alpha)
    k = check_positive_int("epochs", epochs)
    with mp.workdps(dps):
        s2 = mp.mpf(sigma) ** 2
        total = mp.mpf(0)

        def parts(n, maxpart):
            if n == 0:
                yield []
                return
            for v in range(min(n, maxpart), 0, -1):
                for rest in parts(n - v, v):
                    yield [v] + rest

        for lam in parts(alpha, alpha):
            ln = len(lam)
            if ln > b:
                continue
            mult: dict[int, int] = {}
            for v in lam:
                mult[v] = mult.get(v, 0) + 1
            coef = mp.factorial(b) / mp.factorial(b - ln)
            for c in mult.values():
                coef /= mp.factorial(c)
            term = coef
            for v in lam:
                term *= mp.exp(k * v * (v - 1) / (2 * s2)) / mp.factorial(v)
            total += term
        rho = (mp.log(mp.factorial(alpha)) + mp.log(total) - alpha * mp.log(b)) / (alpha - 1)
        return float(rho)
