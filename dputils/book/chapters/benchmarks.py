"""Glue, figures and checks of the benchmarks chapter: the page reads the recorded runs through
:mod:`dputils.book.benchmarks` and states them; nothing is timed while the book is built."""

from __future__ import annotations

import json
import math
import re

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator
from scipy import optimize
from scipy.special import log_ndtr

from ... import truth
from ...mechanisms import SubsampledGaussianMechanism
from .. import benchmarks as bm
from .. import plotting
from ..results import glue
from ..tables import diff, num, pow10, show_table

#: the meaning of each parameter of the chapter (shown as a table next to the collapsed ``parameters`` cell)
PARAMETERS = {
    "data_file": "the recorded run of the accountants (time, answers, references)",
    "dpsgd_file": "the recorded DP-SGD throughput run",
    "pld_file": "the recorded PLD head-to-head run against dp_accounting",
    "allocation_file": "the recorded random-allocation run against pld-accounting",
    "small_t_file": "the recorded small-T timing run against prv_accountant",
}


def _date(meta) -> str:
    return meta["date"].replace("T", " ")[:16] + " UTC"


def _load(values) -> str:
    return ", ".join(map(str, values))


def glue_accountants_run(data, steps, deltas) -> None:
    """Glue the recorded accountants run's metadata (date, machine, commit, load, note) and grid (σ, q,
    repeats, reference and PLD grid widths, T, δ, coverage) under the ``bench_*`` names the page cites."""
    meta, mech = data["meta"], data["mechanism"]
    commit = meta["git"]["commit"] or "unknown"
    dirty = " (with uncommitted changes)" if meta["git"]["dirty"] else ""
    loads = [r["load1"] for r in data["records"] if r.get("load1") is not None]
    pld_h = bm.method_info(data, "pld")["settings"].get("discretization")
    missing = [t for t in meta.get("steps_requested", steps) if t not in steps]
    values = {
        "bench_date": _date(meta),
        "bench_machine": bm.describe_machine(meta),
        "bench_cores": meta["machine"]["cpus"],
        "bench_commit": commit[:10] + dirty,
        "bench_load_before": _load(meta["load_before"]),
        "bench_load_after": _load(meta["load_after"]),
        "bench_note": meta.get("note") or "none",
        "bench_load_min": min(loads, default=float("nan")),
        "bench_load_max": max(loads, default=float("nan")),
        "bench_sigma": mech["sigma"],
        "bench_q": mech["q"],
        "bench_repeat": data["settings"]["repeat"],
        "bench_ref_h": bm.number_text(data["settings"]["ref_discretization"]),
        "bench_pld_h": bm.number_text(pld_h) if pld_h else "its default",
        "bench_n_points": len(steps) * len(deltas),
        "bench_steps": ", ".join(map(bm.number_text, steps)),
        "bench_deltas": ", ".join(map(bm.number_text, deltas)),
        "bench_coverage": "the whole requested grid"
        if not missing
        else "the run was stopped before T = " + ", ".join(map(bm.number_text, missing)) + ": those are not measured",
    }
    values["bench_code_since"] = code_since_text(meta["git"]["commit"], bool(meta["git"]["dirty"]))
    for k, v in values.items():
        glue(k, v, display=False)


#: the code whose answers and times the accountants run records
MEASURED_CODE = ("dputils/accountants", "dputils/mechanisms.py", "dputils/curves.py", "dputils/truth.py")


def code_since_text(commit: str | None, dirty: bool, *, root=None) -> str:
    """One sentence for the page: whether the accountants' code (:data:`MEASURED_CODE`) differs now from the
    commit the recorded run names (:func:`dputils.book.recordings.changed_since`), so that a reader never takes an
    old run for today's code."""
    from ..recordings import changed_since

    changed = changed_since(commit, MEASURED_CODE, root=root)
    rerun = "rerun benchmarks/bench_accountants.py to measure today's code"
    if changed is None:
        return (
            f"Whether the accountants' code has changed since that run cannot be told here (no git history); {rerun}."
        )
    if changed:
        return (
            f"The accountants' code has changed since that run ({len(changed)} file(s) of "
            f"{', '.join(MEASURED_CODE)} differ from its commit), so the answers and times below describe the code "
            f"as it was then, not today's; {rerun}."
        )
    if dirty:
        return (
            "The accountants' code is unchanged since that run's commit, but the run had uncommitted changes, so "
            f"it may not be today's code exactly; {rerun} to be sure."
        )
    return "The accountants' code is unchanged since that run: the answers and times below are today's code's."


