"""Process supervision: pool workers that ignore Ctrl-C, notice when their run is killed, and take their kernels
with them; staging folders of killed runs.

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..publish import pid_alive

HEARTBEAT_S = 300.0


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
