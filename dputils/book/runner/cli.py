"""``python -m dputils run|book``: the options, the lock, and one table mapping exceptions to exit codes.

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...cli.parse import Parser as _Parser  # one line on errors, no abbreviations, an option given twice refused
from .. import bookcheck, runlock
from .build import build_book, check_ledger, profile_site
from .common import _rel, _say
from .params import PROFILES, check_output_folder, find_root, notebook_paths, output_dirs
from .report import report_path, run_report, timing_table, write_report
from .schedule import execute_all

#: exit status of a run stopped because another holds the lock of its outputs (BSD's EX_TEMPFAIL: try again)
LOCK_BUSY_EXIT = 75


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


class LockWaitInterrupted(KeyboardInterrupt):
    """Ctrl-C while waiting for another run's lock (``--wait``): nothing ran."""


class LockUnavailable(ValueError):
    """The run lock's file cannot be made or taken (a read-only ``_build``): bad input, exit 2."""


#: What ended a ``run`` or ``book``, its exit status and its one line on stderr (``{exc}``: the exception's text),
#: first match wins. A notebook that fails is not an exception: it is the report's exit status 1.
EXIT_CODES: tuple[tuple[type[BaseException], int, str], ...] = (
    (LockWaitInterrupted, 130, "interrupted while waiting for the lock; nothing ran"),
    (KeyboardInterrupt, 130, "interrupted; the last good results are kept"),
    (runlock.LockBusy, LOCK_BUSY_EXIT, "error: {exc}"),
    (ValueError, 2, "error: {exc}"),  # bad input: RootError, DPValueError, LockUnavailable included
)


def exit_status(exc: BaseException) -> tuple[int, str] | None:
    """The exit status and stderr line of ``exc`` from :data:`EXIT_CODES`; None for an exception not listed
    (a bug: it propagates with its traceback)."""
    for kind, code, line in EXIT_CODES:
        if isinstance(exc, kind):
            return code, line.format(exc=exc)
    return None


def cli_main(command: str, argv: Sequence[str]) -> int:
    """``python -m dputils run|book ARGS``: 0 all passed, 1 a notebook failed, 2 bad input, 75 (``EX_TEMPFAIL``)
    another run holds the lock of the same root and outputs (:mod:`dputils.book.runlock`; ``--wait`` waits for
    it), 130 Ctrl-C, else the build's rc. Exceptions map to exit codes in one table, :data:`EXIT_CODES`."""
    if command not in ("run", "book"):
        sys.stderr.write(f"error: unknown command {command!r}; expected run or book\n")
        return 2
    try:
        return _cli(command, argv)
    except BaseException as exc:
        mapped = exit_status(exc)
        if mapped is None:
            raise
        sys.stderr.write(mapped[1] + "\n")
        return mapped[0]


def _cli(command: str, argv: Sequence[str]) -> int:
    try:
        args = _parser(command).parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    t_wall = time.perf_counter()
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
    lock = contextlib.ExitStack()
    try:
        lock.enter_context(runlock.hold(root, runlock.lock_key(args.profile, output), wait=args.wait, say=_say))
    except KeyboardInterrupt:
        raise LockWaitInterrupted() from None
    except runlock.LockBusy:
        raise
    except OSError as exc:
        raise LockUnavailable(f"cannot take the run lock under {root / '_build'}: {exc.strerror or exc}") from None
    with lock:
        return _cli_locked(command, args, root, output, rpath, t_wall)


def _cli_locked(command: str, args: Any, root: Path, output: Any, rpath: Path, t_wall: float) -> int:
    """The rest of :func:`cli_main`, while this run holds the lock of its outputs."""
    m_dir, r_dir = output_dirs(args.profile, root, output)
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
