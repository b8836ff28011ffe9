"""Answer extraction, equivalence and scores for every benchmark kind.

- math: the last `\\boxed{}` (else an answer cue), compared with math-verify.
- number: one number in the box, the cue or after `####`, compared exactly as a fraction.
- choice, preference: an option letter (or the exact text of one option).
- summary: the text after the last "Summary:" line, scored with ROUGE against the reference.

Model text is hostile input: extraction is a linear scan, and math-verify (sympy) runs in
worker processes (mad_eval.verifier) whose every call is bounded in time, so no answer can
hang a run. The workers are plain subprocesses: a script that grades needs no main guard,
and they die with the process that started them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from mad_eval.verifier import verify
from mad_eval.verify_worker import Comparison

MAX_ANSWER_CHARS = 1000
"""Longer extracted answers count as unparsed: a truncated answer would be a guess."""

# A box opener, an escaped character (so `\{` and `\}` are not grouping) or a bare brace.
_TOKEN = re.compile(r"\\(?:boxed|fbox|framebox)\s*\{|\\.|[{}]", re.DOTALL)
# Fallbacks when nothing is boxed, tried in this order; the last occurrence of each counts.
_CUES = [re.compile(p, re.IGNORECASE) for p in (r"final answer is", r"the answer is", r"answer:")]
_SENTENCE_END = re.compile(r"\.(?:\s|$)")
_INTEGER = re.compile(r"[+-]?(?:\d+|\d{1,3}(?:,\d{3})+)")


KINDS = ("math", "number", "choice", "preference", "summary")
VOTING_KINDS = ("math", "number", "choice", "preference")  # summaries are scored, not voted
ROUGE = ("rouge1", "rouge2", "rougeL")


@dataclass(frozen=True)
class Grade:
    """One graded text; an unparsed answer (None) is never correct. A summary is neither
    right nor wrong (`correct` None): its `rouge` F1 scores against the reference count."""

    answer: str | None  # extracted final answer; None when nothing could be extracted
    correct: bool | None  # False when unparsed; None for a summary
    rouge: dict[str, float] | None = None
    # math-verify could not decide within its bound: the answer counts as wrong
    timed_out: bool = False


def _last_box(text: str) -> tuple[int, int, int] | None:
    """(macro start, content start, content end) of the box that closes last, i.e. the last
    top-level one; None if no box closes. One pass, so linear in len(text)."""
    stack: list[tuple[int, int] | None] = []  # (macro start, content start) for a box's brace
    last = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "{":
            stack.append(None)
        elif tok == "}":
            if stack and (box := stack.pop()) is not None:
                last = (*box, m.start())
        elif len(tok) > 2:
            stack.append((m.start(), m.end()))
    return last


def _cue_answer(text: str) -> str | None:
    """Text after the last answer cue, up to the end of its line or sentence."""
    for cue in _CUES:
        if matches := list(cue.finditer(text)):
            line = text[matches[-1].end() :].split("\n", 1)[0]
            if stop := _SENTENCE_END.search(line):
                line = line[: stop.start()]
            return line.strip().strip("*").strip()
    return None


def extract_answer(text: str) -> str | None:
    """The last boxed answer, else the text after an answer cue; None if there is neither."""
    box = _last_box(text)
    answer = text[box[1] : box[2]] if box else _cue_answer(text)
    while answer is not None and len(answer) <= MAX_ANSWER_CHARS:
        answer = answer.strip().removesuffix(".").strip().strip("$").strip()
        box = _last_box(answer)
        if not box or box[0] != 0 or box[2] != len(answer) - 1:
            break
        answer = answer[box[1] : box[2]]  # `\boxed{\boxed{x}}` and `$\boxed{x}$.` both mean x
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return None
    return answer


def _integer_key(s: str) -> str | None:
    """Canonical digits of a plain integer ("+025", "1,000"), so equal ints compare equal."""
    if not _INTEGER.fullmatch(s):
        return None
    digits = s.lstrip("+-").replace(",", "").lstrip("0") or "0"
    return digits if s[0] != "-" or digits == "0" else "-" + digits


@functools.lru_cache(maxsize=65536)
def compare_math(answer: str, gold: str) -> Comparison:
    """Whether answer means gold, and whether math-verify ran out of time deciding: cheap
    string and integer checks first, then math-verify."""
    a, g = " ".join(answer.split()), " ".join(gold.split())
    if a == g:
        return Comparison(True, False)
    a_int, g_int = _integer_key(a), _integer_key(g)
    if a_int is not None and g_int is not None:
        return Comparison(a_int == g_int, False)
    if not a or len(a) > MAX_ANSWER_CHARS:
        return Comparison(False, False)
    return verify(a, g)


def equivalent(answer: str, gold: str) -> bool:
    """Whether answer means gold (a timed-out comparison counts as not); compare_math's
    cache serves both."""
    return compare_math(answer, gold).equal


# ---- number (GSM8K) -----------------------------------------------------------------------

# A number as written: thousands separators, a decimal part, a fraction "a/b"; digits glued to
# a letter or a dot ("x2", "v1.2") are not numbers of their own.
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?(?![\w.]\d)|(?<![\w.])[-+]?\.\d+"
)
_LATEX_FRACTION = re.compile(r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")


def number_key(text: str) -> str | None:
    """The one number `text` states, exactly ("1,080.00 dollars" -> "1080", "0.75" -> "3/4");
    None when it states none or several different ones: picking one would be a guess."""
    text = _LATEX_FRACTION.sub(r"\1/\2", text.replace("\u2212", "-").replace("{,}", ","))
    values = set()
    for match in _NUMBER.findall(text):
        numerator, _, denominator = match.replace(",", "").partition("/")
        if denominator and int(denominator) == 0:
            return None
        values.add(Fraction(numerator) / Fraction(denominator or 1))
    return str(values.pop()) if len(values) == 1 else None


def _gsm8k_tail(text: str) -> str | None:
    """The text after the last `####`, GSM8K's own answer marker, up to the line's end."""
    _, marker, tail = text.rpartition("####")
    return tail.split("\n", 1)[0].strip() if marker else None


def extract_number(text: str) -> str | None:
    """The one number of the final answer: the last box, else an answer cue, else `####`."""
    box = _last_box(text)
    found = text[box[1] : box[2]] if box else _cue_answer(text)
    if found is None:
        found = _gsm8k_tail(text)
    if not found or len(found) > MAX_ANSWER_CHARS:
        return None
    return number_key(found)


def number_gold(raw: str) -> str | None:
    """A GSM8K gold answer (the worked solution, then `#### 72`) as its number's key."""
    tail = _gsm8k_tail(raw)
    return number_key(raw if tail is None else tail)


