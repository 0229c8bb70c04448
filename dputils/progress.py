"""One progress bar for the whole package: tqdm's plain bar when tqdm is installed, silence otherwise.

``tqdm.std`` (not ``tqdm.auto``) honours ``TQDM_DISABLE`` and writes no widget warning into the book. tqdm is
optional (the light install has numpy, scipy and mpmath only): without it long work runs the same, without a bar.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["progress_bar"]


class _NoBar:
    """The subset of tqdm's interface the package uses, doing nothing."""

    def __init__(self, iterable: Iterable | None = None, **_: Any) -> None:
        self._iterable = iterable

    def __iter__(self) -> Iterator:
        return iter(self._iterable if self._iterable is not None else ())

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def update(self, n: float = 1) -> None:
        return None

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        return None

    def set_description(self, *args: Any, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        return None


def progress_bar(iterable: Iterable | None = None, **kwargs: Any) -> Any:
    """``tqdm.std.tqdm(iterable, **kwargs)`` when tqdm is installed, else a silent stand-in with the same use."""
    try:
        from tqdm.std import tqdm
    except ModuleNotFoundError:
        return _NoBar(iterable, **kwargs)
    return tqdm(iterable, **kwargs)
