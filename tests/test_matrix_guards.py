"""Resource guards, bounded searches and input contracts of the matrix and shuffling accountants (issue 11).

Every request this machine cannot serve (memory, work) must be refused up front with DPValueError (exit 2
on the command line) naming the parameter, quickly; every search must end (NumericalError, exit 3, when it
cannot converge). The sparse DP state space is checked against the dense construction it replaced and
against brute-force enumeration (independent references).
"""

from __future__ import annotations

import argparse
import math
import time
import tracemalloc
from itertools import product

import numpy as np
import pytest

from dputils import cli, shuffling
from dputils.errors import DPValueError, NumericalError
from dputils.matrix import build_strategy, log_partition_bruteforce, log_partition_dp, renyi, truncate_gram
from dputils.matrix.allocation import (
    MatrixMonteCarloAccountant,
    MatrixRenyiAccountant,
    _largest_fitting,
    calibrate_sigma,
)
from dputils.matrix.condcomp import ConditionalCompositionAccountant
from dputils.matrix.condcomp import calibrate as condcomp_calibrate
from dputils.matrix.mechanism import BallsInBinsMatrixMechanism


# The accountants take only method options and compose a mechanism; most tests account one run.
def _acc_renyi(strategy, sigma, **options):
    return MatrixRenyiAccountant(**options).compose(BallsInBinsMatrixMechanism(strategy, sigma))


def _acc_mc(strategy, sigma, **options):
    return MatrixMonteCarloAccountant(**options).compose(BallsInBinsMatrixMechanism(strategy, sigma))


def _acc_cc(strategy, sigma, **options):
    return ConditionalCompositionAccountant(**options).compose(BallsInBinsMatrixMechanism(strategy, sigma))


#: A refusal must come before any allocation or long loop: well under this many seconds (generous for CI).
FAST = 10.0


def _refused(fn, match, exc=DPValueError):
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match):
        fn()
    assert time.perf_counter() - t0 < FAST


def _cli(argv, capsys):
    t0 = time.perf_counter()
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert time.perf_counter() - t0 < FAST
    return rc, err


# ------------------------------------------------------------------------------------ sparse state space
def _dense_state_space(window, alpha_max):
    """The construction the sparse one replaced: a dense (alpha_max+1)^(L+1) grid and lookup table."""
    L, A = window, alpha_max
    shape = (A + 1,) * (L + 1)
    grid = np.indices(shape).reshape(L + 1, -1).T
    states = grid[grid[:, 1:].sum(axis=1) <= grid[:, 0]]
    index = np.full(shape, -1, dtype=np.int64)
    index[tuple(states.T)] = np.arange(states.shape[0])
    srcs, ts, dests = [], [], []
    for t in range(A + 1):
        ok = states[:, 0] + t <= A
        st = states[ok]
        coords = [st[:, 0] + t] + [st[:, j] for j in range(2, L + 1)] + ([np.full(st.shape[0], t)] if L > 0 else [])
        srcs.append(np.nonzero(ok)[0])
        ts.append(np.full(st.shape[0], t))
        dests.append(index[tuple(coords)])
    src, tval, dest = np.concatenate(srcs), np.concatenate(ts), np.concatenate(dests)
    order = np.argsort(dest, kind="stable")
    src, tval, dest = src[order], tval[order], dest[order]
    starts = np.flatnonzero(np.r_[True, dest[1:] != dest[:-1]])
    return states, src, tval, starts


@pytest.mark.parametrize("window,alpha_max", [(0, 7), (1, 9), (2, 6), (3, 5), (4, 4), (5, 3), (7, 2)])
def test_sparse_state_space_identical_to_dense(window, alpha_max):
    renyi._state_space.cache_clear()
    sparse = renyi._state_space(window, alpha_max)
    for got, ref in zip(sparse, _dense_state_space(window, alpha_max)):
        np.testing.assert_array_equal(got, ref)
    assert sparse[0].shape[0] == math.comb(alpha_max + window + 1, window + 1)


@pytest.mark.parametrize("n_parts,total", [(1, 5), (2, 4), (3, 3), (4, 6)])
def test_compositions_match_filtered_product(n_parts, total):
    ref = [c for c in product(range(total + 1), repeat=n_parts) if sum(c) <= total]
    assert renyi._compositions(n_parts, total).tolist() == [list(c) for c in ref]


