"""Accountants by name, for the command line and for notebooks that compare them.

An accountant module registers itself with :func:`register` at import time. The command line
(``python -m dputils epsilon|delta|calibrate --accountant NAME ...``) looks names up here.

A registration gives:

* ``build(args) -> object`` with ``get_epsilon(delta)`` and ``get_delta(epsilon)`` returning
  :class:`~dputils.accountants.base.AccountingResult`. ``args`` is the parsed ``argparse.Namespace``;
  accountants that use the common mechanism options (``uses_mechanism=True``) read the mechanism with
  :func:`mechanism_from_args` and compose it ``args.steps`` times.
* ``add_arguments(parser)``: extra options of this accountant (e.g. ``--orders`` for RDP).
* ``uses_mechanism``: whether the common ``--mechanism/--sigma/--q/--scale/--steps`` options apply.
* ``noise_parameter``: the option that ``calibrate`` searches over (default ``"sigma"``), or None when
  this accountant cannot be calibrated generically.
* ``common_flags``: which of the common options :data:`COMMON_FLAGS` (``mechanism``, ``sigma``, ``q``,
  ``scale``, ``steps``, ``direction``) the accountant reads. A common option given on the command line
  that is not in this set is refused with a line naming it. Default (None): all of them when
  ``uses_mechanism`` is True (the mechanism then decides which of sigma/q/scale apply), otherwise
  ``{"direction"}`` plus ``noise_parameter`` when that is a common option.

Modules listed in :data:`PLUGIN_MODULES` are imported on first lookup; a module that is not present in
this checkout is skipped, any other import error propagates (it is a bug, not a missing plug-in).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import DPValueError

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


#: The common command-line options shared by ``epsilon``/``delta``/``calibrate`` (dest names).
COMMON_FLAGS = frozenset({"mechanism", "sigma", "q", "scale", "steps", "direction"})


@dataclass(frozen=True)
class AccountantSpec:
    name: str
    help: str
    build: Callable[[argparse.Namespace], Any]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    uses_mechanism: bool = True
    noise_parameter: str | None = "sigma"
    common_flags: frozenset[str] | None = None

    def __post_init__(self) -> None:
        flags = self.common_flags
        if flags is None:
            if self.uses_mechanism:
                flags = COMMON_FLAGS
            else:
                flags = {"direction"} | ({self.noise_parameter} & COMMON_FLAGS if self.noise_parameter else set())
        flags = frozenset(flags)
        unknown = flags - COMMON_FLAGS
        if unknown:
            raise ValueError(
                f"accountant {self.name}: common_flags {sorted(unknown)} are not common options; "
                f"use add_arguments for them (common: {sorted(COMMON_FLAGS)})"
            )
        object.__setattr__(self, "common_flags", flags)


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
    common_flags: frozenset[str] | set[str] | tuple[str, ...] | None = None,
) -> None:
    """Register an accountant under ``name`` (re-registering the same name replaces it).

    ``common_flags``: the common options (of :data:`COMMON_FLAGS`) this accountant reads; None picks the
    default described in the module docstring.
    """
    _REGISTRY[name] = AccountantSpec(
        name,
        help,
        build,
        add_arguments,
        uses_mechanism,
        noise_parameter,
        None if common_flags is None else frozenset(common_flags),
    )


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


def mechanism_from_args(args: argparse.Namespace) -> Any:
    """The mechanism described by the command-line options ``--mechanism --sigma --q --scale``."""
    from ..mechanisms import MECHANISM_NAMES, make_mechanism

    if getattr(args, "mechanism", None) is None:
        raise DPValueError(f"mechanism is required ({', '.join(MECHANISM_NAMES)})")
    sensitivity = getattr(args, "sensitivity", None)
    return make_mechanism(
        args.mechanism,
        sigma=getattr(args, "sigma", None),
        q=getattr(args, "q", None),
        scale=getattr(args, "scale", None),
        sensitivity=1.0 if sensitivity is None else sensitivity,
    )