# ---- choice and preference ---------------------------------------------------------------

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
# "B", "(B)", "B.", "B) text", "Option B", "**Response (A)**": a capital letter standing alone.
# A bare letter must end there or be followed by punctuation: "B because ..." is not read.
_LETTER = re.compile(
    r"(?:(?:option|choice|response|answer)\s*:?\s*)?(?:\(([A-Z])\)|([A-Z])(?=[.:)]|$))[.:)]?(?:\s.*)?",
    re.IGNORECASE | re.DOTALL,
)


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .*")


def extract_choice(text: str, options: Sequence[str]) -> str | None:
    """The letter of the option chosen: from the last box, else an answer cue, else the whole
    reply when it is nothing but a letter or an option. A letter beyond the options, or text
    matching no option or several, is unparsed."""
    box = _last_box(text)
    found = text[box[1] : box[2]] if box else _cue_answer(text)
    found = text if found is None else found
    if len(found) > MAX_ANSWER_CHARS:
        return None
    found = _WRAPPER.sub(r"\1", found).strip().strip("*$").strip()
    letters = LETTERS[: len(options)]
    match = _LETTER.fullmatch(found)
    letter = match and (match.group(1) or match.group(2))
    if letter and letter in LETTERS:  # a capital: IGNORECASE is for the words only
        return letter if letter in letters else None
    plain = _plain(found)
    hits = [LETTERS[i] for i, option in enumerate(options) if _plain(option) == plain]
    return hits[0] if len(hits) == 1 else None


