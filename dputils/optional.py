"""Optional dependencies: which extra brings which package, and one line saying so when one is missing.

The light install (``pip install dputils``) has numpy, scipy and mpmath: the accountants, calibration and the
accounting commands. Everything else comes with an extra of ``pyproject.toml``:

==========  ==========================================================================================
extra       brings
==========  ==========================================================================================
matrix      numba (compiled dynamic programme of the matrix accountants; a numpy path runs without it)
train       torch, scikit-learn (DP-SGD, DP-FTRL, white-box audits, the digits data set)
interop     dp-accounting, opacus (the adapters of :mod:`dputils.interop`)
book        matplotlib, pyyaml, papermill, jupytext, jupyter-book, ... (running notebooks, the book)
sweep       dask.distributed, pyarrow (``dputils sweep``)
test        everything the test suite needs; ``all`` is every extra
==========  ==========================================================================================

:func:`require` raises :class:`MissingDependencyError` (a ``ModuleNotFoundError``) whose message is that one line;
:func:`message_for` turns any ``ModuleNotFoundError`` of an optional package into it (the command line prints it).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "MissingDependencyError", "require", "message_for", "install_hint"]

#: Top-level import name -> (PyPI name, the extra that brings it).
EXTRAS: dict[str, tuple[str, str]] = {
    "numba": ("numba", "matrix"),
    "torch": ("torch", "train"),
    "sklearn": ("scikit-learn", "train"),
    "tqdm": ("tqdm", "train"),
    "dp_accounting": ("dp-accounting", "interop"),
    "opacus": ("opacus", "interop"),
    "matplotlib": ("matplotlib", "book"),
    "yaml": ("pyyaml", "book"),
    "papermill": ("papermill", "book"),
    "jupytext": ("jupytext", "book"),
    "nbformat": ("nbformat", "book"),
    "jupyter_book": ("jupyter-book", "book"),
    "myst_nb": ("myst-nb", "book"),
    "selenium": ("selenium", "book"),
    "prv_accountant": ("prv-accountant", "book"),
    "dask": ("dask[distributed]", "sweep"),
    "distributed": ("dask[distributed]", "sweep"),
    "pyarrow": ("pyarrow", "sweep"),
    "pytest": ("pytest", "test"),
    "hypothesis": ("hypothesis", "test"),
}


class MissingDependencyError(ModuleNotFoundError):
    """An optional dependency is not installed; the message names the ``pip install`` that brings it."""


def install_hint(module: str) -> str:
    """``pip install "dputils[EXTRA]"`` for the top-level module ``module`` (or a plain ``pip install NAME``)."""
    top = module.split(".", 1)[0]
    if top in EXTRAS:
        dist, extra = EXTRAS[top]
        return f'python -m pip install "dputils[{extra}]"  (or just {dist})'
    return f"python -m pip install {top}"


def _line(module: str, purpose: str | None) -> str:
    top = module.split(".", 1)[0]
    dist = EXTRAS.get(top, (top, ""))[0]
    what = f"{purpose} needs {dist}, which is not installed" if purpose else f"{dist} is not installed"
    return f"{what}: {install_hint(top)}"


def require(module: str, purpose: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` with one line naming the install that fixes it.

    ``purpose`` says what needs it (e.g. ``"dputils.training"``)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        if missing.split(".", 1)[0] != module.split(".", 1)[0]:
            raise  # the module is there but one of its own dependencies is broken: not ours to explain
        raise MissingDependencyError(_line(module, purpose), name=missing) from None


def message_for(exc: ModuleNotFoundError) -> str | None:
    """The one-line explanation of ``exc`` when it is about an optional package we know, else None."""
    if isinstance(exc, MissingDependencyError):
        return str(exc)
    name = (exc.name or "").split(".", 1)[0]
    if name in EXTRAS:
        return _line(name, None)
    return None
