"""f-DP curves of the shuffling chapter: Gaussian trade-offs, the labelled mixture of Def 5.2, Defs 5.3/5.4.

Reference: van Dijk, Nguyen, Nguyen, Nguyen, "Generalizing DP-SGD with Shuffling and Batch Clipping"
(book key ``vandijk_shuffling``); equation, lemma and theorem numbers are the paper's.

* ``G_mu`` and mu-GDP's privacy profile (eq. 7), the headline ``mu = sqrt(gE)/sigma`` (Thm F.1), the
  g = 1 result (Lemma F.2) and the generic group transform (DRS Thm 2.14);
* the exact trade-off function of the labelled mixture ``sum_c q(c) G_{c/sigma}`` (Def 5.2 / Lemma B.5),
  its privacy profile ``delta(eps) = sum_c q(c) H_{e^eps}(N(c/sigma, 1) || N(0, 1))`` and its inverse;
* the upper-bound function of Def 5.3 (closed-form convex envelope) and the lower-bound function of Def 5.4.

The mu-GDP profile, its inverse, the Gaussian hockey-stick divergence and the inversion of a privacy
profile are the foundation's (:mod:`dputils.curves`); this module adds the mixture machinery.
:func:`gaussian_tradeoff` is :func:`dputils.curves.gdp_tradeoff`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from .. import curves
from ..curves import gdp_epsilon  # noqa: F401  (one GDP conversion: re-exported by dputils.shuffling)
from ..errors import (
    DPValueError,
    NumericalError,
    check_delta,
    check_epsilon,
    check_nonnegative,
    check_positive,
    check_positive_int,
    check_probability,
)
from .laws import C2Law, bc_shuffle_law, subsample_ic_g1_law

#: Relative width of the epsilon brackets of :func:`mixture_epsilon` and :func:`lower_bound_epsilon`.
_EPS_REL_TOL = 1e-12

# ---------------------------------------------------------------------------------------------
# Gaussian trade-off functions and mu-GDP
# ---------------------------------------------------------------------------------------------


#: ``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` (Section 4), mu >= 0: the foundation's curve, which is
#: evaluated as ``Phi(-Phi^{-1}(alpha) - mu)`` to keep alpha down to 1e-300.
gaussian_tradeoff = curves.gdp_tradeoff


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


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of mu-GDP, eq. (7); the foundation's :func:`dputils.curves.gdp_delta` (0 for mu = 0)."""
    epsilon = check_epsilon(epsilon)
    mu = check_nonnegative("mu", mu)
    return 0.0 if mu == 0 else float(curves.gdp_delta(epsilon, mu))


def _brentq(fn: Callable[[float], float], a: float, b: float, what: str, **kw) -> float:
    """``scipy.optimize.brentq`` with its failures (no sign change, no convergence within ``maxiter``, a nan)
    reported as :class:`NumericalError` naming ``what``."""
    kw.setdefault("maxiter", 500)
    try:
        return optimize.brentq(fn, a, b, **kw)
    except (RuntimeError, ValueError) as exc:
        raise NumericalError(f"{what}: root search failed ({' '.join(str(exc).split())})") from None


def _invert_decreasing(
    log_delta_fn: Callable[[float], float], delta: float, what: str, eps_max: float = 1e7
) -> tuple[float, float]:
    """Bracket ``(lo, hi)`` around the eps where a non-increasing ``log delta(eps)`` reaches ``log(delta)``.

    The search is the foundation's :func:`dputils.curves.epsilon_from_delta` (bracketing by doubling,
    then bisection on log delta to relative width :data:`_EPS_REL_TOL`), which returns the upper end
    ``hi`` with ``delta(hi) <= delta``; its last bracket has ``delta(lo) > delta`` and
    ``hi - lo <= tol max(1, hi)``, so ``lo = hi - tol max(1, hi)`` (clipped at 0) is below the root.
    ``(0, 0)`` when ``delta(0) <= delta``; failures (nan, no root below ``eps_max``) are
    :class:`NumericalError` naming ``what``."""

    def checked(e: float) -> float:
        v = log_delta_fn(e)
        if math.isnan(v):
            raise NumericalError(f"{what}: log delta is nan at epsilon={e!r}")
        return v

    try:
        hi = curves.epsilon_from_delta(
            lambda e: math.exp(checked(e)), delta, eps_max=eps_max, tol=_EPS_REL_TOL, log_delta_fn=checked
        )
    except NumericalError as exc:
        if str(exc).startswith(what):
            raise
        raise NumericalError(f"{what}: {exc}") from None
    return (max(0.0, hi - _EPS_REL_TOL * max(1.0, hi)), hi) if hi > 0 else (0.0, 0.0)


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
                lam = _solve_lambda(
                    lambda L: math.log(math.exp(_log_Abar(L, logq, mu)) + q0), math.log1p(-al), True, 0.0, math.inf
                )
            out[i] = math.exp(_log_B(lam, logq, mu)) + q0
        else:  # Lambda < 0: alpha = A(Lambda) + q0, 1 - alpha = Abar(Lambda)
            if 1 - al < 0.5:
                lam = _solve_lambda(lambda L: _log_Abar(L, logq, mu), math.log1p(-al), True, -math.inf, 0.0)
            else:
                lam = _solve_lambda(
                    lambda L: math.log(math.exp(_log_A(L, logq, mu)) + q0), math.log(al), False, -math.inf, 0.0
                )
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


