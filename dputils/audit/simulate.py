"""Model-1 experiments of {cite}`gauss_audit`, run on the CPU: the headline comparison, the canary-count
and step-count ablations, and coverage of the lower bounds over many seeds.

Each experiment draws scores exactly from Model 1 (:func:`dputils.audit.model1.simulate_scores`) and
runs every auditor on the same scores. Method names:

* ``gauss`` / ``gauss-bonferroni``: the Gaussian auditor with the bootstrap ellipsoid / Bonferroni box;
  ``gauss-pooled`` the ellipsoid with pooled variances (the authors' code at paper time);
* ``steinke`` / ``fdp``: the baselines with the valid ``split`` threshold selection;
* ``steinke-uncorrected`` / ``fdp-uncorrected``: the paper's uncorrected threshold sweep (not valid at
  level alpha; this is what produced the paper's baseline numbers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import partial
from typing import Any

import numpy as np
from scipy import stats

from ..errors import DPValueError, check_choice, check_positive_int
from ..parallel import map_chunks
from ..progress import progress_bar
from .gauss import bonferroni_box, bootstrap_ellipsoid
from .methods import run_method
from .model1 import simulate_scores

ALL_METHODS = ("gauss", "gauss-bonferroni", "gauss-pooled", "steinke", "fdp", "steinke-uncorrected", "fdp-uncorrected")
# (the methods themselves: dputils.audit.methods.METHODS)

__all__ = [
    "ALL_METHODS",
    "PAPER_N_SUB",
    "audit_methods",
    "replicate",
    "subsample_curve",
    "budget_curve",
    "paper_subsample_curve",
    "coverage",
    "mc_upper",
    "binom_accept_min",
    "binom_accept_max",
    "region_coverage",
    "null_zero_counts",
    "ks_distance_standardised",
    "lilliefors_critical_value",
]

PAPER_N_SUB = 50  # subsamples per canary budget in the authors' Fig. 1(b) (their repository's script)


def audit_methods(
    in_scores,
    out_scores,
    methods: Iterable[str] = ALL_METHODS,
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """Lower bounds of the named methods on one set of scores."""
    out: dict[str, float] = {}
    for name in methods:
        check_choice("method", name, ALL_METHODS)
        r = run_method(name, in_scores, out_scores, delta, alpha, n_bootstrap=n_bootstrap, seed=seed)
        out[name] = float(r.epsilon_lower)
    return out


def _rep_seeds(n: int, ss: np.random.SeedSequence) -> list[np.random.SeedSequence]:
    """Seeds of the ``n`` reps of one chunk: a one-rep chunk draws from the chunk's own seed (so one rep per
    chunk, the default, is the stream these studies always used: rep i seeded by SeedSequence(seed).spawn(reps)[i]),
    a larger chunk from its seed's children."""
    return [ss] if n == 1 else ss.spawn(n)


def _replicate_chunk(
    n: int, ss: np.random.SeedSequence, m, T, q, sigma, methods, C, delta, alpha, n_bootstrap
) -> dict[str, list[float]]:
    res: dict[str, list[float]] = {k: [] for k in methods}
    for child in _rep_seeds(n, ss):
        rng = np.random.default_rng(child)
        i, o = simulate_scores(m, T, q, sigma, C, rng=rng)
        for k, v in audit_methods(i, o, methods, delta, alpha, n_bootstrap, int(rng.integers(1 << 31))).items():
            res[k].append(v)
    return res


def replicate(
    m: int,
    T: int,
    q: float,
    sigma: float,
    reps: int,
    methods=ALL_METHODS,
    *,
    C: float = 1.0,
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 2000,
    seed: int = 0,
    desc: str | None = None,
    chunk: int = 1,
    client: Any = None,
    executor: Any = None,
) -> dict[str, np.ndarray]:
    """``reps`` independent Model-1 runs with m canaries; returns method -> array of lower bounds.

    The reps run in seeded chunks of ``chunk`` (:func:`dputils.parallel.map_chunks`), serially or on a Dask
    ``client`` / ``concurrent.futures`` ``executor``: the answer depends on ``seed`` and ``chunk`` only, not
    on the number of workers.
    """
    reps = check_positive_int("reps", reps)
    methods = tuple(methods)
    fn = partial(
        _replicate_chunk,
        m=m,
        T=T,
        q=q,
        sigma=sigma,
        methods=methods,
        C=C,
        delta=delta,
        alpha=alpha,
        n_bootstrap=n_bootstrap,
    )
    parts = map_chunks(
        fn, reps, chunk, seed, client=client, executor=executor, desc=desc or f"m={m} T={T} sigma={sigma:.3g}"
    )
    return {k: np.array([v for part in parts for v in part[k]]) for k in methods}


