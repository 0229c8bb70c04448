"""Parameter sweeps: one papermill run of a notebook per grid point, on dask.distributed, collected in one table.

``python -m dputils sweep NOTEBOOK --grid GRID.yml [--profile P] [--scheduler ADDRESS] [--workers N] [--resume]
[--name NAME] [--fresh]``

The grid file is YAML with exactly one of two keys::

    grid:            # the cartesian product of the lists (first key varies slowest)
      sigma: [0.5, 1.0, 2.0]
      q: [0.001, 0.01]
    points:          # or an explicit list of points
      - {sigma: 0.5, q: 0.01}
      - {sigma: 2.0, q: 0.1}

Every parameter must be declared in the notebook's ``parameters`` cell (as papermill's ``inspect_notebook``
reads it) and have the declared type (``int``, ``float`` (an integer is accepted and made a float),
``bool``, ``str``, ``list``, ``dict``); a bad grid file is refused with one line before anything runs.
``--profile P`` starts each point from ``params/P.yml``'s values for the notebook (checked the same way); the
point's own values override them. Limits, checked before anything is expanded or run: a grid file whose YAML
aliases would expand to more than :data:`MAX_GRID_ITEMS` values, and a sweep of more than :data:`MAX_POINTS`
points, are refused (exit 2, naming the limit).

Each point runs through :func:`dputils.book.run.run_staged` (staged, atomic, the failing cell and line reported)
into ``sweeps/NAME/<point-id>/``: the executed ``NOTEBOOK.ipynb``, ``results/*.json`` (what the notebook
saved with :func:`dputils.book.results.save`) and ``point.json`` (parameters, code version, status, seconds, the
names of the result files). A rerun replaces a point's notebook and results only when it succeeds: a failed
rerun keeps the last good ones (its ``point.json`` says failed and keeps the good run's record as ``last_ok``).
The point id is a readable slug of the swept values plus a short hash of all parameters the run received.
At the end ``sweeps/NAME/results.csv`` and ``results.parquet`` hold one row per point: ``point``, the swept
parameters, ``status``, ``error``, ``seconds``, then the notebook's recorded results (nested keys joined
with dots; lists as JSON text; ``targets`` as counts per status). A ``--name`` whose ``results.csv`` holds points
the new grid does not have (its rows would be lost; the grids are named by :func:`grid_hash`) is refused before
anything runs, naming both grids' hashes; a grid that extends the old one is accepted; ``--fresh`` starts afresh
(the table is rewritten for the new grid; the old points' folders stay).

Points run as tasks on a Dask cluster: without ``--scheduler`` a LocalCluster of ``--workers`` processes
(default and at most: one per CPU core, and no more than there are points; a larger ``--workers`` is capped
and the cap said) with one thread each is started and stopped; with ``--scheduler ADDRESS`` the points go to
that cluster, whose workers must be able to import ``dputils`` and reach the same file system. Connecting,
handshake included, must finish within :data:`SCHEDULER_TIMEOUT_S` seconds. A worker that dies has its points
rerun elsewhere (Dask reschedules them). ``--resume`` skips points whose ``point.json`` says they passed with
the same parameters and the same code version (a hash of the ``dputils`` sources and the notebook) and whose
result files are all there and readable. Exit status: 0 every point passed, 1 a point failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import itertools
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..cli.parse import Parser as _Parser  # one line on errors, no abbreviations, an option given twice refused
from ..errors import DPValueError
from ..jsonio import write_bytes_atomic, write_json_atomic, write_text_atomic
from .changed import package_digests, package_sources  # noqa: F401  (public here too)
from .results import read as read_results
from .run import (  # noqa: F401  (check_parameters, declared_parameters: public here too)
    PROFILES,
    check_parameters,
    declared_parameters,
    failure_where,
    find_root,
    load_profile,
    pid_alive,
    run_staged,
)

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
POINT_FILE = "point.json"
#: Most values (scalars, lists and mappings, counted after YAML aliases are expanded) a grid file may hold.
MAX_GRID_ITEMS = 1_000_000
#: Most points one sweep may have (each is one notebook run).
MAX_POINTS = 100_000
#: Seconds to connect to a ``--scheduler``, the Dask handshake included.
SCHEDULER_TIMEOUT_S = 20.0


# --------------------------------------------------------------------------- the notebook and its parameters


def resolve_notebook(notebook: str | Path, root: Path | None = None) -> Path:
    """``notebook`` as a path (``.md`` MyST or ``.ipynb``), else the stem of ``ROOT/notebooks/NAME.md``."""
    p = Path(notebook).expanduser()
    if p.is_file():
        return p.resolve()
    if root is not None and _NAME.match(str(notebook)):
        cand = root / "notebooks" / f"{notebook}.md"
        if cand.is_file():
            return cand.resolve()
    raise DPValueError(f"notebook: {notebook} is neither a file nor a notebook in notebooks/")


@dataclass
class Point:
    """One grid point: the swept values, every parameter the run receives, and where it goes."""

    swept: dict[str, Any]
    parameters: dict[str, Any]
    id: str = ""


@dataclass
class Plan:
    """What a sweep will run (everything checked, nothing run yet)."""

    source: Path
    name: str
    out_dir: Path
    points: list[Point]
    swept_names: list[str]
    code_version: str
    profile: str | None = None
    root: Path | None = None


def load_grid(path: str | Path) -> list[dict[str, Any]]:
    """The points of a grid file, in order (see the module docstring); DPValueError naming the problem."""
    p = Path(path).expanduser()
    where = f"grid {p.name}"
    if not p.is_file():
        raise DPValueError(f"grid: {p} is not a file")
    try:
        text = p.read_text()
        # one pass over the parser's events (libyaml's when installed: 2 s for 10^6 points, where composing them
        # in pure Python took 200 s and 2.5 GB), counting values and points before any of them is built
        items, n_points = _stream_counts(text)
        if n_points is not None and n_points > MAX_POINTS:
            _check_points(n_points, where)
        if items > MAX_GRID_ITEMS:
            raise DPValueError(
                f"{where}: it holds {items:,} values, over the limit of {MAX_GRID_ITEMS:,} "
                f"(at most {MAX_POINTS:,} points); split the sweep into several grid files"
            )
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            items = _expanded_items(node, where)
            if items > MAX_GRID_ITEMS:  # only aliases can take the expanded count past the streamed one
                raise DPValueError(
                    f"{where}: its YAML aliases expand to {items:,} values, over the limit of "
                    f"{MAX_GRID_ITEMS:,}; write the grid without nested aliases"
                )
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise DPValueError(f"{where}: not valid YAML{at} ({getattr(exc, 'problem', None) or 'parse error'})") from None
    except UnicodeDecodeError:
        raise DPValueError(f"{where}: not a text file") from None
    except RecursionError:
        raise DPValueError(f"{where}: nested too deeply") from None
    if not isinstance(data, dict):
        raise DPValueError(f"{where}: expected a mapping with 'grid:' or 'points:', got {type(data).__name__}")
    unknown = sorted(set(map(str, data)) - {"grid", "points"})
    if unknown:
        raise DPValueError(f"{where}: unknown key(s) {', '.join(unknown)}; expected 'grid:' or 'points:'")
    if ("grid" in data) == ("points" in data):
        raise DPValueError(f"{where}: give exactly one of 'grid:' (lists to combine) or 'points:' (a list of points)")
    if "grid" in data:
        grid = data["grid"]
        if grid is not None and not isinstance(grid, dict):
            raise DPValueError(
                f"{where}: 'grid:' must map each parameter to a list of values (grid: {{x: [1, 2]}}), "
                f"got a {type(grid).__name__}"
            )
        if not grid:
            raise DPValueError(f"{where}: 'grid:' is empty; it must map each parameter to a non-empty list")
        names = list(grid)
        for k in names:
            v = grid[k]
            if not isinstance(v, list):
                raise DPValueError(f"{where}: grid.{k} must be a list of values, got {type(v).__name__} {v!r}")
            if not v:
                raise DPValueError(f"{where}: grid.{k} is an empty list, so the grid has no points")
        _check_points(math.prod(len(grid[k]) for k in names), where)
        return [dict(zip(names, combo)) for combo in itertools.product(*(grid[k] for k in names))]
    pts = data["points"]
    if not isinstance(pts, list) or not pts:
        raise DPValueError(f"{where}: 'points:' is empty; it must be a non-empty list of parameter mappings")
    _check_points(len(pts), where)
    out = []
    for i, pt in enumerate(pts):
        if not isinstance(pt, dict) or not pt:
            raise DPValueError(f"{where}: points[{i}] must be a non-empty mapping of parameter: value")
        out.append(dict(pt))
    return out


#: The YAML loader of grid files: libyaml's safe loader when PyYAML was built with it, else the pure-Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)


def _stream_counts(text: str) -> tuple[int, int | None]:
    """From the parser's events alone (no node built): the values of the document (scalars, lists and
    mappings, aliases not expanded) and the number of entries of a top-level ``points:`` list (None without
    one)."""
    items = 0
    points: int | None = None
    depth = 0
    top_pos = 0  # node events directly in the top-level mapping: even ones are keys, odd ones values
    key = None
    in_points = False
    for ev in yaml.parse(text, Loader=_LOADER):
        is_node = isinstance(ev, _NODE_EVENTS)
        if is_node or isinstance(ev, yaml.AliasEvent):
            if is_node:
                items += 1
            if depth == 2 and in_points:
                points = (points or 0) + 1
            elif depth == 1:
                if top_pos % 2 == 0:
                    key = ev.value if isinstance(ev, yaml.ScalarEvent) else None
                elif key == "points" and isinstance(ev, yaml.SequenceStartEvent):
                    in_points, points = True, 0
                top_pos += 1
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
            if depth == 1:
                in_points = False
    return items, points


def _expanded_items(root: Any, where: str) -> int:
    """Values in the composed YAML document ``root`` once every alias is expanded (each scalar, list and
    mapping counts 1), counted on the node graph without expanding it: an alias is the same node object, so
    a node's size is computed once (iterative depth-first; a recursive alias is refused)."""
    if root is None:
        return 0
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finish = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        kids = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        if finish:
            sizes[key] = 1 + sum(sizes[id(c)] for c in kids)
            open_.discard(key)
            continue
        if key in sizes:
            continue
        open_.add(key)
        stack.append((node, True))
        for c in kids:
            if id(c) in open_:
                raise DPValueError(f"{where}: a YAML alias refers to itself (a recursive structure)")
            if id(c) not in sizes:
                stack.append((c, False))
    return sizes[id(root)]


