"""Every accountant on the Poisson-subsampled Gaussian: time and error of eps(delta), against peers, in one run.

For the mechanism (``--q`` 0.01, ``--sigma`` 1 by default) composed T times and each target delta, every
*method* is asked for epsilon(delta):

* every accountant of ``dputils.accountants.registry`` that composes the Poisson-subsampled Gaussian (today
  pld, rdp, rdp-classic, gdp, spa, edgeworth), built exactly as the command line builds it (its defaults),
  labelled and described from its registration (label, answer), so a new or replaced accountant is measured
  by a rerun without touching this script;
* the peers installed here: dp_accounting's PLD and RDP accountants, the ``prv_accountant`` package, and
  Opacus' RDP, PRV and GDP accountants (their default settings; the PRV ones with eps_error
  ``--prv-eps-error`` and delta_error delta/1000).

**Time**: the median over ``--repeat`` cold calls (construct, compose, get_epsilon; every ``functools``
cache of ``dputils`` cleared before each call; imports not counted). Each (method, T, delta) runs in a
forked worker process with a wall-clock limit (``--timeout``) and an address-space limit (``--memory-gib``),
so a method that runs away is recorded as ``timeout``/``failed`` instead of stopping the run; once a method
times out at some T it is ``skipped`` at larger T. A call slower than ``--slow`` seconds is not repeated.

**Error**: against the certified bracket [l, u] of our PLD accountant at the fine grid width
``--ref-discretization`` (composed once per T, asked at every delta; where it refuses, e.g. below its
floating-point resolution at tiny delta, it is retried on grids 4x and 16x coarser, and if all refuse the
point has *no reference* and the reasons are recorded -- no number is made up). Each answer records
``epsilon - l`` and ``epsilon - u``; the exact error lies between them. Every method's own certified
interval is recorded where it has one. A method that refuses or fails at a point is recorded with its reason.

The result (layout: ``dputils.book.benchmarks``) goes to ``benchmarks/results/accountants.json`` with the run's
metadata (date, cores, CPU, load average before and after, library versions, git commit).

    python benchmarks/bench_accountants.py                          # T 1e2..1e7, delta 1e-5, 1e-10, 1e-15
    python benchmarks/bench_accountants.py --quick --out /tmp/q.json   # small grid, well under a minute
    python benchmarks/bench_accountants.py --steps 100 1000 --deltas 1e-5 --methods pld rdp dp_accounting-pld
    python benchmarks/bench_accountants.py --list                   # the methods and their settings
"""

from __future__ import annotations

import argparse
import functools
import gc
import math
import multiprocessing as mp
import os
import resource
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere: the checkout's dputils
    sys.path.insert(0, str(ROOT))

from dputils.book import benchmarks as bm  # noqa: E402

DEFAULT_OUT = ROOT / bm.RESULTS_DIR / "accountants.json"
FULL = {"steps": [10**k for k in range(2, 8)], "deltas": [1e-5, 1e-10, 1e-15]}
QUICK = {"steps": [10, 100], "deltas": [1e-5, 1e-15], "repeat": 1, "ref_discretization": 1e-4}
REF_LADDER = (1, 4, 16)  # reference grid widths, in units of --ref-discretization, tried in this order


# --------------------------------------------------------------------------- methods


def clear_caches() -> int:
    """Clear every ``functools`` cache of the loaded ``dputils`` modules; returns how many were cleared."""
    n = 0
    for name, mod in list(sys.modules.items()):
        if not (name == "dputils" or name.startswith("dputils.")) or mod is None:
            continue
        for obj in list(vars(mod).values()):
            if callable(getattr(obj, "cache_clear", None)) and hasattr(obj, "cache_info"):
                obj.cache_clear()
                n += 1
    return n


def _registry_methods(sigma: float, q: float) -> dict[str, dict[str, Any]]:
    """dputils accountants of the registry that compose the subsampled Gaussian, in the registry's order, each
    built by the command line's path (``dputils.cli.front``) with the command line's defaults."""
    from dputils import cli
    from dputils.accountants import registry
    from dputils.mechanisms import make_mechanism

    mech = make_mechanism("subsampled-gaussian", sigma=sigma, q=q)
    out = {}
    for reg in registry.select(events={"subsampled-gaussian"}):
        front = cli.front(reg.name)
        parser = argparse.ArgumentParser(add_help=False)
        if front.add_arguments is not None:
            front.add_arguments(parser)
        extra = vars(parser.parse_args([]))

        def build(T: int, front=front, extra=extra):
            ns = argparse.Namespace(
                mechanism="subsampled-gaussian", sigma=sigma, q=q, scale=None, steps=T, direction="both", **extra
            )
            return front.build(ns)

        out[reg.name] = {
            "build": build,
            "settings": {**reg.options, **extra},
            "help": reg.help,
            "mechanism": repr(mech),
            "registration": reg,
        }
    return out


