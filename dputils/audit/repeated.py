"""Repeated white-box audits: ``n_repeats`` independent training runs with canaries, each audited, in seeded
chunks on one process, a ``concurrent.futures`` executor or a Dask cluster (issue 16).

One white-box audit ({cite}`gauss_audit`, Sec. 5) trains once and gives one empirical lower bound per auditor.
A lower bound at confidence ``1 - alpha`` may exceed the true epsilon in at most a fraction ``alpha`` of runs;
whether an implementation keeps that promise is a statement over *repeated* runs. :func:`repeated_audit` runs
them and combines them:

* run ``i`` of ``n_repeats`` is seeded by the ``i``-th rep of :func:`dputils.parallel.map_chunks` (chunks of
  ``chunk`` runs; chunk ``j`` gets ``SeedSequence(seed).spawn(k)[j]``, a one-run chunk uses that seed itself,
  a larger chunk its seed's children). From run ``i``'s SeedSequence two 31-bit integers are drawn
  (``generate_state(2)``): the first is the training run's ``seed`` (its data, model initialisation, canary
  coordinates and memberships, sampling coins and noise), the second the auditor's bootstrap ``seed``;
  both are returned, so any single run can be redone by hand;
* every run is audited with the audit's own function (:func:`~dputils.audit.whitebox.audit_whitebox`,
  :func:`~dputils.audit.input_canary.audit_input_canaries` or :func:`~dputils.audit.ftrl_audit.audit_ftrl`);
* per auditor the per-run bounds ``b_1..b_n``, their mean and its standard error ``sd(b) / sqrt(n)``
  (``ddof = 1``; 0 for one run), and the fraction of runs with ``b_i > epsilon_theory`` (the run's
  accountant's epsilon: the PLD upper bound for DP-SGD, the tree's GDP epsilon for DP-FTRL) with its one-sided
  95% Clopper-Pearson upper bound. For a correct implementation the fraction is at most ``alpha`` in
  expectation, and in practice about 0, because the bounds sit well below the theoretical epsilon.
  ``andrew`` (DP-FTRL) is a point estimate, not a bound: its exceedance carries no such promise.

The runs, their seeds and the combination depend on ``(n_repeats, chunk, seed)`` and the arguments only,
never on what runs them: serial, an executor with any number of workers and a Dask client give the same
numbers. For that each run uses ``torch_threads`` CPU threads (default 1, restored afterwards; parallelism
comes from the workers), because a different thread count may change the order of floating-point sums in
torch's CPU kernels. On CUDA, kernels that are not deterministic can still change the last bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..errors import DPValueError, check_choice, check_positive_int, check_probability
from ..parallel import map_chunks
from .simulate import mc_upper

__all__ = ["AUDITS", "repeated_audit", "run_seeds"]

#: The white-box audits that can be repeated: name -> (module, run function, audit function).
AUDITS: dict[str, tuple[str, str, str]] = {
    "dirac": ("dputils.audit.whitebox", "run_whitebox_audit", "audit_whitebox"),
    "input": ("dputils.audit.input_canary", "run_input_canary_audit", "audit_input_canaries"),
    "ftrl": ("dputils.audit.ftrl_audit", "run_ftrl_audit", "audit_ftrl"),
}


def _functions(audit: str) -> tuple[Callable, Callable]:
    import importlib

    mod, run_name, audit_name = AUDITS[audit]
    module = importlib.import_module(mod)
    return getattr(module, run_name), getattr(module, audit_name)


def run_seeds(ss: np.random.SeedSequence) -> tuple[int, int]:
    """``(training seed, audit seed)`` of one run: two 31-bit integers from ``ss.generate_state(2)``."""
    a, b = ss.generate_state(2, dtype=np.uint32)
    return int(a) >> 1, int(b) >> 1


def _rep_seeds(n: int, ss: np.random.SeedSequence) -> list[np.random.SeedSequence]:
    # the convention of dputils.audit.simulate: a one-run chunk is seeded by the chunk's own seed
    return [ss] if n == 1 else ss.spawn(n)


def _chunk(
    n: int,
    ss: np.random.SeedSequence,
    audit: str,
    m: int,
    alpha: float,
    n_bootstrap: int,
    run_kwargs: dict[str, Any],
    audit_kwargs: dict[str, Any],
    torch_threads: int | None,
) -> list[dict]:
    """The runs of one chunk: ``[{"seed", "audit_seed", "epsilon_theory", "bounds", "train_seconds"}, ...]``."""
    import time

    import torch

    run_fn, audit_fn = _functions(audit)
    prev = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    out = []
    try:
        for child in _rep_seeds(n, ss):
            s_run, s_audit = run_seeds(child)
            t0 = time.perf_counter()
            run = run_fn(m, seed=s_run, progress=False, **run_kwargs)
            seconds = time.perf_counter() - t0
            bounds = audit_fn(run, alpha, n_bootstrap=n_bootstrap, seed=s_audit, **audit_kwargs)
            out.append(
                {
                    "seed": s_run,
                    "audit_seed": s_audit,
                    "epsilon_theory": float(run.epsilon_theory),
                    "bounds": {k: float(v) for k, v in bounds.items()},
                    "train_seconds": seconds,
                }
            )
    finally:
        if torch_threads is not None:
            torch.set_num_threads(prev)
    return out


def repeated_audit(
    n_repeats: int,
    m: int = 200,
    *,
    audit: str = "dirac",
    seed: int = 0,
    alpha: float = 0.05,
    n_bootstrap: int = 1000,
    chunk: int = 1,
    client: Any = None,
    executor: Any = None,
    torch_threads: int | None = 1,
    audit_kwargs: dict[str, Any] | None = None,
    **run_kwargs: Any,
) -> dict[str, Any]:
    """``n_repeats`` independent white-box audits with ``m`` canaries each, combined (module docstring).

    Args:
        n_repeats: number of training runs.
        m: canaries per run.
        audit: ``"dirac"`` (DP-SGD with Dirac gradient canaries, :func:`~dputils.audit.whitebox.run_whitebox_audit`),
            ``"input"`` (DP-SGD with input-space canaries, :func:`~dputils.audit.input_canary.run_input_canary_audit`)
            or ``"ftrl"`` (DP-FTRL, :func:`~dputils.audit.ftrl_audit.run_ftrl_audit`).
        seed: root of the runs' seeds (``numpy.random.SeedSequence(seed)``).
        alpha: 1 - confidence of each lower bound; n_bootstrap: bootstrap draws of the Gaussian auditor.
        chunk: runs per task (:func:`dputils.parallel.map_chunks`); the answer depends on it (the seeds do).
        client, executor: a ``dask.distributed.Client`` or a ``concurrent.futures.Executor`` (not both);
            neither: serial. Workers must be able to import ``dputils``.
        torch_threads: CPU threads of torch during each run (None: leave torch's setting alone, and give up
            bit-identical answers across machines and worker layouts).
        audit_kwargs: extra options of the audit function (e.g. ``{"score": "raw"}`` for DP-FTRL).
        **run_kwargs: the run function's options (sigma, epochs, batch_size, n_train, hidden, ...), the same
            for every run; ``seed`` and ``progress`` are set per run.

    Returns a dict: ``audit``, ``n_repeats``, ``chunk``, ``seed``, ``alpha``, ``m``, ``epsilon_theory`` (of the
    first run; the same for all runs unless the schedule depends on the seed, as for input canaries whose IN
    count sets q: then ``epsilon_theory_runs`` has each run's), ``seeds`` and ``audit_seeds`` (per run),
    ``bounds`` (auditor -> list of per-run lower bounds), ``mean``, ``se``, ``exceed`` (fraction of runs whose
    bound exceeds that run's ``epsilon_theory``), ``exceed_upper95`` and ``train_seconds`` (per run; the only
    entry that depends on the machine).
    """

    n_repeats = check_positive_int("n_repeats", n_repeats)
    m = check_positive_int("m", m)
    check_choice("audit", audit, tuple(AUDITS))
    alpha = check_probability("alpha", alpha, allow_zero=False, allow_one=False)
    n_bootstrap = check_positive_int("n_bootstrap", n_bootstrap)
    if torch_threads is not None:
        torch_threads = check_positive_int("torch_threads", torch_threads)
    reserved = sorted({"seed", "progress", "m"} & set(run_kwargs))
    if reserved:
        raise DPValueError(f"run options {', '.join(reserved)} are set by repeated_audit (use its m= and seed=)")
    audit_kwargs = dict(audit_kwargs or {})
    bad = sorted({"seed", "n_bootstrap", "alpha", "run"} & set(audit_kwargs))
    if bad:
        raise DPValueError(f"audit_kwargs: {', '.join(bad)} are set by repeated_audit")
    fn = partial(
        _chunk,
        audit=audit,
        m=m,
        alpha=alpha,
        n_bootstrap=n_bootstrap,
        run_kwargs=dict(run_kwargs),
        audit_kwargs=audit_kwargs,
        torch_threads=torch_threads,
    )
    parts = map_chunks(fn, n_repeats, chunk, seed, client=client, executor=executor, desc=f"repeated {audit} audits")
    runs = [r for part in parts for r in part]
    methods = list(runs[0]["bounds"])
    eps_runs = np.array([r["epsilon_theory"] for r in runs])
    out: dict[str, Any] = {
        "audit": audit,
        "n_repeats": n_repeats,
        "chunk": chunk,
        "seed": seed,
        "alpha": alpha,
        "m": m,
        "epsilon_theory": float(eps_runs[0]),
        "seeds": [r["seed"] for r in runs],
        "audit_seeds": [r["audit_seed"] for r in runs],
        "bounds": {k: [r["bounds"][k] for r in runs] for k in methods},
        "mean": {},
        "se": {},
        "exceed": {},
        "exceed_upper95": {},
        "train_seconds": [r["train_seconds"] for r in runs],
    }
    if not np.all(eps_runs == eps_runs[0]):
        out["epsilon_theory_runs"] = eps_runs.tolist()
    for k in methods:
        b = np.array(out["bounds"][k])
        out["mean"][k] = float(b.mean())
        out["se"][k] = float(b.std(ddof=1) / math.sqrt(b.size)) if b.size > 1 else 0.0
        n_ex = int(np.sum(b > eps_runs))
        out["exceed"][k] = n_ex / n_repeats
        out["exceed_upper95"][k] = mc_upper(n_ex, n_repeats)
    return out
