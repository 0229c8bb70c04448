"""The dp_accounting adapter (dputils.interop.dp_accounting) against dp_accounting's own accountants.

Truths: dp_accounting's PLD accountant (its pessimistic estimate is an upper bound with a discretization
error of about 1e-4 relative here), its RDP accountant, and the closed-form Gaussian epsilon.
"""

from __future__ import annotations

import math
import warnings

import dp_accounting as dpa
import pytest
from dp_accounting.mechanism_calibration import ExplicitBracketInterval, calibrate_dp_mechanism

from dputils import curves
from dputils.errors import DPValueError
from dputils.interop.dp_accounting import DputilsPrivacyAccountant, make_accountant


def dpsgd(sigma: float, q: float = 0.01, steps: int = 1000) -> dpa.DpEvent:
    return dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)


HETERO = dpa.ComposedDpEvent(
    [
        dpa.GaussianDpEvent(5.0),
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.02, dpa.GaussianDpEvent(1.0)), 300),
        dpa.LaplaceDpEvent(10.0),
        dpa.NoOpDpEvent(),
    ]
)


def _quiet(fn, *a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the saddle-point accountant's degraded-regime warning
        return fn(*a)


@pytest.mark.parametrize("event, delta", [(dpsgd(1.0), 1e-5), (HETERO, 1e-6)], ids=["dpsgd", "heterogeneous"])
def test_pld_agrees_with_dp_accounting_pld_and_brackets_it(event, delta):
    theirs = dpa.pld.PLDAccountant().compose(event).get_epsilon(delta)
    acc = make_accountant("pld").compose(event)
    ours, res = acc.get_epsilon(delta), acc.get_epsilon_bracket(delta)
    assert isinstance(acc, dpa.PrivacyAccountant) and ours == res.upper
    assert abs(ours - theirs) <= 1e-3 * theirs  # both upper bounds on a 1e-4 grid
    assert res.lower <= theirs * (1 + 1e-6)  # dp_accounting's upper bound is never below our certified lower bound
    d_ours = acc.get_delta(ours)
    assert d_ours <= delta * (1 + 1e-6)


@pytest.mark.parametrize("name", ["spa", "rdp"])
def test_other_accountants_bound_dp_accounting_pld_from_above(name):
    truth = dpa.pld.PLDAccountant().compose(HETERO).get_epsilon(1e-6)
    acc = make_accountant(name).compose(HETERO)
    res = _quiet(acc.get_epsilon_bracket, 1e-6)
    upper = _quiet(acc.get_epsilon, 1e-6)
    assert upper == res.upper and upper >= truth * (1 - 1e-3)  # certified upper ends (PLD grid error 1e-3)
    if res.lower is not None:
        assert res.lower <= truth * (1 + 1e-3)
    if name == "rdp":  # dp_accounting's RDP accountant on the same events: ours refines the order, never looser
        theirs = dpa.rdp.RdpAccountant().compose(HETERO).get_epsilon(1e-6)
        assert theirs * 0.95 <= upper <= theirs * (1 + 1e-9)


def test_estimate_report_and_gaussian_closed_form():
    sigma, steps, delta = 3.0, 10, 1e-6
    ev = dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(sigma), steps)
    exact = curves.gdp_epsilon(delta, math.sqrt(steps) / sigma)
    for name in ("pld", "spa", "rdp"):
        acc = make_accountant(name).compose(ev)
        up = _quiet(acc.get_epsilon, delta)
        assert up >= exact * (1 - 1e-9), name
    est = make_accountant("spa", report="estimate").compose(ev)
    assert abs(_quiet(est.get_epsilon, delta) - exact) <= 1e-2 * exact


