"""`--changed` hashes what the kernels run and read: the dputils the kernels import (not the runner's own when the
two differ), the files the package names in its code (the gauss chapter's GPU recording), and folder inputs by
content."""

import json
import os
import shutil
import sys
from pathlib import Path

import nbformat

from dputils.book import changed as chg
from dputils.book.run import cli_main

PKG = Path(chg.__file__).resolve().parents[1]


def _write_md(path, cells):
    import jupytext

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    jupytext.write(nb, path, fmt="md:myst")


def _same_size_edit(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (same length) and put the modification time back."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_a_folder_input_is_hashed_by_content(tmp_path):
    d = tmp_path / "cifar"
    d.mkdir()
    (d / "batch_1").write_bytes(b"\x01" * 1000)
    before = chg.path_fingerprint(d)
    _same_size_edit(d / "batch_1", b"\x01\x01", b"\x02\x02")
    assert chg.path_fingerprint(d) != before  # size and mtime alone miss this edit


def test_files_named_by_package_constants_are_inputs(tmp_path):
    """The gauss chapter's helper reads its GPU recording through a constant (RESULTS_DIR / "gpu_whitebox_h200.json"),
    the benchmarks' loaders through default arguments: these files are found in the package's code."""
    from dputils.book import benchmarks
    from dputils.book.chapters import gauss_audit

    rec = tmp_path / gauss_audit.GPU_WHITEBOX
    rec.parent.mkdir(parents=True)
    rec.write_text('{"T1": {"eps": 1.00}}')
    (tmp_path / benchmarks.RESULTS_DIR / "accountants.json").write_text("{}")
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "targets_ledger.yml").write_text("{}")  # read by the book build, not by a chapter
    found = chg.package_files(tmp_path)
    assert found == ["benchmarks/results/accountants.json", "benchmarks/results/gpu_whitebox_h200.json"]
    src = tmp_path / "c.md"
    src.write_text("# c\n")
    args = ({}, "full", tmp_path, tmp_path / "results", {}, {"python": "3"})
    before = chg.chapter_inputs(src, *args)
    _same_size_edit(rec, b"1.00", b"2.00")
    after = chg.chapter_inputs(src, *args)
    assert chg.differences(before, after) == ["data changed (package file: benchmarks/results/gpu_whitebox_h200.json)"]


def test_kernel_package_is_where_the_kernels_interpreter_finds_dputils(tmp_path):
    alt = tmp_path / "elsewhere" / "dputils"
    alt.mkdir(parents=True)
    (alt / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": str(alt.parent)}
    assert chg.kernel_package(env=env) == alt.resolve()
    assert chg.kernel_python() == [sys.executable]  # the python3 kernel of this environment


def test_changed_hashes_the_dputils_the_kernels_import(tmp_path, capfd, monkeypatch):
    """The runner imports this checkout's dputils; the kernels import a copy (first on their PYTHONPATH, as with an
    editable install of another checkout): an edit of the copy reruns the chapter, one of the runner's own does
    not matter to the kernels. The GPU recording the copy's gauss helper names is an input too."""
    copy = tmp_path / "installed" / "dputils"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("PYTHONPATH", str(copy.parent))
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    rec = root / "benchmarks" / "results" / "gpu_whitebox_h200.json"
    rec.parent.mkdir(parents=True)
    rec.write_text('{"T1": {"eps": 1.00}}')
    p = nbformat.v4.new_code_cell("k: int = 2  # a value")
    p.metadata["tags"] = ["parameters"]
    _write_md(
        root / "notebooks" / "one.md",
        [
            p,
            nbformat.v4.new_code_cell(
                "import dputils\nfrom dputils.book import results\nresults.save('one', k=k, where=dputils.__file__)"
            ),
        ],
    )

    def run():
        rc = cli_main("run", ["--root", str(root), "--changed", "--timeout", "120"])
        err = capfd.readouterr().err
        rep = json.loads((root / "_build" / "full" / "report.json").read_text())
        return rc, err, rep["chapters"][0]

    rc, err, ch = run()
    assert rc == 0, err
    assert json.loads((root / "results" / "one.json").read_text())["where"] == str(copy / "__init__.py")
    assert f"note: the kernels import dputils from {copy.resolve()}" in err
    rc, err, ch = run()
    assert ch["action"] == "reused", ch
    with open(copy / "errors.py", "a") as fh:
        fh.write("\n# an edit the kernels see\n")
    rc, err, ch = run()
    assert rc == 0 and ch["action"] == "run" and ch["reason"] == "dputils/errors.py changed", ch
    _same_size_edit(rec, b"1.00", b"2.00")
    rc, err, ch = run()
    assert ch["action"] == "run"
    assert ch["reason"] == "data changed (package file: benchmarks/results/gpu_whitebox_h200.json)", ch
