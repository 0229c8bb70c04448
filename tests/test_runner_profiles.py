"""Every profile builds: a page run at a profile other than the book's says so under its title, a value that profile
does not compute reads "not computed at the smoke profile" instead of stopping the -W build at an unknown glue key,
the smoke book is built apart from the book's own copies, and the paper profile refuses in one line, before running
anything, where it cannot run."""

import json

import nbformat
import pytest

from dputils.book import profilemark
from dputils.book.run import cli_main


def _md_nb(cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    return nb


def _glued(name, value):
    c = nbformat.v4.new_code_cell("")
    c.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/plain": repr(value)}, metadata={"scrapbook": {"name": name, "mime_prefix": ""}}
        )
    ]
    return c


def test_mark_profile_notes_the_profile_and_replaces_only_missing_glue():
    text = "(label)=\n# Title\n\nIntro {glue:text}`have:.2f` and {glue:text}`gone:.3f`, also {glue:text}`gone`.\n"
    fig = "```{glue:figure} gone_fig\n:name: fig-x\n\nCaption.\n```\n\nAfter."
    nb = _md_nb([nbformat.v4.new_markdown_cell(text), _glued("have", 1.5), nbformat.v4.new_markdown_cell(fig)])
    full = nbformat.from_dict(json.loads(nbformat.writes(nb)))
    assert profilemark.mark_profile(full, "full") == [] and nbformat.writes(full) == nbformat.writes(nb)
    assert profilemark.mark_profile(nb, "smoke") == ["gone", "gone_fig"]
    head = nb.cells[0].source
    assert head.startswith("(label)=\n# Title\n\n```{warning}\nProfile `smoke`, not the book's")
    # the prose was written about the book's values: the smoke page says its relations may not hold there
    assert "checked for the book's profile and may not hold at these sizes" in head
    assert "{glue:text}`have:.2f`" in head and "{glue:text}`gone" not in head
    assert head.count("*(not computed at the smoke profile)*") == 2
    assert "{glue:figure}" not in nb.cells[2].source and nb.cells[2].source.endswith("After.")
    assert nb.metadata["dputils"]["not_computed"] == ["gone", "gone_fig"]


CONFIG = """title: tiny
only_build_toc_files: true
exclude_patterns: [_build, results, notebooks]
execute:
  execute_notebooks: "off"
"""
TOC = """format: jb-book
root: book/intro
chapters:
  - file: book/methods/demo
"""


def _root(tmp_path):
    import jupytext

    root = tmp_path / "repo"
    for d in ("notebooks", "params", "book"):
        (root / d).mkdir(parents=True)
    (root / "_config.yml").write_text(CONFIG)
    (root / "_toc.yml").write_text(TOC)
    (root / "book" / "intro.md").write_text("# Intro\n\nA tiny book.\n")
    (root / "params" / "full.yml").write_text("")
    (root / "params" / "smoke.yml").write_text("demo:\n  costly: false\n")
    p = nbformat.v4.new_code_cell("costly: bool = True  # the long part")
    p.metadata["tags"] = ["parameters"]
    nb = _md_nb(
        [
            nbformat.v4.new_markdown_cell("# Demo\n\nThe long part gives {glue:text}`demo_long:.1f`."),
            p,
            nbformat.v4.new_code_cell(
                "from myst_nb import glue\nfrom dputils.book import results\n"
                "if costly:\n    glue('demo_long', 2.5, display=False)\nresults.save('demo', costly=costly)"
            ),
        ]
    )
    jupytext.write(nb, root / "notebooks" / "demo.md", fmt="md:myst")
    return root


@pytest.mark.notebook
def test_the_smoke_book_builds_apart_from_the_books_copies(tmp_path, capfd):
    root = _root(tmp_path)
    rc = cli_main("book", ["--root", str(root), "--profile", "smoke", "--timeout", "120"])
    err = capfd.readouterr().err
    assert rc == 0, err
    assert not (root / "book" / "methods").exists() and not (root / "results").exists()  # the book's untouched
    html = (root / "_build" / "smoke" / "site" / "_build" / "html" / "book" / "methods" / "demo.html").read_text()
    assert '<div class="admonition warning">' in html and "not the book’s: every number on this page" in html
    assert "The long part gives <em>(not computed at the smoke profile)</em>." in html
    rep = json.loads((root / "_build" / "smoke" / "report.json").read_text())
    assert rep["book"]["built"] is True and rep["command"] == "book"
    # --build-only: nothing runs, the same copies build again
    rc = cli_main("book", ["--root", str(root), "--profile", "smoke", "--build-only"])
    err = capfd.readouterr().err
    assert rc == 0 and "[start" not in err and "--build-only: nothing runs" in err


def test_paper_refuses_in_one_line_before_running_when_it_needs_a_gpu(tmp_path, capfd, monkeypatch):
    """On a machine without CUDA, `book --profile paper` stops before any kernel starts, in one line naming the
    chapter and its device parameter; the same chapters left out with --only run as usual."""
    import torch

    root = _root(tmp_path)
    (root / "params" / "paper.yml").write_text("demo:\n  costly: true\n  train_device: auto\n")
    p = nbformat.v4.new_code_cell("costly: bool = True  # the long part\ntrain_device: str = 'cpu'  # where")
    p.metadata["tags"] = ["parameters"]
    import jupytext

    nb = jupytext.read(root / "notebooks" / "demo.md")
    nb.cells[1] = p
    jupytext.write(nb, root / "notebooks" / "demo.md", fmt="md:myst")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = cli_main("book", ["--root", str(root), "--profile", "paper"])
    err = capfd.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert err[0].startswith("error: profile paper: demo (train_device: auto) in params/paper.yml runs at the")
    assert not (root / "_build" / "staging").exists() and not (root / "_build" / "paper" / "methods").exists()


@pytest.mark.notebook
def test_the_books_own_build_reads_the_published_links(tmp_path, capfd):
    """At the book's profile the pages are the published names, links into the current generation
    (dputils.book.publish): the -W build reads them, unmarked, and the download of the executed copy works."""
    root = _root(tmp_path)
    rc = cli_main("book", ["--root", str(root), "--timeout", "120"])
    err = capfd.readouterr().err
    assert rc == 0, err
    nb = root / "book" / "methods" / "demo.ipynb"
    assert nb.is_symlink() and (root / "results" / "demo.json").is_symlink()
    html = (root / "_build" / "html" / "book" / "methods" / "demo.html").read_text()
    assert 'The long part gives <span class="pasted-text">2.5</span>.' in html and "admonition warning" not in html
    downloads = list((root / "_build" / "html" / "_downloads").rglob("demo.ipynb"))
    assert len(downloads) == 1 and downloads[0].read_bytes() == nb.read_bytes()
