"""The one accountant table (:mod:`dputils.accountants.registry`) and every consumer that lists accountants.

* the registry's behaviour: the decorator, options per name, duplicates and unknown names refused with
  dputils errors, bad metadata refused, hooks and class merged in either order;
* the metadata says what the accountants do: ``events`` equals the common mechanisms each class composes
  (asked of the class, ``supports``), ``answer`` matches the results it returns;
* every consumer lists exactly the registered accountants that qualify, where "qualify" is decided here by the
  accountants' behaviour (``supports``), not by the metadata the consumers read: the command line, the
  dp_accounting and Opacus adapters, the certified fallback, the atlas, the benchmark script, the plot colours.
  A new accountant registered with a wrong ``events`` or forgotten by a consumer fails here.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from dputils.accountants import registry
from dputils.accountants.base import Accountant
from dputils.errors import DPValueError
from dputils.mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    SubsampledGaussianMechanism,
    SubsampledLaplaceMechanism,
)

ROOT = Path(__file__).resolve().parents[1]
COMMON = {
    "gaussian": GaussianMechanism(1.0),
    "subsampled-gaussian": SubsampledGaussianMechanism(1.0, 0.1),
    "laplace": LaplaceMechanism(1.0),
    "subsampled-laplace": SubsampledLaplaceMechanism(1.0, 0.1),
}
META = dict(label="T", answer="upper-bound", events={"gaussian"}, cost="cheap", help="test accountant")


def _supports(reg: registry.Registration, names) -> set[str]:
    return {n for n in names if reg.create().supports(COMMON[n])}


def _registered() -> list[registry.Registration]:
    return [registry.get(n) for n in registry.names()]


@pytest.fixture
def scratch():
    """Names registered by a test are removed afterwards."""
    added: list[str] = []
    yield added
    for n in added:
        registry._REGISTRY.pop(n, None)


class _Toy(Accountant):
    name = "_toy"

    def __init__(self, direction: str = "both", flavour: str = "plain") -> None:
        super().__init__(direction)
        self.flavour = flavour

    def get_epsilon(self, delta):  # pragma: no cover - never queried here
        raise NotImplementedError

    def get_delta(self, epsilon):  # pragma: no cover
        raise NotImplementedError


# ------------------------------------------------------------------------------------------- the table
def test_decorator_registers_the_class_under_each_name(scratch):
    scratch += ["_t-a", "_t-b"]
    deco = registry.register("_t-a", **META)
    out = registry.register("_t-b", **dict(META, options={"flavour": "spicy"}, variant_of="_t-a"))(deco(_Toy))
    assert out is _Toy  # the class comes back unchanged
    a, b = registry.get("_t-a"), registry.get("_t-b")
    assert a.cls is _Toy and b.cls is _Toy and b.variant_of == "_t-a"
    assert registry.create("_t-a").flavour == "plain"
    assert registry.create("_t-b").flavour == "spicy"
    assert registry.create("_t-b", flavour="mild").flavour == "mild"  # a caller's option wins
    assert {"_t-a", "_t-b"} <= set(registry.names())
    assert registry.names() == sorted(registry.names())
    with pytest.raises(TypeError):
        b.options["flavour"] = "x"  # read-only


def test_duplicates_are_refused(scratch):
    scratch += ["_t-dup"]
    registry.register("_t-dup", **META)(_Toy)
    with pytest.raises(registry.DuplicateAccountantError, match="_t-dup.*registered already"):
        registry.register("_t-dup", **META)(_Toy)
    assert issubclass(registry.DuplicateAccountantError, DPValueError)
    with pytest.raises(registry.DuplicateAccountantError, match="registered already"):
        registry.register("pld", **META)(_Toy)  # a real name cannot be taken over
    assert registry.get("pld").cls.__name__ == "PLDAccountant"


def test_hooks_and_class_merge_in_either_order(scratch):
    scratch += ["_t-h1", "_t-h2"]

    def build(args):
        return None

    registry.register("_t-h1", help="hooks first", build=build, uses_mechanism=False)
    registry.register("_t-h1", **META)(_Toy)
    registry.register("_t-h2", **META)(_Toy)
    registry.register("_t-h2", help="ignored: the class's help stays", build=build, uses_mechanism=False)
    for n in ("_t-h1", "_t-h2"):
        r = registry.get(n)
        assert r.cls is _Toy and r.build is build and r.uses_mechanism is False and r.help == "test accountant"
        assert r.common_flags == {"direction", "sigma"}
    with pytest.raises(registry.DuplicateAccountantError, match="hooks"):
        registry.register("_t-h1", help="again", build=build)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(registry.UnknownAccountantError) as info:
        registry.get("no-such-accountant")
    msg = str(info.value)
    assert msg.startswith("unknown accountant 'no-such-accountant'; known: ")
    assert all(n in msg for n in registry.names())
    assert isinstance(info.value, DPValueError) and isinstance(info.value, KeyError)
    with pytest.raises(registry.UnknownAccountantError):
        registry.create("no-such-accountant")
    with pytest.raises(registry.UnknownAccountantError):
        registry.get(["not", "hashable"])


@pytest.mark.parametrize(
    "bad,word",
    [
        (dict(META, answer="certain"), "answer"),
        (dict(META, cost="free"), "cost"),
        (dict(META, label=""), "label"),
        ({k: v for k, v in META.items() if k != "events"}, "events"),
        (dict(META, events="gaussian"), "events"),
        (dict(META, colour="#000000"), "unknown metadata"),
    ],
)
def test_bad_metadata_is_refused(bad, word):
    with pytest.raises(DPValueError, match=word):
        registry.register("_t-bad", **bad)
    assert "_t-bad" not in registry._REGISTRY


def test_bad_name_and_target_are_refused():
    for name in ("", " pld", None):
        with pytest.raises(DPValueError, match="name"):
            registry.register(name, **META)
    with pytest.raises(DPValueError, match="decorates a class"):
        registry.register("_t-fn", **META)(lambda: None)
    assert "_t-fn" not in registry._REGISTRY


def test_select_filters_and_orders():
    regs = registry.select()
    assert [r.name for r in regs] == [r.name for r in sorted(regs, key=lambda r: (r.rank, r.name))]
    assert all(r.cls is not None for r in regs)
    sg = registry.select(events={"subsampled-gaussian"}, variants=False)
    assert all("subsampled-gaussian" in r.events and r.variant_of is None for r in sg)
    assert {r.name for r in registry.select(answers="estimate")} >= {"spa", "edgeworth"}


def test_registering_is_light():
    """Loading every registration imports neither torch nor matplotlib."""
    code = (
        "import sys, dputils.accountants.registry as reg; reg.select(); "
        "print([m for m in sys.modules if m.split('.')[0] in ('torch', 'matplotlib')])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# ------------------------------------------------------------------------------ metadata vs behaviour
@pytest.mark.parametrize("name", [r.name for r in registry.select() if r.events & set(COMMON)])
def test_events_are_what_the_class_composes(name):
    reg = registry.get(name)
    assert reg.events == _supports(reg, COMMON), "events must be exactly the common mechanisms it composes"


def test_shuffling_events_are_composed():
    from dputils.shuffling import ShuffledBatchClipping, ShuffledIndividualClipping, SubsampledBatchClipping

    runs = {
        "shuffled-batch-clipping": ShuffledBatchClipping(1.0, 2, 1, 20, 5),
        "shuffled-individual-clipping": ShuffledIndividualClipping(1.0, 2, 1, 20, 5),
        "subsampled-batch-clipping": SubsampledBatchClipping(1.0, 2, 1, 20, 5),
    }
    regs = [r for r in registry.select() if r.cls.__module__.startswith("dputils.shuffling")]
    assert {r.name for r in regs} == {n for n in registry.names() if n.startswith(("shuffle-", "subsample-"))}
    for r in regs:
        assert r.events and r.events <= set(runs), r.name
        assert all(r.create().supports(runs[e]) for e in r.events), r.name


@pytest.mark.parametrize("name", [r.name for r in registry.select() if r.common_events])
def test_answer_matches_the_results(name):
    reg = registry.get(name)
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in (GaussianMechanism(2.0), SubsampledGaussianMechanism(1.0, 0.01)):
            acc = reg.create(discretization=1e-3) if name == "pld" else reg.create()
            results.append(acc.compose(m, 100).get_epsilon(1e-5))
    for r in results:
        if reg.answer == "bracket":
            assert r.lower is not None and r.upper is not None and r.lower <= r.value <= r.upper
        elif reg.answer == "upper-bound":
            assert r.kind == "upper-bound" and r.upper == r.value and r.lower is None
        elif reg.answer == "estimate":
            assert r.kind in ("estimate", "approximation")
        else:
            assert r.kind in ("approximation", "exact")
    if reg.answer == "approximation":
        assert "approximation" in {r.kind for r in results}
    if reg.answer == "estimate":
        assert "estimate" in {r.kind for r in results}


# ---------------------------------------------------------------------------------------- consumers
def _qualifying(events, variants=False) -> list[str]:
    """Registered names whose class composes every mechanism of ``events`` (asked of the class)."""
    out = []
    for r in sorted(_registered(), key=lambda r: (r.rank, r.name)):
        if r.cls is None or (r.variant_of is not None and not variants):
            continue
        if not set(r.events) & set(COMMON):  # training runs, balls-in-bins: no common mechanism
            continue
        if _supports(r, events) == set(events):
            out.append(r.name)
    return out


def test_cli_lists_and_builds_every_registered_accountant():
    from dputils import cli

    p = subprocess.run([sys.executable, "-m", "dputils", "accountants"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert [line.split()[0] for line in p.stdout.splitlines()] == registry.names()
    for name in registry.names():
        front = cli.front(name)
        assert front.name == name and callable(front.build)
    assert set(cli.ACCOUNTANT_OPTIONS) <= {r.name for r in registry.select() if r.common_events}
    for name, options in cli.ACCOUNTANT_OPTIONS.items():
        params = inspect.signature(registry.get(name).cls).parameters
        assert set(options) <= set(params), f"{name}: options that the class does not take"


def test_cli_builds_from_the_class():
    """The command line's build of a common-mechanism accountant is the registered class with the options."""
    from dputils import cli

    ns = argparse.Namespace(
        mechanism="subsampled-gaussian", sigma=1.0, q=0.1, scale=None, steps=7, direction="add", discretization=1e-3
    )
    acc = cli.front("pld").build(ns)
    assert type(acc) is registry.get("pld").cls and acc.h == 1e-3 and acc.direction == "add"
    assert acc.ledger == [(SubsampledGaussianMechanism(1.0, 0.1), 7)]
    ns.direction = "both"
    acc = cli.front("rdp-classic").build(ns)
    assert acc.conversion == "classic"
    with pytest.raises(DPValueError, match="accountant: unknown accountant 'nope'"):
        cli.front("nope")


