"""The one table of accountants: ``{name: Registration}``, filled by the :func:`register` decorator.

An accountant class registers itself where it is defined (the model is Opacus's ``register_accountant``)::

    @register("pld", label="PLD", answer="bracket", events=COMMON_EVENTS, cost="moderate", rank=10, color="#1f77b4",
              help="privacy-loss distribution (FFT), certified lower/upper bracket")
    class PLDAccountant(Accountant): ...

One class may be registered under several names, each with its constructor ``options`` (``rdp`` and
``rdp-classic`` are :class:`~dputils.accountants.rdp.RDPAccountant` with ``conversion="modern"`` and
``"classic"``). Everything that lists accountants reads this table: the command line's choices and builds
(:mod:`dputils.cli`), the dp_accounting and Opacus adapters (:mod:`dputils.interop`), the atlas, the
benchmarks and the per-accountant plot styles. :func:`get` and :func:`names` look a name up;
:func:`select` filters by metadata; :func:`create` builds an accountant of a name.

What a registration says (the metadata its consumers need):

* ``label``: the short name of tables and legends (``"PLD"``);
* ``answer``: the guarantee of the number, one of :data:`ANSWERS`: ``"bracket"`` (a certified bracket
  ``[lower, upper]`` holding the value: the PLD's upper end, an exact method's computed value), ``"upper-bound"`` (a certified upper bound, no lower one),
  ``"estimate"`` (an estimate inside a certified bracket; the bracket may be vacuous), ``"approximation"``
  (no certified bound in general; e.g. a central-limit approximation);
* ``events``: the mechanisms it composes, by their ``name`` (``"gaussian"``, ``"subsampled-gaussian"``,
  ``"laplace"``, ``"subsampled-laplace"``: :data:`COMMON_EVENTS`; ``"balls-in-bins"``; the shuffling
  chapter's training runs by their class name in kebab case, ``"shuffled-batch-clipping"``, ...);
* ``cost``: the time of one query at the book's settings, one of :data:`COSTS`: ``"cheap"`` (well under a
  second, e.g. closed forms whose time does not grow with the number of compositions), ``"moderate"`` (about
  a second: a discretised distribution, a law summed over its support), ``"expensive"`` (minutes: Monte Carlo,
  conditional composition of a dense strategy);
* ``rank``: its place in the book's tables, legends and the atlas's columns (smaller first);
* ``color``: its colour in every figure (None: no fixed colour);
* ``variant_of``: the name it is a variant of (``rdp-classic`` of ``rdp``): consumers that offer one
  accountant per method (the adapters, the atlas) leave variants out;
* ``help``: one line for ``python -m dputils accountants``.

**Command-line hooks.** Accountants whose run is not one of :data:`COMMON_EVENTS` (the matrix and shuffling
accountants) also give the command line how to build their run from its options:
``register(name, help=..., build=..., add_arguments=..., uses_mechanism=False, noise_parameter=...,
common_flags=...)`` called (not used as a decorator) by the command line when it is imported
(:func:`dputils.cli.runs.register`: argument parsing lives in the command-line package, and the library never
imports it, so a name registered by hooks alone, such as ``matrix-renyi``, is known once :mod:`dputils.cli` is
imported). The command line builds
every accountant of the common mechanisms itself, from the class (:func:`dputils.cli.mechanism_from_args`). The hooks' fields:

* ``build(args) -> Accountant``: the composed accountant of the parsed ``argparse.Namespace``;
* ``add_arguments(parser)``: the accountant's own options;
* ``uses_mechanism``: whether the common ``--mechanism/--sigma/--q/--scale/--steps`` options apply;
* ``noise_parameter``: the option ``calibrate`` searches over (``"sigma"``), or None;
* ``common_flags``: which of :data:`COMMON_FLAGS` it reads (others given are refused by name). Default: all
  when ``uses_mechanism``, otherwise ``{"direction"}`` plus ``noise_parameter`` when that is common.

Modules listed in :data:`PLUGIN_MODULES` are imported on the first lookup (none of them imports torch or
matplotlib); a module absent from this checkout is skipped, any other import error propagates.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..errors import DPValueError

__all__ = [
    "ANSWERS",
    "COMMON_EVENTS",
    "COMMON_FLAGS",
    "COSTS",
    "PLUGIN_MODULES",
    "AccountantSpec",
    "DuplicateAccountantError",
    "Registration",
    "UnknownAccountantError",
    "create",
    "get",
    "names",
    "register",
    "select",
]

#: Modules that register accountants when imported.
PLUGIN_MODULES = (
    "dputils.accountants.pld",
    "dputils.accountants.rdp",
    "dputils.accountants.gdp",
    "dputils.accountants.spa",
    "dputils.accountants.edgeworth",
    "dputils.accountants.allocation",
    "dputils.shuffling",
)

#: The guarantees a registered accountant's number may carry (see the module docstring).
ANSWERS = ("bracket", "upper-bound", "estimate", "approximation")
#: How a registered accountant's time grows (see the module docstring).
COSTS = ("cheap", "moderate", "expensive")
#: The mechanisms of :mod:`dputils.mechanisms` that the command line, dp_accounting's events and Opacus's steps
#: describe (by their ``name``).
COMMON_EVENTS = frozenset({"gaussian", "subsampled-gaussian", "laplace", "subsampled-laplace"})
#: The common command-line options shared by ``epsilon``/``delta``/``calibrate`` (dest names).
COMMON_FLAGS = frozenset({"mechanism", "sigma", "q", "scale", "steps", "direction"})


class UnknownAccountantError(DPValueError, KeyError):
    """A name that no accountant is registered under (the message lists the registered ones).

    A :class:`~dputils.errors.DPValueError`, and a ``KeyError`` for code that looked names up in a dict."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateAccountantError(DPValueError):
    """A second registration of a name (of its class, or of its command-line hooks)."""


