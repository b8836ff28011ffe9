"""Model text as HTML for the viewer: Markdown rendered with raw HTML off, and LaTeX kept
whole as escaped text in `<span class="math">` (the page typesets those with KaTeX, with
`trust` off), so Markdown never mangles a formula and no reply can inject markup.

Math is `$$...$$`, `\\[...\\]`, `\\(...\\)`, `$...$` (closed by the next `$`, and as pandoc
has it: no space inside the dollars, no digit after them, so "$5 and $6" stays text) and a bare
`\\boxed{...}`, which models write outside any delimiters."""

from __future__ import annotations

import functools
import html
import re
from typing import Any

BOXED = "\\boxed{"


def _closing_brace(src: str, start: int, end: int) -> int:
    """The index of the brace closing the one just before `start` (-1: none before `end`)."""
    close = _braces(src).get(start - 1, -1)
    return close if close < end else -1


@functools.lru_cache(maxsize=8)
def _braces(src: str) -> dict[int, int]:
    """Each `{` of `src` that is closed, with where its `}` is (a `\\` escapes the next
    character): one pass, so a reply of a thousand unclosed `\\boxed{` costs one scan, not
    one scan each."""
    pairs: dict[int, int] = {}
    open_at: list[int] = []
    for found in _BRACE_OR_ESCAPE.finditer(src):
        c = found[0]
        if c == "{":
            open_at.append(found.start())
        elif c == "}" and open_at:
            pairs[open_at.pop()] = found.start()
    return pairs


_BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.S)  # an escaped character is skipped whole


def _find(src: str, needle: str, start: int, end: int) -> int:
    """src.find(needle, start, end), remembering the last answer for this text and end: the
    starts of a text's formulas only move forward, so a reply of many unclosed `\\[` is
    scanned once, not once for each."""
    key = (src, needle, end)
    known = _FOUND.get(key)
    if known is not None and known[0] <= start and (known[1] < 0 or start <= known[1]):
        return known[1]
    found = src.find(needle, start, end)
    if len(_FOUND) > 64:
        _FOUND.clear()
    _FOUND[key] = (start, found)
    return found


_FOUND: dict[tuple[str, str, int], tuple[int, int]] = {}


def _dollar_end(src: str, start: int, end: int) -> int:
    """Where the `$` closing an inline formula opened just before `start` is: the next
    unescaped `$`, if it may close one (-1: none, or it may not)."""
    if start >= end or src[start].isspace():
        return -1
    i = start
    while True:
        i = src.find("$", i, end)
        if i < 0:
            return -1
        if src[i - 1] != "\\":
            break
        i += 1
    after = src[i + 1] if i + 1 < len(src) else ""
    if src[i - 1].isspace() or after.isdigit() or "\n\n" in src[start:i]:
        return -1
    return i


def find_math(src: str, pos: int, end: int | None = None) -> tuple[int, str, str] | None:
    """The formula starting at `pos`, if one does: (where it ends, its TeX, "inline" or
    "display"); `\\boxed{...}` keeps its command so the box is drawn."""
    end = len(src) if end is None else end
    if src.startswith("$$", pos):
        close = _find(src, "$$", pos + 2, end)
        if close > pos + 2 and src[pos + 2 : close].strip():
            return close + 2, src[pos + 2 : close], "display"
        return None
    for opener, closer, kind in (("\\[", "\\]", "display"), ("\\(", "\\)", "inline")):
        if src.startswith(opener, pos):
            close = _find(src, closer, pos + 2, end)
            if close > pos + 2 and src[pos + 2 : close].strip():
                return close + 2, src[pos + 2 : close], kind
            return None
    if src.startswith("$", pos):
        close = _dollar_end(src, pos + 1, end)
        return (close + 1, src[pos + 1 : close], "inline") if close > 0 else None
    if src.startswith(BOXED, pos):
        close = _closing_brace(src, pos + len(BOXED), end)
        return (close + 1, src[pos : close + 1], "inline boxed") if close > 0 else None
    return None


def math_span(tex: str, kind: str) -> str:
    return f'<span class="math {kind}">{html.escape(tex, quote=False)}</span>'


def text_html(text: str | None) -> str | None:
    """Plain text (a question) as escaped HTML with its formulas in math spans; `\\$` is a
    dollar sign. Its line breaks stay characters (the page keeps them with CSS)."""
    if text is None:
        return None
    out, pos, plain = [], 0, 0
    while pos < len(text):
        c = text[pos]
        if c == "\\" and text.startswith("\\$", pos):
            out.append(html.escape(text[plain:pos], quote=False) + "$")
            pos = plain = pos + 2
            continue
        found = find_math(text, pos) if c in "$\\" else None
        if found is None:
            pos += 1
            continue
        out.append(html.escape(text[plain:pos], quote=False))
        out.append(math_span(found[1], found[2]))
        pos = plain = found[0]
    out.append(html.escape(text[plain:], quote=False))
    return "".join(out)


def _math_rule(state: Any, silent: bool) -> bool:
    """markdown-it's inline rule for a formula at the cursor (before its `\\` escapes)."""
    if state.src[state.pos] not in "$\\":
        return False
    found = find_math(state.src, state.pos, state.posMax)
    if found is None:
        return False
    if not silent:
        token = state.push("math", "", 0)
        token.content, token.info = found[1], found[2]
    state.pos = found[0]
    return True


@functools.cache
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.disable("image")
    md.validateLink = lambda url: url.strip().lower().startswith(("http://", "https://"))
    md.inline.ruler.before("escape", "math", _math_rule)
    md.add_render_rule(
        "math", lambda self, tokens, i, options, env: math_span(tokens[i].content, tokens[i].info)
    )
    return md


def render_markdown(text: str | None) -> str | None:
    """A reply's Markdown as HTML, with raw HTML, images and every link but http(s) left
    as text, and its formulas as math spans."""
    if not text:
        return None
    return str(_markdown().render(text))
