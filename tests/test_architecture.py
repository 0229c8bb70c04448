"""The package's architecture (issue 26): the library never imports the book tooling or the command line
(import-linter's contract in pyproject.toml, run by ``lint-imports``), every module is on one side of that line,
and the import graph has no cycles beyond the ones listed here (each one a known debt, to be removed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
grimp = pytest.importorskip("grimp")


def _contract() -> dict:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [c] = [c for c in conf["contracts"] if c["type"] == "forbidden"]
    return c


def _graph():
    sys.path.insert(0, str(ROOT))
    try:
        return grimp.build_graph("dputils", include_external_packages=False)
    finally:
        sys.path.remove(str(ROOT))


def _covered(module: str, patterns: list[str]) -> bool:
    """``module`` matches one of import-linter's module expressions (``x``, ``x.*``: a child, ``x.**``: any
    descendant), read as modules (the contract has ``as_packages = false``)."""
    for p in patterns:
        if p.endswith(".**") and module.startswith(p[:-2]):
            return True
        if p.endswith(".*") and module.startswith(p[:-1]) and "." not in module[len(p) - 1 :]:
            return True
        if module == p:
            return True
    return False


def _cycles(graph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
    return out


#: Cycles still in the package (issue 26 removes them): each is the exact set of modules of one cycle.
KNOWN_CYCLES = []


def test_lint_imports_keeps_every_contract():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    r = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_every_module_is_library_or_tooling():
    c = _contract()
    lib, tool = c["source_modules"], c["forbidden_modules"]
    g = _graph()
    loose = sorted(m for m in g.modules if m != "dputils" and not _covered(m, lib) and not _covered(m, tool))
    assert not loose, f"classify these modules in pyproject.toml's import-linter contract: {loose}"
    both = sorted(m for m in g.modules if _covered(m, lib) and _covered(m, tool))
    assert not both, both


def test_no_new_import_cycle():
    cycles = _cycles(_graph())
    new = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not new, f"new import cycles: {new}"
    gone = [sorted(k) for k in KNOWN_CYCLES if k not in cycles]
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"


def _ruff() -> str:
    exe = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(exe).exists():
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return exe


def test_ruff_lint_is_clean_on_the_package_tests_and_benchmarks():
    """``ruff check`` with the rules in pyproject.toml ([tool.ruff])."""
    r = subprocess.run(
        [_ruff(), "check", "--output-format", "concise", "dputils", "tests", "benchmarks", "setup.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ruff_format_leaves_the_package_tests_and_benchmarks_unchanged():
    """``ruff format --check`` with pyproject.toml's [tool.ruff.format]: the code is in the formatter's style."""
    r = subprocess.run(
        [_ruff(), "format", "--check", "dputils", "tests", "benchmarks", "setup.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ruff_lint_is_clean_on_the_notebooks_code(tmp_path):
    """The chapters' code cells (through jupytext), with pyflakes and pycodestyle's rules; a notebook may import
    in a later cell (E402) and end a plotting line with ``;`` to hide its value (E703)."""
    jupytext = pytest.importorskip("jupytext")
    for nb in sorted((ROOT / "notebooks").glob("*.md")):
        jupytext.write(jupytext.read(nb), tmp_path / f"{nb.stem}.py", fmt="py:percent")
    r = subprocess.run(
        [
            _ruff(),
            "check",
            "--isolated",
            "--line-length",
            "120",
            "--select",
            "E,F,W",
            "--ignore",
            "E501,E731,E741,E402,E703",
            "--output-format",
            "concise",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_the_cycle_finder_finds_a_planted_cycle():
    class G:
        modules = {"a", "b", "c", "d"}

        @staticmethod
        def find_modules_directly_imported_by(m):
            return {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}[m]

    assert _cycles(G()) == [{"a", "b", "c"}]
