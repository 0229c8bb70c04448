"""Reverse-hazard bounds of conditional composition (Algorithm 4): anchors and a sampling check."""

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from dputils.matrix import build_strategy
from dputils.matrix.condcomp import mixture_weights, reverse_hazard_bounds, step_pairs


@pytest.mark.parametrize("n,anchor", [(1, 0.0100), (2, 0.0101), (10, 0.0109), (50, 0.0159), (100, 0.0296)])
def test_lambda_b_dpsgd_anchors(n, anchor):
    # note target 8: DP-SGD, k = 1, b = 100, sigma = 1, union bound with delta_E = 5e-6
    M = build_strategy("identity", 1, 100).means
    lam, _ = reverse_hazard_bounds(M, 1.0, n, 5e-6 / 100, "remove", components=[99])
    assert lam[99] == pytest.approx(anchor, rel=0.02)  # anchors: +-2%


def test_first_step_is_exactly_one_over_b():
    M = build_strategy("identity", 1, 30).means
    lam, _ = reverse_hazard_bounds(M, 0.8, 1, 1e-6, "remove")
    assert lam[-1] == pytest.approx(1 / 30, rel=1e-12)
    w = mixture_weights(lam)
    assert lam[0] == 1.0 and w.sum() == pytest.approx(1.0, abs=1e-12) and (w >= 0).all()


def test_step_pairs_dpsgd_are_subsampled_gaussians():
    M = build_strategy("identity", 1, 10).means
    pairs = step_pairs(M, 1.0, 1e-3, "remove")
    assert len(pairs) == 10
    sens, w = pairs[0]
    np.testing.assert_allclose(sens, [0.0, 1.0])
    np.testing.assert_allclose(w, [0.9, 0.1], rtol=1e-12)


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_tail_bound_holds_by_sampling(direction):
    # note check 9: the true posterior reverse hazard exceeds lambda_bar_b with frequency <= beta_i
    b, n, sigma, beta = 12, 9, 0.7, 0.3
    M = build_strategy("identity", 2, b).means  # two epochs: means over 24 steps
    step = b + n  # a step of the second epoch
    lam, order = reverse_hazard_bounds(M, sigma, step, beta, direction)
    mu = M[order, : step - 1]
    rng = np.random.default_rng(0)
    S = 200_000
    if direction == "remove":
        k = rng.integers(0, b, size=S)
        y = mu[k] + sigma * rng.standard_normal((S, step - 1))
    else:
        y = sigma * rng.standard_normal((S, step - 1))
    i = b - 1  # largest sorted component
    logn = -(((y[:, None, :] - mu[None, : i + 1, :]) ** 2).sum(-1)) / (2 * sigma**2)
    L = logsumexp(logn[:, :i], axis=1) - math.log(i) - logn[:, i]
    hazard = 1 / (1 + np.exp(math.log(i) + L))  # sigmoid(-log(i-1) - L) in the paper's 1-based i
    rate = float(np.mean(hazard > lam[i]))
    beta_i = beta / (b - 1)
    assert rate <= beta_i + 4 * math.sqrt(beta_i / S)
