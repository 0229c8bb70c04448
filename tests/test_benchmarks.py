"""dputils.book.benchmarks (loading, tables, checks of recorded benchmark files) and bench_accountants.py --quick.

The small input below is written by hand, and so is every expected table: none of them comes from the code
under test.
"""

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dputils.book import benchmarks as bm

ROOT = Path(__file__).resolve().parents[1]
RUN = "run-1"


def _method(name, family, bound, cert, counterpart=None):
    return {
        "name": name,
        "label": name.upper(),
        "family": family,
        "library": "lib",
        "version": "0",
        "answer": "...",
        "bound": bound,
        "certified_interval": cert,
        "counterpart": counterpart,
        "settings": {},
    }


def _ref(T, delta, lower=None, upper=None, status="ok", reason=None):
    return {
        "run_id": RUN,
        "T": T,
        "delta": delta,
        "status": status,
        "lower": lower,
        "upper": upper,
        "discretization": 1e-5 if status == "ok" else None,
        "seconds": 1.0,
        "reason": reason,
        "attempts": [],
    }


def _rec(method, T, delta, eps=None, seconds=None, lower=None, upper=None, status="ok", reason=None):
    return {
        "run_id": RUN,
        "method": method,
        "T": T,
        "delta": delta,
        "status": status,
        "reason": reason,
        "error_type": None,
        "seconds": seconds,
        "times": [] if seconds is None else [seconds],
        "repeats": 0 if seconds is None else 1,
        "epsilon": eps,
        "lower": lower,
        "upper": upper,
        "upper_vacuous": False,
        "kind": None,
        "ref_status": None,
        "err_vs_ref_lower": None,
        "err_vs_ref_upper": None,
        "load1": 1.0,
    }


def small():
    """Two T, two deltas, two of ours and two peers; at (100, 1e-10) the reference refused."""
    refusal = "NumericalError: below the FFT resolution"
    return {
        "schema": bm.ACCOUNTANTS_SCHEMA,
        "meta": {
            "run_id": RUN,
            "date": "2026-11-24T20:00:00+00:00",
            "machine": {"cpus": 2, "affinity": 2, "cpu_model": "Test CPU", "memory_gib": 23.0},
            "load_before": [4.0, 3.0, 2.0],
            "load_after": [5.0, 4.0, 3.0],
            "versions": {},
            "git": {"commit": "abc", "dirty": False},
        },
        "mechanism": {"name": "subsampled-gaussian", "sigma": 1.0, "q": 0.01},
        "grid": {"steps": [100, 1000], "deltas": [1e-5, 1e-10]},
        "settings": {"repeat": 1},
        "methods": [
            _method("pld", "dputils", True, True),
            _method("rdp", "dputils", True, False),
            _method("dpa", "peer", True, False, "pld"),
            _method("opr", "peer", True, False, "rdp"),
        ],
        "references": [
            _ref(100, 1e-5, 1.0, 1.1),
            _ref(1000, 1e-5, 2.0, 2.2),
            _ref(100, 1e-10, status="refused", reason=refusal),
            _ref(1000, 1e-10, 4.0, 4.4),
        ],
        "records": [
            _rec("pld", 100, 1e-5, 1.05, 0.5, 1.0, 1.05),
            _rec("pld", 1000, 1e-5, 2.1, 1.0, 2.0, 2.1),
            _rec("pld", 100, 1e-10, status="refused", reason=refusal),
            _rec("pld", 1000, 1e-10, 4.2, 2.0, 4.0, 4.2),
            _rec("rdp", 100, 1e-5, 1.5, 0.125, None, 1.5),
            _rec("rdp", 1000, 1e-5, 3.0, 0.125, None, 3.0),
            _rec("rdp", 100, 1e-10, 2.5, 0.25, None, 2.5),
            _rec("rdp", 1000, 1e-10, 5.0, 0.25, None, 5.0),
            _rec("dpa", 100, 1e-5, 1.06, 1.0),
            _rec("dpa", 1000, 1e-5, 2.15, 3.0),
            _rec("dpa", 100, 1e-10, 3.0, 2.0),
            _rec("dpa", 1000, 1e-10, status="timeout", reason="no answer"),
            _rec("opr", 100, 1e-5, 1.6, 0.375),
            _rec("opr", 1000, 1e-5, 3.1, 0.5),
            _rec("opr", 100, 1e-10, 2.6, 0.625),
            _rec("opr", 1000, 1e-10, 5.1, 1.0),
        ],
    }


