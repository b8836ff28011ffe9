"""Answer protocols (where a reply writes its answer) and benchmark kinds (what the answer is):
the registries, each protocol on its own cases, reasoning never read, the prompt sentences
existing runs hash, and the simulated agents writing and reading each protocol."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mad_eval.backends import Request, Sampling, make_backend
from mad_eval.data.benchmarks import BenchmarkError, load_questions, load_spec
from mad_eval.grading import grader as grading
from mad_eval.grading import verifier
from mad_eval.grading.answers import (
    ANSWER_PROTOCOLS,
    DAPO_WINDOW,
    drop_reasoning,
    get_answer_protocol,
    normalise_dapo,
)
from mad_eval.grading.grader import Grade, check_answer_protocol, extract, grade, same_answer
from mad_eval.grading.kinds import KINDS, get_kind
from mad_eval.grading.verdicts import VERDICTS
from mad_eval.records import Question

# The answer-format sentences as prompts.ANSWER_FORMATS held them before the registry: the
# prompts of existing runs, and so their hashes, depend on every byte.
OLD_ANSWER_FORMATS = {
    "math": "Reason step by step, then give your final answer in \\boxed{}.",
    "number": "Reason step by step, then give your final answer as a single number in \\boxed{}.",
    "choice": (
        "Reason step by step, then give the letter of the one option you choose, and nothing "
        "else, in \\boxed{}."
    ),
    "preference": (
        "Reason step by step, then give the letter of the better response, A or B, and nothing "
        "else, in \\boxed{}."
    ),
    "summary": (
        'End your reply with a line that starts with "Summary:", followed by your summary of '
        "the article in three or four sentences and nothing after it."
    ),
}
OPTIONS = ["cupboard", "oven", "refrigerator", "garden"]
HOSTILE_MATH = "$" + "9^" * 49_998 + "99$"  # 100k characters: sympy would compute for ages


@pytest.fixture(autouse=True)
def no_cached_extractions() -> Iterator[None]:
    VERDICTS.forget()
    yield
    VERDICTS.forget()


# ---- the registries ----------------------------------------------------------------------


def test_the_protocols_and_kinds_are_registered() -> None:
    assert list(ANSWER_PROTOCOLS) == [
        "boxed",
        "answer-line",
        "dapo",
        "math-verify",
        "braces",
        "dov-math",
        "dov-math-fork",
        "debate-answer",
        "summary-line",
    ]
    assert list(grading.KINDS) == ["math", "number", "choice", "preference", "summary"]
    voting = [name for name, kind in KINDS.items() if kind.voted]
    assert voting == ["math", "number", "choice", "preference"]
    for name, kind in KINDS.items():
        assert kind.name == name and kind.default_answer in kind.answers
        assert (kind.voted, kind.rule) == (
            (False, "consensus") if name == "summary" else (True, "plurality")
        )
    assert KINDS.get("math").answers == (
        "boxed",
        "answer-line",
        "dapo",
        "math-verify",
        "braces",
        "dov-math",
        "dov-math-fork",
        "debate-answer",
    )
    assert KINDS.get("number").answers == (
        "boxed",
        "answer-line",
        "braces",
        "dov-math",
        "dov-math-fork",
        "debate-answer",
    )
    assert KINDS.get("choice").answers == ("boxed", "answer-line", "braces")
    assert KINDS.get("preference").answers == ("boxed", "answer-line", "braces")
    assert (KINDS.get("summary").default_answer, KINDS.get("summary").answers) == (
        "summary-line",
        ("summary-line",),
    )
    for _, protocol in ANSWER_PROTOCOLS.items():
        assert protocol.description and "\n" not in protocol.description
        assert any(protocol.name in kind.answers for _, kind in KINDS.items())  # none unused


def test_unknown_names_are_one_sentence() -> None:
    with pytest.raises(ValueError) as error:
        get_answer_protocol("x")
    assert str(error.value) == (
        "unknown answer protocol 'x'; known: boxed, answer-line, dapo, math-verify, braces, "
        "dov-math, dov-math-fork, debate-answer, summary-line."
    )
    with pytest.raises(ValueError, match=r"unknown benchmark kind 'mcq'; known: math, number"):
        get_kind("mcq")
    with pytest.raises(ValueError, match="unknown answer protocol 'verl'"):
        grade("Answer: 5", "5", "math", answer="verl")


@pytest.mark.parametrize(
    ("kind", "answer"),
    [
        ("summary", "boxed"),
        ("number", "math-verify"),
        ("choice", "summary-line"),
        ("math", "summary-line"),
    ],
)
def test_an_unsupported_pair_is_one_sentence(kind: str, answer: str) -> None:
    accepted = ", ".join(KINDS.get(kind).answers)
    message = (
        f"the {kind} kind cannot be read with the {answer} answer protocol; it accepts: {accepted}."
    )
    for call in (
        lambda: check_answer_protocol(kind, answer),
        lambda: grade("anything", "1", kind, OPTIONS, answer),
        lambda: extract("anything", kind, OPTIONS, answer),
    ):
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value) == message


def test_none_is_the_kinds_default() -> None:
    assert [check_answer_protocol(k) for k in KINDS] == ["boxed"] * 4 + ["summary-line"]
    assert check_answer_protocol("math", "math-verify") == "math-verify"


# ---- the prompt's sentences --------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(OLD_ANSWER_FORMATS))
def test_the_default_instruction_is_byte_identical_to_the_old_one(kind: str) -> None:
    found = KINDS.get(kind)
    sentence = get_answer_protocol(found.default_answer).instruction(found.what)
    assert sentence == OLD_ANSWER_FORMATS[kind]
    if found.voted:
        assert get_answer_protocol("boxed").instruction(found.what) == OLD_ANSWER_FORMATS[kind]


def test_the_other_instructions_ask_for_their_form() -> None:
    what = KINDS.get("math").what
    assert get_answer_protocol("answer-line").instruction(what) == (
        "Reason step by step, then give your final answer on the last line of your reply, in "
        'the form "Answer: X".'
    )
    assert "{final answer: X}" in get_answer_protocol("braces").instruction(what)
    # Math-Verify reads a box first: its prompt is the default's, so only grading differs.
    assert get_answer_protocol("math-verify").instruction(what) == OLD_ANSWER_FORMATS["math"]


# ---- boxed -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("...the answer is 5, but that is wrong.\nAnswer: 7", "7"),  # the last cue wins
        ("Answer: 7, or so I thought; the answer is 8.", "8"),
        ("The final answer is 5. Someone said the answer is 6", "6"),
        ("the answer is 3. My final answer is 4", "4"),
        (r"\boxed{3} but the answer is 4", "3"),  # a box beats every cue
        (r"first \boxed{3}, then \boxed{4}", "4"),
        ("no cue at all", None),
    ],
)
def test_boxed_reads_the_last_box_else_the_last_cue(text: str, expected: str | None) -> None:
    assert extract(text, "math") == expected == get_answer_protocol("boxed").locate(text)


def test_boxed_keeps_each_kinds_own_fallback() -> None:
    assert extract("36 - 5 = 31\n#### 31", "number") == "31"
    assert extract("C. refrigerator", "choice", OPTIONS) == "C"
    # The other protocols never guess from the rest of the reply.
    assert extract("36 - 5 = 31\n#### 31", "number", answer="answer-line") is None
    assert extract("C. refrigerator", "choice", OPTIONS, "answer-line") is None
    assert extract("C", "choice", OPTIONS, "braces") is None


# ---- answer-line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{5} for the sub-case...\nAnswer: 7", "7"),  # the answer line, not the box
        ("...the answer is 5, but that is wrong.\nAnswer: 7", "7"),
        ("Answer: 3\nOn reflection:\nAnswer: 4", "4"),
        ("**Answer:** 7", "7"),
        ("**Answer**: 7", "7"),
        ("FINAL ANSWER: 7", "7"),
        ("answer:7", "7"),
        ("Answer: $\\boxed{42}$.", "42"),
        ("Answer: x = 5", "5"),
        ("Answer:", None),
        ("Answer: **", None),
        (r"\boxed{5}", None),  # no answer line: nothing, whatever else the reply says
        ("the answer is 5", None),
    ],
)
def test_answer_line(text: str, expected: str | None) -> None:
    assert extract(text, "math", answer="answer-line") == expected


def test_answer_line_looks_only_near_the_end() -> None:
    near = "Answer: 7\n" + "x" * (DAPO_WINDOW - 20)
    far = "Answer: 7\n" + "x" * DAPO_WINDOW
    assert extract(near, "math", answer="answer-line") == "7"
    assert extract(far, "math", answer="answer-line") is None
    assert extract(far, "math") == "7"  # boxed reads the whole reply


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("$\\boxed{42}$.", "42"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("x = \\frac{1}{2}", "\\frac{1}{2}"),
        ("**27**", "27"),
        ("\\(27\\)", "27"),
        ("1,000", "1000"),
        ("-1,234,567", "-1234567"),
        ("1,2", "1,2"),  # a list, not a thousands separator
        ("3\\,000", "3000"),
        ("90^\\circ", "90"),
        ("90^{\\circ}", "90"),
        ("5 \\text{ cm}", "5"),
        ("5\\mbox{ inches}", "5"),
        ("12 dollars", "12"),
        ("20 square units", "20"),
        ("\\text{(C)}", "(C)"),
        ("\\textbf{Monday}", "Monday"),
        ("2 pi", "2 pi"),  # not a unit
        ("  7 .  ", "7"),
        ("1, 2, \\ldots", "1, 2,"),
        ("1 \\text{ and } 2", "1, 2"),
        ("", None),
        ("$ $", None),
    ],
)
def test_answer_line_normalises_as_dapo_does(raw: str, normal: str | None) -> None:
    assert normalise_dapo(raw) == normal


def test_answer_line_grades_against_the_gold() -> None:
    assert grade("so...\nAnswer: 7", "7", "math", answer="answer-line") == Grade("7", True)
    assert grade(
        "\\boxed{5} for the sub-case...\nAnswer: 7", "7", "math", answer="answer-line"
    ).correct
    assert grade("Answer: $25$.", "025", "math", answer="answer-line") == Grade("25", True)
    assert grade("Answer: 1,080 dollars", "1080", "number", answer="answer-line") == Grade(
        "1080", True
    )
    assert grade("Answer: (B)", "B", "choice", OPTIONS, "answer-line") == Grade("B", True)
    assert grade("Answer: 8", "7", "math", answer="answer-line") == Grade("8", False)
    assert grade("no answer line", "7", "math", answer="answer-line") == Grade(None, False)


# ---- math-verify -------------------------------------------------------------------------


@pytest.mark.slow
def test_math_verify_searches_the_whole_reply() -> None:
    text = "So the result is $x = 5$."
    assert grade(text, "5", "math", answer="math-verify") == Grade("x = 5", True)
    assert grade(text, "5", "math") == Grade(None, False)  # boxed finds no box and no cue
    assert extract("\\boxed{3} and then 7", "math", answer="math-verify") == "3"  # a box first
    assert extract("first $\\frac{1}{2}$", "math", answer="math-verify") == "\\frac{1}{2}"
    assert grade("first $\\frac{1}{2}$", "0.5", "math", answer="math-verify").correct
    assert extract("no mathematics here", "math", answer="math-verify") is None
    assert grade("", "5", "math", answer="math-verify") == Grade(None, False)


def test_math_verify_is_cached_in_the_parent() -> None:
    text = "The sum is $\\frac{3}{4}$."
    assert extract(text, "math", answer="math-verify") == "\\frac{3}{4}"
    verifier.stop_graders()
    assert extract(text, "math", answer="math-verify") == "\\frac{3}{4}"
    assert verifier.grader_pids() == []  # the cache answered: no worker started


@pytest.mark.slow
def test_math_verify_keeps_an_answer_it_holds_only_as_text() -> None:
    r"""Math-Verify cannot parse a `\pm`; verl compares its text with the gold's, and so do we."""
    pm = r"\frac{-1 \pm \sqrt{13}}{4}"
    assert grade(f"So $\\boxed{{{pm}}}$", pm, "math", answer="math-verify") == Grade(pm, True)
    assert grade(f"So $\\boxed{{{pm}}}$", pm, "math") == Grade(pm, True)  # boxed agreed already
    assert not grade(
        f"So $\\boxed{{{pm}}}$", r"\frac{1 \pm \sqrt{13}}{4}", "math", answer="math-verify"
    ).correct


