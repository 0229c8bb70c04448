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

import numpy as np

from .accountants.edgeworth import EdgeworthAccountant
from .accountants.gdp import GDPAccountant
from .accountants.pld import PLDAccountant
from .accountants.rdp import RDPAccountant
from .accountants.spa import SaddlePointAccountant, ma_delta, ma_epsilon, spa_delta, spa_epsilon_methods
from .accountants.spa import msd_order3_epsilon as _msd_order3_epsilon  # not re-exported: the old name warns
from .curves import gdp_delta, gdp_epsilon
from .errors import DPValueError, check_delta, check_positive, check_positive_int, check_probability
from .mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    SubsampledGaussianMechanism,
    SubsampledLaplaceMechanism,
)
from .truth import composition_epsilon, monte_carlo_profile, truth_delta, truth_epsilon

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
    "dp_accounting_event_epsilons",
    "spa_delta_curves",
    "spa_truth_errors",
    "spa_epsilon_rows",
    "truth_epsilons_in_brackets",
    "spa_tiny_delta_rows",
    "accurate_from",
    "GAUSS_CASES",
    "gaussian_pld_brackets",
    "monte_carlo_pld_rows",
    "dp_accounting_comparison_rows",
    "TFP_ORDERS",
    "MNIST_SETTINGS",
    "mnist_dpsgd_rows",
    "epsilon_against_steps",
    "SAMPLING_SCHEDULES",
    "schedule_comparison_rows",
    "prv_work_rows",
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
    acc = EdgeworthAccountant(order=2, fallback="none").compose(mechanism, m)
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
            spa = SaddlePointAccountant(fallback="none").compose(mechanism_of_m(r["m"]), r["m"]).get_epsilon(delta)
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


# ------------------------------------------------------------------------------------------------
# the saddle-point chapter's comparisons (Alghamdi et al.): SPA against the truth, the moments
# accountant, the CLT's mu-GDP, dp_accounting's PLD and the PRV accountant
# ------------------------------------------------------------------------------------------------
def spa_delta_curves(mechanism: Mechanism, ledger, epsilons, n: int, sigma: float, q: float):
    r"""delta(epsilon) at every epsilon of ``epsilons`` for ``n`` steps of ``mechanism`` by each method of the
    saddle-point chapter's Fig. 1(a) / 3(a) (Alghamdi et al.); ``ledger`` is the mechanism's dominating pair
    composed n times.

    Keys of the curves: ``clt``, ``lo``, ``hi`` (SP-CLT, eq. 8/66, and its certified Theorem-5 bracket),
    ``msd0``, ``msd1`` (eq. 60, 61; NaN where the MSD1 factor is not positive), ``ma`` (the refined moments
    accountant, eq. 43), ``gdp`` (the CLT's mu-GDP with :math:`\mu = q\sqrt{n(e^{1/\sigma^2} - 1)}`,
    :func:`clt_mu`, an approximation) and ``pld`` (dp_accounting's connect-the-dots PLD, grid 1e-4). Returns
    ``(curves, mu, the composed dp_accounting accountant)``. Needs the optional ``dp-accounting`` package.
    """
    import dp_accounting

    pts = [spa_delta(ledger, e) for e in epsilons]
    keys = (("clt", "delta_clt"), ("lo", "lower"), ("hi", "upper"), ("msd0", "delta_msd0"))
    curve = {k: np.array([getattr(p, a) for p in pts]) for k, a in keys}
    curve["msd1"] = np.array([p.delta_msd1 or np.nan for p in pts])
    curve["ma"] = np.array([ma_delta(ledger, e) for e in epsilons])
    mu_gdp = clt_mu(sigma, q, n)
    curve["gdp"] = gdp_delta(epsilons, mu_gdp)
    pld_acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    pld_acc.compose(mechanism.to_dp_event(), check_positive_int("n", n))
    curve["pld"] = np.array([pld_acc.get_delta(e) for e in epsilons])
    return curve, mu_gdp, pld_acc


