"""``python -m dputils``: run the book's notebooks, build the book, and query accountants.

Commands:

* ``run [--profile smoke|full|paper] [--only NAME ...] [--jobs N] [--changed] [--report PATH]``: execute notebooks
  with papermill (``--changed``: only those whose inputs changed since their last successful run, see
  :mod:`dputils.book.changed`); a JSON report of the run goes to ``_build/<profile>/report.json``.
* ``book [--profile ...] [--jobs N] [--changed] [--check]``: ``run``, then ``jupyter-book build . -W --all`` (and,
  with ``--check``, the headless-browser check of every page); its JSON report likewise.
* ``sweep NOTEBOOK --grid GRID.yml [--scheduler ADDRESS] [--workers N] [--resume]``: one papermill run per
  grid point on dask.distributed, collected in ``sweeps/NAME/results.csv`` (see :mod:`dputils.book.sweep`).
* ``epsilon`` / ``delta``: one JSON object with the value, its bounds, the accountant and the seconds.
  ``--steps`` has no default: give it, or ``--epochs E --batch-size B --dataset-size N`` (q = B/N,
  T = ceil(E N / B), :mod:`dputils.cli.schedule`); the output states the ``q`` and ``steps`` used.
* ``calibrate``: the smallest noise parameter meeting (``--epsilon``, ``--delta``), conservative.
* ``audit``: one-run privacy auditing of canary scores (when the audit module is installed).
* ``accountants``: the registered accountant names.
* ``--version``: the installed version.

The accounting commands need only the light install (numpy, scipy, mpmath); ``run``, ``book`` and ``sweep`` need
the ``book`` (and ``sweep``) extras, and a missing one is reported in one line naming the ``pip install``.

Output is strict JSON (RFC 8259): a bound the method cannot give, or a vacuous (infinite) one, is null.
Bad input exits with status 2 and one line naming the parameter; numerical failure with status 3.
An option the chosen accountant or mechanism does not use, or an option given twice, is bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..accountants import registry
from ..accountants.registry import COMMON_FLAGS, Registration, UnknownAccountantError
from ..calibration import calibrate as _search
from ..errors import (
    DPValueError,
    NumericalError,
    check_delta,
    check_epsilon,
    check_finite,
    check_positive,
    check_positive_int,
)
from ..jsonio import dumps, jsonable  # noqa: F401  (the command line's strict JSON; public here too)
from ..mechanisms import MECHANISM_NAMES, make_mechanism
from ..optional import message_for
from ..resources import check_memory
from . import audit as audit_cli
from .parse import NEGATIVE_NUMBER as _NEGATIVE_NUMBER  # noqa: F401  (read by tests)
from .parse import Parser as _Parser
from .runs import register as _register_runs
from .schedule import add_schedule_arguments, resolve_steps

_register_runs()  # the matrix and shuffling accountants' options and builds


def _float(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None


def _count(s: str) -> int | float:
    """A count as written: ``9007199254740993`` stays that integer (``float`` would round it to ...992);
    other numbers (``1e3``, ``2.5``, ``-inf``) are read as floats for the range checks to report."""
    try:
        return int(s.strip().replace("_", "")) if s.strip().lstrip("+-").replace("_", "").isdigit() else float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None


#: The largest ``--steps``: 2^53, the last integer every accountant's floating-point arithmetic holds exactly.
MAX_STEPS = 2**53
#: The coarsest ``--discretization`` (privacy-loss grid width) accepted: wider grids give vacuous bounds and,
#: past about 709, overflow ``exp``.
MAX_DISCRETIZATION = 1.0
#: The finest ``--discretization`` accepted: a privacy-loss grid of 5 million points at this width spans
#: 5e-9, narrower than the loss of any mechanism the accountants take; a finer width (1e-320) only overflows
#: the count of grid points.
MIN_DISCRETIZATION = 1e-15


# ---------------------------------------------------------------------------------------------- accounting
#: Options shared by epsilon/delta/calibrate; which an accountant reads is its registration's common_flags.
_COMMON_HELP = {
    "mechanism": "gaussian | subsampled-gaussian | laplace (| balls-in-bins for matrix accountants)",
    "sigma": "noise multiplier (std / sensitivity), > 0; gaussian and subsampled-gaussian",
    "q": "Poisson sampling probability in (0, 1]; subsampled-gaussian only",
    "scale": "Laplace scale, > 0; laplace only",
    "steps": f"number of compositions T, an integer in [1, 2^53 = {MAX_STEPS}] (required, or give --epochs "
    "--batch-size --dataset-size)",
    "direction": "neighbouring direction: both (default: the worse of add and remove), add or remove",
}


def _add_common_accounting(p: argparse.ArgumentParser) -> None:
    # Every common option defaults to None so that "given by the user" can be told apart from a default.
    p.add_argument("--accountant", required=True, help="accountant name (see `python -m dputils accountants`)")
    p.add_argument("--mechanism", default=None, help=_COMMON_HELP["mechanism"])
    p.add_argument("--sigma", type=_float, default=None, help=_COMMON_HELP["sigma"])
    p.add_argument("--q", "--sampling-rate", dest="q", type=_float, default=None, help=_COMMON_HELP["q"])
    p.add_argument("--scale", type=_float, default=None, help=_COMMON_HELP["scale"])
    p.add_argument("--steps", type=_count, default=None, help=_COMMON_HELP["steps"])
    p.add_argument("--direction", default=None, choices=["both", "add", "remove"], help=_COMMON_HELP["direction"])


#: The options of the accountants of the common mechanisms beyond the common ones: name -> {constructor
#: keyword: argparse keywords of its option ``--keyword``}. The command line builds these accountants from their
#: registered class (:func:`_front`); a registered name without an entry takes no option of its own.
ACCOUNTANT_OPTIONS: dict[str, dict[str, dict[str, Any]]] = {
    "pld": {
        "discretization": dict(
            type=float,
            default=None,
            help="grid width of the privacy-loss axis (default: chosen, starting at 1e-4, and refined until the "
            "certified bracket's relative width is at most 1e-3; a given width is used as it is)",
        )
    },
    "edgeworth": {
        "order": dict(
            type=int,
            default=2,
            choices=(0, 1, 2, 3),
            help="order of the Edgeworth expansion of the estimate (default 2, the paper's EW_EST)",
        )
    },
}


def mechanism_from_args(args: argparse.Namespace) -> Any:
    """The mechanism of the common options ``--mechanism --sigma --q --scale`` (:func:`dputils.mechanisms.make_mechanism`,
    sensitivity 1 unless the namespace says otherwise)."""

    if getattr(args, "mechanism", None) is None:
        raise DPValueError(f"mechanism is required ({', '.join(MECHANISM_NAMES)})")
    sensitivity = getattr(args, "sensitivity", None)
    return make_mechanism(
        args.mechanism,
        sigma=getattr(args, "sigma", None),
        q=getattr(args, "q", None),
        scale=getattr(args, "scale", None),
        sensitivity=1.0 if sensitivity is None else sensitivity,
    )


@dataclass(frozen=True)
class Front:
    """How the command line builds one registered accountant: ``build(args)`` (the composed accountant of the
    parsed options) and ``add_arguments(parser)`` (its own options); every other attribute (``name``,
    ``common_flags``, ``noise_parameter``, ...) is the registration's."""

    registration: Registration
    build: Callable[[argparse.Namespace], Any]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None

    def __getattr__(self, key: str) -> Any:
        return getattr(self.registration, key)


