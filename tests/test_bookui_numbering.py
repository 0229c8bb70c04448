"""Figures, tables and equations numbered per chapter (issue 34 item 5): every chapter sits in a numbered part of
_toc.yml, and Sphinx's numfig numbers figures and equations by the chapter (section depth 1), so the built book
writes "Fig. 3.2" and "(3.2)". A build of stub chapters with this configuration wrote Fig. 1.1, 2.1, 3.1 and 4.1
and equations (1.1) to (4.1) for four chapters in three parts (the parts' numbering continues); the built book
of 2026-11-28 wrote Fig. 1 for the one chapter outside a numbered part."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_every_chapter_is_in_a_numbered_part():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    chapters = [
        (part.get("caption"), ch["file"], part.get("numbered"))
        for part in toc["parts"]
        for ch in part.get("chapters", [])
        if ch["file"].startswith("book/methods/")
    ]
    assert len(chapters) >= 9
    unnumbered = [(cap, f) for cap, f, n in chapters if not n]
    assert unnumbered == [], f"chapters whose figures would be Fig. 1, not Fig. N.1: {unnumbered}"


def test_numfig_per_chapter():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    assert cfg.get("numfig") is True
    assert cfg.get("numfig_secnum_depth", 1) == 1  # per chapter: Fig. 3.2, not Fig. 3.1.2 or Fig. 32
    assert cfg.get("math_numfig", True) is True  # equations numbered like figures: (3.2)