@dataclass(frozen=True)
class Registration:
    """One accountant of the table: its class, the constructor options of its name, its metadata and, for
    accountants of their own kind of run, the command-line hooks (module docstring)."""

    name: str
    cls: type | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    answer: str | None = None
    events: frozenset[str] = frozenset()
    cost: str | None = None
    rank: int = 1000
    color: str | None = None
    variant_of: str | None = None
    help: str = ""
    # command-line hooks (accountants of their own kind of run)
    build: Callable[[Any], Any] | None = None
    add_arguments: Callable[[Any], None] | None = None
    uses_mechanism: bool = True
    noise_parameter: str | None = "sigma"
    common_flags: frozenset[str] = COMMON_FLAGS

    @property
    def common_events(self) -> bool:
        """Whether it composes mechanisms of :data:`COMMON_EVENTS` (the command line then builds it from its
        class and the common options)."""
        return bool(self.events) and self.events <= COMMON_EVENTS

    def create(self, **options: Any) -> Any:
        """A fresh accountant of this name: ``cls(**{**self.options, **options})``."""
        if self.cls is None:
            raise DPValueError(f"accountant {self.name!r} has no registered class (only command-line hooks)")
        return self.cls(**{**self.options, **options})


#: The former name of :class:`Registration`.
AccountantSpec = Registration

_REGISTRY: dict[str, Registration] = {}
_loaded = False
_HOOKS = ("build", "add_arguments", "uses_mechanism", "noise_parameter", "common_flags")


def _flags(name: str, uses_mechanism: bool, noise_parameter: str | None, common_flags: Iterable[str] | None):
    if common_flags is None:
        if uses_mechanism:
            return COMMON_FLAGS
        return frozenset({"direction"} | ({noise_parameter} & COMMON_FLAGS if noise_parameter else set()))
    flags = frozenset(common_flags)
    unknown = flags - COMMON_FLAGS
    if unknown:
        raise DPValueError(
            f"accountant {name}: common_flags {sorted(unknown)} are not common options; "
            f"use add_arguments for them (common: {sorted(COMMON_FLAGS)})"
        )
    return flags


