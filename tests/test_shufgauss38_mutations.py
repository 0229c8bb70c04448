"""Issue 37 item 1, continued: 1% errors planted in shared functions the shuffling_batch_clipping and gauss_audit
chapters use, which tests/test_shuffle37_mutations.py and tests/test_gauss37_mutations.py do not plant yet.

Each test plants the error at import time (the function's value, or one part of it, off by 1%, in every dputils
module that binds the function), the code untouched, and runs the notebook's own target lines at the smoke
profile's settings with the chapter's target table (params/targets/NAME.yml: its truths and tolerances). The
target must fail (``AssertionError`` from :meth:`Targets.check`); the unmutated paths pass (first tests), so a
failure is the mutation's doing.

Shuffling: μ = √E/σ of shuffling with g = 1 (Lemma F.2; the curves of T7), the exact mixture δ of Def 5.2 (the
counterexample to Lemma E.2, T6 exact), the per-round RDP of the Poisson subsampled Gaussian (T8 RDP), the
occupancy law of Theorem F.1 (1% more weight on rounds holding two or more of the group, T3 exact), the exact
Binomial tails of Lemmas E.2/E.3 (T6 tails) and the law of c² of subsampling with g = 1 (T7 2). Gauss: the
information ceiling (the exact score-pair epsilon), Proposition 1's moments and the Gaussian-surrogate epsilon
(T11e), the DP-FTRL node noise calibration (T9a), and the Gaussian fit's point estimate (Andrew et al.'s baseline,
and the fitted IN mean at the centre of the auditor's regions; T11f).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

from dputils import shuffling as sh
from dputils.audit import andrew, gauss, model1
from dputils.book.chapters import gauss_audit as ga
from dputils.book.chapters import shuffling_batch_clipping as ch
from dputils.book.scorecard import Targets
from dputils.shuffling import conversions, laws, tradeoff
from dputils.training import ftrl as ftrl_mod


def plant(monkeypatch, module, name, scale=1.01, on=None):
    """Replace ``module.name`` by a copy returning ``scale`` times its value (``on(value, scale)`` if given) in
    every dputils module that binds the same function object, so internal callers see the error too."""
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


# --------------------------------------------------------------------------- shuffling: the notebook's target lines
def laws_path(tg):
    """The notebook's occupancy-law cell (T3 exact, T3 exact q1, T3 N=60000), without the Monte Carlo."""
    ex = sh.bc_shuffle_law(1000, 100, 4)
    tg.record("T3 exact", ex.pmf[2:].tolist())
    tg.record("T3 exact q1", ex.pmf[1])
    tg.record("T3 N=60000", [f(60000, 250, 2).pmf[1] for f in (sh.bc_shuffle_law, sh.bc_shuffle_law_as_printed)])


def curves_path(tg):
    """The notebook's trade-off curves cell (T7 1-4)."""
    al7 = np.array([1e-3, 0.01, 0.05, 0.1, 0.3])
    for tid, got in zip(["T7 1", "T7 2", "T7 3", "T7 4"], sh.strong_adversary_tradeoffs(al7).values()):
        tg.record(tid, got.tolist())


def rdp_path(tg):
    """The notebook's RDP sanity value (T8 RDP)."""
    orders = list(range(2, 257))
    r_s = 14062 * sh.rdp_poisson_gaussian(256 / 60000, 1.1, orders)
    tg.record("T8 RDP", [sh.rdp_epsilon(r_s, orders, 1e-5), sh.rdp_epsilon(r_s, orders, 1e-5, "modern")])


def tails_path(tg):
    """The notebook's Hoeffding-tails cell (T6 tails above, T6 tails below)."""
    settings = [(60000, 256, E_) for E_ in (1, 2, 5, 10, 20, 50, 100)] + [(50000, 128, 10)]
    tail_rows, _ = ch.hoeffding_tail_rows(settings)
    tg.record("T6 tails above", [r[3] for r in tail_rows])
    tg.record("T6 tails below", [r[4] for r in tail_rows])


def lemma_e2_path(tg):
    """The notebook's Lemma E.2 counterexample cell (T6 exact/claimed 1-3)."""
    rows = ch.lemma_e2_rows([(1.0, 10, 16.0), (1.0, 10, 20.0), (4.0, 50, 12.0)])
    for k, r in zip("123", rows):
        tg.record(f"T6 exact {k}", r["exact"])
        tg.record(f"T6 claimed {k}", r["claimed"])


SHUFFLE_PATHS = (laws_path, curves_path, rdp_path, tails_path, lemma_e2_path)


def test_unmutated_shuffling_paths_pass():
    tg = Targets("shuffling_batch_clipping")
    for path in SHUFFLE_PATHS:
        path(tg)
    assert tg.records and all(r["status"] == "pass" for r in tg.records)


