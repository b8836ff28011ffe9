"""A reasoning model's replies: reasoning kept apart from the final content, replies cut off
inside their reasoning, what peers read of them, and what each backend kind can do."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json

import pytest
from cli_helpers import small_run
from factories import compute_metrics, turn

from mad_eval.backends import Backend, Generation, Request, Sampling, backend_type
from mad_eval.backends.cache import Cached, RequestCache, request_key
from mad_eval.backends.openai_backend import read_reply
from mad_eval.debate.context import REASONING_CUT_MARKER, EstimateCounter, Fitter, Reply
from mad_eval.debate.prompts import Said, Speaker, build_prompt
from mad_eval.grading.grader import Grade, grade
from mad_eval.grading.reasoning import (
    TAIL_MARKER,
    Quoting,
    ends_in_reasoning,
    parse_quoting,
    quoted,
    split_reply,
)
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Question
from mad_eval.reporting.results import load_runs
from mad_eval.reporting.tables import tidy
from mad_eval.settings.templates import load_template

QUESTION = Question("q", "What is 6 times 7?", "42")


# ---- splitting a reply ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reasoning", "finish", "opened", "expected"),
    [
        # A server that split the reply: its reasoning field, and the content as the answer.
        ("\n\nSo \\boxed{42}", "6 x 7", "stop", False, ("So \\boxed{42}", "6 x 7", False)),
        # It stopped right after </think>: no content, but not cut off.
        (None, "6 x 7 = 42", "stop", False, ("", "6 x 7 = 42", False)),
        # The token limit fell inside the reasoning: the server gives no content at all.
        (None, "6 x 7 is", "length", False, ("", "6 x 7 is", True)),
        # No parser on the server: the think block is split off here.
        ("<think>6 x 7</think>\n\n\\boxed{4}", None, "stop", False, ("\\boxed{4}", "6 x 7", False)),
        # ... and an unclosed block is a reply cut off inside its reasoning.
        ("<think>6 x 7 = \\boxed{41}", None, "length", False, ("", "6 x 7 = \\boxed{41}", True)),
        # A template that opened the block in the prompt leaves only the close.
        ("6 x 7</think>\\boxed{42}", None, "stop", False, ("\\boxed{42}", "6 x 7", False)),
        # A prompt we rendered ends inside <think>: a reply without the close is all reasoning.
        ("6 x 7 is \\boxed{42}", None, "length", True, ("", "6 x 7 is \\boxed{42}", True)),
        # A plain model's reply is kept byte for byte.
        ("  \\boxed{42}\n", None, "stop", False, ("  \\boxed{42}\n", None, False)),
        # A leading block may follow whitespace; only the first close ends it, and what
        # follows is the answer as written, a stray second close included.
        ("\n <think>a</think>\\boxed{3}</think>", None, "stop", False,
         ("\\boxed{3}</think>", "a", False)),
        ("<think>a <think> b</think>\\boxed{3}", None, "stop", False,
         ("\\boxed{3}", "a <think> b", False)),
        # A tag the answer mentions is part of the answer, wherever it stands.
        ("I will not use <think> tags here. The final answer is \\boxed{3}.", None, "stop", False,
         ("I will not use <think> tags here. The final answer is \\boxed{3}.", None, False)),
        ("So \\boxed{3}. <think>no</think> <think>", None, "stop", False,
         ("So \\boxed{3}. <think>no</think> <think>", None, False)),
        ("It is <think>x</think> then </think> \\boxed{3}", None, "stop", False,
         ("It is <think>x</think> then </think> \\boxed{3}", None, False)),
        # The template opened the block: the first close ends it, a later one is answer.
        ("6 x 7</think>\\boxed{42} </think>", None, "stop", False,
         ("\\boxed{42} </think>", "6 x 7", False)),
        ("6 x 7</think>\\boxed{42}</think>", None, "stop", True,
         ("\\boxed{42}</think>", "6 x 7", False)),
        # The server split the reply: its content is all answer, tags and all.
        ("\\boxed{3}</think>", "6 x 7", "stop", False, ("\\boxed{3}</think>", "6 x 7", False)),
        ("<think>x</think>\\boxed{3}", "6 x 7", "stop", False,
         ("<think>x</think>\\boxed{3}", "6 x 7", False)),
    ],
)  # fmt: skip
def test_a_reply_splits_into_final_content_and_reasoning(
    content, reasoning, finish, opened, expected
):
    split = split_reply(content, reasoning, finish, opened)
    assert (split.text, split.reasoning, split.truncated) == expected


def test_reasoning_scans_hostile_text_in_linear_time():
    # The first close ends an (empty) reasoning the template opened; the rest is answer.
    split = split_reply("</think>" * 100_000 + "<think>" * 100_000 + "\\boxed{1}")
    assert not split.truncated and split.reasoning is None
    assert split.text == "</think>" * 99_999 + "<think>" * 100_000 + "\\boxed{1}"
    split = split_reply("<think>" * 100_000 + "\\boxed{1}")
    assert split.truncated and split.text == ""


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("I will not use <think> tags here. The final answer is \\boxed{3}.", "3"),
        ("<think>2?</think>The answer is \\boxed{3}.</think>", "3"),
        ("2? \\boxed{2}</think>The answer is \\boxed{3}.</think>", "3"),
        # After the leading block, a block is answer text like any other: its box is read.
        ("<think>2? \\boxed{2}</think>\\boxed{3} and <think>\\boxed{4}</think>", "4"),
    ],
)
def test_a_tag_the_answer_mentions_never_takes_the_answer_away(reply, answer):
    """Through the backend's split and the grading of the final content, as a turn is."""
    generation = read_reply(body({"content": reply}), "chat")
    assert not generation.truncated
    assert grade(generation.text, answer, "math", split=False) == Grade(answer, True)


