"""matrix-mc at small delta: the upper confidence bound that cannot reach delta is reported as inf with the reason
(the empirical-Bernstein radius's variance-free term and the samples needed), not as an error; the estimate and the
lower end still answer. The certified allocation-pld bracket of the same run lies below that (vacuous) upper end."""

from __future__ import annotations

import math

from dputils.accountants.allocation import RandomAllocationPLDAccountant
from dputils.matrix import BallsInBinsMatrixMechanism, build_strategy
from dputils.matrix.allocation import MatrixMonteCarloAccountant


def test_matrix_mc_small_delta_answers_with_vacuous_upper_end():
    mech = BallsInBinsMatrixMechanism(build_strategy("identity", 1, 10, 1), 1.0)
    n = 20_000
    r = MatrixMonteCarloAccountant(samples=n, seed=3, direction="remove").compose(mech).get_epsilon(1e-5)
    assert math.isinf(r.upper)
    reason = r.details["upper_unreachable"]
    floor = 7 * math.log(4 / 0.01) / (3 * (n - 1))  # the radius's variance-free term, gamma = 0.01
    assert f"{floor:.2g}" in reason and "samples are needed" in reason
    assert 0 <= r.lower <= r.value
    # the estimate is a noisy point value; the certified bracket of allocation-pld is the reference
    cert = RandomAllocationPLDAccountant(direction="remove").compose(mech).get_epsilon(1e-5)
    assert cert.upper < r.upper


def test_matrix_mc_reachable_upper_end_is_finite():
    mech = BallsInBinsMatrixMechanism(build_strategy("identity", 1, 10, 1), 1.0)
    r = MatrixMonteCarloAccountant(samples=20_000, seed=3).compose(mech).get_epsilon(0.05)
    assert math.isfinite(r.upper) and "upper_unreachable" not in r.details
    cert = RandomAllocationPLDAccountant().compose(mech).get_epsilon(0.05)
    # the 99% confidence bracket and the certified one intersect
    assert r.lower <= cert.upper and cert.lower <= r.upper
