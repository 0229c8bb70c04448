"""Book tooling of the gauss_audit chapter: its outcome-dependent targets, its smoke stand-ins, the source label
of the authors' CSV values and its recurring figure.

The chapter's targets live in ``params/targets/gauss_audit.yml``; :meth:`dputils.book.scorecard.Targets.record`
records most of them in one call. What recurs in this chapter gets one helper each:

* a target that passes when it holds and is otherwise recorded as *not reproduced* with the table's reason
  (:func:`record_outcome`); its table entry is the not-reproduced one, the pass drops the reason;
* the smoke profile, where the targets checked only at the book's (full) profile are recorded as not run
  (:func:`record_not_run`);
* the figure of empirical epsilon against a sweep (Figs 1(a), 1(b), 3 and 7 of {cite}`gauss_audit`): one line
  per auditor and the authors' values as grey crosses (:func:`draw_bounds`, :func:`mark_target_epsilon`);
* the trained run's score figures: IN/OUT histograms with the Model-1 shift (:func:`draw_score_histograms`),
  the paper's Figs 4(b), 5 and 6 (:func:`draw_scores_against_model`), and the DP-FTRL Fig. 2
  (:func:`draw_ftrl_bounds`).

Nothing here computes a number the chapter shows; the computations are in :mod:`dputils.audit`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from matplotlib.ticker import NullFormatter
from scipy import stats

from ..scorecard import Targets

SMOKE = "smoke profile: checked at the book's (full) profile only"


def record_not_run(tg: Targets, ids: Iterable[str], what: str, reason: str = SMOKE, **fields: Any) -> None:
    """Record each of ``ids`` as not run, with one shared ``what`` and ``reason`` (the smoke profile's)."""
    for id_ in ids:
        tg.not_run(id_, what, reason=reason, **fields)


REPO = "authors' repository, published after the paper"


def src_repo(csv: str, fig: str) -> str:
    """Source label of values read from one of the authors' CSV files.

    The paper's figures are images, so their per-point values are read from CSV files that the authors
    published in their repository after the paper (stoneboat/dpsgd-auditbench, July 2026); those files match
    every number the text states."""
    return f"{REPO}: {csv} (values behind {fig})"


def draw_bounds(
    ax: Any,
    x: Any,
    curves: dict[str, Any],
    csv: Iterable[tuple[Any, Any]] = (),
    *,
    logx: bool = False,
    csv_label: str = "authors' CSV",
) -> None:
    """Draw the chapter's recurring figure: empirical epsilon lower bounds against ``x`` (one line with markers
    per auditor, in the style cycle's colours) and the authors' CSV values as grey crosses, labelled once.

    ``curves`` maps a legend label to its values, or to ``(values, format)`` for a marker other than
    ``"o-"``; ``csv`` is a sequence of ``(x, y)`` pairs of the authors' values; ``logx`` draws a log x axis."""
    plot = ax.semilogx if logx else ax.plot
    for label, y in curves.items():
        y, style = y if isinstance(y, tuple) else (y, "o-")
        plot(x, y, style, label=label)
    for i, (xs, ys) in enumerate(csv):
        plot(list(xs), list(ys), "x", color="gray", label=csv_label if i == 0 else None)


def mark_target_epsilon(ax: Any, xlabel: str, eps: float = 8.0, title: str | None = None) -> None:
    """Finish a panel at a fixed target epsilon: a dashed line at ``eps``, y from 0 to ``eps + 1``, plain
    (not scientific) minor tick labels on a log x axis, the x label and an optional title."""
    ax.axhline(eps, ls="--", color="k", lw=0.8)
    ax.set_ylim(0, eps + 1)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(xlabel)
    if title is not None:
        ax.set_title(title)


def draw_score_histograms(ax: Any, in_scores: Any, out_scores: Any, model_shift: float, title: str) -> None:
    """IN and OUT score histograms on shared bins (40 over the range of both), densities, with the OUT mean
    (dotted) and the OUT mean plus ``model_shift`` (dashed: where Model 1 puts the IN mean, sqrt(T) q C); the
    legend below the axes, off the histograms."""
    lo = min(out_scores.min(), in_scores.min())
    hi = max(out_scores.max(), in_scores.max())
    bins = np.linspace(lo, hi, 40)
    ax.hist(out_scores, bins=bins, alpha=0.6, density=True, label=f"OUT (m = {len(out_scores)})")
    ax.hist(in_scores, bins=bins, alpha=0.6, density=True, label=f"IN (m = {len(in_scores)})")
    ax.axvline(out_scores.mean(), color="k", lw=1, ls=":")
    ax.axvline(out_scores.mean() + model_shift, color="k", lw=1, ls="--", label=r"OUT mean + $\sqrt{T} q C$ (Model 1)")
    ax.set_xlabel("canary score $S_T$ (Definition 2)")
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, framealpha=1, fontsize=8)


