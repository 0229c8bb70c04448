"""The shuffling chapter's checks moved into dputils.shuffling: the numerical Def 5.3 envelope, Lemma B.1 by
optimization, the Monte Carlo privacy profile, the group-privacy and strong-vs-standard tables, the proof steps
of Lemma E.4 and the clipping comparison, each against an independent computation or its contract."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dputils import curves
from dputils import shuffling as sh
from dputils.errors import DPValueError


def _envelope_brute_force(x, y):
    """The lower convex envelope at each x_i: the least of y_i and every chord over a pair j < i < k."""
    out = np.array(y, dtype=float)
    for i, j, k in itertools.product(range(len(x)), repeat=3):
        if j < i < k:
            t = (x[i] - x[j]) / (x[k] - x[j])
            out[i] = min(out[i], (1 - t) * y[j] + t * y[k])
    return out


def test_lower_convex_envelope_against_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(5):
        x = np.sort(rng.uniform(0, 1, 25))
        y = rng.normal(size=25)
        assert np.allclose(sh.lower_convex_envelope(x, y), _envelope_brute_force(x, y), atol=1e-12)
    x = np.linspace(0, 1, 11)
    assert np.allclose(sh.lower_convex_envelope(x, x**2), x**2)  # convex already: unchanged
    with pytest.raises(DPValueError):
        sh.lower_convex_envelope([0.0, 0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(DPValueError):
        sh.lower_convex_envelope([0.0, 1.0], [1.0])


@pytest.mark.parametrize("c, sigma, u", [(1, 1, 0.05), (2, 1, 0.2), (math.sqrt(10), 2, 0.01)])
def test_upper_bound_numerical_envelope_meets_the_closed_form(c, sigma, u):
    x = np.linspace(0, 1, 20_001)
    num = sh.upper_bound_tradeoff_numerical(x, c, u, sigma)
    assert np.max(np.abs(num - sh.upper_bound_tradeoff(x, c, u, sigma))) < 1e-5  # grid resolution


def test_mixture_tradeoff_by_optimization():
    law = sh.C2Law(np.array([0.2, 0.5, 0, 0, 0, 0, 0, 0, 0, 0.3]))
    for a in (0.01, 0.2, 0.8):
        got = sh.mixture_tradeoff_by_optimization(a, [0.2, 0.5, 0.3], np.array([0.0, 1.0, 3.0]) / 1.5)
        closed = sh.mixture_tradeoff(a, law, 1.5)
        assert closed <= got + 1e-7 and abs(got - closed) < 2e-5
    # one component: the Gaussian trade-off itself
    assert abs(sh.mixture_tradeoff_by_optimization(0.1, [1.0], [1.0]) - float(curves.gdp_tradeoff(0.1, 1.0))) < 1e-9
    with pytest.raises(DPValueError):
        sh.mixture_tradeoff_by_optimization(0.1, [0.5, 0.4], [1.0, 2.0])


def test_monte_carlo_mixture_delta_meets_the_exact_profile():
    law = sh.bc_shuffle_law(1000, 100, 4).compose(3)
    est, se = sh.monte_carlo_mixture_delta([0.5, 2.0], law, 1.5, 40_000, np.random.default_rng(1))
    exact = [sh.mixture_delta(e, law, 1.5) for e in (0.5, 2.0)]
    assert est.shape == se.shape == (2,) and np.all(np.abs(est - exact) < 5 * se)
    again, _ = sh.monte_carlo_mixture_delta([0.5, 2.0], law, 1.5, 40_000, np.random.default_rng(1))
    assert np.array_equal(est, again)  # seeded: reproducible


def test_group_privacy_epsilons():
    row = sh.group_privacy_epsilons(4, 50000, 250, 2.0, 50, 1e-5)
    g, bound, bc, bc_printed, ic, generic = row
    assert g == 4 and bc <= bound + 1e-7 <= ic + 2e-7 and ic <= generic
    assert bc_printed < bc  # the printed law is optimistic
    assert abs(generic - 159.44) < 0.01  # eq. (7) at mu = g sqrt(E)/sigma = 4 sqrt(50)/2 (the notes' value)
    assert abs(bound - 54.38) < 0.01
    short = sh.group_privacy_epsilons(2, 50000, 250, 2.0, 10, 1e-5, printed=False, individual=False)
    assert short[3] is None and short[4] is None
    one = sh.group_privacy_epsilons(1, 50000, 250, 2.0, 10, 1e-5)
    assert max(one[1:]) - min(one[1:]) < 1e-6  # g = 1: every column is G_{sqrt(E)/sigma}


def test_strong_vs_standard_epsilons():
    cmp, (lo, hi) = sh.strong_vs_standard_epsilons(2000, 100, 1.5, 2, 1e-5)
    assert list(cmp)[:4] == [
        "paper SH, g = 1: G with μ = √E/σ",
        "paper SS, g=1: exact mixture",
        "DRS CLT (uniform)",
        "CLT (Poisson)",
    ]
    assert cmp["paper SH, g = 1: G with μ = √E/σ"] == pytest.approx(float(curves.gdp_epsilon(1e-5, math.sqrt(2) / 1.5)))
    assert lo <= hi == cmp["PLD (Poisson), upper"] <= cmp["RDP (Poisson)"] + 1e-9
    assert cmp["RDP modern (orders 2–256)"] <= cmp["RDP classic (orders 2–256)"]
    assert cmp["paper SH, g = 1: G with μ = √E/σ"] > 3 * hi  # the strong adversary costs more


def test_lemma_e4_proof_steps():
    st = sh.lemma_e4_proof_steps(60000, 256, 1, 10, gamma=1.0)
    assert st["beta"] == sh.lemma_e4_as_printed(60000, 256, 1, 10, gamma=1.0)["beta"]
    assert abs(st["base"] - (1 - 1 / st["beta"])) < 1e-12  # e^{N/(N-g-m)}/beta = 1 - gamma/beta
    assert st["log_sum"] / st["log_printed"] == pytest.approx(256)  # exponent NE against (N/m)E
    assert st["base_printed"] < st["base"]


def test_clipping_sweep_contract():
    pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    acc_np, rows = sh.clipping_sweep(X[:80], y[:80], X[80:], y[80:], [4.0], 1e-5, epochs=1, batch=20, repeats=1, seed=0)
    assert 0 <= acc_np <= 1 and [r["sigma"] for r in rows] == [4.0]
    assert rows[0]["eps"] == pytest.approx(float(curves.gdp_epsilon(1e-5, 0.25)))  # G_{sqrt(E)/sigma}, E = 1
    for r in rows:
        assert all(0 <= r[k] <= 1 for k in ("acc_ic", "acc_bc", "acc_bc_as_implemented"))
        assert r["nsr_bc"] > r["nsr_ic"] > 0  # batch clipping: one clipped vector per round
    with pytest.raises(DPValueError):
        sh.clipping_accuracy(X, y, X, y, "XX", 1.0, epochs=1, batch=20, repeats=1, seed=0)