def glue_pld_run(pld_run, prow) -> None:
    """Glue the PLD head-to-head run's machine, load, date, time ratios and memory ratio (``bench_pld_*``)."""
    meta = pld_run["meta"]
    mem_ratios = [
        r["ours MiB"] / r["dp_accounting MiB"] for r in prow if r["ours MiB"] is not None and r["dp_accounting MiB"]
    ]
    values = {
        "bench_pld_machine": bm.describe_machine(meta),
        "bench_pld_load_before": _load(meta["load_before"]),
        "bench_pld_load_after": _load(meta["load_after"]),
        "bench_pld_date": _date(meta),
        "bench_pld_min_ratio": min(r["dp_accounting / ours"] for r in prow),
        "bench_pld_max_ratio": max(r["dp_accounting / ours"] for r in prow),
        "bench_pld_mem_ratio": max(mem_ratios) if mem_ratios else float("nan"),
    }
    for k, v in values.items():
        glue(k, v, display=False)


def glue_dpsgd_run(sgd) -> None:
    """Glue the DP-SGD throughput run's batch, device, machine, load, date and the first model's speed ratios
    (``bench_sgd_*``)."""
    meta = sgd["meta"]
    first = next(iter(sgd["models"].values()))
    values = {
        "bench_sgd_batch": sgd["batch"],
        "bench_sgd_device": sgd["device"],
        "bench_sgd_machine": bm.describe_machine(meta),
        "bench_sgd_load_before": _load(meta["load_before"]),
        "bench_sgd_load_after": _load(meta["load_after"]),
        "bench_sgd_date": _date(meta),
        "bench_sgd_ratio_hooks": first.get("dputils/opacus", float("nan")),
        "bench_sgd_ratio_nonprivate": first.get("dputils/nonprivate", float("nan")),
    }
    for k, v in values.items():
        glue(k, v, display=False)


def plot_time_panels(data, deltas):
    """Median seconds of a cold call against T, one panel per δ (:func:`dputils.book.benchmarks.plot_times`)."""
    fig, axes = plt.subplots(1, len(deltas), figsize=(3.3 * len(deltas), 3.6), sharey=True, squeeze=False)
    for ax, d in zip(axes[0], deltas):
        bm.plot_times(data, d, ax=ax)
        ax.set_title(f"δ = {pow10(d)}")
        plotting.sci_ticks(ax, powers=True)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


#: the rows of the error figure: three methods each, so that their certified intervals (error bars) stay apart
ERROR_GROUPS = (
    ("dputils, certified brackets", ("pld", "spa", "edgeworth")),
    ("dputils, RDP and the CLT", ("rdp", "rdp-classic", "gdp")),
    ("peers, PLD and PRV", ("dp_accounting-pld", "prv_accountant", "opacus-prv")),
    ("peers, RDP and the CLT", ("dp_accounting-rdp", "opacus-rdp", "opacus-gdp")),
)


def error_groups(data) -> list[tuple[str, list[str]]]:
    """:data:`ERROR_GROUPS` restricted to the run's methods, with any method of the run that no group names in a
    last row of its own (so that none is silently left out of the figure)."""
    known = set(bm.method_names(data))
    out = [(title, [m for m in names if m in known]) for title, names in ERROR_GROUPS]
    out = [(t, ms) for t, ms in out if ms]
    named = {m for _, ms in out for m in ms}
    rest = [m for m in bm.method_names(data) if m not in named]
    if rest:
        out.append(("other methods", rest))
    return out


