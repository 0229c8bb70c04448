"""The maps and the time figure of the accountant atlas chapter (presentation only).

They draw the rows of :mod:`dputils.book.atlas` (one dict per point, columns :data:`dputils.book.atlas.COLUMNS`);
the summaries (verdict counts, farthest points, failures, the recomputation check, the Gaussian rows) are
computed by :mod:`dputils.book.atlas` itself.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from .. import atlas, plotting

NAMES = atlas.LABELS
MAPPED = ["rdp", "gdp", "spa", "edgeworth", "prv"]
FLOOR = 1e-4  # |r| below this is drawn as 0
NOREF, FAILED = 10.0, 11.0  # sentinel values of the colour map


def _signed_log(r: float) -> float:
    if r == 0 or abs(r) < FLOOR:
        return 0.0
    return math.copysign(min(math.log10(abs(r) / FLOOR), 5.0), r)


def _panel_values(rows, a, sigma, delta, ts, qs):
    z = np.full((len(ts), len(qs)), np.nan)
    for r in rows:
        if r["sigma"] != sigma or r["delta"] != delta:
            continue
        i, j = ts.index(r["T"]), qs.index(r["q"])
        v = r[f"{a}_verdict"]
        if v == "failed":
            z[i, j] = FAILED
        elif v == "no reference":
            z[i, j] = NOREF
        else:
            z[i, j] = _signed_log(r[f"{a}_relerr"])
    return z


def draw_maps(rows, delta):
    """One row of heat maps per accountant of :data:`MAPPED`, one column per σ, cells over (q, T): the signed
    relative error on a log scale (white inside the bracket), grey without a reference, black failed."""
    sigmas = sorted({r["sigma"] for r in rows})
    qs = sorted({r["q"] for r in rows})
    ts = sorted({r["T"] for r in rows})
    nr, nc = len(MAPPED), len(sigmas)
    fig, axes = plt.subplots(
        nr,
        nc,
        figsize=(2.0 * nc + 1.2, 1.7 * nr + 0.6),
        squeeze=False,
        sharex=True,
        sharey=True,
        constrained_layout=True,
    )
    cmap = plt.get_cmap("RdBu_r")
    for i, a in enumerate(MAPPED):
        for j, s in enumerate(sigmas):
            ax = axes[i, j]
            z = _panel_values(rows, a, s, delta, ts, qs)
            img = ax.imshow(np.where(z > 5, np.nan, z), origin="lower", cmap=cmap, vmin=-5, vmax=5, aspect="auto")
            special = np.where(z == NOREF, 0, np.where(z == FAILED, 1, np.nan))
            ax.grid(False)
            ax.imshow(special, origin="lower", aspect="auto", vmin=0, vmax=1, cmap=ListedColormap(["0.8", "0.0"]))
            ax.set_xticks(range(len(qs)), [f"{q:.0e}".replace("e-0", "e-") for q in qs], rotation=90, fontsize=7)
            ax.set_yticks(range(len(ts)), [f"{t:.0e}".replace("e+0", "e") for t in ts], fontsize=7)
            if i == 0:
                ax.set_title(f"σ = {s:g}", fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{NAMES[a]}\nT", fontsize=8)
            if i == nr - 1:
                ax.set_xlabel("q", fontsize=8)
    cb = fig.colorbar(img, ax=axes, shrink=0.6, ticks=[-5, -3, -1, 0, 1, 3, 5])
    cb.ax.set_yticklabels(["≤ −10", "−0.1", "−0.001", "0", "0.001", "0.1", "≥ 10"], fontsize=7)
    cb.set_label("signed relative error r", fontsize=8)
    return fig


def plot_time(rows, accountants):
    """Median wall time per point of each accountant against T (over every σ, q and δ)."""
    ts = sorted({r["T"] for r in rows})
    fig, ax = plotting.new_figure()
    for a in accountants:
        med = []
        for t in ts:
            sec = [r[f"{a}_seconds"] for r in rows if r["T"] == t and r[f"{a}_seconds"] != ""]
            med.append(np.median(sec) if sec else np.nan)
        ax.loglog(ts, med, "o-", label=NAMES[a], color=plotting.color(a))
    ax.set_xlabel("steps T")
    ax.set_ylabel("median seconds per point")
    ax.legend(fontsize=8, ncol=2)
    return fig


# ------------------------------------------------------------------------------------------------
# the written recommendation: facts computed from the grid, words generated from the facts, and a check
# that re-derives every fact from the rows point by point
# ------------------------------------------------------------------------------------------------
def accurate(r, a: str, tol: float) -> bool:
    """Whether accountant ``a`` answered at point ``r`` within ``tol`` of the PLD bracket (``|r_A| <= tol``)."""
    return r[f"{a}_verdict"] not in ("failed", "no reference") and abs(r[f"{a}_relerr"]) <= tol


def usable(r, a: str, tol: float) -> bool:
    """Accurate (:func:`accurate`) and not below the bracket: ``0 <= r_A <= tol`` (the PLD itself, the reference,
    is usable wherever there is a reference)."""
    if a == "pld":
        return r["ref_lower"] != ""
    return accurate(r, a, tol) and r[f"{a}_relerr"] >= 0


def _median(values) -> float | None:
    values = [v for v in values if v != ""]
    return float(np.median(values)) if values else None


def _cell(ref, d, q, t):
    return [r for r in ref if r["delta"] == d and r["q"] == q and r["T"] == t]


def recommendation(rows, accountants, tol: float = 0.01) -> dict:
    """The facts behind the written recommendation, from the atlas rows.

    * ``n``, ``n_ref``: points, and points with a PLD reference; ``no_ref``: the (σ, q, T, δ) without one.
    * ``seconds[a]``: median and largest seconds per point of each accountant (all points it answered).
    * ``accurate[a]``: points within ``tol`` of the bracket, out of ``n_ref``; ``optimistic[a]``: points below it.
    * ``from_T[a][δ][q]``: the smallest T of the grid from which ``a`` is within ``tol`` at every σ with a
      reference and every larger T (``None``: not even at the largest T; cells without a reference are skipped).
    * ``cheapest[δ][(q, T)]``: the accountant of smallest median time (the PLD among them) that is usable
      (:func:`usable`: within ``tol`` above the bracket, never below it) at every σ of the cell with a reference;
      ``None`` when the cell has no reference.
    * ``rdp``: RDP's median and largest ``r`` over the points with a reference, and where the largest is."""
    ref = [r for r in rows if r["ref_lower"] != ""]
    deltas = sorted({r["delta"] for r in rows}, reverse=True)
    qs, ts = sorted({r["q"] for r in rows}), sorted({r["T"] for r in rows})
    others = [a for a in accountants if a != "pld"]
    seconds = {
        a: (
            _median([r[f"{a}_seconds"] for r in rows]),
            max((r[f"{a}_seconds"] for r in rows if r[f"{a}_seconds"] != ""), default=None),
        )
        for a in accountants
    }
    by_cost = sorted(accountants, key=lambda a: (seconds[a][0] if seconds[a][0] is not None else math.inf, a))
    from_t: dict[str, dict[float, dict[float, int | None]]] = {}
    for a in others:
        from_t[a] = {}
        for d in deltas:
            from_t[a][d] = {}
            for q in qs:
                cells = [(t, _cell(ref, d, q, t)) for t in ts]
                cells = [(t, c) for t, c in cells if c]
                if not cells:
                    continue
                start = None
                for t, c in reversed(cells):
                    if all(accurate(r, a, tol) for r in c):
                        start = t
                    else:
                        break
                from_t[a][d][q] = start
    cheapest: dict[float, dict[tuple[float, int], str | None]] = {}
    for d in deltas:
        cheapest[d] = {}
        for q in qs:
            for t in ts:
                c = _cell(ref, d, q, t)
                if not c:
                    cheapest[d][(q, t)] = None
                    continue
                cheapest[d][(q, t)] = next(a for a in by_cost if all(usable(r, a, tol) for r in c))
    rdp_r = [(r["rdp_relerr"], r) for r in ref if r["rdp_relerr"] != ""]
    worst = max(rdp_r, key=lambda x: x[0], default=(None, None))
    return {
        "tol": tol,
        "n": len(rows),
        "n_ref": len(ref),
        "ref_width": max((r["ref_rel_width"] for r in ref), default=0.0),
        "rdp_below": sum(r["rdp_verdict"] == "optimistic" for r in ref),
        "no_ref": [(r["sigma"], r["q"], r["T"], r["delta"]) for r in rows if r["ref_lower"] == ""],
        "deltas": deltas,
        "qs": qs,
        "ts": ts,
        "by_cost": by_cost,
        "seconds": seconds,
        "accurate": {a: sum(accurate(r, a, tol) for r in ref) for a in others},
        "optimistic": {a: sum(r[f"{a}_verdict"] == "optimistic" for r in ref) for a in others},
        "from_T": from_t,
        "cheapest": cheapest,
        "rdp": {
            "median": _median([x for x, _ in rdp_r]),
            "max": worst[0],
            "at": None if worst[1] is None else {k: worst[1][k] for k in ("sigma", "q", "T", "delta")},
        },
    }


_SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def short_number(x: float) -> str:
    """A number at 3 significant digits; a power of ten from 100 up or below 0.01 as 10 with a superscript."""
    if x > 0 and abs(math.log10(x) - round(math.log10(x))) < 1e-9 and (x >= 100 or x < 1e-2):
        return "10" + str(round(math.log10(x))).translate(_SUP)
    return f"{x:.3g}"


def _span(name: str, values) -> str:
    """'name from a to b', or 'name = a' when they coincide."""
    lo, hi = min(values), max(values)
    return f"{name} = {short_number(lo)}" if lo == hi else f"{name} from {short_number(lo)} to {short_number(hi)}"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _rule_words(rule: dict[float, int | None], ts: list[int]) -> str:
    """'at every T for q ≥ …; from T = … on at q = …; not from any T of the grid on for q in …' for one accountant
    and δ. ``rule[q]`` is the smallest T from which the accountant is accurate at every larger T of the grid (None:
    there is no such T; it may still be accurate at a single T, so the words never say "at no T")."""
    every = [q for q, t in rule.items() if t is not None and t == min(ts)]
    parts = []
    if every:
        parts.append("at every T for q in {" + ", ".join(short_number(q) for q in every) + "}")
    for q, t in rule.items():
        if t is not None and t != min(ts):
            parts.append(f"from T = {short_number(t)} on at q = {short_number(q)}")
    never = [q for q, t in rule.items() if t is None]
    if never:
        parts.append("not from any T of the grid on for q in {" + ", ".join(short_number(q) for q in never) + "}")
    return "; ".join(parts) if parts else "nowhere (no point of this δ has a reference)"


