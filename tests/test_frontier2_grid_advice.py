"""Issue 36: a grid over the limits is refused with advice that is a *different*, coarser discretization, and one
that fits (the message printed "use a discretization of at least 0.0001" at discretization 1e-4 when the grid was
just over the limit, the ratio rounding to 1 at two digits)."""

from __future__ import annotations

import re

import pytest

from dputils.accountants.pld import _compose, _discretise
from dputils.accountants.pld._interface import GridLimitError, coarser_discretization
from dputils.mechanisms import GaussianMechanism, SubsampledGaussianMechanism


def _advised(msg: str) -> float:
    m = re.search(r"discretization of at least ([0-9.e+-]+)", msg)
    assert m, msg
    return float(m.group(1))


@pytest.mark.parametrize("h", [1e-4, 3e-5, 0.01, 0.37])
@pytest.mark.parametrize("over", [1, 2, 1000, 10**6])
def test_advice_is_strictly_coarser_and_fits(h, over):
    limit = 5_000_000
    n = limit + over
    adv = coarser_discretization(h, n, limit)
    assert float(f"{adv:.2g}") == adv > h  # printed at two digits, and not the width in use
    # the loss range covered by n points at h (at most (n - 1) h) needs at most range / adv + 3 points at adv
    assert (n - 1) * h / adv + 3 < limit


def test_single_step_refusal_names_a_coarser_grid_that_fits():
    pair = GaussianMechanism(0.05).pair("remove")
    lo, hi = pair.loss_quantile_range(1e-20)
    limit = 5_000_000
    h = (hi - lo) / (limit - 2.5)  # n = limit + 1 or + 2 points: the ratio prints as 1 at two digits
    with pytest.raises(GridLimitError, match="discretization") as err:
        _discretise.discretize(pair, h, 1e-20)
    adv = _advised(str(err.value))
    assert adv > h and f"{adv:.2g}" != f"{h:.2g}"
    i_lo, i_hi = (lo // adv) - 1, -(-hi // adv) + 1
    assert i_hi - i_lo + 1 <= limit  # the advised grid's point count, by the same rule as discretize


def test_window_refusal_names_a_coarser_grid_that_fits(monkeypatch):
    h = 1e-3
    d = _discretise.discretize(SubsampledGaussianMechanism(1.0, 0.1).pair("remove"), h, 1e-12)
    parts = [(d.upper, d.i0, 50)]
    j_lo, j_hi, _, _ = _compose._window(parts, h, 1e-12)
    n_win = j_hi - j_lo + 1
    monkeypatch.setattr(_compose, "MAX_WINDOW", n_win - 1)  # just over the limit, as in issue 36
    with pytest.raises(GridLimitError) as err:
        _compose._window(parts, h, 1e-12)
    adv = _advised(str(err.value))
    assert adv > h and f"{adv:.2g}" != f"{h:.2g}", str(err.value)
    d2 = _discretise.discretize(SubsampledGaussianMechanism(1.0, 0.1).pair("remove"), adv, 1e-12)
    j_lo2, j_hi2, _, _ = _compose._window([(d2.upper, d2.i0, 50)], adv, 1e-12)  # fits: no GridLimitError
    assert j_hi2 - j_lo2 + 1 <= n_win - 1