def plot_error_panels(data, with_ref):
    """Signed relative errors against the reference, one column per δ with a reference and one row per group of
    three methods (:func:`error_groups`), each panel drawn by :func:`dputils.book.benchmarks.plot_errors` on the
    run restricted to that group's methods (the reference bracket is the same in every panel)."""
    groups = error_groups(data)
    ncol = max(len(with_ref), 1)
    fig, axes = plt.subplots(
        len(groups), ncol, squeeze=False, sharex=True, sharey="row", figsize=(3.4 * ncol + 2.6, 2.5 * len(groups))
    )
    for row, (title, names) in zip(axes, groups):
        sub = {**data, "methods": [m for m in data["methods"] if m["name"] in names]}
        for ax, d in zip(row, with_ref):
            bm.plot_errors(sub, d, ax=ax)
            # the labels ±10⁻⁸ at the edge of the linear band sit on top of the 0: keep 0 and the decades beyond
            ax.set_yticks([t for t in ax.get_yticks() if t == 0 or abs(t) > 1.5e-8])
            ax.set_title(f"δ = {pow10(d)}: {title}", fontsize=9)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda x, pos: plotting.tick_label(x, pos, powers=True)))
            ax.set_ylabel("")
        handles, labels = row[0].get_legend_handles_labels()
        row[-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8)
    for ax in axes[:-1].ravel():
        ax.set_xlabel("")
    for ax in axes[-1]:
        plotting.sci_ticks(ax, "x", powers=True)
    fig.supylabel("(ε − reference midpoint) / midpoint", fontsize=9)
    fig.tight_layout()
    return fig


def clt_epsilon(sigma: float, q: float, T: int, delta: float) -> float:
    """ε(δ) of the CLT's μ-GDP, ``mu = q sqrt(T (e^{1/sigma^2} - 1))``, solved independently of the
    accountants: ``Phi(-e/mu + mu/2) - e^e Phi(-e/mu - mu/2) = delta`` in log space by Brent's method."""
    mu = q * math.sqrt(T * math.expm1(1.0 / sigma**2))

    def g(e):
        a = log_ndtr(-e / mu + mu / 2)
        b = e + log_ndtr(-e / mu - mu / 2)
        return a + math.log1p(-math.exp(b - a)) - math.log(delta)

    hi = mu * mu / 2 + mu * math.sqrt(2 * math.log(1 / delta)) + 1
    if g(0.0) <= 0:
        return 0.0
    return optimize.brentq(g, 0.0, hi, xtol=1e-14, rtol=1e-13)


def dpsgd_problems(sgd) -> list[tuple[str, str]]:
    """(model, method) pairs of the DP-SGD run whose median is not positive, whose rounds are none or more than
    recorded, or whose median lies outside its rounds."""
    bad = []
    for model, entry in sgd["models"].items():
        for m, v in entry.items():
            if not isinstance(v, dict):
                continue
            xs = v["all_steps_per_s"]
            ok = 0 < len(xs) <= sgd["rounds"] and v["steps_per_s"] > 0 and min(xs) <= v["steps_per_s"] <= max(xs)
            if not ok:
                bad.append((model, m))
    return bad


def show_methods(data) -> None:
    """The table of the run's methods: label, library and version, and what each answers."""
    rows = [
        {"method": m["label"], "library": f"{m['library']} {m['version']}", "answer": m["answer"]}
        for m in data["methods"]
    ]
    show_table(
        rows,
        caption="The methods of the recorded run: dputils accountants (as the "
        "command line builds them) and the peers installed with it.",
    )


def pivot_headers(rows) -> dict[str, str]:
    """Headers for the pivoted tables' keys ``T=1e+05`` and ``δ=1e-10``: ``T = 10⁵``, ``δ = 10⁻¹⁰``."""
    out = {}
    for r in rows:
        for k in r:
            m = re.fullmatch(r"(T|δ)=([-+.\deE]+)", k)
            if m:
                out[k] = f"{m.group(1)} = {pow10(float(m.group(2)))}"
    return out


def show_time_tables(data, deltas) -> None:
    """One table per δ of the median seconds per cold call (:func:`dputils.benchmarks.time_rows`)."""
    for d in deltas:
        rows = bm.time_rows(data, d)
        show_table(
            rows,
            digits=3,
            headers=pivot_headers(rows),
            caption=f"Median seconds per cold call at δ = {pow10(d)} (blank: no answer).",
        )


def glue_ratios(data) -> list[dict]:
    """The peer/ours time ratios of the run (:func:`dputils.benchmarks.ratio_rows`); glue the median ratio of
    dp_accounting's PLD to ours (``bench_pld_ratio``) and of Opacus' RDP to ours (``bench_rdp_ratio``), NaN where
    there is none, and show the pivoted table."""
    ratios = bm.ratio_rows(data)
    for name, ours, peer in (("bench_pld_ratio", "pld", "dp_accounting-pld"), ("bench_rdp_ratio", "rdp", "opacus-rdp")):
        xs = [r["ratio"] for r in ratios if r["ours"] == ours and r["peer"] == peer]
        glue(name, bm.median(xs) if xs else float("nan"), display=False)
    rows = bm.ratio_table(data)
    show_table(
        rows,
        digits=3,
        headers=pivot_headers(rows),
        caption="Peer time / our time, per T and δ (blank: one of the two gave no answer).",
    )
    return ratios


