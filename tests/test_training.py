"""The SDRL data pipeline: pairing rules on hand-built rollouts, the pair prompt's identity
with the evaluation's builder, verl's schema read back, and the rewards on real gold
solutions."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest
from cli_helpers import mad_eval, turns_of

from mad_eval.context import EstimateCounter, Fitter
from mad_eval.engine import agent_prompt
from mad_eval.grading import equivalent
from mad_eval.prompts import pair_prompt, question_prompt
from mad_eval.records import Question, Turn
from mad_eval.training import Rollout, build_pairs, compute_score, grpo_reward


def rollouts(prompt: str, gold: str, answers: list[str | None]) -> list[Rollout]:
    return [
        Rollout(
            prompt_id=prompt,
            question=f"question {prompt}",
            gold=gold,
            response=f"reply {i}: " + (f"\\boxed{{{a}}}" if a is not None else "no idea"),
            answer=a,
            correct=a is not None and equivalent(a, gold),
            source=f"{prompt}/{i}",
        )
        for i, a in enumerate(answers)
    ]


def answers(pair) -> list[str | None]:
    return [pair.first.answer, pair.second.answer]


def test_frequency_pairs_the_two_most_common_answers():
    found, summary = build_pairs(rollouts("p", "3", ["5", "5", "3", None, "5", "7", "3"]), "freq")
    assert len(found) == 1 and sorted(answers(found[0])) == ["3", "5"]
    assert summary.kept == 1 and summary.pairs == 1 and summary.unparsed == 1
    assert summary.distinct == [3]
    # Every (5, 3) combination is a candidate: asking for more gives distinct pairs.
    many, _ = build_pairs(rollouts("p", "3", ["5", "5", "3", None, "5", "7", "3"]), "freq", 10)
    assert len(many) == 3 * 2
    assert len({frozenset((p.first.source, p.second.source)) for p in many}) == 6
    assert all(sorted(answers(p)) == ["3", "5"] for p in many)


def test_equivalent_answers_count_as_one():
    items = rollouts("p", "1/2", ["0.5", "\\frac{1}{2}", "1/2", "2", "2", "3"])
    found, _ = build_pairs(items, "freq")
    first, second = answers(found[0])
    assert {equivalent(first, "1/2"), equivalent(second, "1/2")} == {True, False}
    assert "2" in (first, second)


def test_a_tie_for_second_place_is_broken_by_the_seed():
    items = rollouts("p", "8", ["4", "4", "4", "6", "6", "8", "8", "9"])
    seconds = Counter()
    for seed in range(60):
        (pair,), _ = build_pairs(items, "freq", seed=seed)
        got = answers(pair)
        assert "4" in got
        seconds[next(a for a in got if a != "4")] += 1
    assert set(seconds) == {"6", "8"} and min(seconds.values()) >= 10  # never "9"


def test_prompts_that_teach_nothing_are_dropped_and_counted():
    items = (
        rollouts("all-right", "2", ["2", "2", "2"])
        + rollouts("all-wrong", "2", ["5", None, "7"])
        + rollouts("one-answer", "2", ["2", None, None])  # right and wrong, one answer
        + rollouts("mixed", "2", ["2", "3"])
    )
    found, s = build_pairs(items, "freq")
    assert [p.first.prompt_id for p in found] == ["mixed"]
    assert (s.prompts, s.all_correct, s.all_wrong, s.one_answer, s.kept) == (4, 1, 1, 1, 1)
    # The random rule pairs any two rollouts, so the one-answer prompt gives a pair there.
    found, s = build_pairs(items, "rand")
    assert sorted(p.first.prompt_id for p in found) == ["mixed", "one-answer"]
    assert s.one_answer == 0


def test_random_pairs_are_distinct_rollouts_and_the_order_carries_no_signal():
    items = [r for i in range(300) for r in rollouts(f"q{i}", "1", ["1", "2", "3", "4"])]
    found, summary = build_pairs(items, "rand", per_prompt=2, seed=7)
    assert summary.pairs == 600
    assert all(p.first.source != p.second.source for p in found)
    right_first = sum(p.first.correct for p in found if p.first.correct != p.second.correct)
    mixed = sum(1 for p in found if p.first.correct != p.second.correct)
    assert 0.4 < right_first / mixed < 0.6  # the right one is first about half the time
    again, _ = build_pairs(items, "rand", per_prompt=2, seed=7)
    assert [(p.first.source, p.second.source) for p in again] == [
        (p.first.source, p.second.source) for p in found
    ]
    # A prompt's pairs do not depend on the other prompts read with it.
    alone, _ = build_pairs(rollouts("q5", "1", ["1", "2", "3", "4"]), "rand", 2, seed=7)
    assert [(p.first.source, p.second.source) for p in alone] == [
        (p.first.source, p.second.source) for p in found if p.first.prompt_id == "q5"
    ]


def test_the_pair_prompt_is_the_evaluation_debate_prompt():
    question = Question("q", "What is 6 x 7?", "42")
    previous = {
        j: Turn(0, "q", 0, j, "sim", 0, 1.0, 1.0, 64, "", [], text, None, None, None, None, None, 0)
        for j, text in enumerate(["I get \\boxed{42}", "Surely \\boxed{48}"])
    }
    fitter = Fitter(EstimateCounter())
    built = agent_prompt(question, previous, [0, 1], 2, None, "debate", fitter, None)
    assert pair_prompt(question.text, previous[0].text, previous[1].text) == built.messages


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_pairs_from_a_single_run_hold_its_two_most_frequent_answers(tmp_path, shared_data, fmt):
    assert mad_eval(
        "single", "-k", "8", "--benchmark", "math500", "--data-dir", str(shared_data),
        "--limit", "40", "--out", "s", cwd=tmp_path,
    ).returncode == 0  # fmt: skip
    result = mad_eval(
        "train", "pairs", "s", "--pairing", "freq", "--out", f"pairs.{fmt}",
        "--data-dir", str(shared_data), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    path = tmp_path / f"pairs.{fmt}"
    frame = pd.read_parquet(path) if fmt == "parquet" else pd.read_json(path, lines=True)
    assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    questions = {json.loads(line)["id"]: json.loads(line) for line in
                 (shared_data / "math500.jsonl").read_text().splitlines()[:40]}  # fmt: skip
    turns = turns_of(tmp_path / "s")
    firsts = []
    for _, row in frame.iterrows():
        info, qid = row["extra_info"], row["extra_info"]["question_id"]
        assert row["data_source"] == "math500" and row["ability"] == "math"
        assert dict(row["reward_model"]) == {
            "style": "rule",
            "ground_truth": questions[qid]["answer"],
        }
        mine = [t for t in turns if t["question"] == qid]
        assert any(t["correct"] for t in mine) and not all(t["correct"] for t in mine)
        sizes = sorted(Counter(t["answer"] for t in mine if t["answer"]).values(), reverse=True)
        counts = [sum(1 for t in mine if t["answer"] == a) for a in info["answers"]]
        assert sorted(counts, reverse=True) == sizes[:2]  # the two most frequent classes
        texts = [t["text"] for t in mine]
        messages = [dict(m) for m in row["prompt"]]
        first, second = (texts[int(s.rsplit("agent", 1)[1])] for s in info["sources"])
        assert messages == pair_prompt(questions[qid]["problem"], first, second)
        firsts.append(counts[0] > counts[1])
    assert len(frame) >= 20 and 0 < sum(firsts) < len(firsts)  # both orders occur
    assert f"Kept {len(frame)} prompts: {len(frame)} frequency pairs" in result.stdout


def test_generic_rollout_files_are_graded_here(tmp_path):
    rows = [
        {"prompt_id": "a", "question": "1+1?", "gold": "2", "response": "so \\boxed{2}"},
        {"prompt_id": "a", "question": "1+1?", "gold": "2", "response": "it is \\boxed{3}"},
        {"id": "b", "problem": "2+2?", "answer": "4", "completion": "\\boxed{4}"},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = mad_eval("train", "pairs", "r.jsonl", "--out", "p.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    again = mad_eval("train", "pairs", "r.jsonl", "--pairing", "frequency", "--out", "q.jsonl",
                     cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "q.jsonl").read_text() == (tmp_path / "p.jsonl").read_text()
    (row,) = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert sorted(row["extra_info"]["answers"]) == ["2", "3"]
    assert row["data_source"] == "r"
    assert "Dropped 1 prompts all correct and 0 all wrong" in result.stdout


@pytest.mark.parametrize(
    ("rows", "args", "message"),
    [
        ('{"prompt_id": "a", "question": "q"}\n', [], "line 1 has no gold"),
        ("not json\n", [], "r.jsonl line 1: invalid JSON"),
        ("", [], "holds no rollouts"),
        (None, [], "missing.jsonl is neither a run folder nor a JSON Lines file"),
        (
            '{"id": "a", "question": "q", "gold": "1", "response": "\\\\boxed{1}"}\n',
            ["--pairing", "best"],
            "--pairing must be one of rand, freq",
        ),
        (
            '{"id": "a", "question": "q", "gold": "1", "response": "x"}\n'
            '{"id": "a", "question": "q", "gold": "1", "response": "\\\\boxed{1}"}\n',
            ["--out", "p.csv"],
            "--out must end in .parquet or .jsonl",
        ),
        (
            '{"id": "a", "question": "q", "gold": "1", "response": "\\\\boxed{1}"}\n',
            [],
            "no rows to write: nothing was kept",
        ),
    ],
)
def test_bad_rollouts_and_options_get_one_sentence(tmp_path, rows, args, message):
    source = "missing.jsonl"
    if rows is not None:
        (tmp_path / "r.jsonl").write_text(rows)
        source = "r.jsonl"
    result = mad_eval("train", "pairs", source, "--out", "p.jsonl", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_first_turn_prompts_are_the_round_zero_prompts(tmp_path, shared_data):
    result = mad_eval("train", "prompts", "aime24", "--out", "p.parquet",
                      "--data-dir", str(shared_data), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    frame = pd.read_parquet(tmp_path / "p.parquet")
    rows = [json.loads(line) for line in (shared_data / "aime24.jsonl").read_text().splitlines()]
    assert len(frame) == len(rows) == 30
    for (_, row), source in zip(frame.iterrows(), rows, strict=True):
        assert [dict(m) for m in row["prompt"]] == question_prompt(source["problem"])
        assert row["reward_model"]["ground_truth"] == str(source["answer"])


def test_rewards_score_gold_solutions_plus_one_and_wrong_ones_minus_one(shared_data):
    rows = [json.loads(line) for line in (shared_data / "math500.jsonl").read_text().splitlines()]
    boxed = [r for r in rows[:60] if "\\boxed" in r["solution"]]
    assert len(boxed) >= 50
    for r in boxed:
        assert compute_score("math500", r["solution"], r["answer"]) == 1.0
        head, box, tail = r["solution"].rpartition("\\boxed{")  # the last box is the answer
        wrong = head + box + "123456789+" + tail
        assert compute_score("math500", wrong, r["answer"]) == -1.0
    assert compute_score("math500", "I am not sure.", "4") == -1.0
    texts = [boxed[0]["solution"], "\\boxed{x}"]
    golds = [boxed[0]["answer"], "5"]
    assert grpo_reward(texts, ground_truth=golds) == [1.0, -1.0]
    chats = [[{"role": "assistant", "content": t}] for t in texts]
    assert grpo_reward(chats, ground_truth=golds, prompts=["a", "b"]) == [1.0, -1.0]


def test_training_imports_neither_verl_nor_trl():
    import subprocess
    import sys

    code = (
        "import sys, mad_eval.training, mad_eval.train_cli; "
        "print(any(m.split('.')[0] in ('verl', 'trl') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_help_names_the_train_commands(tmp_path):
    result = mad_eval("train", "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "pairs" in result.stdout and "prompts" in result.stdout
