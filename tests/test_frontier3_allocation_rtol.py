"""allocation-pld refines its own grid to the rtol contract (issue 35: "it chooses and refines the grid until the
certified bracket is narrow"): the lognormal grid starts coarse (2x the old default for one allocation, 1.5x for a
composition) and is refined until the relative width (upper - lower) / upper is at most rtol (default 1e-3), or the
reason it stops is in details. Truths: every pass is certified, so brackets at different rtol must overlap each other
and pld-accounting 2.0's certified brackets (tests/data/peer_pld_accounting_2_0.json); a tighter rtol is met with a
narrower bracket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dputils.accountants.allocation import RandomAllocation, RandomAllocationPLDAccountant
from dputils.errors import DPValueError

PEER = {
    (r["sigma"], r["steps"], r["selected"], r["epochs"], r["delta"]): (r["lower"], r["upper"])
    for r in json.loads((Path(__file__).parent / "data" / "peer_pld_accounting_2_0.json").read_text())["rows"]
}


@pytest.mark.parametrize("key", [k for k in PEER if k[2] == 1], ids=str)
def test_rtol_met_on_the_peer_settings(key):
    sigma, t, k, e, delta = key
    r = RandomAllocationPLDAccountant().compose(RandomAllocation(sigma, t, k, e)).get_epsilon(delta)
    assert r.details["rtol_met"], r.details
    assert (r.upper - r.lower) / r.upper <= 1e-3
    lo, up = PEER[key]
    assert lo <= r.upper and r.lower <= up and r.upper <= up  # both certified; ours not above the peer's


def test_tighter_rtol_narrower_and_overlapping():
    mech = RandomAllocation(1.0, 100, 1, 1)
    r3 = RandomAllocationPLDAccountant().compose(mech).get_epsilon(1e-5)
    r4 = RandomAllocationPLDAccountant(rtol=1e-4).compose(mech).get_epsilon(1e-5)
    assert r4.details["rtol_met"] and (r4.upper - r4.lower) / r4.upper <= 1e-4
    assert r4.details["grid_factor"] < r3.details["grid_factor"]
    assert r4.upper - r4.lower < r3.upper - r3.lower
    assert r3.lower <= r4.upper and r4.lower <= r3.upper


def test_given_grid_is_used_as_is_and_says_so():
    r = RandomAllocationPLDAccountant(grid=0.8).compose(RandomAllocation(1.0, 100)).get_epsilon(1e-5)
    assert r.details["grid"] == [0.8] and not r.details["rtol_met"]
    assert "used as is" in r.details["rtol_reason"]


def test_k_above_one_has_no_width_to_refine_by():
    r = RandomAllocationPLDAccountant().compose(RandomAllocation(1.0, 100, 2, 1)).get_epsilon(1e-5)
    assert r.lower == 0 and not r.details["rtol_met"] and "lower end" in r.details["rtol_reason"]
    assert r.upper <= PEER[(1.0, 100, 2, 1, 1e-5)][1]


def test_bad_rtol_refused_by_name():
    for bad in (0.0, 1.0, -1e-3, float("nan")):
        with pytest.raises(DPValueError, match="rtol"):
            RandomAllocationPLDAccountant(rtol=bad)


def test_k_above_one_composition_coarser_pld_start_keeps_the_upper_end():
    """Three or more allocations with k > 1 (no lower end) start the PLD's loss grid at 4e-4 instead of 2e-4: the
    upper end is the same to 1e-6 relative as with a given grid of 1e-4 (both certified upper bounds)."""
    mech = RandomAllocation(2.0, 20, 3, 1)
    r = RandomAllocationPLDAccountant().compose(mech).get_epsilon(1e-4)
    fine = RandomAllocationPLDAccountant(discretization=1e-4).compose(mech).get_epsilon(1e-4)
    assert r.lower == 0.0 and r.upper <= PEER[(2.0, 20, 3, 1, 1e-4)][1]
    assert abs(r.upper - fine.upper) <= 1e-6 * fine.upper
