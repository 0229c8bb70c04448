"""The book's API reference (book/api*.md, rendered by book/_ext/dpapi.py): coverage and docstring escaping.

Coverage: every module the reference must cover has a ``dpapi-module`` section; every dputils module with an
``__all__`` is either covered or excluded here with a reason; every public name of a covered module has its
row in the module's summary table, and the row points at an entry (``autoclass``/``autofunction``/...) that
one covered module writes, once. The expected names come from the modules themselves (``__all__``, or the
classes and functions whose ``__module__`` is the module), not from the extension's own AST reading.

Escaping: plain-text maths in docstrings is rendered with docutils before and after the hook: the raw text
warns (so the check can fail), the escaped text renders with no message and shows the characters as written,
and real reStructuredText (roles, inline literals, literal blocks) comes through unchanged.

The book build itself (``jupyter-book build . -W --all``) and the browser check are not run here (minutes).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PAGES = sorted(BOOK.glob("api*.md"))

# What the reference must cover (issue 27, item 4), independent of what the pages happen to list.
REQUIRED_MODULES = {
    "dputils",
    "dputils.mechanisms",
    "dputils.curves",
    "dputils.book.results",
    "dputils.accountants",
    "dputils.accountants.base",
    "dputils.accountants.pld",
    "dputils.accountants.rdp",
    "dputils.accountants.gdp",
    "dputils.accountants.spa",
    "dputils.accountants.edgeworth",
    "dputils.accountants.registry",
    "dputils.calibration",
    "dputils.interop",
    "dputils.interop.dp_accounting",
    "dputils.interop.opacus",
    "dputils.audit",
    "dputils.audit.methods",
    "dputils.training",
    "dputils.book.sweep",
    "dputils.matrix",
    "dputils.shuffling",
    "dputils.data",
    "dputils.errors",
    "dputils.optional",
}

# Modules with an ``__all__`` that the reference leaves out, and why. A new module with an ``__all__`` fails
# test_every_module_with_all_is_covered_or_excluded until it is given a section or a line here.
EXCLUDED = {
    "dputils.book.atlas": "tooling: the atlas command (python -m dputils.book.atlas)",
    "dputils.baselines": "tooling: peer baselines for the benchmarks chapter",
    "dputils.book.benchmarks": "tooling: the benchmark runner",
    "dputils.book.booksources": "tooling: the book folder of a wheel install",
    "dputils.book.recordings": "tooling: provenance of recorded results the chapters read",
    "dputils.cli.parse": "tooling: the command line's argument parser",
    "dputils.cli.runs": "tooling: the command-line options and builds of the matrix and shuffling accountants",
    "dputils.cli.schedule": "tooling: the command line's epochs / batch size / data-set size (q and steps)",
    "dputils.numerics": "internals: numerical helpers",
    "dputils.parallel": "tooling: parallel map for sweeps and Monte Carlo",
    "dputils.progress": "tooling: the progress helper",
    "dputils.truth": "internals: high-precision reference values for the tests and chapters",
}

# Public functions and classes without a docstring today (dputils/ is outside this test's file scope; the
# entry shows the signature alone; a dataclass without one counts as missing: its __doc__ is its generated
# signature). The set may shrink, never grow.
KNOWN_MISSING_DOCSTRINGS = {"dputils.accountants.registry.AccountantSpec"}


def _load_extension():
    spec = importlib.util.spec_from_file_location("dpapi_under_test", BOOK / "_ext" / "dpapi.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


dpapi = _load_extension()


def documented_modules() -> list[str]:
    found = []
    for page in PAGES:
        found += re.findall(r"^\.\. dpapi-module:: (\S+)\s*$", page.read_text(), flags=re.M)
    return found


def expected_names(modname: str) -> list[str]:
    mod = importlib.import_module(modname)
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    return [
        n
        for n, v in vars(mod).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(inspect.unwrap(v)))
        and v.__module__ == modname
    ]


def _rst(modname: str, cache: dict = {}) -> list[str]:  # noqa: B006  (a per-session cache)
    if modname not in cache:
        cache[modname] = dpapi.module_rst(modname)
    return cache[modname]


def summary_rows(modname: str) -> list[str]:
    """The full names the module's autosummary table links to."""
    rst = _rst(modname)
    if ".. autosummary::" not in rst:
        return []
    start = rst.index(".. autosummary::")
    rows = []
    for line in rst[start + 1 :]:
        if line.startswith("   ~"):
            rel = line.strip()[1:]
            rows.append(rel if rel.startswith("dputils") else f"{modname}.{rel}")
        elif line and not line.startswith("   "):
            break
    return rows


