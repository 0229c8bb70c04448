"""The baselines the chapters put next to their accountants (one place for the choices).

* :func:`clt_mu`: the central-limit mu of Bu et al. for Poisson-subsampled Gaussian steps, an
  **approximation** (asymptotic), not a bound.
* :func:`rdp_epsilon`: the Rényi-DP upper bound from :class:`dputils.accountants.rdp.RDPAccountant`
  with the modern conversion and the order refined continuously (never looser than a grid).
* :func:`comparison_row`: one row of the Edgeworth chapter's reproduction tables.
"""

from __future__ import annotations

import math
import time
from typing import Any

from .accountants.edgeworth import EdgeworthAccountant
from .accountants.rdp import RDPAccountant
from .errors import check_delta, check_positive, check_positive_int, check_probability
from .mechanisms import GaussianMechanism, Mechanism, SubsampledGaussianMechanism

__all__ = ["clt_mu", "rdp_epsilon", "comparison_row"]


def clt_mu(sigma: float, p: float, m: int) -> float:
    r"""The CLT mu of Bu et al. for m Poisson-subsampled Gaussian steps: :math:`p\sqrt{m(e^{1/\sigma^2}-1)}`.

    ``sigma`` is the noise multiplier (noise / sensitivity), ``p`` the sampling rate. An
    **approximation** (asymptotic in m with :math:`p\sqrt m` fixed), not a bound.
    """
    sigma = check_positive("sigma", sigma)
    p = check_probability("p", p)
    m = check_positive_int("m", m)
    return p * math.sqrt(m * math.expm1(1.0 / sigma**2))


def rdp_epsilon(sigma: float, p: float, m: int, delta: float) -> float:
    """RDP upper bound on epsilon for m Poisson-subsampled Gaussian steps (``p = 1``: the plain Gaussian).

    Modern conversion (Balle et al. 2020, Thm 21) minimised over the default order grid and then over a
    continuous order next to the best grid order (:func:`dputils.accountants.rdp.refine_order`).
    """
    sigma = check_positive("sigma", sigma)
    p = check_probability("p", p)
    mech = GaussianMechanism(sigma) if p == 1.0 else SubsampledGaussianMechanism(sigma, p)
    acc = RDPAccountant(refine=True).compose(mech, check_positive_int("m", m))
    return float(acc.get_epsilon(check_delta(delta)))


def comparison_row(
    mechanism: Mechanism,
    m: int,
    delta: float,
    *,
    truth: bool = True,
    rdp: bool = True,
    orders: tuple[int, ...] = (0, 1, 2, 3),
) -> dict[str, Any]:
    """One row of the reproduction tables: AEA of each order, EEAI bracket, Lemma 4.3 Deltas, truth, GDP, RDP.

    ``truth`` uses :func:`dputils.truth.composition_epsilon` (contour integral through the saddle point, with
    its error estimate); GDP and RDP apply to the (subsampled) Gaussian only.
    """
    from .curves import gdp_epsilon
    from .truth import composition_epsilon

    t0 = time.perf_counter()
    acc = EdgeworthAccountant(order=2).compose(mechanism, m)
    res = acc.get_epsilon(delta)
    row: dict[str, Any] = {"m": int(m), "aea_seconds": time.perf_counter() - t0}
    for k in orders:
        row[f"ew{k}"] = max(acc.epsilon_direction(delta, d, k) for d in acc.directions)
    row["ew_per_direction"] = {d: acc.epsilon_direction(delta, d, 2) for d in acc.directions}
    row["ew_low"], row["ew_upp"] = res.lower, res.upper
    row["Delta_Y"], row["Delta_X"] = (float(v) for v in acc.error_bounds()["remove"])
    if truth:
        t0 = time.perf_counter()
        row["truth"], row["truth_err"] = composition_epsilon([(mechanism, m)], delta, eps_guess=max(row["ew2"], 0.05))
        row["truth_seconds"] = time.perf_counter() - t0
    sigma = getattr(mechanism, "sigma", None)
    if sigma is not None:
        p = getattr(mechanism, "q", 1.0)
        row["gdp_mu"] = clt_mu(sigma / mechanism.sensitivity, p, m)
        row["gdp"] = gdp_epsilon(delta, row["gdp_mu"])
        if rdp:
            row["rdp"] = rdp_epsilon(sigma / mechanism.sensitivity, p, m, delta)
    return row
