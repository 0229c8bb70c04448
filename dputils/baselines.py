"""The baselines the chapters put next to their accountants (one place for the choices).

* :func:`clt_mu`: the central-limit mu of Bu et al. for Poisson-subsampled Gaussian steps, an
  **approximation** (asymptotic), not a bound.
* :func:`subsampled_gaussian_rdp_epsilon`: the Rényi-DP upper bound from
  :class:`dputils.accountants.rdp.RDPAccountant` with the modern conversion and the order refined
  continuously (never looser than a grid). Its former name ``rdp_epsilon`` clashed with
  :func:`dputils.shuffling.conversions.rdp_epsilon` (an RDP curve to epsilon); it still works and warns.
* :func:`comparison_row`: one row of the Edgeworth chapter's reproduction tables.

The saddle-point expansions, asymptotics and work counts (``msd_order3``, ``msd_order3_epsilon``,
``spa_work``, ``spa_gaussian_asymptotics``, ``spa_tilt_gain``) moved to :mod:`dputils.accountants.spa` and
``edgeworth_work`` to :mod:`dputils.accountants.edgeworth`; their names here still work and warn.
"""

from __future__ import annotations

import importlib
import math
import time
import warnings
from typing import Any

from .accountants.edgeworth import EdgeworthAccountant
from .accountants.pld import PLDAccountant
from .accountants.rdp import RDPAccountant
from .accountants.spa import SaddlePointAccountant
from .curves import gdp_epsilon
from .errors import DPValueError, check_delta, check_positive, check_positive_int, check_probability
from .mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    SubsampledGaussianMechanism,
    SubsampledLaplaceMechanism,
)
from .truth import composition_epsilon

# former names: the functions that moved to the accountants, and rdp_epsilon (renamed: it clashed with
# dputils.shuffling.conversions.rdp_epsilon); module, new name
_MOVED = {
    "rdp_epsilon": ("dputils.baselines", "subsampled_gaussian_rdp_epsilon"),
    "msd_order3": ("dputils.accountants.spa", "msd_order3"),
    "msd_order3_epsilon": ("dputils.accountants.spa", "msd_order3_epsilon"),
    "spa_work": ("dputils.accountants.spa", "spa_work"),
    "spa_gaussian_asymptotics": ("dputils.accountants.spa", "spa_gaussian_asymptotics"),
    "spa_tilt_gain": ("dputils.accountants.spa", "spa_tilt_gain"),
    "edgeworth_work": ("dputils.accountants.edgeworth", "edgeworth_work"),
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        module, new = _MOVED[name]
        warnings.warn(f"dputils.baselines.{name} is deprecated; use {module}.{new}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), new)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "clt_mu",
    "subsampled_gaussian_rdp_epsilon",
    "comparison_row",
    "eeai_contains_truth",
    "prv_epsilon",
    "dp_accounting_pld_epsilon",
    "spa_against_rows",
    "prv_delta",
    "pld_comparison_row",
]


def clt_mu(sigma: float, p: float, m: int) -> float:
    r"""The CLT mu of Bu et al. for m Poisson-subsampled Gaussian steps: :math:`p\sqrt{m(e^{1/\sigma^2}-1)}`.

    ``sigma`` is the noise multiplier (noise / sensitivity), ``p`` the sampling rate. An
    **approximation** (asymptotic in m with :math:`p\sqrt m` fixed), not a bound.
    """
    sigma = check_positive("sigma", sigma)
    p = check_probability("p", p)
    m = check_positive_int("m", m)
    return p * math.sqrt(m * math.expm1(1.0 / sigma**2))


def subsampled_gaussian_rdp_epsilon(sigma: float, p: float, m: int, delta: float) -> float:
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
            row["rdp"] = subsampled_gaussian_rdp_epsilon(sigma / mechanism.sensitivity, p, m, delta)
    return row


def eeai_contains_truth(row: dict[str, Any], max_truth_err: float = 1e-5) -> bool:
    r"""Whether a :func:`comparison_row` passes the Edgeworth chapter's two validations.

    The truth's own error estimate (a doubled-resolution rerun) is below ``max_truth_err``, and the certified
    EEAI interval of Wang et al. (Def. 4.2) contains the truth up to that error:
    :math:`\varepsilon_{low} \le \varepsilon + e` and :math:`\varepsilon - e \le \varepsilon_{upp}`.
    """
    err = row["truth_err"]
    return bool(err < max_truth_err and row["ew_low"] <= row["truth"] + err and row["truth"] - err <= row["ew_upp"])


def prv_epsilon(sigma: float, p: float, m: int, delta: float, eps_error: float) -> tuple[float, float, float, int]:
    """The PRV accountant of Gopi et al. (``prv_accountant`` 0.2) for m Poisson-subsampled Gaussian steps.

    Returns ``(lower, estimate, upper, grid points)`` at ``delta_error = delta / 1000``; the grid's mesh
    shrinks like ``eps_error / sqrt(m)``, so its size is the work the accountant does. It models the
    remove pair (mixture first) only. Needs the optional ``prv-accountant`` package.
    """
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    acc = PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(
            noise_multiplier=check_positive("sigma", sigma), sampling_probability=check_probability("p", p)
        ),
        eps_error=check_positive("eps_error", eps_error),
        delta_error=check_delta(delta) / 1000,
        max_self_compositions=check_positive_int("m", m),
    )
    low, est, up = acc.compute_epsilon(delta, m)
    return low, est, up, len(acc.composer.prvs[0])


