"""Renyi dynamic program for balls-in-bins matrix mechanisms: speed against the peers that exist.

1. DP-SGD (C = I, one epoch): our dynamic program (all orders 2..alpha at once) against the
   Feldman-Shenfeld partition sum (mpmath, one order at a time) for b = 100, 1000 and alpha = 10, 20, 30;
   both values are printed so that agreement is visible.
2. Banded C (BSR, single epoch, b = 100): DP time for p = 1..4 and alpha_max = 8, 16, 32.
3. Monte Carlo accountant: seconds per 1e6 privacy-loss samples (DP-SGD and BSR p = 4, b = 100).

    python benchmarks/bench_matrix.py [--repeat 2] [--json results/bench_matrix.json]
"""

from __future__ import annotations

import argparse
import json

from _timing import best_time  # noqa: E402  (benchmarks/ is the script's folder)

import numpy as np

from dputils.matrix import build_strategy, feldman_shenfeld_rdp, rho_remove, truncate_gram, log_partition_dp
from dputils.matrix.allocation import MatrixMonteCarloAccountant


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows: list[dict] = []
    sigma = 1.0
    print("DP-SGD: DP (all orders <= alpha) vs Feldman-Shenfeld partition sum (one order)")
    for b in (100, 1000):
        for alpha in (10, 20, 30):
            t_dp, r_dp = best_time(lambda: rho_remove(np.eye(b), sigma, range(2, alpha + 1), 1)[0][-1], args.repeat)
            t_fs, r_fs = best_time(lambda: feldman_shenfeld_rdp(b, sigma, alpha), 1)
            print(f"  b={b:5d} alpha={alpha:2d}: DP {t_dp:7.3f}s  F-S {t_fs:7.3f}s   rho {r_dp:.10g} vs {r_fs:.10g}")
            rows.append({"case": "dpsgd", "b": b, "alpha": alpha, "dp_s": t_dp, "fs_s": t_fs, "rho_dp": r_dp, "rho_fs": r_fs})
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
        t, _ = best_time(lambda: MatrixMonteCarloAccountant(s, 1.0, samples=1_000_000).losses(), 1)
        print(f"  {name}: {t:7.2f}s")
        rows.append({"case": "mc", "matrix": name, "seconds_per_1e6": t})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
