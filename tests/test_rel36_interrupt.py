"""Issue 36 item 2: Ctrl-C in ``run`` and ``sweep`` is one line, "interrupted; the last good results are kept",
exit 130, no traceback and no Dask warnings. The tests wait for a readiness marker that the sleeping cell writes
(not a fixed sleep), so a loaded machine only makes them slower, not flaky."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")

READY_TIMEOUT_S = 180.0


def _write_md(path, cells):
    import jupytext

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    jupytext.write(nb, path, fmt="md:myst")


def _root(tmp_path: Path) -> Path:
    """A book with one notebook whose third cell writes the file ``marker`` (when given) and then sleeps ``wait``."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "params" / "smoke.yml").write_text("")
    p = nbformat.v4.new_code_cell('wait: float = 0.0  # seconds\nmarker: str = ""  # written before the wait')
    p.metadata["tags"] = ["parameters"]
    _write_md(
        root / "notebooks" / "slow.md",
        [
            p,
            nbformat.v4.new_code_cell("x = 1"),
            nbformat.v4.new_code_cell(
                "import pathlib, time\nif marker:\n    pathlib.Path(marker).write_text('ready')\ntime.sleep(wait)"
            ),
            nbformat.v4.new_code_cell("from dputils.book import results\nresults.save('slow', value=wait)"),
        ],
    )
    return root


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DPBOOK_RESULTS_DIR", "MPLBACKEND")}


def _as_a_terminal_job() -> None:
    """In the child before exec: Ctrl-C's default disposition, as a terminal's foreground job has it. A test run
    started in the background of a non-interactive shell (``pytest ... &``, as a CI script may) inherits SIGINT
    *ignored*, and a Python started so never raises KeyboardInterrupt: the run would sleep its 300 s through the
    signal (seen: both tests timed out that way in a backgrounded CI run)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_when_ready(argv: list[str], marker: Path) -> tuple[int, str]:
    """Start ``dputils ARGV`` in its own process group, wait for ``marker``, send SIGINT to the group (what
    Ctrl-C does in a terminal) and return (exit status, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dputils", *argv],
        env=_env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_as_a_terminal_job,
    )
    t0 = time.time()
    try:
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"ended before the cell started: {proc.returncode}\n{proc.stderr.read().decode()}")
            if time.time() - t0 > READY_TIMEOUT_S:
                pytest.fail(f"the cell did not start within {READY_TIMEOUT_S:g} s")
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err.decode()


def _no_process_left(root: Path) -> None:
    t0 = time.time()
    while time.time() - t0 < 30:  # kernels and workers may take a moment to go after the parent
        out = subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True)
        if out.stdout.strip() == "":
            return
        time.sleep(0.5)
    pytest.fail(f"processes left: {out.stdout}")


def test_ctrl_c_in_sweep_is_one_line_and_keeps_the_last_good_results(tmp_path):
    """Before: a KeyboardInterrupt traceback and Dask's warnings about the closing cluster."""
    pytest.importorskip("distributed")
    root = _root(tmp_path)
    marker = tmp_path / "ready"
    grid = tmp_path / "g.yml"
    grid.write_text("points:\n  - {wait: 0.0}\n")
    common = ["sweep", "slow", "--root", str(root), "--name", "s", "--workers", "1"]
    first = subprocess.run(
        [sys.executable, "-m", "dputils", *common, "--grid", str(grid)], env=_env(), capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    table = root / "sweeps" / "s" / "results.csv"
    before = table.read_bytes()
    grid.write_text(f"points:\n  - {{wait: 0.0}}\n  - {{wait: 300.0, marker: '{marker}'}}\n")
    rc, err = _interrupt_when_ready([*common, "--grid", str(grid), "--resume"], marker)
    assert rc == 130, err
    assert err.strip().splitlines()[-1] == "interrupted; the last good results are kept", err
    for noise in ("Traceback", "KeyboardInterrupt", "distributed.", "WARNING", "CancelledError"):
        assert noise not in err, err
    assert table.read_bytes() == before
    _no_process_left(root)


def test_ctrl_c_in_run_is_one_line_and_keeps_the_last_good_results(tmp_path):
    root = _root(tmp_path)
    good = root / "_build" / "smoke" / "results"
    argv = ["run", "--root", str(root), "--profile", "smoke"]
    first = subprocess.run([sys.executable, "-m", "dputils", *argv], env=_env(), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    before = (good / "slow.json").read_bytes()
    marker = tmp_path / "ready"
    (root / "params" / "smoke.yml").write_text(f"slow:\n  wait: 300.0\n  marker: '{marker}'\n")
    rc, err = _interrupt_when_ready(argv, marker)
    assert rc == 130, err
    assert err.strip().splitlines()[-1] == "interrupted; the last good results are kept", err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert (good / "slow.json").read_bytes() == before
    assert [d for d in (root / "_build" / "staging").glob("*") if d.is_dir()] == []
    _no_process_left(root)
