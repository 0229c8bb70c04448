r"""Recorded benchmark results: run metadata, the JSON layout, loading, tables and figures for the book.

The scripts in ``benchmarks/`` time the accountants and DP-SGD; the chapter "How fast, how accurate"
(``notebooks/benchmarks.md``) only *reads* what they recorded, so the book never re-times anything. The
recorded files live in ``benchmarks/results/`` (committed): ``results/`` belongs to the notebook runner
(``results/NAME.json``, written by :func:`dputils.book.results.save`, gitignored) and is replaced by every run.

**Accountants** (``benchmarks/bench_accountants.py`` -> ``benchmarks/results/accountants.json``,
schema :data:`ACCOUNTANTS_SCHEMA`)::

    {"schema": "dpbook-bench-accountants/1",
     "meta": {run_id, date, finished, wall_s, machine: {cpus, affinity, cpu_model, memory_gib},
              load_before, load_after, versions: {...}, git: {commit, dirty}, argv, threads, note},
     "mechanism": {"name": "subsampled-gaussian", "sigma": 1.0, "q": 0.01},
     "grid": {"steps": [100, ...], "deltas": [1e-05, ...]},
     "settings": {repeat, timeout_s, ref_discretization, ...},
     "methods": [{name, label, family ("dputils" | "peer"), library, version, answer, bound,
                  certified_interval, counterpart, settings}],
     "references": [{run_id, T, delta, status, lower, upper, discretization, seconds, reason, attempts}],
     "records": [{run_id, method, T, delta, status, reason, error_type, seconds, times, repeats,
                  epsilon, lower, upper, upper_vacuous, kind, ref_status, err_vs_ref_lower,
                  err_vs_ref_upper, load1}]}

``status`` of a record is ``ok`` (an answer), ``refused`` (the method declined with a ``ValueError`` or an
``ArithmeticError``, e.g. our PLD below its floating-point resolution), ``failed`` (any other exception, a
NaN, or a crashed worker), ``vacuous`` (an infinite epsilon), ``timeout`` or ``skipped`` (not run because
the method already ran out of time at a smaller T); ``reason`` says why. ``epsilon`` is the reported
value; ``lower``/``upper`` the method's own certified interval where it has one (``null`` otherwise).
``upper_vacuous`` is true where the method's certified upper end is infinite (stored as ``null``, like a
missing one). ``err_vs_ref_lower = epsilon - ref.lower`` and ``err_vs_ref_upper = epsilon - ref.upper``: the
exact error lies between them. A reference of status other than ``ok`` has no bracket and says why.

**DP-SGD** (``benchmarks/bench_dpsgd.py --json`` -> ``benchmarks/results/dpsgd.json``): the script's own
summary (``models`` -> method -> ``steps_per_s``, ``mem_mib``, ``all_steps_per_s``) with the same ``meta``.

Strict JSON: an infinite or undefined number is ``null``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..jsonio import write_text_atomic
from .results import repo_root
from .tables import sci

__all__ = [
    "ACCOUNTANTS_SCHEMA",
    "DPSGD_SCHEMA",
    "RESULTS_DIR",
    "STATUSES",
    "run_metadata",
    "finish_metadata",
    "write_json",
    "load_accountants",
    "load_dpsgd",
    "validate_accountants",
    "method_names",
    "method_info",
    "records",
    "reference",
    "time_rows",
    "number_text",
    "points_text",
    "readable",
    "ratio_rows",
    "ratio_table",
    "error_rows",
    "no_reference_points",
    "refusals",
    "interval_problems",
    "dpsgd_rows",
    "plot_times",
    "plot_errors",
    "plot_dpsgd",
    "describe_machine",
    "PLD_SCHEMA",
    "load_pld",
    "pld_rows",
    "pld_problems",
    "plot_pld",
]

ACCOUNTANTS_SCHEMA = "dpbook-bench-accountants/1"
DPSGD_SCHEMA = "dpbook-bench-dpsgd/1"
PLD_SCHEMA = "dpbook-bench-pld/2"
#: Where the benchmark scripts write by default (relative to the repository root).
RESULTS_DIR = Path("benchmarks") / "results"
#: Statuses of a record (see the module docstring).
STATUSES = ("ok", "refused", "failed", "vacuous", "timeout", "skipped")
_REF_STATUSES = ("ok", "refused", "failed", "timeout")

_VERSIONED = ("dputils", "numpy", "scipy", "dp-accounting", "prv-accountant", "opacus", "torch")


# --------------------------------------------------------------------------- metadata and writing


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(float(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def run_metadata(root: Path | str | None = None, note: str = "") -> dict[str, Any]:
    """Metadata of a benchmark run, taken at its start: run id, date, machine, load, versions, git commit.

    ``note`` is free text (e.g. "the machine was shared with a CI run"); :func:`finish_metadata` adds the
    load average and the time at the end.
    """

    root = Path(root) if root is not None else repo_root(Path(__file__).resolve().parent)
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        affinity = None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {
        "run_id": uuid.uuid4().hex,
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "affinity": affinity,
            "cpu_model": _cpu_model(),
            "memory_gib": _memory_gib(),
            "platform": platform.platform(),
        },
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "versions": _versions(),
        "git": {"commit": _git(root, "rev-parse", "HEAD"), "dirty": None if status is None else bool(status)},
        "argv": [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv else [],
        "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
        "note": note,
    }


def finish_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Add ``finished``, ``wall_s`` and ``load_after`` to ``meta`` (in place) and return it."""
    now = _dt.datetime.now(_dt.UTC)
    meta["finished"] = now.isoformat(timespec="seconds")
    meta["wall_s"] = round((now - _dt.datetime.fromisoformat(meta["date"])).total_seconds(), 1)
    meta["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return meta


def _strict(obj: Any) -> Any:
    """Non-finite floats become None (strict JSON), numpy scalars plain numbers, tuples lists."""
    if isinstance(obj, Mapping):
        return {str(k): _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (TypeError, ValueError):
            pass
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path: Path | str, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` as strict JSON (``null`` for inf/NaN) atomically (temporary file, then rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_strict(payload), indent=1, allow_nan=False)
    return write_text_atomic(p, text + "\n")


# --------------------------------------------------------------------------- loading and validation


class BenchmarkFileError(ValueError):
    """A recorded benchmark file does not have the expected layout (the message names the field)."""


def _need(d: Mapping[str, Any], keys: Iterable[str], where: str) -> None:
    missing = [k for k in keys if k not in d]
    if missing:
        raise BenchmarkFileError(f"{where}: missing {', '.join(missing)}")


def validate_accountants(data: Mapping[str, Any]) -> dict[str, Any]:
    """Check the layout of an accountants file (see the module docstring); returns ``data``.

    Raises :class:`BenchmarkFileError` naming the first problem: a missing field, an unknown status, a
    record of an undeclared method or off the grid, a duplicated point, or an ``ok`` answer without a
    finite epsilon.
    """
    if data.get("schema") != ACCOUNTANTS_SCHEMA:
        raise BenchmarkFileError(f"schema must be {ACCOUNTANTS_SCHEMA!r}, got {data.get('schema')!r}")
    _need(data, ("meta", "mechanism", "grid", "settings", "methods", "references", "records"), "file")
    _need(data["meta"], ("run_id", "date", "machine", "load_before", "load_after", "versions", "git"), "meta")
    _need(data["grid"], ("steps", "deltas"), "grid")
    names = []
    for m in data["methods"]:
        _need(
            m,
            ("name", "label", "family", "library", "answer", "bound", "certified_interval", "counterpart"),
            f"method {m.get('name')!r}",
        )
        if m["family"] not in ("dputils", "peer"):
            raise BenchmarkFileError(f"method {m['name']}: family must be dputils or peer, got {m['family']!r}")
        names.append(m["name"])
    if len(set(names)) != len(names):
        raise BenchmarkFileError(f"methods: duplicated names {sorted(k for k, v in Counter(names).items() if v > 1)}")
    for m in data["methods"]:
        if m["counterpart"] is not None and m["counterpart"] not in names:
            raise BenchmarkFileError(f"method {m['name']}: counterpart {m['counterpart']!r} is not a method")
    steps, deltas = set(data["grid"]["steps"]), set(data["grid"]["deltas"])
    seen = set()
    for r in data["references"]:
        _need(r, ("run_id", "T", "delta", "status", "lower", "upper", "reason"), "reference")
        if r["status"] not in _REF_STATUSES:
            raise BenchmarkFileError(f"reference T={r['T']} delta={r['delta']}: unknown status {r['status']!r}")
        if r["status"] == "ok" and (r["lower"] is None or r["upper"] is None):
            raise BenchmarkFileError(f"reference T={r['T']} delta={r['delta']}: status ok without a bracket")
        seen.add((r["T"], r["delta"]))
    if seen != {(t, d) for t in steps for d in deltas}:
        raise BenchmarkFileError("references: not exactly one per (T, delta) of the grid")
    pts = Counter()
    for r in data["records"]:
        _need(
            r, ("run_id", "method", "T", "delta", "status", "reason", "seconds", "epsilon", "lower", "upper"), "record"
        )
        where = f"record {r['method']} T={r['T']} delta={r['delta']}"
        if r["method"] not in names:
            raise BenchmarkFileError(f"{where}: method not declared in methods")
        if r["T"] not in steps or r["delta"] not in deltas:
            raise BenchmarkFileError(f"{where}: point not in the grid")
        if r["status"] not in STATUSES:
            raise BenchmarkFileError(f"{where}: unknown status {r['status']!r}")
        if r["status"] == "ok" and not (isinstance(r["epsilon"], (int, float)) and math.isfinite(r["epsilon"])):
            raise BenchmarkFileError(f"{where}: status ok without a finite epsilon")
        if r["status"] != "ok" and not r["reason"]:
            raise BenchmarkFileError(f"{where}: status {r['status']} without a reason")
        pts[(r["method"], r["T"], r["delta"])] += 1
    dup = [k for k, v in pts.items() if v > 1]
    if dup:
        raise BenchmarkFileError(f"records: duplicated points {dup[:3]}")
    return dict(data)


def find_recorded(path: Path | str) -> Path:
    """A recorded file's place: a relative path is tried from the cwd (a chapter runs in ``book/methods``), the
    repository around it, then the repository holding dputils; returned as given when none has it."""
    p = Path(path)
    if not p.is_absolute() and not p.is_file():
        for base in (repo_root(), repo_root(Path(__file__).resolve().parent)):
            if (base / p).is_file():
                return base / p
    return p


def _read(path: Path | str) -> dict[str, Any]:
    """Read a recorded JSON file (a relative path: :func:`find_recorded`)."""
    with open(find_recorded(path)) as fh:
        return json.load(fh)


def load_accountants(path: Path | str = RESULTS_DIR / "accountants.json") -> dict[str, Any]:
    """Read and validate an accountants file (a relative path: see ``_read``)."""
    return validate_accountants(_read(path))


def load_dpsgd(path: Path | str = RESULTS_DIR / "dpsgd.json") -> dict[str, Any]:
    """Read a DP-SGD file of ``bench_dpsgd.py --json`` and check its layout."""
    data = _read(path)
    if data.get("schema") != DPSGD_SCHEMA:
        raise BenchmarkFileError(f"schema must be {DPSGD_SCHEMA!r}, got {data.get('schema')!r}")
    _need(data, ("meta", "models", "batch", "device"), "file")
    for model, entry in data["models"].items():
        for k, v in entry.items():
            if isinstance(v, dict):
                _need(v, ("steps_per_s", "mem_mib", "all_steps_per_s"), f"models.{model}.{k}")
    return data


_PLD_ROW_KEYS = (
    "steps",
    "seconds_ours",
    "seconds_dp_accounting",
    "speedup",
    "seconds_ours_all",
    "seconds_dp_accounting_all",
    "eps_ours",
    "eps_ours_lower",
    "eps_dp_accounting",
    "eps_exact",
    "eps_exact_err",
)


def load_pld(path: Path | str = RESULTS_DIR / "pld.json") -> dict[str, Any]:
    """Read a file of ``bench_pld.py --json`` (our PLD vs dp_accounting's, one row per T) and check its layout.

    ``peak_mib_ours`` / ``peak_mib_dp_accounting`` may be missing or null (a run with ``--no-memory``).
    """
    data = _read(path)
    if data.get("schema") != PLD_SCHEMA:
        raise BenchmarkFileError(f"schema must be {PLD_SCHEMA!r}, got {data.get('schema')!r}")
    _need(data, ("meta", "rows"), "file")
    if not data["rows"]:
        raise BenchmarkFileError("rows: empty")
    for i, r in enumerate(data["rows"]):
        _need(r, _PLD_ROW_KEYS, f"rows[{i}]")
    return data


def pld_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per T: median seconds of both, dp_accounting's time over ours, peak memory of both, and the
    epsilons (our certified bracket, dp_accounting's answer, the exact value of the saddle contour)."""
    return [
        {
            "T": r["steps"],
            "ours s": r["seconds_ours"],
            "dp_accounting s": r["seconds_dp_accounting"],
            "dp_accounting / ours": r["speedup"],
            "ours MiB": r.get("peak_mib_ours"),
            "dp_accounting MiB": r.get("peak_mib_dp_accounting"),
            "eps ours lower": r["eps_ours_lower"],
            "eps ours upper": r["eps_ours"],
            "eps dp_accounting": r["eps_dp_accounting"],
            "eps exact": r["eps_exact"],
        }
        for r in data["rows"]
    ]


def pld_problems(data: Mapping[str, Any]) -> list[str]:
    """What contradicts the recorded PLD run: our bracket [lower, upper] must hold the exact epsilon (within
    the contour's own error bound), the recorded ratio must be the ratio of the recorded medians, and each
    median must be the median of its rounds. Empty when all hold."""
    out = []
    for r in data["rows"]:
        T, err = r["steps"], r["eps_exact_err"]
        if not r["eps_ours_lower"] - err <= r["eps_exact"] <= r["eps_ours"] + err:
            out.append(
                f"T={T}: exact epsilon {r['eps_exact']!r} outside our bracket "
                f"[{r['eps_ours_lower']!r}, {r['eps_ours']!r}]"
            )
        for who in ("ours", "dp_accounting"):
            if not math.isclose(r[f"seconds_{who}"], statistics.median(r[f"seconds_{who}_all"]), rel_tol=1e-12):
                out.append(f"T={T}: seconds_{who} is not the median of its rounds")
        if not math.isclose(r["speedup"], r["seconds_dp_accounting"] / r["seconds_ours"], rel_tol=1e-9):
            out.append(f"T={T}: speedup {r['speedup']!r} is not dp_accounting's median over ours")
    return out


# --------------------------------------------------------------------------- tables


def method_names(data: Mapping[str, Any], family: str | None = None) -> list[str]:
    """The methods' names in file order (only ``family`` "dputils" or "peer" when given)."""
    return [m["name"] for m in data["methods"] if family is None or m["family"] == family]


def method_info(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    for m in data["methods"]:
        if m["name"] == name:
            return m
    raise KeyError(f"unknown method {name!r}; known: {', '.join(method_names(data))}")


def records(
    data: Mapping[str, Any],
    method: str | None = None,
    delta: float | None = None,
    T: int | None = None,
    status: str | None = None,
) -> list[dict[str, Any]]:
    """The records matching the given fields, sorted by (delta descending, T)."""
    out = [
        r
        for r in data["records"]
        if (method is None or r["method"] == method)
        and (delta is None or r["delta"] == delta)
        and (T is None or r["T"] == T)
        and (status is None or r["status"] == status)
    ]
    return sorted(out, key=lambda r: (-r["delta"], r["T"]))


def reference(data: Mapping[str, Any], T: int, delta: float) -> dict[str, Any]:
    """The reference entry at (T, delta)."""
    for r in data["references"]:
        if r["T"] == T and r["delta"] == delta:
            return r
    raise KeyError(f"no reference at T={T}, delta={delta}")


def time_rows(data: Mapping[str, Any], delta: float) -> list[dict[str, Any]]:
    """One row per method at ``delta``: its median seconds per T (None where it gave no timed answer)."""
    steps = sorted(data["grid"]["steps"])
    rows = []
    for name in method_names(data):
        by_t = {r["T"]: r for r in records(data, method=name, delta=delta)}
        row: dict[str, Any] = {"method": method_info(data, name)["label"]}
        for t in steps:
            r = by_t.get(t)
            row[f"T={t:.0e}"] = r["seconds"] if r is not None and r["status"] == "ok" else None
        rows.append(row)
    return rows


def ratio_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every (peer, T, delta) where the peer and its dputils counterpart both answered, in this run.

    ``ratio = peer seconds / ours seconds`` (above 1: ours is faster). Only records carrying the file's
    ``run_id`` are paired (a record from another run raises :class:`BenchmarkFileError`).
    """
    run = data["meta"]["run_id"]
    ok = {}
    for r in data["records"]:
        if r["run_id"] != run:
            raise BenchmarkFileError(
                f"record {r['method']} T={r['T']} delta={r['delta']} is from run "
                f"{r['run_id']}, not this file's run {run}"
            )
        if r["status"] == "ok":
            ok[(r["method"], r["T"], r["delta"])] = r
    out = []
    for m in data["methods"]:
        if m["family"] != "peer" or m["counterpart"] is None:
            continue
        ours = m["counterpart"]
        for d in sorted(data["grid"]["deltas"], reverse=True):
            for t in sorted(data["grid"]["steps"]):
                a, b = ok.get((ours, t, d)), ok.get((m["name"], t, d))
                if a is None or b is None:
                    continue
                out.append(
                    {
                        "ours": ours,
                        "peer": m["name"],
                        "T": t,
                        "delta": d,
                        "ours_s": a["seconds"],
                        "peer_s": b["seconds"],
                        "ratio": b["seconds"] / a["seconds"],
                        "ours_eps": a["epsilon"],
                        "peer_eps": b["epsilon"],
                    }
                )
    return out


def ratio_table(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`ratio_rows` pivoted for the page: one row per (ours, peer, T), one ratio column per delta.

    A cell is None where one of the two gave no answer at that point.
    """
    rows = ratio_rows(data)
    deltas = sorted(data["grid"]["deltas"], reverse=True)
    labels = {m["name"]: m["label"] for m in data["methods"]}
    keyed = {(r["ours"], r["peer"], r["T"], r["delta"]): r["ratio"] for r in rows}
    out = []
    for m in data["methods"]:
        if m["family"] != "peer" or m["counterpart"] is None:
            continue
        for t in sorted(data["grid"]["steps"]):
            cells = {f"δ={d:.0e}": keyed.get((m["counterpart"], m["name"], t, d)) for d in deltas}
            if all(v is None for v in cells.values()):
                continue
            out.append({"ours": labels[m["counterpart"]], "peer": m["label"], "T": t, **cells})
    return out


def error_rows(data: Mapping[str, Any], delta: float) -> list[dict[str, Any]]:
    """Every answered record at ``delta`` with a reference: epsilon, its distance to both ends, its interval."""
    out = []
    for r in records(data, delta=delta, status="ok"):
        ref = reference(data, r["T"], delta)
        if ref["status"] != "ok":
            continue
        out.append(
            {
                "method": r["method"],
                "T": r["T"],
                "epsilon": r["epsilon"],
                "lower": r["lower"],
                "upper": r["upper"],
                "ref_lower": ref["lower"],
                "ref_upper": ref["upper"],
                "err_vs_ref_lower": r["epsilon"] - ref["lower"],
                "err_vs_ref_upper": r["epsilon"] - ref["upper"],
            }
        )
    return out


def no_reference_points(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The (T, delta) points without a certified reference, with the reason."""
    return [
        {"T": r["T"], "delta": r["delta"], "status": r["status"], "reason": r["reason"]}
        for r in sorted(data["references"], key=lambda r: (-r["delta"], r["T"]))
        if r["status"] != "ok"
    ]


def number_text(x: float) -> str:
    """``10²``-style text for a power of ten, ``3×10⁻⁵`` for a single-digit multiple of one (the book's
    a×10ⁿ format, :func:`dputils.book.tables.sci`), else ``repr``-like."""
    s = f"{x:.0e}"
    m, e = s.split("e")
    if float(f"{m}e{int(e)}") != x:
        return f"{x:g}"
    power = sci(float(f"1e{int(e)}"), 1)  # "10ⁿ"
    return power if m == "1" else f"{m}\u00d7{power}"


def points_text(points: Iterable[tuple[int, float]]) -> str:
    """``"δ = 10⁻¹⁰ at T = 10², 10³; δ = 10⁻¹⁵ at T = 10⁷"`` for (T, delta) points (deltas descending)."""
    by_delta: dict[float, list[int]] = {}
    for t, d in points:
        by_delta.setdefault(d, []).append(t)
    if not by_delta:
        return "none"
    return "; ".join(
        f"δ = {number_text(d)} at T = {', '.join(number_text(t) for t in sorted(ts))}"
        for d, ts in sorted(by_delta.items(), reverse=True)
    )


_EXC_PREFIX = re.compile(r"\b([A-Z]\w*(?:Warning|Error)): ")


def readable(reason: str | None) -> str:
    """A recorded reason for the page: ``"NumericalError: msg"`` becomes ``"(NumericalError) msg"`` (an
    exception's ``Name: `` reads like a traceback printed in an output)."""
    return "" if reason is None else _EXC_PREFIX.sub(r"(\1) ", reason)


def refusals(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Records without an answer, grouped: one row per (method, status, reason) with the points it covers."""
    groups: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for r in data["records"]:
        if r["status"] == "ok":
            continue
        groups.setdefault((r["method"], r["status"], r["reason"]), []).append((r["T"], r["delta"]))
    out = []
    for (m, s, why), pts in groups.items():
        pts = sorted(pts, key=lambda p: (-p[1], p[0]))
        out.append(
            {
                "method": m,
                "status": s,
                "points": len(pts),
                "at (T, δ)": ", ".join(f"({t:.0e}, {d:.0e})" for t, d in pts),
                "reason": why,
            }
        )
    order = {n: i for i, n in enumerate(method_names(data))}
    return sorted(out, key=lambda r: (order[r["method"]], r["status"]))


def interval_problems(data: Mapping[str, Any], tol: float = 1e-12) -> list[str]:
    """Everything impossible in the recorded intervals (an empty list when all is consistent).

    * every method's interval and every reference bracket has ``lower <= upper`` (``tol`` relative);
    * a method's answer lies in its own interval;
    * a certified upper end, or the answer of one of *our* methods that reports an upper bound, is never below
      the reference's certified lower end (that would contradict a certificate); a peer's claimed upper bound
      below it is a finding about the peer, listed by :func:`peer_contradictions`, not an inconsistency here;
    * a certified interval of a method meets the reference bracket;
    * every record and reference carries the file's ``run_id``.
    """
    run = data["meta"]["run_id"]
    bad = []
    for ref in data["references"]:
        if ref["run_id"] != run:
            bad.append(f"reference T={ref['T']} delta={ref['delta']}: from run {ref['run_id']}")
        if ref["status"] == "ok" and ref["lower"] > ref["upper"] * (1 + tol):
            bad.append(f"reference T={ref['T']} delta={ref['delta']}: lower {ref['lower']} > upper {ref['upper']}")
    for r in data["records"]:
        where = f"{r['method']} T={r['T']} delta={r['delta']}"
        if r["run_id"] != run:
            bad.append(f"{where}: from run {r['run_id']}")
        if r["status"] != "ok":
            continue
        lo, hi, eps = r["lower"], r["upper"], r["epsilon"]
        if lo is not None and hi is not None and lo > hi * (1 + tol):
            bad.append(f"{where}: interval lower {lo} > upper {hi}")
        if lo is not None and eps < lo * (1 - tol):
            bad.append(f"{where}: epsilon {eps} below its own lower end {lo}")
        if hi is not None and eps > hi * (1 + tol):
            bad.append(f"{where}: epsilon {eps} above its own upper end {hi}")
        ref = reference(data, r["T"], r["delta"])
        if ref["status"] != "ok":
            continue
        info = method_info(data, r["method"])
        upper_claim = hi if hi is not None else (eps if info["bound"] else None)
        peer_claim = info["family"] != "dputils" and not info["certified_interval"]
        if upper_claim is not None and not peer_claim and upper_claim < ref["lower"] * (1 - tol):
            bad.append(f"{where}: upper bound {upper_claim} below the reference's lower end {ref['lower']}")
        if info["certified_interval"] and lo is not None and lo > ref["upper"] * (1 + tol):
            bad.append(f"{where}: certified lower end {lo} above the reference's upper end {ref['upper']}")
    return bad


def peer_contradictions(data: Mapping[str, Any], tol: float = 1e-12) -> list[dict[str, Any]]:
    """Peer answers that claim an upper bound but lie below our certified lower end (the peer is optimistic).

    One row per (method, T, delta): the peer's epsilon, the reference bracket and the shortfall. These are
    findings about the peers (e.g. floating-point error of an FFT composition at small delta that the peer
    does not account for); :func:`interval_problems` leaves them out.
    """
    out = []
    for r in data["records"]:
        if r["status"] != "ok":
            continue
        info = method_info(data, r["method"])
        if info["family"] == "dputils" or info["certified_interval"] or not info["bound"]:
            continue
        ref = reference(data, r["T"], r["delta"])
        if ref["status"] != "ok":
            continue
        claim = r["upper"] if r["upper"] is not None else r["epsilon"]
        if claim < ref["lower"] * (1 - tol):
            out.append(
                {
                    "method": r["method"],
                    "T": r["T"],
                    "delta": r["delta"],
                    "epsilon": claim,
                    "reference lower": ref["lower"],
                    "reference upper": ref["upper"],
                    "below by": ref["lower"] - claim,
                }
            )
    return out


def describe_machine(meta: Mapping[str, Any]) -> str:
    """One line: cores, CPU model and memory of a run's machine (from its metadata)."""
    m = meta["machine"]
    cores = f"{m['cpus']} cores" if m.get("affinity") in (None, m["cpus"]) else f"{m['affinity']} of {m['cpus']} cores"
    parts = [cores]
    if m.get("cpu_model"):
        parts.append(str(m["cpu_model"]))
    if m.get("memory_gib"):
        parts.append(f"{m['memory_gib']:g} GiB memory")
    return ", ".join(parts)


# --------------------------------------------------------------------------- DP-SGD

#: The DP-SGD methods of ``bench_dpsgd.py``, in the bar plot's order, with their labels.
DPSGD_LABELS = {
    "nonprivate": "non-private",
    "dputils": "dputils train",
    "dputils-vmap": "dputils (vmap)",
    "opacus": "Opacus hooks",
    "opacus-ghost": "Opacus ghost",
}


def dpsgd_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per (model, method): median steps/s, the slowest and fastest round, memory, and the ratio
    of dputils' median to this method's (medians of per-round ratios as the script recorded them)."""
    out = []
    for model, entry in data["models"].items():
        for m, label in DPSGD_LABELS.items():
            v = entry.get(m)
            if not isinstance(v, dict):
                continue
            ratio = 1.0 if m == "dputils" else entry.get(f"dputils/{m}")
            out.append(
                {
                    "model": model,
                    "params": entry.get("params"),
                    "method": label,
                    "steps/s": v["steps_per_s"],
                    "min": min(v["all_steps_per_s"]),
                    "max": max(v["all_steps_per_s"]),
                    "MiB": v["mem_mib"],
                    "dputils / this": ratio,
                }
            )
    return out


# --------------------------------------------------------------------------- figures

_PEER_STYLE = {
    "dp_accounting-pld": "#17becf",
    "dp_accounting-rdp": "#ff9896",
    "prv_accountant": "#bcbd22",
    "opacus-rdp": "#e377c2",
    "opacus-prv": "#ff7f0e",
    "opacus-gdp": "#98df8a",
}


def method_style(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Matplotlib keywords of a method: the book's colour, solid circles for dputils, dashed squares for peers."""
    from . import plotting

    info = method_info(data, name)
    if info["family"] == "dputils":
        return {"color": plotting.color(name) or "#7f7f7f", "linestyle": "-", "marker": "o"}
    return {"color": _PEER_STYLE.get(name, "#333333"), "linestyle": "--", "marker": "s"}


def plot_times(data: Mapping[str, Any], delta: float, ax=None):
    """Median seconds of a cold call against T (log-log) at ``delta``, one line per method."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots()
    for name in method_names(data):
        pts = [(r["T"], r["seconds"]) for r in records(data, method=name, delta=delta, status="ok")]
        if not pts:
            continue
        ts, ss = zip(*pts)
        ax.loglog(ts, ss, label=method_info(data, name)["label"], markersize=4, **method_style(data, name))
    ax.set_xlabel("steps T")
    ax.set_ylabel("seconds (median of cold calls)")
    ax.set_title(f"δ = {delta:.0e}", fontsize=10)
    return ax


_OFF_AXIS = 1e6  # length of an error bar whose certified end is infinite


def _rel(x: float | None, mid: float) -> float | None:
    return None if x is None or not math.isfinite(x) else (x - mid) / mid


def plot_errors(data: Mapping[str, Any], delta: float, ax=None, linthresh: float = 1e-8, family: str | None = None):
    """Signed relative error of each answer against the reference midpoint, with certified intervals.

    ``family`` ("dputils" or "peer") draws only that family's methods (a figure with one row per family
    keeps each panel readable); None draws every method.

    ``(epsilon - m) / m`` with ``m`` the midpoint of the reference bracket, on a symmetric-log axis;
    each method's certified interval is drawn as an error bar (an infinite end is cut at the axis), the
    reference bracket as a grey band. Methods are shifted slightly along T so that their bars do not hide
    each other.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots()
    names = method_names(data, family)
    extent: list[float] = []
    refs = {(r["T"]): r for r in data["references"] if r["delta"] == delta and r["status"] == "ok"}
    ts = sorted(refs)
    if ts:
        half = [(refs[t]["upper"] - refs[t]["lower"]) / (refs[t]["upper"] + refs[t]["lower"]) for t in ts]
        ax.fill_between(ts, [-h for h in half], half, color="0.75", alpha=0.6, lw=0, label="reference bracket")
    for i, name in enumerate(names):
        shift = 10 ** (0.12 * (i - (len(names) - 1) / 2) / max(len(names) - 1, 1) * 2)
        xs, ys, lo_err, hi_err = [], [], [], []
        for r in records(data, method=name, delta=delta, status="ok"):
            ref = refs.get(r["T"])
            if ref is None:
                continue
            mid = 0.5 * (ref["lower"] + ref["upper"])
            y = _rel(r["epsilon"], mid)
            lo = _rel(r["lower"], mid)
            hi = _rel(r["upper"], mid)
            xs.append(r["T"] * shift)
            ys.append(y)
            lo_err.append(0.0 if lo is None else max(y - lo, 0.0))
            extent.extend([y, y - lo_err[-1]])
            if r.get("upper_vacuous"):
                hi_err.append(_OFF_AXIS)  # an infinite certified upper end: the bar runs off the top
            else:
                hi_err.append(0.0 if hi is None else max(hi - y, 0.0))
                extent.append(y + hi_err[-1])
        if not xs:
            continue
        st = method_style(data, name)
        ax.errorbar(
            xs,
            ys,
            yerr=np.array([lo_err, hi_err]),
            color=st["color"],
            marker=st["marker"],
            linestyle=st["linestyle"],
            markersize=4,
            capsize=2,
            lw=0.8,
            elinewidth=0.8,
            alpha=0.85,
            label=method_info(data, name)["label"],
        )
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=linthresh)
    if extent:  # the data's range, padded; a vacuous bar is cut at the top
        top, bottom = max(max(extent), 10 * linthresh), min(min(extent), -10 * linthresh)
        lo_lim, hi_lim = bottom * 3, top * 3
        ax.set_ylim(lo_lim, hi_lim)
        # one labelled tick every two decades (symlog's default labels every decade and they collide)
        k0 = math.floor(math.log10(linthresh))
        ticks = [0.0] + [s * 10.0**k for k in range(k0, 3, 2) for s in (1, -1)]
        ticks = sorted(t for t in ticks if lo_lim <= t <= hi_lim)
        ax.set_yticks(
            ticks,
            [("0" if t == 0 else f"{'−' if t < 0 else ''}1e{round(math.log10(abs(t)))}") for t in ticks],
            fontsize=7,
        )
        ax.minorticks_off()
    ax.axhline(0.0, color="black", lw=0.6)
    ax.set_xlabel("steps T")
    ax.set_ylabel("(ε − ref. midpoint) / ref. midpoint")
    ax.set_title(f"δ = {delta:.0e}", fontsize=10)
    return ax


def plot_dpsgd(data: Mapping[str, Any], axes=None):
    """Steps per second per method, one panel per model; the bar is the median round, the line the range."""
    import matplotlib.pyplot as plt

    from . import plotting

    models = list(data["models"])
    if axes is None:
        _, axes = plt.subplots(1, len(models), squeeze=False)
        axes = axes[0]
    colors = {
        "nonprivate": "0.5",
        "dputils": plotting.color("pld"),
        "dputils-vmap": "#aec7e8",
        "opacus": "#e377c2",
        "opacus-ghost": "#ff7f0e",
    }
    for ax, model in zip(axes, models):
        entry = data["models"][model]
        ms = [m for m in DPSGD_LABELS if isinstance(entry.get(m), dict)]
        med = [entry[m]["steps_per_s"] for m in ms]
        lo = [med[i] - min(entry[m]["all_steps_per_s"]) for i, m in enumerate(ms)]
        hi = [max(entry[m]["all_steps_per_s"]) - med[i] for i, m in enumerate(ms)]
        ax.bar(range(len(ms)), med, yerr=[lo, hi], capsize=3, color=[colors[m] for m in ms])
        ax.set_xticks(range(len(ms)), [DPSGD_LABELS[m] for m in ms], rotation=30, ha="right", fontsize=8)
        params = entry.get("params")
        ax.set_title(f"{model} ({params / 1e3:.0f}k parameters)" if params else model, fontsize=10)
        ax.set_ylabel("steps per second")
    return axes


def plot_pld(data: Mapping[str, Any], axes=None):
    """Two panels against T (log-log): median time of both PLD accountants (the bar spans the rounds) and
    their peak memory (when recorded)."""
    import matplotlib.pyplot as plt

    from . import plotting

    if axes is None:
        _, axes = plt.subplots(1, 2)
    rows = data["rows"]
    T = [r["steps"] for r in rows]
    styles = {
        "ours": {
            "color": plotting.color("pld") or "#1f77b4",
            "marker": "o",
            "linestyle": "-",
            "label": "dputils PLD (certified)",
        },
        "dp_accounting": {
            "color": _PEER_STYLE["dp_accounting-pld"],
            "marker": "s",
            "linestyle": "--",
            "label": "dp_accounting PLD",
        },
    }
    for who, st in styles.items():
        med = [r[f"seconds_{who}"] for r in rows]
        lo = [m - min(r[f"seconds_{who}_all"]) for m, r in zip(med, rows)]
        hi = [max(r[f"seconds_{who}_all"]) - m for m, r in zip(med, rows)]
        axes[0].errorbar(T, med, yerr=[lo, hi], capsize=3, **st)
        mem = [r.get(f"peak_mib_{who}") for r in rows]
        if all(m is not None for m in mem):
            axes[1].plot(T, mem, **st)
    axes[0].set_ylabel("seconds (median of rounds)")
    axes[1].set_ylabel("peak memory (MiB, tracemalloc)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compositions T")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].legend(fontsize=8)
    return axes


def median(xs: Sequence[float]) -> float:
    """The median (``statistics.median``), for the notebook's prose."""
    return statistics.median(xs)
