"""The papermill runner: notebooks/NAME.md -> book/methods/NAME.ipynb (+ results/NAME.json).

Each MyST source is read with jupytext and executed by papermill with the parameters of the chosen
profile (``params/<profile>.yml``, keyed by notebook stem; ``paper`` falls back to ``full`` for
notebooks it does not list). Kernels run with ``TQDM_DISABLE=1`` (no widget noise in the book) and
``DPBOOK_RESULTS_DIR`` pointing at ``results/``. Failures are reported with the notebook, the cell and the
error; the return value says whether everything passed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import yaml

from .results import repo_root

PROFILES = ("smoke", "full", "paper")


def notebook_paths(root: Path | None = None) -> list[Path]:
    """All notebook sources, sorted by name."""
    root = root or repo_root()
    return sorted((root / "notebooks").glob("*.md"))


def load_profile(profile: str, root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Parameters per notebook stem for ``profile`` (``paper`` inherits ``full`` where it is silent)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    root = root or repo_root()

    def read(name: str) -> dict[str, dict[str, Any]]:
        p = root / "params" / f"{name}.yml"
        if not p.is_file():
            return {}
        data = yaml.safe_load(p.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{p}: expected a mapping of notebook -> parameters")
        return {k: (v or {}) for k, v in data.items()}

    params = read(profile)
    if profile == "paper":
        full = read("full")
        params = {**full, **params}
    return params


def execute_one(source: Path, output: Path, parameters: dict[str, Any], timeout: int = 3600,
                results_dir: Path | None = None) -> dict[str, Any]:
    """Run one notebook; returns a report dict (``ok``, ``seconds``, ``error``, ``cell``)."""
    import jupytext
    import papermill as pm

    env_backup = dict(os.environ)
    os.environ.setdefault("TQDM_DISABLE", "1")
    if results_dir is not None:
        os.environ["DPBOOK_RESULTS_DIR"] = str(results_dir)
    os.environ.pop("MPLBACKEND", None)  # an inherited Agg backend would silence every figure
    output.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    report: dict[str, Any] = {"name": source.stem, "ok": False, "output": str(output)}
    try:
        nb = jupytext.read(source)
        for attempt in range(2):
            try:
                pm.execute_notebook(nb, str(output), parameters=parameters, kernel_name="python3",
                                    progress_bar=False, log_output=False, cwd=str(output.parent),
                                    execution_timeout=timeout, start_timeout=120)
                break
            except pm.PapermillExecutionError:
                raise
            except RuntimeError as exc:  # kernel start races (ZMQ "address in use"): retry once
                if attempt == 0 and ("kernel" in str(exc).lower() or "zmq" in str(exc).lower()):
                    continue
                raise
        _fix_input_path(output, source)
        report["ok"] = True
    except Exception as exc:  # report, never crash the batch
        report["error"] = f"{type(exc).__name__}: {getattr(exc, 'evalue', None) or exc}"
        cell = getattr(exc, "exec_count", None)
        if cell is not None:
            report["cell"] = cell
            report["error"] = f"{getattr(exc, 'ename', type(exc).__name__)}: {getattr(exc, 'evalue', '')}"
        report["traceback"] = "".join(traceback.format_exception_only(type(exc), exc))[-2000:]
        report["source"] = _failing_source(output)
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    return report


def _failing_source(output: Path) -> str | None:
    """First line of the code cell that raised, read from the executed copy (None if unavailable)."""
    try:
        import nbformat

        nb = nbformat.read(output, as_version=4)
        for c in nb.cells:
            if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.get("outputs", [])):
                lines = [ln for ln in c.source.splitlines() if ln.strip() and not ln.strip().startswith("#")]
                return lines[0][:120] if lines else c.source[:120]
    except Exception:
        return None
    return None


def _fix_input_path(output: Path, source: Path) -> None:
    """papermill stores the whole source notebook as input_path when given a NotebookNode: store the path."""
    import nbformat

    nb = nbformat.read(output, as_version=4)
    meta = nb.metadata.get("papermill", {})
    try:
        meta["input_path"] = str(source.resolve().relative_to(repo_root()))
    except ValueError:
        meta["input_path"] = str(source)
    nb.metadata["papermill"] = meta
    nbformat.write(nb, output)


def run_notebooks(profile: str = "full", only: list[str] | None = None, jobs: int = 2, timeout: int = 3600,
                  out_dir: Path | None = None, results_dir: Path | None = None) -> bool:
    """Execute notebooks; print one line per notebook and a summary; True when all passed."""
    from tqdm import tqdm

    root = repo_root()
    sources = notebook_paths(root)
    if only:
        known = {p.stem for p in sources}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise ValueError(f"only: unknown notebook(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        sources = [p for p in sources if p.stem in only]
    if not sources:
        raise ValueError("no notebooks to run (notebooks/*.md is empty)")
    params = load_profile(profile, root)
    out_dir = out_dir or root / "book" / "methods"
    results_dir = results_dir or Path(os.environ.get("DPBOOK_RESULTS_DIR", root / "results"))
    print(f"running {len(sources)} notebook(s), profile {profile}, {jobs} job(s)", file=sys.stderr)
    reports = []
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(sources)))) as pool:
        futs = {
            pool.submit(execute_one, src, out_dir / f"{src.stem}.ipynb", params.get(src.stem, {}), timeout,
                        results_dir): src.stem
            for src in sources
        }
        bar = tqdm(total=len(futs), desc="notebooks", file=sys.stderr, disable=None)
        for fut in as_completed(futs):
            rep = fut.result()
            reports.append(rep)
            bar.update(1)
            if rep["ok"]:
                tqdm.write(f"[ok]     {rep['name']:32s} {rep['seconds']:8.1f} s", file=sys.stderr)
            else:
                where = f"cell [{rep['cell']}]" if "cell" in rep else "before any cell"
                if rep.get("source"):
                    where += f" ({rep['source']})"
                tqdm.write(f"[FAILED] {rep['name']:32s} {rep['seconds']:8.1f} s  {where}: {rep['error']}",
                           file=sys.stderr)
                tqdm.write(f"         executed copy with the error: {rep['output']}", file=sys.stderr)
        bar.close()
    failed = [r for r in reports if not r["ok"]]
    print(f"{len(reports) - len(failed)} passed, {len(failed)} failed", file=sys.stderr)
    return not failed


def build_book(root: Path | None = None) -> int:
    """``jupyter-book build . -W --all`` in the repository root; returns its exit status."""
    root = root or repo_root()
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", ".", "-W", "--all"]
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    print("$ " + " ".join(cmd), file=sys.stderr)
    rc = subprocess.call(cmd, cwd=root, env=env)
    if rc == 0:
        print(f"book: {root / '_build' / 'html' / 'index.html'}", file=sys.stderr)
    return rc
