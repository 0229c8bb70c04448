"""Issue 34 (page read): the foundations page says the PLD accountant certifies a delta far below the float64
FFT floor of about 1e-12 (it composes tilted PMFs there) instead of refusing it. Checked against an independent
algorithm, the contour-integral inversion of the moment generating function (dputils.truth: no
discretization, no FFT), at the page's running example."""

from __future__ import annotations

from dputils.accountants import PLDAccountant
from dputils.mechanisms import SubsampledGaussianMechanism
from dputils.truth import composition_epsilon


def test_pld_certifies_delta_1e15_around_the_contour_truth():
    mech = SubsampledGaussianMechanism(1.0, 0.01)
    got = PLDAccountant().compose(mech, 1000).get_epsilon(1e-15)
    truth, err = composition_epsilon([(mech, 1000)], 1e-15)
    assert got.lower - err <= truth <= got.upper + err, (got.lower, truth, got.upper)
    assert (got.upper - got.lower) / got.upper < 1e-3  # a usable bracket, not a vacuous one
