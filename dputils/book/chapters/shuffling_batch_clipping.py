"""Figures, tables and target bookkeeping of the shuffling and batch clipping chapter.

The numbers come from :mod:`dputils.shuffling` (and :mod:`dputils.data` for the training data); this module
draws them with :mod:`dputils.book.plotting`'s conventions and records the targets whose kind depends on the run
(a check at the full profile, "not run" in the smoke profile).
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib.ticker
import numpy as np

from ... import data as dpdata
from ... import shuffling as sh
from .. import plotting
from ..results import glue
from ..tables import show_table


def law_table(law: sh.C2Law, caption: str):
    """The law of c² as a table (c², probability)."""
    return show_table([{"c²": k, "probability": v} for k, v in law.as_dict().items()], caption=caption, digits=6)


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
    """Exact BC+SH mixtures (Def 5.2) and their bounds ``G_{sqrt(gE)/sigma}`` for g = 1 and 4, and subsampling
    with g = 1 (strong adversary), after ``epochs`` epochs."""
    fig, ax = plotting.new_figure()
    a = np.linspace(0, 1, n_points)
    for g_ in (1, 4):
        lawg = sh.bc_shuffle_law(dataset_size, batch_size, g_).compose(epochs)
        ax.plot(*sh.mixture_tradeoff_curve(lawg, sigma, n_points=n_points), label=f"exact BC+SH, g={g_}")
        mu = sh.bc_shuffle_mu(sigma, epochs, g_)
        ax.plot(a, sh.gaussian_tradeoff(a, mu), "--", label=f"$G_{{\\sqrt{{gE}}/\\sigma}}$, g={g_}")
    law_ss = sh.subsample_ic_g1_law(dataset_size, batch_size, epochs)
    al, be = sh.mixture_tradeoff_curve(law_ss, sigma, n_points=n_points)
    ax.plot(al, be, ":", label="subsampling g=1, strong adversary")
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
        ylabel=f"$\\varepsilon$ at $\\delta$={delta}",
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
    ax.set(xscale="log", yscale="log", xlabel="group size g", ylabel=f"$\\varepsilon$ at $\\delta$={delta}")
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
        xlabel=f"strong-adversary $\\varepsilon$ at $\\delta$={delta} ($G_{{\\sqrt{{E}}/\\sigma}}$)",
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
    show_table(rows, caption="ε at δ = 10⁻⁵ of the headline bound", digits=5)
    return rows


def def53_rows(cases, x_env) -> list[dict[str, Any]]:
    """For each (c, σ, u) of ``cases``: the break points β0, β1 of Def. 5.3
    (:func:`dputils.shuffling.upper_bound_betas`) and the largest difference on ``x_env`` between the closed
    form and the numerical lower convex envelope."""
    rows = []
    for c_, sg_, u_ in cases:
        got = sh.upper_bound_betas(c_, u_, sg_)
        env = sh.upper_bound_tradeoff_numerical(x_env, c_, u_, sg_)
        gap = float(np.max(np.abs(env - sh.upper_bound_tradeoff(x_env, c_, u_, sg_))))
        rows.append({"c": c_, "σ": sg_, "u": u_, "β0": got[0], "β1": got[1], "max |closed form − envelope|": gap})
    return rows


def hoeffding_tail_rows(settings) -> tuple[list[tuple], list[dict[str, Any]]]:
    """For each (N, m, E): the exact tails of the Binomial law of c² (subsampling, g = 1) at the paper's
    thresholds (:func:`dputils.shuffling.subsampling_tail_probabilities`), as tuples
    ``(N, m, E, P(c² > (c^L)²), P(c² < (c^U)²), printed)`` and as the table's rows (with the rounds and the
    correct Hoeffding bound)."""
    tail_rows, table_rows = [], []
    for N_, m_, E_ in settings:
        law_ = sh.subsample_ic_g1_law(N_, m_, E_)
        t = sh.subsampling_tail_probabilities(law_, E_)
        tail_rows.append((N_, m_, E_, t["P_above_cL2"], t["P_below_cU2"], t["printed"]))
        table_rows.append(
            {
                "N": N_,
                "m": m_,
                "E": E_,
                "rounds n": law_.pmf.size - 1,
                "P(c² > (c^L)²)": t["P_above_cL2"],
                "P(c² < (c^U)²)": t["P_below_cU2"],
                "paper's e^−E": t["printed"],
                "correct Hoeffding": t["hoeffding_correct"],
            }
        )
    return tail_rows, table_rows


def lemma_e2_rows(cases) -> list[dict[str, Any]]:
    """For each (σ, E, ε) at N = 60000, m = 256 (subsampling, g = 1): the exact mixture δ (Def. 5.2), the δ of
    the lower bound claimed by Lemma E.2 and of the corrected bound (the tail from the exact Binomial law at
    level e^{-E}), and the corrected (c^L)²."""
    out = []
    for sg, E_, e_ in cases:
        law_ = sh.subsample_ic_g1_law(60000, 256, E_)
        pr_ = sh.lemma_e2_as_printed(E_)
        fix = sh.subsampling_bounds_corrected(law_, math.exp(-E_))
        out.append(
            dict(
                sigma=sg,
                E=E_,
                eps=e_,
                exact=sh.mixture_delta(e_, law_, sg),
                claimed=sh.lower_bound_delta(e_, math.sqrt(pr_["cL2"]), pr_["l"], sg),
                corrected=sh.lower_bound_delta(e_, math.sqrt(fix["cL2"]), fix["l"], sg),
                cL2_corrected=fix["cL2"],
            )
        )
    return out


def lemma_e4_rows(group_sizes, sigma: float = 2.0, delta: float = 1e-5) -> list[dict[str, Any]]:
    """Lemma E.4 (individual clipping, subsampling, N = 60000, m = 256, E = 10, γ = 1) against the exact law of
    c² (:func:`dputils.shuffling.subsample_ic_law`) for each g: E[c²], (c^L)², the tail l = e^{-γgE}, the
    exact P(c² > (c^L)²), the lemma's ε (∞ where l ≥ δ) and the exact mixture ε."""
    rows = []
    for g_ in group_sizes:
        law_e4 = sh.subsample_ic_law(60000, 256, g_, 10)
        e4 = sh.lemma_e4_as_printed(60000, 256, g_, 10, gamma=1.0)
        c_l = math.sqrt(e4["cL2"])
        eps_e4 = sh.lower_bound_epsilon(delta, c_l, e4["l"], sigma) if e4["l"] < delta else math.inf
        rows.append(
            {
                "g": g_,
                "E[c²]": law_e4.mean,
                "(cᴸ)²": e4["cL2"],
                "l = exp(−γgE)": e4["l"],
                "exact P(c² > (cᴸ)²)": law_e4.sf(e4["cL2"]),
                "ε of Lemma E.4, σ = 2": eps_e4,
                "exact ε, σ = 2": sh.mixture_epsilon(delta, law_e4, sigma)[1],
            }
        )
    return rows


