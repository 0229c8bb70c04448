"""Tables and figures of the "Your training run" chapter; the numbers come from :mod:`dputils.practitioner`
(every accountant that applies to a sampler, the calibration, the simulated one-run audit) and, for the
independent checks, :mod:`dputils.baselines` (dp_accounting's PLD) and :mod:`dputils.curves` (the closed form
of mu-GDP)."""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np

from ... import practitioner as pr
from .. import plotting
from ..tables import sci, show_table

GUARANTEE = {
    "bracket": "certified bracket",
    "upper-bound": "certified upper bound",
    "estimate": "estimate in a certified bracket",
    "approximation": "approximation (no bound)",
}
SAMPLER_LABEL = {"poisson": "Poisson", "shuffling": "shuffling", "random-allocation": "random allocation"}


def account_all(run: pr.TrainingRun, delta: float) -> tuple[dict[str, list[pr.Answer]], dict[str, list[str]]]:
    """:func:`dputils.practitioner.account` for each sampler of the run: ``(answers, warnings)`` by sampler (the
    warnings the accountants raised, e.g. SPA's degraded saddle-point regime, as their messages)."""
    answers, warned = {}, {}
    for s in pr.SAMPLERS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answers[s] = pr.account(run.with_sampler(s), delta)
        warned[s] = [str(w.message) for w in caught]
    return answers, warned


def default_answers(run: pr.TrainingRun, delta: float, names=("spa", "edgeworth")) -> dict[str, dict[str, Any]]:
    """What each named accountant hands out by default (``get_epsilon`` with its default ``fallback``), where
    :func:`dputils.practitioner.account` reports the method's own estimate: ``value``, ``lower``, ``upper``,
    ``fallback`` (``details["fallback_reason"]`` where the default answer consults the PLD, else ``""``), and,
    for the saddle-point accountant, ``degraded`` and ``t_hat`` (its saddle point near the subsampled
    Gaussian's phase transition: :mod:`dputils.accountants.spa`)."""
    out = {}
    for name in names:
        r = pr.make_accountant(name, run).get_epsilon(delta)
        details = getattr(r, "details", None) or {}
        out[name] = {
            "value": float(r.value),
            "lower": float(r.lower),
            "upper": float(r.upper),
            "fallback": str(details.get("fallback_reason", "")) if details.get("fallback") == "pld" else "",
            "degraded": bool(details.get("degraded", False)),
            "t_hat": float(details["t_hat"]) if details.get("t_hat") is not None else None,
        }
    return out


def spa_regime_words(spa_default: dict[str, Any]) -> str:
    """Why SPA's own estimate may be off, in words generated from its default answer's details: the degraded
    saddle-point regime (with t̂) and whether the default answer consults the PLD."""
    degraded, fallback = spa_default["degraded"], spa_default["fallback"]
    fallback = "wide" if fallback == "wide bracket" else fallback  # the reason's words, in the sentence
    t = spa_default.get("t_hat")
    where = (
        f"the saddle point (t̂ = {t:.3g}) is in its degraded regime"
        if degraded and t
        else "its saddle point is degraded"
    )
    if degraded and fallback:
        return (
            f"{where}, and its own certified bracket is {fallback} here, so the accountant's default answer "
            "consults the PLD and clips this estimate into the PLD's bracket"
        )
    if degraded:
        return f"{where}: the accountant warns that its estimate may be off by 0.1% to 10%"
    if fallback:
        return (
            f"its own certified bracket is {fallback} here, so the accountant's default answer consults the "
            "PLD and clips this estimate into the PLD's bracket"
        )
    return "the accountant's own bracket is narrow here and it raised no warning"


def default_words(label: str, answer: dict[str, Any], truth: float, lo: float, up: float) -> str:
    """A default answer of :func:`default_answers` in words, with its numbers: its value, whether it is the PLD's
    bracket intersected with the method's own (and why), whether it lies in the PLD bracket ``[lo, up]``, and
    its relative distance to the independent ``truth``."""
    v = answer["value"]
    how = (
        f"the PLD's bracket intersected with its own ({answer['fallback']})"
        if answer["fallback"]
        else "its own estimate"
    )
    where = "inside the PLD bracket" if lo <= v <= up else "outside the PLD bracket"
    return f"{label} default answer is {v:.7g}, {how}, {where} and {sci(abs(v / truth - 1), 2)} from the truth"


def _end(x: float | None) -> Any:
    if x is None:
        return "none"
    if not math.isfinite(x):
        return "∞ (vacuous)"
    return x


def answer_rows(answers: list[pr.Answer], sampler: str | None = None) -> list[dict[str, Any]]:
    """One row per answer: accountant, guarantee, ε, the bracket's ends, seconds (a refusal shows its message)."""
    rows = []
    for a in answers:
        row = {} if sampler is None else {"sampler": SAMPLER_LABEL[sampler]}
        row.update(
            {
                "accountant": a.label if sampler is None else f"{a.label} ({a.name})",
                "guarantee": GUARANTEE[a.answer],
                "ε": a.epsilon if a.epsilon is not None else "refused: " + a.error,
                "lower": _end(a.lower),
                "upper": _end(a.upper),
                "seconds": a.seconds,
            }
        )
        rows.append(row)
    return rows


def show_answers(answers, caption: str):
    """The table of one sampler's answers (4 significant digits)."""
    return show_table(answer_rows(answers), caption=caption, digits=4)


