"""The book's number formats (issue 34): dputils.book.tables.num / pow10 / diff and the matplotlib tick labels of
dputils.book.plotting, against hand-written strings."""

from __future__ import annotations

import pytest

from dputils.book.tables import Table, diff, num, pow10, sci


@pytest.mark.parametrize(
    "x, digits, shown",
    [
        (2.381776123, 3, "2.38"),
        (2.381776123, 4, "2.382"),
        (14063.2, 3, "14,063"),  # the integer part is kept whole, with a thousands separator
        (123.456, 3, "123"),
        (0.5, 3, "0.5"),  # trailing zeros dropped
        (0.0012345, 4, "0.001234"),
        (4.6492e-5, 3, "4.65×10⁻⁵"),
        (1.5e-5, 3, "1.5×10⁻⁵"),
        (1e6, 3, "10⁶"),
        (-3.14159, 3, "-3.14"),
        (0.0, 3, "0"),
    ],
)
def test_num(x, digits, shown):
    assert num(x, digits) == shown


def test_pow10_and_diff():
    assert pow10(1e-5) == "10⁻⁵" and pow10(1e-10) == "10⁻¹⁰" and pow10(-6) == "10⁻⁶" and pow10(3) == "10³"
    assert pow10(1.0) == "10⁰" and pow10(2.5e-5) == "2.5×10⁻⁵"
    for bad in (0.0, -1e-5, float("nan")):
        with pytest.raises(ValueError, match="x must be"):
            pow10(bad)
    assert diff(2.3821, 2.3818) == "3×10⁻⁴" and diff(1.0, 1.0) == "0" and diff(0.0, 1.5e-9) == "-1.5×10⁻⁹"
    # sci and Table keep their signatures and output (other chapters use them)
    assert sci(4.6492e-5, 4) == "4.649×10⁻⁵" and sci(1e-5, 1) == "10⁻⁵"
    assert ">4.649×10⁻⁵</td>" in Table([{"p": 4.6492e-5}])._repr_html_()


def test_tick_labels_on_a_drawn_log_axis():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    from dputils.book import plotting

    assert [plotting.tick_label(x) for x in (1e-5, 0.01, 100, 1000, 2.5e-5, 0, 0.5, -1e-4, 20000)] == [
        "10⁻⁵",
        "0.01",
        "100",
        "10³",
        "2.5×10⁻⁵",
        "0",
        "0.5",
        "-10⁻⁴",
        "20,000",
    ]
    with mpl.rc_context():  # new_figure applies the book's style: keep it out of the other tests of this worker
        fig, ax = plotting.new_figure()
        ax.loglog([1e-8, 1e-2], [1, 1e5])
        plotting.sci_ticks(ax)
        fig.canvas.draw()
    lo, hi = ax.get_xlim()
    xs = [t.get_text() for t, v in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True) if lo <= v <= hi]
    assert "10⁻⁸" in xs and "10⁻⁵" in xs and "0.01" in xs, xs
    assert all("$" not in t and "e-" not in t for t in xs), xs  # no mathtext, no 1e-05
    assert not any(t.get_text() for t in ax.get_xticklabels(minor=True))
    ys = [t.get_text() for t in ax.get_yticklabels()]
    assert "10⁵" in ys and "100" in ys, ys
    plotting.plt.close(fig)


def test_parameters_and_targets_tables():
    from dputils.book.tables import show_parameters, show_targets

    t = show_parameters({"delta": 1e-5, "sigma": 1.0, "n": 400000, "h": 2.5e-5}, {"delta": "target δ", "n": "samples"})
    assert [r["parameter"] for r in t.rows] == ["delta", "n"] and [r["value"] for r in t.rows] == ["10⁻⁵", "400,000"]
    assert show_parameters({"h": 2.5e-5}, {"h": "grid"}).rows[0]["value"] == "2.5×10⁻⁵"
    with pytest.raises(KeyError):
        show_parameters({}, {"delta": "target δ"})
    recs = [
        {"id": "T1", "what": "ε", "paper": 3.01, "ours": 3.008, "status": "pass", "source": "s", "tolerance": 0.005},
        {"id": "T2", "what": "δ", "paper": 1.0, "ours": 2.0, "status": "not reproduced", "reason": "the grid"},
    ]
    t = show_targets(recs)
    assert t.columns == ["id", "what", "paper", "ours", "status"] and t.rows[1]["what"] == "δ (the grid)"


def test_fmt_value_never_writes_python_e_notation_in_range():
    """A table cell between 10⁻³ and 10⁶ is plain: 5434 at 3 digits was "5.43e+03" (a page read found it)."""
    from dputils.book.tables import fmt_value

    assert fmt_value(5434.2, 3) == "5434"
    assert fmt_value(123456.7, 4) == "123,457"
    assert fmt_value(999.96, 3) == "1000"
    assert fmt_value(12.345, 3) == "12.3"
    for x in (1e-3, 0.5, 7.25, 99.5, 1234.5, 54321.0, 999999.0):
        for d in (1, 2, 3, 4):
            assert "e" not in fmt_value(x, d), (x, d, fmt_value(x, d))
