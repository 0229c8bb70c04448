"""The saddle-point chapter's checks catch a 1% error in the GDP or moments-accountant epsilon (issue 37).

T5.5-T5.6 compare these errors with a level read off the authors' plot within a factor 2, which a 1% error
passes; T5.8-T5.9 (``record_pins``) pin both to independent 30-digit mpmath values. Here the library functions
are monkeypatched at import time (the code is untouched) to return 1% more, the chapter's table row is rebuilt
with :func:`dputils.baselines.spa_epsilon_rows`, and the chapter helper's checks must fail; unpatched they pass.
"""

from __future__ import annotations

import pytest

from dputils import baselines
from dputils.book.chapters import saddle_point as ch
from dputils.book.scorecard import Targets
from dputils.mechanisms import SubsampledGaussianMechanism

N, DELTA = 4500, 1e-15


def _row(monkeypatch, which: str | None):
    if which == "gdp":
        orig = baselines.gdp_epsilon
        monkeypatch.setattr(baselines, "gdp_epsilon", lambda *a, **k: 1.01 * orig(*a, **k))
    if which == "ma":
        orig = baselines.ma_epsilon
        monkeypatch.setattr(baselines, "ma_epsilon", lambda *a, **k: 1.01 * orig(*a, **k))
    pair = SubsampledGaussianMechanism(2.0, 0.01).pair("remove")
    monkeypatch.setattr(baselines, "_msd_order3_epsilon", lambda *a, **k: float("nan"))  # not under test; slow
    return baselines.spa_epsilon_rows(pair, [N], DELTA, 2.0, 0.01, [ch.AUTHORS[-1]], label="authors")


def test_unpatched_pins_pass(monkeypatch):
    ch.record_pins(Targets("saddle_point"), ["T5.8", "T5.9"], _row(monkeypatch, None), None)


@pytest.mark.parametrize("which", ["gdp", "ma"])
def test_one_percent_error_fails_the_chapter(monkeypatch, which):
    table = _row(monkeypatch, which)
    with pytest.raises(AssertionError):
        ch.record_pins(Targets("saddle_point"), ["T5.8", "T5.9"], table, None)
    # the factor-2 figure-level checks alone would have let it through: the error stays within [0.5, 2] x level
    tg = Targets("saddle_point")
    tid = {"gdp": "T5.6", "ma": "T5.5"}[which]
    err = table[0][which] / table[0]["authors"] - 1
    assert 0.5 <= err / tg.spec[tid]["paper"] <= 2
