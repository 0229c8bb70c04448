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

**Tight add direction (our extension).** Under Q, ``p/q = (1/b) sum_i W_i`` with correlated mean-one
lognormals ``W_i = exp(Y_i - v_i/2)``, ``Y ~ N(0, G/sigma^2)``, so ``R_alpha(Q||P) = log E[S^{-(alpha-1)}]/(alpha-1)``
is a negative moment: exact for independent slots through a Gamma integral of lognormal Laplace transforms
(:func:`log_neg_moment_independent`, :func:`rho_add_exact_independent`), bounded for correlated ones by
AM-GM/Hoelder over slot classes, a variance raise and the Slepian/Kahane comparison (:func:`rho_add_class_bound`,
:func:`rho_add_tight`).

**Speed.** The DP step is factored by groups of states that differ only in the oldest window count, so
that it needs one ``exp`` per state instead of one per transition; it runs compiled with numba
(``backend="numba"``, default) or as numpy matrix products (``"vectorised"``); the original per-transition
numpy step (``"numpy"``) is kept as the reference. All agree to rounding.

**Conversion (Theorem 3.1; Canonne, Kamath & Steinke 2020, Prop. 12).** If ``R_alpha <= rho`` then
``H_{e^eps} <= exp((alpha-1)(rho - eps)) (1 - 1/alpha)^alpha / (alpha - 1)``; minimised over the orders.
The book has one implementation of it, :func:`dputils.accountants.rdp.rdp_to_delta` and
:func:`~dputils.accountants.rdp.rdp_to_epsilon` (the ``"modern"`` conversion), used by the matrix accountants.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import product

import numpy as np
from scipy.special import gammaln, logsumexp

from ..errors import DPValueError, NumericalError, check_positive, check_positive_int
from ..numerics import bisect_monotone
from ..resources import check_memory, check_work
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


def dp_update_operations(bands: int) -> float:
    """Elementary operations one DP update costs at bandwidth p = ``bands``: ``max(8, p^2)``.

    Measured (numba backend, CPU time per update of :func:`dp_work` over the time of one element of a numpy
    add): 6.5 at p = 3, 17 at p = 5, 125 at p = 10 and 340 at p = 20 (1e-5 relative); the window of p - 1
    counts makes each update cost about p^2 (the projections and the group layout), so an estimate that
    counts updates alone under-states a wide band by two orders of magnitude. An estimate, for
    :func:`dp_operations`."""
    p = max(int(bands), 1)
    return float(max(8, p * p))


def dp_operations(bands: int, b: int, alpha_max: int, wrap: bool) -> float:
    """Estimated elementary operations of the DP (:func:`dp_work` updates times :func:`dp_update_operations`),
    the unit of :func:`dputils.resources.check_work` (``DPUTILS_MAX_WORK``)."""
    return dp_work(bands, b, alpha_max, wrap) * dp_update_operations(min(bands, b))


def _expand(rows: np.ndarray, rem: np.ndarray, n_parts: int) -> tuple[np.ndarray, np.ndarray]:
    """Append ``n_parts`` columns to ``rows``: each row is repeated with every value ``0..rem`` of the next
    column (``rem`` its remaining budget). Rows sorted lexicographically stay sorted."""
    for _ in range(n_parts):
        counts = rem + 1
        parent = np.repeat(np.arange(rows.shape[0]), counts)
        offsets = np.cumsum(counts) - counts
        val = np.arange(parent.size, dtype=np.int64) - np.repeat(offsets, counts)
        rows = np.concatenate([rows[parent], val[:, None]], axis=1)
        rem = rem[parent] - val
    return rows, rem


def _compositions(n_parts: int, total_max: int) -> np.ndarray:
    """All tuples of ``n_parts`` non-negative integers with sum <= ``total_max``, in lexicographic order
    (the order of ``itertools.product`` filtered by the sum), without enumerating the full product."""
    rows, _ = _expand(np.zeros((1, 0), dtype=np.int64), np.array([total_max], dtype=np.int64), n_parts)
    return rows


@lru_cache(maxsize=16)
def _rank_tables(window: int, alpha_max: int) -> tuple[np.ndarray, np.ndarray]:
    L, A = window, alpha_max
    F = np.array([[math.comb(x + K + 1, K + 1) for K in range(L + 1)] for x in range(A + 1)], dtype=np.int64)
    below = np.array([math.comb(x + L, L + 1) for x in range(A + 1)], dtype=np.int64)
    return F, below


def _state_rank(coords, window: int, alpha_max: int) -> np.ndarray:
    """Index of the states ``(m, r_1..r_L)`` (``coords[0] = m``, ``coords[j] = r_j``) in the lexicographic order.

    The states before ``(m, r)`` are the ``binom(m + L, L + 1)`` with a smaller total, plus, for each window
    position ``j``, those that agree on ``m, r_1..r_{j-1}`` and have a smaller ``r_j``:
    ``F(rem_{j-1}, L - j) - F(rem_j, L - j)`` with ``rem_j = m - r_1 - ... - r_j`` and
    ``F(x, K) = binom(x + K + 1, K + 1)`` the number of ``(K+1)``-tuples with sum <= x (hockey stick).
    """
    L = window
    F, below = _rank_tables(window, alpha_max)
    rem = np.asarray(coords[0], dtype=np.int64)
    rank = below[rem]
    for j in range(1, L + 1):
        nxt = rem - np.asarray(coords[j], dtype=np.int64)
        rank = rank + F[rem, L - j] - F[nxt, L - j]
        rem = nxt
    return rank


def n_states(window: int, alpha_max: int) -> int:
    """Number of DP states ``(m, r_1..r_L)`` with ``sum(r) <= m <= alpha_max``: ``binom(alpha_max + L + 1, L + 1)``."""
    return math.comb(alpha_max + window + 1, window + 1)


#: How many (window, order) state spaces and group layouts stay cached (``lru_cache`` of :func:`_state_space`,
#: :func:`_rank_tables` and :func:`_group_layout`): a plan of several bandwidths keeps that many tables at once.
STATE_CACHE_SIZE = 16


