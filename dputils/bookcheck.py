"""Check the built book in a real browser: ``python -m dputils.bookcheck [_build/html] [--screenshots DIR]``.

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
* ``console``: errors in the browser console (a script or file that failed to load).

A full-page screenshot of every page goes to ``--screenshots`` (default ``_build/screenshots``). The
report lists the findings per page; the exit status is 0 for a clean book, 1 when anything was found,
2 when the browser could not be started.

Each check is a function ``check_*(driver) -> list[Finding]`` on a loaded page; the text classifiers
(:func:`tex_leftovers`, :func:`repr_leftovers`, :func:`is_meaningful_alt`, :func:`external_urls`) are
plain functions.
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
from pathlib import Path
from typing import Iterable, Iterator
from urllib.parse import urlsplit

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL_HINT = ("headless Chromium is needed: install Debian's browser and driver with "
                "`apt-get install -y chromium chromium-driver` (and `pip install selenium`)")

KINDS = ("math", "image", "caption", "output", "repr", "overflow", "network", "console")

#: directories of the build output that hold no pages
SKIP_DIRS = {"_static", "_sources", "_images", "_downloads", "reports", ".doctrees", "_panels_static"}


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    detail: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.detail}"


@dataclasses.dataclass
class PageResult:
    page: str
    findings: list[Finding]
    screenshot: str | None = None
    seconds: float = 0.0

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
    s = text[max(0, start - pad):end + pad]
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


_GENERIC_ALT = {"image", "img", "figure", "fig", "plot", "png", "svg", "jpg", "jpeg", "output", "graph", "chart",
                "picture", "photo", "untitled", "alt", "none"}


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

    def __enter__(self) -> "Server":
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

    def __enter__(self) -> "Browser":
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
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                 "--hide-scrollbars", "--force-device-scale-factor=1", f"--window-size={width},{height}",
                 f"--user-data-dir={profile}",
                 # no network: names resolve to nothing, connections go to a dead proxy; loopback stays direct
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
                 "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1;localhost"):
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
    errs = _js(driver, r"""
      return Array.from(document.querySelectorAll('mjx-merror, .MathJax_Error, [data-mjx-error]'))
        .map(e => (e.getAttribute('data-mjx-error') || e.textContent || '').slice(0, 120));
    """)
    found += [Finding("math", f"MathJax error: {e!r}") for e in errs]
    chunks = _js(driver, "return texts(document.body, SKIP_CODE);")
    # one string per text node: a delimiter split over nodes is still caught by the per-node $ and \cmd rules
    for t in chunks:
        found += [Finding("math", f"unrendered {x}") for x in tex_leftovers(t)]
    return found


def check_images(driver) -> list[Finding]:
    """Images that did not load, and images without meaningful alt text."""
    imgs = _js(driver, r"""
      return Array.from(document.images).filter(i => !i.closest('mjx-container')).map(i => ({
        src: i.getAttribute('src') || '', alt: i.getAttribute('alt'), complete: i.complete, w: i.naturalWidth,
        hidden: i.getAttribute('aria-hidden') === 'true' || i.getAttribute('role') === 'presentation'}));
    """)
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
    bad = _js(driver, r"""
      return Array.from(column().querySelectorAll('img')).filter(i => !i.closest('mjx-container')).filter(i => {
        const fig = i.closest('figure');
        const cap = fig && fig.querySelector('figcaption');
        return !(cap && cap.textContent.trim().length > 0);
      }).map(i => {
        const sec = i.closest('section[id]');
        return (i.getAttribute('src') || '').split('/').pop() + (sec ? ' in #' + sec.id : '');
      });
    """)
    return [Finding("caption", f"figure without caption: {b}") for b in bad]


def check_outputs(driver) -> list[Finding]:
    """stderr and traceback outputs, warnings printed in outputs, a visible papermill injected-parameters cell."""
    res = _js(driver, r"""
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
    """)
    found = [Finding("output", f"stderr output: {t!r}") for t in dict.fromkeys(res["stderr"])]
    found += [Finding("output", f"traceback output: {t!r}") for t in dict.fromkeys(res["traceback"])]
    for text in res["outputs"]:
        for m in _WARNING_PATTERN.finditer(text):
            found.append(Finding("output", f"warning/traceback text in an output: {_snippet(text, m.start(), m.end())!r}"))
    if res["injected"]:
        found.append(Finding("output", f"papermill's injected-parameters cell is visible ({res['injected']}x)"))
    return found


def check_reprs(driver) -> list[Finding]:
    """Python reprs in what the reader sees: prose and outputs (cell sources excluded)."""
    chunks = _js(driver, "return texts(document.body, 'script, style, noscript, template, .cell_input, mjx-container');")
    return [Finding("repr", f"Python repr {x}") for t in chunks for x in repr_leftovers(t)]


def check_overflow(driver) -> list[Finding]:
    """Elements wider than the content column: horizontal scrollers (tables, code, outputs, equations) and
    elements that stick out of the column."""
    res = _js(driver, r"""
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
        const scrolls = (cs.overflowX === 'auto' || cs.overflowX === 'scroll') && el.scrollWidth > el.clientWidth + 1;
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
    """)
    return [Finding("overflow", f"{i['where']} {'scrolls' if i['scroll'] else 'sticks out'}: {i['width']} px wide in "
                                f"{i['shown']} px ({res['column']} px column): {i['what']}")
            for i in res["items"]]


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
    return [Finding("console", e["message"][:200]) for e in logs
            if e.get("level") == "SEVERE" and not any(x in e.get("message", "") for x in IGNORED_CONSOLE)]


def screenshot(driver, path: Path, width: int, max_height: int = 50000) -> None:
    """A full-page PNG: the window is made as tall as the page, then restored."""
    h = driver.execute_script(
        "return Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)")
    old = driver.get_window_size()
    driver.set_window_size(width, min(max(int(h), 600), max_height))
    time.sleep(0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    driver.set_window_size(old["width"], old["height"])


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
    shot = None
    if shots is not None:
        p = Path(shots) / (rel[:-5].replace("/", "__") + ".png")
        screenshot(drv, p, browser.width)
        shot = str(p)
    findings += check_network(requested_urls(drv), server.origin)
    findings += check_console(drv)
    return PageResult(rel, findings, shot, time.time() - t0)


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


def check_book(root: str | os.PathLike, shots: str | os.PathLike | None = None, only: Iterable[str] = (),
               width: int = 1280) -> Iterator[PageResult]:
    root = Path(root)
    todo = pages(root)
    if only:
        todo = [p for p in todo if any(o in p for o in only)]
    with serve(root) as server, start_browser(width=width) as browser:
        for rel in todo:
            yield check_page(browser, server, rel, Path(shots) if shots else None)


def report(results: list[PageResult], per_kind: int = 8, out=None) -> int:
    """Print the findings per page (at most ``per_kind`` lines of each kind) and a summary; return the total."""
    out = out or sys.stdout
    total = Counter()
    for r in results:
        c = r.counts()
        total += c
        head = ", ".join(f"{k} {c[k]}" for k in KINDS if c[k]) or "clean"
        print(f"{r.page}: {head}  ({r.seconds:.1f} s)", file=out)
        for k in KINDS:
            fs = [f for f in r.findings if f.kind == k]
            for f in fs[:per_kind]:
                print(f"    {f}", file=out)
            if len(fs) > per_kind:
                print(f"    [{k}] ... and {len(fs) - per_kind} more", file=out)
    n = sum(total.values())
    dirty = sum(1 for r in results if r.findings)
    kinds = ", ".join(f"{k} {total[k]}" for k in KINDS if total[k])
    print(f"bookcheck: {len(results)} page(s), {dirty} with findings, {n} finding(s)" + (f" ({kinds})" if n else ""),
          file=out)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dputils.bookcheck", description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="_build/html", help="the built book (default _build/html)")
    ap.add_argument("--screenshots", default="_build/screenshots", help="folder for full-page PNGs ('' for none)")
    ap.add_argument("--only", nargs="*", default=(), help="check only pages whose path contains one of these")
    ap.add_argument("--width", type=int, default=1280, help="browser window width in CSS pixels")
    ap.add_argument("--per-kind", type=int, default=8, help="findings printed per kind and page")
    ap.add_argument("--json", help="also write the findings as JSON to this file")
    a = ap.parse_args(argv)
    if not (Path(a.root) / "index.html").exists() and not pages(a.root):
        print(f"bookcheck: no built book in {a.root} (run `jupyter-book build . -W --all` first)", file=sys.stderr)
        return 2
    results = []
    try:
        for r in check_book(a.root, a.screenshots or None, a.only, a.width):
            results.append(r)
            c = r.counts()
            print(f"  checked {r.page}: {sum(c.values())} finding(s)", file=sys.stderr, flush=True)
    except BrowserMissing as e:
        print(f"bookcheck: {e}", file=sys.stderr)
        return 2
    n = report(results, a.per_kind)
    if a.json:
        Path(a.json).write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    if a.screenshots:
        print(f"screenshots: {a.screenshots}/")
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
