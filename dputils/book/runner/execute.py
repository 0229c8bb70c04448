"""Executing one notebook (papermill, jupytext, quiet kernels) and publishing it only if it passed
(:func:`run_staged`).

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

from .. import changed as chg
from .. import profilemark, publish
from . import supervise
from .locate import _first_line, _is_timeout, failure_location, timeout_location
from .params import RootError, find_root, merge_parameter_cells
from .supervise import owner_gone

KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]  # silences "Kernel is running over TCP without encryption"


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


class _NoTimeoutEcho(logging.Filter):
    """Drops papermill's "Timeout waiting for execute reply" log line: the run's report says it once, with the
    cell."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout waiting for execute reply")


logging.getLogger("papermill").addFilter(_NoTimeoutEcho())


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
            ok=False,
            error=f"not published: the run that started it (pid {supervise._OWNER}) is gone",
            output=str(staged_nb),
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