def test_dp_accounting_adapter_offers_the_qualifying_accountants():
    pytest.importorskip("dp_accounting")
    from dputils.interop import dp_accounting as dpa

    assert list(dpa.NAMES) == _qualifying(COMMON)
    assert dpa.EVENTS == set(COMMON)
    with pytest.warns(DeprecationWarning, match="NAMES"):
        assert dpa.ACCOUNTANTS == dpa.NAMES
    for name in dpa.NAMES:
        assert type(dpa.make_accountant(name).inner) is registry.get(name).cls
    with pytest.raises(DPValueError, match="name"):
        dpa.make_accountant("gdp")  # composes no Laplace mechanism


def test_certified_fallback_covers_the_estimates():
    pytest.importorskip("dp_accounting")
    from dputils.interop import _certified

    estimates = [r.name for r in registry.select() if r.common_events and r.answer == "estimate"]
    assert list(_certified.WITH_FALLBACK) == estimates
    assert {"spa", "edgeworth"} <= set(estimates)


def test_opacus_names_are_derived_from_the_registry():
    pytest.importorskip("opacus")
    from opacus.accountants import create_accountant

    from dputils.interop import opacus as dpo

    assert list(dpo.MECHANISMS) == [f"dputils-{n}" for n in _qualifying(("gaussian", "subsampled-gaussian"))]
    for key, cls in dpo.MECHANISMS.items():
        assert cls.MECHANISM == key and key == f"dputils-{cls.NAME}"
        assert type(create_accountant(key)) is cls
        assert type(cls()._make()) is registry.get(cls.NAME).cls
    assert set(dpo._CLASSES) <= set(registry.names())


