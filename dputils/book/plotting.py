"""One look for every figure of the book.

``use_style()`` sets matplotlib's rc parameters once per notebook; ``new_figure`` gives a figure with
the book's size; :func:`color` keeps one colour per accountant across chapters, so that PLD is the same blue
everywhere: a registered accountant's is the ``color`` of its registration (:mod:`dputils.accountants.registry`),
other methods' (the exact value, peers, audits) are in :data:`METHOD_COLORS`; ``ACCOUNTANT_COLORS`` is the union.

Legible at the size a reader sees. The book's page shows a figure at most ``CONTENT_PX`` CSS pixels wide
(672 px in a 1280 px window), so a figure drawn ``W`` inches wide at ``D`` dpi is shown at the scale
``s = min(1, CONTENT_PX / (W D))`` and a font of ``p`` points is shown ``p D s / 72`` pixels high. A wide
three-panel figure (13 in at 110 dpi: s = 0.47) thus showed its 9 pt legends 6.4 px high. ``use_style`` installs
two hooks for every pyplot figure made after it (matplotlib's ``figure.hooks``):

* at creation (:func:`_on_new_figure`), the font sizes of the artists the figure will hold are chosen for its
  width, so that tick labels and legends are shown at least ``MIN_TEXT_PX`` and titles and axis labels at
  least ``MIN_LABEL_PX`` high (never smaller than the style's own sizes);
* at its first draw (:func:`_fix_legends`), every legend that covers more than ``MAX_LEGEND_COVER`` of its
  axes' plotted data (measured by :func:`legend_overlaps`) is moved: first to matplotlib's ``"best"``
  place, then outside the axes (right of the rightmost column, below the bottom row), keeping the place
  that covers least; a text that the figure sets smaller than the legible size later is raised to it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ..optional import require

require("matplotlib", "dputils.book.plotting")  # one line naming `pip install "dputils[book]"` when it is missing

import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection, PolyCollection  # noqa: E402
from matplotlib.font_manager import font_scalings  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from ..accountants import registry  # noqa: E402
from ..errors import DPValueError  # noqa: E402

#: One colour per method that is not a registered accountant (the registered ones carry theirs), shared by all
#: chapters: the exact value, the classic RDP conversion of the foundations chapter, peers, audit methods; and
#: the matrix accountants, registered without a class in this version (their colour moves to their
#: ``@register`` with it).
METHOD_COLORS: dict[str, str] = {
    "truth": "#000000",
    "rdp-old": "#ff9896",
    "dp_accounting": "#17becf",
    "prv": "#bcbd22",
    "matrix-renyi": "#e377c2",
    "matrix-condcomp": "#7f7f7f",
    "matrix-mc": "#ff7f0e",
    "gauss": "#9467bd",
    "steinke": "#d62728",
    "fdp": "#2ca02c",
}


@functools.cache
def _colors() -> dict[str, str]:
    out = {r.name: r.color for r in registry.select() if r.color}
    return {**METHOD_COLORS, **out}


def __getattr__(name: str) -> Any:
    if name == "ACCOUNTANT_COLORS":  # every colour: the registered accountants' and METHOD_COLORS
        return dict(_colors())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "figure.hooks": ["dputils.book.plotting:_on_new_figure"],
}

#: Width (CSS px) of the book's content column at the browser check's 1280 px window.
CONTENT_PX = 672
#: Smallest shown height (CSS px) of tick labels and legend texts, and of titles and axis labels.
MIN_TEXT_PX = 10.0
MIN_LABEL_PX = 11.0
#: A legend may cover at most this share of its axes' plotted data (see :func:`legend_overlaps`).
MAX_LEGEND_COVER = 0.02

_SMALL_KEYS = ("xtick.labelsize", "ytick.labelsize", "legend.fontsize", "legend.title_fontsize")
_LABEL_KEYS = ("axes.titlesize", "axes.labelsize", "figure.titlesize", "font.size")


def use_style() -> None:
    """Apply the book's matplotlib style (idempotent), including the legibility hooks (module docstring)."""
    mpl.rcParams.update(_STYLE)


def shown_scale(fig) -> float:
    """The scale ``s = min(1, CONTENT_PX / (W D))`` at which the book's page shows ``fig``."""
    return min(1.0, CONTENT_PX / max(fig.get_figwidth() * fig.dpi, 1.0))


def _points(px: float, fig) -> float:
    """The font size in points that is shown ``px`` CSS pixels high in ``fig``."""
    return px * 72.0 / (fig.dpi * shown_scale(fig))


