"""White-box DP-SGD audit at the `paper` profile's scale, without the notebook toolchain (for a GPU box).

Runs the same functions as notebooks/gauss_audit.md's "White-box DP-SGD" section with the parameters of
params/paper.yml: a correct run and a broken run (noise divided by 4, same claim), each audited by the
Gaussian, Bonferroni, Steinke and f-DP auditors. Prints one JSON object (and writes it with --json).

    python benchmarks/gpu_whitebox_audit.py [--json out.json] [--epochs N | --seconds S] [--data-dir CIFAR10_FOLDER]
        [--set KEY=VALUE ...]

``--seconds S`` fits the two runs in about S seconds of training: a one-epoch probe of the correct run measures the
steps per second (it is reported too), and each run then gets the number of epochs that fits S / 2. ``--set``
overrides a ``wb_*`` parameter of the profile (``--set wb_model=cnn --set wb_batch_size=64`` for a quick CPU try).
The JSON file is rewritten after each run, so a run cut short by a time limit keeps what finished.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import yaml

from dputils.audit import whitebox


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--epochs", type=int, default=None, help="override wb_epochs (to fit a time budget)")
    ap.add_argument("--seconds", type=float, default=None, help="fit both runs' training in about this many seconds")
    ap.add_argument("--data-dir", default=None, help="CIFAR-10 python folder (default: wb_data_dir of paper.yml)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a wb_* parameter")
    args = ap.parse_args()
    if args.epochs is not None and args.seconds is not None:
        ap.error("give --epochs or --seconds, not both")
    params = Path(__file__).resolve().parents[1] / "params"
    p = yaml.safe_load((params / "full.yml").read_text())["gauss_audit"]  # the paper profile inherits full
    p.update(yaml.safe_load((params / "paper.yml").read_text())["gauss_audit"])
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or key not in p:
            ap.error(
                f"--set {item!r}: expected KEY=VALUE with KEY one of {sorted(k for k in p if k.startswith('wb_'))}"
            )
        p[key] = yaml.safe_load(value)
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

    def save() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))

    runs = [("correct", 1.0), ("noise_div_4", 0.25)]
    if args.seconds is not None:
        if not args.seconds > 0:
            ap.error("--seconds must be positive")
        probe = whitebox.run_whitebox_audit(p["wb_m"], **{**kw, "epochs": 1})
        steps_per_epoch = probe.T
        epochs = max(1, math.floor(args.seconds / len(runs) * probe.steps_per_second / steps_per_epoch))
        out["probe"] = dict(
            epochs=1, T=probe.T, steps_per_second=probe.steps_per_second, epochs_chosen=epochs, device=probe.device
        )
        kw["epochs"] = epochs
        save()
    for name, scale in runs:
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
        save()
    print(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
