"""DP-SGD throughput: per-sample-gradient steps vs non-private steps of the same model, and Opacus.

Measures steps per second of one optimisation step on random CIFAR-shaped data (3x32x32, 10 classes):

* ``nonprivate``: a plain SGD step (one backward pass on the batch mean loss);
* ``dputils``: DP-SGD with ``dputils.training.per_sample_gradients`` (torch.func vmap + grad), per-example
  clipping with ``clip_rows`` and Gaussian noise, the code path the book's training uses;
* ``opacus``: Opacus' ``GradSampleModule`` hooks + clipping + noise (when opacus is installed).

Models: ``cnn`` (a small 4-conv GroupNorm CNN, the CPU default) and ``wrn16-4`` (WideResNet-16-4 with
GroupNorm, the "Let's Ask Gauss" CIFAR-10 model, meant for a GPU). The ratio dputils/nonprivate is the
price of privacy per step; dputils/opacus compares the two per-sample-gradient implementations.

    python benchmarks/bench_dpsgd.py --model cnn --batch 64 --steps 5
    python benchmarks/bench_dpsgd.py --model wrn16-4 --batch 256 --steps 20 --device cuda --json out.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

from dputils.training import clip_rows, per_sample_gradients, resolve_device
from dputils.training.models import small_cnn, wide_resnet


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time(step, steps: int, device) -> float:
    step()  # warm-up (kernels, allocator)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn", choices=["cnn", "wrn16-4"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--no-opacus", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    device = resolve_device(args.device)
    torch.manual_seed(0)
    make = small_cnn if args.model == "cnn" else wide_resnet
    model = make().to(device)
    X = torch.randn(args.batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)
    lr, clip, sigma = 0.1, 1.0, 1.0
    n_params = sum(p.numel() for p in model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def nonprivate():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(X), y).backward()
        opt.step()

    def dputils_step():
        params = {k: v.detach() for k, v in model.named_parameters()}
        G = per_sample_gradients(model, params, X, y)
        U = clip_rows(G, clip).sum(0)
        U = U + sigma * clip * torch.randn_like(U)
        with torch.no_grad():
            i = 0
            for p in model.parameters():
                n = p.numel()
                p -= lr * U[i : i + n].view_as(p) / args.batch
                i += n

    res = {"device": str(device), "gpu": torch.cuda.get_device_name(0) if device.type == "cuda" else None,
           "model": args.model, "params": n_params, "batch": args.batch, "torch": torch.__version__}
    res["nonprivate_steps_per_s"] = _time(nonprivate, args.steps, device)
    res["dputils_steps_per_s"] = _time(dputils_step, args.steps, device)
    if not args.no_opacus:
        try:
            from opacus import GradSampleModule

            gsm = GradSampleModule(make().to(device))
            opt2 = torch.optim.SGD(gsm.parameters(), lr=lr)

            def opacus_step():
                opt2.zero_grad(set_to_none=True)
                loss_fn(gsm(X), y).backward()
                ps = [p for p in gsm.parameters() if p.requires_grad]
                G = torch.cat([p.grad_sample.reshape(args.batch, -1) for p in ps], dim=1)
                U = clip_rows(G, clip).sum(0)
                U = U + sigma * clip * torch.randn_like(U)
                with torch.no_grad():
                    i = 0
                    for p in ps:
                        n = p.numel()
                        p -= lr * U[i : i + n].view_as(p) / args.batch
                        i += n
                        p.grad_sample = None

            res["opacus_steps_per_s"] = _time(opacus_step, args.steps, device)
        except ImportError:
            res["opacus_steps_per_s"] = None
    res["dputils_over_nonprivate"] = res["dputils_steps_per_s"] / res["nonprivate_steps_per_s"]
    if res.get("opacus_steps_per_s"):
        res["dputils_over_opacus"] = res["dputils_steps_per_s"] / res["opacus_steps_per_s"]
    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=2)


if __name__ == "__main__":
    main()
