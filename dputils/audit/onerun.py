"""Thresholding one-run baselines: Steinke, Nasr and Jagielski (2023) and the f-DP audit of
Mahloujifar, Melis and Chaudhuri (2025), as used by {cite}`gauss_audit`.

Both turn real scores into guesses: for a threshold tau every canary with score >= tau is guessed IN,
the others abstain. With ``m`` randomised canaries, ``r`` guesses and ``v`` correct ones:

Steinke et al. {cite}`steinke_one_run`. If the training is (eps, delta)-DP, the number of correct
guesses is dominated by Binomial(r, e^eps/(1+e^eps)) up to a delta term; the p-value of observing
``>= v`` correct guesses is

    p(eps) = min(1, beta + 2 m delta * a_max),   beta = Pr[Bin(r, p_eps) >= v],
    a_max = max_{i = 1..v} Pr[v - i <= Bin(r, p_eps) < v] / i,   p_eps = e^eps / (1 + e^eps),

and the (1 - alpha) lower bound is ``sup{eps : p(eps) <= alpha}`` (p is increasing in eps).

f-DP audit {cite}`mahloujifar_fdp_audit` (the "rh with cap" recursion, for the Gaussian trade-off
curve through (eps, delta)): with ``mu = 1/sigma_G`` where ``sigma_G`` is the noise of the exactly
(eps, delta)-DP sensitivity-1 Gaussian mechanism and ``g(x) = Phi(Phi^{-1}(x) - mu)``,

    r <- alpha v / m ;  h <- alpha (n - v) / m
    for i = v-1, ..., 0:  h' = max(h, g(r));  stop if h' = h;  r <- min(r + i/(n - i) (h' - h), 1);  h <- h'
    the claim is falsified iff r + h > n / m     (n = number of guesses)

and the lower bound is the largest falsified eps.

Multiple testing. Choosing the threshold after looking at the scores is a search over many tests.
``selection`` makes the choice explicit:

* ``"bonferroni-grid"`` (valid): the number of guesses k runs over a fixed, data-independent
  geometric grid of ``n_thresholds`` values; each is tested at level alpha / n_thresholds (union bound)
  and the largest bound is reported;
* ``"split"`` (default, valid; the more powerful of the two in the Model-1 simulation): a random half of the canaries picks the fraction of guesses (uncorrected sweep on
  that half), the other half is audited at level alpha with that fraction (m = size of the test half);
* ``"none"`` (NOT valid at level alpha): every distinct threshold, each at level alpha, the maximum
  reported. This is what the authors' code ran for the paper's baseline numbers.

Cost. Sweeping every threshold (``"split"``, ``"none"``) is quadratic in the number of scores (up to m
thresholds of up to m binomial terms each); :func:`threshold_work` estimates it up front and
:func:`threshold_audit` refuses past ``DPUTILS_MAX_WORK`` (3e6 scores: 2.25e12 operations, refused;
``"bonferroni-grid"`` is linear and takes them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from ..errors import DPValueError, NumericalError, check_choice, check_delta, check_positive_int, check_probability
from ..numerics import bisect_monotone
from ..resources import check_work
from .gauss import AuditResult, check_scores, check_seed

__all__ = [
    "steinke_p_value",
    "steinke_epsilon",
    "fdp_margin",
    "fdp_epsilon",
    "gaussian_mu_for",
    "threshold_audit",
    "SELECTIONS",
]

SELECTIONS = ("bonferroni-grid", "split", "none")


def _check_counts(m, r, v):
    m = check_positive_int("m", m)
    if isinstance(r, bool) or int(r) != r or r < 0:
        raise DPValueError(f"r (number of guesses) must be an integer >= 0, got {r!r}")
    if isinstance(v, bool) or int(v) != v or not 0 <= v <= r:
        raise DPValueError(f"v (correct guesses) must be an integer in [0, r], got {v!r}")
    if r > m:
        raise DPValueError(f"r (number of guesses) must be <= m = {m}, got {r!r}")
    return m, int(r), int(v)


def steinke_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """p-value of >= v correct guesses out of r under the null '(eps, delta)-DP' (Steinke et al. 2023)."""
    m, r, v = _check_counts(m, r, v)
    if delta < 0 or delta >= 1:
        raise DPValueError(f"delta must be in [0, 1), got {delta!r}")
    if v == 0:
        return 1.0
    p = special.expit(eps)
    beta = float(stats.binom.sf(v - 1, r, p))
    if delta == 0:
        return min(1.0, beta)
    i = np.arange(1, v + 1)
    cdf = stats.binom.cdf(np.arange(-1, v), r, p)  # cdf[j+1] = Pr[W <= j], j = -1..v-1
    # Pr[v - i <= W < v] = Pr[W <= v-1] - Pr[W <= v-i-1]
    mass = cdf[v] - cdf[v - i]
    a_max = float(np.max(mass / i))
    return min(1.0, beta + 2 * m * delta * a_max)


def _bisect_sup(ok, hi0: float = 1.0, n_iter: int = 40, eps_max: float = 1e3) -> float:
    """sup{eps >= 0 : ok(eps)} for a predicate true on [0, e*) and false after; 0 if ok(0) is false."""
    if not ok(0.0):
        return 0.0
    lo, hi = 0.0, hi0
    while ok(hi):
        lo, hi = hi, 2 * hi
        if hi > eps_max:
            raise NumericalError("one-run bound: no upper bracket for epsilon below 1e3")
    # n_iter halvings (tol = 0); the lower end: ok(lo) holds, so the reported bound is itself rejected at level alpha
    return bisect_monotone(ok, lo, hi, keep="lo", tol=0.0, max_iter=n_iter, ends_checked=True)


def steinke_epsilon(m: int, r: int, v: int, delta: float, alpha: float = 0.05) -> float:
    """(1 - alpha) lower bound sup{eps : p(eps) <= alpha} of Steinke et al. for one (r, v)."""
    m, r, v = _check_counts(m, r, v)
    alpha = check_probability("alpha", alpha, allow_one=False)
    return _bisect_sup(lambda e: steinke_p_value(m, r, v, e, delta) <= alpha)


def gaussian_mu_for(eps: float, delta: float) -> float:
    """mu such that the mu-GDP curve is exactly (eps, delta): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta.

    (Dong, Roth and Su, Cor. 2.13; the analytic Gaussian mechanism of Balle and Wang with sigma = 1/mu.)
    Solved by brentq on log delta(mu), which is increasing in mu.
    """
    delta = check_delta(delta)
    if eps < 0:
        raise DPValueError(f"eps must be >= 0, got {eps!r}")
    ld = math.log(delta)

    def f(mu):
        a = special.log_ndtr(-eps / mu + mu / 2)
        b = eps + special.log_ndtr(-eps / mu - mu / 2)
        if b >= a:
            return -np.inf - ld
        return a + math.log1p(-math.exp(b - a)) - ld

    lo, hi = 1e-3, 1.0
    while f(lo) > 0:
        lo /= 2
        if lo < 1e-12:
            raise NumericalError("gaussian_mu_for: no lower bracket")
    while f(hi) < 0:
        hi *= 2
        if hi > 1e4:
            raise NumericalError("gaussian_mu_for: no upper bracket")
    return optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-13)


def fdp_margin(m: int, r: int, v: int, eps: float, delta: float, alpha: float = 0.05) -> float:
    """r_end + h_end - n/m of the f-DP 'rh with cap' recursion; positive iff (eps, delta) is falsified."""
    mu = gaussian_mu_for(eps, delta)
    rr = alpha * v / m
    h = alpha * (r - v) / m
    for i in range(v - 1, -1, -1):
        g = special.ndtr(special.ndtri(rr) - mu) if rr < 1 else 1.0
        h_new = max(h, float(g))
        if h_new == h:
            break
        rr = min(rr + (i / (r - i)) * (h_new - h), 1.0)
        h = h_new
    return rr + h - r / m


def fdp_epsilon(m: int, r: int, v: int, delta: float, alpha: float = 0.05) -> float:
    """(1 - alpha) lower bound of the f-DP one-run audit (Mahloujifar et al.) for one (r, v)."""
    m, r, v = _check_counts(m, r, v)
    delta = check_delta(delta)
    alpha = check_probability("alpha", alpha, allow_one=False)
    if v == 0:
        return 0.0
    return _bisect_sup(lambda e: fdp_margin(m, r, v, e, delta, alpha) > 0, n_iter=30)


def _counts_by_threshold(in_s: np.ndarray, out_s: np.ndarray):
    """For each k = 1..m (guess the top-k scores IN): r = k, v = number of IN among the top k."""
    s = np.concatenate([in_s, out_s])
    lab = np.concatenate([np.ones(in_s.size, bool), np.zeros(out_s.size, bool)])
    order = np.argsort(-s, kind="stable")
    v = np.cumsum(lab[order])
    sorted_s = s[order]
    # only thresholds at distinct score values (ties guessed together)
    distinct = np.append(sorted_s[1:] != sorted_s[:-1], True)
    k = np.arange(1, s.size + 1)
    return k[distinct], v[distinct]


def _eps_fn(method):
    return steinke_epsilon if method == "steinke" else fdp_epsilon


def _sweep(method, m, ks, vs, delta, alpha):
    """max over all (k, v) pairs of the one-run bound at level alpha (uncorrected), with exact pruning."""
    n = ks.size
    # visit in order of decreasing Clopper-Pearson lower bound of the precision v/k
    cp = np.where(vs > 0, stats.beta.ppf(alpha, np.maximum(vs, 1), ks - vs + 1), 0.0)
    best, best_k = 0.0, 0
    for j in np.argsort(-cp, kind="stable"):
        k, v = int(ks[j]), int(vs[j])
        if v == 0:
            continue
        if method == "steinke":
            # v <= k p_best implies Pr[Bin(k, p_best) >= v] >= 1/2 > alpha: cannot beat best
            if best > 0 and v / k <= special.expit(best):
                continue
            if best > 0 and steinke_p_value(m, k, v, best, delta) > alpha:
                continue
        else:
            if best > 0 and not fdp_margin(m, k, v, best, delta, alpha) > 0:
                continue
        e = _eps_fn(method)(m, k, v, delta, alpha)
        if e > best:
            best, best_k = e, k
    return best, best_k, n


#: Bisection steps of one bound (:func:`_bisect_sup`: doubling up to 1e3, then 30-40 halvings).
_BISECTION_STEPS = 50


def threshold_work(method: str, selection: str, m: int, n_thresholds: int = 10, max_fraction: float = 0.5) -> float:
    """Up-front estimate of the elementary operations (binomial terms or f-DP recursion steps) of
    :func:`threshold_audit` on ``m`` scores.

    ``"none"`` and ``"split"`` sweep every distinct threshold of ``m`` (``"split"``: ``m // 2``) scores, and a
    test with ``k`` guesses costs up to ``k`` terms: ``m_sweep^2`` in all (quadratic; the pruning of
    :func:`_sweep` skips most bisections, so each test is counted once). ``"bonferroni-grid"`` runs
    ``n_thresholds`` bisections of at most ``max_fraction * m`` terms per step.
    """
    if selection == "bonferroni-grid":
        return float(n_thresholds) * _BISECTION_STEPS * max(1.0, max_fraction * m)
    m_sweep = m if selection == "none" else m // 2
    return float(m_sweep) ** 2 + float(_BISECTION_STEPS) * (m - m_sweep)


def check_threshold_work(
    method: str, selection: str, m: int, n_thresholds: int = 10, max_fraction: float = 0.5
) -> None:
    """Refuse (DPValueError naming the scores) a threshold audit past the work limit, before running it."""
    units = threshold_work(method, selection, m, n_thresholds, max_fraction)
    hint = (
        "use selection bonferroni-grid (--selection bonferroni-grid; linear in the scores) or fewer canaries"
        if selection != "bonferroni-grid"
        else "audit fewer canaries"
    )
    check_work(
        "scores",
        units,
        f"operations (the {method} audit with selection {selection} over {m:,} scores"
        f"{' is quadratic in the scores' if selection != 'bonferroni-grid' else ''})",
        hint=hint,
    )


def threshold_audit(
    in_scores,
    out_scores,
    delta: float = 1e-5,
    alpha: float = 0.05,
    *,
    method: str = "steinke",
    selection: str = "split",
    n_thresholds: int = 10,
    min_fraction: float = 0.002,
    max_fraction: float = 0.5,
    seed: int | None = 0,
) -> AuditResult:
    """One-run lower bound of Steinke et al. (``method="steinke"``) or the f-DP audit (``method="fdp"``)
    from IN/OUT canary scores with one-sided guesses (top-k scores guessed IN, the rest abstain).

    ``selection`` fixes the multiple-testing treatment of the threshold choice (module docstring):
    ``"split"`` (default, valid), ``"bonferroni-grid"`` (valid) or ``"none"`` (the paper's uncorrected
    sweep, not valid at level alpha). The grid of ``"bonferroni-grid"`` is ``n_thresholds`` geometric
    values of k between ``min_fraction * m`` and ``max_fraction * m``.
    """
    delta = check_delta(delta)
    alpha = check_probability("alpha", alpha, allow_one=False)
    check_choice("method", method, ("steinke", "fdp"))
    check_choice("selection", selection, SELECTIONS)
    n_thresholds = check_positive_int("n_thresholds", n_thresholds)
    min_fraction = check_probability("min_fraction", min_fraction)
    max_fraction = check_probability("max_fraction", max_fraction)
    if min_fraction > max_fraction:
        raise DPValueError(f"min_fraction must be <= max_fraction, got {min_fraction} > {max_fraction}")
    i, o = check_scores(in_scores, out_scores, min_size=1)
    seed = check_seed(seed)
    m = i.size + o.size
    check_threshold_work(method, selection, m, n_thresholds, max_fraction)
    details: dict[str, Any] = {"selection": selection, "valid": selection != "none"}
    if selection == "none":
        ks, vs = _counts_by_threshold(i, o)
        best, best_k, n = _sweep(method, m, ks, vs, delta, alpha)
        details.update(n_tests=n, guesses=best_k)
    elif selection == "bonferroni-grid":
        grid = np.unique(
            np.clip(np.round(np.geomspace(min_fraction * m, max_fraction * m, n_thresholds)), 1, m)
        ).astype(int)
        s = np.concatenate([i, o])
        lab = np.concatenate([np.ones(i.size, bool), np.zeros(o.size, bool)])
        order = np.argsort(-s, kind="stable")
        v_at = np.cumsum(lab[order])
        a_each = alpha / n_thresholds
        best, best_k = 0.0, 0
        for k in grid:
            e = _eps_fn(method)(m, int(k), int(v_at[k - 1]), delta, a_each)
            if e > best:
                best, best_k = e, int(k)
        details.update(n_tests=int(n_thresholds), alpha_per_test=a_each, guesses=best_k, grid=grid)
    else:  # split
        rng = np.random.default_rng(seed)
        s = np.concatenate([i, o])
        lab = np.concatenate([np.ones(i.size, bool), np.zeros(o.size, bool)])
        perm = rng.permutation(m)
        sel, test = perm[: m // 2], perm[m // 2 :]
        s_sel, l_sel = s[sel], lab[sel]
        if l_sel.sum() == 0 or (~l_sel).sum() == 0:
            best, best_k = 0.0, 0
            frac = 0.0
        else:
            ks, vs = _counts_by_threshold(s_sel[l_sel], s_sel[~l_sel])
            _, k_sel, _ = _sweep(method, sel.size, ks, vs, delta, alpha)
            frac = k_sel / sel.size
            mt = test.size
            k = max(1, int(round(frac * mt))) if k_sel > 0 else 0
            if k == 0:
                best, best_k = 0.0, 0
            else:
                order = np.argsort(-s[test], kind="stable")
                v = int(lab[test][order][:k].sum())
                best, best_k = _eps_fn(method)(mt, k, v, delta, alpha), k
        details.update(fraction_selected=frac, guesses=best_k, m_test=int(test.size))
    return AuditResult(
        epsilon_lower=float(best),
        method=method,
        delta=delta,
        alpha=alpha,
        n_in=int(i.size),
        n_out=int(o.size),
        details=details,
    )
