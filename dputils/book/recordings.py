"""Provenance of results recorded on another machine (a GPU run that the book shows but does not rerun).

A recording carries a ``_provenance`` block: ``commit`` (the commit whose code made it, or that added it when the
run's own commit was not kept; ``commit_note`` says which), ``code_files`` (the repository paths whose content the
results depend on), ``code_hash`` (:func:`code_hash` of those files at that commit), ``machine`` and ``seconds``
(the run's wall time). :func:`provenance_status` compares the recorded hash with the hash of the same files in the
working tree, so a chapter can record a target that passes only while the recording matches the code; a code change
then flips that target and ``python -m dputils book --check`` (the status ledger) reports it.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["code_hash", "provenance_status", "changed_since", "PROVENANCE_KEYS"]

PROVENANCE_KEYS = ("commit", "code_files", "code_hash", "machine", "seconds")


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def code_hash(paths: Iterable[str], *, root: Path | str | None = None, commit: str | None = None) -> str:
    """SHA-256 over the sorted ``paths`` and their contents (each as ``path NUL length NUL bytes``), read from the
    working tree under ``root`` (default: the repository holding dputils) or, with ``commit``, from git at that
    commit. A missing file raises FileNotFoundError naming it."""
    root = Path(root) if root is not None else _repo_root()
    h = hashlib.sha256()
    for p in sorted(set(paths)):
        if commit is None:
            f = root / p
            if not f.is_file():
                raise FileNotFoundError(f"code file {p} of the recording is missing under {root}")
            data = f.read_bytes()
        else:
            res = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{p}"], capture_output=True, check=False)
            if res.returncode != 0:
                raise FileNotFoundError(f"code file {p} is not in commit {commit}")
            data = res.stdout
        h.update(p.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def provenance_status(provenance: dict[str, Any], *, root: Path | str | None = None) -> dict[str, Any]:
    """``{"recorded", "current", "matches", "missing"}``: the recording's code hash, the hash of the same files
    now (None when one is missing, listed in ``missing``) and whether they agree. A block without every key of
    :data:`PROVENANCE_KEYS` raises ValueError naming the missing keys."""
    lacking = [k for k in PROVENANCE_KEYS if k not in provenance]
    if lacking:
        raise ValueError(f"recording provenance lacks {', '.join(lacking)}")
    root = Path(root) if root is not None else _repo_root()
    missing = [p for p in provenance["code_files"] if not (root / p).is_file()]
    current = None if missing else code_hash(provenance["code_files"], root=root)
    return {
        "recorded": provenance["code_hash"],
        "current": current,
        "matches": current == provenance["code_hash"],
        "missing": missing,
    }


def changed_since(commit: str | None, paths: Iterable[str], *, root: Path | str | None = None) -> list[str] | None:
    """The files under ``paths`` (repository paths, files or folders) whose content in the working tree differs
    from ``commit`` (``git diff --name-only COMMIT -- PATHS``, untracked files not counted), sorted; None when
    that cannot be told (no commit recorded, no git, not a checkout, or a commit this clone does not have). A
    page that reads a recorded run uses it to say whether the code it measured has changed since."""
    if not commit or commit == "unknown":
        return None
    root = Path(root) if root is not None else _repo_root()
    try:
        res = subprocess.run(
            ["git", "-C", str(root), "diff", "--name-only", commit, "--", *paths],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    return sorted(line for line in res.stdout.splitlines() if line.strip())
