"""One look for every figure of the book.

``use_style()`` sets matplotlib's rc parameters once per notebook; ``new_figure`` gives a figure with
the book's size; ``ACCOUNTANT_COLORS`` keeps one colour per accountant across chapters, so that PLD is
the same blue everywhere.
"""

from __future__ import annotations

from typing import Any

from .optional import require

require("matplotlib", "dputils.plotting")  # one line naming `pip install "dputils[book]"` when it is missing

import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

#: One colour per accountant or method, shared by all chapters.
ACCOUNTANT_COLORS: dict[str, str] = {
    "pld": "#1f77b4",
    "truth": "#000000",
    "rdp": "#d62728",
    "rdp-old": "#ff9896",
    "gdp": "#2ca02c",
    "spa": "#9467bd",
    "edgeworth": "#8c564b",
    "dp_accounting": "#17becf",
    "prv": "#bcbd22",
    "matrix-renyi": "#e377c2",
    "matrix-condcomp": "#7f7f7f",
    "matrix-mc": "#ff7f0e",
    "gauss": "#9467bd",
    "steinke": "#d62728",
    "fdp": "#2ca02c",
}

_STYLE: dict[str, Any] = {
    "figure.figsize": (6.4, 4.0),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "font.family": "DejaVu Sans",
}


def use_style() -> None:
    """Apply the book's matplotlib style (idempotent)."""
    mpl.rcParams.update(_STYLE)


def color(name: str) -> str | None:
    """The book's colour for an accountant/method name, or None (matplotlib's cycle) if it has none."""
    return ACCOUNTANT_COLORS.get(name)


def new_figure(ncols: int = 1, nrows: int = 1, width: float | None = None, height: float | None = None, **kw: Any):
    """``plt.subplots`` with the book's size scaled to the grid of panels."""
    use_style()
    w = width if width is not None else 5.2 * ncols
    h = height if height is not None else 3.6 * nrows
    return plt.subplots(nrows, ncols, figsize=(w, h), **kw)
