"""Opacus's own privacy-engine tests (``opacus/tests/privacy_engine_test.py``) that exercise the accountant, run
against the dputils Opacus accountants (``dputils-pld``, ``dputils-spa``, ``dputils-edgeworth``).

The test class is imported from the installed Opacus, never copied: ``PrivacyEngineCustomLayerTest`` (a model of
two small linear layers on 512 random points, the cheapest of Opacus's model classes; the tests below are the
same methods in every model class). For each test, ``PrivacyEngine`` in the peer module is pointed at
``PrivacyEngine(accountant=<ours>)`` (``unittest.mock.patch.object``, undone after the test) and the body runs
unchanged. Selected, because they exercise the accountant:

* ``test_make_private_with_epsilon``: Opacus calibrates the noise multiplier through our accountant
  (``get_noise_multiplier``), trains 2 epochs, and checks ``get_epsilon`` against the target to 2 places;
* ``test_checkpoints``: the accountant's ``state_dict`` saved and loaded through Opacus's checkpoints.

The other tests of the class check gradients, clipping, noise and model validation: the accountant only takes
``step`` calls there (code shared by all our accountants and Opacus's) and no number of it is read, so they are
not collected here (``NOT_ACCOUNTANT`` lists them with the reason).

The peer module imports ``torchvision`` (for its ResNet and FakeData tests, not the class used here). Where
torchvision is not installed, a placeholder module is put in ``sys.modules`` before the import whose every
attribute raises ``ImportError`` when used, so a test that needed it would fail loudly, never pass silently.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import warnings
from unittest import mock

import pytest

pytest.importorskip("opacus")

import dputils.interop.opacus  # noqa: E402,F401  (registers the names)


def _placeholder_torchvision() -> None:
    """Install a ``torchvision`` placeholder (see the module docstring) if the real one is missing."""
    if importlib.util.find_spec("torchvision") is not None:
        return

    class _Missing:
        def __init__(self, name):
            self._name = name

        def __getattr__(self, attr):
            raise ImportError(f"torchvision is not installed ({self._name}.{attr} was used)")

        def __call__(self, *a, **k):
            raise ImportError(f"torchvision is not installed ({self._name} was called)")

    class _Module(types.ModuleType):
        def __getattr__(self, attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return _Missing(f"{self.__name__}.{attr}")

    root = _Module("torchvision")
    for sub in ("models", "transforms", "datasets"):
        mod = _Module(f"torchvision.{sub}")
        setattr(root, sub, mod)
        sys.modules[f"torchvision.{sub}"] = mod
    sys.modules["torchvision"] = root


_placeholder_torchvision()
from opacus import PrivacyEngine  # noqa: E402
from opacus.tests import privacy_engine_test as pet  # noqa: E402

NAMES = ("dputils-pld", "dputils-spa", "dputils-edgeworth")
SELECTED = ("test_make_private_with_epsilon", "test_checkpoints")
NOT_ACCOUNTANT = {
    "test_basic": "trains; checks the model's parameters and gradients",
    "test_compare_to_vanilla": "compares gradients with non-private training",
    "test_flat_clipping": "checks clipped gradients",
    "test_per_layer_clipping": "checks clipped gradients",
    "test_sample_grad_aggregation": "checks per-sample gradients",
    "test_noise_changes_every_time": "checks the optimizer's noise",
    "test_get_compatible_module_inaction": "model validation (a ResNet, torchvision)",
    "test_model_validator": "model validation (a ResNet, torchvision)",
    "test_model_validator_after_fix": "model validation (a ResNet, torchvision)",
    "test_deterministic_run": "checks seeded training is reproducible",
    "test_validator_weight_update_check": "model validation (a DenseNet, torchvision)",
    "test_parameters_match": "checks the optimizer's parameters",
    "test_noise_level": "checks the noise's standard deviation in the gradients",
    "test_generate_noise_in_secure_mode": "checks the noise generator",
}


def _engine(name):
    """``PrivacyEngine`` whose default accountant is ``name`` (a subclass: the peer also calls its static
    methods, e.g. ``PrivacyEngine.get_compatible_module``)."""

    class Engine(PrivacyEngine):
        def __init__(self, *, accountant=name, **kwargs):
            super().__init__(accountant=accountant, **kwargs)

    return Engine


def _classes():
    out = {}
    for name in NAMES:

        def setUp(self, _name=name):
            pet.PrivacyEngineCustomLayerTest.setUp(self)
            patcher = mock.patch.object(pet, "PrivacyEngine", _engine(_name))
            patcher.start()
            self.addCleanup(patcher.stop)
            catcher = warnings.catch_warnings()
            catcher.__enter__()
            warnings.simplefilter("ignore")
            self.addCleanup(catcher.__exit__, None, None, None)

        body = {"setUp": setUp, "ACCOUNTANT": name, "__module__": __name__}
        # only the selected tests are collected: the others are set to None (unittest collects callables only)
        body.update({t: None for t in NOT_ACCOUNTANT})
        cls = type(f"TestPrivacyEngine_{name.split('-')[1]}", (pet.PrivacyEngineCustomLayerTest,), body)
        out[cls.__name__] = cls
    return out


globals().update(_classes())


def test_the_lists_cover_the_peer_class():
    """Every test of Opacus's class is either selected or listed with its reason (a new Opacus test is noticed)."""
    peer = {t for t in dir(pet.PrivacyEngineCustomLayerTest) if t.startswith("test")}
    assert peer == set(SELECTED) | set(NOT_ACCOUNTANT), peer ^ (set(SELECTED) | set(NOT_ACCOUNTANT))
