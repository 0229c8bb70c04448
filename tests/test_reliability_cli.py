"""Issue 36: the command line's silent wrong numbers, hangs, unsafe loading and unclear messages.

Each test fails on the code before the fix (described in its docstring) and passes after."""

import gzip
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from dputils.accountants import Accountant, PLDAccountant
from dputils.cli import main
from dputils.errors import DPValueError
from dputils.mechanisms import GaussianMechanism


def _cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_error(capsys, *argv, fragment, code=2):
    rc, out, err = _cli(capsys, *argv)
    assert rc == code and out == "", (rc, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert fragment in err, err
    return err


# --- audit reads exactly one column of scores ---------------------------------------------------------------
@pytest.fixture
def tables(tmp_path):
    rng = np.random.default_rng(3)
    i, o = rng.normal(2.0, 1.0, 500), rng.normal(0.0, 1.0, 500)
    for name, s in (("in", i), ("out", o)):
        np.savetxt(tmp_path / f"{name}.csv", np.c_[np.arange(500), s], delimiter=",", fmt=["%d", "%.9f"])
        np.savetxt(tmp_path / f"{name}_comma.txt", np.c_[np.arange(500), s], delimiter=",", fmt=["%d", "%.9f"])
        np.savetxt(tmp_path / f"{name}.txt", s, fmt="%.9f")
        np.save(tmp_path / f"{name}2d.npy", np.c_[np.arange(500), s])
    return tmp_path


def _audit(d, i, o, *extra):
    return ["audit", "--in-scores", str(d / i), "--out-scores", str(d / o), "--method", "steinke", *extra]


def test_index_score_table_is_refused_not_flattened(capsys, tables):
    """Before: the 500 lines of ``index,score`` became 1000 scores and the audit answered (exit 0)."""
    err = _one_line_error(capsys, *_audit(tables, "in.csv", "out.csv"), fragment="in-scores")
    assert "2 columns" in err and "--column" in err
    _one_line_error(capsys, *_audit(tables, "in_comma.txt", "out.txt"), fragment="--column")


def test_column_option_reads_the_named_column(capsys, tables):
    """``--column 2`` of the tables gives the same audit as the one-column files (an independent reading)."""
    rc, out, _ = _cli(capsys, *_audit(tables, "in.csv", "out.csv", "--column", "2"))
    assert rc == 0
    by_column = json.loads(out)
    rc, out, _ = _cli(capsys, *_audit(tables, "in.txt", "out.txt"))
    plain = json.loads(out)
    assert by_column["n_in"] == plain["n_in"] == 500
    assert by_column["epsilon_lower"] == plain["epsilon_lower"]
    rc, out, _ = _cli(capsys, *_audit(tables, "in2d.npy", "out2d.npy", "--column", "2"))
    assert rc == 0 and json.loads(out)["epsilon_lower"] == plain["epsilon_lower"]
    _one_line_error(capsys, *_audit(tables, "in.csv", "out.csv", "--column", "3"), fragment="column")
    _one_line_error(capsys, *_audit(tables, "in.csv", "out.csv", "--column", "0"), fragment="column")


def test_2d_npy_is_refused_without_column(capsys, tables):
    _one_line_error(capsys, *_audit(tables, "in2d.npy", "out2d.npy"), fragment="shape (500, 2)")


def test_one_line_of_numbers_is_refused(capsys, tables):
    (tables / "row.txt").write_text(" ".join(str(x) for x in range(500)) + "\n")
    _one_line_error(capsys, *_audit(tables, "row.txt", "out.txt"), fragment="one line of 500 numbers")


def test_gzip_memory_estimate_uses_the_decompressed_size(capsys, tables, monkeypatch):
    """Before: the estimate used the 58 kB of the gzip file and loaded 3e7 scores (about 0.5 GB of text
    parsing); now the decompressed 60 MB (x16 bytes per byte) is over a 0.5 GiB limit and refused."""
    with gzip.open(tables / "zeros.gz", "wb") as fh:
        fh.write(b"0\n" * (3 * 10**7))
    assert (tables / "zeros.gz").stat().st_size < 200_000
    monkeypatch.setenv("DPUTILS_MAX_MEMORY_GB", "0.5")
    err = _one_line_error(capsys, *_audit(tables, "zeros.gz", "out.txt"), fragment="in-scores")
    assert "decompressed" in err and "DPUTILS_MAX_MEMORY_GB" in err


def test_small_gzip_is_read(capsys, tables):
    with gzip.open(tables / "in.txt.gz", "wt") as fh:
        fh.write((tables / "in.txt").read_text())
    rc, out, _ = _cli(capsys, *_audit(tables, "in.txt.gz", "out.txt"))
    rc2, out2, _ = _cli(capsys, *_audit(tables, "in.txt", "out.txt"))
    assert rc == rc2 == 0 and json.loads(out)["epsilon_lower"] == json.loads(out2)["epsilon_lower"]


# --- loading a state imports nothing it names -----------------------------------------------------------------
def test_state_naming_a_command_line_module_imports_nothing():
    """Before: ``dputils.audit.__main__.X`` imported the module, which ran the audit command line
    (SystemExit(2))."""
    sys.modules.pop("dputils.audit.__main__", None)
    state = PLDAccountant().compose(GaussianMechanism(1.0), 2).state_dict()
    state["accountant"] = "dputils.audit.__main__.X"
    with pytest.raises(DPValueError, match="no class"):
        Accountant.from_state_dict(state)
    assert "dputils.audit.__main__" not in sys.modules
    state = PLDAccountant().compose(GaussianMechanism(1.0), 2).state_dict()
    state["ledger"][0]["mechanism"]["class"] = "dputils.__main__.GaussianMechanism"
    with pytest.raises(DPValueError, match="no class"):
        Accountant.from_state_dict(state)
    assert "dputils.__main__" not in sys.modules


def test_audit_main_module_has_a_main_guard():
    """Importing ``dputils.audit.__main__`` runs nothing (before: SystemExit(2) from the command line)."""
    code = "import dputils.audit.__main__; print('imported')"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "imported", p.stderr


def test_saved_states_still_load():
    acc = PLDAccountant().compose(GaussianMechanism(1.0), 3)
    back = Accountant.from_state_dict(json.loads(json.dumps(acc.state_dict())))
    assert type(back) is PLDAccountant and back.get_epsilon(1e-5).value == acc.get_epsilon(1e-5).value


# --- matrix accountants: bands and up-front work estimates --------------------------------------------------
_MATRIX = ["epsilon", "--accountant", "matrix-renyi-tight", "--matrix", "bsr", "--sigma", "1", "--delta", "1e-5"]


def test_bands_greater_than_batches_are_refused(capsys):
    """Before: ``--bands 20 --batches 10`` was accepted."""
    _one_line_error(capsys, *_MATRIX, "--bands", "20", "--batches", "10", fragment="bands")


def _limited(argv, env_extra, timeout=120):
    env = dict(os.environ, **env_extra)
    return subprocess.run(
        [sys.executable, "-m", "dputils", *argv], capture_output=True, text=True, timeout=timeout, env=env
    )


# --- the book folder: DPBOOK_HOME, HOME and --root that cannot hold one ---------------------------------------
@pytest.fixture
def wheel(tmp_path, monkeypatch):
    """As installed from a wheel: shipped book sources (a fake ``_book`` folder) and no checkout."""
    from dputils.book import booksources

    src = tmp_path / "_book"
    (src / "notebooks").mkdir(parents=True)
    (src / "params").mkdir()
    (src / "params" / "smoke.yml").write_text("{}\n")
    monkeypatch.setattr(booksources, "packaged_sources", lambda: src)
    (tmp_path / "afile").write_text("not a folder\n")
    return tmp_path


def _refused(fn, *fragments):
    with pytest.raises(ValueError) as info:
        fn()
    msg = str(info.value)
    assert "\n" not in msg and all(f in msg for f in fragments), msg
    return msg


def test_dpbook_home_that_is_a_file_or_under_one(wheel, monkeypatch):
    """Before: NotADirectoryError / FileExistsError tracebacks from iterdir or mkdir."""
    from dputils.book import booksources

    monkeypatch.setenv("DPBOOK_HOME", str(wheel / "afile"))
    _refused(lambda: booksources.materialize(booksources.default_home()), "DPBOOK_HOME", "is a file")
    monkeypatch.setenv("DPBOOK_HOME", str(wheel / "afile" / "book"))
    _refused(lambda: booksources.materialize(booksources.default_home()), "DPBOOK_HOME", "which is a file")


def test_read_only_book_folder(wheel, monkeypatch):
    """Before: PermissionError traceback (simulated: this test may run as root, which ignores modes)."""
    from pathlib import Path

    from dputils.book import booksources

    def denied(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setenv("DPBOOK_HOME", str(wheel / "ro" / "book"))
    monkeypatch.setattr(Path, "mkdir", denied)
    _refused(lambda: booksources.materialize(booksources.default_home()), "DPBOOK_HOME", "Permission denied")


def test_unusable_home(wheel, monkeypatch):
    """Before: RuntimeError('Could not determine home directory.') traceback."""
    from pathlib import Path

    from dputils.book import booksources

    def no_home(cls=None):
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("DPBOOK_HOME", raising=False)
    monkeypatch.setattr(Path, "home", classmethod(no_home))
    _refused(booksources.default_home, "HOME", "DPBOOK_HOME")


def test_root_naming_a_file(wheel, capsys, monkeypatch):
    """``dputils run --root FILE``: one line naming root (before: NotADirectoryError traceback)."""
    from dputils.book import run as runner

    _refused(lambda: runner.find_root(wheel / "afile"), "root", "is a file")
    monkeypatch.chdir(wheel)
    rc = main(["run", "--root", str(wheel / "afile"), "--profile", "smoke"])
    out, err = capsys.readouterr()
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "is a file" in err, err


# --- messages: one line naming the parameter ------------------------------------------------------------------
def test_tiny_discretization_names_the_parameter(capsys):
    """Before: 'numerical error: overflow (cannot convert float infinity to integer)', exit 3."""
    argv = ["epsilon", "--accountant", "pld", "--mechanism", "gaussian", "--sigma", "1", "--steps", "1"]
    _one_line_error(capsys, *argv, "--delta", "1e-5", "--discretization", "1e-320", fragment="discretization must be")


def test_work_refusal_tells_the_estimate_from_the_limit(monkeypatch):
    """Before: 'would need about 1e+12 operations, over the limit of 1e+12'."""
    from dputils.resources import check_memory, check_work

    with pytest.raises(DPValueError) as info:
        check_work("bands", 1.0004e12)
    msg = str(info.value)
    assert "about 1.0004e+12 operations" in msg and "limit of 1e+12" in msg
    monkeypatch.setenv("DPUTILS_MAX_MEMORY_GB", "0.5")
    with pytest.raises(DPValueError) as info:
        check_memory("batches", 0.5 * 1024**3 * (1 + 1e-6))
    assert "need 512.001 MiB, over the limit of 512 MiB" in str(info.value)


def test_wide_bands_are_estimated_and_refused_past_the_work_limit():
    """``--bands 20 --batches 100``: the remove DP's 20 tiers cost about 3.4e11 operations (measured: 111 s of
    CPU, 3.6 GB). Before, the plan was estimated at 20 x 2e8 = 4e9 "operations" (DP updates, each costing up to
    p^2 operations), so a limit of 1e11 let it run for minutes; now it is refused up front, naming the bands."""
    argv = [*_MATRIX, "--bands", "20", "--batches", "100"]
    t0 = time.perf_counter()
    p = _limited(argv, {"DPUTILS_MAX_WORK": "1e11"}, timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and "effective-bands" in err and "--bands" in err and "e+11 operations" in err
    assert time.perf_counter() - t0 < 60


def test_remove_plan_estimate_counts_every_tier():
    """The estimate is the sum over the tiers the loop runs (independent count: the tiers' DP updates times
    max(8, p^2) operations each), and the widest tier alone when it covers every order."""
    from dputils.matrix.allocation import DEFAULT_TIER_BUDGET, _largest_fitting, remove_plan_operations
    from dputils.matrix.factorizations import build_strategy, truncate_gram
    from dputils.matrix.renyi import dp_work, needs_wrap
    from dputils.resources import available_memory_bytes

    s = build_strategy("bsr", 1, 30, 3)
    G = s.gram() if callable(s.gram) else s.gram
    mem = available_memory_bytes()
    expected = dp_work(1, 30, 40, False) * 8 + 20.0 * 30 * 30
    for p in (3, 2):
        Gp, _ = truncate_gram(G, p)
        wrap = needs_wrap(Gp, p) and 30 >= 2 * p - 2
        a = _largest_fitting(p, 30, wrap, 40, DEFAULT_TIER_BUDGET, mem)
        if p == 3 and a >= 40:
            expected = dp_work(3, 30, 40, wrap) * 9 + 20.0 * 30 * 30
            break
        expected += dp_work(p, 30, a, wrap) * max(8, p * p) + 20.0 * 30 * 30
    assert remove_plan_operations(G, 30, 40, 3) == pytest.approx(expected, rel=1e-12)


def test_wide_bands_memory_counts_the_cached_tables_of_every_tier():
    """The 20 tiers keep their state tables cached (lru_cache of 16): measured peak 3.6 GB where one tier's
    estimate was 0.76 GB. Before, a 2 GiB limit let it run (each tier fits); now the plan is refused."""
    p = _limited([*_MATRIX, "--bands", "20", "--batches", "100"], {"DPUTILS_MAX_MEMORY_GB": "2"}, timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: effective-bands:") and "cached" in err, err
