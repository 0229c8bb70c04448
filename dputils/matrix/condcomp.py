r"""Conditional composition for matrix mechanisms under balls-in-bins (section 4 of {cite}`schuchardt_kalinin`).

**Why.** The Lemma 2.8 pair ``P = (1/b) sum_i N(m_i, s^2 I_N)``, ``Q = N(0, s^2 I_N)`` is not a product over the
N steps, so PLD/FFT composition does not apply to it directly. Conditional composition (Lemma 4.1, from
Choquette-Choo et al. 2024, Thm 3.1) replaces it by a product of per-step scalar pairs: if, for every step
n, the law of output n given the earlier outputs ``y_{1:n-1}`` is dominated by a fixed pair
``(P_n, Q_n)`` except on an event of probability ``beta_n``, then the mechanism is
``(eps, delta_PLD(eps) + delta_E)``-DP with ``delta_PLD`` the profile of ``prod_n (P_n, Q_n)`` and
``delta_E = sum_n beta_n``.

**Per-step pairs (Algorithm 4).** Given ``y_{1:n-1}``, step n is the 1-D mixture
``sum_i N(m_{i,n}, s^2) P(z = i | y_{1:n-1})``. Sort the step-n means ascending. Lemma 4.2: a mixture with
weights that stochastically dominate the posterior dominates it (remove and add orientation); Lemma 4.3 /
Corollary 4.4: bounds ``lambda_bar_i`` on the posterior reverse hazards ``P(z = i | z <= i, y)`` give such
weights, ``p_i = lambda_bar_i prod_{j > i} (1 - lambda_bar_j)`` (``lambda_bar_1 = 1``).
Lemma 4.5 (Bayes): ``P(z = i | z <= i, y) = sigmoid(-log(i - 1) - L_i(y))`` with
``L_i(y) = log[(1/(i-1)) sum_{j<i} N(y | mu_j) / N(y | mu_i)]`` (``mu_j``: sorted component j's means over
steps 1..n-1). A high-probability **lower** bound ``tau_i`` on ``L_i`` under the reference law R gives
``lambda_bar_i = sigmoid(-log(i-1) - tau_i)``. The variational (ELBO) bound of Lemma 4.7 bounds ``L_i``
below by a Gaussian (Lemma D.2): for a categorical psi on ``j < i``,

    nu_k = rho_k^T (E_psi mu_j - mu_i)/s^2 + (|mu_i|^2 - E_psi |mu_j|^2)/(2 s^2) - KL(psi || uniform),
    xi   = |mu_i - E_psi mu_j| / s,

for the reference component ``N(rho_k, s^2 I)``. Remove (Theorem D.3, R = the P-marginal of the first n-1
steps, all b components, ``rho_k = mu_k``): ``P[L_i <= tau] <= (1/b) sum_k min_psi Phi((tau - nu_k)/xi)``
(Eq. 31), the largest such tau with bound ``<= beta_i`` found by bisection; add (Theorem 4.8 / Cor. D.4,
``R = N(0, s^2 I)``): ``tau = max_psi nu + xi Phi^{-1}(beta_i)`` (Eq. 32). psi ranges over Option 3 of
Appendix F, ``softmax(-|mu_i - mu_j|^2 / t)`` for the paper's temperatures (t = inf is uniform, Option 1).
Choosing the best psi per reference component at the final tau keeps the bound valid: every psi gives a
valid inequality, and tau depends on the means only, never on the data.

**Failure allocation (Appendix E).** Union bound (default, proved, Theorem 4.6): ``beta_n = delta_E / N``
per step, split evenly over the ``b - 1`` tail bounds. "hybrid" (the paper's choice, **stated without
proof**; a maximum of individually valid quantiles is not automatically a simultaneous bound): epoch 1 as
the union bound; in each later epoch every bound at significance ``delta_E / (k (b - 1))`` and the maximum
over the epoch's steps used at every step of that epoch.

**Composition (Appendix B.2).** The remove chain (per-step pairs ``(P_n, Q_n)``) and the add chain
(``(Q_n, P'_n)`` with the add-direction weights, a different posterior bound) are composed separately with
the book's PLD accountant (:class:`~dputils.accountants.pld.PLDAccountant`, pessimistic connect-the-dots
upper bound), and ``delta(eps) = max(delta_remove(eps), delta_add(eps)) + delta_E``.

Cost: components sharing the smallest step-n mean are merged, so DP-SGD needs one tail bound per step and
a p-banded C at most p. The prefix Gram matrix is updated incrementally and, for sparse strategies
(identity, banded C), stored sparse; only the rows of the components that need a bound are formed, and
reference components with identical ``nu_k`` (for every psi) are merged with their multiplicity before the
bisection of Eq. 31 (for DP-SGD at most three distinct ones whatever b is). A step then costs
``O(T c_n (b + nnz(H)) + b log b)`` elementwise work plus a bisection whose size does not grow with b,
instead of ``O(T c_n b^2)``; the values are those of the direct computation
(:func:`_per_step_hazards_direct`, kept as the tests' reference) up to floating-point summation order.
The N per-step pairs are then composed by the PLD accountant, whose cost is linear in N as well.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.special import expit, logsumexp, ndtr, ndtri

from ..accountants.base import Accountant, AccountingResult
from ..accountants.pld import PLDAccountant
from ..errors import (
    DPValueError,
    NumericalError,
    check_choice,
    check_delta,
    check_epsilon,
    check_positive,
    check_positive_int,
    check_probability,
)
from ..mechanisms import GaussianMixtureMechanism
from ..numerics import bisect_monotone
from ..progress import progress_bar
from ..resources import check_memory, check_work
from .allocation import calibrate_sigma
from .factorizations import Strategy
from .mechanism import BallsInBinsMatrixMechanism, check_matrix_mechanism, check_one_run

#: Temperatures of Option 3 used in the paper's experiments (inf = uniform psi, Option 1).
TEMPERATURES = (math.inf, 10**-1, 10**-0.5, 1.0, 10**0.5, 10.0)
ALLOCATIONS = ("union", "hybrid")
_BISECTION_STEPS = 64
#: Single-step loss range of the PLD discretisation (the paper's tail-mass truncation); the mass outside
#: it is kept pessimistically by the PLD accountant, so this only trades grid size, never validity.
_PLD_TAIL = 1e-15
_FIXED_POINT_STEPS = 12
_FIXED_POINT_RTOL = 1e-2


# ---------------------------------------------------------------------------------------------- tail bounds
def _psi_stack(d2: np.ndarray, i_idx: np.ndarray, temperatures) -> np.ndarray:
    """psi rows over j < i (zero elsewhere), one block per temperature: shape (n_psi, n_i, b).

    Option 3 of Appendix F: ``psi_i = softmax_{j<i}(-|mu_i - mu_j|^2 / t)``, uniform for t = inf (Option 1).
    """
    n_i, b = d2.shape
    mask = np.arange(b)[None, :] < i_idx[:, None]
    out = np.empty((len(temperatures), n_i, b))
    for a, t in enumerate(temperatures):
        if math.isinf(t):
            out[a] = mask / i_idx[:, None].astype(float)
        else:
            lw = np.where(mask, -d2 / t, -np.inf)
            out[a] = np.exp(lw - logsumexp(lw, axis=1, keepdims=True))
    return out


def _gaussian_lower_bounds(H: np.ndarray, i_idx: np.ndarray, s: float, direction: str, temperatures):
    """(nu, xi) of Lemma D.2 for sorted components ``i_idx`` (0-based, >= 1) and every psi.

    ``H`` is the Gram matrix of the sorted prefix means. Returns ``nu`` of shape (n_psi, n_i, K) with K = b
    reference components (remove) or K = 1 (add, R = N(0, s^2 I)), and ``xi`` of shape (n_psi, n_i).
    """
    sq = np.diag(H)
    d2 = np.maximum(sq[i_idx, None] - 2 * H[i_idx] + sq[None, :], 0.0)  # |mu_i - mu_j|^2, (n_i, b)
    s2 = s * s
    psi = _psi_stack(d2, i_idx, temperatures)  # (T, n_i, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.sum(np.where(psi > 0, psi * np.log(psi * i_idx[None, :, None]), 0.0), axis=2)  # KL(psi || unif)
    Hpsi = psi @ H  # <E_psi mu_j, mu_k> for every reference k, (T, n_i, b)
    e_sq = psi @ sq  # E_psi |mu_j|^2
    cross = Hpsi[:, np.arange(i_idx.size), i_idx]  # <E_psi mu_j, mu_i>
    dist2 = np.maximum(sq[i_idx][None, :] - 2 * cross + np.sum(Hpsi * psi, axis=2), 0.0)  # |mu_i - E_psi mu_j|^2
    xi = np.sqrt(dist2) / s
    base = (sq[i_idx][None, :] - e_sq) / (2 * s2) - kl
    if direction == "remove":
        nu = (Hpsi - H[i_idx][None]) / s2 + base[..., None]  # rho_k = mu_k, all b reference components
    else:
        nu = base[..., None]
    return nu, xi


def _phi_terms(tau: np.ndarray, nu: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Phi((tau - nu)/xi) with the step function for xi = 0 (deterministic lower bound)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = xi > 0
        z = np.where(
            pos[..., None],
            (tau[None, :, None] - nu) / np.where(pos, xi, 1.0)[..., None],
            np.where(tau[None, :, None] >= nu, np.inf, -np.inf),
        )
    return ndtr(z)


def _bisect_tail(f, beta, lo, hi):
    """The tail-bound bisection of :func:`_tail_quantiles` and :func:`option2_hazard_bound`: the largest ``tau``
    found with ``f(tau) <= beta`` (the bracket's ``lo`` end, certified), after at least one halving and until the
    width is at most ``1e-11 max(1, |lo|)``; ``lo``/``hi`` may be arrays, bisected in lockstep."""
    return bisect_monotone(
        lambda tau: f(tau) <= beta,
        lo,
        hi,
        keep="lo",
        tol=1e-11,
        max_iter=_BISECTION_STEPS,
        ends_checked=True,
        scale="lo",
        min_halvings=1,
    )


def _tail_quantiles(
    nu: np.ndarray,
    xi: np.ndarray,
    beta_i: float,
    direction: str,
    weights: np.ndarray | None = None,
    K: int | None = None,
) -> np.ndarray:
    """The largest tau per component with the certified bound on ``P[L_i <= tau]`` at most ``beta_i``.

    Remove (Eq. 31): ``f(tau) = mean_k min_psi Phi((tau - nu_k)/xi)``, non-decreasing in tau; bracket
    ``tau_lo = min_k max_psi q_psi,k(beta)`` (every k-term <= beta) and ``tau_hi = min_k max_psi
    q_psi,k(K beta)`` (one term alone exceeds K beta beyond it), with ``q = nu + xi Phi^{-1}(.)``; then
    bisection keeping ``f(lo) <= beta``. Add (Eq. 32): the closed form ``max_psi nu + xi Phi^{-1}(beta)``.
    A deterministic bound (xi = 0) contributes ``nu`` minus a rounding margin.

    ``weights`` (remove only): multiplicities of the reference columns of ``nu`` when identical reference
    components were merged, ``K`` their total (the b of Eq. 31); the mean over k is then the weighted mean.
    """
    q = ndtri(beta_i)
    margin = 1e-12 * np.maximum(1.0, np.abs(nu))

    def quant(z):
        return np.where(xi[..., None] > 0, nu + xi[..., None] * z, nu - margin)

    if direction == "add":
        return np.max(quant(q)[..., 0], axis=0)
    if K is None:
        K = nu.shape[2]
    lo = np.min(np.max(quant(q), axis=0), axis=1)
    hi = np.min(np.max(quant(ndtri(min(K * beta_i, 1 - 1e-12))), axis=0), axis=1)
    hi = np.maximum(hi, lo)

    # f(tau) evaluates _phi_terms (same operations, hoisted out of the bisection loop), with the minimum over
    # psi taken on z before the normal cdf: Phi is increasing and scipy's ndtr is non-decreasing in floating
    # point, so ndtr(min_psi z) is bitwise min_psi ndtr(z), at 1/n_psi of the ndtr evaluations
    pos = (xi > 0)[..., None]
    xi_safe = np.where(pos, xi[..., None], 1.0)
    det = not bool(np.all(pos))

    def f(tau):
        z = (tau[None, :, None] - nu) / xi_safe
        if det:
            z = np.where(pos, z, np.where(tau[None, :, None] >= nu, np.inf, -np.inf))
        terms = ndtr(np.min(z, axis=0))
        return np.mean(terms, axis=1) if weights is None else (terms @ weights) / K

    bad = f(lo) > beta_i
    step = 1.0
    while np.any(bad):  # rounding only: walk down until the bound holds
        lo = np.where(bad, lo - step * np.maximum(1.0, np.abs(lo)) * 1e-9, lo)
        step *= 10
        if step > 1e12:
            raise NumericalError("conditional composition: no tail-bound bracket")
        bad = f(lo) > beta_i
    return _bisect_tail(f, beta_i, lo, hi)  # in lockstep over the array of brackets


def _hazards_sorted(
    H: np.ndarray, comps: np.ndarray, s: float, beta_i: float, direction: str, temperatures
) -> np.ndarray:
    """lambda_bar for the sorted components ``comps`` (0-based, >= 1), given the sorted prefix Gram ``H``."""
    if comps.size == 0:
        return np.zeros(0)
    nu, xi = _gaussian_lower_bounds(H, comps, s, direction, temperatures)
    tau = _tail_quantiles(nu, xi, beta_i, direction)
    return expit(-np.log(comps) - tau)


def _sorted_prefix(means, sigma, step, direction) -> tuple[float, np.ndarray, np.ndarray]:
    """Checked ``(sigma, order, mu)``: the slots sorted by their step-n means (ascending, stable) and their
    means over the earlier steps 1..n-1 (rows of ``mu``), for 1-based ``step`` n."""
    M = np.asarray(means, dtype=float)
    N = M.shape[1]
    n = check_positive_int("step", step)
    if n > N:
        raise DPValueError(f"step must be <= {N}, got {n}")
    s = check_positive("sigma", sigma)
    check_choice("direction", direction, ("remove", "add"))
    order = np.argsort(M[:, n - 1], kind="stable")
    return s, order, M[order, : n - 1]


def reverse_hazard_bounds(
    means: np.ndarray,
    sigma: float,
    step: int,
    beta: float,
    direction: str = "remove",
    temperatures=TEMPERATURES,
    components=None,
    reference_range: str = "theorem_d3",
) -> tuple[np.ndarray, np.ndarray]:
    """Upper bounds ``lambda_bar_i`` (sorted components i = 1..b, 0-based array) at 1-based ``step``.

    ``means`` is the (b, N) array of slot means (rows = slots); ``beta`` is the significance of the
    whole step (split evenly over the b - 1 tail bounds, Theorem 4.6). Returns
    ``(lambda_bar, order)`` with ``order`` the ascending sort of the step-n means.
    ``components`` restricts the computation to some sorted indices (others get the trivial bound 1).

    ``reference_range`` (remove direction only): ``"theorem_d3"`` (default, the valid bound) takes the
    reference law of Theorem D.3, ``R = (1/b) sum_{k=1}^{b} N(mu_k, s^2 I)`` (the P-marginal of the first
    n-1 outputs), in Eq. 31. ``"algorithm4"`` evaluates the range printed in Algorithm 4 of
    {cite}`schuchardt_kalinin`, ``(1/b) sum_{k=i}^{b} Phi((tau - nu_k)/xi_k)``, which drops the terms
    k < i of the law of total probability: a measure of mass (b - i + 1)/b, so its tau is not a certified
    tail bound. It exists only to show how far the printed range is from Eq. 31 (errata of the chapter).
    """
    s, order, mu = _sorted_prefix(means, sigma, step, direction)
    beta = check_probability("beta", beta, allow_one=False)
    check_choice("reference_range", reference_range, ("theorem_d3", "algorithm4"))
    if reference_range == "algorithm4" and direction != "remove":
        raise DPValueError("reference_range='algorithm4' applies to the remove direction only")
    b = mu.shape[0]
    lam = np.ones(b)
    if b == 1:
        return lam, order
    comps = (
        np.arange(1, b)
        if components is None
        else np.array(sorted({int(c) for c in components if c >= 1}), dtype=np.int64)
    )
    H = mu @ mu.T
    if reference_range == "theorem_d3":
        lam[comps] = _hazards_sorted(H, comps, s, beta / (b - 1), direction, temperatures)
        return lam, order
    if comps.size:
        nu, xi = _gaussian_lower_bounds(H, comps, s, direction, temperatures)
        for r, c in enumerate(comps):  # (1/b) sum over the reference components k = i..b only
            tau = _tail_quantiles(
                nu[:, r : r + 1, c:], xi[:, r : r + 1], beta / (b - 1), "remove", weights=np.ones(b - c), K=b
            )
            lam[c] = float(expit(-np.log(c) - tau[0]))
    return lam, order


def option2_hazard_bound(
    means: np.ndarray,
    sigma: float,
    step: int,
    beta: float,
    component: int | None = None,
    shared_temperatures=TEMPERATURES,
    option2_temperatures=TEMPERATURES[1:],
) -> float:
    r"""``lambda_bar_i`` (remove, Theorem D.3 / Eq. 31) with Option 2 of Appendix F added to the psi families.

    Appendix F of {cite}`schuchardt_kalinin` lets the variational distribution depend on the reference
    component ``k`` of ``R = (1/b) sum_k N(mu_k, s^2 I)``. **Option 2** takes
    ``psi^(k)_j = softmax_{j<i}(-|mu_k - mu_j|^2 / t)``, which raises the Gaussian mean of Lemma D.2 at
    ``rho_k = mu_k``, ``nu_k = (|mu_k - mu_i|^2 - E_psi |mu_k - mu_j|^2)/(2 s^2) - KL(psi || uniform)`` (at
    ``t = 2 s^2`` it is the exact maximiser, by the Gibbs variational principle); **Options 1/3** (``shared_temperatures``, the book's default family,
    :func:`reverse_hazard_bounds`) use one psi for every k. For every candidate psi^(k) (Lemma D.2):

        nu_k = mu_k^T (E_psi mu_j - mu_i)/s^2 + (|mu_i|^2 - E_psi |mu_j|^2)/(2 s^2) - KL(psi || uniform),
        xi_k = |mu_i - E_psi mu_j| / s,

    and Eq. 31 bounds ``P_R[L_i <= tau] <= (1/b) sum_k min_psi Phi((tau - nu_k)/xi_k)`` (each psi^(k) gives a
    valid bound of the k-th term, so the minimum over a family fixed before the data does too). The
    returned value is ``sigmoid(-log(i) - tau)`` for the largest tau (bisection) with that bound at most
    ``beta / (b - 1)`` (0-based sorted index ``i``, default ``b - 1``; ``beta`` is the step's significance
    as in :func:`reverse_hazard_bounds`). With ``option2_temperatures=()`` it is the value of
    :func:`reverse_hazard_bounds` for ``shared_temperatures`` (up to summation order).
    """
    s, order, mu = _sorted_prefix(means, sigma, step, "remove")
    beta = check_probability("beta", beta, allow_one=False)
    b = mu.shape[0]
    if b == 1:
        return 1.0
    i = b - 1 if component is None else int(component)
    if not 1 <= i <= b - 1:
        raise DPValueError(f"component must be a sorted index in 1..{b - 1}, got {component!r}")
    shared = tuple(float(t) for t in shared_temperatures)
    opt2 = tuple(float(t) for t in option2_temperatures)
    if not shared and not opt2:
        raise DPValueError("give at least one temperature (shared_temperatures or option2_temperatures)")
    if any(not t > 0 for t in shared + opt2):
        raise DPValueError("temperatures must be > 0 (inf allowed)")
    H = mu @ mu.T
    sq = np.diag(H)
    s2 = s * s
    lw_list = []  # log-weights over j < i, shape (b, i) per candidate (one row per reference k)
    d2_i = np.maximum(sq[i] - 2 * H[i, :i] + sq[:i], 0.0)
    for t in shared:
        lw = np.zeros(i) if math.isinf(t) else -d2_i / t
        lw_list.append(np.broadcast_to(lw, (b, i)))
    d2_k = np.maximum(sq[:, None] - 2 * H[:, :i] + sq[None, :i], 0.0)  # |mu_k - mu_j|^2, (b, i)
    for t in opt2:
        lw_list.append(np.zeros((b, i)) if math.isinf(t) else -d2_k / t)
    psi = np.stack([np.exp(lw - logsumexp(lw, axis=1, keepdims=True)) for lw in lw_list])  # (P, b, i)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.sum(np.where(psi > 0, psi * np.log(psi * i), 0.0), axis=2)  # (P, b)
    e_dot_k = np.einsum("pkj,jk->pk", psi, H[:i, :])  # <E_psi mu_j, mu_k>
    e_dot_i = psi @ H[:i, i]  # <E_psi mu_j, mu_i>
    e_sq = psi @ sq[:i]
    e_norm2 = np.einsum("pkj,jl,pkl->pk", psi, H[:i, :i], psi)  # |E_psi mu_j|^2
    nu = (e_dot_k - H[i][None, :]) / s2 + (sq[i] - e_sq) / (2 * s2) - kl  # (P, b)
    xi = np.sqrt(np.maximum(sq[i] - 2 * e_dot_i + e_norm2, 0.0)) / s
    beta_i = beta / (b - 1)
    margin = 1e-12 * np.maximum(1.0, np.abs(nu))

    def quant(p):
        return np.where(xi > 0, nu + xi * ndtri(p), nu - margin)

    def f(tau):
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(xi > 0, (tau - nu) / np.where(xi > 0, xi, 1.0), np.where(tau >= nu, np.inf, -np.inf))
        return float(np.mean(np.min(ndtr(z), axis=0)))

    lo = float(np.min(np.max(quant(beta_i), axis=0)))
    hi = max(float(np.min(np.max(quant(min(b * beta_i, 1 - 1e-12)), axis=0))), lo)
    step_ = 1e-9
    while f(lo) > beta_i:  # rounding only
        lo -= step_ * max(1.0, abs(lo))
        step_ *= 10
        if step_ > 1e12:
            raise NumericalError("option 2: no tail-bound bracket")
    lo = _bisect_tail(f, beta_i, lo, hi)
    return float(expit(-math.log(i) - lo))


def sample_ternary_loss(
    means: np.ndarray,
    sigma: float,
    step: int,
    samples: int,
    direction: str = "remove",
    component: int | None = None,
    rng: np.random.Generator | int | None = None,
    chunk: int = 20_000,
) -> np.ndarray:
    r"""Samples of the ternary privacy loss ``L_i(x)``, ``x ~ R``, whose lower tail gives ``lambda_bar_i``.

    At 1-based ``step`` n, sort the slots by their step-n means (ascending, stable, as in
    :func:`reverse_hazard_bounds`) and let ``mu_j`` be sorted slot j's means over steps 1..n-1. For the
    0-based sorted index ``i = component`` (default ``b - 1``, the largest step-n mean; ``i >= 1``),

        L_i(x) = log[(1/i) sum_{j<i} N(x | mu_j, s^2 I)] - log N(x | mu_i, s^2 I)
               = logsumexp_{j<i} a_j(x) - log i - a_i(x),   a_j(x) = (<x, mu_j> - |mu_j|^2 / 2) / s^2,

    (Lemma 4.5, the paper's ``L_{P~,Q~,R~}`` of section 4.1 and Figure 5; 0-based i here is the paper's
    i - 1). Reference law R: "remove" (Theorem D.3) the P-marginal of the first n-1 steps,
    ``x = mu_k + s z`` with k uniform over all b slots; "add" (Theorem 4.8) ``x = s z``; ``z ~ N(0, I)``.
    Only the inner products enter, so with the prefix Gram ``H = mu mu^T`` the sampler draws
    ``g = (<z, mu_j>)_j ~ N(0, H)`` (from the eigendecomposition of H) and sets
    ``<x, mu_j> = H_kj + s g_j`` (remove) or ``s g_j`` (add): exact, with cost ``O(samples * b^2 + b^3)``
    rather than ``O(samples * b * n)`` from x itself. At step 1 the prefix is empty, every ``a_j = 0`` and ``L_i = 0``.

    Returns an array of ``samples`` floats. ``rng`` is a Generator or a seed.
    """
    s, order, mu = _sorted_prefix(means, sigma, step, direction)
    b = mu.shape[0]
    S = check_positive_int("samples", samples)
    i = b - 1 if component is None else int(component)
    if not 1 <= i <= b - 1:
        raise DPValueError(f"component must be a sorted index in 1..{b - 1}, got {component!r}")
    chunk = check_positive_int("chunk", chunk)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    H = mu @ mu.T  # (b, b) prefix Gram of the sorted slots
    lam, V = np.linalg.eigh(H[: i + 1, : i + 1])
    root = V * np.sqrt(np.maximum(lam, 0.0))  # root @ root.T = H[:i+1, :i+1]
    half = 0.5 * np.diag(H)[: i + 1]
    out = np.empty(S)
    for start in range(0, S, chunk):
        m = min(chunk, S - start)
        g = gen.standard_normal((m, i + 1)) @ root.T  # <z, mu_j>, j = 0..i
        if direction == "remove":
            k = gen.integers(0, b, size=m)
            dots = H[k, : i + 1] + s * g
        else:
            dots = s * g
        a = (dots - half) / (s * s)
        out[start : start + m] = logsumexp(a[:, :i], axis=1) - math.log(i) - a[:, i]
    return out


def mixture_weights(lam: np.ndarray) -> np.ndarray:
    """Corollary 4.4: ``p_i = lambda_bar_i prod_{j > i} (1 - lambda_bar_j)`` (sums to 1 as lambda_bar_1 = 1)."""
    lam = np.asarray(lam, dtype=float)
    tail = np.concatenate([np.cumprod((1 - lam)[::-1])[::-1][1:], [1.0]])
    return lam * tail


def _merge(vals: np.ndarray, lam: np.ndarray, low: int) -> tuple[np.ndarray, np.ndarray]:
    """Weights of Cor. 4.4 with the lowest tie group (sorted indices < ``low``) taking the remainder.

    The weights of components above the lowest group depend only on their own lambda_bar's, and the lowest
    group shares one mean, so its members' bounds are never needed. Equal means are merged.
    """
    lam = lam.copy()
    lam[1:low] = 0.0
    w = mixture_weights(lam)
    w[0] = max(0.0, 1.0 - float(w[1:].sum()))
    uniq, inv = np.unique(vals, return_inverse=True)
    ww = np.bincount(inv, weights=w, minlength=uniq.size)
    keep = ww > 0
    return uniq[keep], ww[keep] / ww[keep].sum()


def _steps(N: int, progress: bool, desc: str):
    """Steps 1..N, under the package's progress bar when ``progress`` (:mod:`dputils.progress`)."""
    it = range(1, N + 1)
    return progress_bar(it, desc=desc, leave=False) if progress else it


def _per_step_hazards_direct(
    M: np.ndarray,
    s: float,
    beta_step: Sequence[float],
    direction: str,
    temperatures,
    progress: bool = False,
    desc: str = "",
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """The straightforward form of :func:`_per_step_hazards` (the reference the tests compare it with).

    The dense Gram matrix of the prefix means is updated incrementally and permuted into sorted order at
    every step, and the tail bounds run over all b reference components: ``O(T c_n b^2)`` per step.
    """
    b, N = M.shape
    H = np.zeros((b, b))
    out = []
    it = _steps(N, progress, desc)
    for n in it:
        if n > 1:
            v = M[:, n - 2]
            H += np.outer(v, v)
        col = M[:, n - 1]
        order = np.argsort(col, kind="stable")
        vals = col[order]
        low = int(np.searchsorted(vals, vals[0], side="right"))  # size of the lowest tie group
        lam = np.ones(b)
        comps = np.arange(max(low, 1), b)
        if comps.size and b > 1:
            Hs = H[np.ix_(order, order)]
            lam[comps] = _hazards_sorted(Hs, comps, s, beta_step[n - 1] / (b - 1), direction, temperatures)
        out.append((vals, lam, order, low))
    return out


# ------------------------------------------------------------------------------- per-step hazards, fast path
class _PrefixGram:
    """The prefix Gram matrix ``H = sum_{t < n-1} M[:, t] M[:, t]^T`` (original slot order), updated step by step.

    Sparse strategies (identity, banded C over one or more epochs) keep only the entries of the final Gram's
    pattern (``M >= 0``, so no entry cancels and every prefix Gram has that pattern or a subset), in CSR
    order; step t adds ``v_a v_c`` to the entries ``(a, c)`` with ``v_a, v_c != 0``, in the same order as the
    dense update ``H += outer(v, v)`` (which only adds exact zeros elsewhere), so the stored values are
    bitwise those of the dense matrix. Dense strategies keep the dense matrix.
    """

    def __init__(self, M: np.ndarray) -> None:
        b, N = M.shape
        self.b = b
        self.M = M
        self.sq = np.zeros(b)  # diag(H)
        self.supp = [np.flatnonzero(M[:, t]) for t in range(N)]
        pairs = sum(int(s.size) ** 2 for s in self.supp)
        self.sparse = pairs <= b * b // 8
        if self.sparse:
            codes = [(s[:, None] * b + s[None, :]).ravel() for s in self.supp]
            uniq = np.unique(np.concatenate(codes)) if codes else np.zeros(0, dtype=np.int64)
            rows = uniq // b
            self.indices = (uniq % b).astype(np.int32)
            self.indptr = np.searchsorted(rows, np.arange(b + 1)).astype(np.int32)
            self.data = np.zeros(uniq.size)
            self.pos = [np.searchsorted(uniq, c) for c in codes]
        else:
            self.H = np.zeros((b, b))

    def add_step(self, t: int) -> None:
        """Add step t's (0-based) outer product."""
        s = self.supp[t]
        if s.size == 0:
            return
        v = self.M[s, t]
        if self.sparse:
            self.data[self.pos[t]] += np.outer(v, v).ravel()
        else:
            self.H[np.ix_(s, s)] += np.outer(v, v)
        self.sq[s] += v * v

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """Dense rows ``H[idx, :]`` (original column order)."""
        if not self.sparse:
            return self.H[idx]
        out = np.zeros((idx.size, self.b))
        for a, r in enumerate(idx):
            lo, hi = self.indptr[r], self.indptr[r + 1]
            out[a, self.indices[lo:hi]] = self.data[lo:hi]
        return out

    def times(self, X: np.ndarray) -> np.ndarray:
        """``X @ H`` for a (m, b) array X (H symmetric)."""
        if not self.sparse:
            return X @ self.H
        from scipy import sparse

        Hc = sparse.csr_matrix((self.data, self.indices, self.indptr), shape=(self.b, self.b))
        return np.asarray((Hc @ X.T).T)


def _distinct_columns(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct columns of X (exact equality) and their multiplicities.

    Columns are grouped by a fixed random linear combination (equal columns give equal keys, bitwise) and
    every group is then checked entry by entry against its representative; should two different columns
    share a key, the exact (slower) ``np.unique(axis=1)`` is used instead.
    """
    key = _column_key_weights(X.shape[0]) @ X
    _, first, inv, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    cols = X[:, first]
    if not np.array_equal(cols[:, inv], X):
        cols, counts = np.unique(X, axis=1, return_counts=True)
    return cols, counts


def _column_key_weights(m: int, _cache: dict = {}) -> np.ndarray:  # noqa: B006 (deliberate cache)
    if m not in _cache:
        _cache[m] = np.random.default_rng(20261124).uniform(0.5, 1.5, size=m)
    return _cache[m]


def _softmax_rows(lw: np.ndarray) -> np.ndarray:
    """``exp(lw - logsumexp(lw))`` along the last axis (rows with at least one finite entry)."""
    m = np.max(lw, axis=-1, keepdims=True)
    lse = m + np.log(np.sum(np.exp(lw - m), axis=-1, keepdims=True))
    return np.exp(lw - lse)


def _hazards_fast(
    G: _PrefixGram, order: np.ndarray, comps: np.ndarray, s: float, beta_i: float, direction: str, temperatures
) -> np.ndarray:
    """:func:`_hazards_sorted` for the sorted components ``comps`` without forming the permuted b x b Gram.

    The same quantities as :func:`_gaussian_lower_bounds` (in sorted coordinates) are computed from the
    rows ``H[order[comps]]``, ``diag(H)`` and one product ``psi @ H`` with the (sparse) prefix Gram, and the
    tail quantiles of :func:`_tail_quantiles` run over the *distinct* reference components only: reference
    components whose ``nu_k`` agree for every psi and every component give identical terms of the mean in
    Eq. 31, so they are merged with their multiplicity as weight (the mean is unchanged; only its
    floating-point summation order differs).
    """
    b = order.size
    n_i = comps.size
    sq = G.sq[order]  # |mu_j|^2, sorted
    rows = G.rows(order[comps])[:, order]  # H[i, :], sorted, (n_i, b)
    sq_i = sq[comps]
    d2 = np.maximum(sq_i[:, None] - 2 * rows + sq[None, :], 0.0)
    mask = np.arange(b)[None, :] < comps[:, None]
    T = len(temperatures)
    psi = np.empty((T, n_i, b))
    for a, t in enumerate(temperatures):
        if math.isinf(t):
            psi[a] = mask / comps[:, None].astype(float)
        else:
            psi[a] = _softmax_rows(np.where(mask, -d2 / t, -np.inf))
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.sum(np.where(psi > 0, psi * np.log(psi * comps[None, :, None]), 0.0), axis=2)
    psi_o = np.empty_like(psi)
    psi_o[..., order] = psi  # original slot order
    Hpsi = G.times(psi_o.reshape(T * n_i, b)).reshape(T, n_i, b)[..., order]  # sorted again
    s2 = s * s
    e_sq = psi @ sq
    cross = Hpsi[:, np.arange(n_i), comps]
    dist2 = np.maximum(sq_i[None, :] - 2 * cross + np.sum(Hpsi * psi, axis=2), 0.0)
    xi = np.sqrt(dist2) / s
    base = (sq_i[None, :] - e_sq) / (2 * s2) - kl
    if direction == "remove":
        nu = (Hpsi - rows[None]) / s2 + base[..., None]
        cols, counts = _distinct_columns(nu.reshape(T * n_i, b))
        nu = cols.reshape(T, n_i, -1)
        weights = counts.astype(float)
    else:
        nu = base[..., None]
        weights = None
    tau = _tail_quantiles(nu, xi, beta_i, direction, weights=weights, K=b if direction == "remove" else 1)
    return expit(-np.log(comps) - tau)


def _per_step_hazards(
    M: np.ndarray,
    s: float,
    beta_step: Sequence[float],
    direction: str,
    temperatures,
    progress: bool = False,
    desc: str = "",
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """For each step n: (sorted step-n means, lambda_bar (sorted), order, size of the lowest tie group).

    The same bounds as :func:`_per_step_hazards_direct` (Algorithm 4 with the Lemma D.2 bounds), computed
    without the b x b work per step: the prefix Gram is kept sparse for sparse strategies
    (:class:`_PrefixGram`), only the rows of the components that need a bound are formed, and identical
    reference components are merged before the bisection (:func:`_hazards_fast`). The values are those of
    the direct path up to floating-point summation order (the tests compare the two at 1e-9). Per step
    the cost is ``O(T c_n (b + nnz(H)) + b log b)`` instead of ``O(T c_n b^2)``.

    Why the result is the same certified bound. (i) The sparse Gram stores exactly the entries of the dense
    ``H`` (``M >= 0``: no cancellation, so no entry outside the final pattern is ever non-zero; the
    updates add the same products in the same order). (ii) ``d2``, psi, ``KL(psi || uniform)``,
    ``E_psi |mu_j|^2``, ``<E_psi mu_j, mu_k>`` and ``xi`` are the formulas of Lemma D.2 evaluated in sorted
    coordinates from ``H[order[i], order]``, ``diag(H)[order]`` and ``(psi permuted back) @ H`` permuted
    again, which equals ``psi @ H[order][:, order]``. (iii) Eq. 31 bounds ``P[L_i <= tau]`` by
    ``f(tau) = (1/b) sum_k min_psi Phi((tau - nu_{psi,k}) / xi_psi)``; reference components ``k, k'`` with
    ``nu_{psi,k} = nu_{psi,k'}`` for every psi and every component (exact floating-point equality) add the
    same term, so ``f(tau) = (1/b) sum_u c_u min_psi Phi(...)`` over the distinct columns ``u`` with
    multiplicities ``c_u``, and the bisection bracket (a minimum over k of per-k quantiles) is unchanged by
    dropping repeated columns. The bisection then keeps ``f(lo) <= beta_i`` exactly as before, so every
    ``lambda_bar_i = sigmoid(-log(i-1) - tau_i)`` is the bound of Lemma 4.3 / Cor. 4.4 at significance
    ``beta_i``, and Theorem 4.6 applies unchanged. Only the floating-point summation order differs.
    """
    b, N = M.shape
    G = _PrefixGram(M)
    out = []
    it = _steps(N, progress, desc)
    for n in it:
        if n > 1:
            G.add_step(n - 2)
        col = M[:, n - 1]
        order = np.argsort(col, kind="stable")
        vals = col[order]
        low = int(np.searchsorted(vals, vals[0], side="right"))  # size of the lowest tie group
        lam = np.ones(b)
        comps = np.arange(max(low, 1), b)
        if comps.size and b > 1:
            lam[comps] = _hazards_fast(G, order, comps, s, beta_step[n - 1] / (b - 1), direction, temperatures)
        out.append((vals, lam, order, low))
    return out


def step_pairs(
    means: np.ndarray,
    sigma: float,
    beta_step: float,
    direction: str,
    temperatures=TEMPERATURES,
    allocation: str = "union",
    delta_e: float | None = None,
    epochs: int = 1,
    progress: bool = False,
    reference: bool = False,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-step scalar mixtures ``(sensitivities, weights)`` for steps 1..N (Algorithm 4 + Cor. 4.4).

    ``allocation="union"``: significance ``beta_step`` per step (``delta_E / N`` for the union bound).
    ``allocation="hybrid"`` (unproven, see the module docstring): needs ``delta_e`` and ``epochs``; epoch 1
    uses ``delta_e / N`` per step, later epochs ``delta_e / k`` per step with the within-epoch maximum of
    each sorted component's bound. Components sharing the smallest step-n mean are merged (their bounds
    are not needed); equal means are merged and zero weights dropped. ``reference=True`` computes the bounds
    by the straightforward dense path (:func:`_per_step_hazards_direct`, slow; the tests' reference).
    """
    M = np.asarray(means, dtype=float)
    b, N = M.shape
    s = check_positive("sigma", sigma)
    check_choice("direction", direction, ("remove", "add"))
    check_choice("allocation", allocation, ALLOCATIONS)
    if allocation == "union":
        beta = np.full(N, check_probability("beta_step", beta_step, allow_one=False))
    else:
        if delta_e is None:
            raise DPValueError("delta_e is required for the hybrid allocation")
        k = check_positive_int("epochs", epochs)
        if N % k:
            raise DPValueError(f"epochs must divide the number of steps {N}, got {k}")
        de = check_probability("delta_e", delta_e, allow_one=False)
        beta = np.where(np.arange(N) < N // k, de / N, de / k)
    hazards = _per_step_hazards_direct if reference else _per_step_hazards
    per = hazards(M, s, beta, direction, temperatures, progress, f"condcomp {direction}")
    if allocation == "hybrid":
        bb = N // int(epochs)
        for e in range(1, int(epochs)):
            block = per[e * bb : (e + 1) * bb]
            # max over the epoch's steps of each sorted component's bound; the lowest group keeps its
            # placeholder (it is never used), components above it take the maximum of the computed ones
            lam_max = np.max([np.where(np.arange(b) >= max(low, 1), lam, 0.0) for _, lam, _, low in block], axis=0)
            per[e * bb : (e + 1) * bb] = [
                (vals, np.maximum(lam_max, np.where(np.arange(b) >= max(low, 1), 0.0, lam)), order, low)
                for vals, lam, order, low in block
            ]
    return [_merge(vals, lam, low) for vals, lam, _, low in per]


# ---------------------------------------------------------------------------------------------- accountant
class _MeansKey:
    """The slot means ``M`` with their content key: hashes and compares by the key only, so that
    :func:`_cached_step_pairs` caches on the content of ``M`` (and carries it and the progress flag along)."""

    __slots__ = ("key", "M", "progress")

    def __init__(self, key: tuple, M: np.ndarray, progress: bool) -> None:
        self.key, self.M, self.progress = key, M, progress

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _MeansKey) and other.key == self.key


@functools.lru_cache(maxsize=16)
def _cached_step_pairs(
    means: _MeansKey, sigma: float, de: float, direction: str, allocation: str, temperatures: tuple, epochs: int
) -> list:
    """:func:`step_pairs` of one chain, the 16 most recent (sigma, delta_E, direction, ...) kept."""
    M = means.M
    return step_pairs(
        M,
        sigma,
        de / M.shape[1],
        direction,
        temperatures,
        allocation,
        delta_e=de,
        epochs=epochs,
        progress=means.progress,
    )


def _components_per_step(M: np.ndarray) -> np.ndarray:
    """Number of tail bounds each step needs: the components above the lowest tie group of its means."""
    srt = np.sort(M, axis=0)
    low = (srt == srt[0:1, :]).sum(axis=0)  # size of the lowest tie group per step
    return np.maximum(M.shape[0] - np.maximum(low, 1), 0)


def check_plan(M: np.ndarray, n_temperatures: int = len(TEMPERATURES)) -> None:
    """Refuse up front (``DPValueError`` naming the parameter) the per-step tail bounds this machine cannot do.

    At step n with ``c_n`` tail bounds (components above the lowest tie group: 1 for DP-SGD, up to the bands
    for banded C, b - 1 for dense C), the bounds hold a few ``(temperatures, c_n, b)`` arrays, multiply them
    by the prefix Gram matrix (sparse for sparse strategies, b x b otherwise) and (remove direction) bisect
    over them with :data:`_BISECTION_STEPS` normal-cdf evaluations per entry (counted before identical
    reference components are merged, so an over-estimate); the b x N means and the per-step mixtures are kept.
    """
    b, N = M.shape
    T = max(int(n_temperatures), 1)
    comps = _components_per_step(M).astype(float)
    c_max = float(comps.max()) if comps.size else 0.0
    need = 8.0 * (3 * b * N + 4 * b * b + 12 * T * c_max * b + 4 * N * b)
    check_memory(
        "batches",
        need,
        f"the conditional-composition tail bounds over b={b} slots and N={N} steps",
        hint="use fewer batches",
    )
    pairs = float(np.sum((M != 0).sum(axis=0).astype(float) ** 2))  # entries the prefix Gram updates touch
    if pairs <= b * b // 8:  # sparse prefix Gram (see _PrefixGram): rows, psi and one sparse product per step
        per_step = 2 * (4.0 * b * math.log2(b + 1) + 20 * T * comps * (b + min(pairs, b * b)))
    else:
        per_step = 2 * (4.0 * b * b + 2 * T * comps * b * b)
    per_step = per_step + T * comps * b * (_BISECTION_STEPS + 4) * 10  # bisection, before merging references
    check_work(
        "batches",
        float(per_step.sum()),
        "operations",
        hint=f"tail bounds for b={b} slots over N={N} steps; use fewer batches or epochs",
    )


def _check_pld_plan(means: np.ndarray, sigma: float, h: float) -> None:
    """Estimated memory of composing the N per-step mixtures with the PLD accountant at grid width ``h``.

    One step's privacy loss spans about ``+-(s^2/(2 sigma^2) + 8.3 s/sigma)`` (tail 1e-15) for the largest
    sensitivity ``s``; each of the N steps keeps a few arrays of that many grid points per direction, and
    the composed window is at most the PLD accountant's own cap of 2^27 points.
    """
    N = means.shape[1]
    smax = float(np.max(means)) if means.size else 0.0
    per_step = 2.0 * (smax * smax / (2 * sigma * sigma) + 8.3 * smax / sigma) / h + 3
    window = min(N * per_step, 2.0**27)
    need = 8.0 * (2 * 5 * N * per_step + 4 * window)  # two directions
    check_memory(
        "discretization",
        need,
        f"the PLD composition of {N} steps at sigma={sigma:g}",
        hint="use a coarser discretization (or this sigma is too small)",
    )


def _means_key(M: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(M).tobytes() + str(M.shape).encode()).hexdigest()


class ConditionalCompositionAccountant(Accountant):
    r"""Conditional-composition accountant of Schuchardt & Kalinin (section 4, Appendices D-F); an **upper bound**.

    Accounts for **one run** of a :class:`~dputils.matrix.mechanism.BallsInBinsMatrixMechanism` (one ledger
    entry with count 1: the N steps of the run are what it composes, so several epochs go into the strategy).
    ``delta(eps) = max(delta_remove(eps), delta_add(eps)) + delta_E`` where ``delta_remove`` is the
    pessimistic PLD profile of the N per-step remove pairs (Algorithm 4 weights for the remove relation,
    Theorem D.3) and ``delta_add`` that of the add pairs (Theorem 4.8 weights, a separate chain), and
    ``delta_E`` the total failure probability of the posterior bounds (Lemma 4.1, Theorem 4.6). With
    ``direction="remove"`` or ``"add"`` only that chain is composed (Lemma 4.1 holds per direction).

    **How delta_E is chosen.**

    * ``get_epsilon(delta)``: ``delta_E = delta_e`` if given, else ``delta_e_fraction * delta`` (the paper's
      ``delta_E = delta / 2``, App. B.2); the answer is the smallest eps with
      ``max(delta_remove, delta_add)(eps) <= delta - delta_E``.
    * ``get_delta(eps)`` with an explicit ``delta_e``: ``delta_PLD(eps) + delta_e``.
    * ``get_delta(eps)`` without one: the fraction rule is made self-consistent, i.e. the answer is (up to
      the fixed-point iteration's 1% tolerance on delta_E) the smallest delta with
      ``delta_PLD(eps; delta_E = f delta) + f delta <= delta``, so that ``get_delta(eps) <= delta`` when
      and only when ``get_epsilon(delta) <= eps``. Every iterate evaluates a valid bound
      ``delta_PLD + delta_E``; the converged one is returned (the smallest one seen if the iteration does
      not converge, ``details["converged"]`` says which). It costs a few full evaluations; calibration
      passes ``delta_e`` explicitly instead. Note that the fraction rule is not the best choice of
      delta_E for a given eps when delta is large (at delta ~ 1e-3 a delta_E of 1e-6 gives a smaller sum):
      it is the paper's rule, kept for consistency with ``get_epsilon``.

    Args:
        delta_e: total failure probability of the posterior bounds, or None for the fraction rule.
        delta_e_fraction: ``f`` in ``delta_E = f delta`` (default 0.5 as in the paper), in (0, 1).
        allocation: ``"union"`` (default, proved) or ``"hybrid"`` (the paper's choice, stated without proof).
        temperatures: temperatures of the Option-3 variational families (inf = uniform).
        discretization: grid width of the PLD accountant's privacy-loss axis (default 2e-3: for DP-SGD
            N = 100 delta moves by 0.14% against 1e-3, i.e. sigma by about 0.01%; the bound is valid at any width).
        progress: show a tqdm bar over the steps (honours ``TQDM_DISABLE``).
        direction: ``"both"`` (default: the worse chain), ``"remove"`` or ``"add"``.

    Example: ``ConditionalCompositionAccountant(delta_e=5e-6).compose(BallsInBinsMatrixMechanism(strategy,
    sigma)).get_epsilon(1e-5)``.
    """

    name = "matrix-condcomp"

    def __init__(
        self,
        delta_e: float | None = None,
        delta_e_fraction: float = 0.5,
        allocation: str = "union",
        temperatures=TEMPERATURES,
        discretization: float = 2e-3,
        progress: bool = True,
        direction: str = "both",
    ) -> None:
        super().__init__(direction)
        self.delta_e = None if delta_e is None else check_probability("delta_e", delta_e, allow_one=False)
        self.fraction = check_probability("delta_e_fraction", delta_e_fraction, allow_one=False)
        self.allocation = check_choice("allocation", allocation, ALLOCATIONS)
        temps = tuple(float(t) for t in temperatures)
        if not temps or any(not t > 0 for t in temps):
            raise DPValueError(f"temperatures must be a non-empty list of numbers > 0 (inf allowed), got {temps}")
        self.temperatures = temps
        self.h = check_positive("discretization", discretization)
        self.progress = bool(progress)
        self._invalidate()

    def compose(self, mechanism: Any, count: int = 1) -> ConditionalCompositionAccountant:
        """Set the one matrix-mechanism run to account for (``count`` must be 1, the ledger empty)."""
        check_one_run(self.name, self.ledger, count)
        super().compose(mechanism, count)
        return self

    def _check_supported(self, mechanism: Any) -> None:
        m = check_matrix_mechanism(self.name, mechanism)
        M = np.asarray(m.strategy.means, dtype=float)
        if np.any(M < 0):
            raise DPValueError("strategy: slot means must be >= 0 (Lemma 2.8 needs C >= 0)")
        check_plan(M, len(self.temperatures))

    def _invalidate(self) -> None:
        self._chains: dict[float, dict[str, Any]] = {}
        self._means: np.ndarray | None = None
        self._key: str | None = None

    @property
    def mechanism(self) -> BallsInBinsMatrixMechanism:
        """The composed matrix-mechanism run."""
        self._require_ledger()
        return self.ledger[0][0]

    @property
    def strategy(self) -> Strategy:
        return self.mechanism.strategy

    @property
    def sigma(self) -> float:
        return self.mechanism.sigma

    @property
    def means(self) -> np.ndarray:
        """The b x N slot means of the composed run's strategy."""
        if self._means is None:
            self._means = np.asarray(self.strategy.means, dtype=float)
            self._key = _means_key(self._means)
        return self._means

    # per-step pairs ----------------------------------------------------------------------------
    def step_pairs(self, delta_e: float, direction: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """The per-step mixtures ``(sensitivities, weights)`` of one chain (cached per sigma and delta_E)."""
        de = check_probability("delta_e", delta_e, allow_one=False)
        check_choice("direction", direction, ("remove", "add"))
        M = self.means
        return _cached_step_pairs(
            _MeansKey(self._key, M, self.progress),
            self.sigma,
            de,
            direction,
            self.allocation,
            self.temperatures,
            self.strategy.epochs,
        )

    def _chain(self, delta_e: float) -> dict[str, Any]:
        """The two composed PLD accountants (remove chain, add chain) for one delta_E."""
        if delta_e not in self._chains:
            _check_pld_plan(self.means, self.sigma, self.h)

            out = {}
            for d in self.directions:
                acc = PLDAccountant(direction=d, discretization=self.h, tail=_PLD_TAIL)
                steps = 0
                for sens, w in self.step_pairs(delta_e, d):
                    if sens[-1] <= 0:  # no slot participates at this step: P_n = Q_n, no privacy loss
                        continue
                    acc.compose(GaussianMixtureMechanism(self.sigma, sens, w), 1)
                    steps += 1
                if steps == 0:
                    raise DPValueError("strategy: every slot mean is zero, nothing to account")
                out[d] = acc
            self._chains[delta_e] = out
        return self._chains[delta_e]

    def _details(self, delta_e: float, worst: str, pld_lower: float, extra: dict | None = None) -> dict[str, Any]:
        d = {
            "delta_e": delta_e,
            "direction": worst,
            "allocation": self.allocation,
            "allocation_proved": self.allocation == "union",
            "sigma": self.sigma,
            "matrix": self.strategy.name,
            "epochs": self.strategy.epochs,
            "batches": self.strategy.batches,
            "discretization": self.h,
            "pld_lower": pld_lower,
        }
        if self.allocation == "hybrid":
            d["caveat"] = "hybrid failure allocation is stated without proof in the paper (App. E)"
        if extra:
            d.update(extra)
        return d

    def delta_pld(self, epsilon: float, delta_e: float) -> tuple[float, float, str]:
        """``(upper, lower, worse direction)`` of ``max(delta_remove, delta_add)(eps)`` at this delta_E.

        ``upper`` is the PLD accountant's pessimistic value; ``lower`` the low end of its bracket for the
        same per-step pairs (a measure of the discretisation error, not a lower bound on the mechanism).
        """
        eps = check_epsilon(epsilon)
        res = {d: acc.get_delta(eps) for d, acc in self._chain(delta_e).items()}
        worst = max(res, key=lambda d: float(res[d]))
        return float(res[worst]), max(float(r.lower) for r in res.values()), worst

    def get_delta(self, epsilon: float) -> AccountingResult:
        eps = check_epsilon(epsilon)
        if self.delta_e is not None:
            up, lo, worst = self.delta_pld(eps, self.delta_e)
            v = min(1.0, up + self.delta_e)
            return AccountingResult(
                v,
                None,
                v,
                "upper-bound",
                self.name,
                "delta",
                self._details(self.delta_e, worst, min(lo + self.delta_e, v)),
            )
        f = self.fraction
        de = f * 1e-5  # start from the paper's delta = 1e-5
        best = None
        for it in range(1, _FIXED_POINT_STEPS + 1):
            up, lo, worst = self.delta_pld(eps, de)
            cur = (up + de, lo + de, worst, de)  # a valid bound whatever de is
            if best is None or cur[0] < best[0]:
                best = cur
            nxt = min(max(f * up / (1 - f), 1e-30), 0.25)  # delta = delta_PLD(eps; f delta)/(1 - f)
            if abs(nxt / de - 1) <= _FIXED_POINT_RTOL:
                best, converged = cur, True
                break
            if up < 1e-12 and de < 1e-12:  # at the PLD floating-point floor: iterating only chases noise
                converged = False
                break
            de = math.sqrt(de * nxt) if it >= 3 else nxt  # damp oscillations of the decreasing map
        else:
            converged = False  # keep the smallest valid bound seen
        val, lo, worst, de = best
        v = min(1.0, val)
        return AccountingResult(
            v,
            None,
            v,
            "upper-bound",
            self.name,
            "delta",
            self._details(
                de,
                worst,
                min(lo, v),
                {"delta_e_rule": f"self-consistent, fraction {f}", "evaluations": it, "converged": converged},
            ),
        )

    def get_epsilon(self, delta: float) -> AccountingResult:
        dl = check_delta(delta)
        de = self.delta_e if self.delta_e is not None else self.fraction * dl
        if de >= dl:
            raise DPValueError(f"delta_e must be < delta, got delta_e={de!r} and delta={dl!r}")
        res = {d: acc.get_epsilon(dl - de) for d, acc in self._chain(de).items()}
        worst = max(res, key=lambda d: float(res[d]))
        e = float(res[worst])
        return AccountingResult(
            e,
            None,
            e,
            "upper-bound",
            self.name,
            "epsilon",
            self._details(de, worst, max(float(r.lower) for r in res.values())),
        )


def calibrate(
    strategy: Strategy,
    epsilon: float,
    delta: float,
    delta_e_fraction: float = 0.5,
    rel_tol: float = 1e-3,
    sigma_start: float = 1.0,
    **kwargs,
) -> float:
    """Smallest sigma (rounded up to ``rel_tol``) at which the accountant certifies (epsilon, delta).

    ``delta_E = delta_e_fraction * delta``; a thin wrapper over :func:`dputils.matrix.allocation.calibrate_sigma`
    (itself :func:`dputils.calibration.calibrate`: Brent's method on log sigma, the end of the final bracket
    that meets the target) over the accountants of ``BallsInBinsMatrixMechanism(strategy, sigma)``.
    ``kwargs`` go to :class:`ConditionalCompositionAccountant`.
    """
    dl = check_delta(delta)
    f = check_probability("delta_e_fraction", delta_e_fraction, allow_one=False)
    kwargs.setdefault("progress", False)

    def make(s: float) -> ConditionalCompositionAccountant:
        acc = ConditionalCompositionAccountant(delta_e=f * dl, **kwargs)
        return acc.compose(BallsInBinsMatrixMechanism(strategy, s))

    return calibrate_sigma(make, epsilon, dl, rel_tol=rel_tol, sigma_start=sigma_start)
