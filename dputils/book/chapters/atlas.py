"""The maps and the time figure of the accountant atlas chapter (presentation only).

They draw the rows of :mod:`dputils.book.atlas` (one dict per point, columns :data:`dputils.book.atlas.COLUMNS`);
the summaries (verdict counts, farthest points, failures, the recomputation check, the Gaussian rows) are
computed by :mod:`dputils.book.atlas` itself.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from .. import atlas, plotting

NAMES = atlas.LABELS
MAPPED = ["rdp", "gdp", "spa", "edgeworth", "prv"]
FLOOR = 1e-4  # |r| below this is drawn as 0
NOREF, FAILED = 10.0, 11.0  # sentinel values of the colour map


def _signed_log(r: float) -> float:
    if r == 0 or abs(r) < FLOOR:
        return 0.0
    return math.copysign(min(math.log10(abs(r) / FLOOR), 5.0), r)


def _panel_values(rows, a, sigma, delta, ts, qs):
    z = np.full((len(ts), len(qs)), np.nan)
    for r in rows:
        if r["sigma"] != sigma or r["delta"] != delta:
            continue
        i, j = ts.index(r["T"]), qs.index(r["q"])
        v = r[f"{a}_verdict"]
        if v == "failed":
            z[i, j] = FAILED
        elif v == "no reference":
            z[i, j] = NOREF
        else:
            z[i, j] = _signed_log(r[f"{a}_relerr"])
    return z


def draw_maps(rows, delta):
    """One row of heat maps per accountant of :data:`MAPPED`, one column per σ, cells over (q, T): the signed
    relative error on a log scale (white inside the bracket), grey without a reference, black failed."""
    sigmas = sorted({r["sigma"] for r in rows})
    qs = sorted({r["q"] for r in rows})
    ts = sorted({r["T"] for r in rows})
    nr, nc = len(MAPPED), len(sigmas)
    fig, axes = plt.subplots(
        nr,
        nc,
        figsize=(2.0 * nc + 1.2, 1.7 * nr + 0.6),
        squeeze=False,
        sharex=True,
        sharey=True,
        constrained_layout=True,
    )
    cmap = plt.get_cmap("RdBu_r")
    for i, a in enumerate(MAPPED):
        for j, s in enumerate(sigmas):
            ax = axes[i, j]
            z = _panel_values(rows, a, s, delta, ts, qs)
            img = ax.imshow(np.where(z > 5, np.nan, z), origin="lower", cmap=cmap, vmin=-5, vmax=5, aspect="auto")
            special = np.where(z == NOREF, 0, np.where(z == FAILED, 1, np.nan))
            ax.grid(False)
            ax.imshow(special, origin="lower", aspect="auto", vmin=0, vmax=1, cmap=ListedColormap(["0.8", "0.0"]))
            ax.set_xticks(range(len(qs)), [f"{q:.0e}".replace("e-0", "e-") for q in qs], rotation=90, fontsize=7)
            ax.set_yticks(range(len(ts)), [f"{t:.0e}".replace("e+0", "e") for t in ts], fontsize=7)
            if i == 0:
                ax.set_title(f"σ = {s:g}", fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{NAMES[a]}\nT", fontsize=8)
            if i == nr - 1:
                ax.set_xlabel("q", fontsize=8)
    cb = fig.colorbar(img, ax=axes, shrink=0.6, ticks=[-5, -3, -1, 0, 1, 3, 5])
    cb.ax.set_yticklabels(["≤ −10", "−0.1", "−0.001", "0", "0.001", "0.1", "≥ 10"], fontsize=7)
    cb.set_label("signed relative error r", fontsize=8)
    return fig


def plot_time(rows, accountants):
    """Median wall time per point of each accountant against T (over every σ, q and δ)."""
    ts = sorted({r["T"] for r in rows})
    fig, ax = plotting.new_figure()
    for a in accountants:
        med = []
        for t in ts:
            sec = [r[f"{a}_seconds"] for r in rows if r["T"] == t and r[f"{a}_seconds"] != ""]
            med.append(np.median(sec) if sec else np.nan)
        ax.loglog(ts, med, "o-", label=NAMES[a], color=plotting.color(a))
    ax.set_xlabel("steps T")
    ax.set_ylabel("median seconds per point")
    ax.legend(fontsize=8, ncol=2)
    return fig
