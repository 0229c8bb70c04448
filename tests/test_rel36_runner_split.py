"""Issue 36 item 8: the runner split by job (dputils/book/runner/), its manual in docs/runner.md, one table of
exit codes, and ``execute_all`` cut into "decide what runs" (plan_runs) and "run it" (run_plan)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from dputils.book import run, runlock
from dputils.book.runner import cli as runner_cli

ROOT = Path(__file__).resolve().parents[1]

# the names other code and the tests import from dputils.book.run (before the split they were defined there)
NAMES = """PROFILES KERNEL_ARGS HEARTBEAT_S LOCK_BUSY_EXIT RootError find_root notebook_paths load_profile
check_output_folder output_dirs execute_one quiet_shutdown_kernel_manager kernel_start_race failure_location
timeout_location add_download_cell merge_parameter_cells owner_gone clean_stale_staging FINISHED_MARK run_staged
failure_where describe_failure execute_all check_profile check_devices run_notebooks timing_table REPORT_FORMAT
REPORT_VERSION report_path chapter_entry run_report write_report book_log_line profile_site build_book cli_main
check_ledger declared_parameters check_parameters pid_alive _kill_descendants _worker_init _stop_pool _watch_owner
_record _say _rel _parser _cli_locked""".split()


def test_every_name_is_still_importable_from_run():
    missing = [n for n in NAMES if not hasattr(run, n)]
    assert missing == []


def test_run_is_a_short_index_and_the_manual_is_a_docs_page():
    assert len((ROOT / "dputils" / "book" / "run.py").read_text().splitlines()) < 150
    page = (ROOT / "docs" / "runner.md").read_text()
    for mod in sorted((ROOT / "dputils" / "book" / "runner").glob("*.py")):
        if mod.stem != "__init__":
            assert f"dputils/book/runner/{mod.name}" in page, mod.name
            assert len(mod.read_text().splitlines()) < 450, mod.name
    assert "Runs are atomic per notebook" in page and "interrupted; the last good results are kept" in page


@pytest.mark.parametrize(
    "exc, code, line",
    [
        (runner_cli.LockWaitInterrupted(), 130, "interrupted while waiting for the lock; nothing ran"),
        (KeyboardInterrupt(), 130, "interrupted; the last good results are kept"),
        (runlock.LockBusy("another run holds it"), run.LOCK_BUSY_EXIT, "error: another run holds it"),
        (run.RootError("no root"), 2, "error: no root"),
        (runner_cli.LockUnavailable("cannot take the run lock"), 2, "error: cannot take the run lock"),
        (ValueError("bad"), 2, "error: bad"),
    ],
)
def test_exit_codes_come_from_one_table(exc, code, line):
    assert run.exit_status(exc) == (code, line)


def test_an_unlisted_exception_is_not_swallowed():
    assert run.exit_status(RuntimeError("a bug")) is None


def _book(tmp_path):
    import jupytext

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "params" / "smoke.yml").write_text("b:\n  x: 2\n")
    for name in ("a", "b"):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        p = nbformat.v4.new_code_cell("x: int = 1")
        p.metadata["tags"] = ["parameters"]
        nb.cells = [p]
        jupytext.write(nb, root / "notebooks" / f"{name}.md", fmt="md:myst")
    return root


def test_plan_runs_decides_without_running(tmp_path, capsys):
    root = _book(tmp_path)
    plan = run.plan_runs("smoke", root=root)
    assert [p.stem for p in plan.to_run] == ["a", "b"] and plan.reused == []
    assert plan.params.get("b") == {"x": 2} and set(plan.inputs) == {"a", "b"}
    assert plan.why == {"a": "run without --changed", "b": "run without --changed"}
    assert plan.m_dir == root / "_build" / "smoke" / "methods"
    assert not (root / "_build").exists()  # nothing ran, nothing staged
    assert [p.stem for p in run.plan_runs("smoke", only=["b"], root=root).to_run] == ["b"]
    with pytest.raises(ValueError, match="unknown notebook"):
        run.plan_runs("smoke", only=["c"], root=root)
    (root / "params" / "smoke.yml").write_text("b:\n  y: 2\n")
    with pytest.raises(ValueError, match="y"):
        run.plan_runs("smoke", root=root)


def test_run_plan_of_nothing_runs_nothing(tmp_path, capsys):
    root = _book(tmp_path)
    plan = run.plan_runs("smoke", root=root)
    plan.to_run = []
    assert run.run_plan(plan) == []
    assert "nothing to run" in capsys.readouterr().err
    assert not (root / "_build" / "staging").exists()
