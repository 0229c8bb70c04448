"""The chapters' target tables (params/targets/NAME.yml) and Targets.record, which reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from dputils.book.scorecard import Targets, read_target_spec, target_spec_path

ROOT = Path(__file__).resolve().parents[1]

SPEC = {
    "T1": {"what": "ε at σ = {sigma}", "paper": 1.0, "tol": 0.1, "source": "paper, Table 1", "section": "s"},
    "T2": {"kind": "check_true", "what": "ordering", "source": "paper, Fig. 2"},
    "T3": {"kind": "not_reproduced", "what": "gap", "paper": 2.0, "tol": 0.05, "reason": "ours {ours:.2f}"},
    "T4": {"kind": "not_run", "what": "GPU run", "reason": "needs a GPU"},
}


def test_record_dispatches_on_kind_and_fills_texts():
    tg = Targets("demo", spec=SPEC)
    assert tg.record("T1", 1.05, fmt={"sigma": 2}) is True
    assert tg.record("T2", condition=True, ours="yes") is True
    assert tg.record("T3", 1.5, fmt={"ours": 1.5}) is False
    assert tg.record("T4") is False
    by_id = {r["id"]: r for r in tg.records}
    assert by_id["T1"]["what"] == "ε at σ = 2" and by_id["T1"]["status"] == "pass"
    assert by_id["T1"]["source"] == "paper, Table 1" and by_id["T1"]["section"] == "s"
    assert by_id["T2"]["status"] == "pass" and by_id["T2"]["ours"] == "yes"
    assert by_id["T3"]["status"] == "not reproduced" and by_id["T3"]["reason"] == "ours 1.50"
    assert by_id["T4"]["status"] == "not run" and by_id["T4"]["ours"] is None


def test_record_fails_like_check():
    tg = Targets("demo", spec=SPEC)
    with pytest.raises(AssertionError, match="T1"):
        tg.record("T1", 1.5, fmt={"sigma": 2})
    with pytest.raises(AssertionError, match="T2"):
        tg.record("T2", condition=False)


def test_an_outcome_passes_when_it_holds_and_is_not_reproduced_otherwise():
    tg = Targets("demo", spec=SPEC)
    assert tg.record("T3", 2.01, fmt={"ours": 2.01}) is True  # within 0.05 of 2.0: a pass, the ledger tells
    assert tg.record("T1", 9.0, ok=False, reason="far off", fmt={"sigma": 2}) is False
    assert tg.record("T2", "a < b", ok=True) is True  # no tol: a qualitative pass
    by_id = {r["id"]: r for r in tg.records}
    assert by_id["T3"]["status"] == "pass" and by_id["T3"]["tolerance"]
    assert by_id["T1"]["status"] == "not reproduced" and by_id["T1"]["reason"] == "far off"
    assert by_id["T2"]["status"] == "pass" and by_id["T2"]["ours"] == "a < b"
    with pytest.raises(ValueError, match="needs ok="):
        Targets("demo", spec={"X": {"kind": "not_reproduced", "what": "w", "reason": "r"}}).record("X", 1.0)


def test_not_run_and_kind_overrides_keep_the_table_texts():
    tg = Targets("demo", spec=SPEC)
    assert tg.record("T1", 1.0, ran=False, not_run_reason="smoke profile", fmt={"sigma": 3}) is False
    assert tg.record("T3", kind="not_run", reason="off") is False
    with pytest.raises(ValueError, match="not_run_reason"):
        tg.record("T2", ran=False)
    by_id = {r["id"]: r for r in tg.records}
    assert by_id["T1"] == {**by_id["T1"], "status": "not run", "what": "ε at σ = 3", "paper": 1.0, "ours": None}
    assert by_id["T1"]["reason"] == "smoke profile" and by_id["T1"]["source"] == "paper, Table 1"
    assert by_id["T3"]["status"] == "not run" and by_id["T3"]["paper"] == 2.0 and by_id["T3"]["reason"] == "off"


def test_the_table_can_give_the_not_run_reason():
    spec = {**SPEC, "T5": {**SPEC["T1"], "not_run": "smoke profile (N = {n})"}}
    tg, tg2, tg3 = (Targets("demo", spec=spec) for _ in range(3))
    assert tg.record("T5", ran=False, fmt={"sigma": 1, "n": 20}) is False  # the table's text, fields filled
    assert tg2.record("T5", 1.0, fmt={"sigma": 1, "n": 20}) is True  # ran: the text plays no part
    tg3.record("T5", ran=False, not_run_reason="option off", fmt={"sigma": 1, "n": 20})  # the keyword wins
    assert tg.records[0]["reason"] == "smoke profile (N = 20)" and tg.records[0]["status"] == "not run"
    assert tg2.records[0]["status"] == "pass" and "not_run" not in tg2.records[0]
    assert tg3.records[0]["reason"] == "option off" and tg3.records[0]["what"] == "ε at σ = 1"
    with pytest.raises(ValueError, match="not_run_reason"):
        tg.record("T1", ran=False)  # neither the keyword nor the table


def test_arguments_override_the_table_and_missing_fields_are_named():
    tg = Targets("demo", spec=SPEC)
    tg.record("T1", 3.0, paper=3.0, fmt={"sigma": 1})
    assert tg.records[0]["paper"] == 3.0
    with pytest.raises(ValueError, match="missing ours"):
        tg.record("T1", fmt={"sigma": 1})
    with pytest.raises(ValueError, match="missing what, ours, paper, tol"):
        tg.record("T9")
    with pytest.raises(ValueError, match="unexpected field"):
        tg.record("T4", 1.0)


def test_bad_tables_are_refused(tmp_path):
    bad = tmp_path / "x.yml"
    bad.write_text("T1: [1, 2]\n")
    with pytest.raises(ValueError, match="mapping"):
        read_target_spec(bad)
    bad.write_text("T1: {kind: maybe, what: x}\n")
    with pytest.raises(ValueError, match="kind 'maybe'"):
        read_target_spec(bad)
    bad.write_text("T1: {kind: not_run, what: x, reason: y, tol: 1}\n")
    with pytest.raises(ValueError, match="unexpected field"):
        read_target_spec(bad)


@pytest.mark.parametrize("path", sorted((ROOT / "params" / "targets").glob("*.yml")), ids=lambda p: p.stem)
def test_every_shipped_table_reads_and_names_a_chapter(path):
    spec = read_target_spec(path)
    assert spec, f"{path.name} is empty"
    assert (ROOT / "notebooks" / f"{path.stem}.md").is_file(), f"{path.name}: no notebook of that name"
    text = (ROOT / "notebooks" / f"{path.stem}.md").read_text(encoding="utf-8")
    helpers = ROOT / "dputils" / "book" / "chapters" / f"{path.stem}.py"  # the chapter's recording helpers
    if helpers.is_file():
        text += helpers.read_text(encoding="utf-8")
    unused = [tid for tid in spec if f'"{tid}"' not in text]
    assert not unused, f"{path.name}: targets recorded neither by the notebook nor by its helpers: {unused}"
    assert yaml.safe_load(path.read_text(encoding="utf-8"))


def test_spec_path_is_under_params():
    assert target_spec_path("gauss_audit", ROOT) == ROOT / "params" / "targets" / "gauss_audit.yml"
