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