def dp_table_bytes(bands: int, b: int, alpha_max: int) -> float:
    """Estimated bytes of the state space, transition table and group layout of the DP at bandwidth p =
    ``bands`` up to ``alpha_max`` (the part of :func:`dp_memory` that stays cached after the DP returns)."""
    L = max(min(bands, b) - 1, 0)
    A = alpha_max
    n_st, n_tr = n_states(L, A), n_transitions(L, A)
    n_grp = math.comb(A + L, L) if L > 0 else 1
    return 8.0 * (6 * n_tr + 3 * (L + 2) * n_st + 2 * n_grp * (A + 1))


def dp_memory(bands: int, b: int, alpha_max: int, wrap: bool) -> float:
    """Estimated peak bytes of the DP for bandwidth p = ``bands`` over ``b`` slots up to ``alpha_max``.

    The state space and transition table (:func:`_state_space`, :func:`_group_layout`), and the DP values:
    one row of states per fixed prefix, with the per-transition (unfactored) or per-group (factored) work
    arrays of one step.
    """
    L = max(min(bands, b) - 1, 0)
    A = alpha_max
    n_st, n_tr = n_states(L, A), n_transitions(L, A)
    n_grp = math.comb(A + L, L) if L > 0 else 1
    n_pre = n_prefixes(L, A) if wrap and L > 0 else 1
    tables = dp_table_bytes(bands, b, alpha_max)
    # numpy step: gather, increment and exponentials per transition; factored: padded groups and their sums
    step = 8.0 * n_pre * (max(4 * n_tr, 3 * n_grp * (A + 1)) + 6 * n_st)
    prefixes = 8.0 * n_pre * (L + 2) if wrap and L > 0 else 0.0
    return tables + step + prefixes


@lru_cache(maxsize=16)
def _state_space(window: int, alpha_max: int):
    """States (m, r_1..r_L) with sum(r) <= m <= alpha_max and the transition table of one DP step.

    Returns ``states`` (n_states x (L+1) ints, in lexicographic order), ``src``/``tval`` (transitions sorted
    by destination) and ``starts`` (segment starts of each destination state in the sorted order; every
    state is a destination). Only the ``binom(alpha_max + L + 1, L + 1)`` states themselves are enumerated;
    a destination's index is its lexicographic rank (:func:`_state_rank`), no dense lookup grid.
    """
    L, A = window, alpha_max
    m = np.arange(A + 1, dtype=np.int64)
    states, _ = _expand(m[:, None], m.copy(), L)  # lexicographic in (m, r_1, ..., r_L)
    srcs, ts, dests = [], [], []
    for t in range(A + 1):
        ok = states[:, 0] + t <= A
        s_idx = np.nonzero(ok)[0]
        st = states[ok]
        dest_coords = (
            [st[:, 0] + t] + [st[:, j] for j in range(2, L + 1)] + ([np.full(st.shape[0], t)] if L > 0 else [])
        )
        d_idx = _state_rank(dest_coords, L, A)
        srcs.append(s_idx)
        ts.append(np.full(s_idx.size, t))
        dests.append(d_idx)
    src = np.concatenate(srcs)
    tval = np.concatenate(ts)
    dest = np.concatenate(dests)
    if (dest < 0).any() or (dest >= states.shape[0]).any():  # pragma: no cover - construction guarantees validity
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


# ------------------------------------------------------------------------------------------------ DP step kernels
# One forward step of the DP: for every destination state d and every fixed prefix (row),
#     new[row, d] = LSE_{k: dest(k) = d} ( cur[row, src_k] + selfterm[t_k] + t_k * proj[src_k] ),
# with proj[s] = (1/sigma^2) sum_j G_{q, window_j} r_j(s). The transitions are sorted by destination
# (segments start at ``starts``). Two implementations with the same arithmetic: numba (compiled loops,
# used when numba is importable) and numpy (gather + segmented log-sum-exp); they agree to ~1e-15.
#: Linear sums of the factored DP step below this are recomputed exactly (see :func:`_dp_step_factored`).
_UNDERFLOW_FLOOR = 1e-200
#: Linear sums of the compiled factored step above this are recomputed exactly (see the numba kernel).
_OVERFLOW_CEILING = 1e290
#: Pivot of the compiled step's linear sums: the group's argmax (True) or its largest r_1 (False).
_NUMBA_PIVOT = True


def _dp_step_numpy(cur, src, tint, tflt, starts, proj, selfterm):
    inc = selfterm[tint] + tflt * proj[src]
    return _segment_lse(cur[:, src] + inc, starts)


try:  # optional compiled kernel
    import numba as _numba
except ImportError:  # pragma: no cover - numba is a declared dependency; the numpy path is the fallback
    _numba = None

