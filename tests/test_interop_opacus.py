"""The Opacus adapter (dputils.interop.opacus) against Opacus's own accountants, and inside PrivacyEngine.

Truths: Opacus's PRV accountant (an estimate with a stated epsilon error, here 0.01) and its RDP accountant
(an upper bound, looser than a PLD), plus the closed-form Gaussian epsilon for q = 1.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from opacus import PrivacyEngine
from opacus.accountants import create_accountant
from opacus.accountants.utils import get_noise_multiplier

import dputils.interop.opacus as dpo
from dputils import curves
from dputils.errors import DPValueError

HISTORY = [(1.0, 0.01, 600), (1.5, 0.02, 400)]  # heterogeneous: two phases of training


def _eps(name, history, delta=1e-5, **kw):
    acc = create_accountant(name)
    acc.history = list(history)  # what get_noise_multiplier does: write the history directly
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return acc.get_epsilon(delta, **kw)


def test_registered_names_and_interface():
    for name in ("dputils-pld", "dputils-spa", "dputils-edgeworth"):
        acc = create_accountant(name)
        assert acc.mechanism() == name and len(acc) == 0 and acc.get_epsilon(1e-5) == 0.0
        for _ in range(3):
            acc.step(noise_multiplier=1.0, sample_rate=0.01)
        acc.step(noise_multiplier=2.0, sample_rate=0.01)
        assert len(acc) == 4 and acc.history == [(1.0, 0.01, 3), (2.0, 0.01, 1)]
        state = acc.state_dict()
        fresh = create_accountant(name)
        fresh.load_state_dict(state)
        assert fresh.history == acc.history and fresh.get_epsilon(1e-5) == acc.get_epsilon(1e-5)


def test_pld_against_opacus_prv_and_rdp():
    prv = _eps("prv", HISTORY, eps_error=0.01)
    rdp = _eps("rdp", HISTORY)
    pld = _eps("dputils-pld", HISTORY)
    bracket = dpo.PLDOpacusAccountant()
    bracket.history = list(HISTORY)
    res = bracket.get_epsilon_bracket(1e-5)
    assert res.lower <= pld == res.upper
    assert abs(pld - prv) <= 0.01 + 1e-3  # PRV's stated error, plus our grid's
    assert pld <= rdp  # a PLD upper bound is tighter than the RDP conversion
    spa = _eps("dputils-spa", HISTORY)
    assert spa >= res.lower - 1e-9 and spa <= rdp * 1.05  # upper end of the saddle-point bracket


def test_gaussian_closed_form_when_q_is_one():
    sigma, steps, delta = 2.0, 20, 1e-6
    exact = curves.gdp_epsilon(delta, math.sqrt(steps) / sigma)
    pld = _eps("dputils-pld", [(sigma, 1.0, steps)], delta)
    assert exact <= pld <= exact * (1 + 1e-3)


def test_get_noise_multiplier_matches_prv():
    kw = dict(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.01, steps=1000)
    ours = get_noise_multiplier(accountant="dputils-pld", epsilon_tolerance=0.01, **kw)
    prv = get_noise_multiplier(accountant="prv", epsilon_tolerance=0.01, eps_error=0.01, **kw)
    assert abs(ours - prv) <= 0.02
    assert _eps("dputils-pld", [(ours, 0.01, 1000)]) <= 2.0


def test_privacy_engine_trains_with_a_dputils_accountant():
    torch.manual_seed(0)
    X, y = torch.randn(64, 5), torch.randint(0, 2, (64,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=16)
    model = torch.nn.Linear(5, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = PrivacyEngine(accountant="dputils-pld")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus's secure-RNG advice
        model, opt, loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0
        )
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    assert isinstance(engine.accountant, dpo.PLDOpacusAccountant)
    steps = len(engine.accountant)
    assert steps >= 1
    eps = engine.get_epsilon(1e-5)
    q = engine.accountant.history[0][1]
    assert eps == pytest.approx(_eps("dputils-pld", [(1.0, q, steps)]), rel=1e-12)


def test_bad_input():
    acc = dpo.PLDOpacusAccountant()
    acc.history = [(1.0, 1.5, 10)]
    with pytest.raises(DPValueError, match="sample_rate"):
        acc.get_epsilon(1e-5)
    acc.history = [(1.0, 0.1)]
    with pytest.raises(DPValueError, match="history"):
        acc.get_epsilon(1e-5)
    acc.history = [(1.0, 0.1, 10)]
    with pytest.raises(TypeError, match="unexpected"):
        acc.get_epsilon(1e-5, eps_error=0.1)
    with pytest.raises(DPValueError, match="report"):
        dpo.SPAOpacusAccountant(report="lower")


# ------------------------------------------------------------------------------------------------ issue 24
@pytest.mark.parametrize("name", ["dputils-pld", "dputils-spa", "dputils-edgeworth"])
def test_corrupted_state_dicts_and_histories_are_refused_by_name(name):
    acc = create_accountant(name)
    acc.step(noise_multiplier=1.0, sample_rate=0.01)
    before = list(acc.history)
    for bad, fragment in [
        ({}, "mapping"),
        ("garbage", "mapping"),
        (None, "mapping"),
        ({"history": None, "mechanism": name}, "history"),
        ({"history": [(1.0, 2.0, 3)], "mechanism": name}, "sample_rate"),
        ({"history": [(1.0, 0.1)], "mechanism": name}, "history"),
        ({"history": [], "mechanism": "rdp"}, "rdp"),
        ({"history": []}, "mechanism"),
    ]:
        with pytest.raises(DPValueError, match=fragment):
            acc.load_state_dict(bad)
        assert acc.history == before
    acc.history = [(-1.0, 0.1, 3)]
    with pytest.raises(DPValueError, match="noise_multiplier"):
        acc.get_epsilon(1e-5)
    acc.history = [(0.0, 0.1, 3)]  # no noise: not private
    assert acc.get_epsilon(1e-5) == math.inf
    with pytest.raises(DPValueError, match="bogus"):
        type(acc)(bogus=1)


@pytest.mark.parametrize("name", ["dputils-spa", "dputils-edgeworth"])
def test_get_noise_multiplier_with_spa_and_edgeworth(name):
    # dputils-edgeworth failed every call ("privacy budget is too low": its certified end was infinite);
    # make_private_with_epsilon's setting in Opacus's own test (512 records, batch 64, 2 epochs, epsilon 2)
    kw = dict(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.125, epochs=2)
    sigma = _quiet_noise(name, **kw)
    ref = _quiet_noise("prv", **kw)
    achieved = _eps(name, [(sigma, 0.125, 16)])
    assert 2.0 - 0.01 <= achieved <= 2.0  # Opacus's search tolerance, and the target kept
    assert abs(sigma - ref) <= 0.02 * ref  # PRV (an estimate with error 0.01 in epsilon) lands nearby


def _quiet_noise(name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_noise_multiplier(accountant=name, **kw)
