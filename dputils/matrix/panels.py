"""What the panels of {cite}`schuchardt_kalinin` plot and the chapter's checks compute, one function each.

Each function computes a number the chapter shows or checks, from the package's accountants, so that the chapter
only calls it and checks the claim:

* Validation of the Renyi accountant: :func:`bruteforce_agreement` (Algorithm 1 against the enumeration of Eq. 5),
  :func:`remove_divergence_mc` and :func:`add_r2_mc_dpsgd` / :func:`add_divergence_mc` (plain Monte Carlo
  estimates of the two directions), :func:`dp_cost` (time and memory of one pass).
* Figure 1: :func:`gram_matrices` and :func:`gram_shape` (the cyclic band, its corners and its decay).
* Figures 2-3: :func:`renyi_sigma_curve` (Algorithm 3's calibrated sigma with the deciding direction),
  :func:`renyi_optimal_order`, :func:`plain_gaussian_sigma` (the unamplified upper limit),
  :func:`importance_vs_plain` and :func:`importance_mc_sigmas` (the Monte Carlo curve of Figure 2a).
* Conditional composition (Section 4): :func:`participant_weights` (the weight of the participating slot per
  step), :func:`condcomp_allocations` (epsilon at a sigma per allocation of ``delta_E``),
  :func:`condcomp_at_sigmas` (Figures 3a-f: the epsilon certified at the Renyi-calibrated sigmas; below the
  target means conditional composition needs less noise there), :func:`renyi_and_condcomp_at_sigma` (both
  accountants' epsilon at one sigma, Figures 2b-2c and 2f), :func:`condcomp_sigmas` (the calibrated sigma of a
  factorisation, Figure 2d), :func:`mc_delta` (the Monte Carlo curve of
  Figures 3d-e, an estimate with its empirical-Bernstein bracket, not a bound).
* Figures 4-6: :func:`hybrid_best_fraction` (the share of steps at which the hybrid allocation of
  :func:`~.posterior_paths.allocation_paths` is lowest), :func:`distances_to_participant` (Appendix E.1),
  :func:`ternary_loss_spread` (Figure 5),
  :func:`family_bounds` (``lambda_bar_b`` at each epoch end for Option 1, Options 1+3 and Options 1+2+3 of
  Appendix F, :func:`~.condcomp.option2_hazard_bound`).
* The errata: :func:`errata_numbers`.
"""

from __future__ import annotations

import math
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import DPValueError, check_delta, check_positive, check_positive_int, check_probability
from .allocation import MatrixMonteCarloAccountant, MatrixRenyiAccountant
from .condcomp import TEMPERATURES, ConditionalCompositionAccountant, option2_hazard_bound, sample_ternary_loss
from .factorizations import Strategy, build_strategy, toeplitz_lower, truncate_gram
from .mechanism import BallsInBinsMatrixMechanism
from .noise_curves import ImportanceMonteCarlo, PlainGaussianRDP, renyi_sigma, secant_calibrate, sigma_family
from .renyi import (
    feldman_shenfeld_rdp,
    log_partition_bruteforce,
    log_partition_dp,
    rho_add_exact_independent,
    rho_add_lemma34,
    rho_remove,
)

__all__ = [
    "ALLOCATION_CURVES",
    "FAMILIES",
    "add_divergence_mc",
    "add_r2_mc_dpsgd",
    "bruteforce_agreement",
    "condcomp_allocations",
    "condcomp_at_sigmas",
    "condcomp_sigmas",
    "distances_to_participant",
    "dp_cost",
    "errata_numbers",
    "family_bounds",
    "gram_matrices",
    "gram_shape",
    "hybrid_best_fraction",
    "importance_mc_sigmas",
    "importance_vs_plain",
    "mc_delta",
    "participant_weights",
    "plain_gaussian_sigma",
    "remove_divergence_mc",
    "renyi_and_condcomp_at_sigma",
    "renyi_optimal_order",
    "renyi_sigma_curve",
    "ternary_loss_spread",
]

#: The allocations of Figure 4, in the paper's legend order.
ALLOCATION_CURVES = ("union", "global max", "per-epoch max (e ≥ 1)", "hybrid (e ≥ 2)")
#: The variational families of Figure 6 (names as in the paper's legend, Option 2 added).
FAMILIES = ("Option 1", "Options 1+3", "Options 1+2+3")