def missing_reference_words(rows, delta: float) -> str:
    """Where the PLD reference is missing at ``delta`` and why, in words generated from the rows."""
    miss = [r for r in rows if r["delta"] == delta and r["ref_lower"] == ""]
    if not miss:
        return f"At δ = {short_number(delta)} every point has a reference (no grey cell)."
    wide = sum(r["ref_note"].startswith("PLD bracket too wide") for r in miss)
    refused = len(miss) - wide
    why = []
    if wide:
        why.append(("" if not refused else f"{wide} ") + "where the best PLD bracket of the ladder stayed too wide")
    if refused:
        why.append(("" if not wide else f"{refused} ") + "where the PLD refused")
    sig = sorted({r["sigma"] for r in miss})
    return (
        f"At δ = {short_number(delta)}, {len(miss)} points have no reference ({_join(why)}), at σ in "
        f"{{{', '.join(short_number(x) for x in sig)}}}, {_span('q', [r['q'] for r in miss])} and "
        f"{_span('T', [r['T'] for r in miss])}."
    )


def recommendation_words(rec: dict) -> dict[str, str]:
    """The paragraphs of the recommendation, generated from :func:`recommendation`'s facts (nothing typed)."""
    pct = f"{100 * rec['tol']:g}%"
    s_pld = rec["seconds"]["pld"]
    words = {}
    no_ref = rec["no_ref"]
    if no_ref:
        nd = sorted({p[3] for p in no_ref}, reverse=True)
        missing = (
            f" It has no such bracket at {len(no_ref)} points, at δ = {_join([short_number(d) for d in nd])}, with "
            f"{_span('T', [p[2] for p in no_ref])} and {_span('q', [p[1] for p in no_ref])}."
        )
    else:
        missing = " It has one at every point of the table."
    certified = (
        f"For a certified ε, use the PLD accountant. It certified a bracket at most "
        f"{100 * rec['ref_width']:.3g}% wide at {rec['n_ref']} of the {rec['n']} points, in {s_pld[0]:.3g} s per "
        f"point in the median and {s_pld[1]:.3g} s at most (its whole ladder of grids).{missing}"
    )
    r = rec["rdp"]
    if r["median"] is not None:
        at = r["at"]
        certified += (
            f" RDP is the certified fallback {'there' if no_ref else 'when time matters'} "
            f"({rec['seconds']['rdp'][0]:.3g} s per point in the median): it "
            + (
                "is never below the bracket, "
                if not rec["rdp_below"]
                else f"is below the bracket at {rec['rdp_below']} points, "
            )
            + f"{100 * r['median']:.3g}% above it in the median, and "
            + (f"{1 + r['max']:.3g} times its upper end" if r["max"] > 1 else f"{100 * r['max']:.3g}% above it")
            + f" at worst (σ = {short_number(at['sigma'])}, q = {short_number(at['q'])}, T = {short_number(at['T'])}, δ = {short_number(at['delta'])})."
        )
    words["certified"] = certified
    for a in rec["from_T"]:
        opt = rec["optimistic"][a]
        text = (
            f"{LABELS_LONG.get(a, NAMES[a])} takes {rec['seconds'][a][0]:.3g} s per point in the median and is "
            f"within {pct} of the bracket at {rec['accurate'][a]} of the {rec['n_ref']} points with a reference"
        )
        text += (
            f"; it is below the bracket (optimistic, not a valid bound) at {opt} of them."
            if opt
            else ", never below it."
        )
        for d, rule in rec["from_T"][a].items():
            text += f" At δ = {short_number(d)}, within {pct} at every σ of the grid: {_rule_words(rule, rec['ts'])}."
        words[a] = text
    per_d = []
    for d, cells in rec["cheapest"].items():
        counts = {}
        for a in cells.values():
            if a is not None:
                counts[a] = counts.get(a, 0) + 1
        if counts:
            order = sorted(counts, key=lambda a: (-counts[a], rec["by_cost"].index(a)))
            items = [f"{LABELS_SHORT.get(a, NAMES[a])} in {counts[a]}" for a in order]
            n_none = sum(a is None for a in cells.values())
            tail = f" ({n_none} without a reference)" if n_none else ""
            per_d.append(f"at δ = {short_number(d)}, {_join(items)} of the {len(cells)} cells{tail}")
    words["cheapest"] = (
        f"Cell by cell, the cheapest answer that is at most {pct} above the bracket and never below it at every σ "
        f"of the cell is, {'; '.join(per_d)}."
        if per_d
        else "No cell of this table has a reference."
    )
    return words


