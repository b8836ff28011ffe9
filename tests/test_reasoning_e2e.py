"""End to end: a reasoning model's replies through the real `mad-eval run` against a local
OpenAI-compatible server. Reasoning kept apart from the final content (in the server's own
reasoning field or in <think> tags), replies cut off inside their reasoning, what peers read
of each other (--quote), request fields merged in (--extra-body, a roster's extra_body) and
the one-sentence refusals of what cannot work."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import mad_eval, turns_of
from stub_server import StubServer
from tiny_tokenizer import save_chat_tokenizer

from mad_eval.grading.reasoning import TAIL_MARKER

FAST = ("--retries", "3", "--backoff", "0.01")
QUOTE = re.compile(r'<response from="agent (\d+)">\n(.*?)\n</response>', re.DOTALL)
# Fields mad-eval sets in every chat request itself; anything else came from an extra body.
OWN_FIELDS = {"model", "messages", "prompt", "max_tokens", "seed", "temperature", "top_p"}
THINKING = {"top_k": 20, "chat_template_kwargs": {"enable_thinking": True}}


def thought(seed: int, words: int = 30) -> str:
    """A recognisable reasoning: it opens with alpha-SEED, holds a wrong boxed guess that must
    never be graded, names its seed again near the end and ends with omega."""
    ponder = " ".join(f"ponder{i}" for i in range(words))
    return f"alpha-{seed} {ponder} \\boxed{{9}} secret-{seed} omega"


def final(seed: int) -> str:
    return f"So the answer is \\boxed{{{seed % 3}}}"


def reasoning_reply(body: dict[str, Any]) -> str:
    """A reasoning model's reply, its answer decided by the request's seed."""
    return f"<think>{thought(body['seed'])}</think>\n\n{final(body['seed'])}"


def run(tmp_path: Path, server: StubServer, *extra: str, out: str = "r", limit: str = "2"):
    """A 3-agent, 1-round run on the server into tmp_path/out (not checked)."""
    return mad_eval(
        "run", "--model", "openai:stub-model", "--base-url", server.base_url, "--agents", "3",
        "--rounds", "1", "--limit", limit, "--out", out, *FAST, *extra, cwd=tmp_path,
    )  # fmt: skip


def run_ok(tmp_path: Path, server: StubServer, *extra: str, out: str = "r") -> list[dict]:
    result = run(tmp_path, server, *extra, out=out)
    assert result.returncode == 0, result.stderr
    return turns_of(tmp_path / out)


def json_of(run_dir: Path, name: str) -> dict:
    return json.loads((run_dir / name).read_text())


def prompt_of(request: dict[str, Any]) -> str:
    if "prompt" in request:
        return request["prompt"]
    return "\n".join(m["content"] for m in request["messages"])


def extras_of(request: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k not in OWN_FIELDS}


def turn_requests(requests: list[dict], turns: list[dict]) -> dict[int, dict]:
    """The request each turn sent, by the turn's seed (each turn has a seed of its own)."""
    seeds = {t["seed"] for t in turns}
    found = {r["seed"]: r for r in requests if r.get("seed") in seeds}
    assert set(found) == seeds, "a turn's request never reached the server"
    return found


def quoted_peers(requests: list[dict], turns: list[dict]) -> list[tuple[dict, str, dict, str]]:
    """For every round-1 turn, each reply its prompt quotes: (turn, its prompt, the quoted
    round-0 turn, the quoted text), read from what the server received."""
    by_seed = turn_requests(requests, turns)
    first = {(t["run"], t["question"], t["agent"]): t for t in turns if t["round"] == 0}
    found = []
    for turn in (t for t in turns if t["round"] == 1):
        prompt = prompt_of(by_seed[turn["seed"]])
        quotes = QUOTE.findall(prompt)
        assert [int(agent) for agent, _ in quotes] == turn["sees"], prompt
        for agent, text in quotes:
            peer = first[(turn["run"], turn["question"], int(agent))]
            found.append((turn, prompt, peer, text))
    assert found
    return found


