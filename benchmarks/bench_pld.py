"""PLD accountant vs dp_accounting's PLDAccountant, same settings, same run.

Poisson-subsampled Gaussian, q=0.01, sigma=1, delta=1e-5, steps 1e3, 1e4, 1e5. For each: wall time of a
fresh ``compose(...).get_epsilon(delta)`` (best of ``--repeat``), the epsilon of both, and the error of both
against a reference bracket computed by our accountant at a 10x finer grid (the exact epsilon lies in it).

    python benchmarks/bench_pld.py [--repeat 3] [--json [PATH]]   # PATH default: benchmarks/results/pld.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import dp_accounting
from _timing import best_time  # noqa: E402  (benchmarks/ is the script's folder)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dputils import benchmarks as bm  # noqa: E402
from dputils.accountants import PLDAccountant
from dputils.mechanisms import SubsampledGaussianMechanism


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", nargs="?", const=str(ROOT / "benchmarks" / "results" / "pld.json"), default=None,
                    metavar="PATH", help="write the rows with the run's metadata (no PATH: benchmarks/results/pld.json)")
    args = ap.parse_args()
    meta = bm.run_metadata(ROOT)
    q, sigma, delta = 0.01, 1.0, 1e-5
    mech = SubsampledGaussianMechanism(sigma, q)
    rows = []
    print(f"{'steps':>7} | {'ours s':>7} {'dp_acc s':>8} {'ratio':>6} | {'eps ours':>10} {'eps dp_acc':>10} | reference bracket (h=1e-5)")
    for T in (1_000, 10_000, 100_000):
        t_ours, r = best_time(lambda: PLDAccountant().compose(mech, T).get_epsilon(delta), args.repeat)

        def theirs():
            a = dp_accounting.pld.PLDAccountant()
            a.compose(mech.to_dp_event(), T)
            return a.get_epsilon(delta)

        t_dpa, e_dpa = best_time(theirs, args.repeat)
        ref = PLDAccountant(discretization=1e-5).compose(mech, T).get_epsilon(delta)
        row = dict(steps=T, seconds_ours=t_ours, seconds_dp_accounting=t_dpa, speedup=t_dpa / t_ours,
                   eps_ours=r.value, eps_ours_lower=r.lower, eps_dp_accounting=e_dpa,
                   ref_lower=ref.lower, ref_upper=ref.upper,
                   err_ours=r.value - ref.lower, err_dp_accounting=e_dpa - ref.lower)
        rows.append(row)
        print(f"{T:7d} | {t_ours:7.3f} {t_dpa:8.3f} {t_dpa / t_ours:6.2f} | {r.value:10.6f} {e_dpa:10.6f} | "
              f"[{ref.lower:.6f}, {ref.upper:.6f}]")
    if args.json:
        payload = {"schema": "dpbook-bench-pld/1", "meta": bm.finish_metadata(meta), "rows": rows}
        print(f"wrote {bm.write_json(args.json, payload)}")


if __name__ == "__main__":
    main()
