"""Issue 37 item 1: a 1% error planted in a shared function the shuffling_batch_clipping chapter relies on fails
the chapter's smoke-profile targets.

Each test plants the error at import time (the function returns 1.01 times its value, in every dputils module
that binds it), the code untouched, and runs the notebook's own target lines (the same calls, with the chapter's
target table params/targets/shuffling_batch_clipping.yml: its truths and tolerances). The target must fail
(``AssertionError`` from :meth:`Targets.check`); the unmutated paths pass (first test).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from dputils import curves
from dputils import shuffling as sh
from dputils.book.chapters import shuffling_batch_clipping as ch
from dputils.book.scorecard import Targets
from dputils.shuffling import conversions, tradeoff


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


def gdp_path(tg):
    """The notebook's eq. (7) cell: T1, T1 δ and the headline rows T2."""
    mus1 = [0.5, 1.0, 2.0, 3.0, math.sqrt(50) / 2, 5.0]
    tg.record("T1", [sh.gdp_epsilon(1e-5, mu) for mu in mus1])
    tg.record("T1 δ", sh.gdp_delta(1.0, 1.0))
    ch.headline_rows(
        tg,
        {
            "T2 σ=2 E=50 g=1": (2, 50, 1),
            "T2 σ=2 E=50 g=4": (2, 50, 4),
            "T2 σ=2 E=10 g=4": (2, 10, 4),
            "T2 σ=4 E=50 g=1": (4, 50, 1),
            "T2 generic g=4": (2, 50, -4),
            "T2 generic g=8": (2, 50, -8),
        },
    )


def curves_path(tg):
    """The notebook's trade-off curves cell (T7 1-4)."""
    al7 = np.array([1e-3, 0.01, 0.05, 0.1, 0.3])
    for tid, got in zip(["T7 1", "T7 2", "T7 3", "T7 4"], sh.strong_adversary_tradeoffs(al7).values()):
        tg.record(tid, got.tolist())


def closed_forms_path(tg):
    """The notebook's Def. 5.3 / 5.4 cell (T4)."""
    rows = ch.def53_rows([(1, 1, 0.05), (2, 1, 0.2), (math.sqrt(10), 2, 0.01)], np.linspace(0, 1, 2001))
    for tid, r in zip(("T4 1", "T4 2", "T4 3"), rows):
        tg.record(tid, [r["β0"], r["β1"]])
    tg.record("T4 5.4", sh.lower_bound_beta(math.sqrt(2), 0.02, 1.0))


def group_path(tg):
    """The notebook's group-privacy rows at E = 10 (T5 E=10 bound, T5 E=10 BC; recorded at every profile)."""
    rows10 = [
        sh.group_privacy_epsilons(g_, 50000, 250, 2.0, 10, 1e-5, printed=False, individual=False) for g_ in (1, 2, 4, 8)
    ]
    tg.record("T5 E=10 bound", [r[1] for r in rows10])
    tg.record("T5 E=10 BC", [r[2] for r in rows10])


def rdp_path(tg):
    """The notebook's RDP sanity value (T8 RDP)."""
    orders = list(range(2, 257))
    r_s = 14062 * sh.rdp_poisson_gaussian(256 / 60000, 1.1, orders)
    tg.record("T8 RDP", [sh.rdp_epsilon(r_s, orders, 1e-5), sh.rdp_epsilon(r_s, orders, 1e-5, "modern")])


PATHS = (gdp_path, curves_path, closed_forms_path, group_path, rdp_path)


def test_unmutated_paths_pass():
    tg = Targets("shuffling_batch_clipping")
    for path in PATHS:
        path(tg)
    assert all(r["status"] == "pass" for r in tg.records)


def _fails(path, target):
    with pytest.raises(AssertionError, match=f"target {target} "):
        path(Targets("shuffling_batch_clipping"))


def _scale_pair(r, s):
    return tuple(x * s for x in r)


@pytest.mark.parametrize(
    ("module", "name", "on", "path", "target"),
    [
        (curves, "gdp_epsilon", None, gdp_path, "T1"),  # eq. (7), the bound's epsilon
        (tradeoff, "gdp_delta", None, gdp_path, "T1 δ"),
        (tradeoff, "bc_shuffle_mu", None, gdp_path, "T2 σ=2 E=50 g=1"),  # the sqrt(gE)/sigma of Thm F.1
        (tradeoff, "generic_group_mu", None, gdp_path, "T2 generic g=4"),
        (sh, "gaussian_tradeoff", None, curves_path, "T7 1"),  # G_mu
        (tradeoff, "mixture_tradeoff", None, curves_path, "T7 2"),  # Def. 5.2's exact trade-off
        (tradeoff, "upper_bound_betas", _scale_pair, closed_forms_path, "T4 1"),  # Def. 5.3
        (tradeoff, "lower_bound_beta", None, closed_forms_path, "T4 5.4"),  # Def. 5.4
        (tradeoff, "mixture_epsilon", _scale_pair, group_path, "T5 E=10 BC"),  # group privacy, exact mixture
        (conversions, "rdp_epsilon", None, rdp_path, "T8 RDP"),
    ],
)
def test_mutation_fails_smoke_target(monkeypatch, module, name, on, path, target):
    plant(monkeypatch, module, name, on=on)
    _fails(path, target)
