"""Replies read as they are (issue 30): a reply without text is an unparsed answer, a refusal
is recorded as one, `<think>` is split only where a reasoning format puts it, usage counts
that are no counts are unknown, content that is not text is a malformed body (retried), and
a server's Retry-After is never honoured past the backoff's longest wait. Replies read within
bounds (issue 41): a body without end or a gzip bomb is read to 16 MiB and fails its turn,
JSON nested past every parser is a malformed body. Each through an OpenAI-compatible server
(tests/stub_server.py) and `mad_eval.run`, in process."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import turns_of
from factories import compute_metrics, turn
from stub_server import DEEP_JSON, StubServer

import mad_eval
from mad_eval.backends import base
from mad_eval.data.arith import arith_questions
from mad_eval.errors import UserError
from mad_eval.measure.scoring import Scoring
from mad_eval.reporting.results import Run

QUESTIONS = arith_questions(100)  # the built-in arith benchmark's questions, golds known


def asked(body: dict[str, Any]) -> str:
    """The id of the question a request asks (its text is in the first user message)."""
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return next(q.id for q in QUESTIONS if q.text in prompt)


def gold(body: dict[str, Any]) -> str:
    return next(q.gold for q in QUESTIONS if q.id == asked(body))


def right(body: dict[str, Any]) -> str:
    """Every agent answers every question right."""
    return f"So the answer is \\boxed{{{gold(body)}}}."


def served(tmp_path: Path, server: StubServer, name: str = "r", **settings: Any) -> Run:
    """A run of 3 agents, 1 debate round, on the first 4 arith questions, against `server`."""
    options: dict[str, Any] = dict(agents=3, rounds=1, limit=4, retries=3, backoff=0.01)
    return mad_eval.run(
        model="openai:stub-model",
        base_url=[server.base_url],
        benchmark="arith",
        out=tmp_path / name,
        **(options | settings),
    )


def message(payload: dict[str, Any]) -> dict[str, Any]:
    return payload["choices"][0]["message"]


# ---- no text, a refusal ------------------------------------------------------------------

FIRST = "arith-0"  # the question whose every answer comes without text


def no_text(how: str):
    def edit(payload: dict[str, Any], body: dict[str, Any], attempt: int) -> None:
        if asked(body) != FIRST:
            return
        if how == "refusal":
            message(payload).update(content=None, refusal="I can't help with that.")
        else:
            message(payload)["content"] = None if how == "null" else ""

    return edit


@pytest.mark.slow
@pytest.mark.parametrize("how", ["null", "empty", "refusal"])
def test_a_reply_without_text_is_an_unparsed_answer_in_every_denominator(tmp_path, how):
    """All three agents answer one of four questions without text, finish `stop`: Maj and
    Debate are 3/4, as with `content: ""`, never 3/3 (the question dropped as failed)."""
    with StubServer(reply=right, edit=no_text(how)) as server:
        run = served(tmp_path, server)
    metrics = run.metrics
    assert metrics["questions"] == 4 and metrics["failed_turns"] == 0
    assert run.maj == run.debate == 75.0
    assert metrics["unparsed"] == 6  # 3 agents x 2 rounds
    turns = [t for t in turns_of(tmp_path / "r") if t["question"] == FIRST]
    assert len(turns) == 6
    for t in turns:
        assert t["error"] is None and t["text"] == "" and t["finish_reason"] == "stop"
        assert t["answer"] is None and t["correct"] is False
    refused = "I can't help with that." if how == "refusal" else None
    assert all(t["refusal"] == refused for t in turns)
    assert metrics["refusals"] == (6 if how == "refusal" else 0)


@pytest.mark.slow
def test_a_refusal_is_counted_in_the_report_footer(tmp_path):
    from mad_eval.reporting.console import _footer

    with StubServer(reply=right, edit=no_text("refusal")) as server:
        run = served(tmp_path, server)
    footer = _footer(run.metrics, run.escaping)
    assert "replies with no answer read (every round, every run): 6 (6 refused)" in footer


# ---- <think> where no reasoning format puts it ---------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reply", "reasoning"),
    [
        ("I will not use <think> tags here. The final answer is \\boxed{{{}}}.", None),
        ("<think>Let me see.</think>The final answer is \\boxed{{{}}}.</think>", "Let me see."),
        ("Let me see.</think>The final answer is \\boxed{{{}}}.</think>", "Let me see."),
        ("The final answer is \\boxed{{{}}}. No <think> block, no </think> either.", None),
    ],
)
def test_a_think_tag_the_answer_mentions_keeps_its_answer(tmp_path, reply, reasoning):
    with StubServer(reply=lambda body: reply.format(gold(body))) as server:
        run = served(tmp_path, server)
    turns = turns_of(tmp_path / "r")
    assert len(turns) == 24 and run.maj == run.debate == 100.0
    for t in turns:
        assert t["correct"] is True and not t["truncated_in_reasoning"]
        assert t["reasoning"] == reasoning
    assert run.metrics["truncated_in_reasoning"] == 0 and run.metrics["unparsed"] == 0


# ---- usage counts that are no counts ------------------------------------------------------

BAD_USAGE = {
    "arith-1": {"prompt_tokens": "lots", "completion_tokens": -5},
    "arith-2": {
        "prompt_tokens": 12.0,
        "completion_tokens": True,
        "completion_tokens_details": {"reasoning_tokens": 10**30},
    },
    "arith-3": "lots",
}


def bad_usage(payload: dict[str, Any], body: dict[str, Any], attempt: int) -> None:
    if asked(body) in BAD_USAGE:
        payload["usage"] = BAD_USAGE[asked(body)]


@pytest.mark.slow
def test_usage_counts_that_are_no_counts_are_unknown_and_counted(tmp_path):
    with StubServer(reply=right, edit=bad_usage) as server:
        run = served(tmp_path, server)
    turns = turns_of(tmp_path / "r")
    bad = [t for t in turns if t["question"] in BAD_USAGE]
    good = [t for t in turns if t["question"] not in BAD_USAGE]
    assert len(bad) == 18 and len(good) == 6
    for t in bad:
        assert t["usage_invalid"] and t["error"] is None and t["correct"] is True
        assert t["prompt_tokens"] is t["completion_tokens"] is t["reasoning_tokens"] is None
    assert all(not t["usage_invalid"] and t["prompt_tokens"] > 0 for t in good)
    metrics = run.metrics
    assert metrics["usage_invalid"] == 18
    # Cost per question: the mean over the one question whose counts are known, not a sum
    # with unknowns taken as 0 (nor as -5).
    cost = metrics["cost"]
    assert cost["prompt_tokens"] == sum(t["prompt_tokens"] for t in good)
    assert cost["completion_tokens"] == sum(t["completion_tokens"] for t in good) > 0
    assert all(row["prompt_tokens"] > 0 for row in metrics["cost_by_round"])


def test_token_costs_of_answers_without_counts_are_unknown_not_zero():
    """A server that gives no usage: the token cost is unknown (null), not 0. A failed
    request's missing counts are 0 tokens: it was not answered."""
    turns = [turn("q", r, a, "4", True) for r in (0, 1) for a in range(3)]
    for t in turns:
        t.prompt_tokens = t.completion_tokens = None
    metrics = compute_metrics(turns, Scoring(3, 1, (0, 1, 2), kind="math", seed=0))
    assert metrics["cost"]["prompt_tokens"] is None and metrics["cost"]["tokens"] is None
    assert metrics["cost"]["generations"] == 6
    failed = [turn("q", r, a, "4", True, failed=a == 0) for r in (0, 1) for a in range(3)]
    for t in failed:
        if t.failed:
            t.prompt_tokens = t.completion_tokens = None
    metrics = compute_metrics(failed, Scoring(3, 1, (0, 1, 2), kind="math", seed=0))
    assert metrics["cost"]["prompt_tokens"] == 4  # the four answered turns, 1 token each


