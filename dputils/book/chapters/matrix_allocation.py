"""Figures, tables and target bookkeeping of the chapter ``notebooks/matrix_allocation.md`` (matrix mechanisms
under random allocation). The numbers they show are computed by :mod:`dputils.matrix` in the notebook."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from .. import plotting
from ..results import glue
from ..tables import sci, show_table


def glue_all(prefix: str, values: Mapping[str, Any]) -> None:
    """Glue every ``values[key]`` as ``prefix + key`` (the numbers the prose quotes)."""
    for k, v in values.items():
        glue(f"{prefix}{k}", v)


def sigma_axes(ax, epsilons: Sequence[float], title: str, ylabel: str = "calibrated σ") -> None:
    """A calibrated-σ-against-ε panel: log ε axis ticked at the target epsilons, a legend."""
    ax.set(xscale="log", xlabel="ε", ylabel=ylabel, title=title)
    ax.set_xticks(epsilons, [f"{e:g}" for e in epsilons])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.legend(loc="best", framealpha=1)


#: line style and colour of each curve kind of the calibrated-σ figures
_CURVES = {
    "renyi": ("o-", "matrix-renyi"),
    "mc": ("s--", "matrix-mc"),
    "condcomp": ("D-", "matrix-condcomp"),
    "poisson": ("^:", "pld"),
    "tight": ("D-", None),
    "remove": (":", None),
}


def plot_sigma_curves(
    panels: Sequence[tuple[str, Sequence[tuple[str, str, Sequence[float], Sequence[float]]]]],
    epsilons: Sequence[float],
    errors: Mapping[str, Sequence[float]] | None = None,
    ylabel: str = "calibrated σ",
):
    """Calibrated σ against ε, one panel per ``(title, curves)``; a curve is ``(kind, label, eps, sigma)`` with
    ``kind`` in ``renyi, mc, condcomp, poisson, tight, remove`` (the book's colours) or any other name (the
    colour cycle, solid line with dots). ``errors[label]`` draws ±2 standard errors as error bars."""
    if len(panels) == 1:
        fig, ax = plotting.new_figure()
        axes = [ax]
    else:
        fig, axes = plt.subplots(1, len(panels), figsize=(9.5, 4.0), constrained_layout=True)
    for ax, (title, curves) in zip(axes, panels):
        for kind, label, eps, sig in curves:
            style, col = _CURVES.get(kind, ("o-", None))
            kw = dict(color=plotting.color(col) if col else ("gray" if kind == "remove" else None), label=label)
            if errors and label in errors:
                ax.errorbar(eps, sig, yerr=2 * np.asarray(errors[label]), fmt=style, **kw)
            else:
                ax.plot(eps, sig, style, **kw)
        sigma_axes(ax, epsilons, title, ylabel)
    plt.show()


def plot_grams(grams: Mapping[str, np.ndarray], title: str) -> None:
    """Heatmaps of ``log10 G`` (three decades below the largest entry), one per strategy (Figure 1)."""
    fig, axes = plt.subplots(1, len(grams), figsize=(10, 3.6), constrained_layout=True)
    for ax, (name, G) in zip(axes, grams.items()):
        im = ax.imshow(np.log10(G + 1e-12), cmap="viridis", vmin=np.log10(G.max()) - 3)
        ax.set_title(name)
        ax.grid(False)
    fig.colorbar(im, ax=list(axes), label="$\\log_{10} G_{ij}$", shrink=0.8)
    fig.suptitle(title)
    plt.show()


def plot_dp_cost(timing: np.ndarray, bands: Sequence[int], slots: Sequence[int], order: int) -> None:
    """Seconds and peak MiB of one DP pass against the slots ``b``, one line per band count ``p`` (rows of
    ``timing``: ``p, b, seconds, peak bytes``)."""
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    for p in bands:
        sel = timing[:, 0] == p
        axes[0].loglog(timing[sel, 1], timing[sel, 2], "o-", label=f"p={p}")
        axes[1].loglog(timing[sel, 1], timing[sel, 3] / 2**20, "o-", label=f"p={p}")
    axes[0].set(xlabel="slots b", ylabel="seconds", title=f"DP time, orders 2..{order}")
    axes[1].set(xlabel="slots b", ylabel="peak MiB", title="DP peak memory (tracemalloc)")
    for ax in axes:
        ax.set_xticks(slots, [str(t) for t in slots])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[0].legend(loc="best", framealpha=1)
    plt.show()


_ALLOC_STYLES = {"union": "-", "global max": ":", "per-epoch max (e ≥ 1)": "--", "hybrid (e ≥ 2)": "-."}


def plot_posterior_allocations(
    alloc: Mapping[float, Mapping[str, np.ndarray]], epochs: int, label: str = "DP-SGD"
) -> None:
    """Figure 4: the bound on the posterior of the participating slot against the step, one panel per σ, one
    line per allocation of the failure probability."""
    fig, axes = plt.subplots(1, len(alloc), figsize=(9.5, 4.0), sharey=True, constrained_layout=True)
    for ax, (sig, a) in zip(axes, alloc.items()):
        steps = np.arange(1, len(next(iter(a.values()))) + 1)
        for k, v in a.items():
            ax.plot(steps, v, _ALLOC_STYLES.get(k, "-"), label=k)
        ax.set(yscale="log", xlabel="step n", title=f"{label}, N={steps.size}, k={epochs}, σ={sig:g}")
    axes[0].set_ylabel("bound on the posterior λ̄_b")
    axes[-1].legend(loc="lower right", framealpha=1)
    plt.show()


def plot_ternary_histograms(samples: Mapping[int, np.ndarray], b: int, epochs: int) -> None:
    """Figure 5: histograms of the ternary loss at the last step of each epoch (solid) and the first of the
    next (dashed), one panel per boundary."""
    fig, axes = plt.subplots(1, epochs - 1, figsize=(3.4 * (epochs - 1), 3.6), sharey=True, constrained_layout=True)
    for e, ax in zip(range(1, epochs), np.atleast_1d(axes)):
        for n, ls in ((e * b, "-"), (e * b + 1, "--")):
            ax.hist(samples[n], bins=80, density=True, histtype="step", ls=ls, label=f"step {n}")
        ax.set(xlabel="ternary privacy loss $L_b$", title=f"epoch {e} → {e + 1}")
        ax.legend(loc="upper left", framealpha=1)
    np.atleast_1d(axes)[0].set_ylabel("density")
    plt.show()


def delta_title(prefix: str, delta: float) -> str:
    """``prefix, δ=1×10⁻⁵`` (the δ of a figure's title in the book's number format)."""
    return f"{prefix}, δ={sci(delta, 1)}"


def remaining_panels_table(rest: Mapping[str, Mapping[str, Any]], n: int, eps: float, delta: float):
    """The table of the remaining Figure 3 panels: per strategy, the Rényi σ, the ε conditional composition
    certifies there, and (where computed) the Monte Carlo estimate of δ(ε) with its 99% bracket."""

    def mc(r: Mapping[str, Any], key: str) -> str:
        return sci(r["mc"][key], 2) if "mc" in r else "–"

    rows = [
        {
            "strategy": k,
            "Rényi σ": r["sigma"],
            "CondComp ε at it": r["condcomp_epsilon"],
            "MC δ at it": mc(r, "estimate"),
            "MC 99% bracket": f"[{mc(r, 'lower')}, {mc(r, 'upper')}]" if "mc" in r else "–",
            "seconds (CondComp)": r["seconds"],
        }
        for k, r in rest.items()
    ]
    caption = (
        f"N = {n}, k = 1, ε = {eps:g}, δ = {sci(delta, 1)}: ε certified by conditional composition at the "
        "Rényi σ, and a Monte Carlo estimate of δ(ε) there"
    )
    return show_table(rows, caption=caption)