def dp_accounting_pld_epsilon(
    mechanism: Mechanism,
    m: int,
    delta: float,
    discretization: float = 1e-4,
    *,
    connect_dots: bool | None = None,
    log_mass_truncation_bound: float | None = None,
    tail_mass_truncation: float | None = None,
) -> float:
    """epsilon(delta) of m compositions from dp_accounting's PLD accountant (add-or-remove, pessimistic grid).

    For the (Poisson-subsampled) Gaussian and Laplace mechanisms of :mod:`dputils.mechanisms`, built with
    ``from_gaussian_mechanism`` / ``from_laplace_mechanism`` at ``value_discretization_interval =
    discretization``; an independent algorithm (Koskela et al. / Doroshenko et al.) to compare with.
    ``connect_dots``, ``log_mass_truncation_bound`` (of the one-step PLD) and ``tail_mass_truncation`` (of the
    composition) are passed to dp_accounting when given (its defaults otherwise). Needs the optional
    ``dp-accounting`` package.
    """
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    gaussian = isinstance(mechanism, (GaussianMechanism, SubsampledGaussianMechanism))
    if not gaussian and not isinstance(mechanism, (LaplaceMechanism, SubsampledLaplaceMechanism)):
        raise DPValueError(f"dp_accounting_pld_epsilon: no dp_accounting PLD for {type(mechanism).__name__}")
    p = getattr(mechanism, "q", 1.0)
    kw = dict(sensitivity=mechanism.sensitivity, sampling_prob=p, value_discretization_interval=discretization)
    if connect_dots is not None:
        kw["use_connect_dots"] = connect_dots
    if log_mass_truncation_bound is not None:
        kw["log_mass_truncation_bound"] = log_mass_truncation_bound
    compose = {} if tail_mass_truncation is None else {"tail_mass_truncation": tail_mass_truncation}
    if gaussian:
        pl = pldlib.from_gaussian_mechanism(standard_deviation=mechanism.sigma, **kw)
    else:
        pl = pldlib.from_laplace_mechanism(mechanism.scale, **kw)
    return float(pl.self_compose(check_positive_int("m", m), **compose).get_epsilon_for_delta(check_delta(delta)))


