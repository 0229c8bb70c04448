"""``python -m dputils audit``: audit canary scores from any training run.

    python -m dputils audit --in-scores IN.npy --out-scores OUT.npy --delta 1e-5 --alpha 0.05 \\
        --method gauss|gauss-bonferroni|steinke|fdp

prints one JSON object with ``epsilon_lower`` (the 1 - alpha empirical lower bound), the method, the
fitted parameters and the seconds it took. Scores are read from ``.npy`` files or from text files
(one number per line, or whitespace/comma separated). Higher scores must mean "more likely IN".
``--claimed-epsilon`` adds ``violation`` (true when the lower bound exceeds the claim).

The lead wires :func:`add_arguments` and :func:`run` into ``python -m dputils``; until then
``python -m dputils.audit ...`` runs the same command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DPValueError
from ..results import to_jsonable

METHODS = ("gauss", "gauss-bonferroni", "steinke", "fdp")


def _load_scores(path: str, name: str) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise DPValueError(f"{name}: no such file {path!r}")
    try:
        if p.suffix == ".npy":
            a = np.load(p, allow_pickle=False)
        else:
            a = np.loadtxt(p, delimiter="," if p.suffix == ".csv" else None, ndmin=1)
    except Exception as exc:  # unreadable file: a bad input, not a bug
        raise DPValueError(f"{name}: cannot read {path!r} ({exc})") from None
    return np.asarray(a, dtype=float).ravel()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``python -m dputils audit``."""
    parser.add_argument("--in-scores", required=True, help="scores of present (IN) canaries (.npy or text)")
    parser.add_argument("--out-scores", required=True, help="scores of absent (OUT) canaries (.npy or text)")
    parser.add_argument("--delta", type=float, default=1e-5, help="delta at which epsilon is audited (default 1e-5)")
    parser.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level (default 0.05)")
    parser.add_argument("--method", choices=METHODS, default="gauss",
                        help="gauss: bootstrap ellipsoid; gauss-bonferroni: Bonferroni box; steinke; fdp")
    parser.add_argument("--n-bootstrap", type=int, default=2000, help="bootstrap resamples (gauss)")
    parser.add_argument("--pool-variance", action="store_true", help="gauss*: evaluate eps with pooled variance")
    parser.add_argument("--selection", choices=("split", "bonferroni-grid", "none"), default="split",
                        help="steinke/fdp threshold selection; 'none' is the paper's uncorrected sweep (not valid)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap / the data split")
    parser.add_argument("--claimed-epsilon", type=float, default=None, help="report whether the bound exceeds it")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the audit described by ``args``; returns the JSON-ready result dict."""
    from .gauss import gauss_audit
    from .onerun import threshold_audit

    t0 = time.perf_counter()
    i = _load_scores(args.in_scores, "in-scores")
    o = _load_scores(args.out_scores, "out-scores")
    if args.method in ("gauss", "gauss-bonferroni"):
        res = gauss_audit(i, o, args.delta, args.alpha, region="ellipsoid" if args.method == "gauss" else "bonferroni",
                          n_bootstrap=args.n_bootstrap, seed=args.seed, pool_variance=args.pool_variance)
    else:
        res = threshold_audit(i, o, args.delta, args.alpha, method=args.method, selection=args.selection, seed=args.seed)
    out = res.to_dict()
    out["method"] = args.method
    for k in ("cov", "grid"):
        out.pop(k, None)
    if args.claimed_epsilon is not None:
        out["claimed_epsilon"] = args.claimed_epsilon
        out["violation"] = bool(res.epsilon_lower > args.claimed_epsilon)
    out["seconds"] = time.perf_counter() - t0
    return to_jsonable(out)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``python -m dputils.audit``)."""
    parser = argparse.ArgumentParser(prog="python -m dputils audit", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        out = run(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, allow_nan=False))
    return 0