def subsample_curve(
    in_scores,
    out_scores,
    ms: Iterable[int],
    n_sub: int,
    methods=ALL_METHODS,
    *,
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 2000,
    seed: int = 0,
    p_keep: float = 0.5,
) -> dict[str, np.ndarray]:
    """Fig. 1(b)/7 procedure: from one run, for each budget m draw n_in ~ Bin(m, p_keep) IN and m - n_in OUT
    canaries without replacement, audit, and average over ``n_sub`` subsamples (means of lower bounds,
    which are not themselves lower bounds). Returns method -> array of means over ``ms``."""
    rng = np.random.default_rng(seed)
    i, o = np.asarray(in_scores), np.asarray(out_scores)
    ms = list(ms)
    res = {k: np.zeros(len(ms)) for k in methods}
    for j, m in enumerate(progress_bar(ms, desc="canary budget", leave=False)):
        acc = {k: [] for k in methods}
        for _ in range(n_sub):
            n_in = int(np.clip(rng.binomial(m, p_keep), 2, min(m - 2, i.size)))
            n_out = min(m - n_in, o.size)
            si = rng.choice(i, n_in, replace=False)
            so = rng.choice(o, n_out, replace=False)
            for k, v in audit_methods(si, so, methods, delta, alpha, n_bootstrap, int(rng.integers(1 << 31))).items():
                acc[k].append(v)
        for k in methods:
            res[k][j] = float(np.mean(acc[k]))
    return res


def budget_curve(
    in_scores,
    out_scores,
    ms: Iterable[int],
    n_sub: int,
    methods=ALL_METHODS,
    *,
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 2000,
    seed: int = 0,
    whole: dict[str, float] | None = None,
) -> tuple[list[int], dict[str, np.ndarray]]:
    """The canary-budget curve of one run (Figs 1(b) and 7 of {cite}`gauss_audit`): the budgets of ``ms`` that the
    run holds, and for each the mean bound over ``n_sub`` subsamples (:func:`subsample_curve`), except at the
    run's own size ``m = len(in_scores) + len(out_scores)``, where every subsample would be (almost) the whole run:
    there the curve is one audit of the whole run (``whole``, a ``method -> bound`` dict already computed, or
    :func:`audit_methods` with ``seed``). Returns ``(budgets, method -> array over budgets)``."""
    total = len(in_scores) + len(out_scores)
    small = [mb for mb in ms if mb < total]
    curve = subsample_curve(
        in_scores, out_scores, small, n_sub, methods, delta=delta, alpha=alpha, n_bootstrap=n_bootstrap, seed=seed
    )
    if total not in list(ms):
        return small, curve
    if whole is None:
        whole = audit_methods(in_scores, out_scores, methods, delta, alpha, n_bootstrap, seed)
    return small + [total], {k: np.append(curve[k], whole[k]) for k in methods}