def _fails(chapter, path, target):
    with pytest.raises(AssertionError, match=f"target {target} "):
        path(Targets(chapter))


def _more_collisions(law, s):
    """The occupancy law of BC+SH (index j = rounds hit) with 1% more weight on j < g, the rounds that hold two or
    more members of the group, and the all-apart mass j = g renormalised."""
    p = law.pmf.copy()
    g = p.size - 1
    p[1:g] *= s
    p[g] = 1.0 - p[:g].sum()
    return sh.C2Law(p, law.label)


def _tails(t, s):
    return {**t, "P_above_cL2": t["P_above_cL2"] * s, "P_below_cU2": t["P_below_cU2"] * s}


def _binomial_p(law, s):
    """The Binomial law of c² (subsampling, g = 1) with its success probability off by 1%."""
    n = law.pmf.size - 1
    p = float(np.dot(np.arange(n + 1), law.pmf)) / n
    return laws.binomial_law(n, p * s, law.label)


@pytest.mark.parametrize(
    ("module", "name", "on", "path", "target"),
    [
        (tradeoff, "shuffle_g1_mu", None, curves_path, "T7 1"),  # mu of E epochs composed (Lemma F.2)
        (tradeoff, "mixture_delta", None, lemma_e2_path, "T6 exact 1"),  # Def 5.2's delta, eq. (mixture delta)
        (conversions, "rdp_poisson_gaussian", None, rdp_path, "T8 RDP"),  # per-round RDP, Poisson sampling
        (laws, "bc_shuffle_law", _more_collisions, laws_path, "T3 exact"),  # Theorem F.1's occupancy law
        (sh, "subsampling_tails", _tails, tails_path, "T6 tails above"),  # exact Binomial tails, Lemma E.2
        (laws, "subsample_ic_g1_law", _binomial_p, curves_path, "T7 2"),  # law of c^2, subsampling g = 1
    ],
)
def test_shuffling_mutation_fails_smoke_target(monkeypatch, module, name, on, path, target):
    plant(monkeypatch, module, name, on=on)
    _fails("shuffling_batch_clipping", path, target)


# --------------------------------------------------------------------------- gauss_audit
def ceiling_path(tg):
    """The notebook's information-ceiling cell: T11e (fixed inputs, every profile)."""
    ga.ceiling_target(tg, "T11e")


def ftrl_sigma_path(tg):
    """The notebook's DP-FTRL calibration cell (T9a) at the smoke profile's epsilons."""
    eps = [2.0, 8.0]
    sig = [ftrl_mod.calibrate_sigma_node(e, 1e-5, 128) for e in eps]
    ga.ftrl_sigma_table(tg, "T9a", 128, 1e-5, eps, sig, ftrl_mod.tree_depth(128))


def estimate_path(tg):
    """The notebook's fixed-input cell: T11f, the Gaussian fit's point estimate (every profile)."""
    ga.point_estimate_target(tg, "T11f")


def test_unmutated_gauss_paths_pass():
    tg = Targets("gauss_audit")
    ceiling_path(tg)
    ftrl_sigma_path(tg)
    estimate_path(tg)
    assert {r["id"]: r["status"] for r in tg.records} == {"T11e": "pass", "T9a": "pass", "T11f": "pass"}


def _theta_in(th, s):
    return {**th, "mu_in": th["mu_in"] * s}


def _fit_in(theta, s):
    return theta * np.array([s, 1.0, 1.0, 1.0])


def _estimate(r, s):
    return dataclasses.replace(r, epsilon_lower=r.epsilon_lower * s)


@pytest.mark.parametrize(
    ("module", "name", "on", "path", "target"),
    [
        (model1, "exact_score_epsilon", None, ceiling_path, "T11e"),  # the information ceiling
        (model1, "gaussian_score_epsilon", None, ceiling_path, "T11e"),  # the Gaussian surrogate's epsilon
        (model1, "score_pair_theta", _theta_in, ceiling_path, "T11e"),  # Proposition 1's IN mean
        (ftrl_mod, "calibrate_sigma_node", None, ftrl_sigma_path, "T9a"),  # DP-FTRL node noise
        (andrew, "andrew_epsilon", _estimate, estimate_path, "T11f"),  # the baseline's point estimate
        (gauss, "fit_theta", _fit_in, estimate_path, "T11f"),  # the fitted IN mean (regions' centre)
    ],
)
def test_gauss_mutation_fails_smoke_target(monkeypatch, module, name, on, path, target):
    plant(monkeypatch, module, name, on=on)
    _fails("gauss_audit", path, target)
