"""The matrix chapter's recordings (params/recordings/matrix_allocation/): written with their provenance, read back,
flagged stale when the code they depend on changes, and scored (or not) by the chapter's T7c."""

from __future__ import annotations

import json

import pytest

from dputils.book.scorecard import Targets

ch = pytest.importorskip("dputils.book.chapters.matrix_allocation")

VALUE = {"eps": 0.5, "sigma_renyi": 9.0, "condcomp_epsilon": 0.7, "condcomp_seconds": 1.0}


def test_write_and_read_back(tmp_path):
    path = ch.write_recording("T7c", VALUE, 12.5, directory=tmp_path)
    rec = ch.read_recording("T7c", directory=tmp_path)
    assert path.name == "T7c.json"
    assert rec["value"] == VALUE and rec["seconds"] == 12.5 and rec["stale"] is False
    assert len(rec["code_hash"]) == 64 and rec["commit"] and rec["machine"]["cpus"]
    assert ch.stale_recordings(tmp_path) == []


def test_a_changed_code_hash_is_flagged(tmp_path):
    path = ch.write_recording("T7c", VALUE, 1.0, directory=tmp_path)
    rec = json.loads(path.read_text())
    rec["code_hash"] = "0" * 64  # as if recorded with other code
    path.write_text(json.dumps(rec))
    assert ch.read_recording("T7c", directory=tmp_path)["stale"] is True
    assert ch.stale_recordings(tmp_path) == ["T7c"]
    assert "stale" in ch.recording_provenance(ch.read_recording("T7c", directory=tmp_path))


def test_the_hash_follows_the_source(tmp_path, monkeypatch):
    """The hash is over the source files: a module whose file changes changes it."""
    mod = tmp_path / "rec_probe_mod.py"
    mod.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    h1 = ch.code_hash(["rec_probe_mod"])
    mod.write_text("X = 2\n")
    assert ch.code_hash(["rec_probe_mod"]) != h1


def test_the_hash_covers_a_package_s_submodules(tmp_path, monkeypatch):
    """A recording that names a package (dputils.accountants.pld) goes stale when any of its submodules changes,
    not only its __init__."""
    pkg = tmp_path / "rec_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_inner.py").write_text("Y = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    h1 = ch.code_hash(["rec_probe_pkg"])
    (pkg / "_inner.py").write_text("Y = 2\n")
    assert ch.code_hash(["rec_probe_pkg"]) != h1


def test_unknown_recording_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown"):
        ch.write_recording("T99", VALUE, 1.0, directory=tmp_path)


def test_t7c_scored_only_from_a_fresh_recording(tmp_path):
    tg = Targets("matrix_allocation")
    ch.record_multi_bisr(tg, None, n=1000, cost=24.0)
    ch.write_recording("T7c", VALUE, 1.0, directory=tmp_path)
    rec = ch.read_recording("T7c", directory=tmp_path)
    text = ch.record_multi_bisr(tg2 := Targets("matrix_allocation"), rec, n=1000, cost=24.0)
    assert "above the target" in text and "recorded" in text
    (r,) = tg.to_dict()
    (r2,) = tg2.to_dict()
    assert r["status"] == "not run" and "no recording" in r["reason"]
    assert r2["status"] == "not reproduced" and "0.700" in r2["reason"]
    stale = dict(rec, stale=True)
    ch.record_multi_bisr(tg3 := Targets("matrix_allocation"), stale, n=1000, cost=24.0)
    assert tg3.to_dict()[0]["status"] == "not run"


def test_committed_recordings_match_the_code():
    """Every recording committed under params/recordings/matrix_allocation/ was made with the current code; when
    this fails, re-run ``python -m dputils.book.chapters.matrix_allocation record NAME`` (or say why not)."""
    assert ch.stale_recordings() == []
