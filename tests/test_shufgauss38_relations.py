"""The relation helpers that glue the prose of the shuffling and gauss_audit pages (issue 34), against closed forms
and hand-made inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dputils.book.chapters import gauss_audit as ga
from dputils.book.chapters import shuffling_batch_clipping as ch


def test_collision_ratio_at_g2_closed_form():
    # g = 2 in B = N/s rounds: the exact law puts (s - 1)/(N - 1) on "both in one round", Theorem F.1's printed
    # q_1 = B / C(B + 1, 2) = 2/(B + 1); the helper's ratio must be their quotient
    N, s = 50000, 250
    B = N // s
    want = (2 / (B + 1)) / ((s - 1) / (N - 1))
    rows = [(1, 1.0, 1.0, 1.0, 1.0, 1.0), (2, 2.0, 1.9, 1.8, 2.1, 3.0)]
    got = ch.group_relations(rows, N, s)
    assert got["coll_g2"] == pytest.approx(want, rel=1e-12)
    assert got["coll_lo"] == got["coll_hi"] == got["coll_g2"]
    # hand-made rows: growth over sqrt(2) and 2, IC excess 2.1/2 - 1, printed deficit 1 - 1.8/1.9
    assert got["growth_bound"] == pytest.approx(2 / math.sqrt(2))
    assert got["growth_generic"] == pytest.approx(3 / 2)
    assert got["ic_excess"] == pytest.approx(0.05)
    assert got["printed_deficit"] == pytest.approx(1 - 1.8 / 1.9)


def test_tradeoff_relations_g1_coincides_and_subsampling_costs_more():
    r = ch.tradeoff_relations(50000, 250, 2.0, 1e-5, epochs=10)
    assert r["gap_g1"] < 1e-12  # c^2 = E exactly: the mixture is G with mu = sqrt(E)/sigma
    assert r["lo_g4"] >= -1e-12 and 0 < r["gap_g4"] < 0.01
    assert r["n_cross"] >= 1
    assert r["eps_ss"] == pytest.approx(r["eps_sh"] * (1 + r["ss_excess"]), rel=1e-12)
    assert r["ss_excess"] > 0


def test_training_relations_hand_made():
    dat = {"y": np.array([0, 9]), "y_test": np.array([3])}
    rows = [
        {"sigma": 1.0, "acc_ic": 0.70, "acc_bc": 0.30, "acc_bc_as_implemented": 0.75},
        {"sigma": 4.0, "acc_ic": 0.55, "acc_bc": 0.12, "acc_bc_as_implemented": 0.74},
    ]
    r = ch.training_relations(rows, dat)
    assert r["bc_trails"] and r["chance"] == pytest.approx(0.1)
    assert r["bc_lead"] == pytest.approx(40.0)
    assert r["acc_bc_top"] == 0.12 and r["sigma_top"] == 4.0
    assert r["parity_gap"] == pytest.approx(-5.0)
    rows[0]["acc_bc"] = 0.71
    assert not ch.training_relations(rows, dat)["bc_trails"]


def test_fig3_shortfall_parts_add_up():
    Ts = [50, 2500]
    ceil, surr, pooled = [4.85, 7.69], [4.59, 7.69], [3.18, 7.54]
    abl = {"gauss-pooled": [2.77, 6.99], "gauss": [3.16, 7.03]}
    sf = ga.fig3_shortfall(Ts, ceil, surr, pooled, abl)
    for j in range(2):
        assert sf["ceiling"][j] + sf["clt"][j] + sf["pooling"][j] + sf["estimation"][j] == pytest.approx(1)
        assert sf["ceiling_ours"][j] + sf["clt_ours"][j] + sf["estimation_ours"][j] == pytest.approx(1)
    assert sf["ceiling"][0] == pytest.approx((8 - 4.85) / (8 - 2.77))
    assert sf["pooling"][0] == pytest.approx((4.59 - 3.18) / (8 - 2.77))
