"""Strict JSON and atomic writes: the one place the package turns results into RFC 8259 JSON and writes files.

* :func:`jsonable` makes numpy scalars and arrays, tuples, sets and paths plain and writes every non-finite float
  (an infinite, i.e. vacuous, bound or an undefined one) as ``null``; :func:`dumps` is ``json.dumps`` of it with
  ``allow_nan=False``. The command line, the accountant state files, the run reports and the sweep's point files
  use it.
* :func:`write_text_atomic` and :func:`write_json_atomic`: a temporary file in the same folder, fsync, rename (a
  reader sees the old file or the new one, never half of one; the temporary file is removed on failure).

The chapters' results files (:mod:`dputils.results`) keep their own encoding of infinity (the string ``"inf"``,
read back as a float), so that a vacuous bound survives the round trip into the book's tables.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["jsonable", "dumps", "write_bytes_atomic", "write_text_atomic", "write_json_atomic"]


def jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars/arrays, tuples and paths made plain, and every non-finite float (an
    infinite, i.e. vacuous, bound or an undefined one) written as None, so that ``json.dumps(...,
    allow_nan=False)`` gives strict RFC 8259 JSON. The one place the command line converts its output."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy arrays and scalars
        return jsonable(obj.tolist())
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return jsonable(obj.to_dict())
    try:
        x = float(obj)
    except (TypeError, ValueError):
        return str(obj)
    return x if math.isfinite(x) else None


def dumps(obj: Any) -> str:
    """Strict JSON text of ``obj`` (see :func:`jsonable`)."""
    return json.dumps(jsonable(obj), allow_nan=False)


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder (created with the folder if
    missing), fsync, rename; mode 0644; the temporary file is removed if anything fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o644)  # mkstemp creates 0600; these are ordinary outputs
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`write_bytes_atomic`)."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: Any, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """Strict JSON of ``obj`` (:func:`jsonable`) written atomically to ``path``."""
    text = json.dumps(jsonable(obj), indent=indent, sort_keys=sort_keys, allow_nan=False)
    return write_text_atomic(path, text + "\n")
