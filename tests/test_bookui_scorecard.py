"""The scorecard's three source kinds (issue 37 item 3) and its tables that fit the column (issue 34 item 4):
targets counted apart by where their reference number comes from (printed in a paper, the authors' code, our own
computation), the origin taken from the chapter's target table when a results file predates the field, the list of
target entries without an origin, and the page's cells that a browser cannot break inside a number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dputils.book import scorecard as sc


def _rec(tid, status="pass", origin=None, **kw):
    r = {"id": tid, "what": "w", "paper": 1.0, "ours": 1.0, "tolerance": "±0.1", "status": status, "source": "s"}
    if origin is not None:
        r["origin"] = origin
    return {**r, **kw}


TARGETS = {
    "a": [_rec("T1", origin="paper"), _rec("T2", "not reproduced", "paper", reason="r"), _rec("T3", origin="ours")],
    "b": [_rec("T1", origin="repo"), _rec("T2", "not run", "ours", reason="no GPU"), _rec("T3")],
}


def test_origin_totals_count_the_three_kinds_apart():
    got = sc.origin_totals(TARGETS)
    assert list(got) == ["paper", "repo", "ours", None]  # the fixed order, then the unlabelled
    assert got["paper"] == {"pass": 1, "fail": 0, "not reproduced": 1, "not run": 0}
    assert got["repo"] == {"pass": 1, "fail": 0, "not reproduced": 0, "not run": 0}
    assert got["ours"] == {"pass": 1, "fail": 0, "not reproduced": 0, "not run": 1}
    assert got[None] == {"pass": 1, "fail": 0, "not reproduced": 0, "not run": 0}
    # the four add up to the page's totals, status by status
    for s in sc.STATUSES:
        assert sum(c[s] for c in got.values()) == sc.totals(TARGETS)[s]
    assert "repo" not in sc.origin_totals({"a": TARGETS["a"]})  # an origin nobody has is not listed


def test_page_states_the_totals_by_origin():
    page = sc.page_markdown(TARGETS)
    head = page.split("```{table} Targets per chapter")[0]  # what the landing page includes
    assert "**Totals:** 4 pass, 0 fail, 1 not reproduced, 1 not run." in head
    assert (
        "By where the reference number comes from: printed in a paper: 2 (1 pass, 1 not reproduced); from the "
        "authors' code: 1 (1 pass); our own computation: 2 (1 pass, 1 not run); origin not recorded: 1 (1 pass)."
    ) in head
    table = page.split("```{table} Targets by where the reference number comes from")[1].split("```")[0]
    assert "| printed in a paper | 1 | 0 | 1 | 0 | 2 |" in table
    assert "| our own computation | 1 | 0 | 0 | 1 | 2 |" in table
    assert "{doc}`methods/a`: 3 targets (2 printed in a paper; 1 our own computation)." in page
    # each target says which kind its reference is, in front of its source
    rows = {ln.split("|")[1].strip() + ln.split("|")[2]: ln for ln in page.splitlines() if ln.startswith("| T")}
    assert any("*(paper: s)*" in r for r in rows) and any("*(authors' code: s)*" in r for r in rows)
    assert any("*(ours: s)*" in r for r in rows) and any(r.count("*(s)*") for r in rows)


def test_page_rows_have_five_columns_and_reference_with_tolerance():
    page = sc.page_markdown(
        {"c": [_rec("T1", paper=[1.5, 2.5], tolerance="±0.5%"), _rec("T2", paper=None, tolerance="≤ 0.002")]}
    )
    rows = [ln for ln in page.splitlines() if ln.startswith("| T")]
    assert all(ln.count(" | ") == 4 for ln in rows), rows
    assert "| 1.5, 2.5 (±0.5%) |" in rows[0]
    assert "| ≤ 0.002 |" in rows[1]  # a pure bound: no reference number, no "—"
    assert "| target | what (where the reference comes from) | reference (tolerance) | ours | status |" in page


def test_cells_a_browser_cannot_break_inside_a_number():
    # browsers break a line after a hyphen: "1.5e-|03", "Figure 2a-|2b"; the split check forbids both
    assert sc._md_cell("SP-CLT 1.5e-03") == "SP-CLT 1.5e\u221203"  # the exponent's sign is a minus
    assert sc._md_cell("Figure 2a-2b, steps 1-3") == "Figure 2a\u20112b, steps 1\u20113"  # non-breaking hyphen
    # a word's hyphen still breaks (the check allows it), a leading minus and pipes are untouched / escaped
    assert sc._md_cell("conditional-composition T5-mc") == "conditional-composition T5-mc"
    assert sc._md_cell("-0.5 | x") == "-0.5 \\| x"


def test_with_origins_fills_from_the_target_table(tmp_path):
    (tmp_path / "a.yml").write_text(
        "T1:\n  what: x\n  paper: 1\n  tol: 0.1\n  origin: paper\n"
        "T2:\n  what: y\n  paper: 1\n  tol: 0.1\n  origin: ours\n"
        "T3:\n  what: z\n  paper: 1\n  tol: 0.1\n"
    )
    recs = {"a": [_rec("T1"), _rec("T2", origin="repo"), _rec("T3"), _rec("T9")], "b": [_rec("T1")]}
    got = sc.with_origins(recs, tmp_path)
    assert [r.get("origin") for r in got["a"]] == ["paper", "repo", None, None]  # the record's own origin wins
    assert got["b"][0].get("origin") is None  # no table for chapter b
    assert "origin" not in recs["a"][0]  # the input is not changed


def test_write_page_uses_the_tables_origins(tmp_path):
    res, specs = tmp_path / "results", tmp_path / "targets"
    res.mkdir()
    specs.mkdir()
    (res / "a.json").write_text(json.dumps({"targets": [_rec("T1"), _rec("T2")]}))
    (specs / "a.yml").write_text("T1:\n  what: x\n  paper: 1\n  tol: 0.1\n  origin: repo\n")
    page = Path(sc.write_page(res, tmp_path / "scorecard.md", spec_dir=specs)).read_text()
    assert "from the authors' code: 1 (1 pass); origin not recorded: 1 (1 pass)." in page


def test_unlabelled_targets_on_a_planted_folder(tmp_path):
    (tmp_path / "one.yml").write_text(
        "T1:\n  what: x\n  paper: 1\n  tol: 0.1\n  origin: paper\n"
        "T2:\n  kind: not_run\n  what: y\n  reason: GPU\n"
        "T10:\n  kind: check_true\n  what: z\n  origin: ours\n"
        "T3:\n  kind: check_true\n  what: z\n  origin: null\n"
    )
    (tmp_path / "two.yml").write_text("A1:\n  kind: check_true\n  what: z\n  origin: repo\n")
    (tmp_path / "zero.yml").write_text("B1:\n  kind: check_true\n  what: z\n")
    (tmp_path / "notes.txt").write_text("T9: not a target table")
    assert sc.unlabelled_targets(tmp_path) == {"one": ["T2", "T3"], "zero": ["B1"]}
    (tmp_path / "two.yml").write_text("A1:\n  kind: check_true\n  what: z\n  origin: author\n")
    with pytest.raises(ValueError, match="two.yml.*origin 'author'"):
        sc.unlabelled_targets(tmp_path)
    assert sc.unlabelled_targets(tmp_path / "empty") == {}
    # by default the book's own tables: the chapters labelled on this branch are not listed
    assert not {"foundations", "atlas", "benchmarks", "your_training_run"} & set(sc.unlabelled_targets())


@pytest.mark.parametrize("chapter", ["foundations", "atlas", "benchmarks", "your_training_run"])
def test_chapters_of_this_branch_are_labelled(chapter):
    root = Path(__file__).resolve().parents[1] / "params" / "targets"
    spec = sc.read_target_spec(root / f"{chapter}.yml")
    assert spec and all(e.get("origin") in sc.ORIGINS for e in spec.values()), chapter
    # "paper" only with a source that names the place in the paper
    for tid, e in spec.items():
        if e["origin"] == "paper":
            assert any(w in e.get("source", "") for w in ("Table", "Fig", "Eq", "Sec", "p.")), (chapter, tid)


def test_landing_page_includes_the_totals_by_origin(tmp_path):
    # book/intro.md includes the scorecard between two markers: the sentence by origin must fall between them
    import re

    intro = (Path(__file__).resolve().parents[1] / "book" / "intro.md").read_text()
    inc = re.search(r"```\{include\} scorecard\.md\n:start-after: \"(.*?)\"\n:end-before: \"(.*?)\"\n```", intro)
    assert inc and "counted apart" in intro
    page = sc.page_markdown(TARGETS)
    between = page.split(inc.group(1), 1)[1].split(inc.group(2), 1)[0]
    assert "4 pass" in between and "printed in a paper: 2 (1 pass, 1 not reproduced)" in between
    assert "our own computation: 2" in between and "Targets by where" not in between


def test_every_chapter_target_names_its_origin():
    """Issue 37 item 3: every target of every chapter says where its reference number comes from (paper, the
    authors' repository, or our own computation), so the scorecard can count the three apart."""
    assert sc.unlabelled_targets() == {}
