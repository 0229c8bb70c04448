"""Reproduction targets: checked in each notebook, saved with its results, gathered on one book page.

In a notebook::

    from dputils.book.scorecard import Targets
    tg = Targets("gauss_audit")
    tg.check("T1", "Gaussian auditor, ellipsoid, eps at sigma=2.6245", ours=6.83, paper=6.75, tol=0.3,
             source="paper, Fig. 1(a)", section="reproduction")
    tg.not_reproduced("T4", "eps=2 point of Fig. 1(a)", ours=1.64, paper=1.348, tol=0.2,
                      reason="the paper's sigma is unpublished; PLD-calibrated sigma used")
    tg.not_run("T9", "accuracy on CIFAR-10", reason="needs a GPU and CIFAR-10")
    ...
    results.save("gauss_audit", targets=tg, ...)

``check`` records the target and raises ``AssertionError`` when it fails, so a drifting implementation
fails the papermill run (and the book build, and CI) exactly like an ``assert``. A target known not to
reproduce is recorded with :meth:`Targets.not_reproduced` and the measured numbers: it is shown, never
hidden and never made to pass by a looser tolerance.

Each record: ``id, what, paper, ours, tolerance, status, source, section, reason`` with status one of
``pass | fail | not reproduced | not run``. ``source`` says where the reference number comes from: the
paper (table/figure), or a computed anchor of our own notes (labelled as such).

:func:`write_page` turns every ``results/*.json`` into the book's "Reproduction scorecard" page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .results import read, repo_root
from .tables import fmt_value, num, show_targets

STATUSES = ("pass", "fail", "not reproduced", "not run")


def _num(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


def within(ours: Any, paper: Any, tol: float, mode: str = "abs") -> bool:
    """Whether ``ours`` meets ``paper`` under ``mode``.

    Modes: ``abs`` (|ours - paper| <= tol), ``rel`` (|ours/paper - 1| <= tol), ``le`` (ours <= paper + tol),
    ``ge`` (ours >= paper - tol). Sequences are compared element-wise (all must hold).
    """
    if isinstance(ours, (list, tuple)) or isinstance(paper, (list, tuple)):
        o = list(ours) if isinstance(ours, (list, tuple)) else [ours] * len(paper)
        p = list(paper) if isinstance(paper, (list, tuple)) else [paper] * len(o)
        if len(o) != len(p):
            raise ValueError(f"ours has {len(o)} values, paper {len(p)}")
        return all(within(a, b, tol, mode) for a, b in zip(o, p))
    o, p = float(ours), float(paper)
    if math.isnan(o) or math.isnan(p):
        return False
    if mode == "abs":
        return abs(o - p) <= tol
    if mode == "rel":
        return abs(o - p) <= tol * abs(p)
    if mode == "le":
        return o <= p + tol
    if mode == "ge":
        return o >= p - tol
    raise ValueError(f"mode must be abs, rel, le or ge, got {mode!r}")


def _tol_text(tol: Any, mode: str, paper: Any = 1.0) -> str:
    """The tolerance as the table shows it; a one-sided target against 0 reads as a bound (``≤ 0.002``), and a
    zero tolerance as ``≤ paper``, so that no "paper = 0" appears for a pure bound."""
    if tol is None:
        return ""
    one_sided_at_zero = mode in ("le", "ge") and not isinstance(paper, (list, tuple)) and paper == 0
    if one_sided_at_zero:
        return f"\u2264 {_tol_num(tol)}" if mode == "le" else f"\u2265 {_tol_num(-tol)}"
    if mode in ("le", "ge") and tol == 0:
        return "\u2264 paper" if mode == "le" else "\u2265 paper"
    # a relative tolerance below 0.01% reads as a power of ten ("±10⁻¹⁰ relative"), not as "±1e-08%"
    rel = f"\u00b1{_tol_num(100 * tol)}%" if tol >= 1e-4 else f"\u00b1{_tol_num(tol)} relative"
    return {
        "abs": f"\u00b1{_tol_num(tol)}",
        "rel": rel,
        "le": f"\u2264 paper + {_tol_num(tol)}",
        "ge": f"\u2265 paper \u2212 {_tol_num(tol)}",
    }.get(mode, str(tol))


def _tol_num(x: float) -> str:
    """A tolerance in the book's style: plain from 10⁻³ up (``0.002``, ``15``), as a power of ten below
    (``5×10⁻¹¹``, not ``5e-11``); zero as ``0`` (never ``-0``)."""
    x = float(x)
    if x == 0:
        return "0"
    return f"{x:g}" if abs(x) >= 1e-3 else num(x, 3)


class Targets:
    """The reproduction targets of one notebook (see the module docstring)."""

    def __init__(self, chapter: str, spec: dict[str, dict[str, Any]] | Path | str | None = None):
        self.chapter = chapter
        self.records: list[dict[str, Any]] = []
        if spec is None:
            path = target_spec_path(chapter)
            spec = read_target_spec(path) if path.is_file() else {}
        elif not isinstance(spec, dict):
            spec = read_target_spec(Path(spec))
        self.spec: dict[str, dict[str, Any]] = spec

    def record(
        self,
        id: str,
        ours: Any = None,
        /,
        *,
        fmt: dict[str, Any] | None = None,
        ran: bool = True,
        not_run_reason: str | None = None,
        ok: bool | None = None,
        **fields: Any,
    ) -> bool:
        """Record target ``id`` from its entry in the chapter's target table (:func:`read_target_spec`).

        The table gives ``kind`` (``check``, ``check_true``, ``not_reproduced`` or ``not_run``) and the texts and
        references (``what``, ``source``, ``section``, ``paper``, ``tol``, ``mode``, ``reason``, ``note``); the
        notebook passes what it computed: ``ours``, and ``condition=`` for a qualitative target, or a ``paper=``
        computed in the run (an exact value). Keyword ``fields`` override the table (``kind=`` too: the table's
        fields that kind does not take are then dropped); ``{name}`` fields in the table's texts are filled from
        ``fmt``. Dispatches to :meth:`check`, :meth:`check_true`, :meth:`not_reproduced` or :meth:`not_run`, so a
        failing ``check`` raises ``AssertionError`` as there.

        * ``ran=False``: the run did not compute it (a smaller profile, an option off): recorded as not run with the
          table's texts and ``not_run_reason``, by default the table's ``not_run`` text (``{name}`` fields filled from
          ``fmt`` too). The table's ``not_run`` is used for nothing else.
        * A ``not_reproduced`` entry, or any entry given ``ok=``, is an outcome: it passes (as a check, or a
          qualitative check when ``tol`` is null) when ``ok`` holds (by default: ``ours`` within ``tol`` of
          ``paper``), and is recorded as not reproduced with the table's ``reason`` otherwise. The ledger
          (``params/targets_ledger.yml``) says which status is expected, so neither branch can change silently.

        Returns ``True`` when the target passed."""
        spec = dict(self.spec.get(id, {}))
        not_run_text = spec.pop("not_run", None)
        if not ran:
            not_run_reason = not_run_reason or not_run_text
            if not not_run_reason:
                raise ValueError(f"{self.chapter} target {id}: ran=False needs not_run_reason (or a not_run text)")
            keep = ("what", "paper", "source", "section", "origin")
            fields = {**{k: v for k, v in fields.items() if k in keep}, "kind": "not_run", "reason": not_run_reason}
            ours, ok = None, None
        new_kind = fields.get("kind")
        if new_kind is not None and new_kind in _KINDS and new_kind != spec.get("kind", "check"):
            takes = set(_KINDS[new_kind]) | _OPTIONAL[new_kind]
            spec = {k: v for k, v in spec.items() if k in takes}
        entry = {**spec, **fields}
        kind = entry.pop("kind", "check")
        if kind not in _KINDS:
            raise ValueError(f"{self.chapter} target {id}: kind {kind!r} is not one of {', '.join(_KINDS)}")
        if fmt:
            entry = {k: v.format(**fmt) if isinstance(v, str) else v for k, v in entry.items()}
        if ours is not None:
            entry["ours"] = ours
        outcome = kind == "not_reproduced" or ok is not None
        if outcome:
            kind = "not_reproduced"
            entry.setdefault("paper", None)
            entry.setdefault("tol", None)
            entry.setdefault("reason", "")
        need = _KINDS[kind]
        missing = [k for k in need if k not in entry]
        if missing:
            raise ValueError(
                f"{self.chapter} target {id} ({kind}): missing {', '.join(missing)} "
                f"(give them in {target_spec_path(self.chapter).name} or as arguments)"
            )
        if "tol" in entry:
            entry["tol"] = None if entry["tol"] is None else float(entry["tol"])
        allowed = set(need) | _OPTIONAL[kind] | ({"note"} if outcome else set())
        extra = sorted(set(entry) - allowed)
        if extra:
            raise ValueError(f"{self.chapter} target {id} ({kind}): unexpected field(s) {', '.join(extra)}")
        what = entry.pop("what")
        if outcome:
            return self._outcome(id, what, ok, **entry)
        if kind == "check":
            return self.check(id, what, entry.pop("ours"), entry.pop("paper"), entry.pop("tol"), **entry)
        if kind == "check_true":
            return self.check_true(id, what, entry.pop("condition"), **entry)
        self.not_run(id, what, **entry)
        return False

    def _outcome(
        self,
        id: str,
        what: str,
        ok: bool | None,
        *,
        ours: Any,
        paper: Any,
        tol: float | None,
        reason: str,
        mode: str = "abs",
        note: str = "",
        **place: Any,
    ) -> bool:
        """A pass when ``ok`` holds (default: ``ours`` within ``tol`` of ``paper``), else not reproduced."""
        if ok is None:
            if tol is None:
                raise ValueError(f"{self.chapter} target {id}: an outcome without tol needs ok=")
            ok = within(ours, paper, tol, mode)
        if not ok:
            self.not_reproduced(id, what, ours, paper, tol, reason=reason, mode=mode, **place)
            return False
        if tol is None:
            return self.check_true(id, what, True, ours=ours, note=note, **place)
        return self.check(id, what, ours, paper, tol, mode=mode, note=note, **place)

    def _add(self, **rec: Any) -> dict[str, Any]:
        if any(r["id"] == rec["id"] for r in self.records):
            raise ValueError(f"target id {rec['id']!r} recorded twice in {self.chapter}")
        rec = {k: _num(v) for k, v in rec.items()}
        self.records.append(rec)
        return rec

    def check(
        self,
        id: str,
        what: str,
        ours: Any,
        paper: Any,
        tol: float,
        *,
        mode: str = "abs",
        source: str = "paper",
        section: str = "",
        note: str = "",
        origin: str | None = None,
    ) -> bool:
        """Record a target and raise ``AssertionError`` if ``ours`` misses ``paper`` (see :func:`within`)."""
        ok = within(ours, paper, tol, mode)
        bound_only = mode in ("le", "ge") and not isinstance(paper, (list, tuple)) and paper == 0
        self._add(
            id=id,
            what=what,
            paper=None if bound_only else paper,
            ours=ours,
            tolerance=_tol_text(tol, mode, paper),
            status="pass" if ok else "fail",
            source=source,
            origin=_origin(origin, id),
            section=section,
            reason=note,
        )
        if not ok:
            raise AssertionError(
                f"{self.chapter} target {id} ({what}) failed: ours {ours!r} vs {source} {paper!r}, "
                f"tolerance {_tol_text(tol, mode)}"
            )
        return True

    def check_true(
        self,
        id: str,
        what: str,
        condition: bool,
        *,
        ours: Any = None,
        paper: Any = None,
        source: str = "paper",
        section: str = "",
        note: str = "",
        origin: str | None = None,
    ) -> bool:
        """Record a qualitative target (an ordering, a shape) and raise ``AssertionError`` if it fails."""
        ok = bool(condition)
        self._add(
            id=id,
            what=what,
            paper=paper,
            ours=ours,
            tolerance="",
            status="pass" if ok else "fail",
            source=source,
            origin=_origin(origin, id),
            section=section,
            reason=note,
        )
        if not ok:
            raise AssertionError(f"{self.chapter} target {id} ({what}) failed: ours {ours!r}, {source} {paper!r}")
        return True

    def not_reproduced(
        self,
        id: str,
        what: str,
        ours: Any,
        paper: Any,
        tol: float | None,
        *,
        reason: str,
        mode: str = "abs",
        source: str = "paper",
        section: str = "",
        origin: str | None = None,
    ) -> None:
        """Record a target that does not reproduce, with the measured numbers and the reason.

        If the numbers do meet the tolerance after all, this raises: the record would be wrong.
        """
        if tol is not None and within(ours, paper, tol, mode):
            raise AssertionError(
                f"{self.chapter} target {id} reproduces now (ours {ours!r} vs {paper!r}): record it with check()"
            )
        self._add(
            id=id,
            what=what,
            paper=paper,
            ours=ours,
            tolerance=_tol_text(tol, mode, paper),
            status="not reproduced",
            source=source,
            origin=_origin(origin, id),
            section=section,
            reason=reason,
        )

    def not_run(
        self,
        id: str,
        what: str,
        *,
        reason: str,
        paper: Any = None,
        source: str = "paper",
        section: str = "",
        origin: str | None = None,
    ) -> None:
        """Record a target that cannot run here (GPU, data, profile) and why."""
        self._add(
            id=id,
            what=what,
            paper=paper,
            ours=None,
            tolerance="",
            status="not run",
            source=source,
            origin=_origin(origin, id),
            section=section,
            reason=reason,
        )

    def to_dict(self) -> list[dict[str, Any]]:
        return list(self.records)

    def summary(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for r in self.records:
            out[r["status"]] += 1
        return out

    def table(self):
        """The targets as a :class:`dputils.book.tables.Table` (displayed in a notebook) that fits the page's column
        (:func:`dputils.book.tables.show_targets`: id, what with the reason of a target that did not pass, paper,
        ours, status; sources and tolerances are on the scorecard), in id order."""

        return show_targets(_by_id(self.records))


_KINDS: dict[str, tuple[str, ...]] = {
    "check": ("what", "ours", "paper", "tol"),
    "check_true": ("what", "condition"),
    "not_reproduced": ("what", "ours", "paper", "tol", "reason"),
    "not_run": ("what", "reason"),
}
_OPTIONAL: dict[str, set[str]] = {
    "check": {"mode", "source", "section", "note", "origin"},
    "check_true": {"ours", "paper", "source", "section", "note", "origin"},
    "not_reproduced": {"mode", "source", "section", "origin"},  # and "note", for the pass of an outcome
    "not_run": {"paper", "source", "section", "origin"},
}

#: where a target's reference number comes from (issue 37 item 3): ``paper`` = printed in the paper (``source``
#: names the place: table, figure, equation, page); ``repo`` = from the authors' code or repository; ``ours`` = our
#: own computation (a closed form evaluated, mpmath, another algorithm, our simulation, a number read off a plot is
#: ``paper`` only if the plot is the paper's)
ORIGINS = ("paper", "repo", "ours")


def _origin(origin: str | None, id: str) -> str | None:
    if origin is not None and origin not in ORIGINS:
        raise ValueError(f"target {id}: origin {origin!r} is not one of {', '.join(ORIGINS)}")
    return origin


def target_spec_path(chapter: str, root: Path | None = None) -> Path:
    """Where a chapter's target table lives: ``params/targets/<chapter>.yml`` under the book's root (``root``, else
    the checkout or book folder around the working directory, else the checkout this package was imported from:
    a notebook executed in a temporary folder, as the smoke tests do, still finds its table)."""

    name = Path("params") / "targets" / f"{chapter}.yml"
    if root is not None:
        return root / name
    here = repo_root() / name
    package_checkout = Path(__file__).resolve().parents[2] / name
    return here if here.is_file() or not package_checkout.is_file() else package_checkout


def read_target_spec(path: Path) -> dict[str, dict[str, Any]]:
    """A chapter's target table: a YAML mapping ``id -> {kind, what, source, section, paper, tol, mode, reason,
    note, not_run}`` (see :meth:`Targets.record`). Raises ``ValueError`` naming the file for anything else."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{path}: expected a mapping of target id -> fields")
    for tid, entry in data.items():
        kind = entry.get("kind", "check")
        if kind not in _KINDS:
            raise ValueError(f"{path}: target {tid}: kind {kind!r} is not one of {', '.join(_KINDS)}")
        extra = sorted(set(entry) - {"kind", "not_run"} - set(_KINDS[kind]) - _OPTIONAL[kind])
        if extra:
            raise ValueError(f"{path}: target {tid} ({kind}): unexpected field(s) {', '.join(extra)}")
        if entry.get("origin") is not None and entry["origin"] not in ORIGINS:
            raise ValueError(f"{path}: target {tid}: origin {entry['origin']!r} is not one of {', '.join(ORIGINS)}")
    return {str(k): dict(v) for k, v in data.items()}


