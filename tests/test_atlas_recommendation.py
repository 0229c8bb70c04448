"""The atlas chapter's written recommendation (dputils.book.chapters.atlas): facts, words and the point-by-point check,
on a synthetic table whose answers are known by construction."""

from __future__ import annotations

import copy

import pytest

from dputils.book import atlas
from dputils.book.chapters import atlas as ch

QS, TS, SIGMAS = (0.01, 0.1), (100, 1000, 10000), (1.0, 2.0)
ACC = ["pld", "rdp", "gdp", "spa", "edgeworth", "prv"]
SECONDS = {"pld": 0.5, "rdp": 0.01, "gdp": 0.001, "spa": 0.05, "edgeworth": 0.02, "prv": 2.0}


def _relerr(a, q, t, s):
    """Known errors: SPA within 0.1% at q = 0.1, and at q = 0.01 from T = 1000 on; RDP 20% above everywhere;
    the CLT 5% below everywhere; Edgeworth 0.5% above only at T = 10000 and sigma 2; PRV inside everywhere."""
    if a == "spa":
        return 0.001 if (q == 0.1 or t >= 1000) else 0.05
    if a == "rdp":
        return 0.2
    if a == "gdp":
        return -0.05
    if a == "edgeworth":
        return 0.005 if (t == 10000 and s == 2.0) else 0.03
    return 0.0


def _rows(no_ref=()):
    rows = []
    for s in SIGMAS:
        for q in QS:
            for t in TS:
                r = {c: "" for c in atlas.COLUMNS}
                r.update(sigma=s, q=q, T=t, delta=1e-5)
                has_ref = (s, q, t) not in no_ref
                if has_ref:
                    r.update(ref_lower=0.99, ref_upper=1.0, ref_rel_width=0.01)
                else:
                    r["ref_note"] = "PLD bracket too wide: relative width 0.5 > 0.01 at h 0.1"
                for a in ACC:
                    r[f"{a}_seconds"] = SECONDS[a]
                    if not has_ref:
                        r[f"{a}_verdict"] = "no reference"
                        continue
                    e = _relerr(a, q, t, s)
                    r[f"{a}_relerr"] = e
                    r[f"{a}_eps"] = 1.0 * (1 + e) if e >= 0 else 0.99 * (1 + e)
                    r[f"{a}_verdict"] = atlas.verdict(e)
                rows.append(r)
    return rows


def test_facts_match_the_construction():
    rows = _rows()
    rec = ch.recommendation(rows, ACC, tol=0.01)
    assert rec["n"] == rec["n_ref"] == 12 and not rec["no_ref"]
    assert rec["from_T"]["spa"][1e-5] == {0.01: 1000, 0.1: 100}
    assert rec["from_T"]["gdp"][1e-5] == {0.01: None, 0.1: None}
    assert rec["from_T"]["edgeworth"][1e-5] == {0.01: None, 0.1: None}  # sigma 1 is never within 1%
    assert rec["optimistic"]["gdp"] == 12 and rec["optimistic"]["spa"] == 0
    assert rec["rdp"]["median"] == pytest.approx(0.2)
    cheap = rec["cheapest"][1e-5]
    # by median time: gdp < rdp < edgeworth < spa < pld < prv; the CLT is below, RDP too far, Edgeworth misses sigma 1
    assert cheap[(0.01, 100)] == "pld"  # SPA 5% off there: the PLD
    assert cheap[(0.01, 1000)] == "spa" and cheap[(0.1, 100)] == "spa"
    assert ch.check_recommendation(rows, rec) == []


def test_words_say_what_the_facts_say():
    words = ch.recommendation_words(ch.recommendation(_rows(), ACC, tol=0.01))
    assert "from T = 10³ on at q = 0.01" in words["spa"]
    assert "at every T for q in {0.1}" in words["spa"]
    assert "below the bracket (optimistic, not a valid bound) at 12 of them" in words["gdp"]
    # a page read found "at no T" where the cell table had Edgeworth accurate at one T: the rule is a suffix rule
    assert "not from any T of the grid on for q in {0.01, 0.1}" in words["gdp"] and "at no T" not in words["gdp"]
    assert "It has one at every point of the table." in words["certified"]
    assert "never below the bracket, 20% above it in the median" in words["certified"]
    assert "SPA in 5 and the PLD in 1 of the 6 cells" in words["cheapest"]


def test_missing_references_are_described_and_skipped():
    rows = _rows(no_ref={(1.0, 0.01, 100), (2.0, 0.01, 100)})
    rec = ch.recommendation(rows, ACC, tol=0.01)
    assert rec["cheapest"][1e-5][(0.01, 100)] is None
    assert rec["from_T"]["spa"][1e-5][0.01] == 1000  # the lowest T of q 0.01 has no reference
    assert ch.check_recommendation(rows, rec) == []
    text = ch.missing_reference_words(rows, 1e-5)
    assert text.startswith("At δ = 10⁻⁵, 2 points have no reference") and "q = 0.01" in text and "T = 10²" in text


@pytest.mark.parametrize(
    "tamper, word",
    [
        (lambda rec: rec["from_T"]["spa"][1e-5].__setitem__(0.01, 100), "not accurate"),
        (lambda rec: rec["from_T"]["spa"][1e-5].__setitem__(0.01, 10000), "also accurate"),
        (lambda rec: rec["cheapest"][1e-5].__setitem__((0.01, 100), "gdp"), "gdp"),
        (lambda rec: rec["cheapest"][1e-5].__setitem__((0.1, 100), "pld"), "cheaper"),
        (lambda rec: rec["accurate"].__setitem__("spa", 3), "accurate count"),
        (lambda rec: rec["optimistic"].__setitem__("gdp", 0), "optimistic count"),
    ],
)
def test_the_check_catches_a_wrong_fact(tamper, word):
    rows = _rows()
    rec = copy.deepcopy(ch.recommendation(rows, ACC, tol=0.01))
    tamper(rec)
    problems = ch.check_recommendation(rows, rec)
    assert problems and any(word in p for p in problems), problems
