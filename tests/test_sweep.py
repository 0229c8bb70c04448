"""Sweeps and chunked Monte Carlo on dask.distributed (issue 16): a LocalCluster of 2 worker processes on
loopback runs a small sweep of tests/data/sweep_tiny.md and chunked Monte Carlo; both must equal the serial
run; a worker killed in the middle of a sweep loses no point; bad grid files are refused with one line
before anything runs; --resume skips the points already done."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from dputils.book import sweep  # noqa: E402
from dputils.cli import main  # noqa: E402
from dputils.errors import DPValueError  # noqa: E402
from dputils.parallel import chunk_sizes, map_chunks  # noqa: E402

pytestmark = pytest.mark.timeout(600)

NB = Path(__file__).parent / "data" / "sweep_tiny.md"


@pytest.fixture(scope="module")
def client():
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    cluster = sweep.local_cluster(2)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def uniform_sum(n, ss):
    return float(np.random.default_rng(ss).random(n).sum())


# --------------------------------------------------------------------------- chunked Monte Carlo


def test_chunks_and_seeds_follow_seed_sequence_spawn():
    assert chunk_sizes(10, 4) == [4, 4, 2] and chunk_sizes(8, 4) == [4, 4] and chunk_sizes(3, 10) == [3]
    # the serial answer, computed here without map_chunks: chunk j draws its size from spawn(k)[j]
    kids = np.random.SeedSequence(7).spawn(3)
    expected = [float(np.random.default_rng(s).random(n).sum()) for n, s in zip([4, 4, 2], kids)]
    assert map_chunks(uniform_sum, 10, 4, 7) == expected
    assert map_chunks(uniform_sum, 10, 4, 8) != expected  # the seed matters
    ss = np.random.SeedSequence(7)
    assert map_chunks(uniform_sum, 10, 4, ss) == expected == map_chunks(uniform_sum, 10, 4, ss)  # not consumed


@pytest.mark.parametrize(
    "bad, fragment",
    [
        (dict(n_samples=0), "n_samples"),
        (dict(chunk=0), "chunk"),
        (dict(seed=-1), "seed"),
        (dict(seed=1.5), "seed"),
        (dict(seed=None), "seed"),
        (dict(client=object(), executor=object()), "not both"),
    ],
)
def test_map_chunks_refuses_bad_input(bad, fragment):
    kw = dict(n_samples=10, chunk=3, seed=0) | bad
    with pytest.raises(DPValueError, match=fragment):
        map_chunks(uniform_sum, **kw)


def test_map_chunks_same_answer_for_one_and_two_workers(client):
    serial = map_chunks(uniform_sum, 1000, 130, 3)
    assert len(serial) == 8
    with ProcessPoolExecutor(max_workers=1) as ex:
        assert map_chunks(uniform_sum, 1000, 130, 3, executor=ex) == serial
    with ThreadPoolExecutor(max_workers=2) as ex:
        assert map_chunks(uniform_sum, 1000, 130, 3, executor=ex) == serial
    assert map_chunks(uniform_sum, 1000, 130, 3, client=client) == serial
    one = list(client.scheduler_info()["workers"])[:1]
    futs = client.map(
        uniform_sum, chunk_sizes(1000, 130), np.random.SeedSequence(3).spawn(8), pure=False, workers=one
    )  # one worker only
    assert client.gather(futs) == serial


def test_model1_coverage_serial_equals_dask_and_executor(client):
    from dputils.audit import simulate

    kw = dict(methods=("gauss-bonferroni", "steinke"), n_bootstrap=30, seed=11)
    args = (100, 400, 0.1, 1.5, 3, {"exact": 1.0})
    serial = simulate.coverage(*args, **kw)
    assert simulate.coverage(*args, **kw, client=client) == serial
    with ThreadPoolExecutor(max_workers=1) as ex:
        assert simulate.coverage(*args, **kw, executor=ex) == serial
    two = simulate.coverage(*args, **kw, chunk=2)  # another chunking: again the same on the cluster
    assert simulate.coverage(*args, **kw, chunk=2, client=client) == two
    # one rep per chunk is rep i seeded by SeedSequence(seed).spawn(reps)[i]: the first rep alone, by hand
    from dputils.audit.model1 import simulate_scores

    rng = np.random.default_rng(np.random.SeedSequence(11).spawn(3)[0])
    i, o = simulate_scores(100, 400, 0.1, 1.5, 1.0, rng=rng)
    first = simulate.audit_methods(i, o, ("steinke",), 1e-5, 0.05, 30, int(rng.integers(1 << 31)))["steinke"]
    one = simulate.replicate(100, 400, 0.1, 1.5, 1, ("steinke",), n_bootstrap=30, seed=11)
    assert one["steinke"].tolist() == [first]


# --------------------------------------------------------------------------- sweeps


def _grid(tmp_path: Path, text: str, name: str = "g.yml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


GRID = "grid:\n  x: [1.0, 2.5]\n  n: [2, 3]\n  fail_product: [7.5]\n"  # the point x=2.5, n=3 fails on purpose


@pytest.fixture(scope="module")
def dask_sweep(client, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    g = _grid(tmp, GRID)
    plan = sweep.plan_sweep(NB, g, output=tmp / "dask")
    out = sweep.run_sweep(plan, client, timeout=300)
    return tmp, g, plan, out


def _without_seconds(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_sweep_on_two_workers_equals_serial_run(dask_sweep, capsys):
    tmp, g, plan, out = dask_sweep
    assert [p.swept for p in plan.points] == [
        {"x": 1.0, "n": 2, "fail_product": 7.5},
        {"x": 1.0, "n": 3, "fail_product": 7.5},
        {"x": 2.5, "n": 2, "fail_product": 7.5},
        {"x": 2.5, "n": 3, "fail_product": 7.5},
    ]
    rows = sweep.read_table(tmp / "dask" / "g" / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "failed"]
    for r in rows[:3]:
        x, n = float(r["x"]), int(r["n"])
        assert float(r["product"]) == x * n and r["label"] == "a" * n and float(r["stats.half"]) == x * n / 2
        assert json.loads(r["seq"]) == [x, n] and float(r["u"]) == np.random.default_rng(0).random()
        pdir = tmp / "dask" / "g" / r["point"]
        assert (pdir / "sweep_tiny.ipynb").is_file() and (pdir / "results" / "sweep_tiny.json").is_file()
    assert "failing on purpose at x * n = 7.5" in rows[3]["error"] and rows[3]["product"] == ""
    # the failing point is reported with the notebook, its line, the code cell and the line in the cell
    (fail,) = [r for r in out["reports"] if not r["ok"]]
    md_line = next(i for i, ln in enumerate(NB.read_text().splitlines(), 1) if "raise ValueError" in ln)
    line = sweep.describe(fail, NB)
    assert f"sweep_tiny.md:{md_line}" in line and "code cell 3" in line and "line 2" in line
    assert "ValueError: failing on purpose" in line
    # the parquet table holds the same rows
    import pyarrow.parquet as pq

    table = pq.read_table(tmp / "dask" / "g" / "results.parquet").to_pylist()
    assert [t["point"] for t in table] == [r["point"] for r in rows] and table[1]["product"] == 3.0
    # the same grid run serially (no Dask) gives the same table
    serial = sweep.run_sweep(sweep.plan_sweep(NB, g, output=tmp / "serial"), serial=True, timeout=300)
    assert len(serial["failed"]) == 1
    assert _without_seconds(sweep.read_table(tmp / "serial" / "g" / "results.csv")) == _without_seconds(rows)


def test_resume_skips_done_points_and_reruns_failed_ones(client, dask_sweep, capsys, monkeypatch):
    tmp, g, plan, _ = dask_sweep
    before = {p.id: json.loads((plan.out_dir / p.id / "point.json").read_text())["finished"] for p in plan.points}
    addr = client.scheduler.address
    rc = main(
        [
            "sweep",
            str(NB),
            "--grid",
            str(g),
            "--output",
            str(tmp / "dask"),
            "--scheduler",
            addr,
            "--resume",
            "--timeout",
            "300",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1  # the failing point ran again and failed again
    assert "3 already done (--resume)" in err and "(1 run, 3 skipped)" in err
    after = {p.id: json.loads((plan.out_dir / p.id / "point.json").read_text())["finished"] for p in plan.points}
    assert [before[k] == after[k] for k in before] == [True, True, True, False]
    # a new code version (dputils or the notebook changed) makes every point due again
    assert all(sweep.point_done(plan, p) for p in plan.points[:3])
    monkeypatch.setattr(sweep, "code_version", lambda source: "another-version")
    plan2 = sweep.plan_sweep(NB, g, output=tmp / "dask")
    assert not any(sweep.point_done(plan2, p) for p in plan2.points)


def test_point_ids_are_stable_and_distinct():
    a = sweep.point_id({"x": 1.0}, {"x": 1.0, "n": 2})
    assert a == sweep.point_id({"x": 1.0}, {"n": 2, "x": 1.0}) and a.startswith("x-1.0-")
    assert a != sweep.point_id({"x": 1.0}, {"x": 1.0, "n": 3})  # a profile value changes the id too
    assert sweep.point_id({"label": "a b/c"}, {"label": "a b/c"}).startswith("label-a_b_c-")


BAD_GRIDS = [
    ("grid: {}\n", "'grid:' is empty"),
    ("points: []\n", "'points:' is empty"),
    ("grid:\n  x: []\n", "grid.x is an empty list"),
    ("grid:\n  x: [1.0]\n  zz: [1]\n", "unknown parameter 'zz'"),
    ("grid:\n  n: [1.5]\n", "n=1.5 is float, but the notebook declares it int"),
    ("grid:\n  x: ['abc']\n", "x='abc' is str, but the notebook declares it float"),
    ("grid:\n  label: [3]\n", "label=3 is int, but the notebook declares it str"),
    ("grid:\n  x: 3.0\n", "grid.x must be a list"),
    ("points:\n  - {x: 1.0}\n  - {n: true}\n", "n=True is bool"),
    ("grid: [x\n", "not valid YAML"),
    ("- 1\n- 2\n", "expected a mapping"),
    ("grid: {x: [1.0]}\npoints: [{x: 2.0}]\n", "exactly one of"),
    ("sigma: [1.0]\n", "unknown key(s) sigma"),
    ("points:\n  - {x: 1.0}\n  - {x: 1}\n", "are the same point"),
    # issue 24: limits checked before anything is expanded (a 10^7-value alias bomb; a recursive alias)
    (
        "grid:\n  x: &a [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]\n"
        + "".join(f"  y{k}: &a{k} [{', '.join([f'*a{k - 1}' if k > 1 else '*a'] * 10)}]\n" for k in range(1, 7))
        + "  label: [*a6]\n",
        "aliases expand to",
    ),
    ("grid:\n  x: &a [1.0, *a]\n", "a YAML alias refers to itself"),
    (
        "grid:\n  x: [" + ", ".join(["1.0"] * 400) + "]\n  n: [" + ", ".join(map(str, range(300))) + "]\n",
        "120,000 points, over the limit of 100,000 points per sweep",
    ),
]


@pytest.mark.parametrize("text, fragment", BAD_GRIDS)
def test_bad_grid_refused_with_one_line_before_any_run(tmp_path, capsys, text, fragment):
    g = _grid(tmp_path, text)
    rc = main(["sweep", str(NB), "--grid", str(g), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err, err
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--grid", "{g}", "--workers", "0"], "workers must be >= 1"),
        (["--grid", "{g}", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "--workers sizes the local cluster"),
        (["--grid", "{tmp}/missing.yml"], "is not a file"),
        (["--grid", "{g}", "--name", "a/b"], "name must be"),
        (["--grid", "{g}", "--profile", "nope"], "invalid choice"),
    ],
)
def test_bad_sweep_options_refused(tmp_path, capsys, argv, fragment):
    g = _grid(tmp_path, "grid:\n  x: [1.0]\n")
    argv = [a.format(g=g, tmp=tmp_path) for a in argv]
    rc = main(["sweep", str(NB), *argv, "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and fragment in err, err


def test_unknown_notebook_refused(tmp_path, capsys):
    g = _grid(tmp_path, "grid:\n  x: [1.0]\n")
    assert main(["sweep", "no_such_notebook", "--grid", str(g)]) == 2
    assert "notebook: no_such_notebook" in capsys.readouterr().err


def test_kernel_start_race_is_retried_once(tmp_path, monkeypatch):
    """A ZMQ 'Address already in use' at kernel start is retried once (run.execute_one), and only once."""
    import nbformat
    import papermill as pm
    import zmq

    from dputils.book.run import execute_one, kernel_start_race

    assert kernel_start_race(zmq.ZMQError(errno.EADDRINUSE))
    assert kernel_start_race(RuntimeError("Kernel died before replying to kernel_info"))
    assert not kernel_start_race(ValueError("x must be positive"))
    calls = []

    def flaky(nb, output, **kw):
        calls.append(output)
        if len(calls) == 1:
            raise zmq.ZMQError(errno.EADDRINUSE)
        nbformat.write(nb, output)

    monkeypatch.setattr(pm, "execute_notebook", flaky)
    rep = execute_one(NB, tmp_path / "a" / "sweep_tiny.ipynb", {"x": 2.0}, timeout=60)
    assert rep["ok"] and len(calls) == 2

    def always(nb, output, **kw):
        calls.append(output)
        raise zmq.ZMQError(errno.EADDRINUSE)

    calls.clear()
    monkeypatch.setattr(pm, "execute_notebook", always)
    rep = execute_one(NB, tmp_path / "b" / "sweep_tiny.ipynb", {"x": 2.0}, timeout=60)
    assert not rep["ok"] and len(calls) == 2 and "Address already in use" in rep["error"]


# --------------------------------------------------------------------------- a worker dies (last: it restarts one)


def test_sweep_survives_a_killed_worker(client, tmp_path):
    g = _grid(tmp_path, "grid:\n  x: [1.0, 2.0, 3.0]\n  sleep_s: [6.0]\n")
    plan = sweep.plan_sweep(NB, g, output=tmp_path)
    box = {}
    th = threading.Thread(target=lambda: box.update(out=sweep.run_sweep(plan, client, timeout=300)))
    th.start()
    staging = plan.out_dir / ".staging"
    victim = None
    t0 = time.time()
    while victim is None and time.time() - t0 < 120:
        time.sleep(0.5)
        busy = [w for w, tasks in client.processing().items() if tasks]
        # a kernel has started once the staged executed copy exists: kill that point's worker mid-run
        running = [d for d in (staging.iterdir() if staging.is_dir() else []) if list(d.rglob("*.ipynb"))]
        if busy and running:
            pids = client.run(os.getpid)
            owner = {pids[w]: w for w in busy}
            hit = [d for d in running if int(d.name.split(".")[-2]) in owner]
            if hit:
                victim = int(hit[0].name.split(".")[-2])
                os.kill(victim, signal.SIGKILL)
    assert victim is not None, "no point was seen running"
    th.join(timeout=400)
    assert not th.is_alive()
    out = box["out"]
    rows = sweep.read_table(plan.out_dir / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"] and not out["failed"]
    assert [float(r["product"]) for r in rows] == [2.0, 4.0, 6.0]  # x * n with the default n = 2
    # the killed attempt left its staging folder behind; the point itself was rerun on a live worker
    assert any(d.name.split(".")[-2] == str(victim) for d in staging.iterdir())
    assert victim not in client.run(os.getpid).values()


def test_read_table_takes_long_cells(tmp_path):
    # the atlas records its 81 rows as one JSON cell of about 200 kB: longer than the csv module's default limit
    long = "x" * 300_000
    (tmp_path / "results.csv").write_text(f"point,rows\np1,{long}\n")
    assert sweep.read_table(tmp_path / "results.csv") == [{"point": "p1", "rows": long}]
    import csv

    assert csv.field_size_limit() == 131072  # restored


def test_point_results_keep_saved_infinities(tmp_path, monkeypatch):
    # strict JSON writes inf as null; the table reads the results file's record of it back, so the csv cell says
    # inf (a vacuous bound), not the empty cell of a value that was never recorded
    from dputils.book import results

    monkeypatch.setenv("DPBOOK_RESULTS_DIR", str(tmp_path / "p1" / "results"))
    results.save("nb", upper=float("inf"), none=None, row=[1.0, -float("inf")], t={"x": float("nan")})
    flat = sweep.point_results(tmp_path / "p1")
    assert flat["upper"] == float("inf") and flat["none"] is None and np.isnan(flat["t.x"])
    assert flat["row"] == "[1.0, -Infinity]" and json.loads(flat["row"]) == [1.0, -float("inf")]
    assert [sweep._cell(flat[k]) for k in ("upper", "none")] == ["inf", ""]


# --------------------------------------------------------------------------- issue 24: hostile input, work lost


def test_a_port_that_accepts_and_never_answers_is_given_up(tmp_path, capsys, monkeypatch):
    """The whole connection is bounded, not only the TCP connect: a local server that accepts and never answers."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    held = []
    threading.Thread(target=lambda: held.append(srv.accept()), daemon=True).start()
    monkeypatch.setattr(sweep, "SCHEDULER_TIMEOUT_S", 2.0)
    g = _grid(tmp_path, "grid:\n  x: [1.0]\n")
    port = srv.getsockname()[1]
    t0 = time.perf_counter()
    try:
        rc = main(
            [
                "sweep",
                str(NB),
                "--grid",
                str(g),
                "--output",
                str(tmp_path / "out"),
                "--scheduler",
                f"tcp://127.0.0.1:{port}",
            ]
        )
    finally:
        srv.close()
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert f"--scheduler: no answer from tcp://127.0.0.1:{port} within 2 s" in err
    assert time.perf_counter() - t0 < 15 and held  # it did connect, and gave up on the handshake


