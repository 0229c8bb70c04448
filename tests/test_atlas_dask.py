"""dputils.book.atlas on dask.distributed (issue 16): a LocalCluster of 2 worker processes on loopback computes the
table, through atlas_table(client=...) and through `python -m dputils.book.atlas --scheduler` / `--workers 2`, and
every row equals the serial one (all columns but the wall-clock times), in the order of the points."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from dputils.book import atlas, sweep  # noqa: E402

pytestmark = pytest.mark.timeout(600)

CHEAP = ("pld", "rdp", "gdp")
ROOT = Path(__file__).resolve().parents[1]
# the CLI computes every accountant; the sigma = 1 slice of the tiny grid (4 points) takes about 10 s serially
SLICE = ["--grid", "tiny", "--sigmas", "1.0"]


@pytest.fixture(scope="module")
def client():
    cluster = sweep.local_cluster(2)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def serial_slice():
    return atlas.atlas_table(atlas.grid_points("tiny", sigmas=[1.0]))


def _no_time(rows):
    return [{k: v for k, v in r.items() if not k.endswith("_seconds")} for r in rows]


def test_atlas_table_on_two_dask_workers_equals_serial(client):
    assert len(client.scheduler_info()["workers"]) == 2
    pts = [
        {"sigma": 1.0, "q": 0.01, "T": 100, "delta": 1e-5},
        {"sigma": 2.0, "q": 0.1, "T": 1000, "delta": 1e-5},
        {"sigma": 4.0, "q": 0.001, "T": 10000, "delta": 1e-8},
        {"sigma": 1.0, "q": 0.01, "T": 1000, "delta": 1e-300},
    ]  # the PLD refuses: recorded on the worker too
    serial = atlas.atlas_table(pts, accountants=CHEAP)
    dask = atlas.atlas_table(pts, client=client, accountants=CHEAP)
    assert _no_time(dask) == _no_time(serial)
    assert [(r["sigma"], r["q"], r["T"], r["delta"]) for r in dask] == [tuple(p.values()) for p in pts]
    assert dask[3]["ref_note"].startswith("PLD refused") and dask[0]["pld_verdict"] == "inside"


def _cli(args, tmp_path, name):
    out = tmp_path / name
    proc = subprocess.run(
        [sys.executable, "-m", "dputils.book.atlas", *args, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("4 points in ") and str(out) in proc.stdout
    return atlas.read_csv(out)


def test_cli_with_scheduler_equals_serial_table(client, serial_slice, tmp_path):
    rows = _cli([*SLICE, "--scheduler", client.scheduler.address], tmp_path, "sched.csv")
    assert len(rows) == 4 and set(rows[0]) == set(atlas.COLUMNS)
    expected = atlas.read_csv(atlas.write_csv(serial_slice, tmp_path / "serial.csv"))
    assert _no_time(rows) == _no_time(expected)
    assert all(r[f"{a}_verdict"] != "not run" for r in rows for a in atlas.ACCOUNTANTS)


@pytest.mark.slow  # starts its own LocalCluster in a subprocess: about a minute on a loaded 2-core machine
def test_cli_with_its_own_two_worker_cluster_equals_serial_table(serial_slice, tmp_path):
    rows = _cli([*SLICE, "--workers", "2"], tmp_path, "workers.csv")
    expected = atlas.read_csv(atlas.write_csv(serial_slice, tmp_path / "serial.csv"))
    assert _no_time(rows) == _no_time(expected)