def _id_key(tid: Any) -> list:
    """Natural order of target ids: T2 before T10, T5a before T5b."""
    import re

    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(tid)) if t]


def _by_id(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: _id_key(r.get("id")))


def load_targets(results_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """``{chapter: [target records]}`` from every ``*.json`` in ``results_dir`` that has ``targets`` (read by
    :func:`dputils.book.results.read`: a saved infinite bound comes back as ``inf`` and shows as ∞, not as a null's
    "no value")."""
    out: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(Path(results_dir).glob("*.json")):
        try:
            data = read(p)
        except (OSError, ValueError):  # json.JSONDecodeError is a ValueError
            continue
        t = data.get("targets") if isinstance(data, dict) else None
        if isinstance(t, list):
            out[p.stem] = [r for r in t if isinstance(r, dict) and r.get("status") in STATUSES]
    return out


def _md_cell(v: Any) -> str:
    import re

    s = fmt_value(v)
    # an exponent's sign as a minus (U+2212): a browser breaks a line after a hyphen ("1.5e-|03"), never there
    s = re.sub(r"(?<=\d[eE])-(?=\d)", "\u2212", s)
    # a hyphen before a digit or a sign, not after a word ("Figure 2a-2b", "1-3"): non-breaking (U+2011); a line
    # may still break after a word's hyphen ("conditional-composition"), as the browser check allows
    s = re.sub(r"(?<![^\W\d_]{2})(?<=\S)-(?=[^\s])(?![^\W\d_])", "\u2011", s)
    return s.replace("|", "\\|").replace("\n", " ")


#: how the page names each origin (:data:`ORIGINS`), and the targets whose table entry has none
ORIGIN_LABELS = {
    "paper": "printed in a paper",
    "repo": "from the authors' code",
    "ours": "our own computation",
    None: "origin not recorded",
}
#: the short label in front of a target's source on the page
_ORIGIN_TAGS = {"paper": "paper", "repo": "authors' code", "ours": "ours"}


def origin_totals(targets: dict[str, list[dict[str, Any]]]) -> dict[str | None, dict[str, int]]:
    """``{origin: {status: count}}`` over all chapters, for the origins present (``paper``, ``repo``, ``ours``, in
    that order, then ``None`` for records without an origin); each inner dict has every status of
    :data:`STATUSES`."""
    out: dict[str | None, dict[str, int]] = {}
    for o in (*ORIGINS, None):
        recs = [r for rs in targets.values() for r in rs if r.get("origin") == o]
        if recs:
            out[o] = {s: sum(r["status"] == s for r in recs) for s in STATUSES}
    return out


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "none"


def origins_sentence(targets: dict[str, list[dict[str, Any]]]) -> str:
    """The totals by where the reference number comes from, as one sentence of the page (and of the landing page,
    which includes it): "Against numbers printed in a paper: 40 (38 pass, 2 not reproduced); ..."."""
    parts = []
    for o, counts in origin_totals(targets).items():
        parts.append(f"{ORIGIN_LABELS[o]}: {sum(counts.values())} ({_counts_text(counts)})")
    return ("By where the reference number comes from: " + "; ".join(parts) + ".") if parts else ""


def with_origins(
    targets: dict[str, list[dict[str, Any]]], spec_dir: Path | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The records with the ``origin`` of their chapter's target table (``params/targets/<chapter>.yml``) where the
    record has none (a results file written before the field existed); a record's own origin is kept."""
    out = {}
    for chapter, recs in targets.items():
        path = Path(spec_dir) / f"{chapter}.yml" if spec_dir is not None else target_spec_path(chapter)
        try:
            spec = read_target_spec(path) if path.is_file() else {}
        except ValueError:
            spec = {}
        out[chapter] = [{**r, "origin": r.get("origin") or spec.get(str(r.get("id")), {}).get("origin")} for r in recs]
    return out


def unlabelled_targets(spec_dir: Path | str | None = None) -> dict[str, list[str]]:
    """``{chapter: [target ids]}`` of the entries without an ``origin`` in every ``*.yml`` target table of
    ``spec_dir`` (default: the book's ``params/targets``, :func:`target_spec_path`), chapters and ids in the files'
    order; chapters with none are left out (``{}``: every target says where its reference comes from). A malformed
    table raises ``ValueError`` naming the file (:func:`read_target_spec`)."""
    if spec_dir is None:
        spec_dir = target_spec_path("any").parent
    out: dict[str, list[str]] = {}
    for path in sorted(Path(spec_dir).glob("*.yml")):
        missing = [tid for tid, entry in read_target_spec(path).items() if entry.get("origin") is None]
        if missing:
            out[path.stem] = missing
    return out


def page_markdown(targets: dict[str, list[dict[str, Any]]], titles: dict[str, str] | None = None) -> str:
    """The scorecard page (MyST markdown): totals, over all chapters and by where the reference number comes from
    (``origin``: printed in a paper, the authors' code, our own computation; :func:`origin_totals`), per chapter
    and per origin; then one table per chapter (target, what and where the reference comes from, the reference
    number with its tolerance, ours, status), with the reasons of the rows that are not plain passes as numbered
    notes below, so that each table fits the column (issue 34)."""
    titles = titles or {}

    def link(chapter: str, short: bool = False) -> str:
        if chapter not in titles:
            return f"{{doc}}`methods/{chapter}`"
        title = titles[chapter].split(":")[0] if short else titles[chapter]  # short: before a subtitle
        return f"{{doc}}`{title} <methods/{chapter}>`"

    lines = [
        "# Reproduction scorecard",
        "",
        "Every reproduction target that the chapters check, gathered from their last successful run "
        "(`results/NAME.json`, written by `python -m dputils run`). A target that fails stops its chapter's run, "
        "so a built book shows no *fail*; *not reproduced* rows give the measured numbers and the reason; "
        "*not run* rows need what this machine does not have (a GPU, a data set) or a larger profile. "
        "The reference number of a target is printed in a paper (its table, figure, equation or text), comes "
        "from the authors' code, or is a computation of our own (a closed form, another algorithm, a "
        "simulation); the totals count the three apart, and under each target, in italics, is which one and "
        "where it comes from.",
        "",
    ]
    lines.append("**Totals:** " + ", ".join(f"{n} {s}" for s, n in totals(targets).items()) + ".")
    by_origin = origins_sentence(targets)
    if by_origin:
        lines.append(by_origin)
    lines.append("")
    if not targets:
        lines.append("No chapter has recorded targets yet: run `python -m dputils run`.")
        lines.append("")
        return "\n".join(lines)
    lines += [
        "```{table} Targets per chapter",
        ":class: dp-scorecard-summary",
        "",
        "| chapter | " + " | ".join(STATUSES) + " | total |",
        "|---" * (len(STATUSES) + 2) + "|",
    ]
    for chapter, recs in targets.items():
        counts = [sum(r["status"] == s for r in recs) for s in STATUSES]
        lines.append(f"| {link(chapter)} | " + " | ".join(map(str, counts)) + f" | {len(recs)} |")
    lines += ["```", ""]
    lines += [
        "```{table} Targets by where the reference number comes from",
        ":class: dp-scorecard-summary",
        "",
        "| reference number | " + " | ".join(STATUSES) + " | total |",
        "|---" * (len(STATUSES) + 2) + "|",
    ]
    for o, counts in origin_totals(targets).items():
        lines.append(
            f"| {ORIGIN_LABELS[o]} | " + " | ".join(str(counts[s]) for s in STATUSES) + f" | {sum(counts.values())} |"
        )
    lines += ["```", ""]
    notes: list[str] = []
    for chapter, recs in targets.items():
        # one table per chapter under its own heading: the chapter is named once, not on every row
        title = titles.get(chapter, chapter).split(":")[0]
        per_origin = "; ".join(
            f"{sum(c.values())} {ORIGIN_LABELS[o]}" for o, c in origin_totals({chapter: recs}).items()
        )
        lines += [
            f"## {title}",
            "",
            f"{link(chapter)}: {len(recs)} targets ({per_origin}).",
            "",
            f"```{{table}} The targets of {title}, with the reference number and ours",
            ":class: dp-scorecard",
            ":widths: 10 42 20 18 10",
            "",
            "| target | what (where the reference comes from) | reference (tolerance) | ours | status |",
            "|---|---|---|---|---|",
        ]
        for r in _by_id(recs):
            status = r["status"]
            status_md = f"**{status}**" if status in ("fail", "not reproduced") else status
            if r.get("reason"):
                notes.append(f"{link(chapter, short=True)}, {_md_cell(r.get('id'))}: {_md_cell(r.get('reason'))}")
                status_md += f" [{len(notes)}]"
            what = _md_cell(r.get("what"))
            tag = _ORIGIN_TAGS.get(r.get("origin"))
            source = _md_cell(r.get("source")) if r.get("source") else ""
            # no second tag where the source already names its origin ("our notes' ...", "ours: ...")
            if tag and not source.lower().startswith(("our ", "ours") if tag == "ours" else tag.lower()):
                source = f"{tag}: {source}" if source else tag
            if source:
                what += f" *({source})*"
            ref = _md_cell(r.get("paper")) if r.get("paper") is not None or not r.get("tolerance") else ""
            tol = _md_cell(r.get("tolerance")) if r.get("tolerance") else ""
            ref = f"{ref} ({tol})" if ref and tol else ref or tol
            lines.append(
                "| " + " | ".join([_md_cell(r.get("id")), what, ref, _md_cell(r.get("ours")), status_md]) + " |"
            )
        lines += ["```", ""]
    if notes:
        lines += ["## Notes to the tables", ""]
        lines += [f"{k}. {n}" for k, n in enumerate(notes, 1)]
        lines.append("")
    return "\n".join(lines)


def write_page(
    results_dir: Path,
    out: Path,
    chapters: Iterable[str] | None = None,
    titles: dict[str, str] | None = None,
    spec_dir: Path | None = None,
) -> Path:
    """Write the scorecard page for the chapters (in that order; default: every results file). A record without
    an ``origin`` takes its chapter's target table's (``spec_dir``, default ``params/targets``; :func:`with_origins`)."""
    targets = with_origins(load_targets(results_dir), spec_dir)
    if chapters is not None:
        order = list(chapters)
        targets = {c: targets[c] for c in order if c in targets}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page_markdown(targets, titles))
    return out


# ------------------------------------------------------------------------------------------ the status ledger
#: The expected status of every target at the book's profile (``full``) on the reference data (Fashion-MNIST from
#: Debian's package), kept in the repository: ``{chapter: {target id: status}}``.
LEDGER_FILE = Path("params") / "targets_ledger.yml"

_LEDGER_HEADER = """\
# The expected status of every reproduction target at the book's profile (full), with Fashion-MNIST installed:
# {chapter: {target: pass | not reproduced | not run}}. `python -m dputils book --check` (CI) fails when a chapter's
# recorded targets differ from this file (a status changed, a target appeared or disappeared), so a passing target
# that drifts to "not reproduced" fails the build. A change that makes a target pass updates this file in the same
# commit: `python -m dputils book --update-ledger` rewrites it from the results of the run.
"""


def read_ledger(path: Path) -> dict[str, dict[str, str]]:
    """The ledger at ``path`` (``{}`` when there is none); a malformed one raises ValueError naming the file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping chapter -> {{target: status}}")
    out: dict[str, dict[str, str]] = {}
    for chapter, recs in data.items():
        if not isinstance(recs, dict):
            raise ValueError(f"{path}: chapter {chapter!r} must map target ids to statuses")
        for tid, status in recs.items():
            if status not in STATUSES or status == "fail":
                raise ValueError(
                    f"{path}: {chapter} {tid}: status must be pass, not reproduced or not run, got {status!r}"
                )
        out[str(chapter)] = {str(k): str(v) for k, v in recs.items()}
    return out


def ledger_of(targets: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """``{chapter: {id: status}}`` of recorded targets, ids in their natural order (T2 before T10)."""
    return {c: {str(r["id"]): r["status"] for r in _by_id(recs)} for c, recs in targets.items()}


def write_ledger(path: Path, targets: dict[str, list[dict[str, Any]]]) -> Path:
    """Write the ledger of ``targets`` to ``path`` (chapters in the given order)."""
    import yaml

    path = Path(path)
    body = yaml.safe_dump(ledger_of(targets), sort_keys=False, allow_unicode=True, width=120)
    path.write_text(_LEDGER_HEADER + body)
    return path


def ledger_differences(
    targets: dict[str, list[dict[str, Any]]], ledger: dict[str, dict[str, str]], chapters: Iterable[str] | None = None
) -> list[str]:
    """Every way the recorded ``targets`` differ from ``ledger``, one line each, for ``chapters`` (default: every
    chapter in either). A chapter with no recorded results is reported as missing."""
    names = list(chapters) if chapters is not None else list(dict.fromkeys([*ledger, *targets]))
    got = ledger_of(targets)
    out: list[str] = []
    for c in names:
        want, have = ledger.get(c, {}), got.get(c)
        if have is None:
            if want:
                out.append(
                    f"{c}: no recorded targets (results/{c}.json missing or without targets), "
                    f"the ledger expects {len(want)}"
                )
            continue
        for tid, status in have.items():
            if tid not in want:
                out.append(f"{c} {tid}: new target ({status}), not in the ledger")
            elif want[tid] != status:
                out.append(f"{c} {tid}: {status}, the ledger expects {want[tid]}")
        for tid, status in want.items():
            if tid not in have:
                out.append(f"{c} {tid}: in the ledger ({status}) but not recorded by the run")
    return out


def totals(targets: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """How many targets have each status, over all chapters."""
    out = {s: 0 for s in STATUSES}
    for recs in targets.values():
        for r in recs:
            out[r["status"]] += 1
    return out