def deltas_with_reference(data, deltas) -> list[float]:
    """The δ of ``deltas`` at which at least one point has a certified reference."""
    return [d for d in deltas if any(r["status"] == "ok" for r in data["references"] if r["delta"] == d)]


def show_error_tables(data, deltas) -> None:
    """One table per δ: each answer, its error against both ends of the reference bracket
    (:func:`dputils.benchmarks.error_rows`) and its own certified interval."""
    for d in deltas:
        rows = [
            {
                "method": bm.method_info(data, r["method"])["label"],
                "T": r["T"],
                "ε": r["epsilon"],
                "ε − ℓ": r["err_vs_ref_lower"],
                "ε − u": r["err_vs_ref_upper"],
                "own lower": r["lower"],
                "own upper": r["upper"],
            }
            for r in bm.error_rows(data, d)
        ]
        show_table(
            rows,
            digits=4,
            caption=f"δ = {pow10(d)}: each answer, its error against both ends of the reference "
            "(the error lies between the two) and its own certified interval.",
        )


def glue_no_reference(data) -> list[dict]:
    """The points without a certified reference (:func:`dputils.benchmarks.no_reference_points`): glue their
    number (``bench_n_noref``) and list (``bench_noref_text``), show them with the PLD's reason."""
    noref = bm.no_reference_points(data)
    glue("bench_n_noref", len(noref), display=False)
    glue("bench_noref_text", bm.points_text((r["T"], r["delta"]) for r in noref), display=False)
    show_table(
        [{**r, "reason": bm.readable(r["reason"])} for r in noref],
        caption="Points where the PLD refused at every grid of the ladder, with its reason.",
    )
    return noref


def glue_refusals(data) -> list[dict]:
    """The records without an answer (:func:`dputils.benchmarks.refusals`): glue how many (method, point) pairs
    gave none (``bench_n_refused``) of how many (``bench_n_records``) and the count per method
    (``bench_refused_text``), and show them with their reasons."""
    refused = bm.refusals(data)
    by_method: dict[str, int] = {}
    for r in refused:
        label = bm.method_info(data, r["method"])["label"]
        by_method[label] = by_method.get(label, 0) + r["points"]
    glue("bench_n_refused", sum(r["points"] for r in refused), display=False)
    glue("bench_n_records", len(data["records"]), display=False)
    text = "; ".join(f"{k} at {v} point{'s' * (v > 1)}" for k, v in by_method.items()) or "none"
    glue("bench_refused_text", text, display=False)
    show_table(
        [
            {**r, "method": bm.method_info(data, r["method"])["label"], "reason": bm.readable(r["reason"])}
            for r in refused
        ],
        caption="Records without an answer: status (refused, failed, vacuous, timeout, skipped) and reason.",
    )
    return refused


def show_pld_tables(prow) -> None:
    """The PLD head-to-head tables: times, their ratio and peak memory; then the ε of both and the exact ε."""
    show_table(
        prow,
        columns=["T", "ours s", "dp_accounting s", "dp_accounting / ours", "ours MiB", "dp_accounting MiB"],
        digits=3,
        caption="Median seconds of both PLD accountants, their ratio, and their peak memory (MiB).",
    )
    show_table(
        [
            {
                "T": r["T"],
                "exact ε": r["eps exact"],
                "our lower − exact": diff(r["eps ours lower"], r["eps exact"]),
                "our upper − exact": diff(r["eps ours upper"], r["eps exact"]),
                "dp_accounting − exact": diff(r["eps dp_accounting"], r["eps exact"]),
            }
            for r in prow
        ],
        digits=4,
        caption="The exact ε (saddle contour) and, as differences from it, our certified bracket and "
        "dp_accounting's ε.",
    )


