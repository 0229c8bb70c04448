"""Figures, tables and target bookkeeping of the chapter ``notebooks/matrix_allocation.md`` (matrix mechanisms
under random allocation). The numbers they show are computed by :mod:`dputils.matrix` in the notebook."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from ...matrix.panels import FAMILIES
from .. import plotting
from ..benchmarks import RESULTS_DIR, find_recorded
from ..results import glue, glue_all
from ..tables import sci, show_table
from .gauss_audit import parameter_table as _parameter_table
from .gauss_audit import scorecard  # noqa: F401  (the compact scorecard, shared with the gauss_audit chapter)


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
) -> matplotlib.figure.Figure:
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
    return fig


def plot_grams(grams: Mapping[str, np.ndarray], title: str) -> matplotlib.figure.Figure:
    """Heatmaps of ``log10 G`` (three decades below the largest entry), one per strategy (Figure 1)."""
    fig, axes = plt.subplots(1, len(grams), figsize=(10, 3.6), constrained_layout=True)
    for ax, (name, G) in zip(axes, grams.items()):
        im = ax.imshow(np.log10(G + 1e-12), cmap="viridis", vmin=np.log10(G.max()) - 3)
        ax.set_title(name)
        ax.grid(False)
    fig.colorbar(im, ax=list(axes), label="$\\log_{10} G_{ij}$", shrink=0.8)
    fig.suptitle(title)
    return fig


def plot_dp_cost(
    timing: np.ndarray, bands: Sequence[int], slots: Sequence[int], order: int
) -> matplotlib.figure.Figure:
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
    return fig


_ALLOC_STYLES = {"union": "-", "global max": ":", "per-epoch max (e ≥ 1)": "--", "hybrid (e ≥ 2)": "-."}


def plot_posterior_allocations(
    alloc: Mapping[float, Mapping[str, np.ndarray]], epochs: int, label: str = "DP-SGD"
) -> matplotlib.figure.Figure:
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
    return fig


def plot_ternary_histograms(samples: Mapping[int, np.ndarray], b: int, epochs: int) -> matplotlib.figure.Figure:
    """Figure 5: histograms of the ternary loss at the last step of each epoch (solid) and the first of the
    next (dashed), one panel per boundary."""
    fig, axes = plt.subplots(1, epochs - 1, figsize=(3.4 * (epochs - 1), 3.6), sharey=True, constrained_layout=True)
    for e, ax in zip(range(1, epochs), np.atleast_1d(axes)):
        for n, ls in ((e * b, "-"), (e * b + 1, "--")):
            ax.hist(samples[n], bins=80, density=True, histtype="step", ls=ls, label=f"step {n}")
        ax.set(xlabel="ternary privacy loss $L_b$", title=f"epoch {e} → {e + 1}")
        ax.legend(loc="upper left", framealpha=1)
    np.atleast_1d(axes)[0].set_ylabel("density")
    return fig


def delta_title(prefix: str, delta: float) -> str:
    """``prefix, δ=1×10⁻⁵`` (the δ of a figure's title in the book's number format)."""
    return f"{prefix}, δ={sci(delta, 1)}"


def remaining_panels_table(rest: Mapping[str, Mapping[str, Any]], n: int, eps: float, delta: float):
    """The table of the remaining Figure 3 panels: per strategy, the Rényi σ, the ε conditional composition
    certifies there, and (where computed) the Monte Carlo estimate of δ(ε) with its 99% bracket; glues the mean
    seconds of one evaluation (nan, and no table, when not run)."""
    glue("ma_rest_seconds", float(np.mean([r["seconds"] for r in rest.values()])) if rest else float("nan"))
    if not rest:
        return None

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


# ---- bookkeeping: the parameters the prose names, the results file ------------------------------------------------

#: parameters of the notebook that the prose quotes (glued as ``ma_par_<name>``)
_PROSE_PARAMETERS = (
    "n_small", "n_large", "epochs_multi", "bands", "wide_bands", "rel_tol", "max_order", "timing_order",
    "fig4_epochs", "fig4_batches", "gram_n", "gram_epochs", "gram_bands", "tight_mc_samples",
)  # fmt: skip


def glue_parameters(params: Mapping[str, Any]) -> None:
    """Glue the parameter values the prose names (the reader sees values, not names) from the notebook's
    namespace ``params``: ``ma_par_<name>`` for :data:`_PROSE_PARAMETERS`, and the derived ``n_multi`` (steps of
    the multi-epoch panels), ``gram_b`` (slots of the Gram heatmaps) and the Monte Carlo σ grid as text."""
    p = params
    glue_all({k: p[k] for k in _PROSE_PARAMETERS}, prefix="ma_par_")
    glue_all(
        {
            "n_multi": p["epochs_multi"] * p["n_small"],
            "gram_b": p["gram_n"] // p["gram_epochs"],
            "tight_mc_sigmas": ", ".join(f"{x:g}" for x in p["tight_mc_sigmas"]),
        },
        prefix="ma_par_",
    )


#: the keys of ``results/matrix_allocation.json`` -> the notebook variables that hold them (in the file's order)
_RESULTS = dict(
    dp_bruteforce_worst_rel_error="worst", dp_bruteforce_cases="n_cases", feldman_shenfeld="fs_rows",
    epsilons="epsilons", delta="delta", sigma_dpsgd_renyi="sig_dpsgd", sigma_dpsgd_multi_epoch_renyi="sig_multi",
    sigma_dpsgd_large_renyi="sig_large", sigma_dpsgd_mc="sig_mc", sigma_dpsgd_mc_standard_error="sig_mc_se",
    sigma_poisson_pld="sig_poisson", factorisations="fact", dp_timing="timing", r2_add_mc="r2_add_mc",
    condcomp_lambda_b="lam4", condcomp_fig4_hybrid_best_fraction="best_frac", condcomp_epsilons="cc_eps",
    sigma_dpsgd_condcomp="sig_cc", sigma_bsr_condcomp="cc_bsr", sigma_bsr_prior_weights="prior_bsr",
    condcomp_wide_band="wide", sigma_bsr_renyi_paper_bands="ren_pe", condcomp_bisr="bisr",
    fig6_option13_gain_at_epoch_ends="gain6", renyi_mc_gap_bsr="gaps_bsr", condcomp_calibration_seconds="cc_seconds",
    fig5_ternary_loss="fig5", condcomp_multi_epoch="cc_multi", condcomp_gain_vs_batches="cc_gain",
    add_r2_exact_dpsgd="add_exact", sigma_dpsgd_renyi_tight="sig_dpsgd_tight",
    sigma_dpsgd_remove_only="sig_dpsgd_remove", sigma_bsr_renyi="sig_bsr_renyi", sigma_bsr_renyi_tight="sig_bsr_tight",
    sigma_bsr_mc="sig_bsr_mc", sigma_bsr_mc_standard_error="sig_bsr_mc_se", tight_noise_saving_dpsgd="saving_dpsgd",
    tight_noise_saving_bsr="saving_bsr", allocation_reference="rows_ref",
)  # fmt: skip


def results_values(ns: Mapping[str, Any]) -> dict[str, Any]:
    """The values of ``results/matrix_allocation.json`` besides the targets: under each key of :data:`_RESULTS`,
    the notebook variable (from its namespace ``ns``) it names, through :func:`str_keys`."""
    return str_keys({k: ns[v] for k, v in _RESULTS.items()})


def str_keys(values: Mapping[str, Any], drop: tuple[str, ...] = ("samples",)) -> dict[str, Any]:
    """``values`` ready for :func:`dputils.book.results.save`: every mapping's keys as strings (σ, ε, p keys become
    ``"2.0"``, ``"0.5"``, ``"4"``), arrays as lists, and the raw samples (keys in ``drop``) left out."""

    def conv(obj: Any) -> Any:
        if isinstance(obj, Mapping):
            return {str(k): conv(v) for k, v in obj.items() if k not in drop}
        if isinstance(obj, (list, tuple)):
            return [conv(v) for v in obj]
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        return obj

    return conv(values)


# ---- the setting and the validation ---------------------------------------------------------------------------------

#: entries ``G_00, G_50,50, G_50,51..54, G_0,99`` of the p = 4 Gram matrices (b = 100) checked by T10c
GRAM_IDX = ([0, 50, 50, 50, 50, 50, 0], [0, 50, 51, 52, 53, 54, 99])
#: our independent values of those entries (4 decimals), per ``(strategy, epochs)``
GRAM_REFERENCE = {
    ("bsr", 1): [1.4883, 1.4883, 0.8047, 0.5312, 0.3125, 0.0, 0.0],
    ("bsr", 10): [14.8828, 14.8828, 8.0469, 5.3125, 3.1250, 0.0, 7.2422],
    ("bisr", 1): [1.6224, 1.6224, 0.9810, 0.7546, 0.6013, 0.4563, 0.0],
    ("bisr", 10): [16.224, 16.224, 9.8099, 7.5461, 6.0133, 4.563, 8.8289],
}


def record_gram_entries(tg) -> float:
    """Record T10c: the entries :data:`GRAM_IDX` of the p = 4 BSR and BISR Gram matrices (b = 100, one and ten
    epochs), built by :func:`dputils.matrix.build_strategy`, against :data:`GRAM_REFERENCE` (:func:`gram_table`)."""
    from ...matrix import build_strategy

    got = {key: build_strategy(key[0], key[1], 100, 4).gram[GRAM_IDX] for key in GRAM_REFERENCE}
    worst = gram_table(got)
    tg.record("T10c", worst)
    return worst


def gram_table(got: Mapping[tuple[str, int], np.ndarray]) -> float:
    """Show the Gram entries :data:`GRAM_IDX` per ``(strategy, epochs)`` and return the largest absolute
    difference from :data:`GRAM_REFERENCE` over all of them (target T10c)."""
    worst = float(np.max(np.abs(np.concatenate([got[key] - GRAM_REFERENCE[key] for key in GRAM_REFERENCE]))))
    n_entries = sum(len(v) for v in GRAM_REFERENCE.values())
    show_table(
        [
            {"strategy": f"{n} p=4, k={k}", "G_00": g[0], "G_50,51": g[2], "G_50,53": g[4], "G_50,54": g[5],
             "G_0,99": g[6]}
            for (n, k), g in got.items()
        ],
        caption=f"Gram entries of the p = 4 strategies (b = 100); the largest difference of the {n_entries} checked "
        f"entries from our independent values is {sci(worst, 1)}",
    )  # fmt: skip
    return worst


#: The parameters the chapter's reader needs, with their meaning (the parameters cell, collapsed, has them all).
PARAMETERS = {
    "n_small": "steps N of the one-epoch panels (b = N batches)",
    "n_large": "steps of the large one-epoch DP-SGD panel",
    "epochs_multi": "epochs k of the multi-epoch panels",
    "bands": "bands p of BSR, BandMF and of BISR's inverse",
    "wide_bands": "bands of the wide BSR (Figures 2e, 3b)",
    "epsilons": "target epsilons of the calibrated curves",
    "delta": "target delta of every calibration",
    "max_order": "largest Rényi order for DP-SGD",
    "max_order_banded": "largest order for banded and dense C",
    "rel_tol": "relative width of every σ bracket",
    "mc_samples": "importance samples of the DP-SGD Monte Carlo",
    "fig4_epochs": "epochs k of the posterior curves (Figure 4)",
    "condcomp_discretization": "PLD grid width of conditional composition",
    "seed": "seed of every random generator",
}


def parameter_table(values: Mapping[str, Any]) -> None:
    """Show the parameters in :data:`PARAMETERS` with their meaning and this run's value."""
    _parameter_table(dict(values), PARAMETERS)


