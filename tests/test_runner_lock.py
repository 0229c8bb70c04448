"""One run/book per book root and outputs (dputils.book.runlock): a second run says which run holds the lock and
stops, or waits with --wait; a lock left by a killed run is taken over."""

import json
import os
import subprocess
import sys
import time

import pytest

from dputils.book import runlock
from dputils.book.run import LOCK_BUSY_EXIT, cli_main

HOLD = """
import sys, time
from pathlib import Path
from dputils.book import runlock
with runlock.hold(Path(sys.argv[1]), sys.argv[2], command="holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _root(tmp_path):
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "notebooks" / "a.md").write_text("# a\n")
    return root


def _holder(root, key, seconds):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(root), key, str(seconds)], stdout=subprocess.PIPE, env=env)
    assert p.stdout.readline().strip() == b"held"
    return p


def test_a_second_run_on_the_same_outputs_names_the_holder_and_stops(tmp_path, capsys):
    root = _root(tmp_path)
    p = _holder(root, "smoke", 30)
    try:
        rc = cli_main("run", ["--root", str(root), "--profile", "smoke", "--only", "nothing"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == LOCK_BUSY_EXIT
        assert len(err) == 1 and f"pid {p.pid} since 20" in err[0] and "(holder)" in err[0] and "--wait" in err[0]
        # another profile's outputs are not locked: this run gets past the lock (and stops at --only)
        rc = cli_main("run", ["--root", str(root), "--profile", "paper", "--only", "nothing"])
        assert rc == 2 and "unknown notebook" in capsys.readouterr().err
        # `book` writes the book's places: the full lock, which `run --output book` shares
        assert runlock.lock_key("full") == runlock.lock_key("paper", "book") == "full"
    finally:
        p.kill()
        p.wait()


def test_wait_waits_for_the_holder(tmp_path, capsys):
    root = _root(tmp_path)
    p = _holder(root, "smoke", 2)
    t0 = time.monotonic()
    rc = cli_main("run", ["--root", str(root), "--profile", "smoke", "--only", "nothing", "--wait"])
    waited = time.monotonic() - t0
    p.wait()
    err = capsys.readouterr().err
    assert rc == 2 and "unknown notebook" in err  # it ran once the holder was done
    assert f"waiting for pid {p.pid}" in err and waited >= 1.0


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path, capsys):
    root = _root(tmp_path)
    p = _holder(root, "smoke", 60)
    p.kill()  # kill -9: the kernel drops its flock; the file still names it
    p.wait()
    held = json.loads(runlock.lock_path(root, "smoke").read_text())
    assert held["pid"] == p.pid
    rc = cli_main("run", ["--root", str(root), "--profile", "smoke", "--only", "nothing"])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown notebook" in err
    assert f"took over the smoke lock of pid {p.pid}" in err and "gone" in err
    assert runlock.lock_path(root, "smoke").read_text() == ""  # released at the end


def test_a_dead_pid_whose_descriptor_lives_on_is_waited_for_briefly(tmp_path, monkeypatch):
    """A killed run's pool workers inherit its descriptor and end within about a second: a lock held by them under
    a dead pid is waited for (up to ORPHAN_WAIT_S), then refused if still held."""
    root = _root(tmp_path)
    p = _holder(root, "smoke", 60)
    try:
        path = runlock.lock_path(root, "smoke")
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        path.write_text(json.dumps({"pid": int(dead.stdout), "since": "x"}))
        monkeypatch.setattr(runlock, "ORPHAN_WAIT_S", 0.5)
        t0 = time.monotonic()
        with pytest.raises(runlock.LockBusy, match=f"pid {int(dead.stdout)}"):
            with runlock.hold(root, "smoke"):
                pass
        assert time.monotonic() - t0 >= 0.5
    finally:
        p.kill()
        p.wait()
