"""Answer protocols: WHERE a reply writes its final answer, and how the prompt asks for it.

A benchmark kind (mad_eval.grading.kinds) says what the answer is; its protocol says where to find
it: the last `\\boxed{}` (the default), a DAPO-style `Answer: X` last line (read and compared
exactly as verl's DAPO reward does under `dapo`), Math-Verify's own search of the whole reply,
a `{final answer: X}` group (or Debate-or-Vote's own reading of one, a number rounded to one
decimal: its paper's code, or a later fork's), the "debate_answer" of Liang et al.'s
moderator, or a "Summary:" line. Each
protocol also writes the prompt's answer-format sentence and the simulated agents' answers,
so a question is asked, answered and read one way. A protocol may also compare (`judge`: the
math-verify protocol takes Math-Verify's verdict on its own parses, as verl's scorer does;
dapo compares verl's normalised strings) and take settings after its name
(`math-verify:precision=2`, `configure`).

Reasoning is dropped before any protocol looks (closed `<think>` blocks, an unclosed block's
rest, all before a lone `</think>`): an answer the model only considered is never read. The
one exception is `dapo`, which reads a whole reply as verl does (a turn's final content, in a
run, since the backend splits the reasoning off before grading).
Model text is hostile input: every scan here is linear, and Math-Verify runs in the bounded
worker processes of mad_eval.grading.verifier.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

from mad_eval.errors import UserError
from mad_eval.grading import dapo, verifier
from mad_eval.grading.dov import dov_math, dov_math_fork
from mad_eval.grading.math_verify_settings import DEFAULT, MathVerifySettings, parse_settings
from mad_eval.grading.reasoning import drop_reasoning
from mad_eval.records import shown
from mad_eval.registry import Registry

MAX_ANSWER_CHARS = 1000
"""Longer extracted answers count as unparsed: a truncated answer would be a guess."""
DAPO_WINDOW = 300
"""The answer-line protocol reads only the reply's last characters, as DAPO's scorer does."""


class AnswerProtocolError(UserError, ValueError):
    """An answer protocol that does not exist, or settings it does not take."""


class Reading(NamedTuple):
    """A protocol's own verdict on a reply against a gold: the answer it found (None: none),
    whether it equals the gold, and whether it ran out of time deciding."""

    answer: str | None
    correct: bool
    timed_out: bool


class Found(NamedTuple):
    """What a protocol found: the answer text (None: nothing), the reply it searched (with
    reasoning dropped, for a kind's own fallbacks), and whether Math-Verify ran out of time."""

    answer: str | None
    reply: str
    timed_out: bool = False


@dataclass(frozen=True)
class AnswerProtocol:
    """Where a reply writes its final answer: how the prompt asks for it, how it is found, and
    how a simulated agent writes it."""

    name: str
    description: str  # one line, for --help and the docs
    template: str  # the prompt's answer-format sentence; {what} is the kind's phrase
    form: str  # how an answer is written; {answer} is the answer
    own_line: bool  # the written form starts a line of its own
    search: Callable[[str], tuple[str | None, bool]]  # (answer, timed out) in a reply
    fallback: bool = False  # a kind may read the reply its own way when nothing is found
    # A protocol that compares as well as finds: (reply, gold) -> its verdict, in place of
    # the kind's comparison (math-verify: Math-Verify's verdict on its own parses, as verl).
    judge: Callable[[str, str], Reading] | None = None
    # Settings after the name (`math-verify:precision=2`): the protocol they make.
    configure: Callable[[str], AnswerProtocol] | None = None
    whole: bool = False  # it reads the reply as written, reasoning included (its reference does)
    # Two answers are one answer only when their text is equal: the protocol's judge compares
    # strings (dapo), so votes must too.
    equal_text: bool = False
    # The judge's verdict from the answer it found and the gold alone, where it needs no
    # more (dapo): a recorded verdict is checked against it; None: the reply is needed.
    verdict: Callable[[str, str], bool] | None = None
    # Raised when what the protocol reads changes: a run records it, and a resume under
    # another revision is refused, so no run mixes two readings.
    revision: int = 1

    def instruction(self, what: str) -> str:
        """The answer-format sentence the prompt ends with."""
        return self.template.replace("{what}", what)

    def find(self, text: str, split: bool = True) -> Found:
        """The answer this protocol finds in a reply, reasoning dropped first (`split`
        False: `text` is a turn's final content, its reasoning split off already)."""
        reply = drop_reasoning(text) if split and not self.whole else text
        answer, timed_out = self.search(reply) if reply.strip() else (None, False)
        return Found(answer, reply, timed_out)

    def locate(self, text: str) -> str | None:
        """The raw answer text found in a reply, or None."""
        return self.find(text).answer

    def write(self, answer: str) -> str:
        """The answer as a simulated agent writes it under this protocol."""
        return self.form.replace("{answer}", answer)


def _last(matches: Iterator[re.Match[str]]) -> re.Match[str] | None:
    """The last of the matches (one pass, nothing kept but the last)."""
    tail = deque(matches, maxlen=1)
    return tail[0] if tail else None


# ---- boxed -------------------------------------------------------------------------------

# A box opener, an escaped character (so `\{` and `\}` are not grouping) or a bare brace.
_BOX_TOKEN = re.compile(r"\\(?:boxed|fbox|framebox)\s*\{|\\.|[{}]", re.DOTALL)
# Fallbacks when nothing is boxed: the cue that comes last in the reply wins, of any type.
_CUE = re.compile(r"final answer is|the answer is|answer:", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)")


def last_group(text: str, tokens: re.Pattern[str] = _BOX_TOKEN) -> tuple[int, int, int] | None:
    """(opener start, content start, content end) of the group that closes last, i.e. the
    last top-level one; `tokens` matches openers (longer than two characters), escapes and
    bare braces. None if no group closes. One pass, so linear in len(text)."""
    stack: list[tuple[int, int] | None] = []  # (opener start, content start) for a group
    last = None
    for m in tokens.finditer(text, _first_opener(text) if tokens is _BOX_TOKEN else 0):
        tok = m.group()
        if tok == "{":
            stack.append(None)
        elif tok == "}":
            if stack and (group := stack.pop()) is not None:
                last = (*group, m.start())
        elif len(tok) > 2:
            stack.append((m.start(), m.end()))
    return last


def _first_opener(text: str) -> int:
    """Where scanning for boxes may start: the run of backslashes before the first `\\boxed`,
    `\\fbox` or `\\framebox` (the end when there is none). Before it no group has an opener,
    so braces there change no box, and no token crosses it (each token that is longer than
    a brace starts with a backslash); a long derivation before its answer is not scanned."""
    found = [i for i in (text.find(o) for o in ("\\boxed", "\\fbox", "\\framebox")) if i >= 0]
    start = min(found, default=len(text))
    while start > 0 and text[start - 1] == "\\":
        start -= 1
    return start


def cue_answer(text: str) -> str | None:
    """Text after the answer cue that comes last, up to the end of its line or sentence."""
    cue = _last(_CUE.finditer(text))
    if cue is None:
        return None
    line = text[cue.end() :].split("\n", 1)[0]
    if stop := _SENTENCE_END.search(line):
        line = line[: stop.start()]
    return line.strip().strip("*").strip()


def _boxed(reply: str) -> tuple[str | None, bool]:
    box = last_group(reply)
    return (reply[box[1] : box[2]] if box else cue_answer(reply)), False


# ---- answer-line (DAPO) ------------------------------------------------------------------

# "Answer: X" anywhere on a line, as DAPO's scorer matches it: whitespace (newlines too) on
# either side of the colon, so "Answer:\n204" reads 204; markdown bold is tolerated.
_ANSWER_LINE = re.compile(r"answer[\s*]*:[\s*]*([^\n]*)", re.IGNORECASE)
# A text wrapper, and the exponent a unit may carry after it ("\mbox{ cm}^2").
_TEXT_GROUP = re.compile(
    r"\\(?:text|textbf|textrm|mbox|mathrm)\s*\{([^{}]*)\}(\^\s*\{?\s*[23]\s*\}?)?"
)
# Spacing macros, degree marks and dots; a `\\` (a matrix row's end) is kept whole, so its
# second backslash is never read as the start of `\ `.
_NOISE = re.compile(
    r"(\\\\)|\^\s*(?:\{\s*\\circ\s*\}|\\circ)|\\[,;:! ]|\{,\}|\\(?:ldots|dots|cdots)"
)
# Unit words after a value: "7 dollars", "12 \text{ cm}", "12 cm^2" mean 7 and 12.
_UNITS = (
    "units?|degrees?|dollars?|cents?|inch(?:es)?|feet|foot|miles?|meters?|metres?|cm|mm|km|"
    "kg|mph|hours?|minutes?|seconds?|days?|weeks?|years?|ways?|points?|students?|people"
)
_UNIT_WORDS = re.compile(
    rf"(?:\s+(?:(?:square|cubic|sq)\s+)?(?:{_UNITS})\b(?:\^\{{?[23]\}}?)?)+\s*$", re.IGNORECASE
)
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+")
_SPACED_THOUSANDS = re.compile(r"[-+]?\d{1,3}(?: \d{3})+")
# A sentence after the answer ("$\pi$. I hope it is correct."): a period, then a capital.
_SENTENCE_AFTER = re.compile(r"\.\s+[A-Z][^$]*$")
# LaTeX's thousands separator `,\!` and the space a writer may leave after it.
_LATEX_THOUSANDS = re.compile(r",\\!\s*")
# An equation set to zero (a plane, a line) is an answer whole, not its right side.
_EQUATION = re.compile(r"=\s*0[\s.]*$")
# Math in a sentence of words ("The final answer is $8$"): the math is the answer.
_MATH_IN_WORDS = re.compile(r"[A-Za-z ,:]*\$([^$]+)\$[ .]*")


def _answer_line(reply: str) -> tuple[str | None, bool]:
    match = _last(_ANSWER_LINE.finditer(reply[-DAPO_WINDOW:]))
    return (normalise_dapo(match.group(1)) if match else None), False


def _unbox(text: str) -> str:
    """`\\boxed{x}` as x, `.` after it or not; anything else unchanged."""
    inner = text.strip().rstrip(".").strip()
    box = last_group(inner)
    if box and box[0] == 0 and box[2] == len(inner) - 1:
        return inner[box[1] : box[2]]
    return text


def normalise_dapo(answer: str) -> str | None:
    """An `Answer: X` value reduced as DAPO's scorer reduces it, by our own rules: no markdown,
    `$` or box around it, no sentence after it, only the part after the last `=` (but for
    an equation set to zero), no
    spacing macros, degree marks or escaped dollar signs, text wrappers opened ("and"
    between values a comma), unit words after a value dropped, no trailing period, no
    thousands commas or spaces in an integer. None when nothing is left."""
    found = answer.strip().strip("*").strip()
    if len(found) > MAX_ANSWER_CHARS:
        return None
    if sentence := _SENTENCE_AFTER.search(found):
        found = found[: sentence.start()]
    if math := _MATH_IN_WORDS.fullmatch(found):
        found = math.group(1)
    found = found.replace("\\$", "").replace("\\(", "").replace("\\)", "").replace("$", "")
    found = _unbox(_LATEX_THOUSANDS.sub(",", found))
    value = found if _EQUATION.search(found) else found.rsplit("=", 1)[-1]
    source = _NOISE.sub(lambda m: m.group(1) or "", _unbox(value))

    def opened(m: re.Match[str]) -> str:
        words, power = m.group(1).strip(), m.group(2) or ""
        if words.casefold() == "and":  # "1 \text{ and } 2" lists two answers
            return ","
        # Words after a value are its unit ("5 \text{ cm}", with its power); alone they are
        # the answer.
        unit = source[: m.start()].strip() and re.fullmatch(r"[A-Za-z ]+", words)
        return "" if unit else words + power

    found = " ".join(_TEXT_GROUP.sub(opened, source).split()).replace(" ,", ",")
    found = found.rstrip(".").strip()
    if unit := _UNIT_WORDS.search(found):
        found = found[: unit.start()].strip() or found
    if _THOUSANDS.fullmatch(found):
        found = found.replace(",", "")
    if _SPACED_THOUSANDS.fullmatch(found):
        found = found.replace(" ", "")
    return found or None


def _dapo(reply: str) -> tuple[str | None, bool]:
    return dapo.read(reply), False


def _dapo_judge(reply: str, gold: str) -> Reading:
    """verl's DAPO reward on the reply: the prediction it reads, and whether it equals the
    gold once both are normalised (dapo.py)."""
    answer = dapo.read(reply)
    return Reading(answer, answer is not None and _dapo_verdict(answer, gold), False)


def _dapo_verdict(answer: str, gold: str) -> bool:
    return answer == dapo.normalise(gold)


# ---- math-verify -------------------------------------------------------------------------


def _math_verify(reply: str, settings: MathVerifySettings = DEFAULT) -> tuple[str | None, bool]:
    found = verifier.extract(reply, settings)
    return found.answer, found.timed_out


def _math_verify_judge(reply: str, gold: str, settings: MathVerifySettings = DEFAULT) -> Reading:
    """Math-Verify's verdict on its own parses of the reply and the gold, as verl's
    math_verify.compute_score decides, so no answer is lost between finding and comparing
    (one kept only as text, a percent, a parse of another match than the text shown)."""
    found = verifier.read(reply, gold, settings)
    return Reading(found.answer, found.equal, found.timed_out)


@functools.lru_cache(maxsize=256)
def _math_verify_with(given: str) -> AnswerProtocol:
    """The math-verify protocol with Math-Verify's settings (math_verify_settings)."""
    settings = parse_settings(given)
    return replace(
        ANSWER_PROTOCOLS.get("math-verify"),
        name=f"math-verify:{given}",
        search=functools.partial(_math_verify, settings=settings),
        judge=functools.partial(_math_verify_judge, settings=settings),
        configure=None,
    )


# ---- braces ------------------------------------------------------------------------------

_BRACES_TOKEN = re.compile(r"\{[ \t]*final[ \t]+answer[ \t]*:|\\.|[{}]", re.IGNORECASE | re.DOTALL)


def _braces(reply: str) -> tuple[str | None, bool]:
    group = last_group(reply, _BRACES_TOKEN)
    answer = reply[group[1] : group[2]].strip() if group else None
    return answer or None, False


# ---- summary-line ------------------------------------------------------------------------

_SUMMARY_CUE = re.compile(r"^[ \t*#]*summary[ \t*]*:[ \t*]*", re.IGNORECASE | re.MULTILINE)


def _summary_line(reply: str) -> tuple[str | None, bool]:
    cue = _last(_SUMMARY_CUE.finditer(reply))
    summary = reply[cue.end() :].strip() if cue else ""
    return summary or None, False


# ---- debate-answer -----------------------------------------------------------------------

# Liang et al.'s moderator answers with a dict literal (JSON or Python quoting) whose
# "debate_answer" holds its answer: a quoted string (escapes included) or a bare number.
_DEBATE_ANSWER = re.compile(
    r"""["']debate_answer["']\s*:\s*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[-+]?[\d.]+)"""
)


def _debate_answer(reply: str) -> tuple[str | None, bool]:
    found = _last(_DEBATE_ANSWER.finditer(reply))
    if found is None or len(found.group(1)) > MAX_ANSWER_CHARS:
        return None, False
    try:
        value = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return None, False
    answer = str(value).strip()
    return answer or None, False  # an empty answer is none: the moderator lets it go on


# ---- the registry ------------------------------------------------------------------------

_STEP_BY_STEP = "Reason step by step, then give {what}"


# Where replies write their answers, by name; other packages add theirs through the
# `mad_eval.answer_protocols` entry-point group.
ANSWER_PROTOCOLS: Registry[AnswerProtocol] = Registry(
    "answer protocol", "mad_eval.answer_protocols", error=AnswerProtocolError, holds=AnswerProtocol
)
for _protocol in (
    AnswerProtocol(
        "boxed",
        "the last \\boxed{} in the reply, else the last answer cue (the default)",
        _STEP_BY_STEP + " in \\boxed{}.",
        "\\boxed{{answer}}",
        False,
        _boxed,
        fallback=True,
    ),
    AnswerProtocol(
        "answer-line",
        "DAPO's last 'Answer: X' line, read in the reply's last 300 characters",
        _STEP_BY_STEP + ' on the last line of your reply, in the form "Answer: X".',
        "Answer: {answer}",
        True,
        _answer_line,
        revision=2,  # issue 32: newlines after the colon, \\$, units with a power, ...
    ),
    AnswerProtocol(
        "dapo",
        "verl's DAPO reward exactly: its 'Answer:' reading and normalised strings compared",
        # The answer-line sentence: the two protocols differ in reading, not in asking.
        _STEP_BY_STEP + ' on the last line of your reply, in the form "Answer: X".',
        "Answer: {answer}",
        True,
        _dapo,
        judge=_dapo_judge,
        whole=True,
        equal_text=True,
        verdict=_dapo_verdict,
    ),
    AnswerProtocol(
        "math-verify",
        "Math-Verify's own search of the whole reply, as verl grades MATH500",
        # The boxed sentence: Math-Verify reads a box first, and the same prompt as the
        # default keeps a comparison of the two protocols about grading alone.
        _STEP_BY_STEP + " in \\boxed{}.",
        "The answer is ${answer}$.",
        True,
        _math_verify,
        judge=_math_verify_judge,
        configure=_math_verify_with,
    ),
    AnswerProtocol(
        "braces",
        "the last {final answer: X} in the reply",
        _STEP_BY_STEP + " at the end of your reply, in the form {final answer: X}.",
        "{final answer: {answer}}",
        False,
        _braces,
    ),
    AnswerProtocol(
        "dov-math",
        "Debate-or-Vote's math reader (the paper's code): the last {...} group on a line, "
        "'final answer:' dropped, read as a number rounded to one decimal",
        _STEP_BY_STEP + " as the very end of your reply, in the form {final answer: X}.",
        "{final answer: {answer}}",
        False,
        dov_math,
        revision=2,  # issue 46: the paper's reader (82c929e); revision 1 read as dov-math-fork
    ),
    AnswerProtocol(
        "dov-math-fork",
        "the math reader of a later Debate-or-Vote fork: the last {final answer: N}, else the "
        "last \\boxed{}, read as a number rounded to one decimal",
        # The paper's sentence: the fork changed how answers are read, not how they are asked.
        _STEP_BY_STEP + " as the very end of your reply, in the form {final answer: X}.",
        "{final answer: {answer}}",
        False,
        dov_math_fork,
    ),
    AnswerProtocol(
        "debate-answer",
        'the "debate_answer" of the last JSON or Python dict in the reply, as Liang et '
        "al.'s moderator writes it (empty: none)",
        _STEP_BY_STEP + ' as JSON at the end of your reply: {"debate_answer": "X"}.',
        '{"debate_answer": "{answer}"}',
        True,
        _debate_answer,
    ),
    AnswerProtocol(
        "summary-line",
        "the text after the last line that opens with 'Summary:'",
        'End your reply with a line that starts with "Summary:", followed by {what} and '
        "nothing after it.",
        "Summary: {answer}",
        True,
        _summary_line,
    ),
):
    ANSWER_PROTOCOLS.add(_protocol.name, _protocol)


def protocol_name(spec: str) -> str:
    """The protocol's registry name, without its settings (`math-verify:precision=2`)."""
    return spec.partition(":")[0].strip()


def get_answer_protocol(spec: str) -> AnswerProtocol:
    """The protocol of that name, with its settings after a colon; an unknown name, or
    settings it does not take, are refused in one sentence."""
    name, colon, given = spec.partition(":")
    protocol = ANSWER_PROTOCOLS.get(name)
    if not colon:
        return protocol
    if protocol.configure is None:
        takes = ", ".join(n for n, p in ANSWER_PROTOCOLS.items() if p.configure) or "none"
        raise AnswerProtocolError(
            f"the {name} answer protocol takes no settings ({shown(spec, 80)}); protocols with "
            f"settings: {takes}."
        )
    return protocol.configure(given)