def record_accountant_weights(tg, id_: str, ref_id: str) -> list[float]:
    """Record ``id_``: the weight of the participating slot in the remove chain of conditional composition (DP-SGD,
    k = 1, b = 100, σ = 1, union bound at δ_E = 5·10⁻⁶) at steps 1, 2, 10, 50 and 100, against the independent
    values of ``ref_id`` (λ̄_b of the same setting; for DP-SGD the per-step pair is a subsampled Gaussian whose rate
    is λ̄_b, Corollary 4.4). It runs the accountant's own per-step path at the chapter's every profile (about a
    second), so a tail bound spent at the wrong significance (say the (b - 1) of the union bound dropped) fails
    here, not only at the full profile's calibrated σ. Returns the five weights."""
    from ...matrix import BallsInBinsMatrixMechanism, ConditionalCompositionAccountant, build_strategy
    from ...matrix.panels import participant_weights

    acc = ConditionalCompositionAccountant(delta_e=5e-6, progress=False).compose(
        BallsInBinsMatrixMechanism(build_strategy("identity", 1, 100), 1.0)
    )
    q = participant_weights(acc, 5e-6)["remove"]
    got = [float(q[n - 1]) for n in (1, 2, 10, 50, 100)]
    tg.record(id_, got, paper=tg.spec[ref_id]["paper"])
    return got


def fs_table(cases: Sequence[tuple], independent: Sequence[float]) -> list[dict[str, Any]]:
    """The remove divergence of DP-SGD by the DP against the Feldman-Shenfeld partition sum: ``cases`` are
    ``(b, σ, α, DP value, partition sum)``, ``independent`` our independent values; shows and returns the rows."""
    rows = [
        {"b": b, "σ": sig, "α": alpha, "DP (ours)": ours, "partition sum": ref, "independent value": ind,
         "relative difference": abs(ours - ref) / ref}
        for (b, sig, alpha, ours, ref), ind in zip(cases, independent)
    ]  # fmt: skip
    show_table(
        [
            {"b": r["b"], "σ": r["σ"], "α": r["α"], "DP (ours)": r["DP (ours)"],
             "partition sum − DP": r["partition sum"] - r["DP (ours)"],
             "independent − DP": r["independent value"] - r["DP (ours)"]}
            for r in rows
        ],
        digits=4,
        caption="Remove-direction Rényi divergence of DP-SGD, k = 1: the DP against the partition sum and our"
        " independent values (differences)",
    )  # fmt: skip
    return rows


def mc_agreement_table(rho_dp: float, rho_mc: float, renyi_delta, mc_delta) -> None:
    """The dynamic program (R_3 of BSR b=8 p=2 at σ=1.5) and the Rényi δ(ε=1) of DP-SGD b=20 at σ=1 against
    plain Monte Carlo (``mc_delta`` an accounting result with its 99% ``lower``/``upper``)."""
    show_table(
        [
            {"check": "R_3, BSR b=8 p=2, σ=1.5", "DP / Rényi": rho_dp, "Monte Carlo": rho_mc, "MC 99% interval": "—"},
            {"check": "δ(ε=1), DP-SGD b=20, σ=1", "DP / Rényi": float(renyi_delta), "Monte Carlo": float(mc_delta),
             "MC 99% interval": f"[{sci(mc_delta.lower, 4)}, {sci(mc_delta.upper, 4)}]"},
        ],
        caption="The dynamic program against plain Monte Carlo",
    )  # fmt: skip


# ---- DP-SGD and the factorisations (Figures 2-3) ----------------------------------------------------------------------


def dpsgd_table(epsilons, delta, sig, sig_multi, sig_large, n, n_large, k, independent=None) -> None:
    """Rényi-calibrated σ of DP-SGD per ε: one epoch of ``n`` steps, ``k`` epochs (and divided by √k: the epoch
    identity), one epoch of ``n_large`` steps (if run) and our independent values (if given)."""
    rows = []
    for j, e in enumerate(epsilons):
        r = {"ε": e, f"σ N={n}": sig[j], f"σ N={k * n}, k={k}": sig_multi[j], "… / √k": sig_multi[j] / math.sqrt(k)}
        if sig_large:
            r[f"σ N={n_large}"] = sig_large[j]
        if independent is not None:
            r["independent σ N=100"] = independent[j]
        rows.append(r)
    show_table(rows, caption=f"Rényi-calibrated σ for DP-SGD at δ = {sci(delta, 1)}")


def mc_table(epsilons, mc, sig_renyi, gaps, sig_poisson, n, samples, efficiency=None) -> None:
    """Rényi against the Monte Carlo σ of :func:`dputils.matrix.panels.importance_mc_sigmas` (``mc``) per ε, as two
    tables that fit the book column: the calibrated σ (with the Poisson-subsampling σ for orientation), then the δ̂
    of both directions at the Monte Carlo σ and (if given) the plain samples one importance sample is worth
    (:func:`importance_efficiency`)."""
    sigmas = [
        {"ε": e, "Rényi σ": sig_renyi[j], "Monte Carlo σ": mc["sigma"][j], "s.e. of σ": mc["se"][j],
         "Rényi / MC − 1": gaps[j], "Poisson PLD σ (other scheme)": sig_poisson[j]}
        for j, e in enumerate(epsilons)
    ]  # fmt: skip
    show_table(sigmas, caption=f"DP-SGD, N = {n}, k = 1: Rényi against Monte Carlo σ ({samples:,} importance samples)")
    deltas = [
        {"ε": e, "δ̂ remove": mc["remove"][j], "relative s.e. of δ̂": mc["rel_se"][j], "δ̂ add (plain)": mc["add"][j]}
        for j, e in enumerate(epsilons)
    ]  # fmt: skip
    if efficiency is not None:
        for r, x in zip(deltas, efficiency):
            r["plain per IS sample"] = x
    show_table(deltas, caption=f"DP-SGD, N = {n}, k = 1: the Monte Carlo estimates at the Monte Carlo σ")


def three_digits(x: float) -> str:
    """``x`` rounded to three significant digits, written without an exponent (``7386.0`` -> ``"7,390"``)."""
    return f"{float(f'{x:.3g}'):,.{max(0, 2 - math.floor(math.log10(abs(x))))}f}" if x else "0"


def importance_efficiency(b: int, sigmas: Sequence[float], epsilons: Sequence[float], samples: int, seed: int):
    """Per ε, how many plain Monte Carlo samples one importance sample of
    :class:`~dputils.matrix.noise_curves.ImportanceMonteCarlo` is worth at the Monte Carlo σ (one-epoch DP-SGD,
    ``b`` slots, the draws of the calibration: ``samples``, ``seed``): the plain mean's variance per sample,
    ``E_P[f^2] - δ^2`` with ``f = (1 - e^{ε-L})_+``, over the variance per sample of the weighted terms ``f w``.
    ``E_P[f^2]`` is estimated from the same draws as ``mean(f^2 w)``, so the ratio is an estimate too. Glues the
    smallest and largest ratio (``ma_is_gain_lo``, ``ma_is_gain_hi``, three digits) and the ε where they occur, and
    the range of plain samples a relative standard error of 3% would need (``ma_is_plain_n_lo``, ``_hi``); returns
    the ratios."""
    from ...matrix.noise_curves import ImportanceMonteCarlo

    out, plain_n = [], []
    for s, e in zip(sigmas, epsilons):
        f, w = ImportanceMonteCarlo(b, s, samples, seed).parts(e)
        t = f * w
        d = float(t.mean())
        var_plain = float(np.mean(f * f * w)) - d * d
        out.append(var_plain / float(t.var(ddof=1)))
        plain_n.append(var_plain / (0.03 * d) ** 2)  # plain samples for a relative standard error of 3%
    lo, hi = int(np.argmin(out)), int(np.argmax(out))
    glue_all({"lo": three_digits(out[lo]), "hi": three_digits(out[hi]), "lo_eps": f"{epsilons[lo]:g}",
              "hi_eps": f"{epsilons[hi]:g}"}, prefix="ma_is_gain_")  # fmt: skip
    glue_all({"lo": sci(min(plain_n), 2), "hi": sci(max(plain_n), 2)}, prefix="ma_is_plain_n_")
    return out