def test_math_verify_grades_the_parse_verl_grades() -> None:
    # A box Math-Verify cannot parse ("28.") gives way to an earlier match, as in verl: the
    # answer shown is the one graded, where the text of the first match used to be shown.
    text = "Checking $k = 0$ gives $1$.\n\nThus the answer is $\\boxed{28.}$"
    assert grade(text, "28", "math", answer="math-verify") == Grade("1", False)
    assert grade(text, "28", "math") == Grade("28", True)  # boxed reads the box
    # A percent is a number Math-Verify divides by 100, against the gold's own parse.
    assert grade("The answer is $50\\%$", "0.5", "math", answer="math-verify").correct


def test_math_verify_settings_are_math_verify_parameters() -> None:
    third = ("so $0.33$", r"\frac{1}{3}", "math")
    assert not grade(*third, answer="math-verify").correct  # rounded to 6 places
    assert grade(*third, answer="math-verify:precision=2").correct
    # A decimal comma: a plain expression reads 1,22 as 1.22; boxed LaTeX reads two numbers.
    assert not grade("1.22", "1,22", "math", answer="math-verify").correct
    assert grade("1.22", "1,22", "math", answer="math-verify:extract=expr,gold=searched").correct
    assert not grade("$f(y)$", "f(x)", "math", answer="math-verify").correct
    assert grade("$f(y)$", "f(x)", "math", answer="math-verify:strict=false").correct
    protocol = get_answer_protocol("math-verify:precision=2")
    assert protocol.name == "math-verify:precision=2"  # recorded as given, settings and all
    assert check_answer_protocol("math", "math-verify:precision=2") == "math-verify:precision=2"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "math-verify:precision=16",
            "math-verify setting precision=16 is not accepted; precision takes an integer "
            "from 0 to 15 (decimal places floats are rounded to)",
        ),
        ("math-verify:precision=two", "math-verify setting precision=two is not accepted"),
        ("math-verify:extract=latex+latex", "extract takes latex, expr, or both joined by +"),
        ("math-verify:gold=raw", "gold takes boxed (the gold in \\boxed{} read as LaTeX"),
        ("math-verify:box_priority=-2", "box_priority takes -1 (boxes not searched)"),
        ("math-verify:strict=maybe", "strict takes true or false"),
        ("math-verify:colour=red", "cannot read math-verify setting 'colour=red'; write key=value"),
        ("math-verify:precision=2,precision=3", "math-verify setting precision is given twice"),
        ("math-verify:", "cannot read math-verify setting ''"),
        ("boxed:precision=2", "the boxed answer protocol takes no settings"),
    ],
)
def test_a_setting_out_of_range_is_one_sentence(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as error:
        get_answer_protocol(spec)
    assert message in str(error.value) and str(error.value).count(". ") == 0


def test_a_bad_setting_is_refused_before_any_request(tmp_path: Path) -> None:
    from mad_eval import api
    from mad_eval.settings.config import ConfigError

    with pytest.raises(ConfigError, match=r"^answer_protocol: math-verify setting precision=99"):
        api.run(benchmark="math500", answer_protocol="math-verify:precision=99", out=tmp_path / "r")
    assert not (tmp_path / "r").exists()
    spec = 'description = "d"\nkind = "math"\nmax_tokens = 8\nanswer = "math-verify:gold=x"\n'
    (tmp_path / "mine.toml").write_text(spec + '[local]\nfile = "x.jsonl"\n')
    with pytest.raises(BenchmarkError, match=r"^mine.toml: answer: math-verify setting gold=x"):
        load_questions(str(tmp_path / "mine.toml"))


@pytest.mark.slow
def test_a_hostile_reply_for_math_verify_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verifier, "VERIFY_TIMEOUT_S", 2.0)
    assert extract("warm up: $1$", "math", answer="math-verify") == "1"  # start the worker untimed
    assert len(HOSTILE_MATH) == 100_000
    before = set(verifier.grader_pids())
    assert grade(HOSTILE_MATH, "1", "math", answer="math-verify") == Grade(
        None, False, timed_out=True
    )
    # Its worker killed: the parent's bound ended the call, not math-verify's own alarm
    # (which leaves the worker running); no clock decides.
    killed = before - set(verifier.grader_pids())
    assert killed and not [pid for pid in killed if Path(f"/proc/{pid}").exists()]
    assert grade(
        "so it is $\\frac{1}{2}$", "0.5", "math", answer="math-verify"
    ).correct  # recovered


