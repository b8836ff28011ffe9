"""End to end: every protocol, prompt style, mixed teams and context budgets through the real
`mad-eval` command, on simulated agents and on local OpenAI-compatible servers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from factories import compute_metrics
from stub_server import StubServer
from tiny_tokenizer import save_chat_tokenizer

from mad_eval.debate.context import CUT_MARKER
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn

QUOTE = re.compile(r'<response from="agent (\d+)">\n(.*?)\n</response>', re.DOTALL)


def run_ok(tmp_path: Path, *args: str, out: str = "r", env=None) -> Path:
    result = mad_eval(
        "run", "--rounds", "2", "--limit", "3", "--out", out, *args, cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    return tmp_path / out


def manifest_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def metrics_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("protocol", "expected_sees"),
    [
        ("decentralized", [[0, 1, 2, 3, 4]] * 5),
        ("sparse", [[0, 1, 4], [0, 1, 2], [1, 2, 3], [2, 3, 4], [0, 3, 4]]),
        ("sparse:degree=4", [[0, 1, 2, 3, 4]] * 5),
        ("centralized", [[0, 1, 2, 3, 4], [0, 1], [0, 2], [0, 3], [0, 4]]),
        ("centralized:hub=3", [[3, 0], [3, 1], [3, 2], [3, 0, 1, 2, 4], [3, 4]]),
        ("heterogeneous", [[0, 1, 2, 3, 4]] * 5),
        ("reflection", [[0], [1], [2], [3], [4]]),
        ("roles", [[0, 1, 2, 3, 4]] * 5),
    ],
)
def test_every_protocol_runs_and_each_turn_sees_its_topology(tmp_path, protocol, expected_sees):
    run_dir = run_ok(tmp_path, "--protocol", protocol)
    manifest = manifest_of(run_dir)
    assert manifest["protocol"]["sees"] == expected_sees
    turns = turns_of(run_dir)
    assert len(turns) == 3 * 5 * 3
    for t in turns:
        assert t["sees"] == ([] if t["round"] == 0 else expected_sees[t["agent"]])
    metrics = metrics_of(run_dir)
    assert 0 < metrics["prefix_share"] < 1


@pytest.mark.slow
def test_centralized_reports_the_hub_next_to_the_vote_over_all_agents(tmp_path):
    run_dir = run_ok(tmp_path, "--protocol", "centralized:hub=2", "--limit", "20")
    metrics = metrics_of(run_dir)
    turns = [Turn(**t) for t in turns_of(run_dir)]
    assert metrics["hub"] == 2 and metrics["voters"] == [0, 1, 2, 3, 4]
    for row in metrics["rounds"]:
        hub_turns = [t for t in turns if t.agent == 2 and t.round == row["round"]]
        assert row["hub_accuracy"] == pytest.approx(
            100 * sum(t.correct for t in hub_turns) / len(hub_turns)
        )
    assert compute_metrics(turns, Scoring(5, 2, range(5), kind="math", seed=0, hub=2)) == metrics


@pytest.mark.slow
def test_the_heterogeneous_preset_breaks_metrics_down_by_group(tmp_path):
    run_dir = run_ok(tmp_path, "--protocol", "heterogeneous", "--limit", "20")
    turns = turns_of(run_dir)
    assert {t["model"] for t in turns if t["agent"] < 2} == {"sim:p0=0.7"}
    assert {t["model"] for t in turns if t["agent"] >= 2} == {"sim:p0=0.35"}
    groups = {g["group"]: g for g in metrics_of(run_dir)["groups"]}
    assert groups["strong"]["agents"] == [0, 1] and groups["weak"]["agents"] == [2, 3, 4]
    for name, members in (("strong", {0, 1}), ("weak", {2, 3, 4})):
        first = [t for t in turns if t["agent"] in members and t["round"] == 0]
        expected = 100 * sum(t["correct"] for t in first) / len(first)
        assert groups[name]["rounds"][0]["agent_accuracy"] == pytest.approx(expected)


@pytest.mark.slow
def test_the_prompt_template_comes_from_the_preset_or_the_option(tmp_path):
    manifest = manifest_of(run_ok(tmp_path, "--protocol", "verification", out="a"))
    assert manifest["prompt"]["style"] == "verification"
    assert manifest["config"]["prompt_style"] == "verification"  # recorded as it always was
    manifest = manifest_of(run_ok(tmp_path, "--prompt-template", "personas", out="b"))
    assert manifest["prompt"]["style"] == "personas"
    old = mad_eval("run", "--prompt-style", "personas", "--out", "c", cwd=tmp_path)
    assert old.returncode == 2 and "--prompt-style is now --prompt-template" in old.stderr
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_a_plugin_protocol_runs_by_import_path(tmp_path):
    (tmp_path / "my_protocols.py").write_text(
        "from mad_eval.protocols import Protocol\n\n"
        "class Star(Protocol):\n"
        "    name = 'star'\n"
        "    description = 'everyone reads agent 1'\n\n"
        "    def sees(self, agent, n_agents):\n"
        "        return [1]\n"
    )
    env = {"PYTHONPATH": str(tmp_path)}
    run_dir = run_ok(tmp_path, "--protocol", "my_protocols:Star", "--agents", "3", env=env)
    assert manifest_of(run_dir)["protocol"]["class"] == "my_protocols:Star"
    assert all(t["sees"] == [1] for t in turns_of(run_dir) if t["round"] > 0)


def test_protocols_command_lists_every_preset(tmp_path):
    result = mad_eval("protocols", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("decentralized", "sparse", "centralized", "heterogeneous", "reflection"):
        assert name in result.stdout
    assert "ring neighbours" in result.stdout


def prompts_by_seed(requests: list[dict]) -> dict[int, str]:
    return {r["seed"]: r["messages"][-1]["content"] for r in requests}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["decentralized", "sparse", "centralized"])
def test_a_mixed_team_on_two_servers(tmp_path, protocol):
    """Three agents of one model on one server, two of another model on a second server,
    with their own temperature from a roster file."""
    with StubServer(model="model-a") as a, StubServer(model="model-b") as b:
        roster = tmp_path / "team.toml"
        roster.write_text(
            f'[[agent]]\nname = "a"\nmodel = "openai:model-a"\nbase_url = "{a.base_url}"\n'
            "count = 3\n\n"
            f'[[agent]]\nname = "b"\nmodel = "openai:model-b"\nbase_url = "{b.base_url}"\n'
            "count = 2\ntemperature = 0.3\n"
        )
        run_dir = run_ok(tmp_path, "--roster", str(roster), "--protocol", protocol)
        sent = {"a": list(a.requests), "b": list(b.requests)}
    turns = turns_of(run_dir)
    assert len(turns) == 3 * 5 * 3
    seeds = {name: {r["seed"] for r in requests} for name, requests in sent.items()}
    for t in turns:
        group, server = ("a", a) if t["agent"] < 3 else ("b", b)
        assert t["seed"] in seeds[group]
        assert t["model"] == f"openai:model-{group}"
        assert t["endpoint"] == server.base_url
        assert t["temperature"] == (1.0 if group == "a" else 0.3)
    assert all(r["temperature"] == 0.3 for r in sent["b"])
    # What each prompt quoted is exactly what its turn says it saw, with those agents' texts.
    text = {(t["question"], t["round"], t["agent"]): t["text"] for t in turns}
    prompts = prompts_by_seed(sent["a"] + sent["b"])
    for t in turns:
        quoted = QUOTE.findall(prompts[t["seed"]])
        assert [int(j) for j, _ in quoted] == t["sees"]
        for j, body in quoted:
            assert body == text[(t["question"], t["round"] - 1, int(j))]
    metrics = metrics_of(run_dir)
    assert [g["group"] for g in metrics["groups"]] == ["a", "b"]
    assert metrics["hub"] == (0 if protocol == "centralized" else None)


@pytest.mark.slow
def test_agent_options_give_a_mixed_team(tmp_path):
    with StubServer(model="m1") as one, StubServer(model="m2") as two:
        run_dir = run_ok(
            tmp_path,
            "--agent",
            f"openai:m1@{one.base_url}*2",
            "--agent",
            f"openai:m2@{two.base_url}",
            "--protocol",
            "sparse:degree=1",
        )
        assert len(one.requests) == 3 * 2 * 3 and len(two.requests) == 3 * 1 * 3
    manifest = manifest_of(run_dir)
    assert [seat["group"] for seat in manifest["team"]] == ["openai:m1"] * 2 + ["openai:m2"]
    assert manifest["config"]["agents"] == 3


LONG_WORKING = " ".join(["so we check the next step and the value of each term"] * 25)


def long_reply(body: dict) -> str:
    return f"{LONG_WORKING}\nTherefore the answer is \\boxed{{{body['seed'] % 3}}}"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    corpus = [LONG_WORKING, "Problem: What is 7 + 8? Reason step by step, \\boxed{15}"] * 5
    return save_chat_tokenizer(tmp_path_factory.mktemp("tok"), corpus, vocab_size=600)


@pytest.mark.slow
def test_prompts_fit_the_server_context_exactly(tmp_path, tokenizer_dir):
    """The server counts tokens like vLLM and refuses an over-long prompt. With the model's
    tokenizer, every prompt fits, our count equals the server's, and final answers survive."""
    with StubServer(reply=long_reply, tokenizer=tokenizer_dir, max_model_len=1500) as server:
        run_dir = run_ok(
            tmp_path,
            "--model",
            "openai:stub-model",
            "--base-url",
            server.base_url,
            "--tokenizer",
            str(tokenizer_dir),
            "--max-tokens",
            "400",
        )
        assert server.refused == 0
        prompts = prompts_by_seed(server.requests)
    turns = turns_of(run_dir)
    assert all(t["error"] is None for t in turns)
    assert manifest_of(run_dir)["team"][0]["prompt_budget"] == 1100
    for t in turns:
        assert t["context_tokens"] == t["prompt_tokens"] <= 1100
    cut = [t for t in turns if t["cut_tokens"]]
    assert cut and all(t["round"] > 0 for t in cut)
    for t in cut:
        for _, body in QUOTE.findall(prompts[t["seed"]]):
            assert body.startswith(CUT_MARKER)
            assert re.search(r"Therefore the answer is \\boxed\{\d\}$", body)
    assert all(t["answer"] is not None for t in turns)
    assert metrics_of(run_dir)["context_cut_turns"] == len(cut)


