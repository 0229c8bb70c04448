"""Tests of dputils.matrix.noise_curves (calibrated-noise curves) and dputils.matrix.posterior_paths (Figure 4's
posterior bounds). References: the closed-form (epsilon, delta) curve of the Gaussian mechanism, scipy's brentq on
it, the package's plain Monte Carlo, dp_accounting's PLD, and the prior 1/b of Bayes' rule at the first step."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dputils.errors import DPValueError, NumericalError
from dputils.matrix import build_strategy, rho_remove
from dputils.matrix.allocation import MatrixMonteCarloAccountant, MatrixRenyiAccountant
from dputils.matrix.condcomp import reverse_hazard_bounds
from dputils.matrix.mechanism import BallsInBinsMatrixMechanism
from dputils.matrix.noise_curves import (
    ImportanceMonteCarlo,
    PlainGaussianRDP,
    PoissonSubsampledPLD,
    PriorWeightsPLD,
    RemoveOnlyRDP,
    mc_grid_deltas,
    mc_sigma,
    renyi_sigma,
    secant_calibrate,
    sigma_family,
)
from dputils.matrix.posterior_paths import allocation_paths, epoch_max, participant_posterior_path


def _gauss_delta(sigma, eps, sens=1.0):
    """delta(eps) of the Gaussian mechanism (sensitivity sens, noise sigma), closed form."""
    a = sens / (2 * sigma)
    return norm.cdf(a - eps * sigma / sens) - math.exp(eps) * norm.cdf(-a - eps * sigma / sens)


class _Gauss:
    calls = 0

    def __init__(self, sigma):
        self.sigma = sigma
        _Gauss.calls += 1

    def get_delta(self, eps):
        return _gauss_delta(self.sigma, eps)


@pytest.mark.parametrize("eps, delta, guess", [(1.0, 1e-5, 1.0), (0.5, 1e-6, 20.0), (4.0, 1e-3, 0.3)])
def test_secant_calibrate_brackets_the_closed_form_root(eps, delta, guess):
    root = brentq(lambda s: _gauss_delta(s, eps) - delta, 0.05, 100.0, xtol=1e-14, rtol=1e-14)
    hi, lo = secant_calibrate(_Gauss, eps, delta, guess, 2e-3, bracket=True)
    assert lo < root <= hi * (1 + 1e-12)
    assert hi / lo - 1 <= 2e-3 * (1 + 1e-9)
    assert _gauss_delta(hi, eps) <= delta
    assert secant_calibrate(_Gauss, eps, delta, guess, 2e-3) == hi


def test_secant_calibrate_cache_and_errors():
    cache = {}
    _Gauss.calls = 0
    s = secant_calibrate(_Gauss, 1.0, 1e-5, 1.0, 1e-3, cache=cache)
    assert s in cache and _Gauss.calls == len(cache)
    secant_calibrate(_Gauss, 1.0, 1e-5, 1.0, 1e-3, cache=cache)  # the same points again: all cached
    assert _Gauss.calls == len(cache)

    class Flat:
        def __init__(self, sigma):
            pass

        def get_delta(self, eps):
            return 0.5

    with pytest.raises(NumericalError, match="no bracket"):
        secant_calibrate(Flat, 1.0, 1e-5, 1.0, 1e-3)
    for bad in (dict(guess=0.0), dict(rel_tol=0.0), dict(delta=1.0)):
        args = {**dict(guess=1.0, rel_tol=1e-3, delta=1e-5), **bad}
        with pytest.raises(DPValueError):
            secant_calibrate(_Gauss, 1.0, args["delta"], args["guess"], args["rel_tol"])


def test_renyi_sigma_is_the_rounded_up_sigma_of_every_order():
    """The order-windowed search returns a sigma that meets the target with *all* orders, and a sigma smaller by
    the relative tolerance fails with all orders (so no order above the window was missed)."""
    st = build_strategy("identity", 1, 20)
    orders = range(2, 65)
    eps_list, delta, rel_tol = [0.5, 2.0], 1e-5, 2e-3
    cache = {}
    got = renyi_sigma(st, orders, eps_list, delta, rel_tol=rel_tol, tier_budget=2e8, cache=cache)
    full = sigma_family(MatrixRenyiAccountant, st, orders=orders)
    for e, s in zip(eps_list, got):
        assert float(full(s).get_delta(e)) <= delta
        assert float(full(s / (1 + rel_tol)).get_delta(e)) > delta
        assert float(cache[e].get_delta(e)) <= delta  # the accountant at the answer
    assert got[0] > got[1]


def test_importance_monte_carlo_agrees_with_plain_monte_carlo():
    b, sig = 10, 0.8
    plain = (
        MatrixMonteCarloAccountant(samples=200_000, seed=3)
        .compose(BallsInBinsMatrixMechanism(build_strategy("identity", 1, b), sig))
        .losses()["remove"]
    )
    for e in (1.0, 2.0):
        v_p = -np.expm1(np.minimum(e - plain, 0.0))
        v_i = ImportanceMonteCarlo(b, sig, 50_000, seed=1).terms(e)
        se = math.hypot(v_p.std() / math.sqrt(v_p.size), v_i.std() / math.sqrt(v_i.size))
        assert abs(v_p.mean() - v_i.mean()) <= 4 * se
    # the same random numbers at every sigma: the estimate is a smooth, decreasing function of sigma
    d = [ImportanceMonteCarlo(b, s, 20_000, seed=1).get_delta(1.0) for s in (0.7, 0.75, 0.8)]
    assert d[0] > d[1] > d[2] > 0
    with pytest.raises(DPValueError):
        ImportanceMonteCarlo(b, sig, 100, weights=(0.5, 0.5, 0.0))


def test_mc_sigma_interpolates_log_delta_linearly():
    grid = np.array([0.5, 1.0, 1.5, 2.0])
    est = np.exp(-4.0 * grid)[:, None] * np.ones((1, 2))  # log delta = -4 sigma
    se = 0.1 * est
    s, err = mc_sigma(grid, est, se, 0, math.exp(-5.0))
    assert s == pytest.approx(1.25, rel=1e-12)  # -4 sigma = -5
    assert err == pytest.approx(0.1 / 4.0, rel=1e-12)  # relative error / |slope of log delta|
    assert all(math.isnan(v) for v in mc_sigma(grid, est, se, 1, 1e-12))  # the grid does not reach it
    assert all(math.isnan(v) for v in mc_sigma(grid, est, se, 1, 0.9))  # already met at the first point


def test_mc_grid_deltas_shape_and_monotone():
    st = build_strategy("identity", 1, 5)
    est, se = mc_grid_deltas(st, [0.6, 1.2], [0.5, 1.0, 2.0], 20_000, seed=0)
    assert est.shape == se.shape == (2, 3)
    assert np.all(np.diff(est, axis=1) <= 0) and np.all(np.diff(est, axis=0) <= 0)
    assert np.all(se >= 0) and np.all(est > 0)


def test_plain_gaussian_rdp_bounds_the_exact_gaussian():
    for sig, sens2, eps in [(1.0, 1.0, 1.0), (2.0, 3.0, 0.5)]:
        d = PlainGaussianRDP(sig, sens2, 64).get_delta(eps)
        exact = _gauss_delta(sig, eps, math.sqrt(sens2))
        assert exact <= d <= 1.0


def test_remove_only_is_below_the_renyi_accountant():
    st = build_strategy("identity", 2, 20)  # diagonal G: one band is exact
    ro = RemoveOnlyRDP(st, 1.0, range(2, 33))
    assert np.allclose(ro.rho, rho_remove(st.gram, 1.0, np.arange(2, 33), 1)[0])
    full = MatrixRenyiAccountant(orders=range(2, 33)).compose(BallsInBinsMatrixMechanism(st, 1.0))
    for e in (0.5, 2.0):
        assert ro.get_delta(e) <= float(full.get_delta(e)) * (1 + 1e-12)


def test_prior_weights_of_dpsgd_is_poisson_subsampling():
    """For one-epoch DP-SGD every step mean is 0 or 1 and the prior weight 1/b makes the per-step pair the
    Poisson-subsampled Gaussian: the book's PLD agrees with dp_accounting's."""
    pytest.importorskip("dp_accounting")
    b, sig, de = 20, 0.9, 1e-6
    pw = PriorWeightsPLD(build_strategy("identity", 1, b), sig, b // 2, de, 1e-3)
    ref = PoissonSubsampledPLD(sig, 1 / b, b)
    for e in (0.5, 1.0):
        assert pw.get_delta(e) - de == pytest.approx(ref.get_delta(e), rel=0.05)


def test_epoch_max_and_allocation_paths():
    assert np.array_equal(epoch_max(np.array([1, 3, 2, 0, 5, 4]), 2), [3, 3, 3, 5, 5, 5])
    with pytest.raises(DPValueError):
        epoch_max(np.ones(5), 2)
    k, b, de = 2, 10, 1e-5
    M = build_strategy("identity", k, b).means
    paths = allocation_paths(M, 2.0, de, k)
    assert list(paths) == ["union", "global max", "per-epoch max (e ≥ 1)", "hybrid (e ≥ 2)"]
    union = paths["union"]
    assert union.shape == (k * b,)
    assert union[0] == pytest.approx(1 / b, abs=1e-12)  # no data yet: the prior
    # a larger significance gives a smaller bound at every step
    assert np.all(participant_posterior_path(M, 2.0, de) <= union + 1e-15)
    assert np.array_equal(paths["hybrid (e ≥ 2)"][:b], union[:b])
    assert np.array_equal(paths["hybrid (e ≥ 2)"][b:], paths["per-epoch max (e ≥ 1)"][b:])
    assert np.ptp(paths["global max"]) == 0
    n = 7
    direct = reverse_hazard_bounds(M, 2.0, n, de / (k * b), "remove", components=[b - 1])[0][-1]
    assert union[n - 1] == direct
    with pytest.raises(DPValueError):
        allocation_paths(M, 2.0, de, 3)