LABELS_SHORT = {"gdp": "the CLT", "spa": "SPA", "edgeworth": "Edgeworth", "prv": "PRV", "rdp": "RDP", "pld": "the PLD"}
LABELS_LONG = {
    "gdp": "The CLT of Gaussian DP",
    "spa": "The saddle-point accountant (SP-CLT estimate)",
    "edgeworth": "The Edgeworth accountant (order-2 estimate)",
    "prv": "The PRV accountant",
    "rdp": "RDP",
}


def recommendation_markdown(words: dict[str, str], accountants) -> str:
    """The recommendation's paragraphs as Markdown: the certified choice, one item per estimate (in the order of
    ``accountants``), and the cell-by-cell choice."""
    items = "\n".join(f"* {words[a]}" for a in accountants if a in words and a != "pld")
    return (
        f"**A certified number.** {words['certified']}\n\n"
        "**Estimates.** Each of the following gives a number that is not a certified bound (SPA and Edgeworth also "
        "give a certified bracket; their estimate is what is compared here):\n\n"
        f"{items}\n\n**Which one, where.** {words['cheapest']}"
    )


def cheapest_table(rec: dict, delta: float) -> list[dict]:
    """Rows T, columns q: the cheapest accountant within the tolerance at every σ of the cell (PLD when none)."""
    out = []
    for t in rec["ts"]:
        row = {"T": t}
        for q in rec["qs"]:
            a = rec["cheapest"][delta][(q, t)]
            row[f"q = {short_number(q)}"] = "no reference" if a is None else NAMES[a]
        out.append(row)
    return out