def entries() -> list[str]:
    """The full names of every autodoc entry written by every covered module."""
    out = []
    for modname in documented_modules():
        out += [
            m.group(1)
            for line in _rst(modname)
            if (m := re.match(r"\.\. auto(?:class|function|data|exception):: (\S+)$", line))
        ]
    return out


def test_pages_exist_and_are_in_the_toc():
    assert PAGES, "no book/api*.md"
    toc = (ROOT / "_toc.yml").read_text()
    for page in PAGES:
        assert f"file: book/{page.stem}\n" in toc, f"{page.name} is not in _toc.yml"
    assert toc.index("caption: Reference") < toc.index("caption: Back matter")


def test_required_modules_are_covered_once():
    mods = documented_modules()
    assert not REQUIRED_MODULES - set(mods), f"modules without a section: {sorted(REQUIRED_MODULES - set(mods))}"
    dup = sorted({m for m in mods if mods.count(m) > 1})
    assert not dup, f"modules with two sections: {dup}"
    assert "dputils.__main__" not in mods and "dputils.audit.__main__" not in mods


def _modules_with_all() -> list[str]:
    found = []
    for path in sorted((ROOT / "dputils").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
        if parts[-1] == "__main__":
            continue
        tree = ast.parse(path.read_text())
        if any(
            isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
            for node in tree.body
        ):
            found.append(".".join(parts))
    return found


def test_every_module_with_all_is_covered_or_excluded():
    mods = set(documented_modules())
    missing = [m for m in _modules_with_all() if m not in mods and m not in EXCLUDED]
    assert not missing, f"modules with an __all__ neither in the API reference nor in EXCLUDED: {missing}"
    stale = sorted(set(EXCLUDED) & mods)
    assert not stale, f"covered modules still listed in EXCLUDED: {stale}"


@pytest.mark.parametrize("modname", sorted(set(documented_modules())))
def test_every_public_name_has_a_row_and_an_entry(modname):
    mod = importlib.import_module(modname)
    rows = summary_rows(modname)
    described = set(entries())
    covered = {dpapi_mod for dpapi_mod in documented_modules()}
    text = "\n".join(_rst(modname))
    names = expected_names(modname)
    assert len(rows) == len(names), f"{modname}: {len(names)} public names, {len(rows)} summary rows"
    for name, target in zip(names, rows):
        obj = getattr(mod, name)
        if inspect.ismodule(obj):
            assert target == obj.__name__ and obj.__name__ in covered, f"{modname}.{name}: module {target}"
            continue
        # the row shows the name, or an alias line says which entry it is
        assert target.endswith("." + name) or f"``{name}`` is :py:obj:`~{target}`" in text, (modname, name, target)
        assert target in described, f"{modname}.{name} links to {target}, which no section describes"
        # the entry is the same object
        home, _, attr = target.rpartition(".")
        assert getattr(importlib.import_module(home), attr) is obj, f"{modname}.{name} -> {target}: another object"


def test_each_object_is_described_once():
    names = entries()
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"described twice (duplicate object description): {dup}"


def test_public_functions_and_classes_have_docstrings():
    missing = set()
    for full in entries():
        home, _, attr = full.rpartition(".")
        obj = getattr(importlib.import_module(home), attr)
        doc = (obj.__doc__ or "").strip() if inspect.isclass(obj) or inspect.isfunction(inspect.unwrap(obj)) else "x"
        if not doc or (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}(")):  # a dataclass's own signature
            missing.add(full)
    new = sorted(missing - KNOWN_MISSING_DOCSTRINGS)
    assert not new, f"public names without a docstring: {new}"


def test_reexports_link_to_the_defining_module():
    rows = dict(zip(expected_names("dputils"), summary_rows("dputils")))
    assert rows["PLDAccountant"] == "dputils.accountants.pld.PLDAccountant"
    assert rows["GaussianMechanism"] == "dputils.mechanisms.GaussianMechanism"
    assert rows["gdp_epsilon"] == "dputils.curves.gdp_epsilon"
    assert rows["DPValueError"] == "dputils.errors.DPValueError"
    audit = dict(zip(expected_names("dputils.audit"), summary_rows("dputils.audit")))
    assert audit["CanaryScoreAuditor"] == "dputils.audit.methods.CanaryScoreAuditor"
    assert audit["METHODS"] == "dputils.audit.methods.METHODS"  # data follows the import, not __module__
    assert audit["audit_all"] == "dputils.audit.methods.audit_all"  # re-exported from methods, where it lives


# ---------------------------------------------------------------------------------------------------------
# Escaping: rendered with docutils, before and after.
# ---------------------------------------------------------------------------------------------------------


def render(text: str):
    """(doctree, messages of level >= WARNING) of text as reStructuredText."""
    from docutils.core import publish_doctree

    stream = io.StringIO()
    tree = publish_doctree(text, settings_overrides={"report_level": 2, "halt_level": 5, "warning_stream": stream})
    return tree, stream.getvalue()


def rendered(lines: list[str]):
    return render("\n".join(dpapi.escape_lines(lines)))


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("The norm |x| of x.", "The norm |x| of x."),
        ("Bound |a - b|_1 <= 2 and |x|.", "Bound |a - b|_1 <= 2 and |x|."),
        ("Pass **kwargs on, a * b and 2*x.", "Pass **kwargs on, a * b and 2*x."),
        ("Quote `x and move on.", "Quote `x and move on."),
        ("The noise_ multiplier.", "The noise_ multiplier."),
    ],
)
def test_plain_maths_warns_raw_and_renders_escaped(raw, shown):
    _, raw_messages = render(raw)
    assert raw_messages, f"the raw text should warn in docutils: {raw!r}"
    tree, messages = rendered([raw])
    assert not messages, messages
    assert tree.astext() == shown


