"""The benchmarks chapter's sentence on prv_accountant's interval (``prv_interval_sentence``) states the relations
its numbers have: above / inside / below the exact value, and whether our bracket holds it. The live case itself
(prv_accountant against the saddle-point contour) is checked in tests/test_peer_prv_accountant.py."""

from __future__ import annotations

from dputils.book.chapters import benchmarks as ch


def _case(prv, exact, ours, d_lo=9.98e-6):
    return {
        "sigma": 0.3,
        "q": 0.01,
        "steps": 1000,
        "delta": 1e-5,
        "prv": prv,
        "exact": exact,
        "exact_err": 1e-11,
        "delta_at_prv_lower": d_lo,
        "delta_at_prv_lower_err": 1e-18,
        "ours": ours,
        "prv_misses": not prv[0] <= exact <= prv[2],
        "ours_holds": ours[0] <= exact <= ours[1],
    }


def test_sentence_above_and_holds():
    t = ch.prv_interval_sentence(_case((69.8229, 69.8366, 69.8503), 69.815711, (69.81407, 69.81572)))
    assert "lies above it" in t and "below δ" in t and "holds the exact value" in t


def test_sentence_inside_and_misses():
    t = ch.prv_interval_sentence(_case((1.0, 1.1, 1.2), 1.1, (1.15, 1.16)))
    assert "lies inside it" in t and "misses the exact value" in t and "conservative" not in t


def test_sentence_below():
    t = ch.prv_interval_sentence(_case((1.0, 1.1, 1.2), 1.3, (1.29, 1.31)))
    assert "lies below it" in t