def gaussian_renyi_quadrature(mu: float, alpha: float) -> float:
    """D_α(N(μ, 1) ‖ N(0, 1)) = log(∫ p^α q^{1−α}) / (α − 1) by adaptive quadrature (relative tolerance 10⁻¹²)
    on [αμ − 12, αμ + 12], where the tilted mass sits: a numerical check of the closed form αμ²/2."""
    from scipy import integrate, stats

    def integrand(x):
        return math.exp(alpha * stats.norm.logpdf(x, mu) + (1 - alpha) * stats.norm.logpdf(x))

    lo_, hi_ = alpha * mu - 12, alpha * mu + 12
    return math.log(integrate.quad(integrand, lo_, hi_, epsabs=0, epsrel=1e-12)[0]) / (alpha - 1)


def tradeoff_curves_e10(alphas) -> dict[str, np.ndarray]:
    """f(α) at σ = 2, E = 10, N = 60000, s = m = 250 (the paper's Table 1 rows): G_μ with μ = √10/2
    (shuffling, g = 1), the exact strong-adversary mixture of subsampling with g = 1, the exact BC+SH mixture
    with g = 4, and G_μ with μ = √40/2 (its bound)."""
    law_ss10 = sh.subsample_ic_g1_law(60000, 250, 10)
    law_bc10 = sh.bc_shuffle_law(60000, 250, 4).compose(10)
    return {
        "G with μ = √10/2 (shuffling, g = 1)": sh.gaussian_tradeoff(alphas, math.sqrt(10) / 2),
        "subsampling g = 1, strong adversary": sh.mixture_tradeoff(alphas, law_ss10, 2.0),
        "BC+SH g = 4 exact": sh.mixture_tradeoff(alphas, law_bc10, 2.0),
        "G with μ = √40/2": sh.gaussian_tradeoff(alphas, math.sqrt(40) / 2),
    }


