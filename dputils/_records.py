"""Recording the arguments a constructor was called with (for saving an accountant's ledger, :mod:`dputils.state`).

Kept apart from :mod:`dputils.state` so that :mod:`dputils.mechanisms` and :mod:`dputils.accountants.base`,
which record their constructors' arguments, import it without importing the state module (which imports them).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


def record_init(cls: type) -> None:
    """Wrap ``cls.__init__`` (if the class defines one) so that the outermost constructor call records its
    arguments, defaults applied, as ``self._init_options`` (``**kwargs`` flattened)."""
    init = cls.__dict__.get("__init__")
    if init is None or getattr(init, "_records_options", False):
        return
    sig = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "_init_options" not in self.__dict__:
            try:
                bound = sig.bind(self, *args, **kwargs)
            except TypeError:
                pass  # the constructor itself reports the bad call
            else:
                bound.apply_defaults()
                opts: dict[str, Any] = {}
                for name, value in list(bound.arguments.items())[1:]:
                    kind = sig.parameters[name].kind
                    if kind is inspect.Parameter.VAR_KEYWORD:
                        opts.update(value)
                    elif kind is inspect.Parameter.VAR_POSITIONAL:
                        opts[name] = list(value)
                    else:
                        opts[name] = value
                self.__dict__["_init_options"] = opts
        init(self, *args, **kwargs)

    __init__._records_options = True  # type: ignore[attr-defined]
    cls.__init__ = __init__  # type: ignore[method-assign]
