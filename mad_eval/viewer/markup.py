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
# The longest text rendered (Markdown, formulas), past any reply of a 32k-token budget:
# markdown-it spends up to ~25 us on each character of dense punctuation (`[`, `\\[`), so a
# longer text is left to the page, which shows a text it has no HTML for as it is.
MARKUP_CHARS = 200_000


class Formulas:
    """Where the formulas of one text close. Each closer is looked for in one forward scan
    per text, so a reply of a million unclosed `\\boxed{` or `\\[` costs one pass, not one per
    opener; a text's scans live with it, never in a cache shared by equal texts."""

    __slots__ = ("_braces", "_found", "src")

    def __init__(self, src: str) -> None:
        self.src = src
        self._braces: dict[int, int] | None = None
        self._found: dict[tuple[str, int], tuple[int, int]] = {}

    def at(self, pos: int, end: int) -> tuple[int, str, str] | None:
        """The formula starting at `pos` and ending by `end`, if one does: (where it ends,
        its TeX, "inline" or "display"); `\\boxed{...}` keeps its command so the box is
        drawn."""
        src = self.src
        if src.startswith("$$", pos):
            close = self._find("$$", pos + 2, end)
            if close > pos + 2 and src[pos + 2 : close].strip():
                return close + 2, src[pos + 2 : close], "display"
            return None
        for opener, closer, kind in (("\\[", "\\]", "display"), ("\\(", "\\)", "inline")):
            if src.startswith(opener, pos):
                close = self._find(closer, pos + 2, end)
                if close > pos + 2 and src[pos + 2 : close].strip():
                    return close + 2, src[pos + 2 : close], kind
                return None
        if src.startswith("$", pos):
            close = _dollar_end(src, pos + 1, end)
            return (close + 1, src[pos + 1 : close], "inline") if close > 0 else None
        if src.startswith(BOXED, pos):
            close = self._closing_brace(pos + len(BOXED), end)
            return (close + 1, src[pos : close + 1], "inline boxed") if close > 0 else None
        return None

    def _closing_brace(self, start: int, end: int) -> int:
        """The index of the brace closing the one just before `start` (-1: none before
        `end`)."""
        if self._braces is None:
            self._braces = _brace_pairs(self.src)
        close = self._braces.get(start - 1, -1)
        return close if close < end else -1

    def _find(self, needle: str, start: int, end: int) -> int:
        """src.find(needle, start, end), remembering the last answer for this needle and end:
        the starts of a text's formulas only move forward, so it is scanned once."""
        known = self._found.get((needle, end))
        if known is not None and known[0] <= start and (known[1] < 0 or start <= known[1]):
            return known[1]
        found = self.src.find(needle, start, end)
        self._found[(needle, end)] = (start, found)
        return found


def _brace_pairs(src: str) -> dict[int, int]:
    """Each `{` of `src` that is closed, with where its `}` is (a `\\` escapes the next
    character), in one regex scan."""
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


def math_span(tex: str, kind: str) -> str:
    return f'<span class="math {kind}">{html.escape(tex, quote=False)}</span>'


_MATH_START = re.compile(r"[$\\]")  # where a formula or an escaped dollar may start


def text_html(text: str | None) -> str | None:
    """Plain text (a question) as escaped HTML with its formulas in math spans; `\\$` is a
    dollar sign. Its line breaks stay characters (the page keeps them with CSS). None for
    a text past MARKUP_CHARS."""
    if text is None or len(text) > MARKUP_CHARS:
        return None
    formulas = Formulas(text)
    out, pos, plain, end = [], 0, 0, len(text)
    while (start := _MATH_START.search(text, pos)) is not None:
        pos = start.start()
        if text.startswith("\\$", pos):
            out.append(html.escape(text[plain:pos], quote=False) + "$")
            pos = plain = pos + 2
            continue
        found = formulas.at(pos, end)
        if found is None:
            pos += 1
            continue
        out.append(html.escape(text[plain:pos], quote=False))
        out.append(math_span(found[1], found[2]))
        pos = plain = found[0]
    out.append(html.escape(text[plain:], quote=False))
    return "".join(out)


_FORMULAS = "mad_eval.formulas"  # the render's env key of its inline text's Formulas


def _math_rule(state: Any, silent: bool) -> bool:
    """markdown-it's inline rule for a formula at the cursor (before its `\\` escapes)."""
    if state.src[state.pos] not in "$\\":
        return False
    formulas = state.env.get(_FORMULAS)
    if formulas is None or formulas.src is not state.src:  # the next paragraph's text
        formulas = state.env[_FORMULAS] = Formulas(state.src)
    found = formulas.at(state.pos, state.posMax)
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

    class WebLinksOnly(MarkdownIt):
        def validateLink(self, url: str) -> bool:  # markdown-it names it so
            return url.strip().lower().startswith(("http://", "https://"))

    md = WebLinksOnly("commonmark", {"html": False, "linkify": False}).enable("table")
    md.disable("image")
    md.inline.ruler.before("escape", "math", _math_rule)
    md.add_render_rule(
        "math", lambda self, tokens, i, options, env: math_span(tokens[i].content, tokens[i].info)
    )
    return md


def render_markdown(text: str | None) -> str | None:
    """A reply's Markdown as HTML, with raw HTML, images and every link but http(s) left
    as text, and its formulas as math spans; None for an empty reply or one past
    MARKUP_CHARS."""
    if not text or len(text) > MARKUP_CHARS:
        return None
    return str(_markdown().render(text, {}))