def _check_points(n: int, where: str) -> None:
    """Refuse a sweep of more than :data:`MAX_POINTS` points before listing them."""
    if n > MAX_POINTS:
        raise DPValueError(
            f"{where}: {n:,} points, over the limit of {MAX_POINTS:,} points per sweep (each point "
            f"is one notebook run: {n / 86400:,.0f} days at 1 s each on one core); split the grid"
        )
    if n > 10_000:
        _say(f"{where}: planning {n:,} points (about {n * 1e-4:.0f} s before the first run)")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def point_id(swept: dict[str, Any], parameters: dict[str, Any]) -> str:
    """A readable slug of the swept values plus a 10-hex hash of all the run's parameters (stable)."""
    h = hashlib.sha256(_canonical(parameters).encode()).hexdigest()[:10]
    parts = []
    for k, v in swept.items():
        text = v if isinstance(v, str) else _canonical(v)
        parts.append(f"{k}-{text}")
    slug = re.sub(r"[^A-Za-z0-9.=-]+", "_", "_".join(parts)).strip("_.")[:48].rstrip("_.")
    return f"{slug}-{h}" if slug else h


def grid_hash(point_ids: Sequence[str]) -> str:
    """A 10-hex hash of a sweep's points (their ids, in order; an id hashes all of a point's parameters): the
    grid a ``results.csv`` holds, computed from its ``point`` column."""
    return hashlib.sha256("\n".join(point_ids).encode()).hexdigest()[:10]