# ---- braces ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So {final answer: 7}", "7"),
        ("{Final Answer: \\frac{1}{2}}", "\\frac{1}{2}"),
        ("{FINAL ANSWER:\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces are not grouping
        ("{final answer: \\frac{a}{b}}.", "\\frac{a}{b}"),
        ("{final answer: 3} or rather {final answer: 4}", "4"),
        ("{final answer: 3} then {final answer: 4", "3"),  # the last one that closes
        ("{final answer: }", None),
        ("{final answer 7}", None),
        ("\\boxed{7}", None),
    ],
)
def test_braces(text: str, expected: str | None) -> None:
    assert extract(text, "math", answer="braces") == expected


def test_braces_grade_every_voting_kind() -> None:
    assert grade("{final answer: 0.5}", "\\frac12", "math", answer="braces") == Grade("0.5", True)
    assert grade("{final answer: $1,250}", "1250", "number", answer="braces").correct
    assert grade("{final answer: C}", "C", "choice", OPTIONS, "braces") == Grade("C", True)
    assert grade("{final answer: B}", "A", "preference", ["x", "y"], "braces").correct is False


# ---- summary-line ------------------------------------------------------------------------


def test_summary_line() -> None:
    assert extract("Summary: first\n**Summary:** second.", "summary") == "second."
    graded = grade("Summary: the harbour reopened", "The harbour reopened.", "summary")
    assert graded.answer == "the harbour reopened" and graded.correct is None
    assert graded.rouge == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    assert grade("no summary", "ref", "summary") == Grade(None, None)


