"""Bad command lines: each is refused with the right exit status and one line naming the problem.

Exit status 2 is bad input, 3 a computation that cannot give a trustworthy number. Most cases run
in-process through :func:`dputils.cli.main` (no interpreter start-up); a few run as real
``python -m dputils`` processes with a timeout, to check the entry point, that nothing hangs and that
no warning or traceback reaches stderr. Successful commands must print strict JSON (RFC 8259: no
NaN or Infinity).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from dputils.cli import main

_G = ["--accountant", "pld", "--mechanism", "gaussian", "--sigma", "1"]
_SG = ["--accountant", "rdp", "--mechanism", "subsampled-gaussian", "--sigma", "1", "--q", "0.01"]
_CAL = [
    "calibrate",
    "--accountant",
    "rdp",
    "--mechanism",
    "gaussian",
    "--steps",
    "1",
    "--epsilon",
    "1",
    "--delta",
    "1e-5",
]
_MATRIX = [
    "--accountant",
    "matrix-renyi",
    "--matrix",
    "bsr",
    "--bands",
    "2",
    "--epochs",
    "1",
    "--batches",
    "4",
    "--sigma",
    "1",
]


def _strict(text: str):
    def refuse(const):
        raise ValueError(f"not strict JSON: {const}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    """Score files: good ones and every kind of bad one."""
    d = tmp_path_factory.mktemp("scores")
    rng = np.random.default_rng(0)
    np.save(d / "in.npy", rng.normal(1.0, 1.0, 200))
    np.save(d / "out.npy", rng.normal(0.0, 1.0, 200))
    np.save(d / "const.npy", np.full(50, 3.0))
    np.save(d / "complex.npy", np.ones(20) * (1 + 2j))
    np.save(d / "twod.npy", np.ones((4, 5)))
    np.save(d / "strings.npy", np.array(["a", "b", "c"]))
    (d / "adir").mkdir()
    return d


def _audit(d, in_name="in.npy", *extra):
    return ["audit", "--in-scores", str(d / in_name), "--out-scores", str(d / "out.npy"), *extra]


# (argv, expected exit status, fragment of the one-line message)
CASES = [
    # calibrate: tolerances that never end, or end wrongly
    (_CAL + ["--tolerance", "0"], 2, "tolerance must be in [1e-12, 0.5]"),
    (_CAL + ["--tolerance", "-1"], 2, "tolerance must be in [1e-12, 0.5], got -1.0"),
    (_CAL + ["--tolerance", "1e-300"], 2, "tolerance must be in [1e-12, 0.5]"),
    (_CAL + ["--tolerance", "nan"], 2, "tolerance must be finite"),
    (_CAL + ["--tolerance", "0.9"], 2, "tolerance"),
    (_CAL + ["--sigma", "2"], 2, "calibrate searches for sigma"),
    (
        [
            "calibrate",
            "--accountant",
            "rdp",
            "--mechanism",
            "gaussian",
            "--steps",
            "1",
            "--epsilon",
            "1e-6",
            "--delta",
            "1e-5",
        ],
        3,
        "no sigma in [0.001, 10000] meets the target 1e-06",
    ),
    (
        [
            "calibrate",
            "--accountant",
            "rdp",
            "--mechanism",
            "gaussian",
            "--steps",
            "1",
            "--epsilon",
            "1e9",
            "--delta",
            "1e-5",
        ],
        2,
        "epsilon: target 1e+09 is met already",
    ),
    (
        ["calibrate", *_G[:4], "--steps", "1", "--epsilon", "1e6", "--delta", "1e-5"],
        2,
        "epsilon: calibrating to epsilon=1e+06",
    ),
    # negative numbers are values with a real message, not argparse's "expected one argument"
    (["delta", *_G, "--epsilon", "-1e-5"], 2, "epsilon must be >= 0, got -1e-05"),
    (["epsilon", *_G, "--delta", "-1e-5"], 2, "delta must be in (0, 1), got -1e-05"),
    (["epsilon", *_G[:4], "--sigma", "-1e-3", "--delta", "1e-5"], 2, "sigma must be > 0, got -0.001"),
    (["epsilon", *_SG[:6], "--q", "-.5", "--delta", "1e-5"], 2, "q must be in (0, 1], got -0.5"),
    (["epsilon", *_G, "--steps", "-inf", "--delta", "1e-5"], 2, "steps must be finite"),
    (["epsilon", *_G, "--steps", "-3", "--delta", "1e-5"], 2, "steps must be an integer >= 1"),
    # options the accountant or the mechanism does not use
    (
        ["epsilon", *_G, "--q", "0.01", "--steps", "1", "--delta", "1e-5"],
        2,
        "q is not a parameter of mechanism gaussian",
    ),
    (
        ["epsilon", *_G, "--scale", "2", "--steps", "1", "--delta", "1e-5"],
        2,
        "scale is not a parameter of mechanism gaussian",
    ),
    (
        [
            "epsilon",
            "--accountant",
            "rdp",
            "--mechanism",
            "laplace",
            "--scale",
            "1",
            "--sigma",
            "1",
            "--steps",
            "1",
            "--delta",
            "1e-5",
        ],
        2,
        "sigma is not a parameter of mechanism laplace",
    ),
    (
        ["epsilon", *_SG, "--scale", "1", "--steps", "1", "--delta", "1e-5"],
        2,
        "scale is not a parameter of mechanism subsampled",
    ),
    (["epsilon", *_MATRIX, "--steps", "3", "--delta", "1e-5"], 2, "--steps is not used by accountant matrix-renyi"),
    (
        [
            "epsilon",
            "--accountant",
            "shuffle-batch-clip",
            "--mechanism",
            "gaussian",
            "--sigma",
            "1",
            "--epochs",
            "2",
            "--delta",
            "1e-5",
        ],
        2,
        "--mechanism is not used by accountant shuffle-batch-clip",
    ),
    (
        [
            "epsilon",
            "--accountant",
            "shuffle-batch-clip",
            "--sigma",
            "1",
            "--epochs",
            "2",
            "--q",
            "0.1",
            "--delta",
            "1e-5",
        ],
        2,
        "--q is not used by accountant shuffle-batch-clip",
    ),
    (["epsilon", "--accountant", "pld", "--sigma", "1", "--delta", "1e-5"], 2, "mechanism is required"),
    # repeated options
    (["epsilon", *_G, "--sigma", "2", "--delta", "1e-5"], 2, "--sigma given more than once"),
    (["epsilon", *_G, "--delta", "1e-5", "--delta=1e-6"], 2, "--delta given more than once"),
    (["epsilon", *_G, "--accountant", "rdp", "--delta", "1e-5"], 2, "--accountant given more than once"),
    # abbreviations are not guessed
    (["epsilon", *_G, "--del", "1e-5"], 2, "--delta"),
    # up-front resource checks of the matrix and shuffling accountants (fragments: the parameter named)
    (["epsilon", *_MATRIX[:8], "--batches", "200000", "--sigma", "1", "--delta", "1e-5"], 2, "batches"),
    (
        [
            "epsilon",
            "--accountant",
            "matrix-condcomp",
            *_MATRIX[2:8],
            "--batches",
            "200000",
            "--sigma",
            "1",
            "--delta",
            "1e-5",
        ],
        2,
        "batches",
    ),
    (["epsilon", *_MATRIX, "--max-order", "100000000", "--delta", "1e-5"], 2, "max-order"),
    (
        ["epsilon", "--accountant", "matrix-mc", *_MATRIX[2:], "--samples", "1000000000000", "--delta", "1e-5"],
        2,
        "samples",
    ),
    (
        [
            "epsilon",
            "--accountant",
            "shuffle-batch-clip",
            "--sigma",
            "1",
            "--epochs",
            "2",
            "--group-size",
            "0",
            "--delta",
            "1e-5",
        ],
        2,
        "group-size",
    ),
    # other input
    (["epsilon", *_G, "--delta", "1e-5", "--direction", "up"], 2, "direction"),
    (["epsilon", *_G, "--delta", "abc"], 2, "not a number: 'abc'"),
    # issue 24: options named, integers read as integers
    (["epsilon", *_G, "--discretization", "1000", "--delta", "1e-5"], 2, "discretization must be in (0, 1]"),
    (
        ["calibrate", *_G[:4], "--discretization", "1000", "--epsilon", "1", "--delta", "1e-5"],
        2,
        "discretization must be in (0, 1]",
    ),
    (
        ["epsilon", *_G, "--steps", "9007199254740993", "--delta", "1e-5"],
        2,
        "steps must be at most 2^53 = 9007199254740992",
    ),
    (["epsilon", *_G, "--steps", "1e300", "--delta", "1e-5"], 2, "steps must be at most 2^53"),
    (["epsilon", *_G, "--steps", "12x", "--delta", "1e-5"], 2, "not a number: '12x'"),
    (["accountants", "--all"], 2, "accountants takes no options"),
]

AUDIT_CASES = [
    (("const.npy",), 2, "in_scores are constant"),
    (("adir",), 2, "is a directory"),
    (("twod.npy",), 2, "shape (4, 5); scores must be a 1-D array"),
    (("complex.npy",), 2, "in-scores: "),
    (("strings.npy",), 2, "in-scores: "),
    (("missing.npy",), 2, "in-scores: no such file"),
    (("in.npy", "--claimed-epsilon", "nan"), 2, "claimed-epsilon must be finite"),
    (("in.npy", "--claimed-epsilon", "-1"), 2, "claimed-epsilon must be >= 0"),
    (("in.npy", "--seed", "-1"), 2, "seed must be an integer >= 0, got -1"),
    (("in.npy", "--n-bootstrap", "1000000000"), 2, "n_bootstrap: "),
    (("in.npy", "--delta", "-1e-5"), 2, "delta must be in (0, 1), got -1e-05"),
    (("in.npy", "--alpha", "2"), 2, "alpha"),
    (("in.npy", "--seed", "1", "--seed", "2"), 2, "--seed given more than once"),
    (("/dev/zero",), 2, "in-scores: '/dev/zero' is a character device, not a file of scores"),
]


def _check_refused(rc, out, err, code, fragment):
    assert rc == code, (rc, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in err and "expected one argument" not in err


@pytest.mark.parametrize("argv,code,fragment", CASES, ids=[" ".join(c[0])[:70] for c in CASES])
def test_bad_command_line_is_refused_with_one_line(capsys, argv, code, fragment):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    _check_refused(rc, out, err, code, fragment)


@pytest.mark.parametrize("files,code,fragment", AUDIT_CASES, ids=[" ".join(c[0]) for c in AUDIT_CASES])
def test_bad_audit_input_is_refused_with_one_line(capsys, scores, files, code, fragment):
    rc = main(_audit(scores, *files))
    out, err = capsys.readouterr()
    _check_refused(rc, out, err, code, fragment)


def test_steps_are_read_as_integers():
    from dputils.cli import _spec_and_args, _validate_common

    spec, args = _spec_and_args("epsilon", [*_G, "--steps", "9007199254740992", "--delta", "1e-5"])
    _validate_common(args, spec)
    assert args.steps == 2**53 and isinstance(args.steps, int)
    spec, args = _spec_and_args("epsilon", [*_G, "--steps", "1e3", "--delta", "1e-5"])
    _validate_common(args, spec)
    assert args.steps == 1000 and isinstance(args.steps, int)


def test_audit_says_what_a_path_is(capsys, scores, tmp_path):
    import os

    fifo = tmp_path / "scores.fifo"
    os.mkfifo(fifo)
    for path, fragment in (
        ("", "in-scores: the path is empty"),
        (str(fifo), f"in-scores: {str(fifo)!r} is a named pipe (FIFO), not a file of scores"),
    ):
        rc = main(["audit", "--in-scores", path, "--out-scores", str(scores / "out.npy")])
        out, err = capsys.readouterr()
        _check_refused(rc, out, err, 2, fragment)


def test_constant_scores_work_with_the_threshold_auditors(capsys, scores):
    rc = main(_audit(scores, "const.npy", "--method", "steinke"))
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert _strict(out)["epsilon_lower"] >= 0


@pytest.mark.parametrize(
    "argv,key",
    [
        (
            [
                "epsilon",
                "--accountant",
                "edgeworth",
                "--mechanism",
                "gaussian",
                "--sigma",
                "0.1",
                "--steps",
                "1",
                "--delta",
                "1e-5",
            ],
            "epsilon",
        ),  # its certified upper bound is vacuous here: printed as null, not Infinity
        (
            [
                "epsilon",
                "--accountant",
                "rdp",
                "--mechanism",
                "subsampled-gaussian",
                "--sigma",
                "1e-6",
                "--q",
                "0.01",
                "--steps",
                "1",
                "--delta",
                "1e-5",
            ],
            "epsilon",
        ),  # was "math domain error"
        (["delta", *_SG, "--steps", "100", "--epsilon", "1"], "delta"),
        (
            [
                "calibrate",
                "--accountant",
                "rdp",
                "--mechanism",
                "laplace",
                "--steps",
                "3",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
            ],
            "scale",
        ),
        (_CAL + ["--tolerance", "1e-12"], "sigma"),
    ],
)
def test_successful_commands_print_strict_json(capsys, argv, key):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    obj = _strict(out)
    assert isinstance(obj[key], float) and obj[key] >= 0
    if argv[0] == "calibrate":
        assert 1 <= obj["evaluations"] <= 200
        lo, hi = obj["bracket"]
        tol = float(argv[argv.index("--tolerance") + 1]) if "--tolerance" in argv else 1e-3
        assert lo < hi and hi - lo <= tol * hi
        assert obj["epsilon"] <= obj["target_epsilon"]


def test_edgeworth_vacuous_upper_bound_is_null(capsys):
    rc = main(
        [
            "epsilon",
            "--accountant",
            "edgeworth",
            "--mechanism",
            "gaussian",
            "--sigma",
            "0.1",
            "--steps",
            "1",
            "--delta",
            "1e-5",
        ]
    )
    out, _ = capsys.readouterr()
    assert rc == 0
    obj = _strict(out)
    # the default answer carries the PLD's finite certified upper end (issue 35); Edgeworth's own, infinite, is null
    assert obj["fallback"] == "pld" and obj["upper"] is not None and obj["own_bracket"][1] is None


def test_audit_prints_strict_json(capsys, scores):
    rc = main(_audit(scores, "in.npy", "--n-bootstrap", "200", "--claimed-epsilon", "0.1"))
    out, err = capsys.readouterr()
    assert rc == 0, err
    obj = _strict(out)
    assert obj["method"] == "gauss" and obj["violation"] is True and obj["epsilon_lower"] > 0.1


# --- a few real processes: the entry point, no hang, nothing but one line on stderr -------------------------
def _run(argv, timeout=60):
    return subprocess.run([sys.executable, "-m", "dputils", *argv], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    "argv,code,fragment",
    [
        (_CAL + ["--tolerance", "nan"], 2, "tolerance"),
        (["delta", *_G, "--epsilon", "-1e-5"], 2, "epsilon must be >= 0, got -1e-05"),
        (["epsilon", *_G, "--sigma", "2", "--delta", "1e-5"], 2, "--sigma given more than once"),
        (["calibrate", *_G[:4], "--steps", "1", "--epsilon", "1e6", "--delta", "1e-5"], 2, "epsilon"),
        (
            [
                "calibrate",
                "--accountant",
                "rdp",
                "--mechanism",
                "gaussian",
                "--steps",
                "1",
                "--epsilon",
                "1e-6",
                "--delta",
                "1e-5",
            ],
            3,
            "no sigma",
        ),
    ],
)
def test_processes_refuse_quickly_with_one_line(argv, code, fragment):
    p = _run(argv)
    _check_refused(p.returncode, p.stdout, p.stderr, code, fragment)


def test_process_audit_refusals(scores):
    for files, fragment in ((("adir",), "is a directory"), (("in.npy", "--n-bootstrap", "1000000000"), "n_bootstrap")):
        p = _run(_audit(scores, *files))
        _check_refused(p.returncode, p.stdout, p.stderr, 2, fragment)


def test_process_success_prints_strict_json_and_no_warnings():
    # spa in its degraded regime warns, and this subsampled-Gaussian RDP used to emit an IntegrationWarning:
    # the JSON carries the flags, stderr stays empty.
    for argv in (
        [
            "epsilon",
            "--accountant",
            "spa",
            "--mechanism",
            "subsampled-gaussian",
            "--sigma",
            "1",
            "--q",
            "0.1",
            "--steps",
            "10",
            "--delta",
            "1e-5",
        ],
        [
            "epsilon",
            "--accountant",
            "rdp-classic",
            "--mechanism",
            "subsampled-gaussian",
            "--sigma",
            "1e-3",
            "--q",
            "0.5",
            "--steps",
            "1",
            "--delta",
            "1e-5",
        ],
    ):
        p = _run(argv)
        assert p.returncode == 0 and p.stderr == "", p.stderr
        assert _strict(p.stdout)["epsilon"] > 0


# --- hostile input through every interface (issue 24): real processes, each under a timeout and a memory cap ---
#: Address-space cap of each process (bytes): the interpreter with numpy, scipy, papermill and dask needs
#: well under it; the alias bomb, the 3 GB text file or a quadratic audit would exceed it (or the timeout).
MEMORY_CAP = 3 * 1024**3


def _limited(argv, timeout, env=None, pre=""):
    """``python -m dputils ARGV`` (or ``pre`` then :func:`dputils.cli.main`) under ``MEMORY_CAP`` and ``timeout``."""
    import os
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    code = f"import sys\n{pre}\nfrom dputils.cli import main\nsys.exit(main(sys.argv[1:]))"
    full_env = {**os.environ, "TQDM_DISABLE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
        env=full_env,
    )


@pytest.fixture(scope="module")
def silent_port():
    """A port on 127.0.0.1 that accepts connections and never answers (not a Dask scheduler)."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []

    def accept():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()
    for c in held:
        c.close()


