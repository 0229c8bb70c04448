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
from ..tables import diff, num, pow10, sci, show_table

#: the meaning of each parameter of the chapter (shown as a table next to the collapsed ``parameters`` cell)
PARAMETERS = {
    "delta": "target δ of the epsilons of this run",
    "sigma": "noise multiplier σ of the running example",
    "q": "sampling rate q of the running example",
    "max_steps": "largest number of steps T in the ε-against-steps figure",
    "n_step_points": "points on the steps axis of that figure",
    "mc_steps": "compositions in the Monte Carlo check of PLD",
    "mc_samples": "Monte Carlo samples of the summed privacy loss",
    "n_mpmath_points": "values of ε per direction checked against mpmath",
    "discretization": "grid width h of the PLD accountant",
    "seed": "seed of every random generator of the chapter",
}


#: Tick and axis label size (points) of the figures with log axes: 12 pt shows about 17 px high at the book's width,
#: so a superscript exponent is about 10 px.
TICK_PT = 12


def plot_directions(mech, sigma: float, q: float, eps_grid):
    """The privacy profiles of one step of ``mech`` in the add and remove directions, on a linear scale (top) and a
    log scale (bottom), one above the other so that each is as wide as the page's column."""
    fig, axes = plotting.new_figure(nrows=2, width=6.4, height=6.6, constrained_layout=True, sharex=True)
    for direction, ls in (("remove", "-"), ("add", "--")):
        d = mech.pair(direction).delta(eps_grid)
        axes[0].plot(eps_grid, d, ls, label=direction)
        axes[1].semilogy(eps_grid, np.maximum(d, 1e-300), ls, label=direction)
    axes[0].set(ylabel=r"$\delta(\varepsilon)$", title=f"one step, σ = {num(sigma)}, q = {num(q)}")
    axes[1].set(xlabel=r"$\varepsilon$", ylabel=r"$\delta(\varepsilon)$, log scale", ylim=(1e-30, 1))
    axes[1].yaxis.set_major_locator(matplotlib.ticker.LogLocator(numticks=7))
    plotting.sci_ticks(axes[0], "x")
    plotting.sci_ticks(axes[1])
    for ax in axes:  # the exponents of the log ticks (10⁻²⁰) are superscripts: tick labels above the style's size
        ax.tick_params(labelsize=TICK_PT)
        ax.xaxis.label.set_size(TICK_PT)
        ax.yaxis.label.set_size(TICK_PT)
    axes[0].legend(loc="upper right", framealpha=1)
    return fig


def direction_gap(mech, eps_grid) -> dict:
    """How the add and remove profiles of one step differ on ``eps_grid`` (the claims of the chapter's Fig. 1,
    measured on the figure's own grid): where ε ≤ 0, the largest excess of *add* over *remove* (absolute, and
    where), the smallest (negative if *remove* is ever larger there), and that excess relative to the largest δ
    drawn (the linear panel's height); where ε > 0, whether *remove* is at least *add* everywhere; the add
    direction's cut-off ``-log(1-q)`` (its loss never exceeds it, so its δ is 0 beyond), whether *add* is 0 on
    every grid point beyond it and *remove* positive; and *remove*'s δ at ε = 1."""
    e = np.asarray(eps_grid, dtype=float)
    rem, add = mech.pair("remove").delta(e), mech.pair("add").delta(e)
    neg = e <= 0
    d = add[neg] - rem[neg]
    k = int(np.argmax(d))
    cut = -np.log1p(-mech.q)
    beyond = e > cut
    return dict(
        add_excess_max=float(d[k]),
        add_excess_at=float(e[neg][k]),
        add_excess_min=float(d.min()),
        add_excess_of_height=float(d[k] / max(rem.max(), add.max())),
        remove_ge_add_above0=bool(np.all(rem[~neg] >= add[~neg])),
        cutoff=float(cut),
        add_zero_beyond=bool(np.all(add[beyond] == 0)),
        remove_positive_beyond=bool(np.all(rem[beyond] > 0)),
        remove_at_1=float(mech.pair("remove").delta(np.array([1.0]))[0]),
    )


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
    """Top: ε against the number of steps for each accountant (PLD as its certified bracket); bottom: each
    accountant's ε relative to PLD's upper bound; one above the other, each as wide as the page's column.
    ``curves`` maps ``pld``, ``pld_lower``, ``rdp``, ``rdp-old`` and ``gdp`` to one value per step count."""
    fig, axes = plotting.new_figure(nrows=2, width=6.4, height=7.0, constrained_layout=True, sharex=True)
    ax = axes[0]
    ax.fill_between(steps, curves["pld_lower"], curves["pld"], color=plotting.color("pld"), alpha=0.3)
    ax.loglog(steps, curves["pld"], color=plotting.color("pld"), label="PLD (certified bracket)")
    ax.loglog(steps, curves["rdp"], color=plotting.color("rdp"), label="RDP, modern conversion")
    ax.loglog(steps, curves["rdp-old"], color=plotting.color("rdp-old"), label="RDP, classic conversion")
    ax.loglog(steps, curves["gdp"], "--", color=plotting.color("gdp"), label="GDP (CLT approximation)")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 3.0)))
    plotting.sci_ticks(ax)
    ax.set(ylabel=rf"$\varepsilon$ at δ = {pow10(delta)}", title=f"σ = {num(sigma)}, q = {num(q)}")
    ax.legend(loc="upper left", framealpha=1)
    ax = axes[1]
    pld_arr = np.array(curves["pld"])
    for key, lab in (("rdp", "RDP, modern"), ("rdp-old", "RDP, classic"), ("gdp", "GDP")):
        ax.semilogx(steps, np.array(curves[key]) / pld_arr, color=plotting.color(key), label=lab)
    ax.axhline(1, color="k", lw=0.8)
    plotting.sci_ticks(ax)
    ax.set(xlabel="steps T", ylabel=r"$\varepsilon$ / $\varepsilon_{PLD}$", title="relative to PLD")
    ax.legend(loc="upper right", framealpha=1)
    for ax in axes:  # the exponents of the log ticks (10⁴) are superscripts: tick labels above the style's size
        ax.tick_params(labelsize=TICK_PT)
        ax.xaxis.label.set_size(TICK_PT)
        ax.yaxis.label.set_size(TICK_PT)
    return fig