def test_a_valid_file_loads(tmp_path):
    p = tmp_path / "a.json"
    p.write_text(json.dumps(small()))
    data = bm.load_accountants(p)
    assert bm.method_names(data) == ["pld", "rdp", "dpa", "opr"]
    assert bm.method_names(data, "peer") == ["dpa", "opr"]


def test_ratio_table_by_hand():
    # ratio = peer seconds / ours seconds; dpa at (1000, 1e-10) timed out, pld at (100, 1e-10) refused
    assert bm.ratio_table(small()) == [
        {"ours": "PLD", "peer": "DPA", "T": 100, "δ=1e-05": 2.0, "δ=1e-10": None},
        {"ours": "PLD", "peer": "DPA", "T": 1000, "δ=1e-05": 3.0, "δ=1e-10": None},
        {"ours": "RDP", "peer": "OPR", "T": 100, "δ=1e-05": 3.0, "δ=1e-10": 2.5},
        {"ours": "RDP", "peer": "OPR", "T": 1000, "δ=1e-05": 4.0, "δ=1e-10": 4.0},
    ]
    rows = bm.ratio_rows(small())
    assert len(rows) == 6
    assert rows[0] == {
        "ours": "pld",
        "peer": "dpa",
        "T": 100,
        "delta": 1e-5,
        "ours_s": 0.5,
        "peer_s": 1.0,
        "ratio": 2.0,
        "ours_eps": 1.05,
        "peer_eps": 1.06,
    }


def test_time_rows_by_hand():
    assert bm.time_rows(small(), 1e-10) == [
        {"method": "PLD", "T=1e+02": None, "T=1e+03": 2.0},
        {"method": "RDP", "T=1e+02": 0.25, "T=1e+03": 0.25},
        {"method": "DPA", "T=1e+02": 2.0, "T=1e+03": None},
        {"method": "OPR", "T=1e+02": 0.625, "T=1e+03": 1.0},
    ]


def test_errors_references_and_refusals_by_hand():
    rows = bm.error_rows(small(), 1e-10)  # (100, 1e-10) has no reference: only T = 1000
    assert [(r["method"], r["T"]) for r in rows] == [("pld", 1000), ("rdp", 1000), ("opr", 1000)]
    assert rows[1]["err_vs_ref_lower"] == pytest.approx(1.0) and rows[1]["err_vs_ref_upper"] == pytest.approx(0.6)
    assert bm.no_reference_points(small()) == [
        {"T": 100, "delta": 1e-10, "status": "refused", "reason": "NumericalError: below the FFT resolution"}
    ]
    assert bm.refusals(small()) == [
        {
            "method": "pld",
            "status": "refused",
            "points": 1,
            "at (T, δ)": "(1e+02, 1e-10)",
            "reason": "NumericalError: below the FFT resolution",
        },
        {"method": "dpa", "status": "timeout", "points": 1, "at (T, δ)": "(1e+03, 1e-10)", "reason": "no answer"},
    ]
    assert bm.points_text([(10**7, 1e-15), (1000, 1e-10), (100, 1e-10)]) == (
        "δ = 10\u207b\u00b9\u2070 at T = 10\u00b2, 10\u00b3; δ = 10\u207b\u00b9\u2075 at T = 10\u2077"
    )
    assert bm.number_text(3e-5) == "3\u00d710\u207b\u2075" and bm.number_text(0.25) == "0.25"
    assert bm.points_text([]) == "none"
    assert bm.readable("h = 1e-05; last: NumericalError: below it") == "h = 1e-05; last: (NumericalError) below it"
    assert bm.readable(None) == ""


