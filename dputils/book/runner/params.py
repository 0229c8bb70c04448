"""The book folder, the profiles and the notebooks' parameters: where a run reads and writes, and what each
notebook receives (checked before anything runs).

Part of the runner (:mod:`dputils.book.run` re-exports its public names; the manual: docs/runner.md)."""

from __future__ import annotations

import ast
import math
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ...errors import DPValueError
from .. import booksources
from ..results import repo_root

#: A parameter name: a Python identifier.
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

PROFILES = ("smoke", "full", "paper")
#: the longest line a shown parameters cell gets (a collapsed cell's width in code characters, as the chapters'
#: own code lines: tests/test_contract.py); a "[default ...]" note that would make a line longer goes above it
SHOWN_LINE_MAX = 75


class RootError(ValueError):
    """No repository root with notebooks/ and params/ could be found."""


def _is_root(p: Path) -> bool:
    return (p / "notebooks").is_dir() and (p / "params").is_dir()


def find_root(explicit: Path | str | None = None) -> Path:
    """The book folder (see :mod:`dputils.book.booksources`): ``explicit``, else the checkout or book folder around the
    cwd, else the checkout holding the imported package, else one made from the sources shipped in the wheel."""

    if explicit is not None:
        p = Path(explicit).expanduser().resolve()
        if p.exists() and not p.is_dir():
            raise RootError(f"root: {p} is a file, not a book folder")
        if not _is_root(p):
            if booksources.packaged_sources() is None:
                raise RootError(f"root: {p} has no notebooks/ and params/ folders")
            p = _materialize(p)
        return p
    here = repo_root()
    if _is_root(here):
        return here
    pkg = Path(__file__).resolve().parents[3]  # dputils/book/runner/params.py -> the checkout
    if _is_root(pkg):
        return pkg
    if booksources.packaged_sources() is not None:
        try:
            home = booksources.default_home()
        except (RuntimeError, KeyError, OSError) as exc:  # no usable HOME
            raise RootError(
                f"no book folder: the home folder is unusable ({exc}); set DPBOOK_HOME or pass --root"
            ) from None
        return _materialize(home)
    raise RootError(
        f"no repository root found (neither {Path.cwd()} nor {pkg} holds notebooks/ and params/); pass --root PATH"
    )


def _materialize(p: Path) -> Path:
    """:func:`dputils.book.booksources.materialize`, its failures (a file in the way, a read-only folder) as one
    line."""
    try:
        return booksources.materialize(p)
    except OSError as exc:
        where = exc.filename or p
        raise RootError(
            f"book folder {p}: cannot be made ({where}: {exc.strerror or exc}); set DPBOOK_HOME or pass --root"
        ) from None


def notebook_paths(root: Path | None = None) -> list[Path]:
    """All notebook sources, sorted by name."""
    root = root or find_root()
    return sorted((root / "notebooks").glob("*.md"))


def load_profile(profile: str, root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Parameters per notebook stem for ``profile`` (``paper`` inherits ``full`` where it is silent)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    root = root or find_root()

    def read(name: str) -> dict[str, dict[str, Any]]:
        p = root / "params" / f"{name}.yml"
        if not p.is_file():
            return {}
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark is not None else ""
            raise ValueError(f"{p}: not valid YAML{at} ({getattr(exc, 'problem', None) or 'parse error'})") from None
        except (UnicodeDecodeError, RecursionError):
            raise ValueError(f"{p}: not a readable YAML text file") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p}: expected a mapping of notebook -> parameters")
        out = {}
        for k, v in data.items():
            if v is not None and not isinstance(v, dict):
                raise ValueError(f"{p}: {k} must map parameter names to values, got {type(v).__name__}")
            out[k] = v or {}
        return out

    params = read(profile)
    if profile == "paper":
        full = read("full")
        params = {**full, **params}
    return params


def check_output_folder(output: Path) -> None:
    """Refuse, before anything runs, an ``--output DIR`` that cannot be a folder: an existing file, a path under a
    file, or a folder that cannot be written, and likewise ``DIR/methods`` and ``DIR/results``, where the run
    publishes (one line, a ``ValueError``)."""
    base = output.expanduser()
    base = base if base.is_absolute() else Path.cwd() / base
    p = base
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        where = "is a file" if p == base else f"is under {p}, a file"
        raise ValueError(f"--output: {base} {where}; give a folder (DIR/methods and DIR/results are written there)")
    if p.is_dir() and not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"--output: cannot write in {p} (permission denied)")
    for sub in (base / "methods", base / "results"):  # where publishing writes: checked now, not after the run
        if sub.exists() and not sub.is_dir():
            raise ValueError(f"--output: {sub} is a file; the run publishes its notebooks and results in folders there")
        if sub.is_dir() and not os.access(sub, os.W_OK | os.X_OK):
            raise ValueError(f"--output: cannot write in {sub} (permission denied)")