def show_peer_below(data, below) -> None:
    """The peer answers below the certified reference (:func:`dputils.benchmarks.peer_contradictions`)."""
    show_table(
        [
            {
                "method": bm.method_info(data, r["method"])["label"],
                "T": r["T"],
                "δ": pow10(r["delta"]),
                "peer ε": r["epsilon"],
                "reference lower end": r["reference lower"],
                "below it by": r["below by"],
            }
            for r in below
        ],
        digits=4,
        caption="Peer answers below the certified lower end of the reference bracket.",
    )


def plot_pld(pld_run):
    """Time and peak memory of both PLD accountants against T, two panels (:func:`dputils.benchmarks.plot_pld`)."""
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4))
    bm.plot_pld(pld_run, axes=axes)
    fig.tight_layout()
    return fig


def plot_dpsgd(sgd):
    """DP-SGD steps per second per method, one panel per model (:func:`dputils.benchmarks.plot_dpsgd`)."""
    n = len(sgd["models"])
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.4), squeeze=False)
    bm.plot_dpsgd(sgd, axes=axes[0])
    fig.tight_layout()
    return fig


def contour_contradictions(below, sigma: float, q: float) -> list[dict]:
    """Confirm each peer answer below the reference with the saddle-contour truth
    (:func:`dputils.truth.composition_epsilon`: the MGF inverted, no discretization, no FFT): add its exact ε as
    ``"exact (contour)"`` to each row of ``below`` and return the rows where the answer is not below
    ``exact - err``, or the reference bracket does not meet ``[exact - err, exact + err]``."""
    sg = SubsampledGaussianMechanism(sigma, q)
    bad = []
    for row in below:
        exact, err = truth.composition_epsilon([(sg, int(row["T"]))], row["delta"])
        row["exact (contour)"] = exact
        ok = (
            row["epsilon"] < exact - err
            and row["reference lower"] <= exact + err
            and exact - err <= row["reference upper"]
        )
        if not ok:
            bad.append(row)
    return bad


def clt_worst(data, sigma: float, q: float) -> dict[str, float]:
    """Largest relative difference, per CLT method (``gdp``, ``opacus-gdp``), between its recorded answers and
    :func:`clt_epsilon` at the same (T, δ) (0 where it has none, NaN where one difference is NaN)."""
    worst = {}
    for name in ("gdp", "opacus-gdp"):
        rels = [
            abs(r["epsilon"] - (e := clt_epsilon(sigma, q, r["T"], r["delta"]))) / e
            for r in bm.records(data, method=name, status="ok")
        ]
        worst[name] = math.nan if any(math.isnan(x) for x in rels) else max(rels, default=0.0)
    return worst


# ---------------------------------------------------------------------------------------------------------------
# Random allocation against pld-accounting, and small-T speed against prv_accountant (recorded files)
# ---------------------------------------------------------------------------------------------------------------


def load_recorded(path, row_keys) -> dict:
    """Read a recorded JSON file of ``benchmarks/`` (a relative path: :func:`dputils.book.benchmarks.find_recorded`)
    and check that it has ``meta`` and a non-empty ``rows`` whose every row has ``row_keys``."""
    with open(bm.find_recorded(path)) as fh:
        data = json.load(fh)
    if "meta" not in data or not data.get("rows"):
        raise bm.BenchmarkFileError(f"{path}: needs 'meta' and a non-empty 'rows'")
    for i, r in enumerate(data["rows"]):
        missing = [k for k in row_keys if k not in r]
        if missing:
            raise bm.BenchmarkFileError(f"{path}: rows[{i}] lacks {', '.join(missing)}")
    return data


ALLOCATION_ROW_KEYS = ("steps", "selected", "epochs", "ours", "pld_accounting")
SMALL_T_ROW_KEYS = ("steps", "seconds_ours", "seconds_prv", "eps_lower", "eps_upper", "prv")


def _bracket(lo: float, hi: float) -> str:
    """``[lo, hi]`` with 4 decimals, or one decimal beyond the first where the two ends differ when the bracket is
    narrower (``_bracket(5.0067736, 5.0068200) == "[5.006774, 5.006820]"``), so that its ends never print alike."""
    w = hi - lo
    d = 4 if w <= 0 else max(4, math.ceil(-math.log10(w)) + 1)
    return f"[{lo:.{d}f}, {hi:.{d}f}]"


