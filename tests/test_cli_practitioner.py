"""The command line in a practitioner's terms (issue 35 item 4): no silent default for --steps, epochs /
batch size / data-set size instead of q and T, plain-text --help that a closed pipe does not break."""

import json
import math
import subprocess
import sys

import pytest

from dputils.cli import main
from dputils.cli.schedule import epochs_schedule

_PLD = ["--accountant", "pld", "--mechanism", "subsampled-gaussian", "--sigma", "1.0", "--delta", "1e-5"]
_MNIST = ["--epochs", "15", "--batch-size", "256", "--dataset-size", "60000"]


def _cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_error(capsys, *argv, fragment):
    rc, out, err = _cli(capsys, *argv)
    assert rc == 2 and out == "", (rc, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert fragment in err, err
    return err


def test_missing_steps_is_an_error_not_one_step(capsys):
    # today: epsilon 0.048 for the MNIST setting composed once, exit 0
    err = _one_line_error(capsys, "epsilon", *_PLD, "--q", "0.0042666", fragment="steps")
    assert "--epochs" in err
    _one_line_error(
        capsys, "calibrate", *_PLD[:4], "--q", "0.01", "--epsilon", "1", "--delta", "1e-5", fragment="steps"
    )
    _one_line_error(
        capsys,
        "delta",
        "--accountant",
        "rdp",
        "--mechanism",
        "gaussian",
        "--sigma",
        "2",
        "--epsilon",
        "1",
        fragment="steps",
    )


@pytest.mark.parametrize(
    "E, B, N, q, T",
    [
        ("15", 256, 60000, 256 / 60000, 3516),  # 15 * 60000 / 256 = 3515.625
        ("1", 100, 1000, 0.1, 10),  # whole: not rounded up
        ("0.1", 100, 60000, 100 / 60000, 60),  # 0.1 * 600 = 60 exactly (floating point gives 60.000000000000007)
        ("2.5", 7, 10, 0.7, 4),  # 25 / 7 = 3.57
    ],
)
def test_q_and_T_closed_forms(E, B, N, q, T):
    from fractions import Fraction

    got_q, got_T = epochs_schedule(Fraction(E), B, N)
    assert got_T == T and got_q == q
    assert got_T == math.ceil(Fraction(E) * N / B)


def test_epochs_give_the_same_epsilon_as_steps_and_q(capsys):
    rc, out, _ = _cli(capsys, "epsilon", *_PLD, *_MNIST)
    assert rc == 0
    by_epochs = json.loads(out)
    assert by_epochs["q"] == 256 / 60000 and by_epochs["steps"] == 3516
    assert (by_epochs["epochs"], by_epochs["batch_size"], by_epochs["dataset_size"]) == (15, 256, 60000)
    rc, out, _ = _cli(capsys, "epsilon", *_PLD, "--steps", "3516", "--sampling-rate", repr(256 / 60000))
    assert rc == 0
    by_steps = json.loads(out)
    assert by_steps["epsilon"] == by_epochs["epsilon"] and by_steps["steps"] == 3516
    # and 3515 steps (the floor) gives a smaller epsilon: the ceiling is the one used
    rc, out, _ = _cli(capsys, "epsilon", *_PLD, "--steps", "3515", "--q", repr(256 / 60000))
    assert json.loads(out)["epsilon"] < by_epochs["epsilon"]


def test_calibrate_takes_epochs(capsys):
    base = [
        "calibrate",
        "--accountant",
        "rdp",
        "--mechanism",
        "subsampled-gaussian",
        "--epsilon",
        "3",
        "--delta",
        "1e-5",
    ]
    rc, out, _ = _cli(capsys, *base, *_MNIST)
    assert rc == 0
    a = json.loads(out)
    assert a["q"] == 256 / 60000 and a["steps"] == 3516
    rc, out, _ = _cli(capsys, *base, "--q", repr(256 / 60000), "--steps", "3516")
    assert rc == 0 and json.loads(out)["sigma"] == a["sigma"]


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--steps", "3515"], "disagrees"),
        (["--q", "0.1"], "leave --q out"),
        (["--sampling-rate", "0.0042666"], "leave --q out"),
    ],
)
def test_conflicts_are_one_line_errors(capsys, extra, fragment):
    _one_line_error(capsys, "epsilon", *_PLD, *_MNIST, *extra, fragment=fragment)