def output_dirs(profile: str, root: Path, output: Path | str | None = None) -> tuple[Path, Path]:
    """(executed notebooks folder, results folder) for a ``run`` of ``profile`` (see the module docstring)."""
    if output is not None and str(output) == "book":
        return root / "book" / "methods", root / "results"
    if output is not None:
        base = Path(output).expanduser()
        base = base if base.is_absolute() else Path.cwd() / base
        return base / "methods", base / "results"
    if profile == "full":
        return root / "book" / "methods", root / "results"
    return root / "_build" / profile / "methods", root / "_build" / profile / "results"


def _simple_assignments(tree: ast.Module) -> dict[str, ast.expr] | None:
    """name -> value node of a cell made only of ``name = value`` / ``name: T = value`` (None otherwise)."""
    out: dict[str, ast.expr] = {}
    for st in tree.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            out[st.target.id] = st.value
        elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            out[st.targets[0].id] = st.value
        elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
            continue
        else:
            return None
    return out


def merge_parameter_cells(nb: Any, profile: str | None = None) -> bool:
    """Show the parameters of this run once: fold papermill's injected cell into the ``parameters`` cell.

    Values that the injected cell changes are written into the ``parameters`` cell (keeping each line's
    comment, which gains ``[default OLD]``), and the injected cell is tagged ``remove-cell`` (it still ran;
    the book hides it). If the ``parameters`` cell is not plain assignments of literal values (a value
    computed from another parameter would show the override, not what ran), the injected cell stays visible
    and the ``parameters`` cell is tagged ``remove-cell`` instead. Returns True when the cells were merged.
    """
    cells = nb.cells
    pi = next(
        (i for i, c in enumerate(cells) if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])), None
    )
    ii = next(
        (
            i
            for i, c in enumerate(cells)
            if c.cell_type == "code" and "injected-parameters" in c.metadata.get("tags", [])
        ),
        None,
    )
    if ii is None:
        return False

    def tag(cell: Any, t: str) -> None:
        tags = list(cell.metadata.get("tags", []))
        if t not in tags:
            tags.append(t)
        cell.metadata["tags"] = tags

    injected = cells[ii]
    if pi is None:
        return False
    params = cells[pi]
    try:
        p_tree = ast.parse(params.source)
        i_tree = ast.parse(injected.source)
    except SyntaxError:
        tag(params, "remove-cell")
        return False
    declared = _simple_assignments(p_tree)
    new = _simple_assignments(i_tree)

    def literal(node: ast.expr) -> bool:
        try:
            ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
        return True

    # a value computed from another parameter (m = 2 * n) would show the override, not what ran: no merge
    if declared is None or new is None or not all(literal(v) for v in declared.values()):
        tag(params, "remove-cell")
        return False
    lines = [ln.encode() for ln in params.source.split("\n")]
    i_src = injected.source
    changed, extra = [], []
    for name, node in new.items():
        text = ast.get_source_segment(i_src, node) or ""
        if name not in declared:
            extra.append(f"{name} = {text}  # set by this run; not a declared parameter")
            continue
        old = declared[name]
        if ast.dump(old) == ast.dump(node):
            continue
        changed.append((old, text))
    for old, text in sorted(changed, key=lambda t: (t[0].lineno, t[0].col_offset), reverse=True):
        a, b = old.lineno - 1, old.end_lineno - 1  # type: ignore[operator]
        if a == b:
            old_text = lines[a][old.col_offset : old.end_col_offset]
        else:
            old_text = b" ".join([lines[a][old.col_offset :], *lines[a + 1 : b], lines[b][: old.end_col_offset]])
        old_s = " ".join(old_text.decode().split())
        old_s = old_s if len(old_s) <= 60 else old_s[:57] + "..."
        head, tail = lines[a][: old.col_offset], lines[b][old.end_col_offset :]
        note = f"[default {old_s}]"
        tail_s = tail.decode()
        noted = tail_s.rstrip() + f" {note}" if "#" in tail_s else tail_s.rstrip() + f"  # {note}"
        line = head + text.encode() + noted.encode()
        if len(line.decode()) > SHOWN_LINE_MAX:  # the note on a line of its own, above: no code cell scrolls
            indent = head.decode()[: len(head.decode()) - len(head.decode().lstrip())]
            lines[a : b + 1] = [f"{indent}# {note}".encode(), head + text.encode() + tail_s.rstrip().encode()]
        else:
            lines[a : b + 1] = [line]
    if changed or extra:
        src = [f"# Parameters of this run{f' (profile {profile})' if profile else ''}"]
        src += ["# values the run set show [default ...]"] if changed else []
        src += [ln.decode() for ln in lines] + extra
        params.source = "\n".join(src).rstrip("\n")
    tag(injected, "remove-cell")
    params.metadata.setdefault("dputils", {})["shows_injected_parameters"] = True
    return True


