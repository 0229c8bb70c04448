"""Small helpers shared by the runner's modules: progress lines and paths relative to the book folder.

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import sys
from pathlib import Path

# --------------------------------------------------------------------------- running many


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _rel(p: Path | str, root: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)
