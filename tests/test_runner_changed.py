"""`run --changed` (rerun only what changed), the JSON report of `run`/`book`, and quiet kernel shutdowns.

All on throw-away roots with two tiny notebooks, so that the whole file takes seconds of kernel time."""

import asyncio
import hashlib
import json
import signal
from pathlib import Path

import nbformat
import pytest

from dputils.book import changed as chg
from dputils.book import sweep
from dputils.book.run import cli_main, quiet_shutdown_kernel_manager


def _write_md(path, cells):
    import jupytext

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    jupytext.write(nb, path, fmt="md:myst")


FAIL_LINE = "assert not fail, 'asked to fail'"


def _make_root(root):
    """demo: reads data/in.txt (a parameter), saves its results, fails when asked; other: saves one number."""
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "data").mkdir()
    (root / "data" / "in.txt").write_text("4\n")
    (root / "params" / "full.yml").write_text("demo: {}\n")
    p = nbformat.v4.new_code_cell(
        "scale: int = 1  # multiplies the value\ndata_file: str = 'data/in.txt'  # input\n"
        "fail: bool = False  # raise after saving"
    )
    p.metadata["tags"] = ["parameters"]
    _write_md(
        root / "notebooks" / "demo.md",
        [
            p,
            nbformat.v4.new_code_cell(
                "import os\nfrom pathlib import Path\nfrom dputils.book import results\n"
                "root = Path(os.environ['DPBOOK_RESULTS_PUBLISHED']).parent\n"
                "results.save('demo', value=scale * int((root / data_file).read_text()))"
            ),
            nbformat.v4.new_code_cell(f"x = 1\n{FAIL_LINE}\nprint(x)"),
        ],
    )
    q = nbformat.v4.new_code_cell("k: int = 2  # a value")
    q.metadata["tags"] = ["parameters"]
    _write_md(
        root / "notebooks" / "other.md",
        [q, nbformat.v4.new_code_cell("from dputils.book import results\nresults.save('other', k=k)")],
    )
    return root


def _strict(text):
    def refuse(c):
        raise ValueError(f"not strict JSON: {c}")

    return json.loads(text, parse_constant=refuse)


def _run(root, capfd, *extra, command="run"):
    rc = cli_main(command, ["--root", str(root), "--changed", "--jobs", "2", "--timeout", "120", *extra])
    err = capfd.readouterr().err
    rep = _strict((root / "_build" / "full" / "report.json").read_text())
    return rc, err, rep, {c["name"]: c for c in rep["chapters"]}


