"""Issue 37 item 1: a 1% error planted in a shared function the gauss_audit chapter relies on fails the chapter's
smoke-profile targets.

Each test plants the error at import time (the function returns 1.01 times its value, everywhere it is bound in
dputils), the code untouched, and drives the chapter helper the notebook calls with the chapter's own target table
(params/targets/gauss_audit.yml: its truths and tolerances). The target must fail (``AssertionError`` from
:meth:`Targets.check`). The unmutated paths pass (first test), so a failure is the mutation's doing.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from dputils import curves
from dputils.audit import gauss, gaussian_pair, model1, onerun
from dputils.book.chapters import gauss_audit as ch
from dputils.book.scorecard import Targets

DELTA = 1e-5


def plant(monkeypatch, module, name, scale=1.01, on=None):
    """Replace ``module.name`` by a copy returning ``scale`` times its value, in every dputils module that binds
    the same function object (so internal callers see it too). ``on`` maps the result to the scaled result."""
    orig = getattr(module, name)

    def mutated(*args, **kwargs):
        out = orig(*args, **kwargs)
        return on(out, scale) if on is not None else out * scale

    n = 0
    for modname, mod in list(sys.modules.items()):
        if (modname == "dputils" or modname.startswith("dputils.")) and getattr(mod, name, None) is orig:
            monkeypatch.setattr(mod, name, mutated)
            n += 1
    assert n >= 1
    return mutated


def lemma1_path(tg):
    """The notebook's Lemma 1 cell (T1a-c)."""
    from dputils.audit import epsilon_pair

    e_both = epsilon_pair(DELTA, 0, 2.6245, 4.095, 2.63879)
    e_one = epsilon_pair(DELTA, 0, 2.6245, 4.095, 2.63879, "out_in")
    e_gdp = curves.gdp_epsilon(DELTA, 1.5603)
    ch.lemma1_table(tg, ("T1a", "T1b", "T1c"), DELTA, e_both, e_one, e_gdp)


def corollary1_path(tg):
    """The notebook's Corollary 1 cell (T2a-e) and the tail-factor cell (T2f-h)."""
    cor1 = model1.edgeworth_deviations(2500, 0.0819, 2.6245, x0s=(3, 4, 5))
    ch.corollary1_table(tg, ("T2a", "T2b", "T2c", "T2d", "T2e"), cor1, True)
    ch.tail_factor_targets(tg, ("T2f", "T2g", "T2h"), cor1)


def fixed_path(tg):
    """The notebook's fixed-input cell (T11a-d), at the smoke profile's PLD grid."""
    ch.fixed_input_targets(tg, ("T11a", "T11b", "T11c", "T11d"), 1e-3)


def test_unmutated_paths_pass():
    tg = Targets("gauss_audit")
    lemma1_path(tg)
    corollary1_path(tg)
    fixed_path(tg)
    status = {r["id"]: r["status"] for r in tg.records}
    assert status["T2h"] == "not reproduced"  # the paper's misprint, an outcome
    assert all(s == "pass" for k, s in status.items() if k != "T2h")


def _fails(path, target):
    with pytest.raises(AssertionError, match=f"target {target} "):
        path(Targets("gauss_audit"))


def test_epsilon_pair_core(monkeypatch):
    # the closed-form Gaussian-pair epsilon behind Lemma 1 and every Gaussian auditor
    plant(monkeypatch, gaussian_pair, "_epsilon_pair_raw")
    _fails(lemma1_path, "T1a")
    _fails(fixed_path, "T11a")


def test_gdp_epsilon(monkeypatch):
    plant(monkeypatch, curves, "gdp_epsilon")
    _fails(lemma1_path, "T1c")


def test_gaussian_auditor(monkeypatch):
    plant(monkeypatch, gauss, "gauss_audit", on=lambda r, s: dataclasses.replace(r, epsilon_lower=r.epsilon_lower * s))
    _fails(fixed_path, "T11a")


@pytest.mark.parametrize("name", ["steinke_epsilon", "steinke_p_value"])
def test_steinke(monkeypatch, name):
    plant(monkeypatch, onerun, name)
    _fails(fixed_path, "T11b")


@pytest.mark.parametrize("name", ["fdp_epsilon", "gaussian_mu_for"])
def test_fdp(monkeypatch, name):
    plant(monkeypatch, onerun, name)
    _fails(fixed_path, "T11c")


def test_accountant(monkeypatch):
    plant(monkeypatch, model1, "theoretical_epsilon", on=lambda r, s: {**r, "epsilon": r["epsilon"] * s})
    _fails(fixed_path, "T11d")


@pytest.mark.parametrize(
    ("name", "target"),
    [("_skew_prefactor", "T2f"), ("exact_standardized_sf", "T2b"), ("tail_deviation_leading_term", "T2f")],
)
def test_edgeworth(monkeypatch, name, target):
    # Corollary 1's leading tail term is the skewness prefactor times the tail factor: an error in either shows
    # in the tail factor read off as leading term over prefactor (T2f); the exact mixture in T2b-e
    plant(monkeypatch, model1, name)
    _fails(corollary1_path, target)


def test_edgeworth_prefactor(monkeypatch):
    plant(monkeypatch, model1, "edgeworth_deviations", on=lambda r, s: {**r, "prefactor": r["prefactor"] * s})
    _fails(corollary1_path, "T2a")
