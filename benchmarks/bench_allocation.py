"""allocation-pld (``dputils.accountants.allocation``) vs pld-accounting 2.0 (Feldman and Shenfeld), same run.

DP-SGD with the Gaussian mechanism under random allocation, sigma 1, delta 1e-5, k-out-of-t per epoch. For each
setting (t, k, epochs): ``--repeat`` rounds; in every round a fresh accountant of ours
(``RandomAllocationPLDAccountant().compose(RandomAllocation(sigma, t, k, epochs)).get_epsilon(delta)``) and, for
t <= ``--peer-max-steps``, pld-accounting's ``gaussian_allocation_epsilon_range(delta, sigma, num_steps=t,
num_selected=k, num_epochs=epochs)`` (its default adaptive accuracy; in a subprocess with a ``--peer-timeout``,
timed inside the subprocess around the call, imports excluded). Reported: both brackets, median times and the
ratio, and whether ours is inside theirs (our upper <= their upper, brackets intersect).

    python benchmarks/bench_allocation.py [--repeat 3] [--peer-max-steps 300] [--peer-timeout 300] [--json [PATH]]
    python benchmarks/bench_allocation.py --peer-rows [--repeat 3] [--json benchmarks/results/allocation_peer_rows.json]

``--json`` without PATH writes ``benchmarks/results/allocation.json`` with the run's metadata. ``--peer-rows`` runs
the eight settings (sigma, t, k, epochs, delta) recorded in ``tests/data/peer_pld_accounting_2_0.json`` instead of the
sigma-1 grid above (each row's own sigma and delta).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dputils.accountants.allocation import RandomAllocation, RandomAllocationPLDAccountant  # noqa: E402
from dputils.book import benchmarks as bm  # noqa: E402

SETTINGS = [(10, 1, 1), (100, 1, 1), (100, 1, 2), (100, 2, 1), (300, 1, 1), (1000, 1, 1), (10_000, 1, 1)]
_PEER = """
import json, time, warnings
warnings.simplefilter("ignore")
from PLD_accounting import gaussian_allocation_epsilon_range
t0 = time.perf_counter()
up, lo = gaussian_allocation_epsilon_range(delta={delta!r}, sigma={sigma!r}, num_steps={t}, num_selected={k},
                                           num_epochs={e})
print(json.dumps(dict(upper=up, lower=lo, seconds=time.perf_counter() - t0)))
"""


def ours(sigma, t, k, e, delta):
    t0 = time.perf_counter()
    r = RandomAllocationPLDAccountant().compose(RandomAllocation(sigma, t, k, e)).get_epsilon(delta)
    return time.perf_counter() - t0, r


def peer(sigma, t, k, e, delta, timeout):
    code = _PEER.format(delta=delta, sigma=sigma, t=t, k=k, e=e)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1][:300]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--peer-max-steps", type=int, default=300)
    ap.add_argument("--peer-timeout", type=float, default=300.0)
    ap.add_argument("--note", default="")
    ap.add_argument("--peer-rows", action="store_true", help="the settings of tests/data/peer_pld_accounting_2_0.json")
    ap.add_argument("--json", nargs="?", const=str(ROOT / "benchmarks" / "results" / "allocation.json"), default=None)
    a = ap.parse_args()
    meta = bm.run_metadata(ROOT, a.note)
    rows = []
    if a.peer_rows:
        recorded = json.loads((ROOT / "tests" / "data" / "peer_pld_accounting_2_0.json").read_text())["rows"]
        settings = [(r["steps"], r["selected"], r["epochs"], r["sigma"], r["delta"]) for r in recorded]
    else:
        settings = [(t, k, e, a.sigma, a.delta) for t, k, e in SETTINGS]
    for t, k, e, sigma, delta in settings:
        mine, theirs = [], []
        for rnd in range(a.repeat):
            do_peer = t <= a.peer_max_steps and (not theirs or "error" not in theirs[-1])
            order = ("ours", "peer") if rnd % 2 == 0 else ("peer", "ours")
            for who in order:
                if who == "ours":
                    mine.append(ours(sigma, t, k, e, delta))
                elif do_peer:
                    theirs.append(peer(sigma, t, k, e, delta, a.peer_timeout))
        sec, r = statistics.median(x[0] for x in mine), mine[-1][1]
        row = dict(
            steps=t,
            selected=k,
            epochs=e,
            sigma=sigma,
            delta=delta,
            ours=dict(upper=r.upper, lower=r.lower, seconds=sec, lower_bound=r.details["lower_bound"]),
        )
        ok = [p for p in theirs if "error" not in p]
        if ok:
            p = dict(upper=ok[-1]["upper"], lower=ok[-1]["lower"], seconds=statistics.median(x["seconds"] for x in ok))
            row["pld_accounting"] = p
            row["speedup"] = p["seconds"] / sec
            row["upper_not_above_theirs"] = r.upper <= p["upper"] + 1e-9
            row["brackets_intersect"] = r.lower <= p["upper"] and r.upper >= p["lower"]
        elif theirs:
            row["pld_accounting"] = theirs[-1]
        rows.append(row)
        peer_txt = row.get("pld_accounting", {})
        print(
            f"s={sigma:g} d={delta:g} t={t:>6} k={k} E={e}: ours [{r.lower:.6f}, {r.upper:.6f}] {sec:7.3f} s | pld-accounting "
            + (
                f"[{peer_txt['lower']:.6f}, {peer_txt['upper']:.6f}] {peer_txt['seconds']:7.2f} s  x{row['speedup']:.0f}"
                if "upper" in peer_txt
                else str(peer_txt.get("error", "not run"))
            ),
            flush=True,
        )
    if a.json:
        try:
            from importlib.metadata import version

            import PLD_accounting  # noqa: F401

            meta.setdefault("versions", {})["pld-accounting"] = version("PLD_accounting")
        except Exception:  # noqa: BLE001 - the peer is optional
            pass
        path = bm.write_json(a.json, {"meta": bm.finish_metadata(meta), "rows": rows})
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
