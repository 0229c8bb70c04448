"""Results of notebooks as JSON artifacts, and glue for numbers shown in the book's prose.

Every notebook ends with ``dputils.book.results.save(NAME, key=value, ...)``. The file lands in
``$DPBOOK_RESULTS_DIR/NAME.json`` (default: ``results/`` under the current working directory's
repository root), written atomically and readable by all (mode 0644), in strict JSON (RFC 8259, the package's one
rule, :mod:`dputils.jsonio`: a non-finite number is ``null``, and ``_meta.nonfinite`` says which nulls were
``inf``, ``-inf`` or ``nan``). Tests and the book read these files with :func:`read` (or :func:`load`), which puts
those numbers back; nobody scrapes cell output.

The runner executes each notebook in a staging folder (``DPBOOK_RESULTS_DIR`` points there) and moves
its results into place only when the whole notebook passed; ``load`` falls back to
``$DPBOOK_RESULTS_PUBLISHED`` (the published folder) for results the staged run did not write itself.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..jsonio import jsonable, restore_nonfinite, write_text_atomic

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def repo_root(start: Path | None = None) -> Path:
    """The nearest ancestor that is a checkout (``pyproject.toml`` beside ``dputils/``) or a book folder made from
    the shipped sources (``.dpbook-sources.json``, :mod:`dputils.book.booksources`), else ``start``."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if ((p / "pyproject.toml").is_file() and (p / "dputils").is_dir()) or (p / ".dpbook-sources.json").is_file():
            return p
    return here


def results_dir() -> Path:
    """Where results go: ``$DPBOOK_RESULTS_DIR`` if set, else ``<repo root>/results``."""
    env = os.environ.get("DPBOOK_RESULTS_DIR")
    return Path(env) if env else repo_root() / "results"


def to_jsonable(obj: Any, nonfinite: dict[str, str] | None = None) -> Any:
    """``obj`` made strict JSON by the package's one rule (:func:`dputils.jsonio.jsonable`): numpy scalars and
    arrays, dataclasses with ``to_dict``, tuples and paths made plain, and every non-finite float (an infinite,
    i.e. vacuous, bound or an undefined one) written as ``null``, its place recorded in ``nonfinite`` when given;
    anything else is a ``TypeError`` (a chapter never saves the ``repr`` of an object by mistake)."""
    return jsonable(obj, strict=True, nonfinite=nonfinite)


def save(name: str, /, **values: Any) -> Path:
    """Write ``values`` to ``results/NAME.json`` atomically and return the path.

    Strict JSON (:func:`to_jsonable`): a non-finite number is ``null``, and ``_meta.nonfinite`` records which
    nulls stand for ``inf``, ``-inf`` or ``nan`` (JSON Pointer -> text; absent when there are none), so that
    :func:`read` gives back the numbers that were saved. The file is written to a temporary file in the same
    folder and moved into place with ``os.replace`` (:func:`dputils.jsonio.write_text_atomic`), so a crash never
    leaves a half-written artifact. ``_meta`` also records the name and the time.
    """
    if not _NAME.match(name):
        raise ValueError(f"name must match {_NAME.pattern}, got {name!r}")
    if "_meta" in values:
        raise ValueError("_meta is written by save itself; give the values another name")
    out_dir = results_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    marks: dict[str, str] = {}
    payload = to_jsonable(values, marks)
    payload["_meta"] = {"name": name, "saved": _dt.datetime.now(_dt.UTC).isoformat()}
    if marks:
        payload["_meta"]["nonfinite"] = marks
    text = json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
    return write_text_atomic(out_dir / f"{name}.json", text + "\n")


def read(path: Path | str) -> dict[str, Any]:
    """A results file as :func:`save` was given it: the JSON, with the nulls that ``_meta.nonfinite`` marks turned
    back into ``inf``, ``-inf`` or ``nan`` (:func:`dputils.jsonio.restore_nonfinite`); every other null stays None.
    The one reader of results files (``load``, the scorecard, the sweep's table)."""
    with open(path) as fh:
        data = json.load(fh)
    meta = data.get("_meta") if isinstance(data, dict) else None
    marks = meta.get("nonfinite") if isinstance(meta, dict) else None
    if marks:
        if not isinstance(marks, dict):
            raise ValueError(f"{path}: _meta.nonfinite must be an object, got {type(marks).__name__}")
        try:
            restore_nonfinite(data, marks)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return data


def load(name: str, directory: Path | str | None = None) -> dict[str, Any]:
    """Read ``results/NAME.json`` back (:func:`read`: the non-finite numbers that were saved come back as floats).

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
    return read(path)


def glue(name: str, value: Any, display: bool = False) -> None:
    """``myst_nb.glue`` when the book toolchain is installed, otherwise a no-op.

    Numbers shown in prose are glued (``{glue:text}`name:.3f```; small and large ones as the string
    :func:`dputils.book.tables.sci` makes, so that prose and tables share one format); numpy scalars are glued as
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


def glue_all(values: Mapping[str, Any] | None = None, /, *, prefix: str = "", **named: Any) -> None:
    """:func:`glue` every value, hidden, under ``prefix + name``: the keys of ``values`` and the keywords.

    One call for the numbers a paragraph quotes (``glue_all(eps=e, sigma=s)``, or ``glue_all(row, prefix="t6_")``
    for a dict a library function returned)."""
    for name, value in {**(values or {}), **named}.items():
        glue(f"{prefix}{name}", value)