def test_sparse_state_space_allocates_only_the_states():
    # bands 8 up to order 12: the dense grid had 13^8 cells (8 columns of int64: ~52 GB); the states are 203490
    renyi._state_space.cache_clear()
    tracemalloc.start()
    try:
        states, src, _, _ = renyi._state_space(7, 12)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert states.shape[0] == math.comb(20, 8)
    assert peak < 200e6


def _wide_cases():
    rng = np.random.default_rng(11)
    for b, p, alpha in [(8, 5, 4), (10, 6, 4), (9, 6, 4), (9, 8, 3), (10, 8, 4), (7, 7, 5)]:
        X = rng.random((b, 5))
        yield b, p, alpha, X @ X.T, float(rng.uniform(0.7, 1.4))


@pytest.mark.parametrize("b,p,alpha,G,sigma", list(_wide_cases()))
def test_wide_bands_dp_matches_bruteforce(b, p, alpha, G, sigma):
    Gp, _ = truncate_gram(G, p)  # dense random G: wrap-around prefixes for 2p - 2 <= b
    dp = log_partition_dp(Gp, sigma, alpha, p)[alpha]
    assert dp == pytest.approx(log_partition_bruteforce(Gp, sigma, alpha), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "case", [("bsr", 1, 30, 4, 14), ("bsr", 3, 12, 4, 8), ("bsr", 2, 10, 5, 6), ("bsr", 1, 20, 8, 8)]
)
def test_dp_memory_estimate_covers_the_peak(case):
    name, k, b, p, amax = case
    Gp, _ = truncate_gram(build_strategy(name, k, b, p).gram, p)
    wrap = renyi.needs_wrap(Gp, p) and b >= 2 * p - 2
    backends = ["numpy", "vectorised"] + (["numba"] if renyi.dp_backend("auto") == "numba" else [])
    for be in backends:
        log_partition_dp(Gp, 1.0, 3, p, backend=be)  # warm up (compiled kernels load once)
        renyi._state_space.cache_clear()
        renyi._group_layout.cache_clear()
        tracemalloc.start()
        try:
            log_partition_dp(Gp, 1.0, amax, p, backend=be)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= renyi.dp_memory(p, b, amax, wrap) + 1e6, be


def test_log_partition_dp_refuses_over_the_memory_limit(monkeypatch):
    monkeypatch.setenv("DPUTILS_MAX_MEMORY_GB", "0.001")
    Gp, _ = truncate_gram(build_strategy("bsr", 1, 20, 6).gram, 6)
    _refused(lambda: log_partition_dp(Gp, 1.0, 12, 6), "alpha_max")


def test_largest_fitting_order_matches_a_linear_scan():
    for p, b, wrap, budget in [(4, 100, False, 2e8), (3, 12, True, 1e6), (6, 50, False, 1e7), (8, 100, True, 2e8)]:
        ref = 0
        for a in range(128, 1, -1):
            if renyi.dp_work(p, b, a, wrap) <= budget:
                ref = a
                break
        assert _largest_fitting(p, b, wrap, 128, budget, math.inf) == ref


def test_wide_bands_accountant_is_exact_when_tau_is_zero():
    # b = 20 single epoch, BSR with 8 bands: no pair at cyclic distance >= 8 is correlated, tau = 0, so the
    # remove divergence is Eq. 5 exactly: compare with the brute-force partition sum
    s = build_strategy("bsr", 1, 20, 8)
    assert truncate_gram(s.gram, 8)[1] == 0
    acc = _acc_renyi(s, 1.3, orders=range(2, 5), effective_bands=8)
    r = acc.rdp()
    for i, a in enumerate(range(2, 5)):
        logS = log_partition_bruteforce(s.gram, 1.3, a)
        ref = (logS + math.lgamma(a + 1) - a * math.log(20)) / (a - 1)
        assert r["remove"][i] == pytest.approx(ref, rel=1e-9)
        assert r["bands_used"][i] == 8


# ------------------------------------------------------------------------------------ resource refusals (API)
def test_strategy_too_large_refused():
    _refused(lambda: build_strategy("identity", 1, 200_000), "batches")
    _refused(lambda: build_strategy("bsr", 1000, 200, 4), "batches")  # N = epochs x batches


