"""The runner's failure report and the atomic results writer."""

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from dputils.book import results
from dputils.book.run import cli_main, execute_all, execute_one, failure_location, load_profile, merge_parameter_cells


def _write_md(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    import jupytext

    jupytext.write(nb, path, fmt="md:myst")


def test_runner_reports_the_failing_cell(tmp_path):
    src = tmp_path / "broken.md"
    params = nbformat.v4.new_code_cell("x: int = 1  # a parameter")
    params.metadata["tags"] = ["parameters"]
    _write_md(
        src, [params, nbformat.v4.new_code_cell("y = x + 1"), nbformat.v4.new_code_cell("assert y == 3, 'drifted'")]
    )
    rep = execute_one(src, tmp_path / "out" / "broken.ipynb", {"x": 1}, timeout=120)
    assert not rep["ok"]
    # execution count 4: papermill's injected-parameters cell runs after the parameters cell
    assert rep["cell"] == 4 and "drifted" in rep["error"]
    assert rep["code_cell"] == 3 and rep["line"] == 1
    assert rep["source"].startswith("assert y == 3")
    assert src.read_text().splitlines()[rep["md_line"] - 1].startswith("assert y == 3")
    rep = execute_one(src, tmp_path / "out" / "fixed.ipynb", {"x": 2}, timeout=120)
    assert rep["ok"], rep


def test_paper_profile_inherits_full():
    full = load_profile("full")
    paper = load_profile("paper")
    for k, v in full.items():
        assert k in paper


def test_unknown_profile():
    with pytest.raises(ValueError, match="profile"):
        load_profile("huge")


def test_save_is_atomic_and_round_trips(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.setenv("DPBOOK_RESULTS_DIR", str(tmp_path))
    p = results.save(
        "demo",
        a=np.float64(1.5),
        b=np.arange(3),
        c=float("inf"),
        d={"e": np.int64(2), "x/y~z": -np.inf},
        f=[1.0, float("nan")],
        g=None,
    )
    assert p == tmp_path / "demo.json"
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    # strict JSON (RFC 8259), the package's one rule (dputils.jsonio): a non-finite number is null, as the CLI
    # writes it, and _meta says which nulls were which number (JSON Pointers, "/" and "~" escaped as ~1 and ~0)
    text = p.read_text()
    raw = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert raw["c"] is None and raw["f"] == [1.0, None] and raw["d"]["x/y~z"] is None and raw["g"] is None
    assert raw["_meta"]["nonfinite"] == {"/c": "inf", "/d/x~1y~0z": "-inf", "/f/1": "nan"}
    assert '"inf"' not in text.split('"_meta"')[0] and "Infinity" not in text and "NaN" not in text
    # read back: the numbers that were saved (a null that was None stays None)
    data = results.load("demo")
    assert data["a"] == 1.5 and data["b"] == [0, 1, 2] and data["c"] == float("inf") and data["g"] is None
    assert data["d"] == {"e": 2, "x/y~z": float("-inf")} and data["f"][0] == 1.0 and math.isnan(data["f"][1])
    # a file without non-finite numbers has no record of them
    assert "nonfinite" not in json.loads(results.save("plain", a=1.0).read_text())["_meta"]
    with pytest.raises(ValueError, match="_meta"):
        results.save("demo", _meta={"x": 1})


def test_read_refuses_a_record_that_disagrees_with_the_data(tmp_path):
    for bad in ({"/a": "inf"}, {"/b": "inf"}, {"/c/5": "nan"}, {"/c/0": "big"}, {"a": "inf"}):
        f = tmp_path / "x.json"
        f.write_text(json.dumps({"a": 1.0, "c": [None], "_meta": {"nonfinite": bad}}))
        with pytest.raises(ValueError, match="x.json"):
            results.read(f)
    f.write_text(json.dumps({"c": [None], "_meta": {"nonfinite": ["/c/0"]}}))
    with pytest.raises(ValueError, match="must be an object"):
        results.read(f)


def test_save_failure_leaves_previous_file_intact(tmp_path, monkeypatch):
    monkeypatch.setenv("DPBOOK_RESULTS_DIR", str(tmp_path))
    results.save("demo", a=1)

    class Boom:
        pass

    with pytest.raises(TypeError):
        results.save("demo", a=Boom())
    assert results.load("demo")["a"] == 1
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_save_rejects_bad_names():
    with pytest.raises(ValueError, match="name"):
        results.save("../escape", a=1)


def test_results_files_are_mode_0644(tmp_path, monkeypatch):
    monkeypatch.setenv("DPBOOK_RESULTS_DIR", str(tmp_path))
    p = results.save("demo", a=1)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_load_falls_back_to_published_results(tmp_path, monkeypatch):
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "other.json").write_text('{"a": null, "b": null, "_meta": {"nonfinite": {"/a": "inf"}}}')
    monkeypatch.setenv("DPBOOK_RESULTS_DIR", str(tmp_path / "stage"))
    monkeypatch.setenv("DPBOOK_RESULTS_PUBLISHED", str(tmp_path / "pub"))
    assert results.load("other") == {"a": float("inf"), "b": None, "_meta": {"nonfinite": {"/a": "inf"}}}
    monkeypatch.delenv("DPBOOK_RESULTS_PUBLISHED")
    with pytest.raises(FileNotFoundError):
        results.load("other")


# A throw-away repository root: notebooks/demo.md saves its results, then fails when `fail` is set.


def _params_cell():
    c = nbformat.v4.new_code_cell(
        "scale: int = 1  # multiplies the saved value\nlabel: str = 'a'  # a name\n"
        "fail: bool = False  # raise after saving"
    )
    c.metadata["tags"] = ["parameters"]
    return c


def _make_root(root, fail_line="assert not fail, 'asked to fail'"):
    (root / "notebooks").mkdir(parents=True, exist_ok=True)
    (root / "params").mkdir(exist_ok=True)
    (root / "params" / "full.yml").write_text("demo: {}\n")
    (root / "params" / "smoke.yml").write_text("demo:\n  scale: 7\n")
    (root / "params" / "paper.yml").write_text("")
    cells = [
        _params_cell(),
        nbformat.v4.new_code_cell("from dputils.book import results\nresults.save('demo', value=3 * scale)"),
        nbformat.v4.new_code_cell(f"x = 1\n{fail_line}\nprint(x)"),
    ]
    _write_md(root / "notebooks" / "demo.md", cells)
    return root


def test_failed_run_keeps_the_last_good_copy_and_results(tmp_path, capfd):
    root = _make_root(tmp_path / "repo")
    reports = execute_all("full", jobs=2, timeout=120, root=root)
    assert [r["ok"] for r in reports] == [True]
    nb_path, res_path = root / "book" / "methods" / "demo.ipynb", root / "results" / "demo.json"
    good_nb, good_res = nb_path.read_bytes(), res_path.read_bytes()
    assert json.loads(good_res)["value"] == 3
    assert stat.S_IMODE(res_path.stat().st_mode) == 0o644
    out = capfd.readouterr().err
    assert "running 1 notebook (profile full, 1 job)" in out and "1 passed, 0 failed in" in out

    # the same notebook now saves different numbers and then fails: nothing published may change
    (root / "params" / "full.yml").write_text("demo:\n  scale: 5\n  fail: true\n")
    reports = execute_all("full", timeout=120, root=root)
    assert [r["ok"] for r in reports] == [False]
    assert nb_path.read_bytes() == good_nb and res_path.read_bytes() == good_res
    rep = reports[0]
    staged = Path(rep["output"])
    assert staged.is_file() and "_build/staging" in staged.as_posix()
    assert json.loads((staged.parent / "results" / "demo.json").read_text())["value"] == 15
    err = capfd.readouterr().err
    md_line = (root / "notebooks" / "demo.md").read_text().splitlines().index("assert not fail, 'asked to fail'") + 1
    assert f"notebooks/demo.md:{md_line}, code cell 3, In [4], line 2: assert not fail, 'asked to fail'" in err
    assert "AssertionError: asked to fail" in err and "[FAILED 1/1] demo" in err
    assert "without encryption" not in err


def test_smoke_run_does_not_touch_the_book_and_shows_parameters_once(tmp_path):
    root = _make_root(tmp_path / "repo")
    for p, text in ((root / "book" / "methods" / "demo.ipynb", "book copy"), (root / "results" / "demo.json", "{}")):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    reports = execute_all("smoke", only=["demo"], timeout=120, root=root)
    assert reports[0]["ok"], reports
    assert (root / "book" / "methods" / "demo.ipynb").read_text() == "book copy"
    assert (root / "results" / "demo.json").read_text() == "{}"
    assert json.loads((root / "_build" / "smoke" / "results" / "demo.json").read_text())["value"] == 21
    nb = nbformat.read(root / "_build" / "smoke" / "methods" / "demo.ipynb", as_version=4)
    shown = [c for c in nb.cells if c.cell_type == "code" and "remove-cell" not in c.metadata.get("tags", [])]
    assert "scale: int = 7  # multiplies the saved value [default 1]" in shown[0].source
    assert "label: str = 'a'  # a name" in shown[0].source and "(profile smoke)" in shown[0].source
    hidden = [c for c in nb.cells if "remove-cell" in c.metadata.get("tags", [])]
    assert len(hidden) == 1 and "injected-parameters" in hidden[0].metadata["tags"]
    assert not (root / "_build" / "staging").exists()
    # the page ends with download links: the copy itself and the MyST source, relative to where it lies
    last = nb.cells[-1]
    assert last.cell_type == "markdown" and "{download}`executed notebook (.ipynb) <demo.ipynb>`" in last.source
    assert "{download}`MyST source (.md) <../../../notebooks/demo.md>`" in last.source
    assert sum("Run this chapter yourself" in c.source for c in nb.cells) == 1


def test_merge_parameter_cells_falls_back_when_the_cell_is_not_plain_literals():
    def cells(params_src):
        nb = nbformat.v4.new_notebook()
        p = nbformat.v4.new_code_cell(params_src)
        p.metadata["tags"] = ["parameters"]
        inj = nbformat.v4.new_code_cell("# Parameters\nn = 5\nk = -2.0\n")
        inj.metadata["tags"] = ["injected-parameters"]
        nb.cells = [p, inj]
        return nb, p, inj

    nb, p, inj = cells("n: int = 3  # count\nk: float = -2.0  # same as injected\nflag = True")
    assert merge_parameter_cells(nb, "smoke") is True
    assert p.source.splitlines() == [
        "# Parameters of this run (profile smoke)",
        "# values the run set show [default ...]",
        "n: int = 5  # count [default 3]",
        "k: float = -2.0  # same as injected",
        "flag = True",
    ]
    assert "remove-cell" in inj.metadata["tags"] and "remove-cell" not in p.metadata["tags"]
    # a note that would push a line past the book column goes on a line of its own above it (the smoke book's
    # parameters cells scrolled sideways: 875 px in a 666 px box)
    long_comment = "a comment that fits alone, but not with the default note"
    nb, p, inj = cells(f"n: int = 3  # {long_comment}")
    assert merge_parameter_cells(nb, "smoke") is True
    assert p.source.splitlines()[2:4] == ["# [default 3]", f"n: int = 5  # {long_comment}"]
    # a collapsed (hide-input) cell holds 75 characters: at 77 the smoke pages scrolled by 7-15 px
    assert max(map(len, p.source.splitlines())) <= 75
    for src in ("n: int = 3  # count\nprint(n)", "n: int = 3  # count\nm: int = 2 * n  # derived"):
        nb, p, inj = cells(src)
        assert merge_parameter_cells(nb) is False
        assert "remove-cell" in p.metadata["tags"] and "remove-cell" not in inj.metadata["tags"]


def test_failure_location_without_an_error_output(tmp_path):
    nb = nbformat.v4.new_notebook()
    c = nbformat.v4.new_code_cell("import time\ntime.sleep(100)")
    c.metadata["papermill"] = {"status": "running"}
    nb.cells = [nbformat.v4.new_code_cell("a = 1"), c]
    nbformat.write(nb, tmp_path / "x.ipynb")
    loc = failure_location(tmp_path / "x.ipynb")
    assert loc["code_cell"] == 2 and loc["source"] == "import time" and "line" not in loc


def test_run_and_sweep_describe_a_failure_alike():
    from dputils.book import sweep
    from dputils.book.run import describe_failure

    rep = {
        "name": "chap",
        "point": "p3",
        "md_line": 41,
        "code_cell": 3,
        "cell": 7,
        "line": 2,
        "source": "  raise ValueError('x')",
        "error": "ValueError: x",
        "output": "/tmp/chap.ipynb",
    }
    where = "chap.md:41, code cell 3, In [7], line 2: raise ValueError('x')"
    assert describe_failure(rep) == [
        f"notebooks/{where}",
        "ValueError: x",
        "executed copy with the error: /tmp/chap.ipynb",
    ]
    assert sweep.describe(rep, Path("nb/chap.md")) == f"point p3 FAILED at {where} -> ValueError: x"
    # nothing located: the notebook is named and the report says so
    bare = {"name": "chap", "point": "p1", "error": "DeadKernelError", "output": "o.ipynb"}
    assert describe_failure(bare)[0] == "notebooks/chap.md (before any cell)"
    assert sweep.describe(bare, Path("chap.md")) == "point p1 FAILED at chap.md (before any cell) -> DeadKernelError"


def _cli(args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("DPBOOK_RESULTS_DIR", "MPLBACKEND")}
    return subprocess.run(
        [sys.executable, "-m", "dputils", *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env
    )


def test_run_with_root_from_outside_the_repository(tmp_path):
    root = _make_root(tmp_path / "repo")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    p = _cli(["run", "--root", str(root), "--profile", "smoke", "--jobs", "4"], outside)
    assert p.returncode == 0, p.stderr
    assert "running 1 notebook (profile smoke, 1 job)" in p.stderr and "job(s)" not in p.stderr
    assert "[start  1/1] demo" in p.stderr and "[ok     1/1] demo" in p.stderr
    assert "without encryption" not in p.stderr
    assert (root / "_build" / "smoke" / "methods" / "demo.ipynb").is_file()
    assert not (root / "book").exists() and not (outside / "_build").exists()


def test_run_finds_the_package_repository_from_outside(tmp_path):
    p = _cli(["run", "--only", "no_such_notebook"], tmp_path)
    assert p.returncode == 2
    (line,) = p.stderr.strip().splitlines()
    assert "no_such_notebook" in line and "foundations" in line  # known names of the package's repository


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["run", "--root", "/nonexistent/dir"], "no notebooks/ and params/"),
        (["run", "--jobs", "0"], "jobs must be >= 1"),
        (["run", "--timeout", "0"], "timeout must be >= 1"),
        (["run", "--profile", "huge"], "invalid choice"),
        (["run", "--only", "foundations", "nope"], "unknown notebook(s) nope; known: "),
        (["book", "--output", "x"], "unrecognized arguments"),
    ],
)
def test_run_bad_input_exits_2_with_one_line(args, fragment, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # outside any repository: the package's repository is found
    assert cli_main(args[0], args[1:]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1, err


# --------------------------------------------------------------------------- issue 24: work lost, hostile input


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--profile", "smoke", "--profile", "full"], "--profile given more than once"),  # full last: the book
        (["--prof", "smoke"], "unrecognized arguments: --prof"),  # no abbreviations
    ],
)
def test_repeated_or_abbreviated_options_refused(args, fragment, tmp_path, capsys):
    root = _make_root(tmp_path / "repo")  # a throw-away root: if the refusal regressed, nothing real would run
    assert cli_main("run", ["--root", str(root), *args]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert not (root / "book").exists() and not (root / "_build").exists()


def _proc_table():
    out = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            text = (d / "stat").read_text()
            state, ppid = text.rsplit(")", 1)[1].split()[:2]
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        out[int(d.name)] = (int(ppid), state, cmd)
    return out


def _descendants(pid, table):
    mine, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, (pp, _, _) in table.items() if pp in frontier and p not in mine}
        mine |= frontier
    return mine


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_killed_run_leaves_no_worker_that_publishes(tmp_path):
    """kill -9 of `python -m dputils run`: its pool worker and kernel end within seconds and publish nothing;
    the next run removes the killed run's staging folder (its owner is gone), not a live run's."""
    import signal
    import time

    from dputils.book import run

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    for prof in ("full", "paper"):
        (root / "params" / f"{prof}.yml").write_text("")
    (root / "params" / "smoke.yml").write_text("slow:\n  wait: 8.0\n")
    params = nbformat.v4.new_code_cell("wait: float = 0.0  # seconds before saving")
    params.metadata["tags"] = ["parameters"]
    _write_md(
        root / "notebooks" / "slow.md",
        [
            params,
            nbformat.v4.new_code_cell("import time\ntime.sleep(wait)"),
            nbformat.v4.new_code_cell("from dputils.book import results\nresults.save('slow', value=1)"),
        ],
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DPBOOK_RESULTS_DIR", "MPLBACKEND")}
    main = subprocess.Popen(
        [sys.executable, "-m", "dputils", "run", "--root", str(root), "--profile", "smoke"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    family: set[int] = set()
    try:
        t0 = time.time()
        while time.time() - t0 < 90:  # until the notebook's kernel runs under the pool worker
            table = _proc_table()
            family = _descendants(main.pid, table)
            if any("ipykernel" in table[p][2] for p in family if p in table):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the notebook's kernel never started")
        time.sleep(1.0)
        os.kill(main.pid, signal.SIGKILL)
        main.wait()
        t_kill = time.time()
        while time.time() - t_kill < 10:
            table = _proc_table()
            alive = [p for p in family if p in table and table[p][1] != "Z"]
            if not alive:
                break
            time.sleep(0.2)
        assert not alive, f"still running after the run was killed: {[table[p][2][:80] for p in alive]}"
        time.sleep(max(0.0, t_kill + 12 - time.time()))  # past the time the notebook would have finished
        assert not (root / "_build" / "smoke" / "results" / "slow.json").exists()
        assert not (root / "_build" / "smoke" / "methods" / "slow.ipynb").exists()
    finally:
        for p in family | {main.pid}:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    staging = root / "_build" / "staging"
    killed = [d for d in staging.iterdir() if d.name.endswith(f"-{main.pid}")]
    assert len(killed) == 1
    live = staging / f"20990101-000000-{os.getpid()}"
    live.mkdir()
    assert run.clean_stale_staging(staging) == killed
    assert live.is_dir() and not killed[0].exists()


def test_book_log_keeps_warnings_and_drops_the_banner_and_colours():
    from dputils.book.run import book_log_line

    banner = [
        "Running Jupyter-Book v1.0.4.post1",
        "Source Folder: /work/main",
        "Config Path: /work/main/_config.yml",
        "Output Path: /work/main/_build/html",
        "\x1b[92m" + "=" * 79 + "\x1b[0m",
        "",
        "Finished generating HTML for book.",
        "Your book's HTML pages are here:",
        "    _build/html/",
        "You can look at your book by opening this file in a browser:",
        "    _build/html/index.html",
        "Or paste this line directly into your browser bar:",
        "    file:///work/main/_build/html/index.html   ",
    ]
    assert [book_log_line(b + "\n") for b in banner] == [None] * len(banner)
    warn = "\x1b[91m/work/main/book/methods/x.ipynb:12: WARNING: undefined label: 'fig-x'\x1b[39;49;00m\n"
    assert book_log_line(warn) == "/work/main/book/methods/x.ipynb:12: WARNING: undefined label: 'fig-x'"
    assert book_log_line("Traceback (most recent call last):\n") == "Traceback (most recent call last):"


def test_glue_all_glues_each_value_under_its_prefixed_name(monkeypatch):
    from dputils.book import results as res

    seen = []
    monkeypatch.setattr(res, "glue", lambda name, value, display=False: seen.append((name, value, display)))
    res.glue_all({"a": 1, "b": 2.5}, prefix="t_", c="x")
    assert seen == [("t_a", 1, False), ("t_b", 2.5, False), ("t_c", "x", False)]
    seen.clear()
    res.glue_all(eps=0.5)
    assert seen == [("eps", 0.5, False)]