def test_agreeing_steps_are_accepted(capsys):
    rc, out, _ = _cli(capsys, "epsilon", *_PLD, *_MNIST, "--steps", "3516")
    assert rc == 0 and json.loads(out)["steps"] == 3516


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--epochs", "15", "--batch-size", "256"], "dataset-size"),
        (["--batch-size", "256", "--dataset-size", "60000"], "epochs"),
        (["--epochs", "15", "--batch-size", "70000", "--dataset-size", "60000"], "batch-size must be at most"),
        (["--epochs", "0", "--batch-size", "256", "--dataset-size", "60000"], "epochs must be > 0"),
        (["--epochs", "nan", "--batch-size", "256", "--dataset-size", "60000"], "not a number"),
    ],
)
def test_partial_or_bad_schedule_is_refused(capsys, argv, fragment):
    _one_line_error(capsys, "epsilon", *_PLD, *argv, fragment=fragment)


def test_batch_size_needs_a_subsampled_mechanism(capsys):
    argv = ["epsilon", "--accountant", "pld", "--mechanism", "gaussian", "--sigma", "1", "--delta", "1e-5", *_MNIST]
    _one_line_error(capsys, *argv, fragment="subsampled-gaussian")


def test_matrix_accountants_take_batch_and_dataset_size(capsys):
    base = [
        "epsilon",
        "--accountant",
        "matrix-renyi",
        "--matrix",
        "bsr",
        "--bands",
        "2",
        "--sigma",
        "1",
        "--delta",
        "1e-5",
        "--max-order",
        "8",
    ]
    rc, out, _ = _cli(capsys, *base, "--epochs", "2", "--batch-size", "100", "--dataset-size", "1000")
    assert rc == 0
    a = json.loads(out)
    assert (a["q"], a["steps"], a["batches"]) == (0.1, 20, 10)
    rc, out, _ = _cli(capsys, *base, "--epochs", "2", "--batches", "10")
    assert rc == 0 and json.loads(out)["epsilon"] == a["epsilon"]
    _one_line_error(capsys, *base, fragment="batches: missing")  # no silent 100 batches
    _one_line_error(capsys, *base, "--batch-size", "256", "--dataset-size", "60000", fragment="--batches 234 or 235")
    _one_line_error(
        capsys, *base, "--batches", "9", "--batch-size", "100", "--dataset-size", "1000", fragment="disagrees"
    )


def test_shuffling_output_states_q_and_steps(capsys):
    argv = [
        "epsilon",
        "--accountant",
        "subsample-batch-clip-exact",
        "--sigma",
        "1",
        "--delta",
        "1e-5",
        "--epochs",
        "2",
        "--batch-size",
        "100",
        "--dataset-size",
        "1000",
    ]
    rc, out, _ = _cli(capsys, *argv)
    assert rc == 0
    a = json.loads(out)
    assert a["q"] == 0.1 and a["steps"] == 20


def test_help_is_plain_text(capsys):
    rc, out, _ = _cli(capsys, "--help")
    assert rc == 0
    for rest in ("``", ":mod:", ":func:", ":class:"):
        assert rest not in out
    assert out.splitlines()[0].startswith("usage: dputils")
    assert "--epochs" in out and "--batch-size" in out


@pytest.mark.parametrize("args", [["--help"], ["accountants"]])
def test_closed_pipe_is_quiet(args):
    # `dputils --help | head -1`: the reader closes the pipe before the writer is done
    p = subprocess.Popen([sys.executable, "-m", "dputils", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # closed before the interpreter has even started: every write meets a broken pipe
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    p.stderr.close()
    assert p.returncode == 0 and "BrokenPipeError" not in err and "Traceback" not in err, err
