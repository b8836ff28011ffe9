"""Serving at scale against local servers that misbehave on purpose: retries with backoff and
Retry-After, replicas chosen by question and load, the completions API with our own
rendering, and the persistent request cache."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from collections import Counter
from email.utils import formatdate
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from stub_server import BAD_BODIES, StubServer
from tiny_tokenizer import CHATML, save_chat_tokenizer

from mad_eval import api as mad_eval_api
from mad_eval.backends import (
    Backend,
    Guarded,
    Replica,
    Request,
    RetryPolicy,
    Sampling,
    TransientError,
)
from mad_eval.backends.openai_backend import OpenAIBackend, retry_after, served_as
from mad_eval.debate.context import raw_render
from mad_eval.progress import Listener
from mad_eval.records import Question

FAST = ("--retries", "3", "--backoff", "0.01")
QUESTION = Question("q", "What is 2 + 2?", "4")


def served_run(tmp_path: Path, url: str | list[str], *extra: str, out: str = "r") -> list[dict]:
    urls = [url] if isinstance(url, str) else url
    args = [arg for u in urls for arg in ("--base-url", u)]
    result = mad_eval(
        "run", "--model", "openai:stub-model", *args, "--agents", "3", "--rounds", "1",
        "--limit", "4", "--out", out, *FAST, *extra, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return turns_of(tmp_path / out)


def ask(backend: Guarded, seed: int = 1):
    request = Request(
        [{"role": "user", "content": "What is 2 + 2?"}], Sampling(1.0, 1.0, 16, seed), QUESTION
    )

    async def go():
        try:
            return await backend.generate(request)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def guarded(*urls: str, retries: int = 3, timeout: float = 30.0, **policy) -> Guarded:
    replicas = [
        Replica(OpenAIBackend("stub-model", url, timeout), asyncio.Semaphore(8), url)
        for url in urls
    ]
    return Guarded(replicas, timeout, RetryPolicy(retries, **policy))


# --- the retry policy -------------------------------------------------------------------


def test_backoff_doubles_with_jitter_up_to_the_cap():
    low = RetryPolicy(base=1.0, cap=5.0, rng=lambda: 0.0)
    high = RetryPolicy(base=1.0, cap=5.0, rng=lambda: 0.999999)
    assert [low.wait(i, None) for i in range(5)] == [0.5, 1.0, 2.0, 2.5, 2.5]
    assert [round(high.wait(i, None), 3) for i in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    # The server's Retry-After wins over the backoff, up to the backoff's longest wait;
    # a wait that is no wait (NaN, negative) leaves the backoff's own.
    assert low.wait(3, 0.25) == 0.25
    assert low.wait(0, 4.5) == 4.5
    assert low.wait(0, 7.0) == low.wait(0, float("inf")) == 5.0
    assert low.wait(1, float("nan")) == low.wait(1, -3.0) == 1.0


def test_retry_after_reads_seconds_and_http_dates():
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "0.5"}) == 0.5
    assert retry_after({}) is None
    assert retry_after({"retry-after": "soon"}) is None
    # Numbers as the server wrote them: the retry policy bounds them (and the guard warns).
    assert retry_after({"retry-after": "1e309"}) == float("inf")
    assert retry_after({"retry-after": "-5"}) == -5.0
    assert retry_after({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}) > 1e11
    assert retry_after({"retry-after": "Fri, 31 Dec 99999 23:59:59 GMT"}) is None
    # A date far enough ahead that no delay between the two clocks' readings matters.
    later = retry_after({"retry-after": formatdate(time.time() + 1000, usegmt=True)})
    assert later is not None and 900 <= later <= 1000


# --- retries against a server that fails on purpose ---------------------------------------


@pytest.mark.slow
def test_rate_limits_server_errors_timeouts_and_dropped_connections_are_retried(tmp_path):
    """Every request fails first, in one of four ways; the run still answers every turn and
    each turn records how many requests it took."""
    ways = ("429", "503", "hang", "drop")

    def fault(body, attempt):
        return ways[body["seed"] % 4] if attempt == 1 else None

    with StubServer(fault=fault, hang=3.0) as server:
        turns = served_run(tmp_path, server.base_url, "--timeout", "1")
        asked = Counter(r["seed"] for r in server.requests)
    assert len(turns) == 4 * 3 * 2
    assert all(t["error"] is None and t["answer"] == str(t["seed"] % 3) for t in turns)
    assert all(t["attempts"] == 2 == asked[t["seed"]] for t in turns)
    assert {t["seed"] % 4 for t in turns} == {0, 1, 2, 3}  # all four faults happened


class Heard(Listener):
    """What a run tells its caller while it goes: its warnings and requests asked again."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.again: Counter[str] = Counter()

    def warn(self, label: str, text: str) -> None:
        self.warnings.append(text)

    def retried(self, why: str) -> None:
        self.again[why] += 1


