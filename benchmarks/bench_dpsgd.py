"""DP-SGD throughput: ``dputils.training.train`` against Opacus and non-private SGD, in the same run.

Steps per second of one optimisation step (forward, per-example gradients or their norms, clipping at C, Gaussian
noise, update) on random CIFAR-shaped data (3x32x32, 10 classes), same model, batch, clip and noise for all:

* ``nonprivate``: plain SGD (one backward pass of the batch mean loss);
* ``dputils``: ``dputils.training.train`` itself, individual clipping (s = 1, m = batch), shuffling, noise std
  ``sigma * C`` (``noise_multiplier_scale=1``), ``grad_mode="auto"`` (the ghost path of
  :mod:`dputils.training.fastgrad` on these models);
* ``dputils-vmap``: the same with ``grad_mode="vmap"`` (per-example gradients with torch.func), the old path;
* ``opacus``: ``PrivacyEngine.make_private`` with its default ``grad_sample_mode="hooks"``;
* ``opacus-ghost``: the same with ``grad_sample_mode="ghost"`` (its fast gradient clipping, two backward passes);
* ``dputils-ftrl`` / ``dputils-ftrl-vmap``: one step of single-pass DP-FTRL (``dputils.training.train_ftrl``, tree
  noise with ``sigma_node = sigma * C``, ``grad_mode="auto"`` / ``"vmap"``): the same clipped sum plus the tree.

Each (round, model, method) runs in a fresh subprocess (so its peak memory is its own), methods interleaved within
a round so that a change in the machine's load hits all of them; the table shows medians over the rounds, and
the ratios are medians of the per-round ratios. Memory, measured the same way for every method: the peak resident
set size over the warm-up step and the timed steps minus the resident set size just before the warm-up (data,
model, Opacus' wrappers and every module a method imports lazily already there). The kernel's peak (VmHWM) is
reset at that point, so an earlier, higher peak (building the data, importing) cannot hide the growth; where the
reset is not allowed, the lifetime peak ``ru_maxrss`` is used and the JSON says so (``mem_source``). On CUDA the
device's own peak (``torch.cuda.max_memory_allocated``, reset at the same point) is reported as ``gpu_mem_mib``.
Opacus and the non-private loop index the in-memory tensors batch by batch, as ``train`` does (no DataLoader
in the timed loop); every method gets one warm-up step first.

    python benchmarks/bench_dpsgd.py                                   # mlp and cnn, batch 256, 3 rounds, 2 threads
    python benchmarks/bench_dpsgd.py --models cnn --steps 5 --rounds 5 --json out.json
    python benchmarks/bench_dpsgd.py --models cnn wrn16-4 --device cuda --threads 0
    python benchmarks/bench_dpsgd.py --json       # also write benchmarks/results/dpsgd.json (the book's page)

With ``--json`` the summary is written with the run's metadata (``dputils.book.benchmarks.run_metadata``: date,
cores, load average before and after, versions, git commit) and ``schema`` ``dpbook-bench-dpsgd/1``; the chapter
"How fast, how accurate" draws it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "dpsgd.json"
METHODS = ("nonprivate", "dputils", "dputils-vmap", "opacus", "opacus-ghost", "dputils-ftrl", "dputils-ftrl-vmap")
CLIP, SIGMA, LR = 1.0, 1.0, 0.1


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> str:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; returns the source :func:`_peak_mib` reads."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return "VmHWM"
    except OSError:
        return "ru_maxrss"


def _peak_mib(source: str) -> float:
    if source == "VmHWM":
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class _Memory:
    """Peak memory growth from :meth:`start` (just before the warm-up) to :meth:`stop`, alike for every method."""

    def start(self, device) -> None:
        import torch

        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
            self.gpu_base = torch.cuda.memory_allocated(device)
        self.base = _rss_mib()
        self.source = _reset_peak()

    def stop(self, device) -> dict:
        import torch

        out = {"mem_mib": max(0.0, _peak_mib(self.source) - self.base), "mem_source": self.source}
        if device.type == "cuda":
            out["gpu_mem_mib"] = (torch.cuda.max_memory_allocated(device) - self.gpu_base) / 2**20
        return out


def worker(args) -> dict:
    """One method, one model, one timing: returns steps/s and memory growth."""
    import torch
    from torch import nn

    from dputils.training import DPSGDConfig, FTRLConfig, make_mlp, resolve_device, train, train_ftrl
    from dputils.training.models import small_cnn, wide_resnet

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    torch.manual_seed(0)
    B, steps = args.batch, args.steps
    if args.model == "mlp":
        make = lambda: make_mlp(3 * 32 * 32, 10, hidden=args.hidden)  # noqa: E731
        shape = (3 * 32 * 32,)
    else:
        make = small_cnn if args.model == "cnn" else wide_resnet
        shape = (3, 32, 32)
    n = B * steps
    X = torch.randn(n, *shape, device=device)
    y = torch.randint(0, 10, (n,), device=device)
    model = make().to(device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    method = args.worker

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    mem = _Memory()

    def timed_run(warm_up, run):
        """Start the memory mark, run ``warm_up`` (one step, untimed), then time ``run``: (its result, seconds)."""
        mem.start(device)
        warm_up()
        sync()
        t0 = time.perf_counter()
        res = run()
        sync()
        return res, time.perf_counter() - t0

    if method.startswith("dputils-ftrl"):
        mode = "vmap" if method.endswith("-vmap") else "auto"

        def fcfg(k):
            return FTRLConfig(
                steps=k,
                batch_size=B,
                clip=CLIP,
                sigma_node=SIGMA * CLIP,
                lr=LR,
                device=str(device),
                seed=0,
                grad_mode=mode,
                history=False,
            )

        res, secs = timed_run(
            lambda: train_ftrl(model, X[:B], y[:B], fcfg(1)), lambda: train_ftrl(model, X, y, fcfg(steps))
        )
        assert res.steps == steps
        used = res.grad_mode
    elif method.startswith("dputils"):
        mode = "vmap" if method == "dputils-vmap" else "auto"

        def cfg(k):
            return DPSGDConfig(
                epochs=1,
                sub_batch_size=1,
                sub_batches=B,
                clip=CLIP,
                sigma=SIGMA,
                lr=LR,
                noise_multiplier_scale=1.0,
                device=str(device),
                seed=0,
                grad_mode=mode,
                history=False,
            )

        res, secs = timed_run(lambda: train(model, X[:B], y[:B], cfg(1)), lambda: train(model, X, y, cfg(steps)))
        assert res.rounds == steps
        used = res.grad_mode
    else:
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        crit = loss_fn
        if method.startswith("opacus"):
            from opacus import PrivacyEngine

            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=B)
            engine = PrivacyEngine()
            mode = "ghost" if method == "opacus-ghost" else "hooks"
            out = engine.make_private(
                module=model,
                optimizer=opt,
                data_loader=loader,
                noise_multiplier=SIGMA,
                max_grad_norm=CLIP,
                poisson_sampling=False,
                grad_sample_mode=mode,
                criterion=loss_fn,
            )
            if mode == "ghost":
                model, opt, crit, _ = out
            else:
                model, opt, _ = out
        used = method
        perm = torch.randperm(n, device=device)

        def step(b):
            rows = perm[b * B : (b + 1) * B]
            opt.zero_grad(set_to_none=True)
            loss = crit(model(X[rows]), y[rows])
            loss.backward()
            opt.step()

        _, secs = timed_run(lambda: step(0), lambda: [step(b) for b in range(steps)])
    memory = mem.stop(device)
    return {
        "method": method,
        "model": args.model,
        "steps_per_s": steps / secs,
        "path": used,
        **memory,
        "params": sum(p.numel() for p in make().parameters()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn", "wrn16-4"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4, help="timed steps per round (CNN, WRN)")
    ap.add_argument("--mlp-steps", type=int, default=40, help="timed steps per round for the (fast) MLP")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128, help="MLP hidden units (3072 -> hidden -> 10, tanh)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (0: torch's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--json",
        nargs="?",
        const=str(DEFAULT_JSON),
        default=None,
        metavar="PATH",
        help=f"write the summary with the run's metadata (no PATH: {DEFAULT_JSON.relative_to(ROOT)})",
    )
    ap.add_argument("--note", default="", help="free text stored in the metadata (e.g. the machine's load)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    import torch

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from dputils.book import benchmarks as bm

    meta = bm.run_metadata(ROOT, note=args.note)
    runs: dict[tuple[str, str], list[dict]] = {}
    load_start = os.getloadavg()
    for r in range(args.rounds):
        for model in args.models:
            for method in args.methods:
                cmd = [
                    sys.executable,
                    __file__,
                    "--worker",
                    method,
                    "--model",
                    model,
                    "--batch",
                    str(args.batch),
                    "--steps",
                    str(args.mlp_steps if model == "mlp" else args.steps),
                    "--hidden",
                    str(args.hidden),
                    "--threads",
                    str(args.threads),
                    "--device",
                    args.device,
                ]
                out = subprocess.run(cmd, capture_output=True, text=True)
                if out.returncode:
                    print(f"{model}/{method} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
                    continue
                rec = json.loads(out.stdout.strip().splitlines()[-1])
                runs.setdefault((model, method), []).append(rec)
                print(
                    f"round {r + 1} {model:4s} {method:17s} {rec['steps_per_s']:9.2f} steps/s "
                    f"{rec['mem_mib']:8.1f} MiB ({rec['path']})",
                    file=sys.stderr,
                    flush=True,
                )
    res = {
        "torch": torch.__version__,
        "threads": args.threads,
        "device": args.device,
        "batch": args.batch,
        "steps": args.steps,
        "mlp_steps": args.mlp_steps,
        "rounds": args.rounds,
        "hidden": args.hidden,
        "cpus": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "models": {},
    }
    try:
        import opacus

        res["opacus"] = opacus.__version__
    except ImportError:
        res["opacus"] = None
    for model in args.models:
        rows = {m: runs.get((model, m), []) for m in args.methods}
        entry = {"params": next((v[0]["params"] for v in rows.values() if v), None)}
        for m, v in rows.items():
            if v:
                entry[m] = {
                    "steps_per_s": statistics.median(x["steps_per_s"] for x in v),
                    "mem_mib": statistics.median(x["mem_mib"] for x in v),
                    "path": v[0]["path"],
                    "mem_source": v[0].get("mem_source"),
                    "all_steps_per_s": [x["steps_per_s"] for x in v],
                    "all_mem_mib": [x["mem_mib"] for x in v],
                }
                if all("gpu_mem_mib" in x for x in v):
                    entry[m]["gpu_mem_mib"] = statistics.median(x["gpu_mem_mib"] for x in v)
        # ratios per round (same round = closest in time), then their median
        for num in ("dputils", "dputils-vmap", "dputils-ftrl"):
            for den in ("opacus", "opacus-ghost", "nonprivate"):
                a, b = rows.get(num, []), rows.get(den, [])
                if a and b and len(a) == len(b):
                    entry[f"{num}/{den}"] = statistics.median(x["steps_per_s"] / z["steps_per_s"] for x, z in zip(a, b))
        res["models"][model] = entry
    print(json.dumps(res, indent=2))
    print(f"\n| model | {' | '.join(args.methods)} |", file=sys.stderr)
    for model, e in res["models"].items():
        cells = [f"{e[m]['steps_per_s']:.2f} ({e[m]['mem_mib']:.0f} MiB)" if m in e else "-" for m in args.methods]
        print(f"| {model} | {' | '.join(cells)} |", file=sys.stderr)
        print("  " + ", ".join(f"{k} {v:.2f}x" for k, v in e.items() if "/" in k), file=sys.stderr)
    if args.json:
        meta["torch_threads"] = args.threads
        path = bm.write_json(args.json, {"schema": bm.DPSGD_SCHEMA, "meta": bm.finish_metadata(meta), **res})
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