def _check_epochs(means: np.ndarray, epochs: int) -> tuple[int, int]:
    N = means.shape[1]
    k = check_positive_int("epochs", epochs)
    if N % k:
        raise DPValueError(f"epochs must divide the number of steps {N}, got {k}")
    return k, N // k


def hybrid_best_fraction(curves: Mapping[str, np.ndarray], rtol: float = 1e-9) -> float:
    """Fraction of the steps at which the hybrid curve is the lowest of the four (ties within ``rtol`` count)."""
    others = np.min([v for key, v in curves.items() if key != "hybrid (e ≥ 2)"], axis=0)
    return float(np.mean(curves["hybrid (e ≥ 2)"] <= others * (1 + rtol)))


def family_bounds(
    means: np.ndarray, sigma: float, delta_e: float, epochs: int, temperatures=TEMPERATURES
) -> dict[str, np.ndarray]:
    """Figure 6: ``lambda_bar_b`` (remove, union bound ``delta_E / N`` per step) at the last step of each epoch.

    Families (Appendix F): ``"Option 1"`` the uniform psi; ``"Options 1+3"`` the uniform psi and the
    temperature family ``softmax(-|mu_i - mu_j|^2 / t)`` (``temperatures``, inf = uniform); ``"Options
    1+2+3"`` adds Option 2, ``softmax(-|mu_k - mu_j|^2 / t)`` per reference component k at the same finite
    temperatures. Each family's bound is the best (max over psi) of its members, so a larger family never
    gives a larger ``lambda_bar``. Returns one array of k values per family.
    """
    M = np.asarray(means, dtype=float)
    k, b = _check_epochs(M, epochs)
    de = check_probability("delta_e", delta_e, allow_one=False)
    s = check_positive("sigma", sigma)
    N = M.shape[1]
    finite = tuple(t for t in temperatures if not math.isinf(t))
    fams = {
        "Option 1": ((math.inf,), ()),
        "Options 1+3": (tuple(temperatures), ()),
        "Options 1+2+3": (tuple(temperatures), finite),
    }
    ends = [e * b for e in range(1, k + 1)]
    return {
        name: np.array([option2_hazard_bound(M, s, n, de / N, None, sh, o2) for n in ends])
        for name, (sh, o2) in fams.items()
    }


def condcomp_at_sigmas(
    strategy: Strategy,
    sigmas: Mapping[float, float],
    delta: float,
    discretization: float = 2e-3,
    delta_e_fraction: float = 0.5,
) -> dict[float, dict[str, float]]:
    """Figures 3a-f: the epsilon conditional composition certifies at ``delta`` for each ``{eps: sigma}``.

    ``delta_E = delta_e_fraction * delta`` (the paper's delta / 2), union-bound allocation, both directions
    (:class:`~dputils.matrix.condcomp.ConditionalCompositionAccountant`, an upper bound). Returns, per
    target eps, ``{"sigma", "condcomp_epsilon", "seconds"}``. A certified epsilon below the target at the
    Renyi-calibrated sigma means conditional composition needs less noise than Renyi at that target.
    """
    dl = check_delta(delta)
    f = check_probability("delta_e_fraction", delta_e_fraction, allow_one=False)
    out = {}
    for e, sig in sigmas.items():
        t0 = time.perf_counter()
        acc = ConditionalCompositionAccountant(delta_e=f * dl, progress=False, discretization=discretization)
        acc.compose(BallsInBinsMatrixMechanism(strategy, check_positive("sigma", sig)))
        eps = float(acc.get_epsilon(dl))
        out[float(e)] = {"sigma": float(sig), "condcomp_epsilon": eps, "seconds": time.perf_counter() - t0}
    return out


def mc_delta(
    strategy: Strategy, sigma: float, epsilon: float, samples: int = 200_000, seed: int = 0
) -> dict[str, float]:
    """Monte Carlo ``delta(eps)`` of the balls-in-bins pair at ``sigma``: estimate and 99% bracket.

    :class:`~dputils.matrix.allocation.MatrixMonteCarloAccountant` (both directions, the larger reported):
    an estimate with an empirical-Bernstein interval, **not** a certified bound.
    """
    acc = MatrixMonteCarloAccountant(samples=samples, seed=seed)
    acc.compose(BallsInBinsMatrixMechanism(strategy, check_positive("sigma", sigma)))
    r = acc.get_delta(epsilon)
    return {"estimate": float(r.value), "lower": float(r.lower), "upper": float(r.upper)}