def test_unsupported_events_are_named():
    sampled_laplace = dpa.PoissonSampledDpEvent(0.02, dpa.LaplaceDpEvent(3.0))
    for name, event, fragment in [
        ("pld", dpa.SampledWithoutReplacementDpEvent(100, 10, dpa.GaussianDpEvent(1.0)), "not supported"),
        ("spa", dpa.RandomizedResponseDpEvent(0.5, 2), "not supported"),
        ("pld", dpa.PoissonSampledDpEvent(0.1, dpa.RandomizedResponseDpEvent(0.5, 2)), "Poisson sampling of"),
    ]:
        acc = make_accountant(name)
        wrapped = dpa.ComposedDpEvent([dpa.GaussianDpEvent(2.0), event])
        assert not acc.supports(wrapped), (name, event)
        with pytest.raises(dpa.UnsupportedEventError, match=fragment):
            acc.compose(wrapped)
        assert not acc.inner.ledger  # nothing was half-composed
    for name in ("pld", "rdp", "spa", "edgeworth"):  # every accountant has the subsampled Laplace (issue 24)
        assert make_accountant(name).supports(sampled_laplace), name


def test_edge_events_and_relation():
    acc = make_accountant("pld")
    assert acc.get_epsilon(1e-5) == 0.0 and acc.get_delta(1.0) == 0.0  # nothing composed
    acc.compose(dpa.PoissonSampledDpEvent(0.0, dpa.GaussianDpEvent(1.0)), 5)  # never sampled
    assert acc.get_epsilon(1e-5) == 0.0
    full = make_accountant("pld").compose(dpa.PoissonSampledDpEvent(1.0, dpa.GaussianDpEvent(2.0)))
    assert full.get_epsilon(1e-5) == pytest.approx(curves.gdp_epsilon(1e-5, 0.5), rel=1e-3)  # q = 1: no sampling
    inf = make_accountant("rdp").compose(dpa.GaussianDpEvent(0.0))
    assert inf.get_epsilon(1e-5) == math.inf and inf.get_delta(10.0) == 1.0
    assert make_accountant("pld").compose(dpa.NonPrivateDpEvent()).get_epsilon(1e-3) == math.inf
    with pytest.raises(DPValueError, match="ADD_OR_REMOVE_ONE"):
        DputilsPrivacyAccountant("pld", dpa.NeighboringRelation.REPLACE_ONE)
    with pytest.raises(DPValueError, match="name"):
        make_accountant("moments")
    with pytest.raises(DPValueError, match="target_delta"):
        make_accountant("pld").compose(dpsgd(1.0, steps=10)).get_epsilon(1.5)
    assert make_accountant("pld", discretization=1e-3).inner.h == 1e-3


def test_calibrate_dp_mechanism_works_unchanged():
    target_eps, delta = 2.0, 1e-5
    bracket = ExplicitBracketInterval(0.5, 5.0)
    ours = calibrate_dp_mechanism(
        lambda: make_accountant("pld", discretization=1e-3), dpsgd, target_eps, delta, bracket, tol=1e-3
    )
    theirs = calibrate_dp_mechanism(
        lambda: dpa.pld.PLDAccountant(value_discretization_interval=1e-3), dpsgd, target_eps, delta, bracket, tol=1e-3
    )
    assert abs(ours - theirs) <= 5e-3
    # the answer keeps the promise it was calibrated for
    assert make_accountant("pld").compose(dpsgd(ours)).get_epsilon(delta) <= target_eps * (1 + 1e-3)
    steps = calibrate_dp_mechanism(
        lambda: make_accountant("rdp"),
        lambda t: dpsgd(1.0, steps=t),
        target_eps,
        delta,
        ExplicitBracketInterval(1, 20000),
        discrete=True,
    )
    assert make_accountant("rdp").compose(dpsgd(1.0, steps=steps)).get_epsilon(delta) <= target_eps
    assert make_accountant("rdp").compose(dpsgd(1.0, steps=steps + 1)).get_epsilon(delta) > target_eps