def _log_gauss_hockey(eps: float, mu: np.ndarray) -> np.ndarray:
    """log H_{e^eps}(N(mu, 1) || N(0, 1)) for each component mu > 0 (eq. 7): the foundation's
    vectorized :func:`dputils.curves.gaussian_log_delta_vec`."""
    return curves.gaussian_log_delta_vec(eps, mu, 1.0, 0.0, 1.0)


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
    fn = lambda b: float(gaussian_tradeoff(b, mu)) - l - b  # noqa: E731
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
    return _invert_decreasing(
        lambda e: math.log(max(lower_bound_delta(e, c_l, l, sigma), 1e-320)), delta, "lower_bound_epsilon"
    )[1]


def lower_convex_envelope(x, y) -> np.ndarray:
    """The lower convex envelope of the points ``(x_i, y_i)`` (``x`` increasing), evaluated at ``x``.

    The largest convex function below every point: Andrew's monotone chain keeps the lower hull (a point is
    dropped when it lies on or above the chord of its neighbours), and the hull is interpolated linearly.
    Def 5.3 of ``vandijk_shuffling`` takes this envelope of ``min{f, f^{-1}}``; see
    :func:`upper_bound_tradeoff_numerical`."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise DPValueError("x and y must be one-dimensional arrays of the same length (at least 2)")
    if np.any(np.diff(x) <= 0):
        raise DPValueError("x must be strictly increasing")
    hull: list[tuple[float, float]] = []
    for p in zip(x, y):
        while len(hull) >= 2 and (
            (hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1]) - (hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0]) <= 0
        ):
            hull.pop()
        hull.append(p)
    hx, hy = zip(*hull)
    return np.interp(x, hx, hy)


def upper_bound_tradeoff_numerical(alpha, c_u: float, u: float, sigma: float) -> np.ndarray:
    """Def 5.3 computed from its definition on a grid, the independent check of :func:`upper_bound_tradeoff`.

    With ``mu = c_u / sigma``, ``hat f(a) = u + (1 - u) G_mu(a)`` and its inverse ``hat f^{-1}(a) = 1`` for
    ``a < u``, ``G_mu((a - u)/(1 - u))`` otherwise; the bound is the lower convex envelope
    (:func:`lower_convex_envelope`) of ``min{hat f, hat f^{-1}}`` at the grid ``alpha`` (increasing, from 0 to
    1). Its error against the closed form is of the order of the grid's spacing."""
    c_u = check_positive("c_u", c_u)
    u = check_probability("u", u)
    sigma = check_positive("sigma", sigma)
    x = np.asarray(alpha, dtype=float)
    mu = c_u / sigma
    fhat = u + (1 - u) * gaussian_tradeoff(x, mu)
    finv = np.where(x < u, 1.0, gaussian_tradeoff(np.clip((x - u) / (1 - u), 0, 1), mu))
    return lower_convex_envelope(x, np.minimum(fhat, finv))


def mixture_tradeoff_by_optimization(alpha: float, weights, mus) -> float:
    """Lemma B.1 of ``vandijk_shuffling`` by numerical minimization: the trade-off function of the labelled
    mixture ``sum_i q_i G_{mu_i}`` at ``alpha`` is ``inf { sum_i q_i G_{mu_i}(a_i) : sum_i q_i a_i = alpha,
    0 <= a_i <= 1 }`` (``G_0(a) = 1 - a``), found here by SLSQP from ``a_i = alpha``.

    The independent check of the closed form of Def 5.2 (:func:`mixture_tradeoff`), which is this infimum;
    SLSQP stops within about ``1e-5`` of it."""
    q, mu = np.asarray(weights, dtype=float), np.asarray(mus, dtype=float)
    if q.ndim != 1 or q.shape != mu.shape or np.any(q < 0) or abs(q.sum() - 1) > 1e-12 or np.any(mu < 0):
        raise DPValueError("weights must be a probability vector and mus non-negative, of the same length")
    alpha = check_probability("alpha", alpha)

    def g(a, m):
        return 1 - a if m == 0 else special.ndtr(-special.ndtri(np.clip(a, 1e-300, 1)) - m)

    res = optimize.minimize(
        lambda x: sum(qi * g(xi, mi) for qi, xi, mi in zip(q, x, mu)),
        np.full(q.size, alpha),
        method="SLSQP",
        bounds=[(0, 1)] * q.size,
        constraints=[{"type": "eq", "fun": lambda x: q @ x - alpha}],
        options={"ftol": 1e-14},
    )
    return float(res.fun)