def check_profile(
    params: dict[str, dict[str, Any]], sources: Sequence[Path], profile: str
) -> dict[str, dict[str, Any]]:
    """The profile's values for each notebook in ``sources``, checked against the notebook's ``parameters``
    cell with :func:`check_parameters` (the sweep's check): a name the notebook does not declare,
    or a value not of the declared type (``steps: 'abc'``, ``.nan``), is refused before anything runs."""

    out = dict(params)
    for src in sources:
        values = params.get(src.stem)
        if not values:
            continue
        where = f"params/{profile}.yml: {src.stem}"
        try:
            declared = declared_parameters(src)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        out[src.stem] = check_parameters(values, declared, src, where)
    return out


def check_devices(params: dict[str, dict[str, Any]], sources: Sequence[Path], profile: str) -> None:
    """Refuse, before anything runs, a ``paper`` run of a chapter that the profile sends to a device (a ``*_device``
    parameter: ``auto`` or ``cuda``) when no CUDA device is visible: the papers' scale on a CPU takes days (the gauss
    chapter's WideResNet-16-4 for 208 epochs). One line naming the chapter, the parameter and the way out."""
    if profile != "paper":
        return
    wants = [
        (src.stem, k, v)
        for src in sources
        for k, v in (params.get(src.stem) or {}).items()
        if k.endswith("_device") and (str(v).lower() in ("auto", "cuda") or str(v).lower().startswith("cuda:"))
    ]
    if not wants:
        return
    try:
        import torch

        cuda = bool(torch.cuda.is_available())
    except Exception:  # no torch, or a broken CUDA set-up: no device
        cuda = False
    if not cuda:
        names = ", ".join(f"{n} ({k}: {v})" for n, k, v in wants)
        raise ValueError(
            f"profile paper: {names} in params/paper.yml runs at the papers' scale on a CUDA GPU, and none is "
            "visible here; run it on a GPU machine, or leave it out with --only"
        )


# ------------------------------------------------------------------------------------- parameter checks
# (shared with dputils.book.sweep, which imports them from here)


def declared_parameters(source: Path) -> dict[str, dict[str, Any]]:
    """The notebook's ``parameters`` cell as papermill reads it: name -> {inferred_type_name, default, help}."""
    import jupytext
    import papermill as pm

    try:
        nb = jupytext.read(source)
    except Exception as exc:
        raise DPValueError(f"notebook: cannot read {source} ({' '.join(str(exc).split())})") from None
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / f"{source.stem}.ipynb"
        jupytext.write(nb, tmp)
        declared = pm.inspect_notebook(str(tmp))
    if not declared:
        raise DPValueError(f"notebook: {source.name} has no parameters cell (a code cell tagged 'parameters')")
    return dict(declared)


def _type_ok(name: str, value: Any, type_name: str, where: str) -> Any:
    """``value`` checked against the declared type (a float parameter takes an integer, made a float, and the
    text of a number: YAML 1.1 reads ``1e-5`` as text)."""
    t = (type_name or "None").replace(" ", "")
    optional = "None" in t.split("|") or t.startswith("Optional[")
    base = t.removeprefix("Optional[").rstrip("]").split("|")[0].split("[")[0]
    if value is None:
        if optional or base in ("None", ""):
            return None
        raise DPValueError(f"{where}: {name} is null, but the notebook declares it {type_name}")

    def bad() -> DPValueError:
        return DPValueError(
            f"{where}: {name}={value!r} is {type(value).__name__}, but the notebook declares it {type_name}"
        )

    if base == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return value
    if base == "float":
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad() from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad()
        if not math.isfinite(value):
            raise DPValueError(f"{where}: {name}={value!r} is not finite")
        return float(value)
    if base == "bool":
        if not isinstance(value, bool):
            raise bad()
        return value
    if base == "str":
        if not isinstance(value, str):
            raise bad()
        return value
    if base in ("list", "tuple", "List", "Tuple"):
        if not isinstance(value, list):
            raise bad()
        return value
    if base in ("dict", "Dict"):
        if not isinstance(value, dict):
            raise bad()
        return value
    return value  # an annotation we do not know: papermill passes the value as is


def check_parameters(values: Any, declared: dict[str, dict[str, Any]], source: Path, where: str) -> dict[str, Any]:
    """``values`` (a mapping of parameter: value) checked against the notebook's declared parameters: every
    name declared, every value of the declared type (see :func:`_type_ok`); the checked values. Used for grid
    points and for profiles (``python -m dputils run`` checks ``params/PROFILE.yml`` with it)."""
    if not isinstance(values, dict):
        raise DPValueError(f"{where}: expected a mapping of parameter: value, got {type(values).__name__}")
    out: dict[str, Any] = {}
    for k, v in values.items():
        if not isinstance(k, str) or not _IDENT.match(k):
            raise DPValueError(f"{where}: parameter name {k!r} is not an identifier")
        if k not in declared:
            known = ", ".join(sorted(declared))
            raise DPValueError(f"{where}: unknown parameter {k!r}; {source.name} declares {known}")
        out[k] = _type_ok(k, v, declared[k].get("inferred_type_name", "None"), where)
    return out
