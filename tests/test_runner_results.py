"""The runner's failure report and the atomic results writer."""

import json
import os

import nbformat
import pytest

from dputils import results
from dputils.run import execute_one, load_profile


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
    _write_md(src, [params, nbformat.v4.new_code_cell("y = x + 1"), nbformat.v4.new_code_cell("assert y == 3, 'drifted'")])
    rep = execute_one(src, tmp_path / "out" / "broken.ipynb", {"x": 1}, timeout=120)
    assert not rep["ok"]
    # execution count 4: papermill's injected-parameters cell runs after the parameters cell
    assert rep["cell"] == 4 and "drifted" in rep["error"]
    assert rep["source"].startswith("assert y == 3")
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
    p = results.save("demo", a=np.float64(1.5), b=np.arange(3), c=float("inf"), d={"e": np.int64(2)})
    assert p == tmp_path / "demo.json"
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    data = results.load("demo")
    assert data["a"] == 1.5 and data["b"] == [0, 1, 2] and data["c"] == float("inf") and data["d"] == {"e": 2}
    json.loads(p.read_text())  # strict JSON


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