def dp_cost_growth(timing: np.ndarray) -> dict[str, Any]:
    """The growth of the measured DP time (rows of ``timing``: ``p, b, seconds, peak bytes``): per band count the
    time at the largest ``b`` over the time at the smallest, the range of these factors against the factor in
    ``b``, and the time at the largest ``b`` for the largest ``p`` over the smallest ``p``. Glued as
    ``ma_cost_*`` (the prose's relations about the figure come from these numbers)."""
    ps = sorted({int(p) for p in timing[:, 0]})
    bs = sorted({int(b) for b in timing[:, 1]})

    def t(p, b):
        sel = (timing[:, 0] == p) & (timing[:, 1] == b)
        return float(timing[sel, 2][0])

    per_p = {p: t(p, bs[-1]) / t(p, bs[0]) for p in ps}
    out = {
        "b_min": bs[0], "b_max": bs[-1], "p_min": ps[0], "p_max": ps[-1], "b_factor": f"{bs[-1] / bs[0]:g}",
        "t_b_lo": min(per_p.values()), "t_b_hi": max(per_p.values()), "t_p": t(ps[-1], bs[-1]) / t(ps[0], bs[-1]),
    }  # fmt: skip
    fb = bs[-1] / bs[0]
    out["b_relation"] = (
        "less than the factor in b: at these sizes fixed costs per pass still weigh"
        if out["t_b_hi"] < fb
        else "at least the factor in b"
        if out["t_b_lo"] >= fb
        else "around the factor in b"
    )
    glue_all({k: (three_digits(v) if isinstance(v, float) else v) for k, v in out.items()}, prefix="ma_cost_")
    return out


def factorisation_table(fact: Mapping[str, Mapping[str, Any]], epsilons, n, bands, delta) -> None:
    """Rényi-calibrated σ per strategy and ε (:func:`dputils.matrix.panels.renyi_sigma_curve`), with the deciding
    direction and the effective bandwidth at the middle ε."""
    rows = [
        {"strategy": name, **{f"σ at ε={e:g}": s for e, s in zip(epsilons, f["sigma"])},
         "dominant direction (middle ε)": f["dominant_mid"], "p_eff": f["bands_mid"]}
        for name, f in fact.items()
    ]  # fmt: skip
    show_table(rows, caption=f"Rényi-calibrated σ, N = {n}, k = 1, p = {bands}, δ = {sci(delta, 1)}")


# ---- conditional composition ------------------------------------------------------------------------------------------


def agreement_words(dev: float, rel_tol: float) -> str:
    """How calibrated σ agree with reference values, for the prose: ``dev`` is the largest relative deviation. The
    calibration returns the upper end of a bracket of relative width ``rel_tol`` whose ends are both evaluated, so
    a deviation of 0 (the search started at the reference and kept it) means the reference is confirmed to that
    width, not exactly."""
    if not math.isfinite(dev):
        return "(not compared in this profile)"
    if dev == 0:
        return (
            f"to within a calibration's bracket: each independent value is the upper end of a bracket of relative "
            f"width {rel_tol:g} whose lower end fails"
        )
    return f"to a relative {sci(dev, 1)} at worst"


