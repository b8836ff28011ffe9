"""A real instruct model end to end: SmolLM2-135M-Instruct (tests/real_model.py) on vLLM's CPU
build, its real text (chat template, stop tokens, finish reasons, usage, long and rambling
replies) through run (three protocols), single, judge, report, table and view against a server
started as a user starts one (`openai:`), and through `serve:` in an experiment of two labels,
killed with -9 and resumed. The model scores little, but on `arith:terms=2,digits=1` some of
it, so every number the tests recompute from the records has something to count.

Run apart, in the vLLM venv with the wheel installed (.ci/run):
`pytest -m vllm tests/test_real_model.py`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import turns_of
from kind_files import write_all
from real_model import smollm2
from serving_helpers import serving
from vllm_server import openai_server, vllm_environment

import mad_eval
from mad_eval.debate.replay import Replay
from mad_eval.store.folder import RunStore

pytestmark = pytest.mark.vllm

NAME = "smol"
BENCHMARK = "arith:terms=2,digits=1,ops=add.sub"
PROTOCOL = "math-verify"  # its prose answers ("so the answer is 13"); boxed reads few
MAX_TOKENS = 128
MODEL_LEN = 2048
# What serve: adds on the CPU build, and no compilation at start-up (minutes on a loaded CI).
SERVER_ARGS = ("--dtype", "float32", "--no-enable-chunked-prefill", "--enforce-eager")


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    try:
        return smollm2()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def vllm_env(tmp_path_factory) -> dict[str, str]:
    return vllm_environment(tmp_path_factory.mktemp("vllm-cache"))


@pytest.fixture(scope="module")
def server(checkpoint, vllm_env, tmp_path_factory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("server") / "vllm.log"
    args = ("--max-model-len", str(MODEL_LEN), *SERVER_ARGS)
    with openai_server(checkpoint, [NAME], log, vllm_env, *args) as url:
        yield url


def settings(url: str, checkpoint: Path, **more) -> dict:
    """A run against the server: exact prompt counts from the checkpoint's tokenizer."""
    return {
        "model": f"openai:{NAME}", "base_url": [url], "tokenizer": str(checkpoint),
        "benchmark": BENCHMARK, "answer_protocol": PROTOCOL, "max_tokens": MAX_TOKENS,
        **more,
    }  # fmt: skip


def key(turn: dict) -> tuple:
    return (turn["run"], turn["question"], turn["round"], turn["agent"])


def check_turns(turns: list[dict], count: int, max_tokens: int = MAX_TOKENS) -> None:
    """Every turn answered by the model, with its usage and why it stopped."""
    assert len(turns) == count and len({key(t) for t in turns}) == count
    for t in turns:
        assert t["error"] is None, t["error"]
        assert isinstance(t["text"], str) and t["text"].strip()
        assert t["served_model"] == NAME
        assert t["finish_reason"] in ("stop", "length")
        assert 1 <= t["completion_tokens"] <= max_tokens
        if t["finish_reason"] == "length":
            assert t["completion_tokens"] == max_tokens
        assert t["prompt_tokens"] == t["context_tokens"]  # our count is the server's
        assert t["context_tokens"] + max_tokens <= MODEL_LEN


def percent(flags: list[bool]) -> float:
    return 100 * sum(flags) / len(flags)


