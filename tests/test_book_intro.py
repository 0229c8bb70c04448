"""The landing page (book/intro.md, issue 34): its five-line example prints what the page says it prints, its
chapter table lists the chapters in the sidebar's order (_toc.yml), and the scorecard totals it includes are
there to include (the markers of dputils.book.scorecard.write_page's page)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTRO = (ROOT / "book" / "intro.md").read_text()


def _fence(after: str, lang: str) -> str:
    part = INTRO[INTRO.index(after) :]
    return re.search(rf"```{lang}\n(.*?)```", part, re.S).group(1)


def test_the_example_has_five_lines_and_prints_what_the_page_shows():
    code = _fence("## Five lines of Python", "python")
    assert len([ln for ln in code.splitlines() if ln.strip()]) == 5, code
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "intro.md", "exec"), {})
    assert out.getvalue().strip() == _fence("## Five lines of Python", "text").strip()


def test_chapters_in_the_sidebar_order():
    toc = re.findall(r"file: book/methods/(\w+)", (ROOT / "_toc.yml").read_text())
    table = re.findall(r"^\| \{doc\}`methods/(\w+)`", INTRO, re.M)
    assert table == toc, (table, toc)  # every chapter, in the sidebar's order


def test_the_included_totals_are_written_by_the_scorecard(tmp_path):
    from dputils.book.scorecard import write_page

    inc = re.search(r"```\{include\} scorecard\.md\n:start-after: \"(.*?)\"\n:end-before: \"(.*?)\"\n```", INTRO)
    assert inc, "the totals are included from the generated scorecard page, not typed"
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.json").write_text(
        '{"targets": [{"id": "T1", "what": "a", "status": "pass", "paper": 1, "ours": 1, "tol": 0.1},'
        ' {"id": "T2", "what": "b", "status": "not run", "reason": "no GPU"}]}'
    )
    page = Path(write_page(tmp_path / "results", tmp_path / "scorecard.md", ["x"], {})).read_text()
    start, end = inc.group(1), inc.group(2)
    assert start in page and end in page and page.index(start) < page.index(end)
    between = page[page.index(start) + len(start) : page.index(end)]
    assert "1 pass" in between and "1 not run" in between, between
