"""The contract every registered accountant keeps, checked for each name in ``registry.names()``.

Each accountant is built through the command line's build path (parser, unused-option check, common
validation, ``spec.build``) on cheap settings from :data:`CHEAP`, and then, with hypothesis:

* ``lower <= value <= upper`` wherever both bounds exist (for epsilon and for delta);
* delta is non-increasing in epsilon, epsilon non-increasing in delta, epsilon non-increasing in sigma
  and non-decreasing in steps (where ``--steps`` applies);
* ``--direction both`` is the worse of add and remove (where ``--direction`` applies);
* bad delta / epsilon / sigma / steps are refused with :class:`DPValueError`;
* the command line prints strict JSON (no NaN / Infinity) for the accountant.

A newly registered accountant without an entry in :data:`CHEAP` fails
:func:`test_every_registered_accountant_has_cheap_settings`, so it cannot be skipped silently.
"""

from __future__ import annotations

import functools
import json
import math
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dputils
from dputils import cli
from dputils.accountants import edgeworth, pld, rdp, registry
from dputils.accountants.base import Accountant
from dputils.errors import DPValueError

_SG = ["--mechanism", "subsampled-gaussian", "--q", "0.1"]
_MATRIX = ["--matrix", "bsr", "--bands", "2", "--epochs", "1", "--batches", "4"]
_SHUFFLE = ["--epochs", "2", "--dataset-size", "20", "--batch-size", "5"]

#: Per accountant: its own cheap options (besides --sigma/--steps/--direction), the delta range and the
#: number of hypothesis examples (fewer for the slow ones). Each call takes well under a second.
CHEAP: dict[str, dict] = {
    "pld": dict(args=_SG + ["--discretization", "1e-3"], examples=6),
    "rdp": dict(args=_SG, examples=10),
    "rdp-classic": dict(args=_SG, examples=10),
    "gdp": dict(args=["--mechanism", "gaussian"], examples=10),
    "spa": dict(args=_SG, examples=6),
    "edgeworth": dict(args=_SG, examples=6),
    "matrix-renyi": dict(args=_MATRIX + ["--max-order", "32"], examples=6),
    "matrix-renyi-tight": dict(args=_MATRIX + ["--max-order", "32"], examples=4),
    "matrix-condcomp": dict(args=_MATRIX + ["--discretization", "1e-2"], examples=3, delta_min=1e-4),
    "matrix-mc": dict(args=_MATRIX + ["--samples", "20000"], examples=6, delta_min=1e-2),
    "shuffle-batch-clip": dict(args=["--epochs", "2"], examples=10),
    "shuffle-batch-clip-exact": dict(args=_SHUFFLE, examples=10),
    "shuffle-batch-clip-as-printed": dict(args=_SHUFFLE, examples=10),
    "shuffle-individual-clip-exact": dict(args=_SHUFFLE, examples=10),
    "subsample-batch-clip-exact": dict(args=_SHUFFLE, examples=10),
    "allocation-pld": dict(args=["--batches", "20", "--grid", "0.2"], examples=4),
}
NAMES = registry.names()
SIGMAS = (0.8, 1.0, 1.4)
STEPS = (2, 5, 12)
REL = 1e-9  # slack of the monotonicity checks (floating point only)


def _flags(name: str) -> frozenset[str]:
    return registry.get(name).common_flags


def _argv(name: str, sigma: float = 1.0, steps: int | None = None, direction: str | None = None) -> list[str]:
    argv = ["--accountant", name, "--sigma", repr(sigma), *CHEAP[name]["args"]]
    if steps is not None:
        argv += ["--steps", str(steps)]
    if direction is not None:
        argv += ["--direction", direction]
    return argv


def _build_argv(argv: list[str]):
    """The command line's build path, without printing: parse, refuse unused options, validate, build."""
    spec, args = cli._spec_and_args("epsilon", [*argv, "--delta", "0.5"])
    cli._refuse_unused(args, spec, argv)
    cli._validate_common(args, spec)
    return spec.build(args)


@functools.cache
def build(name: str, sigma: float = 1.0, steps: int | None = None, direction: str | None = None):
    if steps is None and "steps" in _flags(name):
        steps = 5
    return _build_argv(_argv(name, sigma, steps, direction))