def front(name: str) -> Front:
    """The command line of the accountant registered as ``name``.

    An accountant of the common mechanisms (:attr:`Registration.common_events`) is built from its class:
    ``create(direction=--direction, **its options of ACCOUNTANT_OPTIONS)``, composed ``--steps`` times with
    :func:`mechanism_from_args`. Any other (matrix, shuffling: runs of their own kind) is built by the
    command-line hooks it registered.
    """
    try:
        reg = registry.get(name)
    except UnknownAccountantError as exc:
        raise DPValueError(f"accountant: {exc}") from None
    if reg.cls is not None and reg.common_events:
        options = ACCOUNTANT_OPTIONS.get(name, {})

        def add_arguments(parser: argparse.ArgumentParser) -> None:
            for dest, kw in options.items():
                parser.add_argument("--" + dest.replace("_", "-"), dest=dest, **kw)

        def build(args: argparse.Namespace) -> Any:
            acc = reg.create(direction=args.direction, **{dest: getattr(args, dest) for dest in options})
            return acc.compose(mechanism_from_args(args), args.steps)

        return Front(reg, build, add_arguments if options else None)
    if reg.build is None:
        raise DPValueError(f"accountant: {name} has no command line (it registered no build hook)")
    return Front(reg, reg.build, reg.add_arguments)