def check_numbers(run: mad_eval.Run, turns: list[dict]) -> None:
    """The run's per-round accuracy, transitions, counts and alerts, recomputed from its turns."""
    metrics, rounds = run.metrics, max(t["round"] for t in turns)
    by_round = {r: [t for t in turns if t["round"] == r] for r in range(rounds + 1)}
    for row in metrics["rounds"]:
        expected = percent([bool(t["correct"]) for t in by_round[row["round"]]])
        assert row["agent_accuracy"] == pytest.approx(expected)
    right = {(t["question"], t["agent"], t["round"]): bool(t["correct"]) for t in turns}
    for row in metrics["transitions"]:
        pairs = [(right[q, a, row["from_round"]], right[q, a, row["to_round"]])
                 for q, a, r in right if r == row["from_round"]]  # fmt: skip
        assert row["c2i"] == pytest.approx(percent([b and not a for b, a in pairs]))
        assert row["i2c"] == pytest.approx(percent([a and not b for b, a in pairs]))
    assert metrics["delta"] == pytest.approx(metrics["debate"] - metrics["maj"])
    assert metrics["failed_turns"] == 0
    assert metrics["length_stops"] == sum(t["finish_reason"] == "length" for t in turns)
    assert metrics["unparsed"] == sum(t["answer"] is None for t in turns)
    final = by_round[rounds]
    cut = sum(t["answer"] is None and t["finish_reason"] == "length" for t in final)
    unread = sum(t["answer"] is None and t["finish_reason"] == "stop" for t in final)
    for alert in run.alerts:  # what each alert counts is what the records hold
        found = re.match(r"(\d+) of (\d+) final answers were (cut off|unparsed)", alert)
        if found:
            assert int(found[2]) == len(final)
            assert int(found[1]) == (cut if found[3] == "cut off" else unread), alert


def test_a_decentralized_debate_of_real_replies_is_recorded_counted_and_shown(
    tmp_path, server, checkpoint
):
    out = tmp_path / "dec"
    run = mad_eval.run(**settings(server, checkpoint), agents=3, rounds=2, limit=10, out=out)
    turns = turns_of(out)
    check_turns(turns, 10 * 3 * 3)
    check_numbers(run, turns)
    assert any(t["correct"] for t in turns) and not all(t["correct"] for t in turns)
    assert any("\n" in t["text"] for t in turns)  # real, multi-line replies

    again = mad_eval.report(out)  # from the records alone: the same numbers
    assert (again.maj, again.debate, again.delta) == (run.maj, run.debate, run.delta)
    csv = mad_eval.table([out], format="csv")
    assert f"{run.maj:.1f}" in csv and f"{run.debate:.1f}" in csv
    site = mad_eval.view([out], out=tmp_path / "site")
    page = "".join(p.read_text() for p in site.parent.rglob("*") if p.suffix in (".html", ".js"))
    assert out.name in page


@pytest.mark.parametrize("protocol", ["sparse", "centralized"])
def test_sparse_and_centralized_debates_of_real_replies(tmp_path, server, checkpoint, protocol):
    out = tmp_path / protocol
    run = mad_eval.run(**settings(server, checkpoint), protocol=protocol, agents=3, rounds=1,
                       limit=4, out=out)  # fmt: skip
    turns = turns_of(out)
    check_turns(turns, 4 * 3 * 2)
    check_numbers(run, turns)
    assert json.loads((out / "manifest.json").read_text())["protocol"]["name"] == protocol


# A framework's shape is what these tests check, not the model's answers: short replies keep
# the lane's requests few seconds each.
SHORT = 32
FRAMEWORKS = {  # one debate each: protocol -> (agents, rounds)
    "judged": (3, 1),
    "chateval": (3, 1),
    "chateval:order=summarizer": (3, 1),
    "group": (4, 1),
    "relay": (3, 1),
    "memory": (3, 1),
    "report": (3, 1),
    "ensemble_refinement": (3, 1),
    "spp": (1, 0),
}


@pytest.mark.parametrize("protocol", list(FRAMEWORKS))
def test_each_framework_runs_one_debate_of_real_replies(tmp_path, server, checkpoint, protocol):
    """Every turn up to the last round (or the one the protocol ended the debate after) is
    answered, every prompt is rebuilt from the records to its hash (roles, speaking order and
    statements asked included), and the report from the records alone gives the same numbers."""
    agents, rounds = FRAMEWORKS[protocol]
    out = tmp_path / "r"
    run = mad_eval.run(**settings(server, checkpoint, max_tokens=SHORT), protocol=protocol,
                       agents=agents, rounds=rounds, limit=1, out=out)  # fmt: skip
    final = check_framework(run, out, agents, rounds)
    if protocol == "judged":  # the judge's answer is the debate's
        assert run.debate == 100.0 * bool(final[-1].correct)


