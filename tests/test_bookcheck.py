"""The browser checks of the built book (dputils.book.bookcheck), on small hand-written pages served from tmp_path.

These need Debian's headless Chromium (`apt-get install chromium chromium-driver`). In CI (``CI`` set,
as `.ci/run` runs) they fail without it, since .ci/run installs it and a check of the book that silently
does not run checks nothing; on a developer's machine without Chromium they are skipped, with the reason.
"""

from __future__ import annotations

import os

import pytest

from dputils.book import bookcheck as bc

MATHJAX = "/_static/mathjax/tex-chtml.js"

CLEAN = """<!doctype html><html><head><meta charset="utf-8"><title>clean</title>
<style>body { margin: 0 } article { width: 600px; } pre { overflow-x: auto }</style>
{mathjax}</head><body><main><article class="bd-article">
<section class="tex2jax_ignore mathjax_ignore" id="intro"><h1>A clean page</h1>
<p>The privacy loss <span class="math notranslate nohighlight">\\(\\varepsilon = \\mu^2/2\\)</span> is small.</p>
<div class="math notranslate nohighlight">\\[\\delta(\\varepsilon) = \\Phi(-\\varepsilon/\\mu + \\mu/2)\\]</div>
<div class="cell"><div class="cell_input"><pre>path = save("x")  # PosixPath( in source is fine</pre></div>
<div class="cell_output"><figure><img src="dot.png" alt="A blue dot on a white background">
<figcaption><p>Figure 1: the dot.</p></figcaption></figure></div></div>
<table><tr><th>sigma</th><th>epsilon</th></tr><tr><td>1.0</td><td>0.5</td></tr></table>
<p>Same header, other body: not a duplicate. Code in prose is fine: <code>tg.table()</code>, <code>{numref}</code>.</p>
<table><tr><th>sigma</th><th>epsilon</th></tr><tr><td>2.0</td><td>0.25</td></tr></table>
<table id="wraps" style="width:1px;line-height:20px;font-size:16px;word-break:normal;overflow-wrap:normal">
<caption>Table 1: cells that wrap between words only.</caption>
<thead><tr><th>note</th><th>kind</th><th>p</th><th>set</th></tr></thead>
<tbody><tr><td id="note">independent computation of the privacy loss</td><td id="kind">trade-off</td>
<td>4.649&#215;10<sup>-5</sup></td><td id="set">CIFAR-<wbr>10</td></tr></tbody></table>
<div class="cell"><div class="cell_input"><pre>:::{note}
{numref}`fig-x` and (eq-atlas-relerr) in a source are fine
:::</pre></div></div>
</section></article></main></body></html>"""


def _png(w: int = 4, h: int = 4) -> bytes:
    """A blue w x h RGB PNG."""
    import struct
    import zlib

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x00\x00\xff" * w for _ in range(h))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


#: a page of 40,000 px with a red band at the top, a green one at 20,000 px and a blue one at the bottom
TALL_PX = 40000
TALL = f"""<!doctype html><html><head><meta charset="utf-8"><style>body {{ margin: 0 }}</style></head><body>
<main><article class="bd-article"><div style="position:relative;height:{TALL_PX}px;background:#fff">
<div style="position:absolute;top:0;height:100px;width:100%;background:#f00"></div>
<div style="position:absolute;top:20000px;height:100px;width:100%;background:#0f0"></div>
<div style="position:absolute;top:{TALL_PX - 100}px;height:100px;width:100%;background:#00f"></div>
</div></article></main></body></html>"""


def _defect(name: str, old: str, new: str) -> tuple[str, str]:
    assert old in CLEAN, old
    return name, CLEAN.replace(old, new, 1)