def _refuse_unused(args: argparse.Namespace, spec, argv: Sequence[str], searched: str | None = None) -> None:
    """A common option the accountant does not read is an error naming it (not silently ignored)."""
    for flag in sorted(COMMON_FLAGS):
        if getattr(args, flag, None) is None:
            continue
        if flag == searched:
            raise DPValueError(f"--{flag}: calibrate searches for {flag}; leave the option out")
        if flag not in spec.common_flags:
            used = sorted(spec.common_flags - {searched} if searched else spec.common_flags)
            reads = f"it reads {', '.join('--' + f for f in used)}" if used else "it reads none of the common options"
            raise DPValueError(f"--{flag} is not used by accountant {spec.name} ({reads}); leave it out")


def _validate_common(args: argparse.Namespace, spec) -> None:
    for name in ("sigma", "q", "scale", "steps", "epsilon", "delta", "tolerance"):
        v = getattr(args, name, None)
        if v is not None and (isinstance(v, float) and not math.isfinite(v)):
            raise DPValueError(f"{name} must be finite, got {v!r}")
    if args.sigma is not None:
        check_positive("sigma", args.sigma)
    if args.q is not None:
        if not 0 < args.q <= 1:
            raise DPValueError(f"q must be in (0, 1], got {args.q!r}")
    if args.scale is not None:
        check_positive("scale", args.scale)
    if args.steps is not None:
        args.steps = check_positive_int("steps", args.steps)
    if args.steps is not None and args.steps > MAX_STEPS:
        raise DPValueError(f"steps must be at most 2^53 = {MAX_STEPS} (exact in floating point), got {args.steps}")
    h = getattr(args, "discretization", None)
    if h is not None:
        check_positive("discretization", h)
        if not h <= MAX_DISCRETIZATION:
            raise DPValueError(
                f"discretization must be in (0, {MAX_DISCRETIZATION:g}] (the privacy-loss grid "
                f"width; by default chosen and refined), got {h!r}"
            )
        if h < MIN_DISCRETIZATION:
            raise DPValueError(
                f"discretization must be at least {MIN_DISCRETIZATION:g} (the privacy-loss grid width; by default "
                f"chosen and refined; a finer grid needs more points than any accountant holds), got {h!r}"
            )
    if args.direction is None:
        args.direction = "both"
    if spec.uses_mechanism and args.mechanism is None:
        raise DPValueError("mechanism is required (gaussian, subsampled-gaussian or laplace)")


def _resolve_steps(args: argparse.Namespace, spec) -> dict[str, Any]:
    """``--steps`` (no default), or T and q from ``--epochs --batch-size --dataset-size``
    (:func:`~dputils.cli.schedule.resolve_steps`), checked against :data:`MAX_STEPS`; returns the schedule
    fields the output states."""
    schedule = resolve_steps(args, "steps" in spec.common_flags)
    if args.steps is not None and args.steps > MAX_STEPS:
        raise DPValueError(f"steps must be at most 2^53 = {MAX_STEPS} (exact in floating point), got {args.steps}")
    return schedule


