"""The second set of functions the matrix chapter calls from dputils.matrix.panels (issue 26, item 5): both
accountants at one sigma, and the chained calibration of conditional composition. Checked against an independent
re-derivation of Theorem 3.1's conversion from the exact DP-SGD divergences, against the accountants called
directly, and for the contract of a calibration (the bound holds at the result and fails just below it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dputils.errors import DPValueError
from dputils.matrix import (
    BallsInBinsMatrixMechanism,
    ConditionalCompositionAccountant,
    build_strategy,
    rho_add_lemma34,
    rho_remove,
)
from dputils.matrix import panels as pn


def _theorem31_epsilon(rho: np.ndarray, orders: np.ndarray, delta: float) -> float:
    # delta = exp((a - 1)(rho - eps)) / (a - 1) * (1 - 1/a)^a solved for eps, minimised over the orders
    a = orders.astype(float)
    eps = rho + (math.log(1 / delta) - np.log(a - 1) + a * np.log1p(-1 / a)) / (a - 1)
    return max(float(eps.min()), 0.0)


def test_renyi_and_condcomp_at_sigma_against_theorem31_and_the_accountant():
    st, sigma, delta, orders = build_strategy("identity", 1, 4), 0.8, 1e-5, np.arange(2, 33)
    got = pn.renyi_and_condcomp_at_sigma(st, sigma, delta, orders, tier_budget=1e6, discretization=1e-2)
    # DP-SGD (G = I): the DP is exact for remove; add is Lemma 3.4; rho = the larger of the two per order
    rho = np.maximum(rho_remove(np.eye(4), sigma, orders, 1)[0], rho_add_lemma34(np.eye(4), sigma, orders))
    assert got["renyi_epsilon"] == pytest.approx(_theorem31_epsilon(rho, orders, delta), rel=1e-10)
    assert got["renyi_order"] in orders and got["renyi_bands"] == 1
    direct = ConditionalCompositionAccountant(delta_e=delta / 2, progress=False, discretization=1e-2)
    direct.compose(BallsInBinsMatrixMechanism(st, sigma))
    assert got["condcomp_epsilon"] == float(direct.get_epsilon(delta))
    assert got["sigma"] == sigma and got["renyi_seconds"] >= 0 and got["condcomp_seconds"] >= 0
    more = pn.renyi_and_condcomp_at_sigma(st, 1.2, delta, orders, tier_budget=1e6, discretization=1e-2)
    assert more["renyi_epsilon"] < got["renyi_epsilon"] and more["condcomp_epsilon"] < got["condcomp_epsilon"]
    with pytest.raises(DPValueError):
        pn.renyi_and_condcomp_at_sigma(st, -1.0, delta, orders, tier_budget=1e6)


def test_condcomp_sigmas_meet_delta_and_fail_just_below():
    st, delta, tol = build_strategy("identity", 1, 4), 1e-5, 1e-2
    eps = [1.0, 2.0]
    got = pn.condcomp_sigmas(st, eps, [1.0, 0.7], delta, tol, discretization=1e-2)
    assert list(got) == eps and got[1.0] > got[2.0]

    def delta_at(sigma: float, e: float) -> float:
        acc = ConditionalCompositionAccountant(delta_e=delta / 2, progress=False, discretization=1e-2)
        return float(acc.compose(BallsInBinsMatrixMechanism(st, sigma)).get_delta(e))

    for e, s in got.items():
        assert delta_at(s, e) <= delta < delta_at(s / (1 + tol), e)
    with pytest.raises(DPValueError):
        pn.condcomp_sigmas(st, eps, [1.0], delta, tol)
