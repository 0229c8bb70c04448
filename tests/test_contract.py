"""Contracts between notebooks, profiles, the table of contents and the environment (no kernel needed)."""

from pathlib import Path

import jupytext
import papermill as pm
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.md"))
PROFILES = {
    name: yaml.safe_load((ROOT / "params" / f"{name}.yml").read_text()) or {} for name in ("smoke", "full", "paper")
}


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/*.md is empty"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_parameters_cell_and_kernel(path):
    nb = jupytext.read(path)
    tagged = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: expected exactly one cell tagged parameters, found {len(tagged)}"
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for line in tagged[0].source.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            assert ":" in line.split("=")[0] and "#" in line, f"{path.name}: parameter not annotated/commented: {line}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_outputs_in_sources(path):
    nb = jupytext.read(path)
    for c in nb.cells:
        if c.cell_type == "code":
            assert not c.get("outputs"), f"{path.name} carries outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_profiles_only_use_declared_parameters_and_full_equals_defaults(path, tmp_path):
    nb = jupytext.read(path)
    ipynb = tmp_path / f"{path.stem}.ipynb"
    jupytext.write(nb, ipynb)
    declared = pm.inspect_notebook(str(ipynb))
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    names = [
        ln.split(":")[0].strip() for ln in cell.source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    unseen = [n for n in names if n not in declared]
    assert not unseen, f"{path.name}: papermill cannot parse the parameter line(s) of {unseen} (one '=' per line)"
    assert path.stem in PROFILES["smoke"], f"params/smoke.yml has no block for {path.stem}"
    for prof, data in PROFILES.items():
        for key in data.get(path.stem) or {}:
            assert key in declared, f"params/{prof}.yml sets {key!r}, which {path.name} does not declare"
    for key, value in (PROFILES["full"].get(path.stem) or {}).items():
        default = declared[key]["default"]
        assert eval(default) == value, f"{path.stem}.{key}: notebook default {default} != full profile {value}"  # noqa: S307


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_is_in_the_toc_and_saves_results(path):
    toc = (ROOT / "_toc.yml").read_text()
    assert f"book/methods/{path.stem}" in toc, f"{path.stem} is missing from _toc.yml"
    text = path.read_text()
    assert f'results.save(\n    "{path.stem}"' in text or f'results.save("{path.stem}"' in text, (
        f"{path.name} never saves its results"
    )
    assert "assert" in text


def test_environment_yml_defers_to_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d for d in env["dependencies"] if isinstance(d, dict)][0]["pip"]
    assert pip == ["-e .[book,test,lab]"]
    assert any(str(d).startswith("python=3.11") for d in env["dependencies"])


def test_torch_pin_resolves_to_the_cpu_wheel_range():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"torch>=2.2,<2.14"' in text
    assert '"jupyter-book>=1.0.4,<2"' in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_lines_fit_the_book_column(path):
    """The rendered column holds 77 characters of code (75 inside a collapsed hide-input cell); longer lines
    scroll sideways, which the browser check of the built book (dputils.book.bookcheck) reports as overflow."""
    nb = jupytext.read(path)
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        limit = 75 if "hide-input" in c.metadata.get("tags", []) else 77
        long = [ln for ln in c.source.splitlines() if len(ln) > limit]
        assert not long, f"{path.name}: code lines longer than {limit} characters: {long[:3]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_stray_result_outputs(path):
    """A cell's last expression is shown by Jupyter: a value returned by show_table (already displayed) or by a
    target check (True) would appear a second time, or as a stray repr, in the book."""
    import ast

    nb = jupytext.read(path)
    for c in nb.cells:
        if c.cell_type != "code" or "parameters" in c.metadata.get("tags", []):
            continue
        src = c.source.rstrip()
        tree = ast.parse(src)
        if not tree.body or src.endswith(";") or not isinstance(tree.body[-1], ast.Expr):
            continue
        last = tree.body[-1].value
        name = ast.unparse(last.func) if isinstance(last, ast.Call) else ""
        assert not (name == "show_table" or name.startswith("tg.check") or name.startswith("tg.not_")), (
            f"{path.name}: cell ends with {name}(...): assign it to _ so its value is not shown twice"
        )