# ---- reasoning is never read -------------------------------------------------------------

CASES = [  # (kind, protocol, the answer written, another answer, what the kind reads)
    ("math", "boxed", "4", "3", "4"),
    ("math", "answer-line", "4", "3", "4"),
    ("math", "math-verify", "4", "3", "4"),
    ("math", "braces", "4", "3", "4"),
    ("number", "boxed", "4", "3", "4"),
    ("choice", "boxed", "C", "A", "C"),
    ("choice", "answer-line", "C", "A", "C"),
    ("preference", "braces", "B", "A", "B"),
    ("summary", "summary-line", "The harbour reopened.", "Bread.", "The harbour reopened."),
]


def _shapes(mine: str, other: str) -> list[tuple[str, bool]]:
    """(reply, whether `mine` is its answer): each shape of reasoning, with and without an
    answer outside it."""
    return [
        (f"<think>\n{other}\n</think>\n{mine}", True),  # a closed block
        (f"<think>\n{other}\n</think>\nso it goes.", False),
        (f"<think>\n{other}", False),  # an unclosed block
        (f"{other}\n</think>\n{mine}", True),  # a lone close: the prompt opened the block
        (f"{other}\n</think>", False),
    ]


@pytest.mark.parametrize(("kind", "protocol", "mine", "other", "read"), CASES)
def test_an_answer_inside_reasoning_is_never_read(
    kind: str, protocol: str, mine: str, other: str, read: str
) -> None:
    written = get_answer_protocol(protocol)
    options = ["x", "y", "z"] if kind in ("choice", "preference") else ()
    for reply, answered in _shapes(written.write(mine), written.write(other)):
        assert extract(reply, kind, options, protocol) == (read if answered else None), reply