def test_medprompt_shuffles_the_options_of_real_replies(tmp_path, server, checkpoint):
    """Each agent reads a choice question's options in its own order; its letter, mapped back,
    is graded and voted, and its prompt is rebuilt in that order."""
    data = write_all(tmp_path / "data")
    given = settings(server, checkpoint, max_tokens=SHORT)
    given |= {"benchmark": "commonsense_qa", "data_dir": str(data)}
    given.pop("answer_protocol")  # the choice kind's own
    out = tmp_path / "r"
    run = mad_eval.run(**given, protocol="medprompt", agents=3, rounds=0, limit=2, out=out)
    check_framework(run, out, 3, 0, questions=2)
    assert all(t["option_order"] is not None for t in turns_of(out))


def check_framework(
    run: mad_eval.Run, out: Path, agents: int, rounds: int, questions: int = 1
) -> list:
    """A framework's records of real replies: every turn of each debate up to its last round
    or the round its protocol ended it after, every prompt rebuilt from the records to its
    hash, and the same numbers from the records alone; its last round's turns."""
    store = RunStore(out)
    stops = store.stops()
    by_question: dict = {}
    for t in store.turns():
        by_question.setdefault(t.question, {}).setdefault(t.round, {})[t.agent] = t
    assert len(by_question) == questions
    expected = 0
    for question, debate in by_question.items():
        stop = stops.get((0, question))
        last = stop.round if stop else rounds
        assert sorted(debate) == list(range(last + 1))
        expected += agents * (last + 1)
    check_turns(turns_of(out), expected, SHORT)
    replay = Replay(store.manifest(), store.questions())
    for t in store.turns():
        replay.messages(t, by_question[t.question])  # raises where the rebuilt prompt differs
    again = mad_eval.report(out)
    assert (again.maj, again.debate) == (run.maj, run.debate)
    final = max(by_question[next(iter(by_question))].items())[1]
    return [final[a] for a in sorted(final)]


def test_a_judged_debate_killed_with_9_resumes_to_whole_records(tmp_path, server, checkpoint):
    """kill -9 mid-run, the same command again: each debate's turns once each, up to its last
    round or the round its judge ended it after, what was recorded before the kill kept."""
    given = settings(server, checkpoint, max_tokens=SHORT)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in given.items()
             if k != "base_url"] + [f"--base-url={server}"]  # fmt: skip
    command = [sys.executable, "-m", "mad_eval", "run", *flags, "--protocol", "judged",
               "--agents", "3", "--rounds", "2", "--limit", "4", "--out", "r"]  # fmt: skip
    env = {**os.environ, "COLUMNS": "1000"}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        turns_file = tmp_path / "r" / "turns.jsonl"
        while not turns_file.exists() or turns_file.read_text().count("\n") < 5:
            assert process.poll() is None, "the run ended before it was killed"
            assert time.monotonic() < deadline, "no 5 turns in 10 minutes"
            time.sleep(0.2)
    finally:
        process.kill()
        process.wait(timeout=60)
    before = {key(t): t["text"] for t in turns_of(tmp_path / "r")}
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=1200)  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    turns = turns_of(tmp_path / "r")
    counts = Counter(key(t) for t in turns)
    assert set(counts.values()) == {1}
    stops = RunStore(tmp_path / "r").stops()
    questions = {t["question"] for t in turns}
    assert len(questions) == 4
    for question in questions:
        stop = stops.get((0, question))
        rounds = {t["round"] for t in turns if t["question"] == question}
        assert rounds == set(range((stop.round if stop else 2) + 1)), question
    for t in turns:
        assert before.get(key(t), t["text"]) == t["text"]