@pytest.mark.slow
def test_each_request_asked_again_is_heard_as_it_happens_and_each_way_warned_of_once(tmp_path):
    """The four ways of failing above, from Python: the listener counts every request asked
    again by how it failed (the progress line's "3 timed out, asked again"), and hears one
    sentence per way; the first timeout's says what to change, with the numbers seen."""
    ways = ("429", "503", "hang", "drop")

    def fault(body, attempt):
        return ways[body["seed"] % 4] if attempt == 1 else None

    heard = Heard()
    with StubServer(fault=fault, hang=3.0) as server:
        mad_eval_api.run(
            out=tmp_path / "r", model="openai:stub-model", base_url=server.base_url, agents=3,
            rounds=1, limit=4, timeout=1, retries=3, backoff=0.01, listener=heard,
        )  # fmt: skip
    faults = Counter(ways[t["seed"] % 4] for t in turns_of(tmp_path / "r"))
    assert heard.again == {
        "rate limited": faults["429"],
        "failed on the server": faults["503"],
        "timed out": faults["hang"],
        "disconnected": faults["drop"],
    }
    said = [w for w in heard.warnings if w.startswith("a request to openai:stub-model at ")]
    assert len(said) == 4  # once per way, not once per request
    (timed_out,) = [w for w in said if "no answer within" in w]
    assert timed_out.startswith("a request to openai:stub-model at http://127.0.0.1:")
    assert "got no answer within 1 s (--timeout) with " in timed_out
    assert "asked again from the start" in timed_out
    assert "(--concurrency " in timed_out and "(--timeout 2)" in timed_out
    (limited,) = [w for w in said if "HTTP 429" in w]
    assert limited.endswith(
        "failed (RateLimitError: HTTP 429: rate limited) and is asked again, up to 3 times; "
        "the progress line counts such requests as 'rate limited'."
    )


@pytest.mark.slow
def test_a_request_that_keeps_failing_becomes_a_failed_turn_after_bounded_attempts(tmp_path):
    with StubServer(fault=lambda body, attempt: "429") as server:
        turns = served_run(tmp_path, server.base_url, "--rounds", "0")
        asked = Counter(r["seed"] for r in server.requests)
    assert len(turns) == 4 * 3
    for t in turns:
        assert t["error"] == "RateLimitError: HTTP 429: rate limited (gave up after 4 attempts)"
        assert t["answer"] is None and t["correct"] is None and t["text"] is None
        assert t["attempts"] == 4 == asked[t["seed"]]
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["failed_turns"] == len(turns)


@pytest.mark.slow
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_garbled_200_bodies_are_retried_and_recovered(tmp_path, api):
    """A proxy's HTML page, cut JSON, invalid UTF-8 and an empty choice list are what a
    healthy server would not send twice: each is retried, and the second answer counts."""
    bodies = list(BAD_BODIES)

    def fault(body, attempt):
        return bodies[body["seed"] % len(bodies)] if attempt == 1 else None

    extra = ["--api", "completions", "--template", "raw"] if api == "completions" else []
    with StubServer(fault=fault) as server:
        turns = served_run(tmp_path, server.base_url, *extra)
    assert len(turns) == 4 * 3 * 2
    assert all(t["error"] is None and t["answer"] == str(t["seed"] % 3) for t in turns)
    assert all(t["attempts"] == 2 and t["served_model"] == "stub-model" for t in turns)
    assert {t["seed"] % len(bodies) for t in turns} == set(range(len(bodies)))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "shown"),
    [
        ("html", "'<html><body><h1>502 Bad Gateway</h1></body></html>'"),
        ("notjson", '\'{"id": "cmpl-1", "choices": [{"index": 0, "mess\''),
        ("badutf8", '\'{"choices": [{"message": {"content": "\ufffd\ufffd"}}]}\''),
        ("nochoices", '\'{"id": "cmpl-1", "object": "chat.completion", "choices": []}\''),
    ],
)
def test_a_body_that_stays_garbled_fails_with_its_first_bytes(fault, shown):
    with StubServer(fault=lambda body, attempt: fault) as server:
        generation = ask(guarded(server.base_url, base=0.01, retries=2))
    assert generation.attempts == 3 == len(server.requests)
    assert generation.error == (
        f"BadResponse: HTTP 200 with a body that is not a chat completion: {shown} "
        "(gave up after 3 attempts)"
    )


