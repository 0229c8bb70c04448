"""Tables, maps and checks of the accountant atlas chapter.

They read the rows of :mod:`dputils.book.atlas` (one dict per point, columns :data:`dputils.book.atlas.COLUMNS`) and
recompute points with :func:`dputils.book.atlas.atlas_point`. The summaries here (verdict counts, farthest
points, failures, the recomputation check) would sit in :mod:`dputils.book.atlas` itself; they are kept here while
that module is being reorganized.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from ...curves import gdp_epsilon
from .. import atlas, plotting, results

NAMES = dict(pld="PLD", rdp="RDP", gdp="GDP (CLT)", spa="SPA", edgeworth="Edgeworth", prv="PRV")
MAPPED = ["rdp", "gdp", "spa", "edgeworth", "prv"]
FLOOR = 1e-4  # |r| below this is drawn as 0
NOREF, FAILED = 10.0, 11.0  # sentinel values of the colour map


def verdict_summary(rows, deltas, accountants) -> list[dict]:
    """Per δ and accountant: the number of points of each verdict, the median and largest |r| (signed
    relative error against the PLD bracket, 0 inside) and the median seconds per point."""
    summary = []
    for d in deltas:
        at_d = [r for r in rows if r["delta"] == d]
        for a in accountants:
            err = [abs(r[f"{a}_relerr"]) for r in at_d if r[f"{a}_relerr"] != ""]
            sec = [r[f"{a}_seconds"] for r in at_d if r[f"{a}_seconds"] != ""]
            summary.append(
                {
                    "δ": d,
                    "accountant": NAMES[a],
                    **{v: sum(r[f"{a}_verdict"] == v for r in at_d) for v in atlas.VERDICTS},
                    "median |r|": float(np.median(err)) if err else "",
                    "max |r|": float(np.max(err)) if err else "",
                    "median s": float(np.median(sec)) if sec else "",
                }
            )
    return summary


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


def recompute(rows, accountants, n: int, max_seconds: float, seed: int):
    """Recompute ``n`` points drawn at random (``seed``) among those whose accountants took less than
    ``max_seconds`` in all. Returns the points checked, the largest relative change of each accountant's ε,
    and the problems found: an ε outside :data:`dputils.book.atlas.TOLERANCES`, a changed verdict, or a stored
    failure that no longer fails with the same kind of error (empty when all agree)."""
    cheap = [r for r in rows if sum(r[f"{a}_seconds"] or 0.0 for a in accountants) < max_seconds]
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(cheap), size=min(n, len(cheap)), replace=False)
    checked, worst, problems = [], {a: 0.0 for a in accountants}, []
    for idx in sorted(pick):
        old = cheap[idx]
        new = atlas.atlas_point(old["sigma"], old["q"], old["T"], old["delta"])
        for a in accountants:
            e_old, e_new = old[f"{a}_eps"], new[f"{a}_eps"]
            if e_old == "":
                kind = old[f"{a}_error"].split(":")[0]
                if not new[f"{a}_error"].startswith(kind):
                    problems.append((a, "error", old, new))
                continue
            rel = abs(e_new - e_old) / max(abs(e_old), 1e-300)
            worst[a] = max(worst[a], rel)
            if rel > atlas.TOLERANCES[a]:
                problems.append((a, "eps", e_old, e_new))
            if new[f"{a}_verdict"] != old[f"{a}_verdict"]:
                problems.append((a, "verdict", old, new))
        checked.append({k: old[k] for k in ("sigma", "q", "T", "delta")})
    return checked, worst, problems


def disjoint(ref, a) -> list[dict]:
    """The points of ``ref`` where accountant ``a``'s certified bracket misses the PLD bracket."""
    out = []
    for r in ref:
        lo, hi = r[f"{a}_lower"], r[f"{a}_upper"]
        if lo == "" or hi == "":
            continue
        if hi < r["ref_lower"] or lo > r["ref_upper"]:
            out.append(r)
    return out


def farthest(ref, accountants) -> list[dict]:
    """Per accountant and verdict (optimistic, pessimistic): how many points, and the farthest one."""
    find = []
    for a in accountants:
        for v in ("optimistic", "pessimistic"):
            sel = [r for r in ref if r[f"{a}_verdict"] == v]
            if not sel:
                continue
            far = max(sel, key=lambda r: abs(r[f"{a}_relerr"]))
            find.append(
                {
                    "accountant": NAMES[a],
                    "verdict": v,
                    "points": len(sel),
                    "largest |r|": abs(far[f"{a}_relerr"]),
                    "at σ": far["sigma"],
                    "q": far["q"],
                    "T": far["T"],
                    "δ": far["delta"],
                }
            )
    return find


def failures(rows, accountants) -> list[dict]:
    """Per accountant: the number of failed points and the kinds of error (all δ)."""
    out = []
    for a in accountants:
        failed = [r for r in rows if r[f"{a}_verdict"] == "failed"]
        kinds = sorted({r[f"{a}_error"].split(":")[0] for r in failed})
        out.append({"accountant": NAMES[a], "failures": len(failed), "kinds": ", ".join(kinds) or "none"})
    return out


def load_rows(source: str, data_file: str, grid: str, sigmas, deltas) -> list[dict]:
    """The atlas table: the committed CSV ``data_file`` (relative to the checkout) restricted to ``sigmas`` and
    ``deltas`` (empty: all) for ``source == "file"``, or the grid ``grid`` computed here for ``"compute"``."""
    if source == "file":
        path = Path(data_file) if Path(data_file).is_absolute() else results.repo_root() / data_file
        keep_s, keep_d = [float(s) for s in sigmas], [float(d) for d in deltas]
        return [
            r
            for r in atlas.read_csv(path)
            if (not keep_s or r["sigma"] in keep_s) and (not keep_d or r["delta"] in keep_d)
        ]
    if source == "compute":
        return atlas.atlas_table(atlas.grid_points(grid, sigmas, deltas))
    raise ValueError(f"source must be 'file' or 'compute', got {source!r}")


def gaussian_rows(sigmas, steps, delta: float) -> list[dict]:
    """At q = 1, T steps of the Gaussian mechanism are exactly μ-GDP with μ = √T/σ: one row per (σ, T) with
    the closed-form ε(δ) (:func:`dputils.curves.gdp_epsilon`) and the PLD bracket and grid width that
    :func:`dputils.atlas.atlas_point` finds by the atlas's ladder."""
    out = []
    for s in sigmas:
        for t in steps:
            r = atlas.atlas_point(s, 1.0, int(t), delta, accountants=("pld",))
            out.append(
                {
                    "σ": s,
                    "T": int(t),
                    "exact ε": gdp_epsilon(delta, math.sqrt(t) / s),
                    "PLD lower": r["ref_lower"],
                    "PLD upper": r["ref_upper"],
                    "h": r["ref_h"],
                }
            )
    return out