# ---- validation of the Renyi accountant (section "Validation" of the chapter) ----------------------------------


def bruteforce_agreement(
    rng: np.random.Generator,
    max_slots: int = 7,
    bands: Sequence[int] = (1, 2, 3, 4),
    orders: Sequence[int] = (2, 3, 4, 5),
    max_terms: int = 20_000,
) -> tuple[float, int]:
    """Worst relative difference between the dynamic program (Algorithm 1, Lemma 3.3) and the direct
    enumeration of the partition sum ``S_alpha`` (Eq. 5 / Appendix C), and the number of cases.

    One case per ``b = 2..max_slots``, ``p`` in ``bands``, ``alpha`` in ``orders`` with ``b**alpha <=
    max_terms`` (the enumeration has ``b**alpha`` ordered tuples): a random PSD Gram matrix ``X X^T`` (``X``
    uniform, ``b x 6``) truncated to ``p`` cyclic bands, ``sigma`` uniform on [0.6, 1.5], both drawn from
    ``rng`` in this order. Returns ``(max |dp - bf| / |bf|, cases)`` of ``log S_alpha``.
    """
    worst, cases = 0.0, 0
    for b in range(2, check_positive_int("max_slots", max_slots) + 1):
        for p in bands:
            for alpha in orders:
                if b**alpha > max_terms:
                    continue
                X = rng.random((b, 6))
                Gp, _ = truncate_gram(X @ X.T, p)
                sig = rng.uniform(0.6, 1.5)
                dp = log_partition_dp(Gp, sig, alpha, p)[alpha]
                bf = log_partition_bruteforce(Gp, sig, alpha)
                worst = max(worst, abs(dp - bf) / abs(bf))
                cases += 1
    return worst, cases


def remove_divergence_mc(strategy: Strategy, sigma: float, alpha: int, samples: int, rng: np.random.Generator) -> float:
    """Plain Monte Carlo estimate of the remove divergence ``R_alpha(P || Q)`` of the balls-in-bins pair
    (Lemma 2.8, Eq. 5): ``e^{(alpha-1) R_alpha} = E_Q[(p/q)^alpha]`` with
    ``p/q(x) = mean_i exp(<x, m_i>/sigma^2 - |m_i|^2/(2 sigma^2))``, ``x ~ N(0, sigma^2 I)`` (``samples`` draws
    from ``rng``). An estimate, not a bound: the chapter compares it with the dynamic program."""
    s = check_positive("sigma", sigma)
    x = rng.standard_normal((check_positive_int("samples", samples), strategy.n)) * s
    mm = strategy.means
    lr = np.log(np.mean(np.exp(x @ mm.T / s**2 - (mm * mm).sum(1) / (2 * s**2)), axis=1))
    return float(np.log(np.mean(np.exp(alpha * lr))) / (alpha - 1))


def add_r2_mc_dpsgd(b: int, samples: int, rng: np.random.Generator) -> tuple[float, float, np.ndarray]:
    """Monte Carlo estimate of the add divergence ``R_2(Q || P) = log E_Q[q/p]`` of one-epoch DP-SGD
    (``G = I``) at ``sigma = 1``: ``log p/q(y) = log mean_i e^{y_i - 1/2}``, ``y ~ N(0, I_b)`` (``samples``
    draws from ``rng``). Returns ``(estimate, its standard error, the q/p samples)``; the error is the delta
    method's ``sd(q/p) / (mean(q/p) sqrt(samples))``."""
    y = rng.standard_normal((check_positive_int("samples", samples), check_positive_int("b", b)))
    log_pq = np.log(np.mean(np.exp(y - 0.5), axis=1))
    w = np.exp(-log_pq)
    return float(np.log(np.mean(np.exp(-log_pq)))), float(w.std(ddof=1) / (w.mean() * math.sqrt(w.size))), w


