"""Publishing a chapter's run in one step: its executed copy, its results and its run record switch together.

A chapter's published files are symbolic links into one *generation* folder of its store,
``RESULTS/.gen/NAME/`` (hidden, beside the results, outside what the book builds):

* ``METHODS/NAME.ipynb`` -> ``.../.gen/NAME/current/NAME.ipynb``
* ``RESULTS/F.json`` -> ``.gen/NAME/current/results/F.json`` for each results file the run wrote
* ``METHODS/.NAME.inputs.json`` (the record of :mod:`dputils.book.changed`) -> ``.../.gen/NAME/current/inputs.json``

``current`` is itself a link to the generation ``g.PID.NS`` that holds the files. A publish (:func:`publish`)
moves the staged files into a new generation, writes the record there, then replaces ``current`` with one
``os.replace`` (a rename, atomic on POSIX): a reader that opens the notebook and then the results, at any moment,
including after a ``kill -9`` of the publisher at any step, sees both files of one run. The links themselves
change only when a file appears or disappears (the first publish, a new results file, a results file a run no
longer writes): a file new to the chapter is linked after the switch, the notebook last, so a first publish shows
the results, then the notebook, never an older notebook with newer results.

A published file that is a plain file (written before this scheme, by an interactive ``results.save``, or a
failure record written by :func:`dputils.book.changed.write_failure`) is first *adopted*: its content is copied
into the current generation and the plain file replaced by the link, which leaves what readers see unchanged.

Leftovers: a generation that never became current (its publisher was killed) is removed by the next publish of
the chapter or the next run in that folder (:func:`clean_leftovers`), as are the ``.NAME.PID.NS.new`` and
``.old`` files of the earlier two-rename publish and temporary links, once their process is gone. Publishers of
one chapter take turns through an exclusive ``flock`` on ``.gen/NAME/.lock``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

STORE = ".gen"
CURRENT = "current"
RECORD = "inputs.json"
_GEN = re.compile(r"^g\.(\d+)\.(\d+)(?:\.adopt)?$")
#: leftovers of the earlier publish (``.NAME.PID.NS.new``/``.old``), of a cross-device move (``.NAME.PID.tmp``) and
#: of a link being made here (``.NAME.PID.NS.link``)
_LEFTOVER = re.compile(r"^\..+\.(\d+)(?:\.\d+\.(?:new|old|link)|\.tmp)$")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def store_of(results_dir: Path, name: str) -> Path:
    """The folder of chapter ``name``'s generations."""
    return Path(results_dir) / STORE / name


def move_file(src: Path, dst: Path) -> None:
    """``os.replace`` ``src`` onto ``dst``; across file systems via a temporary copy beside ``dst``."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
        os.unlink(src)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock (also when the process dies)


def _link(target: str, dst: Path) -> None:
    """Make ``dst`` a symbolic link to ``target`` in one rename (replacing whatever ``dst`` was)."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.{time.time_ns()}.link")
    os.symlink(target, tmp)
    try:
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _rel(target: Path, link: Path) -> str:
    return os.path.relpath(target, link.parent)


def _current(store: Path) -> str | None:
    try:
        return os.readlink(store / CURRENT)
    except OSError:
        return None


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def clean_store(store: Path) -> list[Path]:
    """Remove the generations of ``store`` that are not current and whose process is gone (or is this one, outside
    a publish), and temporary links; returns what was removed."""
    removed = []
    cur = _current(store)
    if not store.is_dir():
        return removed
    for d in sorted(store.iterdir()):
        m = _GEN.match(d.name)
        if m and d.name != cur:
            pid = int(m.group(1))
            if pid == os.getpid() or not pid_alive(pid):
                _remove(d)
                removed.append(d)
        elif _LEFTOVER.match(d.name) and not pid_alive(int(_LEFTOVER.match(d.name).group(1))):
            _remove(d)
            removed.append(d)
    return removed


def clean_leftovers(*folders: Path) -> list[Path]:
    """Remove the leftovers of killed publishes in these methods/results folders (see the module docstring):
    hidden ``.new``/``.old``/``.tmp``/``.link`` files of processes that are gone, dangling links into a store, and
    stale generations of every chapter's store. Returns what was removed."""
    removed: list[Path] = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            continue
        for f in sorted(folder.iterdir()):
            m = _LEFTOVER.match(f.name)
            if m and not pid_alive(int(m.group(1))):
                _remove(f)
                removed.append(f)
            elif f.is_symlink() and not f.exists() and f"{STORE}/" in os.readlink(f):
                _remove(f)  # a results file the chapter's current run no longer has
                removed.append(f)
        stores = folder / STORE
        if stores.is_dir():
            for store in sorted(stores.iterdir()):
                if store.is_dir():
                    with _locked(store / ".lock"):
                        removed += clean_store(store)
    return removed