def test_accountants_say_what_they_support():
    from dputils.accountants.pld import PLDAccountant
    from dputils.accountants.rdp import RDPAccountant
    from dputils.mechanisms import SubsampledGaussianMechanism, SubsampledLaplaceMechanism

    lap = SubsampledLaplaceMechanism(3.0, 0.02)
    assert PLDAccountant().supports(SubsampledGaussianMechanism(1.0, 0.1))
    assert PLDAccountant().supports(lap) and RDPAccountant().supports(lap)  # both since issue 24
    with pytest.raises(DPValueError, match="rdp: unsupported mechanism"):
        RDPAccountant().check_supported(object())


# ------------------------------------------------------------------------------------------------ issue 24
@pytest.mark.parametrize("name", ["pld", "rdp", "spa", "edgeworth"])
def test_invalid_parameters_are_value_errors_not_unsupported(name):
    # invalid is not unsupported: the peers' suites expect ValueError (DPValueError is one), naming the field
    for event, fragment in [
        (dpa.GaussianDpEvent(-1.0), "Noise multiplier"),
        (dpa.LaplaceDpEvent(float("nan")), "noise_multiplier"),
        (dpa.PoissonSampledDpEvent(1.1, dpa.GaussianDpEvent(1.0)), "Sampling rate"),
        (dpa.PoissonSampledDpEvent(-0.1, dpa.GaussianDpEvent(1.0)), "Sampling rate"),
        (dpa.PoissonSampledDpEvent("a", dpa.GaussianDpEvent(1.0)), "sampling_probability"),
        (dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(1.0), 2.5), "count"),
    ]:
        acc = make_accountant(name)
        with pytest.raises(DPValueError, match=fragment):
            acc.compose(dpa.ComposedDpEvent([dpa.GaussianDpEvent(2.0), event]))
        assert not acc.inner.ledger
    for count in (0, -1, 2.5, None):
        with pytest.raises(DPValueError, match="count"):
            make_accountant(name).compose(dpa.GaussianDpEvent(1.0), count)


def test_deeply_nested_events_are_flattened_without_recursion():
    event = dpa.GaussianDpEvent(30.0)
    for _ in range(2000):
        event = dpa.ComposedDpEvent([event])
    acc = make_accountant("pld")
    assert acc._maybe_compose(event, 1, False) is None
    try:
        acc.compose(event)
    except DPValueError as exc:  # dp_accounting's own ledger may recurse; then a named refusal, no traceback
        assert "nested" in str(exc)
    else:
        assert acc.get_epsilon(1e-5) == pytest.approx(curves.gdp_epsilon(1e-5, 1 / 30.0), rel=1e-3)


def test_unknown_options_are_named():
    with pytest.raises(DPValueError, match="bogus_option"):
        make_accountant("pld", bogus_option=1)
    with pytest.raises(DPValueError, match="orders"):
        make_accountant("rdp", orders="abc")


@pytest.mark.parametrize("name", ["pld", "rdp", "spa", "edgeworth"])
def test_delta_zero_and_one_and_epsilon_infinity(name):
    # the interface allows target_delta in [0, 1] and epsilon in [0, inf] (dp_accounting's abstract tests)
    empty = make_accountant(name)
    assert empty.get_epsilon(0) == 0 and empty.get_delta(0) == 0 and empty.get_delta(math.inf) == 0
    never = make_accountant(name).compose(dpa.PoissonSampledDpEvent(0, dpa.GaussianDpEvent(0)))
    assert never.get_epsilon(0) == 0 and never.get_delta(0) == 0
    gauss = make_accountant(name).compose(dpa.GaussianDpEvent(1.0))
    assert gauss.get_epsilon(0) == math.inf  # the Gaussian loss is unbounded: no pure DP
    assert gauss.get_epsilon(1) == 0 and gauss.get_delta(math.inf) == 0
    nonpriv = make_accountant(name).compose(dpa.NonPrivateDpEvent())
    assert nonpriv.get_epsilon(0) == math.inf and nonpriv.get_epsilon(1) == math.inf
    assert nonpriv.get_delta(0) == 1 and nonpriv.get_delta(math.inf) == 1
    for bad in (-0.1, 1.5, float("nan"), "x"):
        with pytest.raises(DPValueError, match="target_delta"):
            gauss.get_epsilon(bad)