DEFECTS = [
    # raw TeX: the math is not in a span MathJax processes
    _defect("raw_tex", '<span class="math notranslate nohighlight">\\(\\varepsilon = \\mu^2/2\\)</span>', "\\(x\\)"),
    _defect("no_alt", 'alt="A blue dot on a white background"', 'alt=""'),
    _defect(
        "hash_alt", 'alt="A blue dot on a white background"', 'alt="../_images/3f2a9c1d0b7e4f6a8c5d2e1f0a9b8c7d.png"'
    ),
    _defect("missing_image", 'src="dot.png"', 'src="nowhere.png"'),
    _defect("no_caption", "<figcaption><p>Figure 1: the dot.</p></figcaption>", ""),
    _defect("repr", "<td>0.5</td>", "<td>PosixPath('/tmp/results/x.json')</td>"),
    _defect(
        "stderr",
        '<div class="cell_output">',
        '<div class="cell_output"><div class="output stderr"><pre>TqdmWarning: IProgress not found</pre></div>',
    ),
    _defect("wide_table", "<td>0.5</td>", "<td>0.5</td>" + "<td>0.123456789</td>" * 60),
    _defect("wide_code", "# PosixPath( in source is fine", "# " + "x" * 400),
    _defect("external", "</head>", '<link rel="stylesheet" href="https://cdn.example.org/x.css"></head>'),
    # the same table twice (what displaying a cell's value and gluing it does)
    _defect(
        "duplicate_table",
        "<tr><td>1.0</td><td>0.5</td></tr></table>",
        "<tr><td>1.0</td><td>0.5</td></tr></table><p>again:</p>"
        "<table><tr><th>sigma</th><th>epsilon</th></tr><tr><td>1.0</td><td>0.5</td></tr></table>",
    ),
    # a number broken inside a cell: the column is as narrow as one digit
    _defect("split_number", "<td>4.649&#215;10<sup>-5</sup></td>", '<td style="overflow-wrap:anywhere">1000</td>'),
    # a number broken after its minus sign
    _defect("split_minus", "CIFAR-<wbr>10", "5e-<wbr>11"),
    # a header word broken inside its cell
    _defect("split_header", "<th>kind</th>", '<th style="overflow-wrap:anywhere;word-break:break-all">model</th>'),
    # the exponent of 4.649x10^-5 pushed to the next line (a break opportunity before an inline-block)
    _defect(
        "split_exponent",
        "<td>4.649&#215;10<sup>-5</sup></td>",
        '<td style="font-family:monospace">4.649&#215;10<sup style="display:inline-block">-5</sup></td>',
    ),
    _defect("raw_eq_ref", "Figure 1: the dot.", "Figure 1: |r| of Eq. (eq-atlas-relerr)."),
    _defect("raw_role", "is small.</p>", "is small, see {numref}`fig-loss`.</p>"),
    _defect("raw_fence", "is small.</p>", "is small.</p><p>::: {note}</p>"),
    _defect("raw_glue", "is small.</p>", "is small.</p><p>{glue:figure} fig-x</p>"),
    _defect(
        "caption_code",
        "Figure 1: the dot.",
        'Figure 1: the dot for <code class="docutils literal notranslate"><span class="pre">gram_n</span></code>.',
    ),
]

EXPECTED_KIND = {
    "raw_tex": "math",
    "no_alt": "image",
    "hash_alt": "image",
    "missing_image": "image",
    "no_caption": "caption",
    "repr": "repr",
    "stderr": "output",
    "wide_table": "overflow",
    "wide_code": "overflow",
    "external": "network",
    "duplicate_table": "duplicate",
    "split_number": "split",
    "split_header": "split",
    "split_exponent": "split",
    "split_minus": "split",
    "raw_eq_ref": "markup",
    "raw_role": "markup",
    "raw_fence": "markup",
    "raw_glue": "markup",
    "caption_code": "caption-code",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not bc.chromium_available():
        msg = f"dputils.book.bookcheck cannot run: {bc.CHROMIUM} or {bc.CHROMEDRIVER} is missing; {bc.INSTALL_HINT}"
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
    (root / "tall.html").write_text(TALL)
    # as myst-parser sets MathJax up in the book: the section is ignored, only elements of class "math" are typeset
    script = (
        "<script>window.MathJax = {options: {processHtmlClass: 'tex2jax_process|mathjax_process|math|output_area'}};"
        "</script>"
        f'<script defer src="{MATHJAX}"></script>'
    )
    (root / "clean.html").write_text(CLEAN.replace("{mathjax}", script))
    for name, html in DEFECTS:
        (root / f"{name}.html").write_text(html.replace("{mathjax}", script))
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
        "https://cdn.jsdelivr.net/x.js"
    ]


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
    # a clean page is counted, not listed again (main's progress lines name every page once)
    assert "clean.html" not in out and "repr.html: repr" in out and "2 page(s), 1 with findings" in out