#: What a registration's ``answer`` means on the page: (text, the value is an upper bound, certified interval).
ANSWERS = {
    "bracket": ("certified bracket [lower, upper]; reports the upper end", True, True),
    "upper-bound": ("upper bound", True, False),
    "estimate": ("estimate with a certified bracket", False, True),
    "approximation": ("approximation, not a bound", False, False),
}


def _ours_call(build: Callable, T: int, delta: float) -> dict[str, Any]:
    r = build(T).get_epsilon(delta)
    return {"epsilon": float(r.value), "lower": r.lower, "upper": r.upper, "kind": r.kind}


def _dpa_pld(sigma, q, T, delta, opts):
    import dp_accounting

    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=opts.dpa_discretization)
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), T)
    return {"epsilon": float(acc.get_epsilon(delta)), "lower": None, "upper": None, "kind": "upper-bound"}


def _dpa_rdp(sigma, q, T, delta, opts):
    import dp_accounting

    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), T)
    eps = float(acc.get_epsilon(delta))
    return {"epsilon": eps, "lower": None, "upper": eps, "kind": "upper-bound"}


def _prv(sigma, q, T, delta, opts):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    acc = PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma),
        eps_error=opts.prv_eps_error,
        delta_error=delta / 1000,
        max_self_compositions=T,
    )
    low, est, up = acc.compute_epsilon(delta, T)
    return {"epsilon": float(est), "lower": float(low), "upper": float(up), "kind": "estimate"}


def _opacus(kind):
    def call(sigma, q, T, delta, opts):
        from opacus.accountants import GaussianAccountant, PRVAccountant, RDPAccountant

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # GDP's "experimental" warning
            acc = {"rdp": RDPAccountant, "prv": PRVAccountant, "gdp": GaussianAccountant}[kind]()
            acc.history = [(sigma, q, T)]
            if kind == "prv":
                eps = float(acc.get_epsilon(delta, eps_error=opts.prv_eps_error))
            else:
                eps = float(acc.get_epsilon(delta))
        bound = kind in ("rdp", "prv")
        return {
            "epsilon": eps,
            "lower": None,
            "upper": eps if bound else None,
            "kind": "upper-bound" if bound else "approximation",
        }

    return call


#: Peers: name -> (label, library, answer, bound, certified interval, our counterpart, call)
PEERS = {
    "dp_accounting-pld": (
        "PLD (dp_accounting)",
        "dp-accounting",
        "upper bound (pessimistic connect-the-dots PLD; FFT rounding not bounded)",
        True,
        False,
        "pld",
        _dpa_pld,
    ),
    "dp_accounting-rdp": (
        "RDP (dp_accounting)",
        "dp-accounting",
        "upper bound (default orders)",
        True,
        False,
        "rdp",
        _dpa_rdp,
    ),
    "prv_accountant": (
        "PRV (prv_accountant)",
        "prv-accountant",
        "estimate with the package's error bounds [lower, upper]",
        False,
        True,
        "pld",
        _prv,
    ),
    "opacus-rdp": ("RDP (Opacus)", "opacus", "upper bound (default orders)", True, False, "rdp", _opacus("rdp")),
    "opacus-prv": ("PRV (Opacus)", "opacus", "upper end of the PRV error bounds", True, False, "pld", _opacus("prv")),
    "opacus-gdp": (
        "GDP/CLT (Opacus)",
        "opacus",
        "approximation (CLT), not a bound",
        False,
        False,
        "gdp",
        _opacus("gdp"),
    ),
}


