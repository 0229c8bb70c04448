"""Building the book's HTML (jupyter-book) and comparing the targets with the ledger.

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .. import scorecard
from ..scorecard import write_page
from .common import _rel, _say
from .execute import add_download_cell
from .locate import _ANSI
from .params import find_root, notebook_paths

#: jupyter-book's banner around a build: its version, folders, rules and where to open the result (the runner
#: says where the book is in one line of its own)
_BOOK_BANNER = re.compile(
    r"^(Running Jupyter-Book v|Source Folder:|Config Path:|Output Path:|=+$|Finished generating "
    r"HTML for book\.|Your book's HTML pages are here:|_build/html/?$|You can look at your book "
    r"by opening|Or paste this line directly|file://|\S*_build/html/index\.html$)"
)


def book_log_line(line: str) -> str | None:
    """A line of jupyter-book's output as the runner's log shows it: colour codes removed, the banner and blank
    lines dropped (None); warnings, errors and tracebacks are kept as they are."""
    text = _ANSI.sub("", line).rstrip()
    if not text.strip() or _BOOK_BANNER.match(text.strip()):
        return None
    return text


def profile_site(root: Path, profile: str, methods_dir: Path) -> Path:
    """The source folder of the book of a profile other than the book's: ``_build/<profile>/site/``, made afresh
    from links to the root's ``_config.yml``, ``_toc.yml``, ``_static/`` and ``book/`` pages, with copies of the
    profile's executed notebooks (``methods_dir``) in ``book/methods/`` (their download section pointing from
    there). The book's own ``book/methods/`` and ``results/`` are not touched."""
    import nbformat

    site = root / "_build" / profile / "site"
    if site.is_symlink() or site.is_file():
        site.unlink()
    elif site.exists():
        shutil.rmtree(site)
    (site / "book" / "methods").mkdir(parents=True)
    for name in ("_config.yml", "_toc.yml", "_static"):
        if (root / name).exists():
            os.symlink(root / name, site / name)
    for entry in sorted((root / "book").iterdir()):
        if entry.name not in ("methods", "scorecard.md", "_build") and not entry.name.startswith("."):
            os.symlink(entry, site / "book" / entry.name)
    for f in sorted(Path(methods_dir).glob("*.ipynb")):
        nb = nbformat.read(f, as_version=4)
        add_download_cell(nb, f.name, root / "notebooks" / f"{f.stem}.md", site / "book" / "methods")
        nbformat.write(nb, site / "book" / "methods" / f.name)
    return site


def build_book(root: Path | None = None, site: Path | None = None, results_dir: Path | None = None) -> int:
    """``jupyter-book build . -W --all`` in the repository root (or in ``site``, a profile's book:
    :func:`profile_site`), the scorecard written from ``results_dir`` (default ``results/``); returns its exit
    status."""
    root = root or find_root()
    src = site or root

    toc = (root / "_toc.yml").read_text() if (root / "_toc.yml").is_file() else ""
    chapters = re.findall(r"book/methods/([A-Za-z0-9_]+)", toc) or [p.stem for p in notebook_paths(root)]
    titles = {}
    for c in chapters:  # each chapter's H1, for the scorecard's links (short form: before a subtitle)
        nb_src = root / "notebooks" / f"{c}.md"
        heads = re.findall(r"^# (.+)$", nb_src.read_text(), flags=re.M) if nb_src.is_file() else []
        if heads:
            titles[c] = heads[0].strip()
    page = write_page(results_dir or root / "results", src / "book" / "scorecard.md", chapters, titles)
    _say(f"scorecard: {_rel(page, root)}")
    exe = Path(sys.executable).with_name("jupyter-book")
    # -q: no Sphinx status lines (warnings still print, and -W makes them errors); --keep-going: every warning of
    # the build at once; NO_COLOR: plain text in logs
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", ".", "-W", "--keep-going", "-q", "--all"]
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    env["NO_COLOR"] = "1"
    _say("$ " + " ".join(cmd) + (f"  (in {_rel(src, root)})" if site else ""))
    with subprocess.Popen(
        cmd, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            kept = book_log_line(line)
            if kept is not None:
                _say(kept)
        rc = proc.wait()
    if rc == 0:
        _say(f"book: {src / '_build' / 'html' / 'index.html'}")
    return rc


def check_ledger(
    root: Path, chapters: list[str], *, update: bool = False, strict: bool = False, results_dir: Path | None = None
) -> int:
    """Compare the chapters' recorded targets with ``params/targets_ledger.yml`` (:mod:`dputils.book.scorecard`).

    Prints the totals and every difference; returns 1 when ``strict`` and they differ, else 0. With ``update``
    the ledger's entries for these chapters are rewritten from the run (others kept)."""

    path = root / scorecard.LEDGER_FILE
    targets = scorecard.load_targets(results_dir or root / "results")
    ran = {c: targets[c] for c in chapters if c in targets}
    _say("targets: " + ", ".join(f"{n} {s}" for s, n in scorecard.totals(ran).items()))
    ledger = scorecard.read_ledger(path)
    if update:
        keep = {c: [{"id": i, "status": st} for i, st in recs.items()] for c, recs in ledger.items()}
        merged = {**keep, **ran}
        order = [c for c in chapters if c in merged] + [c for c in merged if c not in chapters]
        scorecard.write_ledger(path, {c: merged[c] for c in order})
        _say(f"ledger updated: {path}")
        return 0
    diffs = scorecard.ledger_differences(ran, ledger, chapters)
    if not diffs:
        _say(f"ledger: every target's status as in {path.relative_to(root)}")
        return 0
    _say(
        f"ledger: {len(diffs)} target(s) differ from {path.relative_to(root)}"
        + (" (not enforced: only `book --check` at the full profile fails on it)" if not strict else "")
    )
    for d in diffs:
        _say(f"  {d}")
    if strict:
        _say(
            "a target that now passes: rerun with --update-ledger and commit the ledger with the change; "
            "one that stopped passing is a regression"
        )
    return 1 if strict else 0
