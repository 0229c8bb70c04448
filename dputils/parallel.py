"""Seeded Monte Carlo chunks, run serially, on a ``concurrent.futures`` executor or on a Dask cluster.

A Monte Carlo of ``n_samples`` draws is cut into ``k = ceil(n_samples / chunk)`` chunks of ``chunk`` draws
(the last one holds the remainder). Chunk ``j`` gets the ``j``-th child of
``numpy.random.SeedSequence(seed).spawn(k)`` and is computed by ``fn(size_j, seed_j)``. The chunks, their
sizes and their seeds depend only on ``(n_samples, chunk, seed)``, never on where they run, so the list of
chunk results is the same whether one process computes them in order or many workers compute them in any
order. Combining them (sums, counts, means with their error bars) is the caller's business and is done in
chunk order.

``fn`` must be picklable for an executor or a Dask client (a module-level function, or a
``functools.partial`` of one); on a Dask cluster the workers must be able to import it.

Example::

    def count_hits(n, ss):
        rng = np.random.default_rng(ss)
        return int(np.sum(rng.random(n) < 0.5))

    hits = sum(map_chunks(count_hits, 10**6, 10**5, seed=0))                  # serial
    hits == sum(map_chunks(count_hits, 10**6, 10**5, seed=0, client=client))  # the same on Dask
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import DPValueError, check_positive_int
from .progress import progress_bar

__all__ = ["chunk_sizes", "chunk_seeds", "map_chunks", "map_ordered"]


def chunk_sizes(n_samples: int, chunk: int) -> list[int]:
    """Sizes of the chunks of ``n_samples`` draws, ``chunk`` each, the last one holding the remainder."""
    n_samples = check_positive_int("n_samples", n_samples)
    chunk = check_positive_int("chunk", chunk)
    k = math.ceil(n_samples / chunk)
    return [chunk] * (k - 1) + [n_samples - chunk * (k - 1)]


def _seed_sequence(seed: Any) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DPValueError(f"seed must be a non-negative integer or a numpy SeedSequence, got {seed!r}")
    return np.random.SeedSequence(int(seed))


def chunk_seeds(k: int, seed: Any) -> list[np.random.SeedSequence]:
    """``SeedSequence(seed).spawn(k)``: the seeds of ``k`` chunks (a SeedSequence ``seed`` is used as is,
    without advancing its spawn counter, so the same object always gives the same children)."""
    k = check_positive_int("k", k)
    ss = _seed_sequence(seed)
    # spawn() advances ss.n_children_spawned; a fresh copy keeps the answer a function of the seed alone
    base = np.random.SeedSequence(
        ss.entropy, spawn_key=ss.spawn_key, pool_size=ss.pool_size, n_children_spawned=ss.n_children_spawned
    )
    return base.spawn(k)


def map_chunks(
    fn: Callable[[int, np.random.SeedSequence], Any],
    n_samples: int,
    chunk: int,
    seed: Any,
    client: Any = None,
    executor: Any = None,
    desc: str | None = None,
) -> list[Any]:
    """``[fn(size_j, seed_j) for each chunk j]`` in chunk order (see the module docstring).

    Runs serially when neither ``client`` (a ``dask.distributed.Client``) nor ``executor`` (a
    ``concurrent.futures.Executor``) is given. A chunk that raises makes this raise the same exception
    (after the others were submitted; on Dask the remaining futures are cancelled). A progress bar over
    chunks is shown on stderr (``TQDM_DISABLE=1`` hides it).
    """
    if client is not None and executor is not None:
        raise DPValueError("give client or executor, not both")
    if not callable(fn):
        raise DPValueError(f"fn must be callable, got {type(fn).__name__}")
    sizes = chunk_sizes(n_samples, chunk)
    seeds = chunk_seeds(len(sizes), seed)
    return map_ordered(fn, sizes, seeds, client=client, executor=executor, desc=desc or "chunks")


def map_ordered(
    fn: Callable[..., Any], *iterables: Any, client: Any = None, executor: Any = None, desc: str | None = None
) -> list[Any]:
    """``[fn(*args) for args in zip(*iterables)]`` in input order, serially, on an executor or on Dask.

    Runs serially when neither ``client`` (a ``dask.distributed.Client``) nor ``executor`` (a
    ``concurrent.futures.Executor``) is given. A call that raises makes this raise the same exception (on
    Dask the remaining futures are cancelled, on an executor the pending ones). A progress bar over the
    calls is shown on stderr (``TQDM_DISABLE=1`` hides it; none for a single call).
    """
    if client is not None and executor is not None:
        raise DPValueError("give client or executor, not both")
    if not callable(fn):
        raise DPValueError(f"fn must be callable, got {type(fn).__name__}")
    calls = list(zip(*iterables))
    k = len(calls)
    bar = progress_bar(total=k, desc=desc or "tasks", leave=False, **({"disable": True} if k <= 1 else {}))
    results: list[Any] = [None] * k
    try:
        if client is None and executor is None:
            for j, args in enumerate(calls):
                results[j] = fn(*args)
                bar.update(1)
            return results
        if client is not None:
            from distributed import as_completed as dask_completed

            futures = client.map(fn, *[list(c) for c in zip(*calls)], pure=False) if calls else []
            index = {f.key: j for j, f in enumerate(futures)}
            try:
                for fut in dask_completed(futures):
                    results[index[fut.key]] = fut.result()
                    bar.update(1)
            except BaseException:
                client.cancel(futures)
                raise
            return results
        from concurrent.futures import as_completed as cf_completed

        futs = {executor.submit(fn, *args): j for j, args in enumerate(calls)}
        try:
            for fut in cf_completed(futs):
                results[futs[fut]] = fut.result()
                bar.update(1)
        except BaseException:
            for f in futs:
                f.cancel()
            raise
        return results
    finally:
        bar.close()