def spa_against_rows(mechanism_of_m, rows: list[dict[str, Any]], delta: float) -> list[dict[str, Any]]:
    """The saddle-point accountant next to the order-2 Edgeworth estimate of :func:`comparison_row` rows.

    For each row (with ``m``, ``truth`` and ``ew2``) composes ``mechanism_of_m(m)`` m times in
    :class:`dputils.accountants.spa.SaddlePointAccountant` and returns its SP-CLT estimate and certified
    bracket, and both estimates' errors against the truth. The accountant's degraded-regime warnings are
    silenced here (the rows report the errors instead).
    """
    out = []
    for r in rows:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spa = SaddlePointAccountant().compose(mechanism_of_m(r["m"]), r["m"]).get_epsilon(delta)
        out.append(
            {
                "delta": delta,
                "m": r["m"],
                "truth": r["truth"],
                "ew2": r["ew2"],
                "spa": spa.value,
                "spa_lower": spa.lower,
                "spa_upper": spa.upper,
                "ew2_err": r["ew2"] - r["truth"],
                "spa_err": spa.value - r["truth"],
            }
        )
    return out


def prv_delta(
    sigma: float,
    p: float,
    m: int,
    epsilons,
    eps_error: float,
    delta_error: float,
    max_self_compositions: int | None = None,
) -> list[tuple[float, float, float]]:
    """delta(epsilon) of the PRV accountant of Gopi et al. (``prv_accountant`` 0.2), m Poisson-subsampled Gaussians.

    One accountant (grid set by ``eps_error``, ``delta_error`` and ``max_self_compositions``, default m) and,
    for each epsilon, its ``(lower, estimate, upper)``. An FFT accountant with absolute errors: below
    ``delta_error`` its bounds are vacuous. Needs the optional ``prv-accountant`` package.
    """
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    m = check_positive_int("m", m)
    acc = PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(
            noise_multiplier=check_positive("sigma", sigma), sampling_probability=check_probability("p", p)
        ),
        max_self_compositions=m if max_self_compositions is None else int(max_self_compositions),
        eps_error=check_positive("eps_error", eps_error),
        delta_error=check_positive("delta_error", delta_error),
    )
    return [tuple(acc.compute_delta(float(e), m)) for e in epsilons]


def pld_comparison_row(mechanism: Mechanism, m: int, delta: float, discretization: float = 1e-3) -> dict[str, Any]:
    """A :func:`comparison_row` (no RDP) whose truth is the book's PLD accountant: its estimate as ``truth``,
    its certified bracket as ``truth_lower`` / ``truth_upper``.

    For settings where the contour-integral truth cannot be truncated (a summed loss that is nearly a
    lattice, e.g. a Poisson-subsampled Gaussian with p·m of order 1, whose characteristic function does not
    decay): :class:`dputils.accountants.pld.PLDAccountant` with the given ``discretization``.
    """

    row = comparison_row(mechanism, m, delta, rdp=False, truth=False)
    pl = PLDAccountant(discretization=discretization).compose(mechanism, m).get_epsilon(delta)
    row.update(truth=pl.value, truth_lower=pl.lower, truth_upper=pl.upper)
    return row


def dp_accounting_event_epsilons(mechanism: Mechanism, m: int, delta: float, rdp_orders) -> tuple[float, float]:
    """epsilon(delta) of ``m`` compositions of ``mechanism`` from dp_accounting's PLD accountant (its defaults)
    and its RDP accountant on ``rdp_orders``, both fed the mechanism's ``to_dp_event()``: an independent
    implementation to compare with (Doroshenko et al.'s connect-the-dots PLD; Mironov's RDP of the sampled
    Gaussian with dp_accounting's own conversion). Returns ``(pld_epsilon, rdp_epsilon)``. Needs the optional
    ``dp-accounting`` package."""
    import dp_accounting

    m = check_positive_int("m", m)
    delta = check_delta(delta)
    pld = dp_accounting.pld.PLDAccountant()
    rdp = dp_accounting.rdp.RdpAccountant(list(rdp_orders))
    for acc in (pld, rdp):
        acc.compose(mechanism.to_dp_event(), m)
    return pld.get_epsilon(delta), rdp.get_epsilon(delta)
