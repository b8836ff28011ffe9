"""Prompt templates through the real command: what a server receives, what the judge
rebuilds, and what resuming with an edited template does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from stub_server import StubServer

BOXED = "Reason step by step, then give your final answer in \\boxed{}."


def stub_run(tmp_path: Path, server: StubServer, *extra: str) -> None:
    result = mad_eval(
        "run", "--model", "openai:stub-model", "--base-url", server.base_url, "--agents", "3",
        "--rounds", "2", "--limit", "2", "--out", "r", *extra, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_a_conversation_template_sends_each_agent_its_own_answers_as_assistant_turns(tmp_path):
    """Round 2's request of every agent is its whole conversation: the question, its own
    round-0 and round-1 replies as assistant turns, and the others' replies in user turns."""
    with StubServer(reply=lambda body: f"I say \\boxed{{{body['seed'] % 3}}}") as server:
        stub_run(tmp_path, server, "--prompt-template", "conversation")
        requests = list(server.requests)
    turns = {(t["question"], t["round"], t["agent"]): t for t in turns_of(tmp_path / "r")}
    by_seed = {t["seed"]: t for t in turns.values()}
    assert len(requests) == 2 * 3 * 3
    for body in requests:
        turn = by_seed[body["seed"]]
        messages = body["messages"]
        assert [m["role"] for m in messages] == ["user"] + ["assistant", "user"] * turn["round"]
        assert messages[0]["content"].endswith(f"\n\n{BOXED}")
        q, agent = turn["question"], turn["agent"]
        for r in range(turn["round"]):
            assert messages[1 + 2 * r]["content"] == turns[(q, r, agent)]["text"]
            quoted = messages[2 + 2 * r]["content"]
            for j in range(3):
                shown = f'<response from="agent {j}">\n{turns[(q, r, j)]["text"]}\n</response>'
                assert (shown in quoted) == (j != agent)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    recorded = manifest["prompt"]["prompt_templates"]["conversation"]
    assert recorded["text"] == (Path(__file__).parents[1] / "templates" / "conversation.toml"
                                ).read_text()  # fmt: skip
    assert len(recorded["sha256"]) == 64 and recorded["data"]["history"] is True
    # The judge rebuilds every debate prompt, conversation included, and judges them all.
    judged = mad_eval("judge", "r", "--judge", "sim-judge", cwd=tmp_path)
    assert judged.returncode == 0, judged.stderr
    assert "skipped" not in judged.stderr
    verdicts = (tmp_path / "r" / "judge.jsonl").read_text().splitlines()
    assert len(verdicts) == 2 * 3 * 2


@pytest.mark.slow
def test_a_users_template_file_runs_and_an_edit_is_refused_on_resume(tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text(
        '[[round0]]\nrole = "user"\ncontent = "Q: {{ question }}\\n{{ answer_format }}"\n'
        '[[debate]]\nrole = "user"\ncontent = """Q: {{ question }}\n'
        "{% for p in peers %}\n- {{ p.text }}\n{% endfor %}\n"
        'Again: {{ answer_format }}"""\n'
    )
    with StubServer() as server:
        stub_run(tmp_path, server, "--prompt-template", str(mine))
        sent = [r["messages"][0]["content"] for r in server.requests]
        debate = [text for text in sent if "\n- " in text]
        opening = [text for text in sent if "\n- " not in text]
        assert len(debate) == 2 * 3 * 2 and len(opening) == 2 * 3
        assert all(text.startswith("Q: ") and text.endswith(f"Again: {BOXED}") for text in debate)
        assert all(text.startswith("Q: ") and text.endswith(f"\n{BOXED}") for text in opening)
        mine.write_text(mine.read_text().replace("Again:", "Once more:"))
        # A fresh process, as a user's resume is: this one holds the file as first read.
        again = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", server.base_url, "--agents",
            "3", "--rounds", "2", "--limit", "2", "--out", "r", "--prompt-template", str(mine),
            cwd=tmp_path, process=True,
        )  # fmt: skip
    assert again.returncode == 2
    assert f"prompt template {mine} is" in again.stderr and "rerun with the same" in again.stderr


@pytest.mark.slow
def test_a_bad_template_is_refused_before_any_request(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[round0]]\nrole = "user"\ncontent = "{{ problem }}"\n'
                   '[[debate]]\nrole = "user"\ncontent = "{{ question }}"\n')  # fmt: skip
    with StubServer() as server:
        result = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", server.base_url,
            "--prompt-template", str(bad), "--out", "r", cwd=tmp_path,
        )  # fmt: skip
        assert server.requests == []
    assert result.returncode == 2
    assert "bad.toml: round0[0]: content uses unknown variable 'problem'" in result.stderr
    assert "Traceback" not in result.stderr


# --- answer protocols through the command -------------------------------------------------

DATA = Path(__file__).parents[2] / "shared" / "data"


GOLDS: dict[str, str] = {}  # problem text -> gold, for the stub to answer with