def test_renyi_max_order_refused():
    s = build_strategy("identity", 1, 100)
    _refused(lambda: _acc_renyi(s, 1.0, orders=range(2, 100_000_001)), "max-order")
    _refused(lambda: _acc_renyi(s, 1.0, orders=range(2, 100_001)), "max-order")


def test_renyi_effective_bands_work_refused(monkeypatch):
    monkeypatch.setenv("DPUTILS_MAX_WORK", "1e8")
    _refused(lambda: _acc_renyi(build_strategy("bsr", 1, 50, 4), 1.0, effective_bands=50), "effective-bands")


def test_mc_samples_refused():
    s = build_strategy("identity", 1, 100)
    _refused(lambda: _acc_mc(s, 1.0, samples=10**12), "samples")
    _refused(lambda: _acc_mc(s, 1.0, seed=-1), "seed")


def test_condcomp_refused():
    # dense C (BISR) over b = 1000 slots: ~1000 tail bounds per step at each of the 1000 steps
    _refused(lambda: _acc_cc(build_strategy("bisr", 1, 1000, 4), 1.0, progress=False), "batches")
    acc = _acc_cc(build_strategy("identity", 1, 10), 1.0, delta_e=1e-6, discretization=1e-9, progress=False)
    _refused(lambda: acc.get_delta(1.0), "discretization")


def test_shuffle_laws_refused():
    _refused(lambda: shuffling.ic_shuffle_law(1000, 10, 200), "group_size")
    _refused(lambda: shuffling.bc_shuffle_law(10**6, 1, 10**5), "group_size")
    _refused(lambda: shuffling.bc_shuffle_law(100, 10, 2).compose(10**7), "epochs")
    _refused(lambda: shuffling.subsample_bc_law(1000, 10, 10**9, 2), "epochs")
    _refused(lambda: shuffling.monte_carlo_c2_law(10**6, 1, 1, 1000, 10**6, np.random.default_rng(0)), "n_draws")


# ------------------------------------------------------------------------------------ bounded searches
@pytest.mark.parametrize("tol", [0.0, -1.0, float("nan"), 1e-300, float("inf"), 0.9])
def test_calibrate_refuses_bad_tolerance(tol):
    s = build_strategy("identity", 1, 10)
    _refused(lambda: calibrate_sigma(lambda x: _acc_renyi(s, x), 1.0, 1e-5, rel_tol=tol), "rel_tol")
    _refused(lambda: condcomp_calibrate(s, 1.0, 1e-5, rel_tol=tol), "rel_tol")


def test_calibrate_raises_when_it_cannot_converge():
    s = build_strategy("identity", 1, 10)
    _refused(
        lambda: calibrate_sigma(lambda x: _acc_renyi(s, x), 1.0, 1e-5, rel_tol=1e-12, max_evaluations=5),
        "no convergence",
        NumericalError,
    )

    class _Nan:
        def __init__(self, sigma):
            pass

        def get_delta(self, eps):
            return float("nan")

    _refused(lambda: calibrate_sigma(_Nan, 1.0, 1e-5), "nan", NumericalError)
    _refused(lambda: calibrate_sigma(lambda x: _acc_renyi(s, x), 1.0, 1e-5, sigma_start=1e300), "sigma_start")


def test_shuffle_inversion_bounded():
    _refused(lambda: shuffling._invert_decreasing(lambda e: float("nan"), 1e-5, "test"), "nan", NumericalError)
    # no sign change in the bracket: scipy's ValueError becomes a NumericalError naming the search
    _refused(lambda: shuffling._brentq(lambda x: 1.0, 0.0, 1.0, "test search"), "test search", NumericalError)
    # rejection sampling of g = N distinct positions essentially never succeeds: it must stop
    _refused(
        lambda: shuffling.monte_carlo_c2_law(40, 1, 1, 40, 1, np.random.default_rng(0)), "rejection", NumericalError
    )


# ------------------------------------------------------------------------------------ input contracts
def test_group_size_zero_refused():
    ns = argparse.Namespace(sigma=1.0, epochs=1, group_size=0, dataset_size=100, batch_size=10)
    from dputils.accountants import registry

    for name in ("shuffle-batch-clip", "shuffle-batch-clip-exact", "subsample-batch-clip-exact"):
        with pytest.raises(DPValueError, match="group-size"):
            registry.get(name).build(ns)