def error_line(stderr: str) -> str:
    """The one error sentence of a refused command; no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    assert lines[0].endswith("."), lines[0]
    return lines[0]


# --- reasoning kept apart from the final content ----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_a_servers_reasoning_field_is_recorded_apart_and_never_graded(tmp_path, field):
    with StubServer(reply=reasoning_reply, reasoning_field=field) as server:
        turns = run_ok(tmp_path, server)
    assert len(turns) == 2 * 3 * 2
    for t in turns:
        assert t["error"] is None and t["finish_reason"] == "stop"
        assert t["reasoning"] == thought(t["seed"])  # without its tags
        assert t["text"] == final(t["seed"])
        assert t["reasoning_tokens"] == len(thought(t["seed"]).split())  # the server's count
        assert t["truncated_in_reasoning"] is False
        assert t["answer"] == str(t["seed"] % 3)  # the final content's, not the guess of 9
    metrics = json_of(tmp_path / "r", "metrics.json")
    assert metrics["reasoning_turns"] == len(turns) and metrics["truncated_in_reasoning"] == 0
    for row in metrics["rounds"]:
        assert row["reasoning_tokens"] == len(thought(0).split())
        assert row["truncated_in_reasoning"] == 0


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    corpus = [f"{reasoning_reply({'seed': 12345})} Problem: What is 7 + 8? Reason step by step."]
    return save_chat_tokenizer(tmp_path_factory.mktemp("tok"), corpus * 20, vocab_size=400)


@pytest.mark.slow
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_think_tags_in_the_content_are_split_off_the_same_way(tmp_path, api, tokenizer_dir):
    """No reasoning parser on the server: the reasoning arrives inside the reply's text."""
    completions = api == "completions"
    extra = ["--api", "completions", "--tokenizer", str(tokenizer_dir)] if completions else []
    tokenizer = tokenizer_dir if completions else None
    with StubServer(reply=reasoning_reply, tokenizer=tokenizer) as server:
        turns = run_ok(tmp_path, server, "--max-tokens", "4000", *extra)
        requests = list(server.requests)
    assert all(("prompt" in r) == completions for r in requests)
    assert len(turns) == 12
    for t in turns:
        assert t["error"] is None and t["truncated_in_reasoning"] is False
        assert t["reasoning"] == thought(t["seed"])
        assert t["text"] == final(t["seed"]) and "think>" not in t["text"]
        assert t["answer"] == str(t["seed"] % 3)
    # Peers read the final content only (the default), whatever the server sent.
    for _, prompt, peer, text in quoted_peers(requests, turns):
        assert text == peer["text"] and "alpha-" not in prompt and "<think>" not in prompt


# --- what peers read: --quote ------------------------------------------------------------


def reasoning_run(tmp_path: Path, *extra: str) -> tuple[list[dict], list[dict]]:
    """A run against a server that returns reasoning apart: its turns, and the requests
    the server received."""
    with StubServer(reply=reasoning_reply, reasoning_field="reasoning") as server:
        turns = run_ok(tmp_path, server, *extra)
        return turns, list(server.requests)


@pytest.mark.slow
def test_by_default_peers_read_the_final_content_only(tmp_path):
    turns, requests = reasoning_run(tmp_path)
    for _, prompt, peer, text in quoted_peers(requests, turns):
        assert text == final(peer["seed"])
        for piece in ("<think>", "alpha-", "ponder", "secret-", "omega", "\\boxed{9}"):
            assert piece not in prompt
    manifest = json_of(tmp_path / "r", "manifest.json")
    assert manifest["config"]["quote"] == "final"
    assert [a["quote"] for a in manifest["team"]] == ["final"] * 3


@pytest.mark.slow
def test_quote_full_shows_every_peers_whole_reasoning_in_a_think_block(tmp_path):
    turns, requests = reasoning_run(tmp_path, "--quote", "full")
    quotes = quoted_peers(requests, turns)
    assert len(quotes) == 2 * 3 * 3  # every round-1 turn reads all three round-0 replies
    for _, _, peer, text in quotes:
        assert text == f"<think>\n{thought(peer['seed'])}\n</think>\n\n{final(peer['seed'])}"
    manifest = json_of(tmp_path / "r", "manifest.json")
    assert manifest["config"]["quote"] == "full"
    assert [a["quote"] for a in manifest["team"]] == ["full"] * 3


@pytest.mark.slow
def test_quote_tail_shows_only_the_end_of_each_reasoning_after_the_marker(tmp_path):
    turns, requests = reasoning_run(tmp_path, "--quote", "tail:5")
    for _, prompt, peer, text in quoted_peers(requests, turns):
        reasoning = thought(peer["seed"])
        head, closed, after = text.partition("\n</think>\n\n")
        assert closed and after == final(peer["seed"])
        assert head.startswith(f"<think>\n{TAIL_MARKER}")
        tail = head.removeprefix(f"<think>\n{TAIL_MARKER}")
        assert tail.endswith("omega") and reasoning.endswith(tail)
        assert len(tail) < len(reasoning) / 4  # the end of it, not most of it
        assert "alpha-" not in prompt and "ponder0 " not in prompt
    manifest = json_of(tmp_path / "r", "manifest.json")
    assert [a["quote"] for a in manifest["team"]] == ["tail:5"] * 3


