"""The JSON report of a ``run`` or ``book`` (``_build/<profile>/report.json``) and the timing table.

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ...jsonio import write_text_atomic
from .common import _rel
from .locate import describe_failure


def timing_table(reports: list[dict[str, Any]]) -> str:
    """A small table of each notebook's status and seconds (reused ones say so), with the total."""
    rows = sorted(reports, key=lambda r: r["name"])
    w = max([len("notebook")] + [len(r["name"]) for r in rows])
    out = [f"{'notebook':{w}s}  status  seconds", f"{'-' * w}  ------  -------"]
    for r in rows:
        status = ("ok" if r["ok"] else "FAILED") if r.get("action") != "reused" else "reused"
        out.append(f"{r['name']:{w}s}  {status:6s}  {r['seconds']:7.1f}")
    out.append(f"{'sum':{w}s}  {'':6s}  {sum(r['seconds'] for r in rows):7.1f}")
    return "\n".join(out)


REPORT_FORMAT = "dpbook-run-report"
REPORT_VERSION = 1


def report_path(
    command: str, profile: str, root: Path, output: Path | str | None = None, explicit: Path | str | None = None
) -> Path:
    """Where ``run``/``book`` write their JSON report: ``explicit`` (``--report``), else ``DIR/report.json`` for
    ``run --output DIR`` (DIR not ``book``), else ``_build/<profile>/report.json`` (``run`` and ``book`` alike: the
    last command's report; its ``command`` field says which)."""
    if explicit is not None:
        p = Path(explicit).expanduser()
        return p if p.is_absolute() else Path.cwd() / p
    if command == "run" and output is not None and str(output) != "book":
        base = Path(output).expanduser()
        return (base if base.is_absolute() else Path.cwd() / base) / "report.json"
    return root / "_build" / profile / "report.json"


def _finite(x: Any) -> Any:

    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def chapter_entry(rep: dict[str, Any], root: Path | None = None) -> dict[str, Any]:
    """One chapter of the JSON report (see :func:`run_report`)."""
    out = {
        "name": rep["name"],
        "status": "ok" if rep["ok"] else "failed",
        "action": rep.get("action", "run"),
        "reason": rep.get("reason"),
        "seconds": _finite(float(rep.get("seconds", 0.0))),
        "profile": rep.get("profile"),
        "output": _rel(rep["output"], root) if root and rep.get("output") else rep.get("output"),
    }
    if rep.get("action") == "reused":
        out["last_run_seconds"] = _finite(rep.get("last_run_seconds"))
        out["last_run_finished"] = rep.get("last_run_finished")
    if not rep["ok"]:
        out["failure"] = {
            "location": f"notebooks/{rep['name']}.md:{rep['md_line']}" if "md_line" in rep else None,
            "code_cell": rep.get("code_cell"),
            "execution_count": rep.get("cell"),
            "line": rep.get("line"),
            "source": rep.get("source"),
            "error": rep.get("error", "unknown error"),
            "lines": describe_failure(rep, root),
        }
    return out


def run_report(
    command: str,
    profile: str,
    reports: list[dict[str, Any]],
    root: Path,
    *,
    changed: bool,
    wall_seconds: float,
    exit_code: int,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The machine-readable report of a ``run``/``book``: ``format``, ``version``, ``command``, ``profile``,
    ``changed``, ``finished`` (UTC), ``ok``, ``exit_code``, ``chapters`` (sorted by name; each ``name``,
    ``status`` ok/failed, ``action`` run/reused, ``reason``, ``seconds``, ``profile``, ``output``; a failure
    adds ``failure`` with ``location`` (``notebooks/NAME.md:LINE``), ``code_cell``, ``execution_count``,
    ``line``, ``source``, ``error``), ``totals`` (chapters, ok, failed, run, reused, seconds summed over
    chapters, wall_seconds) and, for ``book``, ``book`` (the build's, browser check's and ledger's exit codes
    and seconds)."""
    import datetime as _dt

    chapters = [chapter_entry(r, root) for r in sorted(reports, key=lambda r: r["name"])]
    totals = {
        "chapters": len(chapters),
        "ok": sum(c["status"] == "ok" for c in chapters),
        "failed": sum(c["status"] == "failed" for c in chapters),
        "run": sum(c["action"] == "run" for c in chapters),
        "reused": sum(c["action"] == "reused" for c in chapters),
        "seconds": round(sum(c["seconds"] or 0.0 for c in chapters), 2),
        "wall_seconds": round(wall_seconds, 2),
    }
    out = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "command": command,
        "profile": profile,
        "changed": changed,
        "finished": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "ok": exit_code == 0,
        "exit_code": exit_code,
        "chapters": chapters,
        "totals": totals,
    }
    if extra:
        out.update(extra)
    return out


def write_report(path: Path, report: dict[str, Any]) -> Path:
    """Write the report atomically as strict JSON (a NaN or infinity is refused, never written)."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(report, indent=1, allow_nan=False) + "\n")
