"""Issue 34 (page read): the scorecard page printed "(ours: ours: the Lilliefors ...)" and "(ours: our notes' ...)"
for 71 targets whose source already names its origin. One tag in front of a source, none where the source
starts with it."""

from __future__ import annotations

from dputils.book import scorecard as sc


def _rec(id_, source, origin="ours"):
    return {"id": id_, "what": "w", "paper": 1.0, "ours": 1.0, "status": "pass", "origin": origin, "source": source}


def _whats(source, origin="ours"):
    page = sc.page_markdown({"c": [_rec("T1", source, origin)]})
    return [ln for ln in page.splitlines() if ln.startswith("| T1")][0]


def test_one_origin_tag_in_front_of_the_source():
    assert "*(ours: s)*" in _whats("s")
    assert "*(ours: the Lilliefors critical value)*" in _whats("ours: the Lilliefors critical value")
    assert "ours: ours" not in _whats("ours: the Lilliefors critical value")
    row = _whats("our notes' independent evaluation")
    assert "*(our notes' independent evaluation)*" in row and "ours:" not in row
    assert "*(paper: Table 2)*" in _whats("Table 2", origin="paper")
    assert "*(paper, Table 2)*" in _whats("paper, Table 2", origin="paper")


def test_tolerances_read_in_the_books_number_style():
    # the page printed "±1e−08%", "±5e−11" and "≥ -0"
    assert sc._tol_text(1e-10, "rel") == "±10⁻¹⁰ relative"
    assert sc._tol_text(0.005, "rel") == "±0.5%"
    assert sc._tol_text(5e-11, "abs") == "±5×10⁻¹¹"
    assert sc._tol_text(0.002, "abs") == "±0.002"
    assert sc._tol_text(0, "ge", paper=0) == "≥ 0"
    assert sc._tol_text(0.002, "le", paper=0) == "≤ 0.002"
    assert sc._tol_text(0.0275, "ge", paper=1.0) == "≥ paper − 0.0275"
    # the record keeps the text, and the number it stands for still decides
    assert sc.within(1.0 + 5e-11, 1.0, 1e-10, "rel") and not sc.within(1.0 + 5e-10, 1.0, 1e-10, "rel")
