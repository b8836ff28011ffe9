"""Against real vLLM (the CPU build runs here): an OpenAI-compatible server and the in-process
engine, both on a tiny random-weight Qwen2 built locally. Its answers are noise; these tests
check the plumbing: records, usage tokens, finish reasons, seeds, resume, context budgets.

Run apart, in a venv with vLLM: `pytest -m vllm` (see .ci/run).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from vllm_server import openai_server, vllm_environment

pytestmark = pytest.mark.vllm

MODEL_LEN = 512
PROTOCOLS = ("decentralized", "sparse", "centralized", "heterogeneous")


@pytest.fixture(scope="module")
def vllm_env(tmp_path_factory) -> dict[str, str]:
    return vllm_environment(tmp_path_factory.mktemp("vllm-cache"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="module")
def server(model_dir, vllm_env, tmp_path_factory) -> Iterator[str]:
    """A vLLM OpenAI-compatible server on localhost, stopped with its whole process group."""
    log = tmp_path_factory.mktemp("server") / "vllm.log"
    args = ("--max-model-len", str(MODEL_LEN), "--dtype", "float32", "--enforce-eager")
    with openai_server(model_dir, ["tiny", "tiny-alias"], log, vllm_env, *args) as url:
        yield url


def run(tmp_path: Path, env: dict, *args: str, out: str) -> list[dict]:
    result = mad_eval("run", *args, "--out", out, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return turns_of(tmp_path / out)


def served(tmp_path, env, url, model_dir, *extra, out, protocol="decentralized"):
    team = (
        ["--agent", f"openai:tiny@{url}*2", "--agent", f"openai:tiny@{url}"]
        if protocol == "heterogeneous"
        else ["--model", "openai:tiny", "--base-url", url, "--agents", "3"]
    )
    return run(
        tmp_path, env, "--protocol", protocol, *team, "--tokenizer", str(model_dir),
        "--rounds", "2", "--limit", "2", "--max-tokens", "24", "--seed", "3", *extra, out=out,
    )  # fmt: skip


def check_turns(
    turns: list[dict], manifest: dict, max_tokens: int, served_model: str | None = "tiny"
) -> None:
    sees = manifest["protocol"]["sees"]
    assert len(turns) == 2 * 3 * 3
    for t in turns:
        assert t["error"] is None, t["error"]
        assert isinstance(t["text"], str) and t["served_model"] == served_model
        assert t["finish_reason"] in ("stop", "length")
        # Usage as the server counted it: our count of the prompt is exact.
        assert t["prompt_tokens"] == t["context_tokens"]
        assert 1 <= t["completion_tokens"] <= max_tokens
        if t["finish_reason"] == "length":
            assert t["completion_tokens"] == max_tokens
        assert t["context_tokens"] + max_tokens <= MODEL_LEN
        assert t["sees"] == ([] if t["round"] == 0 else sees[t["agent"]])


def test_a_second_served_name_is_the_same_model(tmp_path, vllm_env, server, model_dir):
    """vLLM answers a request for its second served name under its first: not a mismatch."""
    turns = run(tmp_path, vllm_env, "--model", "openai:tiny-alias", "--base-url", server,
                "--tokenizer", str(model_dir), "--agents", "2", "--rounds", "0", "--limit", "2",
                "--max-tokens", "8", out="alias")  # fmt: skip
    assert len(turns) == 4
    assert all(t["error"] is None and t["served_model"] == "tiny" for t in turns)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_through_both_apis_on_a_vllm_server(
    tmp_path, vllm_env, server, model_dir, protocol
):
    chat = served(tmp_path, vllm_env, server, model_dir, out="chat", protocol=protocol)
    completions = served(tmp_path, vllm_env, server, model_dir, "--api", "completions",
                         out="completions", protocol=protocol)  # fmt: skip
    for name, turns in (("chat", chat), ("completions", completions)):
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        assert manifest["team"][0]["prompt_budget"] == MODEL_LEN - 24  # as /v1/models reports
        check_turns(turns, manifest, 24)
    # The prompt we render for /completions is the one vLLM renders for /chat/completions:
    # the same seeded requests give the same text.
    assert by_key(chat, "text") == by_key(completions, "text")


def by_key(turns: list[dict], field: str) -> dict:
    return {(t["run"], t["question"], t["round"], t["agent"]): t[field] for t in turns}


def test_a_repeated_seeded_run_gives_identical_text_and_resume_finishes_it(
    tmp_path, vllm_env, server, model_dir
):
    first = served(tmp_path, vllm_env, server, model_dir, out="first")
    again = served(tmp_path, vllm_env, server, model_dir, out="again")
    assert by_key(first, "text") == by_key(again, "text")

    # A run cut short (half its turns on disk, the last line torn) resumes where it stopped.
    lines = (tmp_path / "first" / "turns.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "again" / "turns.jsonl").write_text("".join(lines[:9]) + lines[9][:20])
    resumed = served(tmp_path, vllm_env, server, model_dir, out="again")
    assert by_key(resumed, "text") == by_key(first, "text")
    assert len(resumed) == len(first)


def test_prompts_are_fitted_to_the_context_the_server_reports(
    tmp_path, vllm_env, server, model_dir
):
    """max_tokens 100 of 512 leaves 412 for prompts that quote three replies of up to 100
    tokens (the tiny tokenizer spends ~260 on the rest of the prompt, ~36 per cut marker):
    they are cut to fit, and vLLM never had to shorten or refuse a request."""
    turns = served(tmp_path, vllm_env, server, model_dir, "--max-tokens", "100",
                   "--temperature", "1.5", out="long")  # fmt: skip
    manifest = json.loads((tmp_path / "long" / "manifest.json").read_text())
    check_turns(turns, manifest, 100)
    assert any(t["cut_tokens"] > 0 for t in turns)


def test_the_in_process_engine_matches_the_server(tmp_path, vllm_env, server, model_dir):
    engine = run(
        tmp_path, vllm_env, "--model", f"vllm:{model_dir}", "--agents", "3", "--rounds", "2",
        "--limit", "2", "--max-tokens", "24", "--seed", "3", "--dtype", "float32",
        "--enforce-eager", "--max-model-len", str(MODEL_LEN), out="engine",
    )  # fmt: skip
    manifest = json.loads((tmp_path / "engine" / "manifest.json").read_text())
    check_turns(engine, manifest, 24, served_model=None)  # no server to name a model
    assert manifest["prompt"]["templates"] == {
        f"hf:{model_dir}": json.loads((model_dir / "tokenizer_config.json").read_text()).get(
            "chat_template"
        )
        or (model_dir / "chat_template.jinja").read_text()
    }
    served_turns = served(tmp_path, vllm_env, server, model_dir, out="served")
    assert by_key(engine, "text") == by_key(served_turns, "text")


def test_a_conversation_template_is_rendered_and_counted_as_vllm_does(
    tmp_path, vllm_env, server, model_dir
):
    """Assistant turns in the prompt: the conversation we render for /completions is the one
    vLLM renders from the messages for /chat/completions (same seeded text), and our token
    count of it is the server's. One debate round: the tiny model's 512 tokens hold it."""
    extra = ("--prompt-template", "conversation", "--rounds", "1")  # the last --rounds wins
    chat = served(tmp_path, vllm_env, server, model_dir, *extra, out="chat")
    completions = served(tmp_path, vllm_env, server, model_dir, *extra, "--api", "completions",
                         out="completions")  # fmt: skip
    for turns in (chat, completions):
        assert len(turns) == 2 * 3 * 2
        assert all(t["error"] is None and t["prompt_tokens"] == t["context_tokens"] for t in turns)
    assert by_key(chat, "text") == by_key(completions, "text")
    longest_first = max(t["context_tokens"] for t in chat if t["round"] == 0)
    assert all(t["context_tokens"] > longest_first for t in chat if t["round"] == 1)


def round0_texts(turns: list[dict]) -> dict[str, set[str]]:
    """Each question's distinct round-0 texts (every agent is sent the same prompt there)."""
    found: dict[str, set[str]] = {}
    for t in turns:
        if t["round"] == 0:
            found.setdefault(t["question"], set()).add(t["text"])
    return found


