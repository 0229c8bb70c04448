"""Every notebook runs in the smoke profile through the same runner the book uses."""

import json
from pathlib import Path

import pytest

from dputils.book.run import load_profile, notebook_paths, output_dirs, run_staged

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = notebook_paths(ROOT)
SMOKE = load_profile("smoke", ROOT)
METHODS, RESULTS = output_dirs("smoke", ROOT)  # what `run --profile smoke` writes; CI builds the smoke book from it


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_smoke(path, tmp_path):
    report = run_staged(path, METHODS, RESULTS, SMOKE.get(path.stem, {}), 600, tmp_path / "staging", ROOT, "smoke")
    assert report["ok"], f"{path.stem} failed at cell {report.get('cell')}: {report.get('error')}"
    out = RESULTS / f"{path.stem}.json"
    assert out.name in report["results_files"], f"{path.stem} did not save results/{path.stem}.json"
    data = json.loads(out.read_text())
    assert data["_meta"]["name"] == path.stem
    assert len(data) > 1
    if path.stem == "foundations":
        for row in data["mnist_table"]:
            assert row["pld_lower"] <= row["pld"] <= row["rdp"] <= row["rdp_classic"]
        assert data["closed_form_vs_mpmath_max_rel"] < 1e-9
