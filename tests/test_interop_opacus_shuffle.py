"""The Opacus accountants of shuffled batches, ``dputils-shuffle`` (individual clipping) and ``dputils-shuffle-bc``
(batch clipping): :mod:`dputils.interop.opacus_shuffle`.

Checked against: the chapter's functions (:mod:`dputils.shuffling`) on the same settings, the closed form of
mu-GDP's privacy profile (eq. 7, evaluated here with scipy), refusals by name, state round trips, and Opacus's
``PrivacyEngine`` training a small model on CPU with a shuffled ``DataLoader``.
"""

from __future__ import annotations

import math
import warnings

import pytest

pytest.importorskip("opacus")
import torch
from opacus import PrivacyEngine
from opacus.accountants import create_accountant
from opacus.accountants.utils import get_noise_multiplier
from scipy.stats import norm
from torch.utils.data import DataLoader, TensorDataset

import dputils.interop.opacus  # noqa: F401  (registers the names)
from dputils.errors import DPValueError
from dputils.interop.opacus_shuffle import ShuffleBCOpacusAccountant, ShuffleOpacusAccountant, steps_per_epoch
from dputils.shuffling import bc_shuffle_law, gdp_epsilon, ic_shuffle_law, mixture_epsilon


def _gdp_delta(eps: float, mu: float) -> float:
    """Eq. (7) of the chapter (Dong, Roth, Su Cor. 2.13), written out with scipy: the independent check."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


# --------------------------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("sigma, steps, k", [(1.0, 300, 100), (2.5, 40, 8), (0.8, 7, 8)])
def test_individual_clipping_is_the_chapter_bound_with_sigma_halved(sigma, steps, k):
    """E = ceil(steps/k) epochs at Opacus noise sigma: G_(2 sqrt(E)/sigma) (Lemma F.2 with the chapter's sigma =
    Opacus's / 2), the chapter's gdp_epsilon; and eq. (7) at that epsilon gives delta <= target, tightly."""
    acc = create_accountant("dputils-shuffle")
    acc.history = [(sigma, 1 / k, steps)]
    E = math.ceil(steps / k)
    mu = 2 * math.sqrt(E) / sigma
    eps = acc.get_epsilon(1e-5)
    assert eps == gdp_epsilon(1e-5, mu)
    d = _gdp_delta(eps, mu)
    assert 0.999e-5 <= d <= 1e-5 * (1 + 1e-9)


def test_batch_clipping_groups_are_thm_f1():
    acc = ShuffleBCOpacusAccountant(group_size=4)
    acc.history = [(3.0, 0.05, 200)]  # 10 epochs
    mu = math.sqrt(4 * 10) / 1.5
    assert acc.get_epsilon(1e-6) == gdp_epsilon(1e-6, mu)
    assert _gdp_delta(acc.get_epsilon(1e-6), mu) <= 1e-6 * (1 + 1e-9)


@pytest.mark.parametrize(
    "cls, law", [(ShuffleBCOpacusAccountant, bc_shuffle_law), (ShuffleOpacusAccountant, ic_shuffle_law)]
)
def test_exact_mixture_is_the_chapter_mixture(cls, law):
    """With sizes: the exact strong-adversary mixture of the corrected law over E epochs at sigma/2."""
    acc = cls(group_size=3, dataset_size=600, batch_size=20)
    acc.history = [(2.0, 1 / 30, 90)]  # 3 epochs of 30 steps
    lo, hi = mixture_epsilon(1e-5, law(600, 20, 3).compose(3), 1.0)
    eps = acc.get_epsilon(1e-5)
    assert hi <= eps <= hi * (1 + 1e-9)
    assert lo <= eps


def test_exact_mixture_with_groups_of_one_is_the_gaussian():
    """g = 1: every epoch hits the example once, the mixture is G_(sqrt(E)/sigma): the same number as eq. (7)."""
    acc = ShuffleOpacusAccountant(dataset_size=100, batch_size=10)
    acc.history = [(1.5, 0.1, 50)]
    mu = 2 * math.sqrt(5) / 1.5
    eps = acc.get_epsilon(1e-5)
    assert _gdp_delta(eps, mu) == pytest.approx(1e-5, rel=1e-6)


def test_epochs_of_different_noise_count_each_epoch_at_its_smallest():
    acc = create_accountant("dputils-shuffle")
    acc.history = [(1.0, 0.01, 150), (2.0, 0.01, 100), (4.0, 0.01, 100)]  # epochs at 1, 1 and 2, 2 and 4, 4
    mu = 2 * math.sqrt(1 + 1 + 1 / 4 + 1 / 16)
    assert acc.get_epsilon(1e-5) == pytest.approx(gdp_epsilon(1e-5, mu), rel=1e-13)  # mu^2 summed in another order


def test_get_epsilon_is_monotone():
    acc = create_accountant("dputils-shuffle")
    last = 0.0
    for _ in range(5 * 8):
        acc.step(noise_multiplier=1.2, sample_rate=1 / 8)
        eps = acc.get_epsilon(1e-5)
        assert eps >= last
        last = eps
    assert [acc.get_epsilon(d) for d in (1e-3, 1e-5, 1e-8)] == sorted(acc.get_epsilon(d) for d in (1e-3, 1e-5, 1e-8))
    more_noise = create_accountant("dputils-shuffle")
    more_noise.history = [(2.4, 1 / 8, 40)]
    assert more_noise.get_epsilon(1e-5) < last
    assert create_accountant("dputils-shuffle").get_epsilon(1e-5) == 0.0
    zero = create_accountant("dputils-shuffle")
    zero.history = [(0.0, 1 / 8, 1)]
    assert zero.get_epsilon(1e-5) == math.inf


def test_make_private_with_epsilon_calibrates_through_it():
    """Opacus's get_noise_multiplier through dputils-shuffle: epsilon <= target, within Opacus's 0.01."""
    sigma = get_noise_multiplier(
        target_epsilon=8.0, target_delta=1e-5, sample_rate=1 / 50, epochs=5, accountant="dputils-shuffle"
    )
    acc = create_accountant("dputils-shuffle")
    acc.history = [(sigma, 1 / 50, 250)]
    assert 8.0 - 0.01 <= acc.get_epsilon(1e-5) <= 8.0


# --------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(
    "history, match",
    [
        ([(1.0, 0.3, 5)], "not 1/k"),
        ([(1.0, 0.1, 5), (1.0, 0.05, 5)], "several sample rates"),
        ([("a", 0.1, 1)], "noise_multiplier"),
        ("garbage", "history must be a list"),
    ],
)
def test_bad_histories_are_refused_by_name(history, match):
    acc = create_accountant("dputils-shuffle")
    acc.history = history
    with pytest.raises(DPValueError, match=match):
        acc.get_epsilon(1e-5)


def test_bad_options_and_steps_are_refused_by_name():
    with pytest.raises(DPValueError, match="no closed-form bound"):
        ShuffleOpacusAccountant(group_size=2)
    with pytest.raises(DPValueError, match="both dataset_size and batch_size"):
        ShuffleOpacusAccountant(dataset_size=100)
    with pytest.raises(DPValueError, match="multiple"):
        ShuffleBCOpacusAccountant(dataset_size=100, batch_size=7)
    with pytest.raises(DPValueError, match="not 1/k"):
        create_accountant("dputils-shuffle").step(noise_multiplier=1.0, sample_rate=0.3)
    with pytest.raises(DPValueError, match=r"must be in \(0, 1\]"):
        steps_per_epoch(0.0)
    exact = ShuffleOpacusAccountant(dataset_size=100, batch_size=10)
    exact.history = [(1.0, 0.1, 10), (2.0, 0.1, 10)]
    with pytest.raises(DPValueError, match="one noise_multiplier"):
        exact.get_epsilon(1e-5)
    exact.history = [(1.0, 0.05, 20)]
    with pytest.raises(DPValueError, match="steps per epoch"):
        exact.get_epsilon(1e-5)


def test_state_dict_round_trip_and_refusals():
    acc = ShuffleBCOpacusAccountant(group_size=2, dataset_size=200, batch_size=20)
    for _ in range(25):
        acc.step(noise_multiplier=1.5, sample_rate=0.1)
    state = acc.state_dict()
    back = ShuffleBCOpacusAccountant(group_size=2, dataset_size=200, batch_size=20)
    back.load_state_dict(state)
    assert back.history == acc.history and back.get_epsilon(1e-5) == acc.get_epsilon(1e-5)
    for bad, match in [
        ({}, "non-empty mapping"),
        ("garbage", "non-empty mapping"),
        ({"history": [], "mechanism": "dputils-shuffle"}, "not 'dputils-shuffle-bc'"),
        (dict(state, history=None), "history must be a list"),
        (dict(state, options={"group_size": 1, "dataset_size": None, "batch_size": None}), "saved with options"),
    ]:
        with pytest.raises(DPValueError, match=match):
            back.load_state_dict(bad)
        assert back.history == acc.history  # unchanged


# --------------------------------------------------------------------------------------------- Opacus
def _training(accountant, poisson: bool, n: int = 96, batch: int = 16, epochs: int = 1, sigma: float = 1.3):
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(n, 5), torch.randint(0, 2, (n,)))
    loader = DataLoader(data, batch_size=batch, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    engine = PrivacyEngine(accountant=accountant)
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        data_loader=loader,
        noise_multiplier=sigma,
        max_grad_norm=1.0,
        poisson_sampling=poisson,
    )
    loss = torch.nn.CrossEntropyLoss()
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            loss(model(x), y).backward()
            opt.step()
    return engine, loader


def test_privacy_engine_with_a_shuffled_loader_accounts_whole_epochs():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine, loader = _training("dputils-shuffle", poisson=False, epochs=2)
    assert len(engine.accountant) == 2 * len(loader) == 12
    assert engine.get_epsilon(1e-5) == gdp_epsilon(1e-5, 2 * math.sqrt(2) / 1.3)


def test_privacy_engine_with_a_last_smaller_batch_is_accepted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine, loader = _training("dputils-shuffle", poisson=False, n=100, batch=16)  # 6 of 16 and one of 4
    assert len(loader) == 7 and len(engine.accountant) == 7
    assert engine.get_epsilon(1e-5) == gdp_epsilon(1e-5, 2 / 1.3)


def test_privacy_engine_with_poisson_sampling_is_refused_by_name():
    """Opacus's default poisson_sampling=True: the batch sizes vary, the hook refuses within the first epoch."""
    with warnings.catch_warnings(), pytest.raises(DPValueError, match="poisson_sampling=False"):
        warnings.simplefilter("ignore")
        _training("dputils-shuffle", poisson=True, n=512, batch=64)


def test_privacy_engine_checkpoint_round_trip(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine, _ = _training("dputils-shuffle", poisson=False)
        other = PrivacyEngine(accountant="dputils-shuffle")
        other.accountant.load_state_dict(engine.accountant.state_dict())
    assert other.accountant.state_dict() == engine.accountant.state_dict()
    assert other.get_epsilon(1e-5) == engine.get_epsilon(1e-5)