if _numba is not None:

    @_numba.njit(cache=True, nogil=True)
    def _dp_step_numba_kernel(cur, src, tint, tflt, starts, proj, selfterm, out):  # pragma: no cover - compiled
        n_pre, n_states = out.shape
        n_tr = src.size
        buf = np.empty(4096)
        for row in range(n_pre):
            for d in range(n_states):
                k0 = starts[d]
                k1 = starts[d + 1] if d + 1 < n_states else n_tr
                if k1 - k0 > buf.size:
                    buf = np.empty(k1 - k0)
                mx = -np.inf
                for k in range(k0, k1):
                    sk = src[k]
                    val = cur[row, sk] + (selfterm[tint[k]] + tflt[k] * proj[sk])
                    buf[k - k0] = val
                    if val > mx:
                        mx = val
                if mx == -np.inf:
                    out[row, d] = -np.inf
                    continue
                acc = 0.0
                for k in range(k1 - k0):
                    acc += np.exp(buf[k] - mx)
                out[row, d] = mx + np.log(acc)
        return out

    # reassociation lets LLVM vectorise the dot products (no flag that assumes finite values: -inf is used)
    @_numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def _dp_step_numba_factored(
        curg, rg, dg_s, dt_s, rest_g, c1, selfterm, floor, ceiling, pivot, out_s
    ):  # pragma: no cover
        # Same factorisation as _dp_step_factored: every destination d = (m', w', t) sums over the members of
        # one group g = (m' - t, w'), which differ only in the oldest count r_1 = R_g - j, j = 0..R_g
        # (``curg[row, g, j]``, -inf past R_g). With K = t c1 >= 0 and E[g, j] = exp(curg - M_g) (one exp per
        # state, = 1 at the group's argmax j*):
        #   LSE_d = M_g + selfterm[t] + t rest_g + K (R_g - j*) + log sum_j E[g, j] exp(-K (j - j*)).
        # The sum is >= 1 (the j* term), so it never underflows; the factors exp(K i) for j < j* come from a
        # table capped at 1e300, and sums above ``ceiling`` (possible overflow) are redone exactly. Factors
        # below 1e-150 are set to 0 (their terms are < 1e-150 relative to the sum): this keeps the arithmetic
        # out of the subnormal range, which is ~100x slower on x86. Destinations come sorted by group
        # (``dg_s``, ``dt_s``) and are written in that order (``out_s``); the caller scatters them back.
        n_pre, n_groups, width = curg.shape
        n_dest = dg_s.size
        tneg = np.empty((width, width))
        tpos = np.empty((width, width))
        for t in range(width):
            for i in range(width):
                x = (t * c1) * i
                tneg[t, i] = np.exp(-x) if x < 345.0 else 0.0
                tpos[t, i] = np.exp(x) if x < 690.0 else 1e300
        M = np.empty(n_groups)
        jst = np.zeros(n_groups, dtype=np.int64)
        E = np.zeros((n_groups, width))
        for row in range(n_pre):
            for g in range(n_groups):
                mg = -np.inf
                js = 0
                for j in range(rg[g] + 1):
                    v = curg[row, g, j]
                    if v > mg:
                        mg = v
                        js = j
                M[g] = mg
                jst[g] = js
                for j in range(rg[g] + 1):
                    x = curg[row, g, j] - mg
                    E[g, j] = np.exp(x) if x > -345.0 else 0.0
            for ii in range(n_dest):
                g = dg_s[ii]
                t = dt_s[ii]
                mg = M[g]
                if mg == -np.inf:
                    out_s[row, ii] = -np.inf
                    continue
                js = jst[g] if pivot else 0
                acc = 0.0
                for i in range(rg[g] + 1 - js):
                    acc += E[g, js + i] * tneg[t, i]
                for i in range(1, js + 1):
                    acc += E[g, js - i] * tpos[t, i]
                base = selfterm[t] + t * rest_g[g]
                if floor < acc < ceiling:
                    out_s[row, ii] = mg + base + (t * c1) * (rg[g] - js) + np.log(acc)
                else:  # exact log-sum-exp over the group members
                    mx = -np.inf
                    for j in range(rg[g] + 1):
                        val = curg[row, g, j] + (t * c1) * (rg[g] - j)
                        if val > mx:
                            mx = val
                    acc = 0.0
                    for j in range(rg[g] + 1):
                        acc += np.exp(curg[row, g, j] + (t * c1) * (rg[g] - j) - mx)
                    out_s[row, ii] = mx + base + np.log(acc)
        return out_s


def _dp_step_numba(cur, src, tint, tflt, starts, proj, selfterm):
    out = np.empty((cur.shape[0], starts.size))
    return _dp_step_numba_kernel(
        np.ascontiguousarray(cur), src, tint, tflt, starts, np.ascontiguousarray(proj), selfterm, out
    )


@lru_cache(maxsize=16)
def _group_layout(window: int, alpha_max: int):
    """Layout of the factored DP step (window ``L >= 1``): states grouped by ``g = (m, r_2, ..., r_L)``.

    Returns ``gid`` (group of each state), ``n_groups``, ``r1`` (oldest count of each state), ``rg`` (largest
    ``r_1`` in each group, ``m - r_2 - ... - r_L``), ``order``/``gstarts`` (states sorted by group, segment starts),
    per destination state ``d = (m', w', t)``: its source group ``dg`` and its new count ``dt``; and ``gmem[g, j]``,
    the state of group g with ``r_1 = R_g - j`` (-1 past ``R_g``); ``dorder`` lists the destinations by group;
    ``gwin`` holds the window ``(r_2, ..., r_L)`` of each group.
    """
    states, src, tval, starts = _state_space(window, alpha_max)
    key = np.delete(states, 1, axis=1)
    ukey, gid = np.unique(key, axis=0, return_inverse=True)
    gwin = np.ascontiguousarray(ukey[:, 1:], dtype=float)  # (r_2, ..., r_L) of each group
    gid = np.asarray(gid, dtype=np.int64).ravel()
    n_groups = int(gid.max()) + 1
    r1 = states[:, 1].astype(np.int64)
    rg = np.zeros(n_groups, dtype=np.int64)
    np.maximum.at(rg, gid, r1)
    order = np.argsort(gid, kind="stable")
    gstarts = np.flatnonzero(np.r_[True, gid[order][1:] != gid[order][:-1]])
    dg = gid[src[starts]]
    dt = tval[starts].astype(np.int64)
    gmem = np.full((n_groups, alpha_max + 1), -1, dtype=np.int64)  # member with r_1 = R_g - j
    gmem[gid, rg[gid] - r1] = np.arange(states.shape[0])
    dorder = np.argsort(dg, kind="stable")  # destinations grouped by source group (cache locality)
    out = (gid, n_groups, r1, rg, order, gstarts, dg, dt, gmem, dorder, gwin)
    for arr in out:
        if isinstance(arr, np.ndarray):
            arr.setflags(write=False)
    return out


