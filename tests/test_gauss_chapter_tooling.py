"""The gauss_audit chapter's tooling (dputils.book.chapters.gauss_audit): the authors' values it holds agree with
the chapter's target table, and its record helpers record every target of their section, run or not run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dputils.book.chapters import gauss_audit as ch
from dputils.book.scorecard import Targets

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tg():
    return Targets("gauss_audit")


def test_the_authors_values_match_the_target_table(tg):
    spec = tg.spec
    for id_, v in zip(("T4a", "T4b", "T4c", "T4d"), ch.PAPER_1A["gauss"]):
        assert spec[id_]["paper"] == v
    for id_, t_ in zip(("T6a", "T6b", "T6c", "T6d", "T6e"), (50, 100, 500, 1000, 2500)):
        assert spec[id_]["paper"] == ch.PAPER_T[t_]
    for id_, mb in (("T5a", 50), ("T5b", 100), ("T5c", 1000)):
        assert spec[id_]["paper"] == ch.PAPER_1B[mb]
    assert spec["T7b"]["paper"] == ch.PAPER_7_BOX[50] and spec["T7c"]["paper"] == ch.PAPER_7_BOX[5000]
    assert spec["T8"]["paper"] == [ch.PAPER_REAL[k] for k in ("OUT mean", "OUT sd", "IN mean")]
    # the CSV's m = 5000 points are the paper's eps = 8 numbers (Sec. 5.1)
    assert round(ch.CSV_AT["gauss-pooled"][5000], 2) == ch.PAPER_HEAD["gauss"]
    assert round(ch.CSV_AT["steinke-uncorrected"][5000], 2) == ch.PAPER_HEAD["steinke-uncorrected"]


def test_the_errata_read_the_csv_as_the_text_says():
    r = ch.csv_gain_ratios()
    assert len(r) == 4 and r[0] < 1 and r[1] < 1 and min(r[2:]) > 1
    assert ch.csv_gap_100() == pytest.approx(3.8551 - 4.8127)


IDS_BUDGET = [f"T5{c}" for c in "abcdefghijk"] + ["T7b", "T7c", "T7a"]


def _ids(tg):
    return [r["id"] for r in tg.records]


def test_not_run_sections_record_every_target(tg):
    fig1a = {k: [1.0, 2.0] for k in ("gauss", "fdp-uncorrected", "steinke-uncorrected")}
    ch.record_fig1a(
        tg,
        [f"T4{c}" for c in "abcdefgh"],
        False,
        [2.0, 8.0],
        [2.0, 8.0],
        fig1a,
        np.ones(2),
        sigma_csv=8.4,
        sigma_rdp=8.9,
        e_rdp_pld=1.9,
        eps_pld=7.8,
        reps=1,
    )
    assert _ids(tg) == [f"T4{c}" for c in "abcdefgh"]
    tg.records.clear()
    curve = {"gauss": np.array([1.0, 2.0]), "gauss-bonferroni": np.array([0.5, 2.04])}
    ch.record_budget(tg, IDS_BUDGET, False, [100, 600], curve, {}, {}, n_sub=1, n_sub_paper=2)
    assert _ids(tg) == [f"T5{c}" for c in "abcdefghijk"] + ["T7b", "T7c", "T7a"]
    assert {r["status"] for r in tg.records[:-1]} == {"not run"} and tg.records[-1]["status"] == "pass"
    tg.records.clear()
    ch.fig3_table(
        tg,
        [f"T6{c}" for c in "abcdefg"],
        False,
        [100, 2500],
        [0.85, 2.58],
        [1, 1],
        [3.0, 7.5],
        {"gauss-pooled": [1.0, 6.0]},
    )
    assert _ids(tg) == ["T6a", "T6b", "T6c", "T6d", "T6e", "T6f", "T6g"]


def test_a_broken_ordering_of_the_budget_curve_fails_t7a(tg):
    curve = {"gauss": np.array([1.0, 2.0]), "gauss-bonferroni": np.array([1.2, 2.0])}
    with pytest.raises(AssertionError, match="T7a"):
        ch.record_budget(tg, IDS_BUDGET, False, [100, 600], curve, {}, {}, n_sub=1, n_sub_paper=2)
    assert tg.records[-1]["id"] == "T7a" and tg.records[-1]["status"] == "fail"


def _gpu_record(gauss_correct: float) -> dict:
    run = dict(device="cuda (test)", model="wrn16-4", data="synthetic-images", n_params=10, T=12, q=0.08,
               sigma=2.6, epsilon_theory=2.0, steps_per_second=3.0, train_seconds=4.0)  # fmt: skip
    return {
        "T12": {
            "correct": {**run, "bounds": dict(gauss=gauss_correct, steinke=0.5)},
            "noise_div_4": {**run, "steps_per_second": 2.0, "bounds": dict(gauss=9.0, steinke=3.0)},
        }
    }


def test_gpu_whitebox_reads_the_recording_and_checks_what_an_audit_promises(tmp_path):
    import json

    p = tmp_path / "gpu.json"
    p.write_text(json.dumps(_gpu_record(1.5)))
    got = ch.gpu_whitebox(p)
    assert got["steps_per_second"] == [2.0, 3.0] and got["T"] == [12]
    assert got["gauss_over_pld"] == [0.75]
    # a "correct" run certified above its accountant's epsilon is a broken recording (or a broken accountant)
    p.write_text(json.dumps(_gpu_record(2.5)))
    with pytest.raises(AssertionError):
        ch.gpu_whitebox(p)
    assert ch.gpu_whitebox(tmp_path / "absent.json") == {}


def test_the_recorded_gpu_audit_is_shipped_and_passes_its_checks(monkeypatch):
    monkeypatch.chdir(ROOT / "book")  # a chapter runs below the root (book/methods): the default path is found
    got = ch.gpu_whitebox()
    assert got["model"] == "wrn16-4" and min(got["T"]) > 0