# ---- content that is not text -------------------------------------------------------------

NOT_TEXT = [12345, ["\\boxed{1}"], {"text": "\\boxed{1}"}, 1.5, True]


def not_text_once(payload: dict[str, Any], body: dict[str, Any], attempt: int) -> None:
    if attempt == 1:
        message(payload)["content"] = NOT_TEXT[body["seed"] % len(NOT_TEXT)]


@pytest.mark.slow
def test_content_that_is_not_text_is_a_malformed_body_and_retried(tmp_path):
    with StubServer(reply=right, edit=not_text_once) as server:
        run = served(tmp_path, server)
        sent = len(server.requests)
    turns = turns_of(tmp_path / "r")
    assert len(turns) == 24 and sent == 48
    assert all(t["error"] is None and t["attempts"] == 2 and t["correct"] for t in turns)
    assert run.metrics["retried_turns"] == 24 and run.maj == run.debate == 100.0


@pytest.mark.slow
def test_content_that_stays_not_text_fails_as_a_malformed_body(tmp_path):
    def always(payload: dict[str, Any], body: dict[str, Any], attempt: int) -> None:
        message(payload)["content"] = 12345

    with StubServer(reply=right, edit=always) as server:
        run = served(tmp_path, server, rounds=0, retries=1)
    turns = turns_of(tmp_path / "r")
    assert run.metrics["failed_turns"] == len(turns) == 12
    for t in turns:
        assert t["error"].startswith("BadResponse: HTTP 200 with a body that is not a chat")
        assert t["error"].endswith("(gave up after 2 attempts)") and t["attempts"] == 2
        assert "no text" not in t["error"]