def test_an_unreadable_quote_is_one_sentence_naming_the_accepted_forms(tmp_path):
    result = mad_eval("run", "--limit", "1", "--quote", "bogus", "--out", "r", cwd=tmp_path)
    assert result.returncode != 0
    line = error_line(result.stderr)
    assert "--quote" in line and "final, full, tail:N or verbatim" in line and "'bogus'" in line
    assert not (tmp_path / "r" / "turns.jsonl").exists()


# --- replies cut off inside their reasoning -----------------------------------------------


def long_or_short(body: dict[str, Any]) -> str:
    """Even seeds think for 60 words (past --max-tokens 20), odd ones for three."""
    seed = body["seed"]
    reasoning = thought(seed, words=60) if seed % 2 == 0 else f"alpha-{seed} secret-{seed} omega"
    return f"<think>{reasoning}</think>\n\n{final(seed)}"


@pytest.mark.slow
@pytest.mark.parametrize("field", ["reasoning", None])
def test_a_reply_cut_off_in_its_reasoning_has_no_answer_and_is_counted(tmp_path, field):
    """With a reasoning field the server sends content null; without one the content is an
    unclosed <think> block. Either way: no answer, not a failure, counted and shown."""
    with StubServer(reply=long_or_short, reasoning_field=field) as server:
        result = run(tmp_path, server, "--max-tokens", "20", "--limit", "3")
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    turns = turns_of(tmp_path / "r")
    cut = [t for t in turns if t["seed"] % 2 == 0]
    whole = [t for t in turns if t["seed"] % 2 == 1]
    assert cut and whole and len(turns) == 3 * 3 * 2
    for t in cut:
        assert t["truncated_in_reasoning"] is True and t["finish_reason"] == "length"
        assert t["answer"] is None and t["error"] is None
        assert t["text"] == "" and t["reasoning"].startswith(f"alpha-{t['seed']} ponder0")
        assert "think>" not in t["reasoning"]
    for t in whole:
        assert t["truncated_in_reasoning"] is False and t["answer"] == str(t["seed"] % 3)
    metrics = json_of(tmp_path / "r", "metrics.json")
    assert metrics["truncated_in_reasoning"] == len(cut)
    assert metrics["failed_turns"] == 0
    by_round = [row["truncated_in_reasoning"] for row in metrics["rounds"]]
    assert by_round == [sum(t["round"] == r for t in cut) for r in (0, 1)]
    assert sum(by_round) == len(cut)
    assert f"({len(cut)} cut off in their reasoning)" in result.stdout
    assert "Reasoning by round" in result.stdout
    # Peers read a cut reply's final content: nothing, and none of its reasoning.
    quotes = quoted_peers(requests, turns)
    assert any(peer["truncated_in_reasoning"] for _, _, peer, _ in quotes)
    for _, prompt, peer, text in quotes:
        assert text == ("" if peer["truncated_in_reasoning"] else final(peer["seed"]))
        assert "alpha-" not in prompt and "<think>" not in prompt


# --- request fields merged in: --extra-body ------------------------------------------------


@pytest.mark.slow
def test_an_extra_body_goes_into_every_request_and_into_the_cache_key(tmp_path):
    body = json.dumps(THINKING)
    with StubServer(reply=reasoning_reply, reasoning_field="reasoning") as server:
        first = run_ok(tmp_path, server, "--extra-body", body, "--cache", "c.db", out="one")
        sent = list(server.requests)
        again = run(tmp_path, server, "--extra-body", body, "--cache", "c.db", out="two")
        resent = server.requests[len(sent) :]
        other = {**THINKING, "top_k": 40}
        third = run(tmp_path, server, "--extra-body", json.dumps(other), "--cache", "c.db",
                    out="three")  # fmt: skip
        third_sent = server.requests[len(sent) + len(resent) :]
    # Every request, the check before the run included, carries the fields.
    assert sent and all(extras_of(r) == THINKING for r in sent)
    by_seed = turn_requests(sent, first)
    for t in first:
        request = by_seed[t["seed"]]
        assert request["temperature"] == t["temperature"] == 1.0 and request["seed"] == t["seed"]
        assert request["top_p"] == t["top_p"] and request["max_tokens"] == t["max_tokens"]
    assert len(sent) == len(first) + 1  # the turns, and one check of the extra body
    for run_dir in ("one", "two"):
        manifest = json_of(tmp_path / run_dir, "manifest.json")
        assert manifest["config"]["extra_body"] == THINKING
        assert [a["extra_body"] for a in manifest["team"]] == [THINKING] * 3
    # The same body again: every answer from the cache, no turn asked again.
    assert again.returncode == 0, again.stderr
    assert "12 answers reused, 0 new ones stored" in again.stdout
    assert all(t["cached"] for t in turns_of(tmp_path / "two"))
    assert not {r["seed"] for r in resent} & {t["seed"] for t in first}
    # Another body is another request: none of its answers come from the cache.
    assert third.returncode == 0, third.stderr
    assert "0 answers reused, 12 new ones stored" in third.stdout
    assert not any(t["cached"] for t in turns_of(tmp_path / "three"))
    assert len(third_sent) == len(first) + 1
    assert all(extras_of(r) == other for r in third_sent)