def test_atlas_columns_are_the_qualifying_accountants_and_the_peers():
    from dputils.book import atlas

    assert atlas.ACCOUNTANTS == (*_qualifying(("subsampled-gaussian",)), *atlas.PEERS)
    assert atlas.ACCOUNTANTS[:5] == ("pld", "rdp", "gdp", "spa", "edgeworth")  # the committed CSV's order
    assert set(atlas.TOLERANCES) == set(atlas.ACCOUNTANTS)
    assert not set(atlas.PEERS) & set(registry.names())
    assert set(atlas._RUNNERS) == set(atlas.PEERS)


def test_benchmark_script_measures_every_qualifying_accountant():
    spec = importlib.util.spec_from_file_location("_bench_accountants", ROOT / "benchmarks" / "bench_accountants.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    methods = bench._registry_methods(1.0, 0.01)
    assert list(methods) == _qualifying(("subsampled-gaussian",), variants=True)
    assert set(bench.ANSWERS) == set(registry.ANSWERS)
    acc = methods["pld"]["build"](10)
    assert type(acc) is registry.get("pld").cls and acc.h == 1e-4  # the command line's default grid


def test_plot_colours_come_from_the_registry():
    pytest.importorskip("matplotlib")
    from dputils.book import plotting

    for r in _registered():
        if r.color is not None:
            assert plotting.color(r.name) == r.color
    # a registered name may keep a colour in METHOD_COLORS only while its registration has no class and colour
    stale = [n for n in plotting.METHOD_COLORS if n in registry.names() and registry.get(n).color is not None]
    assert not stale, f"colours now in the registry: remove {stale} from plotting.METHOD_COLORS"
    assert plotting.ACCOUNTANT_COLORS["pld"] == registry.get("pld").color
    assert plotting.color("no-such-method") is None


def test_the_matrix_argument_reader_has_its_own_name_and_the_old_ones_warn():
    import dputils.matrix as matrix
    from dputils import cli
    from dputils.cli import runs

    assert runs.balls_in_bins_from_args is not cli.mechanism_from_args
    # the argument readers moved to the command line; dputils.matrix still gives them, with a warning naming
    # the new place
    for old, new in (
        ("balls_in_bins_from_args", "balls_in_bins_from_args"),
        ("mechanism_from_args", "balls_in_bins_from_args"),
        ("strategy_from_args", "strategy_from_args"),
        ("add_strategy_arguments", "add_strategy_arguments"),
    ):
        with pytest.warns(DeprecationWarning, match=f"dputils.cli.runs.{new}"):
            assert getattr(matrix, old) is getattr(runs, new)
    with pytest.raises(AttributeError):
        matrix.no_such_name  # noqa: B018


def test_argument_parsing_lives_in_the_cli():
    """No library module imports argparse (issue 26): the options of the matrix and shuffling accountants are
    added and read by :mod:`dputils.cli.runs`, which registers them when the command line is imported."""
    import ast

    root = Path(__file__).resolve().parents[1] / "dputils"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if rel[0] in ("cli", "book") or rel[-1] == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(m == "argparse" or m.startswith("argparse.") for m in mods):
                offenders.append(str(path.relative_to(root)))
    assert not offenders, f"library modules importing argparse: {offenders}"
    code = (
        "import sys, dputils.matrix, dputils.shuffling\n"
        "from dputils.accountants import registry\n"
        "registry.names()\n"
        "assert 'dputils.cli' not in sys.modules and 'dputils.cli.runs' not in sys.modules\n"
        "from dputils import cli\n"
        "for n in ('matrix-renyi', 'matrix-condcomp', 'shuffle-batch-clip', 'subsample-batch-clip-exact'):\n"
        "    assert registry.get(n).build is not None and registry.get(n).add_arguments is not None, n\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