def test_drop_reasoning() -> None:
    """Only where a reasoning format puts it: a leading block, or all before a close the
    template's open left alone; the first close ends it, and tags elsewhere are text."""
    assert drop_reasoning(" <think>x</think> b <think>y</think> c") == " b <think>y</think> c"
    assert drop_reasoning("<think>x <think> y</think> b</think>") == " b</think>"
    assert drop_reasoning("a</think>b<think>c") == "b<think>c"
    assert drop_reasoning("a<think>b</think>c</think>d") == "a<think>b</think>c</think>d"
    assert drop_reasoning("a <think>x</think> b") == "a <think>x</think> b"
    assert drop_reasoning("no reasoning") == "no reasoning"


def test_the_choice_fallback_never_reads_reasoning() -> None:
    assert extract("<think>B</think>", "choice", OPTIONS) is None
    assert extract("<think>A? no.</think>B", "choice", OPTIONS) == "B"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("protocol", "text"),
    [
        ("boxed", "\\boxed{" * 200_000),
        ("boxed", "answer: " * 200_000),
        ("answer-line", "Answer: " * 200_000),
        ("dapo", "Answer: " * 200_000),
        ("dapo", "<think>Answer: " * 100_000),
        ("braces", "{final answer:" * 100_000),
        ("braces", "{" * 1_000_000),
        ("summary-line", "Summary:\n" * 200_000),
        ("boxed", "<think>" * 200_000),
        ("boxed", "</think>" * 200_000),
        # Debate-or-Vote's own regular expressions are quadratic on these; its readers are not.
        ("dov-math", "{" * 1_000_000),
        ("dov-math", "{" * 500_000 + "\n}"),
        ("dov-math", "{final answer: " + "1" * 1_000_000 + "}"),
        ("dov-math", "{}" * 500_000),
        ("dov-math-fork", "{final answer: " + "1" * 1_000_000),
        ("dov-math-fork", "{final answer: " + "1" * 1_000_000 + "}"),
        ("dov-math-fork", "\\boxed{" + " " * 1_000_000 + "x"),
        ("dov-math-fork", "\\" * 1_000_000 + "boxed"),
        ("dov-math-fork", "{ final answer :" * 100_000),
        ("dov-math-fork", "\\boxed{}" * 200_000),
    ],
)
def test_hostile_text_is_linear(protocol: str, text: str) -> None:
    kind = "summary" if protocol == "summary-line" else "number" if "dov" in protocol else "math"
    start = time.monotonic()
    grade(text, "1", kind, (), protocol)
    # Generous: quadratic work on this text would take hours, load slows linear work only
    # by a factor.
    assert time.monotonic() - start < 60