def monte_carlo_mixture_delta(epsilons, law: C2Law, sigma: float, draws: int, rng: np.random.Generator):
    """Monte Carlo of the privacy profile of the labelled mixture (eq. 14, :func:`mixture_delta`).

    Draws ``c^2 ~ q_E`` (``law``), then ``X ~ N(mu, 1)`` with ``mu = c / sigma`` and the privacy loss
    ``L = mu X - mu^2 / 2`` of the labelled pair; ``delta(eps) = E[(1 - e^{eps - L})_+]``. Uses ``rng`` for
    ``draws`` values of ``c^2`` and then ``draws`` normals. Returns the estimates and their standard errors
    (arrays over ``epsilons``)."""
    sigma = check_positive("sigma", sigma)
    draws = check_positive_int("draws", draws)
    c2 = rng.choice(law.pmf.size, size=draws, p=law.pmf)
    mu_c = np.sqrt(c2) / sigma
    loss = mu_c * (rng.standard_normal(draws) + mu_c) - mu_c**2 / 2
    est, se = [], []
    for e in np.atleast_1d(np.asarray(epsilons, dtype=float)):
        v = np.clip(1 - np.exp(e - loss), 0, None)
        est.append(v.mean())
        se.append(v.std() / math.sqrt(draws))
    return np.asarray(est), np.asarray(se)


# ---------------------------------------------------------------------------------------------
# Independent checks of the closed forms (the chapter's validation section)
# ---------------------------------------------------------------------------------------------