def check_same_grid(plan: Plan, fresh: bool = False) -> None:
    """Refuse to run ``plan`` into ``sweeps/NAME/`` when that folder's ``results.csv`` holds points the plan
    does not have (the new table would lose those rows): DPValueError naming both grids' hashes and
    ``--fresh``. The same grid, or one that extends it, is accepted; so is anything with ``fresh=True`` (the
    table is then rewritten for the new grid)."""
    table = plan.out_dir / "results.csv"
    if fresh or not table.is_file():
        return
    try:
        old = [r.get("point") or "" for r in read_table(table)]
    except (OSError, csv.Error, UnicodeDecodeError):
        old = None
    new = [pt.id for pt in plan.points]
    if old is not None and set(old) <= set(new):  # the same grid, or one extended: every old row stays
        return
    what = "an unreadable table" if old is None else f"grid {grid_hash(old)}, {len(old)} point(s)"
    raise DPValueError(
        f"name: {table} holds another grid's results ({what}; this grid: {grid_hash(new)}, {len(new)} point(s)); "
        f"use another --name, or --fresh to start afresh (that table is replaced)"
    )


def code_version(source: Path) -> str:
    """A hash of every ``dputils/**/*.py`` source and of the notebook: resumed points must match it."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in package_sources():
        h.update(f.relative_to(pkg).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    h.update(b"notebook\0" + source.read_bytes())
    return h.hexdigest()[:16]


def plan_sweep(
    notebook: str | Path,
    grid: str | Path,
    profile: str | None = None,
    name: str | None = None,
    output: str | Path | None = None,
    root: Path | None = None,
) -> Plan:
    """Check the notebook, the grid and the profile, and list the points: nothing runs yet."""

    try:
        root = find_root(root)
    except ValueError:
        root = None
    source = resolve_notebook(notebook, root)
    if name is None:
        name = Path(grid).stem
    if not _NAME.match(name) or name in (".", ".."):
        raise DPValueError(f"name must be letters, digits, '_', '.' or '-', got {name!r}")
    raw = load_grid(grid)
    declared = declared_parameters(source)
    base: dict[str, Any] = {}
    if profile is not None:
        if root is None:
            raise DPValueError("profile: no repository root with params/ found")
        base = check_parameters(
            load_profile(profile, root).get(source.stem, {}), declared, source, f"params/{profile}.yml: {source.stem}"
        )
    where = f"grid {Path(grid).name}"
    points: list[Point] = []
    swept_names: list[str] = []
    for i, pt in enumerate(raw):
        swept = check_parameters(pt, declared, source, where)
        for k in swept:
            if k not in swept_names:
                swept_names.append(k)
        params = {**base, **swept}
        try:
            _canonical(params)
        except (TypeError, ValueError) as exc:
            raise DPValueError(f"{where}: point {i} has a value JSON cannot hold ({_one_line(exc)})") from None
        points.append(Point(swept, params, point_id(swept, params)))
    seen: dict[str, int] = {}
    for i, pt in enumerate(points):
        if pt.id in seen:
            raise DPValueError(f"{where}: points {seen[pt.id]} and {i} are the same point ({pt.swept})")
        seen[pt.id] = i
    if output is None:
        out_base = (root / "sweeps") if root is not None else Path.cwd() / "sweeps"
    else:
        out_base = Path(output).expanduser().resolve()
    return Plan(
        source=source,
        name=name,
        out_dir=out_base / name,
        points=points,
        swept_names=swept_names,
        code_version=code_version(source),
        profile=profile,
        root=root,
    )


# --------------------------------------------------------------------------- running one point (on a worker)


def _read_meta(pdir: Path) -> dict[str, Any] | None:
    """The point's ``point.json`` as a dict, or None (missing or unreadable)."""
    try:
        meta = json.loads((pdir / POINT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def run_point(
    source: str,
    out_dir: str,
    pid: str,
    parameters: dict[str, Any],
    swept: dict[str, Any],
    timeout: int,
    root: str | None,
    version: str,
    profile: str | None = None,
) -> dict[str, Any]:
    """Run one point into ``out_dir/pid/`` (staged: see :func:`dputils.book.run.run_staged`); never raises.

    Returns the report of :func:`dputils.book.run.execute_one` plus ``point``; writes ``point.json`` last, so a point
    with a ``point.json`` saying ``ok`` has all its files. Each attempt stages in its own folder, so a rerun of
    a point whose worker died never shares files with the dead attempt's kernel. The point's notebook and
    ``results/`` are replaced (as one set: stale result files removed) only when the run succeeds; a failed
    run leaves the last good ones in place and records them in ``point.json`` as ``last_ok``.
    """

    src, base = Path(source), Path(out_dir)
    pdir = base / pid
    t0 = time.perf_counter()
    previous = _read_meta(pdir)
    try:
        pdir.mkdir(parents=True, exist_ok=True)
        staging = base / ".staging" / f"{pid}.{_host()}.{os.getpid()}.{time.time_ns()}"
        rep = run_staged(
            src,
            pdir,
            pdir / "results",
            parameters,
            timeout,
            staging,
            Path(root) if root else src.parent,
            profile,
            replace_results=True,
        )
        try:
            staging.rmdir()
        except OSError:
            pass
    except Exception as exc:  # a report, never an exception: the other points go on
        rep = {
            "name": src.stem,
            "ok": False,
            "error": f"{type(exc).__name__}: {_one_line(exc)}",
            "output": str(pdir),
            "seconds": round(time.perf_counter() - t0, 2),
        }
    rep["point"] = pid
    meta = {
        "point": pid,
        "notebook": str(src),
        "parameters": parameters,
        "swept": swept,
        "code_version": version,
        "profile": profile,
        "ok": bool(rep["ok"]),
        "seconds": rep.get("seconds"),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if rep["ok"]:
        meta["results"] = sorted(f.name for f in (pdir / "results").glob("*.json"))
    else:
        _keep_last_ok(meta, previous)
    for k in ("error", "md_line", "code_cell", "cell", "line", "source", "output"):
        if k in rep:
            meta[k] = rep[k]
    try:
        write_json_atomic(pdir / POINT_FILE, meta, sort_keys=True)
    except (OSError, TypeError, ValueError) as exc:
        rep.update(ok=False, error=f"cannot write {POINT_FILE}: {_one_line(exc)}")
    return rep


def _keep_last_ok(meta: dict[str, Any], previous: dict[str, Any] | None) -> None:
    """Record in a failed point's ``meta`` the last good run whose files are still in place (``last_ok``)."""
    if previous is None:
        return
    last = previous if previous.get("ok") is True else previous.get("last_ok")
    if isinstance(last, dict):
        meta["last_ok"] = {k: last.get(k) for k in ("finished", "code_version", "seconds", "results")}


def _host() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname()) or "host"


def clean_stale_staging(out_dir: Path) -> list[Path]:
    """Remove ``out_dir/.staging/`` folders of attempts on this host whose worker process is gone (killed);
    returns them. Folders of other hosts, and of live processes, are left alone."""

    removed = []
    host = _host()
    for d in sorted((out_dir / ".staging").glob("*")):
        parts = d.name.rsplit(".", 3)
        if len(parts) != 4 or parts[1] != host or not parts[2].isdigit() or not d.is_dir():
            continue
        if not pid_alive(int(parts[2])):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _record_lost(plan: Plan, pt: Point, rep: dict[str, Any]) -> None:
    """``point.json`` for a point whose task itself failed (its worker died too often): the table says why."""
    meta = {
        "point": pt.id,
        "notebook": str(plan.source),
        "parameters": pt.parameters,
        "swept": pt.swept,
        "code_version": plan.code_version,
        "profile": plan.profile,
        "ok": False,
        "error": rep["error"],
    }
    _keep_last_ok(meta, _read_meta(plan.out_dir / pt.id))
    try:
        write_json_atomic(plan.out_dir / pt.id / POINT_FILE, meta, sort_keys=True)
    except OSError:
        pass


def results_problem(pdir: Path, meta: dict[str, Any]) -> str | None:
    """Why the results of a point whose ``point.json`` says ok cannot be used (None when they can): the
    ``results/`` folder or a file ``point.json`` lists is gone, or a result file is not valid JSON."""
    rdir = pdir / "results"
    listed = meta.get("results")
    if not rdir.is_dir():
        if listed == []:
            return None
        return f"{rdir} is missing (point.json says the point passed)"
    if isinstance(listed, list):
        missing = [n for n in listed if not (rdir / str(n)).is_file()]
        if missing:
            return f"{rdir / missing[0]} is missing (point.json lists it)"
    for f in sorted(rdir.glob("*.json")):
        try:
            json.loads(f.read_text())
        except (OSError, ValueError) as exc:
            return f"{f}: not valid JSON ({_one_line(exc)})"
    return None


def point_done(plan: Plan, pt: Point) -> bool:
    """True when ``pt`` passed before with the same parameters and code version, and its executed notebook and
    result files are all there and readable (what ``--resume`` skips)."""
    pdir = plan.out_dir / pt.id
    meta = _read_meta(pdir)
    if meta is None:
        return False
    return (
        meta.get("ok") is True
        and meta.get("code_version") == plan.code_version
        and _canonical(meta.get("parameters")) == _canonical(pt.parameters)
        and (pdir / f"{plan.source.stem}.ipynb").is_file()
        and results_problem(pdir, meta) is None
    )


# --------------------------------------------------------------------------- the table


def _flatten(prefix: str, obj: Any, out: dict[str, Any]) -> None:
    if isinstance(obj, dict):
        for k in sorted(obj):
            _flatten(f"{prefix}.{k}" if prefix else str(k), obj[k], out)
    elif isinstance(obj, (list, tuple)):
        out[prefix] = json.dumps(obj, sort_keys=True)
    else:
        out[prefix] = obj


def point_results(pdir: Path) -> dict[str, Any]:
    """The recorded results of one point, flattened (``_meta`` dropped, ``targets`` counted per status), read by
    :func:`dputils.book.results.read`: a saved infinite number is ``inf`` again (the csv says ``inf``), not the null of
    the strict file; a list is one cell of JSON as Python writes it (``Infinity``/``NaN`` for such numbers, which
    ``json.loads`` reads back)."""
    files = sorted((pdir / "results").glob("*.json"))
    flat: dict[str, Any] = {}
    for f in files:
        try:
            data = read_results(f)  # the saved non-finite numbers back (strict JSON writes them as null)
        except (OSError, ValueError) as exc:
            raise DPValueError(f"{f}: not valid JSON ({_one_line(exc)})") from None
        if not isinstance(data, dict):
            raise DPValueError(f"{f}: expected a JSON object, got {type(data).__name__}")
        data.pop("_meta", None)
        targets = data.pop("targets", None)
        if isinstance(targets, list):
            counts: dict[str, int] = {}
            for t in targets:
                st = str(t.get("status", "unknown")) if isinstance(t, dict) else "unknown"
                counts[st] = counts.get(st, 0) + 1
            data["targets"] = counts
        _flatten(f.stem if len(files) > 1 else "", data, flat)
    return flat


def collect(plan: Plan) -> list[dict[str, Any]]:
    """One row per point of ``plan`` (in grid order) from the files under ``sweeps/NAME/``."""
    rows = []
    for pt in plan.points:
        pdir = plan.out_dir / pt.id
        try:
            meta = json.loads((pdir / POINT_FILE).read_text())
        except (OSError, ValueError):
            meta = {"ok": False, "error": "did not run"}
        row: dict[str, Any] = {"point": pt.id}
        for k in plan.swept_names:
            v = pt.swept.get(k)
            row[k] = json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v
        ok = meta.get("ok") is True
        results: dict[str, Any] = {}
        error = None if ok else meta.get("error")
        if ok:
            error = results_problem(pdir, meta)
            if error is None:
                try:
                    results = point_results(pdir)
                except DPValueError as exc:
                    error = str(exc)
            ok = error is None
        row["status"] = "ok" if ok else "failed"
        row["error"] = error
        row["seconds"] = meta.get("seconds")
        for k, v in results.items():
            row[k if k not in row else f"result.{k}"] = v
        rows.append(row)
    return rows


def _columns(rows: list[dict[str, Any]], plan: Plan) -> list[str]:
    head = ["point", *plan.swept_names, "status", "error", "seconds"]
    rest = sorted({k for r in rows for k in r} - set(head))
    return head + rest


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_table(plan: Plan, rows: list[dict[str, Any]]) -> list[Path]:
    """``results.csv`` (and ``results.parquet`` with pyarrow) under ``sweeps/NAME/``; returns the paths."""
    cols = _columns(rows, plan)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = plan.out_dir / "results.csv"
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in cols])
    write_text_atomic(csv_path, buf.getvalue())
    written = [csv_path]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        _say("results.parquet not written: pyarrow is not installed (pip install -e '.[sweep]')")
        return written
    arrays = {}
    for c in cols:
        vals = [r.get(c) for r in rows]
        try:
            arrays[c] = pa.array(vals)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            arrays[c] = pa.array([None if v is None else _cell(v) for v in vals], type=pa.string())
    pq_path = plan.out_dir / "results.parquet"
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(arrays), sink)
    write_bytes_atomic(pq_path, sink.getvalue().to_pybytes())
    written.append(pq_path)
    return written


