"""The sweep's grid file: a list where a mapping belongs is named as such (not "empty"), and a grid that is merely
too large is not blamed on YAML aliases."""

import pytest

from dputils.book import sweep
from dputils.errors import DPValueError


def test_a_grid_given_as_a_list_is_called_a_list(tmp_path):
    g = tmp_path / "g.yml"
    g.write_text("grid: [1, 2]\n")
    with pytest.raises(DPValueError, match=r"'grid:' must map each parameter to a list of values .* got a list"):
        sweep.load_grid(g)
    g.write_text("grid:\n")
    with pytest.raises(DPValueError, match="'grid:' is empty"):
        sweep.load_grid(g)


def test_too_many_explicit_values_are_not_blamed_on_aliases(tmp_path, monkeypatch):
    monkeypatch.setattr(sweep, "MAX_GRID_ITEMS", 50)
    g = tmp_path / "g.yml"
    g.write_text("points:\n" + "".join(f"  - {{x: {i}}}\n" for i in range(30)))  # no alias
    with pytest.raises(DPValueError) as info:
        sweep.load_grid(g)
    # the document's mapping, its key 'points', the list, and 30 points of a mapping, a key and a value each: 93
    assert "aliases" not in str(info.value) and "holds 93 values, over the limit of 50" in str(info.value)
    g.write_text("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: &b [*a, *a, *a, *a, *a, *a]\ngrid: {x: *b}\n")
    with pytest.raises(DPValueError, match="its YAML aliases expand to"):
        sweep.load_grid(g)
