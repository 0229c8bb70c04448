"""Renyi dynamic program for balls-in-bins matrix mechanisms: speed against the peers that exist.

1. DP-SGD (C = I, one epoch): our dynamic program (all orders 2..alpha at once) against the
   Feldman-Shenfeld partition sum (mpmath, one order at a time) for b = 100, 1000 and alpha = 10, 20, 30;
   both values are printed so that agreement is visible.
2. Banded C (BSR, single epoch, b = 100): DP time for p = 1..4 and alpha_max = 8, 16, 32.
3. Monte Carlo accountant: seconds per 1e6 privacy-loss samples (DP-SGD and BSR p = 4, b = 100).
4. DP backends (``--backends``): BSR p = 4, b = 100, one pass for all orders up to alpha_max in 16..50, with
   the original numpy gather step, the vectorised (grouped, matrix-product) numpy step and the numba kernel;
   the largest difference of log S to the gather step is printed (must stay below 1e-12 relative).
5. Tight add bound (``--backends``): seconds of rho_add_tight for DP-SGD and BSR p = 4, orders 2..64.
6. Conditional composition against the number of batches (``--batches B ...``, only this section): seconds
   of one cold ``get_epsilon(1e-5)`` of matrix-condcomp (single epoch, ``--sigma`` (1), delta_E = delta / 2, both
   directions) for DP-SGD and BSR p = 4, split into the per-step pairs (tail bounds) and the PLD
   composition, with the growth ratio against the previous size and that ratio divided by the growth of
   b (1.0 = linear). Wall and process CPU time are both printed; the growth uses CPU time, which a shared
   machine distorts far less than wall time. ``--direct`` also times the straightforward per-step
   computation (the code before the fast path) up to ``--direct-max`` batches and prints both epsilons.

    python benchmarks/bench_matrix.py [--repeat 2] [--json results/bench_matrix.json] [--only-backends]
    python benchmarks/bench_matrix.py --batches 100 300 1000 3000 [--direct --direct-max 1000]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from _timing import best_time  # noqa: E402  (benchmarks/ is the script's folder)

from dputils.matrix import build_strategy, feldman_shenfeld_rdp, log_partition_dp, rho_remove, truncate_gram
from dputils.matrix.allocation import MatrixMonteCarloAccountant
from dputils.matrix.mechanism import BallsInBinsMatrixMechanism
from dputils.matrix.renyi import dp_backend, rho_add_tight


def bench_backends(rows: list, repeat: int, amaxes=(16, 24, 32, 40, 50)) -> None:
    """Time the DP step implementations on BSR p = 4, b = 100 (single epoch) and the tight add bound."""
    sigma = 1.0
    Gp, _ = truncate_gram(build_strategy("bsr", 1, 100, 4).gram, 4)
    backends = ["numpy", "vectorised"] + (["numba"] if dp_backend("auto") == "numba" else [])
    if "numba" in backends:
        log_partition_dp(Gp, sigma, 4, 4, backend="numba")  # compile outside the timing
    print("DP backends, BSR p=4, b=100: seconds for one pass (all orders <= alpha_max)")
    for amax in amaxes:
        ref = None
        line = f"  alpha_max={amax:2d}:"
        for be in backends:
            t, val = best_time(lambda: log_partition_dp(Gp, sigma, amax, 4, work_budget=None, backend=be), repeat)
            if ref is None:
                ref = val
            dev = float(np.max(np.abs(val - ref) / np.maximum(1.0, np.abs(ref))))
            line += f"  {be} {t:7.2f}s (dev {dev:.1e})"
            rows.append({"case": "dp_backend", "backend": be, "alpha_max": amax, "seconds": t, "max_rel_dev": dev})
        print(line, flush=True)
    print("Tight add bound (rho_add_tight), orders 2..64, sigma = 1")
    for name, p in (("identity", 1), ("bsr", 4)):
        G = build_strategy(name, 1, 100, p).gram
        t, _ = best_time(lambda: rho_add_tight(G, sigma, range(2, 65)), repeat)
        print(f"  {name}: {t:6.2f}s")
        rows.append({"case": "tight_add", "matrix": name, "seconds": t})


def _condcomp_once(strategy, direct: bool, sigma: float = 1.0) -> dict:
    """One cold get_epsilon(1e-5) of matrix-condcomp; seconds in the per-step pairs and in the PLD."""
    import time

    from dputils.matrix import condcomp

    condcomp._STEP_CACHE.clear()
    saved = condcomp._per_step_hazards
    if direct:
        condcomp._per_step_hazards = condcomp._per_step_hazards_direct
    try:
        acc = condcomp.ConditionalCompositionAccountant(delta_e=5e-6, progress=False)
        acc.compose(BallsInBinsMatrixMechanism(strategy, sigma))
        t0, c0 = time.perf_counter(), time.process_time()
        for d in acc.directions:
            acc.step_pairs(5e-6, d)  # cached for the chain below
        t1, c1 = time.perf_counter(), time.process_time()
        eps = float(acc.get_epsilon(1e-5))
        t2, c2 = time.perf_counter(), time.process_time()
    finally:
        condcomp._per_step_hazards = saved
    return {
        "pairs_s": t1 - t0,
        "pld_s": t2 - t1,
        "total_s": t2 - t0,
        "pairs_cpu_s": c1 - c0,
        "pld_cpu_s": c2 - c1,
        "total_cpu_s": c2 - c0,
        "epsilon": eps,
    }


def bench_condcomp_batches(
    rows: list, batches, repeat: int, direct: bool, direct_max: int, sigma: float = 1.0, matrices=("identity", "bsr")
) -> None:
    """Section 6: matrix-condcomp time against b (N = b steps, one epoch)."""
    import os

    print(
        f"matrix-condcomp, one epoch, sigma = {sigma:g}, delta = 1e-5, delta_E = 5e-6 (load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )
    for name, p in [(m, 1 if m == "identity" else 4) for m in matrices]:
        prev = {}
        for b in batches:
            s = build_strategy(name, 1, b, p)
            paths = ["fast"] + (["direct"] if direct and b <= direct_max else [])
            for path in paths:
                best = None
                for _ in range(repeat):
                    r = _condcomp_once(s, path == "direct", sigma)
                    best = r if best is None or r["total_s"] < best["total_s"] else best
                line = (
                    f"  {name:8s} b={b:5d} {path:6s}: wall {best['total_s']:8.2f}s, CPU {best['total_cpu_s']:8.2f}s "
                    f"(pairs {best['pairs_cpu_s']:7.2f}s, PLD {best['pld_cpu_s']:7.2f}s)  eps {best['epsilon']:.12g}"
                )
                if path in prev:
                    pb, pt, pp = prev[path]
                    g, gp = best["total_cpu_s"] / pt, best["pairs_cpu_s"] / pp
                    line += (
                        f"  CPU growth x{g:.2f} (pairs x{gp:.2f}) for x{b / pb:.2f} b "
                        f"(ratio {g / (b / pb):.2f}, pairs {gp / (b / pb):.2f})"
                    )
                prev[path] = (b, best["total_cpu_s"], best["pairs_cpu_s"])
                print(line, flush=True)
                rows.append(
                    {
                        "case": "condcomp_batches",
                        "matrix": name,
                        "bands": p,
                        "sigma": sigma,
                        "batches": b,
                        "path": path,
                        **best,
                    }
                )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--only-backends", action="store_true", help="run only sections 4 and 5")
    ap.add_argument(
        "--batches",
        type=int,
        nargs="+",
        default=None,
        help="run only section 6: matrix-condcomp time at these numbers of batches (e.g. 100 300 1000 3000)",
    )
    ap.add_argument("--direct", action="store_true", help="section 6: also time the direct per-step computation")
    ap.add_argument("--direct-max", type=int, default=1000, help="section 6: largest b for --direct (default 1000)")
    ap.add_argument("--sigma", type=float, default=1.0, help="section 6: noise multiplier (default 1)")
    ap.add_argument(
        "--matrices",
        nargs="+",
        default=["identity", "bsr"],
        choices=["identity", "bsr"],
        help="section 6: strategies (identity, bsr with 4 bands)",
    )
    args = ap.parse_args()
    rows: list[dict] = []
    if args.batches:
        bench_condcomp_batches(rows, args.batches, args.repeat, args.direct, args.direct_max, args.sigma, args.matrices)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=2)
        return
    if args.only_backends:
        bench_backends(rows, args.repeat)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=2)
        return
    sigma = 1.0
    print("DP-SGD: DP (all orders <= alpha) vs Feldman-Shenfeld partition sum (one order)")
    for b in (100, 1000):
        for alpha in (10, 20, 30):
            t_dp, r_dp = best_time(lambda: rho_remove(np.eye(b), sigma, range(2, alpha + 1), 1)[0][-1], args.repeat)
            t_fs, r_fs = best_time(lambda: feldman_shenfeld_rdp(b, sigma, alpha), 1)
            print(f"  b={b:5d} alpha={alpha:2d}: DP {t_dp:7.3f}s  F-S {t_fs:7.3f}s   rho {r_dp:.10g} vs {r_fs:.10g}")
            rows.append(
                {"case": "dpsgd", "b": b, "alpha": alpha, "dp_s": t_dp, "fs_s": t_fs, "rho_dp": r_dp, "rho_fs": r_fs}
            )
    print("BSR single epoch, b = 100: DP time against bands p and the largest order")
    for p in (1, 2, 3, 4):
        Gp, _ = truncate_gram(build_strategy("bsr", 1, 100, p).gram, p)
        for amax in (8, 16, 32):
            t, _ = best_time(lambda: log_partition_dp(Gp, sigma, amax, p, work_budget=None), args.repeat)
            print(f"  p={p} alpha_max={amax:2d}: {t:7.3f}s")
            rows.append({"case": "bsr", "bands": p, "alpha_max": amax, "dp_s": t})
    print("Monte Carlo: seconds per 1e6 loss samples (both directions)")
    for name, p in (("identity", 1), ("bsr", 4)):
        s = build_strategy(name, 1, 100, p)
        mech = BallsInBinsMatrixMechanism(s, 1.0)
        t, _ = best_time(lambda: MatrixMonteCarloAccountant(samples=1_000_000).compose(mech).losses(), 1)
        print(f"  {name}: {t:7.2f}s")
        rows.append({"case": "mc", "matrix": name, "seconds_per_1e6": t})
    bench_backends(rows, args.repeat)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
