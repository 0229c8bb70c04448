"""Where a notebook failed: the code cell, the source line in ``notebooks/NAME.md`` and the exception, read from
the executed copy.

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .common import _rel


def _first_line(text: str, limit: int = 300) -> str:
    lines = [ln for ln in str(text).strip().splitlines() if ln.strip()]
    line = lines[0] if lines else str(text).strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FRAME = re.compile(r"^\s*Cell In\s*\[(\d+)\],\s*line (\d+)", re.M)
_ARROW = re.compile(r"^\s*-+>\s*(\d+)", re.M)


def failure_location(executed: Path, source: Path | None = None) -> dict[str, Any]:
    """Where the executed copy failed: execution count, code cell, line in the cell, source line, md line.

    The line comes from IPython's traceback of the failing cell: the innermost ``Cell In[N], line L`` frame
    of that cell (else its first ``----> L`` marker). Keys that cannot be found are left out.
    """
    out: dict[str, Any] = {}
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
    except Exception:
        return out
    k = 0
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        tags = c.metadata.get("tags", [])
        if "injected-parameters" not in tags:
            k += 1
        errors = [o for o in c.get("outputs", []) if o.get("output_type") == "error"]
        pm_meta = c.metadata.get("papermill", {})
        if not errors and not pm_meta.get("exception") and pm_meta.get("status") not in ("failed", "running"):
            continue
        out["code_cell"] = k
        if c.get("execution_count") is not None:
            out["cell"] = c["execution_count"]
        src_lines = c.source.splitlines()
        line = None
        if errors:
            err = errors[0]
            tb = _ANSI.sub("", "\n".join(err.get("traceback", [])))
            frames = [(int(n), int(ln)) for n, ln in _FRAME.findall(tb)]
            mine = [ln for n, ln in frames if c.get("execution_count") is None or n == c["execution_count"]]
            if mine:
                line = mine[-1]
            else:
                arrow = _ARROW.search(tb)
                line = int(arrow.group(1)) if arrow else None
            out["error"] = _first_line(f"{err.get('ename', 'Error')}: {err.get('evalue', '')}")
        if line is not None and 1 <= line <= len(src_lines):
            out["line"] = line
            out["source"] = src_lines[line - 1].strip()[:200]
        else:
            code = [ln for ln in src_lines if ln.strip() and not ln.strip().startswith("#")]
            if code:
                out["source"] = code[0].strip()[:200]
        if source is not None:
            first = _md_cell_line(source, k, src_lines)
            if first is not None:
                out["md_line"] = first + (out.get("line", 1) - 1)
        break
    return out


def _is_timeout(exc: BaseException) -> bool:
    """A cell that ran past the execution timeout (nbclient's ``CellTimeoutError``, a ``TimeoutError``)."""
    return type(exc).__name__ == "CellTimeoutError" or isinstance(exc, TimeoutError)


def timeout_location(executed: Path, source: Path | None = None) -> dict[str, Any]:
    """Where a run stopped by the cell timeout was: the last code cell that papermill started (it records a
    ``start_time`` for each cell it starts and none for those after), with the keys of :func:`failure_location`
    except ``line`` (which line was running is not known; ``source`` and ``md_line`` give the cell's first line of
    code)."""
    out: dict[str, Any] = {}
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
    except Exception:
        return out
    k, found = 0, None
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        if "injected-parameters" not in c.metadata.get("tags", []):
            k += 1
        if (c.metadata.get("papermill") or {}).get("start_time"):
            found = (k, c)
    if found is None:
        return out
    k, c = found
    out["code_cell"] = k
    if c.get("execution_count") is not None:
        out["cell"] = c["execution_count"]
    src_lines = c.source.splitlines()
    code = [(i, ln) for i, ln in enumerate(src_lines, 1) if ln.strip() and not ln.strip().startswith("#")]
    if code:  # the line it was running is not known: the cell's first line of code, no line number
        out["source"] = code[0][1].strip()[:200]
    if source is not None:
        start = _md_cell_line(source, k, src_lines)
        if start is not None:
            out["md_line"] = start + (code[0][0] - 1 if code else 0)
    return out


def _md_cell_line(source: Path, k: int, src_lines: list[str]) -> int | None:
    """1-based line of the first source line of the k-th code cell of a MyST file (None if not found)."""
    try:
        md = source.read_text().splitlines()
    except OSError:
        return None
    fences = [i for i, ln in enumerate(md) if ln.startswith("```{code-cell}")]
    if not 1 <= k <= len(fences) or not src_lines:
        return None
    start = fences[k - 1] + 1
    end = fences[k] if k < len(fences) else len(md)
    n = len(src_lines)
    for j in range(start, end - n + 1):
        if md[j : j + n] == src_lines:
            return j + 1
    return None


def failure_where(rep: dict[str, Any], notebook: str) -> str:
    """The one description of where a notebook failed, shared by ``run`` and ``sweep``: ``NOTEBOOK:MD_LINE, code
    cell K, In [n], line L: SOURCE LINE`` with the parts :func:`failure_location` found (``NOTEBOOK (before any
    cell)`` when none)."""
    parts = []
    if "md_line" in rep:
        parts.append(f"{notebook}:{rep['md_line']}")
    if "code_cell" in rep:
        parts.append(f"code cell {rep['code_cell']}")
    if "cell" in rep:
        parts.append(f"In [{rep['cell']}]")
    if "line" in rep:
        parts.append(f"line {rep['line']}")
    where = ", ".join(parts) if parts else f"{notebook} (before any cell)"
    return f"{where}: {rep['source'].strip()}" if rep.get("source") else where


def describe_failure(rep: dict[str, Any], root: Path | None = None) -> list[str]:
    """The lines of a failure report: where (:func:`failure_where`) with the source line, the error, the executed
    copy."""
    return [
        failure_where(rep, f"notebooks/{rep['name']}.md"),
        rep.get("error", "unknown error"),
        f"executed copy with the error: {_rel(rep['output'], root) if root else rep['output']}",
    ]
