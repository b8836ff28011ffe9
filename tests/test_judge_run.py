"""`mad-eval judge` end to end: a debate served by one local server, judged by another that
answers well, out of range, without JSON or inside a code fence; the judge reads exactly what
each agent was sent, and every average is checked by hand against the recorded verdicts."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import mad_eval, turns_of
from stub_server import StubServer
from tiny_tokenizer import save_chat_tokenizer

from mad_eval import api
from mad_eval.debate.prompts import judge_correction, judge_prompt
from mad_eval.records import derive_seed

FAST = ("--retries", "0", "--backoff", "0.01")
# Each question's text names how the stub judge answers it (see judge_reply).
QUESTIONS = [
    {"id": "good", "question": "GOOD: what is 1 + 1?", "answer": "2"},
    {"id": "range", "question": "RANGE: what is 2 + 2?", "answer": "4"},
    {"id": "plain", "question": "PLAIN: what is 3 + 3?", "answer": "6"},
    {"id": "fenced", "question": "FENCED: what is 4 + 4?", "answer": "8"},
]
HEADERS = ("conflict", "correctness", "specificity", "engagement")
CRITERIA = (
    "conflict_identification",
    "critique_correctness",
    "critique_specificity",
    "engagement_revision",
)


def scores(*values: int) -> str:
    return json.dumps(dict(zip(CRITERIA, values, strict=True)))


def judge_reply(body: dict) -> str:
    """Well-formed; out of range, then right once corrected; never JSON; JSON in a fence."""
    prompt = body["messages"][1]["content"]
    corrected = len(body["messages"]) > 2
    if "GOOD:" in prompt:
        return "The reply names the conflict exactly.\n" + scores(2, 3, 2, 2)
    if "RANGE:" in prompt:
        return scores(1, 2, 1, 1) if corrected else scores(1, 4, 1, 1)
    if "PLAIN:" in prompt:
        return "I would rate this reply as fairly good overall."
    return "Here are the scores:\n```json\n" + scores(0, 1, 0, 1) + "\n```"


@pytest.fixture
def debate(tmp_path: Path) -> tuple[Path, list[dict]]:
    """A 3-agent, 2-round debate on the four questions, served by a stub; with the bodies
    the agents sent."""
    bench = tmp_path / "questions.jsonl"
    bench.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    with StubServer() as agents:
        result = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", agents.base_url,
            "--benchmark", str(bench), "--agents", "3", "--rounds", "2", "--out", "r", *FAST,
            cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return tmp_path / "r", list(agents.requests)


def judge(run_dir: Path, url: str, *extra: str):
    return mad_eval(
        "judge", str(run_dir), "--judge", "openai:judge", "--base-url", url, *FAST, *extra,
        cwd=run_dir.parent,
    )  # fmt: skip


def verdicts_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "judge.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_judge_scores_each_debate_turn_on_its_exact_context(debate):
    run_dir, agent_bodies = debate
    with StubServer(model="judge", reply=judge_reply) as server:
        result = judge(run_dir, server.base_url)
        judge_bodies = list(server.requests)
    assert result.returncode == 0, result.stderr
    turns = [t for t in turns_of(run_dir) if t["round"] >= 1]
    verdicts = verdicts_of(run_dir)
    assert len(turns) == 24 and len(verdicts) == 24

    sent = {body["seed"]: body["messages"] for body in agent_bodies}
    asked = {body["seed"]: body["messages"] for body in judge_bodies}
    for turn in turns:
        key = (turn["run"], turn["question"], turn["round"], turn["agent"])
        first = asked[derive_seed(0, "judge", *key, 0)]
        # The judge reads the very messages the agent's server received, and its reply.
        assert first == judge_prompt(sent[turn["seed"]], turn["text"])
        assert "correct final answer" not in first[1]["content"]

    by_question = {q["id"]: [v for v in verdicts if v["question"] == q["id"]] for q in QUESTIONS}
    assert all(
        v["scores"] == dict(zip(CRITERIA, (2, 3, 2, 2), strict=True)) for v in by_question["good"]
    )
    for v in by_question["range"]:  # corrected once, then scored
        assert len(v["raw"]) == 2 and v["scores"] == dict(zip(CRITERIA, (1, 2, 1, 1), strict=True))
        assert v["failure"] is None and v["total"] == 5
        retry = asked[derive_seed(0, "judge", v["run"], v["question"], v["round"], v["agent"], 1)]
        assert retry[-2] == {"role": "assistant", "content": v["raw"][0]}
        problem = '"critique_correctness" must be an integer from 0 to 3, not 4.'
        assert retry[-1] == {"role": "user", "content": judge_correction(problem)}
    for v in by_question["plain"]:  # never JSON: a judge failure, not a zero
        assert v["scores"] is None and v["total"] is None and len(v["raw"]) == 2
        assert v["failure"] == "it holds no JSON object."
    assert all(
        v["scores"] == dict(zip(CRITERIA, (0, 1, 0, 1), strict=True)) for v in by_question["fenced"]
    )
    assert len(judge_bodies) == 3 * 2 * (1 + 2 + 2 + 1)

    # Averages by hand: per round, 3 agents on good (2,3,2,2), range (1,2,1,1), fenced
    # (0,1,0,1); plain fails for all 3 agents.
    metrics = json.loads((run_dir / "metrics.json").read_text())
    expected = {
        "critique_conflict_identification": 1.0,
        "critique_critique_correctness": 2.0,
        "critique_critique_specificity": 1.0,
        "critique_engagement_revision": 4 / 3,
        "critique_total": 16 / 3,
        "judge_failure_rate": 25.0,
    }
    for row in (metrics, *metrics["rounds"][1:]):
        for name, value in expected.items():
            assert row[name] == pytest.approx(value)
    assert [r["judged"] for r in metrics["rounds"][1:]] == [9, 9]
    assert [r["judge_failures"] for r in metrics["rounds"][1:]] == [3, 3]
    assert metrics["judge"] | {"setting": None} == {
        "setting": None,
        "verdicts": 24,
        "judged": 18,
        "judge_failures": 6,
        "failed_requests": 0,
        "corrected": 6,
        "requests_sent": 36,
        "cached": 0,
    }
    assert metrics["judge"]["setting"]["judge"] == "openai:judge"
    assert "critique_total" not in metrics["rounds"][0]
    assert "Critique scores by openai:judge" in result.stdout
    assert "5.33" in result.stdout  # the total's mean, shown on the console


@pytest.mark.slow
def test_critique_table_averages_are_the_recorded_scores(debate):
    run_dir, _ = debate
    with StubServer(model="judge", reply=judge_reply) as server:
        assert judge(run_dir, server.base_url).returncode == 0
    frame = pd.read_csv(io.StringIO(api.table([run_dir], "critique", format="csv")))
    scored = [v for v in verdicts_of(run_dir) if v["scores"]]
    for part, chosen in (
        ("all", scored),
        ("round 1", [v for v in scored if v["round"] == 1]),
        ("round 2", [v for v in scored if v["round"] == 2]),
    ):
        rows = frame[frame["part"] == part].set_index("metric")
        assert rows.loc["total", "value"] == pytest.approx(
            sum(v["total"] for v in chosen) / len(chosen)
        )
        for name, header in zip(CRITERIA, HEADERS, strict=True):
            mean = sum(v["scores"][name] for v in chosen) / len(chosen)
            assert rows.loc[header, "value"] == pytest.approx(mean)
            assert rows.loc[header, "ci_low"] <= mean <= rows.loc[header, "ci_high"]
        assert rows.loc["fail %", "value"] == pytest.approx(25.0)
    markdown = api.table([run_dir], "critique")
    assert "| 5.33 |" in markdown and "| 25.0 |" in markdown


@pytest.mark.slow
def test_judging_resumes_and_asks_again_only_what_failed(debate):
    run_dir, _ = debate
    with StubServer(model="judge", reply=judge_reply) as server:
        assert judge(run_dir, server.base_url, "--limit", "1").returncode == 0
        assert len(verdicts_of(run_dir)) == 6  # the first question's 3 agents x 2 rounds
        assert len(server.requests) == 6
    fenced = lambda body: "FENCED:" in body["messages"][1]["content"]  # noqa: E731
    with StubServer(model="judge", reply=judge_reply, fail_if=fenced) as server:
        result = judge(run_dir, server.base_url)
        assert result.returncode == 0, result.stderr
        assert "6 already judged" in result.stdout
        assert len(server.requests) == 3 * 2 * (2 + 2 + 1)  # good was not asked again
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["judge"]["failed_requests"] == 6  # counted apart, never as scores
    assert metrics["judge"]["judged"] == 12 and metrics["judge"]["judge_failures"] == 6
    with StubServer(model="judge", reply=judge_reply) as server:
        assert judge(run_dir, server.base_url).returncode == 0
        assert len(server.requests) == 6  # only the failed requests
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["judge"]["failed_requests"] == 0 and metrics["judge"]["judged"] == 18
    assert metrics["critique_total"] == pytest.approx(16 / 3)


@pytest.mark.slow
def test_reference_shows_the_gold_and_another_setting_is_refused(debate):
    run_dir, _ = debate
    with StubServer(model="judge", reply=judge_reply) as server:
        assert judge(run_dir, server.base_url, "--reference", "--rounds", "2").returncode == 0
        prompts = [body["messages"][1]["content"] for body in server.requests]
        assert all("The correct final answer is: " in p for p in prompts)
        assert {v["round"] for v in verdicts_of(run_dir)} == {2}
        refused = judge(run_dir, server.base_url)
    assert refused.returncode == 2
    assert "holds verdicts of openai:judge (with the gold answer" in refused.stderr
    assert "move the file away" in refused.stderr


def test_a_turn_whose_prompt_cannot_be_rebuilt_is_skipped_and_counted(tmp_path):
    result = mad_eval("run", "--agents", "3", "--rounds", "1", "--limit", "2", "--out", "r",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0
    path = tmp_path / "r" / "turns.jsonl"
    turns = turns_of(tmp_path / "r")
    target = next(t for t in turns if t["round"] == 1)
    target["messages_hash"] = "0" * 64
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))
    result = mad_eval("judge", "r", "--judge", "sim-judge", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "skipped: 1 turn: its prompt, rebuilt, differs from the one recorded" in result.stderr
    assert len(verdicts_of(tmp_path / "r")) == 5


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", [False, True])
def test_prompts_cut_to_fit_are_rebuilt_exactly(tmp_path, tokenizer):
    extra: tuple[str, ...] = ("--max-model-len", "1000")
    if tokenizer:  # it knows few of the prompt's words, so the prompt needs more room
        corpus = ["so then let we check the step value term sum gives thus next case"] * 40
        folder = save_chat_tokenizer(tmp_path / "tok", corpus, vocab_size=300)
        extra = ("--tokenizer", str(folder), "--max-model-len", "1400")
    result = mad_eval(
        "run", "--model", "sim:words=300", "--max-tokens", "400",
        "--agents", "3", "--rounds", "1", "--limit", "2", "--out", "r", *extra, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert any(t["cut_tokens"] > 0 for t in turns_of(tmp_path / "r"))
    result = mad_eval("judge", "r", "--judge", "sim-judge", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "skipped" not in result.stderr
    assert len(verdicts_of(tmp_path / "r")) == 6


@pytest.mark.slow
def test_simulated_judge_is_seeded_and_its_failures_are_counted(tmp_path):
    for out in ("a", "b"):
        args = ("--agents", "3", "--rounds", "2", "--limit", "10", "--out", out)
        assert mad_eval("run", *args, cwd=tmp_path).returncode == 0
        result = mad_eval("judge", out, "--judge", "sim-judge:bad=0.5", cwd=tmp_path)
        assert result.returncode == 0, result.stderr

    def stable(out: str) -> list[dict]:
        return [{k: v for k, v in d.items() if k != "latency"} for d in verdicts_of(tmp_path / out)]

    a = stable("a")
    assert sorted(a, key=str) == sorted(stable("b"), key=str)
    failed = sum(1 for v in a if v["failure"])
    assert 0 < failed < len(a)
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert metrics["judge"]["judge_failures"] == failed
    assert metrics["judge_failure_rate"] == pytest.approx(100 * failed / len(a))
    (tmp_path / "a" / "metrics.json").unlink()
    report = mad_eval("report", "a", cwd=tmp_path)  # metrics.json is rebuilt from the records
    assert "Critique scores by sim-judge:bad=0.5" in report.stdout
    assert json.loads((tmp_path / "a" / "metrics.json").read_text()) == metrics


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rounds", "3"], "--rounds '3' must name debate rounds among 1..1"),
        (["--rounds", "x..2"], "--rounds 'x..2' must name debate rounds"),
        (["--limit", "0"], "--limit must be at least 1, got 0"),
        (["--temperature", "3"], "--temperature must lie in [0, 2], got 3.0"),
        (["--judge", "gpt-4"], "unknown model spec 'gpt-4'"),
        (["--judge", "sim-judge:bad=2"], "sim-judge: bad must lie in [0, 1]"),
    ],
)
def test_bad_judge_options_get_one_clear_sentence(tmp_path, args, message):
    assert mad_eval("run", "--agents", "2", "--rounds", "1", "--limit", "2", "--out", "r",
                    cwd=tmp_path).returncode == 0  # fmt: skip
    result = mad_eval("judge", "r", "--judge", "sim-judge", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_run_without_debate_rounds_or_verdicts_says_so(tmp_path):
    assert mad_eval("single", "-k", "2", "--limit", "2", "--out", "s", cwd=tmp_path).returncode == 0
    result = mad_eval("judge", "s", "--judge", "sim-judge", cwd=tmp_path)
    assert result.returncode == 2
    assert "has no debate rounds (T = 0)" in result.stderr
    assert mad_eval("run", "--agents", "2", "--rounds", "1", "--limit", "2", "--out", "r",
                    cwd=tmp_path).returncode == 0  # fmt: skip
    result = mad_eval("table", "r", "--layout", "critique", cwd=tmp_path)
    assert result.returncode == 2
    assert "r has no judge verdicts; score it first with `mad-eval judge r" in result.stderr


@pytest.mark.slow
def test_the_request_cache_answers_a_second_judging_of_the_same_turns(tmp_path):
    args = ("--agents", "3", "--rounds", "1", "--limit", "5")
    assert mad_eval("run", *args, "--out", "a", cwd=tmp_path).returncode == 0
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    judged = ("--judge", "sim-judge:bad=0.3", "--cache", "cache.db")
    assert mad_eval("judge", "a", *judged, cwd=tmp_path).returncode == 0
    result = mad_eval("judge", "b", *judged, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "0 new ones stored" in result.stdout
    a, b = verdicts_of(tmp_path / "a"), verdicts_of(tmp_path / "b")
    scores = lambda found: sorted((v["question"], v["agent"], v["scores"]) for v in found)  # noqa: E731
    assert scores(a) == scores(b)
    assert all(v["cached"] and v["attempts"] == 0 for v in b)
    judge = json.loads((tmp_path / "b" / "metrics.json").read_text())["judge"]
    assert judge["cached"] == len(b) and judge["requests_sent"] == 0


@pytest.mark.slow
def test_metrics_json_holds_the_intervals_the_critique_table_prints(tmp_path):
    args = ("--agents", "3", "--rounds", "2", "--limit", "8", "--out", "r")
    assert mad_eval("run", *args, cwd=tmp_path).returncode == 0
    assert mad_eval("judge", "r", "--judge", "sim-judge:bad=0.2", cwd=tmp_path).returncode == 0
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    table = api.table([tmp_path / "r"], "critique", format="csv")
    frame = pd.read_csv(io.StringIO(table))
    assert len(frame) == 3 * 6
    for _, row in frame.iterrows():
        section, _, field = row["key"].rpartition(".")
        place = metrics if not section else metrics["rounds"][int(section.removeprefix("round"))]
        assert place[field] == pytest.approx(row["value"])
        assert place[f"{field}_ci"] == pytest.approx([row["ci_low"], row["ci_high"]])
        assert row["ci_low"] <= row["value"] <= row["ci_high"]


@pytest.mark.slow
def test_the_judge_reads_a_reasoning_agents_reasoning_and_final_content(tmp_path):
    """A reasoning model's turn is judged on its reasoning and its final content, as the
    judge's server receives them; the judge's extra body goes into its requests and its
    setting, and judging again with another is refused."""

    def thinking(body: dict) -> str:
        return f"<think>weighing the others, case {body['seed']}</think>\n\n\\boxed{{2}}"

    with StubServer(reply=thinking) as agents:
        result = mad_eval(
            "run", "--model", "openai:stub-model", "--base-url", agents.base_url,
            "--agents", "2", "--rounds", "1", "--limit", "2", "--out", "r", *FAST, cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "r"
    body = '{"chat_template_kwargs": {"enable_thinking": false}}'
    with StubServer(model="judge", reply=judge_reply) as server:
        assert judge(run_dir, server.base_url, "--extra-body", body).returncode == 0
        asked = {b["seed"]: b for b in server.requests}
        refused = judge(run_dir, server.base_url)
    for turn in (t for t in turns_of(run_dir) if t["round"] == 1):
        request = asked[derive_seed(0, "judge", turn["run"], turn["question"], 1, turn["agent"], 0)]
        reply = request["messages"][1]["content"].split("<reply>")[1]
        assert f"<think>\n{turn['reasoning']}\n</think>\n\n{turn['text']}" in reply
        assert request["chat_template_kwargs"] == {"enable_thinking": False}
    assert all(v["setting"]["extra_body"] == json.loads(body) for v in verdicts_of(run_dir))
    assert refused.returncode == 2 and "extra body" in refused.stderr


def test_a_run_that_has_just_begun_is_in_use_not_missing(tmp_path):
    """A run holds its folder's lock before it writes manifest.json: a judge started in that
    moment is told the folder is in use (as once the manifest is there), not that it holds no
    run; a plain folder gets no lock file planted by the check."""
    from mad_eval.store.files import StoreError
    from mad_eval.store.folder import FolderLock

    (tmp_path / "r").mkdir()
    holder = FolderLock(tmp_path / "r")
    holder.acquire()
    try:
        with pytest.raises(StoreError, match=r"r is in use by another mad-eval process \(PID "):
            api.judge(tmp_path / "r", "sim-judge")
    finally:
        holder.release()
    (tmp_path / "plain").mkdir()
    with pytest.raises(StoreError, match="is not a run directory"):
        api.judge(tmp_path / "plain", "sim-judge")
    assert list((tmp_path / "plain").iterdir()) == []


def test_a_judge_that_mostly_fails_raises_an_alert():
    from mad_eval.measure.alerts import judge_alerts
    from mad_eval.records import Verdict

    def verdict(i: int, scores: dict | None, error: str | None = None) -> Verdict:
        failure = None if scores or error else "no JSON object"
        return Verdict(0, f"q{i}", 1, 0, {}, "h", [], scores, None, failure, error)

    good = {"conflict_identification": 1}
    seventeen = [verdict(i, None) for i in range(17)] + [verdict(17, good)]
    (sentence,) = judge_alerts(seventeen)
    assert sentence.startswith("17 of 18 verdicts were judge failures")
    assert "--max-tokens" in sentence
    # The answers' own thresholds: a cause alone behind more than a quarter is said.
    assert judge_alerts([verdict(i, good) for i in range(3)] + [verdict(3, None)]) == []
    mixed = [verdict(i, None) for i in range(3)] + [verdict(3, None, "TimeoutError: no answer")]
    assert [s.split(";")[0] for s in judge_alerts(mixed)] == [
        "3 of 4 verdicts were judge failures: the judge's answers held no scores it could read, "
        "even after one correction (judge.jsonl's failure field says why), so the critique "
        "scores stand on the rest",
        "1 of 4 requests to the judge failed (each error is in judge.jsonl)",
    ]


@pytest.mark.slow
def test_a_judged_run_whose_judge_fails_carries_the_alert(tmp_path, recwarn):
    out = tmp_path / "r"
    api.run(out=out, agents=2, rounds=1, limit=3)
    result = api.judge(out, "sim-judge:bad=1")
    failures = [a for a in result.alerts if "judge failures" in a]
    assert failures and failures[0].startswith("6 of 6 verdicts were judge failures")
    assert any("judge failures" in str(w.message) for w in recwarn)  # a SuspiciousResult
