"""The "where the method's own bracket is usable" section shared by the saddle-point and Edgeworth chapters.

Both estimate accountants (:class:`~dputils.accountants.spa.SaddlePointAccountant`,
:class:`~dputils.accountants.edgeworth.EdgeworthAccountant`) carry a certified bracket of their own and, by
default, narrow it with the PLD accountant's where it is vacuous or wide (:mod:`dputils.accountants.certified`).
:func:`own_bracket_rows` runs one of them over T next to the PLD, :func:`own_bracket_table` shows the rows, and
:func:`record_own_pins` pins the PLD's certified bracket and the default answer at one T to an independent
truth (the contour integral of :mod:`dputils.truth`, stored in the chapter's targets file), so that an error
in the PLD or in the fallback cannot pass the table's checks, which compare the two accountants only with each
other.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..scorecard import Targets
from ..tables import show_table


def own_bracket_rows(
    accountant: Callable[..., Any],
    mechanism: Any,
    delta: float,
    Ts: Sequence[int],
    pld_max_T: float = math.inf,
    extra: Callable[[Any], Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Per T: the method's own ε(δ) estimate and certified bracket (``accountant(fallback="none")``), its relative
    width, ``extra(own_accountant)`` (e.g. the Edgeworth error bound) and, for T up to ``pld_max_T``, the PLD
    accountant's certified bracket (``pld_lower``, ``pld_upper``), the estimate's error against the PLD's upper
    end (``est_rel``) and the accountant's default answer (``answer``, ``lower``, ``upper``; ``fallback`` true
    where the PLD was consulted). The method's degraded-regime warnings are silenced: the rows show the
    brackets instead."""
    from ...accountants.pld import PLDAccountant

    rows = []
    for T in Ts:
        T = int(T)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            own_acc = accountant(fallback="none").compose(mechanism, T)
            own = own_acc.get_epsilon(delta)
        row: dict[str, Any] = dict(
            T=T,
            estimate=own.value,
            own_lower=own.lower,
            own_upper=own.upper,
            own_width=(own.upper - own.lower) / own.upper if math.isfinite(own.upper) else math.inf,
        )
        if extra is not None:
            row.update(extra(own_acc))
        if T <= pld_max_T:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ans = accountant().compose(mechanism, T).get_epsilon(delta)
            ref = PLDAccountant().compose(mechanism, T).get_epsilon(delta)
            row.update(
                pld_lower=ref.lower,
                pld_upper=ref.upper,
                est_rel=own.value / ref.upper - 1,
                answer=ans.value,
                lower=ans.lower,
                upper=ans.upper,
                fallback=ans.details.get("fallback") == "pld",
            )
        rows.append(row)
    return rows


def _end(x: float, digits: int = 4) -> str:
    return "∞" if not math.isfinite(x) else f"{x:.{digits}g}"


def own_bracket_table(
    rows: Sequence[Mapping[str, Any]], method: str, caption: str, extra: Mapping[str, Callable[[Mapping], str]] = {}
):
    """The rows of :func:`own_bracket_rows` as one narrow table: T, the method's estimate and own bracket,
    ``extra`` columns (header -> formatter of a row), the PLD's bracket and the default answer (marked where the
    PLD was consulted)."""
    out = []
    for r in rows:
        row = {
            "T": f"{r['T']:,}",
            f"{method} ε": f"{r['estimate']:.4g}",
            "own bracket": f"[{_end(r['own_lower'])}, {_end(r['own_upper'])}]",
        }
        row.update({h: f(r) for h, f in extra.items()})
        if "answer" in r:
            row["PLD bracket"] = f"[{r['pld_lower']:.5g}, {r['pld_upper']:.5g}]"
            row["default answer"] = f"{r['answer']:.5g}" + (" (PLD)" if r["fallback"] else "")
        else:
            row["PLD bracket"] = row["default answer"] = "not run"
        out.append(row)
    return show_table(out, caption=caption)


def record_own_pins(tg: Targets, ids: Sequence[str], rows: Sequence[Mapping[str, Any]], T: int) -> bool:
    """Record ``ids`` = (PLD upper end, PLD lower end, default answer): ε(δ) at ``T`` of the rows against the
    contour-integral truth of the chapter's targets file (the tolerances there are the PLD's measured accuracy
    with room, far below 1%). Recorded as not run where the rows lack ``T`` or its PLD; returns whether they ran."""
    by_T = {r["T"]: r for r in rows}
    r = by_T.get(int(T))
    ran = r is not None and "answer" in r
    why = f"T = {T:,} (with its PLD) is not in this run's list"
    for tid, key in zip(ids, ("pld_upper", "pld_lower", "answer"), strict=True):
        tg.record(tid, r[key] if ran else None, ran=ran, not_run_reason=why)
    return ran
