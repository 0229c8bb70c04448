"""Check the built book in a real browser: ``python -m dputils.book.bookcheck [_build/html] [--screenshots DIR]``.

The built HTML is served on a loopback ``http.server`` (in a thread) and every page is opened in headless
Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by selenium) with the network cut off: every
host name resolves to nothing and every non-loopback connection goes to a dead proxy, so a page that needs
the internet shows it. After MathJax has finished typesetting, each page is checked for

* ``math``: MathJax error nodes, or TeX left unrendered in the prose (``\\(``, ``\\[``, ``$$``, ``$``,
  ``\\command``, ``x_{...}``); MathJax that did not load on a page with math;
* ``image``: an image that did not load (``naturalWidth == 0``), or whose alt text is empty or a file
  name / hash;
* ``caption``: a content image that is not inside a ``<figure>`` with a non-empty ``<figcaption>`` (what
  myst-nb's ``glue:figure``, a cell's ``myst.figure`` metadata and the ``{figure}`` directive render);
* ``output``: stderr or traceback outputs (``div.output.stderr``, ``div.output.traceback``), warnings and
  tracebacks printed in outputs, and papermill's injected-parameters cell left visible;
* ``repr``: Python reprs in the page text such as ``PosixPath(``, ``np.float64(``, ``array(``;
* ``overflow``: prose, tables, equations, outputs or code blocks wider than the content column (an
  element that scrolls horizontally, or one that sticks out of the column);
* ``network``: any request to a URL other than the loopback server;
* ``console``: errors in the browser console (a script or file that failed to load);
* ``duplicate``: a table shown twice on a page (same header and body text);
* ``split``: a number or word drawn over more than one line in a table cell or header ("10|00" for 1000,
  "mo|del"), measured on the layout with a DOM ``Range`` over every token of every cell in one pass;
* ``markup``: role, reference or markup text left unrendered: ``{numref}``, ``{eq}``, ``{cite}``,
  ``{glue...``, ``(eq-label)``, ``:::``, a substitution, inline code in backticks, HTML tags as text;
* ``caption-code``: identifiers in code font (a ``<code>``) inside a figure or table caption;
* ``screenshot``: a screenshot tile that failed, or tiles that do not cover the whole page.

The page as its reader sees it (issue 34, the :data:`READING_KINDS`; counted in :attr:`PageResult.metrics`,
and failing when the pages checked together have more findings of a kind than :data:`READING_LIMITS` allows:
at most 20 ``digits`` cells, none of the others):

* ``table-width``: a table, or the box it scrolls in, with ``scrollWidth > clientWidth``: columns hidden
  behind a horizontal scrollbar at the window's width (1280 px by default);
* ``bare-output``: a cell output that is only ``True``, ``False``, ``None`` or ``N row(s)``;
* ``bookkeeping``: a shown code cell that is mostly bookkeeping (imports, asserts, glue, target records,
  table assembly; :func:`is_bookkeeping`), or a parameters cell shown in full;
* ``target-id``: a reproduction-target id (``T3``, ``T1.2``, ``T8d``) in the running prose (tables, code,
  outputs and maths excluded; the scorecard and API pages, :data:`TARGET_ID_PAGES`, are exempt);
* ``digits``: a table cell with a number of :data:`DIGITS_MAX` or more significant digits;
* ``code-share``: shown code taller than :data:`CODE_SHARE_MAX` of the page (on a page taller than
  :data:`CODE_SHARE_MIN_PX`).

Screenshots of every whole page go to ``--screenshots`` (default ``_build/screenshots``): one PNG, or for
a page taller than :data:`TILE_HEIGHT` one PNG per tile (``page.01.png``, ``page.02.png``, ...). The report
lists the findings per page; the exit status is 0 when no kind in :data:`FAIL_KINDS` has more findings than its
limit (:func:`limit_of`: :data:`READING_LIMITS`, else 0), 1 when one has, 2 when the browser could not be
started. ``--fail-on`` sets the failing kinds (the others are reported only), ``--limit KIND=N`` a limit; in the
code, :data:`REPORTED_ONLY` and :data:`READING_LIMITS` are the one place that decides.

Each check is a function ``check_*(driver) -> list[Finding]`` on a loaded page; the text classifiers
(:func:`tex_leftovers`, :func:`repr_leftovers`, :func:`markup_leftovers`, :func:`is_meaningful_alt`,
:func:`external_urls`) are plain functions. Legends over plotted data cannot be seen in a PNG: for those,
:func:`dputils.book.plotting.legend_overlaps` measures a matplotlib figure (the fraction of its plotted data under each legend).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import http.server
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL_HINT = (
    "headless Chromium is needed: install Debian's browser and driver with "
    "`apt-get install -y chromium chromium-driver` (and `pip install selenium`)"
)

KINDS = (
    "math",
    "image",
    "caption",
    "output",
    "repr",
    "overflow",
    "network",
    "console",
    "duplicate",
    "split",
    "markup",
    "caption-code",
    "screenshot",
    "table-width",
    "bare-output",
    "bookkeeping",
    "target-id",
    "digits",
    "code-share",
)

#: the kinds that measure the page for its reader (issue 34); they fail the check when the whole book has more
#: findings of a kind than :data:`READING_LIMITS` allows
READING_KINDS = ("table-width", "bare-output", "bookkeeping", "target-id", "digits", "code-share")

#: a table cell holding a number with this many significant digits or more is a ``digits`` finding
DIGITS_MAX = 9
#: the largest share of a page's height that shown code may take (a ``code-share`` finding above it) ...
CODE_SHARE_MAX = 0.10
#: ... on a page at least this tall (CSS px); a short page with one example is not measured
CODE_SHARE_MIN_PX = 3000
#: pages where target ids belong in the text: the scorecard and the API reference
TARGET_ID_PAGES = ("scorecard", "book/api")

# ---- what fails the check: the one place to change (issue 34's "Done when") ----------------------------------
#: The most findings of each reading kind that the pages checked together (the whole book) may have: 0 tables
#: hiding columns, 0 bare True/False/None outputs, 0 shown bookkeeping cells, 0 target ids in the running prose
#: (scorecard and API pages exempt, :data:`TARGET_ID_PAGES`), at most 20 table cells with :data:`DIGITS_MAX`+
#: significant digits, 0 pages whose shown code is over :data:`CODE_SHARE_MAX` of their height. A kind not named
#: here (every layout kind) may have none.
READING_LIMITS: dict[str, int] = {
    "table-width": 0,
    "bare-output": 0,
    "bookkeeping": 0,
    "target-id": 0,
    "digits": 20,
    "code-share": 0,
}
#: Kinds that are measured and reported but do not fail the check. Empty: every kind fails. The switch for a
#: merge where a chapter lags: name its kind here (e.g. ``frozenset({"code-share"})``), or pass ``--fail-on``.
REPORTED_ONLY: frozenset[str] = frozenset()

#: The kinds that make the check fail (exit status 1, and so ``python -m dputils book --check``) when their
#: findings exceed :func:`limit_of`; ``--fail-on`` on the command line overrides it, ``--limit KIND=N`` a limit.
FAIL_KINDS = frozenset(KINDS) - REPORTED_ONLY


def limit_of(kind: str, limits: dict[str, int] | None = None) -> int:
    """How many findings of ``kind`` the pages checked together may have (:data:`READING_LIMITS`, else 0)."""
    return int((READING_LIMITS if limits is None else limits).get(kind, 0))


#: directories of the build output that hold no pages
SKIP_DIRS = {"_static", "_sources", "_images", "_downloads", "reports", ".doctrees", "_panels_static"}


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    detail: str

    def __post_init__(self) -> None:
        # texts read from the page are UTF-16 in the browser: a snippet cut inside a surrogate pair (a math
        # letter such as U+1D465) would make the report unprintable; pairs are joined, a lone half replaced
        object.__setattr__(
            self, "detail", str(self.detail).encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        )

    def __str__(self) -> str:
        return f"[{self.kind}] {self.detail}"


@dataclasses.dataclass
class PageResult:
    page: str
    findings: list[Finding]
    screenshot: str | None = None  # the first (or only) PNG of the page
    seconds: float = 0.0
    screenshots: list[str] = dataclasses.field(default_factory=list)  # every tile, top to bottom
    metrics: dict = dataclasses.field(default_factory=dict)  # the reading measures (check_reading)

    def counts(self) -> Counter:
        return Counter(f.kind for f in self.findings)


# --------------------------------------------------------------------------------------------------------
# text classifiers (plain functions)

_TEX_PATTERNS = [
    (re.compile(r"\\[(\[]"), "TeX delimiter"),
    (re.compile(r"\$\$"), "TeX delimiter $$"),
    (re.compile(r"\$"), "dollar sign"),
    (re.compile(r"\\[A-Za-z]{2,}"), "TeX command"),
    (re.compile(r"[A-Za-z0-9)\]}][_^]\{"), "TeX sub/superscript"),
]

_REPR_PATTERN = re.compile(
    r"(?:PosixPath|WindowsPath|PurePosixPath)\("
    r"|\bnp\.(?:float|int|uint|complex|bool|str)[\w]*\("
    r"|\bnumpy\.(?:float|int|uint|bool)\w*\("
    r"|(?<![\w.])array\(\["
    r"|(?<![\w.])array\(\d"
    r"|(?<![\w.])tensor\("
    r"|<Figure size \d"
    r"|<matplotlib\.[\w.]+ object"
    r"|\bobject at 0x[0-9a-f]+"
    r"|<Axes:"
)

_WARNING_PATTERN = re.compile(r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Warning|Error): ")


def _snippet(text: str, start: int, end: int, pad: int = 30) -> str:
    s = text[max(0, start - pad) : end + pad]
    s = re.sub(r"\s+", " ", s).strip()
    return ("…" if start > pad else "") + s + ("…" if end + pad < len(text) else "")


def tex_leftovers(text: str) -> list[str]:
    """TeX that should have been typeset but is still visible in ``text`` (prose, code excluded)."""
    out, taken = [], []
    for pat, what in _TEX_PATTERNS:
        for m in pat.finditer(text):
            if any(a <= m.start() < b for a, b in taken):
                continue
            taken.append((m.start(), m.end()))
            out.append(f"{what} {m.group(0)!r}: {_snippet(text, m.start(), m.end())!r}")
    return out


def repr_leftovers(text: str) -> list[str]:
    """Python object reprs (``PosixPath(``, ``np.float64(``, ``array([``, ...) in ``text``."""
    return [f"{m.group(0)!r}: {_snippet(text, m.start(), m.end())!r}" for m in _REPR_PATTERN.finditer(text)]


_GENERIC_ALT = {
    "image",
    "img",
    "figure",
    "fig",
    "plot",
    "png",
    "svg",
    "jpg",
    "jpeg",
    "output",
    "graph",
    "chart",
    "picture",
    "photo",
    "untitled",
    "alt",
    "none",
}


def is_meaningful_alt(alt: str | None) -> bool:
    """Alt text a screen-reader user can use: not empty, not a file name or path, not a hash, not generic."""
    if alt is None:
        return False
    a = alt.strip()
    if len(a) < 4 or a.lower() in _GENERIC_ALT:
        return False
    if re.search(r"\.(png|jpe?g|svg|gif|webp|pdf)$", a, re.I) or "/" in a and " " not in a:
        return False
    if re.fullmatch(r"[0-9a-fA-F_\-.]+", a) or re.search(r"[0-9a-f]{12,}", a):
        return False
    return len(re.findall(r"[A-Za-z]{2,}", a)) >= 2  # at least two words


def external_urls(urls: Iterable[str], origin: str) -> list[str]:
    """The URLs in ``urls`` that leave ``origin`` (``http://127.0.0.1:PORT``); data:, blob: and about: are local."""
    own = urlsplit(origin)
    out = []
    for u in urls:
        s = urlsplit(u)
        if s.scheme in ("data", "blob", "about", "chrome", "chrome-extension", "devtools", "file", ""):
            continue
        if (s.scheme, s.hostname, s.port) == (own.scheme, own.hostname, own.port):
            continue
        if u not in out:
            out.append(u)
    return out


_NUMBER = re.compile(r"(?<![\w.])[-+−]?(\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+−]?\d+)?(?![\w])")


def significant_digits(token: str) -> int:
    """The significant digits of a decimal number written with a point or an exponent (``0.000123456789`` has 9,
    ``1.2e-05`` 2, ``3.0`` 2); an integer without either (a count, a seed, 14063 steps) is exact: 0."""
    m = _NUMBER.fullmatch(token.strip())
    if not m or not re.search(r"[.eE]", token):
        return 0
    digits = m.group(1).replace(",", "").replace(".", "").lstrip("0")
    return len(digits)


def long_numbers(text: str, limit: int = DIGITS_MAX) -> list[str]:
    """The numbers in ``text`` with ``limit`` or more significant digits (:func:`significant_digits`)."""
    return [m.group(0) for m in _NUMBER.finditer(text) if significant_digits(m.group(0)) >= limit]


_BARE = re.compile(r"\(?\s*(?:True|False|None)(?:\s*,\s*(?:True|False|None))*\s*,?\s*\)?|\d+ rows?(?:\(s\))?")


def is_bare_output(text: str) -> bool:
    """An output that tells the reader nothing: ``True``, ``False``, ``None`` (or a tuple of them), ``3 row(s)``."""
    t = text.strip()
    return bool(t) and _BARE.fullmatch(t) is not None


_TARGET_ID = re.compile(r"(?<![\w.\-])T\d+[a-z]?(?:\.\d+)?(?![\w])")


def target_ids(text: str) -> list[str]:
    """Reproduction-target ids (``T3``, ``T1.2``, ``T8d``, ``T12b.3``) in ``text``."""
    return _TARGET_ID.findall(text)


_BOOKKEEPING_CALL = re.compile(
    r"\bglue\w*\s*\(|\.record\w*\s*\(|\bTargets\s*\(|\btg\.\w+|\bledger\b|\bTable\s*\(|\btable\s*\(|\btables\.\w+"
    r"|\bsave_results?\s*\(|\bresults?\.(?:save|write|record|glue)\w*\s*\(|\.to_csv\s*\(|\bjson\.dump"
)


def is_bookkeeping(source: str, tags: Iterable[str] = ()) -> bool:
    """A code cell the reader does not need to see: a ``parameters`` cell, or one whose top-level statements are
    mostly (half or more) bookkeeping: imports, ``assert``, and statements that glue values, record targets,
    assemble or save tables and results (:data:`_BOOKKEEPING_CALL`). A cell that is not Python (a magic) is
    judged line by line."""
    import ast

    if {"parameters", "injected-parameters"} & set(tags):
        return True
    try:
        tree = ast.parse(source)
        stmts = [ast.get_source_segment(source, n) or "" for n in tree.body]
        kinds = [
            isinstance(n, ast.Import | ast.ImportFrom | ast.Assert) or bool(_BOOKKEEPING_CALL.search(seg))
            for n, seg in zip(tree.body, stmts, strict=True)
        ]
    except SyntaxError:
        lines = [ln for ln in source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        kinds = [
            bool(re.match(r"\s*(?:import\s|from\s+\S+\s+import\s|assert\s)", ln) or _BOOKKEEPING_CALL.search(ln))
            for ln in lines
        ]
    return bool(kinds) and 2 * sum(kinds) >= len(kinds)


# --------------------------------------------------------------------------------------------------------
# the loopback server and the browser


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: D401 - silence the access log
        pass


@dataclasses.dataclass
class Server:
    root: Path
    httpd: http.server.ThreadingHTTPServer
    thread: threading.Thread

    @property
    def origin(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, rel: str) -> str:
        return f"{self.origin}/{rel.lstrip('/')}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(root: str | os.PathLike) -> Server:
    """Serve ``root`` on ``127.0.0.1`` (a free port) from a daemon thread."""
    root = Path(root).resolve()
    handler = functools.partial(_QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, name="bookcheck-http", daemon=True)
    t.start()
    return Server(root, httpd, t)


class BrowserMissing(RuntimeError):
    pass


def chromium_available() -> bool:
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


@dataclasses.dataclass
class Browser:
    driver: object
    profile_dir: str
    width: int

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile_dir, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start_browser(width: int = 1280, height: int = 1000) -> Browser:
    """Headless Chromium with a fresh profile and no network apart from loopback."""
    if not chromium_available():
        raise BrowserMissing(f"{CHROMIUM} or {CHROMEDRIVER} not found: {INSTALL_HINT}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise BrowserMissing(f"selenium is not installed: {INSTALL_HINT}") from e
    profile = tempfile.mkdtemp(prefix="bookcheck-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
        # no network: names resolve to nothing, connections go to a dead proxy; loopback stays direct
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
        "--proxy-server=http://127.0.0.1:9",
        "--proxy-bypass-list=127.0.0.1;localhost",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    except Exception:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    driver.set_script_timeout(120)
    driver.set_page_load_timeout(120)
    driver.set_window_size(width, height)
    return Browser(driver, profile, width)


# --------------------------------------------------------------------------------------------------------
# page loading

_WAIT_MATHJAX = r"""
const done = arguments[arguments.length - 1];
const t0 = Date.now();
const hasMath = () => document.querySelector('.math, mjx-container, .MathJax') !== null;
(function poll() {
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) {
    mj.startup.promise.then(() => (document.fonts ? document.fonts.ready : Promise.resolve()))
      .then(() => done({state: 'typeset', math: hasMath()}), e => done({state: 'error: ' + e, math: hasMath()}));
  } else if (Date.now() - t0 > (hasMath() ? 15000 : 1500)) {
    done({state: mj ? 'no startup' : 'absent', math: hasMath()});
  } else {
    setTimeout(poll, 100);
  }
})();
"""


def load(driver, url: str) -> dict:
    """Open ``url``, wait for the load event, MathJax's typesetting and the web fonts; return MathJax's state."""
    driver.get(url)
    t0 = time.time()
    while driver.execute_script("return document.readyState") != "complete" and time.time() - t0 < 60:
        time.sleep(0.1)
    return driver.execute_async_script(_WAIT_MATHJAX)


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for: the DevTools network log (drained) plus the resource-timing entries."""
    urls = []
    try:
        for entry in driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                urls.append(msg["params"]["request"]["url"])
    except Exception:  # a driver without the performance log
        pass
    urls += driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)") or []
    return urls


# --------------------------------------------------------------------------------------------------------
# the checks: each takes a driver with a loaded page and returns findings

_JS_HELPERS = r"""
const column = () => ['article.bd-article', 'main article', '[role=main]', 'main']
  .map(s => document.querySelector(s)).find(e => e) || document.body;
const SKIP_CODE = 'script, style, noscript, template, textarea, pre, code, kbd, samp, mjx-container, '
                + '.cell_input, .highlight, .MathJax, .MathJax_Preview';
function texts(root, skip) {
  const out = [];
  const w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let n;
  while ((n = w.nextNode())) {
    const el = n.parentElement;
    if (!el || (skip && el.closest(skip))) continue;
    if (n.nodeValue.trim()) out.push(n.nodeValue);
  }
  return out;
}
function describe(el) {
  let d = el.tagName.toLowerCase();
  if (el.id) d += '#' + el.id;
  const cls = (typeof el.className === 'string' ? el.className : '').trim().split(/\s+/).filter(Boolean).slice(0, 3);
  if (cls.length) d += '.' + cls.join('.');
  const sec = el.closest('section[id]');
  const txt = (el.innerText || el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60);
  return d + (sec ? ' in #' + sec.id : '') + (txt ? ' "' + txt + '"' : '');
}
"""


def _js(driver, body: str):
    """Run ``body`` (a function body that returns a value) with the helpers; the value comes back as JSON."""
    return json.loads(driver.execute_script(_JS_HELPERS + "return JSON.stringify((() => {" + body + "})());"))


def check_math(driver, mathjax_state: dict | None = None) -> list[Finding]:
    """MathJax error nodes, TeX left in the prose, and MathJax missing on a page with math."""
    found = []
    if mathjax_state and mathjax_state.get("math") and mathjax_state.get("state") != "typeset":
        found.append(Finding("math", f"MathJax did not typeset this page ({mathjax_state.get('state')})"))
    errs = _js(
        driver,
        r"""
      return Array.from(document.querySelectorAll('mjx-merror, .MathJax_Error, [data-mjx-error]'))
        .map(e => (e.getAttribute('data-mjx-error') || e.textContent || '').slice(0, 120));
    """,
    )
    found += [Finding("math", f"MathJax error: {e!r}") for e in errs]
    chunks = _js(driver, "return texts(document.body, SKIP_CODE);")
    # one string per text node: a delimiter split over nodes is still caught by the per-node $ and \cmd rules
    for t in chunks:
        found += [Finding("math", f"unrendered {x}") for x in tex_leftovers(t)]
    return found


def check_images(driver) -> list[Finding]:
    """Images that did not load, and images without meaningful alt text."""
    imgs = _js(
        driver,
        r"""
      return Array.from(document.images).filter(i => !i.closest('mjx-container')).map(i => ({
        src: i.getAttribute('src') || '', alt: i.getAttribute('alt'), complete: i.complete, w: i.naturalWidth,
        hidden: i.getAttribute('aria-hidden') === 'true' || i.getAttribute('role') === 'presentation'}));
    """,
    )
    found = []
    for im in imgs:
        name = im["src"] if not im["src"].startswith("data:") else im["src"][:40] + "…"
        if im["w"] == 0:
            found.append(Finding("image", f"image did not load: {name}"))
        if not im["hidden"] and not is_meaningful_alt(im["alt"]):
            found.append(Finding("image", f"no meaningful alt text ({im['alt']!r}): {name}"))
    return found


def check_captions(driver) -> list[Finding]:
    """Every image in the content column sits in a ``<figure>`` with a non-empty ``<figcaption>``."""
    bad = _js(
        driver,
        r"""
      return Array.from(column().querySelectorAll('img')).filter(i => !i.closest('mjx-container')).filter(i => {
        const fig = i.closest('figure');
        const cap = fig && fig.querySelector('figcaption');
        return !(cap && cap.textContent.trim().length > 0);
      }).map(i => {
        const sec = i.closest('section[id]');
        return (i.getAttribute('src') || '').split('/').pop() + (sec ? ' in #' + sec.id : '');
      });
    """,
    )
    return [Finding("caption", f"figure without caption: {b}") for b in bad]


def check_outputs(driver) -> list[Finding]:
    """stderr and traceback outputs, warnings printed in outputs, a visible papermill injected-parameters cell."""
    res = _js(
        driver,
        r"""
      const pick = sel => Array.from(document.querySelectorAll(sel))
        .map(e => (e.innerText || e.textContent).replace(/\s+/g, ' ').trim().slice(0, 100));
      const outputs = Array.from(document.querySelectorAll('.cell_output, .output'))
        .filter(e => !e.parentElement.closest('.cell_output, .output'))
        .map(e => { const c = e.cloneNode(true);
                    c.querySelectorAll('.stderr, .traceback').forEach(x => x.remove()); return c.textContent; });
      const injected = Array.from(document.querySelectorAll('.tag_injected-parameters'))
        .filter(c => { const i = c.querySelector('.cell_input') || c;
                       return i.checkVisibility ? i.checkVisibility() : i.offsetParent !== null; }).length;
      return {stderr: pick('.output.stderr, .stderr'), traceback: pick('.output.traceback, .traceback'),
              outputs: outputs, injected: injected};
    """,
    )
    found = [Finding("output", f"stderr output: {t!r}") for t in dict.fromkeys(res["stderr"])]
    found += [Finding("output", f"traceback output: {t!r}") for t in dict.fromkeys(res["traceback"])]
    for text in res["outputs"]:
        for m in _WARNING_PATTERN.finditer(text):
            found.append(
                Finding("output", f"warning/traceback text in an output: {_snippet(text, m.start(), m.end())!r}")
            )
    if res["injected"]:
        found.append(Finding("output", f"papermill's injected-parameters cell is visible ({res['injected']}x)"))
    return found


def check_reprs(driver) -> list[Finding]:
    """Python reprs in what the reader sees: prose and outputs (cell sources excluded)."""
    chunks = _js(
        driver, "return texts(document.body, 'script, style, noscript, template, .cell_input, mjx-container');"
    )
    return [Finding("repr", f"Python repr {x}") for t in chunks for x in repr_leftovers(t)]


def check_overflow(driver) -> list[Finding]:
    """Elements wider than the content column: horizontal scrollers (code, outputs, equations) and elements that
    stick out of the column. A table's own scroll box (``dpbook-scroll`` of :mod:`dputils.book.tables`, or the theme's
    ``pst-scrollable-table-container``) may scroll: a wide table scrolls rather than break a number inside a
    cell (the ``split`` check)."""
    res = _js(
        driver,
        r"""
      const col = column();
      const right = col.getBoundingClientRect().right, colW = col.clientWidth;
      const out = [];
      const flagged = new Set();
      const under = el => { for (let p = el.parentElement; p && p !== col; p = p.parentElement)
                              if (flagged.has(p)) return true; return false; };
      for (const el of col.querySelectorAll('*')) {
        if (el.closest('mjx-assistive-mml, .visually-hidden, .sr-only, script, style') || under(el)) continue;
        const cs = getComputedStyle(el);
        if (cs.display === 'none' || cs.position === 'fixed' || cs.position === 'absolute') continue;
        // a wide table may scroll sideways in its own box (issue 28: never break a number to fit); nothing else
        // may. What is inside such a box is clipped by it (the box itself must still fit the column)
        const BOX = '.dpbook-scroll, .pst-scrollable-table-container';
        if (el.parentElement && el.parentElement.closest(BOX)) continue;
        const scrolls = !el.matches(BOX) && (cs.overflowX === 'auto' || cs.overflowX === 'scroll')
                        && el.scrollWidth > el.clientWidth + 1;
        const r = el.getBoundingClientRect();
        const sticks = r.width > 0 && r.right > right + 1;
        if (scrolls || sticks) {
          flagged.add(el);
          const where = el.closest('.cell_input') ? 'code cell' : el.closest('.cell_output, .output') ? 'output'
            : el.closest('mjx-container, .math') ? 'equation' : el.closest('table, .pst-scrollable-table-container')
            || el.querySelector('table') ? 'table' : el.closest('pre, .highlight') ? 'code block' : 'prose';
          out.push({where: where, what: describe(el), scroll: scrolls, width: scrolls ? el.scrollWidth : Math.round(r.width),
                    shown: scrolls ? el.clientWidth : colW});
        }
      }
      return {column: colW, items: out};
    """,
    )
    return [
        Finding(
            "overflow",
            f"{i['where']} {'scrolls' if i['scroll'] else 'sticks out'}: {i['width']} px wide in "
            f"{i['shown']} px ({res['column']} px column): {i['what']}",
        )
        for i in res["items"]
    ]


def check_network(urls: Iterable[str], origin: str) -> list[Finding]:
    """Requests that leave the loopback server."""
    return [Finding("network", f"external request: {u}") for u in external_urls(urls, origin)]


#: console messages that say nothing about the book: the missing favicon; Jupyter Book 1 registering
#: sphinx-thebe's inline config script twice (the second ``const`` fails, the first has set the values, and
#: thebe is never launched here); pydata-sphinx-theme's note on a first visit with no stored colour mode
IGNORED_CONSOLE = ("favicon.ico", "Identifier 'THEBE_JS_URL' has already been declared", "Got invalid theme mode")


def check_console(driver) -> list[Finding]:
    """Severe browser-console messages (a failed script, a missing file), apart from :data:`IGNORED_CONSOLE`."""
    try:
        logs = driver.get_log("browser")
    except Exception:
        return []
    return [
        Finding("console", e["message"][:200])
        for e in logs
        if e.get("level") == "SEVERE" and not any(x in e.get("message", "") for x in IGNORED_CONSOLE)
    ]


# --------------------------------------------------------------------------------------------------------
# layout checks of tables and captions (one JavaScript pass per page each)

_JS_TABLES = r"""
const clean = s => (s || '').replace(/\s+/g, ' ').trim();
const rendered = el => el.getClientRects().length > 0;
const tables = Array.from(column().querySelectorAll('table')).filter(t =>
  !t.closest('pre, .highlight, .highlighttable, .cell_input, mjx-container, script, template') && rendered(t));
function tableName(t, i) {
  let name = t.caption ? clean(t.caption.textContent) : '';
  if (!name) { const fig = t.closest('figure, .figure');
               const fc = fig && fig.querySelector('figcaption, .caption');
               if (fc) name = clean(fc.textContent); }
  const first = t.tHead && t.tHead.rows.length ? t.tHead.rows[0] : t.rows[0];
  const head = first ? Array.from(first.cells).map(c => clean(c.textContent)).join(' | ') : '';
  const sec = t.closest('section[id]');
  return 'table ' + (i + 1) + (name ? ' "' + name.slice(0, 80) + '"' : ' [' + head.slice(0, 80) + ']')
         + (sec ? ' in #' + sec.id : '');
}
// ---- a table shown twice: same header and body text
const seen = new Map();
tables.forEach((t, i) => {
  const rows = Array.from(t.rows).map(r => Array.from(r.cells).map(c => clean(c.textContent)).join('\t'));
  if (rows.length < 2 || !rows.slice(1).join('').trim()) return;
  const sig = rows.join('\n');
  if (!seen.has(sig)) seen.set(sig, []);
  seen.get(sig).push({name: tableName(t, i), rows: t.rows.length,
                      top: Math.round(t.getBoundingClientRect().top + scrollY),
                      height: Math.round(t.getBoundingClientRect().height)});
});
const duplicates = Array.from(seen.values()).filter(g => g.length > 1);
// ---- a number or word drawn over more than one line in a cell
const blockOf = new Map();
function block(el) {
  for (let e = el; e; e = e.parentElement) {
    if (e.tagName === 'TD' || e.tagName === 'TH') return e;
    let d = blockOf.get(e);
    if (d === undefined) { d = getComputedStyle(e).display; blockOf.set(e, d); }
    if (!d.startsWith('inline') && d !== 'contents') return e;
  }
  return null;
}
const range = document.createRange();
function rectsOf(pieces, a, b) {  // client rects of the characters [a, b) of a cell's text, in order
  const out = [];
  for (const p of pieces) {
    if (p.end <= a || p.start >= b) continue;
    range.setStart(p.node, Math.max(a, p.start) - p.start);
    range.setEnd(p.node, Math.min(b, p.end) - p.start);
    for (const r of range.getClientRects()) if (r.width > 0.5 && r.height > 0.5) out.push(r);
  }
  return out;
}
function lines(rects) {  // a new line: a box that starts left of where the previous one ended, and lower
  let n = rects.length ? 1 : 0;
  for (let k = 1; k < rects.length; k++) {
    const p = rects[k - 1], r = rects[k];
    if (r.left < p.right - 1 && r.top > p.top + 0.5 * Math.min(p.height, r.height)) n++;
  }
  return n;
}
// where a token may break: after a hyphen before a letter ("trade-|off", "1-|based") or after a word of two
// letters or more ("CIFAR-|10"), never in a number ("1e-5", "10^-5"); after an en dash ("0–|3"); after a
// slash before a letter; around an em dash
const BREAK = /(?<=[-\u2010])(?=\p{L})|(?<=\p{L}{2}[-\u2010])(?=\S)|(?<=\u2013)|(?<=\/)(?=\p{L})|(?<=\u2014)|(?=\u2014)/gu;
const splits = [];
let tokens = 0, cells = 0;
tables.forEach((t, ti) => {
  const headRow = t.tHead && t.tHead.rows.length ? t.tHead.rows[t.tHead.rows.length - 1] : null;
  const colName = k => headRow && headRow.cells[k] ? clean(headRow.cells[k].textContent) : '';
  let name = null;
  for (const row of t.rows) for (const cell of row.cells) {
    cells++;
    const pieces = []; let s = '', prevBlock = null, gap = false;
    // typeset maths, hidden text and nested tables are skipped and end a token (as a <br> and a new block do)
    const w = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT, {acceptNode: n => {
      if (n.nodeType === 1 && n.matches('mjx-container, script, style, .visually-hidden, .sr-only, mjx-assistive-mml, '
                                        + 'table')) {  // a nested table is measured as a table of its own
        gap = true; return NodeFilter.FILTER_REJECT; }
      return NodeFilter.FILTER_ACCEPT; }});
    let n;
    while ((n = w.nextNode())) {
      if (n.nodeType === 1) { if (n.tagName === 'BR') s += ' '; continue; }
      if (!n.nodeValue) continue;
      const b = block(n.parentElement);
      if (gap || (prevBlock !== null && b !== prevBlock)) s += ' ';
      gap = false;
      prevBlock = b;
      pieces.push({node: n, start: s.length, end: s.length + n.nodeValue.length});
      s += n.nodeValue;
    }
    const bad = [];
    for (const m of s.matchAll(/\S+/g)) {
      const tok = m[0];
      if (tok.length < 2 || !/[\p{L}\p{N}]/u.test(tok)) continue;
      tokens++;
      const cuts = [0, ...Array.from(tok.matchAll(BREAK), x => x.index).filter(x => x > 0), tok.length];
      let broken = false;
      for (let k = 1; k < cuts.length && !broken; k++) {
        if (cuts[k] - cuts[k - 1] < 2) continue;
        if (lines(rectsOf(pieces, m.index + cuts[k - 1], m.index + cuts[k])) > 1) broken = true;
      }
      if (!broken) continue;
      // show where it broke: a '|' before each character that starts a new line
      let shown = '', prev = null, prevSup = null;
      for (let c = 0; c < tok.length; c++) {
        const rs = rectsOf(pieces, m.index + c, m.index + c + 1);
        if (!rs.length) { shown += tok[c]; continue; }
        if (prev && lines([prev, rs[0]]) > 1) shown += '|';
        const sup = pieces.find(p => p.start <= m.index + c && m.index + c < p.end).node.parentElement.closest('sup');
        if (sup && sup !== prevSup) shown += '^';
        shown += tok[c]; prev = rs[rs.length - 1]; prevSup = sup;
      }
      bad.push(shown);
    }
    if (bad.length) {
      if (name === null) name = tableName(t, ti);
      const isHead = cell.tagName === 'TH' && (row.parentElement.tagName === 'THEAD' || !headRow);
      const where = isHead ? 'header' : 'cell in row ' + (row.sectionRowIndex + 1)
        + (colName(cell.cellIndex) ? ', column "' + colName(cell.cellIndex).slice(0, 40) + '"' : '');
      splits.push({table: name, where: where, tokens: bad, text: clean(cell.textContent).slice(0, 80),
                   width: Math.round(cell.getBoundingClientRect().width)});
    }
  }
});
return {duplicates: duplicates, splits: splits, tables: tables.length, cells: cells, tokens: tokens};
"""


def check_tables(driver) -> list[Finding]:
    """Tables in the layout: a table shown twice on the page (``duplicate``: same header and body text), and a
    number or word drawn over more than one line in a header or body cell (``split``).

    One JavaScript pass measures every whitespace-separated token of every rendered table cell with a DOM
    ``Range``: its ``getClientRects()`` boxes, in order, start a new line where a box begins left of the end
    of the previous one and lower down. A token may still wrap after a hyphen that comes before a letter or
    after a word of two letters or more (``trade-|off``, ``1-|based``, ``CIFAR-|10``, but never in ``5e-11``
    or ``10^-5``), after an en dash (``0–|3``), after a slash before a letter (``a/|b``) and around an em
    dash; a number never.
    A superscript (the exponent of ``4.649×10<sup>-5</sup>``) is part of its token; typeset maths, a ``<br>``
    and a new block end one. The report shows the breaks as ``|`` ("10|00").
    """
    res = _js(driver, _JS_TABLES)
    found = []
    for group in res["duplicates"]:
        first = group[0]
        where = ", ".join(f"y = {g['top']} px" for g in group)
        found.append(
            Finding(
                "duplicate",
                f"{first['name']} ({first['rows']} rows, {first['height']} px) is shown "
                f"{len(group)} times on the page ({where})",
            )
        )
    for c in res["splits"]:
        toks = ", ".join(repr(t) for t in c["tokens"])
        found.append(
            Finding(
                "split", f"{c['table']}, {c['where']}: {toks} broken over lines in a {c['width']} px cell {c['text']!r}"
            )
        )
    return found


_MARKUP_PATTERN = re.compile(
    r"\{[a-z][\w:-]*\}`[^`\n]{0,80}`?"  # any {role}`target`
    r"|\{(?:numref|ref|eq|cite(?::\w+)?|footcite|doc|download|glue(?::\w+)?|term|math|abbr|prf:ref|sub-ref|index"
    r"|label|figure|table|code-cell|code-block|admonition|note|warning|dropdown)\}"  # a role or directive name
    r"|\{glue\b"  # {glue:figure} and the like
    r"|\((?:eq|fig|tab|table|sec|thm|lem|def|prop|cor|alg|app|ch|chap|fn|note)[-:_][\w:.-]+\)"  # (eq-label)
    r"|(?:^|\n)\s*\([\w-]+\)="  # a MyST target "(label)=" at a line's start
    r"|:{3,}|`{3,}"  # fences
    r"|\{\{\s*[\w.-]+\s*\}\}"  # a substitution
    r"|\?\?+"  # Sphinx's unresolved number
    r"|`[^`\s][^`\n]{0,80}`"  # inline code left in backticks
    r"|\*\*[^*\s][^*\n]{0,80}\*\*"  # bold left in asterisks
    r"|</?(?:sup|sub|br|b|i|em|strong|code|span|div|p|table|tr|td|th|a)\b[^<>]{0,80}>"  # HTML shown as text
)


def markup_leftovers(text: str) -> list[str]:
    """MyST/Sphinx/HTML markup that the reader sees as text: roles (``{numref}``, ``{eq}``, ``{cite}``,
    ``{glue...``), unresolved labels (``(eq-atlas-relerr)``, ``(label)=``), fences (``:::``, triple
    backticks), substitutions, ``??``, inline code or bold left in backticks/asterisks, HTML tags as text."""
    return [f"{m.group(0)!r}: {_snippet(text, m.start(), m.end())!r}" for m in _MARKUP_PATTERN.finditer(text)]


def check_markup(driver) -> list[Finding]:
    """Raw role/reference/markup text in the content column (code and cell sources excluded)."""
    res = _js(
        driver,
        r"""
      const SUSPECT = /[{}`<>=]|:::|\?\?|\*\*|\(\w+[-:_]/;  // a coarse filter; the patterns are applied in Python
      const out = [];
      const w = document.createTreeWalker(column(), NodeFilter.SHOW_TEXT);
      let n;
      while ((n = w.nextNode())) {
        const el = n.parentElement;
        if (!el || !SUSPECT.test(n.nodeValue) || el.closest(SKIP_CODE)) continue;
        const cap = el.closest('figcaption, caption, .caption');
        const tab = el.closest('table');
        const sec = el.closest('section[id]');
        const where = cap ? 'caption "' + (cap.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60) + '"'
                    : tab ? 'table' : 'prose';
        out.push({text: n.nodeValue, where: where + (sec ? ' in #' + sec.id : '')});
      }
      return out;
    """,
    )
    return [Finding("markup", f"raw markup in {c['where']}: {x}") for c in res for x in markup_leftovers(c["text"])]


def check_caption_code(driver) -> list[Finding]:
    """Identifiers in code font (a ``<code>``) inside a figure or table caption: the reader needs the value or
    the meaning, not the program's name for it."""
    res = _js(
        driver,
        r"""
      const caps = Array.from(column().querySelectorAll('figcaption, caption, .caption'))
        .filter(c => !c.parentElement.closest('figcaption, caption, .caption'));
      return caps.map(c => ({caption: (c.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 90),
                             code: Array.from(c.querySelectorAll('code, kbd, samp, tt, .literal'))
                                     .filter(e => !e.parentElement.closest('code, kbd, samp, tt, .literal'))
                                     .map(e => e.textContent.trim()).filter(Boolean),
                             kind: c.closest('table') ? 'table' : 'figure'}))
                 .filter(c => c.code.length);
    """,
    )
    return [
        Finding(
            "caption-code", f"code font in a {c['kind']} caption: {', '.join(map(repr, c['code']))} in {c['caption']!r}"
        )
        for c in res
    ]


_JS_READING = r"""
const clean = s => (s || '').replace(/\s+/g, ' ').trim();
const col = column();
const shown = el => el.getClientRects().length > 0
  && (el.checkVisibility ? el.checkVisibility({visibilityProperty: true}) : el.offsetParent !== null);
const top = el => Math.round(el.getBoundingClientRect().top + scrollY);
const name = t => {
  let n = t.caption ? clean(t.caption.textContent) : '';
  if (!n) { const fig = t.closest('figure, .figure'); const fc = fig && fig.querySelector('figcaption, .caption');
            if (fc) n = clean(fc.textContent); }
  if (!n) { const first = t.tHead && t.tHead.rows.length ? t.tHead.rows[0] : t.rows[0];
            n = first ? '[' + Array.from(first.cells).map(c => clean(c.textContent)).join(' | ') + ']' : ''; }
  const sec = t.closest('section[id]');
  return n.slice(0, 80) + (sec ? ' in #' + sec.id : '');
};
// ---- tables whose columns hide behind a scrollbar: the table, or a box around it in the column, scrolls
const tables = Array.from(col.querySelectorAll('table')).filter(t =>
  !t.closest('pre, .highlight, .highlighttable, .cell_input, mjx-container, script, template') && shown(t));
const wide = [];
for (const t of tables) {
  let box = null;
  for (let e = t; e && e !== col.parentElement; e = e.parentElement) {
    if (e.scrollWidth > e.clientWidth + 1 && (e === t || ['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX))) {
      box = e; break;
    }
  }
  if (box) wide.push({name: name(t), width: box.scrollWidth, shown: box.clientWidth, top: top(t)});
}
const cells = [];
tables.forEach(t => { for (const row of t.rows) for (const c of row.cells)
  cells.push({text: clean(c.innerText || c.textContent), table: name(t)}); });
// ---- outputs, each as a whole (a nested output is part of its cell's)
const outputs = Array.from(col.querySelectorAll('.cell_output > *')).filter(shown)
  .map(e => ({text: (e.innerText || e.textContent || ''), top: top(e)}));
// ---- shown code cells, their tags and heights
const code = Array.from(col.querySelectorAll('.cell_input')).filter(shown).map(e => {
  const cell = e.closest('.cell');
  const tags = cell ? Array.from(cell.classList).filter(c => c.startsWith('tag_')).map(c => c.slice(4)) : [];
  const pre = e.querySelector('pre');
  return {text: (pre ? pre.textContent : e.textContent) || '', tags: tags,
          height: Math.round(e.getBoundingClientRect().height), top: top(e)};
});
// ---- running prose: text outside code, tables, outputs and maths
const SKIP = SKIP_CODE + ', table, .cell_output, .output, nav, .toctree-wrapper, .headerlink, .visually-hidden';
const prose = [];
const w = document.createTreeWalker(col, NodeFilter.SHOW_TEXT);
let n;
while ((n = w.nextNode())) {
  const el = n.parentElement;
  if (!el || !/T\d/.test(n.nodeValue) || el.closest(SKIP) || !shown(el)) continue;
  const sec = el.closest('section[id]');
  prose.push({text: n.nodeValue, where: sec ? '#' + sec.id : 'page'});
}
const colRect = col.getBoundingClientRect();
return {wide: wide, cells: cells, outputs: outputs, code: code, prose: prose, tables: tables.length,
        height: Math.round(colRect.height)};
"""


def check_reading(driver, page: str = "") -> tuple[list[Finding], dict]:
    """The page for its reader (issue 34): findings of the :data:`READING_KINDS` and their counts.

    One JavaScript pass measures, in the content column: every rendered table and the boxes around it (a
    ``table-width`` finding where one scrolls sideways: ``scrollWidth > clientWidth``), every table cell's
    text (``digits``: :func:`long_numbers`), every shown cell output (``bare-output``: :func:`is_bare_output`),
    every shown code cell's source, tags and height (``bookkeeping``: :func:`is_bookkeeping`; ``code-share``:
    their summed height over the column's), and the running prose (``target-id``: :func:`target_ids`, except on
    the pages of :data:`TARGET_ID_PAGES`). A collapsed (``hide-input``) or removed cell is not shown.

    Returns the findings and the metrics: ``tables``, ``wide_tables``, ``bare_outputs``, ``code_cells``,
    ``bookkeeping_cells``, ``target_ids``, ``long_number_cells``, ``code_px``, ``page_px``, ``code_share``."""
    res = _js(driver, _JS_READING)
    found = [
        Finding(
            "table-width",
            f'table "{t["name"]}" is {t["width"]} px wide in a {t["shown"]} px box: columns hidden behind a '
            f"scrollbar (y = {t['top']} px)",
        )
        for t in res["wide"]
    ]
    bare = [o for o in res["outputs"] if is_bare_output(o["text"])]
    found += [Finding("bare-output", f"output {o['text'].strip()!r} (y = {o['top']} px)") for o in bare]
    books = [c for c in res["code"] if is_bookkeeping(c["text"], c["tags"])]
    for c in books:
        first = next((ln.strip() for ln in c["text"].splitlines() if ln.strip()), "")
        tags = f" [{', '.join(c['tags'])}]" if c["tags"] else ""
        found.append(
            Finding("bookkeeping", f"shown code cell{tags}, {c['height']} px (y = {c['top']} px): {first[:70]!r}")
        )
    ids = []
    if not any(x in page for x in TARGET_ID_PAGES):
        for p in res["prose"]:
            for tid in target_ids(p["text"]):
                ids.append(tid)
                found.append(
                    Finding("target-id", f"{tid} in the prose of {p['where']}: {_snippet(p['text'], 0, 0, 60)!r}")
                )
    longs = 0
    for c in res["cells"]:
        nums = long_numbers(c["text"])
        if nums:
            longs += 1
            found.append(Finding("digits", f'{", ".join(nums[:3])} in table "{c["table"]}"'))
    code_px = sum(c["height"] for c in res["code"])
    share = code_px / res["height"] if res["height"] else 0.0
    if share > CODE_SHARE_MAX and res["height"] >= CODE_SHARE_MIN_PX:
        found.append(
            Finding(
                "code-share",
                f"shown code is {share:.0%} of the page's height ({code_px} of {res['height']} px, "
                f"{len(res['code'])} cells; at most {CODE_SHARE_MAX:.0%})",
            )
        )
    metrics = {
        "tables": res["tables"],
        "wide_tables": len(res["wide"]),
        "bare_outputs": len(bare),
        "code_cells": len(res["code"]),
        "bookkeeping_cells": len(books),
        "target_ids": len(ids),
        "long_number_cells": longs,
        "code_px": code_px,
        "page_px": res["height"],
        "code_share": round(share, 4),
    }
    return found, metrics


def reading_line(m: dict) -> str:
    """One line of a page's reading metrics (:func:`check_reading`)."""
    if not m:
        return ""
    return (
        f"reading: {m['wide_tables']} of {m['tables']} table(s) hide columns, {m['bare_outputs']} bare output(s), "
        f"{m['bookkeeping_cells']} of {m['code_cells']} shown code cell(s) bookkeeping, {m['target_ids']} target "
        f"id(s) in prose, {m['long_number_cells']} cell(s) with {DIGITS_MAX}+ digits, shown code "
        f"{m['code_share']:.0%} of {m['page_px']} px"
    )


#: the tallest screenshot taken in one piece (CSS px): a taller page is tiled (Chromium's textures stop at 16,384 px)
TILE_HEIGHT = 16000


def png_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) of a PNG, read from its IHDR header."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"not a PNG: {path}")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _page_height(driver) -> int:
    return int(
        driver.execute_script(
            "return Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)"
        )
    )


_RESET_SCROLL = """
window.scrollTo(0, 0);
let n = 0;
for (const el of document.querySelectorAll('*')) {
  if (el.scrollTop > 0 || el.scrollLeft > 0) { el.scrollTop = 0; el.scrollLeft = 0; n += 1; }
}
return n;
"""


def reset_scroll(driver) -> int:
    """Scroll the window and every scrolled element back to the top-left corner; the number of elements reset."""
    return int(driver.execute_script(_RESET_SCROLL) or 0)


def screenshot(driver, path: Path, width: int, tile: int = TILE_HEIGHT) -> tuple[list[Path], list[Finding]]:
    """Screenshots of the whole page, top to bottom, without resizing the window: Chrome DevTools'
    ``Page.captureScreenshot`` with a clip beyond the viewport, one PNG per ``tile`` CSS pixels (``NAME.png``
    for a page that fits one tile, else ``NAME.01.png``, ``NAME.02.png``, ...). Afterwards each PNG's size is
    read back and the tiles must cover the page's height: a ``screenshot`` finding says what was cut.

    The page is shown from its top-left corner: the window and every scrolled element are put back there first
    (:func:`reset_scroll`). The theme scrolls its sidebar on load (to the previous page's position, kept in
    ``sessionStorage``, or to the active link), so the shots of a walk through the book started mid-sidebar."""
    import base64

    reset_scroll(driver)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in [path, *path.parent.glob(f"{path.stem}.[0-9][0-9].png")]:  # tiles of an earlier, longer page
        old.unlink(missing_ok=True)
    height = _page_height(driver)
    n = max(1, -(-height // tile))
    files, found, covered = [], [], 0
    for k in range(n):
        y, h = k * tile, min(tile, height - k * tile)
        p = path if n == 1 else path.with_name(f"{path.stem}.{k + 1:02d}.png")
        try:
            shot = driver.execute_cdp_cmd(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "fromSurface": True,
                    "optimizeForSpeed": True,
                    "clip": {"x": 0, "y": y, "width": width, "height": max(h, 1), "scale": 1},
                },
            )
            p.write_bytes(base64.b64decode(shot["data"]))
        except Exception as e:  # noqa: BLE001 - reported, the other checks go on
            found.append(Finding("screenshot", f"tile {k + 1}/{n} (y = {y}..{y + h} px) failed: {e}"[:300]))
            continue
        w_png, h_png = png_size(p)
        if (w_png, h_png) != (width, h):
            found.append(
                Finding(
                    "screenshot",
                    f"tile {k + 1}/{n} {p.name} is {w_png}x{h_png} px, expected {width}x{h} (y = {y}..{y + h} px)",
                )
            )
        covered += min(h_png, h) if w_png else 0
        files.append(p)
    after = _page_height(driver)
    if covered < max(height, after):
        found.append(Finding("screenshot", f"the screenshots cover {covered} of {max(height, after)} px"))
    return files, found


# --------------------------------------------------------------------------------------------------------
# legends over the data: seen in matplotlib, not in the HTML image; measured by dputils.book.plotting


def __getattr__(name: str):
    """``legend_overlaps`` and ``LegendOverlap`` live in :mod:`dputils.book.plotting` (they need matplotlib)."""
    if name in ("legend_overlaps", "LegendOverlap"):
        from . import plotting

        return getattr(plotting, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_page(browser: Browser, server: Server, rel: str, shots: Path | None = None) -> PageResult:
    """Load one page (a path relative to the served root) and run every check on it."""
    t0 = time.time()
    drv = browser.driver
    drv.get("about:blank")
    requested_urls(drv)  # drain the logs of the previous page
    try:
        drv.get_log("browser")
    except Exception:
        pass
    state = load(drv, server.url(rel))
    findings = check_math(drv, state)
    findings += check_images(drv)
    findings += check_captions(drv)
    findings += check_outputs(drv)
    findings += check_reprs(drv)
    findings += check_overflow(drv)
    findings += check_tables(drv)
    findings += check_markup(drv)
    findings += check_caption_code(drv)
    reading, metrics = check_reading(drv, rel)
    findings += reading
    files = []
    if shots is not None:
        files, shot_findings = screenshot(drv, Path(shots) / (rel[:-5].replace("/", "__") + ".png"), browser.width)
        findings += shot_findings
    findings += check_network(requested_urls(drv), server.origin)
    findings += check_console(drv)
    return PageResult(
        rel, findings, str(files[0]) if files else None, time.time() - t0, [str(f) for f in files], metrics
    )


def pages(root: str | os.PathLike) -> list[str]:
    """The HTML pages of a build, relative to ``root`` (theme assets, sources and reports left out)."""
    root = Path(root)
    out = []
    for p in sorted(root.rglob("*.html")):
        rel = p.relative_to(root)
        if rel.parts[0] in SKIP_DIRS:
            continue
        if p.stat().st_size < 1000 and 'http-equiv="Refresh"' in p.read_text(errors="replace"):
            continue  # Jupyter Book's index.html: a redirect to the root page, which is checked itself
        out.append(rel.as_posix())
    return out


def check_book(
    root: str | os.PathLike, shots: str | os.PathLike | None = None, only: Iterable[str] = (), width: int = 1280
) -> Iterator[PageResult]:
    root = Path(root)
    todo = pages(root)
    if only:
        todo = [p for p in todo if any(o in p for o in only)]
    with serve(root) as server, start_browser(width=width) as browser:
        for rel in todo:
            yield check_page(browser, server, rel, Path(shots) if shots else None)


def over_limits(
    results: Iterable[PageResult], fail_kinds: Iterable[str] = FAIL_KINDS, limits: dict[str, int] | None = None
) -> dict[str, tuple[int, int]]:
    """``{kind: (findings, limit)}`` of every kind in ``fail_kinds`` whose findings over all ``results`` exceed its
    limit (:func:`limit_of`)."""
    total = Counter(f.kind for r in results for f in r.findings)
    return {
        k: (total[k], limit_of(k, limits)) for k in KINDS if k in set(fail_kinds) and total[k] > limit_of(k, limits)
    }


def failures(
    results: Iterable[PageResult], fail_kinds: Iterable[str] = FAIL_KINDS, limits: dict[str, int] | None = None
) -> int:
    """The number of findings beyond their kind's limit, over the kinds in ``fail_kinds`` (default
    :data:`FAIL_KINDS`; limits :data:`READING_LIMITS`, else 0): 0 when the check passes."""
    return sum(n - lim for n, lim in over_limits(list(results), fail_kinds, limits).values())


def report(
    results: list[PageResult],
    per_kind: int = 8,
    out=None,
    fail_kinds: Iterable[str] = FAIL_KINDS,
    limits: dict[str, int] | None = None,
) -> int:
    """Print the findings per page (at most ``per_kind`` lines of each kind) and a summary; return the total.

    The summary also says which kinds fail the check (over their limit, :func:`over_limits`), which are within
    their limit, and which are reported only (not in ``fail_kinds``)."""
    out = out or sys.stdout
    fail = set(fail_kinds)
    total = Counter()
    for r in results:
        c = r.counts()
        total += c
        if not r.findings:
            continue  # clean pages are named once, in the progress lines (main) and the summary count
        head = ", ".join(f"{k} {c[k]}" for k in KINDS if c[k])
        print(f"{r.page}: {head}  ({r.seconds:.1f} s)", file=out)
        if r.metrics:
            print(f"    {reading_line(r.metrics)}", file=out)
        for k in KINDS:
            fs = [f for f in r.findings if f.kind == k]
            for f in fs[:per_kind]:
                print(f"    {f}", file=out)
            if len(fs) > per_kind:
                print(f"    [{k}] ... and {len(fs) - per_kind} more", file=out)
    n = sum(total.values())
    dirty = sum(1 for r in results if r.findings)
    kinds = ", ".join(f"{k} {total[k]}" for k in KINDS if total[k])
    print(
        f"bookcheck: {len(results)} page(s), {dirty} with findings, {n} finding(s)" + (f" ({kinds})" if n else ""),
        file=out,
    )
    ms = [r.metrics for r in results if r.metrics]
    if ms:
        keys = ("wide_tables", "bare_outputs", "bookkeeping_cells", "code_cells", "target_ids", "long_number_cells")
        t = {k: sum(m.get(k, 0) for m in ms) for k in keys}
        over = sum(
            1 for m in ms if m.get("code_share", 0) > CODE_SHARE_MAX and m.get("page_px", 0) >= CODE_SHARE_MIN_PX
        )
        print(
            f"bookcheck reading: {t['wide_tables']} table(s) hiding columns, {t['bare_outputs']} bare output(s), "
            f"{t['bookkeeping_cells']} of {t['code_cells']} shown code cell(s) bookkeeping, {t['target_ids']} target "
            f"id(s) in prose, {t['long_number_cells']} table cell(s) with {DIGITS_MAX}+ digits, {over} page(s) with "
            f"shown code over {CODE_SHARE_MAX:.0%} of the height",
            file=out,
        )
    bad = over_limits(results, fail, limits)
    if bad:
        print(
            "bookcheck: FAILED: " + ", ".join(f"{k} {nk} (at most {lim} allowed)" for k, (nk, lim) in bad.items()),
            file=out,
        )
    within = [k for k in KINDS if total[k] and k in fail and k not in bad]
    if within:
        print(
            "bookcheck: within their limits: "
            + ", ".join(f"{k} {total[k]} (at most {limit_of(k, limits)})" for k in within),
            file=out,
        )
    advisory = [k for k in KINDS if total[k] and k not in fail]
    if advisory:
        print(
            f"bookcheck: {failures(results, fail, limits)} finding(s) fail the check; reported only (not in the "
            "failing kinds): " + ", ".join(f"{k} {total[k]}" for k in advisory),
            file=out,
        )
    return n


def _limit_arg(text: str) -> tuple[str, int]:
    kind, sep, n = text.partition("=")
    if not sep or kind not in KINDS or not n.isdigit():
        raise argparse.ArgumentTypeError(f"expected KIND=N with KIND one of {', '.join(KINDS)}, got {text!r}")
    return kind, int(n)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dputils.book.bookcheck", description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="_build/html", help="the built book (default _build/html)")
    ap.add_argument("--screenshots", default="_build/screenshots", help="folder for full-page PNGs ('' for none)")
    ap.add_argument("--only", nargs="*", default=(), help="check only pages whose path contains one of these")
    ap.add_argument("--width", type=int, default=1280, help="browser window width in CSS pixels")
    ap.add_argument("--per-kind", type=int, default=8, help="findings printed per kind and page")
    ap.add_argument("--json", help="also write the findings as JSON to this file")
    ap.add_argument(
        "--fail-on",
        nargs="+",
        metavar="KIND",
        choices=(*KINDS, "all"),
        default=None,
        help="the kinds of finding that fail the check when over their limit ('all' for every kind; default: "
        + " ".join(k for k in KINDS if k in FAIL_KINDS)
        + ")",
    )
    ap.add_argument(
        "--limit",
        nargs="+",
        metavar="KIND=N",
        type=_limit_arg,
        default=(),
        help="the most findings of KIND the checked pages may have (default: "
        + " ".join(f"{k}={v}" for k, v in READING_LIMITS.items())
        + ", every other kind 0)",
    )
    a = ap.parse_args(argv)
    fail_kinds = FAIL_KINDS if a.fail_on is None else set(KINDS) if "all" in a.fail_on else set(a.fail_on)
    limits = {**READING_LIMITS, **dict(a.limit)}
    if not (Path(a.root) / "index.html").exists() and not pages(a.root):
        print(f"bookcheck: no built book in {a.root} (run `jupyter-book build . -W --all` first)", file=sys.stderr)
        return 2
    results = []
    try:
        for r in check_book(a.root, a.screenshots or None, a.only, a.width):
            results.append(r)
            c = r.counts()
            print(f"  checked {r.page}: {sum(c.values())} finding(s) ({r.seconds:.1f} s)", file=sys.stderr, flush=True)
    except BrowserMissing as e:
        print(f"bookcheck: {e}", file=sys.stderr)
        return 2
    report(results, a.per_kind, fail_kinds=fail_kinds, limits=limits)
    if a.json:
        Path(a.json).write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    if a.screenshots:
        print(f"screenshots: {a.screenshots}/")
    return 1 if failures(results, fail_kinds, limits) else 0


if __name__ == "__main__":
    sys.exit(main())