def _owns(dst: Path, target: str) -> bool:
    try:
        return os.readlink(dst) == target
    except OSError:
        return False


def _new_generation(store: Path, suffix: str = "") -> Path:
    gen = store / f"g.{os.getpid()}.{time.time_ns()}{suffix}"
    (gen / "results").mkdir(parents=True)
    return gen


def _switch(store: Path, gen: Path) -> None:
    _link(gen.name, store / CURRENT)


def publish(
    name: str,
    methods_dir: Path,
    results_dir: Path,
    notebook: Path,
    results: Sequence[Path],
    *,
    record: Callable[[Path, dict[str, Path]], None] | None = None,
    replace_results: bool = False,
) -> Path:
    """Publish the staged ``notebook`` and ``results`` of chapter ``name`` in one step (see the module docstring);
    returns the new generation folder.

    ``record(notebook_path, {file name: path})``, when given, writes the run record: it is called with the files
    already in the new generation and must write ``inputs.json`` beside the notebook there. ``replace_results``:
    the results folder belongs to this chapter alone (a sweep point), so plain results files the run did not write
    are removed with the publish. A failure before the switch (an ``OSError``) changes nothing readers see; the
    staged files that were moved are put back for inspection."""
    methods_dir, results_dir = Path(methods_dir), Path(results_dir)
    store = store_of(results_dir, name)
    methods_dir.mkdir(parents=True, exist_ok=True)
    store.mkdir(parents=True, exist_ok=True)
    with _locked(store / ".lock"):
        clean_store(store)
        gen = _new_generation(store)
        moved: list[tuple[Path, Path]] = []
        try:
            files: dict[str, Path] = {}
            for f in results:
                dst = gen / "results" / f.name
                move_file(f, dst)
                moved.append((f, dst))
                files[f.name] = dst
            nb = gen / f"{name}.ipynb"
            move_file(notebook, nb)
            moved.append((notebook, nb))
            if record is not None:
                record(nb, files)
            cur_dir = store / CURRENT
            links: list[tuple[Path, Path]] = [(results_dir / f, cur_dir / "results" / f) for f in sorted(files)]
            if record is not None:
                links.append((methods_dir / f".{name}.{RECORD}", cur_dir / RECORD))
            links.append((methods_dir / f"{name}.ipynb", cur_dir / f"{name}.ipynb"))
            _adopt(store, links)
            _switch(store, gen)  # the one step that readers see
        except BaseException:
            for src, dst in reversed(moved):
                with contextlib.suppress(OSError):
                    move_file(dst, src)
            _remove(gen)
            raise
        for dst, target in links:  # files new to the chapter: results first, then the record, the notebook last
            rel = _rel(target, dst)
            if not _owns(dst, rel):
                _link(rel, dst)
        _drop_stale(store, results_dir, methods_dir, name, set(files), replace_results)
        clean_store(store)
    return gen


def _adopt(store: Path, links: list[tuple[Path, Path]]) -> None:
    """Before the switch: every destination that exists and is not already this store's link gets its content
    copied into the current generation and becomes the link (readers see the same bytes before and after)."""
    todo = [(dst, target) for dst, target in links if dst.exists() and not _owns(dst, _rel(target, dst))]
    if not todo:
        return
    if _current(store) is None or not (store / CURRENT).is_dir():
        _switch(store, _new_generation(store, ".adopt"))
    cur = (store / CURRENT).resolve()
    for dst, target in todo:
        inside = cur / target.relative_to(store / CURRENT)
        inside.parent.mkdir(parents=True, exist_ok=True)
        tmp = inside.with_name(f".{inside.name}.{os.getpid()}.{time.time_ns()}.new")
        try:
            os.link(dst.resolve(), tmp)
        except OSError:
            shutil.copy2(dst, tmp)
        os.replace(tmp, inside)
        _link(_rel(target, dst), dst)


def _drop_stale(
    store: Path, results_dir: Path, methods_dir: Path, name: str, files: set[str], replace_results: bool
) -> None:
    """After the switch: links of this store that now point at nothing (results files the run no longer writes)
    are removed; with ``replace_results`` also plain results files the run did not write."""
    for f in sorted(results_dir.glob("*.json")):
        if f.name in files:
            continue
        if f.is_symlink():
            try:
                target = os.readlink(f)
            except OSError:
                continue
            if target.startswith(f"{STORE}/{name}/") and not f.exists():
                _remove(f)
        elif replace_results:
            _remove(f)