def paper_subsample_curve(
    in_scores,
    out_scores,
    ms: Iterable[int],
    n_sub: int = PAPER_N_SUB,
    *,
    unpooled_ms: Iterable[int] = (),
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 2000,
    seed: int = 0,
    p_keep: float = 0.5,
) -> dict[str, np.ndarray]:
    """The authors' Fig. 1(b) protocol {cite}`gauss_audit`: the canary-budget curve with the Gaussian auditor
    evaluated on *pooled* variances and averaged over ``n_sub`` (their 50) subsamples.

    Their code at paper time builds the bootstrap ellipsoid on the four unpooled coordinates
    theta = (mu_IN, s_IN, mu_OUT, s_OUT) but evaluates epsilon on the equal-variance pair with
    s_IN = s_OUT = sqrt((s_IN^2 + s_OUT^2) / 2), i.e. the mu-GDP curve with mu = |mu_IN - mu_OUT| / s_pooled
    (method ``gauss-pooled``); the paper does not state this. Each subsample takes n_in ~ Bin(m, p_keep) IN
    and m - n_in OUT scores without replacement (:func:`subsample_curve`). The uncorrected baselines run on the
    same subsamples, and with ``unpooled_ms`` the unpooled auditor (``gauss``) too at those budgets, so the
    effect of pooling is measured on identical subsamples.

    Returns ``{"m": ms, "gauss-pooled", "steinke-uncorrected", "fdp-uncorrected": arrays over ms,
    "gauss": array over ms with NaN outside unpooled_ms}`` (means of lower bounds, not lower bounds).
    """
    ms = [check_positive_int("m", mb) for mb in ms]
    n_sub = check_positive_int("n_sub", n_sub)
    unpooled = {int(mb) for mb in unpooled_ms}
    if not unpooled <= set(ms):
        raise DPValueError(f"unpooled_ms {sorted(unpooled - set(ms))} are not among the budgets ms {ms}")
    base = ("gauss-pooled", "steinke-uncorrected", "fdp-uncorrected")
    out: dict[str, Any] = {"m": np.array(ms), "gauss": np.full(len(ms), np.nan)}
    out.update({k: np.zeros(len(ms)) for k in base})
    ss = np.random.SeedSequence(seed).spawn(len(ms))
    for j, mb in enumerate(ms):
        meth = base + (("gauss",) if mb in unpooled else ())
        r = subsample_curve(
            in_scores,
            out_scores,
            [mb],
            n_sub,
            meth,
            delta=delta,
            alpha=alpha,
            n_bootstrap=n_bootstrap,
            seed=int(ss[j].generate_state(1)[0]),
            p_keep=p_keep,
        )
        for k in meth:
            out[k][j] = r[k][0]
    return out