@pytest.mark.slow
def test_an_answer_without_text_is_an_unparsed_answer_not_a_failure(tmp_path):
    with StubServer(fault=lambda body, attempt: "nullcontent") as server:
        turns = served_run(tmp_path, server.base_url, "--rounds", "0")
        sent = len(server.requests)
    assert sent == len(turns) == 12  # the model's own answer: not asked twice
    for t in turns:
        assert t["error"] is None and t["text"] == "" and t["finish_reason"] == "stop"
        assert t["answer"] is None and t["correct"] is False
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["failed_turns"] == 0 and metrics["unparsed"] == 12


@pytest.mark.slow
def test_an_answer_from_another_model_fails_its_turn():
    with StubServer(fault=lambda body, attempt: "othermodel" if body["seed"] == 1 else None) as s:
        wrong = ask(guarded(s.base_url, base=0.01), seed=1)
        right = ask(guarded(s.base_url, base=0.01), seed=2)
    assert wrong.attempts == 1 and wrong.text is None
    assert wrong.error == (
        "ModelMismatch: the server answered with model 'some-other-model', not 'stub-model'"
    )
    assert right.error is None and right.served_model == "stub-model"


def test_a_dated_snapshot_or_an_alias_of_the_model_asked_for_is_the_same_model():
    assert served_as("gpt-4o-2024-08-06", "gpt-4o")
    assert served_as(None, "gpt-4o") and served_as("gpt-4o", "gpt-4o")
    assert not served_as("gpt-4o-mini", "gpt-4o")
    assert not served_as("Qwen/Qwen3-8B", "Qwen/Qwen3-4B")
    assert served_as("qwen", "qwen-sdrl", frozenset({"qwen", "qwen-sdrl"}))


@pytest.mark.slow
def test_an_alias_vllm_answers_under_its_first_name_is_accepted(tmp_path):
    """vllm serve M --served-model-name base sdrl lists both names with one root and names
    every answer "base"; asking for "sdrl" is asking for the same model."""
    with StubServer(model="base", aliases=("sdrl",)) as server:
        result = mad_eval("run", "--model", "openai:sdrl", "--base-url", server.base_url,
                          "--agents", "2", "--rounds", "1", "--limit", "2", "--out", "r",
                          cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    turns = turns_of(tmp_path / "r")
    assert all(t["error"] is None and t["served_model"] == "base" for t in turns)


@pytest.mark.slow
def test_a_cancelled_request_is_neither_retried_nor_recorded():
    """Cancelling a request while it fails over (here: each attempt is a dropped
    connection) stops it at once: no further attempt, no failed generation. Attempts are
    counted where the guard makes them, not where the server sees them: one already on the
    wire may reach the server after the cancellation."""
    cancelled = False
    attempts: list[bool] = []  # per attempt: whether the request had been cancelled

    async def go(backend):
        nonlocal cancelled
        inner = backend.replicas[0].backend
        send = inner.generate

        async def counted(request):
            attempts.append(cancelled)
            return await send(request)

        inner.generate = counted
        request = Request([{"role": "user", "content": "hi"}], Sampling(1, 1, 8, 1), QUESTION)
        task = asyncio.create_task(backend.generate(request))
        while len(attempts) < 3:  # failing over: a few attempts made already
            await asyncio.sleep(0.01)
        task.cancel()
        cancelled = True
        try:
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0.2)  # room for an attempt the guard should not make
        finally:
            await backend.aclose()

    with StubServer(fault=lambda body, attempt: "hang", hang=0.05) as server:
        asyncio.run(go(guarded(server.base_url, retries=50, timeout=0.02, base=0.01, cap=0.01)))
    assert attempts and not any(attempts)  # nothing asked after the cancellation


def test_a_cancellation_a_client_turns_into_an_error_still_cancels():
    """Some HTTP stacks answer a cancellation by raising their own connection error; the
    guard must see the cancellation through it, not retry the request."""

    class Converts(Backend):
        spec = "fake"
        calls = 0

        async def generate(self, request):
            Converts.calls += 1
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                raise TransientError("APIConnectionError: connection closed") from None

    async def go():
        backend = Guarded([Replica(Converts(), asyncio.Semaphore(1), None)], 30.0,
                          RetryPolicy(5, base=0.0))  # fmt: skip
        request = Request([{"role": "user", "content": "hi"}], Sampling(1, 1, 8, 1), QUESTION)
        task = asyncio.create_task(backend.generate(request))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert Converts.calls == 1