def body(message: dict, finish: str = "stop", details: dict | None = None) -> bytes:
    usage = {"prompt_tokens": 10, "completion_tokens": 30}
    if details is not None:
        usage["completion_tokens_details"] = details
    choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}
    return json.dumps({"model": "m", "choices": [choice], "usage": usage}).encode()


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_the_server_reasoning_field_is_read_under_either_name(field):
    reply = read_reply(
        body({"content": "\\boxed{42}", field: "6 x 7"}, details={"reasoning_tokens": 21}), "chat"
    )
    assert (reply.text, reply.reasoning, reply.reasoning_tokens) == ("\\boxed{42}", "6 x 7", 21)
    assert not reply.truncated


def test_no_content_at_the_token_limit_is_a_reply_cut_off_not_a_failure():
    reply = read_reply(body({"content": None, "reasoning": "6 x 7 is"}, "length"), "chat")
    assert reply.truncated and reply.text == "" and reply.reasoning == "6 x 7 is"
    # With neither content nor reasoning, it ran out of tokens all the same.
    assert read_reply(body({"content": None}, "length"), "chat").truncated
    # Neither, and not at the limit: the model answered nothing, an unparsed answer.
    empty = read_reply(body({"content": None}, "stop"), "chat")
    assert (empty.text, empty.truncated, empty.error, empty.refusal) == ("", False, None, None)


def test_a_rendered_prompt_that_opens_a_think_block_is_recognised():
    assert ends_in_reasoning("<|im_start|>assistant\n<think>\n")
    assert not ends_in_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not ends_in_reasoning("<|im_start|>user\nsay <think> here<|im_end|>\n")


# ---- what peers read --------------------------------------------------------------------


def test_quoted_reasoning_cannot_forge_the_end_of_its_block():
    shown = quoted("\\boxed{1} <think>", "a </think> \\boxed{2}")
    assert shown.count("</think>") == 1 and shown.count("<think>") == 1
    assert quoted("\\boxed{1}", None) == "\\boxed{1}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("final", Quoting()), ("full", Quoting("full")), ("tail:64", Quoting("tail", 64))],
)
def test_quote_choices(text, expected):
    assert parse_quoting(text) == expected and str(expected) == text


@pytest.mark.parametrize("text", ["tail", "tail:0", "tail:x", "all", "final:3"])
def test_a_bad_quote_choice_names_the_accepted_ones(text):
    with pytest.raises(ValueError, match="final, full, tail:N or verbatim"):
        parse_quoting(text)


def prompt_text(quote: str, budget: int | None = None, fitter: Fitter | None = None):
    """Agent 0's round-1 prompt in a two-agent debate whose replies carry reasoning."""
    history = [
        {
            0: Said("mine: \\boxed{42}", reasoning="own " * 50 + "END0"),
            1: Said("theirs: \\boxed{41}", reasoning="START1 " + "peer " * 50 + "END1"),
        }
    ]
    speaker = Speaker(load_template("debate"), 0, 2, quote=parse_quoting(quote))
    fitter = fitter or Fitter(EstimateCounter())
    return build_prompt(speaker, QUESTION, history, [0, 1], fitter, budget)


def test_final_quotes_no_reasoning_full_all_of_it_and_tail_its_end():
    final = prompt_text("final").messages[-1]["content"]
    assert "theirs: \\boxed{41}" in final and "peer" not in final and "<think>" not in final
    full = prompt_text("full").messages[-1]["content"]
    assert "START1" in full and "END1" in full and full.count("<think>") == 2
    tail = prompt_text("tail:4").messages[-1]["content"]
    assert "END1" in tail and "START1" not in tail and TAIL_MARKER in tail


def test_fitting_cuts_reasoning_before_any_final_content():
    whole = prompt_text("full")
    fitted = prompt_text("full", budget=whole.tokens - 30)
    content = fitted.messages[-1]["content"]
    assert fitted.cut > 0 and REASONING_CUT_MARKER in content
    assert "mine: \\boxed{42}" in content and "theirs: \\boxed{41}" in content
    assert "END1" in content and "START1" not in content  # a reasoning keeps its end
    # Too little room even for the reasoning's marker: reasoning goes, final content stays.
    bare = prompt_text("final")
    fitted = prompt_text("full", budget=bare.tokens + 2)
    assert fitted.messages == bare.messages and fitted.cut >= 2 * 50