def test_interval_problems():
    assert bm.interval_problems(small()) == []
    d = small()
    d["records"][4]["epsilon"] = d["records"][4]["upper"] = 0.9  # rdp (an upper bound) below ref lower 1.0
    assert bm.interval_problems(d) == ["rdp T=100 delta=1e-05: upper bound 0.9 below the reference's lower end 1.0"]
    d = small()
    d["records"][0]["lower"] = 1.2  # pld's own bracket [1.2, 1.05]: empty, and above the reference
    probs = bm.interval_problems(d)
    assert "pld T=100 delta=1e-05: interval lower 1.2 > upper 1.05" in probs
    assert "pld T=100 delta=1e-05: certified lower end 1.2 above the reference's upper end 1.1" in probs
    d = small()
    d["records"][8]["run_id"] = "run-0"
    assert bm.interval_problems(d) == ["dpa T=100 delta=1e-05: from run run-0"]
    with pytest.raises(bm.BenchmarkFileError, match="from run run-0"):
        bm.ratio_rows(d)


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.pop("references"), "missing references"),
        (lambda d: d["records"][0].update(status="odd"), "unknown status 'odd'"),
        (lambda d: d["records"].append(copy.deepcopy(d["records"][0])), "duplicated points"),
        (lambda d: d["records"][0].update(epsilon=None), "status ok without a finite epsilon"),
        (lambda d: d["records"][11].update(reason=None), "status timeout without a reason"),
        (lambda d: d["records"][0].update(T=50), "point not in the grid"),
        (lambda d: d["references"].pop(), "not exactly one per"),
        (lambda d: d["methods"][2].update(counterpart="moments"), "counterpart 'moments'"),
        (lambda d: d.update(schema="other/1"), "schema must be"),
    ],
)
def test_bad_files_are_refused_naming_the_problem(mutate, message):
    d = small()
    mutate(d)
    with pytest.raises(bm.BenchmarkFileError, match=message):
        bm.validate_accountants(d)


def test_write_json_is_strict_and_atomic(tmp_path):
    p = bm.write_json(tmp_path / "sub" / "x.json", {"a": math.inf, "b": [1.0, math.nan], "c": (1, 2)})
    assert json.loads(p.read_text()) == {"a": None, "b": [1.0, None], "c": [1, 2]}
    assert not [f for f in p.parent.iterdir() if f.name.startswith(".")]


def test_metadata_has_the_run_facts():
    meta = bm.finish_metadata(bm.run_metadata(ROOT, note="n"))
    assert meta["machine"]["cpus"] == os.cpu_count()
    assert len(meta["load_before"]) == 3 and len(meta["load_after"]) == 3
    assert meta["versions"]["numpy"] and meta["note"] == "n" and meta["wall_s"] >= 0
    assert meta["git"]["commit"] is None or len(meta["git"]["commit"]) == 40
    assert bm.describe_machine({"machine": {"cpus": 4, "affinity": 2, "cpu_model": "X", "memory_gib": 8.0}}) == (
        "2 of 4 cores, X, 8 GiB memory"
    )


DPSGD = {
    "schema": bm.DPSGD_SCHEMA,
    "meta": {"run_id": "d"},
    "batch": 256,
    "device": "cpu",
    "models": {
        "cnn": {
            "params": 1000,
            "nonprivate": {"steps_per_s": 4.0, "mem_mib": 10.0, "all_steps_per_s": [3.0, 4.0, 5.0]},
            "dputils": {"steps_per_s": 2.0, "mem_mib": 20.0, "all_steps_per_s": [2.0, 2.0, 1.0]},
            "opacus": {"steps_per_s": 1.0, "mem_mib": 30.0, "all_steps_per_s": [1.0, 0.5, 1.5]},
            "dputils/opacus": 2.5,
            "dputils/nonprivate": 0.5,
        }
    },
}