def read_table(path: str | Path) -> list[dict[str, str]]:
    """The rows of a ``results.csv`` as dicts of text (for checks and small scripts). A cell may be long (a
    notebook that records its table as a list gives one JSON cell of megabytes), so the csv module's field
    limit (128 KiB) is lifted while reading."""
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, 1 << 30))
    try:
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    finally:
        csv.field_size_limit(limit)


# --------------------------------------------------------------------------- running the sweep


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _one_line(exc: BaseException | str) -> str:
    return " ".join(str(exc).split()) or (type(exc).__name__ if isinstance(exc, BaseException) else "")


def describe(rep: dict[str, Any], source: Path) -> str:
    """One line: the point, where the notebook failed (:func:`dputils.book.run.failure_where`, as ``run`` says it), the
    error."""
    return (
        f"point {rep.get('point')} FAILED at {failure_where(rep, source.name)} -> {rep.get('error', 'unknown error')}"
    )


def local_cluster(workers: int | None = None):
    """A LocalCluster on loopback: ``workers`` processes (default one per core), one thread each, no dashboard."""
    from distributed import LocalCluster

    n = workers or os.cpu_count() or 1
    return LocalCluster(n_workers=n, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address=None)


def _start_local_cluster(n: int):
    """:func:`local_cluster` started with SIGINT ignored, so that its worker processes (spawned now) inherit
    "ignore": Ctrl-C in a terminal reaches the whole process group, and it is the sweep's to handle
    (:func:`run_sweep` ends the workers and their kernels), not each worker's (a traceback and Dask warnings
    per worker)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return local_cluster(n)
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return local_cluster(n)
    finally:
        signal.signal(signal.SIGINT, old)


def _kill_workers(cluster: Any) -> None:
    """SIGKILL the worker processes of a local ``cluster`` and their kernels (nothing they ran is published:
    a point publishes in one step after its run)."""
    import signal

    from .run import _kill_descendants

    for nanny in list(getattr(cluster, "workers", {}).values()):
        pid = getattr(getattr(getattr(nanny, "process", None), "process", None), "pid", None)
        if pid is None:
            continue
        _kill_descendants(pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _quiet_distributed() -> None:
    """After Ctrl-C: Dask's loggers say nothing more (closing a cluster whose workers were killed warns)."""
    import logging

    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def local_workers(requested: int | None, points: int) -> int:
    """Processes of the local cluster: ``requested`` (default one per core) capped by the cores and the points
    (each point is one notebook run on one core); a cap below ``requested`` is said on stderr."""
    cores = os.cpu_count() or 1
    n = max(1, min(requested or cores, cores, points))
    if requested is not None and n < requested:
        _say(f"--workers {requested} capped to {n} ({cores} core(s), {points} point(s) to run)")
    return n


