"""Tables for the book: rows of values rendered as an HTML table (with a plain-text fallback).

Notebooks show comparisons (paper vs ours, accountant vs accountant) as real tables rather than
``print()`` output: ``show_table(rows, columns=..., caption=...)``. Numbers are formatted to a fixed
number of significant digits, a ``status`` column is coloured (pass / fail / not reproduced / not run),
and the table stays inside the page's content column (it wraps instead of scrolling).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STATUS_STYLE = {
    "pass": "color:#1a7f37;font-weight:600",
    "fail": "color:#cf222e;font-weight:600",
    "not reproduced": "color:#9a6700;font-weight:600",
    "not run": "color:#57606a;font-style:italic",
}


_SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def sci(x: float, digits: int = 2) -> str:
    """``x`` as ``a×10ⁿ`` with ``digits`` significant digits (``sci(4.6492e-5, 4) == "4.649×10⁻⁵"``,
    ``sci(4.6492e-5) == "4.6×10⁻⁵"``, ``sci(1e-5, 1) == "10⁻⁵"``): the one format
    of small and large numbers in the book's tables (:func:`fmt_value`) and prose (glue the string:
    ``glue("name", sci(x))``, shown with ``{glue:text}`name```). Plain text, no markup, so it reads the same in
    HTML, Markdown and a terminal."""
    x = float(x)
    if not math.isfinite(x):
        return "\u221e" if x > 0 else ("-\u221e" if x < 0 else "nan")
    if x == 0:
        return "0"
    m, e = f"{x:.{max(int(digits) - 1, 0)}e}".split("e")
    power = f"10{str(int(e)).translate(_SUPERSCRIPT)}"
    return power if m == "1" else f"-{power}" if m == "-1" else f"{m}\u00d7{power}"


def _sci_short(x: float, digits: int) -> str:
    """:func:`sci` without trailing zeros in the mantissa (``1.50×10⁻⁵`` is ``1.5×10⁻⁵``, ``1.00×10⁶`` is ``10⁶``)."""
    s = sci(x, digits)
    if "\u00d7" not in s:
        return s
    m, p = s.split("\u00d7")
    m = m.rstrip("0").rstrip(".") if "." in m else m
    return p if m == "1" else f"-{p}" if m == "-1" else f"{m}\u00d7{p}"


def num(x: float, digits: int = 3) -> str:
    """``x`` for a reader, at ``digits`` significant digits (3 by default, 4 where the fourth matters): plain
    between 10⁻³ and 10⁶ (``num(2.38177) == "2.38"``; an integer part longer than ``digits`` is kept whole,
    ``num(14063.2) == "14,063"``), as ``a×10ⁿ`` outside (``num(4.6492e-5) == "4.65×10⁻⁵"``, ``num(1e6) ==
    "10⁶"``). Trailing zeros are dropped. Plain text, to glue into prose (``glue("eps", num(eps))``) or to put in
    a table, a header or a legend."""
    x = float(x)
    if not math.isfinite(x) or x == 0:
        return sci(x)
    d = max(int(digits), 1)
    if 1e-3 <= abs(x) < 1e6:
        if abs(x) >= 10 ** (d - 1):  # as many digits as the integer part has: no exponent for 14063
            return f"{round(x):,}" if abs(x) >= 10_000 else str(round(x))
        return f"{x:.{d}g}"
    return _sci_short(x, d)


def pow10(x: float) -> str:
    """A power of ten in headers, legends and prose as ``10⁻⁵`` (Unicode superscripts): ``pow10(1e-5) ==
    "10⁻⁵"``; an ``int`` is the exponent itself (``pow10(-6) == "10⁻⁶"``); a float that is not a power of ten
    is ``a×10ⁿ`` at 3 digits (``pow10(2.5e-5) == "2.5×10⁻⁵"``). Non-positive values raise ValueError."""
    if isinstance(x, int) and not isinstance(x, bool):
        return "10" + str(x).translate(_SUPERSCRIPT)
    x = float(x)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"pow10: x must be a positive finite number, got {x!r}")
    e = round(math.log10(x))
    if math.isclose(x, 10.0**e, rel_tol=1e-9):
        return "10" + str(e).translate(_SUPERSCRIPT)
    return _sci_short(x, 3)


def diff(a: float, b: float, digits: int = 2) -> str:
    """The difference ``a - b`` where the point is that two numbers agree: ``diff(2.3821, 2.3818) ==
    "3×10⁻⁴"`` (signed, ``digits`` significant digits, 2 by default; ``"0"`` when they are equal) rather than
    two columns of nine digits each."""
    d = float(a) - float(b)
    return "0" if d == 0 else _sci_short(d, digits)


def fmt_value(v: Any, digits: int = 4) -> str:
    """A compact, readable string: numbers to ``digits`` significant digits, None as an em dash."""
    if v is None:
        return "\u2014"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, float) or hasattr(v, "__float__") and not isinstance(v, str):
        try:
            x = float(v)
        except (TypeError, ValueError):
            return str(v)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "\u221e" if x > 0 else "-\u221e"
        if x == 0:
            return "0"
        if 1e-3 <= abs(x) < 1e6:
            if abs(x) >= 10 ** (max(int(digits), 1) - 1):  # the integer part kept whole, never "5.43e+03"
                return f"{round(x):,}" if abs(x) >= 10_000 else str(round(x))
            return f"{x:.{digits}g}"
        return sci(x, digits)
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_value(x, digits) for x in v)
    return str(v)


#: Cells break lines between words only, never inside a word or a number (``4.649×10⁻⁵`` and ``1000`` stay on one
#: line: a number cell does not wrap at all). A table wider than the page column scrolls sideways in its own box
#: (``dpbook-scroll``) instead of squeezing its columns: the browser check (bookcheck) finds any cell whose word
#: or number is drawn over two lines, and accepts this box as the one horizontal scroller a table may have.
_CELL = "padding:0.25em 0.6em;word-break:normal;overflow-wrap:normal;hyphens:manual;"
_NUMBER = "white-space:nowrap;"
#: A text cell of at most this many characters does not wrap either (a short label such as "not reproduced").
_SHORT_TEXT = 16
#: A run of non-space characters with a digit in it, outside any markup (``<sup>`` of a formatted number is kept
#: inside the run).
_DIGIT_TOKEN = re.compile(r"(?<![^\s>])(?=[^\s<]*\d)[^\s<]+(?:<sup>[^<]*</sup>[^\s<]*)?")


class Table:
    """An HTML table that Jupyter and the book render (``_repr_html_``), with a text form for terminals."""

    def __init__(
        self,
        rows: Sequence[Mapping[str, Any]],
        columns: Sequence[str] | None = None,
        caption: str | None = None,
        digits: int = 4,
        headers: Mapping[str, str] | None = None,
    ):
        self.rows = [dict(r) for r in rows]
        if columns is None:
            columns = []
            for r in self.rows:
                for k in r:
                    if k not in columns:
                        columns.append(k)
        self.columns = list(columns)
        self.caption = caption
        self.digits = digits
        self.headers = dict(headers or {})

    def _cell(self, col: str, v: Any) -> str:
        # escape everything, then restore only the exponent markup that fmt_value itself writes
        plain = fmt_value(v, self.digits)
        text = html.escape(plain).replace("&lt;sup&gt;", "<sup>").replace("&lt;/sup&gt;", "</sup>")
        numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not numeric:
            # in a text cell, a token with a digit (1.74e-4, 3e6-8e6, [1.93e-05,) is kept on one line: the browser
            # would otherwise break it after its hyphen
            text = _DIGIT_TOKEN.sub(lambda m: f'<span style="white-space:nowrap">{m.group(0)}</span>', text)
        style = _CELL + (_NUMBER if numeric or len(plain) <= _SHORT_TEXT else "")
        if col == "status" and isinstance(v, str):
            return f'<td style="{style}{STATUS_STYLE.get(v, "")}">{text}</td>'
        align = "right" if numeric else "left"
        return f'<td style="{style}text-align:{align}">{text}</td>'

    def _repr_html_(self) -> str:
        cols = [c for c in self.columns if any(r.get(c) not in (None, "") for r in self.rows)] or self.columns
        head = "".join(f'<th style="{_CELL}">{html.escape(self.headers.get(c, c))}</th>' for c in cols)
        body = "".join("<tr>" + "".join(self._cell(c, r.get(c)) for c in cols) + "</tr>" for r in self.rows)
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (
            '<div class="dpbook-scroll" style="overflow-x:auto;max-width:100%">'
            '<table class="dpbook-table" style="width:auto;table-layout:auto;font-size:0.85em;'
            'border-collapse:collapse">'
            f"{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        )

    def __str__(self) -> str:
        cols = self.columns
        cells = [[self.headers.get(c, c) for c in cols]]
        for r in self.rows:
            cells.append([fmt_value(r.get(c), self.digits) for c in cols])
        widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
        lines = ["  ".join(s.ljust(w) for s, w in zip(row, widths)) for row in cells]
        if self.caption:
            lines.insert(0, self.caption)
        return "\n".join(lines)

    __repr__ = __str__


def show_table(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    caption: str | None = None,
    digits: int = 4,
    headers: Mapping[str, str] | None = None,
) -> Table:
    """Display ``rows`` (dicts) as a table in a notebook and return the :class:`Table`.

    In a notebook the table is displayed at once (so it can sit in the middle of a cell); elsewhere it is
    only returned.
    """
    t = Table(list(rows), columns, caption, digits, headers)
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display(t)
    except ImportError:  # pragma: no cover - IPython is always there in a notebook
        pass
    return t


def show_parameters(
    values: Mapping[str, Any], meanings: Mapping[str, str], caption: str = "The parameters of this run"
) -> Table:
    """The chapter's parameters for its reader: one row per name of ``meanings`` (in its order), with the value
    this run used (from ``values``, e.g. ``globals()`` after papermill's injected cell) and its meaning. Floats at
    3-4 significant digits (:func:`num`), powers of ten as ``10⁻⁵``; the ``parameters`` cell itself stays
    collapsed. A name missing from ``values`` raises KeyError (the table must not invent a value)."""

    def shown(v: Any) -> str:
        if isinstance(v, float) and v > 0 and math.isfinite(v) and v < 1e-2:
            return pow10(v) if math.isclose(v, 10.0 ** round(math.log10(v)), rel_tol=1e-9) else num(v, 4)
        if isinstance(v, float):
            return num(v, 4)
        return fmt_value(v)

    rows = [dict(parameter=k, value=shown(values[k]), meaning=m) for k, m in meanings.items()]
    return show_table(rows, columns=["parameter", "value", "meaning"], caption=caption)


def show_targets(records: Iterable[Mapping[str, Any]], caption: str | None = None) -> Table:
    """A chapter's reproduction targets in a table that fits the page's column: the id, what is reproduced (with
    the reason after it where a target did not pass), the paper's and our value at 4 significant digits, and the
    status; the source and the tolerance are on the scorecard. ``records`` are
    :class:`dputils.book.scorecard.Targets`' records (dicts with ``id``, ``what``, ``paper``, ``ours``,
    ``status`` and optionally ``reason``), shown in id order as recorded."""
    rows = []
    for r in records:
        what = str(r.get("what") or "")
        if r.get("reason"):
            what = f"{what} ({r['reason']})"
        rows.append(dict(id=r.get("id"), what=what, paper=r.get("paper"), ours=r.get("ours"), status=r.get("status")))
    return show_table(rows, columns=["id", "what", "paper", "ours", "status"], caption=caption)
