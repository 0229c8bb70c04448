"""Model 1 of {cite}`gauss_audit` (Section 4): the canary scores of white-box DP-SGD, simulated exactly,
and the convergence of the IN score to a Gaussian (Theorem 1, Corollary 1).

Model 1. Per step the canary-aligned observation is ``X_t(0) = Z_t`` for an absent canary and
``X_t(1) = B_t C + Z_t`` for a present one, with ``B_t ~ Bernoulli(q)`` and ``Z_t ~ N(0, sigma^2 C^2)``
(the paper writes N(0, sigma^2) with C = 1; the clip norm C is kept here). The score is
``S_T = T^{-1/2} sum_t X_t`` (Definition 2), so exactly

    S_T(0) ~ N(0, sigma^2 C^2),    S_T(1) = (C K + N(0, T sigma^2 C^2)) / sqrt(T),  K ~ Binomial(T, q),

a Binomial mixture of N(C k / sqrt(T), sigma^2 C^2) (Proposition 1 gives its mean sqrt(T) q C and
variance sigma^2 C^2 + q (1 - q) C^2). :func:`simulate_scores` draws from this law directly (no loop
over steps); :func:`simulate_scores_stepwise` runs the per-step recursion and serves as its check.

Convergence. With ``tau^2 = sigma^2 C^2 + q(1-q) C^2`` and the centred, standardised IN score, the
leading Edgeworth term gives (Theorem 1 and Corollary 1; with C = 1 in the paper)

    d_K = q(1-q)|1-2q| C^3 / (6 sqrt(2 pi T) tau^3) + O(1/T),
    sup_{|x| >= x0} |F_T(x) - Phi(x)| = q(1-q)|1-2q| C^3 / (6 sqrt(T) tau^3) * phi(x0)(x0^2 - 1) + O(1/T)  (x0 >= sqrt 3).

These are asymptotic expansions, not bounds; :func:`exact_standardized_cdf` evaluates ``F_T`` exactly
from the Binomial mixture so the expansion can be checked.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special, stats

from ..accountants.pld import PLDAccountant
from ..calibration import calibrate
from ..errors import (
    DPValueError,
    NumericalError,
    check_choice,
    check_delta,
    check_positive,
    check_positive_int,
    check_probability,
)
from ..mechanisms import SubsampledGaussianMechanism
from .gaussian_pair import epsilon_pair

__all__ = [
    "simulate_scores",
    "simulate_scores_stepwise",
    "score_pair_theta",
    "exact_score_log_delta",
    "exact_score_epsilon",
    "exact_standardized_cdf",
    "exact_standardized_sf",
    "kolmogorov_leading_term",
    "tail_deviation_leading_term",
    "exact_sup_deviation",
    "gaussian_score_epsilon",
    "edgeworth_deviations",
    "kolmogorov_rates",
    "theoretical_epsilon",
    "calibrate_sigma",
]


def _check(T, q, sigma, C):
    return (
        check_positive_int("T", T),
        check_probability("q", q),
        check_positive("sigma", sigma),
        check_positive("C", C),
    )


def simulate_scores(
    m: int,
    T: int,
    q: float,
    sigma: float,
    C: float = 1.0,
    p_keep: float = 0.5,
    rng: np.random.Generator | int | None = None,
    *,
    noise_scale: float = 1.0,
    canary_prob: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw (IN scores, OUT scores) of ``m`` canaries under Model 1, each IN with probability ``p_keep``.

    ``noise_scale`` multiplies the real noise (``< 1`` simulates an implementation whose noise is too
    small) and ``canary_prob`` the per-step inclusion probability of an IN canary (default ``q``; ``1``
    simulates a canary that is wrongly present at every step). Both exist for bug-detection experiments.
    """
    m = check_positive_int("m", m)
    T, q, sigma, C = _check(T, q, sigma, C)
    p_keep = check_probability("p_keep", p_keep, allow_one=False)
    noise_scale = check_positive("noise_scale", noise_scale)
    cp = q if canary_prob is None else check_probability("canary_prob", canary_prob)
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    is_in = rng.random(m) < p_keep
    K = rng.binomial(T, cp, size=m)
    noise = rng.standard_normal(m) * (sigma * C * noise_scale)
    scores = np.where(is_in, C * K / math.sqrt(T), 0.0) + noise
    return scores[is_in], scores[~is_in]