@pytest.mark.slow
def test_retry_after_is_honoured():
    """The server asks for 0.6 s; the backoff alone would wait 0.01 s."""
    with StubServer(fault=lambda body, attempt: "429" if attempt == 1 else None,
                    retry_after=0.6) as server:  # fmt: skip
        generation = ask(guarded(server.base_url, base=0.01))
        first, second = server.arrivals
    assert generation.error is None and generation.attempts == 2
    assert second - first >= 0.6


@pytest.mark.slow
def test_refusals_are_not_retried():
    """A 400 (here: a prompt over the context length) will not pass by asking again."""
    with StubServer(max_model_len=8) as server:
        generation = ask(guarded(server.base_url, base=0.01))
    assert generation.attempts == 1 and len(server.requests) == 1
    assert generation.error.startswith("BadRequestError:")
    assert "maximum context length" in generation.error


# --- replicas ---------------------------------------------------------------------------


@pytest.mark.slow
def test_requests_spread_over_replicas_and_each_turn_names_its_own(tmp_path):
    with StubServer(delay=0.05) as a, StubServer(delay=0.05) as b, StubServer(delay=0.05) as c:
        turns = served_run(tmp_path, [a.base_url, b.base_url, c.base_url], "--concurrency", "2")
        seen = {s.base_url: {r["seed"] for r in s.requests} for s in (a, b, c)}
        peaks = [s.peak_in_flight for s in (a, b, c)]
    assert all(t["error"] is None for t in turns)
    for t in turns:
        assert t["seed"] in seen[t["endpoint"]]
    # 24 turns, at most 2 in flight per replica: every replica took a fair share.
    assert all(len(seeds) >= 5 for seeds in seen.values())
    assert max(peaks) <= 2
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["team"][0]["endpoints"] == [a.base_url, b.base_url, c.base_url]


@pytest.mark.slow
def test_the_least_busy_replica_gets_the_work():
    """Eight debates of eight rounds each: a fast replica finishes its requests sooner, so it
    has fewer outstanding when the next round asks, and takes most of the work."""

    async def debate(backend, start):
        out = []
        for seed in range(start, start + 8):
            messages = [{"role": "user", "content": "hi"}]
            out.append(await backend.generate(Request(messages, Sampling(1, 1, 8, seed), QUESTION)))
        return out

    async def go(backend):
        try:
            return await asyncio.gather(*(debate(backend, 100 * d) for d in range(8)))
        finally:
            await backend.aclose()

    with StubServer(delay=0.01) as fast, StubServer(delay=0.2) as slow:
        debates = asyncio.run(go(guarded(fast.base_url, slow.base_url)))
        fast_count, slow_count = len(fast.requests), len(slow.requests)
    assert all(g.error is None for generations in debates for g in generations)
    assert fast_count + slow_count == 64
    assert fast_count > 3 * slow_count


@pytest.mark.slow
def test_a_dead_replica_is_routed_around(tmp_path):
    """One replica drops every generation request; its requests are retried on the other."""
    with StubServer(fault=lambda body, attempt: "drop") as dead, StubServer() as alive:
        turns = served_run(tmp_path, [dead.base_url, alive.base_url])
    assert all(t["error"] is None and t["endpoint"] == alive.base_url for t in turns)
    assert any(t["attempts"] > 1 for t in turns)  # some went to the dead one first


# --- the request cache ------------------------------------------------------------------


