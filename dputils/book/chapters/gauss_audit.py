"""Book tooling of the gauss_audit chapter: its outcome-dependent targets, its smoke stand-ins, the source label
of the authors' CSV values and its recurring figure.

The chapter's targets live in ``params/targets/gauss_audit.yml``; :meth:`dputils.book.scorecard.Targets.record`
records most of them in one call. What recurs in this chapter gets one helper each:

* a target that passes when it holds and is otherwise recorded as *not reproduced* with the table's reason
  (:func:`record_outcome`); its table entry is the not-reproduced one, the pass drops the reason;
* the smoke profile, where the targets checked only at the book's (full) profile are recorded as not run
  (:func:`record_not_run`);
* the figure of empirical epsilon against a sweep (Figs 1(a), 1(b), 3 and 7 of {cite}`gauss_audit`): one line
  per auditor and the authors' values as grey crosses (:func:`draw_bounds`, :func:`mark_target_epsilon`).

Nothing here computes a number the chapter shows; the computations are in :mod:`dputils.audit`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from matplotlib.ticker import NullFormatter

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