def simulate_scores_stepwise(
    m: int,
    T: int,
    q: float,
    sigma: float,
    C: float = 1.0,
    p_keep: float = 0.5,
    rng: np.random.Generator | int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Model 1 run step by step (X_t per canary, summed and divided by sqrt(T)); slow, for validation."""
    m = check_positive_int("m", m)
    T, q, sigma, C = _check(T, q, sigma, C)
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    is_in = rng.random(m) < p_keep
    total = np.zeros(m)
    for _ in range(T):
        b = rng.random(m) < q
        total += np.where(is_in & b, C, 0.0) + rng.standard_normal(m) * sigma * C
    s = total / math.sqrt(T)
    return s[is_in], s[~is_in]


def score_pair_theta(T: int, q: float, sigma: float, C: float = 1.0) -> dict[str, float]:
    """Proposition 1: mean and sd of S_T(1) (IN) and S_T(0) (OUT) under Model 1."""
    T, q, sigma, C = _check(T, q, sigma, C)
    return {
        "mu_in": math.sqrt(T) * q * C,
        "sigma_in": math.sqrt((sigma * C) ** 2 + q * (1 - q) * C * C),
        "mu_out": 0.0,
        "sigma_out": sigma * C,
    }


def _binom_support(T, q, tol=1e-300):
    k = np.arange(T + 1)
    logw = stats.binom.logpmf(k, T, q)
    keep = logw > math.log(tol)
    return k[keep], logw[keep]


def exact_score_log_delta(
    eps: float, T: int, q: float, sigma: float, C: float = 1.0, direction: str = "in_out"
) -> float:
    """log of the exact hockey-stick divergence of the Model-1 score pair (Binomial mixture vs Gaussian).

    With ``P = sum_k w_k N(a_k, s^2)`` (IN, a_k = C k / sqrt(T), s = sigma C) and ``Q = N(0, s^2)`` (OUT),
    the privacy loss ``L(x) = log sum_k w_k exp((a_k x - a_k^2/2) / s^2)`` is increasing in x (all a_k >= 0),
    so {L > eps} is a half-line {x > x*} and ``H(P||Q) = P(x > x*) - e^eps Q(x > x*)``;
    ``direction="out_in"`` gives ``H(Q||P)`` on {x < x**}. x* is found by brentq on L.
    """
    T, q, sigma, C = _check(T, q, sigma, C)
    check_choice("direction", direction, ("in_out", "out_in", "both"))
    if direction == "both":
        return max(
            exact_score_log_delta(eps, T, q, sigma, C, "in_out"), exact_score_log_delta(eps, T, q, sigma, C, "out_in")
        )
    k, logw = _binom_support(T, q)
    a = C * k / math.sqrt(T)
    s = sigma * C

    def L(x):
        return special.logsumexp(logw + (a * x - 0.5 * a * a) / s**2)

    target = eps if direction == "in_out" else -eps
    # L is increasing from log w_0 (x -> -inf, where only k = 0 survives) to +inf
    lo, hi = -10.0 * s, 10.0 * s
    while L(lo) > target:
        lo = 2 * lo - 1
        if lo < -1e8:
            return 0.0 if direction == "in_out" else -np.inf  # region is (almost) everything
    while L(hi) < target:
        hi = 2 * hi + 1
        if hi > 1e8:
            raise NumericalError("exact_score_log_delta: no bracket for the privacy-loss threshold")
    x = optimize.brentq(lambda t: L(t) - target, lo, hi, xtol=1e-13, rtol=1e-15)
    if direction == "in_out":
        lp = special.logsumexp(logw + special.log_ndtr(-(x - a) / s))
        lq = special.log_ndtr(-x / s)
    else:
        lp = special.log_ndtr(x / s)  # OUT mass below x
        lq = special.logsumexp(logw + special.log_ndtr((x - a) / s))
    t = eps + lq - lp
    return float(lp + math.log1p(-math.exp(t))) if t < 0 else -math.inf


def exact_score_epsilon(delta: float, T: int, q: float, sigma: float, C: float = 1.0, direction: str = "both") -> float:
    """Exact eps(delta) of the Model-1 score pair (the information ceiling of any auditor of the summed
    score, m -> infinity). ``direction="both"`` is the max over the two orientations.

    The root of the exact log delta(eps) = log delta is found by Brent's method to ``xtol = 1e-10``: a reference
    value accurate to that width on either side, not the safe end of a certified bracket."""
    delta = check_delta(delta)
    ld = math.log(delta)

    def f(e):
        return exact_score_log_delta(e, T, q, sigma, C, direction) - ld

    if f(0.0) <= 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while f(hi) > 0:
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            raise NumericalError("exact_score_epsilon: no bracket")
    return optimize.brentq(f, lo, hi, xtol=1e-10)


def _tau(T, q, sigma, C):
    return math.sqrt((sigma * C) ** 2 + q * (1 - q) * C * C)


def _standardized_z(x, T, q, sigma, C):
    """Binomial weights w_k and the per-component z so that F_T(x) = sum_k w_k Phi(z_k(x))."""
    T, q, sigma, C = _check(T, q, sigma, C)
    x = np.asarray(x, dtype=float)
    k, logw = _binom_support(T, q, 1e-40)
    tau = _tau(T, q, sigma, C)
    z = (x[..., None] * tau + math.sqrt(T) * q * C - C * k / math.sqrt(T)) / (sigma * C)
    return np.exp(logw), z


def exact_standardized_cdf(x, T: int, q: float, sigma: float, C: float = 1.0) -> np.ndarray:
    """F_T(x) = Pr[(S_T(1) - sqrt(T) q C) / tau <= x], exactly, from the Binomial mixture."""
    w, z = _standardized_z(x, T, q, sigma, C)
    return np.sum(w * special.ndtr(z), axis=-1)


def exact_standardized_sf(x, T: int, q: float, sigma: float, C: float = 1.0) -> np.ndarray:
    """1 - F_T(x), computed directly from survival functions (accurate in the upper tail)."""
    w, z = _standardized_z(x, T, q, sigma, C)
    return np.sum(w * special.ndtr(-z), axis=-1)


def _skew_prefactor(T, q, sigma, C):
    """q(1-q)|1-2q| C^3 / (6 sqrt(T) tau^3): gamma_1 / (6 sqrt(T)), gamma_1 the skewness of one summand."""
    return q * (1 - q) * abs(1 - 2 * q) * C**3 / (6 * math.sqrt(T) * _tau(T, q, sigma, C) ** 3)


def kolmogorov_leading_term(T: int, q: float, sigma: float, C: float = 1.0) -> float:
    """Theorem 1: the leading term of the Kolmogorov distance between S~_T and N(0, tau^2)."""
    T, q, sigma, C = _check(T, q, sigma, C)
    return _skew_prefactor(T, q, sigma, C) / math.sqrt(2 * math.pi)


def tail_deviation_leading_term(x0: float, T: int, q: float, sigma: float, C: float = 1.0) -> float:
    """Corollary 1: leading term of sup_{|x| >= x0} |F_T(x) - Phi(x)|, for x0 >= sqrt(3)."""
    T, q, sigma, C = _check(T, q, sigma, C)
    if not x0 >= math.sqrt(3):
        raise DPValueError(f"x0 must be >= sqrt(3) (Corollary 1), got {x0!r}")
    return _skew_prefactor(T, q, sigma, C) * stats.norm.pdf(x0) * (x0 * x0 - 1)


def exact_sup_deviation(
    T: int, q: float, sigma: float, C: float = 1.0, x0: float = 0.0, x_max: float = 12.0, n_grid: int = 6001
) -> float:
    """sup_{|x| >= x0} |F_T(x) - Phi(x)| from the exact mixture CDF on a grid of ``n_grid`` points per side.

    Upper tail via survival functions, lower tail via CDFs, so deviations of 1e-10 are resolved.
    """
    T, q, sigma, C = _check(T, q, sigma, C)
    xs = np.linspace(x0, x_max, n_grid)
    up = np.max(np.abs(exact_standardized_sf(xs, T, q, sigma, C) - special.ndtr(-xs)))
    lo = np.max(np.abs(exact_standardized_cdf(-xs, T, q, sigma, C) - special.ndtr(-xs)))
    return float(max(up, lo))


def gaussian_score_epsilon(
    delta: float, T: int, q: float, sigma: float, C: float = 1.0, *, pooled: bool = False
) -> np.ndarray | float:
    """The epsilon of the Gaussian surrogate of the Model-1 score pair: ``eps_theta(delta)`` (Eq. (2) of
    {cite}`gauss_audit`) at ``theta = (mu_in, sigma_in, 0, sigma_out)`` of Proposition 1
    (:func:`score_pair_theta`), OUT = N(0, sigma^2 C^2), IN = N(sqrt(T) q C, sigma^2 C^2 + q(1-q) C^2).

    ``pooled=True`` gives both Gaussians the pooled sd ``sqrt((sigma_out^2 + sigma_in^2) / 2)`` (the
    equal-variance, mu-GDP pair that the authors' code evaluates). Compare :func:`exact_score_epsilon`,
    the exact pair (Binomial mixture vs Gaussian) that no auditor of the summed score can exceed."""
    th = score_pair_theta(T, q, sigma, C)
    if pooled:
        s_pool = math.sqrt((th["sigma_out"] ** 2 + th["sigma_in"] ** 2) / 2)
        return epsilon_pair(delta, 0.0, s_pool, th["mu_in"], s_pool)
    return epsilon_pair(delta, 0.0, th["sigma_out"], th["mu_in"], th["sigma_in"])


def edgeworth_deviations(T: int, q: float, sigma: float, x0s=(3, 4, 5), C: float = 1.0) -> dict[str, Any]:
    """Theorem 1 and Corollary 1 of {cite}`gauss_audit` next to the exact mixture, for one setting.

    Returns ``prefactor`` ``q(1-q)|1-2q| C^3 / (6 sqrt(T) tau^3)`` with ``tau^2 = sigma^2 C^2 + q(1-q) C^2``
    (the skewness term of the Edgeworth expansion), ``lead`` (Theorem 1's leading term of the Kolmogorov
    distance, the prefactor over sqrt(2 pi)), ``exact`` (the Kolmogorov distance of the exact mixture,
    :func:`exact_sup_deviation`) and ``tails``: for each ``x0`` of ``x0s`` a dict with ``x0``, ``leading
    term`` (Corollary 1: prefactor * phi(x0)(x0^2 - 1)) and ``exact`` (sup over |x| >= x0 of the exact
    deviation)."""
    T, q, sigma, C = _check(T, q, sigma, C)
    tau3 = ((sigma * C) ** 2 + q * (1 - q) * C * C) ** 1.5
    prefactor = q * (1 - q) * abs(1 - 2 * q) * C**3 / (6 * math.sqrt(T) * tau3)
    tails = [
        {
            "x0": x0,
            "leading term": tail_deviation_leading_term(x0, T, q, sigma, C),
            "exact": exact_sup_deviation(T, q, sigma, C, x0=x0),
        }
        for x0 in x0s
    ]
    return {
        "prefactor": prefactor,
        "lead": kolmogorov_leading_term(T, q, sigma, C),
        "exact": exact_sup_deviation(T, q, sigma, C),
        "tails": tails,
    }


def kolmogorov_rates(Ts, q0: float, sigma: float, T0: int, *, n_grid: int = 1500, x_max: float = 8.0) -> dict[str, Any]:
    """The rates of Theorem 1 of {cite}`gauss_audit` on the exact mixture: the Kolmogorov distance of the
    standardised IN score at each T of ``Ts`` in two regimes, q fixed at ``q0`` (distance ~ T^{-1/2}) and
    ``q = q0 sqrt(T0 / T)`` (distance ~ (1-q)(1-2q) / T, nearly 1/T), exact (:func:`exact_sup_deviation` on
    ``n_grid`` points up to ``x_max``) and by the leading term (:func:`kolmogorov_leading_term`).

    Returns ``T``, ``q_scaled``, ``exact_fixed``, ``exact_scaled``, ``lead_fixed``, ``lead_scaled`` (lists)
    and the least-squares slopes of log distance on log T, ``slope_fixed`` and ``slope_scaled``."""
    Ts = np.asarray(Ts)
    q_scaled = q0 * np.sqrt(T0 / Ts)
    kw = dict(n_grid=n_grid, x_max=x_max)
    out: dict[str, Any] = {"T": Ts, "q_scaled": q_scaled}
    out["exact_fixed"] = [exact_sup_deviation(t, q0, sigma, **kw) for t in Ts]
    out["exact_scaled"] = [exact_sup_deviation(t, qs, sigma, **kw) for t, qs in zip(Ts, q_scaled)]
    out["lead_fixed"] = [kolmogorov_leading_term(t, q0, sigma) for t in Ts]
    out["lead_scaled"] = [kolmogorov_leading_term(t, qs, sigma) for t, qs in zip(Ts, q_scaled)]
    out["slope_fixed"] = np.polyfit(np.log(Ts), np.log(out["exact_fixed"]), 1)[0]
    out["slope_scaled"] = np.polyfit(np.log(Ts), np.log(out["exact_scaled"]), 1)[0]
    return out


# --- the mechanism's epsilon (the accountant's upper bound) ---------------------------------------


def theoretical_epsilon(
    sigma: float, q: float, T: int, delta: float, *, discretization: float = 1e-4
) -> dict[str, Any]:
    """Upper bound on epsilon of T-fold Poisson-subsampled Gaussian DP-SGD (noise multiplier sigma).

    The book's PLD accountant (:mod:`dputils.accountants.pld`, both directions, pessimistic discretisation):
    the certified upper end of its bracket. Returns ``{"epsilon", "accountant"}``.
    """
    sigma = check_positive("sigma", sigma)
    q = check_probability("q", q)
    T = check_positive_int("T", T)
    delta = check_delta(delta)
    acc = PLDAccountant(discretization=discretization)
    acc.compose(SubsampledGaussianMechanism(sigma, q), T)
    res = acc.get_epsilon(delta)
    return {"epsilon": float(res.upper if res.upper is not None else res.value), "accountant": "dputils-pld"}


def calibrate_sigma(
    epsilon: float, q: float, T: int, delta: float, *, discretization: float = 1e-3, rel_tol: float = 1e-3
) -> float:
    """The smallest noise multiplier (to rel_tol, rounded up) whose PLD epsilon at delta is <= epsilon
    (:func:`dputils.calibration.calibrate`: Brent's method on log sigma, the end that meets the target)."""

    epsilon = check_positive("epsilon", epsilon)
    return calibrate(
        lambda s: theoretical_epsilon(s, q, T, delta, discretization=discretization)["epsilon"],
        epsilon,
        monotone="decreasing",
        start=1.0,
        limits=(1e-3, 1e4),
        rel_tol=rel_tol,
        name="sigma",
    ).value