def test_dpsgd_rows_by_hand(tmp_path):
    p = tmp_path / "d.json"
    p.write_text(json.dumps(DPSGD))
    assert bm.dpsgd_rows(bm.load_dpsgd(p)) == [
        {
            "model": "cnn",
            "params": 1000,
            "method": "non-private",
            "steps/s": 4.0,
            "min": 3.0,
            "max": 5.0,
            "MiB": 10.0,
            "dputils / this": 0.5,
        },
        {
            "model": "cnn",
            "params": 1000,
            "method": "dputils train",
            "steps/s": 2.0,
            "min": 1.0,
            "max": 2.0,
            "MiB": 20.0,
            "dputils / this": 1.0,
        },
        {
            "model": "cnn",
            "params": 1000,
            "method": "Opacus hooks",
            "steps/s": 1.0,
            "min": 0.5,
            "max": 1.5,
            "MiB": 30.0,
            "dputils / this": 2.5,
        },
    ]


PLD = {
    "schema": bm.PLD_SCHEMA,
    "meta": {
        "run_id": RUN,
        "date": "2026-11-24T20:00:00+00:00",
        "machine": {"cpus": 2},
        "load_before": [0.5, 0.5, 0.5],
        "load_after": [0.5, 0.5, 0.5],
    },
    "rows": [
        {
            "steps": 1000,
            "seconds_ours": 0.2,
            "seconds_dp_accounting": 0.5,
            "speedup": 2.5,
            "seconds_ours_all": [0.3, 0.2, 0.1],
            "seconds_dp_accounting_all": [0.5, 0.4, 0.75],
            "peak_mib_ours": 8.0,
            "peak_mib_dp_accounting": 10.0,
            "eps_ours": 1.5,
            "eps_ours_lower": 1.25,
            "eps_dp_accounting": 1.5,
            "eps_exact": 1.375,
            "eps_exact_err": 1e-11,
        },
        {
            "steps": 10000,
            "seconds_ours": 0.25,
            "seconds_dp_accounting": 1.0,
            "speedup": 4.0,
            "seconds_ours_all": [0.25, 0.25, 0.5],
            "seconds_dp_accounting_all": [1.0, 1.0, 2.0],
            "peak_mib_ours": None,
            "peak_mib_dp_accounting": None,
            "eps_ours": 4.0,
            "eps_ours_lower": 3.0,
            "eps_dp_accounting": 3.5,
            "eps_exact": 3.5,
            "eps_exact_err": 1e-11,
        },
    ],
}


def test_pld_rows_and_checks_by_hand(tmp_path):
    p = tmp_path / "pld.json"
    p.write_text(json.dumps(PLD))
    data = bm.load_pld(p)
    assert bm.pld_rows(data) == [
        {
            "T": 1000,
            "ours s": 0.2,
            "dp_accounting s": 0.5,
            "dp_accounting / ours": 2.5,
            "ours MiB": 8.0,
            "dp_accounting MiB": 10.0,
            "eps ours lower": 1.25,
            "eps ours upper": 1.5,
            "eps dp_accounting": 1.5,
            "eps exact": 1.375,
        },
        {
            "T": 10000,
            "ours s": 0.25,
            "dp_accounting s": 1.0,
            "dp_accounting / ours": 4.0,
            "ours MiB": None,
            "dp_accounting MiB": None,
            "eps ours lower": 3.0,
            "eps ours upper": 4.0,
            "eps dp_accounting": 3.5,
            "eps exact": 3.5,
        },
    ]
    assert bm.pld_problems(data) == []


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("eps_exact", 1.6, "outside our bracket"),
        ("eps_exact", 1.2, "outside our bracket"),
        ("seconds_ours", 0.3, "median"),
        ("speedup", 3.0, "speedup"),
    ],
)
def test_pld_problems_find_each_contradiction(field, value, message):
    bad = copy.deepcopy(PLD)
    bad["rows"][0][field] = value
    if field == "seconds_ours":
        bad["rows"][0]["speedup"] = 0.5 / 0.3  # the ratio consistent, only the median wrong
    found = bm.pld_problems(bad)
    assert len(found) == 1 and message in found[0] and found[0].startswith("T=1000")


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.update(schema="dpbook-bench-pld/1"), "schema"),
        (lambda d: d["rows"][1].pop("eps_exact"), "eps_exact"),
        (lambda d: d.update(rows=[]), "empty"),
    ],
)
def test_bad_pld_files_are_refused(tmp_path, mutate, message):
    bad = copy.deepcopy(PLD)
    mutate(bad)
    p = tmp_path / "pld.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(bm.BenchmarkFileError, match=message):
        bm.load_pld(p)