def spa_truth_errors(ledger, epsilons, mu_gdp: float):
    r"""At each epsilon of ``epsilons``: the truth delta (:func:`dputils.truth.truth_delta`, the contour
    integral), the SPA point (:func:`dputils.accountants.spa.spa_delta`) and the relative error
    :math:`|\delta_A/\delta - 1|` of SP-CLT, SP-MSD0, SP-MSD1 (keys ``clt``, ``msd0``, ``msd1``), the refined
    moments accountant (``ma``) and mu-GDP at ``mu_gdp`` (``gdp``).

    Returns ``(truth, SPA points, relative errors, moments-accountant delta, GDP delta)``.
    """
    tr = np.array([truth_delta(ledger, e) for e in epsilons])
    sp_t = [spa_delta(ledger, e) for e in epsilons]
    rel = {
        k: np.array([abs(getattr(p, "delta_" + k) / d - 1) for p, d in zip(sp_t, tr)]) for k in ("clt", "msd0", "msd1")
    }
    ma_t = np.array([ma_delta(ledger, e) for e in epsilons])
    gdp_t = gdp_delta(epsilons, mu_gdp)
    rel["ma"], rel["gdp"] = np.abs(ma_t / tr - 1), np.abs(gdp_t / tr - 1)
    return tr, sp_t, rel, ma_t, gdp_t


def spa_epsilon_rows(
    pair, ns, delta: float, sigma: float, q: float, reference, label: str = "reference"
) -> list[dict[str, Any]]:
    r"""epsilon(delta) for n steps of ``pair`` at each n of ``ns`` by each method of the saddle-point chapter's
    Fig. 1(b) / 3(b), next to a reference value (``reference[i]`` at ``ns[i]``, stored under ``label``).

    Each row: ``n``, ``clt`` with its certified bracket ``lower`` / ``upper``, ``msd0``, ``msd1``
    (:func:`dputils.accountants.spa.spa_epsilon_methods`), ``k3`` (the order-3 expansion,
    :func:`dputils.accountants.spa.msd_order3_epsilon`, started at the SP-CLT saddle point), ``ma`` (the
    refined moments accountant), ``gdp`` (mu-GDP with :func:`clt_mu`), ``t_hat`` (the SP-CLT saddle point),
    ``degraded``, and the relative errors :math:`|\varepsilon_A/\varepsilon_{ref} - 1|` of SP-CLT
    (``rel_clt``) and SP-MSD0 (``rel_msd0``).
    """
    table = []
    for n, ref in zip(ns, reference, strict=True):
        n = int(n)
        led = [(pair, n)]
        r = spa_epsilon_methods(led, delta)
        table.append(
            {
                "n": n,
                label: ref,
                "clt": r["clt"],
                "lower": r["lower"],
                "upper": r["upper"],
                "msd0": r["msd0"],
                "msd1": r["msd1"],
                "k3": _msd_order3_epsilon(led, delta, r["t"]),
                "ma": ma_epsilon(led, delta),
                "gdp": gdp_epsilon(delta, clt_mu(sigma, q, n)),
                "t_hat": r["t"],
                "degraded": r["degraded"],
            }
        )
    for r in table:
        r["rel_clt"] = abs(r["clt"] / r[label] - 1)
        r["rel_msd0"] = abs(r["msd0"] / r[label] - 1)
    return table


def truth_epsilons_in_brackets(pair, rows: list[dict[str, Any]], delta: float, count: int) -> dict[int, float]:
    """The contour-integral truth epsilon(delta) (:func:`dputils.truth.truth_epsilon`) of n steps of ``pair``
    at ``count`` rows of ``rows`` (:func:`spa_epsilon_rows`), evenly spread, each searched inside the row's
    certified SP-CLT bracket ``[lower, upper]``: ``{n: epsilon}``."""
    sub = np.linspace(0, len(rows) - 1, min(check_positive_int("count", count), len(rows)))
    return {
        r["n"]: truth_epsilon([(pair, r["n"])], delta, bracket=(r["lower"], r["upper"]))
        for r in [rows[j] for j in np.unique(sub.astype(int))]
    }