def run_sweep(
    plan: Plan,
    client: Any = None,
    *,
    serial: bool = False,
    resume: bool = False,
    timeout: int = 3600,
    workers: int | None = None,
    fresh: bool = False,
) -> dict[str, Any]:
    """Run the plan's points (skipping done ones with ``resume``) and write the table.

    A ``results.csv`` of another grid under the same name is refused before anything runs
    (:func:`check_same_grid`), unless ``fresh``.

    ``serial=True`` runs the points one after another in this process (no Dask); else on ``client``, or on a
    LocalCluster of ``workers`` processes started for the sweep and stopped after it. Returns ``{"reports",
    "skipped", "failed", "table"}``.
    """
    check_same_grid(plan, fresh)
    todo = [pt for pt in plan.points if not (resume and point_done(plan, pt))]
    skipped = len(plan.points) - len(todo)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    clean_stale_staging(plan.out_dir)
    args = {
        pt.id: (
            str(plan.source),
            str(plan.out_dir),
            pt.id,
            pt.parameters,
            pt.swept,
            timeout,
            str(plan.root) if plan.root else None,
            plan.code_version,
            plan.profile,
        )
        for pt in todo
    }
    from tqdm.std import tqdm

    _say(
        f"sweep {plan.name}: {len(plan.points)} point(s) of {plan.source.name}"
        f"{f', {skipped} already done (--resume)' if skipped else ''} -> {plan.out_dir}"
    )
    reports: list[dict[str, Any]] = []
    bar = tqdm(total=len(todo), desc=f"sweep {plan.name}", unit="point", file=sys.stderr)

    def done(rep: dict[str, Any]) -> None:
        reports.append(rep)
        bar.update(1)
        if not rep.get("ok"):
            bar.write(describe(rep, plan.source), file=sys.stderr)

    own_cluster = None
    interrupted = False
    futures: list[Any] = []
    try:
        if todo and serial:
            for pt in todo:
                done(run_point(*args[pt.id]))
        elif todo:
            from distributed import Client, as_completed

            if client is None:
                n = local_workers(workers, len(todo))
                own_cluster = _start_local_cluster(n)
                client = Client(own_cluster)
            futures, ids = [], {}
            by_id = {pt.id: pt for pt in todo}
            for pt in todo:
                fut = client.submit(
                    run_point, *args[pt.id], pure=False, key=f"sweep-{plan.name}-{pt.id}-{time.time_ns()}"
                )
                futures.append(fut)
                ids[fut.key] = pt.id
            for fut in as_completed(futures):
                try:
                    rep = fut.result()
                except Exception as exc:  # e.g. KilledWorker after repeated deaths: report, go on
                    rep = {
                        "name": plan.source.stem,
                        "ok": False,
                        "point": ids[fut.key],
                        "error": f"{type(exc).__name__}: {_one_line(exc)}",
                    }
                    _record_lost(plan, by_id[ids[fut.key]], rep)
                done(rep)
    except KeyboardInterrupt:
        interrupted = True
        _quiet_distributed()
        if own_cluster is not None:  # the workers ignore SIGINT: end them and their kernels here, at once
            _kill_workers(own_cluster)
        elif client is not None and todo and not serial:
            client.cancel(futures, force=True)
        raise
    finally:
        bar.close()
        if own_cluster is not None:
            try:
                client.close()
                own_cluster.close()
            except Exception:
                if not interrupted:
                    raise
    try:
        (plan.out_dir / ".staging").rmdir()
    except OSError:
        pass
    rows = collect(plan)
    paths = write_table(plan, rows)
    failed = [r for r in rows if r["status"] != "ok"]
    _say(
        f"sweep {plan.name}: {len(rows) - len(failed)} ok, {len(failed)} failed ({len(reports)} run, "
        f"{skipped} skipped); table: {paths[0]}"
    )
    return {"reports": reports, "skipped": skipped, "failed": failed, "table": paths}


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:

    p = _Parser(
        prog="python -m dputils sweep",
        description="run a notebook once per grid point (papermill on dask.distributed) and collect "
        "sweeps/NAME/results.csv and results.parquet",
    )
    p.add_argument("notebook", help="notebook source (path to .md/.ipynb, or a name in notebooks/)")
    p.add_argument("--grid", required=True, metavar="GRID.yml", help="YAML with 'grid:' (lists) or 'points:'")
    p.add_argument("--profile", default=None, choices=PROFILES, help="start each point from params/PROFILE.yml")
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="a running Dask scheduler (tcp://host:8786); default: a LocalCluster on this machine",
    )
    p.add_argument("--workers", type=int, default=None, help="LocalCluster processes (default: one per core)")
    p.add_argument("--resume", action="store_true", help="skip points done with the same parameters and code")
    p.add_argument("--name", default=None, help="sweeps/NAME/ (default: the grid file's stem)")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start afresh: replace a results.csv of another grid under the same name (refused without it)",
    )
    p.add_argument("--output", default=None, metavar="DIR", help="write DIR/NAME/ instead of sweeps/NAME/")
    p.add_argument("--timeout", type=int, default=3600, help="per-cell timeout in seconds (default 3600)")
    p.add_argument("--root", default=None, metavar="PATH", help="repository root (holds notebooks/ and params/)")
    return p


