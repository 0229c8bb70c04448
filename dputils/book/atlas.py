r"""The accountant atlas: every accountant's epsilon over a grid of DP-SGD settings, against the PLD bracket.

One *point* is a Poisson-subsampled Gaussian mechanism (noise multiplier ``sigma``, sampling rate ``q``)
composed ``T`` times, asked for epsilon at ``delta``. :func:`atlas_point` runs each accountant of
:data:`ACCOUNTANTS` on it and records, per accountant ``A``, the columns

* ``A_eps`` (the reported epsilon), ``A_lower`` / ``A_upper`` (its own bracket, where it has one),
* ``A_seconds`` (wall time of that accountant alone), ``A_error`` (the one-line message of a refusal or
  failure, empty when it answered; then ``A_eps`` is empty too: never a silent NaN),
* ``A_relerr`` and ``A_verdict``: the signed relative distance of ``A_eps`` to the reference bracket
  :math:`[\ell, u]`,

  .. math:: r = \begin{cases} (\varepsilon_A - u)/u & \varepsilon_A > u \quad(\text{pessimistic})\\
            0 & \ell \le \varepsilon_A \le u \quad(\text{inside})\\
            (\varepsilon_A - \ell)/\ell & \varepsilon_A < \ell \quad(\text{optimistic: not a valid bound})
            \end{cases}

  and the verdict ``inside``, ``pessimistic``, ``optimistic``, ``failed`` (the accountant gave no answer) or
  ``no reference``.

**The reference** is the certified bracket of :class:`~dputils.accountants.pld.PLDAccountant` (both
neighbouring directions). Its grid width ``h`` is chosen per point by a deterministic ladder: start at
``h0 = eps_guess / 256`` (``eps_guess`` the RDP bound, clipped to ``[1e-4, 100]``) and divide by 4 until
the bracket's relative width ``(u - l)/u`` is at most ``ref_rel_width`` or the next grid would have more
than ``pld_max_points`` points (then the last bracket is kept; the work, not the clock, decides, so the
same point gives the same numbers on any machine). A point whose best bracket is still wider than
``ref_rel_width``, or where the PLD refuses (at tiny delta its bound on the floating-point error of the
composition exceeds half of delta), has **no reference**: its ``pld_*`` columns say why and every verdict is
``no reference``.

The accountants (:data:`ACCOUNTANTS`): every accountant of :mod:`dputils.accountants.registry` that composes
the Poisson-subsampled Gaussian and is no variant of another, in the registry's order, each with its default
options (today ``pld``, the reference itself, its upper end as ``pld_eps``; ``rdp``, RDP with the modern
conversion, an upper bound; ``gdp``, the CLT mu-GDP approximation, not a bound; ``spa``, SP-CLT with its
certified Theorem-5 bracket; ``edgeworth``, AEA of order 2 with the EEAI bracket, infinite where vacuous),
then the peers of :data:`PEERS`: ``prv`` (the ``prv_accountant`` package of Gopi et al., eps_error 1% of the
PLD upper end (of ``eps_guess`` without a reference), at least 1e-3; delta error delta/1000; its bracket is
``[lower, upper]`` as it returns them).

:func:`atlas_table` runs a list of points serially, on a ``concurrent.futures`` executor or on a Dask
client (results in the order of the points whatever runs them), and :func:`write_csv` /
:func:`read_csv` store them. Grids: :data:`GRIDS` (``tiny`` for CI, ``small`` for the book's committed
file, ``full`` for a cluster) and :func:`grid_points`.

Command line (``python -m dputils.book.atlas``)::

    python -m dputils.book.atlas --grid small --out data/atlas/atlas_small.csv            # serial
    python -m dputils.book.atlas --grid full --out atlas_full.csv --workers 16          # LocalCluster
    python -m dputils.book.atlas --grid full --out atlas_full.csv --scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import math
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..accountants import PLDAccountant, registry
from ..curves import gdp_epsilon
from ..errors import DPValueError, NumericalError, check_delta, check_positive, check_positive_int
from ..mechanisms import SubsampledGaussianMechanism
from ..parallel import map_ordered
from .results import repo_root

__all__ = [
    "ACCOUNTANTS",
    "PEERS",
    "GRIDS",
    "COLUMNS",
    "grid_points",
    "atlas_point",
    "atlas_table",
    "signed_relative_error",
    "verdict",
    "pld_reference",
    "write_csv",
    "read_csv",
    "TOLERANCES",
    "VERDICTS",
    "LABELS",
    "verdict_summary",
    "disjoint",
    "farthest",
    "failures",
    "recompute",
    "load_rows",
    "gaussian_rows",
]

#: The peers' methods of the atlas (not dputils accountants), after the registered ones.
PEERS = ("prv",)
#: Every accountant of the atlas, in the order of the maps and of the CSV's columns: the registered accountants of
#: the Poisson-subsampled Gaussian that are no variant (the registry's order), then :data:`PEERS`.
ACCOUNTANTS = tuple(r.name for r in registry.select(events={"subsampled-gaussian"}, variants=False)) + PEERS

#: Relative tolerance within which a recomputed epsilon must equal a stored one (validation of a committed
#: file). Every method here is deterministic; the margins cover BLAS/FFT and libm differences across
#: machines (the PLD's FFT and PRV's FFT most of all).
TOLERANCES = {"pld": 1e-6, "rdp": 1e-8, "gdp": 1e-9, "spa": 1e-6, "edgeworth": 1e-6, "prv": 1e-4}

#: Grids of (sigma, q, T, delta): the cartesian product of the four lists.
GRIDS: dict[str, dict[str, list]] = {
    "tiny": {"sigma": [1.0, 4.0], "q": [1e-3, 0.1], "T": [100, 10000], "delta": [1e-5]},
    "small": {
        "sigma": [0.5, 1.0, 2.0, 4.0],
        "q": [1e-4, 1e-3, 1e-2, 0.1, 0.5],
        "T": [100, 1000, 10000, 100000, 1000000],
        "delta": [1e-5, 1e-10],
    },
    "full": {
        "sigma": [0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0],
        "q": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.2, 0.5],
        "T": [100, 300, 1000, 3000, 10000, 30000, 100000, 300000, 1000000],
        "delta": [1e-5, 1e-8, 1e-10, 1e-12],
    },
}

_PARAMS = ("sigma", "q", "T", "delta")
_FIELDS = ("eps", "lower", "upper", "seconds", "error", "relerr", "verdict")
_REF = ("ref_lower", "ref_upper", "ref_rel_width", "ref_h", "ref_points", "ref_note", "eps_guess")
#: The columns of a point, in CSV order.
COLUMNS = _PARAMS + _REF + tuple(f"{a}_{f}" for a in ACCOUNTANTS for f in _FIELDS)

VERDICTS = ("inside", "pessimistic", "optimistic", "failed", "no reference")

#: The display name of each accountant of :data:`ACCOUNTANTS` in the summaries' tables.
LABELS = dict(pld="PLD", rdp="RDP", gdp="GDP (CLT)", spa="SPA", edgeworth="Edgeworth", prv="PRV")


def grid_points(
    grid: str | dict[str, Sequence], sigmas: Sequence[float] | None = None, deltas: Sequence[float] | None = None
) -> list[dict[str, Any]]:
    """The points of a grid (a name of :data:`GRIDS` or a dict of the four lists), sigma varying slowest.

    ``sigmas`` / ``deltas``, when given and non-empty, keep only those values (a slice of the grid, e.g. one
    sweep point's share); a value not in the grid is refused.
    """
    if isinstance(grid, str):
        if grid not in GRIDS:
            raise DPValueError(f"grid must be one of {', '.join(GRIDS)}, got {grid!r}")
        spec = GRIDS[grid]
    elif isinstance(grid, dict):
        spec = grid
    else:
        raise DPValueError(f"grid must be a grid name or a dict of lists, got {type(grid).__name__}")
    missing = [k for k in _PARAMS if not spec.get(k)]
    extra = sorted(set(spec) - set(_PARAMS))
    if missing or extra:
        raise DPValueError(f"grid needs non-empty lists sigma, q, T, delta (missing {missing}, unknown {extra})")
    spec = dict(spec)
    for name, keep in (("sigma", sigmas), ("delta", deltas)):
        if keep:
            bad = [v for v in keep if not any(math.isclose(float(v), g, rel_tol=1e-12) for g in spec[name])]
            if bad:
                raise DPValueError(f"{name}s: {bad} not in the grid's {name} values {spec[name]}")
            spec[name] = [g for g in spec[name] if any(math.isclose(float(v), g, rel_tol=1e-12) for v in keep)]
    return [
        {"sigma": float(s), "q": float(q), "T": int(T), "delta": float(d)}
        for s, q, T, d in itertools.product(spec["sigma"], spec["q"], spec["T"], spec["delta"])
    ]


def signed_relative_error(value: float, lower: float, upper: float) -> float:
    """0 inside ``[lower, upper]``, ``(value - upper)/upper`` above it, ``(value - lower)/lower`` below it."""
    if not lower <= upper:
        raise DPValueError(f"reference bracket is empty: lower {lower!r} > upper {upper!r}")
    if value > upper:
        return (value - upper) / upper if upper > 0 else math.inf
    if value < lower:
        return (value - lower) / lower  # lower > value >= ... so lower > 0 unless value < 0
    return 0.0


def verdict(relerr: float) -> str:
    """``inside`` (0), ``pessimistic`` (> 0) or ``optimistic`` (< 0: below the certified lower end)."""
    return "inside" if relerr == 0 else ("pessimistic" if relerr > 0 else "optimistic")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def _mechanism(sigma: float, q: float):

    return SubsampledGaussianMechanism(sigma, q)


def pld_reference(
    sigma: float,
    q: float,
    T: int,
    delta: float,
    eps_guess: float,
    ref_rel_width: float = 0.01,
    pld_max_points: int = 1 << 20,
) -> dict[str, Any]:
    """The PLD bracket by the deterministic ladder of the module docstring.

    Returns ``{"eps", "lower", "upper", "h", "points", "rel_width"}`` of the last bracket computed; raises
    :class:`NumericalError` (or :class:`DPValueError`) when the PLD refuses at the first rung.
    """

    mech = _mechanism(sigma, q)
    h = min(max(eps_guess / 256.0, 1e-4), 100.0)
    best = None
    coarser = 0
    for _ in range(16):
        acc = PLDAccountant(discretization=h).compose(mech, T)
        try:
            r = acc.get_epsilon(delta)
        except (NumericalError, DPValueError) as exc:
            if best is None and coarser < 2 and "resolution" in str(exc):
                h *= 16.0  # fewer grid points, smaller FFT rounding bound: try twice on a coarser grid
                coarser += 1
                continue
            if best is None:
                raise
            break  # a finer grid refused (e.g. its memory check): keep the last bracket
        points = acc.window_points()
        width = (r.upper - r.lower) / r.upper if r.upper > 0 else math.inf
        best = {"eps": r.value, "lower": r.lower, "upper": r.upper, "h": h, "points": int(points), "rel_width": width}
        if width <= ref_rel_width or 4 * points > pld_max_points:
            break
        h /= 4.0
    return best


def _run_registered(name, sigma, q, T, delta, eps_guess):
    """A registered accountant with its registered options: (value, lower, upper) of epsilon(delta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. spa's degraded regime: visible in the bracket's width
        # the methods' own answers (no PLD fallback): the atlas maps where each method is accurate
        own = {"fallback": "none"} if name in ("spa", "edgeworth") else {}
        r = registry.create(name, **own).compose(_mechanism(sigma, q), T).get_epsilon(delta)
    return r.value, r.lower, r.upper


def _run_rdp(sigma, q, T, delta, eps_guess):
    return _run_registered("rdp", sigma, q, T, delta, eps_guess)


def _run_prv(sigma, q, T, delta, eps_guess):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    acc = PRVAccountant(
        prvs=PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q),
        eps_error=max(0.01 * eps_guess, 1e-3),
        delta_error=delta / 1000,
        max_self_compositions=T,
    )
    low, est, up = acc.compute_epsilon(delta, T)
    for name, v in (("estimate", est), ("lower", low), ("upper", up)):
        if not math.isfinite(v):
            raise NumericalError(f"prv: {name} is not finite ({v!r})")
    return float(est), float(low), float(up)


#: The peers' runners (registered accountants run through :func:`_run_registered`).
_RUNNERS: dict[str, Callable] = {"prv": _run_prv}


def atlas_point(
    sigma: float,
    q: float,
    T: int,
    delta: float,
    accountants: Sequence[str] = ACCOUNTANTS,
    ref_rel_width: float = 0.01,
    pld_max_points: int = 1 << 20,
) -> dict[str, Any]:
    """Every accountant's epsilon at one point, its time, and its distance to the PLD bracket.

    Returns a flat dict with the keys :data:`COLUMNS` (see the module docstring; empty strings where a value
    does not exist). A refusal or failure of an accountant is recorded in ``A_error``, never raised; bad
    parameters of the point itself raise :class:`DPValueError`.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # overflow warnings of the methods' own arithmetic: each either answers or raises (recorded)
        warnings.simplefilter("ignore", RuntimeWarning)
        return _atlas_point(sigma, q, T, delta, accountants, ref_rel_width, pld_max_points)


def _atlas_point(sigma, q, T, delta, accountants, ref_rel_width, pld_max_points) -> dict[str, Any]:
    sigma = check_positive("sigma", sigma)
    q = float(q)
    if not 0 < q <= 1:
        raise DPValueError(f"q must be in (0, 1], got {q!r}")
    T = check_positive_int("T", T)
    delta = check_delta(delta)
    if isinstance(accountants, str) or not set(accountants) <= set(ACCOUNTANTS) or not accountants:
        raise DPValueError(f"accountants must be a non-empty list from {ACCOUNTANTS}, got {accountants!r}")
    row: dict[str, Any] = {k: "" for k in COLUMNS}
    row.update(sigma=sigma, q=q, T=T, delta=delta)
    for a in ACCOUNTANTS:
        if a not in accountants:
            row[f"{a}_error"] = "not run"
            row[f"{a}_verdict"] = "not run"

    # a cheap upper bound sizes the PLD grid and PRV's eps_error (computed whether or not rdp is listed)
    t0 = time.perf_counter()
    guess_err = ""
    try:
        rdp_answer = _run_rdp(sigma, q, T, delta, None)
        guess = rdp_answer[0]
    except Exception as exc:  # noqa: BLE001 - recorded, the point goes on
        guess = None
        guess_err = _one_line(exc)
    rdp_seconds = time.perf_counter() - t0
    row["eps_guess"] = "" if guess is None else guess

    ref = None
    if "pld" in accountants:
        t0 = time.perf_counter()
        try:
            if guess is None:
                raise NumericalError(f"no RDP guess to size the grid ({guess_err})")
            ref = pld_reference(sigma, q, T, delta, guess, ref_rel_width, pld_max_points)
            row.update(
                pld_eps=ref["eps"],
                pld_lower=ref["lower"],
                pld_upper=ref["upper"],
                ref_h=ref["h"],
                ref_points=ref["points"],
                ref_rel_width=ref["rel_width"],
            )
            if ref["rel_width"] > ref_rel_width:
                row["ref_note"] = (
                    f"PLD bracket too wide: relative width {ref['rel_width']:.3g} > "
                    f"{ref_rel_width:g} at h {ref['h']:.3g}"
                )
                ref = None
        except Exception as exc:  # noqa: BLE001
            row["pld_error"] = _one_line(exc)
            row["ref_note"] = "PLD refused: " + row["pld_error"]
        row["pld_seconds"] = time.perf_counter() - t0
    else:
        row["ref_note"] = "pld not run"
    if ref is not None:
        row["ref_lower"], row["ref_upper"] = ref["lower"], ref["upper"]

    for a in ACCOUNTANTS:
        if a not in accountants:
            continue
        if a != "pld":
            t0 = time.perf_counter()
            try:
                if a == "prv" and guess is None:
                    raise NumericalError(f"no RDP guess to size PRV's eps_error ({guess_err})")
                if a == "rdp":  # the guess above is the RDP answer itself
                    if guess is None:
                        raise NumericalError(guess_err)
                    v, lo, hi = rdp_answer
                else:
                    size = guess if ref is None else ref["upper"]  # PRV's eps_error: 1% of it
                    run = _RUNNERS.get(a) or functools.partial(_run_registered, a)
                    v, lo, hi = run(sigma, q, T, delta, size)
                row[f"{a}_eps"] = v
                row[f"{a}_lower"] = "" if lo is None else lo
                row[f"{a}_upper"] = "" if hi is None else hi
            except Exception as exc:  # noqa: BLE001 - every failure is recorded with its message
                row[f"{a}_error"] = _one_line(exc)
            row[f"{a}_seconds"] = time.perf_counter() - t0 + (rdp_seconds if a == "rdp" else 0.0)
        if row[f"{a}_eps"] == "":
            row[f"{a}_verdict"] = "failed"
        elif ref is None:
            row[f"{a}_verdict"] = "no reference"
        else:
            r = signed_relative_error(float(row[f"{a}_eps"]), ref["lower"], ref["upper"])
            row[f"{a}_relerr"] = r
            row[f"{a}_verdict"] = verdict(r)
    return row


def _call(kw: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    return atlas_point(**kw, **options)


def atlas_table(
    points: Iterable[dict[str, Any]], client: Any = None, executor: Any = None, **options: Any
) -> list[dict[str, Any]]:
    """:func:`atlas_point` at each point (dicts with sigma, q, T, delta), results in the order of ``points``.

    Serial when neither ``client`` (a ``dask.distributed.Client``) nor ``executor`` (a
    ``concurrent.futures.Executor``) is given; ``options`` go to :func:`atlas_point`. A progress bar over
    points is shown on stderr (``TQDM_DISABLE=1`` hides it). Each point is deterministic, so the table does
    not depend on what ran it (up to the timing columns).
    """
    if client is not None and executor is not None:
        raise DPValueError("give client or executor, not both")
    pts = [dict(p) for p in points]
    if not pts:
        raise DPValueError("points is empty")
    for i, p in enumerate(pts):
        if set(p) != set(_PARAMS):
            raise DPValueError(f"points[{i}] must have exactly the keys sigma, q, T, delta, got {sorted(p)}")

    return map_ordered(
        functools.partial(_call, options=options), pts, client=client, executor=executor, desc="atlas points"
    )


def write_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write rows with the columns :data:`COLUMNS` (floats with 17 significant digits)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS), extrasaction="raise")
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(float(v)) if isinstance(v, float) else v) for k, v in r.items()})
    return p


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of :func:`write_csv`, numbers back as float (``T`` and ``ref_points`` as int), '' kept."""
    ints = {"T", "ref_points"}
    text_cols = {"ref_note"} | {f"{a}_{f}" for a in ACCOUNTANTS for f in ("error", "verdict")}
    rows = []
    with Path(path).open(newline="") as f:
        for r in csv.DictReader(f):
            row: dict[str, Any] = {}
            for k, v in r.items():
                if k in text_cols or v == "":
                    row[k] = v
                elif k in ints:
                    row[k] = int(v)
                else:
                    row[k] = float(v)
            rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------------
# summaries of a table (the atlas chapter's tables and checks)
# ------------------------------------------------------------------------------------------------
def verdict_summary(rows, deltas, accountants) -> list[dict]:
    """Per δ and accountant: the number of points of each verdict, the median and largest |r| (signed
    relative error against the PLD bracket, 0 inside) and the median seconds per point."""
    summary = []
    for d in deltas:
        at_d = [r for r in rows if r["delta"] == d]
        for a in accountants:
            err = [abs(r[f"{a}_relerr"]) for r in at_d if r[f"{a}_relerr"] != ""]
            sec = [r[f"{a}_seconds"] for r in at_d if r[f"{a}_seconds"] != ""]
            summary.append(
                {
                    "δ": d,
                    "accountant": LABELS[a],
                    **{v: sum(r[f"{a}_verdict"] == v for r in at_d) for v in VERDICTS},
                    "median |r|": float(np.median(err)) if err else "",
                    "max |r|": float(np.max(err)) if err else "",
                    "median s": float(np.median(sec)) if sec else "",
                }
            )
    return summary


def disjoint(ref, a) -> list[dict]:
    """The points of ``ref`` where accountant ``a``'s certified bracket misses the PLD bracket."""
    out = []
    for r in ref:
        lo, hi = r[f"{a}_lower"], r[f"{a}_upper"]
        if lo == "" or hi == "":
            continue
        if hi < r["ref_lower"] or lo > r["ref_upper"]:
            out.append(r)
    return out


def farthest(ref, accountants) -> list[dict]:
    """Per accountant and verdict (optimistic, pessimistic): how many points, and the farthest one."""
    find = []
    for a in accountants:
        for v in ("optimistic", "pessimistic"):
            sel = [r for r in ref if r[f"{a}_verdict"] == v]
            if not sel:
                continue
            far = max(sel, key=lambda r: abs(r[f"{a}_relerr"]))
            find.append(
                {
                    "accountant": LABELS[a],
                    "verdict": v,
                    "points": len(sel),
                    "largest |r|": abs(far[f"{a}_relerr"]),
                    "at σ": far["sigma"],
                    "q": far["q"],
                    "T": far["T"],
                    "δ": far["delta"],
                }
            )
    return find


def failures(rows, accountants) -> list[dict]:
    """Per accountant: the number of failed points and the kinds of error (all δ)."""
    out = []
    for a in accountants:
        failed = [r for r in rows if r[f"{a}_verdict"] == "failed"]
        kinds = sorted({r[f"{a}_error"].split(":")[0] for r in failed})
        out.append({"accountant": LABELS[a], "failures": len(failed), "kinds": ", ".join(kinds) or "none"})
    return out


def recompute(rows, accountants, n: int, max_seconds: float, seed: int):
    """Recompute ``n`` points drawn at random (``seed``) among those whose accountants took less than
    ``max_seconds`` in all. Returns the points checked, the largest relative change of each accountant's ε,
    and the problems found: an ε outside :data:`dputils.book.TOLERANCES`, a changed verdict, or a stored
    failure that no longer fails with the same kind of error (empty when all agree)."""
    cheap = [r for r in rows if sum(r[f"{a}_seconds"] or 0.0 for a in accountants) < max_seconds]
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(cheap), size=min(n, len(cheap)), replace=False)
    checked, worst, problems = [], {a: 0.0 for a in accountants}, []
    for idx in sorted(pick):
        old = cheap[idx]
        new = atlas_point(old["sigma"], old["q"], old["T"], old["delta"])
        for a in accountants:
            e_old, e_new = old[f"{a}_eps"], new[f"{a}_eps"]
            if e_old == "":
                kind = old[f"{a}_error"].split(":")[0]
                if not new[f"{a}_error"].startswith(kind):
                    problems.append((a, "error", old, new))
                continue
            rel = abs(e_new - e_old) / max(abs(e_old), 1e-300)
            worst[a] = max(worst[a], rel)
            if rel > TOLERANCES[a]:
                problems.append((a, "eps", e_old, e_new))
            if new[f"{a}_verdict"] != old[f"{a}_verdict"]:
                problems.append((a, "verdict", old, new))
        checked.append({k: old[k] for k in ("sigma", "q", "T", "delta")})
    return checked, worst, problems