def add_divergence_mc(losses: np.ndarray, orders: Sequence[int]) -> list[tuple[float, float]]:
    """Monte Carlo ``R_alpha(Q || P) = log E_Q[e^{(alpha-1) L}] / (alpha - 1)`` from samples ``L`` of the add
    privacy loss (:meth:`~.allocation.MatrixMonteCarloAccountant.losses`), per order: ``(estimate, standard
    error)``, the mean taken after shifting by ``max L`` (no overflow) and the error by the delta method."""
    L = np.asarray(losses, dtype=float)
    out = []
    for a in orders:
        x = np.exp((a - 1) * (L - L.max()))
        est = (np.log(x.mean()) + (a - 1) * L.max()) / (a - 1)
        se = x.std(ddof=1) / (x.mean() * math.sqrt(x.size)) / (a - 1)
        out.append((float(est), float(se)))
    return out


def dp_cost(bands: Sequence[int], slots: Sequence[int], order: int) -> np.ndarray:
    """Wall time and peak traced memory of one pass of the dynamic program (every order ``2..order``, BSR with
    one epoch, Gram truncated to ``p`` bands) for each ``p`` in ``bands`` and ``b`` in ``slots``: rows
    ``(p, b, seconds, peak bytes)`` (``tracemalloc``; a measurement, machine-dependent)."""
    rows = []
    for p in bands:
        for b in slots:
            Gp, _ = truncate_gram(build_strategy("bsr", 1, b, p).gram, p)
            tracemalloc.start()
            t0 = time.perf_counter()
            log_partition_dp(Gp, 1.0, order, p, work_budget=None)
            dt = time.perf_counter() - t0
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            rows.append((p, b, dt, peak))
    return np.array(rows)


# ---- Monte Carlo calibration of one-epoch DP-SGD (Figure 2a's Monte Carlo curve) ---------------------------------


def _plain_terms(losses: np.ndarray, eps: float) -> np.ndarray:
    return -np.expm1(np.minimum(eps - losses, 0.0))  # (1 - e^{eps - L})_+


def importance_vs_plain(
    b: int, sigma: float, epsilons: Sequence[float], plain_samples: int, samples: int, seed: int
) -> list[tuple[float, float, float]]:
    """The importance-sampling estimate of ``delta(eps)`` (:class:`~.noise_curves.ImportanceMonteCarlo`, seed
    ``seed``) against the plain mean ``E_P[(1 - e^{eps - L})_+]`` of the package's Monte Carlo accountant
    (remove losses, ``plain_samples`` draws, seed ``seed + 1``), one-epoch DP-SGD with ``b`` slots. Per eps:
    ``(plain, importance, standard error of the difference)``; two unbiased estimates of one number."""
    plain = (
        MatrixMonteCarloAccountant(samples=plain_samples, seed=seed + 1)
        .compose(BallsInBinsMatrixMechanism(build_strategy("identity", 1, b), sigma))
        .losses()["remove"]
    )
    out = []
    for e in epsilons:
        v_p = _plain_terms(plain, e)
        v_i = ImportanceMonteCarlo(b, sigma, samples, seed).terms(e)
        se = math.hypot(v_p.std() / math.sqrt(v_p.size), v_i.std() / math.sqrt(v_i.size))
        out.append((float(v_p.mean()), float(v_i.mean()), float(se)))
    return out


def importance_mc_sigmas(
    strategy: Strategy,
    epsilons: Sequence[float],
    delta: float,
    starts: Sequence[float],
    samples: int,
    seed: int = 0,
    start_factor: float = 0.75,
    rel_tol: float = 1e-3,
) -> dict[str, list[float]]:
    """Monte Carlo-calibrated sigma of one-epoch DP-SGD (``strategy`` = identity, ``b = strategy.n``) per eps.

    The remove direction by importance sampling (:class:`~.noise_curves.ImportanceMonteCarlo`, the same random
    numbers at every sigma), calibrated by :func:`~.noise_curves.secant_calibrate` from ``start_factor *
    starts[j]``; the standard error of sigma is the standard error of ``delta_hat`` divided by the slope
    ``-d delta_hat / d sigma`` (central difference over ``sigma (1 +- 0.01)``). The add direction is a plain
    estimate at the calibrated sigma (``direction="add"`` losses). An estimate, not a bound. Returns lists
    ``sigma, se`` (of sigma), ``remove`` (delta_hat), ``rel_se`` (of delta_hat) and ``add``.
    """
    b = strategy.n
    dl = check_delta(delta)
    out: dict[str, list[float]] = {k: [] for k in ("sigma", "se", "remove", "rel_se", "add")}
    for e, g in zip(epsilons, starts):

        def make(s: float) -> ImportanceMonteCarlo:
            return ImportanceMonteCarlo(b, s, samples, seed)

        sm = secant_calibrate(make, e, dl, start_factor * g, rel_tol)
        v = make(sm).terms(e)
        d_lo, d_hi = make(sm * 0.99).get_delta(e), make(sm * 1.01).get_delta(e)
        slope = (d_lo - d_hi) / (0.02 * sm)  # -d delta / d sigma
        se = v.std(ddof=1) / math.sqrt(v.size) / slope
        L_add = (
            MatrixMonteCarloAccountant(samples=samples, seed=seed, direction="add")
            .compose(BallsInBinsMatrixMechanism(strategy, sm))
            .losses()["add"]
        )
        out["sigma"].append(sm)
        out["se"].append(float(se))
        out["remove"].append(float(v.mean()))
        out["rel_se"].append(float(v.std(ddof=1) / math.sqrt(v.size) / v.mean()))
        out["add"].append(float(_plain_terms(L_add, e).mean()))
    return out


