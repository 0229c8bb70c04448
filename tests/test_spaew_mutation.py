"""Mutation tests of the saddle-point and Edgeworth chapters (issue 37 item 1).

Each test plants a +1% error in one shared function that a chapter relies on (the PLD accountant's epsilon,
the mu-GDP epsilon, the moments / RDP accountants, the saddle-point and Edgeworth estimates, the certified PLD
fallback), the code itself untouched, and drives the chapter's own target path at the smoke profile (the
chapter helpers the notebook calls, with the tolerances of params/targets/<chapter>.yml): the targets must
fail. The control tests run the same paths unmutated and must pass, so each failure is the mutation's. The
truths the targets compare with are independent of the mutated code (the contour integral of dputils.truth,
dp_accounting, mpmath, the authors' published values), stored in the targets files.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings

import pytest

from dputils import curves
from dputils.accountants import certified, spa
from dputils.accountants.edgeworth import EdgeworthAccountant
from dputils.accountants.pld import PLDAccountant
from dputils.accountants.rdp import RDPAccountant
from dputils.baselines import comparison_row, spa_against_rows, spa_epsilon_rows
from dputils.book.chapters import edgeworth as ew_ch
from dputils.book.chapters import own_bracket
from dputils.book.chapters import saddle_point as sp_ch
from dputils.book.scorecard import Targets
from dputils.mechanisms import SubsampledGaussianMechanism as SGM

F = 1.01  # the planted error


def _scaled(x):
    if isinstance(x, dict):
        return {k: _scaled(v) for k, v in x.items()}
    if isinstance(x, float):
        return x * F
    if dataclasses.is_dataclass(x) and hasattr(x, "value"):  # an AccountingResult: every number it reports
        return dataclasses.replace(
            x,
            value=x.value * F,
            lower=None if x.lower is None else x.lower * F,
            upper=None if x.upper is None else x.upper * F,
        )
    return x


def plant_function(monkeypatch, module, name: str) -> None:
    """Make ``module.name`` return 1.01 times its result, in every dputils module that bound it by import."""
    orig = getattr(module, name)

    def mutated(*a, **k):
        return _scaled(orig(*a, **k))

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("dputils") and getattr(mod, name, None) is orig:
            monkeypatch.setattr(mod, name, mutated)


def plant_method(monkeypatch, cls, name: str) -> None:
    """Make ``cls.name`` return 1.01 times its result (every number of an AccountingResult)."""
    orig = getattr(cls, name)

    def mutated(self, *a, **k):
        return _scaled(orig(self, *a, **k))

    monkeypatch.setattr(cls, name, mutated)


# --- the saddle-point chapter's paths ------------------------------------------------------------------------


def sp_own_pins() -> Targets:
    """The own-bracket section: σ = 1, q = 0.01, T = 1000 (in the smoke profile's own_Ts), T12.1-T12.3."""
    tg = Targets("saddle_point")
    rows = sp_ch.own_bracket_over_T(1.0, 0.01, 1e-5, [1000])
    own_bracket.record_own_pins(tg, ("T12.1", "T12.2", "T12.3"), rows, 1000)
    return tg


def sp_eps_table() -> Targets:
    """The ε(δ = 10⁻¹⁵) table at the rows the targets name (n = 1500, 1693, 3048, 4500; the smoke profile has
    them all): T6, T4, T5, T10.4 and the GDP and moments-accountant pins T5.8, T5.9."""
    pair = SGM(2.0, 0.01).pair("remove")
    ns, authors = sp_ch.authors_points([0, 2, 16, 31])
    table = spa_epsilon_rows(pair, ns, 1e-15, 2.0, 0.01, authors, label="authors")
    tg = Targets("saddle_point")
    sp_ch.record_pins(tg, ["T5.8", "T5.9"], table, None)
    ids = ["T6.1", "T6.2", "T6.3", "T4.1", "T4.2", "T4.3", "T5.1", "T5.2", "T5.3", "T5.4", "T5.5", "T5.6"]
    sp_ch.record_eps_table(tg, ids + ["T5.7", "T10.4"], table, pair, 1e-15, 1, None)
    return tg


# --- the Edgeworth chapter's paths ---------------------------------------------------------------------------


def ew_figure2() -> Targets:
    """Figure 2 at the smoke profile's m = 1000 (left) and m = 200 (middle): the readings of T2 and T4, the
    RDP and SPA pins."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        left = [comparison_row(SGM(0.8, 0.01), 1000, 0.015, rdp=True)]
        mid = [comparison_row(SGM(1.0, 0.05), 200, 1e-5, rdp=True)]
        side = spa_against_rows(lambda m: SGM(1.0, 0.05), mid, 1e-5)
    tg = Targets("edgeworth")
    readings = [(f"T2 {k}", "left", 1000) for k in ("truth", "ew2", "gdp", "rdp")]
    readings += [(f"T4 {k}", "mid", 200) for k in ("truth", "ew2", "gdp", "rdp")]
    ew_ch.record_figure2(tg, readings, ("T5 RDP", "T5 GDP", "T5 EW"), left, mid, True)
    ew_ch.record_pins(tg, ("T2 rdp dense", "T4 spa"), left, side)
    return tg


def ew_own_pins() -> Targets:
    """The own-bound section at 15 epochs of MNIST DP-SGD (T = 3516, in the smoke profile): T11."""
    tg = Targets("edgeworth")
    rows = ew_ch.own_bound_over_T(1.1, 256 / 60000, 1e-5, [3516], pld_max_T=3516)
    own_bracket.record_own_pins(tg, ("T11 PLD upper", "T11 PLD lower", "T11 answer"), rows, 3516)
    return tg


PATHS = {"sp_own": sp_own_pins, "sp_eps": sp_eps_table, "ew_fig2": ew_figure2, "ew_own": ew_own_pins}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_control_paths_pass_unmutated(path):
    tg = PATHS[path]()
    assert tg.records and all(r["status"] == "pass" for r in tg.records), [
        (r["id"], r["status"]) for r in tg.records if r["status"] != "pass"
    ]


MUTATIONS = [
    # (what is mutated, how to plant it, the chapter path, the target that must catch it)
    ("PLD epsilon", lambda mp: plant_method(mp, PLDAccountant, "get_epsilon"), "sp_own", "T12.1"),
    ("PLD fallback", lambda mp: plant_function(mp, certified, "with_pld_fallback"), "sp_own", "T12.3"),
    ("GDP epsilon", lambda mp: plant_function(mp, curves, "gdp_epsilon"), "sp_eps", "T5.8"),
    ("moments accountant", lambda mp: plant_function(mp, spa, "ma_epsilon"), "sp_eps", "T5.9"),
    ("SPA epsilon", lambda mp: plant_function(mp, spa, "spa_epsilon_methods"), "sp_eps", "T6.1"),
    ("PLD epsilon", lambda mp: plant_method(mp, PLDAccountant, "get_epsilon"), "ew_own", "T11 PLD upper"),
    ("PLD fallback", lambda mp: plant_function(mp, certified, "with_pld_fallback"), "ew_own", "T11 answer"),
    ("GDP epsilon", lambda mp: plant_function(mp, curves, "gdp_epsilon"), "ew_fig2", "T2 gdp"),
    ("RDP epsilon", lambda mp: plant_method(mp, RDPAccountant, "get_epsilon"), "ew_fig2", "T2 rdp dense"),
    ("SPA epsilon", lambda mp: plant_method(mp, spa.SaddlePointAccountant, "get_epsilon"), "ew_fig2", "T4 spa"),
    ("Edgeworth", lambda mp: plant_method(mp, EdgeworthAccountant, "epsilon_direction"), "ew_fig2", "T2 ew2"),
]


@pytest.mark.parametrize(("what", "plant", "path", "target"), MUTATIONS, ids=[f"{m[2]}-{m[0]}" for m in MUTATIONS])
def test_one_percent_error_fails_the_chapter(monkeypatch, what, plant, path, target):
    plant(monkeypatch)
    with pytest.raises(AssertionError, match=f"target {target} "):
        PATHS[path]()
