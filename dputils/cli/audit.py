"""``python -m dputils audit``: audit canary scores from any training run.

    python -m dputils audit --in-scores IN.npy --out-scores OUT.npy --delta 1e-5 --alpha 0.05 \\
        --method gauss|gauss-bonferroni|steinke|fdp

prints one JSON object with ``epsilon_lower`` (the 1 - alpha empirical lower bound), the method, the
fitted parameters and the seconds it took. Scores are read from ``.npy`` files or from text files
(one number per line, or whitespace/comma separated). Higher scores must mean "more likely IN".
``--claimed-epsilon`` adds ``violation`` (true when the lower bound exceeds the claim). The output is
strict JSON: a bound that cannot be given (or is infinite) is null. Bad input (a missing file, an empty
path, a directory, a FIFO or a device, complex, 2-D or non-numeric ``.npy`` scores, constant scores for the
Gaussian auditor, a score file or a bootstrap too large for this machine's memory, a threshold audit over
the work limit) exits 2 with one line naming the option; numerical failure exits 3. Sizes are estimated
before anything is read or run (:mod:`dputils.resources`).

``python -m dputils audit ...`` and ``python -m dputils.audit ...`` run this command (:func:`add_arguments`,
:func:`run`).
"""

from __future__ import annotations

import argparse
import os
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..audit.gauss import check_bootstrap_size
from ..audit.methods import DEFAULT_METHODS as METHODS
from ..audit.methods import run_method
from ..errors import (
    DPValueError,
    check_delta,
    check_nonnegative,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
)
from ..jsonio import jsonable
from ..resources import check_memory

#: Worst-case peak bytes of ``numpy.loadtxt`` per byte of a text score file (measured: short numbers on
#: one line, ``"1 1 1 ..."``, take 16 bytes per byte; one number per line about 4; long numbers less).
TEXT_BYTES_PER_BYTE = 16.0


def _not_a_file(path: str, p: Path) -> str | None:
    """Why ``path`` is not a regular file of scores (None when it is one), without opening it: a FIFO
    or a device would block or never end on reading."""
    if path == "":
        return "the path is empty; give the file of scores"
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return f"no such file {path!r}"
    except OSError as exc:
        return f"cannot read {path!r} ({exc.strerror or exc})"
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return None
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a named pipe (FIFO)"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    return f"{path!r} is {kind}, not a file of scores"


def _load_scores(path: str, name: str) -> np.ndarray:
    """The scores in ``path`` (``.npy`` or text), refused up front when reading them would not fit in memory
    (``.npy``: the array and its float copy, from the header; text: :data:`TEXT_BYTES_PER_BYTE` per byte)."""
    p = Path(path)
    why = _not_a_file(path, p)
    if why is not None:
        raise DPValueError(f"{name}: {why}")
    size = p.stat().st_size
    try:
        if p.suffix == ".npy":
            head = np.load(p, allow_pickle=False, mmap_mode="r")
            if isinstance(head, np.ndarray):
                check_memory(
                    name,
                    float(size) + 8.0 * head.size,
                    f"reading {path!r} ({head.size:,} scores)",
                    hint="audit fewer canaries",
                )
            a = np.array(head)
        else:
            check_memory(
                name,
                TEXT_BYTES_PER_BYTE * size,
                f"reading the text file {path!r} ({size:,} bytes)",
                hint="save the scores as .npy (numpy.save) or audit fewer canaries",
            )
            a = np.loadtxt(p, delimiter="," if p.suffix == ".csv" else None, ndmin=1)
    except DPValueError:
        raise
    except Exception as exc:  # unreadable file: a bad input, not a bug
        msg = " ".join(str(exc).split())
        raise DPValueError(f"{name}: cannot read {path!r} ({msg})") from None
    if not isinstance(a, np.ndarray):
        raise DPValueError(f"{name}: {path!r} does not hold one array of scores")
    if a.dtype.kind == "c":
        raise DPValueError(f"{name}: {path!r} holds complex numbers; scores must be real")
    if a.dtype.kind not in "biuf":
        raise DPValueError(
            f"{name}: {path!r} holds values of type {a.dtype} ({a.dtype.kind!r}); scores must be real numbers"
        )
    if p.suffix == ".npy" and a.ndim != 1:
        raise DPValueError(f"{name}: {path!r} holds an array of shape {a.shape}; scores must be a 1-D array")
    return np.asarray(a, dtype=float).ravel()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``python -m dputils audit``."""
    parser.add_argument("--in-scores", required=True, help="scores of present (IN) canaries (.npy or text)")
    parser.add_argument("--out-scores", required=True, help="scores of absent (OUT) canaries (.npy or text)")
    parser.add_argument("--delta", type=float, default=1e-5, help="delta at which epsilon is audited (default 1e-5)")
    parser.add_argument("--alpha", type=float, default=0.05, help="1 - confidence level (default 0.05)")
    parser.add_argument(
        "--method",
        choices=METHODS,
        default="gauss",
        help="gauss: bootstrap ellipsoid; gauss-bonferroni: Bonferroni box; steinke; fdp",
    )
    parser.add_argument("--n-bootstrap", type=int, default=2000, help="bootstrap resamples (gauss)")
    parser.add_argument("--pool-variance", action="store_true", help="gauss*: evaluate eps with pooled variance")
    parser.add_argument(
        "--selection",
        choices=("split", "bonferroni-grid", "none"),
        default="split",
        help="steinke/fdp threshold selection; 'none' is the paper's uncorrected sweep (not valid)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap / the data split")
    parser.add_argument("--claimed-epsilon", type=float, default=None, help="report whether the bound exceeds it")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the audit described by ``args``; returns the strict-JSON-ready result dict (inf/nan as None)."""
    t0 = time.perf_counter()
    check_delta(args.delta)
    check_probability("alpha", args.alpha, allow_one=False)
    seed = check_nonnegative_int("seed", args.seed)
    n_bootstrap = check_positive_int("n-bootstrap", args.n_bootstrap)
    claimed = None if args.claimed_epsilon is None else check_nonnegative("claimed-epsilon", args.claimed_epsilon)
    i = _load_scores(args.in_scores, "in-scores")
    o = _load_scores(args.out_scores, "out-scores")
    if args.method == "gauss":
        check_bootstrap_size(n_bootstrap, i.size + o.size)
    res = run_method(
        args.method,
        i,
        o,
        args.delta,
        args.alpha,
        n_bootstrap=n_bootstrap,
        seed=seed,
        selection=args.selection,
        pool_variance=args.pool_variance,
    )
    out = res.to_dict()
    out["method"] = args.method
    for k in ("cov", "grid"):
        out.pop(k, None)
    if claimed is not None:
        out["claimed_epsilon"] = claimed
        out["violation"] = bool(res.epsilon_lower > claimed)
    out["seconds"] = time.perf_counter() - t0
    return jsonable(out)  # strict-JSON-ready: numpy made plain, non-finite numbers as None
