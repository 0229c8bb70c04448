"""One ``run``/``book`` at a time per book root and set of outputs.

Two runs writing the same executed copies and results would publish over each other (and each would remove the
other's generations as leftovers). :func:`hold` takes an exclusive ``flock`` on ``_build/locks/KEY.lock`` under the
book root, KEY being where the run writes (:func:`lock_key`: the profile, ``full`` for the book's own places also
with ``--output book``, or one key per ``--output DIR``), and writes the holder's pid, start time and command line
in it. A second run says in one line which run holds it and stops (:class:`LockBusy`), or waits with
``--wait``. The kernel releases a ``flock`` when its holder dies, so a lock left by a killed run (its pid gone) is
simply taken over, and the new holder says so.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .publish import pid_alive

#: how long a lock held by a dead pid is waited for: a killed run's pool workers inherit its descriptor and end
#: within about a second of it (:func:`dputils.book.run._watch_owner`)
ORPHAN_WAIT_S = 10.0


class LockBusy(RuntimeError):
    """Another run holds the lock (the message names it)."""


def lock_key(profile: str, output: Path | str | None = None) -> str:
    """What the lock covers: the profile's default places, the book's places (``full`` or ``--output book``), or one
    ``--output DIR``."""
    if output is None:
        return profile
    if str(output) == "book":
        return "full"
    base = Path(output).expanduser()
    base = (base if base.is_absolute() else Path.cwd() / base).resolve()
    return "output-" + hashlib.sha256(str(base).encode()).hexdigest()[:12]


def lock_path(root: Path, key: str) -> Path:
    return Path(root) / "_build" / "locks" / f"{key}.lock"


def _holder(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 65536).decode() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe(holder: dict[str, Any]) -> str:
    if not holder.get("pid"):
        return "another run (no pid recorded)"
    cmd = holder.get("command")
    return f"pid {holder['pid']} since {holder.get('since', '?')}" + (f" ({cmd})" if cmd else "")


@contextlib.contextmanager
def hold(
    root: Path,
    key: str,
    *,
    wait: bool = False,
    command: str | None = None,
    say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
) -> Iterator[Path]:
    """Hold the lock of ``key`` under ``root`` for the ``with`` block (see the module docstring); raises
    :class:`LockBusy` when another live run holds it and ``wait`` is False. An ``OSError`` (a read-only
    ``_build``) is raised as it is."""
    path = lock_path(root, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        t0 = time.monotonic()
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(fd)
                pid = holder.get("pid")
                orphan = isinstance(pid, int) and not pid_alive(pid)  # its workers are still ending
                if not wait and not (orphan and time.monotonic() - t0 < ORPHAN_WAIT_S):
                    raise LockBusy(
                        f"{describe(holder)} holds the {key} lock of {root} ({path}); "
                        "wait for it to finish, or pass --wait"
                    ) from None
                if wait and not announced:
                    say(f"waiting for {describe(holder)}, which holds the {key} lock")
                    announced = True
                time.sleep(0.2)
        previous = _holder(fd)
        pid = previous.get("pid")
        if isinstance(pid, int) and pid != os.getpid() and not pid_alive(pid):
            say(f"took over the {key} lock of {describe(previous)}: that process is gone")
        me = {
            "pid": os.getpid(),
            "since": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
            "command": command or " ".join(["python -m dputils", *sys.argv[1:]])[:300],
        }
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(me) + "\n").encode())
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)
