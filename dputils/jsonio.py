"""Strict JSON and atomic writes: the one place the package turns results into RFC 8259 JSON and writes files.

* :func:`jsonable` makes numpy scalars and arrays, tuples, sets and paths plain and writes every non-finite float
  (an infinite, i.e. vacuous, bound or an undefined one) as ``null``; :func:`dumps` is ``json.dumps`` of it with
  ``allow_nan=False``. The command line, the accountant state files, the chapters' results files
  (:mod:`dputils.book.results`), the run reports and the sweep's point files use it.
* :func:`write_text_atomic` and :func:`write_json_atomic`: a temporary file in the same folder, fsync, rename (a
  reader sees the old file or the new one, never half of one; the temporary file is removed on failure).

A non-finite number is null in the file; where its meaning matters (an infinite bound that a table shows as ∞),
the writer records its place (``jsonable(..., nonfinite=marks)``, the results files keep ``marks`` in their
``_meta``) and the reader puts it back (:func:`restore_nonfinite`), so that null never silently stands for infinity.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["jsonable", "restore_nonfinite", "dumps", "write_bytes_atomic", "write_text_atomic", "write_json_atomic"]


def jsonable(obj: Any, *, strict: bool = False, nonfinite: dict[str, str] | None = None) -> Any:
    """``obj`` with numpy scalars/arrays, tuples and paths made plain, and every non-finite float (an
    infinite, i.e. vacuous, bound or an undefined one) written as None, so that ``json.dumps(...,
    allow_nan=False)`` gives strict RFC 8259 JSON. The one place the package converts its output.

    An object that is none of these (nor has ``to_dict`` or converts with ``float``) becomes its ``str``, or, with
    ``strict=True`` (the chapters' results files), a ``TypeError`` naming its type. With a dict ``nonfinite``,
    each non-finite number written as None is recorded there: its place as an RFC 6901 JSON Pointer (``/rows/3/
    upper``) -> ``"inf"``, ``"-inf"`` or ``"nan"`` (:func:`restore_nonfinite` puts them back)."""
    return _plain(obj, strict, "", nonfinite)


def _plain(obj: Any, strict: bool, at: str, found: dict[str, str] | None) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v, strict, f"{at}/{_escape(str(k))}", found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_plain(v, strict, f"{at}/{i}", found) for i, v in enumerate(obj)]
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy arrays and scalars
        return _plain(obj.tolist(), strict, at, found)
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, Path):
        return str(obj)
    if not isinstance(obj, float):
        if hasattr(obj, "to_dict") and callable(obj.to_dict):
            return _plain(obj.to_dict(), strict, at, found)
        try:
            obj = float(obj)
        except (TypeError, ValueError):
            if strict:
                raise TypeError(f"cannot write a {type(obj).__name__} as JSON: {obj!r:.80}") from None
            return str(obj)
    if math.isfinite(obj):
        return obj
    if found is not None:
        found[at] = repr(float(obj))  # "inf", "-inf" or "nan"
    return None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def restore_nonfinite(data: Any, nonfinite: dict[str, str]) -> Any:
    """Put back into ``data`` (read from JSON) the non-finite numbers that :func:`jsonable` recorded in
    ``nonfinite`` (JSON Pointer -> ``"inf"``, ``"-inf"``, ``"nan"``); in place, and returned. A pointer that does
    not lead to a null of ``data`` is a ``ValueError`` (the file and its record disagree)."""
    for pointer, mark in nonfinite.items():
        if mark not in ("inf", "-inf", "nan") or not isinstance(pointer, str) or not pointer.startswith("/"):
            raise ValueError(f"bad record of a non-finite number: {pointer!r}: {mark!r}")
        *path, last = [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]
        try:
            node = data
            for t in path:
                node = node[int(t)] if isinstance(node, list) else node[t]
            key = int(last) if isinstance(node, list) else last
            if node[key] is not None:
                raise ValueError(f"{pointer} holds {node[key]!r}, not null")
        except (KeyError, IndexError, TypeError) as exc:
            raise ValueError(f"{pointer}: no such place in the data ({exc})") from None
        node[key] = float(mark)
    return data


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
