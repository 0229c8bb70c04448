"""Figures, tables and target bookkeeping of the shuffling and batch clipping chapter.

The numbers come from :mod:`dputils.shuffling` (and :mod:`dputils.data` for the training data); this module
draws them with :mod:`dputils.book.plotting`'s conventions and records the targets whose kind depends on the run
(a check at the full profile, "not run" in the smoke profile).
"""

from __future__ import annotations

from typing import Any

import matplotlib.ticker
import numpy as np

from ... import data as dpdata
from ... import shuffling as sh
from .. import plotting
from ..results import glue
from ..tables import pow10, show_table

#: the meaning of each parameter of the chapter (shown as a table next to the collapsed ``parameters`` cell)
PARAMETERS = {
    "delta": "target δ of every ε of the chapter",
    "sigma": "noise multiplier σ (noise standard deviation 2Cσ, as in the paper)",
    "epochs": "epochs E of the accounting examples",
    "dataset_size": "N of the accounting examples (CIFAR-10-like)",
    "batch_size": "samples per round (s for batch clipping, m for individual clipping)",
    "group_sizes": "group sizes g of the group table",
    "mc_draws": "Monte Carlo draws of the occupancy law of c²",
    "n_curve": "points on each plotted trade-off curve",
    "pld_discretization": "grid width of the PLD accountant",
    "train_n": "training images drawn (a multiple of the training batch)",
    "train_test": "test images drawn from the Fashion-MNIST test set",
    "train_dim": "input dimension of the synthetic fallback task",
    "train_epochs": "epochs of each training run",
    "train_batch": "training batch size (m for individual, s for batch clipping)",
    "train_sigmas": "noise multipliers of the training sweep",
    "train_repeats": "training runs (seeds) per setting, averaged",
    "seed": "seed of every random generator of the chapter",
}


def law_table(law: sh.C2Law, caption: str):
    """The law of c² as a table (c², probability)."""
    return show_table([{"c²": k, "probability": v} for k, v in law.as_dict().items()], caption=caption, digits=4)


def training_data(n_train: int, n_test: int, multiple: int, fallback_dim: int, seed: int) -> dict[str, Any]:
    """The training data of the chapter's clipping comparison and how to name them.

    Fashion-MNIST, else scikit-learn's digits, else two Gaussian blobs (:func:`dputils.data.fashion_mnist_data`),
    with sizes that fit them (:func:`dputils.data.classification_plan`; unchanged on Fashion-MNIST). Returns the
    arrays (``X, y, X_test, y_test``), the sizes, ``source``, ``kind``, ``name`` (for titles), ``label`` (for
    captions), ``real`` and a ``warning`` (``None`` on Fashion-MNIST)."""
    plan = dpdata.classification_plan(n_train, n_test, multiple=multiple, fallback_dim=fallback_dim)
    n_train, n_test = plan.n_train, plan.n_test
    X, y, Xte, yte, source = dpdata.fashion_mnist_data(n_train, n_test, seed=seed, fallback_dim=fallback_dim)
    real = plan.kind != "synthetic-blobs"
    name = dpdata.classification_label(plan.kind) if real else "SYNTHETIC data"
    warning = None
    if plan.kind != "fashion-mnist":
        warning = (
            "Fashion-MNIST files not found (apt-get install dataset-fashion-mnist,"
            " or set DPBOOK_FASHION_MNIST): these accuracies are on "
            + (
                f"{name} ({source}), sizes fitted to its {dpdata.DIGITS_SIZE} images"
                if real
                else "SYNTHETIC data (two Gaussian classes; pip install scikit-learn for its handwritten digits)"
            )
        )
    label = (
        f"{name}, {n_train} training / {n_test} test images "
        + ("(random subsample)" if plan.kind == "fashion-mnist" else "(random split)")
        if real
        else f"synthetic blobs, {n_train} training / {n_test} test points"
    )
    return dict(
        X=X,
        y=y,
        X_test=Xte,
        y_test=yte,
        n_train=n_train,
        n_test=n_test,
        source=source,
        kind=plan.kind,
        name=name,
        label=label,
        real=real,
        warning=warning,
    )