def _bomb(levels=9):
    """A YAML grid whose aliases expand to 10^levels values (a billion at 9), in under 1 kB of text."""
    lines = ["grid:", "  x: &l0 [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]"]
    for k in range(1, levels):
        lines.append(f"  y{k}: &l{k} [" + ", ".join([f"*l{k - 1}"] * 10) + "]")
    lines.append(f"  label: [*l{levels - 1}]")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Files for the hostile cases: grids, a repository root per params file, scores."""
    import os

    d = tmp_path_factory.mktemp("hostile")
    (d / "bomb.yml").write_text(_bomb())
    (d / "million.yml").write_text(
        "grid:\n  x: [" + ", ".join(["1.0"] * 1000) + "]\n  n: [" + ", ".join(str(i) for i in range(1000)) + "]\n"
    )
    (d / "one.yml").write_text("grid:\n  x: [1.0]\n")
    nb = "\n".join(
        [
            "---",
            "jupytext:",
            "  text_representation:",
            "    extension: .md",
            "    format_name: myst",
            "kernelspec:",
            "  display_name: Python 3",
            "  language: python",
            "  name: python3",
            "---",
            "",
            "```{code-cell} ipython3",
            ":tags: [parameters]",
            "",
            "steps: int = 3  # a count",
            "scale: float = 1.0  # a number",
            "```",
            "",
            "```{code-cell} ipython3",
            "print(steps * scale)",
            "```",
            "",
        ]
    )
    for name, smoke in (
        ("badyaml", "demo: {steps: [1\n"),
        ("unknown", "demo: {stpes: 3}\n"),
        ("abc", "demo: {steps: 'abc'}\n"),
        ("nan", "demo: {scale: .nan}\n"),
        ("notmap", "demo: 3\n"),
        ("ok", "demo: {}\n"),
    ):
        root = d / name
        (root / "notebooks").mkdir(parents=True)
        (root / "params").mkdir()
        (root / "notebooks" / "demo.md").write_text(nb)
        for prof in ("full", "paper"):
            (root / "params" / f"{prof}.yml").write_text("demo: {}\n")
        (root / "params" / "smoke.yml").write_text(smoke)
    with open(d / "huge.txt", "wb") as fh:  # 3 GB of text, sparse: no disk used, nothing read
        fh.truncate(3 * 10**9)
    rng = np.random.default_rng(0)
    np.save(d / "big_in.npy", rng.normal(1.0, 1.0, 1_500_000))
    np.save(d / "big_out.npy", rng.normal(0.0, 1.0, 1_500_000))
    np.save(d / "out.npy", rng.normal(0.0, 1.0, 100))
    os.mkfifo(d / "scores.fifo")
    return d


_NB = "tests/data/sweep_tiny.md"
_QUICK = "import dputils.book.sweep as s; s.SCHEDULER_TIMEOUT_S = 3"

# (argv with {d} for the hostile folder and {port} for the silent port, exit status, fragment, timeout s,
#  extra environment, code run before main)
HOSTILE = [
    (
        ["sweep", _NB, "--grid", "{d}/one.yml", "--output", "{d}/out", "--scheduler", "tls://127.0.0.1:1"],
        2,
        "--scheduler: cannot reach tls://127.0.0.1:1",
        60,
        None,
        "",
    ),
    (
        ["sweep", _NB, "--grid", "{d}/one.yml", "--output", "{d}/out", "--scheduler", "tcp://127.0.0.1:{port}"],
        2,
        "--scheduler: no answer from tcp://127.0.0.1:{port} within 3 s",
        60,
        None,
        _QUICK,
    ),
    # the bomb's count in closed form: list l_k holds s_k = (10^(k+2) - 1) / 9 values; the file holds l_0..l_8
    # (sum 1,234,567,899), l_8 once more inside label's list (1 + s_8 = 1,111,111,112) and 13 keys and mappings
    (
        ["sweep", _NB, "--grid", "{d}/bomb.yml", "--output", "{d}/out"],
        2,
        "its YAML aliases expand to 2,345,679,024 values, over the limit of 1,000,000",
        60,
        None,
        "",
    ),
    (
        ["sweep", _NB, "--grid", "{d}/million.yml", "--output", "{d}/out"],
        2,
        "1,000,000 points, over the limit of 100,000 points per sweep",
        60,
        None,
        "",
    ),
    (["run", "--root", "{d}/badyaml", "--profile", "smoke"], 2, "smoke.yml: not valid YAML at line", 60, None, ""),
    (
        ["run", "--root", "{d}/ok", "--profile", "smoke", "--profile", "paper"],
        2,
        "--profile given more than once",
        60,
        None,
        "",
    ),
    (
        ["run", "--root", "{d}/unknown", "--profile", "smoke"],
        2,
        "params/smoke.yml: demo: unknown parameter 'stpes'; demo.md declares scale, steps",
        60,
        None,
        "",
    ),
    (
        ["run", "--root", "{d}/abc", "--profile", "smoke"],
        2,
        "steps='abc' is str, but the notebook declares it int",
        60,
        None,
        "",
    ),
    (["run", "--root", "{d}/nan", "--profile", "smoke"], 2, "scale=nan is not finite", 60, None, ""),
    (["run", "--root", "{d}/notmap", "--profile", "smoke"], 2, "demo must map parameter names to values", 60, None, ""),
    (
        ["audit", "--in-scores", "{d}/huge.txt", "--out-scores", "{d}/out.npy"],
        2,
        "in-scores: reading the text file",
        60,
        {"DPUTILS_MAX_MEMORY_GB": "2"},
        "",
    ),
    (
        ["audit", "--in-scores", "{d}/big_in.npy", "--out-scores", "{d}/big_out.npy", "--method", "steinke"],
        2,
        "scores: would need about 2.25e+12 operations",
        60,
        None,
        "",
    ),
    (
        ["audit", "--in-scores", "{d}/big_in.npy", "--out-scores", "{d}/big_out.npy", "--method", "fdp"],
        2,
        "over the limit of 1e+12",
        60,
        None,
        "",
    ),
    (
        ["audit", "--in-scores", "{d}/scores.fifo", "--out-scores", "{d}/out.npy"],
        2,
        "is a named pipe (FIFO)",
        60,
        None,
        "",
    ),
    (["audit", "--in-scores", "", "--out-scores", "{d}/out.npy"], 2, "in-scores: the path is empty", 60, None, ""),
    (
        ["epsilon", *_G, "--discretization", "1000", "--delta", "1e-5"],
        2,
        "discretization must be in (0, 1]",
        60,
        None,
        "",
    ),
    (["epsilon", *_G, "--steps", "9007199254740993", "--delta", "1e-5"], 2, "steps must be at most 2^53", 60, None, ""),
]


@pytest.mark.parametrize("argv,code,fragment,timeout,env,pre", HOSTILE, ids=[" ".join(c[0])[:60] for c in HOSTILE])
def test_hostile_input_is_refused_within_limits(hostile, silent_port, argv, code, fragment, timeout, env, pre):
    fill = {"d": str(hostile), "port": str(silent_port)}
    argv = [a.format(**fill) for a in argv]
    p = _limited(argv, timeout, env, pre)
    _check_refused(p.returncode, p.stdout, p.stderr, code, fragment.format(**fill))
    assert not (hostile / "out").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "mechanism", [_G, ["--accountant", "pld", "--mechanism", "laplace", "--scale", "1", "--steps", "10"]]
)
def test_delta_at_a_huge_epsilon_is_zero(mechanism):
    """The exact delta at epsilon 1e308 is 0; the certified bracket is [0, the counted truncated tail] (eps / h
    overflowed math.ceil and the CLI exited 3 with 'cannot convert float infinity to integer')."""
    p = _limited(["delta", *mechanism, *([] if "--steps" in mechanism else ["--steps", "1"]), "--epsilon", "1e308"], 60)
    assert p.returncode == 0, p.stderr
    obj = _strict(p.stdout)
    assert obj["lower"] == 0.0 and 0.0 <= obj["delta"] <= obj["upper"] <= 1e-15
