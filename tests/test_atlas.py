"""dputils.book.atlas: one point against closed forms, signs of the errors, recorded refusals, parallel == serial."""

import math
from concurrent.futures import ProcessPoolExecutor

import pytest
from scipy import optimize
from scipy.stats import norm

from dputils.book import atlas
from dputils.errors import DPValueError

CHEAP = ("pld", "rdp", "gdp")


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact eps of mu-GDP at delta (Dong, Roth, Su, Cor. 2.13), solved here with scipy alone."""
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1.0  # delta(hi) < delta
    return optimize.brentq(f, 0.0, hi, xtol=1e-14, rtol=1e-14)


@pytest.mark.parametrize("sigma,T", [(1.0, 10), (2.0, 1000), (4.0, 100)])
def test_pld_bracket_contains_the_gaussian_closed_form_at_q_1(sigma, T):
    row = atlas.atlas_point(sigma, 1.0, T, 1e-5, accountants=CHEAP)
    exact = gaussian_epsilon(math.sqrt(T) / sigma, 1e-5)
    assert row["ref_note"] == ""
    assert row["ref_lower"] <= exact <= row["ref_upper"]
    assert row["ref_rel_width"] <= 0.01
    # at q = 1 the GDP accountant is exact, so it sits inside the bracket and its error is 0
    assert abs(row["gdp_eps"] - exact) <= 1e-9 * exact
    assert row["gdp_verdict"] == "inside" and row["gdp_relerr"] == 0.0
    # RDP is an upper bound: never below the lower end
    assert row["rdp_eps"] >= row["ref_lower"]


def test_signed_relative_error_by_hand():
    assert atlas.signed_relative_error(3.0, 1.0, 2.0) == pytest.approx(0.5)
    assert atlas.signed_relative_error(0.5, 1.0, 2.0) == pytest.approx(-0.5)
    assert atlas.signed_relative_error(1.5, 1.0, 2.0) == 0.0
    assert atlas.signed_relative_error(1.0, 1.0, 2.0) == 0.0
    assert [atlas.verdict(r) for r in (0.0, 0.1, -0.1)] == ["inside", "pessimistic", "optimistic"]
    with pytest.raises(DPValueError):
        atlas.signed_relative_error(1.0, 2.0, 1.0)


def test_signs_follow_the_raw_numbers():
    """sigma 1, q 0.01, T 1000, delta 1e-5: the CLT is below the bracket, RDP above it (known regime)."""
    row = atlas.atlas_point(1.0, 0.01, 1000, 1e-5, accountants=CHEAP)
    lo, hi = row["ref_lower"], row["ref_upper"]
    assert row["gdp_eps"] < lo and row["gdp_verdict"] == "optimistic"
    assert row["gdp_relerr"] == pytest.approx(row["gdp_eps"] / lo - 1)
    assert row["rdp_eps"] > hi and row["rdp_verdict"] == "pessimistic"
    assert row["rdp_relerr"] == pytest.approx(row["rdp_eps"] / hi - 1)
    assert row["pld_verdict"] == "inside"
    for a in ("spa", "edgeworth", "prv"):
        assert row[f"{a}_verdict"] == "not run" and row[f"{a}_eps"] == ""


def test_refusals_are_recorded_not_raised():
    # delta 1e-300 is below the PLD's floating-point resolution (1e-15 is answered since issue 35): no reference
    row = atlas.atlas_point(1.0, 0.01, 1000, 1e-300, accountants=CHEAP)
    assert "resolution" in row["pld_error"] and row["pld_eps"] == ""
    assert row["ref_note"].startswith("PLD refused") and row["ref_lower"] == ""
    assert row["pld_verdict"] == "failed"
    assert row["rdp_verdict"] == "no reference" and row["rdp_eps"] > 0
    # Edgeworth overflows at sigma 0.5, q 0.5, T 1e6: its message is kept, its epsilon is empty (not NaN)
    row = atlas.atlas_point(0.5, 0.5, 10**6, 1e-5, accountants=("rdp", "edgeworth"))
    assert row["edgeworth_error"].startswith("NumericalError") and row["edgeworth_eps"] == ""
    assert row["edgeworth_verdict"] == "failed"
    assert row["rdp_verdict"] == "no reference" and row["ref_note"] == "pld not run"
    assert not any(isinstance(v, float) and math.isnan(v) for v in row.values())


def test_bad_points_and_grids_are_refused():
    with pytest.raises(DPValueError, match="sigma"):
        atlas.atlas_point(-1.0, 0.1, 10, 1e-5)
    with pytest.raises(DPValueError, match="q"):
        atlas.atlas_point(1.0, 1.5, 10, 1e-5)
    with pytest.raises(DPValueError, match="accountants"):
        atlas.atlas_point(1.0, 0.1, 10, 1e-5, accountants=("pld", "moments"))
    with pytest.raises(DPValueError, match="grid"):
        atlas.grid_points("huge")
    with pytest.raises(DPValueError, match="sigmas"):
        atlas.grid_points("small", sigmas=[3.0])
    with pytest.raises(DPValueError, match="points"):
        atlas.atlas_table([{"sigma": 1.0, "q": 0.1, "T": 10}])


def test_grid_points_and_slices():
    pts = atlas.grid_points("small")
    spec = atlas.GRIDS["small"]
    assert len(pts) == math.prod(len(spec[k]) for k in ("sigma", "q", "T", "delta"))
    part = atlas.grid_points("small", sigmas=[2.0], deltas=[1e-10])
    assert len(part) == len(spec["q"]) * len(spec["T"])
    assert all(p["sigma"] == 2.0 and p["delta"] == 1e-10 for p in part)
    assert all(p in pts for p in part)


def _no_time(row):
    return {k: v for k, v in row.items() if not k.endswith("_seconds")}


def test_executor_equals_serial_and_csv_round_trip(tmp_path):
    pts = [
        {"sigma": 1.0, "q": 0.01, "T": 100, "delta": 1e-5},
        {"sigma": 2.0, "q": 0.1, "T": 1000, "delta": 1e-5},
        {"sigma": 1.0, "q": 0.01, "T": 100, "delta": 1e-12},
    ]
    serial = atlas.atlas_table(pts, accountants=CHEAP)
    with ProcessPoolExecutor(max_workers=2) as ex:
        parallel = atlas.atlas_table(pts, executor=ex, accountants=CHEAP)
    assert [_no_time(r) for r in serial] == [_no_time(r) for r in parallel]
    assert [(r["sigma"], r["T"], r["delta"]) for r in serial] == [(p["sigma"], p["T"], p["delta"]) for p in pts]
    back = atlas.read_csv(atlas.write_csv(serial, tmp_path / "a.csv"))
    assert [_no_time(r) for r in back] == [_no_time(r) for r in serial]
