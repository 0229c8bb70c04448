"""The dynamic programme's operation counts (target T12h of the matrix chapter) against brute-force enumeration,
and the finite-difference degree the chapter reads them with."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dputils.matrix.renyi import log_partition_dp

ch = pytest.importorskip("dputils.book.chapters.matrix_allocation")


def test_poly_degree_of_known_sequences():
    assert ch.poly_degree([n**3 - 2 * n + 5 for n in range(8)]) == 3
    assert ch.poly_degree([7] * 4) == 0
    assert ch.poly_degree([n * (n + 1) * (n + 2) * (n + 3) // 24 for n in range(3, 12)]) == 4
    with pytest.raises(ValueError):
        ch.poly_degree([2**n for n in range(8)])  # not a polynomial: no difference order vanishes


def _brute_transitions(b: int, bands: int, alpha: int, wrap: bool) -> int:
    """Updates of Lemma 3.3's forward pass by enumeration: per slot after the fixed prefix, every state
    (total m, last p-1 counts with sum <= m <= alpha) and every new count t <= alpha - m; times the prefixes
    (the first p-1 counts, sum <= alpha) with the wrap-around."""
    L = bands - 1
    states = sum(
        1 for w in itertools.product(range(alpha + 1), repeat=L) if sum(w) <= alpha for m in range(sum(w), alpha + 1)
    )
    per_state_t = sum(
        alpha - m + 1
        for w in itertools.product(range(alpha + 1), repeat=L)
        if sum(w) <= alpha
        for m in range(sum(w), alpha + 1)
    )
    assert states > 0
    prefixes = sum(1 for w in itertools.product(range(alpha + 1), repeat=L) if sum(w) <= alpha) if wrap and L else 1
    slots = b - L if wrap and L else b
    return per_state_t * prefixes * slots


@pytest.mark.parametrize(
    "b, bands, alpha, wrap", [(12, 1, 9, False), (12, 2, 7, False), (12, 2, 7, True), (10, 3, 5, True)]
)
def test_counted_updates_equal_the_enumeration(b, bands, alpha, wrap):
    G = ch._cyclic_band(b, bands) if wrap else np.eye(b)
    st: dict = {}
    log_partition_dp(G, 2.0, alpha, bands, work_budget=None, stats=st)
    assert st["transitions"] == _brute_transitions(b, bands, alpha, wrap)


def test_stats_do_not_change_the_result():
    G = ch._cyclic_band(12, 2)
    a = log_partition_dp(G, 1.5, 8, 2)
    c = log_partition_dp(G, 1.5, 8, 2, stats={})
    assert np.array_equal(a, c)


def test_degrees_match_the_papers_complexity():
    deg = ch.dp_operation_counts()["degrees"]
    assert [deg["b"], deg["p1"], deg["p2"], deg["p3"]] == [1, 2, 4, 6]
    assert deg["p2 one epoch"] == 3
