"""Figures of the foundations chapter, drawn with :mod:`dputils.book.plotting`'s conventions; the numbers come
from :mod:`dputils.mechanisms`, :mod:`dputils.curves` and :mod:`dputils.accountants`."""

from __future__ import annotations

import math
import time

import matplotlib.ticker
import numpy as np

from ... import baselines, truth
from ... import curves as dpcurves
from ...accountants import GDPAccountant, PLDAccountant, RDPAccountant
from ...mechanisms import GaussianMechanism, SubsampledGaussianMechanism
from .. import plotting
from ..scorecard import within
from ..tables import sci, show_table


def plot_directions(mech, sigma: float, q: float, eps_grid):
    """The privacy profiles of one step of ``mech`` in the add and remove directions, linear and log scale."""
    fig, axes = plotting.new_figure(ncols=2, constrained_layout=True)
    for direction, ls in (("remove", "-"), ("add", "--")):
        d = mech.pair(direction).delta(eps_grid)
        axes[0].plot(eps_grid, d, ls, label=direction)
        axes[1].semilogy(eps_grid, np.maximum(d, 1e-300), ls, label=direction)
    axes[0].set(xlabel=r"$\varepsilon$", ylabel=r"$\delta(\varepsilon)$", title=f"one step, sigma={sigma}, q={q}")
    axes[1].set(xlabel=r"$\varepsilon$", ylabel=r"$\delta(\varepsilon)$ (log scale)", ylim=(1e-30, 1))
    axes[0].legend(loc="best", framealpha=1)
    return fig


def plot_gdp_tradeoffs(alphas, mus=(0.5, 1.0, 2.0, 3.0)):
    """The trade-off curves ``G_mu`` of mu-GDP for each ``mu``, with the diagonal of perfect privacy."""
    fig, ax = plotting.new_figure()
    for m_ in mus:
        ax.plot(alphas, dpcurves.gdp_tradeoff(alphas, m_), label=rf"$G_{{{m_}}}$")
    ax.plot(alphas, 1 - alphas, "k:", lw=1, label="perfect privacy")
    ax.set(
        xlabel=r"type I error $\alpha$",
        ylabel=r"type II error $f(\alpha)$",
        title="trade-off curves of $\\mu$-GDP",
        aspect="equal",
    )
    ax.legend(loc="upper right", framealpha=1)
    return fig


def plot_steps(steps, curves: dict, delta: float, sigma: float, q: float):
    """Left: ε against the number of steps for each accountant (PLD as its certified bracket); right: each
    accountant's ε relative to PLD's upper bound. ``curves`` maps ``pld``, ``pld_lower``, ``rdp``,
    ``rdp-old`` and ``gdp`` to one value per step count."""
    fig, axes = plotting.new_figure(ncols=2, constrained_layout=True)
    ax = axes[0]
    ax.fill_between(steps, curves["pld_lower"], curves["pld"], color=plotting.color("pld"), alpha=0.3)
    ax.loglog(steps, curves["pld"], color=plotting.color("pld"), label="PLD (certified bracket)")
    ax.loglog(steps, curves["rdp"], color=plotting.color("rdp"), label="RDP, modern conversion")
    ax.loglog(steps, curves["rdp-old"], color=plotting.color("rdp-old"), label="RDP, classic conversion")
    ax.loglog(steps, curves["gdp"], "--", color=plotting.color("gdp"), label="GDP (CLT approximation)")
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set(xlabel="steps T", ylabel=rf"$\varepsilon$ at $\delta$={sci(delta, 1)}", title=f"sigma={sigma}, q={q}")
    ax.legend(loc="upper left", framealpha=1, fontsize=8)
    ax = axes[1]
    pld_arr = np.array(curves["pld"])
    for key, lab in (("rdp", "RDP, modern"), ("rdp-old", "RDP, classic"), ("gdp", "GDP")):
        ax.semilogx(steps, np.array(curves[key]) / pld_arr, color=plotting.color(key), label=lab)
    ax.axhline(1, color="k", lw=0.8)
    ax.set(xlabel="steps T", ylabel=r"$\varepsilon$ / $\varepsilon_{PLD}$", title="relative to PLD")
    ax.legend(loc="best", framealpha=1, fontsize=8)
    return fig


