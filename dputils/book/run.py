"""The papermill runner: notebooks/NAME.md -> METHODS/NAME.ipynb (+ RESULTS/NAME.json).

Each MyST source is read with jupytext and executed by papermill with the parameters of the chosen
profile (``params/<profile>.yml``, keyed by notebook stem; ``paper`` falls back to ``full`` for
notebooks it does not list). Kernels run with ``TQDM_DISABLE=1`` (no widget noise in the book) and
their "running over TCP without encryption" warning silenced (``--IPKernelApp.log_level=ERROR``).

Where the outputs go (``python -m dputils run``):

* ``full`` (the book's profile) writes the book's copies: ``book/methods/NAME.ipynb`` and
  ``results/NAME.json``.
* ``smoke`` writes ``_build/smoke/methods/`` and ``_build/smoke/results/``, and ``paper`` writes
  ``_build/paper/methods/`` and ``_build/paper/results/``: a quick check or a long paper-scale run never
  replaces what the book shows. ``--output DIR`` sends any profile to ``DIR/methods/`` and
  ``DIR/results/``; ``--output book`` sends it to the book's places (to publish a paper-scale run).
* ``python -m dputils book`` executes into the book's places and builds the book (``_build/html``); at another
  profile (``book --profile smoke``) it executes into that profile's places and builds that profile's book from
  them in ``_build/<profile>/site/`` (HTML in ``_build/<profile>/site/_build/html``), each page saying which
  profile its numbers come from (:mod:`dputils.book.profilemark`), the book's own copies untouched.
  ``book --build-only`` runs nothing and builds from the copies in place.

Runs are atomic per notebook: each notebook executes into ``_build/staging/<run-id>/<NAME>/`` (its
results in ``results/`` there, through ``DPBOOK_RESULTS_DIR``), and the executed copy and its results
are moved into place with ``os.replace`` only when the whole notebook succeeded. A failed run leaves the
last good copy and results untouched and keeps its own executed copy in staging for inspection; the
report gives the notebook, the code cell, the source line (``notebooks/NAME.md:LINE``) and the exception.
``results.load`` inside a staged notebook falls back to the published results (``DPBOOK_RESULTS_PUBLISHED``).
Publishing is one step (:mod:`dputils.book.publish`): the executed copy, its results and its record of inputs
are moved into a new generation folder (``RESULTS/.gen/NAME/g.PID.NS/``) that the published names link to
through one ``current`` link, and that link is replaced with one rename; a reader sees the old three or the new
three, never a mix, whenever the publisher is killed. Leftovers of killed publishes are removed by the next run.
A pool worker whose run was killed
(``kill -9``) notices within a second, publishes nothing and exits with its kernel; staging folders of
killed runs (their process gone) are removed when the next run starts.

Rebuild only what changed (``--changed``): every chapter that runs leaves a record of its inputs beside its
executed copy (``.NAME.inputs.json``: hashes of the notebook, the profile's values, the ``dputils`` sources that
the kernels import, the data files it reads, the results of chapters it reads, the key dependencies' versions; see
:mod:`dputils.book.changed`), published with the copy and its results; with ``--changed`` a chapter whose inputs match its
record, and whose published copy and results are still the recorded ones, is reused, not run, and the output
says why each other chapter ran. A chapter whose last run failed always reruns.

Machine-readable runs: ``run`` and ``book`` write a JSON report (:func:`run_report`: each chapter's status,
seconds, run or reused and why, the failing cell and line; totals; for ``book`` the build's and checks' exit
codes) to ``_build/<profile>/report.json``, to ``DIR/report.json`` for ``run --output DIR``, or to ``--report
PATH``; strict JSON, written atomically, also when a chapter failed.

Kernels shut down without the SIGINT that jupyter_client sends first (:func:`quiet_shutdown_kernel_manager`):
it could land while the kernel answered papermill's last request and log "KeyboardInterrupt caught in kernel"
in a green run.

Each profile's values for a notebook are checked against the notebook's ``parameters`` cell before
anything runs (names declared, values of the declared types: :func:`check_parameters`).

The executed copy shows the parameters once: the ``parameters`` cell is rewritten with this run's values
(values set by the profile say ``[default ...]``) and papermill's ``injected-parameters`` cell, which
still runs, is tagged ``remove-cell``.

The repository root (the book folder) is ``--root``, else the checkout or book folder holding the working
directory, else the checkout above the imported ``dputils`` package, else a folder made from the sources shipped in
the wheel (``$DPBOOK_HOME`` or ``~/dpbook``, see :mod:`dputils.book.booksources`); it holds ``notebooks/`` and ``params/``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import errno
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import yaml

from ..cli.parse import Parser as _Parser  # one line on errors, no abbreviations, an option given twice refused
from ..errors import DPValueError
from ..jsonio import write_text_atomic
from . import bookcheck, booksources, profilemark, publish, runlock, scorecard
from . import changed as chg
from .publish import pid_alive
from .results import repo_root
from .scorecard import write_page

#: A parameter name: a Python identifier.
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

PROFILES = ("smoke", "full", "paper")
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]  # silences "Kernel is running over TCP without encryption"
HEARTBEAT_S = 300.0
#: exit status of a run stopped because another holds the lock of its outputs (BSD's EX_TEMPFAIL: try again)
LOCK_BUSY_EXIT = 75


class RootError(ValueError):
    """No repository root with notebooks/ and params/ could be found."""


def _is_root(p: Path) -> bool:
    return (p / "notebooks").is_dir() and (p / "params").is_dir()


def find_root(explicit: Path | str | None = None) -> Path:
    """The book folder (see :mod:`dputils.book.booksources`): ``explicit``, else the checkout or book folder around the
    cwd, else the checkout holding the imported package, else one made from the sources shipped in the wheel."""

    if explicit is not None:
        p = Path(explicit).expanduser().resolve()
        if p.exists() and not p.is_dir():
            raise RootError(f"root: {p} is a file, not a book folder")
        if not _is_root(p):
            if booksources.packaged_sources() is None:
                raise RootError(f"root: {p} has no notebooks/ and params/ folders")
            p = _materialize(p)
        return p
    here = repo_root()
    if _is_root(here):
        return here
    pkg = Path(__file__).resolve().parents[2]
    if _is_root(pkg):
        return pkg
    if booksources.packaged_sources() is not None:
        try:
            home = booksources.default_home()
        except (RuntimeError, KeyError, OSError) as exc:  # no usable HOME
            raise RootError(
                f"no book folder: the home folder is unusable ({exc}); set DPBOOK_HOME or pass --root"
            ) from None
        return _materialize(home)
    raise RootError(
        f"no repository root found (neither {Path.cwd()} nor {pkg} holds notebooks/ and params/); pass --root PATH"
    )


def _materialize(p: Path) -> Path:
    """:func:`dputils.book.booksources.materialize`, its failures (a file in the way, a read-only folder) as one
    line."""
    try:
        return booksources.materialize(p)
    except OSError as exc:
        where = exc.filename or p
        raise RootError(
            f"book folder {p}: cannot be made ({where}: {exc.strerror or exc}); set DPBOOK_HOME or pass --root"
        ) from None


def notebook_paths(root: Path | None = None) -> list[Path]:
    """All notebook sources, sorted by name."""
    root = root or find_root()
    return sorted((root / "notebooks").glob("*.md"))


def load_profile(profile: str, root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Parameters per notebook stem for ``profile`` (``paper`` inherits ``full`` where it is silent)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    root = root or find_root()

    def read(name: str) -> dict[str, dict[str, Any]]:
        p = root / "params" / f"{name}.yml"
        if not p.is_file():
            return {}
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise ValueError(f"{p}: not valid YAML{at} ({getattr(exc, 'problem', None) or 'parse error'})") from None
        except (UnicodeDecodeError, RecursionError):
            raise ValueError(f"{p}: not a readable YAML text file") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p}: expected a mapping of notebook -> parameters")
        out = {}
        for k, v in data.items():
            if v is not None and not isinstance(v, dict):
                raise ValueError(f"{p}: {k} must map parameter names to values, got {type(v).__name__}")
            out[k] = v or {}
        return out

    params = read(profile)
    if profile == "paper":
        full = read("full")
        params = {**full, **params}
    return params


def check_output_folder(output: Path) -> None:
    """Refuse, before anything runs, an ``--output DIR`` that cannot be a folder: an existing file, a path under a
    file, or a folder that cannot be written, and likewise ``DIR/methods`` and ``DIR/results``, where the run
    publishes (one line, a ``ValueError``)."""
    base = output.expanduser()
    base = base if base.is_absolute() else Path.cwd() / base
    p = base
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        where = "is a file" if p == base else f"is under {p}, a file"
        raise ValueError(f"--output: {base} {where}; give a folder (DIR/methods and DIR/results are written there)")
    if p.is_dir() and not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"--output: cannot write in {p} (permission denied)")
    for sub in (base / "methods", base / "results"):  # where publishing writes: checked now, not after the run
        if sub.exists() and not sub.is_dir():
            raise ValueError(f"--output: {sub} is a file; the run publishes its notebooks and results in folders there")
        if sub.is_dir() and not os.access(sub, os.W_OK | os.X_OK):
            raise ValueError(f"--output: cannot write in {sub} (permission denied)")


def output_dirs(profile: str, root: Path, output: Path | str | None = None) -> tuple[Path, Path]:
    """(executed notebooks folder, results folder) for a ``run`` of ``profile`` (see the module docstring)."""
    if output is not None and str(output) == "book":
        return root / "book" / "methods", root / "results"
    if output is not None:
        base = Path(output).expanduser()
        base = base if base.is_absolute() else Path.cwd() / base
        return base / "methods", base / "results"
    if profile == "full":
        return root / "book" / "methods", root / "results"
    return root / "_build" / profile / "methods", root / "_build" / profile / "results"


# --------------------------------------------------------------------------- executing one notebook


def execute_one(
    source: Path,
    output: Path,
    parameters: dict[str, Any],
    timeout: int = 3600,
    results_dir: Path | None = None,
    root: Path | None = None,
    profile: str | None = None,
    published_results: Path | None = None,
    link_dir: Path | None = None,
) -> dict[str, Any]:
    """Run one notebook into ``output`` (results into ``results_dir``); never raises. ``link_dir``: the folder
    the copy will be published in (default ``output``'s), for its download links.

    Returns a report dict: ``name``, ``ok``, ``seconds``, ``output`` and, on failure, ``error`` (the
    exception line), ``cell`` (the execution count), ``code_cell`` (1-based among the source's code
    cells), ``line`` (in the cell), ``source`` (that source line), ``md_line`` (``notebooks/NAME.md:N``)
    and ``traceback``. This does not stage: ``run_notebooks`` wraps it to publish atomically.
    """
    import jupytext
    import papermill as pm

    env_backup = dict(os.environ)
    os.environ.setdefault("TQDM_DISABLE", "1")
    if results_dir is not None:
        os.environ["DPBOOK_RESULTS_DIR"] = str(results_dir)
    if published_results is not None:
        os.environ["DPBOOK_RESULTS_PUBLISHED"] = str(published_results)
    os.environ.pop("MPLBACKEND", None)  # an inherited Agg backend would silence every figure
    output.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    report: dict[str, Any] = {"name": source.stem, "ok": False, "output": str(output)}
    try:
        nb = jupytext.read(source)
        for attempt in range(2):
            try:
                pm.execute_notebook(
                    nb,
                    str(output),
                    parameters=parameters,
                    kernel_name="python3",
                    progress_bar=False,
                    log_output=False,
                    cwd=str(output.parent),
                    execution_timeout=timeout,
                    start_timeout=120,
                    extra_arguments=list(KERNEL_ARGS),
                    kernel_manager_class=quiet_shutdown_kernel_manager(),
                )
                break
            except pm.PapermillExecutionError:
                raise
            except Exception as exc:  # kernel start races (ZMQ "address in use", kernel died on start): retry once
                if attempt == 0 and kernel_start_race(exc):
                    continue
                raise
        _finish_executed_copy(output, source, root, profile, link_dir)
        report["ok"] = True
    except Exception as exc:  # report, never crash the batch
        report["error"] = _first_line(f"{type(exc).__name__}: {getattr(exc, 'evalue', None) or exc}")
        cell = getattr(exc, "exec_count", None)
        if cell is not None:
            report["cell"] = cell
            report["error"] = _first_line(f"{getattr(exc, 'ename', type(exc).__name__)}: {getattr(exc, 'evalue', '')}")
        report["traceback"] = "".join(traceback.format_exception_only(type(exc), exc))[-2000:]
        if _is_timeout(exc):
            report["error"] = (
                f"CellTimeoutError: the cell ran past the timeout of {timeout} s (--timeout) and was stopped"
            )
            report["traceback"] = report["error"]
            report.update(timeout_location(output, source))
        else:
            report.update(failure_location(output, source))
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    report["seconds"] = round(time.perf_counter() - t0, 2)
    return report


_QUIET_KM: type | None = None


def quiet_shutdown_kernel_manager() -> type:
    """jupyter_client's ``AsyncKernelManager`` without the SIGINT it sends before every shutdown.

    ``shutdown_kernel`` interrupts the kernel first, then asks it to shut down. papermill's last message is a
    ``kernel_info`` request, and it shuts the kernel down as soon as the reply arrives: ipykernel installs
    Python's SIGINT handler while it handles a message and restores "ignore" only after sending the reply,
    so on a loaded machine the interrupt can land in between, and the kernel logs ``ERROR | KeyboardInterrupt
    caught in kernel.`` in a run where every cell passed. This manager skips the interrupt during a shutdown
    only: the shutdown request still ends an idle kernel, one still busy (a cell timed out) gets SIGTERM then
    SIGKILL after ``shutdown_wait_time`` as before, and an interrupt asked for outside a shutdown
    (``interrupt_kernel()``) is still sent."""
    global _QUIET_KM
    if _QUIET_KM is None:
        from jupyter_client.manager import AsyncKernelManager

        class QuietShutdownKernelManager(AsyncKernelManager):
            async def _async_interrupt_kernel(self) -> None:
                if getattr(self, "shutting_down", False):
                    return
                await super()._async_interrupt_kernel()

            interrupt_kernel = _async_interrupt_kernel

        _QUIET_KM = QuietShutdownKernelManager
    return _QUIET_KM


def kernel_start_race(exc: BaseException) -> bool:
    """True for the known failure of kernels started in parallel: a ZMQ port taken between the kernel
    manager picking it and the kernel binding it ("Address already in use"), or a kernel that died before
    answering (papermill and snakemake report both). ``execute_one`` retries such a start once."""
    text = f"{type(exc).__name__} {exc}".lower()
    if "address already in use" in text or getattr(exc, "errno", None) == errno.EADDRINUSE:
        return True
    return isinstance(exc, RuntimeError) and ("kernel" in text or "zmq" in text)


def _first_line(text: str, limit: int = 300) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    line = lines[0] if lines else str(text).strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FRAME = re.compile(r"^\s*Cell In\s*\[(\d+)\],\s*line (\d+)", re.M)
_ARROW = re.compile(r"^\s*-+>\s*(\d+)", re.M)


def failure_location(executed: Path, source: Path | None = None) -> dict[str, Any]:
    """Where the executed copy failed: execution count, code cell, line in the cell, source line, md line.

    The line comes from IPython's traceback of the failing cell: the innermost ``Cell In[N], line L`` frame
    of that cell (else its first ``----> L`` marker). Keys that cannot be found are left out.
    """
    out: dict[str, Any] = {}
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
    except Exception:
        return out
    k = 0
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        tags = c.metadata.get("tags", [])
        if "injected-parameters" not in tags:
            k += 1
        errors = [o for o in c.get("outputs", []) if o.get("output_type") == "error"]
        pm_meta = c.metadata.get("papermill", {})
        if not errors and not pm_meta.get("exception") and pm_meta.get("status") not in ("failed", "running"):
            continue
        out["code_cell"] = k
        if c.get("execution_count") is not None:
            out["cell"] = c["execution_count"]
        src_lines = c.source.splitlines()
        line = None
        if errors:
            err = errors[0]
            tb = _ANSI.sub("", "\n".join(err.get("traceback", [])))
            frames = [(int(n), int(ln)) for n, ln in _FRAME.findall(tb)]
            mine = [ln for n, ln in frames if c.get("execution_count") is None or n == c["execution_count"]]
            if mine:
                line = mine[-1]
            else:
                arrow = _ARROW.search(tb)
                line = int(arrow.group(1)) if arrow else None
            out["error"] = _first_line(f"{err.get('ename', 'Error')}: {err.get('evalue', '')}")
        if line is not None and 1 <= line <= len(src_lines):
            out["line"] = line
            out["source"] = src_lines[line - 1].strip()[:200]
        else:
            code = [ln for ln in src_lines if ln.strip() and not ln.strip().startswith("#")]
            if code:
                out["source"] = code[0].strip()[:200]
        if source is not None:
            first = _md_cell_line(source, k, src_lines)
            if first is not None:
                out["md_line"] = first + (out.get("line", 1) - 1)
        break
    return out


def _is_timeout(exc: BaseException) -> bool:
    """A cell that ran past the execution timeout (nbclient's ``CellTimeoutError``, a ``TimeoutError``)."""
    return type(exc).__name__ == "CellTimeoutError" or isinstance(exc, TimeoutError)


def timeout_location(executed: Path, source: Path | None = None) -> dict[str, Any]:
    """Where a run stopped by the cell timeout was: the last code cell that papermill started (it records a
    ``start_time`` for each cell it starts and none for those after), with the keys of :func:`failure_location`
    except ``line`` (which line was running is not known; ``source`` and ``md_line`` give the cell's first line of
    code)."""
    out: dict[str, Any] = {}
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
    except Exception:
        return out
    k, found = 0, None
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        if "injected-parameters" not in c.metadata.get("tags", []):
            k += 1
        if (c.metadata.get("papermill") or {}).get("start_time"):
            found = (k, c)
    if found is None:
        return out
    k, c = found
    out["code_cell"] = k
    if c.get("execution_count") is not None:
        out["cell"] = c["execution_count"]
    src_lines = c.source.splitlines()
    code = [(i, ln) for i, ln in enumerate(src_lines, 1) if ln.strip() and not ln.strip().startswith("#")]
    if code:  # the line it was running is not known: the cell's first line of code, no line number
        out["source"] = code[0][1].strip()[:200]
    if source is not None:
        start = _md_cell_line(source, k, src_lines)
        if start is not None:
            out["md_line"] = start + (code[0][0] - 1 if code else 0)
    return out


class _NoTimeoutEcho(logging.Filter):
    """Drops papermill's "Timeout waiting for execute reply" log line: the run's report says it once, with the
    cell."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout waiting for execute reply")


logging.getLogger("papermill").addFilter(_NoTimeoutEcho())


def _md_cell_line(source: Path, k: int, src_lines: list[str]) -> int | None:
    """1-based line of the first source line of the k-th code cell of a MyST file (None if not found)."""
    try:
        md = source.read_text().splitlines()
    except OSError:
        return None
    fences = [i for i, ln in enumerate(md) if ln.startswith("```{code-cell}")]
    if not 1 <= k <= len(fences) or not src_lines:
        return None
    start = fences[k - 1] + 1
    end = fences[k] if k < len(fences) else len(md)
    n = len(src_lines)
    for j in range(start, end - n + 1):
        if md[j : j + n] == src_lines:
            return j + 1
    return None


def _finish_executed_copy(
    output: Path, source: Path, root: Path | None, profile: str | None, link_dir: Path | None = None
) -> None:
    """Store the source path as input_path (papermill stores the whole notebook) and show parameters once."""
    import nbformat

    nb = nbformat.read(output, as_version=4)
    meta = nb.metadata.get("papermill", {})
    try:
        meta["input_path"] = str(source.resolve().relative_to((root or find_root()).resolve()))
    except (ValueError, RootError):
        meta["input_path"] = str(source)
    nb.metadata["papermill"] = meta
    if profile is not None:
        nb.metadata.setdefault("dputils", {})["profile"] = profile
    profilemark.mark_profile(nb, profile)
    merge_parameter_cells(nb, profile)
    add_download_cell(nb, output.name, source, link_dir or output.parent)
    nbformat.write(nb, output)


def add_download_cell(nb: Any, nb_name: str, source: Path, folder: Path) -> None:
    """Append a short closing section that offers the executed notebook and its MyST source for download
    (Sphinx's ``{download}`` role copies both into the built book) and says how to rerun the chapter."""
    import nbformat

    name = source.stem
    rel_src = Path(os.path.relpath(source.resolve(), folder.resolve())).as_posix()
    text = (
        "## Run this chapter yourself\n\n"
        f"Download the {{download}}`executed notebook (.ipynb) <{nb_name}>` or its "
        f"{{download}}`MyST source (.md) <{rel_src}>`. In a checkout of the repository, "
        f"`python -m dputils run --only {name}` reruns it with the book's parameters, "
        f"`--profile smoke` gives a quick version, and papermill takes your own values "
        "(see the README)."
    )
    nb.cells = [c for c in nb.cells if not c.get("metadata", {}).get("dputils_download")]
    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata["dputils_download"] = True
    nb.cells.append(cell)


def _simple_assignments(tree: ast.Module) -> dict[str, ast.expr] | None:
    """name -> value node of a cell made only of ``name = value`` / ``name: T = value`` (None otherwise)."""
    out: dict[str, ast.expr] = {}
    for st in tree.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            out[st.target.id] = st.value
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            out[st.targets[0].id] = st.value
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue
        else:
            return None
    return out


def merge_parameter_cells(nb: Any, profile: str | None = None) -> bool:
    """Show the parameters of this run once: fold papermill's injected cell into the ``parameters`` cell.

    Values that the injected cell changes are written into the ``parameters`` cell (keeping each line's
    comment, which gains ``[default OLD]``), and the injected cell is tagged ``remove-cell`` (it still ran;
    the book hides it). If the ``parameters`` cell is not plain assignments of literal values (a value
    computed from another parameter would show the override, not what ran), the injected cell stays visible
    and the ``parameters`` cell is tagged ``remove-cell`` instead. Returns True when the cells were merged.
    """
    cells = nb.cells
    pi = next(
        (i for i, c in enumerate(cells) if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])), None
    )
    ii = next(
        (
            i
            for i, c in enumerate(cells)
            if c.cell_type == "code" and "injected-parameters" in c.metadata.get("tags", [])
        ),
        None,
    )
    if ii is None:
        return False

    def tag(cell: Any, t: str) -> None:
        tags = list(cell.metadata.get("tags", []))
        if t not in tags:
            tags.append(t)
        cell.metadata["tags"] = tags

    injected = cells[ii]
    if pi is None:
        return False
    params = cells[pi]
    try:
        p_tree = ast.parse(params.source)
        i_tree = ast.parse(injected.source)
    except SyntaxError:
        tag(params, "remove-cell")
        return False
    declared = _simple_assignments(p_tree)
    new = _simple_assignments(i_tree)

    def literal(node: ast.expr) -> bool:
        try:
            ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True

    # a value computed from another parameter (m = 2 * n) would show the override, not what ran: no merge
    if declared is None or new is None or not all(literal(v) for v in declared.values()):
        tag(params, "remove-cell")
        return False
    lines = [ln.encode() for ln in params.source.split("\n")]
    i_src = injected.source
    changed, extra = [], []
    for name, node in new.items():
        text = ast.get_source_segment(i_src, node) or ""
        if name not in declared:
            extra.append(f"{name} = {text}  # set by this run; not a declared parameter")
            continue
        old = declared[name]
        if ast.dump(old) == ast.dump(node):
            continue
        changed.append((old, text))
    for old, text in sorted(changed, key=lambda t: (t[0].lineno, t[0].col_offset), reverse=True):
        a, b = old.lineno - 1, old.end_lineno - 1  # type: ignore[operator]
        if a == b:
            old_text = lines[a][old.col_offset : old.end_col_offset]
        else:
            old_text = b" ".join([lines[a][old.col_offset :], *lines[a + 1 : b], lines[b][: old.end_col_offset]])
        old_s = " ".join(old_text.decode().split())
        old_s = old_s if len(old_s) <= 60 else old_s[:57] + "..."
        head, tail = lines[a][: old.col_offset], lines[b][old.end_col_offset :]
        note = f"[default {old_s}]"
        tail_s = tail.decode()
        tail_s = tail_s.rstrip() + f" {note}" if "#" in tail_s else tail_s.rstrip() + f"  # {note}"
        lines[a : b + 1] = [head + text.encode() + tail_s.encode()]
    if changed or extra:
        head = f"# Parameters of this run{f' (profile {profile})' if profile else ''}"
        head += "; values the run set show [default ...]" if changed else ""
        src = [head] + [ln.decode() for ln in lines] + extra
        params.source = "\n".join(src).rstrip("\n")
    tag(injected, "remove-cell")
    params.metadata.setdefault("dputils", {})["shows_injected_parameters"] = True
    return True


# --------------------------------------------------------------------------- staging and publishing


#: The pid of the process that started this pool worker (set by :func:`_watch_owner`); None outside pools.
_OWNER: int | None = None


def owner_gone() -> bool:
    """True in a pool worker whose starting run has died (the worker was re-parented)."""
    return _OWNER is not None and os.getppid() != _OWNER


def _kill_descendants(me: int | None = None) -> None:
    """SIGKILL the children of ``me`` (default this process) and their children (the notebook kernels), read from
    /proc."""
    import signal

    me = os.getpid() if me is None else me
    parents: dict[int, int] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            stat_text = (d / "stat").read_text()
            parents[int(d.name)] = int(stat_text.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    mine, frontier = set(), {me}
    while frontier:
        kids = {pid for pid, pp in parents.items() if pp in frontier and pid not in mine}
        mine |= kids
        frontier = kids
    for pid in mine:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _worker_init(owner: int) -> None:
    """Pool initializer: Ctrl-C is the run's to handle (:func:`_stop_pool`), not each worker's (a traceback per
    worker); then :func:`_watch_owner`."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_owner(owner)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """End a pool at once (Ctrl-C): SIGKILL each worker's kernels, then the worker; nothing they ran is published."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        _kill_descendants(proc.pid)
        proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def _watch_owner(owner: int, interval: float = 0.5) -> None:
    """Pool initializer: remember the run's pid and start a daemon thread that, once that process is gone
    (``kill -9``), kills this worker's kernels and ends the worker without publishing anything."""
    global _OWNER
    _OWNER = owner

    def watch() -> None:
        while not owner_gone():
            time.sleep(interval)
        _kill_descendants()
        os._exit(1)

    threading.Thread(target=watch, name="dputils-owner-watch", daemon=True).start()


_RUN_ID = re.compile(r"^\d{8}-\d{6}-(\d+)$")
FINISHED_MARK = ".finished"


def clean_stale_staging(staging_root: Path) -> list[Path]:
    """Remove the staging folders (``_build/staging/<date>-<time>-<pid>``) of runs that were killed: their
    process is gone and they never marked themselves finished. Folders of live runs, and of finished runs
    (they keep failed notebooks' copies for inspection), stay. Returns the folders removed."""
    removed = []
    for d in sorted(staging_root.glob("*")):
        m = _RUN_ID.match(d.name)
        if not m or not d.is_dir() or (d / FINISHED_MARK).exists():
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or pid_alive(pid):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def run_staged(
    source: Path,
    methods_dir: Path,
    results_dir: Path,
    parameters: dict[str, Any],
    timeout: int,
    staging: Path,
    root: Path,
    profile: str | None = None,
    replace_results: bool = False,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Execute into ``staging/NAME/`` and publish the copy and its results (:func:`dputils.book.publish.publish`, one
    step) only if the notebook passed, and only while the run that started this worker is alive. ``replace_results``:
    the results folder belongs to this notebook alone (a sweep point), so result files the new run did not write
    are removed in the same publish. ``inputs``: the chapter's inputs (:func:`dputils.book.changed.chapter_inputs`),
    whose record is then published with the copy and its results (the report says ``recorded``)."""
    name = source.stem
    stage = staging / name
    if stage.exists():
        shutil.rmtree(stage)
    stage_results = stage / "results"
    stage_results.mkdir(parents=True)
    staged_nb = stage / f"{name}.ipynb"
    report = execute_one(
        source,
        staged_nb,
        parameters,
        timeout,
        results_dir=stage_results,
        root=root,
        profile=profile,
        published_results=results_dir,
        link_dir=methods_dir,
    )
    if not report["ok"]:
        report["output"] = str(staged_nb)
        return report
    if owner_gone():
        report.update(
            ok=False, error=f"not published: the run that started it (pid {_OWNER}) is gone", output=str(staged_nb)
        )
        return report
    new = sorted(stage_results.glob("*.json"))

    def record(nb: Path, files: dict[str, Path]) -> None:
        chg.write_success_at(nb, files, inputs or {}, report["seconds"])

    try:
        publish.publish(
            name,
            methods_dir,
            results_dir,
            staged_nb,
            new,
            record=record if inputs is not None else None,
            replace_results=replace_results,
        )
        shutil.rmtree(stage, ignore_errors=True)
    except OSError as exc:
        report.update(ok=False, error=f"publishing failed (nothing replaced): {exc}", output=str(staged_nb))
        return report
    report["recorded"] = inputs is not None
    report["output"] = str(methods_dir / f"{name}.ipynb")
    report["results_files"] = [f.name for f in new]
    return report


# --------------------------------------------------------------------------- running many


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _rel(p: Path | str, root: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)


def failure_where(rep: dict[str, Any], notebook: str) -> str:
    """The one description of where a notebook failed, shared by ``run`` and ``sweep``: ``NOTEBOOK:MD_LINE, code
    cell K, In [n], line L: SOURCE LINE`` with the parts :func:`failure_location` found (``NOTEBOOK (before any
    cell)`` when none)."""
    parts = []
    if "md_line" in rep:
        parts.append(f"{notebook}:{rep['md_line']}")
    if "code_cell" in rep:
        parts.append(f"code cell {rep['code_cell']}")
    if "cell" in rep:
        parts.append(f"In [{rep['cell']}]")
    if "line" in rep:
        parts.append(f"line {rep['line']}")
    where = ", ".join(parts) if parts else f"{notebook} (before any cell)"
    return f"{where}: {rep['source'].strip()}" if rep.get("source") else where


def describe_failure(rep: dict[str, Any], root: Path | None = None) -> list[str]:
    """The lines of a failure report: where (:func:`failure_where`) with the source line, the error, the executed
    copy."""
    return [
        failure_where(rep, f"notebooks/{rep['name']}.md"),
        rep.get("error", "unknown error"),
        f"executed copy with the error: {_rel(rep['output'], root) if root else rep['output']}",
    ]


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
    reused ones).

    Each report has ``name``, ``ok``, ``seconds``, ``output``, ``profile``, ``action`` (``"run"`` or
    ``"reused"``) and ``reason`` (why it ran, or since when its inputs are unchanged; :mod:`dputils.book.changed`),
    and on failure the keys of :func:`execute_one`. Every chapter that runs gets its record of inputs
    (:func:`dputils.book.changed.write_success` after a successful publish, else ``write_failure``); with
    ``changed`` a chapter whose record matches its inputs is not run (its last good copy and results stay)."""

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


def check_profile(
    params: dict[str, dict[str, Any]], sources: Sequence[Path], profile: str
) -> dict[str, dict[str, Any]]:
    """The profile's values for each notebook in ``sources``, checked against the notebook's ``parameters``
    cell with :func:`check_parameters` (the sweep's check): a name the notebook does not declare,
    or a value not of the declared type (``steps: 'abc'``, ``.nan``), is refused before anything runs."""

    out = dict(params)
    for src in sources:
        values = params.get(src.stem)
        if not values:
            continue
        where = f"params/{profile}.yml: {src.stem}"
        try:
            declared = declared_parameters(src)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        out[src.stem] = check_parameters(values, declared, src, where)
    return out


def check_devices(params: dict[str, dict[str, Any]], sources: Sequence[Path], profile: str) -> None:
    """Refuse, before anything runs, a ``paper`` run of a chapter that the profile sends to a device (a ``*_device``
    parameter: ``auto`` or ``cuda``) when no CUDA device is visible: the papers' scale on a CPU takes days (the gauss
    chapter's WideResNet-16-4 for 208 epochs). One line naming the chapter, the parameter and the way out."""
    if profile != "paper":
        return
    wants = [
        (src.stem, k, v)
        for src in sources
        for k, v in (params.get(src.stem) or {}).items()
        if k.endswith("_device") and (str(v).lower() in ("auto", "cuda") or str(v).lower().startswith("cuda:"))
    ]
    if not wants:
        return
    try:
        import torch

        cuda = bool(torch.cuda.is_available())
    except Exception:  # no torch, or a broken CUDA set-up: no device
        cuda = False
    if not cuda:
        names = ", ".join(f"{n} ({k}: {v})" for n, k, v in wants)
        raise ValueError(
            f"profile paper: {names} in params/paper.yml runs at the papers' scale on a CUDA GPU, and none is "
            "visible here; run it on a GPU machine, or leave it out with --only"
        )


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


def timing_table(reports: list[dict[str, Any]]) -> str:
    """A small table of each notebook's status and seconds (reused ones say so), with the total."""
    rows = sorted(reports, key=lambda r: r["name"])
    w = max([len("notebook")] + [len(r["name"]) for r in rows])
    out = [f"{'notebook':{w}s}  status  seconds", f"{'-' * w}  ------  -------"]
    for r in rows:
        status = ("ok" if r["ok"] else "FAILED") if r.get("action") != "reused" else "reused"
        out.append(f"{r['name']:{w}s}  {status:6s}  {r['seconds']:7.1f}")
    out.append(f"{'sum':{w}s}  {'':6s}  {sum(r['seconds'] for r in rows):7.1f}")
    return "\n".join(out)


REPORT_FORMAT = "dpbook-run-report"
REPORT_VERSION = 1


def report_path(
    command: str, profile: str, root: Path, output: Path | str | None = None, explicit: Path | str | None = None
) -> Path:
    """Where ``run``/``book`` write their JSON report: ``explicit`` (``--report``), else ``DIR/report.json`` for
    ``run --output DIR`` (DIR not ``book``), else ``_build/<profile>/report.json`` (``run`` and ``book`` alike: the
    last command's report; its ``command`` field says which)."""
    if explicit is not None:
        p = Path(explicit).expanduser()
        return p if p.is_absolute() else Path.cwd() / p
    if command == "run" and output is not None and str(output) != "book":
        base = Path(output).expanduser()
        return (base if base.is_absolute() else Path.cwd() / base) / "report.json"
    return root / "_build" / profile / "report.json"


def _finite(x: Any) -> Any:
    import math

    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def chapter_entry(rep: dict[str, Any], root: Path | None = None) -> dict[str, Any]:
    """One chapter of the JSON report (see :func:`run_report`)."""
    out = {
        "name": rep["name"],
        "status": "ok" if rep["ok"] else "failed",
        "action": rep.get("action", "run"),
        "reason": rep.get("reason"),
        "seconds": _finite(float(rep.get("seconds", 0.0))),
        "profile": rep.get("profile"),
        "output": _rel(rep["output"], root) if root and rep.get("output") else rep.get("output"),
    }
    if rep.get("action") == "reused":
        out["last_run_seconds"] = _finite(rep.get("last_run_seconds"))
        out["last_run_finished"] = rep.get("last_run_finished")
    if not rep["ok"]:
        out["failure"] = {
            "location": f"notebooks/{rep['name']}.md:{rep['md_line']}" if "md_line" in rep else None,
            "code_cell": rep.get("code_cell"),
            "execution_count": rep.get("cell"),
            "line": rep.get("line"),
            "source": rep.get("source"),
            "error": rep.get("error", "unknown error"),
            "lines": describe_failure(rep, root),
        }
    return out


def run_report(
    command: str,
    profile: str,
    reports: list[dict[str, Any]],
    root: Path,
    *,
    changed: bool,
    wall_seconds: float,
    exit_code: int,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The machine-readable report of a ``run``/``book``: ``format``, ``version``, ``command``, ``profile``,
    ``changed``, ``finished`` (UTC), ``ok``, ``exit_code``, ``chapters`` (sorted by name; each ``name``,
    ``status`` ok/failed, ``action`` run/reused, ``reason``, ``seconds``, ``profile``, ``output``; a failure
    adds ``failure`` with ``location`` (``notebooks/NAME.md:LINE``), ``code_cell``, ``execution_count``,
    ``line``, ``source``, ``error``), ``totals`` (chapters, ok, failed, run, reused, seconds summed over
    chapters, wall_seconds) and, for ``book``, ``book`` (the build's, browser check's and ledger's exit codes
    and seconds)."""
    import datetime as _dt

    chapters = [chapter_entry(r, root) for r in sorted(reports, key=lambda r: r["name"])]
    totals = {
        "chapters": len(chapters),
        "ok": sum(c["status"] == "ok" for c in chapters),
        "failed": sum(c["status"] == "failed" for c in chapters),
        "run": sum(c["action"] == "run" for c in chapters),
        "reused": sum(c["action"] == "reused" for c in chapters),
        "seconds": round(sum(c["seconds"] or 0.0 for c in chapters), 2),
        "wall_seconds": round(wall_seconds, 2),
    }
    out = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "command": command,
        "profile": profile,
        "changed": changed,
        "finished": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "ok": exit_code == 0,
        "exit_code": exit_code,
        "chapters": chapters,
        "totals": totals,
    }
    if extra:
        out.update(extra)
    return out


def write_report(path: Path, report: dict[str, Any]) -> Path:
    """Write the report atomically as strict JSON (a NaN or infinity is refused, never written)."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(report, indent=1, allow_nan=False) + "\n")


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: jupyter-book's banner around a build: its version, folders, rules and where to open the result (the runner
#: says where the book is in one line of its own)
_BOOK_BANNER = re.compile(
    r"^(Running Jupyter-Book v|Source Folder:|Config Path:|Output Path:|=+$|Finished generating "
    r"HTML for book\.|Your book's HTML pages are here:|_build/html/?$|You can look at your book "
    r"by opening|Or paste this line directly|file://|\S*_build/html/index\.html$)"
)


def book_log_line(line: str) -> str | None:
    """A line of jupyter-book's output as the runner's log shows it: colour codes removed, the banner and blank
    lines dropped (None); warnings, errors and tracebacks are kept as they are."""
    text = _ANSI.sub("", line).rstrip()
    if not text.strip() or _BOOK_BANNER.match(text.strip()):
        return None
    return text


def profile_site(root: Path, profile: str, methods_dir: Path) -> Path:
    """The source folder of the book of a profile other than the book's: ``_build/<profile>/site/``, made afresh
    from links to the root's ``_config.yml``, ``_toc.yml``, ``_static/`` and ``book/`` pages, with copies of the
    profile's executed notebooks (``methods_dir``) in ``book/methods/`` (their download section pointing from
    there). The book's own ``book/methods/`` and ``results/`` are not touched."""
    import nbformat

    site = root / "_build" / profile / "site"
    if site.is_symlink() or site.is_file():
        site.unlink()
    elif site.exists():
        shutil.rmtree(site)
    (site / "book" / "methods").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml", "_static"):
        if (root / name).exists():
            os.symlink(root / name, site / name)
    for entry in sorted((root / "book").iterdir()):
        if entry.name not in ("methods", "scorecard.md", "_build") and not entry.name.startswith("."):
            os.symlink(entry, site / "book" / entry.name)
    for f in sorted(Path(methods_dir).glob("*.ipynb")):
        nb = nbformat.read(f, as_version=4)
        add_download_cell(nb, f.name, root / "notebooks" / f"{f.stem}.md", site / "book" / "methods")
        nbformat.write(nb, site / "book" / "methods" / f.name)
    return site


def build_book(root: Path | None = None, site: Path | None = None, results_dir: Path | None = None) -> int:
    """``jupyter-book build . -W --all`` in the repository root (or in ``site``, a profile's book:
    :func:`profile_site`), the scorecard written from ``results_dir`` (default ``results/``); returns its exit
    status."""
    root = root or find_root()
    src = site or root

    toc = (root / "_toc.yml").read_text() if (root / "_toc.yml").is_file() else ""
    chapters = re.findall(r"book/methods/([A-Za-z0-9_]+)", toc) or [p.stem for p in notebook_paths(root)]
    titles = {}
    for c in chapters:  # each chapter's H1, for the scorecard's links (short form: before a subtitle)
        nb_src = root / "notebooks" / f"{c}.md"
        heads = re.findall(r"^# (.+)$", nb_src.read_text(), flags=re.M) if nb_src.is_file() else []
        if heads:
            titles[c] = heads[0].strip()
    page = write_page(results_dir or root / "results", src / "book" / "scorecard.md", chapters, titles)
    _say(f"scorecard: {_rel(page, root)}")
    exe = Path(sys.executable).with_name("jupyter-book")
    # -q: no Sphinx status lines (warnings still print, and -W makes them errors); --keep-going: every warning of
    # the build at once; NO_COLOR: plain text in logs
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", ".", "-W", "--keep-going", "-q", "--all"]
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    env["NO_COLOR"] = "1"
    _say("$ " + " ".join(cmd) + (f"  (in {_rel(src, root)})" if site else ""))
    with subprocess.Popen(
        cmd, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            kept = book_log_line(line)
            if kept is not None:
                _say(kept)
        rc = proc.wait()
    if rc == 0:
        _say(f"book: {src / '_build' / 'html' / 'index.html'}")
    return rc


# --------------------------------------------------------------------------- command line


def _parser(command: str) -> argparse.ArgumentParser:

    p = _Parser(
        prog=f"python -m dputils {command}",
        description="execute the notebooks" + (", then build the book" if command == "book" else ""),
    )
    p.add_argument("--profile", default="full", choices=PROFILES, help="parameter profile (default full)")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="only these notebooks (stems)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks executed in parallel (default 2)")
    p.add_argument("--timeout", type=int, default=3600, help="per-cell timeout in seconds (default 3600)")
    p.add_argument("--root", default=None, metavar="PATH", help="repository root (holds notebooks/ and params/)")
    p.add_argument(
        "--wait",
        action="store_true",
        help="when another run or book on the same root and outputs holds the lock, wait for it instead of "
        "stopping (see dputils.book.runlock)",
    )
    p.add_argument(
        "--changed",
        action="store_true",
        help="rerun a notebook only when its inputs changed since its last successful run (its source, "
        "the profile's values, the dputils sources, the data files it reads, the results of "
        "chapters it reads, the key dependencies' versions); otherwise keep its last good copy "
        "and results. Says which were reused and why the others ran; one that failed last time "
        "always reruns (see dputils.book.changed)",
    )
    p.add_argument(
        "--report",
        default=None,
        metavar="PATH",
        help="where to write the JSON report (each notebook's status, seconds, run or reused and why, "
        "the failing cell and line; totals); default _build/<profile>/report.json"
        + (", or DIR/report.json with --output DIR" if command == "run" else ""),
    )
    if command == "book":
        p.add_argument(
            "--check",
            action="store_true",
            help="after the build, open every page in headless Chromium and fail on findings "
            "(python -m dputils.book.bookcheck; screenshots in _build/screenshots), and fail when a "
            "target's status differs from params/targets_ledger.yml",
        )
        p.add_argument(
            "--build-only",
            action="store_true",
            help="run nothing: build the book from the executed copies already in place (the profile's: "
            "book/methods for full, _build/<profile>/methods otherwise, e.g. those the smoke tests publish)",
        )
        p.add_argument(
            "--update-ledger",
            action="store_true",
            help="rewrite params/targets_ledger.yml from this run's targets (a target that now passes "
            "is recorded in the same commit as the change that made it pass)",
        )
    if command == "run":
        p.add_argument(
            "--output",
            default=None,
            metavar="DIR",
            help="write DIR/methods and DIR/results ('book': the book's places); default: the "
            "book's for full, _build/<profile>/ for smoke and paper",
        )
    return p


def cli_main(command: str, argv: Sequence[str]) -> int:
    """``python -m dputils run|book ARGS``: 0 all passed, 1 a notebook failed, 2 bad input, 75 (``EX_TEMPFAIL``) another run holds the
    lock of the same root and outputs (:mod:`dputils.book.runlock`; ``--wait`` waits for it), else the build's rc."""
    if command not in ("run", "book"):
        sys.stderr.write(f"error: unknown command {command!r}; expected run or book\n")
        return 2
    try:
        args = _parser(command).parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    except ValueError as exc:  # an option given twice (--profile smoke --profile full)
        sys.stderr.write(f"error: {exc}\n")
        return 2
    t_wall = time.perf_counter()
    try:
        if args.jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {args.jobs}")
        if args.timeout < 1:
            raise ValueError(f"timeout must be >= 1 second, got {args.timeout}")
        root = find_root(args.root)
        if command == "book" and args.update_ledger and args.profile != "full":
            raise ValueError(
                f"--update-ledger records the book's targets (profile full), not those of --profile {args.profile}"
            )
        output = ("book" if args.profile == "full" else None) if command == "book" else args.output
        if command == "run" and output is not None and str(output) != "book":
            check_output_folder(Path(output))
        rpath = report_path(command, args.profile, root, output, args.report)
    except ValueError as exc:  # RootError included
        sys.stderr.write(f"error: {exc}\n")
        return 2
    lock = contextlib.ExitStack()
    try:
        lock.enter_context(runlock.hold(root, runlock.lock_key(args.profile, output), wait=args.wait, say=_say))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted while waiting for the lock; nothing ran\n")
        return 130
    except runlock.LockBusy as exc:
        sys.stderr.write(f"error: {exc}\n")
        return LOCK_BUSY_EXIT
    except OSError as exc:
        sys.stderr.write(f"error: cannot take the run lock under {root / '_build'}: {exc.strerror or exc}\n")
        return 2
    try:
        with lock:
            return _cli_locked(command, args, root, output, rpath, t_wall)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted; the last good results are kept\n")
        return 130


def _cli_locked(command: str, args: Any, root: Path, output: Any, rpath: Path, t_wall: float) -> int:
    """The rest of :func:`cli_main`, while this run holds the lock of its outputs."""
    m_dir, r_dir = output_dirs(args.profile, root, output)
    try:
        if command == "book" and args.build_only:
            reports: list[dict[str, Any]] = []
            _say(f"building from the executed copies in {_rel(m_dir, root)} (--build-only: nothing runs)")
        else:
            reports = execute_all(
                profile=args.profile,
                only=args.only,
                jobs=args.jobs,
                timeout=args.timeout,
                root=root,
                output=output,
                changed=args.changed,
            )
    except ValueError as exc:  # RootError included
        sys.stderr.write(f"error: {exc}\n")
        return 2
    ok = all(r["ok"] for r in reports)

    def finish(rc: int, extra: dict[str, Any] | None = None) -> int:
        try:
            p = write_report(
                rpath,
                run_report(
                    command,
                    args.profile,
                    reports,
                    root,
                    changed=args.changed,
                    wall_seconds=time.perf_counter() - t_wall,
                    exit_code=rc,
                    extra=extra,
                ),
            )
            _say(f"report: {_rel(p, root)}")
        except (OSError, ValueError) as exc:
            _say(f"report not written ({rpath}): {exc}")
            return rc or 1
        return rc

    if command == "run":
        if len(reports) > 1:
            _say(timing_table(reports))
        return finish(0 if ok else 1)
    if not ok:
        _say(timing_table(reports))
        _say("book not built: a notebook failed")
        return finish(1, {"book": {"built": False}})
    t0 = time.perf_counter()
    site = None if args.profile == "full" else profile_site(root, args.profile, m_dir)
    rc = build_book(root, site, r_dir)
    html = (site or root) / "_build" / "html"
    book = {"built": rc == 0, "build_exit_code": rc, "build_seconds": round(time.perf_counter() - t0, 2)}
    _say(timing_table(reports))
    _say(f"jupyter-book build: {book['build_seconds']:.1f} s (exit {rc})")
    if rc == 0 and args.check:
        t0 = time.perf_counter()
        shots = root / "_build" / ("screenshots" if site is None else f"{args.profile}/screenshots")
        rc = bookcheck.main([str(html), "--screenshots", str(shots)])
        book.update(check_exit_code=rc, check_seconds=round(time.perf_counter() - t0, 2))
        _say(f"bookcheck: {book['check_seconds']:.1f} s (exit {rc})")
    chapters = [r["name"] for r in reports] or [p.stem for p in notebook_paths(root)]
    ledger_rc = check_ledger(
        root, chapters, update=args.update_ledger, strict=args.check and args.profile == "full", results_dir=r_dir
    )
    book["ledger_exit_code"] = ledger_rc
    return finish(rc or ledger_rc, {"book": book})


def check_ledger(
    root: Path, chapters: list[str], *, update: bool = False, strict: bool = False, results_dir: Path | None = None
) -> int:
    """Compare the chapters' recorded targets with ``params/targets_ledger.yml`` (:mod:`dputils.book.scorecard`).

    Prints the totals and every difference; returns 1 when ``strict`` and they differ, else 0. With ``update``
    the ledger's entries for these chapters are rewritten from the run (others kept)."""

    path = root / scorecard.LEDGER_FILE
    targets = scorecard.load_targets(results_dir or root / "results")
    ran = {c: targets[c] for c in chapters if c in targets}
    _say("targets: " + ", ".join(f"{n} {s}" for s, n in scorecard.totals(ran).items()))
    ledger = scorecard.read_ledger(path)
    if update:
        keep = {c: [{"id": i, "status": st} for i, st in recs.items()] for c, recs in ledger.items()}
        merged = {**keep, **ran}
        order = [c for c in chapters if c in merged] + [c for c in merged if c not in chapters]
        scorecard.write_ledger(path, {c: merged[c] for c in order})
        _say(f"ledger updated: {path}")
        return 0
    diffs = scorecard.ledger_differences(ran, ledger, chapters)
    if not diffs:
        _say(f"ledger: every target's status as in {path.relative_to(root)}")
        return 0
    _say(
        f"ledger: {len(diffs)} target(s) differ from {path.relative_to(root)}"
        + (" (not enforced: only `book --check` at the full profile fails on it)" if not strict else "")
    )
    for d in diffs:
        _say(f"  {d}")
    if strict:
        _say(
            "a target that now passes: rerun with --update-ledger and commit the ledger with the change; "
            "one that stopped passing is a regression"
        )
    return 1 if strict else 0


# ------------------------------------------------------------------------------------- parameter checks
# (shared with dputils.book.sweep, which imports them from here)


def declared_parameters(source: Path) -> dict[str, dict[str, Any]]:
    """The notebook's ``parameters`` cell as papermill reads it: name -> {inferred_type_name, default, help}."""
    import jupytext
    import papermill as pm

    try:
        nb = jupytext.read(source)
    except Exception as exc:
        raise DPValueError(f"notebook: cannot read {source} ({' '.join(str(exc).split())})") from None
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / f"{source.stem}.ipynb"
        jupytext.write(nb, tmp)
        declared = pm.inspect_notebook(str(tmp))
    if not declared:
        raise DPValueError(f"notebook: {source.name} has no parameters cell (a code cell tagged 'parameters')")
    return dict(declared)


def _type_ok(name: str, value: Any, type_name: str, where: str) -> Any:
    """``value`` checked against the declared type (a float parameter takes an integer, made a float, and the
    text of a number: YAML 1.1 reads ``1e-5`` as text)."""
    t = (type_name or "None").replace(" ", "")
    optional = "None" in t.split("|") or t.startswith("Optional[")
    base = t.removeprefix("Optional[").rstrip("]").split("|")[0].split("[")[0]
    if value is None:
        if optional or base in ("None", ""):
            return None
        raise DPValueError(f"{where}: {name} is null, but the notebook declares it {type_name}")

    def bad() -> DPValueError:
        return DPValueError(
            f"{where}: {name}={value!r} is {type(value).__name__}, but the notebook declares it {type_name}"
        )

    if base == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return value
    if base == "float":
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad() from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        if not math.isfinite(value):
            raise DPValueError(f"{where}: {name}={value!r} is not finite")
        return float(value)
    if base == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if base == "str":
        if not isinstance(value, str):
            raise bad()
        return value
    if base in ("list", "tuple", "List", "Tuple"):
        if not isinstance(value, list):
            raise bad()
        return value
    if base in ("dict", "Dict"):
        if not isinstance(value, dict):
            raise bad()
        return value
    return value  # an annotation we do not know: papermill passes the value as is


def check_parameters(values: Any, declared: dict[str, dict[str, Any]], source: Path, where: str) -> dict[str, Any]:
    """``values`` (a mapping of parameter: value) checked against the notebook's declared parameters: every
    name declared, every value of the declared type (see :func:`_type_ok`); the checked values. Used for grid
    points and for profiles (``python -m dputils run`` checks ``params/PROFILE.yml`` with it)."""
    if not isinstance(values, dict):
        raise DPValueError(f"{where}: expected a mapping of parameter: value, got {type(values).__name__}")
    out: dict[str, Any] = {}
    for k, v in values.items():
        if not isinstance(k, str) or not _IDENT.match(k):
            raise DPValueError(f"{where}: parameter name {k!r} is not an identifier")
        if k not in declared:
            known = ", ".join(sorted(declared))
            raise DPValueError(f"{where}: unknown parameter {k!r}; {source.name} declares {known}")
        out[k] = _type_ok(k, v, declared[k].get("inferred_type_name", "None"), where)
    return out


# --------------------------------------------------------------------------- the grid file