def gdp_delta_three_ways(mus, epsilons, alphas=None, min_delta: float = 1e-8) -> list[tuple[float, float, float]]:
    """The privacy profile of ``G_mu`` three ways, for every pair of ``mus`` and ``epsilons``.

    For a trade-off function f the tightest delta at eps is ``sup_alpha [1 - f(alpha) - e^eps alpha]`` (DRS
    Prop 2.12). For ``f = G_mu`` the slope ``G_mu'(alpha) = -e^eps`` holds at ``alpha* = Phi(-eps/mu - mu/2)``,
    where the supremum is attained, and its value is eq. (7), ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``.
    Returns ``(delta_eq7, grid_sup, at_star)`` per pair (mu outer, eps inner): eq. (7) (:func:`gdp_delta`), the
    supremum over the grid ``alphas`` (default 4000 log-spaced points on [1e-12, 1e-2] and 4000 linear on
    [1e-2, 1]) and ``1 - G_mu(alpha*) - e^eps alpha*``. Pairs with ``delta_eq7 < min_delta`` are left out: there
    ``1 - G_mu(alpha) - e^eps alpha`` cancels in floating point."""
    if alphas is None:
        alphas = np.concatenate([np.geomspace(1e-12, 1e-2, 4000), np.linspace(1e-2, 1, 4000)])
    alphas = np.asarray(alphas, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0 or np.any((alphas < 0) | (alphas > 1)):
        raise DPValueError("alphas must be a non-empty 1-d array of numbers in [0, 1]")
    out = []
    for mu in mus:
        mu = check_positive("mu", mu)
        for e in epsilons:
            d7 = gdp_delta(e, mu)
            if d7 < min_delta:
                continue
            grid_sup = np.max(1 - gaussian_tradeoff(alphas, mu) - math.exp(e) * alphas)
            a_star = special.ndtr(-e / mu - mu / 2)
            at_star = 1 - gaussian_tradeoff(a_star, mu) - math.exp(e) * a_star
            out.append((d7, float(grid_sup), float(at_star)))
    return out


def mixture_tradeoff_two_ways(alphas, law: C2Law, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Def 5.2 in closed form (:func:`mixture_tradeoff`) and Lemma B.1 by numerical minimization
    (:func:`mixture_tradeoff_by_optimization`) at each of ``alphas``, for the labelled mixture
    ``sum_c q(c) G_{c/sigma}`` of ``law`` (components ``c = sqrt(j)`` for each ``j`` with ``q(j) > 0``, c = 0
    included). The closed form is the infimum of Lemma B.1, so it is at most the numerical value, which SLSQP
    finds to about 1e-5. Returns the two arrays."""
    sigma = check_positive("sigma", sigma)
    a = np.atleast_1d(np.asarray(alphas, dtype=float))
    j = law.support
    weights, mus = law.pmf[j], np.sqrt(j) / sigma
    closed = np.array([mixture_tradeoff(float(x), law, sigma) for x in a])
    numerical = np.array([mixture_tradeoff_by_optimization(float(x), weights, mus) for x in a])
    return closed, numerical


def upper_bound_envelope_gap(alpha, c_u: float, u: float, sigma: float) -> float:
    """The largest difference on the grid ``alpha`` between the closed form of Def 5.3
    (:func:`upper_bound_tradeoff`, break points :func:`upper_bound_betas`) and the definition computed
    numerically, the lower convex envelope of ``min{hat f^U, (hat f^U)^{-1}}``
    (:func:`upper_bound_tradeoff_numerical`): of the order of the grid's spacing when the closed form is right."""
    x = np.asarray(alpha, dtype=float)
    env = upper_bound_tradeoff_numerical(x, c_u, u, sigma)
    return float(np.max(np.abs(env - upper_bound_tradeoff(x, c_u, u, sigma))))


def strong_adversary_tradeoffs(
    alphas, dataset_size: int = 60000, batch_size: int = 250, sigma: float = 2.0, epochs: int = 10, group_size: int = 4
) -> dict[str, np.ndarray]:
    """Four trade-off functions f(alpha) of one setting under the strong adversary (the paper's Table 1 rows at
    the defaults): ``shuffle_g1`` is ``G_mu`` with ``mu = sqrt(E)/sigma`` (shuffling, g = 1, Lemma F.2);
    ``subsample_g1`` the exact mixture (Def 5.2) of subsampling with g = 1 (Binomial law of c^2, Lemma E.2);
    ``bc_shuffle`` the exact mixture of batch clipping with shuffling for a group of ``group_size`` (occupancy
    law composed over E epochs); ``bc_shuffle_bound`` its bound ``G_mu`` with ``mu = sqrt(gE)/sigma``
    (Thm F.1)."""
    a = np.asarray(alphas, dtype=float)
    law_ss = subsample_ic_g1_law(dataset_size, batch_size, epochs)
    law_bc = bc_shuffle_law(dataset_size, batch_size, group_size).compose(epochs)
    return {
        "shuffle_g1": gaussian_tradeoff(a, shuffle_g1_mu(sigma, epochs)),
        "subsample_g1": mixture_tradeoff(a, law_ss, sigma),
        "bc_shuffle": mixture_tradeoff(a, law_bc, sigma),
        "bc_shuffle_bound": gaussian_tradeoff(a, bc_shuffle_mu(sigma, epochs, group_size)),
    }


def strong_adversary_tradeoff_curves(
    dataset_size: int, batch_size: int, sigma: float, epochs: int, n_points: int = 400, group_sizes=(1, 4)
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The trade-off curves (alpha, f(alpha)) after ``epochs`` epochs under the strong adversary, for a figure.

    For each g of ``group_sizes``: ``bc_shuffle_g{g}``, the exact mixture of batch clipping with shuffling
    (Def 5.2, parametric in Lambda, :func:`mixture_tradeoff_curve` with ``n_points``, under the occupancy law
    composed over E epochs), then ``bound_g{g}``, its bound ``G_mu`` with ``mu = sqrt(gE)/sigma`` (Thm F.1) on
    ``n_points`` equally spaced alpha in [0, 1]; last ``subsample_g1``, the exact mixture of subsampling with
    g = 1 (Binomial law of c^2, Lemma E.2)."""
    a = np.linspace(0, 1, check_positive_int("n_points", n_points))
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for g in group_sizes:
        law = bc_shuffle_law(dataset_size, batch_size, g).compose(epochs)
        out[f"bc_shuffle_g{g}"] = mixture_tradeoff_curve(law, sigma, n_points=n_points)
        out[f"bound_g{g}"] = (a, gaussian_tradeoff(a, bc_shuffle_mu(sigma, epochs, g)))
    law_ss = subsample_ic_g1_law(dataset_size, batch_size, epochs)
    out["subsample_g1"] = mixture_tradeoff_curve(law_ss, sigma, n_points=n_points)
    return out
