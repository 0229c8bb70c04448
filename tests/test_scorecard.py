"""Reproduction targets (dputils.book.scorecard) and the book's tables (dputils.book.tables)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from dputils.book import results
from dputils.book.scorecard import Targets, load_targets, page_markdown, within, write_page
from dputils.book.tables import Table, fmt_value, sci


def test_within_modes():
    assert within(1.05, 1.0, 0.1) and not within(1.2, 1.0, 0.1)
    assert within(1.05, 1.0, 0.06, "rel") and not within(1.07, 1.0, 0.06, "rel")
    assert within(0.9, 1.0, 0.0, "le") and not within(1.01, 1.0, 0.0, "le")
    assert within(1.1, 1.0, 0.0, "ge") and not within(0.99, 1.0, 0.0, "ge")
    assert within([1.0, 2.0], [1.01, 2.02], 0.05) and not within([1.0, 2.5], [1.0, 2.0], 0.1)
    assert not within(float("nan"), 1.0, 10.0)
    with pytest.raises(ValueError):
        within([1.0], [1.0, 2.0], 0.1)


def test_check_records_and_raises_on_failure():
    tg = Targets("demo")
    assert tg.check("T1", "a", np.float64(6.83), 6.75, 0.3)
    with pytest.raises(AssertionError, match="T2"):
        tg.check("T2", "b", 2.0, 1.0, 0.5)
    assert [r["status"] for r in tg.records] == ["pass", "fail"]
    assert isinstance(tg.records[0]["ours"], float)  # numpy scalars become plain numbers
    with pytest.raises(ValueError):
        tg.check("T1", "again", 1.0, 1.0, 0.1)


def test_not_reproduced_refuses_a_target_that_reproduces():
    tg = Targets("demo")
    tg.not_reproduced("T4", "x", ours=1.64, paper=1.348, tol=0.2, reason="sigma unpublished")
    with pytest.raises(AssertionError, match="reproduces now"):
        tg.not_reproduced("T5", "y", ours=1.0, paper=1.01, tol=0.1, reason="?")
    tg.not_run("T9", "z", reason="needs a GPU")
    assert tg.summary() == {"pass": 0, "fail": 0, "not reproduced": 1, "not run": 1}


def test_targets_round_trip_through_results_and_page(tmp_path, monkeypatch):
    monkeypatch.setenv("DPBOOK_RESULTS_DIR", str(tmp_path))
    tg = Targets("chap")
    tg.check("T1", "eps | bracket", 1.0, 1.0, 0.01, source="note anchor (computed)")
    tg.not_run("T2", "GPU run", reason="no GPU here")
    results.save("chap", targets=tg, other=3)
    (tmp_path / "broken.json").write_text("{not json")
    loaded = load_targets(tmp_path)
    assert list(loaded) == ["chap"] and [r["id"] for r in loaded["chap"]] == ["T1", "T2"]
    page = write_page(tmp_path, tmp_path / "scorecard.md", chapters=["chap", "missing"]).read_text()
    assert "{doc}`methods/chap`" in page
    assert "eps \\| bracket" in page  # pipes escaped inside the markdown table
    assert "1 pass, 0 fail, 0 not reproduced, 1 not run" in page
    assert json.loads((tmp_path / "chap.json").read_text())["targets"][1]["reason"] == "no GPU here"


def test_non_finite_target_values_still_read_as_infinity_after_strict_json(tmp_path, monkeypatch):
    # strict JSON writes inf as null, which the page would show as "no value" (an em dash); the results file
    # records which nulls were infinite, so the page shows what the notebook's table showed before the round trip
    monkeypatch.setenv("DPBOOK_RESULTS_DIR", str(tmp_path))
    tg = Targets("chap")
    tg.not_reproduced("T1", "vacuous bound", float("inf"), 2.0, 0.1, reason="the bound is vacuous here")
    tg.check_true("T2", "bracket", True, ours=[np.float64(1.5), -np.inf], paper=None)
    in_memory = [fmt_value(r["ours"]) for r in tg.records]
    assert in_memory == ["\u221e", "1.5, -\u221e"]
    p = results.save("chap", targets=tg)
    assert json.loads(p.read_text())["targets"][0]["ours"] is None  # strict JSON in the file
    loaded = load_targets(tmp_path)["chap"]
    assert [fmt_value(r["ours"]) for r in loaded] == in_memory and loaded[1]["paper"] is None
    page = page_markdown({"chap": loaded})
    (row,) = [ln for ln in page.splitlines() if "vacuous bound" in ln]
    assert "| \u221e |" in row and "\u2014" not in row
    assert "1.5, -\u221e" in page


def test_page_without_targets_says_so():
    assert "No chapter has recorded targets yet" in page_markdown({})


def test_table_html_escapes_and_formats():
    t = Table([{"name": "<b>", "value": 1.23456789e-12, "status": "fail", "n": 123456}], caption="c")
    h = t._repr_html_()
    assert "&lt;b&gt;" in h and "<caption>c</caption>" in h
    assert "1.235\u00d710\u207b\u00b9\u00b2" in h  # a×10ⁿ, as dputils.book.tables.sci writes it for prose too
    assert "123,456" in h and "color:#cf222e" in h
    assert "1.235\u00d710\u207b\u00b9\u00b2" in str(t)
    assert sci(4.6492e-5, 4) == "4.649\u00d710\u207b\u2075" and sci(-2.5e7) == "-2.5\u00d710\u2077"
    assert sci(0.0) == "0" and sci(float("inf")) == "\u221e"
    assert (
        sci(1e-5, 1) == "10\u207b\u2075" and sci(-1e3, 1) == "-10\u00b3" and sci(1e-5, 4) == "1.000\u00d710\u207b\u2075"
    )
    assert fmt_value(None) == "\u2014" and fmt_value(float("inf")) == "\u221e" and fmt_value(0.5) == "0.5"


def test_table_cells_never_break_inside_a_word_or_number():
    # lines break between words only; numbers and short labels do not wrap at all; a wide table scrolls in its
    # own box (the browser check measures the result on the built book)
    long_text = "a reason " * 12
    h = Table([{"status": "not reproduced", "n": 4.649e-5, "reason": long_text, "k": 1000}])._repr_html_()
    assert h.startswith('<div class="dpbook-scroll" style="overflow-x:auto')
    assert "break-word" not in h and "break-all" not in h
    cells = h.split("<td ")[1:]
    assert all("word-break:normal" in c and "overflow-wrap:normal" in c for c in cells)
    assert "white-space:nowrap" in cells[0]  # a short label
    assert "white-space:nowrap" in cells[1] and "4.649\u00d710\u207b\u2075" in cells[1]  # a number
    assert "white-space:nowrap" not in cells[2]  # a long text wraps between its words
    assert "white-space:nowrap" in cells[3]
    heads = h.split("<th ")[1:]
    assert all("word-break:normal" in c for c in heads)


def test_page_has_one_table_per_chapter_sorted_by_id():
    recs = {
        "chap": [
            {"id": i, "what": "w", "paper": 1.0, "ours": 1.0, "tolerance": "±0.1", "status": "pass", "source": "paper"}
            for i in ("T10", "T2", "T1b", "T1a")
        ]
    }
    page = page_markdown(recs, {"chap": "Long title: with a subtitle"})
    assert "{doc}`Long title: with a subtitle <methods/chap>`" in page  # the per-chapter totals
    assert "## Long title\n" in page  # one heading per chapter, short form
    assert "methods/chap>` |" not in page.split("## Long title", 1)[1]  # the chapter is not repeated per row
    rows = [ln.split("|")[1].strip() for ln in page.splitlines() if ln.startswith("| T")]
    assert rows == ["T1a", "T1b", "T2", "T10"]


def test_one_sided_target_against_zero_reads_as_a_bound():
    tg = Targets("c")
    tg.check("T1", "a bound", 0.001, 0.0, 2e-3, mode="le")
    tg.check("T2", "at most the paper's", 3.0, 3.0, 0.0, mode="le")
    r1, r2 = tg.records
    assert r1["paper"] is None and r1["tolerance"] == "\u2264 0.002"
    assert r2["paper"] == 3.0 and r2["tolerance"] == "\u2264 paper"
    with pytest.raises(AssertionError):
        tg.check("T3", "a bound", 0.003, 0.0, 2e-3, mode="le")


# ------------------------------------------------------------------------------------------ the status ledger
def _recs(**statuses):
    return [{"id": k, "what": "w", "status": v} for k, v in statuses.items()]


def test_ledger_differences_name_every_change():
    from dputils.book.scorecard import ledger_differences

    ledger = {"a": {"T1": "pass", "T2": "not reproduced", "T3": "not run"}, "b": {"T1": "pass"}}
    same = {"a": _recs(T1="pass", T2="not reproduced", T3="not run"), "b": _recs(T1="pass")}
    assert ledger_differences(same, ledger) == []
    drift = {"a": _recs(T1="not reproduced", T2="not reproduced", T4="pass"), "b": _recs(T1="pass")}
    diffs = ledger_differences(drift, ledger)
    assert "a T1: not reproduced, the ledger expects pass" in diffs
    assert "a T4: new target (pass), not in the ledger" in diffs
    assert "a T3: in the ledger (not run) but not recorded by the run" in diffs
    assert len(diffs) == 3
    # a chapter whose results are missing is reported, one outside the chosen chapters is not
    assert ledger_differences({"a": same["a"]}, ledger) == [
        "b: no recorded targets (results/b.json missing or without targets), the ledger expects 1"
    ]
    assert ledger_differences({"a": same["a"]}, ledger, chapters=["a"]) == []


def test_ledger_round_trip_and_refusals(tmp_path):
    from dputils.book.scorecard import read_ledger, write_ledger

    p = write_ledger(tmp_path / "l.yml", {"c": _recs(T10="pass", T2="not run", T1="not reproduced")})
    assert read_ledger(p) == {"c": {"T1": "not reproduced", "T2": "not run", "T10": "pass"}}
    assert list(read_ledger(p)["c"]) == ["T1", "T2", "T10"]  # natural order
    assert read_ledger(tmp_path / "none.yml") == {}
    bad = tmp_path / "bad.yml"
    bad.write_text("c: {T1: fail}\n")
    with pytest.raises(ValueError, match="status must be"):
        read_ledger(bad)
    bad.write_text("c: [T1]\n")
    with pytest.raises(ValueError, match="must map target ids"):
        read_ledger(bad)


def test_check_ledger_fails_only_when_strict_and_updates(tmp_path):
    import json

    from dputils.book.run import check_ledger
    from dputils.book.scorecard import LEDGER_FILE, read_ledger

    (tmp_path / "results").mkdir()
    (tmp_path / "params").mkdir()
    (tmp_path / "results" / "a.json").write_text(json.dumps({"targets": _recs(T1="pass", T2="not reproduced")}))
    (tmp_path / LEDGER_FILE).write_text("a: {T1: pass, T2: pass}\n")
    assert check_ledger(tmp_path, ["a"], strict=True) == 1
    assert check_ledger(tmp_path, ["a"], strict=False) == 0
    (tmp_path / LEDGER_FILE).write_text("a: {T1: pass, T2: not reproduced}\nz: {T9: not run}\n")
    assert check_ledger(tmp_path, ["a"], strict=True) == 0
    (tmp_path / "results" / "a.json").write_text(json.dumps({"targets": _recs(T1="pass", T2="pass")}))
    assert check_ledger(tmp_path, ["a"], update=True) == 0
    assert read_ledger(tmp_path / LEDGER_FILE) == {"a": {"T1": "pass", "T2": "pass"}, "z": {"T9": "not run"}}
    assert check_ledger(tmp_path, ["a"], strict=True) == 0


def test_text_cells_keep_tokens_with_digits_whole():
    # the browser breaks after a hyphen: "1.74e-|4", "3e6-|8e6" in a text cell; such tokens are kept on one line
    h = Table([{"what": "acc. 1.74e-4 to 1.76e-4, plain MC 3e6-8e6 (±1-2%)", "name": "trade-off"}])._repr_html_()
    spans = re.findall(r'<span style="white-space:nowrap">([^<]*)</span>', h)
    assert spans == ["1.74e-4", "1.76e-4,", "3e6-8e6", "(±1-2%)"]
    assert "trade-off" in h and ">trade-off<" in h  # a word without digits may still break at its hyphen