def _peer_available(library: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return None


def collect_methods(args) -> tuple[list[dict[str, Any]], dict[str, Callable]]:
    """The methods' descriptions (for the file) and their calls ``call(T, delta) -> answer``."""
    from importlib import metadata

    infos, calls = [], {}
    ours = _registry_methods(args.sigma, args.q)
    version = metadata.version("dputils")
    for name, m in ours.items():  # the registry's order
        reg = m["registration"]
        text, bound, cert = ANSWERS[reg.answer]
        label, answer = f"{reg.label} (dputils)", f"{text} ({reg.help})"
        infos.append(
            {
                "name": name,
                "label": label,
                "family": "dputils",
                "library": "dputils",
                "version": version,
                "answer": answer,
                "bound": bound,
                "certified_interval": cert,
                "counterpart": None,
                "settings": {**m["settings"], "direction": "both", "registry_help": m["help"]},
            }
        )
        calls[name] = functools.partial(_ours_call, m["build"])
    for name, (label, lib, answer, bound, cert, counterpart, fn) in PEERS.items():
        ver = _peer_available(lib)
        if ver is None:
            print(f"peer {name}: {lib} is not installed, left out", file=sys.stderr)
            continue
        settings = {
            "dp_accounting-pld": {
                "value_discretization_interval": args.dpa_discretization,
                "neighboring_relation": "ADD_OR_REMOVE_ONE",
            },
            "dp_accounting-rdp": {"orders": "default", "neighboring_relation": "ADD_OR_REMOVE_ONE"},
            "prv_accountant": {"eps_error": args.prv_eps_error, "delta_error": "delta/1000"},
            "opacus-rdp": {"alphas": "default"},
            "opacus-prv": {"eps_error": args.prv_eps_error, "delta_error": "delta/1000"},
            "opacus-gdp": {"poisson": True},
        }[name]
        infos.append(
            {
                "name": name,
                "label": label,
                "family": "peer",
                "library": lib,
                "version": ver,
                "answer": answer,
                "bound": bound,
                "certified_interval": cert,
                "counterpart": counterpart if counterpart in ours else None,
                "settings": settings,
            }
        )
        calls[name] = functools.partial(fn, args.sigma, args.q, opts=args)
    if args.methods:
        unknown = sorted(set(args.methods) - set(calls))
        if unknown:
            raise SystemExit(f"--methods: unknown {unknown}; known: {', '.join(calls)}")
        infos = [m for m in infos if m["name"] in args.methods]
        keep = {m["name"] for m in infos}
        for m in infos:
            if m["counterpart"] not in keep:
                m["counterpart"] = None
        calls = {k: v for k, v in calls.items() if k in keep}
    return infos, calls


# --------------------------------------------------------------------------- running in a worker


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:400]


def _classify(exc: BaseException) -> str:
    return "refused" if isinstance(exc, (ValueError, ArithmeticError)) else "failed"


def _limit_memory(gib: float) -> None:
    if gib <= 0:
        return
    try:
        with open("/proc/self/status") as fh:
            vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
        limit = vm + int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, StopIteration):  # pragma: no cover - not Linux
        pass


def _worker(conn, job: Callable, memory_gib: float) -> None:
    """Child: run ``job(send)``, where ``send`` passes messages up; a crash is reported, never raised."""
    _limit_memory(memory_gib)
    warnings.simplefilter("ignore")
    try:
        job(conn.send)
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the parent
        conn.send(
            {
                "event": "crash",
                "status": _classify(exc),
                "reason": _one_line(exc),
                "error_type": type(exc).__name__,
                "traceback": traceback.format_exc()[-2000:],
            }
        )
    finally:
        conn.send({"event": "end"})
        conn.close()