def profile_check(mech, sigma: float, q: float, n_points: int):
    """One step of the subsampled Gaussian ``mech``: its closed-form profile against mpmath quadrature
    (:func:`dputils.truth.subsampled_gaussian_profile_mpmath`) at ``n_points`` ε per direction: from -0.2 to 2
    for remove, and to 0.9·(-log(1 - q)) for add, whose loss never exceeds -log(1 - q). Returns the rows
    ``(direction, ε, closed form, mpmath)`` and the largest relative difference where mpmath's δ exceeds 1e-300."""
    eps_check = {"remove": np.linspace(-0.2, 2.0, n_points), "add": np.linspace(-0.2, -0.9 * math.log1p(-q), n_points)}
    worst_rel, rows = 0.0, []
    for direction in ("remove", "add"):
        for e in eps_check[direction]:
            ref = truth.subsampled_gaussian_profile_mpmath(sigma, q, direction, e, dps=40)
            ours = float(mech.pair(direction).delta(e))
            rel = abs(ours - ref) / ref if ref > 0 else abs(ours)
            worst_rel = max(worst_rel, rel if ref > 1e-300 else 0.0)
            rows.append((direction, e, ours, ref))
    return rows, worst_rel


def show_profile_check(rows, sigma: float, q: float) -> None:
    """The table of :func:`profile_check`."""
    show_table(
        [
            dict(direction=d, eps=f"{e:.4f}", closed=o, mpmath=r, rel=sci(abs(o - r) / r, 2) if r > 0 else "(zero)")
            for d, e, o, r in rows
        ],
        headers=dict(eps="ε", closed="closed form δ", mpmath="mpmath δ", rel="rel. difference"),
        caption=f"One step, σ = {sigma}, q = {q}: closed form vs mpmath",
        digits=12,
    )


GAUSS_CASES = ((1.0, 1), (math.sqrt(3.0), 3), (5.0, 25), (20.0, 400))


def gaussian_brackets(discretization: float, cases=GAUSS_CASES, epsilons=(0.0, 0.5, 1.0, 2.0)) -> list[tuple]:
    """For each (σ, T) of ``cases``: the PLD bracket on δ(ε) of T Gaussian mechanisms with noise σ and the exact
    δ of μ-GDP with μ = √T/σ (:func:`dputils.curves.gdp_delta`), as rows ``(σ, T, ε, lower, exact, upper)``."""
    rows = []
    for s_, T_ in cases:
        acc = PLDAccountant(discretization=discretization).compose(GaussianMechanism(s_), T_)
        mu = math.sqrt(T_) / s_
        for e in epsilons:
            r = acc.get_delta(e)
            rows.append((s_, T_, e, r.lower, float(dpcurves.gdp_delta(e, mu)), r.upper))
    return rows


def show_gaussian_brackets(rows) -> None:
    """The table of :func:`gaussian_brackets`."""
    show_table(
        [
            dict(sigma=s_, T=T_, eps=e, lower=lo, exact=ex, upper=up, inside=lo <= ex <= up)
            for s_, T_, e, lo, ex, up in rows
        ],
        headers=dict(sigma="σ", eps="ε", lower="PLD lower", exact="exact μ-GDP δ", upper="PLD upper"),
        caption="Composed Gaussians: PLD bracket against the exact δ",
        digits=10,
    )


def monte_carlo_rows(mech, steps: int, n_samples: int, rng, epsilons=(0.25, 0.5, 1.0)) -> list[tuple]:
    """Both directions of ``mech``: the Monte Carlo profile of ``steps`` compositions
    (:func:`dputils.truth.monte_carlo_profile`, remove drawn first from ``rng``) and the PLD bracket, as rows
    ``(direction, ε, estimate, standard error, lower, upper)``."""
    rows = []
    for d in ("remove", "add"):
        est, se = truth.monte_carlo_profile(mech.pair(d), steps, epsilons, n_samples, rng)
        acc = PLDAccountant(direction=d).compose(mech, steps)
        for e, m_, s_ in zip(epsilons, est, se):
            r = acc.get_delta(e)
            rows.append((d, e, m_, s_, r.lower, r.upper))
    return rows


def show_monte_carlo(rows, steps: int) -> None:
    """The table of :func:`monte_carlo_rows`."""
    show_table(
        [dict(direction=d, eps=e, mc=est, se=se, lower=lo, upper=up) for d, e, est, se, lo, up in rows],
        headers=dict(eps="ε", mc="Monte Carlo δ", se="std. error", lower="PLD lower", upper="PLD upper"),
        caption=f"σ = 0.8, q = 0.05, {steps} steps: Monte Carlo vs PLD",
        digits=5,
    )


def dp_accounting_rows(cases, delta: float, discretization: float) -> list[tuple]:
    """For each (mechanism, T) of ``cases``: our PLD bracket on ε(δ), dp_accounting's PLD ε, our RDP ε on the
    orders 2..64 without refinement and dp_accounting's RDP ε on the same orders
    (:func:`dputils.baselines.dp_accounting_event_epsilons`), as rows
    ``(name, T, PLD lower, PLD upper, dp_accounting PLD, RDP, dp_accounting RDP)``."""
    rows = []
    for m, T in cases:
        ours = PLDAccountant(discretization=discretization).compose(m, T).get_epsilon(delta)
        rdp_ours = RDPAccountant(orders=range(2, 65), refine=False).compose(m, T).get_epsilon(delta).value
        dpa_pld, dpa_rdp = baselines.dp_accounting_event_epsilons(m, T, delta, range(2, 65))
        name = (
            f"subsampled Gaussian σ={m.sigma:g}, q={m.q:g}"
            if isinstance(m, SubsampledGaussianMechanism)
            else f"Laplace b={m.scale:g}"
        )
        rows.append((name, T, ours.lower, ours.value, dpa_pld, rdp_ours, dpa_rdp))
    return rows


