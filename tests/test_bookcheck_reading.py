"""The reader's checks of dputils.book.bookcheck (issue 34), on small hand-written pages served from tmp_path:
tables whose columns hide behind a scrollbar, bare True/False/None outputs, shown bookkeeping cells, target ids in
the prose, table cells with 9+ significant digits, and the share of shown code in a page's height.

Like tests/test_bookcheck.py these need Debian's headless Chromium; without it they are skipped (failed in CI).
The text classifiers are tested without a browser.
"""

from __future__ import annotations

import os

import pytest

from dputils.book import bookcheck as bc

# a 600 px column as in tests/test_bookcheck.py; a closed <details> around a cell's input is what hide-input renders
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>reading</title>
<style>body {{ margin: 0; font-size: 16px }} article {{ width: 600px; }} pre {{ margin: 0; line-height: 20px }}
.pst-scrollable-table-container {{ overflow-x: auto }}</style></head><body><main><article class="bd-article">
<section id="intro"><h1>A page for its reader</h1>
<p>The accountant gives an epsilon of 2.38 at T = 14063 steps, as Table 1 shows.</p>
<div class="cell tag_hide-input"><details class="above-input"><summary>Show code cell source</summary>
<div class="cell_input"><pre>import numpy as np
from dputils.book.results import glue
glue("x", 1)</pre></div></details>
<div class="cell_output"><div class="output text_plain"><pre>0.123 and 4 more</pre></div></div></div>
<div class="cell"><div class="cell_input"><pre>fig = ch.plot_directions(mech, sigma, q)</pre></div></div>
<div class="pst-scrollable-table-container"><table><caption>Table 1: fits.</caption>
<tr><th>target</th><th>epsilon</th><th>steps</th></tr><tr><td>T1.2</td><td>2.382</td><td>14063</td></tr></table></div>
{extra}
<div style="height: {filler}px"></div>
</section></article></main></body></html>"""

WIDE_CELLS = "".join(f"<td>column {i}</td>" for i in range(40))

PLANTED = {
    "clean": "",
    # a table too wide for the column in the theme's scroll box: its columns hide behind a scrollbar
    "wide_theme_box": f'<div class="pst-scrollable-table-container"><table><tr>{WIDE_CELLS}</tr></table></div>',
    "bare_true": '<div class="cell"><div class="cell_output"><div class="output text_plain"><pre>True</pre>'
    "</div></div></div>",
    "bare_rows": '<div class="cell"><div class="cell_output"><div class="output text_plain"><pre>1 row(s)</pre>'
    "</div></div></div>",
    "shown_imports": '<div class="cell"><div class="cell_input"><pre>import math\n\nimport numpy as np\n'
    "from dputils.book.results import glue</pre></div></div>",
    "shown_parameters": '<div class="cell tag_parameters"><div class="cell_input"><pre>sigma = 1.0  # noise\n'
    "q = 0.01  # rate</pre></div></div>",
    "target_in_prose": "<p>The PLD epsilon (target T2.1) is below the RDP one.</p>",
    "long_digits": "<table><tr><th>sigma</th><th>epsilon</th></tr><tr><td>1.1</td><td>2.38177612345</td></tr></table>",
    "code_share": '<div class="cell"><div class="cell_input"><pre>'
    + "\n".join(f"y{i} = f(x{i})" for i in range(60))
    + "</pre></div></div>",
}

EXPECTED = {
    "wide_theme_box": "table-width",
    "bare_true": "bare-output",
    "bare_rows": "bare-output",
    "shown_imports": "bookkeeping",
    "shown_parameters": "bookkeeping",
    "target_in_prose": "target-id",
    "long_digits": "digits",
    "code_share": "code-share",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not bc.chromium_available():
        msg = f"dputils.book.bookcheck cannot run: {bc.CHROMIUM} or {bc.CHROMEDRIVER} is missing; {bc.INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    from dputils.book.tables import Table

    root = tmp_path_factory.mktemp("reading")
    for name, extra in PLANTED.items():
        (root / f"{name}.html").write_text(PAGE.format(extra=extra, filler=3200))
    # a wide table in dputils.book.tables' own scroll box (issue 28 let it scroll; issue 34 counts it)
    wide = Table([{f"column {i}": 0.5 * i for i in range(40)}])._repr_html_()
    (root / "wide_dpbook_box.html").write_text(PAGE.format(extra=wide, filler=3200))
    # a chapter's own targets table (Targets.table): long texts, lists of numbers, a reason; it fits the column
    from dputils.book.scorecard import Targets

    tg = Targets("planted", spec={})
    for k in range(6):  # the columns of the edgeworth chapter's table, 772 px wide in its 688 px column before
        tg.check(
            f"T{k} PRV bracket",
            "Gaussian mechanism, μ = 1, δ = 10⁻⁵: ε of AEA orders 0–3",
            [0.3139, 0.3186],
            [0.3139, 0.3186],
            0.0007,
            mode="le",
            source="our computation (contour-integral truth, dputils.truth); the bound is PRV's stated eps_error",
        )
    tg.not_reproduced("T99", "a vacuous bound", 4.649e-5, 2.0, 0.1, reason="the bound is vacuous here " * 4)
    (root / "targets_table.html").write_text(PAGE.format(extra=tg.table()._repr_html_(), filler=0))
    # the same ids on the scorecard are its content
    (root / "scorecard.html").write_text(PAGE.format(extra=PLANTED["target_in_prose"], filler=3200))
    # the code of "code_share" on a short page: not measured
    (root / "short.html").write_text(PAGE.format(extra=PLANTED["code_share"], filler=0))
    with bc.serve(root) as server, bc.start_browser(width=1280, height=800) as browser:
        yield root, server, browser


def _reading(site, page):
    root, server, browser = site
    bc.load(browser.driver, server.url(page))
    return bc.check_reading(browser.driver, page)


def test_clean_page_has_no_reading_finding(site):
    found, m = _reading(site, "clean.html")
    assert found == [], found
    # the controls are there and were measured: a table (with a target id and a 4-digit number in its cells),
    # a collapsed bookkeeping cell (not shown), one shown code cell that is not bookkeeping, a tall page
    assert m["tables"] == 1 and m["wide_tables"] == 0 and m["long_number_cells"] == 0
    assert m["code_cells"] == 1 and m["bookkeeping_cells"] == 0 and m["target_ids"] == 0 and m["bare_outputs"] == 0
    assert m["page_px"] > bc.CODE_SHARE_MIN_PX and 0 < m["code_share"] < bc.CODE_SHARE_MAX


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_planted_defect_is_found(site, name):
    found, m = _reading(site, f"{name}.html")
    kinds = [f.kind for f in found]
    assert kinds == [EXPECTED[name]], found  # that one finding, and no other


def test_wide_table_in_dpbook_box(site):
    found, m = _reading(site, "wide_dpbook_box.html")
    assert [f.kind for f in found] == ["table-width"] and m["wide_tables"] == 1, found
    assert " px wide in a " in found[0].detail


def test_metrics_count_what_the_findings_name(site):
    _, m = _reading(site, "shown_imports.html")
    assert m["code_cells"] == 2 and m["bookkeeping_cells"] == 1
    _, m = _reading(site, "code_share.html")
    assert m["code_share"] > bc.CODE_SHARE_MAX and m["code_px"] >= 60 * 20
    found, m = _reading(site, "target_in_prose.html")
    assert m["target_ids"] == 1 and "T2.1" in found[0].detail


def test_chapter_targets_table_fits_the_column(site):
    found, m = _reading(site, "targets_table.html")
    assert m["tables"] == 2 and m["wide_tables"] == 0 and found == [], found
    root, server, browser = site
    r = bc.check_page(browser, server, "targets_table.html")
    assert r.findings == [], r.findings  # no number broken over lines either (split), nothing sticks out


def test_exempt_pages_and_short_pages(site):
    found, m = _reading(site, "scorecard.html")
    assert found == [] and m["target_ids"] == 0, found
    found, m = _reading(site, "short.html")
    assert m["code_share"] > bc.CODE_SHARE_MAX and m["page_px"] < bc.CODE_SHARE_MIN_PX
    assert found == [], found


def _long_cells(n):
    rows = "".join(f"<tr><td>{i}</td><td>2.38177612{i:03d}</td></tr>" for i in range(n))
    return f"<table><caption>Table 2: long numbers.</caption><tr><th>k</th><th>epsilon</th></tr>{rows}</table>"


def test_reading_kinds_fail_the_check(site, capsys):
    """Issue 34's Done when: each reading kind fails the whole check on its planted page, the clean page passes
    every kind (layout kinds included), and the thresholds are those of READING_LIMITS."""
    root, server, browser = site
    assert bc.READING_LIMITS == {
        "table-width": 0,
        "bare-output": 0,
        "bookkeeping": 0,
        "target-id": 0,
        "digits": 20,
        "code-share": 0,
    }
    # every kind fails unless named in REPORTED_ONLY (empty on this branch; the lead's switch at merge time): the
    # checks below pass the failing kinds explicitly, so they test the mechanism whatever the switch says
    assert bc.FAIL_KINDS == frozenset(bc.KINDS) - bc.REPORTED_ONLY
    every = frozenset(bc.KINDS)
    clean = bc.check_page(browser, server, "clean.html")
    assert clean.findings == [] and bc.failures([clean], every) == 0 and bc.over_limits([clean], every) == {}
    for name, kind in EXPECTED.items():
        if kind == "digits":
            continue  # one long cell is within the book's allowance of 20: below
        r = bc.check_page(browser, server, f"{name}.html")
        assert bc.over_limits([r], every) == {kind: (1, 0)}, (name, r.findings)
        assert bc.failures([r], every) == 1
        # the switch for a kind that lags at merge time: left out of the failing kinds, it is reported only
        assert bc.failures([r], every - {kind}) == 0
    bc.report([r], fail_kinds=every)
    assert "bookcheck: FAILED: code-share 1 (at most 0 allowed)" in capsys.readouterr().out


def test_digits_allowance_is_book_wide(site, capsys):
    """At most 20 cells with 9+ significant digits in the pages checked together: 20 pass, 21 fail, and the
    cells of several pages add up."""
    root, server, browser = site
    (root / "digits20.html").write_text(PAGE.format(extra=_long_cells(20), filler=0))
    (root / "digits21.html").write_text(PAGE.format(extra=_long_cells(21), filler=0))
    (root / "digits11.html").write_text(PAGE.format(extra=_long_cells(11), filler=0))
    r20, r21, r11 = (bc.check_page(browser, server, f"digits{n}.html") for n in (20, 21, 11))
    assert r20.metrics["long_number_cells"] == 20 and r21.metrics["long_number_cells"] == 21
    every = frozenset(bc.KINDS)
    assert bc.failures([r20], every) == 0 and bc.failures([r21], every) == 1
    assert bc.over_limits([r21], every) == {"digits": (21, 20)}
    assert bc.failures([r11], every) == 0 and bc.over_limits([r11, r11], every) == {"digits": (22, 20)}
    assert bc.failures([r21], every, limits={**bc.READING_LIMITS, "digits": 21}) == 0
    bc.report([r20], fail_kinds=every)
    out = capsys.readouterr().out
    assert "within their limits: digits 20 (at most 20)" in out and "FAILED" not in out
    # the command line: exit 1 over the limit, 0 within it, --limit and --fail-on change it
    args = ["--screenshots", "", "--fail-on", "all"]
    assert bc.main([str(root), "--only", "digits21", *args]) == 1
    assert bc.main([str(root), "--only", "digits21", *args, "--limit", "digits=21"]) == 0
    assert bc.main([str(root), "--only", "bare_true", "--screenshots", "", "--fail-on", "math"]) == 0
    # by default (``python -m dputils book --check``), a reading kind fails unless REPORTED_ONLY names it
    default = 0 if "bare-output" in bc.REPORTED_ONLY else 1
    assert bc.main([str(root), "--only", "bare_true", "--screenshots", ""]) == default
    with pytest.raises(SystemExit):
        bc.main([str(root), "--limit", "digits"])


def test_reading_counts_are_reported(site, capsys):
    root, server, browser = site
    r = bc.check_page(browser, server, "bare_true.html")
    assert r.counts()["bare-output"] == 1 and r.metrics["bare_outputs"] == 1
    bc.report([r], fail_kinds=bc.KINDS)
    out = capsys.readouterr().out
    assert "reading: 0 of 1 table(s) hide columns, 1 bare output(s)" in out and "bookcheck reading:" in out
    assert "FAILED: bare-output 1 (at most 0 allowed)" in out


def test_significant_digits():
    assert bc.significant_digits("0.000123456789") == 9
    assert bc.significant_digits("2.38177612345") == 12
    assert bc.significant_digits("1.2e-05") == 2 and bc.significant_digits("3.0") == 2
    assert bc.significant_digits("14063") == 0 and bc.significant_digits("1,000,000") == 0  # exact integers
    assert bc.significant_digits("-1.234567890") == 10 and bc.significant_digits("abc") == 0
    assert bc.long_numbers("ε = 2.381776123 at T = 140631234 steps, δ = 1e-05") == ["2.381776123"]
    assert bc.long_numbers("0.12345678 and 0.123456789") == ["0.123456789"]


def test_bare_outputs():
    for bare in ("True", "False\n", "None", "(True, False)", "1 row(s)", "12 rows"):
        assert bc.is_bare_output(bare), bare
    for fine in ("", "True positives: 3", "ε = 2.38", "Nonexistent", "0.5"):
        assert not bc.is_bare_output(fine), fine


def test_target_ids():
    assert bc.target_ids("targets T1.2, T8d and T12b.3 reproduce; T3 does not") == ["T1.2", "T8d", "T12b.3", "T3"]
    assert bc.target_ids("T = 14063 steps; ATT1 and CIFAR-T10 are names; T-shirt") == []


def test_bookkeeping_classifier():
    assert bc.is_bookkeeping("import numpy as np\nfrom dputils import x")
    assert bc.is_bookkeeping("sigma = 1.0", tags=["parameters"])
    assert bc.is_bookkeeping('assert worst < 1e-9, worst\nglue("w", worst)')
    assert bc.is_bookkeeping('tg.record("T1", eps)\nrows = Table(\n    [a, b],\n    caption="x",\n)')
    # a figure built and shown, a computation: the reader's code
    assert not bc.is_bookkeeping("fig = ch.plot_directions(\n    mech, sigma, q,\n    np.linspace(-0.5, 3, 400))")
    assert not bc.is_bookkeeping("acc = PLDAccountant()\nacc.compose(mech, 1000)\nacc.epsilon(1e-5)\nimport math")
    assert not bc.is_bookkeeping("")
    assert bc.is_bookkeeping("%%time\nimport numpy")  # not Python: line by line
