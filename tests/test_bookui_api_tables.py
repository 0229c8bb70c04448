"""The API pages' summary tables fit the content column (issue 34 item 4): book/_ext/static/dpapi.css stacks each
row, the name on its own line and its description below it. Measured in headless Chromium on a planted page with
the longest name and the longest unbreakable call of the built API pages (api_matrix, api_shuffling: tables 746 to
1181 px wide in the 688 px column before); the same page without the stylesheet hides columns, so the check can
fail. Needs Debian's headless Chromium like tests/test_bookcheck.py (skipped without it, failed in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dputils.book import bookcheck as bc

CSS = Path(__file__).resolve().parents[1] / "book" / "_ext" / "static" / "dpapi.css"

ROWS = [
    ("ConditionalCompositionAccountant", "The conditional-composition accountant of Section 5 (a certified bound)."),
    (
        "mixture_tradeoff_by_optimization",
        "Equals <code class='literal'><span class='pre'>cls(**kwargs).compose(BallsInBinsMatrixMechanism(strategy,"
        "</span></code> <code class='literal'><span class='pre'>dputils.accountants.rdp.subsampled_gaussian_rdp().</span>"
        "</code> for every sigma; the (eps, delta) trade-off max{0, 1 - delta - e^eps alpha}.",
    ),
]

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>api</title>{css}
<style>body {{ margin: 0; font-size: 16px }} article {{ width: 688px; }}
.pst-scrollable-table-container {{ overflow-x: auto }}</style></head><body><main><article class="bd-article">
<section id="dputils-matrix"><h1>dputils.matrix</h1><div class="dpapi">
<div class="pst-scrollable-table-container"><table class="autosummary longtable table"><tbody>{rows}</tbody></table>
</div></div></section></article></main></body></html>"""


def _rows():
    return "".join(
        f"<tr><td><p><a href='#'><code class='xref py py-obj docutils literal notranslate'><span class='pre'>{n}"
        f"</span></code></a></p></td><td><p>{d}</p></td></tr>"
        for n, d in ROWS
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not bc.chromium_available():
        msg = f"dputils.book.bookcheck cannot run: {bc.CHROMIUM} or {bc.CHROMEDRIVER} is missing; {bc.INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    root = tmp_path_factory.mktemp("api")
    (root / "dpapi.css").write_text(CSS.read_text())
    css = '<link rel="stylesheet" href="dpapi.css">'
    (root / "styled.html").write_text(PAGE.format(css=css, rows=_rows()))
    (root / "plain.html").write_text(PAGE.format(css="", rows=_rows()))
    with bc.serve(root) as server, bc.start_browser(width=1280, height=800) as browser:
        yield server, browser


def test_summary_tables_fit_the_column(site):
    server, browser = site
    r = bc.check_page(browser, server, "styled.html")
    assert r.metrics["tables"] == 1 and r.metrics["wide_tables"] == 0, r.findings
    assert r.findings == [], r.findings  # no number or name broken over lines (split), nothing sticks out
    plain = bc.check_page(browser, server, "plain.html")
    assert plain.metrics["wide_tables"] == 1, plain.findings  # the control: two columns side by side do not fit
