"""allocation-pld: two allocations (k = 2, or 2 epochs of k = 1) are composed exactly from their discrete pairs
(``allocation._delta2``: the product pair's hockey-stick sum by sorted suffix sums), without the PLD
re-discretisation. Truths: a brute-force double sum over all atom pairs in 80-bit extended precision; the PLD
composition of the same pairs (a certified bracket of the same quantity, so the two overlap and the exact one is not
looser); pld-accounting 2.0's certified brackets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dputils.accountants.allocation import DiscretePair, RandomAllocation, RandomAllocationPLDAccountant, _delta2


def _random_pair(rng, n, inf=0.0, q_only=0.0):
    p = rng.dirichlet(np.ones(n)) * (1 - inf)
    q = rng.dirichlet(np.ones(n)) * (1 - q_only)
    return DiscretePair(np.append(p, 0.0), np.append(q, q_only), inf_mass=inf), p, q


def _brute(pa, qa, ia, pb, qb, ib, eps):
    L = np.longdouble
    P = np.multiply.outer(pa.astype(L), pb.astype(L))
    Q = np.multiply.outer(qa.astype(L), qb.astype(L))
    hs = np.maximum(P - L(math.exp(eps)) * Q, 0).sum()
    return float(hs + L(ia) * L(pb.sum() + ib) + L(pa.sum()) * L(ib))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_delta2_against_the_double_sum(seed):
    rng = np.random.default_rng(seed)
    A, pa, qa = _random_pair(rng, 300, inf=1e-6, q_only=1e-4)
    B, pb, qb = _random_pair(rng, 200, inf=0.0, q_only=0.0)
    for eps in (0.0, 0.3, 1.0, 2.5):
        lo, up = _delta2(A, B, eps)
        exact = _brute(pa, qa, 1e-6, pb, qb, 0.0, eps)
        assert lo <= exact <= up, (eps, lo, exact, up)
        assert up - lo <= 1e-12 * max(exact, 1e-300) + 1e-15


@pytest.mark.parametrize("args", [(1.0, 100, 1, 2), (1.0, 100, 2, 1), (0.8, 50, 1, 2)])
def test_direct_two_overlaps_the_pld_composition_of_the_same_pairs(args):
    acc = RandomAllocationPLDAccountant().compose(RandomAllocation(*args))
    eps = 1.0
    r = acc.get_delta(eps)
    st = acc._build()
    assert st["direct"] and len(st["direct_pairs"]) == 2 and r.details["composition"] == "direct"
    g = math.exp(eps)
    pu = st["up"].get_delta(eps).upper + st["slack_up"][0] + g * st["slack_up"][1]
    assert r.upper <= pu * (1 + 1e-9)  # the exact sum is not looser than the PLD's upper end of the same pairs
    if st["exact_lower"]:
        pl = st["lo"]["remove"].get_delta(eps).lower - st["slack_lo"][0] - g * st["slack_lo"][1]
        assert pl <= r.upper and r.lower <= pu  # both certified: they overlap


def test_two_allocation_rows_inside_the_peer():
    # pld-accounting 2.0 (tests/data/peer_pld_accounting_2_0.json): (t 100, 2 epochs) and (t 100, k 2)
    r = RandomAllocationPLDAccountant().compose(RandomAllocation(1.0, 100, 1, 2)).get_epsilon(1e-5)
    assert 0.7865871665368802 <= r.lower <= r.upper <= 0.8237203638048531
    assert r.details["rtol_met"] and r.details["composition"] == "direct"
    r2 = RandomAllocationPLDAccountant().compose(RandomAllocation(1.0, 100, 2, 1)).get_epsilon(1e-5)
    assert 1.2021653275377941 <= r2.upper <= 1.258256718463492 and r2.lower == 0.0
