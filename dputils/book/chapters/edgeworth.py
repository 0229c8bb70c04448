"""The Edgeworth chapter's tables, figures and target bookkeeping (book tooling).

The numbers come from the library (:func:`dputils.baselines.comparison_row`, :mod:`dputils.truth`,
:mod:`dputils.accountants.edgeworth`); this module only records, shows and draws them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import plotting
from ..results import glue
from ..scorecard import Targets
from ..tables import sci, show_table

# column headers of the reproduction tables (comparison_row keys)
HEAD = {
    "m": "m",
    "truth": "truth ε",
    "ew0": "AEA 0",
    "ew1": "AEA 1",
    "ew2": "AEA 2 (EW_EST)",
    "ew3": "AEA 3",
    "gdp": "GDP",
    "rdp": "RDP",
    "ew_low": "EW_LOW",
    "ew_upp": "EW_UPP",
    "Delta_X": "Δ_X",
    "Delta_Y": "Δ_Y",
}
ESTIMATES = ["m", "truth", "ew0", "ew1", "ew2", "ew3", "gdp", "rdp"]


def glue_all(**values: Any) -> None:
    """Glue each keyword as a hidden value (``{glue:text}`name``` in the prose)."""
    for name, value in values.items():
        glue(name, value, display=False)


def show_rows(rows: list[dict[str, Any]], cols: Sequence[str], caption: str, rdp: bool = True):
    """A reproduction table of :func:`~dputils.baselines.comparison_row` rows (the RDP column only if run)."""
    return show_table(rows, columns=[c for c in cols if rdp or c != "rdp"], headers=HEAD, caption=caption)


def record_at(tg: Targets, id: str, rows: list[dict[str, Any]], m: int, key: str, run: bool = True) -> None:
    """Record target ``id`` (from the chapter's table) with ``row[key]`` of the row at ``m``.

    Records it as not run, with the reason, when ``run`` is false (the RDP baseline is off) or this run's
    parameters have no row at ``m`` (the smoke profile)."""
    by_m = {r["m"]: r for r in rows}
    why = "run_rdp is off" if not run else f"m = {m} is not in this run's parameters (smoke profile)"
    tg.record(id, by_m[m][key] if run and m in by_m else None, ran=run and m in by_m, not_run_reason=why)


def cumulant_table(tg: Targets, ids: Iterable[str]):
    """The one-step cumulant targets (T8) as a table: ours, the anchor and the relative error."""
    recs = {r["id"]: r for r in tg.records}
    rows = []
    for tid in ids:
        _, name, lab = tid.split()
        ours, ref = recs[tid]["ours"], recs[tid]["paper"]
        rows.append({"PLLR": name, "cumulant": lab, "ours": ours, "anchor": ref, "rel. error": abs(ours / ref - 1)})
    return show_table(rows, caption="One-step cumulants, σ = 0.8, p = 0.01 (tolerance 10⁻⁵ relative)", digits=6)


def _axes_style(ax, title: str) -> None:
    ax.set_xlabel("compositions m")
    ax.set_ylabel(r"$\varepsilon$")
    ax.set_title(title)


def figure2(left: list[dict], mid: list[dict], rdp: bool = True):
    """Figure 2 of Wang et al., recomputed: truth, AEA orders 2 and 3, GDP and RDP against m (two panels)."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plotting.new_figure(ncols=2, squeeze=False)
    for ax, rows, title in (
        (axes[0, 0], left, r"$\sigma=0.8$, $p=0.01$, $\delta=0.015$"),
        (axes[0, 1], mid, r"$\sigma=1$, $p=0.05$, $\delta=10^{-5}$"),
    ):
        m = [r["m"] for r in rows]
        col = lambda k: [r[k] for r in rows]  # noqa: E731
        ax.plot(m, col("truth"), "-", label="truth", color=plotting.color("truth"))
        ax.plot(m, col("ew2"), "o-", label="EW_EST (AEA, order 2)", color=plotting.color("edgeworth"))
        ax.plot(m, col("ew3"), "--", label="AEA order 3", color=plotting.color("edgeworth"), alpha=0.6)
        ax.plot(m, col("gdp"), "s-", label="GDP (CLT)", color=plotting.color("gdp"))
        if rdp:
            ax.plot(m, col("rdp"), "^-", label="RDP", color=plotting.color("rdp"))
        _axes_style(ax, title)
    axes[0, 0].set_xscale("log")
    axes[0, 0].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[0, 0].legend(loc="best", framealpha=1)
    fig.tight_layout()
    plt.show()


def figure3(fig3: Mapping[str, list[dict]], rdp: bool = True):
    """Figure 3 of Wang et al., recomputed: EW_EST and the EEAI interval against the truth (left, mid_a)."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    titles = {"left": r"$p=0.4/\sqrt{m}$", "mid_a": r"$p=1/\sqrt{m\ln m}$"}
    fig, axes = plotting.new_figure(ncols=2, squeeze=False)
    for ax, name in zip(axes[0], ("left", "mid_a")):
        rows = fig3[name]
        m = [r["m"] for r in rows]
        col = lambda k: [r[k] for r in rows]  # noqa: E731
        ew = plotting.color("edgeworth")
        ax.plot(m, col("truth"), "-", color=plotting.color("truth"), label="truth")
        ax.plot(m, col("ew2"), "o-", color=ew, label="EW_EST")
        up = [r["ew_upp"] if math.isfinite(r["ew_upp"]) else np.nan for r in rows]
        ax.plot(m, up, "v--", color=ew, label="EW_UPP (EEAI)")
        ax.plot(m, col("ew_low"), "^--", color=ew, label="EW_LOW (EEAI)")
        if rdp:
            ax.plot(m, col("rdp"), "s-", color=plotting.color("rdp"), label="RDP")
        ax.set_xscale("log")
        _axes_style(ax, f"{name}: " + titles[name])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), framealpha=1)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    plt.show()


def error_trend(rows: list[dict[str, Any]]) -> str:
    """How |EW_EST − truth| evolves over the rows' m, as a phrase for the prose."""
    errs = {r["m"]: abs(r["ew2"] - r["truth"]) for r in rows}
    ms = sorted(errs)
    peak = max(errs, key=errs.get)

    def at(m):
        return f"{sci(errs[m])} at m = {m:,}"

    if len(ms) == 1:
        return f"is {at(ms[0])}"
    if peak in (ms[0], ms[-1]):
        return f"goes from {at(ms[0])} to {at(ms[-1])}"
    return f"is {at(ms[0])}, rises to {at(peak)} and falls to {at(ms[-1])}"


def prv_table(truth: float, ew: float, prv: Sequence[float], seconds: float, eps_error: float):
    """Figure 3 (middle) at m = 1e6: the truth, EW_EST and the PRV accountant's estimate and bracket."""
    low, est, up, grid = prv
    rows = [
        {"method": "truth (contour integral)", "ε": truth, "ε − truth": 0.0},
        {"method": "EW_EST (AEA, order 2)", "ε": ew, "ε − truth": ew - truth},
        {
            "method": f"PRV estimate (eps_error {eps_error:g})",
            "ε": est,
            "ε − truth": est - truth,
            "seconds": seconds,
            "grid points": grid,
        },
        {"method": "PRV lower", "ε": low, "ε − truth": low - truth},
        {"method": "PRV upper", "ε": up, "ε − truth": up - truth},
    ]
    return show_table(
        rows,
        columns=["method", "ε", "ε − truth", "seconds", "grid points"],
        caption="Figure 3 (middle), m = 1e6, σ = 0.8, δ = 0.1",
        digits=5,
    )


def spa_table(side: list[dict[str, Any]]):
    """Edgeworth (order 2) and saddle-point estimates against the truth, with the SPA bracket."""
    return show_table(
        side,
        columns=["delta", "m", "truth", "ew2_err", "spa_err", "spa_lower", "spa_upper"],
        headers={
            "delta": "δ",
            "truth": "truth ε",
            "ew2_err": "EW_EST − truth",
            "spa_err": "SPA − truth",
            "spa_lower": "SPA lower",
            "spa_upper": "SPA upper",
        },
        caption="Edgeworth (order 2) and saddle-point estimates vs the truth",
    )


def work_table(ms: Sequence[int], times, evals, times_eeai, evals_eeai):
    """The Edgeworth accountant's cost against m: seconds and one-step moment evaluations, AEA and AEA + EEAI."""
    return show_table(
        [
            {"m": m, "AEA seconds": a, "moment evaluations": e, "AEA + EEAI seconds": b, "moment evaluations (EEAI)": f}
            for m, a, e, b, f in zip(ms, times, evals, times_eeai, evals_eeai)
        ],
        caption="Edgeworth accountant, σ = 0.8, p = 0.01, δ = 0.1, cold cache "
        "(the bracket search is skipped where the bound is vacuous)",
    )


def tail_table(pair_rows: Mapping[str, tuple], eps, bound, m: int):
    """Prop. 4.5 against Monte Carlo: the Q-tail frequency of each pair next to the bound, at each ε."""
    rows = [
        {"pair": d, "ε": e_, "Monte Carlo tail": f_, "Prop. 4.5 bound": b_}
        for d, freq in pair_rows.items()
        for e_, f_, b_ in zip(eps, freq, bound)
    ]
    return show_table(rows, caption=f"Q-tail Pr[ΣX ≥ ε], subsampled Laplace p = 0.3, m = {m}")