def test_real_markup_is_left_alone():
    lines = [
        "Uses :math:`|x|^2`, ``|y|`` and :func:`dputils.curves.gdp_delta` with `x`_ and *emph*.",
        "",
        ".. math:: |x| = 1",
        "",
        "Example::",
        "",
        "    a = |b| * c",
        "",
        ">>> f(|x|)",
    ]
    assert dpapi.escape_lines(lines) == lines


def test_rendered_markup_keeps_its_nodes():
    from docutils import nodes

    tree, messages = rendered(["Compare ``|y|`` with |y| and *emphasis*, then **strong**."])
    assert not messages
    assert [n.astext() for n in tree.findall(nodes.literal)] == ["|y|"]
    assert [n.astext() for n in tree.findall(nodes.emphasis)] == ["emphasis"]
    assert [n.astext() for n in tree.findall(nodes.strong)] == ["strong"]


def test_myst_cite_role_becomes_rst():
    assert dpapi.escape_lines(["See {cite}`gauss_audit` and {cite:p}`a,b`."]) == [
        "See :cite:`gauss_audit` and :cite:p:`a,b`."
    ]


def test_tex_like_scripts_become_inline_literals():
    from docutils import nodes

    tree, messages = rendered(["delta = sum_j m_j (1 - e^{eps - l_j})_+ over windows, and s_{t - 1}."])
    assert not messages
    assert [n.astext() for n in tree.findall(nodes.literal)] == ["e^{eps - l_j})_+", "s_{t - 1}"]
    assert tree.astext().endswith("and s_{t - 1}.")


