"""The saddle-contour truth evaluator against independent references.

References: the exact Gaussian privacy curve (closed form in dputils.mechanisms), the authors'
20-digit mpmath epsilon values at delta = 1e-15 (SPA note table 3.6b, peers note 5.4), and
dp_accounting's PLD accountant (different algorithm) for a Laplace composition.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dputils import truth as T
from dputils.errors import DPValueError, NumericalError
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism

# authors' mpmath truth, eps(delta=1e-15), sigma=2, q=0.01, remove direction (SPA note 3.6b)
AUTHORS_TRUTH = {1500: 1.6553534717, 3048: 2.3464847867, 4500: 2.8514636235}


@pytest.mark.parametrize("n,eps", [(1, 0.5), (1, 5.0), (400, 1.0), (50, 3.0)])
def test_gaussian_closed_form(n, eps):
    sigma = 1.0 if n == 1 else 20.0 if n == 400 else 3.0
    ledger = [(GaussianMechanism(sigma).pair("remove"), n)]
    exact = float(GaussianMechanism(sigma / math.sqrt(n)).pair("remove").delta(eps))
    assert T.truth_delta(ledger, eps) == pytest.approx(exact, rel=1e-10)


def test_subsampled_gaussian_delta_note_anchors():
    # SPA note target 3: truth delta at n=3000, printed to 6 significant digits: ours must round to the same
    # digits (within half a unit of the 6th digit, plus 1e-9 relative for the quadrature)
    ledger = [(SubsampledGaussianMechanism(2.0, 0.01).pair("remove"), 3000)]
    for eps, ref in [(1.0, 4.64853e-5), (2.0, 1.95576e-12), (3.0, 9.45180e-24)]:
        half_unit = 0.5e-5 * 10.0 ** math.floor(math.log10(ref))
        assert abs(T.truth_delta(ledger, eps) - ref) <= half_unit + 1e-9 * ref


@pytest.mark.parametrize("n", [1500, 4500])
def test_epsilon_vs_authors_mpmath(n):
    ledger = [(SubsampledGaussianMechanism(2.0, 0.01).pair("remove"), n)]
    assert T.truth_epsilon(ledger, 1e-15) == pytest.approx(AUTHORS_TRUTH[n], rel=1e-8)


def test_subsampled_gaussian_vs_dp_accounting_pld():
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld

    n, sigma, q = 200, 1.0, 0.05
    ledger = [(SubsampledGaussianMechanism(sigma, q).pair("remove"), n)]
    d = pld.from_gaussian_mechanism(sigma, sampling_prob=q, value_discretization_interval=1e-5).self_compose(n)
    for eps in (0.5, 1.0, 2.0):
        ref = d.get_delta_for_epsilon(eps)  # max over add/remove; remove dominates (Lemma 3)
        # PLD is pessimistic by about its discretisation: 1e-3 relative covers it
        assert T.truth_delta(ledger, eps) == pytest.approx(ref, rel=1e-3)


def test_laplace_few_compositions_raise():
    # the atoms of the Laplace loss keep |phi|^3 far above the truncation threshold: a clear error, no number
    with pytest.raises(NumericalError, match="decay"):
        T.truth_delta([(LaplaceMechanism(1.0).pair("remove"), 3)], 1.0)


def test_laplace_many_compositions_vs_dp_accounting_pld():
    # with 200 compositions the atoms' mass is (about 0.5)^200: the inversion applies (g_eps is continuous)
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld

    n = 200
    ledger = [(LaplaceMechanism(10.0).pair("remove"), n)]
    d = pld.from_laplace_mechanism(10.0, value_discretization_interval=1e-5).self_compose(n)
    for eps in (1.0, 2.0):
        ref = d.get_delta_for_epsilon(eps)  # pessimistic by about its discretisation
        assert T.truth_delta(ledger, eps) == pytest.approx(ref, rel=1e-3)


def test_composition_of_mechanisms_takes_the_larger_direction():
    mech = SubsampledGaussianMechanism(1.0, 0.05)
    per = {d: T.truth_delta([(mech.pair(d), 100)], 1.0) for d in ("remove", "add")}
    both, err = T.composition_delta([(mech, 100)], 1.0)
    assert both == max(per.values()) and err < 1e-9 * both
    assert T.composition_delta([(mech, 100)], 1.0, direction="add")[0] == per["add"]
    e, e_err = T.composition_epsilon([(mech, 100)], both)
    assert e == pytest.approx(1.0, abs=1e-9) and e_err < 1e-9
    assert T.composition_epsilon([(mech, 100)], 0.999)[0] == 0.0  # delta(0) <= delta


def test_bad_input():
    ledger = [(GaussianMechanism(1.0).pair("remove"), 3)]
    with pytest.raises(DPValueError):
        T.truth_delta(ledger, -1.0)
    with pytest.raises(DPValueError):
        T.truth_epsilon(ledger, 1.5)


def test_epsilon_with_a_guess_beyond_the_bounded_directions_largest_loss():
    # add direction of the subsampled Gaussian: losses <= -m log(1 - q) = 1.0259 at m = 20, q = 0.05; a guess from
    # the remove direction (~1.98) lies beyond it and has no saddle point. The truth must still find the add root,
    # which the foundation's certified PLD bracket (h = 1e-5) pins down independently.
    from dputils import PLDAccountant, SubsampledGaussianMechanism
    from dputils.truth import composition_epsilon

    mech = SubsampledGaussianMechanism(1.0, 0.05)
    e_add, err = composition_epsilon([(mech, 20)], 1e-5, direction="add", eps_guess=1.98)
    r = PLDAccountant(direction="add", discretization=1e-5).compose(mech, 20).get_epsilon(1e-5)
    assert r.lower - 1e-9 <= e_add <= r.upper + 1e-9 and err < 1e-8
    e_both, _ = composition_epsilon([(mech, 20)], 1e-5, eps_guess=1.98)
    assert e_both > e_add


def test_monte_carlo_tail_of_the_gaussian_loss_against_its_normal_law():
    # the Gaussian mechanism (sensitivity 1, sigma 2): L = log p/q under Q is N(-mu^2/2, mu^2), mu = 1/2, so a
    # sum of m losses is N(-m mu^2/2, m mu^2); the frequencies must lie within 5 standard errors
    from scipy import stats

    m, n, mu = 5, 200_000, 0.5
    eps = np.array([-1.0, 0.0, 1.0, 2.0])
    freq = T.monte_carlo_tail(GaussianMechanism(2.0).pair("remove"), m, eps, n, np.random.default_rng(1))
    exact = stats.norm.sf(eps, loc=-m * mu**2 / 2, scale=math.sqrt(m) * mu)
    assert freq.shape == (4,)
    assert np.all(np.abs(freq - exact) <= 5 * np.sqrt(exact * (1 - exact) / n) + 1e-12)
    with pytest.raises(DPValueError):
        T.monte_carlo_tail(GaussianMechanism(2.0).pair("remove"), 0, eps, n, np.random.default_rng(1))


def test_mpmath_loss_moments_against_the_gaussian_closed_form():
    # q = 1: L = (2Y - 1) / (2 sigma^2) with Y ~ N(1, sigma^2), so L ~ N(1/(2 sigma^2), 1/sigma^2) and
    # E|L - EL|^3 = 2 sqrt(2/pi) sd^3
    sigma = 2.0
    got = T.subsampled_gaussian_loss_moments_mpmath(sigma, 1.0)
    sd = 1 / sigma
    assert got["mean"] == pytest.approx(1 / (2 * sigma**2), rel=1e-12)
    assert got["var"] == pytest.approx(sd**2, rel=1e-12)
    assert got["abs3"] == pytest.approx(2 * math.sqrt(2 / math.pi) * sd**3, rel=1e-12)


def test_monte_carlo_profile_of_composed_gaussians_against_gdp():
    # m Gaussian steps with sigma 2 are exactly mu-GDP with mu = sqrt(m)/2: the estimates must lie within
    # 5 standard errors of the closed-form profile, the errors must be positive and shrink like 1/sqrt(n)
    from dputils.curves import gdp_delta

    m, eps = 4, np.array([0.0, 0.5, 1.0])
    pair = GaussianMechanism(2.0).pair("remove")
    est, se = T.monte_carlo_profile(pair, m, eps, 100_000, np.random.default_rng(3))
    exact = np.array([float(gdp_delta(e, math.sqrt(m) / 2)) for e in eps])
    assert est.shape == se.shape == (3,) and np.all(se > 0)
    assert np.all(np.abs(est - exact) <= 5 * se)
    _, se4 = T.monte_carlo_profile(pair, m, eps, 400_000, np.random.default_rng(4))
    assert np.all(se4 < 0.6 * se)
    with pytest.raises(DPValueError):
        T.monte_carlo_profile(pair, 0, eps, 10, np.random.default_rng(0))
