"""Accountants by name, for the command line and for notebooks that compare them.

An accountant module registers itself with :func:`register` at import time. The command line
(``python -m dputils epsilon|delta|calibrate --accountant NAME ...``) looks names up here.

A registration gives:

* ``build(args) -> object`` with ``get_epsilon(delta)`` and ``get_delta(epsilon)`` returning
  :class:`~dputils.accountants.base.AccountingResult`. ``args`` is the parsed ``argparse.Namespace``;
  accountants that use the common mechanism options (``uses_mechanism=True``) read the mechanism with
  :func:`dputils.mechanisms.mechanism_from_args` and compose it ``args.steps`` times.
* ``add_arguments(parser)``: extra options of this accountant (e.g. ``--orders`` for RDP).
* ``uses_mechanism``: whether the common ``--mechanism/--sigma/--q/--scale/--steps`` options apply.
* ``noise_parameter``: the option that ``calibrate`` searches over (default ``"sigma"``), or None when
  this accountant cannot be calibrated generically.

Modules listed in :data:`PLUGIN_MODULES` are imported on first lookup; a module that is not present in
this checkout is skipped, any other import error propagates (it is a bug, not a missing plug-in).
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from typing import Any, Callable

#: Modules that register accountants when imported.
PLUGIN_MODULES = (
    "dputils.accountants.pld",
    "dputils.accountants.rdp",
    "dputils.accountants.gdp",
    "dputils.accountants.spa",
    "dputils.accountants.edgeworth",
    "dputils.matrix.allocation",
    "dputils.matrix.condcomp",
    "dputils.shuffling",
)


@dataclass(frozen=True)
class AccountantSpec:
    name: str
    help: str
    build: Callable[[argparse.Namespace], Any]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    uses_mechanism: bool = True
    noise_parameter: str | None = "sigma"


_REGISTRY: dict[str, AccountantSpec] = {}
_loaded = False


def register(
    name: str,
    *,
    help: str,
    build: Callable[[argparse.Namespace], Any],
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    uses_mechanism: bool = True,
    noise_parameter: str | None = "sigma",
) -> None:
    """Register an accountant under ``name`` (re-registering the same name replaces it)."""
    _REGISTRY[name] = AccountantSpec(name, help, build, add_arguments, uses_mechanism, noise_parameter)


def _load_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in PLUGIN_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            # Only skip when the plug-in module itself (or its package) is absent.
            if exc.name and (mod == exc.name or mod.startswith(exc.name + ".")):
                continue
            raise


def names() -> list[str]:
    """All registered accountant names, sorted."""
    _load_plugins()
    return sorted(_REGISTRY)


def get(name: str) -> AccountantSpec:
    """The registration for ``name``; ``KeyError`` with the known names otherwise."""
    _load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown accountant {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None
