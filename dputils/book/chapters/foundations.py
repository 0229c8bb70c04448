"""Figures of the foundations chapter, drawn with :mod:`dputils.book.plotting`'s conventions; the numbers come
from :mod:`dputils.mechanisms`, :mod:`dputils.curves` and :mod:`dputils.accountants`."""

from __future__ import annotations

import matplotlib.ticker
import numpy as np

from ... import curves as dpcurves
from .. import plotting
from ..tables import sci


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
