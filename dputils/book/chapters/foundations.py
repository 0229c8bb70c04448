"""Figures and tables of the foundations chapter, drawn with :mod:`dputils.book.plotting`'s conventions; the
numbers come from :mod:`dputils.mechanisms`, :mod:`dputils.curves`, :mod:`dputils.accountants`,
:mod:`dputils.truth` (``subsampled_gaussian_profile_check``) and :mod:`dputils.baselines`
(``gaussian_pld_brackets``, ``monte_carlo_pld_rows``, ``dp_accounting_comparison_rows``,
``mnist_dpsgd_rows``, ``epsilon_against_steps``)."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np

from ... import baselines
from ... import curves as dpcurves
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


def show_profile_check(rows, sigma: float, q: float) -> None:
    """The table of :func:`dputils.truth.subsampled_gaussian_profile_check`."""
    show_table(
        [
            dict(direction=d, eps=f"{e:.4f}", closed=o, mpmath=r, rel=sci(abs(o - r) / r, 2) if r > 0 else "(zero)")
            for d, e, o, r in rows
        ],
        headers=dict(eps="ε", closed="closed form δ", mpmath="mpmath δ", rel="rel. difference"),
        caption=f"One step, σ = {sigma}, q = {q}: closed form vs mpmath",
        digits=12,
    )


def show_gaussian_brackets(rows) -> None:
    """The table of :func:`dputils.baselines.gaussian_pld_brackets`."""
    show_table(
        [
            dict(sigma=s_, T=T_, eps=e, lower=lo, exact=ex, upper=up, inside=lo <= ex <= up)
            for s_, T_, e, lo, ex, up in rows
        ],
        headers=dict(sigma="σ", eps="ε", lower="PLD lower", exact="exact μ-GDP δ", upper="PLD upper"),
        caption="Composed Gaussians: PLD bracket against the exact δ",
        digits=10,
    )


def show_monte_carlo(rows, steps: int) -> None:
    """The table of :func:`dputils.baselines.monte_carlo_pld_rows`."""
    show_table(
        [dict(direction=d, eps=e, mc=est, se=se, lower=lo, upper=up) for d, e, est, se, lo, up in rows],
        headers=dict(eps="ε", mc="Monte Carlo δ", se="std. error", lower="PLD lower", upper="PLD upper"),
        caption=f"σ = 0.8, q = 0.05, {steps} steps: Monte Carlo vs PLD",
        digits=5,
    )


def show_dp_accounting(rows, delta: float) -> None:
    """The table of :func:`dputils.baselines.dp_accounting_comparison_rows`."""
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


def mnist_table(delta: float = 1e-5, grid: float = 1e-4, q: float = 256 / 60000):
    """The MNIST DP-SGD table (:func:`dputils.baselines.mnist_dpsgd_rows`) with ``status``: whether the classic
    RDP matches the published value to 0.005."""
    table = baselines.mnist_dpsgd_rows(delta=delta, grid=grid, q=q)
    for row in table:
        row["status"] = "pass" if within(row["rdp_classic"], row["published"], 0.005) else "fail"
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