def show_curves_table(alphas, curves: dict) -> None:
    """The table of :func:`tradeoff_curves_e10`: one row per curve, one column per α."""
    show_table(
        [{"curve": k} | {f"α = {a:g}": v for a, v in zip(alphas, got)} for k, got in curves.items()],
        caption="Trade-off curves f(α), σ = 2, E = 10, N = 60000",
        digits=5,
    )


def show_occupancy_table(mc, ex, pr, n: int, s: int, g: int, draws: int) -> None:
    """Rounds hit per epoch (BC+SH): the simulated frequencies, the exact occupancy law and Theorem F.1's q_j."""
    show_table(
        [{"j": j, "Monte Carlo": mc[j], "exact occupancy": ex[j], "Theorem F.1 q_j": pr[j]} for j in range(1, g + 1)],
        caption=f"Rounds hit per epoch, BC+SH, N = {n}, s = {s}, g = {g} ({draws:,} simulated permutations)",
        digits=6,
    )


def record_training(tg, ids, train_rows, dat) -> None:
    """Record ``ids`` = (the paper's claim, with the data named, or "synthetic data"; the accuracy gap in points
    between batch and individual clipping at σ = 2, not run when σ = 2 is not swept) and glue the gap
    (``sh_gap_sigma2``)."""
    t_paper, t_parity = ids

    data_name = dat["name"]
    tg.record(t_paper, fmt={"data": data_name if dat["real"] else "synthetic data"})
    by_sigma = {r_["sigma"]: r_ for r_ in train_rows}
    gap9 = 100 * (by_sigma[2.0]["acc_bc"] - by_sigma[2.0]["acc_ic"]) if 2.0 in by_sigma else float("nan")
    glue("sh_gap_sigma2", gap9, display=False)
    tg.record(
        t_parity,
        gap9,
        ran=2.0 in by_sigma,
        not_run_reason="σ = 2 is not in train_sigmas (smoke profile)",
        fmt={"data": data_name},
    )


def eq7_points(mus, epsilons, alphas=None) -> list[tuple[float, float, float]]:
    """For each μ and ε where the δ of eq. (7), Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), is at least 10⁻⁸ (below,
    1 − G_μ(α) − e^ε α cancels): ``(δ, grid_sup, at_star)`` with grid_sup the largest 1 − G_μ(α) − e^ε α over
    ``alphas`` (default 4000 log-spaced points on [10⁻¹², 10⁻²] and 4000 linear on [10⁻², 1]) and at_star its
    value at α* = Φ(−ε/μ − μ/2), where G_μ'(α) = −e^ε."""
    from scipy import special

    if alphas is None:
        alphas = np.concatenate([np.geomspace(1e-12, 1e-2, 4000), np.linspace(1e-2, 1, 4000)])
    out = []
    for mu in mus:
        for e in epsilons:
            d7 = sh.gdp_delta(e, mu)
            if d7 < 1e-8:
                continue
            grid_sup = np.max(1 - sh.gaussian_tradeoff(alphas, mu) - math.exp(e) * alphas)
            a_star = special.ndtr(-e / mu - mu / 2)
            at_star = 1 - sh.gaussian_tradeoff(a_star, mu) - math.exp(e) * a_star
            out.append((d7, grid_sup, at_star))
    return out


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