def test_changed_reuses_unchanged_chapters_and_says_why_the_others_ran(tmp_path, capfd, monkeypatch):
    root = _make_root(tmp_path / "repo")
    nb = root / "book" / "methods" / "demo.ipynb"

    # 1. first run: no records, both run; the report's schema
    rc, err, rep, ch = _run(root, capfd)
    assert rc == 0, err
    assert rep["format"] == "dpbook-run-report" and rep["version"] == 1 and rep["command"] == "run"
    assert rep["profile"] == "full" and rep["changed"] is True and rep["ok"] is True and rep["exit_code"] == 0
    assert [c["name"] for c in rep["chapters"]] == ["demo", "other"]
    for c in rep["chapters"]:
        assert set(c) >= {"name", "status", "action", "reason", "seconds", "profile", "output"}
        assert c["status"] == "ok" and c["action"] == "run" and c["reason"] == "no record of an earlier run"
        assert c["profile"] == "full" and c["seconds"] > 0 and "failure" not in c
    assert rep["totals"] == {**rep["totals"], "chapters": 2, "ok": 2, "failed": 0, "run": 2, "reused": 0}
    assert rep["totals"]["seconds"] == pytest.approx(sum(c["seconds"] for c in rep["chapters"]), abs=0.02)
    assert json.loads((root / "results" / "demo.json").read_text())["value"] == 4
    record = _strict(chg.record_path(root / "book" / "methods", "demo").read_text())
    assert record["ok"] is True and record["results"] == {
        "demo.json": hashlib.sha256((root / "results" / "demo.json").read_bytes()).hexdigest()
    }

    # 2. nothing changed: both reused, nothing executed
    before = nb.stat().st_mtime_ns, nb.read_bytes()
    rc, err, rep, ch = _run(root, capfd)
    assert rc == 0
    assert {c["action"] for c in rep["chapters"]} == {"reused"} and rep["totals"]["reused"] == 2
    assert ch["demo"]["reason"].startswith("inputs unchanged since ") and "demo: reused (inputs unchanged" in err
    assert (nb.stat().st_mtime_ns, nb.read_bytes()) == before
    assert "running" not in err and "nothing to run" in err

    # 3. a profile value: demo runs with the reason, other is reused
    (root / "params" / "full.yml").write_text("demo:\n  scale: 3\n")
    rc, err, rep, ch = _run(root, capfd)
    assert rc == 0 and ch["other"]["action"] == "reused" and ch["demo"]["action"] == "run"
    assert ch["demo"]["reason"] == "parameters changed (scale: <default> -> 3)"
    assert "demo: runs (parameters changed (scale: <default> -> 3))" in err
    assert json.loads((root / "results" / "demo.json").read_text())["value"] == 12

    # 4. a data file the chapter names in a parameter
    (root / "data" / "in.txt").write_text("5\n")
    rc, err, rep, ch = _run(root, capfd)
    assert ch["demo"]["action"] == "run" and ch["other"]["action"] == "reused"
    assert ch["demo"]["reason"] == "data changed (parameter data_file: data/in.txt)"
    assert json.loads((root / "results" / "demo.json").read_text())["value"] == 15

    # 5. the notebook's source; --only limits the run to it
    src = root / "notebooks" / "other.md"
    src.write_text(src.read_text() + "\nA closing sentence.\n")
    rc, err, rep, ch = _run(root, capfd, "--only", "other")
    assert list(ch) == ["other"] and ch["other"]["action"] == "run"
    assert ch["other"]["reason"] == "notebooks/other.md changed"

    # 6. a package file (the digests are those of dputils.book.changed.package_digests, checked below)
    real = chg.package_digests
    monkeypatch.setattr(
        chg, "package_digests", lambda exclude=(), pkg=None: {**real(exclude, pkg), "audit/gauss.py": "0" * 64}
    )
    rc, err, rep, ch = _run(root, capfd)
    assert ch["demo"]["reason"] == ch["other"]["reason"] == "dputils/audit/gauss.py changed"
    monkeypatch.setattr(chg, "package_digests", real)

    # 7. a failure (in `book`, which then builds nothing): the entry names the failing cell; nothing published;
    # then it reruns whatever its inputs
    good = (root / "results" / "demo.json").read_bytes()
    (root / "params" / "full.yml").write_text("demo:\n  scale: 3\n  fail: true\n")
    rc, err, rep, ch = _run(root, capfd, command="book")
    assert rc == 1 and rep["ok"] is False and rep["exit_code"] == 1 and rep["totals"]["failed"] == 1
    assert rep["command"] == "book" and rep["book"] == {"built": False} and "book not built" in err
    # other recorded the patched digest in step 6, so the real one is a change again
    assert ch["other"]["action"] == "run" and ch["other"]["reason"] == "dputils/audit/gauss.py changed"
    md_line = (root / "notebooks" / "demo.md").read_text().splitlines().index(FAIL_LINE) + 1
    f = ch["demo"]["failure"]
    assert ch["demo"]["status"] == "failed" and f["location"] == f"notebooks/demo.md:{md_line}"
    assert f["code_cell"] == 3 and f["line"] == 2 and f["source"] == FAIL_LINE and f["execution_count"] == 4
    assert f["error"] == "AssertionError: asked to fail"
    assert (root / "results" / "demo.json").read_bytes() == good
    (root / "params" / "full.yml").write_text("demo:\n  scale: 3\n")  # the inputs of the last good run
    rc, err, rep, ch = _run(root, capfd)
    assert rc == 0 and ch["demo"]["action"] == "run" and ch["demo"]["reason"].startswith("failed last time (")
    rc, err, rep, ch = _run(root, capfd)
    assert {c["action"] for c in rep["chapters"]} == {"reused"}


def test_decide_notices_a_replaced_copy_or_results(tmp_path):
    m, r = tmp_path / "methods", tmp_path / "results"
    m.mkdir()
    r.mkdir()
    (m / "a.ipynb").write_text("copy")
    (r / "a.json").write_text("{}")
    inputs = {"notebook": {"path": "notebooks/a.md", "sha256": "1"}, "profile": "full", "parameters": {}}
    chg.write_success(m, r, "a", inputs, ["a.json"], 1.5)
    assert chg.decide(m, r, "a", inputs)[0] is True
    assert chg.decide(m, r, "a", {**inputs, "profile": "paper"}) == (False, "profile full -> paper")
    (r / "a.json").write_text('{"x": 1}')
    assert chg.decide(m, r, "a", inputs) == (False, "results file a.json differs from the recorded run")
    (r / "a.json").unlink()
    assert chg.decide(m, r, "a", inputs) == (False, "results file a.json missing")
    (r / "a.json").write_text("{}")
    (m / "a.ipynb").write_text("another copy")
    assert chg.decide(m, r, "a", inputs) == (False, "executed copy differs from the recorded run")
    chg.record_path(m, "a").write_text("{not json")
    assert chg.decide(m, r, "a", inputs) == (False, "no record of an earlier run")