def test_common_flags_declared():
    from dputils.accountants import registry

    assert registry.get("matrix-renyi").common_flags == {"mechanism", "sigma"}
    assert registry.get("matrix-renyi-tight").common_flags == {"mechanism", "sigma"}
    assert registry.get("matrix-condcomp").common_flags == {"mechanism", "sigma"}
    assert registry.get("matrix-mc").common_flags == {"mechanism", "sigma", "direction"}
    for name in (
        "shuffle-batch-clip",
        "shuffle-batch-clip-exact",
        "shuffle-batch-clip-as-printed",
        "shuffle-individual-clip-exact",
        "subsample-batch-clip-exact",
    ):
        assert registry.get(name).common_flags == {"sigma"}


_MATRIX = ["--sigma", "1", "--delta", "1e-5"]
_SHUFFLE = ["--sigma", "1", "--epochs", "1", "--delta", "1e-5"]


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["epsilon", "--accountant", "matrix-renyi", "--batches", "200000"] + _MATRIX, "batches"),
        (["epsilon", "--accountant", "matrix-condcomp", "--batches", "200000"] + _MATRIX, "batches"),
        (["epsilon", "--accountant", "matrix-renyi", "--max-order", "100000000"] + _MATRIX, "max-order"),
        (["epsilon", "--accountant", "matrix-renyi-tight", "--max-order", "100000000"] + _MATRIX, "max-order"),
        (
            ["epsilon", "--accountant", "matrix-mc", "--samples", "1000000000000", "--batches", "100"] + _MATRIX,
            "samples",
        ),
        (
            [
                "calibrate",
                "--accountant",
                "matrix-renyi",
                "--max-order",
                "100000000",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
            ],
            "max-order",
        ),
        (["epsilon", "--accountant", "matrix-renyi", "--steps", "3"] + _MATRIX, "steps"),
        (["epsilon", "--accountant", "matrix-renyi", "--direction", "add"] + _MATRIX, "direction"),
        (["epsilon", "--accountant", "matrix-condcomp", "--max-order", "5"] + _MATRIX, "max-order"),
        (["epsilon", "--accountant", "matrix-mc", "--effective-bands", "5"] + _MATRIX, "effective-bands"),
        (
            ["epsilon", "--accountant", "matrix-renyi", "--matrix", "identity", "--bands", "4", "--batches", "100"]
            + _MATRIX,
            "bands",
        ),
        (
            ["epsilon", "--accountant", "matrix-renyi", "--matrix", "bsr", "--bands", "0", "--batches", "100"]
            + _MATRIX,
            "bands",
        ),
        (["epsilon", "--accountant", "matrix-renyi", "--epochs", "0"] + _MATRIX, "epochs"),
        (["epsilon", "--accountant", "matrix-mc", "--seed", "-1"] + _MATRIX, "seed"),
        (["epsilon", "--accountant", "shuffle-batch-clip", "--group-size", "0"] + _SHUFFLE, "group-size"),
        (
            [
                "epsilon",
                "--accountant",
                "shuffle-batch-clip-exact",
                "--group-size",
                "0",
                "--dataset-size",
                "100",
                "--batch-size",
                "10",
            ]
            + _SHUFFLE,
            "group-size",
        ),
        (["epsilon", "--accountant", "shuffle-batch-clip", "--mechanism", "gaussian"] + _SHUFFLE, "mechanism"),
        (["epsilon", "--accountant", "shuffle-batch-clip", "--dataset-size", "100"] + _SHUFFLE, "dataset-size"),
        (
            [
                "epsilon",
                "--accountant",
                "shuffle-individual-clip-exact",
                "--group-size",
                "200",
                "--dataset-size",
                "1000",
                "--batch-size",
                "10",
            ]
            + _SHUFFLE,
            "group_size",
        ),
    ],
)
def test_cli_refuses(argv, fragment, capsys):
    rc, err = _cli(argv, capsys)
    assert rc == 2
    assert fragment in err
    assert len(err.strip().splitlines()) >= 1 and "Traceback" not in err
