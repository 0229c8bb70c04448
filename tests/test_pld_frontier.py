"""The PLD accountant at the frontier settings of issue 35: its grid follows the loss's scale until the certified
bracket is narrow (relative width <= rtol), tiny deltas are answered (tails in log space, tilted composition),
and grid decisions branch on exception types.

Independent truths:
* one step: the exact privacy profile of one Poisson-subsampled Gaussian step in closed form (normal tails),
  evaluated with mpmath at 50 digits in this file;
* two steps: delta_2(eps) = E_{x ~ P}[delta_1(eps - L(x))], a one-dimensional mpmath quadrature of the closed
  form above (the second step's profile at the shifted epsilon), in this file;
* long compositions: the saddle-point contour integral of :mod:`dputils.truth` (no grid, no FFT), and the
  saddle-point accountant's certified Theorem-5 bracket (:mod:`dputils.accountants.spa`).
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dputils import truth
from dputils.accountants import PLDAccountant
from dputils.accountants import pld as pld_mod
from dputils.accountants.pld import GridLimitError, ResolutionError
from dputils.accountants.spa import SaddlePointAccountant
from dputils.errors import DPValueError, NumericalError
from dputils.mechanisms import SubsampledGaussianMechanism

DPS = 50


def _delta1(sigma, q, e, direction):
    """Exact delta(e) of one Poisson-subsampled Gaussian step (mpmath, any real e).

    remove: P = (1-q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2), L(x) = log(1 - q + q exp((2x - 1) / (2 s^2))),
    increasing from log(1 - q). For e <= log(1 - q) every loss exceeds e and delta = 1 - e^e (E_P e^{-L} = 1);
    otherwise L > e iff x > x* = s^2 log((e^e - 1 + q) / q) + 1/2 and delta = P(x > x*) - e^e Q(x > x*).
    add: P = N(0, s^2), Q the mixture; P > e^e Q iff x < x_a with exp((2 x_a - 1)/(2 s^2)) = (e^{-e} - 1 + q)/q,
    empty when e >= -log(1 - q).
    """
    s, q, e = mp.mpf(sigma), mp.mpf(q), mp.mpf(e)
    ee = mp.exp(e)
    if direction == "remove":
        if e <= mp.log(1 - q):
            return 1 - ee
        xs = s**2 * mp.log((ee - 1 + q) / q) + mp.mpf(1) / 2
        return (1 - q) * mp.ncdf(-xs / s) + q * mp.ncdf(-(xs - 1) / s) - ee * mp.ncdf(-xs / s)
    r = (1 / ee - 1 + q) / q
    if r <= 0:
        return mp.mpf(0)
    xa = s**2 * mp.log(r) + mp.mpf(1) / 2
    return mp.ncdf(xa / s) - ee * ((1 - q) * mp.ncdf(xa / s) + q * mp.ncdf((xa - 1) / s))


def _delta1_both(sigma, q, e):
    with mp.workdps(DPS):
        return float(max(_delta1(sigma, q, e, "remove"), _delta1(sigma, q, e, "add")))


def _delta2_remove(sigma, q, eps):
    """Exact delta(eps) of two remove steps: the integral over the first step's outcome x ~ P of the one-step
    profile at eps - L(x) (mpmath quadrature, split where that argument crosses log(1 - q))."""
    with mp.workdps(DPS):
        s, qq = mp.mpf(sigma), mp.mpf(q)

        def dens(x):
            return ((1 - qq) * mp.npdf(x, 0, s) + qq * mp.npdf(x, 1, s)) * 1

        def loss(x):
            return mp.log(1 - qq + qq * mp.exp((2 * x - 1) / (2 * s**2)))

        def f(x):
            return dens(x) * _delta1(sigma, q, mp.mpf(eps) - loss(x), "remove")

        # the kink: eps - L(x) = log(1 - q)
        xk = s**2 * mp.log((mp.exp(mp.mpf(eps) - mp.log(1 - qq)) - 1 + qq) / qq) + mp.mpf(1) / 2
        pts = sorted({float(v) for v in (-40, -10, -3, 0, 1, 3, 6, 9, 12, 16, 20, 30, 60)} | {float(xk)})
        val = mp.quad(f, [-mp.inf] + [mp.mpf(p) for p in pts] + [mp.inf])
        return float(val)


def _rel_width(r):
    return (r.upper - r.lower) / r.upper


# ---------------------------------------------------------------------------------------------------------
# one step, small delta, against the closed form
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma,q,delta", [(0.5, 1e-3, 1e-10), (0.5, 1e-3, 1e-30), (1.0, 0.01, 1e-15)])
def test_one_step_bracket_holds_the_exact_value_and_is_narrow(sigma, q, delta):
    # issue 35: (0.5, 1e-3, 1e-10) was refused at the default grid and gave [4.906, 5.114] at others (exact 5.0068)
    r = PLDAccountant().compose(SubsampledGaussianMechanism(sigma, q), 1).get_epsilon(delta)
    # delta(eps) decreases: the exact epsilon lies in [lower, upper] iff delta(upper) <= delta <= delta(lower)
    assert _delta1_both(sigma, q, r.upper) <= delta <= _delta1_both(sigma, q, r.lower), r
    assert r.details["rtol_met"] and _rel_width(r) <= 1e-3, r


def test_one_step_exact_value_of_the_issue():
    # the exact epsilon of the issue's one-step case (bisection of the closed form at 50 digits) is 5.0068...
    with mp.workdps(DPS):
        lo, hi = mp.mpf(4), mp.mpf(6)
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _delta1(0.5, 1e-3, mid, "remove") > mp.mpf("1e-10") else (lo, mid)
    exact = float(lo)
    assert exact == pytest.approx(5.0068, abs=1e-4)
    r = PLDAccountant().compose(SubsampledGaussianMechanism(0.5, 1e-3), 1).get_epsilon(1e-10)
    assert r.lower <= exact <= r.upper and r.upper - r.lower <= 1e-3 * exact


@pytest.mark.parametrize("eps", [5.0, 16.4])
def test_one_step_delta_query_holds_the_exact_value(eps):
    exact = _delta1_both(0.5, 1e-3, eps)
    r = PLDAccountant().compose(SubsampledGaussianMechanism(0.5, 1e-3), 1).get_delta(eps)
    assert r.lower <= exact <= r.upper and _rel_width(r) <= 1e-3, (r, exact)


# ---------------------------------------------------------------------------------------------------------
# two steps, tiny delta, against the mpmath quadrature (the tilted composition answers)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("delta", [1e-15, 1e-30])
def test_two_steps_tiny_delta_against_mpmath(delta):
    sigma, q = 1.0, 0.01
    acc = PLDAccountant(direction="remove").compose(SubsampledGaussianMechanism(sigma, q), 2)
    r = acc.get_epsilon(delta)
    assert "tilt" in r.details
    assert _delta2_remove(sigma, q, r.upper) <= delta <= _delta2_remove(sigma, q, r.lower), r
    assert _rel_width(r) <= 1e-3
    d = acc.get_delta(r.upper)
    exact = _delta2_remove(sigma, q, r.upper)
    assert d.lower <= exact <= d.upper, (d, exact)


def test_two_step_quadrature_matches_the_one_step_closed_form_composition_check():
    # sanity of the two-step reference itself: delta_2 at a moderate epsilon against dp_accounting's PLD
    # (an independent discretized composition) to its discretization accuracy
    dpa = pytest.importorskip("dp_accounting")
    pld = dpa.pld.privacy_loss_distribution.from_gaussian_mechanism(
        1.0, sampling_prob=0.01, value_discretization_interval=1e-5, pessimistic_estimate=True
    )
    theirs = pld.self_compose(2).get_delta_for_epsilon(0.05)
    ours = _delta2_remove(1.0, 0.01, 0.05)
    assert ours == pytest.approx(theirs, rel=1e-3)


# ---------------------------------------------------------------------------------------------------------
# long compositions against the contour truth and the SPA's certified bracket
# ---------------------------------------------------------------------------------------------------------
def test_long_composition_small_q_follows_the_loss_scale():
    # issue 35: T 1e7, q 1e-4, sigma 2, delta 1e-5 (remove) gave [0, 0.781]; the SPA's certified bracket is
    # [0.6018, 0.6021] and the contour truth 0.60196
    mech, T, delta = SubsampledGaussianMechanism(2.0, 1e-4), 10_000_000, 1e-5
    r = PLDAccountant(direction="remove").compose(mech, T).get_epsilon(delta)
    spa = SaddlePointAccountant(direction="remove").compose(mech, T).get_epsilon(delta)
    exact, err = truth.composition_epsilon([(mech, T)], delta, direction="remove")
    assert spa.lower <= exact <= spa.upper  # the two references agree
    assert r.lower <= exact - err and exact + err <= r.upper, (r, exact)
    assert r.lower <= spa.upper and spa.lower <= r.upper  # certified brackets of the same value intersect
    assert _rel_width(r) <= 1e-3 and r.details["rtol_met"]
    assert r.details["discretization"] < 1e-4  # the grid was refined to the loss's scale


@pytest.mark.parametrize("delta", [1e-15, 1e-30])
def test_tiny_delta_long_composition_against_the_contour_truth(delta):
    mech, T = SubsampledGaussianMechanism(1.0, 0.01), 1000
    r = PLDAccountant().compose(mech, T).get_epsilon(delta)
    exact, err = truth.composition_epsilon([(mech, T)], delta)
    assert r.lower <= exact - err and exact + err <= r.upper, (r, exact, err)
    assert _rel_width(r) <= 1e-3 and r.details["rtol_met"]


def test_tiny_delta_query_against_the_contour_truth():
    mech, T, eps = SubsampledGaussianMechanism(1.0, 0.01), 1000, 7.0
    exact, err = truth.composition_delta([(mech, T)], eps)
    assert 1e-26 < exact < 1e-20
    r = PLDAccountant().compose(mech, T).get_delta(eps)
    assert r.lower <= exact - err and exact + err <= r.upper, (r, exact)
    assert _rel_width(r) <= 1e-3


# ---------------------------------------------------------------------------------------------------------
# the tolerance, the flag, and grid decisions by exception type
# ---------------------------------------------------------------------------------------------------------
def test_rtol_is_a_documented_validated_keyword():
    assert "rtol" in PLDAccountant.__doc__
    for bad in (0.0, 1.0, -1e-3, float("nan")):
        with pytest.raises(DPValueError, match="rtol"):
            PLDAccountant(rtol=bad)
    mech = SubsampledGaussianMechanism(1.0, 0.01)
    loose = PLDAccountant(rtol=0.05).compose(mech, 100).get_epsilon(1e-5)
    tight = PLDAccountant(rtol=1e-5).compose(mech, 100).get_epsilon(1e-5)
    exact, err = truth.composition_epsilon([(mech, 100)], 1e-5)
    for r in (loose, tight):
        assert r.lower <= exact - err and exact + err <= r.upper
    assert _rel_width(tight) <= 1e-5 and tight.details["rtol_met"]
    assert _rel_width(loose) <= 0.05


def test_unmet_tolerance_is_flagged_with_the_reason():
    mech = SubsampledGaussianMechanism(1.0, 0.01)
    r = PLDAccountant(discretization=0.05).compose(mech, 100).get_epsilon(1e-5)
    exact, err = truth.composition_epsilon([(mech, 100)], 1e-5)
    assert r.lower <= exact <= r.upper
    assert not r.details["rtol_met"] and "explicit discretization" in r.details["rtol_reason"]
    # a tolerance the work limits cannot reach: the best certified bracket, flagged
    r = PLDAccountant(rtol=1e-9).compose(mech, 1000).get_epsilon(1e-5)
    exact, err = truth.composition_epsilon([(mech, 1000)], 1e-5)
    assert r.lower <= exact - err and exact + err <= r.upper
    assert not r.details["rtol_met"] and r.details["rtol_reason"]


def test_grid_decisions_branch_on_exception_types_not_messages(monkeypatch):
    assert issubclass(GridLimitError, DPValueError) and issubclass(ResolutionError, NumericalError)
    real = pld_mod.discretize
    calls = []

    def limited(pair, h, tail=1e-20):
        calls.append(h)
        if h < 1e-3:  # a refusal with a message that names nothing the old code looked for
            raise GridLimitError("too many points (reworded)")
        return real(pair, h, tail)

    monkeypatch.setattr(pld_mod, "discretize", limited)
    mech = SubsampledGaussianMechanism(1.0, 0.01)
    r = PLDAccountant().compose(mech, 1).get_epsilon(1e-5)
    assert r.details["discretization"] >= 1e-3 and min(calls) < 1e-3  # coarsened by type
    assert _delta1_both(1.0, 0.01, r.upper) <= 1e-5 <= _delta1_both(1.0, 0.01, r.lower)
    # any other DPValueError is not a grid decision: it propagates
    monkeypatch.setattr(pld_mod, "discretize", lambda *a, **k: (_ for _ in ()).throw(DPValueError("discretization")))
    with pytest.raises(DPValueError):
        PLDAccountant().compose(mech, 1).get_epsilon(1e-5)


def test_same_query_same_answer_whatever_came_before():
    mech = SubsampledGaussianMechanism(1.0, 0.01)
    a = PLDAccountant().compose(mech, 1000)
    first = a.get_epsilon(1e-15)
    a.get_epsilon(1e-5)
    a.get_delta(2.0)
    again = a.get_epsilon(1e-15)
    fresh = PLDAccountant().compose(mech, 1000).get_epsilon(1e-15)
    assert (first.lower, first.upper) == (again.lower, again.upper) == (fresh.lower, fresh.upper)
    assert math.isfinite(first.upper)
