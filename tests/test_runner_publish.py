"""Publishing in one step (dputils.book.publish): a reader never sees the executed copy of one run beside the results
or the record of another, whenever the publisher is killed (kill -9 at every state-changing call), and the next
run removes what a killed publish left."""

import json
import os
import signal
from pathlib import Path

import pytest

from dputils.book import changed, publish, results
from dputils.book.run import run_staged  # noqa: F401  (the runner publishes through publish.publish)

NAME = "demo"


def _stage(stage: Path, tag: str, files: tuple[str, ...]) -> tuple[Path, list[Path]]:
    """Staged files whose content names the run (``tag``) and the file."""
    stage.mkdir(parents=True, exist_ok=True)
    nb = stage / f"{NAME}.ipynb"
    nb.write_text(json.dumps({"run": tag, "file": nb.name}))
    out = []
    for f in files:
        p = stage / "results" / f
        p.parent.mkdir(exist_ok=True)
        p.write_text(json.dumps({"run": tag, "file": f}))
        out.append(p)
    return nb, out


def _publish(m_dir, r_dir, stage, tag, files=("demo.json",), replace_results=False):
    nb, res = _stage(stage, tag, files)

    def record(nb_path, files_map):
        changed.write_success_at(nb_path, files_map, {"run": tag}, 1.0)

    return publish.publish(NAME, m_dir, r_dir, nb, res, record=record, replace_results=replace_results)


def _visible(m_dir: Path, r_dir: Path) -> dict[str, str]:
    """What a reader sees: the run each published file comes from (the notebook, every results file, the record)."""
    seen = {}
    nb = m_dir / f"{NAME}.ipynb"
    if nb.exists():
        seen[nb.name] = json.loads(nb.read_text())["run"]
    for f in sorted(r_dir.glob("*.json")):
        if f.exists():
            seen[f.name] = results.read(f)["run"]
    rec = changed.read_record(m_dir, NAME)
    if rec is not None:
        seen["record"] = rec["inputs"]["run"]
    return seen


def _kill_at(k: int, fn) -> bool:
    """Run ``fn`` in a forked child that SIGKILLs itself just before its k-th state-changing call (os.replace,
    os.symlink, os.link, os.unlink, os.rename); True when the child was killed (False: fn finished first)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        try:
            count = [0]
            for fname in ("replace", "symlink", "link", "unlink", "rename"):
                real = getattr(os, fname)

                def wrapped(*a, _real=real, **kw):
                    count[0] += 1
                    if count[0] == k:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return _real(*a, **kw)

                setattr(os, fname, wrapped)
            fn()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _leftovers(m_dir: Path, r_dir: Path) -> list[str]:
    """Files a finished publish would not leave: hidden temporary files, dangling links, more than one generation."""
    hidden = {".gen", f".{NAME}.inputs.json"}
    bad = [p.name for d in (m_dir, r_dir) for p in d.iterdir() if p.name.startswith(".") and p.name not in hidden]
    bad += [p.name for d in (m_dir, r_dir) for p in d.iterdir() if p.is_symlink() and not p.exists()]
    store = publish.store_of(r_dir, NAME)
    gens = [p.name for p in store.iterdir() if p.name.startswith("g.")]
    if len(gens) != 1:
        bad += gens
    bad += [p.name for p in store.iterdir() if p.name not in (".lock", "current", *gens)]
    return bad


def _setup(base: Path, start: str) -> tuple[Path, Path]:
    """The old run published (``start``: by this scheme, or as the earlier runner left it: plain files and a record
    written after them), plus another chapter's results."""
    import shutil

    shutil.rmtree(base, ignore_errors=True)
    m_dir, r_dir = base / "book" / "methods", base / "results"
    if start == "published":
        _publish(m_dir, r_dir, base / "stage0", "old", OLD_FILES)
    else:
        m_dir.mkdir(parents=True)
        r_dir.mkdir()
        nb, res = _stage(base / "stage0", "old", OLD_FILES)
        os.replace(nb, m_dir / nb.name)
        for f in res:
            os.replace(f, r_dir / f.name)
        changed.write_success(m_dir, r_dir, NAME, {"run": "old"}, OLD_FILES, 1.0)
    (r_dir / "other.json").write_text(json.dumps({"run": "another chapter"}))  # not this chapter's: kept
    return m_dir, r_dir