def plain_gaussian_sigma(
    strategy: Strategy, epsilon: float, delta: float, start: float, rel_tol: float, max_order: int
) -> float:
    """Calibrated sigma of the unamplified Gaussian mechanism with squared sensitivity ``max_i ||m_i||^2``
    (:class:`~.noise_curves.PlainGaussianRDP`, orders ``2..max_order``, Theorem 3.1): by quasi-convexity no
    balls-in-bins strategy needs more noise than this."""
    sens2 = float(np.max(np.diag(strategy.gram)))
    return secant_calibrate(lambda x: PlainGaussianRDP(x, sens2, max_order), epsilon, delta, start, rel_tol)


# ---- conditional composition (Section 4) ---------------------------------------------------------------------------


def participant_weights(acc: ConditionalCompositionAccountant, delta_e: float) -> dict[str, np.ndarray]:
    """The weight of the participating (largest-mean) slot in every per-step pair of conditional composition
    (Corollary 4.4: ``bar lambda_b^(n) prod_{j>b} ...``, the last weight of each step's mixture), per chain
    ``"remove"`` and ``"add"`` (``acc`` composed with one mechanism, union bound at ``delta_e``)."""
    return {d: np.array([w[-1] for _, w in acc.step_pairs(delta_e, d)]) for d in ("remove", "add")}


# ---- the Gram matrices (Figure 1) and the calibrated curves (Figures 2-3) -------------------------------------------


def gram_matrices(names: Sequence[str], n: int, epochs: int, bands: int) -> dict[str, np.ndarray]:
    """Figure 1: the ``b x b`` Gram matrix ``G_ij = <m_i, m_j>`` (``b = n / epochs`` slots, Lemma 2.8) of each
    strategy in ``names`` over ``n`` steps in ``epochs`` epochs with ``bands`` bands. BandMF's Toeplitz
    coefficients are optimised for one epoch of ``b`` steps and reused over all ``n`` steps (optimising them at
    ``n`` is slow; the figure shows the shape of ``G``, not an optimum)."""
    k = check_positive_int("epochs", epochs)
    b = check_positive_int("n", n) // k
    out = {}
    for name in names:
        if name == "bandmf":
            c = build_strategy(name, 1, b, min(bands, b)).coefs
            out[name] = Strategy(name, toeplitz_lower(c, n), k, b, min(bands, b), c).gram
        else:
            out[name] = build_strategy(name, k, b, bands).gram
    return out


def gram_shape(grams: Mapping[str, np.ndarray], bands: int) -> dict[str, dict[str, Any]]:
    """The shape claims of Figure 1 for each Gram matrix: ``corner`` = ``G_{0,b-1} / max G`` (the wrap-around
    block of consecutive epochs), ``out_of_band`` = the largest entry at cyclic slot distance ``>= bands``
    divided by ``max G``, and ``banded`` = whether every such entry is exactly zero."""
    out: dict[str, dict[str, Any]] = {"corner": {}, "out_of_band": {}, "banded": {}}
    for name, G in grams.items():
        b = G.shape[0]
        cyc = np.abs(np.subtract.outer(np.arange(b), np.arange(b)))
        off = np.minimum(cyc, b - cyc) >= bands  # cyclic distance between slots
        out["corner"][name] = float(G[0, b - 1] / G.max())
        out["out_of_band"][name] = float(G[off].max() / G.max())
        out["banded"][name] = bool(np.all(G[off] == 0))
    return out


