"""``python -m dputils audit``: audit canary scores from any training run.

    python -m dputils audit --in-scores IN.npy --out-scores OUT.npy --delta 1e-5 --alpha 0.05 \\
        --method gauss|gauss-bonferroni|steinke|fdp

prints one JSON object with ``epsilon_lower`` (the 1 - alpha empirical lower bound), the method, the
fitted parameters and the seconds it took. Scores are read from ``.npy`` files (a 1-D array) or from text
files (``.gz``, ``.bz2`` and ``.xz`` decompressed): exactly one column of numbers, one score per line. A file
of several columns (``index,score``), a 2-D ``.npy`` or a single line of several numbers is refused in one
line, unless ``--column K`` names the column that holds the scores (counted from 1; for a 2-D ``.npy``, its
K-th column). Higher scores must mean "more likely IN".
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
import bz2
import gzip
import lzma
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
from ..resources import check_memory, memory_limit

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


#: Compressed text formats numpy.loadtxt reads transparently, and how to open them for the size estimate.
_COMPRESSED = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _text_size(p: Path, stop_after: float) -> tuple[int, bool]:
    """(bytes of text, compressed?) of a text score file: the file size, or for ``.gz``/``.bz2``/``.xz`` the
    decompressed size, counted by streaming (nothing kept) and stopped once past ``stop_after`` bytes (the
    answer is then only "too large"). The compressed size says nothing of the text: a 583 kB gzip of zeros
    holds 1.5e8 scores."""
    opener = _COMPRESSED.get(p.suffix.lower())
    if opener is None:
        return p.stat().st_size, False
    n = 0
    with opener(p, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            n += len(chunk)
            if n > stop_after:
                break
    return n, True


def _sniff_delimiter(p: Path) -> str | None:
    """``","`` when the first line holding anything but a comment has a comma, else None (whitespace)."""
    opener = _COMPRESSED.get(p.suffix.lower(), open)
    with opener(p, "rt") as fh:
        for _, line in zip(range(1000), fh):
            text = line.split("#", 1)[0].strip()
            if text:
                return "," if "," in text else None
    return None


def _one_column(a: np.ndarray, path: str, name: str, column: int | None, kind: str) -> np.ndarray:
    """The scores of a 2-D table ``a`` (rows x columns): its only column, or the ``column``-th (from 1).
    Any other shape is refused in one line naming ``name`` and ``--column``."""
    rows, cols = a.shape
    if column is not None:
        if column > cols:
            raise DPValueError(
                f"column: {path!r} has {cols} column{'s' if cols != 1 else ''} ({kind}), so --column {column} "
                f"does not exist; give --column in 1..{cols}"
            )
        return a[:, column - 1]
    if cols == 1:
        return a[:, 0]
    if rows == 1:
        raise DPValueError(
            f"{name}: {path!r} holds one line of {cols} numbers; give one score per line "
            "(one column), or --column K for the column of a table"
        )
    raise DPValueError(
        f"{name}: {path!r} holds {rows} rows of {cols} columns ({kind}); scores must be one column: "
        f"give --column K (1..{cols}) for the column that holds them"
    )


def _load_scores(path: str, name: str, column: int | None = None) -> np.ndarray:
    """The scores in ``path``: a 1-D ``.npy`` or one column of a text file (``.gz``, ``.bz2``, ``.xz``
    decompressed); with ``column`` (from 1) that column of a 2-D ``.npy`` or of a text table. Refused up front
    when reading would not fit in memory (``.npy``: the array and its float copy, from the header; text:
    :data:`TEXT_BYTES_PER_BYTE` per byte of the *decompressed* text)."""
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
            stop = memory_limit().bytes / TEXT_BYTES_PER_BYTE
            text_bytes, compressed = _text_size(p, stop)
            check_memory(
                name,
                TEXT_BYTES_PER_BYTE * text_bytes,
                f"reading the text file {path!r} ("
                + (f"at least {text_bytes:,} bytes decompressed" if compressed else f"{text_bytes:,} bytes")
                + ")",
                hint="save the scores as .npy (numpy.save) or audit fewer canaries",
            )
            delimiter = "," if p.suffix == ".csv" else _sniff_delimiter(p)
            a = np.loadtxt(p, delimiter=delimiter, ndmin=2)
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
    if p.suffix == ".npy":
        if a.ndim == 1 and column in (None, 1):
            return np.asarray(a, dtype=float)
        if a.ndim == 1 or a.ndim > 2 or (a.ndim == 2 and column is None):
            with_column = " (or a 2-D array with --column K)" if a.ndim != 1 else ""
            raise DPValueError(
                f"{name}: {path!r} holds an array of shape {a.shape}; scores must be a 1-D array{with_column}"
                + (f", so --column {column} does not exist" if a.ndim == 1 else "")
            )
        return np.asarray(_one_column(a, path, name, column, "a 2-D .npy"), dtype=float)
    if a.size == 0:
        raise DPValueError(f"{name}: {path!r} holds no scores")
    return np.asarray(_one_column(a, path, name, column, "a text table"), dtype=float)


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
    parser.add_argument(
        "--column",
        type=int,
        default=None,
        help="the column (from 1) of a text table or 2-D .npy that holds the scores (default: the file must "
        "hold one column)",
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the audit described by ``args``; returns the strict-JSON-ready result dict (inf/nan as None)."""
    t0 = time.perf_counter()
    check_delta(args.delta)
    check_probability("alpha", args.alpha, allow_one=False)
    seed = check_nonnegative_int("seed", args.seed)
    n_bootstrap = check_positive_int("n-bootstrap", args.n_bootstrap)
    claimed = None if args.claimed_epsilon is None else check_nonnegative("claimed-epsilon", args.claimed_epsilon)
    column = getattr(args, "column", None)
    if column is not None:
        column = check_positive_int("column", column)
    i = _load_scores(args.in_scores, "in-scores", column)
    o = _load_scores(args.out_scores, "out-scores", column)
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