OLD_FILES = ("demo.json", "gone.json")  # the new run writes extra.json and no longer gone.json
NEW_FILES = ("demo.json", "extra.json")
BEFORE = {"demo.ipynb": "old", "demo.json": "old", "gone.json": "old", "record": "old", "other.json": "another chapter"}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="kills a forked publisher")
@pytest.mark.parametrize("start", ["published", "plain files"])
def test_a_publish_killed_at_any_step_never_shows_a_mixed_pair(tmp_path, start):
    kills, states = 0, set()
    for k in range(1, 200):
        m_dir, r_dir = _setup(tmp_path / "repo", start)
        assert _visible(m_dir, r_dir) == BEFORE
        assert changed.decide(m_dir, r_dir, NAME, {"run": "old"})[0]
        killed = _kill_at(k, lambda: _publish(m_dir, r_dir, tmp_path / "repo" / "stage1", "new", NEW_FILES))
        seen = _visible(m_dir, r_dir)
        assert seen.pop("other.json") == "another chapter"
        if start == "plain files":  # a plain file the new run does not write has no owner: it stays, as before
            assert seen.pop("gone.json") == "old"
        runs = set(seen.values())
        assert len(runs) == 1, f"killed before call {k}: a mixed view {seen}"
        (run,) = runs
        if run == "old":
            old = {f: r for f, r in BEFORE.items() if f != "other.json" and (f != "gone.json" or start == "published")}
            assert seen == old, f"killed before call {k}: {seen}"
        else:  # the notebook, the record and demo.json of the new run; extra.json may not be linked yet
            assert {"demo.ipynb", "demo.json", "record"} <= set(seen) and "gone.json" not in seen, (k, seen)
        states.add(run)
        # --changed reads the record and the published files as one run
        # (killed before extra.json, new to the chapter, was linked: it reruns for that, as for any missing file)
        reuse, why = changed.decide(m_dir, r_dir, NAME, {"run": run})
        assert reuse or (why == "results file extra.json missing" and "extra.json" not in seen), (k, seen, why)
        # the next run removes what the killed publish left, and readers see the same
        publish.clean_leftovers(m_dir, r_dir)
        assert _leftovers(m_dir, r_dir) == [], f"killed before call {k}"
        assert {f: r for f, r in _visible(m_dir, r_dir).items() if f in seen} == seen
        if not killed:
            break
        kills += 1
    assert kills >= 5 and states == {"old", "new"}  # kill points before and after the switch
    assert _visible(m_dir, r_dir) == {
        "demo.ipynb": "new",
        "demo.json": "new",
        "extra.json": "new",
        "record": "new",
        "other.json": "another chapter",
        **({"gone.json": "old"} if start == "plain files" else {}),
    }


def test_a_failed_switch_leaves_the_old_files_and_puts_the_staged_ones_back(tmp_path, monkeypatch):
    """An error (disk full) at the switch: readers still see the old run; the staged files are back in staging for
    inspection; no new generation is left behind."""
    m_dir, r_dir = tmp_path / "methods", tmp_path / "results"
    _publish(m_dir, r_dir, tmp_path / "s0", "old")
    real_replace = os.replace

    def failing(src, dst):
        if Path(dst).name == publish.CURRENT:
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(publish.os, "replace", failing)
    with pytest.raises(OSError, match="No space left"):
        _publish(m_dir, r_dir, tmp_path / "s1", "new")
    monkeypatch.setattr(publish.os, "replace", real_replace)
    assert _visible(m_dir, r_dir) == {"demo.ipynb": "old", "demo.json": "old", "record": "old"}
    assert sorted(p.relative_to(tmp_path / "s1").as_posix() for p in (tmp_path / "s1").rglob("*") if p.is_file()) == [
        "demo.ipynb",
        "results/demo.json",
    ]
    assert _leftovers(m_dir, r_dir) == []


def test_replace_results_removes_the_files_the_run_did_not_write(tmp_path):
    """A sweep point owns its results folder: files of the old run (plain or published) that the new run did not
    write go with the publish."""
    m_dir, r_dir = tmp_path / "point", tmp_path / "point" / "results"
    r_dir.mkdir(parents=True)
    (r_dir / "stale.json").write_text("{}")
    _publish(m_dir, r_dir, tmp_path / "s0", "a", ("demo.json", "b.json"), replace_results=True)
    assert sorted(p.name for p in r_dir.glob("*.json")) == ["b.json", "demo.json"]
    _publish(m_dir, r_dir, tmp_path / "s1", "b", ("demo.json",), replace_results=True)
    assert sorted(p.name for p in r_dir.glob("*.json")) == ["demo.json"]
    assert _visible(m_dir, r_dir) == {"demo.ipynb": "b", "demo.json": "b", "record": "b"}
    assert _leftovers(m_dir, r_dir) == []


def test_leftovers_of_the_earlier_two_rename_publish_are_removed(tmp_path):
    """The ``.NAME.PID.NS.new``/``.old`` files of a killed two-rename publish (about 700 KB each time) go once their
    process is gone; a live process's are kept."""
    import subprocess
    import sys

    m_dir = tmp_path / "methods"
    m_dir.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dpid = int(dead.stdout)
    gone = [
        m_dir / f".demo.ipynb.{dpid}.123.new",
        m_dir / f".demo.ipynb.{dpid}.123.old",
        m_dir / f".demo.ipynb.{dpid}.tmp",
    ]
    live = m_dir / f".demo.ipynb.{os.getpid()}.123.new"
    for p in [*gone, live]:
        p.write_text("x" * 1000)
    keep = m_dir / ".demo.inputs.json"
    keep.write_text("{}")
    assert sorted(publish.clean_leftovers(m_dir)) == sorted(gone)
    assert live.exists() and keep.exists()