def _style_points(key: str) -> float:
    """The style's size of ``key`` in points (matplotlib's default where the style sets none), resolving
    relative sizes ("large") against the style's base size, not against the current rcParams."""
    base = float(_STYLE.get("font.size", mpl.rcParamsDefault["font.size"]))
    v = _STYLE.get(key, mpl.rcParamsDefault[key])
    if v is None:
        return base
    return base * font_scalings[v] if isinstance(v, str) else float(v)


def _on_new_figure(fig) -> None:
    """``figure.hooks`` entry: fonts for this figure's width, and the legend check at its first draw.

    The font sizes are set in ``rcParams`` (the artists of the figure read them as they are made, just after
    this hook); the next figure's hook sets them again for its own width.
    """
    for keys, px in ((_SMALL_KEYS, MIN_TEXT_PX), (_LABEL_KEYS, MIN_LABEL_PX)):
        for key in keys:
            mpl.rcParams[key] = max(_style_points(key), _points(px, fig))
    draw = fig.draw

    def draw_once_fixed(renderer, _draw=draw):
        if not getattr(fig, "_dpbook_fixed", False):
            fig._dpbook_fixed = True
            try:
                _fix_legends(fig)
            except Exception:  # a figure the checks cannot measure is drawn as it is
                pass
        return _draw(renderer)

    fig.draw = draw_once_fixed


def _raise_small_texts(fig) -> None:
    small, label = _points(MIN_TEXT_PX, fig), _points(MIN_LABEL_PX, fig)
    titles = set()
    for ax in fig.axes:
        titles.update({id(ax.title), id(ax.xaxis.label), id(ax.yaxis.label), id(ax._left_title), id(ax._right_title)})
        for axis, size in ((ax.xaxis, small), (ax.yaxis, small)):
            ticks = axis.get_major_ticks() + axis.get_minor_ticks()
            if ticks and ticks[0].label1.get_fontsize() < size:
                axis.set_tick_params(which="both", labelsize=size)
    for t in fig.findobj(Text):
        if t.get_text() and t.get_visible():
            need = label if id(t) in titles else small
            if t.get_fontsize() < need:
                t.set_fontsize(need)


def _fix_legends(fig) -> None:
    """Raise texts below the legible size, then move each legend that covers its axes' data (module docstring)."""
    _raise_small_texts(fig)
    if not (any(ax.get_legend() for ax in fig.axes)):
        return
    fig.draw_without_rendering()
    worst = {o.axes: o.fraction for o in legend_overlaps(fig)}
    if all(f <= MAX_LEGEND_COVER for i, f in worst.items() if i >= 0):
        return

    boxes = [ax.get_position() for ax in fig.axes]
    for i, ax in enumerate(fig.axes):
        leg = ax.get_legend()
        if leg is None or worst.get(i, 0.0) <= MAX_LEGEND_COVER:
            continue
        pos = boxes[i]
        rightmost = all(
            b.x0 < pos.x1 - 1e-6 or abs(b.y0 - pos.y0) > 0.5 * pos.height for j, b in enumerate(boxes) if j != i
        )
        bottom = all(
            b.y1 > pos.y0 + 1e-6 or abs(b.x0 - pos.x0) > 0.5 * pos.width for j, b in enumerate(boxes) if j != i
        )
        tries = [("best", None)]
        if rightmost:
            tries.append(("upper left", (1.02, 1.0)))
        if bottom:
            tries.append(("upper center", None))  # below the axes, under its x label (placed below)
        best = (worst[i], leg.get_loc() if hasattr(leg, "get_loc") else leg._loc, leg.get_bbox_to_anchor())
        for loc, anchor in tries:
            if loc == "upper center":
                fig.draw_without_rendering()
                r = fig.canvas.get_renderer()
                tight = ax.get_tightbbox(r)
                y = (tight.y0 - ax.bbox.y0) / max(ax.bbox.height, 1.0) - 0.02
                anchor = (0.5, float(np.clip(y, -1.0, 0.0)))
            leg.set_loc(loc)
            leg.set_bbox_to_anchor(anchor, transform=ax.transAxes if anchor is not None else None)
            fig.draw_without_rendering()
            cover = next(o.fraction for o in legend_overlaps(fig) if o.axes == i)
            if cover < best[0] - 1e-12:
                best = (cover, loc, anchor)
            if cover <= MAX_LEGEND_COVER:
                break
        else:
            leg.set_loc(best[1])
            leg.set_bbox_to_anchor(
                best[2] if isinstance(best[2], tuple) else None,
                transform=ax.transAxes if isinstance(best[2], tuple) else None,
            )


def color(name: str) -> str | None:
    """The book's colour for an accountant/method name, or None (matplotlib's cycle) if it has none: the
    registration's ``color`` for a registered accountant, :data:`METHOD_COLORS` for other methods."""
    return _colors().get(name)


