"""White-box DP-SGD audit at the `paper` profile's scale, without the notebook toolchain (for a GPU box).

Runs the same functions as notebooks/gauss_audit.md's "White-box DP-SGD" section with the parameters of
params/paper.yml: a correct run and a broken run (noise divided by 4, same claim), each audited by the
Gaussian, Bonferroni, Steinke and f-DP auditors. Prints one JSON object (and writes it with --json).

    python benchmarks/gpu_whitebox_audit.py [--json out.json] [--epochs N] [--data-dir CIFAR10_FOLDER]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from dputils.audit import whitebox


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--epochs", type=int, default=None, help="override wb_epochs (to fit a time budget)")
    ap.add_argument("--data-dir", default=None, help="CIFAR-10 python folder (default: wb_data_dir of paper.yml)")
    args = ap.parse_args()
    params = Path(__file__).resolve().parents[1] / "params"
    p = yaml.safe_load((params / "full.yml").read_text())["gauss_audit"]  # the paper profile inherits full
    p.update(yaml.safe_load((params / "paper.yml").read_text())["gauss_audit"])
    kw = dict(
        sigma=p["wb_sigma"],
        epochs=args.epochs or p["wb_epochs"],
        batch_size=p["wb_batch_size"],
        n_train=p["wb_n_train"],
        dim=p["wb_dim"],
        n_classes=p["wb_n_classes"],
        hidden=p["wb_hidden"],
        lr=p["wb_lr"],
        device=p["wb_device"],
        progress=False,
        model=p.get("wb_model", "mlp"),
        data_dir=args.data_dir or p.get("wb_data_dir") or None,
        microbatch=p.get("wb_microbatch", 0),
    )
    out = {}
    for name, scale in (("correct", 1.0), ("noise_div_4", 0.25)):
        run = whitebox.run_whitebox_audit(p["wb_m"], noise_multiplier_scale=scale, **kw)
        bounds = whitebox.audit_whitebox(run, 0.05)
        out[name] = dict(
            device=run.device,
            model=run.model,
            data=run.data,
            n_params=run.n_params,
            T=run.T,
            q=run.q,
            sigma=run.sigma,
            epsilon_theory=run.epsilon_theory,
            steps_per_second=run.steps_per_second,
            train_seconds=run.train_seconds,
            bounds={k: (float(v) if isinstance(v, (int, float)) else v) for k, v in bounds.items()},
        )
    print(json.dumps(out, indent=2, default=str))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
