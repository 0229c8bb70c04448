"""PLD accountant vs dp_accounting's PLDAccountant, same settings, same run.

Poisson-subsampled Gaussian, q=0.01, sigma=1, delta=1e-5, steps 1e3 .. 1e7 (``--max-steps`` limits them).
For each T, ``--repeat`` rounds; in every round a fresh ``compose(...).get_epsilon(delta)`` of ours and of
dp_accounting (default connect-the-dots, value_discretization_interval 1e-4) run back to back, the order
alternating between rounds, so both see the same machine load. Reported: median wall time of each, the ratio,
both epsilons (ours: upper bound and certified lower bound), and the peak Python-heap memory of one run of
each (tracemalloc, a separate untimed run; numpy allocations are traced).

Also printed: the exact epsilon from the saddle-contour truth of :mod:`dputils.truth` (no discretization,
no FFT; its own error bound is ~1e-11), so the error of each upper bound can be read off.

    python benchmarks/bench_pld.py [--repeat 3] [--max-steps 1e6] [--no-memory] [--json [PATH]]

``--json`` without PATH writes ``benchmarks/results/pld.json`` with the run's metadata.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import dp_accounting

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dputils import truth  # noqa: E402
from dputils.accountants import PLDAccountant  # noqa: E402
from dputils.book import benchmarks as bm  # noqa: E402
from dputils.mechanisms import SubsampledGaussianMechanism  # noqa: E402


def _timed(fn):
    t0 = time.perf_counter()
    v = fn()
    return time.perf_counter() - t0, v


def _peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-steps", type=float, default=1e7)
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    ap.add_argument(
        "--json",
        nargs="?",
        const=str(ROOT / "benchmarks" / "results" / "pld.json"),
        default=None,
        metavar="PATH",
        help="write the rows with the run's metadata (no PATH: benchmarks/results/pld.json)",
    )
    args = ap.parse_args()
    meta = bm.run_metadata(ROOT)
    q, sigma, delta = 0.01, 1.0, 1e-5
    mech = SubsampledGaussianMechanism(sigma, q)
    rows = []
    print(
        f"{'steps':>9} | {'ours s':>7} {'dp_acc s':>8} {'ratio':>6} | {'MiB ours':>8} {'MiB dpa':>8} | "
        f"{'eps ours (upper)':>17} {'eps ours lower':>15} {'eps dp_acc':>15} {'exact (contour)':>15}"
    )
    for T in (1_000, 10_000, 100_000, 1_000_000, 10_000_000):
        if T > args.max_steps:
            break

        def ours():
            return PLDAccountant().compose(mech, T).get_epsilon(delta)

        def theirs():
            a = dp_accounting.pld.PLDAccountant()
            a.compose(mech.to_dp_event(), T)
            return a.get_epsilon(delta)

        t_o, t_d = [], []
        for rnd in range(args.repeat):  # interleaved, order alternating
            for who in (ours, theirs) if rnd % 2 == 0 else (theirs, ours):
                dt, v = _timed(who)
                if who is ours:
                    t_o.append(dt)
                    r = v
                else:
                    t_d.append(dt)
                    e_dpa = v
        mo, md = statistics.median(t_o), statistics.median(t_d)
        mem_o = mem_d = float("nan")
        if not args.no_memory:
            mem_o, mem_d = _peak_mib(ours), _peak_mib(theirs)
        row = dict(
            steps=T,
            seconds_ours=mo,
            seconds_dp_accounting=md,
            speedup=md / mo,
            seconds_ours_all=t_o,
            seconds_dp_accounting_all=t_d,
            peak_mib_ours=mem_o,
            peak_mib_dp_accounting=mem_d,
            eps_ours=r.value,
            eps_ours_lower=r.lower,
            eps_dp_accounting=e_dpa,
        )
        exact, exact_err = truth.composition_epsilon([(mech, T)], delta)
        row.update(eps_exact=exact, eps_exact_err=exact_err)
        rows.append(row)
        print(
            f"{T:9d} | {mo:7.3f} {md:8.3f} {md / mo:6.2f} | {mem_o:8.1f} {mem_d:8.1f} | "
            f"{r.value:17.9f} {r.lower:15.9f} {e_dpa:15.9f} {exact:15.9f}",
            flush=True,
        )
    if args.json:
        payload = {"schema": bm.PLD_SCHEMA, "meta": bm.finish_metadata(meta), "rows": rows}
        print(f"wrote {bm.write_json(args.json, payload)}")


if __name__ == "__main__":
    main()