# ---- Retry-After --------------------------------------------------------------------------


class Heard(mad_eval.Listener):
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn(self, label: str, text: str) -> None:
        self.warnings.append(f"{label}: {text}")


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The waits the guard asks for between attempts, not waited."""
    asked: list[float] = []

    async def pause(seconds: float) -> None:
        asked.append(seconds)

    monkeypatch.setattr(base, "pause", pause)
    return asked


@pytest.mark.slow
@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ("100000", "100000"),
        ("Fri, 31 Dec 9999 23:59:59 GMT", "2.5"),  # ~2.5e11 seconds away
        ("1e309", "inf"),
    ],
)
def test_a_far_retry_after_is_cut_to_the_backoffs_longest_wait_with_a_warning(
    tmp_path, waits, header, shown
):
    heard = Heard()
    with StubServer(
        reply=right, fault=lambda body, attempt: "429" if attempt == 1 else None, retry_after=header
    ) as server:
        served(tmp_path, server, rounds=0, listener=heard)
    turns = turns_of(tmp_path / "r")
    assert all(t["error"] is None and t["attempts"] == 2 for t in turns)
    cap = base.RetryPolicy().cap
    assert len(waits) == len(turns) == 12 and set(waits) == {cap}
    (warning,) = [w for w in heard.warnings if "Retry-After" in w]  # once per endpoint
    assert warning.startswith(f"warning: the server at {server.base_url} asked to wait {shown}")
    assert f"waiting {cap:g} s at most" in warning


@pytest.mark.slow
@pytest.mark.parametrize("header", ["nan", "-5"])
def test_a_retry_after_that_is_no_wait_leaves_the_backoff_with_a_warning(tmp_path, waits, header):
    heard = Heard()
    with StubServer(
        reply=right, fault=lambda body, attempt: "429" if attempt == 1 else None, retry_after=header
    ) as server:
        served(tmp_path, server, rounds=0, listener=heard)
    assert all(t["error"] is None and t["attempts"] == 2 for t in turns_of(tmp_path / "r"))
    assert len(waits) == 12 and all(0.005 <= w <= 0.01 for w in waits)  # --backoff 0.01
    (warning,) = [w for w in heard.warnings if "Retry-After" in w]
    assert f"asked to wait {header} s" in warning and "as the backoff would" in warning


@pytest.mark.slow
def test_a_retry_after_within_the_backoffs_longest_wait_is_honoured_silently(tmp_path, waits):
    heard = Heard()
    with StubServer(
        reply=right, fault=lambda body, attempt: "429" if attempt == 1 else None, retry_after=7
    ) as server:
        served(tmp_path, server, rounds=0, listener=heard)
    assert waits == [7.0] * 12
    assert not [w for w in heard.warnings if "Retry-After" in w]


@pytest.mark.slow
def test_metrics_json_holds_the_counts(tmp_path):
    with StubServer(reply=right) as server:
        served(tmp_path, server, rounds=0)
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["refusals"] == 0 and metrics["usage_invalid"] == 0


# ---- bodies past every bound --------------------------------------------------------------


def hostile_on(question: str, name: str):
    """A stub fault: every request for `question` answered with HOSTILE_BODIES[name]."""
    return lambda body, attempt: name if asked(body) == question else None


TOO_LARGE = (
    "ResponseTooLarge: HTTP 200 with a body of more than 16 MiB (decompressed), the most one "
    "reply may hold"
)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["endless", "gzipbomb"])
def test_a_reply_past_the_size_limit_fails_its_turn_at_once(tmp_path, name):
    """A 200 body without end (it grew ~100 MB/s until --timeout) and 1 MB of gzip that
    decompresses to 256 MiB (a 256 MiB turn line): each is read to 16 MiB, then its turn
    fails, not asked again (the server would send it again), and the run goes on."""
    with StubServer(reply=right, fault=hostile_on(FIRST, name)) as server:
        run = served(tmp_path, server, timeout=30)
        sent = Counter(asked(body) for body in server.requests)
    turns = turns_of(tmp_path / "r")
    hit = [t for t in turns if t["question"] == FIRST]
    assert len(turns) == 24 and len(hit) == 6 and sent[FIRST] == 6
    for t in hit:
        assert (t["error"], t["text"], t["attempts"]) == (TOO_LARGE, None, 1)
    assert all(t["correct"] for t in turns if t["question"] != FIRST)
    assert run.metrics["failed_turns"] == 6


@pytest.mark.slow
def test_json_nested_past_every_parser_is_a_malformed_body(tmp_path):
    """100,000 levels of `[` in a 200 body: orjson stops at 1,024 and Python's parser, tried
    after it, raised RecursionError, a traceback that stopped the run; now it is a body that
    is not a completion (retried, as a proxy's garbled page is), then a failed turn."""
    with StubServer(reply=right, fault=hostile_on(FIRST, "deep")) as server:
        run = served(tmp_path, server, retries=1)
    hit = [t for t in turns_of(tmp_path / "r") if t["question"] == FIRST]
    assert len(hit) == 6 and run.metrics["failed_turns"] == 6
    shown = repr(DEEP_JSON[:80].decode())
    for t in hit:
        assert t["attempts"] == 2 and t["error"] == (
            f"BadResponse: HTTP 200 with a body that is not a chat completion: {shown}... "
            f"({len(DEEP_JSON)} bytes) (gave up after 2 attempts)"
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("endless", "answered its model list with more than 16 MiB; check that it is"),
        ("gzipbomb", "answered its model list with more than 16 MiB; check that it is"),
        ("deep", 'answered its model list with something else: \'{"choices": [[[['),
    ],
)
def test_a_hostile_model_list_is_one_sentence_before_the_run(tmp_path, name, said):
    with StubServer(models_fault=name) as server:
        with pytest.raises(UserError) as caught:
            served(tmp_path, server)
        assert not server.requests  # nothing asked of a server that answers so
    message = str(caught.value)
    assert message.startswith(f"the server at {server.base_url} ") and said in message
    assert message.endswith("check that it is an OpenAI-compatible server.")