def load_rows(source: str, data_file: str, grid: str, sigmas, deltas) -> list[dict]:
    """The atlas table: the committed CSV ``data_file`` (relative to the checkout) restricted to ``sigmas`` and
    ``deltas`` (empty: all) for ``source == "file"``, or the grid ``grid`` computed here for ``"compute"``."""
    if source == "file":
        path = Path(data_file) if Path(data_file).is_absolute() else repo_root() / data_file
        keep_s, keep_d = [float(s) for s in sigmas], [float(d) for d in deltas]
        return [
            r for r in read_csv(path) if (not keep_s or r["sigma"] in keep_s) and (not keep_d or r["delta"] in keep_d)
        ]
    if source == "compute":
        return atlas_table(grid_points(grid, sigmas, deltas))
    raise DPValueError(f"source must be 'file' or 'compute', got {source!r}")


def gaussian_rows(sigmas, steps, delta: float) -> list[dict]:
    """At q = 1, T steps of the Gaussian mechanism are exactly μ-GDP with μ = √T/σ: one row per (σ, T) with
    the closed-form ε(δ) (:func:`dputils.curves.gdp_epsilon`) and the PLD bracket and grid width that
    :func:`atlas_point` finds by the atlas's ladder."""
    out = []
    for s in sigmas:
        for t in steps:
            r = atlas_point(s, 1.0, int(t), delta, accountants=("pld",))
            out.append(
                {
                    "σ": s,
                    "T": int(t),
                    "exact ε": gdp_epsilon(delta, math.sqrt(t) / s),
                    "PLD lower": r["ref_lower"],
                    "PLD upper": r["ref_upper"],
                    "h": r["ref_h"],
                }
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dputils.book.atlas", description=__doc__.split("\n")[0])
    p.add_argument("--grid", default="small", choices=sorted(GRIDS), help="which grid of dputils.book.atlas.GRIDS")
    p.add_argument("--sigmas", type=float, nargs="*", default=None, help="only these sigma values of the grid")
    p.add_argument("--deltas", type=float, nargs="*", default=None, help="only these delta values of the grid")
    p.add_argument("--out", required=True, help="the CSV file to write")
    p.add_argument("--scheduler", default=None, help="a running Dask scheduler (tcp://host:8786)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="run on a LocalCluster of this many processes (default without --scheduler: serial)",
    )
    args = p.parse_args(argv)
    try:
        pts = grid_points(args.grid, args.sigmas, args.deltas)
    except DPValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = cluster = None
    try:
        if args.scheduler or args.workers:
            from distributed import Client

            if args.scheduler:
                client = Client(args.scheduler, timeout="20s")
            else:
                from .sweep import local_cluster

                cluster = local_cluster(args.workers)
                client = Client(cluster)
        t0 = time.perf_counter()
        rows = atlas_table(pts, client=client)
        write_csv(rows, args.out)
        print(f"{len(rows)} points in {time.perf_counter() - t0:.1f} s -> {args.out}")
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
