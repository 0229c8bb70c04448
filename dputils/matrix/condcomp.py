"""Per-step dominating pairs of conditional composition (section 4 of {cite}`schuchardt_kalinin`).

Step n of the balls-in-bins matrix mechanism is, conditionally on the earlier outputs, the 1-D mixture
``sum_i N(m_{i,n}, sigma^2) P(z = i | y_{1:n-1})``. Sorting the step-n means ascending and bounding the
posterior reverse hazards ``P(z = i | z <= i, y) <= lambda_bar_i`` gives fixed weights
``p_i = lambda_bar_i prod_{j > i} (1 - lambda_bar_j)`` whose mixture dominates the conditional pair
(Lemma 4.2, Lemma 4.3, Corollary 4.4) except with probability beta (Theorem 4.6).

Lemma 4.5: ``P(z = i | z <= i, y) = sigmoid(-log(i - 1) - L_i(y))`` with
``L_i(y) = log[(1/(i-1)) sum_{j<i} N(y | mu_j) / N(y | mu_i)]`` (mu_j: sorted component j's means over the
earlier steps). A high-probability **lower** bound tau_i on ``L_i`` under the reference law R gives
``lambda_bar_i = sigmoid(-log(i-1) - tau_i)``. The variational (ELBO) bound of Lemma 4.7 makes ``L_i``
bounded below by a Gaussian (Lemma D.2): for a categorical psi on ``j < i``,

    nu_k = rho_k^T (E_psi mu_j - mu_i)/s^2 + (|mu_i|^2 - E_psi |mu_j|^2)/(2 s^2) - KL(psi || uniform),
    xi   = |mu_i - E_psi mu_j| / s,

for the reference component ``N(rho_k, s^2 I)``. Remove (Theorem D.3, all b components, ``rho_k = mu_k``):
``P[L_i <= tau] <= (1/b) sum_k min_psi Phi((tau - nu_k)/xi)``, tau found by bisection; add (Theorem 4.8,
``R = N(0, s^2 I)``): ``tau = max_psi nu + xi Phi^{-1}(beta_i)``. psi ranges over Option 3 of Appendix F,
``softmax(-|mu_i - mu_j|^2 / t)`` for the paper's temperatures (t = inf is uniform, Option 1).

Only the per-step pairs are implemented here (the lambda_bar curves of Figures 4 and 6, and
:func:`step_pairs` with the union-bound allocation); the PLD composition of the N per-step pairs into an
accountant is not part of the package yet (a first try with dp_accounting took minutes per delta).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, logsumexp, ndtr, ndtri

from ..errors import DPValueError, check_choice, check_positive, check_positive_int, check_probability

#: Temperatures of Option 3 used in the paper's experiments (inf = uniform psi, Option 1).
TEMPERATURES = (math.inf, 10**-1, 10**-0.5, 1.0, 10**0.5, 10.0)


def _psis(d2: np.ndarray, temperatures) -> list[np.ndarray]:
    out = []
    for t in temperatures:
        if math.isinf(t):
            out.append(np.full(d2.size, 1.0 / d2.size))
        else:
            lw = -d2 / t
            out.append(np.exp(lw - logsumexp(lw)))
    return out


def reverse_hazard_bounds(
    means: np.ndarray,
    sigma: float,
    step: int,
    beta: float,
    direction: str = "remove",
    temperatures=TEMPERATURES,
    components=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Upper bounds ``lambda_bar_i`` (sorted components i = 1..b, 0-based array) at 1-based ``step``.

    ``means`` is the (b, N) array of slot means (rows = slots); ``beta`` is the significance of the
    whole step (split evenly over the b - 1 tail bounds, Theorem 4.6). Returns
    ``(lambda_bar, order)`` with ``order`` the ascending sort of the step-n means.
    ``components`` restricts the computation to some sorted indices (others get the trivial bound 1).
    """
    M = np.asarray(means, dtype=float)
    b, N = M.shape
    n = check_positive_int("step", step)
    if n > N:
        raise DPValueError(f"step must be <= {N}, got {n}")
    s = check_positive("sigma", sigma)
    beta = check_probability("beta", beta, allow_one=False)
    check_choice("direction", direction, ("remove", "add"))
    order = np.argsort(M[:, n - 1], kind="stable")
    mu = M[order, : n - 1]  # earlier steps, sorted by the step-n mean
    H = mu @ mu.T  # Gram of the prefix means
    sq = np.diag(H)
    lam = np.ones(b)
    if b == 1:
        return lam, order
    beta_i = beta / (b - 1)
    idx = range(1, b) if components is None else [c for c in components if c >= 1]
    for i in idx:  # 0-based sorted index; the paper's i is i + 1, with i - 1 = i predecessors
        js = np.arange(i)
        d2 = sq[i] - 2 * H[i, js] + sq[js]
        nus, xis = [], []
        for psi in _psis(d2, temperatures):
            kl = float(np.sum(psi * np.log(np.maximum(psi * i, 1e-300))))
            e_mu_dot = H[:, js] @ psi  # <mu_k, E_psi mu_j> for every k
            e_sq = float(psi @ sq[js])
            dist2 = max(sq[i] - 2 * float(psi @ H[i, js]) + float(psi @ H[np.ix_(js, js)] @ psi), 0.0)
            xi = math.sqrt(dist2) / s
            base = (sq[i] - e_sq) / (2 * s * s) - kl
            if direction == "remove":
                nu = (e_mu_dot - H[:, i]) / (s * s) + base  # one per reference component k
            else:
                nu = np.array([base])
            nus.append(nu)
            xis.append(xi)
        nus_a = np.array(nus)  # (n_psi, K)
        xis_a = np.array(xis)[:, None]

        def tail(tau: float) -> float:
            with np.errstate(divide="ignore", invalid="ignore"):
                z = np.where(xis_a > 0, (tau - nus_a) / np.where(xis_a > 0, xis_a, 1.0), np.where(tau >= nus_a, np.inf, -np.inf))
            return float(np.mean(np.min(ndtr(z), axis=0)))

        if direction == "add":
            q = ndtri(beta_i)
            taus = np.where(xis_a[:, 0] > 0, nus_a[:, 0] + xis_a[:, 0] * q, nus_a[:, 0] - 1e-12)
            tau = float(np.max(taus))
        else:
            lo, hi = -50.0, 50.0
            if tail(lo) > beta_i:
                tau = -math.inf
            else:
                for _ in range(100):
                    mid = 0.5 * (lo + hi)
                    if tail(mid) <= beta_i:
                        lo = mid
                    else:
                        hi = mid
                tau = lo
        lam[i] = 1.0 if tau == -math.inf else float(expit(-math.log(i) - tau))
    return lam, order


