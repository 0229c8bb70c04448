"""The package as a user installs it: the light install, a real (non-editable) wheel, the missing-extra lines.

* ``import dputils`` loads neither matplotlib nor torch (nor numba, tqdm, yaml): checked in a fresh interpreter.
* A missing optional package is one line naming the ``pip install`` that brings it, in the API and the CLI.
* The wheel ships the book's sources, ``py.typed`` and the console script; installed without a checkout, ``dputils
  run`` makes a book folder from them and runs a chapter from another folder.
* The light install, in a venv of its own (numpy, scipy, mpmath from PyPI, nothing else), answers ``dputils
  epsilon`` and audits scores, with torch, numba and matplotlib absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import dputils
from dputils import optional
from dputils.book import booksources

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "matplotlib", "numba", "tqdm", "yaml", "dp_accounting", "opacus", "dask", "papermill")


def _blocking(name: str) -> str:
    """Code that makes ``import name`` fail as if it were not installed (an import hook; a None entry in
    sys.modules would confuse scipy, which looks for torch there)."""
    return (
        "import sys, importlib.abc\n"
        "class _Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, fullname, path, target=None):\n"
        f"        if fullname == {name!r} or fullname.startswith({name!r} + '.'):\n"
        "            raise ModuleNotFoundError(f'No module named {fullname!r}', name=fullname)\n"
        "sys.meta_path.insert(0, _Block())\n"
    )


def _py(code: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def test_import_dputils_is_light():
    r = _py(f"import sys, dputils; print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    # every registered accountant and the score auditor load without torch or matplotlib (numba is used when
    # it is installed)
    r = _py(
        "import sys, dputils.accountants.registry as reg; reg.names(); "
        "from dputils.audit import CanaryScoreAuditor; "
        "print([m for m in sys.modules if m.split('.')[0] in ('torch', 'matplotlib')])"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_plotting_still_reachable_as_attribute():
    r = _py(
        "import dputils; p = dputils.plotting; print(p.__name__); from dputils import plotting; "
        "print('plotting' in dputils.__all__)"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["dputils.book.plotting", "False"]


def test_one_version_source():
    from dputils._version import __version__

    assert dputils.__version__ == __version__
    from importlib.metadata import version

    assert version("dputils") == __version__
    r = subprocess.run([sys.executable, "-m", "dputils", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"dputils {__version__}"


def test_require_names_the_extra():
    with pytest.raises(optional.MissingDependencyError) as info:
        optional.require("dputils_no_such_module_xyz", "a test")
    assert "a test needs" in str(info.value) and "pip install" in str(info.value)
    assert isinstance(info.value, ModuleNotFoundError)
    # a known optional package names its extra
    assert "dputils[train]" in optional.install_hint("torch.nn")
    assert "dputils[interop]" in optional.install_hint("dp_accounting")
    assert optional.message_for(ModuleNotFoundError("x", name="matplotlib.pyplot")).startswith("matplotlib")
    assert optional.message_for(ModuleNotFoundError("x", name="something_else")) is None
    # present modules import as usual
    assert optional.require("json").__name__ == "json"


@pytest.mark.parametrize(
    "blocked, command, extra",
    [("yaml", ["run", "--only", "foundations"], "book"), ("torch", None, "train"), ("matplotlib", None, "book")],
)
def test_missing_extra_is_one_line(blocked, command, extra):
    """A blocked import (as if not installed) gives one line and exit 2 on the CLI, and a MissingDependencyError
    naming the extra in the API."""
    if command is not None:
        code = _blocking(blocked) + f"from dputils.cli import main\nsys.exit(main({command!r}))"
        r = _py(code)
        assert r.returncode == 2, (r.stdout, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and f"dputils[{extra}]" in lines[0], r.stderr
    else:
        mod = {"torch": "dputils.training", "matplotlib": "dputils.book.plotting"}[blocked]
        r = _py(_blocking(blocked) + f"import {mod}")
        assert r.returncode != 0
        assert "MissingDependencyError" in r.stderr and f"dputils[{extra}]" in r.stderr.splitlines()[-1]


# ------------------------------------------------------------------------------------------ book folders
def _fake_packaged(tmp_path: Path, monkeypatch) -> Path:
    pkg = tmp_path / "pkg" / "_book"
    (pkg / "notebooks").mkdir(parents=True)
    (pkg / "params").mkdir()
    (pkg / "notebooks" / "a.md").write_text("source v1")
    (pkg / "params" / "full.yml").write_text("a: {}\n")
    monkeypatch.setattr(booksources, "packaged_sources", lambda: pkg)
    return pkg


def test_materialize_makes_refreshes_and_keeps(tmp_path, monkeypatch):
    pkg = _fake_packaged(tmp_path, monkeypatch)
    home = tmp_path / "home"
    assert booksources.materialize(home, quiet=True) == home.resolve()
    assert (home / "notebooks" / "a.md").read_text() == "source v1"
    assert json.loads((home / booksources.MARKER).read_text())["version"] == dputils.__version__
    # same version: a user's edit of the profile stays
    (home / "params" / "full.yml").write_text("a: {steps: 3}\n")
    (home / "results").mkdir()
    (home / "results" / "a.json").write_text("{}")
    booksources.materialize(home, quiet=True)
    assert (home / "params" / "full.yml").read_text() == "a: {steps: 3}\n"
    # another version wrote it: the sources are refreshed, results kept
    (home / booksources.MARKER).write_text(json.dumps({"version": "0.0.0"}))
    (pkg / "notebooks" / "a.md").write_text("source v2")
    booksources.materialize(home, quiet=True)
    assert (home / "notebooks" / "a.md").read_text() == "source v2"
    assert (home / "results" / "a.json").is_file()


def test_materialize_refuses_a_foreign_folder(tmp_path, monkeypatch):
    _fake_packaged(tmp_path, monkeypatch)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "thesis.tex").write_text("x")
    with pytest.raises(ValueError, match="neither empty nor a dpbook folder"):
        booksources.materialize(other, quiet=True)
    assert sorted(p.name for p in other.iterdir()) == ["thesis.tex"]


def test_repo_root_sees_a_book_folder(tmp_path, monkeypatch):
    from dputils.book.results import repo_root

    _fake_packaged(tmp_path, monkeypatch)
    home = booksources.materialize(tmp_path / "home", quiet=True)
    deep = home / "_build" / "staging" / "r1" / "a"
    deep.mkdir(parents=True)
    assert repo_root(deep) == home


# ------------------------------------------------------------------------------------------ the real wheel
@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = out.glob("dputils-*.whl")
    return whl


def test_wheel_ships_the_book_sources(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for nb in (ROOT / "notebooks").glob("*.md"):
        assert f"dputils/_book/notebooks/{nb.name}" in names
    for rel in (
        "params/full.yml",
        "params/smoke.yml",
        "_toc.yml",
        "_config.yml",
        "book/intro.md",
        "book/references.bib",
        "_static/dpbook.css",
        "benchmarks/results/pld.json",
        "data/atlas/atlas_small.csv",
    ):
        assert f"dputils/_book/{rel}" in names, rel
    assert "dputils/py.typed" in names
    assert not any(n.startswith("dputils/_book/book/methods/") for n in names)
    meta = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "dputils = dputils.cli:main" in zipfile.ZipFile(wheel).read(meta).decode()


@pytest.mark.notebook
def test_wheel_runs_a_chapter_from_another_folder(wheel, tmp_path):
    """The wheel unpacked on sys.path ahead of the checkout (the test venv's own dependencies serve it), run
    from a folder that is no checkout: ``dputils run`` makes ``$DPBOOK_HOME`` from the shipped sources and runs
    foundations there (smoke profile, to keep CI short; the book command is timed by hand, README)."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    work, home = tmp_path / "elsewhere", tmp_path / "home"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "DPBOOK_HOME": str(home), "TQDM_DISABLE": "1"}
    env.pop("DPBOOK_RESULTS_DIR", None)
    probe = subprocess.run(
        [sys.executable, "-c", "import dputils; print(dputils.__file__)"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip().startswith(str(site)), probe
    r = subprocess.run(
        [sys.executable, "-m", "dputils", "run", "--only", "foundations", "--profile", "smoke"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "made the book folder" in r.stderr
    assert (home / "_build" / "smoke" / "methods" / "foundations.ipynb").is_file()
    res = json.loads((home / "_build" / "smoke" / "results" / "foundations.json").read_text())
    assert res  # the chapter's recorded numbers
    assert list(work.iterdir()) == []  # nothing written into the folder it was started from


# ------------------------------------------------------------------------------------------ the light install
@pytest.mark.slow
def test_light_install_in_its_own_venv(tmp_path):
    """``pip install <checkout>`` with no extra, in a fresh venv: numpy, scipy and mpmath from PyPI and nothing
    else; ``dputils epsilon`` answers (against the closed form of the Gaussian), ``dputils audit`` too."""
    venv = tmp_path / "light"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    r = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    listed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names = {d["name"].lower() for d in json.loads(listed.stdout)}
    assert {"numpy", "scipy", "mpmath", "dputils"} <= names
    assert not names & {"torch", "numba", "matplotlib", "tqdm", "pyyaml", "dp-accounting", "opacus"}, names
    exe = venv / "bin" / "dputils"
    q = subprocess.run(
        [
            str(exe),
            "epsilon",
            "--accountant",
            "pld",
            "--mechanism",
            "gaussian",
            "--sigma",
            "2",
            "--steps",
            "4",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert q.returncode == 0, q.stderr
    out = json.loads(q.stdout)
    # 4 Gaussians of sigma 2 are one Gaussian of sigma 1: its exact epsilon from the closed form (Balle-Wang)
    from dputils.curves import gdp_epsilon

    exact = gdp_epsilon(1e-5, 1.0)  # solved to ~1e-12 relative
    assert out["lower"] <= exact * (1 + 1e-9) and exact * (1 - 1e-9) <= out["upper"]
    import numpy as np

    rng = np.random.default_rng(1)
    np.save(tmp_path / "in.npy", rng.normal(2.0, 1.0, 300))
    np.save(tmp_path / "out.npy", rng.normal(0.0, 1.0, 300))
    a = subprocess.run(
        [str(exe), "audit", "--in-scores", str(tmp_path / "in.npy"), "--out-scores", str(tmp_path / "out.npy")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["epsilon_lower"] > 0
    missing = subprocess.run([str(exe), "book"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert missing.returncode == 2 and "dputils[book]" in missing.stderr and len(missing.stderr.splitlines()) == 1
