"""Running many notebooks: decide what runs (:func:`plan_runs`: the profile, the notebooks, their inputs and
``--changed``), then run it (:func:`run_plan`: a process pool, progress, records of inputs).

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import os
import shutil
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import changed as chg
from .. import publish
from .common import _plural, _rel, _say
from .execute import run_staged
from .locate import describe_failure
from .params import check_devices, check_profile, find_root, load_profile, notebook_paths, output_dirs
from .supervise import FINISHED_MARK, HEARTBEAT_S, _stop_pool, _worker_init, clean_stale_staging


@dataclass
class RunPlan:
    """What a run will do, decided before anything runs (:func:`plan_runs`).

    Attributes:
        profile, root: the profile and the book folder.
        m_dir, r_dir: where executed copies and results are published.
        to_run: the notebooks that run, in source order.
        params: each notebook's checked parameter values.
        inputs: each notebook's inputs (:func:`dputils.book.changed.chapter_inputs`), recorded after its run.
        why: why each notebook runs, or why it is reused.
        reused: the reports of the notebooks not run (``--changed`` and their inputs unchanged).
        check_seconds: the time spent deciding.
    """

    profile: str
    root: Path
    m_dir: Path
    r_dir: Path
    to_run: list[Path]
    params: dict[str, dict[str, Any]]
    inputs: dict[str, dict[str, Any]]
    why: dict[str, str]
    reused: list[dict[str, Any]] = field(default_factory=list)
    check_seconds: float = 0.0


def execute_all(
    profile: str = "full",
    only: list[str] | None = None,
    jobs: int = 2,
    timeout: int = 3600,
    out_dir: Path | None = None,
    results_dir: Path | None = None,
    root: Path | None = None,
    output: Path | str | None = None,
    heartbeat: float = HEARTBEAT_S,
    changed: bool = False,
) -> list[dict[str, Any]]:
    """Execute notebooks with atomic publishing; print progress lines; return the reports (run order, then the
    reused ones): :func:`plan_runs` (what runs, and why) then :func:`run_plan` (run it).

    Each report has ``name``, ``ok``, ``seconds``, ``output``, ``profile``, ``action`` (``"run"`` or
    ``"reused"``) and ``reason`` (why it ran, or since when its inputs are unchanged; :mod:`dputils.book.changed`),
    and on failure the keys of :func:`execute_one`. Every chapter that runs gets its record of inputs
    (:func:`dputils.book.changed.write_success` after a successful publish, else ``write_failure``); with
    ``changed`` a chapter whose record matches its inputs is not run (its last good copy and results stay)."""
    plan = plan_runs(profile, only, jobs, timeout, out_dir, results_dir, root, output, changed)
    return run_plan(plan, jobs, timeout, heartbeat)


def plan_runs(
    profile: str = "full",
    only: list[str] | None = None,
    jobs: int = 2,
    timeout: int = 3600,
    out_dir: Path | None = None,
    results_dir: Path | None = None,
    root: Path | None = None,
    output: Path | str | None = None,
    changed: bool = False,
) -> RunPlan:
    """Decide what runs, before anything runs: the notebooks (``only``), the profile's values checked against
    their ``parameters`` cells, the output folders, each notebook's inputs, and with ``changed`` which notebooks
    are reused (their record matches their inputs, and no notebook whose results they read reruns). Bad input
    is a ``ValueError``. Prints one line per reused notebook (and, with ``changed``, why each other one runs)."""
    root = find_root(root)
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if timeout < 1:
        raise ValueError(f"timeout must be >= 1 second, got {timeout}")
    params = load_profile(profile, root)
    sources = notebook_paths(root)
    if only:
        known = {p.stem for p in sources}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise ValueError(f"only: unknown notebook(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        sources = [p for p in sources if p.stem in only]
    if not sources:
        raise ValueError(f"no notebooks to run ({root / 'notebooks'} has no *.md)")
    params = check_profile(params, sources, profile)
    check_devices(params, sources, profile)
    m_dir, r_dir = output_dirs(profile, root, output)
    m_dir, r_dir = out_dir or m_dir, results_dir or r_dir

    # the inputs of each chapter (recorded after its run; with --changed, compared with the last record)
    t_check = time.perf_counter()
    kpkg = chg.kernel_package()
    if kpkg is not None and kpkg != chg.RUNNER_PACKAGE:
        _say(
            f"note: the kernels import dputils from {kpkg}, not {chg.RUNNER_PACKAGE} (which runs this command); "
            "the chapters run that code and --changed hashes it"
        )
    pkg = kpkg or chg.RUNNER_PACKAGE
    package, deps = chg.package_digests(exclude=chg.NOT_INPUTS, pkg=pkg), chg.dependency_versions()
    named = chg.package_files(root, pkg)
    inputs, why, reused, check_s = {}, {}, [], {}
    for src in sources:
        t0 = time.perf_counter()
        inputs[src.stem] = chg.chapter_inputs(
            src, params.get(src.stem, {}), profile, root, r_dir, package, deps, named_by_package=named
        )
        if changed:
            ok, why[src.stem] = chg.decide(m_dir, r_dir, src.stem, inputs[src.stem])
            if ok:
                reused.append(src.stem)
        check_s[src.stem] = time.perf_counter() - t0
    if changed:
        again = True
        while again:  # a chapter that reads the results of one that reruns reruns too
            again = False
            for name in list(reused):
                src = next(p for p in sources if p.stem == name)
                running = [o for o in chg.results_read(src) if o in inputs and o not in reused]
                if running:
                    reused.remove(name)
                    why[name] = (
                        f"reads the results of {', '.join(running)}, which rerun{'s' if len(running) == 1 else ''}"
                    )
                    again = True
    else:
        why = {src.stem: "run without --changed" for src in sources}
    t_check = time.perf_counter() - t_check
    reports: list[dict[str, Any]] = []
    for src in sources:
        if src.stem in reused:
            rec = chg.read_record(m_dir, src.stem) or {}
            reports.append(
                {
                    "name": src.stem,
                    "ok": True,
                    "action": "reused",
                    "reason": why[src.stem],
                    "seconds": round(check_s[src.stem], 2),
                    "profile": profile,
                    "output": str(m_dir / f"{src.stem}.ipynb"),
                    "last_run_seconds": rec.get("seconds"),
                    "last_run_finished": rec.get("finished"),
                }
            )
            _say(f"{src.stem}: reused ({why[src.stem]})")
    sources = [p for p in sources if p.stem not in reused]
    for src in sources:
        if changed:
            _say(f"{src.stem}: runs ({why[src.stem]})")
    return RunPlan(profile, root, m_dir, r_dir, sources, params, inputs, why, reports, t_check)


def run_plan(plan: RunPlan, jobs: int = 2, timeout: int = 3600, heartbeat: float = HEARTBEAT_S) -> list[dict[str, Any]]:
    """Run ``plan.to_run`` in a pool of ``jobs`` worker processes (largest source first), each notebook staged and
    published only if it passed (:func:`dputils.book.runner.execute.run_staged`), with progress lines, a heartbeat
    every ``heartbeat`` seconds and each chapter's record of inputs; Ctrl-C stops the pool at once and publishes
    nothing more. Returns the reports of the notebooks run, then ``plan.reused``."""
    profile, root, m_dir, r_dir = plan.profile, plan.root, plan.m_dir, plan.r_dir
    sources, params, inputs, why = plan.to_run, plan.params, plan.inputs, plan.why
    reports, reused, t_check = plan.reused, [r["name"] for r in plan.reused], plan.check_seconds
    if not sources:
        _say(f"nothing to run: {_plural(len(reused), 'notebook')} reused (inputs checked in {t_check:.1f} s)")
        return reports

    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    staging = root / "_build" / "staging" / run_id
    for d in clean_stale_staging(staging.parent):
        _say(f"removed the staging folder of a killed run: {_rel(d, root)}")
    for d in publish.clean_leftovers(m_dir, r_dir):
        _say(f"removed the leftover of a killed publish: {_rel(d, root)}")
    n, workers = len(sources), max(1, min(jobs, len(sources)))
    _say(
        f"running {_plural(n, 'notebook')} (profile {profile}, {_plural(workers, 'job')}): "
        f"notebooks -> {_rel(m_dir, root)}, results -> {_rel(r_dir, root)}"
        + (f"; {len(reused)} reused" if reused else "")
    )
    t_all = time.perf_counter()
    ran: list[dict[str, Any]] = []
    # largest source first: with parallel jobs the long chapters (also the largest files) start at once
    # instead of after the short ones, so the wall time is close to the longest chapter's
    pending = sorted(sources, key=lambda p: p.stat().st_size, reverse=True) if workers > 1 else list(sources)
    started: dict[Future, tuple[str, float, int]] = {}
    last_beat = time.perf_counter()
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(os.getpid(),))
    try:
        while pending or started:
            while pending and len(started) < workers:
                src = pending.pop(0)
                i = n - len(pending)
                _say(f"[start  {i}/{n}] {src.stem}")
                fut = pool.submit(
                    run_staged,
                    src,
                    m_dir,
                    r_dir,
                    params.get(src.stem, {}),
                    timeout,
                    staging,
                    root,
                    profile,
                    inputs=inputs[src.stem],
                )
                started[fut] = (src.stem, time.perf_counter(), i)
            done, _ = wait(list(started), timeout=min(heartbeat, 60.0), return_when=FIRST_COMPLETED)
            now = time.perf_counter()
            for fut in done:
                name, t0, i = started.pop(fut)
                try:
                    rep = fut.result()
                except Exception as exc:  # the worker died: report, keep going
                    rep = {
                        "name": name,
                        "ok": False,
                        "error": f"{type(exc).__name__}: {exc}",
                        "output": str(staging / name),
                        "seconds": round(now - t0, 2),
                    }
                rep.update(action="run", reason=why[name], profile=profile)
                _record(chg, m_dir, r_dir, name, inputs[name], rep)
                ran.append(rep)
                if rep["ok"]:
                    _say(f"[ok     {i}/{n}] {name:32s} {rep['seconds']:8.1f} s")
                else:
                    _say(f"[FAILED {i}/{n}] {name:32s} {rep['seconds']:8.1f} s")
                    for line in describe_failure(rep, root):
                        _say(f"         {line}")
            if not done and now - last_beat >= heartbeat and started:
                last_beat = now
                busy = ", ".join(f"{nm} ({now - t0:.0f} s)" for nm, t0, _ in started.values())
                _say(f"         still running: {busy}")
    except KeyboardInterrupt:
        _stop_pool(pool)
        shutil.rmtree(staging, ignore_errors=True)  # the chapters still running publish nothing
        raise
    except BaseException:
        pool.shutdown(wait=True)
        raise
    pool.shutdown(wait=True)
    try:
        staging.rmdir()  # empty when everything passed
        staging.parent.rmdir()
    except OSError:
        if staging.is_dir():  # failed notebooks' copies stay for inspection; not a killed run's leftovers
            (staging / FINISHED_MARK).touch()
    failed = [r for r in ran if not r["ok"]]
    _say(
        f"{len(ran) - len(failed)} passed, {len(failed)} failed in {time.perf_counter() - t_all:.1f} s"
        + (f"; {len(reused)} reused" if reused else "")
    )
    return ran + reports


def _record(chg: Any, m_dir: Path, r_dir: Path, name: str, inputs: dict[str, Any], rep: dict[str, Any]) -> None:
    """Write the chapter's record after its run (never raises: a record that cannot be written means a rerun)."""
    try:
        if rep["ok"] and rep.get("recorded"):
            return  # published with the copy and its results
        if rep["ok"]:
            chg.write_success(m_dir, r_dir, name, inputs, rep.get("results_files", []), rep["seconds"])
        else:
            chg.write_failure(m_dir, name, rep.get("error", "failed"))
    except (OSError, ValueError) as exc:
        _say(f"         {name}: its record of inputs could not be written ({exc}); the next --changed reruns it")
        try:
            chg.record_path(m_dir, name).unlink()
        except OSError:
            pass


def run_notebooks(
    profile: str = "full",
    only: list[str] | None = None,
    jobs: int = 2,
    timeout: int = 3600,
    out_dir: Path | None = None,
    results_dir: Path | None = None,
    root: Path | None = None,
    output: Path | str | None = None,
) -> bool:
    """Execute notebooks (see ``execute_all``); True when all passed."""
    reports = execute_all(profile, only, jobs, timeout, out_dir, results_dir, root, output)
    return all(r["ok"] for r in reports)
