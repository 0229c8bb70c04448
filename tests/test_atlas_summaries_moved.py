"""The atlas's summaries of a table (moved from the chapter module into dputils.book.atlas, issue 26):
verdict counts, brackets that miss the reference, the farthest points, failures, the recomputation check
and the Gaussian rows, on hand-made rows whose answers are counted by hand."""

from __future__ import annotations

import math

import pytest

from dputils.book import atlas
from dputils.errors import DPValueError


def _row(sigma, q, T, delta, **acc):
    """A point with every accountant empty except those given as ``name=(eps, lower, upper, verdict, relerr)``."""
    r = {k: "" for k in atlas.COLUMNS}
    r.update(sigma=sigma, q=q, T=T, delta=delta, ref_lower=1.0, ref_upper=1.01)
    for a in atlas.ACCOUNTANTS:
        r[f"{a}_verdict"] = "no reference"
    for a, (eps, lo, up, v, rel) in acc.items():
        r.update({f"{a}_eps": eps, f"{a}_lower": lo, f"{a}_upper": up, f"{a}_verdict": v, f"{a}_relerr": rel})
        r[f"{a}_seconds"] = 0.5
    return r


ROWS = [
    _row(1.0, 0.01, 100, 1e-5, spa=(1.005, 0.99, 1.02, "inside", 0.0), gdp=(0.9, "", "", "optimistic", -0.1)),
    _row(1.0, 0.1, 100, 1e-5, spa=(1.2, 1.1, 1.3, "pessimistic", 0.2 / 1.01), gdp=(0.95, "", "", "optimistic", -0.05)),
    _row(2.0, 0.1, 100, 1e-10, spa=(0.5, 0.4, 0.6, "optimistic", -0.5), gdp=(1.5, "", "", "pessimistic", 0.5 / 1.01)),
]
ROWS[2]["rdp_verdict"], ROWS[2]["rdp_error"] = "failed", "NumericalError: no root"
ROWS[1]["rdp_verdict"], ROWS[1]["rdp_error"] = "failed", "DPValueError: bad"


def test_verdict_summary_counts_by_hand():
    out = atlas.verdict_summary(ROWS, [1e-5, 1e-10], ["spa", "gdp"])
    assert [(o["δ"], o["accountant"]) for o in out] == [
        (1e-5, "SPA"),
        (1e-5, "GDP (CLT)"),
        (1e-10, "SPA"),
        (1e-10, "GDP (CLT)"),
    ]
    spa5, gdp5, spa10, _ = out
    assert (spa5["inside"], spa5["pessimistic"], spa5["optimistic"]) == (1, 1, 0)
    assert (
        gdp5["optimistic"] == 2 and gdp5["max |r|"] == pytest.approx(0.1) and gdp5["median |r|"] == pytest.approx(0.075)
    )
    assert spa10["optimistic"] == 1 and spa10["median s"] == 0.5
    assert sum(spa5[v] for v in atlas.VERDICTS) == 2  # every point of the δ once


def test_disjoint_farthest_failures_by_hand():
    # SPA's bracket [1.1, 1.3] lies above [1, 1.01]; [0.4, 0.6] below; [0.99, 1.02] overlaps
    assert atlas.disjoint(ROWS, "spa") == [ROWS[1], ROWS[2]]
    assert atlas.disjoint(ROWS, "gdp") == []  # no bracket of its own
    far = {(f["accountant"], f["verdict"]): f for f in atlas.farthest(ROWS, ["spa", "gdp"])}
    assert far[("GDP (CLT)", "optimistic")]["points"] == 2
    assert far[("GDP (CLT)", "optimistic")]["largest |r|"] == pytest.approx(0.1)
    assert far[("SPA", "optimistic")]["at σ"] == 2.0 and ("SPA", "inside") not in far
    fail = {f["accountant"]: f for f in atlas.failures(ROWS, ["rdp", "spa"])}
    assert fail["RDP"] == {"accountant": "RDP", "failures": 2, "kinds": "DPValueError, NumericalError"}
    assert fail["SPA"]["failures"] == 0 and fail["SPA"]["kinds"] == "none"


def test_recompute_finds_a_changed_value_and_agrees_with_a_fresh_point():
    fresh = atlas.atlas_point(2.0, 0.01, 100, 1e-5)  # recompute runs every accountant
    assert atlas.recompute([fresh], ["rdp", "gdp"], 1, 100.0, seed=0)[2] == []
    bad = dict(fresh, rdp_eps=fresh["rdp_eps"] * (1 + 1e-6))  # beyond TOLERANCES["rdp"] = 1e-8
    checked, worst, problems = atlas.recompute([bad], ["rdp", "gdp"], 1, 100.0, seed=0)
    assert checked == [{"sigma": 2.0, "q": 0.01, "T": 100, "delta": 1e-5}]
    assert worst["rdp"] == pytest.approx(1e-6, rel=1e-3) and worst["gdp"] == 0.0
    assert [p[:2] for p in problems] == [("rdp", "eps")]
    assert atlas.recompute([bad], ["rdp"], 1, 0.0, seed=0)[0] == []  # no point cheap enough


def test_gaussian_rows_bracket_the_closed_form_and_load_rows_refuses_bad_sources():
    # at q = 1, T steps of the Gaussian are mu-GDP with mu = sqrt(T)/sigma: eps(delta) in closed form
    (r,) = atlas.gaussian_rows([2.0], [4], 1e-5)
    from scipy import optimize, stats

    mu = 1.0

    def delta(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)

    exact = optimize.brentq(lambda e: delta(e) - 1e-5, 0.0, 20.0, xtol=1e-14)
    assert r["exact ε"] == pytest.approx(exact, rel=1e-9)
    assert r["PLD lower"] <= r["exact ε"] <= r["PLD upper"] and r["T"] == 4 and r["σ"] == 2.0
    with pytest.raises(DPValueError):
        atlas.load_rows("nowhere", "x.csv", "tiny", [], [])
