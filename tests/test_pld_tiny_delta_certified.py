"""The certified PLD bracket at tiny deltas (1e-29 .. 1e-36) near the extreme tail of the privacy loss.

Near the add direction's supremum -log(1-q) the hockey stick weights 1 - e^{eps - a} of the top bins are ~1e-5, so
an absolute floating-point error of ~1e-14 in a merged loss a = log P(bin)/Q(bin) (differences of log-tails of
size ~60) became a 1e-9 relative error of delta, and the upper end fell below the exact value. The truths here
are closed forms evaluated by mpmath at 50 digits, written in this file (independent of dputils' log_ndtr code).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dputils.accountants.pld import PLDAccountant
from dputils.accountants.pld._discretise import _TAIL_ULPS, _U
from dputils.mechanisms import SubsampledGaussianMechanism

mp.mp.dps = 50


def _threshold(eps, s, q, direction):
    """x* with {L > eps} = {x > x*} (remove) or {x < x*} (add), sensitivity 1; None where the event is empty."""
    e = mp.e**eps if direction == "remove" else mp.e ** (-eps)
    a = (e - (1 - q)) / q
    if a <= 0:
        return None
    return s**2 * mp.log(a) + mp.mpf(1) / 2


def exact_delta(eps, s, q, direction):
    """delta(eps) = P[L > eps] - e^eps Q[L > eps] in closed form (mpmath)."""
    s, q, eps = mp.mpf(s), mp.mpf(q), mp.mpf(eps)
    x0 = _threshold(eps, s, q, direction)
    if direction == "add":  # P = N(0, s^2), Q = (1-q) N(0, s^2) + q N(1, s^2), event {x < x0}
        if x0 is None:
            return mp.mpf(0)
        p = mp.ncdf(x0 / s)
        qq = (1 - q) * mp.ncdf(x0 / s) + q * mp.ncdf((x0 - 1) / s)
    else:  # P = (1-q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2), event {x > x0}
        p = (1 - q) * mp.ncdf(-x0 / s) + q * mp.ncdf((1 - x0) / s)
        qq = mp.ncdf(-x0 / s)
    return p - mp.e**eps * qq


CASES = [
    # (sigma, q, direction, eps, discretization): eps near the add direction's supremum -log(1-q), or far out
    # in the remove direction, where delta is 1e-29 .. 1e-36. Every eps runs on the coarse grid h = 1e-5; the costly
    # grids (1-3 s each: q = 0.1's default and 4e-6, q = 0.01's 1e-6) run at the eps nearest the supremum (the
    # hardest case), and q = 0.01's 1e-6 also at the farthest
    *[(2.0, 0.01, "add", e, h) for h in (None, 1e-5) for e in (0.0099, 0.00999, 0.01, 0.01002)],
    *[(2.0, 0.01, "add", e, 1e-6) for e in (0.0099, 0.01002)],
    *[(1.0, 0.1, "add", e, 1e-5) for e in (0.10535, 0.105357, 0.1053584)],
    *[(1.0, 0.1, "add", 0.1053584, h) for h in (None, 4e-6)],
    *[(2.0, 0.01, "remove", e, h) for h in (None, 1e-4) for e in (1.17, 1.47, 1.7)],
    *[(1.0, 0.1, "remove", e, None) for e in (9.03, 10.41)],
    *[(0.8, 0.02, "remove", e, None) for e in (10.25, 11.99)],
]


@pytest.mark.parametrize("sigma,q,direction,eps,h", CASES)
def test_one_step_bracket_contains_exact_tiny_delta(sigma, q, direction, eps, h):
    exact = exact_delta(eps, sigma, q, direction)
    assert 1e-40 < exact < 1e-20  # the regime under test
    acc = PLDAccountant(direction=direction, discretization=h).compose(SubsampledGaussianMechanism(sigma, q), 1)
    r = acc.get_delta(eps)
    e = float(exact)
    assert r.lower <= e <= r.upper, (r.lower, e, r.upper, (r.upper - e) / e)
    # the floating-point widening (measured ~1e-7 relative) is far below the requested rtol = 1e-3
    if r.details.get("rtol_met"):
        assert r.upper <= e * (1 + 1e-3)


@pytest.mark.parametrize("sigma,q,direction", [(2.0, 0.01, "add"), (1.0, 0.1, "add"), (2.0, 0.01, "remove")])
def test_log_tail_accuracy_assumed_by_the_error_bound(sigma, q, direction):
    """The bound of _discretise assumes |error| <= _TAIL_ULPS u (|v| + 1) for each log-tail v at the computed
    boundary u(eps); check it against mpmath at those boundaries, near the extreme tail."""
    pair = SubsampledGaussianMechanism(sigma, q).pair(direction)
    top = -math.log1p(-q) if direction == "add" else 3.0
    grid = np.concatenate([np.linspace(top - 1e-3, top - 1e-9, 40), np.linspace(-0.5, top, 40)])
    _, u = pair._u(grid)
    qm, mu = mp.mpf(q), 1 / mp.mpf(sigma)
    for v_sfp, v_sfq, v_cdfp, uu in zip(pair.log_sf_p(grid), pair.log_sf_q(grid), pair.log_cdf_p(grid), u):
        if not math.isfinite(uu):
            continue
        um = mp.mpf(uu)
        if direction == "add":
            truth = (mp.ncdf(um), (1 - qm) * mp.ncdf(um) + qm * mp.ncdf(um - mu), mp.ncdf(-um))
        else:
            truth = ((1 - qm) * mp.ncdf(-um) + qm * mp.ncdf(mu - um), mp.ncdf(-um), None)
            truth = (truth[0], truth[1], 1 - truth[0])
        for v, t in zip((v_sfp, v_sfq, v_cdfp), truth):
            if t <= 0:
                continue
            err = abs(float(mp.mpf(v) - mp.log(t)))
            assert err <= _TAIL_ULPS * _U * (abs(v) + 1), (uu, v, err / (_U * (abs(v) + 1)))
