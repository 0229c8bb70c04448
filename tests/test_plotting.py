"""The book's figure style: text legible at the size the page shows a figure, and legends off the data."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib as mpl  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dputils.book import plotting  # noqa: E402


@pytest.fixture(autouse=True)
def book_style():
    with mpl.rc_context():
        plotting.use_style()
        yield
    plt.close("all")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi)  # as the notebooks' inline display: fig.dpi, tight bbox
    return buf.getvalue()


def _shown_px(fig, points: float) -> float:
    """Height in CSS px at which the page shows a font of ``points`` (content column CONTENT_PX wide)."""
    return points * fig.dpi / 72 * min(1.0, plotting.CONTENT_PX / (fig.get_figwidth() * fig.dpi))


def test_wide_figure_texts_are_shown_at_least_the_legible_size():
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.9))
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="a line")
        ax.set_xlabel("x label")
        ax.legend(loc="lower right")
    _png(fig)
    for ax in axes:
        for t in ax.get_xticklabels() + ax.get_yticklabels() + ax.get_legend().get_texts():
            assert _shown_px(fig, t.get_fontsize()) >= plotting.MIN_TEXT_PX - 1e-9
        assert _shown_px(fig, ax.xaxis.label.get_fontsize()) >= plotting.MIN_LABEL_PX - 1e-9
    # without the hook the same figure's legend was 9 pt: 6.4 px at 672 of 1430 px
    assert _shown_px(fig, 9) < 7


def test_narrow_figure_keeps_the_style_sizes():
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    ax.plot([0, 1], [0, 1], label="a line")
    leg = ax.legend()
    _png(fig)
    assert leg.get_texts()[0].get_fontsize() == pytest.approx(9.0)
    assert ax.xaxis.label.get_fontsize() == pytest.approx(10.0)


def test_a_text_set_smaller_later_is_raised():
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    axes[0].plot([0, 1], [0, 1], label="a")
    axes[0].legend(fontsize=6)
    axes[1].tick_params(labelsize=5)
    _png(fig)
    assert _shown_px(fig, axes[0].get_legend().get_texts()[0].get_fontsize()) >= plotting.MIN_TEXT_PX - 1e-9
    assert _shown_px(fig, axes[1].get_xticklabels()[0].get_fontsize()) >= plotting.MIN_TEXT_PX - 1e-9


def test_legend_over_the_data_is_moved_off_it():
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    x = np.linspace(0, 1, 400)
    for k in range(6):  # lines through every region of the axes
        ax.plot(x, (x * (k + 1)) % 1.0, label=f"series {k}")
    ax.legend(loc="center")
    # measured without the hook: the centred legend hides a good share of the lines
    with mpl.rc_context({"figure.hooks": []}):
        fig0, ax0 = plt.subplots(figsize=(5.2, 3.6))
        for k in range(6):
            ax0.plot(x, (x * (k + 1)) % 1.0, label=f"series {k}")
        ax0.legend(loc="center")
        before = plotting.legend_overlaps(fig0)[0].fraction
    assert before > 0.05
    _png(fig)
    after = plotting.legend_overlaps(fig)[0].fraction
    assert after <= plotting.MAX_LEGEND_COVER
    assert after < before


def test_legend_in_a_left_panel_is_not_pushed_onto_its_neighbour():
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    x = np.linspace(0, 1, 400)
    for ax in axes:
        for k in range(6):
            ax.plot(x, (x * (k + 1)) % 1.0, label=f"s{k}")
    axes[0].legend(loc="center")
    _png(fig)
    r = fig.canvas.get_renderer()
    box = axes[0].get_legend().get_window_extent(r)
    assert box.x1 <= axes[1].bbox.x0 + 1  # never over the right panel


def test_bookcheck_still_offers_the_legend_measure():
    from dputils.book import bookcheck

    assert bookcheck.legend_overlaps is plotting.legend_overlaps