def test_single_samples_and_a_judge_of_the_same_model(tmp_path, server, checkpoint):
    single = mad_eval.single(**settings(server, checkpoint), samples=4, limit=5, out=tmp_path / "k")
    turns = turns_of(tmp_path / "k")
    check_turns(turns, 5 * 4)
    correct = [bool(t["correct"]) for t in turns]
    assert single.metrics["mean_at_k"] == pytest.approx(percent(correct))

    debate = tmp_path / "d"
    mad_eval.run(**settings(server, checkpoint), agents=2, rounds=1, limit=3, out=debate)
    judged = mad_eval.judge(debate, f"openai:{NAME}", base_url=[server], max_tokens=MAX_TOKENS)
    verdicts = [json.loads(line) for line in (debate / "judge.jsonl").open()]
    assert len(verdicts) == 3 * 2  # each critique (round 1) judged once
    for v in verdicts:  # scored, or why its answers could not be used: never silently lost
        assert v["error"] is None and v["raw"] and (v["scores"] is None) == (v["total"] is None)
        assert (v["scores"] is None) == (v["failure"] is not None)
    assert len(judged.verdicts) == len(verdicts)


def test_the_same_seed_gives_the_same_replies(tmp_path, server, checkpoint):
    """vLLM's CPU build samples seeded requests reproducibly (without chunked prefill)."""
    for out in ("a", "b"):
        mad_eval.run(**settings(server, checkpoint), agents=2, rounds=1, limit=2,
                     temperature=1.0, seed=5, out=tmp_path / out)  # fmt: skip
    first, second = turns_of(tmp_path / "a"), turns_of(tmp_path / "b")
    assert {key(t): t["text"] for t in first} == {key(t): t["text"] for t in second}
    assert len({t["text"] for t in first}) > 1  # sampled, not one reply copied


EXPERIMENT = """\
[experiment]
out = "out"

[settings]
answer_protocol = "{protocol}"
limit = 3
runs = 1
rounds = 1
max_tokens = 64
max_model_len = {length}

[models]
A = {{ model = "serve:{a}", args = "--enforce-eager" }}
B = {{ model = "serve:{b}", args = "--enforce-eager" }}

[grids.main]
benchmarks = ["{benchmark}"]
agents = [2]
"""


def test_an_experiment_serving_the_model_twice_resumes_after_kill_9(tmp_path, checkpoint, vllm_env):
    """The same checkpoint under two labels (two links to its folder: two `serve:` models), on
    one CPU slot; kill -9 of the experiment mid-way leaves no server, and the same command then
    finishes every cell with no turn lost or asked twice. (The links also tell its servers
    from the module's own, which names the folder itself.)"""
    (tmp_path / "ckpts").mkdir()
    links = [tmp_path / "ckpts" / name for name in ("a", "b")]
    for link in links:
        link.symlink_to(checkpoint, target_is_directory=True)
    given = {"benchmark": BENCHMARK, "protocol": PROTOCOL, "length": MODEL_LEN}
    (tmp_path / "exp.toml").write_text(EXPERIMENT.format(**given, a=links[0], b=links[1]))
    env = {**os.environ, **vllm_env, "COLUMNS": "1000", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mad_eval", "experiment", "run", "exp.toml"]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 900
        while not any(len(turns_of(d)) >= 2 for d in _cells(tmp_path)):
            assert process.poll() is None, "the experiment ended before it was killed"
            assert time.monotonic() < deadline, "no cell had 2 turns in 15 minutes"
            time.sleep(1)
        assert serving(tmp_path / "ckpts"), "no server found mid-way"  # the check sees them
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    before = {(d, *key(t)): t["text"] for d in _cells(tmp_path) for t in turns_of(d)}
    deadline = time.monotonic() + 120
    while serving(tmp_path / "ckpts"):
        assert time.monotonic() < deadline, "a server outlived the experiment"
        time.sleep(0.5)

    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=1800)  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    cells = _cells(tmp_path)
    assert len(cells) == 2
    for cell in cells:
        turns = turns_of(cell)
        counts = Counter(key(t) for t in turns)
        assert len(counts) == 3 * 2 * 2 and set(counts.values()) == {1}, cell
        assert all(t["error"] is None and t["finish_reason"] in ("stop", "length") for t in turns)
        for t in turns:  # what was recorded before the kill is kept as it was
            assert before.get((cell, *key(t)), t["text"]) == t["text"]
    assert not serving(tmp_path / "ckpts")


def _cells(root: Path) -> list[Path]:
    """The experiment's run folders (each holding a manifest.json)."""
    return sorted(p.parent for p in (root / "out").rglob("manifest.json"))