# ---- the layout checks of issue 28: details of the findings, and the controls of the clean page


def _details(r, kind):
    return [f.detail for f in r.findings if f.kind == kind]


def test_clean_page_controls_really_wrap(site):
    """The clean page's controls are exercised: its narrow cells do wrap (between words, and after the hyphen
    of "trade-off", and at the hyphen of "CIFAR-10"), and the check finds no split there."""
    root, server, browser = site
    bc.load(browser.driver, server.url("clean.html"))
    lines = browser.driver.execute_script(
        "const f = id => { const r = document.createRange(); r.selectNodeContents(document.getElementById(id));"
        "                  return Math.round(r.getBoundingClientRect().height / 20); };"
        "return [f('note'), f('kind'), f('set')];"
    )
    assert lines[0] >= 3 and lines[1] == 2 and lines[2] == 2, lines
    assert bc.check_tables(browser.driver) == []


def test_split_findings_show_the_break(site):
    root, server, browser = site
    num = _details(bc.check_page(browser, server, "split_number.html"), "split")
    assert len(num) == 1 and "'1|0|0|0'" in num[0] and 'cell in row 1, column "p"' in num[0], num
    assert '"Table 1: cells that wrap between words only."' in num[0]
    exp = _details(bc.check_page(browser, server, "split_exponent.html"), "split")
    assert len(exp) == 1 and "'4.649×10|^-5'" in exp[0], exp
    minus = _details(bc.check_page(browser, server, "split_minus.html"), "split")
    assert len(minus) == 1 and "'5e-|11'" in minus[0] and 'column "set"' in minus[0], minus
    head = _details(bc.check_page(browser, server, "split_header.html"), "split")
    assert len(head) == 1 and ", header: " in head[0] and "model" in head[0].replace("|", ""), head


def test_duplicate_names_the_table(site):
    root, server, browser = site
    d = _details(bc.check_page(browser, server, "duplicate_table.html"), "duplicate")
    assert len(d) == 1 and "[sigma | epsilon]" in d[0] and "shown 2 times" in d[0], d


def test_markup_leftovers():
    for raw in (
        "|r| of Eq. (eq-atlas-relerr)",
        "see {numref}`fig-loss`",
        "by {eq}`eq-x`",
        "{cite}`abadi`",
        "{glue:text}`x`",
        "::: {note}",
        "```{code-cell}",
        "N = {{ epochs }}",
        "see Fig. ??",
        "p = `wide_bands`",
        "**bold**",
        "4.6×10<sup>-5</sup>",
        "(fig-atlas)=",
        "(tab:targets)",
    ):
        assert bc.markup_leftovers(raw), raw
    for ok in (
        "the loss (eq. 3) is small",
        "sets {0, 1} and a ratio 1:2",
        "x < y and y > z",
        "a {k} index",
        "(see the table)",
        "f(x) = 2",
        "f(x)=2",
        "T = 1000; q = 0.01",
        "what?",
    ):
        assert bc.markup_leftovers(ok) == [], ok


def test_markup_and_caption_code_name_the_place(site):
    root, server, browser = site
    eq = _details(bc.check_page(browser, server, "raw_eq_ref.html"), "markup")
    assert len(eq) == 1 and "caption" in eq[0] and "(eq-atlas-relerr)" in eq[0], eq
    code = _details(bc.check_page(browser, server, "caption_code.html"), "caption-code")
    assert len(code) == 1 and "'gram_n'" in code[0] and "figure caption" in code[0], code