def _log_ticks(ax, ticks, y: bool = False) -> None:
    """Label the x axis at ``ticks`` (plain numbers) and drop the minor labels of the log axes."""
    ax.set_xticks(ticks, [f"{t:.3g}" if isinstance(t, float) else str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    if y:
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def plot_tradeoff(dataset_size: int, batch_size: int, sigma: float, n_points: int, epochs: int = 10):
    """The curves of :func:`dputils.shuffling.strong_adversary_tradeoff_curves` (g = 1 and 4): exact BC+SH
    mixtures (Def 5.2), their bounds ``G_{sqrt(gE)/sigma}`` and subsampling with g = 1, after ``epochs`` epochs."""
    fig, ax = plotting.new_figure()
    curves = sh.strong_adversary_tradeoff_curves(dataset_size, batch_size, sigma, epochs, n_points, (1, 4))
    for g_ in (1, 4):
        ax.plot(*curves[f"bc_shuffle_g{g_}"], label=f"exact BC+SH, g={g_}")
        ax.plot(*curves[f"bound_g{g_}"], "--", label=f"$G_{{\\sqrt{{gE}}/\\sigma}}$, g={g_}")
    ax.plot(*curves["subsample_g1"], ":", label="subsampling g=1, strong adversary")
    a = np.linspace(0, 1, n_points)
    ax.plot(a, 1 - a, color="0.7", lw=1)
    ax.set(xlabel="type I error $\\alpha$", ylabel="type II error $f(\\alpha)$", title=f"E={epochs}, $\\sigma$={sigma}")
    ax.legend(loc="best", framealpha=1)
    return fig


def plot_batch(batches, strong, standard, strong_shuffle: float, delta: float, epochs: int, sigma: float):
    """ε against the batch size: strong adversary (subsampling, exact; shuffling) and the standard model."""
    fig, ax = plotting.new_figure()
    ax.plot(batches, strong, "o-", label="strong adversary, subsampling (exact)")
    ax.axhline(strong_shuffle, ls="--", color="k", label="strong adversary, shuffling")
    ax.plot(batches, standard, "s-", color=plotting.color("gdp"), label="standard model, Poisson CLT")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="batch size",
        ylabel=f"$\\varepsilon$ at $\\delta$ = {pow10(delta)}",
        title=f"E={epochs}, $\\sigma$={sigma}",
    )
    _log_ticks(ax, list(batches), y=True)
    ax.legend(loc="best", framealpha=1)
    return fig


def plot_group(group_rows, delta: float):
    """ε against the group size, the five columns of :func:`dputils.shuffling.group_privacy_epsilons`."""
    fig, ax = plotting.new_figure()
    gs = [r[0] for r in group_rows]
    labels = [
        "$G_{\\sqrt{gE}/\\sigma}$ bound",
        "BC+SH exact",
        "BC+SH, printed $q_j$",
        "IC+SH exact",
        "generic $G_{g\\sqrt{E}/\\sigma}$",
    ]
    for i, lab in enumerate(labels):
        ax.plot(gs, [r[i + 1] for r in group_rows], "o-" if i != 2 else "x--", label=lab)
    ax.set(xscale="log", yscale="log", xlabel="group size g", ylabel=f"$\\varepsilon$ at $\\delta$ = {pow10(delta)}")
    _log_ticks(ax, gs, y=True)
    ax.legend(loc="best", framealpha=1)
    return fig


def plot_training(rows, acc_np: float, delta: float, title: str):
    """Test accuracy against the strong-adversary ε for IC, BC and the as-implemented BC variant."""
    fig, ax = plotting.new_figure()
    ee = [r["eps"] for r in rows]
    ax.plot(ee, [r["acc_ic"] for r in rows], "o-", label="individual clipping + shuffling")
    ax.plot(ee, [r["acc_bc"] for r in rows], "s-", label="batch clipping + shuffling (faithful noise)")
    ax.plot(
        ee,
        [r["acc_bc_as_implemented"] for r in rows],
        "x:",
        color="0.5",
        label="BC, noise / batch (not private as analysed)",
    )
    ax.axhline(acc_np, color="k", lw=1, ls="--", label="non-private")
    ax.set_xscale("log")
    _log_ticks(ax, ee)
    ax.set(
        xlabel=f"strong-adversary $\\varepsilon$ at $\\delta$ = {pow10(delta)} ($G_{{\\sqrt{{E}}/\\sigma}}$)",
        ylabel="test accuracy",
        title=title,
    )
    ax.legend(loc="best", framealpha=1)
    return fig


GROUP_COLUMNS = ["g", "bound", "bc_exact", "bc_printed", "ic_exact", "generic"]
GROUP_HEADERS = {
    "bound": "bound, G with μ = √(gE)/σ",
    "bc_exact": "BC+SH exact",
    "bc_printed": "BC+SH, printed q_j",
    "ic_exact": "IC+SH exact",
    "generic": "generic, G with μ = g√E/σ",
}


def group_records(rows) -> list[dict[str, Any]]:
    """The rows of :func:`dputils.shuffling.group_privacy_epsilons` as dicts (columns :data:`GROUP_COLUMNS`)."""
    return [dict(zip(GROUP_COLUMNS, r)) for r in rows]


def group_table(rows, caption: str, columns=None, digits: int | None = None):
    """The group-privacy table: ε of the bound, the exact mixtures and the generic transform per g."""
    kw = {} if digits is None else {"digits": digits}
    return show_table(group_records(rows), columns=columns, headers=GROUP_HEADERS, caption=caption, **kw)


def training_table(rows, caption: str):
    """The clipping comparison of :func:`dputils.shuffling.clipping_sweep`, one row per σ."""
    headers = {
        "sigma": "σ",
        "eps": "ε (strong adversary)",
        "acc_ic": "IC+SH accuracy",
        "acc_bc": "BC+SH accuracy",
        "acc_bc_as_implemented": "BC, noise / batch",
        "nsr_ic": "noise/signal IC",
        "nsr_bc": "noise/signal BC",
    }
    return show_table(rows, headers=headers, caption=caption, digits=3)


def training_record(dat: dict[str, Any], rows, acc_np: float, seconds: float) -> dict[str, Any]:
    """What the results file keeps of the training section: rows, data (source, kind, sizes, label, warning)."""
    return dict(
        rows=rows,
        non_private=acc_np,
        seconds=seconds,
        data=dat["source"],
        data_kind=dat["kind"],
        n_train=dat["n_train"],
        n_test=dat["n_test"],
        data_label=dat["label"],
        data_warning=dat["warning"],
        paper_data="MNIST and CIFAR-10 (the paper); ours: " + dat["label"],
    )


def headline_rows(tg, cases: dict, delta: float = 1e-5) -> list[dict[str, Any]]:
    """Record and tabulate ε(δ) of the headline bound: for each id → (σ, E, g), μ = √(gE)/σ
    (:func:`dputils.shuffling.bc_shuffle_mu`), or for g < 0 the generic group transform μ = |g|√E/σ
    (:func:`dputils.shuffling.generic_group_mu`), with the id's reference value from the target table."""
    rows = []
    for tid, (s_, E_, g_) in cases.items():
        mu = sh.bc_shuffle_mu(s_, E_, g_) if g_ > 0 else sh.generic_group_mu(s_, E_, -g_)
        eps_ = sh.gdp_epsilon(delta, mu)
        tg.record(tid, eps_)
        rows.append(
            {"σ": s_, "E": E_, "g": abs(g_), "μ = √(gE)/σ": mu, "ε": eps_, "anchor": tg.spec[tid]["paper"]}
            | ({} if g_ > 0 else {"note": "generic transform g√E/σ"})
        )
    show_table(rows, caption="ε at δ = 10⁻⁵ of the headline bound", digits=4)
    return rows


def def53_rows(cases, x_env) -> list[dict[str, Any]]:
    """Rows of the Def. 5.3 table: for each (c, σ, u) of ``cases`` the break points β0, β1
    (:func:`dputils.shuffling.upper_bound_betas`) and the largest difference on ``x_env`` between the closed
    form and the numerical lower convex envelope (:func:`dputils.shuffling.upper_bound_envelope_gap`)."""
    rows = []
    for c_, sg_, u_ in cases:
        b0, b1 = sh.upper_bound_betas(c_, u_, sg_)
        gap = sh.upper_bound_envelope_gap(x_env, c_, u_, sg_)
        rows.append({"c": c_, "σ": sg_, "u": u_, "β0": b0, "β1": b1, "max |closed form − envelope|": gap})
    return rows


def hoeffding_tail_rows(settings) -> tuple[list[tuple], list[dict[str, Any]]]:
    """For each (N, m, E): :func:`dputils.shuffling.subsampling_tails` as tuples
    ``(N, m, E, P(c² > (c^L)²), P(c² < (c^U)²), printed)`` (for the results file) and as the table's rows
    (with the rounds and the correct Hoeffding bound)."""
    tail_rows, table_rows = [], []
    for N_, m_, E_ in settings:
        t = sh.subsampling_tails(N_, m_, E_)
        tail_rows.append((N_, m_, E_, t["P_above_cL2"], t["P_below_cU2"], t["printed"]))
        table_rows.append(
            {
                "N": N_,
                "m": m_,
                "E": E_,
                "rounds n": t["rounds"],
                "P(c² > (c^L)²)": t["P_above_cL2"],
                "P(c² < (c^U)²)": t["P_below_cU2"],
                "paper's e^−E": t["printed"],
                "correct Hoeffding": t["hoeffding_correct"],
            }
        )
    return tail_rows, table_rows


def lemma_e2_rows(cases) -> list[dict[str, Any]]:
    """For each (σ, E, ε): the setting and :func:`dputils.shuffling.lemma_e2_deltas` (N = 60000, m = 256): the
    exact δ, the δ of the bound Lemma E.2 claims, the corrected bound's δ and its (c^L)²."""
    return [dict(sigma=sg, E=E_, eps=e_) | sh.lemma_e2_deltas(e_, sg, E_) for sg, E_, e_ in cases]


def lemma_e2_table(rows) -> None:
    """The table of :func:`lemma_e2_rows`."""
    show_table(
        rows,
        headers={
            "sigma": "σ",
            "eps": "ε",
            "exact": "exact δ (Def. 5.2)",
            "claimed": "claimed bound (Lemma E.2)",
            "corrected": "corrected bound",
            "cL2_corrected": "corrected (c^L)²",
        },
        caption="The claimed lower bound lies below the exact δ: it is violated",
    )


#: Column headers of :func:`lemma_e4_rows` for the keys of :func:`dputils.shuffling.lemma_e4_against_exact`.
E4_HEADERS = {
    "mean_c2": "E[c²]",
    "cL2": "(cᴸ)²",
    "l": "l = exp(−γgE)",
    "exact_tail": "exact P(c² > (cᴸ)²)",
    "eps_lemma": "ε of Lemma E.4, σ = 2",
    "eps_exact": "exact ε, σ = 2",
}


def lemma_e4_rows(group_sizes, sigma: float = 2.0, delta: float = 1e-5) -> list[dict[str, Any]]:
    """Lemma E.4 against the exact law (:func:`dputils.shuffling.lemma_e4_against_exact`; N = 60000, m = 256,
    E = 10, γ = 1), one row per g, with the headers :data:`E4_HEADERS`."""
    return [
        {"g": g_}
        | {
            E4_HEADERS[k]: v
            for k, v in sh.lemma_e4_against_exact(60000, 256, g_, 10, gamma=1.0, sigma=sigma, delta=delta).items()
        }
        for g_ in group_sizes
    ]


#: Row labels of :func:`show_curves_table` for the keys of :func:`dputils.shuffling.strong_adversary_tradeoffs`.
CURVE_LABELS = {
    "shuffle_g1": "G with μ = √10/2 (shuffling, g = 1)",
    "subsample_g1": "subsampling g = 1, strong adversary",
    "bc_shuffle": "BC+SH g = 4 exact",
    "bc_shuffle_bound": "G with μ = √40/2",
}


def show_curves_table(alphas, curves: dict) -> None:
    """The table of :func:`dputils.shuffling.strong_adversary_tradeoffs` at its defaults (σ = 2, E = 10,
    N = 60000, g = 4): one row per curve (labels :data:`CURVE_LABELS`), one column per α."""
    show_table(
        [{"curve": CURVE_LABELS[k]} | {f"α = {a:g}": v for a, v in zip(alphas, got)} for k, got in curves.items()],
        caption="Trade-off curves f(α), σ = 2, E = 10, N = 60000",
        digits=4,
    )


def show_occupancy_table(mc, ex, pr, n: int, s: int, g: int, draws: int) -> None:
    """Rounds hit per epoch (BC+SH): the simulated frequencies, the exact occupancy law and Theorem F.1's q_j
    (three :class:`dputils.shuffling.C2Law`; a value beyond a law's support has probability 0)."""

    def p(law, j):
        return float(law.pmf[j]) if j < law.pmf.size else 0.0

    show_table(
        [
            {"j": j, "Monte Carlo": p(mc, j), "exact occupancy": p(ex, j), "Theorem F.1 q_j": p(pr, j)}
            for j in range(1, g + 1)
        ],
        caption=f"Rounds hit per epoch, BC+SH, N = {n}, s = {s}, g = {g} ({draws:,} simulated permutations)",
        digits=4,
    )


def record_training(tg, ids, train_rows, dat) -> None:
    """Record ``ids`` = (the paper's claim, with the data named, or "synthetic data"; the accuracy gap in points
    between batch and individual clipping at σ = 2, not run when σ = 2 is not swept) and glue the gap
    (``sh_gap_sigma2``) and its negative (``sh_behind_sigma2``, the points batch clipping is behind)."""
    t_paper, t_parity = ids

    data_name = dat["name"]
    tg.record(t_paper, fmt={"data": data_name if dat["real"] else "synthetic data"})
    ran = 2.0 in {r_["sigma"] for r_ in train_rows}
    gap9 = sh.clipping_accuracy_gap(train_rows, 2.0) if ran else float("nan")
    glue("sh_gap_sigma2", gap9, display=False)
    glue("sh_behind_sigma2", -gap9, display=False)  # the prose says "behind": a positive number of points
    nsr = [r_["nsr_bc"] / r_["nsr_ic"] for r_ in train_rows]
    tg.record(
        t_parity,
        gap9,
        ran=ran,
        not_run_reason="σ = 2 is not in train_sigmas (smoke profile)",
        fmt={"data": data_name, "nsr_lo": min(nsr), "nsr_hi": max(nsr)},
    )


def show_training_data(dat) -> None:
    """Say which training data the run uses (a warning when it fell back), its features and classes, and glue
    the training and test sizes (``sh_train_n``, ``sh_train_test``)."""
    from IPython.display import Markdown, display

    if dat["warning"]:
        display(Markdown(f"**Warning:** {dat['warning']}."))
    n_classes = int(max(dat["y"].max(), dat["y_test"].max())) + 1
    print(f"data: {dat['label']}\n{dat['X'].shape[1]} features, {n_classes} classes")
    glue("sh_train_n", dat["n_train"], display=False)
    glue("sh_train_test", dat["n_test"], display=False)


# --------------------------------------------------------------------------- relations the prose states (issue 34)
def tradeoff_relations(dataset_size: int, batch_size: int, sigma: float, delta: float, epochs: int = 10) -> dict:
    """The relations the trade-off figure's caption states (:func:`plot_tradeoff`'s setting), on a grid of α
    (200 log-spaced from 10⁻⁶ to 10⁻², 400 linear to 1) where every curve is evaluated directly
    (:func:`dputils.shuffling.mixture_tradeoff`, :func:`dputils.shuffling.gaussian_tradeoff`):

    ``gap_g1``, the largest |exact BC+SH − bound| at g = 1 (0 up to rounding: c² = E exactly); ``lo_g4`` and
    ``gap_g4``, the smallest and largest exact − bound at g = 4; ``gap_ss``, the largest |subsampling −
    shuffling| at g = 1 and ``n_cross``, how often the two change order on the grid; ``eps_sh``, ``eps_ss`` the
    upper ε at ``delta`` of shuffling (G with μ = √E/σ) and of subsampling (exact Binomial mixture), and
    ``ss_excess`` = eps_ss / eps_sh − 1."""
    a = np.concatenate([np.geomspace(1e-6, 1e-2, 200, endpoint=False), np.linspace(1e-2, 1, 400)])
    mu1 = sh.shuffle_g1_mu(sigma, epochs)
    shuffle = sh.gaussian_tradeoff(a, mu1)
    ex1 = sh.mixture_tradeoff(a, sh.bc_shuffle_law(dataset_size, batch_size, 1).compose(epochs), sigma)
    ex4 = sh.mixture_tradeoff(a, sh.bc_shuffle_law(dataset_size, batch_size, 4).compose(epochs), sigma)
    d4 = ex4 - sh.gaussian_tradeoff(a, sh.bc_shuffle_mu(sigma, epochs, 4))
    law_ss = sh.subsample_ic_g1_law(dataset_size, batch_size, epochs)
    d_ss = sh.mixture_tradeoff(a, law_ss, sigma) - shuffle
    sign = np.sign(d_ss[np.abs(d_ss) > 1e-12])
    eps_sh = sh.gdp_epsilon(delta, mu1)
    eps_ss = sh.mixture_epsilon(delta, law_ss, sigma)[1]
    return dict(
        gap_g1=float(np.abs(ex1 - shuffle).max()),
        lo_g4=float(d4.min()),
        gap_g4=float(d4.max()),
        gap_ss=float(np.abs(d_ss).max()),
        n_cross=int(np.sum(sign[1:] != sign[:-1])),
        eps_sh=float(eps_sh),
        eps_ss=float(eps_ss),
        ss_excess=float(eps_ss / eps_sh - 1),
    )


def group_relations(group_rows, dataset_size: int, batch_size: int) -> dict:
    """The relations the group-privacy figure and errata 2 state, from the rows of
    :func:`dputils.shuffling.group_privacy_epsilons` (g, bound, BC exact, BC printed, IC exact, generic):

    ``growth_bound`` and ``growth_generic``, the smallest ratio over g > 1 of the ε growth ε(g)/ε(1) to the
    μ growth (√g for the bound, g for the generic transform; above 1 means ε grows faster than μ);
    ``ic_excess``, the largest IC exact / bound − 1; ``printed_deficit``, the largest 1 − BC printed / BC exact;
    ``coll_lo``, ``coll_hi``, the smallest and largest ratio, over the groups g > 1, of the weight the printed
    law of Theorem F.1 puts on collisions (some round holding two or more of the group, 1 − q_g) to the exact
    occupancy law's, and ``coll_g2`` that ratio at g = 2 (for this N and s)."""
    base = {r[0]: r for r in group_rows}[1]
    big = [r for r in group_rows if r[0] > 1]
    coll = {}
    for g_ in sorted({r[0] for r in big} | {2}):
        ex = sh.bc_shuffle_law(dataset_size, batch_size, g_)
        pr = sh.bc_shuffle_law_as_printed(dataset_size, batch_size, g_)
        coll[g_] = (1 - pr.pmf[g_]) / (1 - ex.pmf[g_])
    return dict(
        growth_bound=min((r[1] / base[1]) / np.sqrt(r[0]) for r in big),
        growth_generic=min((r[5] / base[5]) / r[0] for r in big),
        ic_excess=max(r[4] / r[1] - 1 for r in big),
        printed_deficit=max(1 - r[3] / r[2] for r in big),
        coll_lo=float(min(coll[r[0]] for r in big)),
        coll_hi=float(max(coll[r[0]] for r in big)),
        coll_g2=float(coll[2]),
    )


def e4_relations(e4_rows) -> dict:
    """The relations of errata 4 from :func:`lemma_e4_rows`: ``tail_over_l``, the largest exact tail / l;
    ``loose_lo``, ``loose_hi``, the smallest and largest ratio of Lemma E.4's ε to the exact ε where the lemma's
    ε is finite; ``none_g1``, whether the lemma gives no ε for g = 1 (l > δ)."""
    ratios = [r[E4_HEADERS["eps_lemma"]] / r[E4_HEADERS["eps_exact"]] for r in e4_rows]
    finite = [x for x in ratios if np.isfinite(x)]
    g1 = [r for r in e4_rows if r["g"] == 1]
    return dict(
        tail_over_l=max(r[E4_HEADERS["exact_tail"]] / r[E4_HEADERS["l"]] for r in e4_rows),
        loose_lo=min(finite),
        loose_hi=max(finite),
        none_g1=bool(g1) and not np.isfinite(g1[0][E4_HEADERS["eps_lemma"]]),
    )


def training_relations(rows, dat: dict[str, Any]) -> dict:
    """The relations the training section states, from the rows of :func:`dputils.shuffling.clipping_sweep`:
    ``bc_trails``, whether faithful batch clipping's accuracy is below individual clipping's at every σ;
    ``bc_lead``, the smallest lead of individual clipping in points; ``acc_bc_top``, batch clipping's accuracy
    at the largest σ, and ``chance``, one over the number of classes of :func:`training_data`'s ``dat``;
    ``parity_gap``, the largest shortfall in points of the
    "noise / batch" variant below individual clipping (negative: it is above at every σ)."""
    top = max(rows, key=lambda r: r["sigma"])
    n_classes = int(max(dat["y"].max(), dat["y_test"].max())) + 1
    return dict(
        bc_trails=all(r["acc_bc"] < r["acc_ic"] for r in rows),
        bc_lead=min(100 * (r["acc_ic"] - r["acc_bc"]) for r in rows),
        acc_bc_top=top["acc_bc"],
        sigma_top=top["sigma"],
        chance=1 / n_classes,
        parity_gap=max(100 * (r["acc_ic"] - r["acc_bc_as_implemented"]) for r in rows),
    )
