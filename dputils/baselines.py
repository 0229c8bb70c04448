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

from . import cumulants
from .accountants import spa
from .accountants.edgeworth import EdgeworthAccountant
from .accountants.pld import PLDAccountant
from .accountants.rdp import RDPAccountant
from .accountants.spa import SaddlePointAccountant, saddle_point
from .cumulants import composed_cgf_derivatives
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

__all__ = [
    "clt_mu",
    "rdp_epsilon",
    "comparison_row",
    "eeai_contains_truth",
    "prv_epsilon",
    "dp_accounting_pld_epsilon",
    "edgeworth_work",
    "spa_against_rows",
    "msd_order3",
    "msd_order3_epsilon",
    "spa_work",
    "prv_delta",
    "spa_gaussian_asymptotics",
    "spa_tilt_gain",
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


def edgeworth_work(mechanism: Mechanism, m: int, delta: float, *, eeai: bool = False) -> tuple[float, int]:
    """Cost of one Edgeworth epsilon(delta) from a cold cache: ``(seconds, one-step moment evaluations)``.

    The AEA (Wang et al., Def. 4.1) needs the one-step cumulants once per distinct mechanism, so the count of
    moment evaluations (:func:`dputils.cumulants.evaluation_count`) does not depend on m; ``eeai=True`` also
    computes the certified interval (Def. 4.2), whose bracket search adds a few evaluations. The seconds are
    wall-clock time (machine-dependent); the count is deterministic.
    """

    cumulants.clear_cache()
    t0 = time.perf_counter()
    acc = EdgeworthAccountant().compose(mechanism, check_positive_int("m", m))
    if eeai:
        acc.get_epsilon(delta)
    else:
        max(acc.epsilon_direction(delta, d) for d in acc.directions)
    return time.perf_counter() - t0, cumulants.evaluation_count()


def spa_against_rows(mechanism_of_m, rows: list[dict[str, Any]], delta: float) -> list[dict[str, Any]]:
    """The saddle-point accountant next to the order-2 Edgeworth estimate of :func:`comparison_row` rows.

    For each row (with ``m``, ``truth`` and ``ew2``) composes ``mechanism_of_m(m)`` m times in
    :class:`dputils.accountants.spa.SaddlePointAccountant` and returns its SP-CLT estimate and certified
    bracket, and both estimates' errors against the truth. The accountant's degraded-regime warnings are
    silenced here (the rows report the errors instead).
    """
    import warnings

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


def msd_order3(ledger, t: float) -> tuple[float, float]:
    r"""``(epsilon, log delta)`` of the order-3 steepest-descent expansion of the SPA at tilt ``t``.

    With :math:`F(z) = K(z) - \varepsilon z - \log z - \log(1+z)` (Alghamdi et al., eq. 48-49) and the
    saddle-point equation :math:`K'(t) = \varepsilon + 1/t + 1/(1+t)` (eq. 6, 50) giving ε of ``t``, the
    expansion is SP-MSD0 (eq. 60), :math:`e^{F(t)}/\sqrt{2\pi F''(t)}`, times :math:`1 + \beta_2 + \beta_3`
    with :math:`\beta_2 = F^{(4)}/(8F''^2)` and :math:`\beta_3 = -(F^{(6)} + 10F'''^2)/(48F''^3)`: the
    :math:`k = 3` expansion of the ICML version ("The Saddle-Point Method in Differential Privacy").
    ``log delta`` is ``-inf`` where the factor is not positive (the expansion has broken down).
    """

    d, _ = composed_cgf_derivatives(ledger, t, 6)
    eps = float(d[1]) - 1 / t - 1 / (1 + t)
    F = {k: float(d[k]) + (-1) ** k * math.factorial(k - 1) * (t**-k + (1 + t) ** -k) for k in (2, 3, 4, 6)}
    factor = 1 + F[4] / (8 * F[2] ** 2) - (F[6] + 10 * F[3] ** 2) / (48 * F[2] ** 3)
    log_msd0 = float(d[0]) - t * eps - math.log(t) - math.log1p(t) - 0.5 * math.log(2 * math.pi * F[2])
    return eps, (log_msd0 + math.log(factor) if factor > 0 else -math.inf)


def msd_order3_epsilon(ledger, delta: float, t_start: float) -> float:
    """epsilon(delta) of the order-3 expansion (:func:`msd_order3`) along the saddle-point path.

    Solves ``log delta(t) = log delta`` by Brent's method in ``u = log t``, widening a bracket around
    ``t_start`` (e.g. the SP-CLT saddle point) by 0.05 on each side up to 40 times; returns NaN where no sign
    change is found (the expansion does not reach delta there).
    """
    from scipy import optimize

    target = math.log(check_delta(delta))

    def h(u):
        return msd_order3(ledger, math.exp(u))[1] - target

    u0 = math.log(check_positive("t_start", t_start))
    lo, hi = u0 - 0.05, u0 + 0.05
    for _ in range(40):
        if h(lo) > 0 and h(hi) < 0:
            return msd_order3(ledger, math.exp(optimize.brentq(h, lo, hi, xtol=1e-14, rtol=1e-15)))[0]
        lo, hi = (lo - 0.05 if h(lo) <= 0 else lo), (hi + 0.05 if h(hi) >= 0 else hi)
    return float("nan")


def spa_work(pair, n: int, delta: float, repeats: int = 1) -> dict[str, Any]:
    """Work and time of one saddle-point evaluation of n compositions of ``pair``, from a cold cache.

    The composed CGF is ``n K(t)`` (Alghamdi et al., Section 5), so the cost is the number of one-step CGF
    evaluations the root finders make (:func:`dputils.cumulants.evaluation_count`: distinct points, a
    deterministic count). Returns ``n``, the counts and best-of-``repeats`` wall-clock milliseconds of
    :func:`~dputils.accountants.spa.spa_delta` at ``eps`` (the SP-CLT epsilon(delta)) and of
    :func:`~dputils.accountants.spa.spa_epsilon` at ``delta`` (best of ``max(1, repeats // 2)``).
    """

    def best_time(fn, reps):
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            cumulants.clear_cache()  # timed from a cold cache, the clearing included
            fn()
            out.append(time.perf_counter() - t0)
        return min(out)

    def evaluations(fn):
        cumulants.clear_cache()
        fn()
        return cumulants.evaluation_count()

    led = [(pair, check_positive_int("n", n))]
    delta = check_delta(delta)
    repeats = check_positive_int("repeats", repeats)
    eps = spa.spa_epsilon(led, delta, "clt")[0]
    nd = evaluations(lambda: spa.spa_delta(led, eps))
    ne = evaluations(lambda: spa.spa_epsilon(led, delta, "clt"))
    td = best_time(lambda: spa.spa_delta(led, eps), repeats)
    te = best_time(lambda: spa.spa_epsilon(led, delta, "clt"), max(1, repeats // 2))
    return dict(n=int(n), delta_evals=nd, delta_ms=1e3 * td, epsilon_evals=ne, epsilon_ms=1e3 * te, eps=eps)


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


def spa_gaussian_asymptotics(r: float, n: int) -> dict[str, float]:
    r"""Proposition 8 and Theorem 7 of Alghamdi et al. on the Gaussian loss (mechanism noise 1: L ~ N(1/2, 1)).

    At :math:`\varepsilon_n = n\mu + r\sqrt n` (:math:`\mu = 1/2`, :math:`v = 1`) returns ``sqrt_n_t``
    (:math:`\sqrt n\,\hat t_n`, the saddle point of :func:`dputils.accountants.spa.saddle_point`) and its
    limit ``tau`` :math:`= (r + \sqrt{r^2 + 4v})/(2v)` (Prop. 8); ``err_sqrt_n``, the Theorem-5 bound
    :math:`\mathrm{err}_{SP} = 1.12\,e^{K(t) - t\varepsilon}\,t^t(1+t)^{-(1+t)}\,P_t/K''(t)^{3/2}` (eq. 73) at
    :math:`\hat t_n` times :math:`\sqrt n`, and its limit ``C_r`` :math:`= 1.12\,P\,v^{-3/2}e^{(1 - r\tau)/2}`
    with :math:`P = 2\sqrt{2/\pi}\,v^{3/2}`, the third absolute central moment of a Gaussian (Thm. 7).
    """

    mu1, v1 = 0.5, 1.0
    n = check_positive_int("n", n)
    tau = (r + math.sqrt(r**2 + 4 * v1)) / (2 * v1)
    led = [(GaussianMechanism(1.0).pair("remove"), n)]
    eps_n = n * mu1 + r * math.sqrt(n)
    t_n = saddle_point(led, eps_n)
    d, P_t = composed_cgf_derivatives(led, t_n, 2)
    log_err = (
        math.log(1.12)
        + d[0]
        - t_n * eps_n
        + t_n * math.log(t_n)
        - (1 + t_n) * math.log1p(t_n)
        + math.log(P_t)
        - 1.5 * math.log(d[2])
    )
    P1 = 2 * math.sqrt(2 / math.pi) * v1**1.5
    C_r = 1.12 * P1 * v1**-1.5 * math.exp((1 - r * tau) / 2)
    return {"sqrt_n_t": math.sqrt(n) * t_n, "tau": tau, "err_sqrt_n": math.exp(log_err) * math.sqrt(n), "C_r": C_r}


def spa_tilt_gain(limit_delta: float) -> float:
    r"""The factor :math:`e^{(1 - r\tau)/2}` that the tilted Berry-Esseen bound gains over the untilted one.

    Alghamdi et al., eq. 90: it depends only on the limiting :math:`\delta = Q(r/\sqrt v)`, through
    :math:`r\tau = z(z + \sqrt{z^2 + 4})/2` with :math:`z = Q^{-1}(\delta)`.
    """
    from scipy import stats

    z = stats.norm.isf(check_delta(limit_delta))
    return math.exp((1 - z * (z + math.sqrt(z * z + 4)) / 2) / 2)


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