def run_isolated(job: Callable, timeout: float, memory_gib: float) -> tuple[list[dict], str | None]:
    """Run ``job(send)`` in a forked process; returns (messages received, None or "timeout"/"died: ...")."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_worker, args=(send, job, memory_gib), daemon=True)
    p.start()
    send.close()
    msgs, problem = [], None
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not recv.poll(left):
            problem = "timeout"
            break
        try:
            m = recv.recv()
        except EOFError:
            p.join(5)
            problem = f"died: the worker process ended with exit code {p.exitcode} (killed for memory?)"
            break
        if m.get("event") == "end":
            break
        msgs.append(m)
    if p.is_alive():
        p.kill()
    p.join(5)
    recv.close()
    return msgs, problem


def _timed_job(call: Callable, T: int, delta: float, repeat: int, slow: float) -> Callable:
    def job(send):
        for i in range(repeat):
            clear_caches()
            gc.collect()
            t0 = time.perf_counter()
            try:
                out = call(T, delta)
            except Exception as exc:  # noqa: BLE001
                send(
                    {
                        "event": "error",
                        "status": _classify(exc),
                        "reason": _one_line(exc),
                        "error_type": type(exc).__name__,
                        "seconds": time.perf_counter() - t0,
                    }
                )
                return
            secs = time.perf_counter() - t0
            send({"event": "answer", "seconds": secs, **out})
            if secs > slow:
                return

    return job


def measure(name: str, call: Callable, T: int, delta: float, args) -> dict[str, Any]:
    """One record: the median time of cold calls and the answer, or the reason there is none."""
    rec: dict[str, Any] = {
        "method": name,
        "T": T,
        "delta": delta,
        "status": None,
        "reason": None,
        "error_type": None,
        "seconds": None,
        "times": [],
        "repeats": 0,
        "epsilon": None,
        "lower": None,
        "upper": None,
        "upper_vacuous": False,
        "kind": None,
        "load1": round(os.getloadavg()[0], 2),
    }
    msgs, problem = run_isolated(_timed_job(call, T, delta, args.repeat, args.slow), args.timeout, args.memory_gib)
    answers = [m for m in msgs if m["event"] == "answer"]
    errors = [m for m in msgs if m["event"] in ("error", "crash")]
    if answers:
        a = answers[-1]
        rec["times"] = [round(m["seconds"], 6) for m in answers]
        rec["repeats"] = len(answers)
        rec["seconds"] = statistics.median(m["seconds"] for m in answers)
        rec["kind"] = a["kind"]
        eps, lo, up = a["epsilon"], a["lower"], a["upper"]
        if eps is None or math.isnan(eps):
            rec.update(status="failed", reason=f"returned a NaN epsilon ({eps!r})")
        elif eps < 0:
            rec.update(status="failed", reason=f"returned a negative epsilon ({eps!r})")
        elif math.isinf(eps):
            rec.update(status="vacuous", reason="returned an infinite epsilon (no finite bound)")
        else:
            rec.update(status="ok", epsilon=eps)
            rec["lower"] = lo if lo is not None and math.isfinite(lo) else None
            rec["upper"] = up if up is not None and math.isfinite(up) else None
            rec["upper_vacuous"] = up is not None and math.isinf(up)
        if problem == "timeout":
            rec["reason"] = (
                f"timed out after {len(answers)} of {args.repeat} calls (limit {args.timeout:g} s); "
                "the median is over the completed calls"
            )
    elif errors:
        e = errors[0]
        rec.update(status=e["status"], reason=e["reason"], error_type=e["error_type"], seconds=e.get("seconds"))
    elif problem == "timeout":
        rec.update(status="timeout", reason=f"no answer within {args.timeout:g} s")
    else:
        rec.update(status="failed", reason=problem or "no answer and no error from the worker")
    return rec


def _reference_job(sigma: float, q: float, T: int, deltas: list[float], h: float) -> Callable:
    def job(send):
        from dputils.accountants import PLDAccountant
        from dputils.mechanisms import SubsampledGaussianMechanism

        t0 = time.perf_counter()
        acc = PLDAccountant(discretization=h).compose(SubsampledGaussianMechanism(sigma, q), T)
        for d in deltas:
            try:
                r = acc.get_epsilon(d)
                send(
                    {
                        "event": "answer",
                        "delta": d,
                        "lower": r.lower,
                        "upper": r.upper,
                        "epsilon": r.value,
                        "seconds": time.perf_counter() - t0,
                    }
                )
            except Exception as exc:  # noqa: BLE001
                send(
                    {
                        "event": "error",
                        "delta": d,
                        "status": _classify(exc),
                        "reason": _one_line(exc),
                        "seconds": time.perf_counter() - t0,
                    }
                )

    return job


def references(T: int, deltas: list[float], args) -> dict[float, dict[str, Any]]:
    """The certified PLD bracket at each delta for this T (see the module docstring for the ladder)."""
    out = {
        d: {
            "T": T,
            "delta": d,
            "status": None,
            "lower": None,
            "upper": None,
            "discretization": None,
            "seconds": None,
            "reason": None,
            "attempts": [],
        }
        for d in deltas
    }
    todo = list(deltas)
    for factor in REF_LADDER:
        if not todo:
            break
        h = args.ref_discretization * factor
        t0 = time.perf_counter()
        msgs, problem = run_isolated(_reference_job(args.sigma, args.q, T, todo, h), args.ref_timeout, args.memory_gib)
        secs = time.perf_counter() - t0
        got = {m["delta"]: m for m in msgs if "delta" in m}
        crash = next((m for m in msgs if m["event"] == "crash"), None)
        for d in list(todo):
            m = got.get(d)
            if m is not None and m["event"] == "answer":
                out[d].update(
                    status="ok", lower=m["lower"], upper=m["upper"], discretization=h, seconds=secs, reason=None
                )
                out[d]["attempts"].append({"discretization": h, "status": "ok"})
                todo.remove(d)
                continue
            if m is not None:
                status, reason = m["status"], m["reason"]
            elif crash is not None:
                status, reason = crash["status"], crash["reason"]
            elif problem == "timeout":
                status, reason = "timeout", f"no bracket within {args.ref_timeout:g} s"
            else:
                status, reason = "failed", problem or "no answer from the worker"
            out[d]["attempts"].append({"discretization": h, "status": status, "reason": reason})
            out[d].update(status=status, reason=reason)
    for d in todo:
        tried = ", ".join(f"{a['discretization']:g}" for a in out[d]["attempts"])
        out[d]["reason"] = f"PLD gave no bracket at h = {tried}; last: {out[d]['attempts'][-1]['reason']}"
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"small grid (T {QUICK['steps']}, delta {QUICK['deltas']}, 1 call, reference h "
        f"{QUICK['ref_discretization']:g}): well under a minute; for the format test",
    )
    ap.add_argument("--sigma", type=float, default=1.0, help="noise multiplier (default 1)")
    ap.add_argument("--q", type=float, default=0.01, help="sampling rate (default 0.01)")
    ap.add_argument("--steps", type=int, nargs="+", default=None, help=f"T values (default {FULL['steps']})")
    ap.add_argument("--deltas", type=float, nargs="+", default=None, help=f"target deltas (default {FULL['deltas']})")
    ap.add_argument("--methods", nargs="+", default=None, help="only these methods (default: all; see --list)")
    ap.add_argument("--repeat", type=int, default=None, help="cold calls per point, median reported (default 3)")
    ap.add_argument("--slow", type=float, default=10.0, help="a call slower than this many seconds is not repeated")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per (method, T, delta) before giving up")
    ap.add_argument(
        "--memory-gib",
        type=float,
        default=8.0,
        help="address space a worker may add, GiB (0: no limit); beyond it the method fails",
    )
    ap.add_argument(
        "--ref-discretization",
        type=float,
        default=None,
        help="grid width of the reference PLD (default 1e-5; retried 4x and 16x coarser)",
    )
    ap.add_argument("--ref-timeout", type=float, default=900.0, help="seconds per reference attempt")
    ap.add_argument(
        "--dpa-discretization",
        type=float,
        default=1e-4,
        help="dp_accounting PLD value_discretization_interval (default 1e-4, its own default)",
    )
    ap.add_argument(
        "--prv-eps-error", type=float, default=0.01, help="eps_error of the PRV peers (default 0.01, Opacus' default)"
    )
    ap.add_argument("--note", default="", help="free text stored in the metadata (e.g. the machine's load)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help=f"output JSON (default {DEFAULT_OUT.relative_to(ROOT)})")
    ap.add_argument("--list", action="store_true", help="print the methods and their settings, then exit")
    args = ap.parse_args(argv)
    base = QUICK if args.quick else {}
    args.steps = args.steps or base.get("steps", FULL["steps"])
    args.deltas = args.deltas or base.get("deltas", FULL["deltas"])
    args.repeat = args.repeat or base.get("repeat", 3)
    args.ref_discretization = args.ref_discretization or base.get("ref_discretization", 1e-5)
    if not 0 < args.q <= 1 or args.sigma <= 0:
        ap.error("--q must be in (0, 1] and --sigma > 0")
    if any(t < 1 for t in args.steps) or any(not 0 < d < 1 for d in args.deltas) or args.repeat < 1:
        ap.error("--steps must be >= 1, --deltas in (0, 1), --repeat >= 1")
    args.steps = sorted(set(args.steps))
    args.deltas = sorted(set(args.deltas), reverse=True)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    infos, calls = collect_methods(args)
    if args.list:
        for m in infos:
            print(f"{m['name']:18s} {m['family']:8s} {m['label']:24s} {m['answer']}  {m['settings']}")
        return 0
    # import every peer once here so that the forked workers start warm (imports are not timed)
    for lib in ("dp_accounting", "prv_accountant", "opacus.accountants"):
        try:
            __import__(lib)
        except ImportError:
            pass
    meta = bm.run_metadata(ROOT, note=args.note)
    run = meta["run_id"]
    print(
        f"run {run}: {len(infos)} methods, T {args.steps}, delta {args.deltas}, load {meta['load_before']}",
        file=sys.stderr,
        flush=True,
    )
    refs_out, recs = [], []
    timed_out: dict[str, int] = {}
    for T in args.steps:
        t0 = time.perf_counter()
        refs = references(T, args.deltas, args)
        for d in args.deltas:
            refs_out.append({"run_id": run, **refs[d]})
        brief = ", ".join(
            f"{d:.0e}: " + (f"[{r['lower']:.6g}, {r['upper']:.6g}]" if r["status"] == "ok" else r["status"])
            for d, r in refs.items()
        )
        print(f"T={T:.0e} reference ({time.perf_counter() - t0:.1f} s) {brief}", file=sys.stderr, flush=True)
        for d in args.deltas:
            ref = refs[d]
            for m in infos:
                name = m["name"]
                if name in timed_out:
                    rec = {
                        "method": name,
                        "T": T,
                        "delta": d,
                        "status": "skipped",
                        "error_type": None,
                        "reason": f"timed out at T={timed_out[name]} (limit {args.timeout:g} s): not run at larger T",
                        "seconds": None,
                        "times": [],
                        "repeats": 0,
                        "epsilon": None,
                        "lower": None,
                        "upper": None,
                        "upper_vacuous": False,
                        "kind": None,
                        "load1": None,
                    }
                else:
                    rec = measure(name, calls[name], T, d, args)
                    if rec["status"] == "timeout":
                        timed_out[name] = T
                rec["run_id"] = run
                rec["ref_status"] = ref["status"]
                ok = rec["status"] == "ok" and ref["status"] == "ok"
                rec["err_vs_ref_lower"] = rec["epsilon"] - ref["lower"] if ok else None
                rec["err_vs_ref_upper"] = rec["epsilon"] - ref["upper"] if ok else None
                recs.append(rec)
                shown = (
                    f"eps {rec['epsilon']:.8g} in {rec['seconds']:.4f} s"
                    if rec["status"] == "ok"
                    else f"{rec['status']}: {rec['reason']}"[:150]
                )
                print(f"  T={T:.0e} delta={d:.0e} {name:18s} {shown}", file=sys.stderr, flush=True)
        write(args, meta, infos, refs_out, recs, done=args.steps[: args.steps.index(T) + 1])
    return 0


def write(args, meta: dict[str, Any], infos, refs_out, recs, done: list[int]) -> Path:
    """Write the file for the T values ``done`` so far (after each T: an interrupted run keeps what it did).

    ``meta["complete"]`` says whether every T of the requested grid is in; ``meta["steps_requested"]`` lists them.
    """
    meta = bm.finish_metadata(dict(meta))
    meta["complete"] = done == args.steps
    meta["steps_requested"] = args.steps
    payload = {
        "schema": bm.ACCOUNTANTS_SCHEMA,
        "meta": meta,
        "mechanism": {
            "name": "subsampled-gaussian",
            "sigma": args.sigma,
            "q": args.q,
            "neighbouring": "add or remove one (the worse direction) unless a method says otherwise",
        },
        "grid": {"steps": done, "deltas": args.deltas},
        "settings": {
            "repeat": args.repeat,
            "slow_s": args.slow,
            "timeout_s": args.timeout,
            "memory_gib": args.memory_gib,
            "ref_discretization": args.ref_discretization,
            "ref_ladder": [args.ref_discretization * f for f in REF_LADDER],
            "ref_timeout_s": args.ref_timeout,
            "quick": args.quick,
            "timing": "median of cold calls (construct, compose, get_epsilon) in a forked worker, "
            "dputils functools caches cleared before each call, imports not timed",
        },
        "methods": infos,
        "references": refs_out,
        "records": recs,
    }
    bm.validate_accountants(payload)
    path = bm.write_json(args.out, payload)
    state = "complete" if meta["complete"] else f"partial: T up to {done[-1]:.0e}"
    print(
        f"wrote {path} ({state}; {meta['wall_s']} s, load {meta['load_before']} -> {meta['load_after']})",
        file=sys.stderr,
        flush=True,
    )
    return path
    return 0


if __name__ == "__main__":
    sys.exit(main())
