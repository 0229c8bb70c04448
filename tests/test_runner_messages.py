"""One line instead of a traceback: a cell timeout names its cell, Ctrl-C says the last good results are kept,
and a bad --output or --root is refused before anything runs."""

import nbformat

from dputils.book import booksources
from dputils.book.run import cli_main


def _write_md(path, cells):
    import jupytext

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    jupytext.write(nb, path, fmt="md:myst")


def _root(tmp_path, wait=300.0, marker=None):
    """A book root with one notebook whose third cell sleeps ``wait`` s (its parameter, which the profile can
    change); with ``marker`` that cell first creates that file (the kernel has reached the sleep)."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    (root / "params" / "smoke.yml").write_text("")
    p = nbformat.v4.new_code_cell(f"wait: float = {wait}  # seconds")
    p.metadata["tags"] = ["parameters"]
    _write_md(
        root / "notebooks" / "slow.md",
        [
            p,
            nbformat.v4.new_code_cell("x = 1"),
            nbformat.v4.new_code_cell(
                "import time" + (f"\nopen({str(marker)!r}, 'w').close()" if marker else "") + "\ntime.sleep(wait)"
            ),
            nbformat.v4.new_code_cell("from dputils.book import results\nresults.save('slow', value=2)"),
        ],
    )
    return root


def test_a_cell_timeout_names_the_cell_in_a_few_lines(tmp_path, capfd):
    root = _root(tmp_path)
    rc = cli_main("run", ["--root", str(root), "--profile", "smoke", "--timeout", "3"])
    err = capfd.readouterr().err
    assert rc == 1
    assert "Traceback" not in err and "ZMQError" not in err and "Timeout waiting" not in err, err
    md_line = (root / "notebooks" / "slow.md").read_text().splitlines().index("import time") + 1
    assert f"notebooks/slow.md:{md_line}, code cell 3, In [3]: import time" in err
    assert "CellTimeoutError: the cell ran past the timeout of 3 s (--timeout) and was stopped" in err
    assert "before any cell" not in err


# Ctrl-C in `run`: tests/test_rel36_interrupt.py (it waits for a marker the sleeping cell writes, not a fixed
# sleep, so a loaded machine no longer makes it flaky).


def test_output_that_is_a_file_is_refused_before_running(tmp_path, capfd):
    root = _root(tmp_path, wait=0.0)
    f = tmp_path / "out.txt"
    f.write_text("x")
    for target, says in ((f, "is a file"), (f / "sub", f"is under {f}, a file")):
        rc = cli_main("run", ["--root", str(root), "--profile", "smoke", "--output", str(target)])
        err = capfd.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and says in err[0] and err[0].startswith("error: --output:"), err
    assert not (root / "_build" / "staging").exists()


def test_a_root_that_cannot_be_a_book_folder_is_one_line(tmp_path, capfd, monkeypatch):
    f = tmp_path / "file"
    f.write_text("x")
    rc = cli_main("run", ["--root", str(f)])
    err = capfd.readouterr().err.strip().splitlines()
    assert rc == 2 and err == [f"error: root: {f} is a file, not a book folder"]
    # installed from a wheel (shipped sources): a book folder under a file cannot be made
    shipped = _root(tmp_path / "wheel", wait=0.0)
    monkeypatch.setattr(booksources, "packaged_sources", lambda: shipped)
    rc = cli_main("run", ["--root", str(f / "book")])
    err = capfd.readouterr().err.strip().splitlines()
    # one line naming the folder and why (booksources: "root: F/book is under F, which is a file; ...")
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert str(f / "book") in err[0] and "is a file" in err[0] and "Traceback" not in err[0], err
