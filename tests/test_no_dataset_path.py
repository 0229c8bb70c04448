"""The training chapters at the book's own ("full") profile on a machine without Debian's Fashion-MNIST.

CI installs the dataset for the book, so without this test it would never see the path a pip-only user takes:
``$DPBOOK_FASHION_MNIST`` points at an empty folder, the chapters fall back to scikit-learn's handwritten digits
(scikit-learn comes with the ``test`` extra), fit their sizes to those data, pass every reproduction target and
record which data they used. Run through the same runner as the book and the smoke tests.

``shuffling_batch_clipping`` runs at the full profile. ``gauss_audit`` runs its white-box training and audit (the
``wb_*`` parameters, the only part of the chapter that reads the data) at the full profile and the rest of the chapter
(simulated scores, which do not depend on the data) at the smoke profile: the full profile of the whole chapter costs
about 7 minutes on 2 cores, over CI's budget, for simulations the book build already runs at full size.
"""

import json
from pathlib import Path

import pytest

from dputils.book.run import execute_one, load_profile

ROOT = Path(__file__).resolve().parents[1]
FULL = load_profile("full", ROOT)
SMOKE = load_profile("smoke", ROOT)


def _parameters(name: str) -> dict:
    if name == "gauss_audit":  # the data-dependent part (white-box training) at the book's size, see above
        return {**FULL[name], **SMOKE[name], **{k: v for k, v in FULL[name].items() if k.startswith("wb_")}}
    return FULL.get(name, {})


TRAINING_CHAPTERS = ("gauss_audit", "shuffling_batch_clipping")


@pytest.mark.notebook
@pytest.mark.timeout(2400)
@pytest.mark.parametrize("name", TRAINING_CHAPTERS)
def test_training_chapter_without_fashion_mnist(name, tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    empty = tmp_path / "no-fashion-mnist"
    empty.mkdir()
    monkeypatch.setenv("DPBOOK_FASHION_MNIST", str(empty))
    report = execute_one(
        ROOT / "notebooks" / f"{name}.md",
        tmp_path / f"{name}.ipynb",
        _parameters(name),
        timeout=2400,
        results_dir=tmp_path / "results",
    )
    assert report["ok"], f"{name} failed at {report.get('md_line')}: {report.get('error')}"
    res = json.loads((tmp_path / "results" / f"{name}.json").read_text())
    targets = res["targets"]
    assert targets and all(t["status"] != "fail" for t in targets)
    if name == "gauss_audit":
        wb = res["whitebox"]
        assert wb["data"].startswith("sklearn-digits:") and wb["data_kind"] == "sklearn-digits"
        assert "Fashion-MNIST not found" in wb["data_warning"] and str(empty) in wb["data_warning"]
        # book sizes fitted to the 1797 digits: 12 steps per epoch of 149, q = 1/12 kept, >= 10 parameters
        # per canary (the hidden layer widened from 32)
        assert wb["sizes"] == {"n_train": 1788, "batch_size": 149, "hidden": 267, "dim": 64, "n_classes": 10, "m": 2000}
        assert wb["n_params"] == 20035 and abs(wb["q"] - 1 / 12) < 1e-12 and len(wb["size_changes"]) == 2
        by_id = {t["id"]: t for t in targets}
        assert all("sklearn-digits" in by_id[i]["what"] for i in ("T8-IN", "T8-OUT"))
        assert "digits" in by_id["T3f"]["reason"] and "sklearn-digits" in by_id["T8"]["reason"]
    else:
        tr = res["training"]
        assert tr["data"].startswith("sklearn-digits:") and tr["data_kind"] == "sklearn-digits"
        assert (tr["n_train"], tr["n_test"]) == (1200, 597)  # 2500 / 1000 scaled to the 1797 digits
        assert "digits" in tr["data_label"] and "Fashion-MNIST files not found" in tr["data_warning"]
        by_id = {t["id"]: t for t in targets}
        assert "digits" in by_id["T9 parity"]["what"] and "digits" in by_id["T9 paper"]["reason"]