def test_inline_literal_with_inner_space_is_repaired():
    _, raw = render("value: ``x -> `` the bound")
    assert raw
    tree, messages = rendered(["value: ``x -> `` the bound"])
    assert not messages and tree.astext() == "value: x -> the bound"


def test_column_layout_after_colon_becomes_a_literal_block():
    from docutils import nodes

    lines = [
        "One round:",
        "",
        "    S_b  = block of a permutation   (shuffle)",
        "         | a uniform subset          (subsample)",
        "",
        "Then |x|.",
    ]
    _, raw = render("\n".join(lines))
    assert raw  # unexpected indentation
    tree, messages = rendered(lines)
    assert not messages
    blocks = list(tree.findall(nodes.literal_block))
    assert len(blocks) == 1 and "| a uniform subset" in blocks[0].astext()
    assert tree.astext().startswith("One round:")


def test_plain_indented_prose_is_not_made_literal():
    lines = ["Note:", "", "    an indented remark in one column.", ""]
    assert dpapi.escape_lines(lines) == lines


def test_multiline_display_math_breaks_at_depth_zero_only():
    two = dpapi.break_display_math([".. math:: a = b", "          + c,", ""])
    assert two == [".. math::", "", "   & a = b \\\\", "   &\\qquad {}+ c,", ""]
    inside_braces = [".. math:: \\frac{a", "          + b}{n}", ""]
    assert dpapi.break_display_math(inside_braces) == inside_braces
    one = [".. math:: a = b", ""]
    assert dpapi.break_display_math(one) == one


# ---------------------------------------------------------------------------------------------------------
# The kinds stated on the accountants page are the kinds the accountants return.
# ---------------------------------------------------------------------------------------------------------


def test_accountant_kinds_on_the_page():
    from dputils.accountants.edgeworth import EdgeworthAccountant
    from dputils.accountants.gdp import GDPAccountant
    from dputils.accountants.pld import PLDAccountant
    from dputils.accountants.rdp import RDPAccountant
    from dputils.accountants.spa import SaddlePointAccountant
    from dputils.mechanisms import GaussianMechanism, SubsampledGaussianMechanism

    page = (BOOK / "api_accountants.md").read_text()
    row = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `([\w-]+)`[^|]*\{py:class\}`~[\w.]+`\) \| (.*) \|$", page, flags=re.M)
    }
    gauss, sub = GaussianMechanism(2.0), SubsampledGaussianMechanism(1.0, 0.01)
    kinds = {
        "pld": {PLDAccountant().compose(sub, 100).get_epsilon(1e-5).kind},
        "rdp": {RDPAccountant().compose(sub, 100).get_epsilon(1e-5).kind},
        "gdp": {
            GDPAccountant().compose(gauss, 100).get_epsilon(1e-5).kind,
            GDPAccountant().compose(sub, 100).get_epsilon(1e-5).kind,
        },
        "spa": {SaddlePointAccountant().compose(gauss, 100).get_epsilon(1e-5).kind},
        "edgeworth": {
            EdgeworthAccountant().compose(gauss, 100).get_epsilon(1e-5).kind,
            EdgeworthAccountant().compose(sub, 100).get_epsilon(1e-5).kind,
        },
    }
    assert kinds["gdp"] == {"exact", "approximation"} and kinds["edgeworth"] == {"estimate"}
    for name, got in kinds.items():
        stated = set(re.findall(r'`"([a-z-]+)"`', row[name]))
        assert stated == got, f"{name}: page says {sorted(stated)}, the accountant returns {sorted(got)}"