def _spec_and_args(command: str, argv: Sequence[str]):
    pre = _Parser(prog=f"python -m dputils {command}", add_help=False)
    pre.add_argument("--accountant")
    known, _ = argparse.ArgumentParser.parse_known_args(pre, argv)
    parser = _Parser(prog=f"python -m dputils {command}", description=f"{command} of a composed mechanism")
    _add_common_accounting(parser)
    if command == "epsilon":
        parser.add_argument("--delta", type=_float, required=True, help="target delta in (0, 1)")
    elif command == "delta":
        parser.add_argument("--epsilon", type=_float, required=True, help="epsilon >= 0")
    else:  # calibrate
        parser.add_argument("--epsilon", type=_float, required=True, help="target epsilon > 0")
        parser.add_argument("--delta", type=_float, required=True, help="target delta in (0, 1)")
        parser.add_argument(
            "--tolerance",
            type=_float,
            default=1e-3,
            help=f"relative width of the final bracket, in [{TOLERANCE_MIN:g}, {TOLERANCE_MAX:g}] (default 1e-3)",
        )
    spec = None
    if known.accountant is not None:
        spec = front(known.accountant)
        if spec.add_arguments is not None:
            spec.add_arguments(parser)
        if "steps" in spec.common_flags:
            add_schedule_arguments(parser)  # --epochs --batch-size --dataset-size instead of --q --steps
    args = parser.parse_args(argv)
    assert spec is not None
    return spec, args


def _query(command: str, argv: Sequence[str]) -> dict[str, Any]:
    spec, args = _spec_and_args(command, argv)
    _refuse_unused(args, spec, argv)
    _validate_common(args, spec)
    if command == "epsilon":
        check_delta(args.delta)
    else:
        check_epsilon(args.epsilon)
    schedule = _resolve_steps(args, spec)
    t0 = time.perf_counter()
    if command == "epsilon":
        res = spec.build(args).get_epsilon(args.delta)
    else:
        res = spec.build(args).get_delta(args.epsilon)
    out = res.to_dict()
    out["accountant"] = spec.name
    _state_schedule(out, schedule, args)
    out["seconds"] = round(time.perf_counter() - t0, 6)
    return out


#: The range of ``--tolerance`` (relative width of calibrate's final bracket).
TOLERANCE_MIN, TOLERANCE_MAX = 1e-12, 0.5
#: The noise range calibrate searches, and its cap on accountant evaluations.
CALIBRATE_RANGE = (1e-3, 1e4)
MAX_EVALUATIONS = 200


def check_tolerance(tolerance: Any) -> float:
    """``tolerance`` in [TOLERANCE_MIN, TOLERANCE_MAX] (a smaller one never ends in floating point)."""

    t = check_finite("tolerance", tolerance)
    if not TOLERANCE_MIN <= t <= TOLERANCE_MAX:
        raise DPValueError(f"tolerance must be in [{TOLERANCE_MIN:g}, {TOLERANCE_MAX:g}], got {t!r}")
    return t


def calibrate(
    build,
    args: argparse.Namespace,
    parameter: str,
    epsilon: float,
    delta: float,
    tolerance: float = 1e-3,
    max_evaluations: int = MAX_EVALUATIONS,
) -> dict[str, Any]:
    """Smallest value of ``parameter`` (a noise level: larger is more private) whose epsilon(delta) <= target.

    :func:`dputils.calibration.calibrate` over :data:`CALIBRATE_RANGE`: doubling up from 1 (or halving down)
    until the target is bracketed, then Brent's method on log of the accountant's *upper* bound until the
    bracket's relative width is at most ``tolerance``. The value returned is the end of the final bracket that
    meets the target, checked by evaluation, so the achieved epsilon never exceeds it. An evaluation that fails
    with :class:`NumericalError` counts as not meeting the target. At most ``max_evaluations`` accountant
    evaluations; :class:`NumericalError` when the search does not end within them or the target lies outside
    the range.
    """

    tolerance = check_tolerance(tolerance)
    max_evaluations = check_positive_int("max_evaluations", max_evaluations)
    lo_lim, hi_lim = CALIBRATE_RANGE

    def eps_at(v: float) -> float:
        setattr(args, parameter, v)
        r = build(args).get_epsilon(delta)
        return float(r.upper if r.upper is not None else r.value)

    c = _search(
        eps_at,
        epsilon,
        monotone="decreasing",
        start=1.0,
        limits=(lo_lim, hi_lim),
        rel_tol=tolerance,
        max_evaluations=max_evaluations,
        name=parameter,
    )
    if c.details.get("at_limit"):
        raise DPValueError(
            f"epsilon: target {epsilon:g} is met already at {parameter}={c.value:g}; calibrate searches "
            f"{parameter} in [{lo_lim:g}, {hi_lim:g}], so give a smaller target epsilon"
        )
    return {
        parameter: c.value,
        "epsilon": c.achieved,
        "bracket": list(c.bracket),
        "target_epsilon": epsilon,
        "delta": delta,
        "evaluations": c.evaluations,
    }


