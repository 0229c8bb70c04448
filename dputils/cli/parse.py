"""The one argument parser of the command line (``dputils``, ``dputils run|book``, ``dputils sweep``,
``dputils audit``): argparse that exits 2 with one line on errors, reads ``-1e-5`` as a value, takes no
abbreviations and refuses an option given twice."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import DPValueError

__all__ = ["Parser", "NEGATIVE_NUMBER"]

#: Numbers argparse must read as values, not as options: ``-1e-5``, ``-.5``, ``-inf``, ``-nan``.
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)


class Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line (no usage dump) on errors, reads negative numbers such as
    ``-1e-5`` as values (so the range check, not argparse, reports them), takes no abbreviations and
    refuses an option given twice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        argv = list(sys.argv[1:] if args is None else args)
        result = super().parse_known_args(argv, namespace)
        _refuse_repeated(self, argv)
        return result


def _refuse_repeated(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """``--sigma 1 --sigma 2`` silently keeps the last value in argparse: refuse it instead."""
    seen: dict[str, str] = {}
    for tok in argv:
        if tok == "--":
            break
        if not tok.startswith("-") or NEGATIVE_NUMBER.match(tok):
            continue
        action = parser._option_string_actions.get(tok.split("=", 1)[0])
        if action is None or isinstance(action, (argparse._HelpAction, argparse._AppendAction, argparse._CountAction)):
            continue
        flag = tok.split("=", 1)[0]
        if action.dest in seen:
            first = seen[action.dest]
            also = f" (also as {first})" if first != flag else ""
            raise DPValueError(f"{flag} given more than once{also}; give each option once")
        seen[action.dest] = flag
