"""The PLD accountant: exact brackets for Gaussians, dp_accounting agreement, composition, errors."""

import math

import dp_accounting
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dputils.accountants import PLDAccountant
from dputils.curves import gdp_delta, gdp_epsilon
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism


@pytest.mark.parametrize("sigma,T", [(1.0, 1), (2.0, 10), (10.0, 100)])
def test_gaussian_composition_bracket_contains_exact_gdp(sigma, T):
    acc = PLDAccountant().compose(GaussianMechanism(sigma), T)
    mu = math.sqrt(T) / sigma
    for eps in (0.0, 0.3, 1.0, 3.0):
        r = acc.get_delta(eps)
        exact = gdp_delta(eps, mu)
        assert r.lower <= exact <= r.upper
        assert r.value == r.upper
    for delta in (1e-3, 1e-6):
        r = acc.get_epsilon(delta)
        exact = gdp_epsilon(delta, mu)
        assert r.lower <= exact <= r.upper
        assert (r.upper - r.lower) / exact < 1e-3


def test_heterogeneous_gaussian_composition_is_exact_gdp():
    acc = PLDAccountant().compose(GaussianMechanism(2.0), 3).compose(GaussianMechanism(4.0), 5)
    mu = math.sqrt(3 / 4 + 5 / 16)
    r = acc.get_epsilon(1e-5)
    exact = gdp_epsilon(1e-5, mu)
    assert r.lower <= exact <= r.upper


def test_single_laplace_step_matches_its_closed_form_profile():
    acc = PLDAccountant().compose(LaplaceMechanism(1.0), 1)
    for eps in (0.0, 0.5, 0.9):
        r = acc.get_delta(eps)
        exact = 1 - math.exp((eps - 1) / 2)
        assert r.lower <= exact + 1e-12 and exact <= r.upper + 1e-12


@pytest.mark.parametrize("sigma,q,T", [(1.0, 0.01, 1000), (0.8, 0.02, 2000), (2.0, 0.1, 300), (0.5, 0.2, 3)])
def test_subsampled_gaussian_agrees_with_dp_accounting(sigma, q, T):
    m = SubsampledGaussianMechanism(sigma, q)
    ours = PLDAccountant().compose(m, T).get_epsilon(1e-5)
    a = dp_accounting.pld.PLDAccountant()
    a.compose(m.to_dp_event(), T)
    theirs = a.get_epsilon(1e-5)
    assert ours.value == pytest.approx(theirs, rel=1e-4)
    assert ours.lower <= theirs * (1 + 1e-9)
    assert (ours.upper - ours.lower) / ours.upper < 2e-3


def test_pinned_value_from_dp_accounting_tests():
    # Poisson(q=0.2, sigma=0.5) composed 3 times: dp_accounting's tests pin delta(eps=1) = 0.15594 (4 places).
    # Our certified bracket at h=1e-5 pins it to ~2e-7 and must contain dp_accounting's live upper bound's limit.
    r = PLDAccountant(discretization=1e-5).compose(SubsampledGaussianMechanism(0.5, 0.2), 3).get_delta(1.0)
    assert abs(r.value - 0.15594) < 1e-4
    assert r.upper - r.lower < 1e-6
    from dp_accounting.pld import privacy_loss_distribution as pld

    theirs = pld.from_gaussian_mechanism(0.5, sampling_prob=0.2, value_discretization_interval=1e-5).self_compose(3)
    assert r.lower <= theirs.get_delta_for_epsilon(1.0) <= r.upper + 1e-9


def test_directions():
    m = SubsampledGaussianMechanism(1.0, 0.05)
    both = PLDAccountant().compose(m, 100).get_delta(0.5)
    add = PLDAccountant(direction="add").compose(m, 100).get_delta(0.5)
    rem = PLDAccountant(direction="remove").compose(m, 100).get_delta(0.5)
    assert both.value == pytest.approx(max(add.value, rem.value))
    assert both.details["direction"] in ("add", "remove")


def test_tiny_delta_is_answered_by_the_tilted_composition():
    # issue 35: delta 1e-17 was refused at the 1e-4 grid (the FFT power's rounding bound exceeded it); the
    # tilted composition answers, on the same grid, a bracket holding the contour truth (dputils.truth)
    from dputils import truth

    mech = SubsampledGaussianMechanism(2.0, 0.01)
    acc = PLDAccountant(discretization=1e-4).compose(mech, 1500)
    res = acc.get_epsilon(1e-17)
    exact, err = truth.composition_epsilon([(mech, 1500)], 1e-17)
    assert "tilt" in res.details and res.lower <= exact - err and exact + err <= res.upper
    assert res.upper >= acc.get_epsilon(1e-12).lower