def _dp_step_factored(cur, src, tint, tflt, starts, proj, selfterm, *, layout, c1, rest):
    """Vectorised DP step that needs one ``exp`` per state instead of one per transition.

    All sources of a destination ``d = (m', w', t)`` form one group ``g = (m' - t, w')`` and differ only in
    the oldest count ``r_1``; their terms are ``cur[s] + selfterm[t] + t rest_g + t c1 r_1`` (``c1 >= 0`` the
    coefficient of the oldest window slot, ``rest_g`` the rest of the window). With ``M_g = max_g cur`` and
    ``R_g`` the largest ``r_1`` of the group,

        LSE_d = M_g + selfterm[t] + t rest_g + t c1 R_g + log sum_{s in g} e^{cur[s] - M_g} e^{-t c1 (R_g - r_1(s))},

    and the last sums for all ``(g, t)`` are one matrix product ``E[g, j] @ T[t, j]^T`` with
    ``E[g, R_g - r_1(s)] = e^{cur[s] - M_g}`` and ``T[t, j] = e^{-t c1 j}``. Entries whose linear sum is below
    ``_UNDERFLOW_FLOOR`` (possible underflow) are recomputed by the exact segmented log-sum-exp; every
    dropped (underflowed) product is below 1e-307, so the relative error stays at rounding level.
    """
    gid, n_groups, r1, rg, order, gstarts, dg, dt = layout[:8]
    n_pre, n_states = cur.shape
    amax = selfterm.size - 1
    cs = cur[:, order]
    M = np.maximum.reduceat(cs, gstarts, axis=1)  # (n_pre, n_groups), groups in sorted order = ids 0..
    Ms = np.where(np.isfinite(M), M, 0.0)
    E = np.exp(cur - Ms[:, gid])
    pad = np.zeros((n_pre, n_groups * (amax + 1)))
    pad[:, gid * (amax + 1) + (rg[gid] - r1)] = E
    jj = np.arange(amax + 1)
    tab = np.exp(-np.outer(jj * c1, jj))  # tab[t, j] = exp(-t c1 j)
    sums = pad.reshape(n_pre, n_groups, amax + 1) @ tab.T  # [row, g, t]
    vals = sums[:, dg, dt]
    with np.errstate(divide="ignore"):
        out = (Ms[:, dg] + selfterm[dt] + dt * rest[dg] + (dt * c1) * rg[dg]) + np.log(vals)
    out[~np.isfinite(M[:, dg])] = -np.inf
    bad = (vals < _UNDERFLOW_FLOOR) & np.isfinite(M[:, dg])
    if bad.any():
        rows, ds = np.nonzero(bad)
        seg_end = np.r_[starts[1:], src.size]
        lens = seg_end[ds] - starts[ds]
        ks = np.repeat(starts[ds] - np.r_[0, np.cumsum(lens)[:-1]], lens) + np.arange(lens.sum())
        rr = np.repeat(rows, lens)
        sk = src[ks]
        v = cur[rr, sk] + selfterm[tint[ks]] + tflt[ks] * (c1 * r1[sk] + rest[gid[sk]])
        seg = np.r_[0, np.cumsum(lens)[:-1]]
        out[rows, ds] = _segment_lse(v[None, :], seg)[0]
    return out


def dp_backend(backend: str = "auto") -> str:
    """Resolve the DP backend name; ``"auto"`` is ``"numba"`` when numba is importable, else ``"vectorised"``."""
    if backend in ("vectorised", "numpy"):
        return backend
    if backend not in ("auto", "numba"):
        raise DPValueError(f"backend must be one of 'auto', 'vectorised', 'numba', 'numpy', got {backend!r}")
    if backend == "numba" and _numba is None:
        raise DPValueError("backend 'numba' requested but numba is not installed")
    if backend == "auto":
        return "numba" if _numba is not None else "vectorised"
    return backend