def show_profile_check(rows, sigma: float, q: float) -> None:
    """The table of :func:`dputils.truth.subsampled_gaussian_profile_check`: δ at 4 digits and the relative
    difference to the quadrature (the point is their agreement)."""
    show_table(
        [
            dict(direction=d, eps=num(e), closed=o, rel=sci(abs(o - r) / r, 1) if r > 0 else "(zero)")
            for d, e, o, r in rows
        ],
        headers=dict(eps="ε", closed="δ (closed form)", rel="relative difference to mpmath"),
        caption=f"One step, σ = {num(sigma)}, q = {num(q)}: the closed form against 40-digit quadrature",
        digits=4,
    )


def show_gaussian_brackets(rows) -> None:
    """The table of :func:`dputils.baselines.gaussian_pld_brackets`: the exact δ, and the bracket's ends as
    differences from it."""
    show_table(
        [
            dict(
                sigma=num(s_),
                T=T_,
                eps=e,
                exact=ex,
                lower=diff(lo, ex),
                upper=diff(up, ex),
                width=sci((up - lo) / ex, 1) if ex > 0 else "—",
                inside=lo <= ex <= up,
            )
            for s_, T_, e, lo, ex, up in rows
        ],
        headers=dict(
            sigma="σ",
            eps="ε",
            exact="exact μ-GDP δ",
            lower="PLD lower − exact",
            upper="PLD upper − exact",
            width="relative width",
            inside="inside",
        ),
        caption="Composed Gaussians (μ = 1): the PLD bracket around the exact δ",
        digits=4,
    )


def show_monte_carlo(rows, steps: int) -> None:
    """The table of :func:`dputils.baselines.monte_carlo_pld_rows`: the estimate, its standard error, and its
    distance from the PLD bracket in standard errors (0 inside)."""

    def dist(est, se, lo, up):
        out = max(lo - est, est - up, 0.0)
        return num(out / se, 2) if se > 0 else "—"

    show_table(
        [
            dict(direction=d, eps=num(e), mc=est, se=se, lower=lo, upper=up, z=dist(est, se, lo, up))
            for d, e, est, se, lo, up in rows
        ],
        headers=dict(
            eps="ε", mc="Monte Carlo δ", se="std. error", lower="PLD lower", upper="PLD upper", z="outside by (s.e.)"
        ),
        caption=f"σ = 0.8, q = 0.05, {steps} steps: Monte Carlo against the PLD bracket",
        digits=3,
    )


def show_dp_accounting(rows, delta: float) -> None:
    """The table of :func:`dputils.baselines.dp_accounting_comparison_rows`: our ε and the relative differences from
    dp_accounting's."""
    show_table(
        [
            dict(
                mechanism=n,
                T=T,
                up=up,
                dup=sci((up - th) / th, 1),
                dlo=sci((lo - th) / th, 1),
                r1=r1,
                dr=diff(r1 / r2, 1.0, 1),
            )
            for n, T, lo, up, th, r1, r2 in rows
        ],
        headers=dict(
            up="PLD upper (ours)",
            dup="vs dp_accounting (rel.)",
            dlo="our lower vs theirs (rel.)",
            r1="RDP (ours)",
            dr="vs dp_accounting (rel.)",
        ),
        caption=f"ε at δ = {pow10(delta)}: our accountants against dp_accounting",
        digits=4,
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
