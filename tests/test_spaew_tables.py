"""The saddle-point and Edgeworth chapters' tables for a reader (issue 34): few columns, no cell with 9 or more
significant digits (the page shows differences, not two 10-digit numbers), and the own-bracket table of both
chapters from one helper."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

from dputils.book.chapters import own_bracket
from dputils.book.chapters import saddle_point as ch
from dputils.book.scorecard import Targets

DIGITS = re.compile(r"\d[\d.]*")


def _max_digits(table) -> int:
    """The most significant digits of any number in any cell as the page shows it."""
    most = 0
    for r in table.rows:
        for c in table.columns:
            for tok in DIGITS.findall(table._cell(c, r.get(c))):
                most = max(most, len(tok.replace(".", "").lstrip("0")))
    return most


def test_moments_table_shows_differences_at_few_digits():
    tg = Targets("saddle_point")
    ours = dict(mean=1.4157704834e-05, var=2.8401759971e-05, abs3=3.4946796651e-07)
    mp = dict(mean=1.4157704831e-05, var=2.8401759972e-05, abs3=3.4946796650e-07)
    t = ch.moments_table(tg, ours, mp, 2.8402138322e-05, 2.8402138320e-05, 2.0, 0.01)
    assert _max_digits(t) <= 7
    cells = {r["quantity"]: r for r in t.rows}
    assert cells["E[L]"]["reference"] == "1.41577×10⁻⁵"  # as given in the targets file, no padding zeros
    assert cells["E[L]"]["ours / mpmath − 1"] == "2×10⁻¹⁰"  # 1.4157704834 / 1.4157704831 − 1


def test_gaussian_and_eps_tables_few_digits():
    g = SimpleNamespace(delta_clt=0.126936737507, delta_msd0=0.123152652652, delta_msd1=0.127705628655)
    assert _max_digits(ch.gaussian_table(0.126936737506, g)) <= 6
    row = dict(n=1500, authors=1.6553534717, clt=1.6529266216, lower=1.5, upper=1.7, t_hat=33.9, degraded=True)
    t = ch.eps_table([row], 1e-15)
    assert _max_digits(t) <= 6
    assert t.rows[0]["rel"] == "-1.5×10⁻³"  # 1.6529266216 / 1.6553534717 − 1 = −1.466e-3


def test_own_bracket_table_is_narrow_and_marks_the_pld():
    rows = [
        dict(
            T=1000,
            estimate=1.8021690119,
            own_lower=1.3553626292,
            own_upper=2.1020998758,
            own_width=0.3552,
            pld_lower=1.8281392969,
            pld_upper=1.8282436489,
            est_rel=-0.0143,
            answer=1.8281392969,
            lower=1.8281392969,
            upper=1.8282436489,
            fallback=True,
        ),
        dict(T=10**8, estimate=0.5, own_lower=0.4, own_upper=math.inf, own_width=math.inf),
    ]
    t = own_bracket.own_bracket_table(rows, "AEA", "caption", extra={"w": lambda r: "x"})
    assert len(t.columns) == 6
    assert t.rows[0]["default answer"] == "1.8281 (PLD)"
    assert t.rows[1]["own bracket"] == "[0.4, ∞]" and t.rows[1]["PLD bracket"] == "not run"
    assert _max_digits(t) <= 6


def test_own_pins_not_run_without_the_row():
    tg = Targets("saddle_point")
    assert not own_bracket.record_own_pins(tg, ("T12.1", "T12.2", "T12.3"), [dict(T=10)], 1000)
    assert [r["status"] for r in tg.records] == ["not run"] * 3