def show_samplers(by_sampler: dict[str, list[pr.Answer]], caption: str):
    """The tightest certified upper bound of each sampler, with its accountant and seconds."""
    rows = []
    for s in pr.SAMPLERS:
        best = best_certified(by_sampler[s])
        rows.append(
            {
                "sampler": SAMPLER_LABEL[s],
                "tightest certified ε": best.certified_upper if best else "none",
                "by": best.label if best else "no accountant",
                "accountants": len(by_sampler[s]),
                "seconds (all)": sum(a.seconds for a in by_sampler[s]),
            }
        )
    return show_table(rows, caption=caption, digits=4)


def best_certified(answers: list[pr.Answer]) -> pr.Answer | None:
    """The answer with the smallest certified upper end (None if none certifies one)."""
    ok = [a for a in answers if a.certified_upper is not None]
    return min(ok, key=lambda a: a.certified_upper) if ok else None


def by_name(answers: list[pr.Answer]) -> dict[str, pr.Answer]:
    return {a.name: a for a in answers}


def calibration_rows(run: pr.TrainingRun, epsilon: float, delta: float, names) -> tuple[list[dict], dict]:
    """The noise multiplier at which each accountant of ``names`` certifies (epsilon, delta), timed."""
    rows, cals = [], {}
    for name in names:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = pr.calibrate_sigma(run, epsilon, delta, name)
        cals[name] = c
        rows.append(
            {
                "accountant": next(lab for n, lab, *_ in pr.accountants_for(run.sampler) if n == name),
                "σ": c.value,
                "ε at σ": c.achieved,
                "σ bracket": f"[{c.bracket[0]:.5g}, {c.bracket[1]:.5g}]",
                "evaluations": c.evaluations,
                "seconds": time.perf_counter() - t0,
            }
        )
    return rows, cals


def audit_rows(run: pr.TrainingRun, canaries, delta: float, n_bootstrap: int, seed: int) -> list[dict[str, Any]]:
    """:func:`dputils.practitioner.simulated_audit` at each number of canaries, timed."""
    rows = []
    for m in canaries:
        t0 = time.perf_counter()
        a = pr.simulated_audit(run, m, delta, n_bootstrap=n_bootstrap, seed=seed)
        rows.append(
            {
                "canaries": m,
                "IN": a["n_in"],
                "Gaussian auditor": a["lower"]["gauss"],
                "threshold (Steinke et al.)": a["lower"]["steinke"],
                "score ceiling": a["ceiling"],
                "seconds": time.perf_counter() - t0,
            }
        )
    return rows


def trend_words(values, what: str = "the number of canaries") -> str:
    """How a sequence of lower bounds moves along the table's rows, in words with the numbers: "rises with
    {what}" when it is strictly increasing, else "does not rise steadily with {what} (a, b, c)". The text
    next to the audit table is generated from this, so it cannot claim a trend the run does not show."""
    vals = [float(v) for v in values]
    if len(vals) > 1 and all(b > a for a, b in zip(vals, vals[1:])):
        return f"rises with {what}"
    return f"does not rise steadily with {what} ({', '.join(f'{v:.3g}' for v in vals)})"


def plot_audit(rows, pld_answer: pr.Answer, delta: float):
    """The audit's lower bounds against the number of canaries, under the score's ceiling and the PLD's
    certified upper bound."""
    fig, ax = plotting.new_figure()
    m = [r["canaries"] for r in rows]
    ax.semilogx(m, [r["Gaussian auditor"] for r in rows], "o-", label="lower bound, Gaussian auditor")
    ax.semilogx(m, [r["threshold (Steinke et al.)"] for r in rows], "s-", label="lower bound, threshold auditor")
    ax.axhline(rows[0]["score ceiling"], color="0.4", ls=":", label="ceiling of the summed score")
    ax.axhline(pld_answer.upper, color=plotting.color("pld"), ls="--", label="PLD certified upper bound")
    ax.fill_between(m, pld_answer.lower, pld_answer.upper, color=plotting.color("pld"), alpha=0.3)
    ax.set(xlabel="canaries m", ylabel=f"ε at δ = {sci(delta, 1)}", ylim=(0, 1.25 * pld_answer.upper))
    ax.legend(fontsize=8, loc="lower right", framealpha=1)
    return fig


def plot_answers(answers: list[pr.Answer], delta: float):
    """Each Poisson accountant's ε as a point, with its bracket as a bar where it has finite ends."""
    fig, ax = plotting.new_figure()
    ys = np.arange(len(answers))[::-1]
    for y, a in zip(ys, answers):
        if a.epsilon is None:
            continue
        c = plotting.color(a.name)
        if a.lower is not None and a.upper is not None and math.isfinite(a.upper):
            ax.plot([a.lower, a.upper], [y, y], "-", lw=6, alpha=0.35, color=c)
        ax.plot([a.epsilon], [y], "o", color=c)
    ax.set_yticks(ys, [a.label for a in answers])
    ax.set(xlabel=f"ε at δ = {sci(delta, 1)}")
    return fig


def position(value: float, lower: float, upper: float) -> tuple[str, float]:
    """Where ``value`` falls against the bracket ``[lower, upper]``: ``("inside", 0)``, ``("above", r)`` with
    ``r = value/upper - 1`` or ``("below", r)`` with ``r = value/lower - 1`` (the atlas's signed relative error)."""
    if value > upper:
        return "above", value / upper - 1.0
    if value < lower:
        return "below", value / lower - 1.0
    return "inside", 0.0


def position_words(value: float, lower: float, upper: float) -> str:
    """The words of :func:`position`: "inside the certified bracket", "x% above its upper end (pessimistic)",
    "x% below its certified lower end (optimistic: not a valid bound)"."""
    where, r = position(value, lower, upper)
    if where == "inside":
        return "inside the certified bracket"
    if where == "above":
        return f"{100 * r:.3g}% above its upper end (pessimistic)"
    return f"{100 * -r:.3g}% below its certified lower end (optimistic: not a valid bound)"