@pytest.mark.slow
def test_a_second_identical_run_with_the_cache_sends_zero_requests(tmp_path):
    with StubServer() as server:
        first = served_run(tmp_path, server.base_url, "--cache", "answers.db", out="one")
        sent = len(server.requests)
        # Operational settings are not part of the key: a new timeout, retry count and
        # concurrency still find every answer.
        again = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", server.base_url,
            "--agents", "3", "--rounds", "1", "--limit", "4", "--out", "two",
            "--cache", "answers.db", "--timeout", "77", "--retries", "1", "--concurrency", "3",
            cwd=tmp_path,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == sent == len(first)
        assert "24 answers reused, 0 new ones stored" in again.stdout
        # A different sampling setting is a different request.
        served_run(tmp_path, server.base_url, "--cache", "answers.db", "--temperature", "0.5",
                   out="three")  # fmt: skip
        assert len(server.requests) == 2 * sent
    second = turns_of(tmp_path / "two")
    assert all(t["cached"] and t["attempts"] == 0 for t in second)
    assert not any(t["cached"] for t in first)
    keep = ("question", "round", "agent", "seed", "messages_hash", "text", "answer", "endpoint")
    assert sorted([{k: t[k] for k in keep} for t in first], key=str) == sorted(
        [{k: t[k] for k in keep} for t in second], key=str
    )
    metrics = [json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("one", "two")]
    assert metrics[0]["debate"] == metrics[1]["debate"] and metrics[0]["maj"] == metrics[1]["maj"]


@pytest.mark.slow
def test_failures_are_not_cached(tmp_path):
    with StubServer(fail_if=lambda body: body["seed"] % 5 == 0) as server:
        first = served_run(tmp_path, server.base_url, "--rounds", "0", "--cache", "c.db",
                           "--retries", "0", out="one")  # fmt: skip
        sent = len(server.requests)
        served_run(tmp_path, server.base_url, "--rounds", "0", "--cache", "c.db",
                   "--retries", "0", out="two")  # fmt: skip
        asked_again = [r["seed"] for r in server.requests[sent:]]
    failed = sorted(t["seed"] for t in first if t["error"])
    assert failed and sorted(asked_again) == failed


def test_an_unusable_cache_path_is_one_clear_sentence(tmp_path):
    (tmp_path / "file").write_text("")
    result = mad_eval("run", "--limit", "1", "--cache", "file/answers.db", cwd=tmp_path)
    assert result.returncode == 2
    assert "cannot use file/answers.db as a request cache" in result.stderr


# --- the completions API ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    corpus = ["Problem: What is 7 + 8? Reason step by step, then answer in \\boxed{15}."] * 20
    return save_chat_tokenizer(tmp_path_factory.mktemp("tok"), corpus, vocab_size=400)


@pytest.mark.slow
def test_completions_send_the_prompt_we_render_with_the_chat_template(tmp_path, tokenizer_dir):
    with StubServer(tokenizer=tokenizer_dir, max_model_len=4096) as server:
        turns = served_run(tmp_path, server.base_url, "--api", "completions",
                           "--tokenizer", str(tokenizer_dir))  # fmt: skip
        requests = list(server.requests)
    assert all("prompt" in r and "messages" not in r for r in requests)
    assert all(r["prompt"].startswith("<|im_start|>user\n") for r in requests)
    assert all(r["prompt"].endswith("<|im_end|>\n<|im_start|>assistant\n") for r in requests)
    # Our count of the rendered text is the server's count of what it received.
    assert all(t["error"] is None and t["context_tokens"] == t["prompt_tokens"] for t in turns)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["prompt"]["api"] == "completions"
    assert manifest["prompt"]["templates"] == {f"hf:{tokenizer_dir}": CHATML}


@pytest.mark.slow
def test_completions_with_the_raw_template_for_base_checkpoints(tmp_path, tokenizer_dir):
    with StubServer(tokenizer=tokenizer_dir, max_model_len=4096) as server:
        turns = served_run(tmp_path, server.base_url, "--api", "completions",
                           "--template", "raw", "--tokenizer", str(tokenizer_dir))  # fmt: skip
        prompts = [r["prompt"] for r in server.requests]
    assert all("<|im_start|>" not in p and p.endswith("\n\n") for p in prompts)
    assert all(t["error"] is None and t["context_tokens"] == t["prompt_tokens"] for t in turns)
    round0 = [p for p in prompts if "agent 0" not in p]
    assert round0 and all(p == raw_render([{"role": "user", "content": p[:-2]}]) for p in round0)


