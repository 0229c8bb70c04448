"""Up-front resource checks: refuse work this machine cannot do, before doing any of it.

Every command that allocates in proportion to a user's parameter (grids, state spaces, bootstrap
resamples, Monte Carlo samples) estimates what it will need first and calls one of these checks. A
request over the limit raises :class:`~dputils.errors.DPValueError` (exit status 2 on the command line)
with one line naming the parameter, what it would need and the limit, instead of running out of memory
or running for hours.

Limits:

* memory: ``MEMORY_FRACTION`` times the memory this process may use, which is the smaller of

  - the machine's physical memory (``MemTotal`` in ``/proc/meminfo``, else ``sysconf``), and
  - the memory limit of the process's control group (a container's limit): cgroup v2 ``memory.max``, or
    cgroup v1 ``memory.limit_in_bytes``, of the cgroup named in ``/proc/self/cgroup`` and of each of its
    ancestors (a parent's limit binds its children). ``max``, or a value of 2^60 bytes or more (v1 writes
    2^63 - 4096 for "unlimited"), means no limit; a file that is missing or unreadable is skipped, so
    without cgroup files the limit is the physical memory alone.

  A fixed number per machine or container, so the same request is refused or accepted whatever else is
  running; override with the environment variable ``DPUTILS_MAX_MEMORY_GB``. A job that fits the host but
  not its container is refused with a message that names the container limit and the file it came from.
* work: a count of elementary operations (the caller's unit, stated in the message), capped by
  ``DPUTILS_MAX_WORK`` (default ``1e12``, roughly an hour of vectorised numpy on one core).

The paths read are module attributes (:data:`PROC_MEMINFO`, :data:`PROC_SELF_CGROUP`,
:data:`CGROUP_ROOT`), and :func:`memory_limit` also takes them as arguments, so tests point them at
fake files.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import PurePosixPath

from .errors import DPValueError

#: Fraction of the available memory one computation may plan to use.
MEMORY_FRACTION = 0.6
#: Default cap on elementary operations for one command (overridable with ``DPUTILS_MAX_WORK``).
DEFAULT_MAX_WORK = 1e12
#: ``/proc/meminfo``: the machine's physical memory (``MemTotal``).
PROC_MEMINFO = "/proc/meminfo"
#: ``/proc/self/cgroup``: the control groups of this process (``0::PATH`` for v2, ``N:memory:PATH`` for v1).
PROC_SELF_CGROUP = "/proc/self/cgroup"
#: Where the cgroup file systems are mounted: v2 directly, v1's memory controller under ``memory/``.
CGROUP_ROOT = "/sys/fs/cgroup"
#: A cgroup limit at or above this many bytes (1 EiB) means "no limit".
CGROUP_UNLIMITED = float(2**60)

_GIB = 1024.0**3


#: set by the command line to the value it gave ``DPUTILS_MAX_MEMORY_GB`` for one query, so that a refusal names
#: the command line's default rather than a variable the user never set
QUERY_DEFAULT_MARK = "DPUTILS_QUERY_DEFAULT_MEMORY_GB"


@dataclass(frozen=True)
class MemoryLimit:
    """The memory one computation may plan to use, and where the number comes from.

    Attributes:
        bytes: the limit in bytes (``MEMORY_FRACTION`` times ``total``, or the environment override).
        total: the memory it is a fraction of (physical or container memory; the override itself).
        source: ``"env"`` (``DPUTILS_MAX_MEMORY_GB``), ``"physical"`` (meminfo/sysconf) or ``"cgroup"``.
        path: the file the total was read from (``None`` for the override and the sysconf fallback).
    """

    bytes: float
    total: float
    source: str
    path: str | None = None

    def describe(self) -> str:
        """One phrase for a refusal message: the limit and where it comes from."""
        if self.source == "env":
            if os.environ.get(QUERY_DEFAULT_MARK) == os.environ.get("DPUTILS_MAX_MEMORY_GB"):
                # the command line set it for one query, not the user (dputils.cli._query_limits)
                return (
                    f"the command line's default limit of {_fmt_bytes(self.bytes)} for one query "
                    "(set DPUTILS_MAX_MEMORY_GB to change it)"
                )
            return f"the limit of {_fmt_bytes(self.bytes)} set by DPUTILS_MAX_MEMORY_GB"
        if self.source == "cgroup":
            return (
                f"this container's limit of {_fmt_bytes(self.bytes)} ({MEMORY_FRACTION:g} of the container "
                f"memory limit {_fmt_bytes(self.total)} in {self.path})"
            )
        return f"this machine's limit of {_fmt_bytes(self.bytes)}"


def _read_text(path: str) -> str | None:
    """The file's text, or None when it is missing or unreadable (a directory, a permission error, ...)."""
    try:
        with open(path) as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def physical_memory_bytes(meminfo: str | None = None) -> tuple[float, str | None]:
    """The machine's physical memory in bytes, and the file it was read from.

    ``MemTotal`` (kB) in ``meminfo`` (default :data:`PROC_MEMINFO`); when that cannot be read,
    ``sysconf(SC_PAGE_SIZE) * sysconf(SC_PHYS_PAGES)`` (path ``None``); else 8 GiB.
    """
    meminfo = PROC_MEMINFO if meminfo is None else meminfo
    text = _read_text(meminfo)
    if text is not None:
        for line in text.splitlines():
            if line.startswith("MemTotal:"):
                try:
                    kb = float(line.split()[1])
                except (IndexError, ValueError):
                    break
                if kb > 0 and math.isfinite(kb):
                    return kb * 1024.0, meminfo
                break
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")), None
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 8 * _GIB, None


