"""PLD accountant vs prv_accountant at small T, and the issue-35 frontier settings, in the same run.

Poisson-subsampled Gaussian, sigma 1, q 0.01, delta 1e-5, T in 1, 10, 100, 1000. For each T, ``--repeat``
rounds; in every round a fresh ``PLDAccountant().compose(...).get_epsilon(delta)`` of ours and a fresh
``PRVAccountant(eps_error=0.01, delta_error=delta/1000)`` query of prv_accountant run back to back, the order
alternating between rounds, so both see the same machine load (prv is skipped when it is not installed).
Reported: median wall time of each, our certified bracket and its relative width, prv's estimate and its
stated bounds.

Frontier rows (ours only, remove direction where the issue says so): T 1e7 q 1e-4 sigma 2 delta 1e-5; one step
q 1e-3 sigma 0.5 delta 1e-10; T 1000 q 0.01 sigma 1 at delta 1e-15 and 1e-30.

    python benchmarks/bench_small_t.py [--repeat 5] [--json [PATH]]

``--json`` without PATH writes ``benchmarks/results/small_t.json`` with the run's metadata.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dputils.accountants import PLDAccountant  # noqa: E402
from dputils.book import benchmarks as bm  # noqa: E402
from dputils.mechanisms import SubsampledGaussianMechanism  # noqa: E402

try:
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant
except ImportError:  # the benchmark still measures ours
    PRVAccountant = None


def _timed(fn):
    t0 = time.perf_counter()
    v = fn()
    return time.perf_counter() - t0, v


FRONTIER = [
    # name, sigma, q, T, delta, direction
    ("T1e7 q1e-4 sigma2", 2.0, 1e-4, 10_000_000, 1e-5, "remove"),
    ("one step q1e-3 sigma0.5 delta1e-10", 0.5, 1e-3, 1, 1e-10, "both"),
    ("T1000 delta1e-15", 1.0, 0.01, 1000, 1e-15, "both"),
    ("T1000 delta1e-30", 1.0, 0.01, 1000, 1e-30, "both"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--frontier-repeat", type=int, default=3)
    ap.add_argument(
        "--json", nargs="?", const=str(ROOT / "benchmarks" / "results" / "small_t.json"), default=None, metavar="PATH"
    )
    args = ap.parse_args()
    meta = bm.run_metadata(ROOT)
    sigma, q, delta = 1.0, 0.01, 1e-5
    mech = SubsampledGaussianMechanism(sigma, q)
    rows = []
    print(
        f"{'T':>6} | {'ours s':>7} {'prv s':>7} | {'ours lower':>11} {'ours upper':>11} {'rel w':>8} | {'prv est':>9}"
    )
    for T in (1, 10, 100, 1000):

        def ours():
            return PLDAccountant().compose(mech, T).get_epsilon(delta)

        def theirs():
            acc = PRVAccountant(
                prvs=[PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)],
                max_self_compositions=[T],
                eps_error=0.01,
                delta_error=delta / 1000,
            )
            return acc.compute_epsilon(delta=delta, num_self_compositions=[T])

        t_o, t_p = [], []
        for rnd in range(args.repeat):
            order = (ours, theirs) if rnd % 2 == 0 else (theirs, ours)
            for who in order:
                if who is theirs and PRVAccountant is None:
                    continue
                dt, v = _timed(who)
                if who is ours:
                    t_o.append(dt)
                    r = v
                else:
                    t_p.append(dt)
                    prv = v
        row = dict(
            steps=T,
            seconds_ours=statistics.median(t_o),
            seconds_ours_all=t_o,
            eps_lower=r.lower,
            eps_upper=r.upper,
            rel_width=(r.upper - r.lower) / r.upper,
            discretization=r.details["discretization"],
        )
        if t_p:
            row.update(seconds_prv=statistics.median(t_p), seconds_prv_all=t_p, prv=list(prv))
        rows.append(row)
        ps = f"{row['seconds_prv']:7.3f}" if t_p else f"{'-':>7}"
        pe = f"{prv[1]:9.5f}" if t_p else f"{'-':>9}"
        print(
            f"{T:6d} | {row['seconds_ours']:7.3f} {ps} | {r.lower:11.6f} {r.upper:11.6f} {row['rel_width']:8.2e} | {pe}",
            flush=True,
        )
    frontier = []
    print(f"\n{'frontier':>36} | {'s':>7} | {'lower':>11} {'upper':>11} {'rel w':>8} {'h':>9} tilt")
    for name, s, qq, T, d, direction in FRONTIER:
        m = SubsampledGaussianMechanism(s, qq)
        ts = []
        try:
            for _ in range(args.frontier_repeat):
                dt, r = _timed(lambda: PLDAccountant(direction=direction).compose(m, T).get_epsilon(d))  # noqa: B023
                ts.append(dt)
        except ArithmeticError as exc:  # a refusal (NumericalError) is a result: recorded, not a crash
            frontier.append(dict(name=name, sigma=s, q=qq, steps=T, delta=d, direction=direction, refused=str(exc)))
            print(f"{name:>36} | refused: {type(exc).__name__}: {exc}", flush=True)
            continue
        row = dict(
            name=name,
            sigma=s,
            q=qq,
            steps=T,
            delta=d,
            direction=direction,
            seconds=statistics.median(ts),
            seconds_all=ts,
            eps_lower=r.lower,
            eps_upper=r.upper,
            rel_width=(r.upper - r.lower) / r.upper,
            discretization=r.details["discretization"],
            tilt=r.details.get("tilt"),
            rtol_met=r.details.get("rtol_met"),
        )
        frontier.append(row)
        print(
            f"{name:>36} | {row['seconds']:7.3f} | {r.lower:11.6f} {r.upper:11.6f} {row['rel_width']:8.2e} "
            f"{row['discretization']:9.3g} {row['tilt']}",
            flush=True,
        )
    if args.json:
        payload = {"schema": "small_t/1", "meta": bm.finish_metadata(meta), "rows": rows, "frontier": frontier}
        print(f"wrote {bm.write_json(args.json, payload)}")


if __name__ == "__main__":
    main()
