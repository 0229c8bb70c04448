"""The one-shot statistic of Andrew et al. {cite}`andrew_audit`, used by {cite}`gauss_audit` for DP-FTRL.

Per canary ``i`` with canary direction ``e_{c_i}`` (a Dirac canary on coordinate ``c_i``) and released
iterates ``G_0, ..., G_{T-1}``, the statistic is the largest cosine over rounds

    s_i = max_t <e_{c_i}, G_t> / ||G_t||_2 .

The epsilon Andrew et al. report is a point estimate: fit N(mean, sd^2) (ddof = 1) to the IN and OUT
statistics and return the Gaussian-pair eps_theta_hat(delta). It carries no confidence statement and is
biased upwards at small m (the variance estimates enter the unequal-variance profile). It is an
estimate, not a bound.
"""

from __future__ import annotations

import numpy as np

from ..errors import DPValueError, check_delta
from .gauss import AuditResult, check_scores, epsilon_of_theta, fit_theta

__all__ = ["andrew_statistic", "andrew_epsilon"]


def andrew_statistic(released, canary_coords) -> np.ndarray:
    """s_i = max_t G_t[c_i] / ||G_t||_2 for released iterates ``released`` (shape (T, d)) and coordinates c_i."""
    G = np.asarray(released, dtype=float)
    if G.ndim != 2 or G.shape[0] < 1:
        raise DPValueError(f"released must be a (T, d) array with T >= 1, got shape {G.shape}")
    c = np.asarray(canary_coords)
    if c.ndim != 1 or not np.issubdtype(c.dtype, np.integer) or np.any((c < 0) | (c >= G.shape[1])):
        raise DPValueError(f"canary_coords must be integer coordinates in [0, {G.shape[1]})")
    norms = np.linalg.norm(G, axis=1)
    if np.any(norms == 0):
        raise DPValueError("released iterates must be non-zero (cosine undefined)")
    return np.max(G[:, c] / norms[:, None], axis=0)


def andrew_epsilon(in_stats, out_stats, delta: float = 1e-5, *, direction: str = "both") -> AuditResult:
    """Point estimate eps_theta_hat(delta) of the Gaussian fit to IN/OUT statistics (no confidence region)."""
    delta = check_delta(delta)
    i, o = check_scores(in_stats, out_stats)
    th = fit_theta(i, o)
    eps = float(epsilon_of_theta(delta, th, direction=direction))
    return AuditResult(
        epsilon_lower=eps,
        method="andrew",
        delta=delta,
        alpha=None,
        n_in=int(i.size),
        n_out=int(o.size),
        details={"kind": "estimate", "mu_in": th[0], "sigma_in": th[1], "mu_out": th[2], "sigma_out": th[3]},
    )