def check_recommendation(rows, rec: dict) -> list[str]:
    """Re-derive every fact of :func:`recommendation` from the rows point by point; the problems found (empty
    when the words match the data). Counts are recounted; each ``from_T`` is checked to hold at every larger T
    and to be the smallest such T of the grid; each ``cheapest`` entry to be within the tolerance at every point
    of its cell, with every accountant of smaller median time failing somewhere in the cell."""
    tol, problems = rec["tol"], []
    ref = [r for r in rows if r["ref_lower"] != ""]
    if rec["n"] != len(rows) or rec["n_ref"] != len(ref) or len(rec["no_ref"]) != len(rows) - len(ref):
        problems.append("point counts")
    if ref and not all(r["ref_rel_width"] <= rec["ref_width"] for r in ref):
        problems.append("reference width")
    if rec["rdp_below"] != len([r for r in ref if r["rdp_eps"] != "" and r["rdp_eps"] < r["ref_lower"]]):
        problems.append("RDP below the bracket: count")
    for a, n_opt in rec["optimistic"].items():
        if n_opt != len([r for r in ref if r[f"{a}_eps"] != "" and r[f"{a}_eps"] < r["ref_lower"]]):
            problems.append(f"{a}: optimistic count")
    for a, n_ok in rec["accurate"].items():
        if n_ok != len([r for r in ref if accurate(r, a, tol)]):
            problems.append(f"{a}: accurate count")
    for a, by_d in rec["from_T"].items():
        for d, rule in by_d.items():
            for q, t0 in rule.items():
                pts = [r for r in ref if r["delta"] == d and r["q"] == q]
                later = [r for r in pts if t0 is not None and r["T"] >= t0]
                if any(not accurate(r, a, tol) for r in later):
                    problems.append(f"{a}, δ {d}, q {q}: not accurate at some T >= {t0}")
                below = sorted({r["T"] for r in pts if t0 is None or r["T"] < t0})
                if below and all(accurate(r, a, tol) for r in pts if r["T"] == below[-1]):
                    problems.append(f"{a}, δ {d}, q {q}: also accurate at every σ at T = {below[-1]}")
    for d, cells in rec["cheapest"].items():
        for (q, t), a in cells.items():
            pts = [r for r in ref if r["delta"] == d and r["q"] == q and r["T"] == t]
            if a is None:
                if pts:
                    problems.append(f"δ {d}, q {q}, T {t}: has a reference")
                continue
            if a != "pld" and not all(0 <= r[f"{a}_relerr"] <= tol for r in pts if r[f"{a}_relerr"] != ""):
                problems.append(f"δ {d}, q {q}, T {t}: {a} not within the tolerance above the bracket")
            if a != "pld" and any(r[f"{a}_verdict"] == "failed" for r in pts):
                problems.append(f"δ {d}, q {q}, T {t}: {a} failed in the cell")
            cost = rec["seconds"][a][0]
            for b in rec["by_cost"]:
                if rec["seconds"][b][0] < cost and all(usable(r, b, tol) for r in pts):
                    problems.append(f"δ {d}, q {q}, T {t}: {b} is cheaper and accurate")
    return problems
