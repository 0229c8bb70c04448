"""Issue 35 item 2: the saddle-point and Edgeworth accountants never hand out a bad number as their answer.

At the "Your training run" setting (MNIST DP-SGD: sigma 1.1, batch 256 of 60,000, 15 epochs = 3516 steps,
delta 1e-5) SPA's saddle point is in its degraded regime and its own SP-CLT estimate lies ~5% below the exact
epsilon, and the Edgeworth accountant's certified interval is vacuous. Their default answers must still be
exact to the PLD's precision, flagged as coming from the PLD. Independent truths: the contour-integral epsilon of
dputils.truth (stored in params/targets/edgeworth.yml, T11) and dp_accounting's PLD accountant.
"""

from __future__ import annotations

import warnings

import pytest

from dputils.accountants.edgeworth import EdgeworthAccountant
from dputils.accountants.spa import SaddlePointAccountant, SaddlePointWarning
from dputils.baselines import dp_accounting_pld_epsilon
from dputils.mechanisms import SubsampledGaussianMechanism as SGM

MECH, T, DELTA = SGM(1.1, 256 / 60000), 3516, 1e-5
TRUTH = 1.1338747152511723  # contour integral (dputils.truth.composition_epsilon), error estimate 1e-11


@pytest.fixture(scope="module")
def dp_acc_eps():
    return dp_accounting_pld_epsilon(MECH, T, DELTA)


@pytest.mark.parametrize("cls", [SaddlePointAccountant, EdgeworthAccountant])
def test_default_answer_is_exact_and_flagged(cls, dp_acc_eps):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SaddlePointWarning)  # the PLD-narrowed answer needs no warning
        r = cls().compose(MECH, T).get_epsilon(DELTA)
    assert r.details["fallback"] == "pld"
    assert r.details["fallback_reason"] in ("wide bracket", "vacuous")
    assert r.lower <= TRUTH <= r.upper
    assert r.lower <= r.value <= r.upper
    assert abs(r.value / TRUTH - 1) < 5e-4
    assert abs(r.value / dp_acc_eps - 1) < 1e-3
    assert r.upper - r.lower < 1e-3 * r.upper


def test_spa_own_estimate_is_off_and_warned_but_not_the_answer():
    """The method's own answer (fallback="none") is the degraded SP-CLT estimate, ~5% low, with a warning;
    its own certified bracket still contains the truth, and the default answer replaces the estimate."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        own = SaddlePointAccountant(fallback="none").compose(MECH, T).get_epsilon(DELTA)
    assert any(issubclass(w.category, SaddlePointWarning) for w in caught)
    assert own.details["degraded"]
    assert own.lower <= TRUTH <= own.upper
    assert own.value < TRUTH * (1 - 0.02)  # the estimate known to be off
    default = SaddlePointAccountant().compose(MECH, T).get_epsilon(DELTA)
    assert default.details["own_value"] == pytest.approx(own.value, rel=1e-12)
    assert default.value != pytest.approx(own.value, rel=1e-3)


@pytest.mark.parametrize("quantity", ["delta", "epsilon"])
def test_spa_default_answers_lie_in_their_brackets_in_the_degraded_regime(quantity):
    """Few epochs at sigma 2, q 0.01 (3 epochs, delta 1e-5: the phase transition of the tilted loss): the
    default answer lies in its certified bracket, which holds the PLD's answer (dp_accounting)."""
    mech, n = SGM(2.0, 0.01), 300
    acc = SaddlePointAccountant().compose(mech, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SaddlePointWarning)
        r = acc.get_epsilon(1e-5) if quantity == "epsilon" else acc.get_delta(0.35)
    assert r.lower <= r.value <= r.upper
    if quantity == "epsilon":
        ref = dp_accounting_pld_epsilon(mech, n, 1e-5)
        assert r.lower <= ref * (1 + 1e-6) and ref <= r.upper * (1 + 1e-4)
        assert abs(r.value / ref - 1) < 1e-3  # exact to the PLD's precision, not the 6.7% of SP-CLT
