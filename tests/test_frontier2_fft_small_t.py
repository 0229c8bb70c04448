"""Short compositions (at most ``_FFT_ONLY_STEPS`` steps) of epsilon queries go straight to the FFT power
(issue 35 item 2, speed at small T): the answer is the one the spectral attempt led to before (it was refused at
these T), bit for bit, and the bracket holds the exact value. Truth: the Gaussian's closed form at 50 digits."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dputils.accountants import PLDAccountant
from dputils.accountants.pld import _compose
from dputils.mechanisms import GaussianMechanism, LaplaceMechanism, SubsampledGaussianMechanism


@pytest.mark.parametrize(
    "mech", [GaussianMechanism(3.0), SubsampledGaussianMechanism(1.0, 0.01), LaplaceMechanism(1.0)], ids=str
)
@pytest.mark.parametrize("T", [2, 10])
def test_same_answer_as_with_the_spectral_attempt(mech, T, monkeypatch):
    new = PLDAccountant().compose(mech, T).get_epsilon(1e-5)
    monkeypatch.setattr(_compose, "_FFT_ONLY_STEPS", 0)  # the spectral path tried first, as before
    old = PLDAccountant().compose(mech, T).get_epsilon(1e-5)
    assert (new.lower, new.upper) == (old.lower, old.upper)


def test_bracket_holds_the_gaussian_epsilon():
    sigma, T, delta = 3.0, 10, 1e-5
    r = PLDAccountant().compose(GaussianMechanism(sigma), T).get_epsilon(delta)
    mu = mp.sqrt(T) / sigma
    with mp.workdps(50):

        def d(e):
            return mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2)

        assert d(mp.mpf(r.upper)) <= delta <= d(mp.mpf(r.lower))
    assert math.isfinite(r.upper) and (r.upper - r.lower) / r.upper <= 1e-3