#: Peak bytes per privacy-loss grid point of a grid (PLD-type) accountant, measured for the PLD accountant
#: (all its arrays and the FFT buffers, about 2.5 kB per point of the loss range); used for estimates only.
GRID_BYTES_PER_POINT = 2048.0
#: The width a grid accountant's privacy-loss grid starts at when ``--discretization`` is not given (the PLD then
#: refines it until its bracket meets its relative tolerance): the floor of the memory estimates.
GRID_START_DISCRETIZATION = 1e-4


def _check_grid_for_target(args: argparse.Namespace, epsilon: float) -> None:
    """Up-front memory estimate of calibrating a grid accountant (one with ``--discretization``).

    The search evaluates the accountant at noise levels whose epsilon is up to about 4x the target (halving
    a Gaussian's noise quadruples its loss), and a privacy-loss grid of width h needs about epsilon / h
    points to represent that. A target the grid cannot hold in this machine's memory is refused (exit 2)
    instead of being searched for hours.
    """

    if not hasattr(args, "discretization"):
        return  # not a grid accountant
    h = args.discretization
    # by default the grid starts at the PLD's starting width and is refined from there: at least this many points
    h = GRID_START_DISCRETIZATION if h is None else check_positive("discretization", h)
    points = 4.0 * epsilon / h
    check_memory(
        "epsilon",
        points * GRID_BYTES_PER_POINT,
        f"calibrating to epsilon={epsilon:g} at discretization {h:g} (about {points:.2g} grid points)",
        hint="give a smaller target --epsilon or a coarser --discretization",
    )


def _calibrate(argv: Sequence[str]) -> dict[str, Any]:
    spec, args = _spec_and_args("calibrate", argv)
    if spec.noise_parameter is None:
        raise DPValueError(f"accountant: {spec.name} cannot be calibrated")
    parameter = spec.noise_parameter
    if spec.uses_mechanism and args.mechanism == "laplace" and parameter == "sigma":
        parameter = "scale"  # the Laplace mechanism's noise parameter
    _refuse_unused(args, spec, argv, searched=parameter)
    setattr(args, parameter, 1.0)  # placeholder so the mechanism validates; the search sets it
    _validate_common(args, spec)
    eps = check_positive("epsilon", args.epsilon)
    delta = check_delta(args.delta)
    tol = check_tolerance(args.tolerance)
    schedule = _resolve_steps(args, spec)
    _check_grid_for_target(args, eps)
    t0 = time.perf_counter()
    out = calibrate(spec.build, args, parameter, eps, delta, tol)
    out["accountant"] = spec.name
    _state_schedule(out, schedule, args)
    out["seconds"] = round(time.perf_counter() - t0, 6)
    return out


def _state_schedule(out: dict[str, Any], schedule: dict[str, Any], args: argparse.Namespace) -> None:
    """Put the sampling rate ``q`` and the number of steps ``steps`` (T) the accountant used into the output,
    with the epochs, batch size and data-set size they came from: the common accountants' from
    :func:`~dputils.cli.schedule.resolve_steps`, the matrix and shuffling accountants' from their build hook
    (``args.schedule``). A key the result already holds is kept as the result gives it."""
    fields = dict(schedule)
    fields.update(getattr(args, "schedule", None) or {})
    for key, value in fields.items():
        out.setdefault(key, value)