# ---- same answers and the simulated agents ----------------------------------------------


def test_same_answer_is_the_kinds_equivalence() -> None:
    assert same_answer("math")("0.5", "\\frac12")
    assert not same_answer("math")("0.5", "\\frac13")
    # dapo compares strings, as verl's DAPO reward (and its maj@K vote) does.
    assert not same_answer("math", "dapo")("0.5", "\\frac12")
    assert same_answer("math", "dapo")("\\frac{1}{2}", "\\frac{1}{2}")
    assert same_answer("number")("3/4", "3/4") and not same_answer("number")("3/4", "0.75")
    assert same_answer("choice")("A", "A") and not same_answer("preference")("A", "B")


@pytest.mark.parametrize(("kind", "protocol", "mine", "other", "read"), CASES)
def test_what_a_protocol_writes_it_reads(
    kind: str, protocol: str, mine: str, other: str, read: str
) -> None:
    options = ["x", "y", "z"] if kind in ("choice", "preference") else ()
    writer = get_answer_protocol(protocol)
    joint = ":\n" if writer.own_line else " "  # as the simulated agents join them
    written = f"Working through the problem, I get{joint}{writer.write(mine)}"
    assert extract(written, kind, options, protocol) == read


def _generate(question: Question, quoted: tuple[str, ...] = ()) -> tuple[str, list[float]]:
    backend = make_backend("sim:p0=0.5,w=1")
    state = {"alpha": [1.0, 1 / 3, 1 / 3, 1 / 3]} if quoted else None
    sampling = Sampling(1.0, 0.9, 64, seed=11)
    request = Request([{"role": "user", "content": "q"}], sampling, question, state, quoted)
    generation = asyncio.run(backend.generate(request))
    assert generation.text is not None and generation.state is not None
    return generation.text, generation.state["alpha"]


def test_the_simulated_agents_write_the_questions_protocol() -> None:
    boxed, _ = _generate(Question("q1", "What is 2+2?", "4"))
    assert boxed.startswith("Working through the problem, I get \\boxed{")
    dapo = Question("q1", "What is 2+2?", "4", answer="answer-line")
    text, _ = _generate(dapo)
    assert text.startswith("Working through the problem, I get:\nAnswer: ")
    assert extract(text, "math", answer="answer-line") == extract(
        boxed, "math"
    )  # the same answer drawn
    summary = Question("a", "The harbour reopened. Boats left. Crews cheered.", "r", {}, "summary")
    assert _generate(summary)[0].startswith("Having read the article, I write:\nSummary: ")


def test_the_simulated_agents_read_peers_with_the_questions_protocol() -> None:
    dapo = Question("q1", "What is 2+2?", "4", answer="answer-line")
    _, counted = _generate(dapo, ("Answer: 4",) * 3)
    _, unread = _generate(dapo, ("\\boxed{4}",) * 3)  # no answer line: nothing to count
    assert counted[0] == pytest.approx(unread[0] + 3)  # three peers read for the gold
    assert counted[1:] == pytest.approx(unread[1:])