def spa_tiny_delta_rows(ledger, sigma: float, q: float, n: int, epsilons, truth_at, pld_acc) -> list[dict[str, Any]]:
    r"""At each epsilon of ``epsilons`` (n steps of the subsampled Gaussian, ``ledger`` its dominating pair):
    the truth delta (from the mapping ``truth_at`` where it holds epsilon, else
    :func:`dputils.truth.truth_delta`), SP-CLT and SP-MSD1, the composed dp_accounting PLD accountant
    ``pld_acc`` (e.g. from :func:`spa_delta_curves`), the PRV accountant's estimate and bounds
    (:func:`prv_delta`, ``eps_error`` 0.07, ``delta_error`` 1e-10, ``max_self_compositions`` 1.1 n: the ICML
    notebook's settings), and each one's relative error :math:`|\delta_A/\delta - 1|` (keys ``*_rel``).
    Needs the optional ``prv-accountant`` package."""
    prv = prv_delta(sigma, q, n, epsilons, eps_error=0.07, delta_error=1e-10, max_self_compositions=int(1.1 * n))
    rows = []
    for e, (prv_lo, prv_est, prv_hi) in zip(epsilons, prv):
        p = spa_delta(ledger, e)
        d_true = truth_at[e] if e in truth_at else truth_delta(ledger, e)
        rows.append(
            {
                "eps": e,
                "truth": d_true,
                "spa": p.delta_clt,
                "msd1": p.delta_msd1,
                "pld": pld_acc.get_delta(e),
                "prv": prv_est,
                "prv_lower": prv_lo,
                "prv_upper": prv_hi,
            }
        )
    for r in rows:
        for k in ("spa", "msd1", "pld", "prv"):
            r[k + "_rel"] = abs(r[k] / r["truth"] - 1)
    return rows


def accurate_from(rows: list[dict[str, Any]], level: float, key: str = "rel_clt") -> float:
    """The smallest ``epochs`` of ``rows`` from which ``row[key]`` (a relative error) stays at most ``level``
    in that row and every later one; infinity where no row qualifies."""
    ok = [r["epochs"] for i, r in enumerate(rows) if all(x[key] <= level for x in rows[i:])]
    return min(ok) if ok else math.inf


# ------------------------------------------------------------------------------------------------
# the foundations chapter's comparisons: the PLD bracket against exact, Monte Carlo and peer values
# ------------------------------------------------------------------------------------------------
#: (sigma, T) with sqrt(T)/sigma = 1: ever longer compositions of ever weaker Gaussian steps, all 1-GDP.
GAUSS_CASES = ((1.0, 1), (math.sqrt(3.0), 3), (5.0, 25), (20.0, 400))


def gaussian_pld_brackets(discretization: float, cases=GAUSS_CASES, epsilons=(0.0, 0.5, 1.0, 2.0)) -> list[tuple]:
    r"""For each (sigma, T) of ``cases``: the PLD bracket on delta(epsilon) of T Gaussian mechanisms with noise
    sigma (grid ``discretization``) and the exact delta of mu-GDP with :math:`\mu = \sqrt T/\sigma` (Dong et
    al., Cor. 2.13; :func:`dputils.curves.gdp_delta`), as rows ``(sigma, T, epsilon, lower, exact, upper)``."""
    rows = []
    for s_, T_ in cases:
        acc = PLDAccountant(discretization=discretization).compose(GaussianMechanism(s_), T_)
        mu = math.sqrt(T_) / s_
        for e in epsilons:
            r = acc.get_delta(e)
            rows.append((s_, T_, e, r.lower, float(gdp_delta(e, mu)), r.upper))
    return rows


def monte_carlo_pld_rows(
    mechanism: Mechanism, steps: int, n_samples: int, rng: np.random.Generator, epsilons=(0.25, 0.5, 1.0)
) -> list[tuple]:
    r"""Both directions of ``mechanism``: the Monte Carlo estimate of the privacy profile of ``steps``
    compositions, :math:`\hat\delta(\varepsilon) = \frac1n\sum_j (1 - e^{\varepsilon - L^{(j)}})_+` with its
    standard error (:func:`dputils.truth.monte_carlo_profile`, remove drawn first from ``rng``), and the PLD
    bracket, as rows ``(direction, epsilon, estimate, standard error, lower, upper)``."""
    rows = []
    for d in ("remove", "add"):
        est, se = monte_carlo_profile(mechanism.pair(d), steps, epsilons, n_samples, rng)
        acc = PLDAccountant(direction=d).compose(mechanism, steps)
        for e, m_, s_ in zip(epsilons, est, se):
            r = acc.get_delta(e)
            rows.append((d, e, m_, s_, r.lower, r.upper))
    return rows


