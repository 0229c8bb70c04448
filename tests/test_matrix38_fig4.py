"""Figure 4 of the matrix chapter checked independently (issue 37 item 2, target T8c).

The chapter compares its Figure 4 curves (``posterior_paths.allocation_paths``) with
``matrix_allocation.dpsgd_posterior_bound``, the DP-SGD case written out in closed form. Here that closed form is
itself checked against Monte Carlo: the ELBO variable of Lemma 4.7 is sampled from explicit prefix-mean vectors, so a
wrong class count, weight or sign in the closed form shows; and the tail bound it certifies must hold for the exact
log-likelihood ratio ``L_b``. A 1% error planted in the posterior path or in the per-epoch maximum fails T8c."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from dputils.book.scorecard import Targets
from dputils.matrix import build_strategy, posterior_paths

ch = pytest.importorskip("dputils.book.chapters.matrix_allocation")

B, K, SIGMA, STEP = 6, 3, 1.2, 9  # epoch 2, two slots before the participant in it, three after
BETA_I = 0.05  # per-tail-bound significance, large enough for Monte Carlo


def _prefix_means(b: int, k: int, step: int) -> tuple[np.ndarray, int]:
    """The means of every slot over steps 1..step-1 (DP-SGD: slot j takes part at steps j + 1 + e b) and the
    participant of ``step``, built directly (not by build_strategy)."""
    mu = np.zeros((b, step - 1))
    for j in range(b):
        for e in range(k):
            t = j + e * b  # 0-based step of the participation
            if t < step - 1:
                mu[j, t] = 1.0
    return mu, (step - 1) % b


def _elbo(x: np.ndarray, mu: np.ndarray, i: int, temp: float, sigma: float) -> np.ndarray:
    """Lemma 4.7's lower bound E_psi[L_ij(x)] - KL(psi || uniform) for the Option-3 psi at temperature ``temp``,
    from the vectors: L_ij(x) = log N(x | mu_j) - log N(x | mu_i)."""
    others = [j for j in range(mu.shape[0]) if j != i]
    d2 = np.array([np.sum((mu[i] - mu[j]) ** 2) for j in others])
    lw = np.zeros(len(others)) if math.isinf(temp) else -d2 / temp
    psi = np.exp(lw - logsumexp(lw))
    kl = float(np.sum(psi * np.log(psi * len(others))))
    lij = np.stack([(-np.sum((x - mu[j]) ** 2, axis=1) + np.sum((x - mu[i]) ** 2, axis=1)) for j in others], axis=1)
    return lij / (2 * sigma**2) @ psi - kl


def _tau(lam: float, b: int) -> float:
    """Invert Lemma 4.5: lam = sigmoid(-log(b - 1) - tau)."""
    return math.log((1 / lam - 1) / (b - 1))


def test_closed_form_tail_bound_matches_monte_carlo_of_the_elbo():
    """At the closed form's tau, Eq. 31's bound (1/b) sum_k min_psi P_k[ELBO_psi <= tau] is the significance
    beta/(b - 1): estimated here by sampling x ~ N(mu_k, s^2 I) for every reference slot k and evaluating the ELBO
    from the vectors (100,000 draws per slot; the bound's Monte Carlo standard error is about 3e-4, and a shift of
    tau by 0.03, about 1.5% of lambda_bar here, moves it by 3e-3)."""
    lam = ch.dpsgd_posterior_bound(B, STEP, SIGMA, BETA_I * (B - 1))
    tau = _tau(lam, B)
    mu, i = _prefix_means(B, K, STEP)
    rng = np.random.default_rng(38)
    n = 100_000
    terms, exact = [], []
    for k in range(B):
        x = mu[k] + SIGMA * rng.standard_normal((n, mu.shape[1]))
        terms.append(min(float(np.mean(_elbo(x, mu, i, t, SIGMA) <= tau)) for t in ch.FIG4_TEMPERATURES))
        logp = -np.sum((x[:, None, :] - mu[None, :, :]) ** 2, axis=2) / (2 * SIGMA**2)
        others = [j for j in range(B) if j != i]
        exact.append(float(np.mean(logsumexp(logp[:, others], axis=1) - math.log(B - 1) - logp[:, i] <= tau)))
    bound = float(np.mean(terms))
    assert abs(bound - BETA_I) < 2e-3, bound  # the closed form's tau solves Eq. 31
    assert float(np.mean(exact)) <= BETA_I + 2e-3  # and L_b's lower tail obeys it (the ELBO bounds L_b below)


def test_closed_form_starts_at_the_prior_and_grows_with_the_epochs():
    assert ch.dpsgd_posterior_bound(B, 1, SIGMA, 1e-6) == pytest.approx(1 / B, rel=1e-14)
    ends = [ch.dpsgd_posterior_bound(B, e * B, SIGMA, 1e-6) for e in range(1, K + 1)]
    assert np.all(np.diff(ends) > 0)


def _alloc(b: int = 10, epochs: int = 3) -> dict:
    means = build_strategy("identity", epochs, b).means
    return {s: posterior_paths.allocation_paths(means, s, 0.5e-5, epochs) for s in (2.0, 5.0)}


def test_t8c_passes_unmutated():
    tg = Targets("matrix_allocation")
    dev = ch.record_fig4(tg, _alloc(), 10, 3, 0.5e-5)
    assert dev < 1e-9 and {r["id"]: r["status"] for r in tg.to_dict()} == {"T8c": "pass"}


def _scaled(fn, factor=1.01):
    return lambda *a, **k: np.asarray(fn(*a, **k)) * factor


@pytest.mark.parametrize("name", ["participant_posterior_path", "epoch_max"])
def test_one_percent_in_the_posterior_paths_fails_t8c(monkeypatch, name):
    """posterior_paths' path of lambda_bar (every allocation) or its per-epoch maximum (two of the four) 1% off."""
    monkeypatch.setattr(posterior_paths, name, _scaled(getattr(posterior_paths, name)))
    with pytest.raises(AssertionError, match="T8c"):
        ch.record_fig4(Targets("matrix_allocation"), _alloc(), 10, 3, 0.5e-5)