def mixture_weights(lam: np.ndarray) -> np.ndarray:
    """Corollary 4.4: ``p_i = lambda_bar_i prod_{j > i} (1 - lambda_bar_j)`` (sums to 1 as lambda_bar_1 = 1)."""
    lam = np.asarray(lam, dtype=float)
    tail = np.concatenate([np.cumprod((1 - lam)[::-1])[::-1][1:], [1.0]])
    return lam * tail


# ---------------------------------------------------------------------------------------------- accountant
def step_pairs(means: np.ndarray, sigma: float, beta_step: float, direction: str,
               temperatures=TEMPERATURES) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-step scalar mixtures ``(sensitivities, weights)`` for steps 1..N (Algorithm 4, union bound).

    Components sharing the smallest step-n mean are merged: their total weight is the remainder, so
    their reverse-hazard bounds are not needed (for DP-SGD only ``lambda_bar_b`` is computed).
    Equal means are merged and zero-weight entries dropped.
    """
    M = np.asarray(means, dtype=float)
    b, N = M.shape
    out = []
    for n in range(1, N + 1):
        col = np.sort(M[:, n - 1], kind="stable")
        need = [i for i in range(b) if col[i] > col[0]]
        lam, order = reverse_hazard_bounds(M, sigma, n, beta_step, direction, temperatures, components=need)
        lam = lam.copy()
        lam[[i for i in range(1, b) if i not in set(need)]] = 0.0  # placeholder: merged into the lowest group
        w = mixture_weights(lam)
        w[0] = 1.0 - w[1:].sum()
        vals = M[order, n - 1]
        uniq, inv = np.unique(vals, return_inverse=True)
        ww = np.bincount(inv, weights=w)
        keep = ww > 0
        out.append((uniq[keep], ww[keep] / ww[keep].sum()))
    return out