def _audit(argv: Sequence[str]) -> dict[str, Any]:
    p = _Parser(prog="python -m dputils audit")
    audit_cli.add_arguments(p)
    return audit_cli.run(p.parse_args(argv))


#: The work limit of a command-line query (epsilon, delta, calibrate) when ``DPUTILS_MAX_WORK`` is not set:
#: about one minute of CPU at the matrix DP's measured rate
#: (:data:`dputils.matrix.allocation.DP_OPERATIONS_PER_SECOND`, 1.5e9 operations per second), where the library's
#: own default (:data:`dputils.resources.DEFAULT_MAX_WORK`, 1e12) allows several minutes for the book's runs.
#: ``--bands 20 --batches 100`` of matrix-renyi-tight (3.4e11 operations, about 2 minutes and 3.6 GB measured)
#: is refused; ``DPUTILS_MAX_WORK=1e12`` lets it run.
QUERY_MAX_SECONDS = 60.0
QUERY_MAX_WORK = 9e10
#: The memory limit of a command-line query when ``DPUTILS_MAX_MEMORY_GB`` is not set: a few GB (or the
#: machine's own limit, :func:`dputils.resources.memory_limit`, when smaller).
QUERY_MAX_MEMORY_GB = 4.0


@contextlib.contextmanager
def _query_limits():
    """``DPUTILS_MAX_WORK`` at :data:`QUERY_MAX_WORK` and ``DPUTILS_MAX_MEMORY_GB`` at
    :data:`QUERY_MAX_MEMORY_GB` (when the machine allows more) for the duration of one query, each unless
    already set."""
    from ..resources import QUERY_DEFAULT_MARK, memory_limit

    saved = {k: os.environ.get(k) for k in ("DPUTILS_MAX_WORK", "DPUTILS_MAX_MEMORY_GB", QUERY_DEFAULT_MARK)}
    if not saved["DPUTILS_MAX_WORK"]:
        os.environ["DPUTILS_MAX_WORK"] = repr(QUERY_MAX_WORK)
    if not saved["DPUTILS_MAX_MEMORY_GB"] and memory_limit().bytes > QUERY_MAX_MEMORY_GB * 1024.0**3:
        os.environ["DPUTILS_MAX_MEMORY_GB"] = os.environ[QUERY_DEFAULT_MARK] = repr(QUERY_MAX_MEMORY_GB)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _accounting_command(cmd: str, rest: Sequence[str]) -> int:
    """epsilon / delta / calibrate / audit / accountants: JSON on stdout, or one line on stderr.

    Bad input (:class:`DPValueError`, argparse errors) exits 2; a computation that cannot give a
    trustworthy number (:class:`NumericalError`, overflow, a singular matrix, any other ValueError or
    ArithmeticError from the numerics, running out of memory) exits 3. numpy's RuntimeWarnings are not
    printed: a number they would taint is refused by the checks instead.
    """
    import numpy as np

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # RuntimeWarnings etc.: degraded results are flagged in the JSON
            if cmd in ("epsilon", "delta"):
                with _query_limits():
                    out = _query(cmd, rest)
            elif cmd == "calibrate":
                with _query_limits():
                    out = _calibrate(rest)
            elif cmd == "audit":
                out = _audit(rest)
            else:  # accountants
                if rest:
                    raise DPValueError(f"accountants takes no options, got {' '.join(rest)!r}")
                for name in registry.names():
                    print(f"{name:24s} {registry.get(name).help}")
                return 0
            text = dumps(out)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2, already reported)
        return exc.code if isinstance(exc.code, int) else 2
    except DPValueError as exc:
        sys.stderr.write(f"error: {_one_line(exc)}\n")
        return 2
    except np.linalg.LinAlgError as exc:
        sys.stderr.write(f"numerical error: linear algebra failed ({_one_line(exc)})\n")
        return 3
    except MemoryError:
        sys.stderr.write("numerical error: ran out of memory; use smaller parameters\n")
        return 3
    except OverflowError as exc:
        sys.stderr.write(f"numerical error: overflow ({_one_line(exc)})\n")
        return 3
    except (NumericalError, ArithmeticError, ValueError) as exc:
        sys.stderr.write(f"numerical error: {_one_line(exc)}\n")
        return 3
    print(text)
    return 0


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split()) or type(exc).__name__
    return msg