def test_fitting_without_reasoning_is_unchanged():
    replies = [Reply("a " * 100), Reply("b " * 100)]

    def build(cut):
        return [{"role": "user", "content": "\n".join(r.text for r in cut)}]

    fitted = Fitter(EstimateCounter()).fit(build, replies, budget=150)
    assert fitted.tokens <= 150 and fitted.messages[0]["content"].count("[... the start") == 2


# ---- the cache, the metrics and the backend kinds ---------------------------------------


class Thinker(Backend):
    spec = "openai:thinker"

    def __init__(self):
        self.calls = 0

    async def generate(self, request):
        self.calls += 1
        return Generation(
            "\\boxed{42}", "stop", 5, 40, reasoning="6 x 7", reasoning_tokens=35, truncated=False,
            reply="<think>6 x 7</think>\\boxed{42}",
        )  # fmt: skip


def test_a_cached_reasoning_turn_comes_back_with_its_reasoning(tmp_path):
    inner = Thinker()
    cached = Cached(inner, RequestCache(tmp_path / "cache.sqlite"), {"model": "openai:thinker"})
    request = Request([{"role": "user", "content": "6 x 7?"}], Sampling(1.0, 1.0, 64, 3), QUESTION)
    first = asyncio.run(cached.generate(request))
    again = asyncio.run(cached.generate(request))
    assert inner.calls == 1 and again.cached
    assert (again.text, again.reasoning, again.reasoning_tokens) == ("\\boxed{42}", "6 x 7", 35)
    assert again.reply == "<think>6 x 7</think>\\boxed{42}"  # as written, for --quote verbatim
    assert dataclasses.replace(again, cached=False, attempts=1) == first


def test_the_extra_body_is_in_the_cache_key_only_when_given():
    request = Request([{"role": "user", "content": "6 x 7?"}], Sampling(1.0, 1.0, 64, 3), QUESTION)
    with_body = dataclasses.replace(request, extra_body={"top_k": 20})
    # The key of a request without one is the key caches written before extra bodies hold.
    payload = {
        "backend": {"model": "m"},
        "messages": request.messages,
        "sampling": dataclasses.asdict(request.sampling),
        "state": None,
    }
    old = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    assert request_key({"model": "m"}, request) == old
    assert request_key({"model": "m"}, with_body) != old


def test_metrics_count_truncation_per_round_and_mean_reasoning_tokens():
    turns = []
    for agent in range(3):
        t0 = turn("q", 0, agent, "42", True)
        t0.reasoning, t0.reasoning_tokens, t0.completion_tokens = "r", 30, 40
        if agent == 0:  # a tag quoting uses, in the reasoning: escaped when quoted, counted
            t0.reasoning = "maybe </response> here"
        t1 = turn("q", 1, agent, None if agent == 2 else "42", agent != 2)
        t1.reasoning, t1.reasoning_tokens, t1.completion_tokens = "r", 60, 60
        t1.truncated_in_reasoning = agent == 2
        turns += [t0, t1]
    metrics = compute_metrics(turns, Scoring(3, 1, (0, 1, 2), kind="math", seed=0))
    assert metrics["truncated_in_reasoning"] == 1 and metrics["reasoning_turns"] == 6
    assert [r["truncated_in_reasoning"] for r in metrics["rounds"]] == [0, 1]
    assert [r["reasoning_tokens"] for r in metrics["rounds"]] == [30, 60]
    assert [r["final_tokens"] for r in metrics["rounds"]] == [10, 0]
    assert metrics["debate"] == 100.0  # the cut-off reply is left out of the vote
    assert metrics["replies_with_quoting_tags"] == 1


@pytest.mark.parametrize(
    ("spec", "renders", "extra_body", "tokenizer"),
    [
        ("openai:m", {"chat": False, "completions": True}, True, True),
        ("vllm:m", {"chat": True, "completions": True}, True, True),
        ("sim:p0=0.5", {"chat": False, "completions": False}, False, False),
        ("sim-judge", {"chat": False, "completions": False}, False, False),
    ],
)
def test_each_backend_type_says_what_it_can_do(spec, renders, extra_body, tokenizer):
    kind = backend_type(spec)
    assert {api: kind.renders_text(api) for api in renders} == renders
    assert (kind.extra_body, kind.tokenizer) == (extra_body, tokenizer)


def test_the_lengths_table_shows_reasoning_and_final_tokens_where_recorded(tmp_path):
    small_run(tmp_path, "--model", "sim:words=30,think=1")
    plain = tmp_path / "plain"
    plain.mkdir()
    small_run(plain)
    frame = tidy(load_runs([tmp_path / "r"]), "lengths", replicates=50)
    row = frame[frame["part"] == "round 1"].set_index("metric")["value"]
    assert row["reasoning"] == 30 and row["final"] > 0  # the simulator writes 30 words of it
    # Runs without reasoning leave the two columns out rather than print them empty.
    frame = tidy(load_runs([plain / "r"]), "lengths", replicates=50)
    assert set(frame["metric"]) == {"correct", "incorrect"}