@pytest.mark.slow
def test_the_estimate_errs_on_the_safe_side(tmp_path, tokenizer_dir):
    """No tokenizer: a warning, and the estimate still keeps every prompt inside the limit."""
    with StubServer(reply=long_reply, tokenizer=tokenizer_dir, max_model_len=1500) as server:
        result = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", server.base_url,
            "--max-tokens", "400", "--rounds", "1", "--limit", "2", "--agents", "3",
            "--out", "r", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert server.refused == 0
    assert "no tokenizer found for model 'openai:stub-model'" in result.stderr
    turns = turns_of(tmp_path / "r")
    assert all(t["error"] is None and t["context_tokens"] >= t["prompt_tokens"] for t in turns)


@pytest.mark.slow
def test_a_reply_cut_at_max_tokens_is_recorded_as_length(tmp_path):
    with StubServer(reply=long_reply) as server:
        run_dir = run_ok(
            tmp_path, "--model", "openai:stub-model", "--base-url", server.base_url,
            "--max-tokens", "50", "--rounds", "0",
        )  # fmt: skip
    turns = turns_of(run_dir)
    assert all(t["finish_reason"] == "length" and t["answer"] is None for t in turns)
    assert metrics_of(run_dir)["length_stops"] == len(turns)


def test_simulated_long_responses_stay_within_budget(tmp_path):
    run_dir = run_ok(
        tmp_path, "--model", "sim:words=300", "--max-model-len", "2000", "--max-tokens", "400",
    )  # fmt: skip
    turns = turns_of(run_dir)
    assert all(t["context_tokens"] <= 1600 for t in turns)
    assert any(t["cut_tokens"] > 0 for t in turns)
    assert all(t["answer"] is not None for t in turns)  # the answers at the ends survived