def draw_scores_against_model(
    axs: Any, in_scores: Any, out_scores: Any, in_model: tuple, out_model: tuple, z_ordered: Any
) -> None:
    """The paper's Figs 4(b), 5 and 6 on three axes: the IN and OUT score histograms, each with the Model-1
    Gaussian ``(mean, sd)`` drawn over the range of all scores, and a hexbin of the standardised scores
    ``z_ordered`` (canaries in the order of their parameter coordinate) against the canary index."""
    all_scores = np.concatenate([in_scores, out_scores])
    grid = np.linspace(all_scores.min(), all_scores.max(), 200)
    for ax, sc, (mu_m, sd_m), name in ((axs[0], in_scores, in_model, "IN"), (axs[1], out_scores, out_model, "OUT")):
        ax.hist(sc, bins=40, density=True, alpha=0.6, label=f"{name} (mean {sc.mean():.2f}, sd {sc.std(ddof=1):.2f})")
        ax.plot(grid, stats.norm.pdf(grid, mu_m, sd_m), "k-", lw=1, label=f"Model 1: N({mu_m:.2f}, {sd_m:.2f}²)")
        ax.set_xlabel("score $S_T$")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), framealpha=1)
    axs[0].set_title("Fig. 4(b): IN scores")
    axs[1].set_title("Fig. 5: OUT scores")
    axs[2].hexbin(np.arange(z_ordered.size), z_ordered, gridsize=30, cmap="Blues", mincnt=1)
    axs[2].set_xlabel("canary (sorted by parameter coordinate)")
    axs[2].set_ylabel("standardised score")
    axs[2].set_title("Fig. 6")


def draw_ftrl_bounds(
    ax: Any, eps: Any, ideal: dict[str, Any], trained: dict[str, Any], m: int, train_m: int, title: str
) -> None:
    """The paper's Fig. 2 (DP-FTRL): the diagonal (target = ceiling), the idealised runs' ellipsoid means
    with min-max error bars over runs (``ideal[method]`` of shape (len(eps), runs)), the Bonferroni, Andrew et
    al. and f-DP means, and the trained runs' bounds with and without the background subtraction
    (``trained["ours"]``, ``trained["raw"]``)."""
    mean = {k: v.mean(axis=1).tolist() for k, v in ideal.items()}
    g = ideal["gauss"]
    ax.plot(eps, eps, "k-.", label="theoretical = ceiling")
    ax.errorbar(
        eps,
        mean["gauss"],
        yerr=[np.subtract(mean["gauss"], g.min(1)), np.subtract(g.max(1), mean["gauss"])],
        fmt="o-",
        capsize=3,
        label=f"ours, ellipsoid (simulated, m = {m})",
    )
    ax.plot(eps, mean["gauss-bonferroni"], "s--", label="ours, Bonferroni (simulated)")
    ax.plot(eps, mean["andrew"], "^-", label="Andrew et al. (point estimate, simulated)")
    ax.plot(eps, mean["fdp"], "v:", label="f-DP (split, simulated)")
    ax.plot(eps, trained["ours"], "D-", label=f"ours, trained (m = {train_m})")
    ax.plot(eps, trained["raw"], "d:", label="ours, trained, raw scores")
    ax.set_xlabel("theoretical epsilon")
    ax.set_ylabel("empirical epsilon")
    ax.legend(fontsize=7, loc="upper left", framealpha=1)
    ax.set_title(title)