def test_bad_input():
    acc = PLDAccountant().compose(GaussianMechanism(1.0), 1)
    with pytest.raises(DPValueError, match="delta"):
        acc.get_epsilon(0.0)
    with pytest.raises(DPValueError, match="delta"):
        acc.get_epsilon(1.0)
    with pytest.raises(DPValueError, match="epsilon"):
        acc.get_delta(-0.1)
    with pytest.raises(DPValueError, match="epsilon"):
        acc.get_delta(float("nan"))
    with pytest.raises(DPValueError, match="count"):
        PLDAccountant().compose(GaussianMechanism(1.0), 0)
    with pytest.raises(ValueError, match="nothing composed"):
        PLDAccountant().get_delta(1.0)
    with pytest.raises(DPValueError):
        PLDAccountant(direction="sideways")


@given(st.floats(0.6, 3.0), st.floats(0.005, 0.2), st.integers(1, 200))
def test_epsilon_monotone_in_steps_and_sigma(sigma, q, T):
    m = SubsampledGaussianMechanism(sigma, q)
    e1 = PLDAccountant(discretization=1e-3).compose(m, T).get_epsilon(1e-5)
    e2 = PLDAccountant(discretization=1e-3).compose(m, T + 20).get_epsilon(1e-5)
    e3 = PLDAccountant(discretization=1e-3).compose(SubsampledGaussianMechanism(sigma * 1.2, q), T).get_epsilon(1e-5)
    # certified brackets: the upper bound at more steps is at least the lower bound at fewer
    assert e2.upper >= e1.lower
    assert e3.lower <= e1.upper
    assert e1.lower <= e1.value <= e1.upper


@given(st.floats(0.6, 3.0), st.floats(0.005, 0.5), st.lists(st.floats(0.0, 5.0), min_size=2, max_size=5))
def test_delta_nonincreasing_in_epsilon(sigma, q, eps):
    acc = PLDAccountant(discretization=1e-3).compose(SubsampledGaussianMechanism(sigma, q), 50)
    e = sorted(eps)
    ds = [acc.get_delta(x).value for x in e]
    assert all(b <= a + 1e-15 for a, b in zip(ds, ds[1:]))
    assert all(0 <= d <= 1 for d in ds)


def _subsampled_gaussian_eps_mpmath(sigma, q, delta):
    """Exact epsilon(delta) of one Poisson-subsampled Gaussian step (remove direction, the worse one for
    epsilon above -log(1 - q)): delta(eps) = q * delta_G(log(1 + (e^eps - 1)/q)) with the Gaussian hockey
    stick delta_G(e) = Phi(mu/2 - e/mu) - e^e Phi(-mu/2 - e/mu), mu = 1/sigma; solved with 60 digits."""
    import mpmath as mp

    with mp.workdps(60):
        mu = 1 / mp.mpf(sigma)

        def d(eps):
            e = mp.log(1 + mp.expm1(eps) / q)
            return q * (mp.ncdf(mu / 2 - e / mu) - mp.exp(e) * mp.ncdf(-mu / 2 - e / mu)) - delta

        lo, hi = mp.mpf(1), mp.mpf(5000)  # d(lo) > 0 > d(hi); bisection (d is decreasing)
        for _ in range(120):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if d(mid) > 0 else (lo, mid)
        return float(lo)


def test_small_noise_answers_on_a_coarser_grid():
    # issue 24: sigma 0.02 needs 16.8 million single-step grid points at h 1e-4 and was refused; the default
    # grid now coarsens until it fits and the certified bracket still holds the exact value
    from dputils.mechanisms import SubsampledGaussianMechanism

    acc = PLDAccountant().compose(SubsampledGaussianMechanism(0.02, 0.01), 1)
    res = acc.get_epsilon(1e-5)
    truth = _subsampled_gaussian_eps_mpmath(0.02, 0.01, 1e-5)
    assert res.details["discretization"] > 1e-4
    assert res.lower <= truth <= res.upper and res.upper - res.lower <= 1e-4 * truth
    with pytest.raises(DPValueError, match="discretization"):  # an explicit grid is used as given
        PLDAccountant(discretization=1e-4).compose(SubsampledGaussianMechanism(0.02, 0.01), 1).get_epsilon(1e-5)


def test_resolution_refusal_retries_on_a_coarser_default_grid():
    # issue 24 (dp_accounting's epsilon/delta consistency test): one step at q 0.01, sigma 0.1, delta 1e-9
    # was refused (floating-point error bound 8.9e-10 over half of delta); the default grid now retries coarser
    from dputils.mechanisms import SubsampledGaussianMechanism

    # (issue 35: one step is now the discretized PMF itself, with no FFT rounding, so the 1e-4 grid answers)
    acc = PLDAccountant().compose(SubsampledGaussianMechanism(0.1, 0.01), 1)
    res = acc.get_epsilon(1e-9)
    truth = _subsampled_gaussian_eps_mpmath(0.1, 0.01, 1e-9)
    assert res.lower <= truth <= res.upper
    assert acc.get_delta(res.upper).upper <= 1e-9
    fixed = PLDAccountant(discretization=1e-4).compose(SubsampledGaussianMechanism(0.1, 0.01), 1).get_epsilon(1e-9)
    assert fixed.lower <= truth <= fixed.upper
