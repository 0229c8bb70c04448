"""The browser checks of the built book (dputils.bookcheck), on small hand-written pages served from tmp_path.

These need Debian's headless Chromium (`apt-get install chromium chromium-driver`). In CI (``CI`` set,
as `.ci/run` runs) they fail without it, since .ci/run installs it and a check of the book that silently
does not run checks nothing; on a developer's machine without Chromium they are skipped, with the reason.
"""

from __future__ import annotations

import os

import pytest

from dputils import bookcheck as bc

MATHJAX = "/_static/mathjax/tex-chtml.js"

CLEAN = """<!doctype html><html><head><meta charset="utf-8"><title>clean</title>
<style>body {{ margin: 0 }} article {{ width: 600px; }} pre {{ overflow-x: auto }}</style>
{mathjax}</head><body><main><article class="bd-article">
<section class="tex2jax_ignore mathjax_ignore" id="intro"><h1>A clean page</h1>
<p>The privacy loss <span class="math notranslate nohighlight">\\(\\varepsilon = \\mu^2/2\\)</span> is small.</p>
<div class="math notranslate nohighlight">\\[\\delta(\\varepsilon) = \\Phi(-\\varepsilon/\\mu + \\mu/2)\\]</div>
<div class="cell"><div class="cell_input"><pre>path = save("x")  # PosixPath( in source is fine</pre></div>
<div class="cell_output"><figure><img src="dot.png" alt="A blue dot on a white background">
<figcaption><p>Figure 1: the dot.</p></figcaption></figure></div></div>
<table><tr><th>sigma</th><th>epsilon</th></tr><tr><td>1.0</td><td>0.5</td></tr></table>
</section></article></main></body></html>"""


def _png() -> bytes:
    import struct
    import zlib

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x00\x00\xff" * 4 for _ in range(4))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _defect(name: str, old: str, new: str) -> tuple[str, str]:
    assert old in CLEAN, old
    return name, CLEAN.replace(old, new, 1)


DEFECTS = [
    # raw TeX: the math is not in a span MathJax processes
    _defect("raw_tex", '<span class="math notranslate nohighlight">\\(\\varepsilon = \\mu^2/2\\)</span>',
            "\\(x\\)"),
    _defect("no_alt", 'alt="A blue dot on a white background"', 'alt=""'),
    _defect("hash_alt", 'alt="A blue dot on a white background"',
            'alt="../_images/3f2a9c1d0b7e4f6a8c5d2e1f0a9b8c7d.png"'),
    _defect("missing_image", 'src="dot.png"', 'src="nowhere.png"'),
    _defect("no_caption", "<figcaption><p>Figure 1: the dot.</p></figcaption>", ""),
    _defect("repr", "<td>0.5</td>", "<td>PosixPath('/tmp/results/x.json')</td>"),
    _defect("stderr", '<div class="cell_output">',
            '<div class="cell_output"><div class="output stderr"><pre>TqdmWarning: IProgress not found</pre></div>'),
    _defect("wide_table", "<td>0.5</td>", "<td>0.5</td>" + "<td>0.123456789</td>" * 60),
    _defect("wide_code", "# PosixPath( in source is fine", "# " + "x" * 400),
    _defect("external", "</head>", '<link rel="stylesheet" href="https://cdn.example.org/x.css"></head>'),
]

EXPECTED_KIND = {"raw_tex": "math", "no_alt": "image", "hash_alt": "image", "missing_image": "image",
                 "no_caption": "caption", "repr": "repr", "stderr": "output", "wide_table": "overflow",
                 "wide_code": "overflow", "external": "network"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not bc.chromium_available():
        msg = f"dputils.bookcheck cannot run: {bc.CHROMIUM} or {bc.CHROMEDRIVER} is missing; {bc.INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    import importlib.util
    mj = importlib.util.find_spec("sphinx-mathjax-offline")
    if mj is None:
        pytest.fail("sphinx-mathjax-offline is missing: pip install -e '.[test]'")
    import shutil
    from pathlib import Path

    root = tmp_path_factory.mktemp("site")
    shutil.copytree(Path(mj.submodule_search_locations[0]) / "static" / "mathjax", root / "_static" / "mathjax")
    (root / "dot.png").write_bytes(_png())
    # as myst-parser sets MathJax up in the book: the section is ignored, only elements of class "math" are typeset
    script = ("<script>window.MathJax = {options: {processHtmlClass: 'tex2jax_process|mathjax_process|math|output_area'}};"
              "</script>"
              f'<script defer src="{MATHJAX}"></script>')
    (root / "clean.html").write_text(CLEAN.format(mathjax=script))
    for name, html in DEFECTS:
        (root / f"{name}.html").write_text(html.format(mathjax=script))
    with bc.serve(root) as server, bc.start_browser(width=1000, height=700) as browser:
        yield root, server, browser


def test_text_classifiers():
    assert bc.tex_leftovers("the loss is small") == []
    assert bc.tex_leftovers("raw \\(x\\) here") and bc.tex_leftovers("a $$ b") and bc.tex_leftovers("C e_{k_j}")
    assert bc.repr_leftovers("PosixPath('/a/b.json')") and bc.repr_leftovers("np.float64(0.00102)")
    assert bc.repr_leftovers("array([1, 2])") and not bc.repr_leftovers("np.array is fine; so is 3.5")
    assert bc.is_meaningful_alt("Trade-off curves of the Gaussian mechanism")
    for bad in (None, "", "image", "../../_images/0a1b2c3d4e5f6a7b8c9d.png", "3f2a9c1d0b7e4f6a"):
        assert not bc.is_meaningful_alt(bad), bad
    origin = "http://127.0.0.1:8000"
    assert bc.external_urls([origin + "/a.js", "data:x", "https://cdn.jsdelivr.net/x.js"], origin) == [
        "https://cdn.jsdelivr.net/x.js"]


def test_clean_page_passes(site, tmp_path):
    root, server, browser = site
    r = bc.check_page(browser, server, "clean.html", shots=tmp_path)
    assert r.findings == [], r.findings
    assert (tmp_path / "clean.png").stat().st_size > 1000
    # MathJax ran offline from the local copy
    assert browser.driver.execute_script("return document.querySelectorAll('mjx-container').length") == 2


@pytest.mark.parametrize("name", [n for n, _ in DEFECTS])
def test_defect_is_flagged(site, name):
    root, server, browser = site
    r = bc.check_page(browser, server, f"{name}.html")
    kinds = {f.kind for f in r.findings}
    assert EXPECTED_KIND[name] in kinds, r.findings


def test_report_and_exit_status(site, capsys):
    root, server, browser = site
    clean = bc.check_page(browser, server, "clean.html")
    bad = bc.check_page(browser, server, "repr.html")
    assert bc.report([clean]) == 0
    assert bc.report([clean, bad]) >= 1
    out = capsys.readouterr().out
    assert "clean.html: clean" in out and "repr.html: repr" in out and "2 page(s), 1 with findings" in out
