"""The benchmarks page says whether the accountants' code changed since the recorded run's commit (a reader must
not take a run of 2026-11-24 for today's code: the PLD then refused delta 1e-15, which it answers now)."""

import subprocess

import pytest

from dputils.book.chapters.benchmarks import code_since_text
from dputils.book.recordings import changed_since


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "dputils" / "accountants").mkdir(parents=True)
    (tmp_path / "dputils" / "accountants" / "pld.py").write_text("X = 1\n")
    (tmp_path / "notes.txt").write_text("a\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "run")
    rev = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return tmp_path, rev.stdout.strip()


def test_unchanged_changed_and_unknown(repo):
    root, commit = repo
    assert changed_since(commit, ["dputils/accountants"], root=root) == []
    assert "unchanged since that run:" in code_since_text(commit, False, root=root)
    assert "uncommitted changes" in code_since_text(commit, True, root=root)
    (root / "notes.txt").write_text("b\n")  # outside the measured code: still unchanged
    assert changed_since(commit, ["dputils/accountants"], root=root) == []
    (root / "dputils" / "accountants" / "pld.py").write_text("X = 2\n")
    assert changed_since(commit, ["dputils/accountants"], root=root) == ["dputils/accountants/pld.py"]
    text = code_since_text(commit, False, root=root)
    assert "has changed since that run (1 file(s)" in text and "not today's" in text
    # a commit this clone lacks, no commit, no repository: "cannot be told", never "unchanged"
    assert changed_since("0" * 40, ["dputils"], root=root) is None
    assert changed_since(None, ["dputils"], root=root) is None
    assert "cannot be told" in code_since_text("0" * 40, False, root=root)
    assert changed_since(commit, ["dputils"], root=root.parent / "nowhere") is None