def test_tall_page_screenshots_in_tiles(site, tmp_path):
    """A 40,000 px page comes back as 16,000 + 16,000 + 8,000 px tiles, each band where it belongs."""
    Image = pytest.importorskip("PIL.Image")
    root, server, browser = site
    r = bc.check_page(browser, server, "tall.html", shots=tmp_path)
    assert _details(r, "screenshot") == [], r.findings
    assert [p.split("/")[-1] for p in r.screenshots] == ["tall.01.png", "tall.02.png", "tall.03.png"]
    assert [bc.png_size(p) for p in r.screenshots] == [
        (browser.width, 16000),
        (browser.width, 16000),
        (browser.width, 8000),
    ]
    ims = [Image.open(p).convert("RGB") for p in r.screenshots]
    x = browser.width // 2
    near = lambda px, want: all(abs(a - b) < 30 for a, b in zip(px, want))  # noqa: E731
    assert near(ims[0].getpixel((x, 50)), (255, 0, 0)) and near(ims[0].getpixel((x, 150)), (255, 255, 255))
    assert near(ims[1].getpixel((x, 20000 - 16000 + 50)), (0, 255, 0))
    assert near(ims[1].getpixel((x, 20000 - 16000 - 50)), (255, 255, 255))
    assert near(ims[2].getpixel((x, 8000 - 50)), (0, 0, 255)) and near(
        ims[2].getpixel((x, 8000 - 150)), (255, 255, 255)
    )
    # the page got shorter: the next run leaves no stale tiles behind
    bc.load(browser.driver, server.url("clean.html"))
    files, found = bc.screenshot(browser.driver, tmp_path / "tall.png", browser.width)
    assert files == [tmp_path / "tall.png"] and found == []
    assert sorted(p.name for p in tmp_path.glob("tall*.png")) == ["tall.png"]


SCROLLED = """<!doctype html><html><head><meta charset="utf-8"><style>body { margin: 0 }</style></head><body>
<div id="side" style="position:fixed;top:0;left:0;width:200px;height:300px;overflow:auto">
<div style="height:100px;width:600px;background:#f00"></div><div style="height:3000px;background:#fff"></div></div>
<main style="margin-left:220px;height:2000px"><article class="bd-article"><p>text</p></article></main></body></html>"""


def test_screenshot_shows_the_page_from_its_top_left_corner(site, tmp_path):
    """A sidebar left scrolled (the theme restores the previous page's scroll) is put back before the shot:
    the red band at the top-left of the scrolled box is in the picture."""
    Image = pytest.importorskip("PIL.Image")
    root, server, browser = site
    (root / "scrolled.html").write_text(SCROLLED)
    bc.load(browser.driver, server.url("scrolled.html"))
    browser.driver.execute_script(
        "const s = document.getElementById('side'); s.scrollTop = 500; s.scrollLeft = 300; window.scrollTo(0, 400);"
    )
    assert browser.driver.execute_script("return document.getElementById('side').scrollTop") == 500
    files, found = bc.screenshot(browser.driver, tmp_path / "scrolled.png", browser.width)
    assert found == []
    im = Image.open(files[0]).convert("RGB")
    assert all(abs(a - b) < 30 for a, b in zip(im.getpixel((20, 50)), (255, 0, 0))), im.getpixel((20, 50))
    assert browser.driver.execute_script("return document.getElementById('side').scrollTop") == 0


class _ShortShots:
    """A driver whose screenshots stop at 5,000 px, as Chromium's did for a too-tall window."""

    def __init__(self, height):
        self.height = height

    def execute_script(self, script):
        return self.height

    def execute_cdp_cmd(self, cmd, args):
        import base64

        return {"data": base64.b64encode(_png(args["clip"]["width"], min(args["clip"]["height"], 5000))).decode()}


