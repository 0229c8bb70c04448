"""Issue 37 item 6: a GPU recording carries its provenance (commit, code files and their hash, machine, seconds),
and the gauss_audit target built on it passes only while the code hashes as recorded, so the status ledger flags a
recording the code has moved away from."""

from __future__ import annotations

import hashlib
import json

import pytest

from dputils.book.chapters import gauss_audit as ch
from dputils.book.recordings import code_hash, provenance_status
from dputils.book.scorecard import Targets


def test_code_hash_is_sha256_of_the_framed_contents(tmp_path):
    (tmp_path / "a.py").write_bytes(b"x = 1\n")
    (tmp_path / "b.py").write_bytes(b"")
    want = hashlib.sha256(b"a.py\x006\x00x = 1\n" + b"b.py\x000\x00").hexdigest()  # by hand, sorted paths
    assert code_hash(["b.py", "a.py"], root=tmp_path) == want
    with pytest.raises(FileNotFoundError, match="c.py"):
        code_hash(["c.py"], root=tmp_path)


def test_provenance_status_flags_a_change(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    prov = {"commit": "0" * 40, "code_files": ["a.py"], "machine": "m", "seconds": 1.0}
    prov["code_hash"] = code_hash(["a.py"], root=tmp_path)
    assert provenance_status(prov, root=tmp_path)["matches"]
    (tmp_path / "a.py").write_text("x = 2\n")
    st = provenance_status(prov, root=tmp_path)
    assert not st["matches"] and st["current"] != st["recorded"]
    (tmp_path / "a.py").unlink()
    assert provenance_status(prov, root=tmp_path)["missing"] == ["a.py"]
    with pytest.raises(ValueError, match="code_hash"):
        provenance_status({k: v for k, v in prov.items() if k != "code_hash"})


def _target(tmp_path, code_hash_value):
    rec = json.loads(ch.find_recorded(ch.GPU_WHITEBOX).read_text())
    rec["_provenance"]["code_hash"] = code_hash_value
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    tg = Targets("gauss_audit")
    ch.gpu_whitebox(path, tg=tg, id_="T8r")
    return tg.records[0]


def test_chapter_target_follows_the_hash(tmp_path):
    prov = json.loads(ch.find_recorded(ch.GPU_WHITEBOX).read_text())["_provenance"]
    assert {"commit", "code_files", "code_hash", "machine", "seconds"} <= set(prov)
    now = code_hash(prov["code_files"])
    assert _target(tmp_path, now)["status"] == "pass"  # a recording made by this code
    stale = _target(tmp_path, "f" * 64)
    assert stale["status"] == "not reproduced" and "rerun" in stale["reason"]