def test_pure_dp_epsilon_of_laplace_compositions():
    # epsilon(0) is the largest privacy loss: 1/b per Laplace, log(1 + q(e^{1/b} - 1)) when Poisson-sampled
    acc = make_accountant("spa").compose(dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(2.0), 3))
    assert acc.get_epsilon(0) == pytest.approx(1.5, rel=1e-12)
    acc.compose(dpa.PoissonSampledDpEvent(0.1, dpa.LaplaceDpEvent(0.5)))
    assert acc.get_epsilon(0) == pytest.approx(1.5 + math.log1p(0.1 * math.expm1(2.0)), rel=1e-12)


@pytest.mark.parametrize("name", ["pld", "rdp", "spa", "edgeworth"])
def test_default_calibration_search_works_with_every_adapter(name):
    # dp_accounting's default search starts at noise 0: non-private, epsilon infinity (issue 24)
    def make(s):
        return dpsgd(s, q=0.01, steps=1000)

    sigma = _quiet(calibrate_dp_mechanism, lambda: make_accountant(name), make, 1.5, 1e-5)
    theirs = calibrate_dp_mechanism(dpa.pld.PLDAccountant, make, 1.5, 1e-5)
    assert _quiet(make_accountant(name).compose(make(sigma)).get_epsilon, 1e-5) <= 1.5
    assert sigma >= theirs * (1 - 1e-3)  # a certified calibration never asks for less noise than the truth
    if name != "rdp":
        assert sigma <= theirs * (1 + 1e-2)


@pytest.mark.parametrize("name", ["spa", "edgeworth"])
def test_spa_and_edgeworth_report_useful_certified_numbers(name):
    # plain Gaussian: closed form (Edgeworth used to answer delta 1.0 and epsilon infinity)
    g = make_accountant(name).compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(math.sqrt(3)), 3))
    exact = curves.gdp_delta(1.0, 1.0)
    assert exact <= _quiet(g.get_delta, 1.0) <= exact + 1e-3
    # subsampled Gaussian: dp_accounting's PLD test pins 0.15594 (spa's Theorem-5 end was 0.485)
    s = make_accountant(name).compose(
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.2, dpa.GaussianDpEvent(0.5)), 3)
    )
    res = _quiet(s.get_delta_bracket, 1.0)
    assert res.lower <= 0.15594 + 1e-5 and abs(res.upper - 0.15594) <= 1e-3
    # Laplace at tiny delta (SPA raised NumericalError): exact epsilon(delta) = 1 + 2 log(1 - delta) for b = 1
    lap = make_accountant(name).compose(dpa.LaplaceDpEvent(1.0))
    for delta in (1e-14, 1e-10):
        assert 1 + 2 * math.log1p(-delta) <= _quiet(lap.get_epsilon, delta) <= 1.0 + 1e-9
    one = make_accountant(name).compose(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(0.1)))
    theirs = (
        dpa.pld.PLDAccountant().compose(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(0.1))).get_epsilon(1e-5)
    )
    assert _quiet(one.get_epsilon, 1e-5) == pytest.approx(theirs, rel=1e-3)


@pytest.mark.parametrize("name", ["pld", "rdp", "spa", "edgeworth"])
@pytest.mark.parametrize("sigma", [1e-300, 1e-100, 1e-20])
def test_tiny_noise_gives_the_projects_errors(name, sigma):
    # issue 24 fuzz: sigma 1e-300 gave bare ArithmeticError / OverflowError / ZeroDivisionError
    from dputils.errors import NumericalError

    acc = make_accountant(name)
    try:
        acc.compose(dpa.GaussianDpEvent(sigma))
        value = _quiet(acc.get_epsilon, 1e-5)
    except (DPValueError, NumericalError) as exc:
        assert str(exc)
    else:
        assert value > 1e30  # an answer, then a huge one (exact: mu^2 / 2 and more)
