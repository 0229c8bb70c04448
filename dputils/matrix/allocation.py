"""Accountants for matrix mechanisms under random allocation (balls-in-bins) {cite}`schuchardt_kalinin`.

* :class:`MatrixRenyiAccountant` (``matrix-renyi``): Algorithm 3 -- per integer order the max of the
  exact/truncated remove-direction divergence (Algorithm 1, dynamic program, :mod:`.renyi`) and the
  add-direction bound of Lemma 3.4 (Algorithm 2), converted to (eps, delta) with Theorem 3.1 and
  minimised over the orders. A certified **upper bound**.
* :class:`MatrixMonteCarloAccountant` (``matrix-mc``): the sampling baseline in the style of
  Choquette-Choo et al. 2025: ``delta(eps) = E_P[(1 - e^{eps - L})_+]`` estimated from samples of the
  privacy loss of the Lemma 2.8 pair, with an empirical-Bernstein confidence interval. An **estimate**;
  its bracket holds only with the stated confidence, not deterministically.
* :class:`MatrixRenyiTightAccountant` (``matrix-renyi-tight``, our extension): the same with the
  add-direction bound of Lemma 3.4 replaced by :func:`~dputils.matrix.renyi.rho_add_tight` (exact
  negative lognormal moment for independent slots, Slepian comparison + Hoelder over slot classes for
  correlated ones, never above Lemma 3.4). An **upper bound**: the truncated integration tails are
  bounded rigorously, and ten times the estimated quadrature error is added as a safety margin.
* :func:`calibrate_sigma`: the smallest sigma (up to a relative tolerance, rounded up) meeting a target.

The conditional-composition accountant of section 4 (``matrix-condcomp``) is in :mod:`.condcomp`.
Every accountant here subclasses :class:`~dputils.accountants.base.Accountant`: it is built from its
method options only and composes :class:`~dputils.matrix.mechanism.BallsInBinsMatrixMechanism` runs,
e.g. ``MatrixRenyiAccountant().compose(BallsInBinsMatrixMechanism(strategy, sigma))``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from scipy.special import logsumexp

from ..accountants.base import Accountant, AccountingResult
from ..accountants.rdp import rdp_to_delta, rdp_to_epsilon
from ..calibration import (
    calibrate,
    check_rel_tol,  # the shared search's tolerance rule
)
from ..errors import (
    DPValueError,
    NumericalError,
    check_choice,
    check_delta,
    check_epsilon,
    check_nonnegative_int,
    check_positive,
    check_positive_int,
    check_probability,
)
from ..numerics import bisect_monotone
from ..parallel import map_chunks
from ..resources import _distinct, available_memory_bytes, check_memory, check_work, max_work, memory_limit
from .factorizations import truncate_gram
from .mechanism import BallsInBinsMatrixMechanism, check_matrix_mechanism, check_one_run
from .renyi import (
    DEFAULT_ADD_CLASSES,
    STATE_CACHE_SIZE,
    dp_memory,
    dp_operations,
    dp_table_bytes,
    dp_update_operations,
    dp_work,
    needs_wrap,
    rho_add_lemma34,
    rho_add_tight,
    rho_remove,
)

DEFAULT_ORDERS = tuple(range(2, 129))
#: Work per tier of the dynamic program (DP updates; with the compiled factored step about one to a few
#: seconds on one core; covers bands 4 up to order ~44 at b = 100 in one tier).
DEFAULT_TIER_BUDGET = 2e8
#: Range of sigma searched by :func:`calibrate_sigma`, and its cap on accountant evaluations.
SIGMA_RANGE = (1e-4, 1e4)
MAX_CALIBRATION_EVALUATIONS = 200


def _check_orders(orders: Iterable[int]) -> np.ndarray:
    """Sorted distinct integer orders >= 2; a ``range`` is checked before it is materialised."""
    if isinstance(orders, range):
        if len(orders) == 0 or orders.step <= 0 or orders[0] < 2:
            raise DPValueError(f"orders must be integers >= 2, got {orders!r}")
        _check_order_count(len(orders), orders[-1])
        return np.arange(orders.start, orders.stop, orders.step, dtype=np.int64)
    try:
        a = np.asarray(sorted(set(check_positive_int("orders", x) for x in orders)), dtype=np.int64)
    except TypeError:  # not iterable
        raise DPValueError(f"orders must be integers >= 2, got {orders!r}") from None
    if a.size == 0 or a[0] < 2:
        raise DPValueError("orders must be integers >= 2")
    _check_order_count(a.size, int(a[-1]))
    return a


def _check_order_count(count: int, largest: int) -> None:
    # before the orders are materialised: the order tables hold a few floats per order, and the DP with
    # bandwidth 1 (which covers every order) needs at least binom(largest + 2, 2) updates per slot
    check_memory("max-order", 64.0 * count, f"{count} Renyi orders", hint="use a smaller largest order")
    check_work(
        "max-order", dp_work(1, 1, int(largest), False), "DP updates per slot", hint="use a smaller largest order"
    )


def _largest_fitting(p: int, b: int, wrap: bool, top: int, budget: float, memory: float) -> int:
    """The largest order ``a`` in ``2..top`` whose DP (bandwidth p over b slots) fits ``budget`` and ``memory``
    (0 when none does); the cost grows with the order, so a bisection finds it."""

    def fits(a: int) -> bool:
        return dp_work(p, b, a, wrap) <= budget and dp_memory(p, b, a, wrap) <= memory

    if top < 2 or not fits(2):
        return 0
    if fits(top):
        return top
    # integer bisection: fits(2) and not fits(top); the largest order that fits
    return int(bisect_monotone(lambda a: fits(int(a)), 2, top, keep="lo", integer=True, ends_checked=True))


# ---------------------------------------------------------------------------------------------- Renyi
def tiered_rho_remove(
    G: np.ndarray, sigma: float, orders: Iterable[int], max_bands: int, tier_budget: float = DEFAULT_TIER_BUDGET
) -> tuple[np.ndarray, np.ndarray]:
    """Remove-direction bound per order, using the widest effective bandwidth the budget allows.

    For p = ``max_bands`` down to 1, the DP with bandwidth p runs for all orders up to the largest
    ``alpha_p`` whose predicted work fits ``tier_budget``; each order keeps the smallest value found.
    Every value is a valid upper bound (exact when its tau is 0), so the minimum is one too.
    Returns ``(rho, bands_used)`` per order.
    """
    a = _check_orders(orders)
    b = G.shape[0]
    max_bands = check_positive_int("effective_bands", max_bands)
    tier_budget = check_positive("tier_budget", tier_budget)
    _check_remove_plan(b, int(a[-1]), min(max_bands, b), tier_budget, G)
    memory = available_memory_bytes()
    best = np.full(a.size, np.inf)
    used = np.zeros(a.size, dtype=np.int64)
    for p in range(min(max_bands, b), 0, -1):
        Gp, _ = truncate_gram(G, p)
        wrap = needs_wrap(Gp, p) and b >= 2 * p - 2
        # p = 1 covers every order (its cost was checked by the plan); wider tiers as far as the budget goes
        amax = int(a[-1]) if p == 1 else _largest_fitting(p, b, wrap, int(a[-1]), tier_budget, memory)
        sel = a <= amax
        if not sel.any():
            continue
        rho, _ = rho_remove(G, sigma, a[sel], p, work_budget=None)
        cur = best[sel]
        better = rho < cur
        cur[better] = rho[better]
        best[sel] = cur
        u = used[sel]
        u[better] = p
        used[sel] = u
        if amax >= a[-1] and p == min(max_bands, b):
            break  # the widest bandwidth covered every order
    if not np.all(np.isfinite(best)):  # pragma: no cover - p = 1 always covers every order
        raise NumericalError("remove-direction bound missing for some order")
    return best, used


def _remove_plan(G: np.ndarray, b: int, alpha_max: int, tiers: int, tier_budget: float) -> list[tuple[int, int, bool]]:
    """The DPs :func:`tiered_rho_remove` runs: ``(p, largest order, wrap)`` per tier, widest first, as its loop
    chooses them (the widest alone when it covers every order; p = 1 runs every order)."""
    memory = available_memory_bytes()
    plan = []
    for p in range(tiers, 1, -1):
        Gp, _ = truncate_gram(G, p)
        wrap = needs_wrap(Gp, p) and b >= 2 * p - 2
        amax = _largest_fitting(p, b, wrap, alpha_max, tier_budget, memory)
        if p == tiers and amax >= alpha_max:
            return [(p, amax, wrap)]  # the widest tier covers every order: the loop ends
        if amax >= 2:
            plan.append((p, amax, wrap))
    return plan + [(1, alpha_max, False)]


def remove_plan_operations(
    G: np.ndarray | None, b: int, alpha_max: int, tiers: int, tier_budget: float = DEFAULT_TIER_BUDGET
) -> float:
    """Estimated elementary operations of :func:`tiered_rho_remove` (all its bandwidth tiers, the unit of
    ``DPUTILS_MAX_WORK``): per tier p, the DP it runs (:func:`~dputils.matrix.renyi.dp_operations` at the
    largest order that fits the tier budget, as the loop chooses it; every order at p = 1) and the truncation
    of the b x b Gram matrix. Without ``G`` each tier p >= 2 counts its whole budget (an over-estimate)."""
    if G is None:
        total = dp_operations(1, b, alpha_max, False) + 20.0 * b * b
        return total + sum(tier_budget * dp_update_operations(p) + 20.0 * b * b for p in range(2, tiers + 1))
    plan = _remove_plan(G, b, alpha_max, tiers, tier_budget)
    return sum(dp_operations(p, b, a, wrap) + 20.0 * b * b for p, a, wrap in plan)


def remove_plan_memory(
    G: np.ndarray, b: int, alpha_max: int, tiers: int, tier_budget: float = DEFAULT_TIER_BUDGET
) -> float:
    """Estimated peak bytes of :func:`tiered_rho_remove`: the largest tier's DP (:func:`dp_memory`) plus the
    state tables of the other tiers, which stay cached (:data:`~dputils.matrix.renyi.STATE_CACHE_SIZE` of them:
    20 tiers of ``--bands 20 --batches 100`` peaked at 3.6 GB where one tier needs 0.76 GB)."""
    plan = _remove_plan(G, b, alpha_max, tiers, tier_budget)
    peaks = [dp_memory(p, b, a, wrap) for p, a, wrap in plan]
    tables = sorted((dp_table_bytes(p, b, a) for p, a, _ in plan), reverse=True)[:STATE_CACHE_SIZE]
    return max(peaks) + sum(tables) + 8.0 * 10 * b * b


#: Elementary operations per second of the remove-direction DP (the unit of :func:`remove_plan_operations`),
#: measured as CPU time on a 2-core x86-64 machine (issue 36): ``dputils epsilon --accountant
#: matrix-renyi-tight --matrix bsr --batches 100`` at ``--bands 8`` 3.2e10 operations in 15 s, ``--bands 10``
#: 6.1e10 in 31 s, ``--bands 20`` 3.4e11 in 111 s; :func:`tiered_rho_remove` alone (orders 2..128, warm) at
#: (bands, batches) = (3, 20) 1.8e9 in 0.4 s, (3, 40) 1.9e9 in 1.4 s, (5, 20) 9.6e9 in 5.2 s, (8, 40) 3.6e10 in
#: 24 s: 1.5e9 to 4.5e9 per second. The slowest rate is taken, so the stated time errs long.
DP_OPERATIONS_PER_SECOND = 1.5e9


def remove_plan_seconds(operations: float) -> float:
    """Estimated CPU seconds of ``operations`` of the remove-direction DP (:data:`DP_OPERATIONS_PER_SECOND`)."""
    return operations / DP_OPERATIONS_PER_SECOND


def _check_remove_plan(
    b: int, alpha_max: int, tiers: int, tier_budget: float = DEFAULT_TIER_BUDGET, G: np.ndarray | None = None
) -> None:
    """Up-front cost of :func:`tiered_rho_remove`: the p = 1 tier runs every order (work and memory named
    ``max-order``), every tier truncates the b x b Gram matrix, and the whole plan (named ``effective-bands``)
    must fit both ``DPUTILS_MAX_WORK`` (:func:`remove_plan_operations`) and the memory limit
    (:func:`remove_plan_memory`). Its refusal is one line stating the estimate in seconds
    (:func:`remove_plan_seconds`) and GB as well as operations, and the options to lower."""
    work1 = dp_operations(1, b, alpha_max, False)
    check_work(
        "max-order",
        work1,
        "operations (bandwidth 1 covers every order)",
        hint=f"over b={b} slots; use a smaller largest order",
    )
    check_memory(
        "max-order",
        dp_memory(1, b, alpha_max, False),
        f"the dynamic program up to order {alpha_max}",
        hint="use a smaller largest order",
    )
    check_memory(
        "batches", 8.0 * 10 * b * b, f"the {b} x {b} Gram matrix and its truncations", hint="use fewer batches"
    )
    ops = remove_plan_operations(G, b, alpha_max, tiers, tier_budget)
    nbytes = remove_plan_memory(G, b, alpha_max, tiers, tier_budget) if G is not None else None
    work_cap, mem_cap = max_work(), memory_limit()
    over_work = not (ops <= work_cap)
    over_mem = nbytes is not None and not (nbytes <= mem_cap.bytes)
    if over_work or over_mem:
        gb = "" if nbytes is None else f" and up to {nbytes / 1e9:.3g} GB (the tables of every tier cached)"
        limits = []
        need, cap = _distinct(ops, work_cap)
        if over_work:
            limits.append(
                f"the limit of {cap} operations (about {remove_plan_seconds(work_cap):.3g} s; "
                "set DPUTILS_MAX_WORK to raise it)"
            )
        if over_mem:
            limits.append(mem_cap.describe())
        raise DPValueError(
            f"effective-bands: the remove-direction DP over bandwidth tiers 1..{tiers} and b={b} slots would take "
            f"about {remove_plan_seconds(ops):.3g} s{gb} ({need} operations at "
            f"{DP_OPERATIONS_PER_SECOND:.2g} per second), over {' and '.join(limits)}; lower the bands "
            "(--bands or --effective-bands) or the largest order (--max-order)"
        )


class MatrixRenyiAccountant(Accountant):
    """Algorithm 3 of Schuchardt & Kalinin: Renyi accountant for matrix mechanisms under balls-in-bins.

    Composes :class:`~dputils.matrix.mechanism.BallsInBinsMatrixMechanism` runs. For one run and each
    integer order alpha, ``rho_remove(alpha)`` bounds ``R_alpha(P||Q)`` by the dynamic program of Lemma 3.3
    (exact for banded C with p_eff >= bands, an upper bound with the tau-correction otherwise) and
    ``rho_add(alpha)`` bounds ``R_alpha(Q||P)`` by Lemma 3.4 (Eq. 6). Renyi divergences of adaptively
    composed mechanisms add up for the same pair of neighbouring datasets, so the ledger
    ``[(M_1, c_1), ...]`` has, per order,

        rho_remove = sum_j c_j rho_remove[M_j],    rho_add = sum_j c_j rho_add[M_j],

    and ``direction`` picks ``rho = rho_remove`` (``"remove"``), ``rho_add`` (``"add"``) or, as in
    Algorithm 3, ``max(rho_remove, rho_add)`` (``"both"``, default). Theorem 3.1 (Eq. 4; Canonne,
    Kamath & Steinke 2020, Prop. 12) turns ``rho`` into delta(eps) (or eps(delta)) per order, with
    :func:`dputils.accountants.rdp.rdp_to_delta` / :func:`~dputils.accountants.rdp.rdp_to_epsilon`;
    the minimum over the orders is reported. An upper bound. Note that ``"both"`` takes the maximum
    per order before minimising over the orders, so it can exceed the worse of the ``"add"`` and
    ``"remove"`` answers (it is what the paper reports).

    Args:
        orders: integer orders >= 2 (default 2..128, as the issue asks).
        effective_bands: the largest effective bandwidth tried (default: each strategy's bands, or 4
            for dense strategies); narrower ones are used for high orders when the DP would be too costly.
        tier_budget: work budget of one DP tier (see :func:`tiered_rho_remove`).
        add_bound: ``"lemma34"`` (the paper's Algorithm 2) or ``"tight"``
            (:func:`~dputils.matrix.renyi.rho_add_tight`, per order never larger than Lemma 3.4).
        add_classes: class counts tried by the tight add bound.
        direction: ``"both"`` (default), ``"remove"`` or ``"add"``; a single direction skips the other's work.

    Example: ``MatrixRenyiAccountant().compose(BallsInBinsMatrixMechanism(build_strategy("bsr", 1, 100, 4),
    1.0)).get_epsilon(1e-5)``.
    """

    name = "matrix-renyi"

    def __init__(
        self,
        orders: Iterable[int] = DEFAULT_ORDERS,
        effective_bands: int | None = None,
        tier_budget: float = DEFAULT_TIER_BUDGET,
        add_bound: str = "lemma34",
        add_classes: Iterable[int] = DEFAULT_ADD_CLASSES,
        direction: str = "both",
    ) -> None:
        super().__init__(direction)
        self.add_bound = check_choice("add_bound", add_bound, ("lemma34", "tight"))
        self.add_classes = tuple(check_positive_int("add_classes", c) for c in add_classes)
        if not self.add_classes:
            raise DPValueError("add_classes must name at least one class count >= 1")
        self.orders = _check_orders(orders)
        self.effective_bands = (
            None if effective_bands is None else check_positive_int("effective_bands", effective_bands)
        )
        self.tier_budget = check_positive("tier_budget", tier_budget)
        self._entries: dict[int, tuple[BallsInBinsMatrixMechanism, dict[str, np.ndarray]]] = {}
        self._rho: dict[str, Any] | None = None

    def _bands_for(self, mechanism: BallsInBinsMatrixMechanism) -> int:
        if self.effective_bands is not None:
            return self.effective_bands
        return mechanism.bands if mechanism.bands is not None else 4

    def _check_supported(self, mechanism: Any) -> None:
        m = check_matrix_mechanism(self.name, mechanism)
        # refuse up front what this machine cannot do (before any allocation in proportion to the inputs)
        b = m.batches
        if "remove" in self.directions:
            _check_remove_plan(b, int(self.orders[-1]), min(self._bands_for(m), b), self.tier_budget, m.gram)
        if self.add_bound == "tight" and "add" in self.directions:
            n_cls = len(set(self.add_classes))
            check_work(
                "add-classes",
                n_cls * (40.0 * b * b + 2e6 * b),
                "operations",
                hint=f"{n_cls} slot partitions over b={b} slots; use fewer batches or class counts",
            )

    def _invalidate(self) -> None:
        self._rho = None  # the per-mechanism divergences (self._entries) stay valid

    def mechanism_rdp(self, mechanism: BallsInBinsMatrixMechanism) -> dict[str, np.ndarray]:
        """Per-order bounds of one run of ``mechanism`` (cached per mechanism object).

        ``{"remove", "bands_used"}`` (when the remove direction is needed) and ``{"add", "add_classes"}``
        (when the add direction is); ``add_classes`` is the class count of the tight add bound per order
        (0: Lemma 3.4 was smaller).
        """
        m = check_matrix_mechanism(self.name, mechanism)
        hit = self._entries.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        G = m.gram
        out: dict[str, np.ndarray] = {}
        if "remove" in self.directions:
            out["remove"], out["bands_used"] = tiered_rho_remove(
                G, m.sigma, self.orders, self._bands_for(m), self.tier_budget
            )
        if "add" in self.directions:
            if self.add_bound == "tight":
                add, det = rho_add_tight(G, m.sigma, self.orders, self.add_classes, return_details=True)
                out["add"], out["add_classes"] = add, det["classes"]
            else:
                out["add"] = rho_add_lemma34(G, m.sigma, self.orders)
                out["add_classes"] = np.zeros(self.orders.size, dtype=np.int64)
        self._entries[id(m)] = (m, out)
        return out

    def rdp(self) -> dict[str, Any]:
        """The composed bounds per order (cached until the ledger changes).

        ``{"orders", "remove", "add", "rho", "bands_used", "add_classes"}``: ``remove`` and ``add`` are the
        count-weighted sums over the ledger (None for a direction not accounted), ``rho`` the one
        converted (see the class docstring); ``bands_used`` is the narrowest effective bandwidth any
        entry used at that order, ``add_classes`` the largest class count any entry's tight add bound used.
        """
        self._require_ledger()
        if self._rho is None:
            parts = [(self.mechanism_rdp(m), c) for m, c in self.ledger]
            r: dict[str, Any] = {
                "orders": self.orders,
                "remove": None,
                "add": None,
                "bands_used": None,
                "add_classes": None,
            }
            if "remove" in self.directions:
                r["remove"] = sum(c * p["remove"] for p, c in parts)
                r["bands_used"] = np.min([p["bands_used"] for p, _ in parts], axis=0)
            if "add" in self.directions:
                r["add"] = sum(c * p["add"] for p, c in parts)
                r["add_classes"] = np.max([p["add_classes"] for p, _ in parts], axis=0)
            if self.direction == "both":
                r["rho"] = np.maximum(r["remove"], r["add"])
            else:
                r["rho"] = r[self.direction]
            self._rho = r
        return self._rho

    def _details(self, alpha: int) -> dict[str, Any]:
        r = self.rdp()
        i = int(np.searchsorted(self.orders, alpha))
        d: dict[str, Any] = {"order": alpha}
        if r["remove"] is not None:
            d["rho_remove"] = float(r["remove"][i])
        if r["add"] is not None:
            d["rho_add"] = float(r["add"][i])
        if self.direction == "both":
            d["dominant"] = "remove" if r["remove"][i] >= r["add"][i] else "add"
        else:
            d["direction"] = self.direction
        if r["bands_used"] is not None:
            d["effective_bands"] = int(r["bands_used"][i])
        mechs = [m for m, _ in self.ledger]
        if len(mechs) == 1:
            d["sigma"], d["matrix"] = mechs[0].sigma, mechs[0].matrix
        else:
            d["sigma"], d["matrix"] = [m.sigma for m in mechs], [m.matrix for m in mechs]
        d["add_bound"] = self.add_bound
        if r["add_classes"] is not None:
            d["add_classes"] = int(r["add_classes"][i])
        return d

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = check_epsilon(epsilon)
        r = self.rdp()
        d, a = rdp_to_delta(self.orders, r["rho"], eps)
        return AccountingResult(d, None, d, "upper-bound", self.name, "delta", self._details(int(a)))

    def get_epsilon(self, delta: float) -> AccountingResult:
        dl = check_delta(delta)
        r = self.rdp()
        e, a = rdp_to_epsilon(self.orders, r["rho"], dl)
        return AccountingResult(e, None, e, "upper-bound", self.name, "epsilon", self._details(int(a)))


class MatrixRenyiTightAccountant(MatrixRenyiAccountant):
    """``matrix-renyi-tight``: Algorithm 3 with the add direction bounded by :func:`rho_add_tight`.

    Per order and run ``rho_add`` is :func:`~dputils.matrix.renyi.rho_add_tight`; the remove part is
    the dynamic program, and the ledger composes as in :class:`MatrixRenyiAccountant`. Since
    ``rho_add_tight <= Lemma 3.4`` per order, the result is never larger than ``matrix-renyi``'s; an upper
    bound (rigorous tail bounds, plus ten times the estimated quadrature error, see
    :func:`~dputils.matrix.renyi.log_neg_moment_independent`).
    Same arguments as :class:`MatrixRenyiAccountant` (``add_bound`` fixed to ``"tight"``).
    """

    name = "matrix-renyi-tight"

    def __init__(
        self,
        orders: Iterable[int] = DEFAULT_ORDERS,
        effective_bands: int | None = None,
        tier_budget: float = DEFAULT_TIER_BUDGET,
        add_classes: Iterable[int] = DEFAULT_ADD_CLASSES,
        direction: str = "both",
    ) -> None:
        super().__init__(
            orders, effective_bands, tier_budget, add_bound="tight", add_classes=add_classes, direction=direction
        )


# ---------------------------------------------------------------------------------------------- Monte Carlo
def _bernstein_radius(var: float, n: int, gamma: float) -> float:
    """Empirical-Bernstein radius (Maurer & Pontil 2009) for [0, 1]-valued samples, two-sided level gamma."""
    lg = math.log(4.0 / gamma)
    return math.sqrt(2.0 * var * lg / n) + 7.0 * lg / (3.0 * (n - 1))


def mc_loss_chunk(
    n: int,
    seed: np.random.SeedSequence,
    *,
    gram: np.ndarray,
    root: np.ndarray | None,
    sigma: float,
    directions: tuple[str, ...],
) -> dict[str, np.ndarray]:
    """``n`` privacy-loss samples per direction of the balls-in-bins pair (see :class:`MatrixMonteCarloAccountant`).

    ``root`` with ``root @ root.T = gram``, or None when ``gram`` is diagonal (independent coordinates).
    """
    rng = np.random.default_rng(seed)
    b = gram.shape[0]
    s2 = sigma**2
    shift = np.diag(gram) / (2 * s2) + math.log(b)
    xi = rng.standard_normal((n, b))
    z = rng.integers(0, b, size=n)
    noise = sigma * (xi * np.sqrt(np.diag(gram))) if root is None else sigma * (xi @ root.T)
    out = {}
    if "remove" in directions:
        out["remove"] = logsumexp((gram[z] + noise) / s2 - shift, axis=1)
    if "add" in directions:
        out["add"] = -logsumexp(noise / s2 - shift, axis=1)
    return out


class MatrixMonteCarloAccountant(Accountant):
    """Monte Carlo estimate of delta(eps) for the Lemma 2.8 pair (baseline of Choquette-Choo et al. 2025).

    Accounts for **one run** of a :class:`~dputils.matrix.mechanism.BallsInBinsMatrixMechanism` (one
    ledger entry with count 1; several epochs go into the strategy). The privacy loss only depends on
    ``y_i = <x, m_i>``: under Q, ``y ~ N(0, sigma^2 G)``; under P, with a
    uniform slot z, ``y ~ N(G[z], sigma^2 G)``. With ``l(y) = logsumexp_i(y_i/s^2 - G_ii/(2 s^2)) - log b``:
    remove ``L = l(y), y ~ P``; add ``L = -l(y), y ~ Q``; and ``delta(eps) = E[(1 - e^{eps - L})_+]``
    per direction (the max is reported for ``direction="both"``). The samples are bounded in [0, 1]; the
    reported bracket is an empirical-Bernstein interval at confidence ``1 - gamma`` per direction (not a
    deterministic bound). Same seed gives the same standard normals, so a sigma bisection uses common
    random numbers.

    Args:
        samples: Monte Carlo samples (>= 2); seed: generator seed (>= 0); gamma: 1 - confidence of the
        bracket; chunk: samples drawn at once (one seeded chunk of :func:`dputils.parallel.map_chunks`);
        direction: ``"both"``, ``"remove"`` or ``"add"``; client / executor: a ``dask.distributed.Client``
        or a ``concurrent.futures`` executor to draw the chunks on (same samples as the serial run).
    """

    name = "matrix-mc"

    def __init__(
        self,
        samples: int = 1_000_000,
        seed: int = 0,
        gamma: float = 0.01,
        chunk: int = 100_000,
        direction: str = "both",
        client: Any = None,
        executor: Any = None,
    ) -> None:
        super().__init__(direction)
        if client is not None and executor is not None:
            raise DPValueError("give client or executor, not both")
        self.client, self.executor = client, executor
        self.samples = check_positive_int("samples", samples)
        if self.samples < 2:
            raise DPValueError("samples must be >= 2")
        self.seed = check_nonnegative_int("seed", seed)
        self.gamma = check_probability("gamma", gamma, allow_one=False)
        self.chunk = check_positive_int("chunk", chunk)
        self._losses: dict[str, np.ndarray] | None = None

    def compose(self, mechanism: Any, count: int = 1) -> MatrixMonteCarloAccountant:
        """Set the one matrix-mechanism run to account for (``count`` must be 1, the ledger empty)."""
        check_one_run(self.name, self.ledger, count)
        super().compose(mechanism, count)
        return self

    def _check_supported(self, mechanism: Any) -> None:
        m = check_matrix_mechanism(self.name, mechanism)
        # up-front cost: the stored losses (8 bytes per sample and direction, twice while concatenating),
        # one chunk of b-dimensional draws, and the sampling work (a b x b product per sample unless G is
        # diagonal) plus the epsilon inversions (~200 passes over the losses)
        b = m.batches
        n_dir = len(self.directions)
        chunk_rows = min(self.chunk, self.samples)
        check_memory(
            "samples",
            8.0 * (2 * n_dir + 3) * self.samples + 8.0 * 6 * chunk_rows * b + 8.0 * 4 * b * b,
            f"{self.samples} Monte Carlo samples over b={b} slots",
            hint="use fewer samples",
        )
        G = m.gram
        diagonal = bool(np.all(G == np.diag(np.diag(G))))
        per_sample = n_dir * (20.0 * b + (0.0 if diagonal else 2.0 * b * b)) + 200.0 * 20 * n_dir
        check_work(
            "samples",
            self.samples * per_sample + 10.0 * b**3,
            "operations",
            hint=f"{self.samples} samples over b={b} slots; use fewer samples",
        )

    def _invalidate(self) -> None:
        self._losses = None

    @property
    def mechanism(self) -> BallsInBinsMatrixMechanism:
        """The composed matrix-mechanism run."""
        self._require_ledger()
        return self.ledger[0][0]

    def losses(self) -> dict[str, np.ndarray]:
        """Samples of the privacy loss per direction (cached).

        Drawn in chunks of ``chunk`` samples, chunk ``j`` from the ``j``-th child of
        ``SeedSequence(seed)`` (:func:`dputils.parallel.map_chunks`), so the samples are the same whether the
        chunks run serially, on the ``executor`` or on the Dask ``client`` given to the constructor.
        """
        if self._losses is not None:
            return self._losses
        from functools import partial

        m = self.mechanism
        G = m.gram
        w, U = np.linalg.eigh(G)
        root = U * np.sqrt(np.clip(w, 0.0, None))  # root @ root.T = G
        diagonal = bool(np.all(G == np.diag(np.diag(G))))  # DP-SGD: independent coordinates
        dirs = tuple(d for d in ("remove", "add") if self.direction in ("both", d))
        fn = partial(mc_loss_chunk, gram=G, root=None if diagonal else root, sigma=m.sigma, directions=dirs)
        parts = map_chunks(
            fn, self.samples, self.chunk, self.seed, client=self.client, executor=self.executor, desc="matrix-mc chunks"
        )
        self._losses = {d: np.concatenate([p[d] for p in parts]) for d in dirs}
        return self._losses

    def delta_bracket(self, epsilon: float) -> dict[str, tuple[float, float, float]]:
        """``{direction: (estimate, lower, upper)}`` of delta(eps)."""
        eps = check_epsilon(epsilon)
        res = {}
        for d, L in self.losses().items():
            v = -np.expm1(np.minimum(eps - L, 0.0))  # (1 - e^{eps-L})_+ in [0, 1]
            mean = float(v.mean())
            rad = _bernstein_radius(float(v.var(ddof=1)), v.size, self.gamma)
            res[d] = (mean, max(mean - rad, 0.0), min(mean + rad, 1.0))
        return res

    def get_delta(self, epsilon: float) -> AccountingResult:
        br = self.delta_bracket(epsilon)
        worst = max(br, key=lambda k: br[k][0])
        est = br[worst][0]
        lo = max(v[1] for v in br.values())
        hi = max(v[2] for v in br.values())
        return AccountingResult(
            est,
            min(lo, est),
            max(hi, est),
            "estimate",
            self.name,
            "delta",
            {
                "direction": worst,
                "samples": self.samples,
                "confidence": 1 - self.gamma,
                "sigma": self.mechanism.sigma,
                "matrix": self.mechanism.matrix,
            },
        )

    def _eps_for(self, delta: float, which: int) -> float:
        def d_at(e: float) -> float:
            return max(v[which] for v in self.delta_bracket(e).values())

        if d_at(0.0) <= delta:
            return 0.0
        lo, hi = 0.0, 1.0
        while d_at(hi) > delta:
            lo, hi = hi, hi * 2
            if hi > 1e3:
                raise NumericalError(self._unreachable(delta, which))
        # bisection to 1e-6 relative (absolute 1e-9 below eps = 1e-3), the upper end: d_at(hi) <= delta
        return bisect_monotone(
            lambda e: not d_at(e) > delta, lo, hi, keep="hi", tol=1e-6, max_iter=60, ends_checked=True, floor=1e-3
        )

    def _unreachable(self, delta: float, which: int) -> str:
        """Why no epsilon <= 1e3 reaches ``delta`` with end ``which`` (0 estimate, 1 lower, 2 upper)."""
        n = self.samples
        lg = math.log(4.0 / self.gamma)
        floor = 7.0 * lg / (3.0 * (n - 1))  # the variance-free term of the empirical-Bernstein radius
        what = ("estimate", "lower end", "upper confidence bound")[which]
        msg = f"matrix-mc: no epsilon <= 1e3 brings the {what} of delta to {delta:g} with {n:,} samples"
        if which == 2 and floor >= 0.5 * delta:
            need = math.ceil(7.0 * lg / (3.0 * 0.5 * delta)) + 1
            msg += (
                f": the empirical-Bernstein radius alone is at least 7 log(4/gamma) / (3 (n - 1)) = {floor:.2g} at "
                f"confidence {1 - self.gamma:g}, comparable to delta; at least {need:,} samples are needed for its "
                "variance-free term to fall below delta / 2 (the sample size grows like 1/delta)"
            )
        return msg

    def get_epsilon(self, delta: float) -> AccountingResult:
        """The estimate of epsilon(delta) with its confidence bracket. Where the upper confidence bound of delta
        stays above ``delta`` for every epsilon (too few samples for a small delta: the radius of the
        empirical-Bernstein interval is at least ``7 log(4/gamma) / (3 (n - 1))``), the upper end is ``inf`` and
        ``details["upper_unreachable"]`` says why; an unreachable estimate is an error naming the samples needed."""
        dl = check_delta(delta)
        est = self._eps_for(dl, 0)
        details = {
            "samples": self.samples,
            "confidence": 1 - self.gamma,
            "sigma": self.mechanism.sigma,
            "matrix": self.mechanism.matrix,
        }
        try:
            upper = self._eps_for(dl, 2)
        except NumericalError as exc:
            upper = math.inf
            details["upper_unreachable"] = str(exc)
        lower = self._eps_for(dl, 1)
        return AccountingResult(est, min(lower, est), max(upper, est), "estimate", self.name, "epsilon", details)


# ---------------------------------------------------------------------------------------------- calibration
def calibrate_sigma(
    make_accountant: Callable[[float], Any],
    epsilon: float,
    delta: float,
    rel_tol: float = 1e-3,
    sigma_start: float = 1.0,
    use: str = "value",
    max_evaluations: int = MAX_CALIBRATION_EVALUATIONS,
) -> float:
    """Smallest sigma (rounded up to relative precision ``rel_tol``) with ``delta(eps) <= delta``.

    ``make_accountant(sigma)`` returns an accountant. :func:`dputils.calibration.calibrate` (Brent's method on
    log sigma), assuming delta(eps) is non-increasing in sigma; the upper end of the final bracket is returned,
    so the result meets the target by construction (for an upper-bound accountant, it is a certified sigma).

    ``use`` picks which number of the accountant's result must meet the target: ``"value"`` (the reported
    value: the bound itself for upper-bound accountants, the point estimate for ``matrix-mc``) or ``"upper"``
    (the upper end of its bracket: for ``matrix-mc`` the empirical-Bernstein confidence bound, so the sigma
    meets the target with the stated confidence instead of only on average).

    The search is bounded: sigma in :data:`SIGMA_RANGE`, ``rel_tol`` in :data:`REL_TOL_RANGE`, at most
    ``max_evaluations`` accountant evaluations (:class:`NumericalError` beyond them).
    """
    eps = check_positive("epsilon", epsilon)
    dl = check_delta(delta)
    rel_tol = check_rel_tol(rel_tol)
    check_choice("use", use, ("value", "upper"))
    s_min, s_max = SIGMA_RANGE
    start = check_positive("sigma_start", sigma_start)
    if not s_min <= start <= s_max:
        raise DPValueError(f"sigma_start must be in [{s_min:g}, {s_max:g}], got {start!r}")
    max_evaluations = check_positive_int("max_evaluations", max_evaluations)

    def value(s: float) -> float:
        r = make_accountant(s).get_delta(eps)
        v = float(r.upper if use == "upper" else r)
        if math.isnan(v):
            raise NumericalError(f"calibrate_sigma: the accountant returned delta = nan at sigma={s!r}")
        return v

    # Brent on log sigma, the end of the final bracket that meets the target (dputils.calibration)
    return calibrate(
        value,
        dl,
        monotone="decreasing",
        start=start,
        limits=SIGMA_RANGE,
        rel_tol=rel_tol,
        max_evaluations=max_evaluations,
        name="sigma",
        failures="raise",
    ).value