# ---- benchmarks name their protocol -------------------------------------------------------


def test_the_variant_specs_name_their_protocol(shared_data: Path) -> None:
    expected = {
        "math500_mv": ("math500", "math-verify"),
        "amc23_dapo": ("amc23", "dapo"),
        "aime24_dapo": ("aime24", "dapo"),
        "aime25_dapo": ("aime25", "dapo"),
    }
    for name, (base, answer) in expected.items():
        spec, questions = load_questions(name, shared_data, limit=3)
        base_spec, base_questions = load_questions(base, shared_data, limit=3)
        assert (spec.name, spec.kind, spec.answer, base_spec.answer) == (
            name,
            "math",
            answer,
            "boxed",
        )
        assert spec.local == base_spec.local and spec.title != base_spec.title
        assert [(q.id, q.text, q.gold) for q in questions] == [
            (q.id, q.text, q.gold) for q in base_questions
        ]
        assert {q.answer for q in questions} == {answer}
    assert load_spec("cnn_dailymail").answer == "summary-line"
    assert load_spec("gsm8k").answer == "boxed"


@pytest.mark.parametrize(
    ("kind", "answer", "message"),
    [
        ("choice", "math-verify", "answer 'math-verify' is not one of the choice kind's answer"),
        ("number", "dapo", "answer 'dapo' is not one of the number kind's answer protocols: boxed"),
        ("summary", "boxed", "answer 'boxed' is not one of the summary kind's"),
    ],
)
def test_a_spec_with_a_protocol_its_kind_refuses_is_one_sentence(
    tmp_path: Path, kind: str, answer: str, message: str
) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        f'description = "d"\nkind = "{kind}"\nanswer = "{answer}"\nmax_tokens = 8\n'
        '[local]\nfile = "x.jsonl"\nquestion = "q"\noptions = "o"\nanswer = "a"\n'
    )
    with pytest.raises(BenchmarkError, match=message):
        load_questions(str(path))


def test_a_resume_keeps_the_protocol_and_revision_the_run_graded_with(tmp_path, shared_data):
    """A folder records its answer protocol and the protocol's revision; a resume under
    another protocol (a spec that changed its own since) or another revision of it (a
    reading fixed since) is refused, while the folder still reports what it recorded."""
    import json

    import mad_eval
    from mad_eval.store.files import StoreError

    out = tmp_path / "r"
    settings = {"benchmark": "aime24_dapo", "data_dir": shared_data, "limit": 2, "rounds": 0}
    first = mad_eval.run(**settings, answer_protocol="answer-line", agents=2, out=out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["benchmark"]["answer"], manifest["benchmark"]["answer_revision"]) == (
        "answer-line",
        2,
    )
    assert mad_eval.run(**settings, answer_protocol="answer-line", agents=2, out=out).maj == (
        first.maj
    )
    # As the variant's own protocol recorded it before issue 32: answer-line, revision 1.
    manifest["config"]["answer_protocol"] = None
    del manifest["benchmark"]["answer_revision"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match="answer_protocol is 'answer-line' there, 'dapo' here"):
        mad_eval.run(**settings, agents=2, out=out)
    with pytest.raises(StoreError, match="as revision 1 read answers, and this mad-eval reads"):
        mad_eval.run(**settings, answer_protocol="answer-line", agents=2, out=out)
    assert mad_eval.report(out).maj == first.maj  # the grades it recorded


def test_debate_answer_reads_liang_et_als_moderator() -> None:
    """The "debate_answer" of the last dict, in JSON or Python quoting; empty: no answer."""
    read = get_answer_protocol("debate-answer").locate
    assert read('{"Whether there is a preference": "Yes", "debate_answer": "42"}') == "42"
    assert read("{'debate_answer': 'it\\'s 7', 'Reason': ''}") == "it's 7"
    assert read('{"debate_answer": 4.50}') == "4.5"
    assert read('{"debate_answer": "1"} then {"debate_answer": " 2 "}') == "2"
    assert read('{"debate_answer": ""}') is None and read("no dict") is None
    assert read('{"debate_answer": "' + "9" * 2000 + '"}') is None