@pytest.mark.slow
def test_an_own_apart_layout_goes_out_as_raw_text_counted_and_cut_exactly(tmp_path, tokenizer_dir):
    """A debate code base's layout for base checkpoints: the others' answers unlabelled, the
    agent's own apart, the question last, sent as plain text. Long replies are cut to the
    budget by the real tokenizer, never the template's own text, and the count is exact."""

    def reply(body: dict) -> str:
        return "so we check the value of each step and sum " * 60 + f"\\boxed{{{body['seed'] % 3}}}"

    with StubServer(tokenizer=tokenizer_dir, max_model_len=1400, reply=reply) as server:
        turns = served_run(tmp_path, server.base_url, "--api", "completions", "--template",
                           "raw", "--tokenizer", str(tokenizer_dir), "--max-tokens", "400",
                           "--prompt-template", "own-apart")  # fmt: skip
        prompts = {r["seed"]: r["prompt"] for r in server.requests}
    debate = [t for t in turns if t["round"] == 1]
    assert len(debate) == 4 * 3 and all(t["error"] is None for t in turns)
    for turn in debate:
        prompt = prompts[turn["seed"]]
        assert "<|im_start|>" not in prompt and "agent " not in prompt
        assert prompt.startswith("Here is how other agents answered the problem:\n\n")
        assert (
            prompt.count("Another agent's answer: ") == 2 and "Your own previous answer: " in prompt
        )
        assert prompt.endswith("Reason step by step, then give your final answer in \\boxed{}.\n\n")
        assert turn["cut_tokens"] > 0 and "[... the start of this response was cut" in prompt
        assert turn["context_tokens"] == turn["prompt_tokens"] <= 1400 - 400


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--api", "completions"],
            "rendering prompts with the model's chat template needs its tokenizer",
        ),
        (["--template", "raw"], "--template raw needs --api completions"),
        (["--api", "stream"], "--api must be one of chat, completions, got 'stream'."),
        (["--retries", "-1"], "--retries must be 0 or more, got -1."),
    ],
)
def test_serving_options_misused_get_one_clear_sentence(tmp_path, extra, message):
    result = mad_eval(
        "run", "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", *extra,
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert message in result.stderr


def test_the_vllm_backend_without_vllm_says_how_to_install_it(tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here; tests/test_vllm.py runs it")
    result = mad_eval("run", "--model", "vllm:/models/qwen3-8b", "--limit", "1", cwd=tmp_path)
    assert result.returncode == 2
    assert "the vllm:<model> backend needs vLLM: pip install 'mad-eval[vllm]'" in result.stderr


def test_the_proxy_comes_from_the_environment_once_per_endpoint(monkeypatch):
    from yarl import URL

    from mad_eval.backends.openai_backend import proxy_for

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for(URL("http://10.0.0.5:8000/v1")) is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://secure-proxy:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert proxy_for(URL("http://10.0.0.5:8000/v1")) == "http://proxy:3128"
    assert proxy_for(URL("https://api.openai.com/v1")) == "http://secure-proxy:3128"
    assert proxy_for(URL("http://127.0.0.1:8000/v1")) is None
    assert OpenAIBackend("m", "http://10.0.0.5:8000/v1").proxy == "http://proxy:3128"


@pytest.mark.slow
def test_debate_or_votes_layout_goes_out_bare_with_replies_quoted_as_written(
    tmp_path, tokenizer_dir
):
    """--template bare adds nothing to the template's text, and --quote verbatim quotes each
    reply exactly as the server returned it, <think> block and all (Debate-or-Vote's way)."""

    def reply(body: dict) -> str:
        return f"<think>\nworking {body['seed']}\n</think>\n\n{{final answer: {body['seed'] % 3}}}"

    with StubServer(tokenizer=tokenizer_dir, max_model_len=4096, reply=reply) as server:
        turns = served_run(tmp_path, server.base_url, "--api", "completions", "--template",
                           "bare", "--tokenizer", str(tokenizer_dir), "--prompt-template", "dov",
                           "--quote", "verbatim", "--protocol", "sparse:order=ring",
                           "--answer-protocol", "dov-math")  # fmt: skip
        prompts = {r["seed"]: r["prompt"] for r in server.requests}
    assert all(t["error"] is None and t["context_tokens"] == t["prompt_tokens"] for t in turns)
    said = {
        (t["question"], t["agent"]): reply({"seed": t["seed"]}) for t in turns if not t["round"]
    }
    for turn in turns:
        prompt = prompts[turn["seed"]]
        assert not prompt.endswith("\n") and prompt.endswith("in the form {final answer: X}.")
        if turn["round"] == 1:
            left, right = (turn["agent"] - 1) % 3, (turn["agent"] + 1) % 3
            quoted = [said[turn["question"], j] for j in (left, right, turn["agent"])]
            at = [prompt.index(f"\n{text}\n") for text in quoted]
            assert at == sorted(at) and turn["sees"] == [left, right, turn["agent"]]
        else:
            assert turn["reply"] == reply({"seed": turn["seed"]}) and turn["reasoning"]
