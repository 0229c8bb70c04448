"""The command line: the documented example, bad input as one line naming the parameter."""

import json
import subprocess
import sys

import dp_accounting
import pytest

from dputils.cli import main


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_documented_example_within_one_percent_of_dp_accounting(capsys):
    rc, out, _ = run_cli(
        capsys,
        "epsilon",
        "--accountant",
        "pld",
        "--mechanism",
        "subsampled-gaussian",
        "--sigma",
        "1.0",
        "--q",
        "0.01",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
    )
    assert rc == 0
    obj = json.loads(out)
    assert set(obj) >= {"epsilon", "lower", "upper", "accountant", "seconds"}
    a = dp_accounting.pld.PLDAccountant()
    a.compose(dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)), 1000)
    ref = a.get_epsilon(1e-5)
    assert abs(obj["epsilon"] - ref) / ref < 0.01
    assert obj["lower"] <= obj["epsilon"] <= obj["upper"]


@pytest.mark.parametrize("acc", ["pld", "rdp", "rdp-classic", "gdp"])
def test_delta_command(capsys, acc):
    rc, out, _ = run_cli(
        capsys,
        "delta",
        "--accountant",
        acc,
        "--mechanism",
        "gaussian",
        "--sigma",
        "2",
        "--steps",
        "4",
        "--epsilon",
        "1",
    )
    assert rc == 0 and 0 < json.loads(out)["delta"] < 1


def test_calibrate_is_conservative(capsys):
    rc, out, _ = run_cli(
        capsys,
        "calibrate",
        "--accountant",
        "pld",
        "--mechanism",
        "subsampled-gaussian",
        "--q",
        "0.01",
        "--steps",
        "1000",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
    )
    assert rc == 0
    obj = json.loads(out)
    assert obj["epsilon"] <= 2.0
    rc, out, _ = run_cli(
        capsys,
        "epsilon",
        "--accountant",
        "pld",
        "--mechanism",
        "subsampled-gaussian",
        "--sigma",
        str(obj["bracket"][0]),
        "--q",
        "0.01",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
    )
    assert json.loads(out)["epsilon"] > 2.0  # the lower end of the bracket does not meet the target


@pytest.mark.parametrize(
    "args,word",
    [
        (["--sigma", "0"], "sigma"),
        (["--sigma", "-1"], "sigma"),
        (["--sigma", "nan"], "sigma"),
        (["--q", "0"], "q"),
        (["--q", "1.5"], "q"),
        (["--steps", "0"], "steps"),
        (["--steps", "2.5"], "steps"),
        (["--delta", "0"], "delta"),
        (["--delta", "1"], "delta"),
        (["--delta", "inf"], "delta"),
        (["--mechanism", "cauchy"], "mechanism"),
        (["--accountant", "nope"], "accountant"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line(capsys, args, word):
    base = {
        "--accountant": "pld",
        "--mechanism": "subsampled-gaussian",
        "--sigma": "1",
        "--q": "0.01",
        "--steps": "10",
        "--delta": "1e-5",
    }
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    argv = ["epsilon"] + [x for kv in base.items() for x in kv]
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and word in err and "Traceback" not in err


def test_module_entry_point_runs_as_a_subprocess():
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dputils",
            "epsilon",
            "--accountant",
            "rdp",
            "--mechanism",
            "laplace",
            "--scale",
            "-2",
            "--steps",
            "3",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "scale" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "dputils", "accountants"], capture_output=True, text=True)
    assert p.returncode == 0 and "pld" in p.stdout
