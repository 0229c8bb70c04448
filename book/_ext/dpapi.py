"""dpapi: the book's API reference, generated from the docstrings of :mod:`dputils` at build time.

Two pieces, registered by :func:`setup` (``_config.yml``: ``sphinx: local_extensions: {dpapi: book/_ext}``):

* the ``dpapi-module`` directive (used inside ``{eval-rst}`` blocks of ``book/api*.md``). For a module it
  writes the module docstring (``automodule``), an ``autosummary`` table of the module's public names, and one
  ``autoclass``/``autofunction``/``autodata`` entry for each name the module defines. A name that the module
  only re-exports gets its row in the table, linked to the entry of the module that defines it: every object
  is described once (no "duplicate object description"). The public names are the module's ``__all__``, or,
  without one, the classes and functions defined at its top level whose names do not start with ``_``.
* an ``autodoc-process-docstring`` hook, :func:`escape_docstring`, for docstrings written in plain-text
  maths rather than reStructuredText: ``|x|`` is escaped (our docstrings use no substitutions), a ``*`` that
  starts no emphasis is escaped, a backquote with no partner is escaped, a trailing ``word_`` is not a link,
  MyST roles ``{cite}`key``` become ``:cite:`key```, a word with TeX-like scripts (``e^{eps - l_j}``) is
  shown as an inline literal, an inline literal with a space before its end is repaired, an indented block
  laid out in columns (an algorithm, an aligned formula) after a line ending in ``:`` is shown as a literal
  block, and a ``.. math::`` written over several source lines is displayed over those lines (MathJax does
  not break a wide formula). Inline literals (````x````), roles (``:math:`x```), interpreted text, literal
  blocks, other directives and doctests are left as they are.

Nothing is written to the source tree: the pages are rendered from the directive at every build
(``autosummary_generate`` is off; no stub files). ``static/dpapi.css`` fits wide literal blocks, long
inline literals and the summary tables into the content column.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

# The repository root (book/_ext/dpapi.py -> ../..): the book documents the dputils of this checkout, not
# whichever copy an editable install points at.
REPO_ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------------------------------
# Plain-text maths in docstrings -> reStructuredText that renders as written.
# ---------------------------------------------------------------------------------------------------------

# Spans left untouched: inline literals, roles with their target, interpreted text / hyperlink references.
_PROTECTED = re.compile(
    r"``.+?``(?!`)"                                   # ``literal``
    r"|:[A-Za-z][\w.+:-]*:`[^`]+`"                    # :role:`text`
    r"|(?<![\w`])`[^`\s](?:[^`]*[^`\s])?`(?:__?)?(?![\w`])",  # `interpreted` / `link`_
    re.DOTALL,
)
# Emphasis that RST would render as such (start after whitespace/open punctuation, end before closing).
_EMPHASIS = re.compile(
    r"(?<![^\s(\[{<'\"/-])(\*\*?)(?=[^\s*])(.+?)(?<=[^\s*\\])\1(?![^\s)\]}>'\".,;:!?/-])",
    re.DOTALL,
)
_MYST_ROLE = re.compile(r"\{([A-Za-z][\w:.-]*)\}`([^`]+)`")
# A word ending in one or two underscores before whitespace/punctuation is a hyperlink reference in RST.
_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)(__?)(?=$|[\s.,;:!?)\]}'\"])")
_LIST_MARKER = re.compile(r"^(\s*)([-*+]|\d+[.)]|#\.|\(?[a-zA-Z0-9][.)])(\s+)")
_DIRECTIVE = re.compile(r"^\s*\.\.\s")
_FIELD = re.compile(r"^\s*:[^:`]+:(\s|$)")


_TEX_SCRIPT = re.compile(r"[A-Za-z0-9)\]}][_^]\{")


def _tex_tokens(text: str) -> list[tuple[int, int]]:
    """Spans of plain-text maths with TeX-like scripts (``e^{eps - l_j}``, ``sum_{i=1}^{n}``).

    A span is the whitespace-delimited word around ``_{``/``^{``, extended over its balanced braces (which
    may hold spaces); it is shown as an inline literal rather than as prose with stray braces.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = _TEX_SCRIPT.search(text, pos)
        if not m:
            return spans
        start = m.start()
        while start > 0 and not text[start - 1].isspace():
            start -= 1
        end, depth = start, 0
        while end < len(text) and (depth > 0 or not text[end].isspace()):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        if depth != 0 or "``" in text[start:end]:
            pos = m.end()
            continue
        while end > start and text[end - 1] in ".,;:":  # sentence punctuation stays prose
            end -= 1
        spans.append((start, end))
        pos = end


def _escape_plain(text: str) -> str:
    """Escape, in text outside protected spans, the characters that RST would read as markup."""
    out = []
    pos = 0
    for a, b in _tex_tokens(text):
        out.append(_escape_markup(text[pos:a]))
        out.append("``" + text[a:b] + "``")
        pos = b
    out.append(_escape_markup(text[pos:]))
    return "".join(out)


def _escape_markup(text: str) -> str:
    out = []
    pos = 0
    for m in _EMPHASIS.finditer(text):
        out.append(_escape_chars(text[pos:m.start()]))
        out.append(m.group(1) + m.group(2).replace("|", "\\|").replace("`", "\\`") + m.group(1))
        pos = m.end()
    out.append(_escape_chars(text[pos:]))
    return "".join(out)


def _escape_chars(text: str) -> str:
    text = re.sub(r"(?<!\\)\|", r"\\|", text)
    text = re.sub(r"(?<!\\)\*", r"\\*", text)
    text = re.sub(r"(?<!\\)`", r"\\`", text)
    text = _TRAILING_UNDERSCORE.sub(lambda m: "\\_" * len(m.group(1)), text)
    return text


def escape_paragraph(text: str) -> str:
    """One paragraph (lines joined by newlines): MyST roles -> RST roles, then escape outside protected spans.

    A leading list marker (``* item``, ``- item``, ``1. item``) and a field-list marker (``:param x:``) are kept.
    """
    text = _MYST_ROLE.sub(lambda m: f":{m.group(1)}:`{m.group(2)}`", text)
    lines = text.split("\n")
    heads = []
    for i, line in enumerate(lines):
        m = _LIST_MARKER.match(line) or _FIELD.match(line)
        heads.append(m.group(0) if m else "")
        lines[i] = line[len(heads[-1]):]
    # spans may cross line breaks; the markers stay out of the escaping
    body = "\n".join(lines)
    out = []
    pos = 0
    for m in _PROTECTED.finditer(body):
        out.append(_escape_plain(body[pos:m.start()]))
        span = m.group(0)
        if span.startswith("``") and span[2:-2].strip() and span[2:-2] != span[2:-2].strip():
            # ``x -> `` is no inline literal in RST (no space before the end-string): ``x ->``
            span = "``" + span[2:-2].strip() + "``"
        out.append(span)
        pos = m.end()
    out.append(_escape_plain(body[pos:]))
    new_lines = "".join(out).split("\n")
    return "\n".join(h + l for h, l in zip(heads, new_lines))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_columns_block(block: list[str]) -> bool:
    """An indented block laid out in columns: ragged inner indentation, or runs of 3+ inner spaces."""
    body = [l for l in block if l.strip()]
    if not body:
        return False
    if any(_LIST_MARKER.match(l) or _DIRECTIVE.match(l) or _FIELD.match(l) for l in body[:1]):
        return False
    base = min(_indent(l) for l in body)
    ragged = len({_indent(l) for l in body}) > 1 and any(_indent(l) > base for l in body)
    aligned = any(re.search(r"\S {3,}\S", l) for l in body)
    return ragged or aligned


_BINARY_START = re.compile(r"^(=|\+|-|<|>|\\(le|ge|leq|geq|approx|sim|cdot|times|qquad|quad|mp|pm)\b)")


def _depth(tex: str) -> int:
    tex = re.sub(r"\\[{}]", "", tex)
    return tex.count("{") - tex.count("}") + len(re.findall(r"\\left\b", tex)) - len(re.findall(r"\\right\b", tex))


def break_display_math(block: list[str]) -> list[str]:
    """A ``.. math::`` directive whose formula spans several source lines: show those lines as lines.

    MathJax does not break a long display formula; the author's source line breaks are where it reads well.
    Each break at brace depth 0 (outside ``{...}`` and ``\\left ... \\right``) becomes a ``\\\\`` of an
    ``&``-aligned block (Sphinx wraps it in ``split``), continuation lines indented by ``\\qquad``. A
    formula already holding ``\\\\`` or ``&``, or directive options, is left alone.
    """
    head = block[0]
    base = _indent(head)
    arg = head.strip()[len(".. math::"):].strip()
    body = [l for l in block[1:]]
    trailing = []
    while body and not body[-1].strip():
        trailing.insert(0, body.pop())
    if any(l.strip().startswith(":") for l in body) or any(not l.strip() for l in body):
        return block  # options, or several equations separated by blank lines
    tex_lines = ([arg] if arg else []) + [l.strip() for l in body]
    text = " ".join(tex_lines)
    if len(tex_lines) < 2 or "\\\\" in text or "&" in text or "\\begin" in text:
        return block
    groups, cur, depth = [], [], 0
    for tl in tex_lines:
        cur.append(tl)
        depth += _depth(tl)
        if depth == 0:
            groups.append(" ".join(cur))
            cur = []
    if cur or len(groups) < 2:
        return block
    pad = " " * (base + 3)
    out = [" " * base + ".. math::", ""]
    for k, g in enumerate(groups):
        lead = "& " if k == 0 else "&\\qquad " + ("{}" if _BINARY_START.match(g) else "")
        out.append(pad + lead + g + (" \\\\" if k < len(groups) - 1 else ""))
    return out + trailing


def escape_lines(lines: list[str]) -> list[str]:
    """Rewrite a docstring (a list of lines, as autodoc gives them) so that its plain-text maths renders.

    Literal blocks (after ``::``), directive bodies (``.. math::``) and doctest blocks are copied unchanged.
    An indented block after a line ending in a single ``:`` that is laid out in columns becomes a literal
    block (the line then ends in ``::``).
    """
    out: list[str] = []
    i = 0
    n = len(lines)
    para: list[str] = []

    def flush() -> None:
        if para:
            out.extend(escape_paragraph("\n".join(para)).split("\n"))
            para.clear()

    while i < n:
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            flush()
            out.append(line)
            i += 1
            continue
        if stripped.startswith(">>>"):
            flush()
            while i < n and lines[i].strip():
                out.append(lines[i])
                i += 1
            continue
        if _DIRECTIVE.match(line) and not para:
            flush()
            base = _indent(line)
            j = i + 1
            while j < n and (not lines[j].strip() or _indent(lines[j]) > base):
                j += 1
            if re.match(r"\s*\.\. math::", line):
                out.extend(break_display_math(lines[i:j]))
            else:
                out.extend(lines[i:j])
            i = j
            continue
        para.append(line)
        i += 1
        # end of this paragraph: does an indented block follow?
        nxt = i
        if nxt < n and lines[nxt].strip() and _indent(lines[nxt]) <= _indent(para[0]):
            continue
        if stripped.endswith("::") or stripped.endswith(":"):
            j = i
            while j < n and not lines[j].strip():
                j += 1
            base = _indent(para[0])
            k = j
            while k < n and (not lines[k].strip() or _indent(lines[k]) > base):
                k += 1
            block = lines[j:k]
            literal = stripped.endswith("::")
            if not literal and j > i and block and _is_columns_block(block):
                literal = True
                para[-1] = para[-1].rstrip() + ":"  # "text:" -> "text::" renders as "text:"
            if literal and j > i and block:
                flush()
                out.extend(lines[i:k])
                i = k
    flush()
    return out


def escape_docstring(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """``autodoc-process-docstring`` hook: :func:`escape_lines` in place.

    A constant without a ``#:`` comment would show the docstring of its type (``dict``'s, say): dropped.
    """
    if what in ("data", "attribute") and obj is not None and not (inspect.isclass(obj) or callable(obj)):
        type_doc = inspect.getdoc(type(obj)) or ""
        if type_doc and "\n".join(lines).strip() == type_doc.strip():
            lines[:] = []
            return
    lines[:] = escape_lines(list(lines))


# ---------------------------------------------------------------------------------------------------------
# Which names a module makes public, and where each one is defined.
# ---------------------------------------------------------------------------------------------------------


def _module_ast(module: ModuleType) -> ast.Module | None:
    try:
        return ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return None


def public_names(module: ModuleType) -> list[str]:
    """``__all__`` in its order, or the public top-level classes and functions defined in the module."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    tree = _module_ast(module)
    names = []
    for node in tree.body if tree else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            names.append(node.name)
    return names


def defining_module(modname: str, name: str, _seen: frozenset = frozenset()) -> tuple[str, str]:
    """``(module, name)`` under which the object ``modname.name`` is defined: ``from .x import y`` re-exports
    are followed to their source, an alias ``f = other.g`` of a public function or class ``g`` of another
    dputils module resolves to that one. A submodule named in ``__all__`` is its own definition.
    """
    module = importlib.import_module(modname)
    obj = getattr(module, name)
    if inspect.ismodule(obj):
        return obj.__name__, ""
    if (modname, name) in _seen:
        return modname, name
    tree = _module_ast(module)
    for node in tree.body if tree else []:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    if node.level:
                        pkg = modname if hasattr(module, "__path__") else modname.rpartition(".")[0]
                        for _ in range(node.level - 1):
                            pkg = pkg.rpartition(".")[0]
                        src = f"{pkg}.{node.module}" if node.module else pkg
                    else:
                        src = node.module or ""
                    if src == "dputils" or src.startswith("dputils."):
                        return defining_module(src, alias.name, _seen | {(modname, name)})
                    return modname, name
    home = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", "")
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and home and home != modname and home.startswith("dputils"):
        if qualname in public_names(importlib.import_module(home)):
            return home, qualname
    return modname, name


def documented_at(modname: str, name: str) -> tuple[str, str]:
    """Where the entry of ``modname.name`` lives: at its definition when the defining module lists it among
    its public names, else here (a private module, or a module whose public names leave it out)."""
    home, target = defining_module(modname, name)
    if home == modname or not target:
        return home, target
    if any(part.startswith("_") for part in home.split(".")) or \
            target not in public_names(importlib.import_module(home)):
        return modname, name
    return home, target


def module_plan(modname: str) -> dict[str, Any]:
    """What ``dpapi-module`` writes for ``modname``.

    Returns ``{"summary": [(name, target)], "entries": [(directive, name)]}``: one autosummary row per public
    name, with the full name of the object it links to, and one autodoc entry for each name documented here.
    """
    module = importlib.import_module(modname)
    summary, entries = [], []
    for name in public_names(module):
        obj = getattr(module, name)
        home, target = documented_at(modname, name)
        if inspect.ismodule(obj):
            summary.append((name, obj.__name__))
            continue
        summary.append((name, f"{home}.{target}"))
        if home != modname:
            continue
        if inspect.isclass(obj):
            directive = "autoexception" if issubclass(obj, BaseException) else "autoclass"
        elif inspect.isfunction(inspect.unwrap(obj)) or inspect.isbuiltin(obj):  # lru_cache wrappers too
            directive = "autofunction"
        else:
            directive = "autodata"
        entries.append((directive, name))
    return {"summary": summary, "entries": entries}


def module_rst(modname: str) -> list[str]:
    """The reStructuredText that ``dpapi-module`` parses for ``modname``."""
    plan = module_plan(modname)
    rst = [f".. automodule:: {modname}", "   :no-members:", ""]
    if plan["summary"]:
        rst += [".. rubric:: Public names", "", f".. currentmodule:: {modname}", "",
                ".. autosummary::", "   :nosignatures:", ""]
        for _, target in plan["summary"]:
            # autosummary resolves names relative to the current module and wants them written so
            rel = target[len(modname) + 1:] if target.startswith(modname + ".") else target
            rst.append(f"   ~{rel}")
        rst += [""]
        aliases = [(n, t) for n, t in plan["summary"] if t.rpartition(".")[2] != n]
        if aliases:
            rst += ["Aliases: " + "; ".join(f"``{n}`` is :py:obj:`~{t}`" for n, t in aliases) + ".", ""]
    for directive, name in plan["entries"]:
        rst += [f".. {directive}:: {modname}.{name}"]
        if directive in ("autoclass", "autoexception"):
            rst += ["   :members:", "   :undoc-members:", "   :show-inheritance:"]
        elif directive == "autodata":
            rst += ["   :no-value:"]
        rst += [""]
    return rst


def _directive_class():
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.util.docutils import SphinxDirective
    from sphinx.util.nodes import nested_parse_with_titles

    class DPAPIModule(SphinxDirective):
        """``.. dpapi-module:: dputils.x``: the module's docstring, its public names and their entries."""

        required_arguments = 1
        has_content = False

        def run(self) -> list:
            modname = self.arguments[0]
            try:
                rst = module_rst(modname)
            except Exception as exc:  # a missing module is a build error with the module's name
                raise self.error(f"dpapi-module {modname}: {type(exc).__name__}: {exc}") from exc
            source = f"<dpapi-module {modname}>"
            content = StringList(rst, source=source)
            node = nodes.container(classes=["dpapi"])
            nested_parse_with_titles(self.state, content, node)
            return [node]

    return DPAPIModule


def _add_static(app: Any) -> None:
    """Ship book/_ext/static/dpapi.css with the HTML (column-fitting rules for the API pages)."""
    static = str(Path(__file__).with_name("static"))
    if static not in app.config.html_static_path:
        app.config.html_static_path.append(static)
    app.add_css_file("dpapi.css")


#: A hyphen between two non-space characters (``0..b-1``, ``1e-10``), where a browser would break a line.
_INNER_HYPHEN = re.compile(r"(?<=\S)-(?=\S)")


def keep_hyphenated_tokens(app: Any, doctree: Any, docname: str) -> None:
    """In the summary tables, write a hyphen inside a token as a non-breaking hyphen (U+2011), so a narrow
    description column never breaks ``0..b-1`` or ``1e-10`` after its hyphen (the browser check's ``split``)."""
    from docutils import nodes

    for table in doctree.findall(nodes.table):
        if "autosummary" not in table.get("classes", []):
            continue
        for text in list(table.findall(nodes.Text)):
            if isinstance(text.parent, nodes.literal) or "-" not in text:
                continue
            new = _INNER_HYPHEN.sub("\u2011", str(text))
            if new != str(text):
                text.parent.replace(text, nodes.Text(new))


def setup(app: Any) -> dict[str, Any]:
    if str(REPO_ROOT) not in sys.path[:1]:
        sys.path.insert(0, str(REPO_ROOT))
    for mod in [m for m in sys.modules if m == "dputils" or m.startswith("dputils.")]:
        # an editable install's copy imported before this extension ran would shadow the checkout
        if not str(Path(sys.modules[mod].__file__ or "")).startswith(str(REPO_ROOT)):
            del sys.modules[mod]
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.autosummary")
    app.add_directive("dpapi-module", _directive_class())
    app.connect("builder-inited", _add_static)
    app.connect("autodoc-process-docstring", escape_docstring, priority=600)
    app.connect("doctree-resolved", keep_hyphenated_tokens)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