def allocation_rows(data) -> list[dict]:
    """One row per recorded setting (t, k, epochs) of ``bench_allocation.py``: both brackets, the ratio of their
    widths (theirs / ours, only where our lower end is certified), both times and the speed-up (their time / ours,
    recomputed from the times). Where the peer gave no answer its error text stands in its columns. The keys
    ``_both``, ``_meet``, ``_upper_ok``, ``_width_ratio``, ``_speedup`` carry the numbers for
    :func:`allocation_summary` (not shown: :func:`dputils.book.tables.show_table` is given the columns)."""
    out = []
    for r in data["rows"]:
        ours, peer = r["ours"], r["pld_accounting"]
        both = "upper" in peer and "lower" in peer
        certified = ours.get("lower_bound") == "certified"
        row = {
            "setting": f"t = {r['steps']}, k = {r['selected']}, {r['epochs']} epoch{'s' * (r['epochs'] > 1)}",
            "ours": _bracket(ours["lower"], ours["upper"]) if certified else f"≤ {ours['upper']:.4f} (no lower end)",
            "ours s": ours["seconds"],
            "_both": both,
        }
        if both:
            w_ours = ours["upper"] - ours["lower"]
            w_peer = peer["upper"] - peer["lower"]
            ratio = w_peer / w_ours if certified and w_ours > 0 else None
            speedup = peer["seconds"] / ours["seconds"]
            row.update(
                {
                    "pld-accounting": _bracket(peer["lower"], peer["upper"]),
                    "width theirs / ours": ratio,
                    "pld-accounting s": peer["seconds"],
                    "speed-up": speedup,
                    "_meet": ours["lower"] <= peer["upper"] and peer["lower"] <= ours["upper"],
                    "_upper_ok": ours["upper"] <= peer["upper"],
                    "_inside": certified and peer["lower"] <= ours["lower"] and ours["upper"] <= peer["upper"],
                    "_width_ratio": ratio,
                    "_speedup": speedup,
                }
            )
        else:
            row.update(
                {
                    "pld-accounting": peer.get("error", "no answer"),
                    "width theirs / ours": None,
                    "pld-accounting s": None,
                    "speed-up": None,
                }
            )
        out.append(row)
    return out


ALLOCATION_COLUMNS = [
    "setting",
    "ours",
    "pld-accounting",
    "width theirs / ours",
    "ours s",
    "pld-accounting s",
    "speed-up",
]


def allocation_summary(rows) -> dict:
    """From :func:`allocation_rows`: how many settings both answered, whether our bracket meets theirs and our
    upper end is at most theirs at all of them, whether our certified bracket lies inside theirs at all with a
    certified lower end, the range of width ratios and speed-ups, and the settings where the peer gave no answer
    (with its text)."""
    both = [r for r in rows if r["_both"]]
    ratios = [r["_width_ratio"] for r in both if r["_width_ratio"] is not None]
    speed = [r["_speedup"] for r in both]
    return {
        "n": len(rows),
        "n_both": len(both),
        "all_meet": bool(both) and all(r["_meet"] for r in both),
        "all_upper_ok": bool(both) and all(r["_upper_ok"] for r in both),
        "all_inside": bool(ratios) and all(r["_inside"] for r in both if r["_width_ratio"] is not None),
        "n_inside": len(ratios),
        "width_min": min(ratios, default=math.nan),
        "width_max": max(ratios, default=math.nan),
        "speed_min": min(speed, default=math.nan),
        "speed_max": max(speed, default=math.nan),
        "missing": [(r["setting"], r["pld-accounting"]) for r in rows if not r["_both"]],
    }


def allocation_sentence(s) -> str:
    """The page's sentence on the allocation comparison, every relation in it read from ``s``
    (:func:`allocation_summary`)."""
    parts = []
    if s["all_inside"]:
        parts.append(
            f"At every one of the {s['n_inside']} settings that both answer with a certified lower end on our side, "
            f"our bracket lies inside theirs and is {num(s['width_min'])} to {num(s['width_max'])} times narrower"
        )
    elif s["all_meet"]:
        parts.append(f"At every one of the {s['n_both']} settings both answer, our bracket meets theirs")
    else:
        parts.append("Our bracket does not meet theirs at every setting both answer")
    # the upper ends and the speed-ups are over every setting both answer (n_both), which the first clause may not
    # cover (a setting without our certified lower end is not in n_inside): say so, not "them"
    scope = "every one of them" if not s["all_inside"] or s["n_inside"] == s["n_both"] else f"all {s['n_both']}"
    parts.append(f"our upper end is {f'at most theirs at {scope}' if s['all_upper_ok'] else 'above theirs somewhere'}")
    over = "" if scope == "every one of them" else f" at those {s['n_both']}"
    parts.append(f"and ours is {num(s['speed_min'])} to {num(s['speed_max'])} times faster{over}")
    text = "; ".join(parts[:2]) + ", " + parts[2] + "."
    for setting, why in s["missing"]:
        text += f" At {setting}, pld-accounting gave no answer ({why}); ours did."
    return text