def mc_upper(k: int, n: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper confidence bound on a rate from k events in n trials."""
    return 1.0 if k >= n else float(stats.beta.ppf(level, k + 1, n - k))


def binom_accept_min(n: int, p0: float, level: float = 0.01) -> int:
    """Smallest count k of successes in ``n`` trials that a one-sided binomial test at ``level`` does not
    reject under H0 "success rate >= p0": the smallest k with P[Bin(n, p0) <= k] >= level.

    Used for coverage: with k of n seeds covering theta*, "coverage >= 1 - alpha" is rejected below this."""
    n = check_positive_int("n", n)
    return int(np.argmax(stats.binom.cdf(np.arange(n + 1), n, p0) >= level))


def binom_accept_max(n: int, p0: float, level: float = 0.01) -> int:
    """Largest count k of events in ``n`` trials that a one-sided binomial test at ``level`` does not reject
    under H0 "event rate <= p0": the largest k with P[Bin(n, p0) >= k] >= level.

    Used for validity: with k of n seeds whose lower bound exceeds the true epsilon, "exceedance rate <= alpha"
    (Proposition 2 of {cite}`gauss_audit`) is rejected above this."""
    n = check_positive_int("n", n)
    return int(np.nonzero(stats.binom.sf(np.arange(n + 1) - 1, n, p0) >= level)[0].max())


def region_coverage(
    m: int, T: int, q: float, sigma: float, reps: int, *, alpha: float = 0.05, n_bootstrap: int = 1000, seed: int = 0
) -> dict[str, int]:
    """How many of ``reps`` Model-1 runs (m canaries) have their (1 - alpha) regions cover theta*.

    theta* = (sqrt(T) q, sqrt(sigma^2 + q (1 - q)), 0, sigma) (Proposition 1 of {cite}`gauss_audit`, C = 1).
    Returns ``{"Bonferroni box": k_box, "bootstrap ellipsoid": k_ell}``; run ``i`` draws its scores and its
    bootstrap from ``default_rng(SeedSequence(seed).spawn(reps)[i])``. Only the regions are built (no epsilon
    is minimised), so this is cheap enough for hundreds of seeds."""
    reps = check_positive_int("reps", reps)
    theta_star = np.array([math.sqrt(T) * q, math.sqrt(sigma**2 + q * (1 - q)), 0.0, sigma])
    hits = {"Bonferroni box": 0, "bootstrap ellipsoid": 0}
    for child in np.random.SeedSequence(seed).spawn(reps):
        rg = np.random.default_rng(child)
        i_c, o_c = simulate_scores(m, T, q, sigma, rng=rg)
        box = bonferroni_box(i_c, o_c, alpha)
        hits["Bonferroni box"] += bool(np.all((box["lower"] <= theta_star) & (theta_star <= box["upper"])))
        ell = bootstrap_ellipsoid(i_c, o_c, alpha, n_bootstrap, rg)
        d = theta_star - ell["center"]
        hits["bootstrap ellipsoid"] += bool(d @ np.linalg.solve(ell["cov"], d) <= ell["radius2"])
    return hits


def null_zero_counts(
    m: int,
    sigma: float,
    reps: int,
    methods: Iterable[str],
    *,
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, int]:
    """Null runs: in how many of ``reps`` runs each method's lower bound is exactly 0 when the IN and OUT
    scores have the same law, N(0, sigma^2) (Model 1 with no canary signal, C = 1; each of ``m`` canaries IN
    with probability 1/2). A valid bound is positive in at most a fraction alpha of such runs."""
    reps = check_positive_int("reps", reps)
    methods = tuple(methods)
    zero = dict.fromkeys(methods, 0)
    for child in np.random.SeedSequence(seed).spawn(reps):
        rg = np.random.default_rng(child)
        s = sigma * rg.standard_normal(m)
        inn = rg.random(m) < 0.5
        b = audit_methods(s[inn], s[~inn], methods, delta, alpha, n_bootstrap, int(rg.integers(1 << 31)))
        for k in methods:
            zero[k] += b[k] == 0.0
    return zero


def _coverage_chunk(
    n: int,
    ss: np.random.SeedSequence,
    m,
    T,
    q,
    sigma,
    methods,
    C,
    delta,
    alpha,
    n_bootstrap,
    scores,
    mu_gdp,
    theta_star,
) -> dict[str, Any]:
    bounds: dict[str, list[float]] = {k: [] for k in methods}
    cov_box = cov_ell = 0
    for child in _rep_seeds(n, ss):
        rng = np.random.default_rng(child)
        if scores == "model1":
            i, o = simulate_scores(m, T, q, sigma, C, rng=rng)
        else:
            inn = rng.random(m) < 0.5
            s = rng.standard_normal(m) + mu_gdp * inn
            i, o = s[inn], s[~inn]
        b_seed = int(rng.integers(1 << 31))
        for k, v in audit_methods(i, o, methods, delta, alpha, n_bootstrap, b_seed).items():
            bounds[k].append(v)
        box = bonferroni_box(i, o, alpha)
        cov_box += bool(np.all((box["lower"] <= theta_star) & (theta_star <= box["upper"])))
        ell = bootstrap_ellipsoid(i, o, alpha, n_bootstrap, np.random.default_rng(b_seed))
        d = theta_star - ell["center"]
        cov_ell += bool(d @ np.linalg.solve(ell["cov"], d) <= ell["radius2"])
    return {"bounds": bounds, "box": cov_box, "ellipsoid": cov_ell}


def coverage(
    m: int,
    T: int,
    q: float,
    sigma: float,
    reps: int,
    eps_true: dict[str, float],
    *,
    C: float = 1.0,
    methods=ALL_METHODS,
    delta: float = 1e-5,
    alpha: float = 0.05,
    n_bootstrap: int = 1000,
    seed: int = 0,
    scores: str = "model1",
    mu_gdp: float | None = None,
    chunk: int = 1,
    client: Any = None,
    executor: Any = None,
) -> dict[str, Any]:
    """Over ``reps`` seeds: how often each method's lower bound exceeds each reference epsilon in
    ``eps_true`` (name -> value), and how often each confidence region covers theta*.

    ``scores="model1"`` draws Model-1 scores (theta* from Proposition 1); ``scores="gdp"`` draws exact
    N(0, 1) vs N(mu_gdp, 1) scores (the DP-FTRL situation, where the true epsilon is the GDP epsilon).
    Rates come with a one-sided 95% Clopper-Pearson upper bound (Monte Carlo error).

    The seeds run in chunks of ``chunk`` (:func:`dputils.parallel.map_chunks`), serially or on a Dask
    ``client`` / ``concurrent.futures`` ``executor``; the counts are summed in chunk order, so the answer
    depends on ``seed`` and ``chunk`` only, not on the number of workers.
    """
    reps = check_positive_int("reps", reps)
    check_choice("scores", scores, ("model1", "gdp"))
    methods = tuple(methods)
    if scores == "model1":
        theta_star = np.array([math.sqrt(T) * q * C, math.sqrt((sigma * C) ** 2 + q * (1 - q) * C * C), 0.0, sigma * C])
    else:
        theta_star = np.array([mu_gdp, 1.0, 0.0, 1.0])
    fn = partial(
        _coverage_chunk,
        m=m,
        T=T,
        q=q,
        sigma=sigma,
        methods=methods,
        C=C,
        delta=delta,
        alpha=alpha,
        n_bootstrap=n_bootstrap,
        scores=scores,
        mu_gdp=mu_gdp,
        theta_star=theta_star,
    )
    parts = map_chunks(fn, reps, chunk, seed, client=client, executor=executor, desc=f"coverage m={m}")
    bounds = {k: [v for part in parts for v in part["bounds"][k]] for k in methods}
    cov_box = sum(part["box"] for part in parts)
    cov_ell = sum(part["ellipsoid"] for part in parts)
    out: dict[str, Any] = {
        "reps": reps,
        "m": m,
        "scores": scores,
        "region_coverage": {"bonferroni": cov_box / reps, "ellipsoid": cov_ell / reps},
        "exceed": {},
        "exceed_upper95": {},
        "mean_bound": {},
    }
    for k, arr in bounds.items():
        arr = np.array(arr)
        out["mean_bound"][k] = float(arr.mean())
        for ref, val in eps_true.items():
            n_ex = int(np.sum(arr > val))
            out["exceed"][f"{k}>{ref}"] = n_ex / reps
            out["exceed_upper95"][f"{k}>{ref}"] = mc_upper(n_ex, reps)
    return out


def ks_distance_standardised(x: Any) -> Any:
    r"""Kolmogorov-Smirnov distance of standardised samples to :math:`N(0, 1)`, along the last axis.

    Each sample :math:`x_1..x_n` is standardised with its own mean and sample standard deviation (``ddof=1``),
    :math:`z_i = (x_i - \bar x)/s`, sorted, and
    :math:`D_n = \max_i \max\{i/n - \Phi(z_{(i)}),\ \Phi(z_{(i)}) - (i-1)/n\}`, the statistic of
    ``scipy.stats.kstest(z, "norm")``. It tests the paper's premise that white-box scores are Gaussian (Figs 4(b)
    and 5 of {cite}`gauss_audit`); with estimated mean and sd, its null law is Lilliefors' (see
    :func:`lilliefors_critical_value`), not Kolmogorov's. A float for a 1-d input, an array for a stack."""
    x = np.asarray(x, dtype=float)
    if x.shape[-1] < 2:
        raise DPValueError("the KS distance of standardised scores needs at least 2 scores")
    x = np.sort((x - x.mean(axis=-1, keepdims=True)) / x.std(axis=-1, ddof=1, keepdims=True), axis=-1)
    n = x.shape[-1]
    cdf = stats.norm.cdf(x)
    up = np.arange(1, n + 1) / n - cdf
    dn = cdf - np.arange(n) / n
    return np.maximum(up.max(axis=-1), dn.max(axis=-1))


def lilliefors_critical_value(n: int, draws: int, rng: np.random.Generator, level: float = 0.01) -> float:
    r"""Lilliefors critical value of :func:`ks_distance_standardised` for ``n`` scores at ``level``, by
    parametric bootstrap: the :math:`1 - \text{level}` quantile of the distance over ``draws`` samples of ``n``
    standard Gaussians, each standardised with its own mean and sd (Lilliefors, 1967). Mean and sd estimated
    from the data make the known-parameter Kolmogorov value (about :math:`1.63/\sqrt n` at 1%) far too large;
    for large ``n`` this one is about :math:`1.03/\sqrt n`. Draws one ``(draws, n)`` block from ``rng``."""
    check_positive_int("n", n)
    check_positive_int("draws", draws)
    if not 0 < level < 1:
        raise DPValueError(f"level must be in (0, 1), got {level!r}")
    null = ks_distance_standardised(rng.standard_normal((draws, n)))
    return float(np.quantile(null, 1 - level))