@functools.cache
def query(name: str, what: str, x: float, sigma: float = 1.0, steps: int | None = None, direction: str | None = None):
    acc = build(name, sigma, steps, direction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # spa flags its degraded regime with a warning
        return acc.get_epsilon(x) if what == "epsilon" else acc.get_delta(x)


def _bracketed(r) -> None:
    assert not math.isnan(r.value) and r.value >= 0
    if r.lower is not None:
        assert r.lower <= r.value * (1 + REL) + 1e-300, (r.lower, r.value)
    if r.upper is not None:
        assert r.value <= r.upper * (1 + REL) + 1e-300, (r.value, r.upper)


def _deltas(name: str):
    lo = math.log10(CHEAP[name].get("delta_min", 1e-8))
    return st.floats(lo, -0.5).map(lambda e: float(f"{10**e:.3g}"))


_EPS = st.floats(0.0, 6.0).map(lambda e: float(f"{e:.3g}"))


def _settings(name: str):
    return settings(
        max_examples=CHEAP[name]["examples"], deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )


def _geq(a: float, b: float) -> bool:
    """a >= b up to floating point."""
    return a >= b - REL * max(abs(a), abs(b)) - 1e-300


def test_every_registered_accountant_has_cheap_settings():
    assert set(NAMES) == set(CHEAP), (
        f"registered without an entry in CHEAP: {sorted(set(NAMES) - set(CHEAP))}; "
        f"stale entries: {sorted(set(CHEAP) - set(NAMES))}"
    )


@pytest.mark.parametrize("name", NAMES)
def test_bracket_and_monotone_in_epsilon_and_delta(name):
    @_settings(name)
    @given(d1=_deltas(name), d2=_deltas(name), e1=_EPS, e2=_EPS)
    def check(d1, d2, e1, e2):
        d1, d2 = sorted((d1, d2))
        e1, e2 = sorted((e1, e2))
        r_d1, r_d2 = query(name, "epsilon", d1), query(name, "epsilon", d2)
        r_e1, r_e2 = query(name, "delta", e1), query(name, "delta", e2)
        for r in (r_d1, r_d2, r_e1, r_e2):
            _bracketed(r)
        assert r_d1.quantity == "epsilon" and r_e1.quantity == "delta"
        assert _geq(r_d1.value, r_d2.value), (d1, r_d1.value, d2, r_d2.value)  # epsilon non-increasing in delta
        assert _geq(r_e1.value, r_e2.value), (e1, r_e1.value, e2, r_e2.value)  # delta non-increasing in epsilon
        assert r_e1.value <= 1.0

    check()


@pytest.mark.parametrize("name", NAMES)
def test_monotone_in_sigma_and_steps(name):
    @_settings(name)
    @given(s=st.sampled_from(list(zip(SIGMAS, SIGMAS[1:]))), delta=_deltas(name), steps=st.sampled_from(STEPS[:-1]))
    def check(s, delta, steps):
        lo, hi = s
        small, large = query(name, "epsilon", delta, lo), query(name, "epsilon", delta, hi)
        assert _geq(small.value, large.value), (lo, small.value, hi, large.value)  # more noise, less epsilon
        if "steps" in _flags(name):
            more = STEPS[STEPS.index(steps) + 1]
            a, b = query(name, "epsilon", delta, 1.0, steps), query(name, "epsilon", delta, 1.0, more)
            assert _geq(b.value, a.value), (steps, a.value, more, b.value)  # more steps, more epsilon

    check()


@pytest.mark.parametrize("name", NAMES)
def test_both_directions_is_the_worse_of_add_and_remove(name):
    if "direction" not in _flags(name):
        with pytest.raises(DPValueError, match="--direction"):
            _build_argv(_argv(name, direction="add"))
        return
    delta = max(1e-5, CHEAP[name].get("delta_min", 1e-8))
    both = query(name, "epsilon", delta, direction="both").value
    add = query(name, "epsilon", delta, direction="add").value
    remove = query(name, "epsilon", delta, direction="remove").value
    assert _geq(both, max(add, remove)) and _geq(max(add, remove), both), (both, add, remove)


@pytest.mark.parametrize("name", NAMES)
def test_bad_delta_epsilon_sigma_steps_are_refused(name):
    acc = build(name)
    for bad in (0.0, 1.0, -1e-5, 1.5, math.nan, math.inf, True):
        with pytest.raises(DPValueError, match="delta"):
            acc.get_epsilon(bad)
    for bad in (-1.0, math.nan, math.inf, -math.inf, True):
        with pytest.raises(DPValueError, match="epsilon"):
            acc.get_delta(bad)
    for bad in ("0", "-1", "nan", "inf"):
        argv = _argv(name)
        argv[argv.index("--sigma") + 1] = bad
        with pytest.raises(DPValueError, match="sigma"):
            _build_argv(argv)
    for bad in ("0", "2.5", "-3", "nan"):
        with pytest.raises(DPValueError, match="steps"):
            _build_argv(_argv(name, steps=bad))


@pytest.mark.parametrize("name", NAMES)
def test_cli_prints_strict_json(name, capsys):
    def refuse(const):
        raise ValueError(f"not strict JSON: {const}")

    delta = max(1e-5, CHEAP[name].get("delta_min", 1e-8))
    for cmd, extra in (("epsilon", ["--delta", repr(delta)]), ("delta", ["--epsilon", "1.0"])):
        steps = 5 if "steps" in _flags(name) else None  # --steps has no default (issue 35)
        rc = cli.main([cmd, *_argv(name, steps=steps), *extra])
        out, err = capsys.readouterr()
        assert rc == 0, err
        obj = json.loads(out, parse_constant=refuse)
        assert obj["accountant"] == name and isinstance(obj[cmd], float)


# --- the API's input contract ------------------------------------------------------------------------------
def test_registry_common_flags_default_and_refuse_unknown_names():
    def b(args):
        return None

    try:
        registry.register("_test-mech", help="t", build=b)
        registry.register("_test-plain", help="t", build=b, uses_mechanism=False)
        registry.register("_test-none", help="t", build=b, uses_mechanism=False, noise_parameter=None)
        registry.register("_test-given", help="t", build=b, uses_mechanism=False, common_flags={"sigma", "steps"})
        assert registry.get("_test-mech").common_flags == registry.COMMON_FLAGS
        assert registry.get("_test-plain").common_flags == frozenset({"direction", "sigma"})
        assert registry.get("_test-none").common_flags == frozenset({"direction"})
        assert registry.get("_test-given").common_flags == frozenset({"sigma", "steps"})
        with pytest.raises(ValueError, match="epochs"):
            registry.register("_test-bad", help="t", build=b, common_flags={"sigma", "epochs"})
    finally:
        for n in ("_test-mech", "_test-plain", "_test-none", "_test-given", "_test-bad"):
            registry._REGISTRY.pop(n, None)


@pytest.mark.parametrize(
    "call,word",
    [
        (lambda: dputils.GaussianMechanism(sigma=True), "sigma"),
        (lambda: dputils.SubsampledGaussianMechanism(1.0, q=True), "q"),
        (lambda: dputils.LaplaceMechanism(scale=1 + 0j), "scale"),
        (lambda: dputils.make_mechanism("gaussian", sigma=1.0, q=0.01), "q is not a parameter"),
        (lambda: dputils.make_mechanism("laplace", scale=1.0, sigma=1.0), "sigma is not a parameter"),
        (lambda: rdp.RDPAccountant(orders=[math.nan]), "orders"),
        (lambda: rdp.RDPAccountant(orders=[2, -math.inf]), "orders"),
        (lambda: rdp.RDPAccountant(orders=[0.5, 2]), "orders"),
        (lambda: pld.PLDAccountant(tail=0.0), "tail"),
        (lambda: pld.PLDAccountant(window_tail=0.5), "window_tail"),
        (lambda: pld.PLDAccountant(tail=math.nan), "tail"),
        (lambda: edgeworth.EdgeworthAccountant(order=True), "order"),
    ],
)
def test_api_bad_input_raises_dpvalueerror_naming_it(call, word):
    with pytest.raises(DPValueError, match=word):
        call()


@pytest.mark.parametrize(
    "cls",
    [
        "pld.PLDAccountant",
        "rdp.RDPAccountant",
        "gdp.GDPAccountant",
        "spa.SaddlePointAccountant",
        "edgeworth.EdgeworthAccountant",
    ],
)
def test_nothing_composed_is_a_dpvalueerror_saying_what_to_do(cls):
    import importlib

    mod, name = cls.split(".")
    acc = getattr(importlib.import_module(f"dputils.accountants.{mod}"), name)()
    for q in (lambda: acc.get_epsilon(1e-5), lambda: acc.get_delta(1.0)):
        with pytest.raises(DPValueError, match="nothing composed yet; call compose"):
            q()


class _NotAMechanism:
    """An object no accountant can compose."""

    def __repr__(self) -> str:
        return "NotAMechanism()"


@pytest.mark.parametrize("name", NAMES)
def test_every_registered_accountant_is_one_class_family(name):
    """Issue 14's one family: an Accountant subclass whose ledger holds what it was built from, which it says it
    supports; anything else is refused by supports()/check_supported()/compose() with a DPValueError naming it;
    a fresh accountant of the same class refuses to answer before anything is composed."""
    acc = build(name)
    assert isinstance(acc, Accountant), f"{name}: {type(acc).__name__} does not subclass Accountant"
    assert acc.ledger, f"{name}: the command line built an accountant with an empty ledger"
    for mech, count in acc.ledger:
        assert count >= 1 and acc.supports(mech), (name, mech)
    alien = _NotAMechanism()
    assert not acc.supports(alien)
    with pytest.raises(DPValueError):
        acc.check_supported(alien)
    n = len(acc.ledger)
    with pytest.raises(DPValueError):
        acc.compose(alien)
    assert len(acc.ledger) == n  # a refused compose leaves the ledger as it was
    try:
        fresh = type(acc)()
    except TypeError:  # pragma: no cover - every family member takes options with defaults
        pytest.fail(f"{name}: {type(acc).__name__}() needs arguments; method options must have defaults")
    with pytest.raises(DPValueError, match="nothing composed"):
        fresh.get_epsilon(1e-5)
