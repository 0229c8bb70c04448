"""Results of notebooks as JSON artifacts, and glue for numbers shown in the book's prose.

Every notebook ends with ``dputils.results.save(NAME, key=value, ...)``. The file lands in
``$DPBOOK_RESULTS_DIR/NAME.json`` (default: ``results/`` under the current working directory's
repository root), written atomically and readable by all (mode 0644). Tests and the book read these
files; nobody scrapes cell output.

The runner executes each notebook in a staging folder (``DPBOOK_RESULTS_DIR`` points there) and moves
its results into place only when the whole notebook passed; ``load`` falls back to
``$DPBOOK_RESULTS_PUBLISHED`` (the published folder) for results the staged run did not write itself.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from .jsonio import write_text_atomic  # noqa: F401  (public here too)

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def repo_root(start: Path | None = None) -> Path:
    """The nearest ancestor that is a checkout (``pyproject.toml`` beside ``dputils/``) or a book folder made from
    the shipped sources (``.dpbook-sources.json``, :mod:`dputils.booksources`), else ``start``."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if ((p / "pyproject.toml").is_file() and (p / "dputils").is_dir()) or (p / ".dpbook-sources.json").is_file():
            return p
    return here


def results_dir() -> Path:
    """Where results go: ``$DPBOOK_RESULTS_DIR`` if set, else ``<repo root>/results``."""
    env = os.environ.get("DPBOOK_RESULTS_DIR")
    return Path(env) if env else repo_root() / "results"


def to_jsonable(obj: Any) -> Any:
    """numpy scalars/arrays, dataclasses with ``to_dict``, tuples and paths made JSON-ready.

    Non-finite floats are stored as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` so that the file
    stays valid JSON (``load`` turns them back into floats).
    """
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _from_json(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _from_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_json(v) for v in obj]
    if obj in ("inf", "-inf", "nan"):
        return float(obj)
    return obj


def save(name: str, /, **values: Any) -> Path:
    """Write ``values`` to ``results/NAME.json`` atomically and return the path.

    The file is written to a temporary file in the same folder and moved into place with
    ``os.replace``, so a crash never leaves a half-written artifact. A ``_meta`` entry records the time.
    """
    if not _NAME.match(name):
        raise ValueError(f"name must match {_NAME.pattern}, got {name!r}")
    out_dir = results_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = to_jsonable(values)
    payload["_meta"] = {"name": name, "saved": _dt.datetime.now(_dt.UTC).isoformat()}
    text = json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
    return write_text_atomic(out_dir / f"{name}.json", text + "\n")


def load(name: str, directory: Path | str | None = None) -> dict[str, Any]:
    """Read ``results/NAME.json`` back (non-finite markers become floats again).

    Without ``directory``: ``results_dir()``, else ``$DPBOOK_RESULTS_PUBLISHED`` when the file is only there
    (a notebook run by the runner reads another notebook's published results).
    """
    if directory is not None:
        path = Path(directory) / f"{name}.json"
    else:
        path = results_dir() / f"{name}.json"
        published = os.environ.get("DPBOOK_RESULTS_PUBLISHED")
        if not path.is_file() and published:
            path = Path(published) / f"{name}.json"
    with open(path) as fh:
        return _from_json(json.load(fh))


def glue(name: str, value: Any, display: bool = False) -> None:
    """``myst_nb.glue`` when the book toolchain is installed, otherwise a no-op.

    Numbers shown in prose are glued (``{glue:text}`name:.3f```; small and large ones as the string
    :func:`dputils.tables.sci` makes, so that prose and tables share one format); numpy scalars are glued as
    plain Python numbers; figures can be glued too.
    """
    try:
        from myst_nb import glue as _glue
    except Exception:  # pragma: no cover - myst-nb absent
        return None
    if isinstance(value, np.generic):  # a numpy scalar: glued as the plain Python number it holds
        value = value.item()
    _glue(name, value, display=display)
    return None
