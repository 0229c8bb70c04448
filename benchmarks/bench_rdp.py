"""RDP accountant vs Opacus's and dp_accounting's RDP, same events, same run.

Poisson-subsampled Gaussian, q=0.01, sigma=1, delta=1e-5, T = 1e2 .. 1e7. For each T: epsilon and wall time
(median of ``--repeat`` cold calls: our RDP caches are cleared before each) of

* ours: ``RDPAccountant()`` (default grid from order 1.01, continuous refinement of the order);
* Opacus: ``opacus.accountants.analysis.rdp`` on its default orders (1.1 .. 10.9 by 0.1, 12 .. 63);
* dp_accounting: ``RdpAccountant()`` on its default orders;

then the time to calibrate the noise multiplier for eps = 2 at T = 1e4 (ours: ``dputils.calibration.calibrate_noise``
(Brent on log sigma, relative width 1e-3); Opacus: ``get_noise_multiplier(accountant="rdp")``).

    python benchmarks/bench_rdp.py [--repeat 5] [--json [PATH]]   # PATH default: benchmarks/results/rdp.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import dp_accounting
from opacus.accountants.analysis import rdp as opacus_rdp
from opacus.accountants.utils import get_noise_multiplier

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dputils.accountants.rdp import RDPAccountant, _log_a_int, subsampled_gaussian_rdp
from dputils.book import benchmarks as bm  # noqa: E402
from dputils.calibration import calibrate_noise
from dputils.mechanisms import SubsampledGaussianMechanism

OPACUS_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def _median_time(fn, repeat):
    times, val = [], None
    for _ in range(repeat):
        subsampled_gaussian_rdp.cache_clear()
        _log_a_int.cache_clear()
        t0 = time.perf_counter()
        val = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), val


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--json",
        nargs="?",
        const=str(ROOT / "benchmarks" / "results" / "rdp.json"),
        default=None,
        metavar="PATH",
        help="write the rows with the run's metadata (no PATH: benchmarks/results/rdp.json)",
    )
    args = ap.parse_args()
    meta = bm.run_metadata(ROOT)
    warnings.filterwarnings("ignore")
    q, sigma, delta = 0.01, 1.0, 1e-5
    rows = []
    for T in (10**2, 10**3, 10**4, 10**5, 10**6, 10**7):

        def ours():
            return float(RDPAccountant().compose(SubsampledGaussianMechanism(sigma, q), T).get_epsilon(delta))

        def opacus():
            r = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=T, orders=OPACUS_ORDERS)
            return float(opacus_rdp.get_privacy_spent(orders=OPACUS_ORDERS, rdp=r, delta=delta)[0])

        def dpa():
            acc = dp_accounting.rdp.RdpAccountant()
            acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), T)
            return float(acc.get_epsilon(delta))

        row = {"T": T}
        for name, fn in (("ours", ours), ("opacus", opacus), ("dp_accounting", dpa)):
            row[f"{name}_s"], row[f"{name}_eps"] = _median_time(fn, args.repeat)
        rows.append(row)
        print(
            f"T={T:>9}  eps ours {row['ours_eps']:.6f}  opacus {row['opacus_eps']:.6f}  "
            f"dp_accounting {row['dp_accounting_eps']:.6f}  |  time ours {row['ours_s']:.4f} s  "
            f"opacus {row['opacus_s']:.4f} s  dp_accounting {row['dp_accounting_s']:.4f} s",
            flush=True,
        )

    target, steps = 2.0, 10_000

    def cal_ours():
        res = calibrate_noise(
            lambda s: RDPAccountant().compose(SubsampledGaussianMechanism(s, q), steps), target, delta, rel_tol=1e-3
        )
        return res.value

    def cal_opacus():
        return get_noise_multiplier(
            target_epsilon=target,
            target_delta=delta,
            sample_rate=q,
            steps=steps,
            accountant="rdp",
            epsilon_tolerance=0.01,
        )

    cal = {}
    for name, fn in (("ours", cal_ours), ("opacus", cal_opacus)):
        cal[f"{name}_s"], cal[f"{name}_sigma"] = _median_time(fn, args.repeat)
    print(
        f"calibrate sigma (eps {target}, T {steps}): ours {cal['ours_sigma']:.5f} in {cal['ours_s']:.3f} s, "
        f"opacus {cal['opacus_sigma']:.5f} in {cal['opacus_s']:.3f} s, "
        f"opacus/ours time {cal['opacus_s'] / cal['ours_s']:.2f}"
    )
    if args.json:
        payload = {"schema": "dpbook-bench-rdp/1", "meta": bm.finish_metadata(meta), "rows": rows, "calibration": cal}
        print(f"wrote {bm.write_json(args.json, payload)}")


if __name__ == "__main__":
    main()