def _metadata(name: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The checked metadata of a class registration (``DPValueError`` naming the field)."""
    allowed = {"label", "answer", "events", "cost", "rank", "color", "variant_of", "help", "options"}
    unknown = sorted(set(meta) - allowed)
    if unknown:
        raise DPValueError(f"register({name!r}): unknown metadata {unknown}; known: {sorted(allowed)}")
    for key in ("label", "answer", "events", "cost", "help"):
        if not meta.get(key):
            raise DPValueError(f"register({name!r}): {key} is required")
    if meta["answer"] not in ANSWERS:
        raise DPValueError(f"register({name!r}): answer must be one of {ANSWERS}, got {meta['answer']!r}")
    if meta["cost"] not in COSTS:
        raise DPValueError(f"register({name!r}): cost must be one of {COSTS}, got {meta['cost']!r}")
    events = meta["events"]
    if isinstance(events, str) or not all(isinstance(e, str) for e in events):
        raise DPValueError(f"register({name!r}): events must be a set of mechanism names, got {events!r}")
    out = dict(meta, events=frozenset(events), options=MappingProxyType(dict(meta.get("options") or {})))
    return out


def register(name: str, **metadata: Any) -> Any:
    """Register an accountant under ``name``.

    As a class decorator, ``@register(name, label=..., answer=..., events=..., cost=..., help=..., rank=...,
    color=..., variant_of=..., options={...})`` (module docstring) records the class (returned unchanged);
    stack one decorator per name. Called with ``build=`` it records the command-line hooks of an accountant
    of its own kind of run instead (module docstring) and returns None.

    A name registered twice (two classes, or two sets of hooks) raises :class:`DuplicateAccountantError`;
    bad metadata raises :class:`~dputils.errors.DPValueError`.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise DPValueError(f"accountant name must be a non-empty string without outer spaces, got {name!r}")
    if "build" in metadata:
        _register_hooks(name, **metadata)
        return None
    meta = _metadata(name, metadata)

    def decorator(cls: type) -> type:
        if not isinstance(cls, type):
            raise DPValueError(f"register({name!r}) decorates a class, got {type(cls).__name__}")
        old = _REGISTRY.get(name)
        if old is not None and old.cls is not None:
            raise DuplicateAccountantError(
                f"accountant {name!r} is registered already (class {old.cls.__module__}.{old.cls.__qualname__}); "
                "pick another name"
            )
        reg = Registration(name, cls, **meta)
        if old is not None:  # hooks registered first: keep them
            reg = replace(reg, **{k: getattr(old, k) for k in _HOOKS}, help=meta["help"])
        _REGISTRY[name] = reg
        return cls

    return decorator


def _register_hooks(
    name: str,
    *,
    help: str,
    build: Callable[[Any], Any],
    add_arguments: Callable[[Any], None] | None = None,
    uses_mechanism: bool = True,
    noise_parameter: str | None = "sigma",
    common_flags: Iterable[str] | None = None,
) -> None:
    hooks = dict(
        build=build,
        add_arguments=add_arguments,
        uses_mechanism=uses_mechanism,
        noise_parameter=noise_parameter,
        common_flags=_flags(name, uses_mechanism, noise_parameter, common_flags),
    )
    old = _REGISTRY.get(name)
    if old is None:
        _REGISTRY[name] = Registration(name, help=help, **hooks)
        return
    if old.build is not None:
        raise DuplicateAccountantError(f"accountant {name!r} has command-line hooks already; register them once")
    _REGISTRY[name] = replace(old, **hooks)


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


def get(name: str) -> Registration:
    """The registration of ``name``; :class:`UnknownAccountantError` listing the known names otherwise."""
    _load_plugins()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownAccountantError(f"unknown accountant {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def select(
    *, events: Iterable[str] = (), answers: Iterable[str] | None = None, variants: bool = True
) -> list[Registration]:
    """The class registrations that compose every mechanism of ``events`` (names), give one of ``answers``
    (default: any) and, with ``variants=False``, are no variant of another; in ``(rank, name)`` order."""
    _load_plugins()
    need = frozenset([events] if isinstance(events, str) else events)
    ok = None if answers is None else frozenset([answers] if isinstance(answers, str) else answers)
    out = [
        r
        for r in _REGISTRY.values()
        if r.cls is not None
        and need <= r.events
        and (ok is None or r.answer in ok)
        and (variants or r.variant_of is None)
    ]
    return sorted(out, key=lambda r: (r.rank, r.name))


def create(name: str, **options: Any) -> Any:
    """A fresh accountant registered as ``name`` (its registered options, overridden by ``options``)."""
    return get(name).create(**options)