def gold_line(body: dict) -> str:
    """A reply whose last cue is wrong but whose last line holds the question's gold."""
    prompt = body["messages"][-1]["content"]
    gold = next(gold for problem, gold in GOLDS.items() if problem in prompt)
    return f"I think the answer is 1, but no.\nAnswer: {gold}"


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="the workplace's benchmark files are not beside")
def test_a_dapo_variant_asks_for_and_reads_an_answer_line(tmp_path):
    rows = [json.loads(line) for line in (DATA / "aime24.jsonl").read_text().splitlines()[:3]]
    GOLDS.update({row["problem"]: str(int(row["answer"])) for row in rows})
    with StubServer(reply=gold_line) as server:
        result = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", server.base_url, "--agents", "2",
            "--rounds", "1", "--limit", "3", "--benchmark", "aime24_dapo", "--data-dir", str(DATA),
            "--out", "r", cwd=tmp_path,
        )  # fmt: skip
        first = server.requests[0]["messages"][-1]["content"]
    assert result.returncode == 0, result.stderr
    assert first.endswith('on the last line of your reply, in the form "Answer: X".')
    turns = turns_of(tmp_path / "r")
    assert len(turns) == 12 and all(t["correct"] for t in turns)
    assert {t["question"] for t in turns} == {row["id"] for row in rows}  # aime24's own ids
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["benchmark"]["answer"] == "dapo"
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["debate"] == 100.0


@pytest.mark.slow
def test_an_answer_protocol_the_kind_cannot_use_is_refused_before_any_request(tmp_path):
    with StubServer() as server:
        result = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", server.base_url,
            "--answer-protocol", "math-verify", "--benchmark", "gsm8k", "--out", "r", cwd=tmp_path,
        )  # fmt: skip
        unknown = mad_eval("run", "--answer-protocol", "last-number", "--out", "u", cwd=tmp_path)
        setting = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", server.base_url,
            "--answer-protocol", "math-verify:precision=99", "--benchmark", "math500",
            "--out", "s", cwd=tmp_path,
        )  # fmt: skip
        assert server.requests == []
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the number kind cannot be read with the math-verify answer protocol" in result.stderr
    assert unknown.returncode == 2
    assert "unknown answer protocol 'last-number'; known: boxed, answer-line" in unknown.stderr
    assert setting.returncode == 2 and not (tmp_path / "s").exists()
    assert setting.stderr.strip() == (
        "error: --answer-protocol: math-verify setting precision=99 is not accepted; precision "
        "takes an integer from 0 to 15 (decimal places floats are rounded to)"
    )


def test_templates_lists_them_and_shows_one_rendered(tmp_path):
    listed = mad_eval("templates", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for name in ("debate", "own-apart", "conversation", "anonymous", "critique"):
        assert f"\n│ {name} " in listed.stdout or f"\n┃ {name} " in listed.stdout
    shown = mad_eval("templates", "conversation", "--round", "2", "--agent", "0", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    roles = [line for line in shown.stdout.splitlines() if line.startswith("[")]
    assert roles == ["[user]", "[assistant]", "[user]", "[assistant]", "[user]"]
    assert "Sample response 0 of round 1." in shown.stdout  # its own round-1 answer
    bad = mad_eval("templates", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "unknown prompt template 'nope'" in bad.stderr


@pytest.mark.slow
def test_simulated_agents_read_the_quoted_answers_under_any_template(tmp_path):
    """The simulator gets the quoted responses as data, so a layout it has never seen runs
    offline, and (reading only answers) gives the same turns as the default layout."""
    answers = {}
    for name in ("debate", "own-apart", "conversation", "anonymous"):
        result = mad_eval("run", "--agents", "3", "--rounds", "2", "--limit", "10",
                          "--prompt-template", name, "--out", name, cwd=tmp_path)  # fmt: skip
        assert result.returncode == 0, result.stderr
        answers[name] = sorted(
            (t["question"], t["round"], t["agent"], t["answer"]) for t in turns_of(tmp_path / name)
        )
    assert len(answers["debate"]) == 10 * 3 * 3
    assert all(found == answers["debate"] for found in answers.values())


@pytest.mark.slow
def test_a_roster_group_brings_its_own_template(tmp_path):
    (tmp_path / "team.toml").write_text(
        '[[agent]]\nmodel = "openai:stub-model"\ncount = 2\n\n'
        '[[agent]]\nmodel = "openai:stub-model"\ncount = 1\nprompt_template = "anonymous"\n'
    )
    with StubServer() as server:
        result = mad_eval(
            "run", "--roster", "team.toml", "--base-url", server.base_url, "--rounds", "1",
            "--limit", "1", "--out", "r", cwd=tmp_path,
        )  # fmt: skip
        sent = {r["seed"]: r["messages"][-1]["content"] for r in server.requests}
    assert result.returncode == 0, result.stderr
    debate = {t["agent"]: sent[t["seed"]] for t in turns_of(tmp_path / "r") if t["round"] == 1}
    assert "<response number=" not in debate[0] and "<response number=" not in debate[1]
    assert debate[2].count("<response number=") == 3 and "agent" not in debate[2]
    team = json.loads((tmp_path / "r" / "manifest.json").read_text())["team"]
    assert [seat["prompt_template"] for seat in team] == ["debate", "debate", "anonymous"]
