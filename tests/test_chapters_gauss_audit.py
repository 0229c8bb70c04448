"""The gauss_audit chapter's outcome-dependent targets (Targets.record with ok=), its smoke stand-ins and its figure."""

from __future__ import annotations

import pytest

from dputils.book.chapters.gauss_audit import SMOKE, record_not_run
from dputils.book.scorecard import Targets

SPEC = {
    "A": {
        "kind": "not_reproduced",
        "what": "gap at m = {m}",
        "paper": 2.0,
        "tol": 0.5,
        "mode": "abs",
        "source": "paper, Fig. 1",
        "section": "s",
        "reason": "ours {ours:.2f}",
    },
    "B": {"kind": "not_reproduced", "what": "ordering", "paper": 1.0, "tol": None, "reason": "fails at {where}"},
}


def test_a_target_within_tolerance_passes_without_its_reason():
    tg = Targets("demo", spec=SPEC)
    assert tg.record("A", 2.3, fmt=dict(m=5, ours=2.3)) is True
    (rec,) = tg.records
    assert rec["status"] == "pass" and rec["reason"] == "" and rec["what"] == "gap at m = 5"
    assert rec["tolerance"] == "±0.5" and rec["source"] == "paper, Fig. 1" and rec["section"] == "s"


def test_a_target_outside_tolerance_is_not_reproduced_with_the_filled_reason():
    tg = Targets("demo", spec=SPEC)
    assert tg.record("A", 2.6, fmt=dict(m=5, ours=2.6)) is False
    (rec,) = tg.records
    assert rec["status"] == "not reproduced" and rec["reason"] == "ours 2.60" and rec["paper"] == 2.0


def test_ok_overrides_the_tolerance_and_a_qualitative_target_passes_as_check_true():
    tg = Targets("demo", spec=SPEC)
    with pytest.raises(AssertionError, match="reproduces now"):  # a false "not reproduced" is refused
        tg.record("A", 2.1, ok=False, fmt=dict(m=1, ours=2.1))
    assert tg.record("B", 1.2, ok=True, fmt=dict(where="")) is True
    (b,) = tg.records
    assert b["status"] == "pass" and b["paper"] is None and b["tolerance"] == "" and b["ours"] == 1.2
    tg2 = Targets("demo", spec=SPEC)
    tg2.record("B", 0.9, ok=False, fmt=dict(where="eps 2"))
    assert tg2.records[0]["reason"] == "fails at eps 2" and tg2.records[0]["tolerance"] == ""


def test_record_not_run_records_every_id_once():
    tg = Targets("demo", spec={})
    record_not_run(tg, ("X1", "X2"), "needs the full profile", source="paper")
    assert [r["id"] for r in tg.records] == ["X1", "X2"]
    assert all(r["status"] == "not run" and r["reason"] == SMOKE for r in tg.records)
    with pytest.raises(ValueError, match="recorded twice"):
        record_not_run(tg, ("X1",), "again")


def test_draw_bounds_draws_one_line_per_auditor_and_labels_the_csv_once():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dputils.book.chapters.gauss_audit import draw_bounds, mark_target_epsilon

    fig, ax = plt.subplots()
    draw_bounds(ax, [1, 2], {"a": [0.5, 1.0], "b": ([0.4, 0.9], "s-")}, csv=[([1], [0.6]), ([2], [1.1])])
    mark_target_epsilon(ax, "x", eps=2.0, title="t")
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines[:3]] == ["a", "b", "authors' CSV"]
    assert lines[1].get_marker() == "s" and lines[2].get_marker() == "x"
    assert not lines[3].get_label().startswith("authors")  # the second CSV series is not labelled again
    assert ax.get_ylim() == (0.0, 3.0) and ax.get_title() == "t"
    plt.close(fig)


def test_the_chapter_finds_its_table_outside_the_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as the notebook tests run it
    tg = Targets("gauss_audit")
    assert tg.spec["T4b"]["kind"] == "not_reproduced" and tg.spec["T1a"]["paper"] == 7.5154
    assert Targets("no_such_chapter").spec == {}


def test_score_figures_draw_what_their_captions_say():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from dputils.book.chapters.gauss_audit import draw_ftrl_bounds, draw_score_histograms, draw_scores_against_model

    rng = np.random.default_rng(0)
    i, o = rng.normal(1, 1, 50), rng.normal(0, 1, 70)
    fig, ax = plt.subplots()
    draw_score_histograms(ax, i, o, 1.0, "t")
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:2] == ["OUT (m = 70)", "IN (m = 50)"] and len(ax.lines) == 2
    assert ax.lines[1].get_xdata()[0] == pytest.approx(o.mean() + 1.0)
    fig, axs = plt.subplots(1, 3)
    draw_scores_against_model(axs, i, o, (1.0, 1.0), (0.0, 1.0), rng.normal(size=120))
    assert [len(a.lines) for a in axs] == [1, 1, 0] and len(axs[2].collections) == 1
    fig, ax = plt.subplots()
    ideal = {k: rng.uniform(0, 1, (2, 3)) for k in ("gauss", "gauss-bonferroni", "andrew", "fdp")}
    draw_ftrl_bounds(ax, [1.0, 2.0], ideal, {"ours": [0.5, 1.0], "raw": [0.2, 0.4]}, 100, 50, "t")
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 7 and "ours, ellipsoid (simulated, m = 100)" in labels
    plt.close("all")
