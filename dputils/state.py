"""Saving an accountant's ledger to JSON and loading it back, so that a long run can resume its accounting.

:meth:`Accountant.state_dict` gives a JSON-ready dict (strict JSON: no NaN or infinity)::

    {"format": "dputils.accountant", "version": 1, "dputils": "0.1.0",
     "accountant": "dputils.accountants.pld.PLDAccountant",
     "options": {"direction": "both", "discretization": null, ...},
     "ledger": [{"mechanism": {"class": "dputils.mechanisms.SubsampledGaussianMechanism",
                               "params": {"sigma": 1.0, "q": 0.01, "sensitivity": 1.0}},
                 "count": 1000}]}

and :meth:`Accountant.from_state_dict` rebuilds the accountant: the same class with the same constructor options,
and the same mechanisms composed the same number of times, so every query answers as before. The options and the
mechanism parameters are the arguments the constructors were called with (recorded when the object is made).

Loading checks everything and raises :class:`~dputils.errors.DPValueError` naming the field: the format, a
version newer than this dputils reads (older versions are read: version 1 is the first), classes outside dputils
or of the wrong kind, options the constructor does not take, counts that are not positive integers. A
mechanism whose constructor arguments are not plain JSON values (the matrix and shuffling set-ups, which hold
arrays and strategy objects) cannot be saved yet: :meth:`state_dict` refuses it by name.
"""

from __future__ import annotations

import importlib
import inspect
import math
from typing import Any

from ._records import record_init
from .errors import DPValueError
from .mechanisms import Mechanism

__all__ = ["STATE_FORMAT", "STATE_VERSION", "record_init", "mechanism_state", "mechanism_from_state", "check_state"]

STATE_FORMAT = "dputils.accountant"
#: The version this dputils writes; it reads every version up to this one.
STATE_VERSION = 1


def _plain(value: Any, where: str) -> Any:
    """``value`` as plain JSON (numpy scalars and arrays made lists), or DPValueError naming ``where``."""
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        value = value.tolist()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DPValueError(f"{where}: {value!r} is not a finite number; it cannot be saved as strict JSON")
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v, f"{where}.{k}") for k, v in value.items()}
    raise DPValueError(
        f"{where}: a {type(value).__name__} cannot be saved (only numbers, strings, lists and "
        "None are); this accountant or mechanism cannot be saved yet"
    )


def _path(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


#: The modules that define the classes a state may name, with the accountant registry's plug-in modules
#: (:data:`dputils.accountants.registry.PLUGIN_MODULES`). They are imported here, by these fixed lists; a
#: module a state names is never imported (a state naming ``dputils.audit.__main__.X`` would run a command line).
SAVEABLE_MODULES = ("dputils.mechanisms", "dputils.accountants")


def _dputils_root(cls: type) -> type:
    """The most general dputils class ``cls`` derives from (``Accountant`` for ``PLDAccountant``)."""
    return [c for c in cls.__mro__ if c.__module__.startswith("dputils.")][-1]


def saveable_classes(*bases: type) -> dict[str, type]:
    """The registry of classes a state may name: ``{"module.QualName": class}`` for every concrete subclass of
    :class:`~dputils.mechanisms.Mechanism` and of the most general dputils class of each of ``bases`` (the
    accountants' :class:`~dputils.accountants.base.Accountant`) defined in dputils, after importing
    :data:`SAVEABLE_MODULES` and the accountant registry's plug-ins (subclasses from other already imported
    dputils modules are included too: naming them imports nothing)."""
    for module in SAVEABLE_MODULES:
        importlib.import_module(module)
    importlib.import_module("dputils.accountants.registry").names()  # imports its fixed plug-in modules

    found: dict[str, type] = {}
    stack: list[type] = [Mechanism, *{_dputils_root(b) for b in bases}]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub.__module__.startswith("dputils.") and not inspect.isabstract(sub):
                found[f"{sub.__module__}.{sub.__qualname__}"] = sub
            stack.append(sub)
    return found


def _class_at(path: Any, base: type, where: str) -> type:
    """The class ``path`` names, looked up in :func:`saveable_classes` (never imported by its path)."""
    if not isinstance(path, str) or not path.startswith("dputils.") or "." not in path:
        raise DPValueError(f"{where} must name a dputils class, got {path!r}")
    cls = saveable_classes(base).get(path)
    if cls is None:
        raise DPValueError(f"{where}: no class {path!r} in this dputils (only accountants and mechanisms load)")
    if not issubclass(cls, base):
        raise DPValueError(f"{where}: {path!r} is not a {base.__name__}")
    return cls


def mechanism_state(mechanism: Any, where: str = "mechanism") -> dict[str, Any]:
    """``{"class": ..., "params": ...}`` of a mechanism of :mod:`dputils.mechanisms`."""
    if not isinstance(mechanism, Mechanism) or "_init_options" not in mechanism.__dict__:
        raise DPValueError(
            f"{where}: {type(mechanism).__name__} cannot be saved yet (only the mechanisms of dputils.mechanisms can)"
        )
    return {"class": _path(mechanism), "params": _plain(mechanism.__dict__["_init_options"], where)}


def mechanism_from_state(state: Any, where: str = "mechanism") -> Any:
    """The mechanism a :func:`mechanism_state` dict describes."""
    if not isinstance(state, dict) or set(state) != {"class", "params"}:
        raise DPValueError(f"{where} must be a dict with the keys 'class' and 'params', got {state!r}")
    cls = _class_at(state["class"], Mechanism, f"{where}.class")
    params = state["params"]
    if not isinstance(params, dict):
        raise DPValueError(f"{where}.params must be a dict, got {params!r}")
    try:
        return cls(**params)
    except TypeError as exc:
        raise DPValueError(f"{where}.params do not fit {cls.__name__}: {exc}") from None


def check_state(state: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Validate a state dict's envelope; returns (options, ledger entries)."""
    if not isinstance(state, dict):
        raise DPValueError(f"state must be a dict (the JSON of Accountant.state_dict()), got {type(state).__name__}")
    if state.get("format") != STATE_FORMAT:
        raise DPValueError(f"state.format must be {STATE_FORMAT!r}, got {state.get('format')!r}")
    version = state.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise DPValueError(f"state.version must be a positive integer, got {version!r}")
    if version > STATE_VERSION:
        raise DPValueError(
            f"state.version {version} was written by a newer dputils; this one reads versions up to {STATE_VERSION}"
        )
    options, ledger = state.get("options", {}), state.get("ledger")
    if not isinstance(options, dict):
        raise DPValueError(f"state.options must be a dict, got {options!r}")
    if not isinstance(ledger, list):
        raise DPValueError(f"state.ledger must be a list, got {ledger!r}")
    for i, entry in enumerate(ledger):
        if not isinstance(entry, dict) or set(entry) != {"mechanism", "count"}:
            raise DPValueError(f"state.ledger[{i}] must be a dict with the keys 'mechanism' and 'count'")
        c = entry["count"]
        if not isinstance(c, int) or isinstance(c, bool) or c < 1:
            raise DPValueError(f"state.ledger[{i}].count must be a positive integer, got {c!r}")
    return options, ledger