def small_t_rows(data) -> list[dict]:
    """One row per T of ``bench_small_t.py``: median query time of both (same run), prv's over ours, whether ours
    is at most prv's, the width of our certified bracket and of prv_accountant's error interval, and their ratio
    (prv's / ours)."""
    out = []
    for r in data["rows"]:
        w_ours = r["eps_upper"] - r["eps_lower"]
        w_prv = r["prv"][2] - r["prv"][0]
        out.append(
            {
                "T": r["steps"],
                "ours s": r["seconds_ours"],
                "prv s": r["seconds_prv"],
                "prv / ours": r["seconds_prv"] / r["seconds_ours"],
                "ours ≤ prv": r["seconds_ours"] <= r["seconds_prv"],
                "our width": w_ours,
                "prv width": w_prv,
                "width prv / ours": w_prv / w_ours,
            }
        )
    return out


def small_t_verdict(rows) -> dict:
    """Per T of :func:`small_t_rows`, whether our median is at most prv's; the T where it is not (with both
    medians), and the range of width ratios."""
    fails = [r for r in rows if not r["ours ≤ prv"]]
    ratios = [r["width prv / ours"] for r in rows]
    return {
        "holds": not fails,
        "fails": fails,
        "held_at": [r["T"] for r in rows if r["ours ≤ prv"]],
        "width_min": min(ratios),
        "width_max": max(ratios),
    }


def small_t_sentence(v) -> str:
    """The page's sentence on the small-T timing, read from ``v`` (:func:`small_t_verdict`)."""
    held = ", ".join(map(num, v["held_at"])) or "no T"
    text = f"Our median is at or below prv_accountant's at T = {held}"
    if v["fails"]:
        text += "; it is above at " + "; ".join(
            f"T = {num(r['T'])} ({num(r['ours s'])} s against {num(r['prv s'])} s)" for r in v["fails"]
        )
        text += ", so the goal of a median at or below prv's at every T is not met"
    else:
        text += ", so the goal holds at every recorded T"
    text += (
        f". Our certified bracket is {num(v['width_min'])} to {num(v['width_max'])} times narrower than "
        "prv_accountant's error interval."
    )
    return text


