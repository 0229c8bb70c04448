"""allocation-pld's PLD composition follows the PLD accountant's ``rtol`` contract (issue 35 item 3): without a
user-given loss grid it refines until the certified bracket's relative width is at most rtol, starting at 2e-4,
instead of a fixed 2e-4 grid. Truth: every grid gives a certified bracket, so the refined bracket and the fixed-grid
one (``discretization=2e-4``, used as given) must overlap; the refined one is the narrower."""

from __future__ import annotations

from dputils.accountants.allocation import RandomAllocation, RandomAllocationPLDAccountant


def _inner(acc, delta):
    return acc._build()["up"]._acc.get_epsilon(delta)


def test_refines_where_the_start_grid_misses_rtol():
    mech = RandomAllocation(3.0, 20, 1, 100)  # 100 epochs: the composed PLD needs a grid finer than 2e-4
    acc = RandomAllocationPLDAccountant().compose(mech)
    r = acc.get_epsilon(1e-5)
    inner = _inner(acc, 1e-5)
    assert inner.details["rtol_met"] and inner.details["discretization"] < 2e-4
    fixed = RandomAllocationPLDAccountant(discretization=2e-4).compose(mech)
    rf = fixed.get_epsilon(1e-5)
    assert _inner(fixed, 1e-5).details["discretization"] == 2e-4  # a given grid is used as is
    assert r.lower <= rf.upper and rf.lower <= r.upper  # both certified
    assert r.upper - r.lower < rf.upper - rf.lower


def test_start_grid_answers_where_it_meets_rtol():
    acc = RandomAllocationPLDAccountant().compose(RandomAllocation(1.0, 100, 1, 2))
    acc.get_epsilon(1e-5)
    inner = _inner(acc, 1e-5)
    assert inner.details["rtol_met"] and inner.details["discretization"] == 2e-4
