"""Further mutation tests of the saddle-point and Edgeworth chapters (issue 37 item 1), beyond
tests/test_spaew_mutation.py: a +1% error planted (monkeypatch, code untouched) in a shared function the chapters
rely on must fail a target of the chapter at the smoke profile, on the chapter's own recording path.

The functions: the root finder of the contour-integral truth (``dputils.truth._epsilon_with_error``, behind
``truth_epsilon`` and ``composition_epsilon``, the truth of both chapters), the composed CGF derivatives
(``dputils.cumulants.composed_cgf_derivatives``, shared by the saddle-point accountant and the truth), the
one-step loss moments (``dputils.cumulants.loss_moments``, the Edgeworth accountant's input) and the Theorem-1
tail bound. The targets compare with values independent of the mutated code (the authors' mpmath values, our
notes' independent computations, closed forms). The control runs the same paths unmutated.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings

import numpy as np
import pytest

from dputils import cumulants, truth
from dputils.accountants import edgeworth as ew
from dputils.baselines import comparison_row, spa_epsilon_rows
from dputils.book.chapters import edgeworth as ew_ch
from dputils.book.chapters import saddle_point as sp_ch
from dputils.book.scorecard import Targets
from dputils.cumulants import standardized_cumulants
from dputils.mechanisms import SubsampledGaussianMechanism as SGM

F = 1.01


def _scale(x):
    if isinstance(x, float):
        return x * F
    if isinstance(x, np.ndarray):
        return x * F
    if isinstance(x, tuple):
        return tuple(_scale(v) for v in x)
    if isinstance(x, cumulants.LossMoments):
        return dataclasses.replace(
            x,
            mean=x.mean * F,
            central=tuple(c * F for c in x.central),
            cumulants=tuple(c * F for c in x.cumulants),
            abs1=x.abs1 * F,
            abs3=x.abs3 * F,
        )
    return x


def plant(monkeypatch, module, name: str, first_only: bool = False) -> None:
    """``module.name`` returns its result times 1.01 (only the first element of a tuple if ``first_only``), in
    every dputils module that bound it by import."""
    orig = getattr(module, name)

    def mutated(*a, **k):
        out = orig(*a, **k)
        if first_only:
            return (_scale(out[0]),) + tuple(out[1:])
        return _scale(out)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("dputils") and getattr(mod, name, None) is orig:
            monkeypatch.setattr(mod, name, mutated)


# --- the chapters' recording paths at the smoke profile ------------------------------------------------------


def sp_few_epochs() -> Targets:
    """Saddle point, few epochs: 3 epochs at delta 1e-5 (in the smoke profile's epochs_d5), T11.7 / T11.8."""
    tg = Targets("saddle_point")
    pair = SGM(2.0, 0.01).pair("remove")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (r,) = truth.spa_accuracy_scan(pair, [300], 1e-5)
    tg.record("T11.7", r["truth"])
    tg.record("T11.8", r["clt"])
    return tg


def sp_eps_rows() -> Targets:
    """Saddle point, the eps(delta = 1e-15) table at n = 3048 and 4500: T6.1-T6.3 and the n = 4500 errors."""
    pair = SGM(2.0, 0.01).pair("remove")
    ns, authors = sp_ch.authors_points([0, 2, 16, 31])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = spa_epsilon_rows(pair, ns, 1e-15, 2.0, 0.01, authors, label="authors")
    tg = Targets("saddle_point")
    ids = ["T6.1", "T6.2", "T6.3", "T4.1", "T4.2", "T4.3", "T5.1", "T5.2", "T5.3", "T5.4", "T5.5", "T5.6"]
    sp_ch.record_eps_table(tg, ids + ["T5.7", "T10.4"], table, pair, 1e-15, 1, None)
    return tg


def ew_cumulants() -> Targets:
    """Edgeworth, Implementation: the one-step cumulants of X and Y at sigma 0.8, p 0.01 (T8)."""
    tg = Targets("edgeworth")
    pair = SGM(0.8, 0.01).pair("remove")
    got = standardized_cumulants(pair, "q") + standardized_cumulants(pair, "p")
    for tid, g in zip(["T8 X κ1", "T8 X κ2", "T8 X λ3", "T8 X λ4", "T8 Y κ1", "T8 Y κ2", "T8 Y λ3", "T8 Y λ4"], got):
        tg.record(tid, g)
    return tg


def ew_truth() -> Targets:
    """Edgeworth, Figure 2 at the smoke profile's m = 1000 (left) and 200 (middle), without RDP: T2/T4 truth."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        left = [comparison_row(SGM(0.8, 0.01), 1000, 0.015, rdp=False)]
        mid = [comparison_row(SGM(1.0, 0.05), 200, 1e-5, rdp=False)]
    tg = Targets("edgeworth")
    readings = [("T2 truth", "left", 1000), ("T2 ew2", "left", 1000), ("T4 truth", "mid", 200)]
    ew_ch.record_figure2(tg, readings, ("T5 RDP", "T5 GDP", "T5 EW"), left, mid, False)
    return tg


def ew_theorem1() -> Targets:
    """Edgeworth, Theorem 1: the plain-Gaussian row (T14 Gaussian) and the exact tails (T14 Theorem 1)."""
    tg = Targets("edgeworth")
    g_rows = ew_ch.theorem1_gaussian_rows(ew.theorem1_tail_bound, 2.0, 100, [0.0, 10.0, 20.0, 40.0])
    tg.record("T14 Gaussian", max(abs(r["bound"] / r["chernoff"] - 1) for r in g_rows))
    return tg


PATHS = {
    "sp_few": sp_few_epochs,
    "sp_eps": sp_eps_rows,
    "ew_cum": ew_cumulants,
    "ew_truth": ew_truth,
    "ew_thm1": ew_theorem1,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_control_paths_pass_unmutated(path):
    tg = PATHS[path]()
    assert tg.records and all(r["status"] == "pass" for r in tg.records), [
        (r["id"], r["status"]) for r in tg.records if r["status"] != "pass"
    ]


MUTATIONS = [
    # (what is mutated, how to plant it, the chapter path, the target that must catch it)
    ("truth root", lambda mp: plant(mp, truth, "_epsilon_with_error", first_only=True), "sp_few", "T11.7"),
    ("truth root", lambda mp: plant(mp, truth, "_epsilon_with_error", first_only=True), "ew_truth", "T2 truth"),
    ("composed CGF", lambda mp: plant(mp, cumulants, "composed_cgf_derivatives"), "sp_eps", "T6.2"),
    # the truth shares the CGF, and its value is checked first (against the notes' independent value)
    ("composed CGF", lambda mp: plant(mp, cumulants, "composed_cgf_derivatives"), "sp_few", "T11.7"),
    ("loss moments", lambda mp: plant(mp, cumulants, "loss_moments"), "ew_cum", "T8 X κ1"),
    ("loss moments", lambda mp: plant(mp, cumulants, "loss_moments"), "ew_truth", "T2 ew2"),
    ("Theorem 1 bound", lambda mp: plant(mp, ew, "theorem1_tail_bound"), "ew_thm1", "T14 Gaussian"),
]


@pytest.mark.parametrize(("what", "plant_it", "path", "target"), MUTATIONS, ids=[f"{m[2]}-{m[0]}" for m in MUTATIONS])
def test_one_percent_error_fails_the_chapter(monkeypatch, what, plant_it, path, target):
    plant_it(monkeypatch)
    with pytest.raises(AssertionError, match=f"target {target} "):
        PATHS[path]()