def plot_small_t(rows):
    """Median query time against T for both accountants, log-log, one panel."""
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    T = [r["T"] for r in rows]
    ax.plot(T, [r["ours s"] for r in rows], "o-", label="dputils PLD")
    ax.plot(T, [r["prv s"] for r in rows], "s--", label="prv_accountant")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("T")
    ax.set_ylabel("median seconds per query")
    plotting.sci_ticks(ax, "x", powers=True)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 0.02, 0.05, 0.1, ...: within a decade
    plotting.sci_ticks(ax, "y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def glue_run_meta(prefix: str, meta) -> None:
    """Glue a recorded run's machine, load before and after, and date as ``{prefix}_machine``, ``_load_before``,
    ``_load_after``, ``_date``."""
    values = {
        f"{prefix}_machine": bm.describe_machine(meta),
        f"{prefix}_load_before": _load(meta["load_before"]),
        f"{prefix}_load_after": _load(meta["load_after"]),
        f"{prefix}_date": _date(meta),
    }
    for k, v in values.items():
        glue(k, v, display=False)


def load_words(meta) -> str:
    """Whether a recorded run's machine was loaded, in words generated from its metadata: the largest load
    average before and after the run against the cores the run could use (``affinity``, else ``cpus``). A load
    above the cores means other work shared the machine, so the run's times are upper bounds."""
    machine = meta.get("machine", {})
    cores = machine.get("affinity") or machine.get("cpus")
    loads = [float(v) for v in list(meta.get("load_before") or []) + list(meta.get("load_after") or [])]
    if not cores or not loads:
        return "a machine of unrecorded load, so both times are upper bounds only if it was shared"
    peak = max(loads)
    if peak > cores:
        return f"a loaded machine (load average up to {num(peak)} on {cores} cores), so both times are upper bounds"
    return f"a machine loaded below its {cores} cores (load average at most {num(peak)})"


def frontier_rows(data) -> list[dict]:
    """The frontier rows of ``bench_small_t.py`` (ours only): setting (T, q, σ, δ, the neighbouring direction),
    certified bracket, its width relative to its upper end, median seconds; a refused setting shows its reason."""
    out = []
    for r in data.get("frontier", []):
        row = {
            "T": num(r["steps"]),
            "q": pow10(r["q"]),
            "σ": num(r["sigma"]),
            "δ": pow10(r["delta"]),
            "direction": r.get("direction", ""),
        }
        if "refused" in r:
            row.update(
                {"our bracket": "refused: " + bm.readable(r["refused"]), "relative width": None, "median s": None}
            )
        else:
            row.update(
                {
                    "our bracket": _bracket(r["eps_lower"], r["eps_upper"]),
                    "relative width": r["rel_width"],
                    "median s": r["seconds"],
                }
            )
        out.append(row)
    return out


def prv_interval_case(
    sigma: float = 0.3, q: float = 0.01, steps: int = 1000, delta: float = 1e-5, eps_error: float = 0.01
) -> dict:
    """prv_accountant's stated interval on epsilon (``eps_error``, ``delta_error = delta / 1000``) against the
    exact epsilon of the saddle-point contour integral (:func:`dputils.truth.composition_epsilon`, the privacy
    loss's MGF inverted by quadrature: no grid, no FFT, with its error bound), the exact delta at prv's lower end
    (:func:`dputils.truth.composition_delta`), and our certified PLD bracket; Poisson-subsampled Gaussian."""
    import warnings

    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    from ...accountants import PLDAccountant

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = PRVAccountant(
            prvs=[PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)],
            max_self_compositions=[steps],
            eps_error=eps_error,
            delta_error=delta / 1000,
        )
        p_lo, p_est, p_hi = acc.compute_epsilon(delta=delta, num_self_compositions=[steps])
    mech = SubsampledGaussianMechanism(sigma, q)
    ours = PLDAccountant().compose(mech, steps).get_epsilon(delta)
    exact, err = truth.composition_epsilon([(mech, steps)], delta, eps_guess=ours.upper)
    d_at_lo, d_err = truth.composition_delta([(mech, steps)], p_lo)
    return {
        "sigma": sigma,
        "q": q,
        "steps": steps,
        "delta": delta,
        "prv": (p_lo, p_est, p_hi),
        "exact": exact,
        "exact_err": err,
        "delta_at_prv_lower": d_at_lo,
        "delta_at_prv_lower_err": d_err,
        "ours": (ours.lower, ours.upper),
        "prv_misses": exact + err < p_lo or exact - err > p_hi,
        "ours_holds": ours.lower <= exact - err and exact + err <= ours.upper,
    }


def prv_interval_sentence(c: dict) -> str:
    """The page's sentence on :func:`prv_interval_case`, every relation read from its numbers."""
    lo, _, hi = c["prv"]
    where = "above" if c["exact"] < lo else ("below" if c["exact"] > hi else "inside")
    text = (
        f"At σ = {num(c['sigma'])}, q = {num(c['q'])}, T = {num(c['steps'])}, δ = {num(c['delta'])}, "
        f"prv_accountant states ε ∈ [{lo:.4f}, {hi:.4f}]; the exact ε of the saddle-point contour is "
        f"{c['exact']:.6f} (error {num(c['exact_err'])}), so the stated interval lies {where} it"
    )
    if where == "above":
        text += (
            f" (by {num(lo - c['exact'])}; the exact δ at its lower end is {num(c['delta_at_prv_lower'])}, "
            f"{'below' if c['delta_at_prv_lower'] < c['delta'] else 'not below'} δ): conservative, not a privacy failure"
        )
    o_lo, o_hi = c["ours"]
    text += (
        f". Our certified bracket [{o_lo:.5f}, {o_hi:.5f}] {'holds' if c['ours_holds'] else 'misses'} the exact value."
    )
    return text