@pytest.mark.slow
def test_quote_decides_how_much_of_the_reasoning_peers_read(tmp_path):
    """Simulated reasoning models (300 words of <think> working): by default peers read the
    final content only; --quote full adds every reasoning; tail:20 its last 20 tokens."""
    args = ("--model", "sim:words=300,think=1", "--agents", "3", "--rounds", "1")
    runs = {
        quote: turns_of(run_ok(tmp_path, *args, "--quote", quote, out=quote.replace(":", "_")))
        for quote in ("final", "tail:20", "full")
    }
    assert all(t["reasoning"] and "<think>" not in t["text"] for t in runs["final"])
    # Turns by (question, agent): records come in the order turns finish, which varies.
    context = {
        quote: {(t["question"], t["agent"]): t["context_tokens"] for t in turns if t["round"] == 1}
        for quote, turns in runs.items()
    }
    read = {(t["question"], t["agent"]): t["sees"] for t in runs["full"] if t["round"] == 1}
    thought = {
        (t["question"], t["agent"]): len(t["reasoning"]) for t in runs["full"] if t["round"] == 0
    }
    assert len(read) == len(context["final"]) > 0
    for (question, agent), sees in read.items():
        final, tail, full = (context[quote][(question, agent)] for quote in context)
        # 20 tokens of reasoning, with the tail marker and the think tags around them.
        assert final + 20 * len(sees) <= tail <= final + 60 * len(sees)
        shown = sum(thought[(question, j)] for j in sees) / 2  # two characters a token
        assert shown <= full - final <= shown + 20 * len(sees)  # the whole of every reasoning
    # What a peer reads never changes what an agent answers in round 0.
    first = {(t["question"], t["agent"]): t["text"] for t in runs["final"] if t["round"] == 0}
    assert first == {
        (t["question"], t["agent"]): t["text"] for t in runs["full"] if t["round"] == 0
    }