# ------------------------------------------------------------------------------------------------ log S
def needs_wrap(Gp: np.ndarray, bands: int) -> bool:
    """Whether the banded Gram matrix ``Gp`` couples slots at linear distance >= ``bands`` (its cyclic
    corner blocks, from several epochs): then the dynamic program must close the cycle (Algorithm 1's
    outer loop over the first ``bands - 1`` counts)."""
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
    backend: str = "auto",
    stats: dict | None = None,
) -> np.ndarray:
    """``log S_alpha`` for ``alpha = 0..alpha_max`` by the dynamic program of Lemma 3.3 / Algorithm 1.

    ``Gp`` must be p-cyclically banded (entries at cyclic distance >= ``bands`` are ignored: pass the
    output of :func:`~dputils.matrix.factorizations.truncate_gram`). Exact up to floating point.
    Raises ``DPValueError`` when the predicted work exceeds ``work_budget`` (None: no limit).
    ``backend``: ``"numba"`` (compiled factored step), ``"vectorised"`` (the same factorisation with numpy
    matrix products, :func:`_dp_step_factored`), ``"numpy"`` (one gather + log-sum-exp per transition, the
    original implementation, kept as reference) or ``"auto"`` (numba when importable, else vectorised). All
    give the same numbers to rounding (tested to 1e-12).
    ``stats`` (optional dict) receives the counts of what the run enumerated: ``"transitions"`` (the (prefix,
    source state, new count) triples it updated, summed over the slots), ``"slots"`` (slot steps), ``"prefixes"``
    and ``"states"`` (per prefix); deterministic, for measuring the cost against the paper's O(b p alpha^2p).
    """
    backend_name = dp_backend(backend)
    step = _dp_step_numba if backend_name == "numba" else _dp_step_numpy  # unfactored step (p = 1 or c1 < 0)
    Gp = np.asarray(Gp, dtype=float)
    b = Gp.shape[0]
    if Gp.shape != (b, b):
        raise DPValueError(f"Gp must be square, got shape {Gp.shape}")
    sigma = check_positive("sigma", sigma)
    A = check_positive_int("alpha_max", alpha_max)
    p = min(check_positive_int("bands", bands), b)
    s2 = sigma * sigma
    wrap = needs_wrap(Gp, p)
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
    check_work(
        "alpha_max",
        work * dp_update_operations(p),
        "operations",
        hint=f"{work:.3g} DP updates of bandwidth {p} over b={b} slots; lower alpha_max or bands",
    )
    check_memory(
        "alpha_max",
        dp_memory(p, b, A, wrap),
        f"the dynamic program (bands={p}, b={b})",
        hint="lower alpha_max or bands",
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
        pre = _compositions(L, A).astype(float)  # product(range(A + 1), repeat=L) with sum <= A, same order
        prefixes = pre
        Gpre = Gp[:L, :L]
        diag = np.diag(Gpre)
        w = (
            np.einsum("ni,ij,nj->n", pre, np.triu(Gpre, 1), pre) / s2
            + (pre * (pre - 1) * diag).sum(axis=1) / (2 * s2)
            - gammaln(pre + 1).sum(axis=1)
        )
        m0 = pre.sum(axis=1).astype(np.int64)
        # state index of (m0, l): its lexicographic rank
        idx = _state_rank([m0] + [pre[:, j].astype(np.int64) for j in range(L)], L, A)
        cur = np.full((pre.shape[0], states.shape[0]), -np.inf)
        cur[np.arange(pre.shape[0]), idx] = w
        first = L

    tsrc = tval.astype(float)
    zero_proj = np.zeros(states.shape[0])
    factored = backend_name in ("numba", "vectorised") and L > 0
    if factored:
        layout = _group_layout(L, A)
        dg_s, dt_s = layout[6][layout[9]], layout[7][layout[9]]  # destinations in group order
    if stats is not None:
        stats.update(transitions=0, slots=0, prefixes=int(cur.shape[0]), states=int(states.shape[0]))
    for q in range(first, b):
        if stats is not None:
            stats["transitions"] += int(cur.shape[0]) * int(src.size)
            stats["slots"] += 1
        selfterm = Gp[q, q] * tt * (tt - 1) / (2 * s2) - log_fact
        if L > 0:
            pos = np.arange(q - L, q)
            c = np.where(pos >= 0, Gp[q, np.clip(pos, 0, b - 1)], 0.0) / s2
            proj = None if factored and c[0] >= 0 else R @ c  # (1/sigma^2) sum_s G_{s q} r_s per source state
        else:
            proj = zero_proj
        if factored and c[0] >= 0:
            rest_g = layout[10] @ c[1:]  # (1/sigma^2) sum_{j >= 2} G r_j of each group's window
        if factored and c[0] >= 0 and backend_name == "vectorised":
            cur = _dp_step_factored(
                cur, src, tval, tsrc, starts, proj, selfterm, layout=layout, c1=float(c[0]), rest=rest_g
            )
        elif factored and c[0] >= 0:
            ext = np.empty((cur.shape[0], cur.shape[1] + 1))
            ext[:, :-1] = cur
            ext[:, -1] = -np.inf  # gmem = -1 (past R_g) reads -inf
            out_s = _dp_step_numba_factored(
                ext[:, layout[8]],
                layout[3],
                dg_s,
                dt_s,
                rest_g,
                float(c[0]),
                selfterm,
                _UNDERFLOW_FLOOR,
                _OVERFLOW_CEILING,
                _NUMBA_PIVOT,
                np.empty((cur.shape[0], layout[9].size)),
            )
            cur = np.empty_like(out_s)
            cur[:, layout[9]] = out_s
        else:
            cur = step(cur, src, tval, tsrc, starts, proj, selfterm)

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
    G: np.ndarray, sigma: float, orders: Iterable[int], bands: int, *, work_budget: float | None = DEFAULT_WORK_BUDGET
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


# ------------------------------------------------------------------------------------------------ tight add direction
# R_alpha(Q||P) with Q = N(0, s^2 I), P = (1/b) sum_i N(m_i, s^2 I).  With r = alpha - 1,
#     R_alpha(Q||P) = (1/r) log E_Q[(p/q)^{-r}],   p/q(x) = S = (1/b) sum_i W_i,
#     W_i = exp(Y_i - v_i/2),  Y = (<x, m_i>/s^2)_i ~ N(0, G/s^2),  v_i = G_ii/s^2,
# so the add divergence is a negative moment of a mean of correlated mean-one lognormals.

#: Integration points of the lognormal Laplace transform (the check uses every other point).
_LAPLACE_POINTS = 128
#: Step of the trapezoid rule in s = log t of the Gamma-integral (the check uses twice the step).
_LOGT_STEP = 0.05
#: Safety factor applied to the estimated quadrature error before it is added to the bound.
_ERROR_SAFETY = 10.0


def _lse_rows(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``log sum_j w_j exp(x_ij)`` along the last axis (weights > 0; plain numpy, faster than scipy's)."""
    mx = np.max(x, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(x - mx) @ w) + mx[..., 0]


def _log_laplace_lognormal(log_u: np.ndarray, v: float, points: int = _LAPLACE_POINTS):
    """``log L(u) = log E[exp(-u W)]``, ``W = exp(sqrt(v) Z - v/2)``, ``Z ~ N(0, 1)`` (mean-one lognormal).

    ``L(u) = (2 pi)^{-1/2} int exp(h(z)) dz`` with the strictly concave exponent
    ``h(z) = -u exp(a z - v/2) - z^2/2`` (``a = sqrt(v)``, ``h'' <= -1``). Its maximiser is ``z* = -x`` with
    ``x = u a exp(-a x - v/2)`` (Newton in ``log x``), its curvature there ``1 + a x``. The trapezoid rule
    runs on ``[z_L, z_R]`` where ``h`` has dropped by 50 below ``h(z*)`` on both sides; the two tails are
    bounded by ``exp(h(z_end)) / |h'(z_end)|`` (concavity) and added, so truncation never lowers the value.
    Returns ``(log L with all points, log L with every other point)``; their difference estimates the
    quadrature error (the trapezoid rule converges geometrically for this entire integrand).
    """
    log_u = np.asarray(log_u, dtype=float)
    if v <= 0.0:  # W = 1: L(u) = exp(-u)
        val = -np.exp(log_u)
        return val, val.copy()
    a = math.sqrt(v)
    c = log_u + math.log(a) - v / 2  # x = exp(y) solves y + a e^y = c
    # G(y) = y + a e^y - c is increasing and convex; Newton from any start with G >= 0 decreases
    # monotonically to the root. G(c) = a e^c >= 0, and G(log(c/a)) = log(c/a) >= 0 when c >= a.
    y = np.where(c >= a, np.minimum(c, np.log(np.maximum(c, a) / a)), c)
    for _ in range(100):
        ey = np.exp(y)
        step = (y + a * ey - c) / (1.0 + a * ey)
        y = y - step
        if np.all(np.abs(step) < 1e-14 * np.maximum(1.0, np.abs(y))):
            break
    resid = np.abs(y + a * np.exp(y) - c)
    if not np.all(resid <= 1e-9 * np.maximum(1.0, np.abs(c))):
        raise NumericalError("lognormal Laplace transform: Newton iteration for the saddle point did not converge")
    x = np.exp(y)
    zs = -x
    hz = lambda z: -np.exp(log_u[:, None] + a * z - v / 2) - z * z / 2  # noqa: E731
    hstar = -x / a - x * x / 2  # h(z*), using u e^{a z* - v/2} = x / a
    w = 1.0 / np.sqrt(1.0 + a * x)
    z_right = zs + 10.0 * w  # right of z*: curvature >= 1/w^2, so the drop at 10 w is >= 50
    # left of z*: bisection (40 halvings of [0, 10], lockstep) for the distance at which h has dropped by 50;
    # the drop is 0 at 0 and >= 50 at 10 (curvature >= 1), and the far end (drop >= 50) is kept
    dist = bisect_monotone(
        lambda d: hstar - hz((zs - d)[:, None])[:, 0] >= 50.0,
        np.zeros_like(zs),
        np.full_like(zs, 10.0),
        keep="hi",
        tol=0.0,
        max_iter=40,
        ends_checked=True,
    )
    z_left = zs - dist
    n = points + 1 if points % 2 == 0 else points  # odd count: the coarse rule uses every other point
    frac = np.linspace(0.0, 1.0, n)
    z = z_left[:, None] + (z_right - z_left)[:, None] * frac[None, :]
    hstep = (z_right - z_left) / (n - 1)
    hv = hz(z)
    wts = np.ones(n)
    wts[0] = wts[-1] = 0.5
    fine = _lse_rows(hv, wts) + np.log(hstep)
    wc = np.ones((n + 1) // 2)
    wc[0] = wc[-1] = 0.5
    coarse = _lse_rows(hv[:, ::2], wc) + np.log(2 * hstep)
    # tails (rigorous for a concave exponent): int_{z_R}^inf e^h <= e^{h(z_R)} / |h'(z_R)|, same on the left
    dh = lambda z: -a * np.exp(log_u + a * z - v / 2) - z  # noqa: E731
    tail = np.logaddexp(hv[:, -1] - np.log(np.abs(dh(z_right))), hv[:, 0] - np.log(np.abs(dh(z_left))))
    norm = -0.5 * math.log(2 * math.pi)
    fine = np.minimum(np.logaddexp(fine, tail) + norm, 0.0)
    coarse = np.minimum(np.logaddexp(coarse, tail) + norm, 0.0)
    return fine, coarse


def log_neg_moment_independent(
    variances: Sequence[float] | np.ndarray, r: Sequence[int] | np.ndarray, *, return_error: bool = False
):
    """Upper bound on ``log E[T^{-r}]`` for ``T = (1/n) sum_i exp(U_i - v_i/2)``, ``U_i ~ N(0, v_i)`` independent.

    Uses ``x^{-r} = Gamma(r)^{-1} int_0^inf t^{r-1} e^{-t x} dt`` and independence:

        E[T^{-r}] = Gamma(r)^{-1} int_0^inf t^{r-1} prod_i L_{v_i}(t/n) dt,

    ``L_v`` the Laplace transform of a mean-one lognormal (:func:`_log_laplace_lognormal`). The integral
    runs in ``s = log t`` with the trapezoid rule on ``[s_lo, s_hi]``; the two truncated tails are bounded
    rigorously and added: ``int_0^{t_lo} <= t_lo^r / r`` (``prod L <= 1``) and, with ``M`` the ``m = n // 2``
    slots of smallest variance, ``int_{t_hi}^inf <= prod_{i not in M} L_i(t_hi/n) * int_0^inf t^{r-1}
    prod_{i in M} L_i(t/n) dt`` (each ``L`` is decreasing), where the last integral is
    ``Gamma(r) (n/m)^r E[T_M^{-r}] <= Gamma(r) (n/m)^r exp(r (r + m) max_M v / (2m))`` (AM-GM on the mean
    ``T_M`` of the slots in M, then independence). The quadrature error is
    estimated by halving the resolution of each rule; ``_ERROR_SAFETY`` times the estimate (at least
    ``1e-10 (1 + |value|)``) is added so that the returned value is an upper bound. ``n = 1`` is the closed
    form ``r (r + 1) v / 2``. Returns the array over ``r`` (and the error estimate if asked).
    """
    v = np.asarray(variances, dtype=float).ravel()
    if v.size == 0 or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise DPValueError("variances must be a non-empty array of finite numbers >= 0")
    r = np.asarray(r, dtype=float).ravel()
    if r.size == 0 or np.any(r < 1) or np.any(r != np.round(r)):
        raise DPValueError("r must be integers >= 1 (r = alpha - 1)")
    n = v.size
    if n == 1:
        out = r * (r + 1) * v[0] / 2
        return (out, np.zeros_like(out)) if return_error else out
    uniq, counts = np.unique(v, return_counts=True)
    log_n = math.log(n)
    lg = gammaln(r)
    # tail split: M = the m smallest variances (taken in sorted order), the rest bounds the decay
    m_tail = n // 2
    vs = np.sort(v)
    v_m = float(vs[m_tail - 1])
    cnt_out = counts.copy()  # multiplicity of each distinct variance outside M
    taken = np.minimum(np.cumsum(counts), m_tail) - np.minimum(np.r_[0, np.cumsum(counts)[:-1]], m_tail)
    cnt_out = counts - taken
    ds = _LOGT_STEP
    s_lo = math.log(1e-12)  # left tail t_lo^r / r <= 1e-12 Gamma(r) because E[T^-r] >= 1 (Jensen)
    s = np.arange(s_lo, s_lo + 40.0 + ds / 2, ds)

    def _lam(s_grid):
        lf = np.zeros(s_grid.size)
        lc = np.zeros(s_grid.size)
        lout = np.zeros(s_grid.size)
        for vv, cnt, co in zip(uniq, counts, cnt_out):
            f, c_ = _log_laplace_lognormal(s_grid - log_n, float(vv))
            lf += cnt * f
            lc += cnt * c_
            lout += co * f
        return lf, lc, lout

    def _log_right_tail(rr, lout_end):
        return lout_end + gammaln(rr) + rr * (log_n - math.log(m_tail)) + rr * (rr + m_tail) * v_m / (2 * m_tail)

    lam_f, lam_c, l_out = _lam(s)
    for _ in range(400):
        # the right-tail bound at s_hi must be negligible (< e^-60 relative: E[T^-r] >= 1) for every r
        if np.all(_log_right_tail(r, l_out[-1]) < lg - 60.0):
            break
        s_new = s[-1] + ds * np.arange(1, int(round(10.0 / ds)) + 1)
        f, c_, fo = _lam(s_new)
        s = np.concatenate([s, s_new])
        lam_f = np.concatenate([lam_f, f])
        lam_c = np.concatenate([lam_c, c_])
        l_out = np.concatenate([l_out, fo])
    else:  # pragma: no cover - the transform decays like exp(-(log t)^2 / 2v)
        raise NumericalError("negative moment: the Laplace transform did not decay on the integration range")

    # the quadrature below holds a few (orders x grid points) arrays at once
    check_memory(
        "orders",
        8.0 * 4 * r.size * s.size,
        f"the negative-moment quadrature ({r.size} orders)",
        hint="use fewer orders",
    )

    def _integral(lam, step, idx):
        ex = r[:, None] * s[None, idx] + lam[None, idx]
        wts = np.ones(idx.size)
        wts[0] = wts[-1] = 0.5
        return _lse_rows(ex, wts) + math.log(step)

    idx_f = np.arange(s.size)
    idx_c = idx_f[::2] if s.size % 2 == 1 else idx_f[:-1][::2]
    base = _integral(lam_f, ds, idx_f)
    alt_z = _integral(lam_c, ds, idx_f)
    if idx_c[-1] == idx_f[-1]:
        alt_s = _integral(lam_f, 2 * ds, idx_c)
    else:  # compare on the same range
        alt_s = _integral(lam_f, 2 * ds, idx_c)
        base_c = _integral(lam_f, ds, idx_f[: idx_c[-1] + 1])
        alt_s = alt_s + (base - base_c)
    left = r * s[0] - np.log(r)
    right = _log_right_tail(r, l_out[-1])
    total = np.logaddexp(np.logaddexp(base, left), right)
    value = total - lg
    err = np.abs(alt_z - base) + np.abs(alt_s - base)
    margin = np.maximum(_ERROR_SAFETY * err, 1e-10 * (1.0 + np.abs(value)))
    if not np.all(np.isfinite(value + margin)):
        raise NumericalError("negative moment of the lognormal mean is not finite")
    out = value + margin
    return (out, err) if return_error else out


def rho_add_exact_independent(
    G: np.ndarray | Sequence[float], sigma: float, orders: Iterable[int], *, return_error: bool = False
):
    """``R_alpha(Q||P)`` for a **diagonal** Gram matrix (independent slots; DP-SGD: ``G = k I``).

    Under Q the likelihood ratio is ``S = (1/b) sum_i W_i`` with independent mean-one lognormals
    ``W_i = exp(Y_i - v_i/2)``, ``Y_i ~ N(0, v_i)``, ``v_i = G_ii / sigma^2``, so

        R_alpha(Q||P) = (1/(alpha-1)) log E[S^{-(alpha-1)}]

    is computed by :func:`log_neg_moment_independent` (Gamma-integral of the product of lognormal
    Laplace transforms). Exact up to the quadrature error, whose safety margin is added (an upper bound).
    ``G`` may be the b x b matrix (must be diagonal) or its diagonal.
    """
    a = _orders(orders)
    sigma = check_positive("sigma", sigma)
    G = np.asarray(G, dtype=float)
    if G.ndim == 2:
        if G.shape[0] != G.shape[1]:
            raise DPValueError(f"G must be square, got shape {G.shape}")
        if np.any(G - np.diag(np.diag(G)) != 0):
            raise DPValueError("G must be diagonal for the exact independent add divergence; use rho_add_tight")
        d = np.diag(G)
    else:
        d = G.ravel()
    if np.any(d < 0):
        raise DPValueError("the diagonal of G must be >= 0")
    val, err = log_neg_moment_independent(d / sigma**2, a - 1, return_error=True)
    rho = val / (a - 1)
    return (rho, err / (a - 1)) if return_error else rho


def slot_classes(b: int, c: int) -> np.ndarray:
    """Labels ``0..`` of a partition of the cyclic slots ``0..b-1`` into about ``c`` classes.

    ``i mod c`` when ``c`` divides ``b``: two slots of a class are at cyclic distance >= c (a multiple of
    c), so for a p-banded C and ``c >= p`` their means are orthogonal. Otherwise ``b = q c + rem`` and the
    cycle is cut into ``rem`` blocks of length ``c + 1`` and ``q - rem`` blocks of length ``c`` (spread
    evenly), each labelled by position, which keeps every within-class cyclic distance >= c with
    ``c + 1`` labels (needs ``q >= rem``; else plain ``i mod c`` with the wrap pair inside a class).
    Any partition gives a valid bound (the covariance raise uses the actual within-class entries of G).
    """
    b = check_positive_int("b", b)
    c = min(check_positive_int("c", c), b)
    q, rem = divmod(b, c)
    if rem == 0 or q < rem:
        return np.arange(b) % c
    longs = set(np.floor(np.arange(rem) * q / rem).astype(int).tolist())  # which blocks get c + 1 slots
    labels = []
    for blk in range(q):
        size = c + 1 if blk in longs else c
        labels.extend(range(size))
    return np.asarray(labels, dtype=np.int64)


#: Class counts tried by :func:`rho_add_tight` by default.
DEFAULT_ADD_CLASSES = (1, 2, 3, 4, 5, 6, 8)


def rho_add_class_bound(
    G: np.ndarray, sigma: float, orders: Iterable[int], labels: np.ndarray, *, return_error: bool = False
):
    """Upper bound on ``R_alpha(Q||P)`` from one partition of the slots into classes (labels per slot).

    With ``r = alpha - 1``, ``f(y) = ((1/b) sum_i exp(y_i - v_i/2))^{-r}``:

    1. *AM-GM + Hoelder.* ``S = sum_c (n_c/b) Sbar_c`` with ``Sbar_c`` the mean over class c, so
       ``S >= prod_c Sbar_c^{n_c/b}`` (weighted AM-GM) and, by Hoelder with exponents ``b/n_c``,
       ``E[S^{-r}] <= prod_c E[Sbar_c^{-r}]^{n_c/b}`` (whatever the dependence between classes).
    2. *Variance raise.* ``w -> (A + a w)^{-r}`` is convex, so replacing ``Y_i`` by ``Y_i + N(0, d)`` (mean
       kept at one by the ``-v_i/2`` shift) can only increase ``E f``; raise each variance in class c to
       ``max(v_i, tau_c)``.
    3. *Slepian/Kahane comparison.* ``d^2 f / dy_i dy_j = r (r+1) S^{-r-2} w_i w_j / b^2 >= 0`` for
       ``i != j``; along the Gaussian interpolation between two covariances with the same diagonal,
       ``d E f = sum_{i<j} E[d_ij f] dSigma_ij``, so raising every within-class covariance to
       ``tau_c = max(0, max_{i != j in c} G_ij) / sigma^2`` can only increase ``E f``.
    4. The raised class is exchangeable: ``Y_i = Z + U_i``, ``Z ~ N(0, tau_c)``, ``U_i ~ N(0, v_i' - tau_c)``
       independent, so ``Sbar_c = e^{Z - tau_c/2} Tbar_c`` and
       ``E[Sbar_c^{-r}] = exp(r (r+1) tau_c / 2) E[Tbar_c^{-r}]``, the second factor exact by
       :func:`log_neg_moment_independent`.

    Hence ``R_alpha(Q||P) <= (1/r) sum_c (n_c/b) [r (r+1) tau_c / 2 + log E[Tbar_c^{-r}]]``.
    """
    a = _orders(orders)
    sigma = check_positive("sigma", sigma)
    G = np.asarray(G, dtype=float)
    b = G.shape[0]
    labels = np.asarray(labels)
    if labels.shape != (b,):
        raise DPValueError(f"labels must have one entry per slot ({b}), got shape {labels.shape}")
    r = (a - 1).astype(float)
    s2 = sigma * sigma
    v = np.diag(G) / s2
    total = np.zeros(r.size)
    err = np.zeros(r.size)
    for lab in np.unique(labels):
        idx = np.flatnonzero(labels == lab)
        sub = G[np.ix_(idx, idx)]
        off = sub[~np.eye(idx.size, dtype=bool)]
        tau = max(float(off.max()), 0.0) / s2 if off.size else 0.0
        vi = np.maximum(v[idx], tau) - tau
        val, e = log_neg_moment_independent(vi, r, return_error=True)
        w = idx.size / b
        total += w * (r * (r + 1) * tau / 2 + val)
        err += w * e
    rho = total / r
    return (rho, err / r) if return_error else rho


def rho_add_tight(
    G: np.ndarray,
    sigma: float,
    orders: Iterable[int],
    classes: Iterable[int] = DEFAULT_ADD_CLASSES,
    *,
    return_details: bool = False,
):
    """Tighter upper bound on the add-direction divergence ``R_alpha(Q||P)`` (our extension; valid for ``G >= 0``).

    Per order the minimum of Lemma 3.4 and :func:`rho_add_class_bound` over the partitions
    :func:`slot_classes` ``(b, c)`` for ``c`` in ``classes`` (each is an upper bound, so is the minimum).
    Exact (up to quadrature, margin added) for a diagonal ``G`` (DP-SGD, any epochs) with ``c = 1``; for
    a banded C with p bands and ``c = p`` (b divisible by p, or the cyclic block partition) the classes
    have orthogonal means and only the Hoelder step loses. With ``return_details`` also returns
    ``{"classes": best class count per order (0 = Lemma 3.4), "error": quadrature error estimate}``.
    """
    a = _orders(orders)
    sigma = check_positive("sigma", sigma)
    G = np.asarray(G, dtype=float)
    b = G.shape[0]
    if G.shape != (b, b):
        raise DPValueError(f"G must be square, got shape {G.shape}")
    if np.any(G < -1e-12):
        raise DPValueError("G must be entrywise non-negative (C >= 0) for the Slepian step of rho_add_tight")
    best = rho_add_lemma34(G, sigma, a)
    which = np.zeros(a.size, dtype=np.int64)
    err = np.zeros(a.size)
    seen = set()
    for c in sorted(set(int(x) for x in classes)):
        c = min(check_positive_int("classes", c), b)
        labels = slot_classes(b, c)
        key = tuple(labels.tolist())
        if key in seen:
            continue
        seen.add(key)
        rho, e = rho_add_class_bound(G, sigma, a, labels, return_error=True)
        better = rho < best
        best = np.where(better, rho, best)
        which = np.where(better, c, which)
        err = np.where(better, e, err)
    if return_details:
        return best, {"classes": which, "error": err}
    return best