def _parse_limit(text: str | None) -> float | None:
    """A cgroup limit file's value in bytes; None for "max", absurdly large, unreadable or malformed."""
    if text is None:
        return None
    s = text.strip()
    if s == "max":
        return None
    try:
        v = int(s)
    except ValueError:
        return None
    if v <= 0 or v >= CGROUP_UNLIMITED:
        return None
    return float(v)


def _own_cgroups(self_cgroup: str) -> tuple[str | None, str | None]:
    """(v2 path, v1 memory path) of this process from a ``/proc/self/cgroup`` file, each None if absent.

    Each line is ``hierarchy-ID:controller-list:path``; the v2 line is ``0::path``, a v1 memory line has
    ``memory`` in its comma-separated controller list.
    """
    text = _read_text(self_cgroup)
    v2 = v1 = None
    if text is None:
        return None, None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        ident, controllers, path = parts
        if ident == "0" and controllers == "":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    return v2, v1


def _tightest(mount: str, cgroup_path: str, filename: str) -> tuple[float, str] | None:
    """Smallest limit in ``filename`` over the cgroup at ``cgroup_path`` and all its ancestors.

    The directories are ``mount + path`` for the path and each of its parents up to ``/`` (the mount
    itself: inside a container with its own cgroup namespace the process's cgroup is the mount's root).
    """
    best: tuple[float, str] | None = None
    p = PurePosixPath(cgroup_path)
    for d in [p, *p.parents]:
        rel = str(d).lstrip("/")
        f = os.path.join(mount, rel, filename) if rel else os.path.join(mount, filename)
        v = _parse_limit(_read_text(f))
        if v is not None and (best is None or v < best[0]):
            best = (v, f)
    return best


def cgroup_memory_limit(self_cgroup: str | None = None, cgroup_root: str | None = None) -> tuple[float, str] | None:
    """The memory limit of this process's control group in bytes and the file it came from; None if none.

    Reads the cgroup v2 ``memory.max`` under ``cgroup_root`` (default :data:`CGROUP_ROOT`) and the v1
    ``memory/.../memory.limit_in_bytes`` for the paths named in ``self_cgroup`` (default
    :data:`PROC_SELF_CGROUP`) and their ancestors, and returns the smallest finite limit found.
    """
    self_cgroup = PROC_SELF_CGROUP if self_cgroup is None else self_cgroup
    root = CGROUP_ROOT if cgroup_root is None else cgroup_root
    v2, v1 = _own_cgroups(self_cgroup)
    found = []
    if v2 is not None:
        found.append(_tightest(root, v2, "memory.max"))
    if v1 is not None:
        found.append(_tightest(os.path.join(root, "memory"), v1, "memory.limit_in_bytes"))
    found = [f for f in found if f is not None]
    return min(found) if found else None