def connect_scheduler(address: str, timeout: float | None = None):
    """A ``distributed.Client`` of the scheduler at ``address``, or DPValueError naming ``--scheduler``.

    The whole connection (TCP connect, Dask handshake, client registration) must finish within ``timeout``
    seconds (default :data:`SCHEDULER_TIMEOUT_S`): ``Client(timeout=...)`` bounds only part of it, so it is
    built in a daemon thread and abandoned when the deadline passes (a port that accepts but never answers).
    Any failure to connect (refused, no answer, a ``tls://`` address without TLS settings) is bad input.
    """
    import threading

    from distributed import Client

    limit = SCHEDULER_TIMEOUT_S if timeout is None else timeout
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = Client(address, timeout=f"{limit}s")
        except BaseException as exc:  # reported in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=connect, name="dputils-scheduler-connect", daemon=True)
    t.start()
    t.join(limit + 2.0)
    if t.is_alive():
        raise DPValueError(f"--scheduler: no answer from {address} within {limit:g} s (is it a Dask scheduler?)")
    exc = box.get("error")
    if exc is not None:
        hint = "; tls:// needs dask's distributed.comm.tls settings" if str(address).startswith("tls://") else ""
        raise DPValueError(f"--scheduler: cannot reach {address} ({type(exc).__name__}: {_one_line(exc)}){hint}")
    return box["client"]


