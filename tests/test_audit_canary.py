"""The shared configuration and skeleton of the canary-audit runners (dputils.audit.canary)."""

import dataclasses

import numpy as np
import pytest

from dputils.audit.canary import CanaryConfig, draw_canaries
from dputils.errors import DPValueError

DPSGD = dict(m=10, sigma=1.0, epochs=1, batch_size=10, n_train=100)
FTRL = dict(m=10, epsilon=2.0, T=16)


@pytest.mark.parametrize(
    "mechanism, kw, name",
    [
        ("dpsgd", dict(m=3), "m must be >= 4"),
        ("dpsgd", dict(m=2.5), "m"),
        ("dpsgd", dict(sigma=0.0), "sigma"),
        ("dpsgd", dict(sigma=None), "sigma"),
        ("dpsgd", dict(clip=-1.0), "clip"),
        ("dpsgd", dict(epochs=0), "epochs"),
        ("dpsgd", dict(batch_size=101), "batch_size must be <= n_train"),
        ("dpsgd", dict(lr=float("nan")), "lr"),
        ("dpsgd", dict(delta=1.0), "delta"),
        ("dpsgd", dict(p_in=0.0), "p_in"),
        ("dpsgd", dict(p_in=1.0), "p_in"),
        ("dpsgd", dict(noise_multiplier_scale=0.0), "noise_multiplier_scale"),
        ("dpsgd", dict(pld_discretization=-1e-3), "pld_discretization"),
        ("dpsgd", dict(hidden=-1), "hidden"),
        ("dpsgd", dict(model="vgg"), "model"),
        ("dpsgd", dict(microbatch=-2), "microbatch"),
        ("dpsgd", dict(dataset="mnist"), "dataset"),
        ("dpsgd", dict(kind="blur"), "kind"),
        ("dpsgd", dict(kind="ood", ood_scale=0.0), "ood_scale"),
        ("ftrl", dict(T=0), "T"),
        ("ftrl", dict(epsilon=None), "exactly one of sigma_node and epsilon"),
        ("ftrl", dict(sigma_node=2.0), "exactly one of sigma_node and epsilon"),
        ("ftrl", dict(epsilon=0.0), "epsilon"),
        ("ftrl", dict(epsilon=None, sigma_node=-1.0), "sigma_node"),
        ("ftrl", dict(canary_leaf=17), r"canary_leaf must be in \[1, T=16\]"),
        ("ftrl", dict(noise_scale=0.0), "noise_scale"),
        ("ftrl", dict(batch_size=0), "batch_size"),
        ("ftrl-ideal", dict(dim=9), r"dim must be >= m \(10\)"),
        ("sgd", dict(), "mechanism"),
    ],
)
def test_bad_config_names_the_parameter(mechanism, kw, name):
    base = DPSGD if mechanism == "dpsgd" else FTRL
    with pytest.raises(DPValueError, match=name):
        CanaryConfig.validated(mechanism, **{**base, **kw})


def test_unknown_option_is_named():
    with pytest.raises(DPValueError, match="sigmaa"):
        CanaryConfig.validated("dpsgd", sigmaa=1.0, **DPSGD)


def test_config_is_frozen_and_normalised():
    cfg = CanaryConfig.validated("dpsgd", hidden=3.0, **{**DPSGD, "m": np.int64(12)})
    assert cfg.hidden == 3 and type(cfg.hidden) is int and cfg.m == 12 and type(cfg.m) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.m = 5
    # T = epochs * round(n_train / batch_size) at rate batch_size / n_train: 3 epochs of round(100 / 30) = 3 steps
    cfg = CanaryConfig.validated("dpsgd", **{**DPSGD, "epochs": 3, "batch_size": 30})
    assert (cfg.steps, cfg.q) == (9, 0.3)
    # fields that do not apply to the mechanism are not checked (DP-FTRL has no sigma, epochs, n_train)
    assert CanaryConfig.validated("ftrl", **FTRL, epochs=0).steps == 16


def test_draw_canaries_streams_and_both_groups():
    cfg = CanaryConfig.validated("dpsgd", **{**DPSGD, "m": 500, "seed": 4})
    # membership alone: one uniform per canary from the stream [seed, stream], IN below p_in
    alone = draw_canaries(cfg, stream=29)
    u = np.random.default_rng([4, 29]).random(500)
    assert alone.coords is None and np.array_equal(alone.is_in, u < 0.5)
    # Dirac coordinates from the same stream are drawn first: distinct, in range
    both = draw_canaries(cfg, stream=7, n_coords=600)
    rng = np.random.default_rng([4, 7])
    assert np.array_equal(both.coords, rng.choice(600, size=500, replace=False))
    assert np.array_equal(both.is_in, rng.random(500) < 0.5)
    assert len(set(both.coords.tolist())) == 500 and both.coords.min() >= 0 and both.coords.max() < 600
    # separate streams: coordinates from one, membership from the other
    sep = draw_canaries(cfg, stream=11, n_coords=600, coord_stream=5)
    assert np.array_equal(sep.coords, np.random.default_rng([4, 5]).choice(600, size=500, replace=False))
    assert np.array_equal(sep.is_in, np.random.default_rng([4, 11]).random(500) < 0.5)
    with pytest.raises(DPValueError, match="model parameters"):
        draw_canaries(cfg, stream=7, n_coords=499)


def test_draw_canaries_keeps_both_groups():
    # p_in tiny: every canary falls OUT, so canary 0 is made IN (and canary 1 stays OUT)
    cfg = CanaryConfig.validated("dpsgd", **{**DPSGD, "m": 6, "p_in": 1e-12})
    is_in = draw_canaries(cfg, stream=1).is_in
    assert is_in.tolist() == [True, False, False, False, False, False]
    cfg = CanaryConfig.validated("dpsgd", **{**DPSGD, "m": 6, "p_in": 1 - 1e-12})
    assert draw_canaries(cfg, stream=1).is_in.tolist() == [True, False, True, True, True, True]
