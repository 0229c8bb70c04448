"""A planted bug in conditional composition must fail the matrix_allocation chapter at every profile.

The bug: each tail bound of the union bound (Theorem 4.6 of Schuchardt and Kalinin) spends the whole step's
significance instead of ``1 / (b - 1)`` of it, which makes the posterior bounds, and so the accountant, optimistic.
It once passed the chapter's smoke profile and was caught only by the full profile's calibrated σ (T5-cc). The
chapter's target T8d-cc runs at every profile: it compares the accountant's own per-step weight of the
participating slot with our independent values (params/targets/matrix_allocation.yml, from a separate
re-implementation). The mutation is planted on the module before the chapter's check imports and runs the
accountant."""

from __future__ import annotations

import pytest

from dputils.book.scorecard import Targets
from dputils.matrix import condcomp

ch = pytest.importorskip("dputils.book.chapters.matrix_allocation")


@pytest.fixture(autouse=True)
def _fresh_step_pairs():
    """The accountant caches its per-step pairs: each test computes them afresh, and leaves no mutant values."""
    condcomp._cached_step_pairs.cache_clear()
    yield
    condcomp._cached_step_pairs.cache_clear()


def test_accountant_weights_match_the_independent_values():
    tg = Targets("matrix_allocation")
    got = ch.record_accountant_weights(tg, "T8d-cc", "T8d")
    (rec,) = [r for r in tg.to_dict() if r["id"] == "T8d-cc"]
    assert rec["status"] == "pass", (got, rec)


def test_dropping_the_union_bound_factor_fails_the_chapter(monkeypatch):
    fast, ref = condcomp._hazards_fast, condcomp._hazards_sorted

    def fast_mutant(G, order, comps, s, beta, *args, **kwargs):  # beta * (b - 1): the factor dropped
        return fast(G, order, comps, s, beta * (len(order) - 1), *args, **kwargs)

    def ref_mutant(H, comps, s, beta, *args, **kwargs):
        return ref(H, comps, s, beta * (H.shape[0] - 1), *args, **kwargs)

    monkeypatch.setattr(condcomp, "_hazards_fast", fast_mutant)
    monkeypatch.setattr(condcomp, "_hazards_sorted", ref_mutant)
    tg = Targets("matrix_allocation")
    with pytest.raises(AssertionError, match="T8d-cc"):  # the chapter's cell fails the run
        ch.record_accountant_weights(tg, "T8d-cc", "T8d")
    condcomp._cached_step_pairs.cache_clear()
    from dputils.matrix import BallsInBinsMatrixMechanism, ConditionalCompositionAccountant, build_strategy
    from dputils.matrix.panels import participant_weights

    acc = ConditionalCompositionAccountant(delta_e=5e-6, progress=False).compose(
        BallsInBinsMatrixMechanism(build_strategy("identity", 1, 100), 1.0)
    )
    last = float(participant_weights(acc, 5e-6)["remove"][-1])
    assert last < tg.spec["T8d"]["paper"][-1] * (1 - 0.02)  # optimistic: below the true bound's weight


def test_t2c_reference_is_the_quadrature_of_the_exact_add_divergence():
    """T2c's reference: R_2(Q||P) = log E_Q[1/S] for DP-SGD (b = 100, sigma = 1), S the mean of b independent
    mean-one lognormals, as log int_0^inf L(t/b)^b dt with L(u) = E exp(-u W): nested adaptive quadrature
    (QUADPACK), independent of the package's log-space trapezoid rule."""
    import math

    import numpy as np
    from scipy import integrate

    b, v = 100, 1.0

    def laplace(u: float) -> float:
        f = lambda z: math.exp(-0.5 * z * z - u * math.exp(math.sqrt(v) * z - v / 2)) / math.sqrt(2 * math.pi)  # noqa: E731
        return integrate.quad(f, -12, 12, epsabs=0, epsrel=1e-12, limit=400, points=[0.0])[0]

    g = lambda t: laplace(t / b) ** b  # noqa: E731
    cuts = [0, 0.5, 1, 2, 4, 8, 16, 40]
    val = sum(integrate.quad(g, a, c, epsabs=0, epsrel=1e-11, limit=400)[0] for a, c in zip(cuts, cuts[1:]))
    val += integrate.quad(g, 40, np.inf, epsabs=0, epsrel=1e-8, limit=200)[0]
    ref = Targets("matrix_allocation").spec["T2c"]["paper"]
    assert abs(math.log(val) / ref - 1) < 1e-8