def choice_gold(raw: str, options: Sequence[str]) -> str | None:
    """A gold option as its letter: a letter ("C"), or a 0-based index ("2", as HellaSwag and
    MMLU's hub copy store it)."""
    raw = raw.strip()
    if raw.isdigit():
        index = int(raw)
        return LETTERS[index] if index < len(options) else None
    return raw.upper() if len(raw) == 1 and raw.upper() in LETTERS[: len(options)] else None


# ---- summary -----------------------------------------------------------------------------

MAX_SUMMARY_CHARS = 4000
_SUMMARY_CUE = re.compile(r"^[ \t*#]*summary[ \t*]*:[ \t*]*", re.IGNORECASE | re.MULTILINE)


def extract_summary(text: str) -> str | None:
    """The text after the last line that opens with "Summary:", to the end of the reply."""
    cues = list(_SUMMARY_CUE.finditer(text))
    if not cues:
        return None
    summary = text[cues[-1].end() :].strip()
    return summary if summary and len(summary) <= MAX_SUMMARY_CHARS else None


class _Tokens:
    """rouge-score's tokenizer (lower case, Porter stems), remembering each text's tokens:
    the consensus rule scores every summary against every other."""

    def __init__(self) -> None:
        from rouge_score.tokenizers import DefaultTokenizer

        self._tokenizer = DefaultTokenizer(use_stemmer=True)
        self.tokenize = functools.lru_cache(maxsize=65536)(self._tokenizer.tokenize)


@functools.cache
def _scorer(*types: str):  # type: ignore[no-untyped-def]
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(list(types), tokenizer=_Tokens())


def rouge(summary: str, reference: str) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 of a summary against a reference, in [0, 1]."""
    scores = _scorer(*ROUGE).score(reference, summary)
    return {name: round(scores[name].fmeasure, 6) for name in ROUGE}


def consensus(summaries: Sequence[str]) -> int:
    """Which summary the agents agree on: the one with the highest mean ROUGE-L F1 to the
    others (the first on ties). It reads the summaries only, never the reference: picking
    the summary closest to the reference would be an oracle, not the system's output."""
    if len(summaries) < 2:
        return 0
    scorer = _scorer("rougeL")
    totals = [0.0] * len(summaries)
    for i in range(len(summaries)):
        for j in range(i + 1, len(summaries)):
            same = summaries[i] == summaries[j]
            f1 = 1.0 if same else scorer.score(summaries[i], summaries[j])["rougeL"].fmeasure
            totals[i] += f1
            totals[j] += f1
    return max(range(len(summaries)), key=lambda i: (totals[i], -i))


# ---- every kind --------------------------------------------------------------------------


def extract(text: str, kind: str = "math", options: Sequence[str] = ()) -> str | None:
    """The final answer of a reply, as the kind reads it; None when it cannot be read."""
    if kind == "math":
        return extract_answer(text)
    if kind == "number":
        return extract_number(text)
    if kind in ("choice", "preference"):
        return extract_choice(text, options)
    if kind == "summary":
        return extract_summary(text)
    raise ValueError(f"unknown benchmark kind {kind!r}; known: {', '.join(KINDS)}")


def same_answer(kind: str) -> Callable[[str, str], bool]:
    """Whether two extracted answers are the same answer: math-verify for math; the other
    kinds extract a canonical form (a letter, an exact fraction), so equal text."""
    return equivalent if kind == "math" else str.__eq__


def grade(text: str | None, gold: str, kind: str = "math", options: Sequence[str] = ()) -> Grade:
    """Extract the final answer from text and check it against gold (a summary is scored
    against the reference instead)."""
    answer = extract(text, kind, options) if text else None
    if kind == "summary":
        return Grade(answer, None, rouge(answer, gold) if answer is not None else None)
    if kind == "math" and answer is not None:
        comparison = compare_math(answer, gold)
        return Grade(answer, comparison.equal, timed_out=comparison.timed_out)
    return Grade(answer, answer is not None and same_answer(kind)(answer, gold))