def test_cut_screenshots_are_reported(tmp_path):
    files, found = bc.screenshot(_ShortShots(20000), tmp_path / "p.png", 10)
    assert [f.name for f in files] == ["p.01.png", "p.02.png"]
    msgs = [f.detail for f in found if f.kind == "screenshot"]
    assert any("is 10x5000 px, expected 10x16000" in m for m in msgs), msgs
    assert any("cover 9000 of 20000 px" in m for m in msgs), msgs
    files, found = bc.screenshot(_ShortShots(4000), tmp_path / "q.png", 10)
    assert [f.name for f in files] == ["q.png"] and found == []


def test_failing_kinds_switch(site, capsys):
    root, server, browser = site
    # every kind fails by default (the reader's kinds of issue 34 over their limits, tests/test_bookcheck_reading.py);
    # --fail-on narrows the failing kinds, and the others are then reported
    assert bc.FAIL_KINDS == set(bc.KINDS) - bc.REPORTED_ONLY and set(bc.READING_KINDS) <= set(bc.KINDS)
    res = [bc.check_page(browser, server, "split_number.html")]
    assert {f.kind for f in res[0].findings} == {"split"}
    assert bc.failures(res) == 1 and bc.failures(res, {"math"}) == 0
    assert bc.report(res, fail_kinds={"math"}) == 1
    out = capsys.readouterr().out
    assert "0 finding(s) fail the check; reported only (not in the failing kinds): split 1" in out
    assert bc.main([str(root), "--only", "split_number", "--screenshots", ""]) == 1
    assert bc.main([str(root), "--only", "split_number", "--screenshots", "", "--fail-on", "math"]) == 0
    assert bc.main([str(root), "--only", "caption_code", "--screenshots", ""]) == 1


# ---- legends over the data (matplotlib only)


@pytest.fixture
def plt():
    mpl = pytest.importorskip("matplotlib")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    # matplotlib's defaults, whatever an earlier test of this worker applied (the book's style and its figure
    # hooks change fonts and legends, which these geometry tests measure)
    with mpl.rc_context():
        mpl.rcdefaults()
        yield plt
        plt.close("all")


def _unit_axes(plt):
    fig, ax = plt.subplots(figsize=(5, 4), dpi=100)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    return fig, ax


def _legend_box_in_axes(fig, ax):
    """The legend's box in axes coordinates (0..1), clipped to the axes: the expected values are areas and
    lengths in these coordinates, not samples in display pixels."""
    fig.draw_without_rendering()
    bb = ax.get_legend().get_window_extent().transformed(ax.transAxes.inverted())
    return max(bb.x0, 0), max(bb.y0, 0), min(bb.x1, 1), min(bb.y1, 1)


def test_legend_over_scatter_grid(plt):
    import numpy as np

    fig, ax = _unit_axes(plt)
    g = (np.arange(100) + 0.5) / 100
    X, Y = np.meshgrid(g, g)
    ax.scatter(X.ravel(), Y.ravel(), s=1, label="a grid of points")
    ax.legend(loc="upper right", frameon=True)
    x0, y0, x1, y1 = _legend_box_in_axes(fig, ax)
    expected = ((g >= x0) & (g <= x1)).sum() * ((g >= y0) & (g <= y1)).sum() / g.size**2
    [o] = bc.legend_overlaps(fig)
    assert o.samples == 10000 and o.axes == 0
    assert expected > 0.02 and o.fraction == pytest.approx(expected, abs=0.003)
    assert "covers" in str(o)


def test_legend_over_a_line_by_length(plt):
    import numpy as np

    fig, ax = _unit_axes(plt)
    ax.plot([0, 1], [0.97, 0.97], label="a flat line under the legend")
    ax.plot(np.linspace(0, 1, 50), np.full(50, 0.05), label="a flat line far from it")
    ax.legend(loc="upper right")
    x0, y0, x1, y1 = _legend_box_in_axes(fig, ax)
    assert y0 < 0.97 < y1
    [o] = bc.legend_overlaps(fig, step=1.0)
    # half the drawn length is the top line, and the share of it under the box is its width
    assert o.fraction == pytest.approx((x1 - x0) / 2, abs=0.01)