def test_results_of_other_chapters_are_inputs(tmp_path):
    root = tmp_path
    (root / "results").mkdir()
    src = root / "b.md"
    src.write_text("```{code-cell} ipython3\nx = results.load('a')['v']\ny = results.load(\"b\")\n```\n")
    assert chg.results_read(src) == ["a"]  # its own results are not an input
    args = ({}, "full", root, root / "results", {}, {"python": "3"})
    absent = chg.chapter_inputs(src, *args)
    assert absent["results_read"] == {"a": "absent"}
    (root / "results" / "a.json").write_text('{"v": 1}')
    present = chg.chapter_inputs(src, *args)
    assert present["results_read"]["a"] == hashlib.sha256(b'{"v": 1}').hexdigest()
    assert chg.differences(absent, present) == ["results read changed (results/a.json)"]


def test_package_digests_are_the_files_sha256():
    d = chg.package_digests(exclude=chg.NOT_INPUTS)
    pkg = Path(chg.__file__).resolve().parents[1]
    assert sweep.package_digests is chg.package_digests  # the sweep's code hash reads the same digests
    assert d["errors.py"] == hashlib.sha256((pkg / "errors.py").read_bytes()).hexdigest()
    assert "book/bookcheck.py" not in d and "book/run.py" in d and "book/sweep.py" in d
    assert len(d) == len(list(pkg.rglob("*.py"))) - 1


def test_dependency_versions_name_python_and_the_key_packages():
    import platform
    from importlib import metadata

    v = chg.dependency_versions()
    assert v["python"] == platform.python_version() and v["numpy"] == metadata.version("numpy")
    assert chg.dependency_versions(["surely-not-an-installed-dist"])["surely-not-an-installed-dist"] is None


def _kernel_signals(manager_class):
    """The signals a kernel manager sends during a kernel's start and shutdown."""
    sent = []

    async def main():
        km = manager_class(kernel_name="python3")
        real = km._async_signal_kernel

        async def spy(signum):
            sent.append(signum)
            await real(signum)

        km._async_signal_kernel = spy
        await km.start_kernel(extra_arguments=["--IPKernelApp.log_level=ERROR"])
        try:
            kc = km.client()
            kc.start_channels()
            await kc.wait_for_ready(timeout=60)
            kc.stop_channels()
            await km.interrupt_kernel()  # an interrupt asked for outside a shutdown is still sent
        finally:
            await km.shutdown_kernel()

    asyncio.run(main())
    return sent


def test_kernel_shutdown_sends_no_sigint():
    from jupyter_client.manager import AsyncKernelManager

    # jupyter_client's manager interrupts before every shutdown: the source of the stray
    # "KeyboardInterrupt caught in kernel" ERROR line of green runs
    assert _kernel_signals(AsyncKernelManager) == [signal.SIGINT, signal.SIGINT]
    assert _kernel_signals(quiet_shutdown_kernel_manager()) == [signal.SIGINT]


def _kernel_children():
    me = str(__import__("os").getpid())
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            ppid = (d / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if ppid == me and "ipykernel" in cmd and "(zombie)" not in cmd:
            out.append(int(d.name))
    return out


def test_a_cell_that_times_out_still_ends_its_kernel(tmp_path):
    """Without the shutdown interrupt, a kernel busy in a cell that timed out is still ended (SIGTERM after half
    of jupyter_client's shutdown_wait_time), and the failure is reported, not hidden."""
    from dputils.book.run import execute_one

    src = tmp_path / "slow.md"
    p = nbformat.v4.new_code_cell("n: int = 1  # unused")
    p.metadata["tags"] = ["parameters"]
    _write_md(src, [p, nbformat.v4.new_code_cell("import time\ntime.sleep(300)")])
    before = set(_kernel_children())
    rep = execute_one(src, tmp_path / "out" / "slow.ipynb", {}, timeout=3)
    assert not rep["ok"] and "Timeout" in rep["error"], rep
    assert rep["seconds"] < 120
    assert set(_kernel_children()) - before == set()