def test_extra_body_fields_reach_the_server_and_the_engine(tmp_path, vllm_env, server, model_dir):
    """--extra-body is merged into every request and recorded: with top_k 1 sampling is
    greedy, so the agents' round-0 answers, sent with different seeds, are all the same; the
    chat template's switches are taken too. The in-process engine takes the same fields."""
    body = '{"chat_template_kwargs": {"enable_thinking": true}, "top_k": 1}'
    greedy = served(tmp_path, vllm_env, server, model_dir, "--extra-body", body, out="greedy")
    manifest = json.loads((tmp_path / "greedy" / "manifest.json").read_text())
    check_turns(greedy, manifest, 24)
    recorded = {"chat_template_kwargs": {"enable_thinking": True}, "top_k": 1}
    assert manifest["config"]["extra_body"] == recorded
    assert all(seat["extra_body"] == recorded for seat in manifest["team"])
    assert all(len(texts) == 1 for texts in round0_texts(greedy).values())
    sampled = served(tmp_path, vllm_env, server, model_dir, out="sampled")
    assert any(len(texts) > 1 for texts in round0_texts(sampled).values())

    engine = run(
        tmp_path, vllm_env, "--model", f"vllm:{model_dir}", "--agents", "3", "--rounds", "2",
        "--limit", "2", "--max-tokens", "24", "--seed", "3", "--dtype", "float32",
        "--enforce-eager", "--max-model-len", str(MODEL_LEN), "--extra-body", body, out="engine",
    )  # fmt: skip
    assert by_key(engine, "text") == by_key(greedy, "text")


def test_a_field_value_the_server_refuses_stops_the_run_in_one_sentence(
    tmp_path, vllm_env, server, model_dir
):
    result = mad_eval(
        "run", "--model", "openai:tiny", "--base-url", server, "--tokenizer", str(model_dir),
        "--limit", "2", "--max-tokens", "8", "--extra-body", '{"top_k": "many"}', "--out", "r",
        cwd=tmp_path, env=vllm_env,
    )  # fmt: skip
    assert result.returncode != 0
    assert "refused the extra body" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r" / "turns.jsonl").exists()
