"""Glue, figures and checks of the benchmarks chapter: the page reads the recorded runs through
:mod:`dputils.book.benchmarks` and states them; nothing is timed while the book is built."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from scipy import optimize
from scipy.special import log_ndtr

from ... import truth
from ...mechanisms import SubsampledGaussianMechanism
from .. import benchmarks as bm
from ..results import glue
from ..tables import sci, show_table


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
    for k, v in values.items():
        glue(k, v, display=False)


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
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


def plot_error_panels(data, with_ref):
    """Signed relative errors against the reference, one column per δ with a reference, a row for the
    dputils accountants and one for the peers (:func:`dputils.book.benchmarks.plot_errors`)."""
    families = {"dputils": "dputils", "peer": "peers"}
    fig, axes = plt.subplots(
        2, max(len(with_ref), 1), squeeze=False, sharex=True, sharey="row", figsize=(max(3.6 * len(with_ref), 6.4), 7.6)
    )
    for row, (family, who) in zip(axes, families.items()):
        for ax, d in zip(row, with_ref):
            bm.plot_errors(data, d, ax=ax, family=family)
            ax.set_title(f"δ = {sci(d, 1)}: {who}")
        for ax in row[1:]:
            ax.set_ylabel("")
        handles, labels = row[0].get_legend_handles_labels()
        row[-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    for ax in axes[0]:
        ax.set_xlabel("")
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


def show_time_tables(data, deltas) -> None:
    """One table per δ of the median seconds per cold call (:func:`dputils.benchmarks.time_rows`)."""
    for d in deltas:
        show_table(
            bm.time_rows(data, d),
            digits=3,
            caption=f"Median seconds per cold call at δ = {sci(d, 1)} (blank: no answer).",
        )


def glue_ratios(data) -> list[dict]:
    """The peer/ours time ratios of the run (:func:`dputils.benchmarks.ratio_rows`); glue the median ratio of
    dp_accounting's PLD to ours (``bench_pld_ratio``) and of Opacus' RDP to ours (``bench_rdp_ratio``), NaN where
    there is none, and show the pivoted table."""
    ratios = bm.ratio_rows(data)
    for name, ours, peer in (("bench_pld_ratio", "pld", "dp_accounting-pld"), ("bench_rdp_ratio", "rdp", "opacus-rdp")):
        xs = [r["ratio"] for r in ratios if r["ours"] == ours and r["peer"] == peer]
        glue(name, bm.median(xs) if xs else float("nan"), display=False)
    show_table(
        bm.ratio_table(data),
        digits=3,
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
            caption=f"δ = {sci(d, 1)}: each answer, its error against both ends of the reference "
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
        prow,
        columns=["T", "eps ours lower", "eps ours upper", "eps dp_accounting", "eps exact"],
        digits=10,
        caption="Our certified bracket on ε, dp_accounting's ε and the exact ε (saddle contour).",
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