def test_legend_over_bars_by_area(plt):
    fig, ax = _unit_axes(plt)
    ax.bar([(k + 0.5) / 10 for k in range(10)], [1.0] * 10, width=0.1, label="bars filling the axes")
    ax.legend(loc="center")
    x0, y0, x1, y1 = _legend_box_in_axes(fig, ax)
    [o] = bc.legend_overlaps(fig, step=1.0)
    assert o.fraction == pytest.approx((x1 - x0) * (y1 - y0), rel=0.03)


def test_legend_clear_of_the_data(plt):
    import numpy as np

    fig, ax = _unit_axes(plt)
    x = np.linspace(0, 1, 200)
    ax.plot(x, 0.3 * x, label="low line")
    ax.fill_between(x, 0, 0.2 * x, alpha=0.3, label="low band")
    ax.legend(loc="upper left")
    [o] = bc.legend_overlaps(fig)
    assert o.samples > 500 and o.covered == 0 and o.fraction == 0.0
    # outside the axes: nothing of it is over the data, even with a line through the whole axes
    fig2, ax2 = _unit_axes(plt)
    ax2.plot([0, 1], [0.5, 0.5], label="line")
    ax2.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    assert [o.fraction for o in bc.legend_overlaps(fig2)] == [0.0]


def test_legend_overlap_in_a_draw_event(plt):
    """What the figure-saving path can do: measure in a draw_event with the renderer that drew the figure."""
    import io

    import numpy as np

    fig, ax = _unit_axes(plt)
    g = (np.arange(50) + 0.5) / 50
    ax.scatter(*np.meshgrid(g, g), s=1, label="grid")
    ax.legend(loc="lower left")
    seen = []
    fig.canvas.mpl_connect("draw_event", lambda ev: seen.append(bc.legend_overlaps(ev.canvas.figure, ev.renderer)))
    fig.savefig(io.BytesIO(), format="png")
    assert seen and seen[-1][0].fraction == pytest.approx(bc.legend_overlaps(fig)[0].fraction, abs=1e-9)
    assert seen[-1][0].fraction > 0.01
    from dputils.errors import DPValueError

    with pytest.raises(DPValueError, match="step"):
        bc.legend_overlaps(fig, step=0)


def test_a_wide_table_may_scroll_in_its_own_box(site):
    """A table too wide for the column scrolls sideways inside dputils.book.tables' box and is no finding; the same
    table outside the box (DEFECTS' wide_table) sticks out and is one, and so is a code block that scrolls."""
    root, server, browser = site
    from dputils.book.tables import Table

    wide = Table([{f"column {i}": 0.123456789 * i for i in range(40)}])._repr_html_()
    assert "dpbook-scroll" in wide
    (root / "wide_box.html").write_text(CLEAN.replace("{mathjax}", "").replace("is small.</p>", "is small.</p>" + wide))
    r = bc.check_page(browser, server, "wide_box.html")
    assert [f for f in r.findings if f.kind in ("overflow", "split")] == [], r.findings
    width = browser.driver.execute_script(
        "const b = document.querySelector('.dpbook-scroll'); return [b.scrollWidth, b.clientWidth];"
    )
    assert width[0] > width[1]  # it does scroll


def test_a_finding_cut_inside_a_surrogate_pair_prints():
    """A snippet the browser cut after the first half of a math letter (U+1D465 is '\\ud835\\udc65' in UTF-16)
    must not make the report unprintable; a whole pair becomes the letter again."""
    cut = bc.Finding("overflow", "sup \ud835")
    assert str(cut).encode("utf-8") and "\ud835" not in cut.detail
    assert bc.Finding("overflow", "x = \ud835\udc65").detail == "x = \U0001d465"