#: ``dputils --help``: the commands in plain text (the module docstring is reST for the API reference).
HELP = """\
usage: dputils COMMAND [OPTIONS]    (or: python -m dputils COMMAND [OPTIONS]; COMMAND --help for its options)

Commands:
  epsilon      epsilon(delta) of a composed mechanism, as one JSON object (value, bounds, accountant, seconds)
  delta        delta(epsilon) of a composed mechanism, likewise
  calibrate    the smallest noise (sigma, or the Laplace scale) meeting --epsilon and --delta, conservative
  audit        one-run privacy auditing of canary scores (--in-scores, --out-scores: one column of numbers)
  accountants  the registered accountant names
  run          execute the book's notebooks (--profile smoke|full|paper, --only NAME, --jobs N, --changed)
  book         run, then build the book's HTML (--check: check every page in a headless browser)
  sweep        one notebook run per grid point (NOTEBOOK --grid GRID.yml) on dask.distributed

Examples:
  dputils epsilon --accountant pld --mechanism subsampled-gaussian --sigma 1.0 --q 0.01 --steps 1000 --delta 1e-5
  dputils epsilon --accountant pld --mechanism subsampled-gaussian --sigma 1.0 \\
      --epochs 15 --batch-size 256 --dataset-size 60000 --delta 1e-5      (q = B/N, T = ceil(E N / B))
  dputils calibrate --accountant rdp --mechanism subsampled-gaussian --epochs 15 --batch-size 256 \\
      --dataset-size 60000 --epsilon 3 --delta 1e-5

--steps has no default: give it, or --epochs with --batch-size and --dataset-size (the output states q and steps).
Output is strict JSON: a bound the method cannot give, or an infinite one, is null.
Bad input exits with status 2 and one line naming the parameter; numerical failure with status 3.
An option the chosen accountant does not use, or an option given twice, is bad input.
The accounting commands need only numpy, scipy and mpmath; run, book and sweep need the book extras.

Options:
  -h, --help     this text
  -V, --version  the installed version
"""


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status. A reader that leaves early (``dputils --help | head -1``)
    ends the output quietly with status 0 (the rest of the output is dropped, not reported as an error)."""
    try:
        rc = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return rc
    except BrokenPipeError:
        _silence_stdout()
        return 0


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so that the interpreter's final flush is quiet."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (captured): nothing to do
        pass


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("run", "book", "sweep", "epsilon", "delta", "calibrate", "audit", "accountants")
    if not argv or argv[0] in ("-h", "--help"):
        print(HELP, end="")
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        print(f"dputils {__version__}")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in commands:
        sys.stderr.write(f"error: unknown command {cmd!r}; use one of {', '.join(commands)}\n")
        return 2
    try:
        if cmd in ("epsilon", "delta", "calibrate", "audit", "accountants"):
            return _accounting_command(cmd, rest)
        if cmd == "sweep":
            from ..book.sweep import cli_main as sweep_main

            return sweep_main(rest)
        from ..book.run import cli_main

        return cli_main(cmd, rest)
    except (DPValueError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except (NumericalError, ArithmeticError) as exc:
        sys.stderr.write(f"numerical error: {exc}\n")
        return 3
    except BrokenPipeError:  # `dputils accountants | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except ModuleNotFoundError as exc:
        line = message_for(exc)
        if line is None:
            raise
        sys.stderr.write(f"error: dputils {cmd}: {line}\n")
        return 2