def new_figure(ncols: int = 1, nrows: int = 1, width: float | None = None, height: float | None = None, **kw: Any):
    """``plt.subplots`` with the book's size scaled to the grid of panels."""
    use_style()
    w = width if width is not None else 5.2 * ncols
    h = height if height is not None else 3.6 * nrows
    return plt.subplots(nrows, ncols, figsize=(w, h), **kw)


# --------------------------------------------------------------------------------------------------------
# tick labels with the look of the tables: 10⁻⁵, 2.5×10⁻⁵, 0.01, 3.5


def tick_label(x: float, pos: int | None = None, digits: int = 3, powers: bool = False) -> str:
    """One tick label as the tables write numbers (:func:`dputils.book.tables.num`): a power of ten as
    ``10⁻⁵`` (Unicode superscripts, no mathtext), other values at ``digits`` significant digits, plainly between
    10⁻³ and 10⁶ and as ``a×10ⁿ`` outside; 0 as ``0``. 0.01, 0.1, 1, 10 and 100 are written plainly unless
    ``powers`` (an axis of many decades: every power as ``10ⁿ``). ``pos`` is matplotlib's tick index (unused)."""
    from .tables import num, pow10

    x = float(x)
    if x == 0 or not np.isfinite(x):
        return "0" if x == 0 else ""
    e = round(np.log10(abs(x)))
    if (powers or abs(e) >= 3) and np.isclose(abs(x), 10.0**e, rtol=1e-9):  # 10⁻⁵ rather than 1e-05; 0.01 and 100 stay
        return ("-" if x < 0 else "") + pow10(int(e))
    return num(x, digits)


def sci_ticks(ax, axis: str = "both", digits: int = 3, minor: bool = False, powers: bool = False) -> None:
    """Label the ticks of ``ax``'s ``axis`` ("x", "y" or "both") with :func:`tick_label`: the same look as the
    tables and legends (``10⁻⁵``), and short labels that stay legible at the column's width. On a log axis the
    major ticks stay where matplotlib's locator puts them (powers of ten); the minor ones lose their labels
    unless ``minor``. ``powers``: every power of ten as ``10ⁿ`` (:func:`tick_label`)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fmt = FuncFormatter(lambda x, pos: tick_label(x, pos, digits, powers))
    for name in ("x", "y") if axis == "both" else (axis,):
        a = ax.xaxis if name == "x" else ax.yaxis
        a.set_major_formatter(fmt)
        a.set_minor_formatter(fmt if minor else NullFormatter())


# --------------------------------------------------------------------------------------------------------
# legends over the data: seen in matplotlib, not in the HTML image (dputils.book.bookcheck re-exports these)


@dataclasses.dataclass(frozen=True)
class LegendOverlap:
    """How much of the plotted data one legend hides."""

    axes: int  # index in ``fig.axes``; -1 for a figure legend (``fig.legend``), measured against every axes
    title: str  # the axes' title, else the legend's labels
    covered: int  # samples of the plotted data inside the legend box
    samples: int  # samples of the plotted data drawn inside the axes
    fraction: float  # covered / samples (0 when nothing is plotted)

    def __str__(self) -> str:
        where = "figure legend" if self.axes < 0 else f"legend of axes {self.axes}"
        return (
            f"{where} ({self.title!r}) covers {100 * self.fraction:.1f}% of the plotted data "
            f"({self.covered} of {self.samples} samples)"
        )


def _segment_samples(xy, step: float):
    """Points along the polyline ``xy`` (n x 2, display coordinates): each segment gives ``ceil(length / step)``
    points from its start on, so the count is proportional to the drawn length; the last vertex of each run
    and isolated vertices give one point. Non-finite vertices break the line."""

    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    fin = np.isfinite(xy).all(axis=1)
    seg = fin[:-1] & fin[1:]  # segment k joins vertices k and k + 1
    starts = np.zeros(len(xy), dtype=bool)
    starts[:-1] = seg
    out = [xy[fin & ~starts]]  # ends of runs and isolated points
    a, b = xy[:-1][seg], xy[1:][seg]
    n = np.maximum(np.ceil(np.hypot(*(b - a).T) / step).astype(int), 1)
    n = np.minimum(n, 100_000)  # a segment far outside the axes would otherwise ask for billions of points
    if len(n):
        idx = np.repeat(np.arange(len(a)), n)
        t = (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)) / np.repeat(n, n)
        out.append(a[idx] + t[:, None] * (b - a)[idx])
    return np.concatenate(out)


def _area_samples(path, box, step: float):
    """Grid points ``step`` display pixels apart inside the closed ``path`` (display coordinates), within ``box``."""

    ext = path.get_extents()
    x0, x1 = max(ext.x0, box.x0), min(ext.x1, box.x1)
    y0, y1 = max(ext.y0, box.y0), min(ext.y1, box.y1)
    if x1 <= x0 or y1 <= y0:
        return np.empty((0, 2))
    gx, gy = np.meshgrid(np.arange(x0 + step / 2, x1, step), np.arange(y0 + step / 2, y1, step))
    pts = np.column_stack([gx.ravel(), gy.ravel()])
    return pts[path.contains_points(pts)] if len(pts) else pts


def _plotted_samples(ax, step: float):
    """Display-coordinate samples of what ``ax`` plots: lines along their drawn segments (and markers),
    scatter points, line collections (error bars) along their segments, filled patches and polygons (bars,
    histograms, ``fill_between``) on a grid over their area, unfilled patches along their outline. Images,
    meshes, text and the axes' own decorations are not counted."""

    pts = []
    box = ax.bbox
    for ln in ax.lines:
        if not ln.get_visible() or not isinstance(ln, Line2D):
            continue
        xy = ln.get_transform().transform(ln.get_xydata())
        if ln.get_linestyle() in ("None", "none", "", " ") or ln.get_linewidth() == 0:
            pts.append(xy[np.isfinite(xy).all(axis=1)])
        else:
            pts.append(_segment_samples(xy, step))
    for col in ax.collections:
        if not col.get_visible():
            continue
        if isinstance(col, LineCollection):
            tr = col.get_transform()
            for seg in col.get_segments():
                if len(seg):
                    pts.append(_segment_samples(tr.transform(seg), step))
        elif isinstance(col, PathCollection) and len(col.get_offsets()):
            pts.append(col.get_offset_transform().transform(np.asarray(col.get_offsets(), dtype=float)))
        elif isinstance(col, PolyCollection):
            tr = col.get_transform()
            for p in col.get_paths():
                pts.append(_area_samples(p.transformed(tr), box, step))
    for patch in ax.patches:
        if not patch.get_visible():
            continue
        path = patch.get_path().transformed(patch.get_transform())
        if patch.get_fill():
            pts.append(_area_samples(path, box, step))
        else:
            for poly in path.to_polygons(closed_only=False):
                pts.append(_segment_samples(poly, step))
    pts = [p for p in pts if len(p)]
    if not pts:
        return np.empty((0, 2))
    pts = np.concatenate(pts)
    inside = (pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)
    return pts[inside]