@pytest.mark.slow
def test_an_extra_body_the_server_refuses_stops_the_run_before_any_turn(tmp_path):
    with StubServer(reply=reasoning_reply, refuse_fields=("top_k",)) as server:
        result = run(tmp_path, server, "--extra-body", '{"top_k": 20}')
        requests = list(server.requests)
    assert result.returncode != 0
    line = error_line(result.stderr)
    assert "refused the extra body" in line and "top_k" in line and "--extra-body" in line
    assert len(requests) == 1 and requests[0]["max_tokens"] == 1  # the check alone
    turns = tmp_path / "r" / "turns.jsonl"
    assert not turns.exists() or turns.read_text() == ""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "model", "message"),
    [
        ("not json", "openai:stub-model", "--extra-body is not valid JSON"),
        ('{"temperature": 0}', "openai:stub-model", "use --temperature"),
        ('{"max_tokens": 9}', "openai:stub-model", "use --max-tokens"),
        ('["top_k"]', "openai:stub-model", "--extra-body must be a table of request fields"),
        ('{"top_k": 1}', "sim", "(sim) takes no extra body fields: --extra-body"),
    ],
)
def test_an_unusable_extra_body_is_one_sentence(tmp_path, body, model, message):
    with StubServer() as server:
        result = mad_eval(
            "run", "--model", model, "--base-url", server.base_url, "--agents", "3",
            "--rounds", "1", "--limit", "2", "--out", "r", "--extra-body", body, cwd=tmp_path,
        )  # fmt: skip
        requests = list(server.requests)
    assert result.returncode != 0
    assert message in error_line(result.stderr)
    assert requests == [] and not (tmp_path / "r" / "turns.jsonl").exists()


# --- a roster: quoting and extra body per group ---------------------------------------------


@pytest.mark.slow
def test_roster_groups_quote_and_extend_the_request_each_their_own_way(tmp_path):
    with StubServer(reply=reasoning_reply, reasoning_field="reasoning") as server:
        (tmp_path / "team.toml").write_text(
            f"""
[[agent]]
name = "thinkers"
model = "openai:stub-model"
base_url = "{server.base_url}"
count = 2
quote = "full"
extra_body = {{ top_k = 5 }}

[[agent]]
name = "plain"
model = "openai:stub-model"
base_url = "{server.base_url}"
count = 1
extra_body = {{ min_p = 0.05, chat_template_kwargs = {{ enable_thinking = false }} }}
"""
        )
        run_body = {"top_k": 20, "repetition_penalty": 1.05}
        result = mad_eval(
            "run", "--roster", "team.toml", "--rounds", "1", "--limit", "2", "--out", "r",
            "--extra-body", json.dumps(run_body), *FAST, cwd=tmp_path,
        )  # fmt: skip
        requests = list(server.requests)
    assert result.returncode == 0, result.stderr
    turns = turns_of(tmp_path / "r")
    # A group's extra_body goes over the run's, key by key.
    expected = {
        0: {"top_k": 5, "repetition_penalty": 1.05},
        1: {"top_k": 5, "repetition_penalty": 1.05},
        2: {
            "top_k": 20,
            "repetition_penalty": 1.05,
            "min_p": 0.05,
            "chat_template_kwargs": {"enable_thinking": False},
        },
    }
    by_seed = turn_requests(requests, turns)
    for t in turns:
        assert extras_of(by_seed[t["seed"]]) == expected[t["agent"]]
    assert len(requests) == len(turns) + 2  # one check per distinct extra body
    # Only the thinkers (agents 0 and 1) read the reasoning of the replies they are shown.
    for turn, prompt, peer, text in quoted_peers(requests, turns):
        if turn["agent"] < 2:
            assert text == f"<think>\n{thought(peer['seed'])}\n</think>\n\n{final(peer['seed'])}"
        else:
            assert text == final(peer["seed"]) and "alpha-" not in prompt
    manifest = json_of(tmp_path / "r", "manifest.json")
    assert manifest["config"]["extra_body"] == run_body
    team = [(a["group"], a["quote"], a["extra_body"]) for a in manifest["team"]]
    assert team == [
        ("thinkers", "full", expected[0]),
        ("thinkers", "full", expected[1]),
        ("plain", "final", expected[2]),
    ]
