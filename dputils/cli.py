"""``python -m dputils``: run the book's notebooks, build the book, and query accountants.

Commands:

* ``run [--profile smoke|full|paper] [--only NAME ...] [--jobs N]``: execute notebooks with papermill.
* ``book [--profile ...] [--jobs N]``: ``run``, then ``jupyter-book build . -W --all``.
* ``epsilon`` / ``delta``: one JSON object with the value, its bounds, the accountant and the seconds.
* ``calibrate``: the smallest noise parameter meeting (``--epsilon``, ``--delta``), conservative.
* ``audit``: one-run privacy auditing of canary scores (when the audit module is installed).
* ``accountants``: the registered accountant names.

Bad input exits with status 2 and one line naming the parameter; numerical failure with status 3.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any, Sequence

from .errors import DPValueError, NumericalError, check_delta, check_epsilon, check_positive, check_positive_int


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line (no usage dump) on errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def _float(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None


def _add_common_accounting(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accountant", required=True, help="accountant name (see `python -m dputils accountants`)")
    p.add_argument("--mechanism", default=None, help="gaussian | subsampled-gaussian | laplace (| balls-in-bins ...)")
    p.add_argument("--sigma", type=_float, default=None, help="noise multiplier (std / sensitivity)")
    p.add_argument("--q", type=_float, default=None, help="Poisson sampling probability in (0, 1]")
    p.add_argument("--scale", type=_float, default=None, help="Laplace scale")
    p.add_argument("--steps", type=_float, default=1, help="number of compositions (>= 1)")
    p.add_argument("--direction", default="both", choices=["both", "add", "remove"],
                   help="neighbouring direction (default: the worse of both)")


def _validate_common(args: argparse.Namespace, spec) -> None:
    for name in ("sigma", "q", "scale", "steps", "epsilon", "delta"):
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
    args.steps = check_positive_int("steps", args.steps)
    if spec.uses_mechanism and args.mechanism is None:
        raise DPValueError("mechanism is required (gaussian, subsampled-gaussian or laplace)")


def _spec_and_args(command: str, argv: Sequence[str]):
    from .accountants import registry

    pre = _Parser(prog=f"python -m dputils {command}", add_help=False)
    pre.add_argument("--accountant")
    known, _ = pre.parse_known_args(argv)
    parser = _Parser(prog=f"python -m dputils {command}", description=f"{command} of a composed mechanism")
    _add_common_accounting(parser)
    if command == "epsilon":
        parser.add_argument("--delta", type=_float, required=True, help="target delta in (0, 1)")
    elif command == "delta":
        parser.add_argument("--epsilon", type=_float, required=True, help="epsilon >= 0")
    else:  # calibrate
        parser.add_argument("--epsilon", type=_float, required=True, help="target epsilon > 0")
        parser.add_argument("--delta", type=_float, required=True, help="target delta in (0, 1)")
        parser.add_argument("--tolerance", type=_float, default=1e-3, help="relative width of the final bracket")
    spec = None
    if known.accountant is not None:
        try:
            spec = registry.get(known.accountant)
        except KeyError as exc:
            raise DPValueError(f"accountant: {exc.args[0]}") from None
        if spec.add_arguments is not None:
            spec.add_arguments(parser)
    args = parser.parse_args(argv)
    assert spec is not None
    return spec, args


def _query(command: str, argv: Sequence[str]) -> dict[str, Any]:
    spec, args = _spec_and_args(command, argv)
    _validate_common(args, spec)
    t0 = time.perf_counter()
    if command == "epsilon":
        check_delta(args.delta)
        res = spec.build(args).get_epsilon(args.delta)
    else:
        check_epsilon(args.epsilon)
        res = spec.build(args).get_delta(args.epsilon)
    out = res.to_dict()
    out["accountant"] = spec.name
    out["seconds"] = round(time.perf_counter() - t0, 6)
    return out


def calibrate(build, args: argparse.Namespace, parameter: str, epsilon: float, delta: float,
              tolerance: float = 1e-3) -> dict[str, Any]:
    """Smallest value of ``parameter`` (a noise level: larger is more private) whose epsilon(delta) <= target.

    Bisection on the accountant's *upper* bound; the value returned is the upper end of the final
    bracket, so the achieved epsilon never exceeds the target (conservative by construction).
    """

    def eps_at(v: float) -> float:
        setattr(args, parameter, v)
        r = build(args).get_epsilon(delta)
        return float(r.upper if r.upper is not None else r.value)

    lo, hi = 1e-3, 1.0
    while True:
        try:
            e_hi = eps_at(hi)
        except NumericalError:
            e_hi = math.inf
        if e_hi <= epsilon:
            break
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise NumericalError(f"calibrate: no {parameter} <= 1e4 reaches epsilon={epsilon} at delta={delta}")
    while hi - lo > tolerance * hi:
        mid = 0.5 * (lo + hi)
        try:
            e = eps_at(mid)
        except NumericalError:
            e = math.inf
        if e <= epsilon:
            hi, e_hi = mid, e
        else:
            lo = mid
    return {parameter: hi, "epsilon": e_hi, "bracket": [lo, hi], "target_epsilon": epsilon, "delta": delta}


def _calibrate(argv: Sequence[str]) -> dict[str, Any]:
    spec, args = _spec_and_args("calibrate", argv)
    if spec.noise_parameter is None:
        raise DPValueError(f"accountant {spec.name} cannot be calibrated")
    if getattr(args, spec.noise_parameter, None) is None:
        setattr(args, spec.noise_parameter, 1.0)  # placeholder so the mechanism validates; the search sets it
    _validate_common(args, spec)
    eps = check_positive("epsilon", args.epsilon)
    delta = check_delta(args.delta)
    t0 = time.perf_counter()
    out = calibrate(spec.build, args, spec.noise_parameter, eps, delta, args.tolerance)
    out["accountant"] = spec.name
    out["seconds"] = round(time.perf_counter() - t0, 6)
    return out


def _run_parser(prog: str) -> argparse.ArgumentParser:
    p = _Parser(prog=prog)
    p.add_argument("--profile", default="full", choices=["smoke", "full", "paper"], help="parameter profile")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="only these notebooks (stems)")
    p.add_argument("--jobs", type=int, default=2, help="notebooks executed in parallel (default 2)")
    p.add_argument("--timeout", type=int, default=3600, help="per-cell timeout in seconds")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = ("run", "book", "epsilon", "delta", "calibrate", "audit", "accountants")
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd not in commands:
        sys.stderr.write(f"error: unknown command {cmd!r}; use one of {', '.join(commands)}\n")
        return 2
    try:
        if cmd in ("epsilon", "delta"):
            print(json.dumps(_query(cmd, rest)))
            return 0
        if cmd == "calibrate":
            print(json.dumps(_calibrate(rest)))
            return 0
        if cmd == "accountants":
            from .accountants import registry

            for name in registry.names():
                print(f"{name:24s} {registry.get(name).help}")
            return 0
        if cmd == "audit":
            try:
                from .audit import cli as audit_cli
            except ModuleNotFoundError:
                sys.stderr.write("error: the audit module is not available in this checkout\n")
                return 2
            p = _Parser(prog="python -m dputils audit")
            audit_cli.add_arguments(p)
            print(json.dumps(audit_cli.run(p.parse_args(rest))))
            return 0
        from . import run as runner

        args = _run_parser(f"python -m dputils {cmd}").parse_args(rest)
        if args.jobs < 1:
            raise DPValueError(f"jobs must be >= 1, got {args.jobs}")
        ok = runner.run_notebooks(profile=args.profile, only=args.only, jobs=args.jobs, timeout=args.timeout)
        if not ok:
            return 1
        if cmd == "book":
            return runner.build_book()
        return 0
    except (DPValueError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except (NumericalError, ArithmeticError) as exc:
        sys.stderr.write(f"numerical error: {exc}\n")
        return 3