def dp_accounting_comparison_rows(cases, delta: float, discretization: float) -> list[tuple]:
    """For each (mechanism, T) of ``cases``: our PLD bracket on epsilon(delta) (grid ``discretization``),
    dp_accounting's PLD epsilon, our RDP epsilon on the orders 2..64 without refining the order and
    dp_accounting's RDP epsilon on the same orders (:func:`dp_accounting_event_epsilons`), as rows
    ``(name, T, PLD lower, PLD upper, dp_accounting PLD, RDP, dp_accounting RDP)``; ``name`` describes the
    mechanism (a subsampled Gaussian or a Laplace mechanism). Needs the optional ``dp-accounting`` package."""
    rows = []
    for m, T in cases:
        ours = PLDAccountant(discretization=discretization).compose(m, T).get_epsilon(delta)
        rdp_ours = RDPAccountant(orders=range(2, 65), refine=False).compose(m, T).get_epsilon(delta).value
        dpa_pld, dpa_rdp = dp_accounting_event_epsilons(m, T, delta, range(2, 65))
        name = (
            f"subsampled Gaussian σ={m.sigma:g}, q={m.q:g}"
            if isinstance(m, SubsampledGaussianMechanism)
            else f"Laplace b={m.scale:g}"
        )
        rows.append((name, T, ours.lower, ours.value, dpa_pld, rdp_ours, dpa_rdp))
    return rows


#: TensorFlow Privacy's classic order grid: 1.1, 1.2, ..., 10.9 and 12, ..., 63.
TFP_ORDERS = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64))
#: The MNIST DP-SGD tutorial's settings: (noise multiplier, epochs, published epsilon at delta = 1e-5).
MNIST_SETTINGS = [(1.1, 60, 3.01), (1.3, 15, 1.19), (0.7, 45, 7.10)]


def mnist_dpsgd_rows(
    delta: float = 1e-5, grid: float = 1e-4, q: float = 256 / 60000, settings=MNIST_SETTINGS
) -> list[dict[str, Any]]:
    r"""The MNIST DP-SGD table: for each (sigma, epochs, published epsilon) of ``settings``,
    :math:`T = \lceil \text{epochs}/q \rceil` steps of the subsampled Gaussian and epsilon(delta) by RDP with the
    classic conversion on :data:`TFP_ORDERS` (``rdp_classic``), our default RDP (``rdp``: modern conversion,
    refined order), RDP on the integer orders 2..256 (``rdp_integer``), the PLD bracket (``pld_lower``,
    ``pld``; grid ``grid``) and the CLT's mu-GDP (``gdp``, an approximation)."""
    table = []
    for s_, epochs, published in settings:
        T_ = int(math.ceil(epochs / q))
        m = SubsampledGaussianMechanism(s_, q)
        pld = PLDAccountant(discretization=grid).compose(m, T_).get_epsilon(delta)

        def eps_of(acc):
            return acc.compose(m, T_).get_epsilon(delta).value

        table.append(
            {
                "sigma": s_,
                "epochs": epochs,
                "steps": T_,
                "published": published,
                "rdp_classic": eps_of(RDPAccountant(orders=TFP_ORDERS, conversion="classic", refine=False)),
                "rdp": eps_of(RDPAccountant()),
                "rdp_integer": eps_of(RDPAccountant(orders=range(2, 257), refine=False)),
                "pld_lower": pld.lower,
                "pld": pld.value,
                "gdp": eps_of(GDPAccountant()),
            }
        )
    return table