def test_tls_scheduler_without_settings_is_one_line(tmp_path, capsys):
    g = _grid(tmp_path, "grid:\n  x: [1.0]\n")
    rc = main(
        ["sweep", str(NB), "--grid", str(g), "--output", str(tmp_path / "out"), "--scheduler", "tls://127.0.0.1:1"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "--scheduler: cannot reach tls://127.0.0.1:1" in err and "distributed.comm.tls" in err


def test_workers_are_capped_by_cores_and_points(tmp_path, monkeypatch, capsys):
    g = _grid(tmp_path, "grid:\n  x: [1.0, 2.0, 3.0]\n")
    plan = sweep.plan_sweep(NB, g, output=tmp_path / "out")
    asked = []

    class Stop(Exception):
        pass

    def fake_cluster(n):
        asked.append(n)
        raise Stop

    monkeypatch.setattr(sweep, "local_cluster", fake_cluster)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(Stop):
        sweep.run_sweep(plan, workers=1000)
    assert asked == [2]  # 2 cores, 3 points: not 1000 processes, nor one per point
    assert "--workers 1000 capped to 2 (2 core(s), 3 point(s) to run)" in capsys.readouterr().err
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    with pytest.raises(Stop):
        sweep.run_sweep(plan, workers=1000)
    assert asked[-1] == 3


def test_a_failed_rerun_keeps_the_last_good_results(tmp_path):
    """A rerun of a point (a code change that fails) must not delete its last good notebook and results; a
    point whose results are gone or corrupt is not 'ok', names the file, and --resume reruns it."""
    nb = tmp_path / "tiny.md"
    nb.write_text(NB.read_text())
    g = _grid(tmp_path, "grid:\n  x: [1.5]\n")
    out = sweep.run_sweep(sweep.plan_sweep(nb, g, output=tmp_path / "out"), serial=True, timeout=120)
    assert not out["failed"]
    plan = sweep.plan_sweep(nb, g, output=tmp_path / "out")
    (pt,) = plan.points
    pdir = plan.out_dir / pt.id
    good_res = (pdir / "results" / "sweep_tiny.json").read_bytes()
    good_nb = (pdir / "tiny.ipynb").read_bytes()
    assert json.loads((pdir / "point.json").read_text())["results"] == ["sweep_tiny.json"]

    # the code changes and the point now fails: the table says failed, the good files stay
    nb.write_text(NB.read_text().replace("product = x * n", "product = x * n\nraise RuntimeError('broken')"))
    plan = sweep.plan_sweep(nb, g, output=tmp_path / "out")
    out = sweep.run_sweep(plan, serial=True, timeout=120)
    assert len(out["failed"]) == 1 and "broken" in out["failed"][0]["error"]
    assert (pdir / "results" / "sweep_tiny.json").read_bytes() == good_res and (
        pdir / "tiny.ipynb"
    ).read_bytes() == good_nb
    meta = json.loads((pdir / "point.json").read_text())
    assert meta["ok"] is False and meta["last_ok"]["results"] == ["sweep_tiny.json"]

    # fixed again: --resume reruns it (failed), and it passes
    nb.write_text(NB.read_text())
    plan = sweep.plan_sweep(nb, g, output=tmp_path / "out")
    out = sweep.run_sweep(plan, serial=True, resume=True, timeout=120)
    assert out["skipped"] == 0 and not out["failed"] and sweep.point_done(plan, pt)

    # a corrupt result file: named in the table, not done, rerun by --resume
    (pdir / "results" / "sweep_tiny.json").write_text("{not json")
    assert not sweep.point_done(plan, pt)
    (row,) = sweep.collect(plan)
    assert row["status"] == "failed" and "sweep_tiny.json: not valid JSON" in row["error"] and str(pdir) in row["error"]
    out = sweep.run_sweep(plan, serial=True, resume=True, timeout=120)
    assert out["skipped"] == 0 and not out["failed"]
    assert json.loads((pdir / "results" / "sweep_tiny.json").read_text())["product"] == 3.0

    # the results folder gone: not "ok" with empty columns, and not skipped by --resume
    import shutil

    shutil.rmtree(pdir / "results")
    (row,) = sweep.collect(plan)
    assert row["status"] == "failed" and "results is missing" in row["error"] and "product" not in row
    assert not sweep.point_done(plan, pt)


def test_stale_staging_of_killed_attempts_is_removed(tmp_path):
    import subprocess

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    st = tmp_path / ".staging"
    host = sweep._host()
    gone = st / f"x-1.0-abc.{host}.{dead.pid}.123"
    alive = st / f"x-1.0-abc.{host}.{os.getpid()}.456"
    other = st / f"x-1.0-abc.otherhost.{dead.pid}.789"
    for d in (gone, alive, other):
        (d / "tiny").mkdir(parents=True)
    assert sweep.clean_stale_staging(tmp_path) == [gone]
    assert alive.is_dir() and other.is_dir() and not gone.exists()
