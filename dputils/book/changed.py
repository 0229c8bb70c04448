"""Rebuild only what changed: the record of a chapter's inputs, and the decision to rerun or reuse it.

``python -m dputils run --changed`` and ``book --changed`` rerun a chapter only when one of its inputs differs
from the record written by its last successful run; otherwise the last good executed copy and its results
are kept. The inputs of chapter ``NAME`` (:func:`chapter_inputs`):

* the notebook source ``notebooks/NAME.md`` (SHA-256 of its bytes);
* its target table ``params/targets/NAME.yml`` when it has one (SHA-256, or ``absent``);
* the profile's name and its values for the chapter (canonical JSON);
* the package sources: a SHA-256 per file of ``dputils/**/*.py`` (:func:`package_digests`, the
  files the sweep's code hash reads), except ``dputils/book/bookcheck.py``, which only reads the built HTML. The
  package hashed is the one the kernels import (:func:`kernel_package`: the kernel's interpreter, in the runner's
  environment, asked where it finds ``dputils``), which differs from the runner's own when, say, ``dputils`` is
  installed editable from one checkout and the command runs in another; the runner then says so in one line;
* the data files it reads, as far as they can be seen from outside the kernel:

  - every parameter (the notebook's default, or the profile's value) whose value is a string naming an
    existing file or folder, relative to the repository root or absolute (``data_file:
    data/atlas/atlas_small.csv``, the benchmarks' ``benchmarks/results/*.json``, ``wb_data_dir``): a file of at
    most 16 MiB by its SHA-256, a larger one by size and modification time, a folder by the content of
    each file in it (the first 2,000; SHA-256 up to 256 MiB in all, then size and modification time); a path-like string (with a ``/`` or a file
    suffix) that names nothing is recorded as absent, so that it appearing later reruns the chapter;
  - the Fashion-MNIST folder of :func:`dputils.data.fashion_mnist_root` (``$DPBOOK_FASHION_MNIST`` or Debian's
    folder; the kernels inherit the runner's environment): its path and the size and modification time of
    each of the four IDX files, or their absence (then the chapters that train fall back to scikit-learn's
    digits, whose version is among the dependencies). It is recorded for every chapter, since the audit
    and training modules read it on their own;
  - the files the package names in its own code (:func:`package_files`: ``RESULTS_DIR /
    "gpu_whitebox_h200.json"`` in the gauss chapter's helper, the benchmarks' ``benchmarks/results/*.json``
    defaults), by content, for every chapter;

* the results of other chapters it reads: each ``results.load("OTHER")`` in its source, by the SHA-256 of the
  published ``OTHER.json`` (or its absence). A chapter whose source chapter reruns in the same invocation is
  rerun too (the two may run in parallel: if it read the older results, its record names their hash and the
  next ``--changed`` reruns it);
* the Python version and the installed versions of the key dependencies (:data:`KEY_DEPENDENCIES`).

Not covered: files a chapter opens under a name computed at run time (beyond literals, ``Path(...)``, ``/`` and
module constants), other environment variables, the system's libraries (BLAS, CUDA), the
hardware, and the clock. A rerun is forced by running without ``--changed``.

The record (:func:`record_path`: ``.NAME.inputs.json`` beside the executed copy, e.g.
``book/methods/.gauss_audit.inputs.json``) holds these inputs, the SHA-256 of the published executed copy and
of each results file the run published, the run's seconds and its finishing time. It is written (strict JSON,
atomically) with the run's executed copy and results and published with them in one step
(:mod:`dputils.book.publish`); a failed run replaces it by a record that says so, and a chapter
whose last run failed always reruns. A chapter is also rerun when its executed copy or one of its results
files is missing or differs from the recorded hash (replaced by another run or by hand).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import platform
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .. import data as dpdata
from ..jsonio import jsonable, write_text_atomic

RECORD_VERSION = 2  # 2: folders by content, files named by package constants, the kernels' dputils
#: Distributions whose installed version is part of every chapter's inputs.
KEY_DEPENDENCIES = (
    "numpy",
    "scipy",
    "mpmath",
    "numba",
    "torch",
    "opacus",
    "dp-accounting",
    "prv-accountant",
    "scikit-learn",
    "matplotlib",
    "papermill",
    "jupytext",
    "nbformat",
    "nbclient",
    "ipykernel",
    "dask",
    "distributed",
    "pyyaml",
)
#: Package files left out of the inputs (they never run while a chapter executes).
NOT_INPUTS = ("book/bookcheck.py",)
#: Files named in the package's code that no chapter reads (the book build and ``--update-ledger`` use the ledger)
NOT_DATA = ("params/targets_ledger.yml",)
HASH_LIMIT = 16 * 2**20  # files up to this size are hashed; larger ones go by size and mtime
DIR_LIMIT = 2000
DIR_HASH_LIMIT = 256 * 2**20  # bytes of a folder input hashed; files past it go by size and mtime
_LOAD = re.compile(r"""results\.load\(\s*["']([A-Za-z0-9_.-]+)["']""")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _canonical(obj: Any) -> Any:
    """``obj`` as plain JSON data for a digest (:func:`dputils.jsonio.jsonable`, which writes anything unknown as
    its ``str``), except that a non-finite float becomes its repr string (``"inf"``, ``"-inf"``, ``"nan"``): the
    strict JSON of the results files writes each as null, and a parameter changed from inf to nan must still
    change the digest."""

    def marked(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: marked(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [marked(v) for v in o]
        if isinstance(o, float) and not math.isfinite(o):  # numpy's float64 is a float
            return repr(float(o))
        return o

    return json.loads(json.dumps(jsonable(marked(obj)), sort_keys=True, allow_nan=False))


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def dependency_versions(names: Iterable[str] = KEY_DEPENDENCIES) -> dict[str, str | None]:
    """``{"python": X.Y.Z, dist: version or None (not installed)}``."""
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def declared_defaults(source: Path) -> dict[str, Any]:
    """Literal defaults of the notebook's ``parameters`` cell (values that are not literals are left out)."""
    import ast

    import jupytext

    try:
        nb = jupytext.read(source)
    except Exception:
        return {}
    out: dict[str, Any] = {}
    for c in nb.cells:
        if c.cell_type != "code" or "parameters" not in c.metadata.get("tags", []):
            continue
        try:
            tree = ast.parse(c.source)
        except SyntaxError:
            return {}
        for st in tree.body:
            target = value = None
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                target, value = st.target.id, st.value
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                target, value = st.targets[0].id, st.value
            if target is None:
                continue
            try:
                out[target] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
        break
    return out


def _stat(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def path_fingerprint(path: Path) -> dict[str, Any]:
    """A file by its SHA-256 (size and mtime when over :data:`HASH_LIMIT`); a folder by the content of its files
    (the first :data:`DIR_LIMIT`, each by its SHA-256 while the folder's hashed bytes stay within
    :data:`DIR_HASH_LIMIT`, the rest by size and mtime); a missing path as absent."""
    if path.is_file():
        st = path.stat()
        if st.st_size <= HASH_LIMIT:
            return {"kind": "file", "sha256": sha256_file(path)}
        return {"kind": "file", **_stat(path)}
    if path.is_dir():
        files: dict[str, Any] = {}
        budget = DIR_HASH_LIMIT
        for i, f in enumerate(sorted(p for p in path.rglob("*") if p.is_file())):
            if i >= DIR_LIMIT:
                files["..."] = "more files not listed"
                break
            st = _stat(f)
            if st["size"] <= min(HASH_LIMIT, budget):
                budget -= st["size"]
                files[f.relative_to(path).as_posix()] = {"sha256": sha256_file(f)}
            else:
                files[f.relative_to(path).as_posix()] = st
        return {"kind": "folder", "files": files}
    return {"kind": "absent"}


def _looks_like_path(value: str) -> bool:
    return (
        bool(value)
        and len(value) < 1000
        and "\n" not in value
        and ("/" in value or bool(re.search(r"\.[A-Za-z0-9]{1,5}$", value)))
    )


def data_inputs(
    source: Path, parameters: dict[str, Any], root: Path, named_by_package: Sequence[str] | None = None
) -> dict[str, Any]:
    """The data files the chapter reads (see the module docstring): label -> fingerprint. ``named_by_package``:
    the files of :func:`package_files` (computed here when None)."""

    values = {**declared_defaults(source), **(parameters or {})}
    out: dict[str, Any] = {}
    for rel in package_files(root) if named_by_package is None else named_by_package:
        try:
            out[f"package file: {rel}"] = path_fingerprint(Path(root) / rel)
        except OSError:
            out[f"package file: {rel}"] = {"kind": "unreadable"}
    for name in sorted(values):
        v = values[name]
        if not isinstance(v, str) or not _looks_like_path(v):
            continue
        p = Path(v).expanduser()
        p = p if p.is_absolute() else root / p
        try:
            fp = path_fingerprint(p)
        except OSError:
            fp = {"kind": "unreadable"}
        if fp["kind"] == "absent" and not ("/" in v or p.suffix):
            continue
        out[f"parameter {name}: {v}"] = fp
    folder = dpdata.fashion_mnist_root()
    fm: dict[str, Any] = {"folder": str(folder)}
    for pair in dpdata.FASHION_MNIST_FILES.values():
        for stem in pair:
            f = dpdata._idx_file(folder, stem)
            try:
                fm[stem] = _stat(f) if f is not None else "absent"
            except OSError:
                fm[stem] = "unreadable"
    out["Fashion-MNIST"] = fm
    return out


def results_read(source: Path) -> list[str]:
    """The other chapters whose results the notebook loads (``results.load("NAME")`` in its source)."""
    try:
        text = source.read_text()
    except OSError:
        return []
    return sorted({n for n in _LOAD.findall(text) if n != source.stem})


def chapter_inputs(
    source: Path,
    parameters: dict[str, Any],
    profile: str,
    root: Path,
    results_dir: Path,
    package: dict[str, str] | None = None,
    dependencies: dict[str, str | None] | None = None,
    named_by_package: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Everything the chapter's run depends on, as strict JSON data (see the module docstring).

    ``package``, ``dependencies`` and ``named_by_package`` (:func:`package_files`) may be passed in when many
    chapters are checked at once (they are the same for all)."""

    if package is None:
        package = package_digests(exclude=NOT_INPUTS)
    try:
        nb_rel = source.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        nb_rel = str(source)
    reads = {}
    for other in results_read(source):
        f = results_dir / f"{other}.json"
        reads[other] = sha256_file(f) if f.is_file() else "absent"
    spec = root / "params" / "targets" / f"{source.stem}.yml"
    return _canonical(
        {
            "notebook": {"path": nb_rel, "sha256": sha256_file(source)},
            "targets": sha256_file(spec) if spec.is_file() else "absent",
            "profile": profile,
            "parameters": parameters or {},
            "package": package,
            "data": data_inputs(source, parameters, root, named_by_package),
            "results_read": reads,
            "dependencies": dependencies if dependencies is not None else dependency_versions(),
        }
    )


def record_path(methods_dir: Path, name: str) -> Path:
    """Where the record of chapter ``name`` lies: beside its executed copy, hidden."""
    return Path(methods_dir) / f".{name}.inputs.json"


def read_record(methods_dir: Path, name: str) -> dict[str, Any] | None:
    """The stored record, or None when there is none or it is not a readable record."""
    p = record_path(methods_dir, name)
    try:
        rec = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _write(path: Path, obj: dict[str, Any]) -> None:

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n")


def write_success(
    methods_dir: Path,
    results_dir: Path,
    name: str,
    inputs: dict[str, Any],
    results_files: Iterable[str],
    seconds: float,
) -> Path:
    """Record a successful, published run: its inputs and the hashes of what it published."""
    nb = Path(methods_dir) / f"{name}.ipynb"
    p = record_path(methods_dir, name)
    _write(p, _success(nb, {f: Path(results_dir) / f for f in results_files}, inputs, seconds))
    return p


def write_success_at(notebook: Path, results: dict[str, Path], inputs: dict[str, Any], seconds: float) -> Path:
    """The record of a successful run written as ``inputs.json`` beside ``notebook`` (in the generation folder that
    :func:`dputils.book.publish.publish` then switches to, so the record is published with the copy and its
    results); ``results`` maps each results file's name to its path."""
    p = Path(notebook).parent / "inputs.json"
    _write(p, _success(Path(notebook), results, inputs, seconds))
    return p


def _success(nb: Path, results: dict[str, Path], inputs: dict[str, Any], seconds: float) -> dict[str, Any]:
    return {
        "version": RECORD_VERSION,
        "ok": True,
        "finished": _now(),
        "seconds": float(seconds),
        "inputs": inputs,
        "executed": sha256_file(nb),
        "results": {f: sha256_file(results[f]) for f in sorted(results)},
    }


def write_failure(methods_dir: Path, name: str, error: str) -> Path:
    """Record that the last run failed (the chapter then reruns, whatever its inputs)."""
    p = record_path(methods_dir, name)
    _write(p, {"version": RECORD_VERSION, "ok": False, "finished": _now(), "error": str(error)[:300]})
    return p


def _short(v: Any, limit: int = 40) -> str:
    s = json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _list(items: list[str], limit: int = 3) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Why the inputs ``new`` differ from the recorded ``old``, one short phrase per kind of input."""
    out: list[str] = []
    if old.get("notebook") != new.get("notebook"):
        out.append(f"{new['notebook']['path']} changed")
    if old.get("targets") != new.get("targets"):
        out.append("its target table changed")
    if old.get("profile") != new.get("profile"):
        out.append(f"profile {old.get('profile')} -> {new.get('profile')}")
    op, np_ = old.get("parameters") or {}, new.get("parameters") or {}
    if op != np_:
        keys = sorted(k for k in set(op) | set(np_) if op.get(k, "<default>") != np_.get(k, "<default>"))
        out.append(
            "parameters changed ("
            + _list([f"{k}: {_short(op.get(k, '<default>'))} -> {_short(np_.get(k, '<default>'))}" for k in keys])
            + ")"
        )
    opk, npk = old.get("package") or {}, new.get("package") or {}
    if opk != npk:
        changed = [f"dputils/{f} changed" for f in sorted(set(opk) & set(npk)) if opk[f] != npk[f]]
        changed += [f"dputils/{f} added" for f in sorted(set(npk) - set(opk))]
        changed += [f"dputils/{f} removed" for f in sorted(set(opk) - set(npk))]
        out.append(_list(changed))
    od, nd = old.get("data") or {}, new.get("data") or {}
    if od != nd:
        out.append("data changed (" + _list(sorted(k for k in set(od) | set(nd) if od.get(k) != nd.get(k))) + ")")
    orr, nrr = old.get("results_read") or {}, new.get("results_read") or {}
    if orr != nrr:
        out.append(
            "results read changed ("
            + _list([f"results/{k}.json" for k in sorted(set(orr) | set(nrr)) if orr.get(k) != nrr.get(k)])
            + ")"
        )
    odp, ndp = old.get("dependencies") or {}, new.get("dependencies") or {}
    if odp != ndp:
        out.append(
            _list(
                [f"{k} {odp.get(k)} -> {ndp.get(k)}" for k in sorted(set(odp) | set(ndp)) if odp.get(k) != ndp.get(k)]
            )
        )
    return out


def decide(methods_dir: Path, results_dir: Path, name: str, inputs: dict[str, Any]) -> tuple[bool, str]:
    """(reuse, reason): reuse the last good run when its record matches ``inputs`` and what it published is
    still in place, unchanged; else the reason to run."""
    rec = read_record(methods_dir, name)
    if rec is None:
        return False, "no record of an earlier run"
    if rec.get("version") != RECORD_VERSION:
        return False, f"record of an older runner (version {rec.get('version')})"
    if rec.get("ok") is not True:
        return False, f"failed last time ({rec.get('finished', 'unknown time')})"
    nb = Path(methods_dir) / f"{name}.ipynb"
    if not nb.is_file():
        return False, "executed copy missing"
    if sha256_file(nb) != rec.get("executed"):
        return False, "executed copy differs from the recorded run"
    for f, digest in (rec.get("results") or {}).items():
        p = Path(results_dir) / f
        if not p.is_file():
            return False, f"results file {f} missing"
        if sha256_file(p) != digest:
            return False, f"results file {f} differs from the recorded run"
    why = differences(rec.get("inputs") or {}, inputs)
    if why:
        return False, "; ".join(why)
    return True, f"inputs unchanged since {rec.get('finished', 'the last run')}"


RUNNER_PACKAGE = Path(__file__).resolve().parents[1]


def package_sources(pkg: Path | None = None) -> list[Path]:
    """Every ``dputils/**/*.py`` source file of ``pkg`` (default: the package this runs from), sorted (the package's
    code, as the code hashes read it)."""
    pkg = Path(pkg) if pkg is not None else RUNNER_PACKAGE
    return [f for f in sorted(pkg.rglob("*.py")) if "__pycache__" not in f.parts]


def package_digests(exclude: Sequence[str] = (), pkg: Path | None = None) -> dict[str, str]:
    """SHA-256 of each package source (:func:`package_sources`), keyed by its path inside ``dputils/``, less the
    paths in ``exclude``; the runner's ``--changed`` names the files that changed from these. ``pkg``: the package
    folder to hash (the runner passes the kernels' one, :func:`kernel_package`)."""
    pkg = Path(pkg) if pkg is not None else RUNNER_PACKAGE
    out = {}
    for f in package_sources(pkg):
        rel = f.relative_to(pkg).as_posix()
        if rel not in exclude:
            out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def kernel_python(kernel_name: str = "python3") -> list[str]:
    """The interpreter (argv before ``-m``) of the kernel the runner starts, as jupyter_client resolves it: the
    kernel spec's ``argv[0]``, with ``python``/``python3``/``pythonX.Y`` meaning the running interpreter."""
    import sys

    try:
        from jupyter_client.kernelspec import KernelSpecManager

        argv = list(KernelSpecManager().get_kernel_spec(kernel_name).argv)
    except Exception:  # no such kernel spec: papermill will report it; hash the runner's package meanwhile
        return [sys.executable]
    exe = argv[0] if argv else sys.executable
    if exe in {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}:
        exe = sys.executable
    return [exe]


_FIND = "import importlib.util as u; s = u.find_spec('dputils'); print(s.origin if s and s.origin else '')"


def kernel_package(kernel_name: str = "python3", env: dict[str, str] | None = None) -> Path | None:
    """The ``dputils`` folder that the notebooks' kernels import: the kernel's interpreter, in the runner's
    environment (which kernels inherit) and in a folder without a ``dputils`` of its own (kernels run in their
    staging folder), asked where ``dputils`` is found (without importing it). None when it cannot tell (the kernel
    would then fail to import ``dputils`` itself)."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as cwd:
        try:
            out = subprocess.run(
                [*kernel_python(kernel_name), "-c", _FIND],
                cwd=cwd,
                env=env if env is not None else dict(os.environ),
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            return None
    origin = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    return Path(origin).resolve().parent if origin else None


_PATH_CALLS = {"Path", "PurePath", "PosixPath", "PurePosixPath"}


def _path_value(node: Any, names: dict[str, Any]) -> Any:
    """The value of a path expression made of string literals, ``Path(...)``, ``/`` and known names (else None)."""
    import ast
    from pathlib import PurePosixPath

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Call):
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if fn in _PATH_CALLS and node.args and not node.keywords:
            parts = [_path_value(a, names) for a in node.args]
            if all(isinstance(p, (str, PurePosixPath)) for p in parts):
                return PurePosixPath(*parts)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        a, b = _path_value(node.left, names), _path_value(node.right, names)
        if isinstance(a, PurePosixPath) and isinstance(b, (str, PurePosixPath)):
            return a / b
    return None


def package_files(root: Path, pkg: Path | None = None) -> list[str]:
    """Files under ``root`` that the package names in its code rather than through a parameter: each path
    expression of its sources (``RESULTS_DIR / "gpu_whitebox_h200.json"``, a default argument ``path=RESULTS_DIR /
    "accountants.json"``, a literal ``"benchmarks/results/pld.json"``), evaluated from string literals, ``Path(...)``,
    ``/`` and module-level constants (also those imported from another module of the package), that names an
    existing file relative to ``root``. Sorted paths relative to ``root``."""
    import ast

    trees = []
    for f in package_sources(pkg):
        try:
            trees.append(ast.parse(f.read_bytes()))
        except (SyntaxError, ValueError):
            continue
    names: dict[str, Any] = {}
    clash: set[str] = set()
    for _ in range(2):  # twice: a constant built from another module's constant
        for tree in trees:
            for st in tree.body:
                target = value = None
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                    target, value = st.targets[0].id, st.value
                elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    target, value = st.target.id, st.value
                if target is None or target in clash:
                    continue
                v = _path_value(value, names)
                if v is None:
                    continue
                if target in names and names[target] != v:
                    clash.add(target)
                    names.pop(target)
                else:
                    names[target] = v
    found: set[str] = set()
    root = Path(root)
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Constant, ast.Call, ast.BinOp)):
                continue
            v = _path_value(node, names)
            if v is None:
                continue
            text = str(v)
            if not text or len(text) > 300 or "\n" in text or text.startswith("/") or ".." in text:
                continue
            if "/" not in text:
                continue
            try:
                if (root / text).is_file() and Path(text).as_posix() not in NOT_DATA:
                    found.add(Path(text).as_posix())
            except OSError:
                continue
    return sorted(found)