def memory_limit(
    meminfo: str | None = None, self_cgroup: str | None = None, cgroup_root: str | None = None
) -> MemoryLimit:
    """The memory limit of one computation: ``DPUTILS_MAX_MEMORY_GB`` GiB if set, else ``MEMORY_FRACTION``
    times min(physical memory, cgroup limit). The arguments default to the module's paths."""
    env = os.environ.get("DPUTILS_MAX_MEMORY_GB")
    if env:
        try:
            gb = float(env)
        except ValueError:
            raise DPValueError(f"DPUTILS_MAX_MEMORY_GB must be a number of GiB, got {env!r}") from None
        if not (gb > 0 and math.isfinite(gb)):
            raise DPValueError(f"DPUTILS_MAX_MEMORY_GB must be > 0, got {env!r}")
        return MemoryLimit(gb * _GIB, gb * _GIB, "env")
    phys, phys_path = physical_memory_bytes(meminfo)
    cg = cgroup_memory_limit(self_cgroup, cgroup_root)
    if cg is not None and cg[0] < phys:
        return MemoryLimit(MEMORY_FRACTION * cg[0], cg[0], "cgroup", cg[1])
    return MemoryLimit(MEMORY_FRACTION * phys, phys, "physical", phys_path)


def available_memory_bytes() -> float:
    """Bytes this process may plan to allocate: ``DPUTILS_MAX_MEMORY_GB`` or a fraction of the smaller of
    physical memory and the cgroup (container) limit (see :func:`memory_limit`)."""
    return memory_limit().bytes


def max_work() -> float:
    """The cap on elementary operations (``DPUTILS_MAX_WORK`` or :data:`DEFAULT_MAX_WORK`)."""
    env = os.environ.get("DPUTILS_MAX_WORK")
    if env:
        try:
            w = float(env)
        except ValueError:
            raise DPValueError(f"DPUTILS_MAX_WORK must be a number, got {env!r}") from None
        if not (w > 0 and math.isfinite(w)):
            raise DPValueError(f"DPUTILS_MAX_WORK must be > 0, got {env!r}")
        return w
    return DEFAULT_MAX_WORK


def _fmt_bytes(n: float, digits: int = 3) -> str:
    if n >= _GIB:
        return f"{n / _GIB:.{digits}g} GiB"
    return f"{n / 1024.0**2:.{digits}g} MiB"


def _distinct(value: float, limit: float, fmt=lambda x, d: f"{x:.{d}g}") -> tuple[str, str]:
    """``value`` and ``limit`` written with the fewest significant digits (3 or more) that tell them apart, so
    that a refusal never reads "about 1e+12 ..., over the limit of 1e+12"."""
    for digits in range(3, 18):
        a, b = fmt(value, digits), fmt(limit, digits)
        if a != b:
            return a, b
    return a, b


def check_memory(parameter: str, nbytes: float, what: str = "", hint: str = "") -> None:
    """Refuse (``DPValueError`` naming ``parameter``) when ``nbytes`` exceed the memory limit.

    Args:
        parameter: the user-facing parameter that drives the size (e.g. ``"batches"``, ``"--bands"``).
        nbytes: the estimated peak allocation in bytes.
        what: what would be allocated (e.g. ``"the Renyi state space"``), for the message.
        hint: what to do instead (e.g. ``"the largest feasible bands is 6"``).
    """
    limit = memory_limit()
    if not (nbytes <= limit.bytes):  # also catches nan/inf estimates
        need, _ = _distinct(nbytes, limit.bytes, _fmt_bytes)
        msg = f"{parameter}: {what + ' ' if what else ''}would need {need}, over {limit.describe()}"
        if hint:
            msg += f"; {hint}"
        raise DPValueError(msg)


def check_work(parameter: str, units: float, what: str = "operations", hint: str = "") -> None:
    """Refuse (``DPValueError`` naming ``parameter``) when ``units`` of work exceed :func:`max_work`."""
    limit = max_work()
    if not (units <= limit):
        need, cap = _distinct(units, limit)
        msg = f"{parameter}: would need about {need} {what}, over the limit of {cap} (set DPUTILS_MAX_WORK to raise it)"
        if hint:
            msg += f"; {hint}"
        raise DPValueError(msg)
