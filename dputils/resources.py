"""Up-front resource checks: refuse work this machine cannot do, before doing any of it.

Every command that allocates in proportion to a user's parameter (grids, state spaces, bootstrap
resamples, Monte Carlo samples) estimates what it will need first and calls one of these checks. A
request over the limit raises :class:`~dputils.errors.DPValueError` (exit status 2 on the command line)
with one line naming the parameter, what it would need and the limit, instead of running out of memory
or running for hours.

Limits:

* memory: the machine's physical memory (``MemTotal`` in ``/proc/meminfo``, else ``sysconf``) times a
  safety fraction -- a fixed number per machine, so the same request is refused or accepted whatever else
  is running; override with the environment variable ``DPUTILS_MAX_MEMORY_GB``.
* work: a count of elementary operations (the caller's unit, stated in the message), capped by
  ``DPUTILS_MAX_WORK`` (default ``1e12``, roughly an hour of vectorised numpy on one core).
"""

from __future__ import annotations

import math
import os

from .errors import DPValueError

#: Fraction of the available memory one computation may plan to use.
MEMORY_FRACTION = 0.6
#: Default cap on elementary operations for one command (overridable with ``DPUTILS_MAX_WORK``).
DEFAULT_MAX_WORK = 1e12

_GIB = 1024.0**3


def available_memory_bytes() -> float:
    """Bytes this process may plan to allocate: ``DPUTILS_MAX_MEMORY_GB`` or a fraction of physical memory."""
    env = os.environ.get("DPUTILS_MAX_MEMORY_GB")
    if env:
        try:
            gb = float(env)
        except ValueError:
            raise DPValueError(f"DPUTILS_MAX_MEMORY_GB must be a number of GiB, got {env!r}") from None
        if not (gb > 0 and math.isfinite(gb)):
            raise DPValueError(f"DPUTILS_MAX_MEMORY_GB must be > 0, got {env!r}")
        return gb * _GIB
    avail = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    avail = float(line.split()[1]) * 1024.0
                    break
    except OSError:
        pass
    if avail is None:
        try:
            avail = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
            avail = 8 * _GIB
    return MEMORY_FRACTION * avail


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


def _fmt_bytes(n: float) -> str:
    if n >= _GIB:
        return f"{n / _GIB:.3g} GiB"
    return f"{n / 1024.0**2:.3g} MiB"


def check_memory(parameter: str, nbytes: float, what: str = "", hint: str = "") -> None:
    """Refuse (``DPValueError`` naming ``parameter``) when ``nbytes`` exceed the memory limit.

    Args:
        parameter: the user-facing parameter that drives the size (e.g. ``"batches"``, ``"--bands"``).
        nbytes: the estimated peak allocation in bytes.
        what: what would be allocated (e.g. ``"the Renyi state space"``), for the message.
        hint: what to do instead (e.g. ``"the largest feasible bands is 6"``).
    """
    limit = available_memory_bytes()
    if not (nbytes <= limit):  # also catches nan/inf estimates
        msg = f"{parameter}: {what + ' ' if what else ''}would need {_fmt_bytes(nbytes)}, over this machine's " \
              f"limit of {_fmt_bytes(limit)}"
        if hint:
            msg += f"; {hint}"
        raise DPValueError(msg)


def check_work(parameter: str, units: float, what: str = "operations", hint: str = "") -> None:
    """Refuse (``DPValueError`` naming ``parameter``) when ``units`` of work exceed :func:`max_work`."""
    limit = max_work()
    if not (units <= limit):
        msg = f"{parameter}: would need about {units:.3g} {what}, over the limit of {limit:.3g} " \
              "(set DPUTILS_MAX_WORK to raise it)"
        if hint:
            msg += f"; {hint}"
        raise DPValueError(msg)
