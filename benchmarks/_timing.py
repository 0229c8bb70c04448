"""Timing helper shared by the benchmark scripts."""

from __future__ import annotations

import time


def best_time(fn, repeat):
    """(best wall time over ``repeat`` calls, the last return value)."""
    best, val = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        val = fn()
        best = min(best, time.perf_counter() - t0)
    return best, val