def cli_main(argv: Sequence[str]) -> int:
    """``python -m dputils sweep ...``: 0 every point passed, 1 a point failed, 2 bad input, 130 interrupted
    (Ctrl-C: one line; points already published and the previous table stay as they were)."""
    try:
        return _cli_main(argv)
    except KeyboardInterrupt:
        _quiet_distributed()
        sys.stderr.write("\ninterrupted; the last good results are kept\n")
        return 130


def _cli_main(argv: Sequence[str]) -> int:
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    except DPValueError as exc:  # an option given twice
        sys.stderr.write(f"error: {_one_line(exc)}\n")
        return 2
    try:
        if args.workers is not None and args.workers < 1:
            raise DPValueError(f"workers must be >= 1, got {args.workers}")
        if args.workers is not None and args.scheduler is not None:
            raise DPValueError("--workers sizes the local cluster; with --scheduler the cluster has its own workers")
        if args.timeout < 1:
            raise DPValueError(f"timeout must be >= 1 second, got {args.timeout}")
        plan = plan_sweep(
            args.notebook, args.grid, profile=args.profile, name=args.name, output=args.output, root=args.root
        )
        check_same_grid(plan, args.fresh)
    except ValueError as exc:  # DPValueError, RootError, a bad profile
        sys.stderr.write(f"error: {_one_line(exc)}\n")
        return 2
    return _cli_run(args, plan)


def _cli_run(args: argparse.Namespace, plan: Plan) -> int:
    client = None
    if args.scheduler is not None:
        try:
            client = connect_scheduler(args.scheduler)
        except ImportError:
            sys.stderr.write("error: dask.distributed is not installed (pip install -e '.[sweep]')\n")
            return 2
        except DPValueError as exc:
            sys.stderr.write(f"error: {_one_line(exc)}\n")
            return 2
    try:
        out = run_sweep(plan, client, resume=args.resume, timeout=args.timeout, workers=args.workers, fresh=args.fresh)
    except DPValueError as exc:
        sys.stderr.write(f"error: {_one_line(exc)}\n")
        return 2
    except ImportError as exc:
        sys.stderr.write(f"error: {_one_line(exc)} (pip install -e '.[sweep]')\n")
        return 2
    finally:
        if client is not None:
            client.close()
    return 1 if out["failed"] else 0
