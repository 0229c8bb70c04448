"""The book's sources for an installed (non-editable) dputils: where a book folder is, and how one is made.

In a checkout the repository is the book folder. A wheel (``pip install .``) has no checkout beside it: it ships
the notebooks, profiles, book pages and committed data as ``dputils/_book/`` (see ``setup.py``), and the runner
copies them into a *book folder* the first time it needs one:

1. ``--root PATH`` when given (made from the shipped sources if it does not hold a book yet);
2. the book folder or checkout around the working directory;
3. the checkout that holds the imported ``dputils`` (an editable install);
4. ``$DPBOOK_HOME``, else ``~/dpbook``.

A book folder made this way carries ``.dpbook-sources.json`` (the dputils version that wrote it). When another
version of dputils uses it, the sources (notebooks, profiles, book pages) are refreshed from that version, and
executed notebooks, results and builds are kept; with the same version nothing is overwritten, so parameters a
user edited in ``params/`` stay.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from .._version import __version__

__all__ = ["MARKER", "packaged_sources", "is_book_folder", "default_home", "materialize"]

#: The file that marks a book folder made from the shipped sources.
MARKER = ".dpbook-sources.json"


def packaged_sources() -> Path | None:
    """The ``_book`` folder shipped inside the installed package, or None (a checkout has none)."""
    p = Path(__file__).resolve().parents[1] / "_book"
    return p if (p / "notebooks").is_dir() and (p / "params").is_dir() else None


def is_book_folder(p: Path) -> bool:
    """Whether ``p`` holds a book (notebooks/ and params/ folders)."""
    return (p / "notebooks").is_dir() and (p / "params").is_dir()


def default_home() -> Path:
    """``$DPBOOK_HOME``, else ``~/dpbook``; ValueError (one line naming DPBOOK_HOME or HOME) when neither can
    be resolved (``~`` in DPBOOK_HOME or no home directory: HOME unset and no password entry)."""
    env = os.environ.get("DPBOOK_HOME")
    try:
        return Path(env).expanduser() if env else Path.home() / "dpbook"
    except (RuntimeError, KeyError, OSError) as exc:  # Path.home(): "Could not determine home directory"
        name = "DPBOOK_HOME" if env else "HOME"
        raise ValueError(
            f"{name}: the home directory cannot be determined ({_reason(exc)}); set DPBOOK_HOME to a writable "
            "folder or pass --root PATH"
        ) from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def _named(dest: Path) -> str:
    """How the user chose ``dest``: ``DPBOOK_HOME`` (or ``HOME``) when it is the default home, else ``root``."""
    try:
        if dest == default_home().expanduser().resolve():
            return "DPBOOK_HOME" if os.environ.get("DPBOOK_HOME") else "HOME"
    except (ValueError, OSError, RuntimeError):
        pass
    return "root"


def _unusable(dest: Path, why: str) -> ValueError:
    name = _named(dest)
    return ValueError(
        f"{name}: {dest} {why}; choose a writable folder with --root PATH or set DPBOOK_HOME"
        if name == "root"
        else f"{name}: the book folder {dest} {why}; set DPBOOK_HOME to a writable folder or pass --root PATH"
    )


def materialize(dest: Path | str, *, quiet: bool = False) -> Path:
    """Make ``dest`` a book folder from the shipped sources (see the module docstring); returns it resolved.

    Refuses (ValueError) a non-empty folder that is neither a book folder nor made by us, so nothing of the
    user's is overwritten."""
    src = packaged_sources()
    try:
        dest = Path(dest).expanduser().resolve()
    except (RuntimeError, KeyError, OSError) as exc:
        raise ValueError(f"root: {str(dest)!r} cannot be resolved ({_reason(exc)}); pass --root PATH") from None
    if src is None:
        raise ValueError(
            "this dputils has no shipped book sources (it is not installed from a wheel): "
            "run from a dpbook checkout or pass --root PATH"
        )
    # a file, or a path under a file, cannot be a book folder: say so in one line, before touching anything
    for p in (dest, *dest.parents):
        if p.exists() and not p.is_dir():
            raise _unusable(dest, "is a file, not a folder" if p == dest else f"is under {p}, which is a file")
    marker = dest / MARKER
    written = None
    try:
        if marker.is_file():
            try:
                written = json.loads(marker.read_text()).get("version")
            except (OSError, ValueError, AttributeError):
                written = None
        elif dest.exists() and any(dest.iterdir()):
            if is_book_folder(dest):
                return dest  # a checkout or a folder the user laid out: theirs, used as it is
            raise ValueError(
                f"root: {dest} is neither empty nor a dpbook folder; choose another with --root PATH or set DPBOOK_HOME"
            )
        if written == __version__:
            return dest
        dest.mkdir(parents=True, exist_ok=True)
        for item in sorted(src.iterdir()):
            target = dest / item.name
            if item.is_dir():
                shutil.copytree(item, target, dirs_exist_ok=True)
            else:
                shutil.copy2(item, target)
        marker.write_text(json.dumps({"version": __version__, "copied_from": str(src)}, indent=1) + "\n")
    except shutil.Error as exc:  # copytree gathers the failures of every file
        first = exc.args[0][0] if exc.args and exc.args[0] and isinstance(exc.args[0], list) else exc
        raise _unusable(dest, f"cannot be written ({' '.join(str(first).split())[:200]})") from None
    except OSError as exc:  # read-only, permission denied, disk full, ...
        raise _unusable(dest, f"cannot be written ({_reason(exc)})") from None
    if not quiet:
        what = "refreshed" if written else "made"
        print(
            f"dpbook: no checkout here; {what} the book folder {dest} from the sources shipped with dputils "
            f"{__version__} (choose another with --root PATH or DPBOOK_HOME)",
            file=sys.stderr,
            flush=True,
        )
    return dest