def test_a_prompt_that_cannot_fit_is_a_failed_turn_never_sent(tmp_path):
    run_dir = run_ok(tmp_path, "--max-model-len", "60", "--max-tokens", "40", "--rounds", "0")
    turns = turns_of(run_dir)
    assert all(t["error"].startswith("ContextError: the question prompt needs") for t in turns)
    assert metrics_of(run_dir)["failed_turns"] == len(turns)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocol", "centralized", "--agents", "1"], "centralized needs at least 2 agents"),
        (["--protocol", "sparse", "--agents", "2"], "sparse with degree 2 needs at least 3"),
        (["--prompt-template", "loud"], "unknown prompt template 'loud'; built in: anonymous,"),
        (["--prompt-template", "roles", "--agents", "1"], "roles needs at least 2 agents"),
        (["--agent", "sim*x"], "cannot read --agent 'sim*x'"),
        (["--agent", "sim", "--roster", "team.toml"], "with --agent options or with --roster"),
        (["--agent", "sim*2", "--agents", "3"], "the roster has 2 agents but --agents is 3"),
        (["--agent", "sim", "--model", "sim"], "--model names one model for all agents"),
        (["--protocol", "heterogeneous", "--agents", "3"], "the roster has 5 agents"),
        (["--roster", "missing.toml"], "cannot read roster file missing.toml"),
        (["--max-model-len", "100", "--max-tokens", "200"], "leaves no room for a prompt"),
        (["--tokenizer", "no/such-tokenizer-here"], "cannot load tokenizer"),
    ],
)
def test_bad_team_and_protocol_settings_get_one_clear_sentence(tmp_path, args, message):
    result = mad_eval("run", *args, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