def show_dp_accounting(rows, delta: float) -> None:
    """The table of :func:`dp_accounting_rows`."""
    show_table(
        [dict(mechanism=n, T=T, lo=lo, up=up, dpa=th, r1=r1, r2=r2) for n, T, lo, up, th, r1, r2 in rows],
        headers=dict(
            lo="PLD lower (ours)",
            up="PLD upper (ours)",
            dpa="PLD (dp_accounting)",
            r1="RDP (ours)",
            r2="RDP (dp_accounting)",
        ),
        caption=f"ε at δ = {sci(delta, 1)}: our accountants vs dp_accounting",
        digits=6,
    )


# TensorFlow Privacy's classic order grid: 1.1, 1.2, ..., 10.9 and 12, ..., 63
TFP_ORDERS = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64))
MNIST_SETTINGS = [(1.1, 60, 3.01), (1.3, 15, 1.19), (0.7, 45, 7.10)]


def mnist_table(delta: float = 1e-5, grid: float = 1e-4, q: float = 256 / 60000, settings=MNIST_SETTINGS):
    """The MNIST DP-SGD table: for each (σ, epochs, published ε), T = ⌈epochs/q⌉ steps of the subsampled
    Gaussian and ε(δ) by RDP with the classic conversion on :data:`TFP_ORDERS`, our default RDP (modern
    conversion, refined order), RDP on the integer orders 2..256, the PLD bracket (grid ``grid``) and GDP's
    CLT; ``status`` says whether the classic RDP matches the published value to 0.005."""
    table = []
    for s_, epochs, published in settings:
        T_ = int(math.ceil(epochs / q))
        m = SubsampledGaussianMechanism(s_, q)
        pld = PLDAccountant(discretization=grid).compose(m, T_).get_epsilon(delta)

        def eps_of(acc):
            return acc.compose(m, T_).get_epsilon(delta).value

        row = dict(
            sigma=s_,
            epochs=epochs,
            steps=T_,
            published=published,
            rdp_classic=eps_of(RDPAccountant(orders=TFP_ORDERS, conversion="classic", refine=False)),
            rdp=eps_of(RDPAccountant()),
            rdp_integer=eps_of(RDPAccountant(orders=range(2, 257), refine=False)),
            pld_lower=pld.lower,
            pld=pld.value,
            gdp=eps_of(GDPAccountant()),
        )
        row["status"] = "pass" if within(row["rdp_classic"], published, 0.005) else "fail"
        table.append(row)
    return table


def show_mnist_table(table) -> None:
    """The table of :func:`mnist_table`."""
    show_table(
        table,
        columns=["sigma", "epochs", "published", "rdp_classic", "status", "rdp_integer", "rdp", "pld", "gdp"],
        headers=dict(
            sigma="σ",
            published="published ε",
            rdp_classic="RDP, classic",
            status="vs published",
            rdp_integer="RDP, integer orders",
            rdp="RDP, modern",
            pld="PLD (upper)",
            gdp="GDP (approx.)",
        ),
        caption="MNIST DP-SGD (q = 256/60000, δ = 10⁻⁵): ε by accountant",
        digits=4,
    )


def epsilon_curves(mech, steps, delta: float, discretization: float):
    """ε(δ) of ``mech`` at each T of ``steps`` by the PLD bracket (``pld``, ``pld_lower``), our default RDP
    (``rdp``), RDP with the classic conversion on orders 2..256 (``rdp-old``) and GDP (``gdp``). Returns the
    curves and the seconds spent in the PLD accountant."""
    curves = {"pld": [], "pld_lower": [], "rdp": [], "rdp-old": [], "gdp": []}
    t_pld = 0.0
    for T_ in map(int, steps):
        t0 = time.perf_counter()
        r = PLDAccountant(discretization=discretization).compose(mech, T_).get_epsilon(delta)
        t_pld += time.perf_counter() - t0
        curves["pld"].append(r.value)
        curves["pld_lower"].append(r.lower)
        for key, acc in (
            ("rdp", RDPAccountant()),
            ("rdp-old", RDPAccountant(orders=range(2, 257), conversion="classic")),
            ("gdp", GDPAccountant()),
        ):
            curves[key].append(acc.compose(mech, T_).get_epsilon(delta).value)
    return curves, t_pld