def chain_table(q_chain: Mapping[str, np.ndarray], n: int, delta: float) -> None:
    """The weight of the participating slot at the first, middle and last step of each chain."""
    show_table(
        [{"chain": d, "q at n = 1": q[0], f"q at n = {n // 2}": q[n // 2 - 1], f"q at n = {n}": q[-1]}
         for d, q in q_chain.items()],
        caption=f"Weight of the participating slot, DP-SGD N = {n}, σ = 1, δ_E = {sci(delta / 2, 1)}",
    )  # fmt: skip


def plot_chains(q_chain: Mapping[str, np.ndarray], n: int, delta: float) -> matplotlib.figure.Figure:
    """The weight ``q_n`` of the participating slot against the step, one line per chain, over the prior 1/b."""
    fig, ax = plotting.new_figure()
    for d, q in q_chain.items():
        ax.plot(np.arange(1, n + 1), q, label=f"{d} chain")
    ax.axhline(1 / n, color="0.6", lw=0.8, ls=":", label="prior 1/b")
    ax.set(
        xlabel="step n", ylabel="weight of the participating slot", title=f"DP-SGD, N={n}, σ=1, δ_E={sci(delta / 2, 1)}"
    )
    ax.legend(loc="best", framealpha=1)
    return fig


def accountants_table(eps, sig_cc, sig_renyi, sig_mc, se_mc, n, delta) -> None:
    """Conditional composition, Rényi and Monte Carlo σ of one-epoch DP-SGD per ε."""
    show_table(
        [{"ε": e, "CondComp σ": a, "Rényi σ": b, "Monte Carlo σ": c, "MC standard error": d}
         for e, a, b, c, d in zip(eps, sig_cc, sig_renyi, sig_mc, se_mc)],
        caption=f"DP-SGD, N = {n}, k = 1, δ = {sci(delta, 1)}: the three accountants",
    )  # fmt: skip


def glue_bsr_panel(cc_bsr, ren, prior, ren_pe, w_mid, n, delta) -> None:
    """Glue the BSR conditional-composition panel (Figure 2d): per ε index ``i`` the CondComp, Rényi, prior-weight
    and narrow-band Rényi σ; the largest old-slot weight at the middle step; the per-bound significance
    ``δ_E/(N(b-1))``; and the paper's DP cost ``b p α^(2p)`` at the orders small ε needs."""
    for i, e in enumerate(cc_bsr):
        glue_all({f"cc_{i}": cc_bsr[e], f"renyi_{i}": ren[i], f"prior_{i}": prior[e]}, prefix="ma_bsr_")
        for pe, v in ren_pe.items():
            glue(f"ma_bsr_renyi_p{pe}_{i}", v[i])
    glue("ma_bsr_wmax", float(w_mid[1:].max()))
    glue("ma_bsr_beta", sci(delta / 2 / (n * (n - 1))))
    glue_all(
        {"p4_a30": sci(n * 4 * 30.0**8), "p4_a50": sci(n * 4 * 50.0**8), "p2_a50": sci(n * 2 * 50.0**4)},
        prefix="ma_cost_",
    )


def glue_bands_at(strategy, sigmas, epsilons, delta: float, orders, tier_budget: float, bands: int) -> list[tuple]:
    """The effective bandwidth of Algorithm 3's dynamic program at the order that sets δ(ε) at each Rényi σ
    (``sigmas`` for ``epsilons``), against the strategy's ``bands``: glues ``ma_bsr_bands_words`` (the prose's
    "at the full bandwidth at the orders that set σ", or where it is not). Returns ``(ε, order, bands used)``."""
    from ...matrix import BallsInBinsMatrixMechanism, MatrixRenyiAccountant

    rows = []
    for e, s in zip(epsilons, sigmas):
        d = (
            MatrixRenyiAccountant(orders=orders, tier_budget=tier_budget)
            .compose(BallsInBinsMatrixMechanism(strategy, s))
            .get_epsilon(delta)
            .details
        )
        rows.append((e, int(d["order"]), int(d["effective_bands"])))
    orders_t = ", ".join(f"order {o} at ε = {e:g}" for e, o, _ in rows)
    narrow = [(e, p) for e, _, p in rows if p < bands]
    if not narrow:
        words = f"at the full bandwidth at the orders that set σ ({orders_t})"
    else:
        words = (
            "at the full bandwidth except at "
            + ", ".join(f"ε = {e:g} (p_eff = {p})" for e, p in narrow)
            + (f" ({orders_t})")
        )
    glue("ma_bsr_bands_words", words)
    return rows


def bsr_tables(cc_bsr, ren, ren_pe, prior, sens_mid, w_mid, bands, n, delta, sigma_mid) -> None:
    """The BSR panel's σ per ε (CondComp, Rényi at each bandwidth, prior weights) and the per-step pair at the
    middle step."""
    show_table(
        [{"ε": e, "CondComp σ": cc_bsr[e], f"Rényi σ (p_eff = {bands})": r,
          **{f"Rényi σ (p_eff = {pe})": v[i] for pe, v in ren_pe.items()}, "prior-weight σ (not a bound)": prior[e]}
         for i, (e, r) in enumerate(zip(cc_bsr, ren))],
        caption=f"BSR p = {bands}, N = {n}, k = 1, δ = {sci(delta, 1)}",
    )  # fmt: skip
    show_table(
        [{"step mean": float(m), "weight": float(w)} for m, w in zip(sens_mid, w_mid)],
        caption=f"Per-step pair at step {n // 2 + 1} (remove chain, σ = {sigma_mid:.3f}, prior 1/b = {1 / n:g})",
    )


def wide_band_table(wide, eps, bands, pe2, wide_bands, n, delta) -> None:
    """Glue and show the wide-band panel (Figure 2e): the Rényi σ at ``p_eff = bands`` and ``pe2`` and the ε
    conditional composition certifies there."""
    for pe, role in ((bands, "full"), (pe2, "p2")):
        for e in eps:
            glue(f"ma_wide_{role}_sigma_{e:g}", wide[pe][e]["sigma_renyi"])
            glue(f"ma_wide_{role}_eps_{e:g}", wide[pe][e]["condcomp_epsilon"])
    show_table(
        [{"ε": e, **{f"Rényi σ (p_eff = {pe})": wide[pe][e]["sigma_renyi"] for pe in (bands, pe2)},
          **{f"CondComp ε at it (p_eff = {pe})": wide[pe][e]["condcomp_epsilon"] for pe in (bands, pe2)}}
         for e in eps],
        caption=f"BSR p = {wide_bands}, N = {n}, k = 1, δ = {sci(delta, 1)}: ε certified by conditional composition "
        "at the Rényi σ",
    )  # fmt: skip


def glue_bisr(bisr: Mapping[Any, Any], bands: int, pe2: int) -> None:
    """Glue the BISR panel (Figure 3a): Rényi σ and certified ε at both bandwidths and the seconds of one
    evaluation (nan when not run)."""
    if not bisr:
        glue_all(
            {k: float("nan") for k in ("seconds", "full_sigma", "full_eps", "p2_sigma", "p2_eps")}, prefix="ma_bisr_"
        )
        return
    for pe, role in ((bands, "full"), (pe2, "p2")):
        glue_all({"sigma": bisr[pe]["sigma_renyi"], "eps": bisr[pe]["condcomp_epsilon"]}, prefix=f"ma_bisr_{role}_")
    glue("ma_bisr_seconds", bisr["seconds"])


def fig5_table(fig5: Mapping[int, Mapping[str, Any]], b: int, epochs: int, sigma: float, samples: int) -> None:
    """Glue and show the spread of the ternary loss per step (Figure 5), with the standard deviation
    ``√(e−1)/σ`` of the participating slot's term."""
    std = {n: d["std"] for n, d in fig5.items()}
    glue_all({"100": std[b], "101": std[b + 1], "200": std[2 * b] if epochs > 2 else float("nan")}, prefix="ma_f5_std_")
    show_table(
        [{"step": n, "epoch": d["epoch"], "std of L_b": d["std"], "IQR of L_b": d["iqr"],
          "std of the participating term √(e−1)/σ": math.sqrt(d["epoch"] - 1) / sigma} for n, d in fig5.items()],
        caption=f"Spread of the ternary privacy loss, {samples:,} samples per step",
    )  # fmt: skip


def report_multi_epoch(cc_multi: Mapping[str, Any], n: int, k: int, delta: float) -> None:
    """Glue and show the multi-epoch DP-SGD panel (Figure 2c): ε at the Rényi σ under both allocations, the
    calibrated CondComp σ and its ratio to Rényi's, the last step's participating weight (nothing when not run)."""
    if "union" not in cc_multi:
        return
    u, h = cc_multi["union"], cc_multi["hybrid"]
    glue("ma_m_verdict", multi_epoch_verdict(cc_multi["condcomp_sigma"] / cc_multi["sigma"])[0])
    glue_all({
        "sigma": cc_multi["sigma"], "eps_renyi": cc_multi["renyi_epsilon"], "eps_union": u["epsilon"],
        "eps_hybrid": h["epsilon"], "cc_sigma": cc_multi["condcomp_sigma"],
        "ratio": cc_multi["condcomp_sigma"] / cc_multi["sigma"], "q_union": u["q_last"], "q_hybrid": h["q_last"],
        "beta": sci(delta / 2 / (k * n * (n - 1)), 1)}, prefix="ma_m_")  # fmt: skip
    show_table(
        [{"accountant": f"conditional composition ({a})", "ε at the Rényi σ": cc_multi[a]["epsilon"],
          "participating slot's weight, last step": cc_multi[a]["q_last"], "seconds": cc_multi[a]["seconds"]}
         for a in ("union", "hybrid")]
        + [{"accountant": "Rényi (Algorithm 3)", "ε at the Rényi σ": cc_multi["renyi_epsilon"]}],
        caption=f"DP-SGD, N = {k * n}, k = {k}, σ = {cc_multi['sigma']:.4f}",
    )  # fmt: skip


#: the σ ratio (conditional composition over Rényi) from which the multi-epoch DP-SGD panel has "no benefit" (the
#: target T7a) and above which its loss is called large, not small
NO_BENEFIT_RATIO, LARGE_LOSS_RATIO = 0.95, 1.2


def multi_epoch_verdict(ratio: float) -> tuple[str, str]:
    """The lead sentence of the multi-epoch DP-SGD panel (Figure 2c) and the note of its target T7a, from the
    calibrated σ ratio ``ratio`` = conditional composition over Rényi: the paper's "little or no benefit" holds
    when ``ratio >= NO_BENEFIT_RATIO``; the loss is large above ``LARGE_LOSS_RATIO``."""
    if not math.isfinite(ratio):
        return "Not run in this profile.", "not run"
    if ratio < NO_BENEFIT_RATIO:
        return (
            "The claim does not hold: conditional composition needs less noise than Rényi here.",
            f"a benefit (σ ratio {ratio:.2f}), unlike the paper's plot",
        )
    if ratio <= LARGE_LOSS_RATIO:
        return "The claim holds: no benefit, and a small loss, as in the paper.", f"a small loss (σ ratio {ratio:.2f})"
    return (
        "The claim of no benefit holds, but the loss is much larger than in the paper.",
        f"the loss is large here (σ ratio {ratio:.2f}), not small as in the paper's plot",
    )


def gain_row(c: Mapping[str, float]) -> dict[str, float]:
    """One ``(ε, b)`` entry of the Figure 2b-against-2a comparison from
    :func:`~dputils.matrix.panels.renyi_and_condcomp_at_sigma`: σ, both certified ε, the gain
    ``1 − ε_CondComp / ε_Rényi`` and the seconds of the conditional-composition evaluation."""
    gain = 1 - c["condcomp_epsilon"] / c["renyi_epsilon"]
    return {"sigma": c["sigma"], "renyi": c["renyi_epsilon"], "condcomp": c["condcomp_epsilon"], "gain": gain,
            "seconds": c["condcomp_seconds"]}  # fmt: skip


def gain_table(cc_gain: Mapping[str, Mapping[str, Mapping[str, float]]]) -> None:
    """Glue the slowest evaluation and show ε certified at the Rényi σ by both accountants, per target ε and
    batch count b (nan and nothing when not run)."""
    rows = [
        {"target ε": float(e), "b": int(b), "Rényi σ": r["sigma"], "Rényi ε": r["renyi"], "CondComp ε": r["condcomp"],
         "gain": r["gain"], "seconds": r["seconds"]}
        for e, g in cc_gain.items() for b, r in g.items()
    ]  # fmt: skip
    glue("ma_gain_seconds", max(r["seconds"] for r in rows) if rows else float("nan"))
    glue_gain_claims(cc_gain)
    if rows:
        show_table(rows, caption="ε certified at the Rényi-calibrated σ (gain = 1 − CondComp ε / Rényi ε)")


def glue_gain_claims(cc_gain: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, str]:
    """The words of the prose about the Figure 2b-against-2a comparison, from its numbers: ``ma_gain_verdict``
    ("holds" when at every ε the gain is larger at the larger b) and ``ma_gain_where``, the batch counts at which
    conditional composition certifies the smaller ε at every ε ("at both b", "only at b = ...", "at neither b").
    Empty texts when not run."""
    if not cc_gain:
        words = {"verdict": "is not checked in this profile", "where": "(not run)"}
        glue_all(words, prefix="ma_gain_")
        return words
    bs = sorted({b for g in cc_gain.values() for b in g}, key=int)
    larger = all(g[bs[-1]]["gain"] > g[bs[0]]["gain"] for g in cc_gain.values())
    wins = [b for b in bs if all(g[b]["condcomp"] < g[b]["renyi"] for g in cc_gain.values())]
    where = "at both b" if len(wins) == len(bs) else f"only at b = {wins[0]}" if wins else "at neither b"
    words = {"verdict": "holds" if larger else "does not hold", "where": where}
    glue_all(words, prefix="ma_gain_")
    return words


# ---- the add direction ---------------------------------------------------------------------------------------------


def glue_deciding_direction(strategy, sigmas: Sequence[float], epsilons: Sequence[float], delta: float, orders):
    """Which direction decides Algorithm 3's ε at each calibrated σ (``sigmas`` for ``epsilons``): the larger of the
    remove divergence and Lemma 3.4's add bound at the order the conversion picks. Glues ``ma_add_decides``, the
    prose's words for the ε where the add bound decides; returns the directions."""
    from ...matrix import BallsInBinsMatrixMechanism, MatrixRenyiAccountant

    dom = [
        MatrixRenyiAccountant(orders=orders)
        .compose(BallsInBinsMatrixMechanism(strategy, s))
        .get_epsilon(delta)
        .details["dominant"]
        for s in sigmas
    ]
    add = [f"{e:g}" for e, d in zip(epsilons, dom) if d == "add"]
    if len(add) == len(dom):
        words = "at every ε of the figure"
    elif not add:
        words = "at none of its ε (the remove divergence decides throughout)"
    else:
        rest = [f"{e:g}" for e, d in zip(epsilons, dom) if d != "add"]
        words = f"at ε = {', '.join(add)} (the remove divergence at ε = {', '.join(rest)})"
    glue("ma_add_decides", words)
    return dom


def rdp_table(r: Mapping[str, Any], n: int) -> None:
    """Remove (exact) and add (Lemma 3.4) Rényi divergences per order (``r``: the accountant's ``rdp()``)."""
    show_table(
        [{"α": int(a), "remove (exact)": rr, "add bound (Lemma 3.4)": ra}
         for a, rr, ra in zip(r["orders"], r["remove"], r["add"])],
        caption=f"Rényi divergences of DP-SGD, b = {n}, σ = 1",
    )  # fmt: skip


def tight_table(n, bands, exact, l34, mc, se, orders, tight, l34_bsr, mc_bsr, classes) -> None:
    """The add divergence by the tight bound, Lemma 3.4 and Monte Carlo: DP-SGD at α = 2, then BSR per order."""
    rows = [{"case": f"DP-SGD b={n}, α=2", "tight (exact)": exact, "Lemma 3.4": l34, "Monte Carlo": mc,
             "MC standard error": se, "classes": "—"}]  # fmt: skip
    for a, ta, la, (est, s), cl in zip(orders, tight, l34_bsr, mc_bsr, classes):
        rows.append({"case": f"BSR p={bands}, α={a}", "tight (exact)": float(ta), "Lemma 3.4": float(la),
                     "Monte Carlo": est, "MC standard error": s, "classes": int(cl)})  # fmt: skip
    show_table(rows, caption="Add-direction divergence R_α(Q‖P) at σ = 1: the tight bound, Lemma 3.4 and Monte Carlo")


def tight_sigma_table(epsilons, delta, n, bands, dp, dp_tight, dp_remove, dp_mc, bsr, bsr_tight, bsr_mc, bsr_se):
    """Calibrated σ per ε: DP-SGD (Rényi, Rényi-tight, remove-only, Monte Carlo) and BSR (Rényi, Rényi-tight,
    Monte Carlo with its standard error)."""
    show_table(
        [{"ε": e, "DP-SGD Rényi": dp[j], "DP-SGD Rényi-tight": dp_tight[j], "DP-SGD remove-only": dp_remove[j],
          "DP-SGD MC": dp_mc[j], f"BSR p={bands} Rényi": bsr[j], f"BSR p={bands} Rényi-tight": bsr_tight[j],
          f"BSR p={bands} MC": bsr_mc[j], "BSR MC s.e.": bsr_se[j]}
         for j, e in enumerate(epsilons)],
        caption=f"Calibrated σ, N = {n}, k = 1, δ = {sci(delta, 1)}",
    )  # fmt: skip


# ---- the remaining panels and the errata --------------------------------------------------------------------------


def family_gain_words(gain: Sequence[float], threshold: float = 0.01) -> str:
    """The prose's reading of Figure 6's gains ``gain`` (relative reduction of λ̄_b by Options 1+3 over Option 1 at
    each epoch end): whether the temperature family matters only after the first epoch (``threshold``, ours: 1%)."""
    first, later = gain[0], list(gain[1:])
    if first < threshold and later and min(later) >= threshold:
        return "the temperature family matters only in the later epochs, as Figure 6 shows"
    if max(gain) < threshold:
        return f"the temperature family changes the bound by less than {threshold:.0%} at every epoch end"
    if first >= threshold:
        return f"the temperature family matters in the first epoch too (by at least {threshold:.0%})"
    return f"the temperature family matters in some later epochs only (by at least {threshold:.0%})"


def family_table(fam: Mapping[tuple[str, float], Mapping[str, np.ndarray]], bands, epochs, batches) -> None:
    """``λ̄_b`` at each epoch end per strategy, σ and variational family (Figure 6)."""
    show_table(
        [{"strategy, σ": f"{m.upper()}, {s:g}", "family": name, **{f"epoch {e + 1}": v for e, v in enumerate(f[name])}}
         for (m, s), f in fam.items() for name in FAMILIES],
        caption=f"λ̄_b at the last step of each epoch (p = {bands}, k = {epochs}, b = {batches}, remove, δ_E = 10⁻⁵, "
        "union bound), three variational families",
    )  # fmt: skip


def glue_range_erratum(lam_d3: np.ndarray, lam_a4: np.ndarray, n: int) -> None:
    """Glue the reverse-hazard bounds of Theorem D.3 against Algorithm 4's printed range where they differ most,
    and how many of the ``n - 1`` bounds differ at all."""
    k = int(np.argmax(lam_d3 - lam_a4))
    glue_all({
        "dlam": sci(float(lam_d3[k] - lam_a4[k]), 3), "d3": float(lam_d3[k]), "a4": float(lam_a4[k]),
        "n": int(np.sum(lam_d3 - lam_a4 > 1e-12)), "m": int(n - 1)}, prefix="ma_err_range_")  # fmt: skip


def plot_dpsgd(epsilons, delta, n, renyi, second, mc, mc_se=None):
    """Calibrated σ of one-epoch DP-SGD against ε: Rényi (Algorithm 3), a second curve ``(kind, label, eps,
    sigma)`` (Poisson subsampling or conditional composition) and Monte Carlo, with ±2 standard errors when
    ``mc_se`` is given (Figure 2a)."""
    mc_label = "Monte Carlo (estimate ± 2 s.e.)" if mc_se is not None else "Monte Carlo (estimate)"
    curves = [("renyi", "Rényi (Alg. 3)", epsilons, renyi), ("mc", mc_label, epsilons, mc), second]
    if second[0] == "condcomp":  # the order of the paper's legend
        curves = [curves[0], second, curves[1]]
    errors = {mc_label: mc_se} if mc_se is not None else None
    return plot_sigma_curves([(delta_title(f"DP-SGD, N={n}, k=1", delta), curves)], epsilons, errors=errors)


def plot_tight(epsilons, delta, n, bands, dpsgd, bsr):
    """Calibrated σ against ε with the tight add bound: DP-SGD (left; ``dpsgd`` = Rényi, Rényi-tight, Monte Carlo,
    remove-only) and BSR (right; ``bsr`` = Rényi, Rényi-tight, Monte Carlo)."""
    panels = []
    for title, sig in ((f"DP-SGD, N={n}, k=1", dpsgd), (f"BSR p={bands}, N={n}, k=1", bsr)):
        curves = [
            ("renyi", "Rényi (Alg. 3, Lemma 3.4)", epsilons, sig[0]),
            ("tight", "Rényi-tight (this section)", epsilons, sig[1]),
            ("mc", "Monte Carlo (estimate)", epsilons, sig[2]),
        ]
        if len(sig) > 3:
            curves.append(("remove", "remove-only (lower limit)", epsilons, sig[3]))
        panels.append((delta_title(title, delta), curves))
    return plot_sigma_curves(panels, epsilons)


# --------------------------------------------------------------------------- target records (bookkeeping)


def record_condcomp_curve(tg, cc_eps, sig_cc, sig_renyi, sig_mc, se_mc, gaps, ran: bool) -> None:
    """Record T5-cc, T5-cross, T5-mc-lowest and T5-gap (criteria in the chapter's text): conditional
    composition's calibrated σ at ``cc_eps`` against the Rényi and Monte Carlo σ (and its standard error) at the
    same ε, and the relative gaps Rényi/MC - 1 over all the chapter's ε."""
    rows = list(zip(cc_eps, sig_cc, sig_renyi, sig_mc, se_mc))
    tg.record("T5-cc", sig_cc, ran=ran)
    tg.record(
        "T5-cross",
        condition=all((sc < r) if e <= 1 else (r <= sc) for e, sc, r, _, _ in rows if e <= 1 or e >= 2),
        ours="CondComp/Rényi = " + ", ".join(f"{sc / r:.3f}" for _, sc, r, _, _ in rows),
        ran=ran,
    )
    tg.record("T5-mc-lowest", condition=all(m <= min(sc, r) + 3 * s for _, sc, r, m, s in rows), ran=ran)
    tg.record("T5-gap", condition=bool(np.all(np.diff(gaps) < 0)), ours=", ".join(f"{g:.0%}" for g in gaps), ran=ran)


def record_wide_band(tg, wide: Mapping[Any, Any], eps_wide, bands: int, pe2: int, wide_bands: int, n: int) -> None:
    """Record T6b (conditional composition's ε at the Rényi σ of BSR with ``wide_bands`` bands, ``p_eff`` up to
    ``bands``) and T6b-p2-* (at the σ of ``p_eff = pe2``); not run when the panel was not computed."""
    if not wide:
        for tid in ("T6b", "T6b-p2-0.5", "T6b-p2-1"):
            tg.not_run(tid, "BSR p=64: conditional composition below Rényi at small ε (Figure 2e)",
                       reason="wide_bands = 0 in this profile")  # fmt: skip
        return
    fmt = dict(wide=wide_bands, n=n, bands=bands, pe=pe2, eps=", ".join(f"{e:g}" for e in eps_wide))
    tg.record("T6b", [round(wide[bands][e]["condcomp_epsilon"], 4) for e in eps_wide], paper=eps_wide, fmt=fmt)
    for tid, e in zip(("T6b-p2-0.5", "T6b-p2-1"), eps_wide):
        tg.record(tid, round(wide[pe2][e]["condcomp_epsilon"], 4), paper=e, fmt=dict(fmt, e=e))


def record_bisr(tg, bisr: Mapping[Any, Any], bands: int, pe2: int) -> None:
    """Record T6c and T6c-p2: the ε conditional composition certifies for BISR at the Rényi σ of ε = 0.5 (``p_eff``
    up to ``bands``, and ``pe2``); not run when the panel was not computed."""
    for pe, tid in ((bands, "T6c"), (pe2, "T6c-p2")):
        tg.record(
            tid,
            round(bisr[pe]["condcomp_epsilon"], 4) if bisr else None,
            fmt=dict(pe=pe2, sigma=bisr[pe]["sigma_renyi"] if bisr else 0),
            ran=bool(bisr),
        )


def record_remaining_panels(tg, rest: Mapping[str, Mapping[str, Any]], eps: float, n: int, bands: int, wide: int):
    """Record T6e (BLT, BandMF p=``wide``), T6f (BandInvMF p=``bands``) and T6c-wide (BISR p=``wide``): the ε
    conditional composition certifies at each strategy's Rényi σ of ``eps`` (not run when not computed)."""
    for tid, keys, fig in (
        ("T6e", ["BLT", f"BandMF p={wide}"], "Figures 3d, 3e"),
        ("T6f", [f"BandInvMF p={bands}"], "Figure 3f"),
        ("T6c-wide", [f"BISR p={wide}"], "Figure 3b"),
    ):
        sigmas = ", ".join(f"σ = {rest[k]['sigma']:.3f}" for k in keys) if rest else ""
        tg.record(
            tid,
            [round(rest[k]["condcomp_epsilon"], 4) for k in keys] if rest else None,
            paper=[eps] * len(keys),
            fmt=dict(keys=", ".join(keys), n=n, e=eps, fig=fig, sigmas=sigmas),
            ran=bool(rest),
        )


# ---- The b = 1 reference: DP-SGD under random allocation (allocation-pld) --------------------------------------------

#: the recorded comparison of allocation-pld with pld-accounting 2.0 (``benchmarks/bench_allocation.py --json``)
ALLOCATION_FILE = RESULTS_DIR / "allocation.json"


def allocation_peer_row(steps: int, sigma: float, delta: float, path=ALLOCATION_FILE) -> dict[str, Any]:
    """The row of the recorded allocation benchmark (``benchmarks/results/allocation.json``) for one epoch of
    ``steps`` batches, one participation, noise ``sigma`` and ``delta``: ``{"ours": {...}, "peer": {...}}`` with the
    ``lower``/``upper`` epsilon and ``seconds`` of allocation-pld and of pld-accounting 2.0 as recorded. A
    ``ValueError`` when the file has no such row or the peer has no bracket there (it timed out, say)."""
    with open(find_recorded(path)) as fh:
        rows = json.load(fh)["rows"]
    for r in rows:
        key = (r["steps"], r["selected"], r["epochs"], r["sigma"], r["delta"])
        if key == (steps, 1, 1, sigma, delta):
            peer = r.get("pld_accounting", {})
            if "upper" not in peer or "lower" not in peer:
                raise ValueError(f"{path}: no pld-accounting bracket at steps={steps} ({peer.get('error', 'missing')})")
            return {"ours": r["ours"], "peer": peer}
    raise ValueError(f"{path}: no row for steps={steps}, sigma={sigma:g}, delta={delta:g}, one epoch, selected=1")


def reference_rows(ref: tuple[float, float], bounds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows comparing each entry of ``bounds`` (``name``, ``kind``, ``epsilon`` and optionally ``lower``/``upper``)
    with the certified bracket ``ref = (lower, upper)`` of the exact ε: ``ratio = epsilon / upper`` is how many times
    the exact ε the entry is *at least* (the exact ε is at most ``upper``); ``above_lower`` whether ``epsilon`` is at
    least the reference's certified lower end (every certified upper bound must be: a violation is a bug)."""
    lo, hi = ref
    if not 0 < lo <= hi:
        raise ValueError(f"ref must be a bracket 0 < lower <= upper, got {ref!r}")
    out = []
    for b in bounds:
        e = float(b["epsilon"])
        out.append({**b, "ratio": e / hi, "above_lower": e >= lo})
    return out


def brackets_intersect(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether the closed intervals ``a`` and ``b`` share a point."""
    return max(a[0], b[0]) <= min(a[1], b[1])


def reference_table(rows: Sequence[Mapping[str, Any]], ref: tuple[float, float], steps: int, delta: float) -> None:
    """The bounds of the chapter against the allocation-pld bracket ``ref`` (rows of :func:`reference_rows`)."""
    show_table(
        [
            {"method": r["name"], "kind": r["kind"], "ε": r["epsilon"],
             "interval": "—" if r.get("lower") is None else f"[{r['lower']:.4g}, {r['upper']:.4g}]",
             "ε / reference upper end": r["ratio"]}
            for r in rows
        ],
        caption=f"DP-SGD under random allocation, {steps} batches, σ = 1, δ = {sci(delta, 1)}: every bound of the "
        f"chapter against allocation-pld's certified bracket [{ref[0]:.4f}, {ref[1]:.4f}]",
    )  # fmt: skip


def condcomp_reference(acc, delta: float, grid: float = 1e-3) -> float:
    """ε of a conditional-composition accountant for DP-SGD recomputed with another library: dp_accounting's
    pessimistic PLD (connect-the-dots, value grid ``grid``) composes the per-step pairs of both chains, each a
    Gaussian subsampled at the participating slot's weight (Corollary 4.4 with C = I), at δ - δ_E. Independent of the
    book's PLD accountant, not of the per-step weights (pinned separately, T8d-cc)."""
    from dp_accounting.pld import privacy_loss_distribution as pl

    de = acc.delta_e if acc.delta_e is not None else acc.fraction * delta
    out = []
    for d in ("remove", "add"):
        comp = None
        for sens, w in acc.step_pairs(de, d):
            if len(sens) != 2 or sens[0] != 0 or sens[1] != 1:
                raise ValueError("condcomp_reference handles DP-SGD (step means 0 and 1) only")
            p = pl.from_gaussian_mechanism(acc.sigma, sampling_prob=float(w[1]), value_discretization_interval=grid)
            comp = p if comp is None else comp.compose(p)
        pmf = comp._pmf_remove if d == "remove" else comp._pmf_add  # the one direction of this chain
        out.append(float(pmf.get_epsilon_for_delta(delta - de)))
    return max(out)


#: The small setting at which the chapter pins its accountants (issue 37): DP-SGD, one epoch, b = 20 slots, σ = 1,
#: δ = 1e-5, integer orders 2..64. Cheap (about a second) and run at every profile.
PIN_SLOTS, PIN_SIGMA, PIN_DELTA, PIN_ORDERS = 20, 1.0, 1e-5, range(2, 65)


def record_pins(tg) -> dict[str, Any]:
    """Record the pinning targets T12a-T12e at every profile, each against an independent value in the target table.

    * T12a: Algorithm 3 (:class:`MatrixRenyiAccountant`: the remove DP, Lemma 3.4's add bound, Theorem 3.1's
      conversion) at the pin setting;
    * T12b: the tight variant (:class:`MatrixRenyiTightAccountant`, the add bound of one class) at the same setting;
    * T12j: the unamplified Gaussian's calibrated σ (Rényi orders 2-64, Theorem 3.1), the chapter's upper reference;
    * T12g: the tight add bound itself (:func:`rho_add_tight`, one class) at order 7 of the same setting, where
      T12b's remove divergence dominates;
    * T12c: the noise-curve calibration (:func:`noise_curves.renyi_sigma`, relative precision 1e-4) at ε = 1;
    * T12d: the optimal Rényi order of Algorithm 3 at the paper's DP-SGD settings (N = 100 and 1000, ε = 0.5,
      at the independent calibrated σ of Figures 2a and 2b), and T12e the paper's claim that it lies in 30-50;
    * T12i: conditional composition's ε at the pin setting against dp_accounting's PLD composing the same per-step
      pairs (:func:`condcomp_reference`): the composition stage (the per-step weights are pinned by T8d-cc);
    * T12f: allocation-pld (the b = 1 reference) for DP-SGD with T = 2 batches, σ = 2: the exact ε of the pair, by
      one-dimensional quadrature with a closed-form inner expectation, must lie in its certified bracket.

    A relative error of 1% in any function on these paths fails one of them (tests/test_matrix37_mutation.py).
    Returns the measured values."""
    from ...accountants.allocation import RandomAllocationPLDAccountant
    from ...matrix import (
        BallsInBinsMatrixMechanism,
        ConditionalCompositionAccountant,
        MatrixRenyiAccountant,
        MatrixRenyiTightAccountant,
        build_strategy,
        rho_add_tight,
    )
    from ...matrix import noise_curves as nc
    from ...matrix import panels as pn

    pin = build_strategy("identity", 1, PIN_SLOTS)
    mech = BallsInBinsMatrixMechanism(pin, PIN_SIGMA)
    alg3 = MatrixRenyiAccountant(orders=PIN_ORDERS).compose(mech).get_epsilon(PIN_DELTA)
    tight = MatrixRenyiTightAccountant(orders=PIN_ORDERS, add_classes=[1]).compose(mech).get_epsilon(PIN_DELTA)
    (sigma,) = nc.renyi_sigma(pin, PIN_ORDERS, [1.0], PIN_DELTA, rel_tol=1e-4, tier_budget=2e6)
    tg.record("T12a", float(alg3))
    tg.record("T12b", float(tight))
    tg.record("T12c", float(sigma))
    tg.record("T12j", pn.plain_gaussian_sigma(pin, 1.0, PIN_DELTA, 4.0, 1e-4, max(PIN_ORDERS)))
    add7 = float(rho_add_tight(pin.gram, PIN_SIGMA, [7], [1])[0])
    tg.record("T12g", add7)
    orders = []
    for n, s in ((100, tg.spec["T3a"]["paper"][0]), (1000, tg.spec["T3b"]["paper"][0])):
        acc = MatrixRenyiAccountant(orders=range(2, 129)).compose(
            BallsInBinsMatrixMechanism(build_strategy("identity", 1, n), s)
        )
        orders.append(int(acc.get_epsilon(PIN_DELTA).details["order"]))
    tg.record("T12d", orders)
    lo, hi = 30, 50
    tg.record("T12e", f"{orders[0]} and {orders[1]}", ok=all(lo <= o <= hi for o in orders), fmt=dict(o=orders))
    cc = ConditionalCompositionAccountant(discretization=0.005, progress=False).compose(mech)
    cc_eps = cc.get_epsilon(PIN_DELTA)
    tg.record("T12i", float(cc_eps), paper=condcomp_reference(cc, PIN_DELTA))
    ref = (
        RandomAllocationPLDAccountant()
        .compose(BallsInBinsMatrixMechanism(build_strategy("identity", 1, 2), 2.0))
        .get_epsilon(PIN_DELTA)
    )
    exact = tg.spec["T12f"]["paper"]
    inside = float(ref.lower) <= exact <= float(ref.upper)
    tg.record("T12f", condition=inside, fmt=dict(w=float(ref.upper) - float(ref.lower)))
    return {
        "alg3": float(alg3),
        "tight": float(tight),
        "sigma": float(sigma),
        "add7": add7,
        "orders": orders,
        "allocation_pld": (float(ref.lower), float(ref.upper)),
        "condcomp": float(cc_eps),
    }


# ---- Figure 4, independently: the posterior bound of DP-SGD in closed form -----------------------------------------

#: the temperatures of Option 3 of the paper's Appendix F.4 (inf: the uniform psi of Option 1), as printed there
FIG4_TEMPERATURES = (math.inf, 10**-1, 10**-0.5, 1.0, 10**0.5, 10.0)


def dpsgd_posterior_bound(b: int, step: int, sigma: float, beta: float) -> float:
    """``λ̄_b`` of the participating slot of DP-SGD (slot ``(n-1) mod b`` at 1-based step ``n``; remove relation,
    union over the ``b - 1`` tail bounds of one step at significance ``beta``), computed from the paper's formulas
    with the structure of DP-SGD written out, for an independent check of :mod:`dputils.matrix.posterior_paths`.

    In epoch ``e`` the prefix means over steps ``1..n-1`` are indicator vectors with disjoint supports: the
    participant ``i`` has ``e - 1`` ones, the ``n_A = (n-1) mod b`` slots before it ``e``, the ``n_B = b - 1 - n_A``
    after it ``e - 1``. So ``|μ_i - μ_j|² = 2e - 1`` (class A) or ``2e - 2`` (class B), and Option 3's
    ``ψ = softmax(-|μ_i - μ_j|²/t)`` (Appendix F.3) puts ``w_A`` on each A slot, ``w_B`` on each B slot. Lemma D.2
    with ``ρ_k = μ_k`` (Theorem D.3) then has three distinct reference components (``k = i``, ``k`` in A, ``k`` in
    B) with

        ν_i = -(e-1)/σ² + c,  ν_A = w_A e/σ² + c,  ν_B = w_B (e-1)/σ² + c,
        c = ((e-1) - n_A w_A e - n_B w_B (e-1))/(2σ²) - KL(ψ‖π),  ξ² σ² = (e-1) + n_A w_A² e + n_B w_B² (e-1),

    and Eq. 31's bound ``F(τ) = (1/b) Σ_k min_ψ Φ((τ - ν_k)/ξ)`` (weights ``1, n_A, n_B``). ``τ`` is the root of
    ``log F(τ) = log(β/(b-1))`` (Brent's method on the log-cdf, to ``1e-14``), and ``λ̄_b = sigmoid(-log(b-1) - τ)``
    (Lemma 4.5). Where every ξ is 0 (step 1: nothing observed yet) ``L_b`` is the constant ``min_k max_ψ ν_k`` and
    that is ``τ``. Nothing of :mod:`dputils.matrix` is used (no Gram matrix, no bisection, no merging)."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr

    e, n_a = (step - 1) // b + 1, (step - 1) % b
    n_b = b - 1 - n_a
    s2 = sigma * sigma
    counts = np.array([1.0, n_a, n_b])
    nus, xis = [], []
    for t in FIG4_TEMPERATURES:
        la, lb = (0.0, 0.0) if math.isinf(t) else (-(2 * e - 1) / t, -(2 * e - 2) / t)
        m = max(la if n_a else -math.inf, lb if n_b else -math.inf)
        z = n_a * math.exp(la - m) + n_b * math.exp(lb - m)
        wa, wb = math.exp(la - m) / z, math.exp(lb - m) / z
        kl = sum(n * w * math.log(w * (b - 1)) for n, w in ((n_a, wa), (n_b, wb)) if n)
        c = ((e - 1) - n_a * wa * e - n_b * wb * (e - 1)) / (2 * s2) - kl
        nus.append([-(e - 1) / s2 + c, wa * e / s2 + c, wb * (e - 1) / s2 + c])
        xis.append(math.sqrt((e - 1) + n_a * wa * wa * e + n_b * wb * wb * (e - 1)) / sigma)
    nu, xi = np.array(nus), np.array(xis)
    present = counts > 0
    target = math.log(beta / (b - 1))
    if not np.any(xi > 0):
        tau = float(np.min(np.max(nu, axis=0)[present]))
    else:
        pos = xi > 0

        def log_f(tau: float) -> float:
            z = np.where(pos[:, None], (tau - nu) / np.where(pos, xi, 1.0)[:, None], np.where(tau >= nu, 40.0, -40.0))
            lz = log_ndtr(np.min(z, axis=0))[present]
            return float(np.logaddexp.reduce(lz + np.log(counts[present])) - math.log(b)) - target

        lo = hi = float(np.min(nu))
        while log_f(lo) > 0:
            lo -= 1.0 + abs(lo)
        while log_f(hi) < 0:
            hi += 1.0 + abs(hi)
        tau = brentq(log_f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    return float(1.0 / (1.0 + (b - 1) * math.exp(tau)))


def fig4_reference(b: int, epochs: int, sigma: float, delta_e: float) -> dict[str, np.ndarray]:
    """The four curves of Figure 4 for DP-SGD (``b`` slots, ``epochs`` epochs) from :func:`dpsgd_posterior_bound`,
    allocations as in the paper's Appendix E: union (``δ_E/N`` per step), global max (the largest bound at
    ``δ_E``), per-epoch max (``δ_E/k``, the largest bound within each epoch) and hybrid (union in epoch 1, per-epoch
    max afterwards). Keys as :func:`dputils.matrix.posterior_paths.allocation_paths`."""
    n_steps = b * epochs
    steps = range(1, n_steps + 1)
    union = np.array([dpsgd_posterior_bound(b, n, sigma, delta_e / n_steps) for n in steps])
    at_k = np.array([dpsgd_posterior_bound(b, n, sigma, delta_e / epochs) for n in steps])
    at_one = max(dpsgd_posterior_bound(b, n, sigma, delta_e) for n in steps)
    per_epoch = np.repeat([at_k[j * b : (j + 1) * b].max() for j in range(epochs)], b)
    return {
        "union": union,
        "global max": np.full(n_steps, at_one),
        "per-epoch max (e ≥ 1)": per_epoch,
        "hybrid (e ≥ 2)": np.where(np.arange(1, n_steps + 1) <= b, union, per_epoch),
    }


def record_fig4(tg, alloc: Mapping[float, Mapping[str, np.ndarray]], b: int, epochs: int, delta_e: float) -> float:
    """Record T8c: our Figure 4 curves ``alloc`` (σ -> allocation -> λ̄_b per step, DP-SGD with ``b`` slots and
    ``epochs`` epochs) against :func:`fig4_reference` (:func:`fig4_deviation`); returns the deviation."""
    dev = fig4_deviation(alloc, b, epochs, delta_e)
    tg.record("T8c", dev, fmt=dict(b=b, k=epochs))
    return dev


def fig4_deviation(ours: Mapping[float, Mapping[str, np.ndarray]], b: int, epochs: int, delta_e: float) -> float:
    """The largest relative difference between our Figure 4 curves ``ours`` (σ -> allocation -> curve, from
    :func:`dputils.matrix.posterior_paths.allocation_paths`) and :func:`fig4_reference`, over every σ, allocation
    and step (target T8c)."""
    worst = 0.0
    for sig, curves in ours.items():
        ref = fig4_reference(b, epochs, sig, delta_e)
        for key, v in curves.items():
            worst = max(worst, float(np.max(np.abs(np.asarray(v) / ref[key] - 1))))
    return worst


def count_range(counts: Sequence[int]) -> str:
    """``"5 to 10"`` (or ``"7"`` when all equal): the range of some counts, for the prose."""
    lo, hi = min(counts), max(counts)
    return f"{lo}" if lo == hi else f"{lo} to {hi}"


def calibration_evaluations(epsilons: Sequence[float], delta: float, rel_tol: float, start: float = 1.0) -> dict:
    """Accountant evaluations of the chapter's σ search (:func:`dputils.matrix.noise_curves.secant_calibrate`)
    against a bisection in log σ (bracket by factors of 2 from the same ``start``, then halving until
    ``hi/lo <= 1 + rel_tol``), for Algorithm 3 at the pin setting (DP-SGD, :data:`PIN_SLOTS` slots, orders
    :data:`PIN_ORDERS`) at each of ``epsilons``. Glues the totals (``ma_cal_secant``, ``ma_cal_bisect``), their
    ratio and the range of the secant's count per ε (``ma_cal_range``); returns the per-ε counts."""
    from ...matrix import BallsInBinsMatrixMechanism, MatrixRenyiAccountant, build_strategy
    from ...matrix import noise_curves as nc

    pin = build_strategy("identity", 1, PIN_SLOTS)
    count = [0]

    def make(s: float):
        count[0] += 1
        return MatrixRenyiAccountant(orders=PIN_ORDERS).compose(BallsInBinsMatrixMechanism(pin, s))

    out = {"secant": [], "bisection": []}
    for e in epsilons:
        count[0] = 0
        nc.secant_calibrate(make, e, delta, start, rel_tol)
        out["secant"].append(count[0])
        count[0] = 0

        def ok(s: float, e=e) -> bool:
            return float(make(s).get_delta(e)) <= delta

        lo = hi = start
        if ok(start):
            lo = start / 2
            while ok(lo):
                hi, lo = lo, lo / 2
        else:
            hi = start * 2
            while not ok(hi):
                lo, hi = hi, hi * 2
        while hi / lo > 1 + rel_tol:
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        out["bisection"].append(count[0])
    tot_s, tot_b = sum(out["secant"]), sum(out["bisection"])
    glue_all({"secant": tot_s, "bisect": tot_b, "ratio": tot_s / tot_b, "n": len(epsilons),
              "range": count_range(out["secant"])}, prefix="ma_cal_")  # fmt: skip
    return out


def _cyclic_band(b: int, bands: int) -> np.ndarray:
    """A p-cyclically banded Gram matrix with positive corners (several epochs' wrap-around): 1 on the diagonal,
    0.3 at cyclic distance 1..p-1."""
    i = np.arange(b)
    d = np.abs(i[:, None] - i[None, :])
    d = np.minimum(d, b - d)
    return np.where(d == 0, 1.0, np.where(d < bands, 0.3, 0.0))


def poly_degree(values: Sequence[int]) -> int:
    """Degree of the polynomial through integer ``values`` at consecutive points: the smallest d whose (d+1)-th
    finite differences all vanish (exact integer arithmetic); raises ``ValueError`` when too few points decide."""
    diff = [int(v) for v in values]
    for d in range(len(diff) - 1):
        nxt = [b - a for a, b in zip(diff, diff[1:])]
        if all(x == 0 for x in nxt) and len(nxt) >= 2:
            return d
        diff = nxt
    raise ValueError(f"{len(values)} points cannot decide the degree")


def dp_operation_counts() -> dict[str, Any]:
    """The dynamic programme's enumerated updates (``log_partition_dp(..., stats=)``: deterministic counts, not
    timings) against the paper's complexity O(b p α^{2p}) (Section 3; Appendix C). The count of a run is a polynomial
    in b and in α, so its degree is measured exactly by finite differences (:func:`poly_degree`): in b (p = 1,
    α = 16, b = 10-15), in α for p = 2 without wrap-around (one epoch, degree p + 1) and for p = 1, 2, 3 with it (several epochs,
    the paper's case: the p - 1 fixed prefix counts multiply the work), b = 20, α from 6 on. The claim predicts
    degree 1 in b and 2p in α with the wrap-around. Also returns the counts."""
    from ...matrix.renyi import log_partition_dp

    def count(b: int, bands: int, alpha: int, wrap: bool = True) -> int:
        G = _cyclic_band(b, bands) if wrap else np.eye(b)
        st: dict[str, int] = {}
        log_partition_dp(G, 2.0, alpha, bands, work_budget=None, stats=st)
        return st["transitions"]

    counts = {"b": {b: count(b, 1, 16) for b in range(10, 16)}}
    counts["p2 one epoch"] = {a: count(20, 2, a, wrap=False) for a in range(6, 13)}
    for p, n in ((1, 6), (2, 8), (3, 10)):
        counts[f"p{p}"] = {a: count(20, p, a) for a in range(6, 6 + n)}
    degrees = {k: poly_degree(list(v.values())) for k, v in counts.items()}
    return {"degrees": degrees, "counts": counts}


# ---- Recordings: results too expensive for the book's profile, computed once by hand and kept with their provenance

#: where the chapter's recordings live (one JSON file per recording, under the repository)
RECORDINGS_DIR = Path(__file__).resolve().parents[3] / "params" / "recordings" / "matrix_allocation"

#: per recording: the modules whose source its value depends on (their hash is stored with the value)
RECORDING_CODE = {
    "T7c": (
        "dputils.matrix.allocation",
        "dputils.matrix.condcomp",
        "dputils.matrix.factorizations",
        "dputils.matrix.mechanism",
        "dputils.matrix.noise_curves",
        "dputils.matrix.panels",
        "dputils.matrix.renyi",
        "dputils.accountants.pld",
        "dputils.accountants.rdp",
        "dputils.calibration",
    )
}


def code_files(modules: Sequence[str]) -> list[str]:
    """The repository paths of the source of ``modules``: a module's file, or every ``.py`` file under a package
    (so a recording that depends on ``dputils.accountants.pld`` goes stale when any of its submodules changes)."""
    import importlib

    root = RECORDINGS_DIR.parents[2]
    out: set[str] = set()
    for name in modules:
        path = Path(importlib.import_module(name).__file__).resolve()
        files = sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
        out.update((f.relative_to(root) if f.is_relative_to(root) else f).as_posix() for f in files)
    return sorted(out)


def code_hash(modules: Sequence[str]) -> str:
    """SHA-256 of the source files of ``modules`` (:func:`code_files`), by the book's one recording hash
    (:func:`dputils.book.recordings.code_hash`, shared with the audit chapter's GPU recording)."""
    from ..recordings import code_hash as files_hash

    return files_hash(code_files(modules), root=RECORDINGS_DIR.parents[2])


def _git_commit() -> str:
    import subprocess

    root = RECORDINGS_DIR.parents[2]
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def write_recording(
    name: str, value: Mapping[str, Any], seconds: float, directory: Path | None = None, digest: str | None = None
) -> Path:
    """Store recording ``name``: its ``value``, the commit, the hash of the code it depends on
    (:data:`RECORDING_CODE`; ``digest``: the hash taken when the run started, so that an edit during the run is not
    credited), the machine and the run time in seconds."""
    import datetime
    import os
    import platform

    if name not in RECORDING_CODE:
        raise ValueError(f"recording {name!r}: unknown, known are {', '.join(RECORDING_CODE)}")
    directory = RECORDINGS_DIR if directory is None else Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rec = {
        "name": name,
        "value": dict(value),
        "commit": _git_commit(),
        "code_hash": digest or code_hash(RECORDING_CODE[name]),
        "code": list(RECORDING_CODE[name]),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        },
        "seconds": float(seconds),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    path = directory / f"{name}.json"
    path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
    return path


def read_recording(name: str, directory: Path | None = None) -> dict[str, Any] | None:
    """Recording ``name`` with ``"stale"`` added (True when the code it depends on has changed since: its stored
    hash differs from :func:`code_hash` now); None when there is none."""
    path = (RECORDINGS_DIR if directory is None else Path(directory)) / f"{name}.json"
    if not path.is_file():
        return None
    rec = json.loads(path.read_text())
    rec["stale"] = rec.get("code_hash") != code_hash(rec.get("code") or RECORDING_CODE.get(name, ()))
    return rec


def stale_recordings(directory: Path | None = None) -> list[str]:
    """The names of the stored recordings whose code hash no longer matches the code."""
    directory = RECORDINGS_DIR if directory is None else Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.json") if read_recording(p.stem, directory)["stale"])


def recording_provenance(rec: Mapping[str, Any]) -> str:
    """One line of a recording's provenance, for the page."""
    return (
        f"recorded {rec['date'][:10]} at commit {rec['commit'][:10]} in {rec['seconds']:.0f} s "
        f"({rec['machine']['cpus']} CPUs); code hash {rec['code_hash'][:10]}"
        + (" (stale: the code has changed since)" if rec.get("stale") else "")
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dputils.book.chapters.matrix_allocation record T7c``: compute a recording and store it;
    ``... check``: list stale recordings (exit status 1 when any)."""
    import argparse
    import time

    ap = argparse.ArgumentParser(prog="python -m dputils.book.chapters.matrix_allocation")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("record").add_argument("name", choices=sorted(RECORDING_CODE))
    sub.add_parser("check")
    a = ap.parse_args(argv)
    if a.cmd == "check":
        stale = stale_recordings()
        print("stale recordings: " + (", ".join(stale) if stale else "none"))
        return 1 if stale else 0
    from ...matrix.panels import multi_epoch_bisr

    digest, t0 = code_hash(RECORDING_CODE[a.name]), time.perf_counter()
    value = multi_epoch_bisr()
    print(write_recording(a.name, value, time.perf_counter() - t0, digest=digest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def record_multi_bisr(
    tg, rec: Mapping[str, Any] | None, n: int, cost: float, evals: str = "an unmeasured number of"
) -> str:
    """Record T7c (Figure 3c) from its recording ``rec`` (:func:`read_recording`): scored when present and not stale,
    else not run with the reason (the cost per evaluation ``cost`` and the evaluations per calibration ``evals``, as
    measured in the run). Returns the sentence the page shows about it (with the recording's provenance)."""
    if rec is None or rec["stale"]:
        why = "no recording" if rec is None else "the recording is stale (" + recording_provenance(rec) + ")"
        cost_text = f"about {cost:.0f} s" if math.isfinite(cost) else "an unmeasured time"
        tg.record("T7c", ran=False, fmt=dict(why=why, n=n, cost=cost_text, evals=evals))
        return f"Here: {why}, so the panel is not scored."
    v = rec["value"]
    prov = recording_provenance(rec)
    tg.record(
        "T7c", round(v["condcomp_epsilon"], 4), fmt=dict(sigma=v["sigma_renyi"], cc=v["condcomp_epsilon"], prov=prov)
    )
    rel = "below" if v["condcomp_epsilon"] < v["eps"] else "above"
    return (
        f"The recording ({prov}): at Rényi's σ = {v['sigma_renyi']:.3f} for ε = {v['eps']:g}, conditional composition "
        f"certifies ε = {v['condcomp_epsilon']:.3f}, {rel} the target."
    )