def epsilon_against_steps(mechanism: Mechanism, steps, delta: float, discretization: float):
    """epsilon(delta) of ``mechanism`` composed T times, at each T of ``steps``: the PLD bracket (``pld``,
    ``pld_lower``; grid ``discretization``), our default RDP (``rdp``), RDP with the classic conversion on the
    orders 2..256 (``rdp-old``) and mu-GDP (``gdp``). Returns the curves and the seconds spent in the PLD
    accountant (wall-clock, machine-dependent)."""
    curves = {"pld": [], "pld_lower": [], "rdp": [], "rdp-old": [], "gdp": []}
    t_pld = 0.0
    for T_ in map(int, steps):
        t0 = time.perf_counter()
        r = PLDAccountant(discretization=discretization).compose(mechanism, T_).get_epsilon(delta)
        t_pld += time.perf_counter() - t0
        curves["pld"].append(r.value)
        curves["pld_lower"].append(r.lower)
        for key, acc in (
            ("rdp", RDPAccountant()),
            ("rdp-old", RDPAccountant(orders=range(2, 257), conversion="classic")),
            ("gdp", GDPAccountant()),
        ):
            curves[key].append(acc.compose(mechanism, T_).get_epsilon(delta).value)
    return curves, t_pld


# ------------------------------------------------------------------------------------------------
# the Edgeworth chapter's comparisons (Wang et al.): sampling-rate schedules, the PRV accountant's work
# ------------------------------------------------------------------------------------------------
#: The sampling-rate schedules p(m) of Wang et al.'s Figure 3: ``left`` 0.4/sqrt(m), ``mid_a``
#: 1/sqrt(m log m), ``mid_b`` 1/(sqrt(m) log m), ``right`` 0.1 log(m)/m.
SAMPLING_SCHEDULES = {
    "left": lambda m: 0.4 / math.sqrt(m),
    "mid_a": lambda m: 1 / math.sqrt(m * math.log(m)),
    "mid_b": lambda m: 1 / (math.sqrt(m) * math.log(m)),
    "right": lambda m: 0.1 * math.log(m) / m,
}


def schedule_comparison_rows(ms, rdp: bool = True, sigma: float = 0.8, delta: float = 0.1):
    """The rows of Wang et al.'s Figure 3: m steps of the subsampled Gaussian (noise ``sigma``) at the sampling
    rate ``p = SAMPLING_SCHEDULES[name](m)``, epsilon at ``delta``. For ``left`` and ``mid_a``
    :func:`comparison_row` at every m of ``ms`` (the RDP column if ``rdp``); for the degenerate schedules
    ``mid_b`` and ``right`` :func:`pld_comparison_row` (the book's PLD bracket, grid 1e-3, as the truth: the
    summed loss is nearly a lattice there) at the m >= 1000. Returns ``{name: rows}``."""
    sched = SAMPLING_SCHEDULES
    out = {
        n: [comparison_row(SubsampledGaussianMechanism(sigma, sched[n](m)), m, delta, rdp=rdp) for m in ms]
        for n in ("left", "mid_a")
    }
    for n in ("mid_b", "right"):
        out[n] = [
            pld_comparison_row(SubsampledGaussianMechanism(sigma, sched[n](m)), m, delta) for m in ms if m >= 1000
        ]
    return out


def prv_work_rows(ms, eps_errors, sigma: float = 0.8, p: float = 0.01, delta: float = 0.1) -> list[dict[str, Any]]:
    """The PRV accountant's work (:func:`prv_epsilon`) for m Poisson-subsampled Gaussian steps: at every m of
    ``ms`` with ``eps_error`` 0.1, then at m = 10^4 with each of ``eps_errors`` (0.1 only where not already
    run). Each row: ``m``, ``eps_error``, the estimate ``PRV ε``, ``grid points`` (deterministic) and
    ``seconds`` (wall-clock). Needs the optional ``prv-accountant`` package."""
    rows = []
    for m, ee in [(m, 0.1) for m in ms] + [(10000, e) for e in eps_errors if e != 0.1 or 10000 not in ms]:
        t0 = time.perf_counter()
        low, est, up, grid = prv_epsilon(sigma, p, m, delta, ee)
        rows.append({"m": m, "eps_error": ee, "PRV ε": est, "grid points": grid, "seconds": time.perf_counter() - t0})
    return rows
