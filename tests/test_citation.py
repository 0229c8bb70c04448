"""CITATION.cff, the "How to cite" page and the licence files agree with the package and the bibliography.

The CFF file is parsed with PyYAML; each seed paper's title, year and authors are compared with its entry in
book/references.bib (read by a small BibTeX reader here, so the two files are checked against each other).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

import dputils

ROOT = Path(__file__).resolve().parents[1]
SEED_KEYS = ("gauss_audit", "schuchardt_kalinin", "alghamdi_spa", "wang_edgeworth", "vandijk_shuffling")


def _bib_entries(text: str) -> dict[str, dict[str, str]]:
    """``{key: {field: value}}`` of a BibTeX file whose values are in balanced braces."""
    entries: dict[str, dict[str, str]] = {}
    for m in re.finditer(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text):
        fields: dict[str, str] = {"ENTRYTYPE": m.group(1).lower()}
        i = m.end()
        depth = 1  # inside the entry's braces
        while depth > 0 and i < len(text):
            f = re.compile(r"\s*(\w+)\s*=\s*\{").match(text, i)
            if f is None:
                if text[i] == "}":
                    depth -= 1
                i += 1
                continue
            j, d = f.end(), 1
            while d:
                d += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
            fields[f.group(1).lower()] = text[f.end() : j - 1]
            i = j
        entries[m.group(2)] = fields
    return entries


def _plain(s: str) -> str:
    """A BibTeX or CFF string without braces, accents markup or extra blanks, lower-case."""
    s = re.sub(r"\\['`^\"~]\{?(\w)\}?", r"\1", s)
    return re.sub(r"\s+", " ", s.replace("{", "").replace("}", "")).strip().lower()


@pytest.fixture(scope="module")
def cff():
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def bib():
    return _bib_entries((ROOT / "book" / "references.bib").read_text(encoding="utf-8"))


def test_bib_reader_reads_nested_braces():
    e = _bib_entries(
        "@article{k1,\n  title = {A {DP-SGD} {G}aussian},\n  year = {2020}\n}\n"
        "@misc{k2, author = {{Team X}}, title = {B}}\n"
    )
    assert e == {
        "k1": {"ENTRYTYPE": "article", "title": "A {DP-SGD} {G}aussian", "year": "2020"},
        "k2": {"ENTRYTYPE": "misc", "author": "{Team X}", "title": "B"},
    }


def test_cff_top_level(cff):
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by CFF 1.2.0
        assert cff[key]
    assert cff["title"] == "dpbook"
    assert cff["type"] == "software"
    assert cff["authors"] == [{"name": "The dpbook authors"}]


def test_cff_version_is_the_package_version(cff):
    assert isinstance(cff["version"], str)  # "0.1.0", not a YAML float
    assert cff["version"] == dputils.__version__
    assert cff["preferred-citation"]["version"] == dputils.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if "version" in project:  # a dynamic version has no literal here
        assert cff["version"] == project["version"]


def test_cff_license_is_pyproject_license(cff):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert cff["license"] == "Apache-2.0"
    # pyproject may state the code's licence alone or with the book's (an SPDX expression)
    assert "Apache-2.0" in str(project["license"])
    assert cff["preferred-citation"]["license"] == "CC-BY-4.0"


def test_preferred_citation_is_the_book(cff):
    pc = cff["preferred-citation"]
    assert pc["type"] == "book"
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert pc["title"] == config["title"]
    assert pc["authors"]


def test_every_reference_has_title_and_authors(cff):
    refs = cff["references"]
    assert len(refs) == len(SEED_KEYS)
    for r in refs:
        assert isinstance(r.get("title"), str) and r["title"].strip(), r
        assert r.get("type"), r
        assert isinstance(r.get("authors"), list) and r["authors"], r
        for a in r["authors"]:
            assert a.get("family-names") or a.get("name"), (r["title"], a)


def test_references_match_the_bibliography(cff, bib):
    by_title = {_plain(bib[k]["title"]): k for k in SEED_KEYS}
    seen = set()
    for r in cff["references"]:
        key = by_title.get(_plain(r["title"]))
        assert key is not None, f"{r['title']!r} is not a seed paper's title in book/references.bib"
        seen.add(key)
        entry = bib[key]
        assert r["year"] == int(entry["year"]), key
        bib_family = [_plain(a.split(",")[0]) for a in entry["author"].split(" and ")]
        cff_family = [_plain(" ".join(filter(None, (a.get("name-particle"), a["family-names"])))) for a in r["authors"]]
        assert cff_family == bib_family, key
        bib_given = [_plain(a.split(",", 1)[1]) for a in entry["author"].split(" and ")]
        assert [_plain(a["given-names"]) for a in r["authors"]] == bib_given, key
        arxiv = re.search(r"arXiv:(\d{4}\.\d{4,5})", entry.get("journal", "") + entry.get("note", ""))
        ids = [i["value"] for i in r.get("identifiers", [])]
        assert arxiv is not None and f"arXiv:{arxiv.group(1)}" in ids, key
    assert seen == set(SEED_KEYS)


def test_cite_page_cites_known_keys_and_every_seed_paper(bib):
    page = (ROOT / "book" / "cite.md").read_text(encoding="utf-8")
    keys = [k.strip() for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", page) for k in group.split(",")]
    assert keys
    assert set(keys) <= set(bib), set(keys) - set(bib)
    assert set(SEED_KEYS) <= set(keys)
    block = re.search(r"```bibtex\n(.*?)```", page, re.S)
    assert block is not None
    book = _bib_entries(block.group(1))["dpbook"]
    assert book["version"] == dputils.__version__
    assert _plain(book["title"]) == _plain(yaml.safe_load((ROOT / "_config.yml").read_text())["title"])
    assert max(len(line) for line in block.group(1).splitlines()) <= 72  # fits the book's code column


def test_cite_page_is_in_the_back_matter_before_the_bibliography():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    back = next(p for p in toc["parts"] if p["caption"] == "Back matter")
    files = [c["file"] for c in back["chapters"]]
    assert "book/cite" in files
    assert files.index("book/cite") == files.index("book/bibliography") - 1


def test_licence_files():
    apache = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in apache and "Version 2.0, January 2004" in apache
    assert "END OF TERMS AND CONDITIONS" in apache
    book = (ROOT / "LICENSE-book.md").read_text(encoding="utf-8")
    assert "CC BY 4.0" in book or "CC-BY-4.0" in book
    assert "Apache" in (ROOT / "NOTICE").read_text(encoding="utf-8")