def test_figures_draw():
    import matplotlib.pyplot as plt

    ax = bm.plot_times(small(), 1e-5)
    assert len(ax.get_lines()) == 4
    bm.plot_errors(small(), 1e-10)
    bm.plot_dpsgd(DPSGD)
    axes = bm.plot_pld(PLD)
    assert len(axes[1].get_lines()) == 0  # memory missing at one T: no memory curve drawn
    full = copy.deepcopy(PLD)
    full["rows"][1].update(peak_mib_ours=8.5, peak_mib_dp_accounting=12.0)
    assert len(bm.plot_pld(full)[1].get_lines()) == 2
    plt.close("all")


@pytest.mark.slow
def test_bench_accountants_quick_writes_the_schema(tmp_path):
    out = tmp_path / "acc.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_accountants.py"),
            "--quick",
            "--out",
            str(out),
            "--note",
            "test",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = bm.load_accountants(out)  # validates the layout
    meta = data["meta"]
    assert meta["note"] == "test" and meta["machine"]["cpus"] == os.cpu_count() and meta["versions"]["dputils"]
    assert data["grid"] == {"steps": [10, 100], "deltas": [1e-5, 1e-15]}
    names = bm.method_names(data)
    assert {"pld", "rdp", "gdp", "spa", "edgeworth"} <= set(names)
    assert len(data["records"]) == len(names) * 4 and len(data["references"]) == 4
    assert all(r["run_id"] == meta["run_id"] for r in data["records"] + data["references"])
    for r in data["records"]:
        assert r["status"] in bm.STATUSES and (r["status"] == "ok") == (r["epsilon"] is not None)
        if r["status"] == "ok":
            assert r["seconds"] > 0 and r["repeats"] == 1
    ref = bm.reference(data, 100, 1e-5)
    assert ref["status"] == "ok" and 0 < ref["lower"] <= ref["upper"]
    pld = bm.records(data, method="pld", T=100, delta=1e-5)[0]
    assert pld["status"] == "ok" and pld["err_vs_ref_lower"] == pytest.approx(pld["epsilon"] - ref["lower"])
    assert bm.interval_problems(data) == []
    for r in bm.no_reference_points(data):
        assert r["reason"]  # every missing reference says why


def test_the_committed_runs_load_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as the notebook runner does: relative paths resolve to the repository
    data = bm.load_accountants("benchmarks/results/accountants.json")
    assert bm.interval_problems(data) == []
    assert bm.load_dpsgd("benchmarks/results/dpsgd.json")["models"]
    assert bm.pld_problems(bm.load_pld("benchmarks/results/pld.json")) == []


def test_peer_below_the_reference_is_a_finding_not_an_inconsistency():
    # dpa (a peer presenting an upper bound) answers 0.95 at (100, 1e-5), below our certified lower end 1.0:
    # listed by peer_contradictions with its shortfall, and not reported as an impossible interval.
    d = small()
    assert bm.peer_contradictions(d) == []
    d["records"][8]["epsilon"] = 0.95
    assert bm.interval_problems(d) == []
    rows = bm.peer_contradictions(d)
    assert len(rows) == 1
    assert rows[0]["method"] == "dpa" and rows[0]["T"] == 100 and rows[0]["delta"] == 1e-5
    assert rows[0]["epsilon"] == 0.95 and rows[0]["reference lower"] == 1.0
    assert abs(rows[0]["below by"] - 0.05) < 1e-12
    # one of ours below it is still an inconsistency
    d["records"][4]["epsilon"] = d["records"][4]["upper"] = 0.9
    assert bm.interval_problems(d) == ["rdp T=100 delta=1e-05: upper bound 0.9 below the reference's lower end 1.0"]
