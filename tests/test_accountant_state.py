"""Saving an accountant's ledger to JSON and loading it back (dputils.state, Accountant.state_dict)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dputils import (
    DPValueError,
    GaussianMechanism,
    LaplaceMechanism,
    PLDAccountant,
    RDPAccountant,
    SubsampledGaussianMechanism,
)
from dputils.accountants.base import Accountant
from dputils.accountants.edgeworth import EdgeworthAccountant
from dputils.accountants.gdp import GDPAccountant
from dputils.accountants.spa import SaddlePointAccountant
from dputils.curves import gdp_epsilon
from dputils.mechanisms import Mechanism, SubsampledLaplaceMechanism

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # the saddle point's degraded-regime note

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    "make, mechs",
    [
        (
            lambda: PLDAccountant(discretization=2e-4, direction="remove"),
            [(SubsampledGaussianMechanism(1.0, 0.01), 300), (LaplaceMechanism(3.0), 2)],
        ),
        (
            lambda: RDPAccountant(orders=[2, 4, 8.5, 32], refine=False),
            [(SubsampledGaussianMechanism(0.8, 0.05), 100), (GaussianMechanism(4.0), 1)],
        ),
        (lambda: GDPAccountant(), [(GaussianMechanism(3.0), 5)]),
        (lambda: SaddlePointAccountant(), [(SubsampledGaussianMechanism(1.0, 0.01), 1000)]),
        (lambda: EdgeworthAccountant(order=1), [(SubsampledGaussianMechanism(1.0, 0.01), 1000)]),
        (lambda: SaddlePointAccountant(direction="add"), [(SubsampledLaplaceMechanism(2.0, 0.1), 10)]),
    ],
)
def test_round_trip_answers_the_same(make, mechs):
    acc = make()
    for m, c in mechs:
        acc.compose(m, c)
    state = acc.state_dict()
    text = json.dumps(state, allow_nan=False)  # strict JSON
    back = Accountant.from_state_dict(json.loads(text))
    assert type(back) is type(acc) and back.direction == acc.direction
    assert back.ledger == acc.ledger
    for a, b in ((acc.get_epsilon(1e-5), back.get_epsilon(1e-5)), (acc.get_delta(1.0), back.get_delta(1.0))):
        assert (a.value, a.lower, a.upper) == (b.value, b.lower, b.upper)
    # the constructor options came back too
    assert back.__dict__["_init_options"] == json.loads(text)["options"]


def test_options_are_the_constructor_arguments():
    s = PLDAccountant(discretization=2e-4).compose(GaussianMechanism(1.0), 2).state_dict()
    assert s["options"] == {
        "direction": "both",
        "discretization": 2e-4,
        "tail": 1e-20,
        "window_tail": 1e-20,
        "rtol": 1e-3,
    }
    assert s["ledger"] == [
        {
            "mechanism": {
                "class": "dputils.mechanisms.GaussianMechanism",
                "params": {"sigma": 1.0, "sensitivity": 1.0},
            },
            "count": 2,
        }
    ]
    assert s["format"] == "dputils.accountant" and s["version"] == 1


def test_a_version_1_file_still_loads():
    """A file written by hand in the version-1 format: four Gaussians of sigma 2 are one of sigma 1 (mu = 1
    GDP), whose exact epsilon at delta 1e-5 is the closed form; the loaded PLD's bracket holds it."""
    acc = Accountant.from_state_dict(json.loads((DATA / "accountant_state_v1.json").read_text()))
    assert isinstance(acc, PLDAccountant) and sum(c for _, c in acc.ledger) == 4
    r = acc.get_epsilon(1e-5)
    exact = gdp_epsilon(1e-5, 1.0)
    assert r.lower <= exact * (1 + 1e-9) and exact * (1 - 1e-9) <= r.upper


def test_class_method_of_a_subclass_checks_the_kind():
    s = GDPAccountant().compose(GaussianMechanism(1.0)).state_dict()
    with pytest.raises(DPValueError, match="is not a PLDAccountant"):
        PLDAccountant.from_state_dict(s)
    assert isinstance(GDPAccountant.from_state_dict(s), GDPAccountant)


def _good():
    return PLDAccountant().compose(GaussianMechanism(1.0), 2).state_dict()


def _with(**changes):
    s = _good()
    for path, value in changes.items():
        target = s
        keys = path.split("__")
        for k in keys[:-1]:
            target = target[int(k)] if isinstance(target, list) else target[k]
        last = keys[-1]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return s


@pytest.mark.parametrize(
    "state, fragment",
    [
        ("garbage", "state must be a dict"),
        ({}, "state.format"),
        (_with(format="opacus"), "state.format"),
        (_with(version=2), "newer dputils"),
        (_with(version=0), "positive integer"),
        (_with(version=True), "positive integer"),
        (_with(accountant="os.system"), "must name a dputils class"),
        (_with(accountant="dputils.mechanisms.GaussianMechanism"), "is not a Accountant"),
        (_with(accountant="dputils.accountants.pld.Nothing"), "no class"),
        (_with(options=[1]), "state.options must be a dict"),
        (_with(options={"bogus": 1}), "options do not fit PLDAccountant"),
        (_with(ledger=None), "state.ledger must be a list"),
        (_with(ledger__0__count=0), "positive integer"),
        (_with(ledger__0__count=2.5), "positive integer"),
        (_with(ledger__0__count=True), "positive integer"),
        (_with(ledger__0={"mechanism": {}}), "keys 'mechanism' and 'count'"),
        (_with(ledger__0__mechanism__class="builtins.dict"), "must name a dputils class"),
        (_with(ledger__0__mechanism__params={"sigma": 1.0, "q": 0.5}), "do not fit GaussianMechanism"),
        (_with(ledger__0__mechanism__params={"sigma": -1.0}), "sigma"),
    ],
)
def test_bad_states_are_refused_by_name(state, fragment):
    with pytest.raises(DPValueError, match=fragment):
        Accountant.from_state_dict(state)


class _Opaque(Mechanism):
    """A mechanism outside dputils holding an object that is not JSON."""

    def __init__(self, rng):
        self.rng = rng

    def pair(self, direction):  # pragma: no cover - never composed into a query
        return GaussianMechanism(1.0).pair(direction)

    @property
    def params(self):
        return {}


def test_what_cannot_be_saved_is_refused_by_name():
    import numpy as np

    acc = PLDAccountant()
    acc.ledger.append((_Opaque(np.random.default_rng(0)), 1))  # bypass compose: only the saving is tested
    with pytest.raises(DPValueError, match=r"ledger\[0\].*Generator cannot be saved"):
        acc.state_dict()
    with pytest.raises(DPValueError, match="not a finite number"):
        RDPAccountant(orders=[2, float("inf")]).compose(GaussianMechanism(1.0)).state_dict()