def legend_overlaps(fig, renderer=None, step: float = 2.0) -> list[LegendOverlap]:
    """For every legend of ``fig``: the fraction of the plotted data that lies under the legend's box.

    The figure is laid out first (``fig.draw_without_rendering()``, which also places ``loc="best"`` legends),
    unless a ``renderer`` is given (inside a ``draw_event`` callback, pass ``event.renderer``). In display
    coordinates, the legend's window extent (frame and padding included, whether the frame is drawn or not)
    is compared with samples of the data its axes draw (see :func:`_plotted_samples`: lines are sampled every
    ``step`` pixels along their length, filled areas on a ``step`` x ``step`` grid, scatter points once each),
    keeping only samples inside the axes. ``fraction = covered / samples`` is thus the share of the drawn
    line length, marker count and filled area under the legend. A figure legend is measured against every
    axes. A legend outside its axes covers 0.

    Returns one :class:`LegendOverlap` per legend, in axes order (figure legends last);
    ``max((o.fraction for o in legend_overlaps(fig)), default=0.0)`` is the worst.
    """

    if isinstance(step, bool) or not isinstance(step, (int, float)) or not 0.1 <= step <= 100:
        raise DPValueError(f"step must be a number of display pixels in [0.1, 100], got {step!r}")
    if renderer is None:
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
    legends = [(i, ax, ax.get_legend()) for i, ax in enumerate(fig.axes)]
    legends = [(i, [ax], leg) for i, ax, leg in legends if leg is not None and leg.get_visible()]
    legends += [(-1, list(fig.axes), leg) for leg in fig.legends if leg.get_visible()]
    out = []
    for i, axes, leg in legends:
        bb = leg.get_window_extent(renderer)
        covered = samples = 0
        for ax in axes:
            pts = _plotted_samples(ax, step)
            samples += len(pts)
            covered += int(
                np.count_nonzero(
                    (pts[:, 0] >= bb.x0) & (pts[:, 0] <= bb.x1) & (pts[:, 1] >= bb.y0) & (pts[:, 1] <= bb.y1)
                )
            )
        title = (
            axes[0].get_title()
            if i >= 0 and axes[0].get_title()
            else ", ".join(t.get_text() for t in leg.get_texts())[:80]
        )
        out.append(LegendOverlap(i, title, covered, samples, covered / samples if samples else 0.0))
    return out