def renyi_sigma_curve(
    strategy: Strategy, orders: Sequence[int], epsilons: Sequence[float], delta: float, **kwargs: Any
) -> dict[str, Any]:
    """Renyi-calibrated sigma (Algorithm 3, :func:`~.noise_curves.renyi_sigma` with ``kwargs``) at every eps,
    with the direction that decides and the effective bandwidth used at the middle eps: ``{"sigma",
    "dominant_mid", "bands_mid"}``."""
    cache: dict[float, Any] = {}
    sig = renyi_sigma(strategy, orders, epsilons, delta, cache=cache, **kwargs)
    det = cache[epsilons[len(sig) // 2]].get_epsilon(delta).details
    return {"sigma": sig, "dominant_mid": det["dominant"], "bands_mid": det["effective_bands"]}


def renyi_optimal_order(
    strategy: Strategy,
    sigma: float,
    epsilon: float,
    orders: Sequence[int],
    effective_bands: int | None,
    tier_budget: float,
) -> int:
    """The Renyi order at which Algorithm 3's conversion (Theorem 3.1) attains ``delta(epsilon)`` at ``sigma``
    (the minimiser over ``orders``), with the dynamic program at ``effective_bands``."""
    acc = sigma_family(
        MatrixRenyiAccountant, strategy, orders=orders, effective_bands=effective_bands, tier_budget=tier_budget
    )(sigma)
    return acc.get_delta(epsilon).details["order"]


def distances_to_participant(means: np.ndarray, step: int) -> np.ndarray:
    """Squared distances ``||mu_j - mu_b||^2`` over the first ``step - 1`` steps (1-based ``step``) between
    each slot's means and the participating slot's, the slots sorted by their mean at ``step`` (the largest
    last: the participating one). For DP-SGD in epoch ``e`` they are ``2e - 1`` or ``2e - 2`` (Appendix E.1)."""
    order = np.argsort(means[:, step - 1], kind="stable")
    mu = means[order, : step - 1]
    return ((mu[:-1] - mu[-1]) ** 2).sum(axis=1)


def condcomp_sigmas(
    strategy: Strategy,
    epsilons: Sequence[float],
    renyi_sigmas: Sequence[float],
    delta: float,
    rel_tol: float,
    discretization: float = 2e-3,
    start_ratio: float = 2.0,
) -> dict[float, float]:
    """Calibrated noise of conditional composition at each target ``eps``: the smallest sigma (rounded up to the
    relative precision ``rel_tol`` by :func:`~.noise_curves.secant_calibrate`) at which
    :class:`~dputils.matrix.condcomp.ConditionalCompositionAccountant` (``delta_E = delta / 2``, Appendix B.2;
    union bound, Theorem 4.6; PLD grid ``discretization``) certifies ``delta(eps) <= delta`` (Lemma 4.1).

    The search at each eps starts at ``r`` times that eps' Renyi sigma (``renyi_sigmas``), with ``r`` the ratio
    calibrated / Renyi sigma found at the previous eps (``start_ratio`` at the first), a warm start: it changes only
    the number of accountant evaluations and, within the bracket width ``rel_tol``, which sigma is returned.
    Returns ``{eps: sigma}`` in the order given."""
    dl = check_delta(delta)
    if len(epsilons) != len(renyi_sigmas):
        raise DPValueError("epsilons and renyi_sigmas must have the same length")
    make = sigma_family(
        ConditionalCompositionAccountant, strategy, delta_e=dl / 2, progress=False, discretization=discretization
    )
    out, ratio = {}, check_positive("start_ratio", start_ratio)
    for e, r in zip(epsilons, renyi_sigmas):
        out[e] = secant_calibrate(make, e, dl, ratio * r, rel_tol)
        ratio = out[e] / r
    return out


def renyi_and_condcomp_at_sigma(
    strategy: Strategy,
    sigma: float,
    delta: float,
    orders: Sequence[int],
    tier_budget: float,
    discretization: float = 2e-3,
) -> dict[str, float]:
    """The epsilon that Algorithm 3 and conditional composition each certify at ``delta`` for one noise
    multiplier ``sigma``: where calibrating sigma is too expensive, the accountant that certifies the smaller
    epsilon at the same sigma is the one that needs less noise at that epsilon (both are non-increasing in sigma).

    Renyi: :class:`~dputils.matrix.allocation.MatrixRenyiAccountant` over integer ``orders`` (work budget
    ``tier_budget`` per DP tier), ``eps = min_alpha [rho(alpha) + (log(1/delta) - log(alpha - 1) + alpha
    log(1 - 1/alpha)) / (alpha - 1)]`` with ``rho = max(rho_remove, rho_add)`` (Theorem 3.1, Algorithm 3).
    Conditional composition: :class:`~dputils.matrix.condcomp.ConditionalCompositionAccountant` with
    ``delta_E = delta / 2`` (Appendix B.2) and the union bound (Theorem 4.6). Returns ``sigma``,
    ``renyi_epsilon``, ``renyi_order`` (the minimising alpha), ``renyi_bands`` (the effective bandwidth at that
    order), ``condcomp_epsilon`` and the seconds each took (``renyi_seconds``, ``condcomp_seconds``)."""
    dl = check_delta(delta)
    sig = check_positive("sigma", sigma)
    t0 = time.perf_counter()
    res = (
        MatrixRenyiAccountant(tier_budget=tier_budget, orders=orders)
        .compose(BallsInBinsMatrixMechanism(strategy, sig))
        .get_epsilon(dl)
    )
    t1 = time.perf_counter()
    cc = ConditionalCompositionAccountant(delta_e=dl / 2, progress=False, discretization=discretization)
    eps_cc = float(cc.compose(BallsInBinsMatrixMechanism(strategy, sig)).get_epsilon(dl))
    return {
        "sigma": sig,
        "renyi_epsilon": float(res),
        "renyi_order": res.details["order"],
        "renyi_bands": res.details["effective_bands"],
        "condcomp_epsilon": eps_cc,
        "renyi_seconds": t1 - t0,
        "condcomp_seconds": time.perf_counter() - t1,
    }


def condcomp_allocations(
    strategy: Strategy,
    sigma: float,
    delta: float,
    discretization: float = 2e-3,
    allocations: Sequence[str] = ("union", "hybrid"),
) -> dict[str, dict[str, float]]:
    """The epsilon conditional composition certifies at ``sigma`` and ``delta`` (``delta_E = delta / 2``), per
    allocation of ``delta_E`` over the steps (``"union"``: Theorem 4.6, proved; ``"hybrid"``: the paper's,
    unproven), with the seconds it took and ``q_last``, the weight of the participating slot in the last step's
    remove pair (Corollary 4.4): how far the posterior bound has moved from the prior ``1/b`` by the end."""
    dl = check_delta(delta)
    out = {}
    for alloc in allocations:
        t0 = time.perf_counter()
        acc = ConditionalCompositionAccountant(
            delta_e=dl / 2, progress=False, discretization=discretization, allocation=alloc
        ).compose(BallsInBinsMatrixMechanism(strategy, check_positive("sigma", sigma)))
        out[alloc] = {
            "epsilon": float(acc.get_epsilon(dl)),
            "seconds": time.perf_counter() - t0,
            "q_last": float(acc.step_pairs(dl / 2, "remove")[-1][1][-1]),
        }
    return out


# ---- the errata -----------------------------------------------------------------------------------------------------


def errata_numbers(epochs: int, batches: int) -> dict[str, float]:
    """The numbers that tell the paper's misprints from the corrected readings (DP-SGD, ``G = I``):

    * Eq. 5's sign (``b = 100``, ``sigma = 1``, ``alpha = 5``): ``sign_ok`` = ``R_5`` by the DP (Lemma 3.3) with the
      corrected ``-alpha log b / (alpha - 1)``; ``sign_bad`` the printed sign (``+ 2 alpha log b / (alpha - 1)``
      more); ``sign_plain`` = ``alpha / (2 sigma^2)``, the unamplified Gaussian; ``sign_rel`` the relative
      difference of ``sign_ok`` from the Feldman-Shenfeld partition sum.
    * Lemma 3.4's direction (``b = 100``, ``sigma = 0.7``, ``alpha = 20``): ``l34_value`` (the add bound) and
      ``l34_remove`` (the remove divergence by the DP).
    * Appendix E.1's epoch of step ``n`` over ``epochs * batches`` steps: printed ``n mod b + 1`` against
      ``floor((n - 1) / b) + 1``: ``epoch_n`` steps, ``epoch_wrong`` where they differ, ``epoch_max`` the largest
      printed epoch.
    * "Lemma 3.4 is tight" (``b = 100``, ``sigma = 1``, ``alpha = 2``): ``l34_r2`` against the exact add divergence
      ``l34_exact`` (:func:`~.renyi.rho_add_exact_independent`) and their ratio ``l34_ratio``.
    """
    rho_ok = float(rho_remove(np.eye(100), 1.0, [5], 1)[0][0])
    n_e = np.arange(1, check_positive_int("epochs", epochs) * check_positive_int("batches", batches) + 1)
    e_bad, e_ok = n_e % batches + 1, (n_e - 1) // batches + 1
    l34_2 = float(rho_add_lemma34(np.eye(100), 1.0, [2])[0])
    exact_2 = float(rho_add_exact_independent(np.eye(100), 1.0, [2])[0])
    return {
        "sign_ok": rho_ok,
        "sign_bad": rho_ok + 2 * 5 * math.log(100) / (5 - 1),
        "sign_plain": 5 / 2,
        "sign_rel": abs(rho_ok / feldman_shenfeld_rdp(100, 1.0, 5) - 1),
        "l34_value": float(rho_add_lemma34(np.eye(100), 0.7, [20])[0]),
        "l34_remove": float(rho_remove(np.eye(100), 0.7, [20], 1)[0][0]),
        "epoch_n": int(n_e.size),
        "epoch_wrong": int(np.sum(e_bad != e_ok)),
        "epoch_max": int(e_bad.max()),
        "l34_r2": l34_2,
        "l34_exact": exact_2,
        "l34_ratio": l34_2 / exact_2,
    }


def ternary_loss_spread(
    means: np.ndarray, sigma: float, steps: Sequence[int], batches: int, samples: int, rng: np.random.Generator
) -> dict[int, dict[str, Any]]:
    """Figure 5: the spread of the ternary privacy loss ``L_b(x)``, ``x ~ R~`` (the remove-case reference law of
    Theorem D.3; :func:`~.condcomp.sample_ternary_loss`, ``samples`` draws from ``rng`` per step, the steps in the
    order given). Per 1-based step ``n``: its epoch ``floor((n - 1) / batches) + 1``, the standard deviation, the
    interquartile range and the samples."""
    out = {}
    for n in steps:
        L = sample_ternary_loss(means, sigma, n, samples, "remove", rng=rng)
        q25, q75 = np.quantile(L, [0.25, 0.75])
        out[n] = {"epoch": (n - 1) // batches + 1, "std": float(L.std()), "iqr": float(q75 - q25), "samples": L}
    return out


def multi_epoch_bisr(
    eps: float = 0.5,
    delta: float = 1e-5,
    n: int = 100,
    epochs: int = 10,
    bands: int = 4,
    max_order: int = 64,
    rel_tol: float = 0.002,
    tier_budget: float = 2e8,
    discretization: float = 0.002,
    guess: float = 8.0,
) -> dict[str, float]:
    """Figure 3c (T7c): multi-epoch BISR with ``bands`` bands, ``epochs`` epochs of ``n`` batches. Algorithm 3's
    calibrated σ at ``eps`` (effective bandwidth ``bands``, integer orders to ``max_order``), then the ε that
    conditional composition certifies at that σ (δ_E = δ/2, union bound), as :func:`condcomp_at_sigmas`. The
    defaults are the book's full-profile settings; the chapter reads the value from a recording (too slow for it)."""
    st = build_strategy("bisr", epochs, n, bands)
    (sigma,) = renyi_sigma(
        st,
        range(2, max_order + 1),
        [eps],
        delta,
        shape=[guess],
        effective_bands=bands,
        rel_tol=rel_tol,
        tier_budget=tier_budget,
    )
    cc = condcomp_at_sigmas(st, {eps: sigma}, delta, discretization)[eps]
    return {
        "eps": eps,
        "sigma_renyi": float(sigma),
        "condcomp_epsilon": cc["condcomp_epsilon"],
        "condcomp_seconds": cc["seconds"],
    }
