"""Executed copies of a profile other than the book's say so, and still build.

The book's pages are the ``full`` profile's executed copies. A copy run at another profile (``smoke``: reduced
sizes for a quick check; ``paper``: the papers' own sizes) gets, from the runner (:func:`mark_profile`, applied to
the executed copy, never to the source):

* a one-line warning right under the chapter's title naming the profile and the file its values come from, so that
  no smoke-sized number is read as the book's, and saying that the prose's relations (asserted at the book's
  profile only, where they hold for the full sizes) may not hold for these values;
* every ``{glue:...}`` reference to a value this run did not glue (a smoke run skips the costliest cells) replaced
  by the words "not computed at the smoke profile" (a glued figure: a paragraph saying so), so that the book of
  that profile builds with ``-W`` instead of stopping at the first unknown glue key. A reference whose value was
  glued is left alone.
"""

from __future__ import annotations

import re
from typing import Any

BOOK_PROFILE = "full"
#: a glue role: {glue}`key`, {glue:text}`key:format`, {glue:any}`key`, ...
_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`([^`:]+)(?::[^`]*)?`")
#: a glue directive block (``` or ::: fence): its opening line (with the key) up to its closing fence
_BLOCK = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{glue(?::[a-z]+)?\}[ \t]+(?P<key>\S+)[^\n]*\n.*?^(?P=fence)[ \t]*$", re.M | re.S
)


def glued_keys(nb: Any) -> set[str]:
    """The names glued in an executed notebook (MyST-NB keeps each in its output's ``scrapbook`` metadata)."""
    out = set()
    for c in nb.cells:
        for o in c.get("outputs", []) if c.get("cell_type") == "code" else []:
            sb = (o.get("metadata") or {}).get("scrapbook")
            if isinstance(sb, dict) and sb.get("name"):
                out.add(sb["name"])
    return out


def note_text(profile: str) -> str:
    sized = {"smoke": "a quick run at reduced sizes", "paper": "the papers' own sizes"}.get(profile, "its own values")
    return (
        "```{warning}\n"
        f"Profile `{profile}`, not the book's: every number on this page comes from `params/{profile}.yml` "
        f"({sized}); values this run did not compute say so. The text's words about them (larger, mostly, grows) "
        "are written and checked for the book's profile and may not hold at these sizes.\n"
        "```"
    )


def missing_text(profile: str) -> str:
    return f"*(not computed at the {profile} profile)*"


def mark_profile(nb: Any, profile: str | None) -> list[str]:
    """Apply the marks of the module docstring to the executed notebook ``nb`` (in place) when ``profile`` is not
    the book's; returns the glue keys whose references were replaced."""
    import nbformat

    if profile is None or profile == BOOK_PROFILE:
        return []
    have = glued_keys(nb)
    missing: set[str] = set()
    placeholder = missing_text(profile)

    def role(m: re.Match[str]) -> str:
        if m.group(1).strip() in have:
            return m.group(0)
        missing.add(m.group(1).strip())
        return placeholder

    def block(m: re.Match[str]) -> str:
        if m.group("key") in have:
            return m.group(0)
        missing.add(m.group("key"))
        return f"{placeholder[:-2]}: figure `{m.group('key')}`)*"

    for c in nb.cells:
        if c.get("cell_type") != "markdown":
            continue
        text = c.source
        new = _ROLE.sub(role, _BLOCK.sub(block, text))
        if new != text:
            c.source = new
    note = note_text(profile)
    for c in nb.cells:  # right under the chapter's title (else at the top)
        if c.get("cell_type") == "markdown" and (h1 := re.search(r"^# .*$", c.source, re.M)):
            c.source = c.source[: h1.end()] + "\n\n" + note + "\n" + c.source[h1.end() :]
            break
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(note))
    nb.metadata.setdefault("dputils", {})["not_computed"] = sorted(missing)
    return sorted(missing)
