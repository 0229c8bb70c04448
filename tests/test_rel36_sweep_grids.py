"""Issue 36 items 3 and 4: a sweep --name reused with another grid is refused (before, results.csv was rewritten
with the new rows only); a large explicit grid is parsed quickly or refused early, naming the count and the
limit."""

from __future__ import annotations

import time

import nbformat
import pytest

from dputils.book import sweep
from dputils.errors import DPValueError


def _root(tmp_path):
    import jupytext

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "params" / "smoke.yml").write_text("")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = nbformat.v4.new_code_cell("x: float = 0.0")
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbformat.v4.new_code_cell("from dputils.book import results\nresults.save('nb', x=x)")]
    jupytext.write(nb, root / "notebooks" / "nb.md", fmt="md:myst")
    return root


def _grid(tmp_path, name, values):
    g = tmp_path / name
    g.write_text(f"grid:\n  x: {values}\n")
    return g


def _table_of(root, grid, name="s"):
    """A results.csv as the first sweep leaves it (its rows: the plan's points, not run)."""
    plan = sweep.plan_sweep("nb", grid, name=name, root=root)
    sweep.write_table(plan, sweep.collect(plan))
    return plan.out_dir / "results.csv"


def test_a_name_reused_with_another_grid_is_refused_in_one_line(tmp_path, capsys):
    root = _root(tmp_path)
    table = _table_of(root, _grid(tmp_path, "a.yml", [1.0, 2.0]))
    before = table.read_bytes()
    old = sweep.grid_hash([r["point"] for r in sweep.read_table(table)])
    rc = sweep.cli_main(["nb", "--root", str(root), "--grid", str(_grid(tmp_path, "b.yml", [3.0])), "--name", "s"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert f"grid {old}, 2 point(s)" in err[0] and "--fresh" in err[0] and "--name" in err[0], err
    assert table.read_bytes() == before  # nothing ran, nothing rewritten
    assert not list((table.parent).glob("x-3.0-*"))


def test_same_grid_passes_and_fresh_starts_afresh(tmp_path):
    root = _root(tmp_path)
    a = _grid(tmp_path, "a.yml", [1.0, 2.0])
    _table_of(root, a)
    sweep.check_same_grid(sweep.plan_sweep("nb", a, name="s", root=root))  # the same grid: accepted (--resume)
    wider = _grid(tmp_path, "w.yml", [1.0, 2.0, 3.0])
    sweep.check_same_grid(sweep.plan_sweep("nb", wider, name="s", root=root))  # extended: every old row stays
    plan_b = sweep.plan_sweep("nb", _grid(tmp_path, "b.yml", [1.0]), name="s", root=root)  # a subset is another grid
    with pytest.raises(DPValueError, match="holds another grid's results"):
        sweep.check_same_grid(plan_b)
    sweep.check_same_grid(plan_b, fresh=True)
    with pytest.raises(DPValueError, match="holds another grid's results"):
        sweep.run_sweep(plan_b, serial=True)  # the library entry point refuses too, before running


def test_grid_hash_is_the_points_in_order():
    assert sweep.grid_hash(["a", "b"]) != sweep.grid_hash(["b", "a"])
    assert sweep.grid_hash(["a", "b"]) == sweep.grid_hash(["a", "b"]) and len(sweep.grid_hash(["a"])) == 10


def test_a_million_explicit_points_are_refused_in_seconds_naming_the_count_and_the_limit(tmp_path):
    """Before: 202 s and 2.5 GB of YAML composing, then blamed on aliases. Independent truth: the file's own
    point count (written here) and the module's limit."""
    g = tmp_path / "big.yml"
    g.write_text("points:\n" + "".join(f"  - {{x: {i}}}\n" for i in range(10**6)))
    t0 = time.process_time()
    with pytest.raises(DPValueError) as info:
        sweep.load_grid(g)
    spent = time.process_time() - t0
    msg = str(info.value)
    assert f"1,000,000 points, over the limit of {sweep.MAX_POINTS:,} points" in msg and "alias" not in msg, msg
    assert spent < 30, spent  # measured 2.7 s of CPU with libyaml (pure Python: about 200 s)


def test_stream_counts_match_the_composed_document(tmp_path):
    """The pre-count (parser events only) against the composed node graph (the old count) and len(points)."""
    texts = {
        "points:\n  - {x: 1, y: [1, 2]}\n  - {x: 2}\n  - &p {x: 3}\n  - *p\n": 4,
        "grid:\n  x: [1, 2, 3]\n  y: [a, b]\n": None,
        "points: []\n": 0,
        "other: {points: [1, 2, 3]}\npoints:\n  - {x: 1}\n": 1,
    }
    import yaml

    for text, n in texts.items():
        items, points = sweep._stream_counts(text)
        assert points == n, text
        if "*p" not in text:  # without aliases, the streamed count is the composed one
            assert items == sweep._expanded_items(yaml.compose(text, Loader=yaml.SafeLoader), "g"), text


def test_explicit_points_parse_as_before(tmp_path):
    g = tmp_path / "g.yml"
    g.write_text("points:\n  - {x: 1.5, flag: true, name: 'a'}\n  - {x: 2}\n")
    assert sweep.load_grid(g) == [{"x": 1.5, "flag": True, "name": "a"}, {"x": 2}]
    g.write_text("grid: [1, 2]\n")  # a list where the mapping belongs is called a list, not "empty"
    with pytest.raises(DPValueError, match="got a list"):
        sweep.load_grid(g)
    g.write_text("points:\n  - {x: 1\n")
    with pytest.raises(DPValueError, match="not valid YAML at line"):
        sweep.load_grid(g)


def test_output_whose_methods_or_results_is_a_file_is_refused_before_running(tmp_path, capfd):
    """Before: the notebook ran, then publishing failed."""
    from dputils.book.run import cli_main

    root = _root(tmp_path)
    for sub in ("methods", "results"):
        out = tmp_path / f"out-{sub}"
        out.mkdir()
        (out / sub).write_text("x")
        rc = cli_main("run", ["--root", str(root), "--profile", "smoke", "--output", str(out)])
        err = capfd.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and err[0].startswith("error: --output:") and f"{sub} is a file" in err[0]
    assert not (root / "_build" / "staging").exists()
