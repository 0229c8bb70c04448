"""The helpers of the matrix_allocation chapter's b = 1 reference section (allocation-pld against the chapter's
bounds and the recorded pld-accounting bracket)."""

import json

import pytest

from dputils.book.chapters import matrix_allocation as ch


def _row(steps, peer, selected=1, epochs=1):
    return {
        "steps": steps,
        "selected": selected,
        "epochs": epochs,
        "sigma": 1.0,
        "delta": 1e-5,
        "ours": {"upper": 0.5, "lower": 0.4, "seconds": 0.1},
        "pld_accounting": peer,
    }


def test_peer_row_picks_the_setting(tmp_path):
    f = tmp_path / "alloc.json"
    rows = [
        _row(100, {"upper": 9.0, "lower": 8.0, "seconds": 1.0}, epochs=2),
        _row(100, {"upper": 0.7, "lower": 0.3, "seconds": 2.5}),
        _row(1000, {"error": "timeout after 150.0 s"}),
    ]
    f.write_text(json.dumps({"meta": {}, "rows": rows}))
    got = ch.allocation_peer_row(100, 1.0, 1e-5, path=f)
    assert got["peer"] == {"upper": 0.7, "lower": 0.3, "seconds": 2.5}
    with pytest.raises(ValueError, match="timeout"):
        ch.allocation_peer_row(1000, 1.0, 1e-5, path=f)
    with pytest.raises(ValueError, match="no row"):
        ch.allocation_peer_row(300, 1.0, 1e-5, path=f)


def test_recorded_file_holds_the_peer_bracket_of_the_task():
    # pld-accounting 2.0's bracket at T = 100, sigma = 1, delta = 1e-5 as stated when the run was recorded
    peer = ch.allocation_peer_row(100, 1.0, 1e-5)["peer"]
    assert peer["lower"] == pytest.approx(0.6085, abs=5e-5)
    assert peer["upper"] == pytest.approx(0.6357, abs=5e-5)


def test_reference_rows_ratio_and_soundness():
    rows = ch.reference_rows(
        (0.5, 0.6), [{"name": "a", "epsilon": 1.2}, {"name": "b", "epsilon": 0.45}, {"name": "c", "epsilon": 0.5}]
    )
    assert [r["ratio"] for r in rows] == pytest.approx([2.0, 0.75, 0.5 / 0.6])
    assert [r["above_lower"] for r in rows] == [True, False, True]
    assert rows[0]["name"] == "a"
    with pytest.raises(ValueError, match="ref"):
        ch.reference_rows((0.7, 0.6), [])
    with pytest.raises(ValueError, match="ref"):
        ch.reference_rows((0.0, 0.6), [])


def test_brackets_intersect():
    assert ch.brackets_intersect((0.0, 1.0), (1.0, 2.0))
    assert ch.brackets_intersect((0.6208, 0.6211), (0.6085, 0.6357))
    assert not ch.brackets_intersect((0.0, 1.0), (1.1, 2.0))
    assert not ch.brackets_intersect((1.1, 2.0), (0.0, 1.0))
