"""The SDRL data pipeline: the on-policy pairing function and the offline pairs built with
it, pair prompts from templates and their identity with the evaluation's builder, verl's
schema read back, and the rewards on real gold solutions and on rows read back by pandas."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from cli_helpers import mad_eval, turns_of

import mad_eval as api
from mad_eval.debate.context import EstimateCounter, Fitter
from mad_eval.debate.prompts import Speaker, build_prompt, first_prompt, pair_prompt
from mad_eval.errors import UserError
from mad_eval.grading.grader import equivalent, same_answer
from mad_eval.records import Question, Turn, derive_seed
from mad_eval.settings.templates import load_template
from mad_eval.training import (
    Rollout,
    build_pairs,
    compute_score,
    debate_pairs,
    grpo_reward,
    pair_rows,
    prompt_rows,
    read_rollouts,
    write_rows,
)

DEBATE = load_template("debate")
CONVERSATION = load_template("conversation")


def rollouts(
    prompt: str, gold: str, answers: list[str | None], pad: list[int] | None = None
) -> list[Rollout]:
    """Rollouts of one prompt; `pad` lengthens each response by that many characters."""
    return [
        Rollout(
            prompt_id=prompt,
            question=f"question {prompt}",
            gold=gold,
            response=f"reply {i}: "
            + "x" * (pad[i] if pad else 0)
            + (f"\\boxed{{{a}}}" if a is not None else "no idea"),
            answer=a,
            correct=a is not None and equivalent(a, gold),
            source=f"{prompt}/{i}",
        )
        for i, a in enumerate(answers)
    ]


def turn(agent: int, text: str) -> Turn:
    return Turn(
        0, "q", 0, agent, "sim", 0, 1.0, 1.0, 64, "", [], text, None, None, None, None, None, 0
    )


def answers(pair) -> list[str | None]:
    return [pair.first.answer, pair.second.answer]


def test_frequency_pairs_the_two_most_common_answers():
    found, summary = build_pairs(
        rollouts("p", "3", ["5", "5", "3", None, "5", "7", "3"]), "freq", kind="math"
    )
    assert len(found) == 1 and sorted(answers(found[0])) == ["3", "5"]
    assert summary.kept == 1 and summary.pairs == 1 and summary.unparsed == 1
    assert summary.distinct == [3]
    # Every (5, 3) combination is a candidate: asking for more gives distinct pairs.
    many, _ = build_pairs(
        rollouts("p", "3", ["5", "5", "3", None, "5", "7", "3"]), "freq", 10, kind="math"
    )
    assert len(many) == 3 * 2
    assert len({frozenset((p.first.source, p.second.source)) for p in many}) == 6
    assert all(sorted(answers(p)) == ["3", "5"] for p in many)


def test_equivalent_answers_count_as_one():
    items = rollouts("p", "1/2", ["0.5", "\\frac{1}{2}", "1/2", "2", "2", "3"])
    found, _ = build_pairs(items, "freq", kind="math")
    first, second = answers(found[0])
    assert {equivalent(first, "1/2"), equivalent(second, "1/2")} == {True, False}
    assert "2" in (first, second)


def test_a_tie_for_second_place_is_broken_by_the_seed():
    items = rollouts("p", "8", ["4", "4", "4", "6", "6", "8", "8", "9"])
    seconds = Counter()
    for seed in range(60):
        (pair,), _ = build_pairs(items, "freq", seed=seed, kind="math")
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
    found, s = build_pairs(items, "freq", kind="math")
    assert [p.first.prompt_id for p in found] == ["mixed"]
    assert (s.prompts, s.all_correct, s.all_wrong, s.one_answer, s.kept) == (4, 1, 1, 1, 1)
    # The random rule pairs any two rollouts, so the one-answer prompt gives a pair there.
    found, s = build_pairs(items, "rand", kind="math")
    assert sorted(p.first.prompt_id for p in found) == ["mixed", "one-answer"]
    assert s.one_answer == 0


def test_random_pairs_are_distinct_rollouts_and_the_order_carries_no_signal():
    items = [r for i in range(300) for r in rollouts(f"q{i}", "1", ["1", "2", "3", "4"])]
    found, summary = build_pairs(items, "rand", per_prompt=2, seed=7, kind="math")
    assert summary.pairs == 600
    assert all(p.first.source != p.second.source for p in found)
    right_first = sum(p.first.correct for p in found if p.first.correct != p.second.correct)
    mixed = sum(1 for p in found if p.first.correct != p.second.correct)
    assert 0.4 < right_first / mixed < 0.6  # the right one is first about half the time
    again, _ = build_pairs(items, "rand", per_prompt=2, seed=7, kind="math")
    assert [(p.first.source, p.second.source) for p in again] == [
        (p.first.source, p.second.source) for p in found
    ]
    # A prompt's pairs do not depend on the other prompts read with it.
    alone, _ = build_pairs(
        rollouts("q5", "1", ["1", "2", "3", "4"]), "rand", 2, seed=7, kind="math"
    )
    assert [(p.first.source, p.second.source) for p in alone] == [
        (p.first.source, p.second.source) for p in found if p.first.prompt_id == "q5"
    ]


# ---- the on-policy pairing function -------------------------------------------------------


def test_debate_pairs_follows_the_two_rules_on_plain_sequences():
    answers = ["5", "5", "3", None, "5", "7", "3"]
    rewards = [-1.0, -1.0, 1.0, -1.0, -1.0, -1.0, 1.0]
    many = debate_pairs(answers, [r > 0 for r in rewards], rule="freq", per_prompt=10, seed=3)
    assert len(many) == 3 * 2 and len({frozenset(p) for p in many}) == 6
    assert all(sorted(answers[i] for i in p) == ["3", "5"] for p in many)
    # Correctness as bools or 1/0 pairs alike (a ±1 reward is refused: see below).
    right = [r > 0 for r in rewards]
    assert debate_pairs(answers, right, per_prompt=10, seed=3) == many
    assert debate_pairs(answers, [int(r) for r in right], per_prompt=10, seed=3) == many
    # rand: two distinct rollouts, any two (here two wrong ones may meet).
    drawn = debate_pairs(answers, right, rule="random", per_prompt=21, seed=3)
    assert len({frozenset(p) for p in drawn}) == 21 and all(a != b for a, b in drawn)
    # Math answers are grouped by equivalence: 0.5 and 1/2 are one answer.
    halves = ["0.5", "\\frac{1}{2}", "2", "2", "2", "3"]
    (pair,) = debate_pairs(halves, [1, 1, 0, 0, 0, 0], same=same_answer("math"))
    assert sorted(halves[i] in ("0.5", "\\frac{1}{2}") for i in pair) == [False, True]
    assert "2" in (halves[pair[0]], halves[pair[1]])


def test_debate_pairs_drops_a_prompt_whose_rollouts_are_all_right_or_all_wrong():
    for correct, why in (([True] * 3, "all-right"), ([False] * 3, "all-wrong")):
        for rule in ("rand", "freq"):
            got = debate_pairs(["2", "3", "4"], correct, rule=rule, per_prompt=5)
            assert got == [] and got.dropped == why
    # freq needs two distinct answers; rand does not.
    one = debate_pairs(["2", None, None], [True, False, False], rule="freq")
    assert one == [] and one.dropped == "one-answer"
    assert len(debate_pairs(["2", None, None], [True, False, False], rule="rand")) == 1


def test_rollouts_over_the_length_limit_are_not_used():
    # The long rollouts carry the most common answer: without them "3" leads, then "4".
    answers = ["5", "5", "5", "3", "3", "4"]
    rewards = [False, False, False, True, True, False]
    lengths = [900, 950, 990, 20, 30, 40]
    free = debate_pairs(answers, rewards, per_prompt=10, seed=0)
    assert {answers[i] for p in free for i in p} == {"3", "5"}
    kept = debate_pairs(answers, rewards, per_prompt=10, lengths=lengths, max_length=100)
    assert len(kept) == 2 and all({answers[i] for i in p} == {"3", "4"} for p in kept)
    assert not {0, 1} & {i for p in kept for i in p}
    # Left with one reward, or nothing at all, the prompt gives no pair.
    assert debate_pairs(answers, rewards, lengths=[5, 5, 5, 500, 500, 5], max_length=100) == []
    assert debate_pairs(answers, rewards, lengths=[500] * 6, max_length=100) == []
    with pytest.raises(ValueError, match="needs the rollouts' lengths"):
        debate_pairs(answers, rewards, max_length=100)
    with pytest.raises(ValueError, match="one item per rollout"):
        debate_pairs(answers, rewards, lengths=[1, 2], max_length=100)


def test_each_pair_is_repeated_in_a_row():
    answers, rewards = ["1", "2", "3", "4", "1"], [1, 0, 0, 0, 1]
    once = debate_pairs(answers, rewards, rule="rand", per_prompt=4, seed=11)
    thrice = debate_pairs(answers, rewards, rule="rand", per_prompt=4, copies=3, seed=11)
    assert len(once) == 4 and thrice == [p for p in once for _ in range(3)]
    with pytest.raises(ValueError, match="--copies must be at least 1"):
        debate_pairs(answers, rewards, copies=0)


def test_own_and_partner_are_in_seeded_random_order():
    answers, rewards = ["1", "2", "2", "3"], [True, False, False, False]

    def steps(rng: random.Random) -> list[list[tuple[int, int]]]:
        """A trainer's steps over one prompt, its generator carried across them."""
        return [
            debate_pairs(answers, rewards, rule="rand", per_prompt=3, seed=rng) for _ in range(400)
        ]

    drawn = steps(random.Random(5))
    mixed = [p for step in drawn for p in step if 0 in p]
    own_right = sum(p[0] == 0 for p in mixed) / len(mixed)
    assert len(mixed) > 300 and 0.4 < own_right < 0.6  # the right one is own about half the time
    assert steps(random.Random(5)) == drawn and steps(random.Random(6)) != drawn
    # freq: the most common answer ("2") is own in about half the prompts.
    freq = [debate_pairs(answers, rewards, seed=s) for s in range(400)]
    assert all(len(p) == 1 and "2" in (answers[p[0][0]], answers[p[0][1]]) for p in freq)
    assert 0.4 < sum(answers[p[0][0]] == "2" for p in freq) / 400 < 0.6
    assert [debate_pairs(answers, rewards, seed=s) for s in range(400)] == freq


@pytest.mark.parametrize("rule", ["freq", "rand"])
def test_offline_pairs_are_the_pairing_function_per_prompt(rule):
    draw = random.Random(1)
    items = []
    for i in range(60):
        answers = [draw.choice(["1", "2", "3", "4", None]) for _ in range(6)]
        items += rollouts(f"q{i}", "1", answers, pad=[draw.randrange(0, 60) for _ in range(6)])
    found, summary = build_pairs(items, rule, 2, seed=9, max_length=60, copies=2, kind="math")
    expected = []
    for i in range(60):
        mine = [r for r in items if r.prompt_id == f"q{i}"]
        chosen = debate_pairs(
            [r.answer for r in mine],
            [r.correct for r in mine],
            rule=rule,
            per_prompt=2,
            lengths=[len(r.response) for r in mine],
            max_length=60,
            copies=2,
            seed=derive_seed(9, "pair", rule, f"q{i}"),
            same=same_answer("math"),
        )
        expected += [(mine[a].source, mine[b].source) for a, b in chosen]
    assert [(p.first.source, p.second.source) for p in found] == expected
    assert summary.pairs == len(found) > 40 and summary.too_long > 0
    assert len(found) == 2 * len({(p.first.source, p.second.source) for p in found})
    dropped = summary.all_correct + summary.all_wrong + summary.one_answer + summary.all_too_long
    assert summary.kept + dropped == summary.prompts == 60


# ---- pair prompts from templates ----------------------------------------------------------


@pytest.mark.parametrize("template", [DEBATE, CONVERSATION])
def test_the_pair_prompt_is_the_evaluation_debate_prompt(template):
    """Agent 0 of a 2-agent decentralized debate, reading agents 0 and 1 in round 1."""
    (pair,) = build_pairs(rollouts("q", "42", ["42", "48"]), "freq", seed=1, kind="math")[0]
    question = Question("q", "question q", "42")
    history = [{0: turn(0, pair.first.response), 1: turn(1, pair.second.response)}]
    built = build_prompt(
        Speaker(template, 0, 2), question, history, [0, 1], Fitter(EstimateCounter()), None
    )
    (row,) = pair_rows([pair], "src", "math", "frequency", template.name)
    assert row["prompt"] == built.messages
    assert row["prompt"] == pair_prompt(
        question, pair.first.response, pair.second.response, template
    )
    assert row["extra_info"]["template"] == template.name


def test_the_debate_pair_prompt_names_the_first_rollout_the_models_own():
    (pair,) = build_pairs(rollouts("q", "42", ["42", "48"]), "freq", kind="math")[0]
    (row,) = pair_rows([pair], "src", "math", "frequency")  # the default template: debate
    (message,) = row["prompt"]
    assert message["role"] == "user"
    assert "Your own previous response is the one from agent 0." in message["content"]
    assert "None of these is your own previous response" not in message["content"]
    own, partner = (message["content"].index(r.response) for r in (pair.first, pair.second))
    assert message["content"].count('<response from="agent 0">') == 1
    assert message["content"].index('<response from="agent 0">') < own < partner


def test_the_conversation_pair_prompt_makes_the_own_rollout_an_assistant_turn():
    (pair,) = build_pairs(rollouts("q", "42", ["42", "48"]), "freq", kind="math")[0]
    (row,) = pair_rows([pair], "src", "math", "frequency", "conversation")
    ask, own, partner = row["prompt"]
    assert ask["role"] == "user" and ask["content"].startswith("question q")
    assert own == {"role": "assistant", "content": pair.first.response}
    assert partner["role"] == "user" and pair.second.response in partner["content"]
    assert pair.first.response not in partner["content"]
    assert '<response from="agent 1">' in partner["content"]


def test_pair_rows_carry_what_the_reward_needs():
    options = ("cold", "hot", "warm")
    items = [
        Rollout("c", "Which?", "A", f"\\boxed{{{a}}}", a, a == "A", f"c/{i}", options)
        for i, a in enumerate(["A", "B", "B"])
    ]
    pairs, _ = build_pairs(items, "freq", kind="choice")
    (row,) = pair_rows(pairs, "csqa", "choice", "frequency", DEBATE, "answer-line")
    info = row["extra_info"]
    assert info["kind"] == "choice" and info["options"] == list(options)
    assert info["answer_protocol"] == "answer-line" and info["template"] == "debate"
    assert sorted(info["answers"]) == ["A", "B"] and info["sources"][0] == pairs[0].first.source
    (default,) = pair_rows(pairs, "csqa", "choice", "frequency")
    assert default["extra_info"]["answer_protocol"] == "boxed"
    with pytest.raises(ValueError, match="--answer-protocol: the choice kind cannot be read"):
        pair_rows(pairs, "csqa", "choice", "frequency", DEBATE, "math-verify")


# ---- rewards on rows read back ------------------------------------------------------------


def test_rewards_read_parquet_rows_back_with_their_numpy_arrays(tmp_path):
    options = ("cold", "hot", "warm")
    items = [
        Rollout("c", "Which?", "A", f"\\boxed{{{a}}}", a, a == "A", f"c/{i}", options)
        for i, a in enumerate(["A", "B", "B"])
    ]
    pairs, _ = build_pairs(items, "freq", kind="choice")
    write_rows(pair_rows(pairs, "csqa", "choice", "frequency"), tmp_path / "choice.parquet")
    ((_, row),) = pd.read_parquet(tmp_path / "choice.parquet").iterrows()
    info, gold = row["extra_info"], row["reward_model"]["ground_truth"]
    assert isinstance(info["options"], np.ndarray)  # what made `options or ()` raise
    assert compute_score("csqa", "so \\boxed{A}", gold, info)["score"] == 1.0
    assert (
        compute_score("csqa", "cold", gold, info)["score"] == 1.0
    )  # an option's text: the options count
    assert compute_score("csqa", "so \\boxed{B}", gold, info)["score"] == -1.0
    assert compute_score("csqa", "so \\boxed{D}", gold, info)["score"] == -1.0  # past the options

    questions = [Question("m", "What is 6 x 7?", "42")]
    write_rows(prompt_rows(questions, "m", "math", answer="answer-line"), tmp_path / "m.parquet")
    ((_, row),) = pd.read_parquet(tmp_path / "m.parquet").iterrows()
    info, gold = row["extra_info"], row["reward_model"]["ground_truth"]
    assert info["answer_protocol"] == "answer-line"
    assert compute_score("m", "6 x 7 = 42.\nAnswer: 42", gold, info)["score"] == 1.0
    assert compute_score("m", "6 x 7 = 48.\nAnswer: 48", gold, info)["score"] == -1.0
    # The protocol is read: a box is no answer line (the default protocol would take it).
    assert compute_score("m", "6 x 7 is \\boxed{42}", gold, info)["score"] == -1.0
    assert compute_score("m", "6 x 7 is \\boxed{42}", gold, None)["score"] == 1.0
    numpy_backed = {"kind": np.str_("math"), "answer_protocol": np.str_("answer-line")}
    assert compute_score("m", "Answer: 42", np.str_("42"), numpy_backed)["score"] == 1.0


def test_grpo_reward_reads_extra_info_lists():
    choice = {"kind": "choice", "options": ["cold", "hot", "warm"], "answer_protocol": "boxed"}
    line = {"kind": "math", "answer_protocol": "answer-line"}
    texts = ["\\boxed{A}", "\\boxed{C}", "Answer: 42", "\\boxed{42}"]
    infos = [choice, choice, line, line]
    assert grpo_reward(texts, ["A", "A", "42", "42"], extra_info=infos) == [1.0, -1.0, 1.0, -1.0]
    arrays = [{**choice, "options": np.array(choice["options"])}] * 2
    assert grpo_reward(texts[:2], ["A", "A"], extra_info=np.array(arrays)) == [1.0, -1.0]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_pairs_from_a_single_run_hold_its_two_most_frequent_answers(tmp_path, shared_data, fmt):
    api.single(samples=8, benchmark="math500", data_dir=shared_data, limit=40, out=tmp_path / "s")
    path = tmp_path / f"pairs.{fmt}"
    summary = api.train_pairs(tmp_path / "s", path, pairing="freq", data_dir=shared_data)
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
        texts = {t["agent"]: t["text"] for t in mine}  # the file is in completion order
        messages = [dict(m) for m in row["prompt"]]
        first, second = (texts[int(s.rsplit("agent", 1)[1])] for s in info["sources"])
        question = Question(qid, questions[qid]["problem"], questions[qid]["answer"])
        assert messages == pair_prompt(question, first, second, DEBATE)
        assert info["answer_protocol"] == "boxed" and info["template"] == "debate"
        firsts.append(counts[0] > counts[1])
    assert len(frame) >= 20 and 0 < sum(firsts) < len(firsts)  # both orders occur
    assert summary.kept == summary.pairs == len(frame)


def test_generic_rollout_files_are_graded_here(tmp_path):
    rows = [
        {"prompt_id": "a", "question": "1+1?", "gold": "2", "response": "so \\boxed{2}"},
        {"prompt_id": "a", "question": "1+1?", "gold": "2", "response": "it is \\boxed{3}"},
        {"id": "b", "problem": "2+2?", "answer": "4", "completion": "\\boxed{4}"},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = api.train_pairs(tmp_path / "r.jsonl", tmp_path / "p.jsonl")
    api.train_pairs(tmp_path / "r.jsonl", tmp_path / "q.jsonl", pairing="frequency")
    assert (tmp_path / "q.jsonl").read_text() == (tmp_path / "p.jsonl").read_text()
    (row,) = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert sorted(row["extra_info"]["answers"]) == ["2", "3"]
    assert row["data_source"] == "r"
    assert (summary.all_correct, summary.all_wrong, summary.one_answer) == (1, 0, 0)


def test_pairs_take_a_template_a_length_limit_copies_and_a_protocol(tmp_path):
    rows = [
        {"id": "a", "question": "1+1?", "gold": "2", "response": "so\nAnswer: 2"},
        {"id": "a", "question": "1+1?", "gold": "2", "response": "it is\nAnswer: 3"},
        {"id": "a", "question": "1+1?", "gold": "2", "response": "x" * 200 + "\nAnswer: 3"},
        # A box is no answer line: under answer-line both are wrong and the prompt is dropped.
        {"id": "b", "question": "2+2?", "gold": "4", "response": "\\boxed{4}"},
        {"id": "b", "question": "2+2?", "gold": "4", "response": "Answer: 5"},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = api.train_pairs(
        tmp_path / "r.jsonl", tmp_path / "p.jsonl", prompt_template="conversation",
        max_length=100, copies=2, answer_protocol="answer-line",
    )  # fmt: skip
    assert summary.too_long == 1
    assert (summary.all_correct, summary.all_wrong) == (0, 1)
    assert (summary.rule, summary.pairs) == ("freq", 2)
    first, second = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert first["prompt"] == second["prompt"]
    assert [first["extra_info"][k] for k in ("index", "question_id")] == [0, "a"]
    info = first["extra_info"]
    assert (info["template"], info["answer_protocol"]) == ("conversation", "answer-line")
    assert sorted(info["sources"]) == ["r.jsonl line 1", "r.jsonl line 2"]
    ask, own, partner = first["prompt"]
    assert (ask["role"], own["role"], partner["role"]) == ("user", "assistant", "user")
    assert own["content"] == rows[int(info["sources"][0].rsplit(" ", 1)[1]) - 1]["response"]
    assert '"Answer: X"' in ask["content"] and '"Answer: X"' in partner["content"]
    boxed = api.train_pairs(tmp_path / "r.jsonl", tmp_path / "q.jsonl")
    assert (boxed.all_correct, boxed.all_wrong) == (0, 0)  # b pairs under boxed
    with pytest.raises(UserError, match="unknown prompt template 'nope'"):
        api.train_pairs(tmp_path / "r.jsonl", tmp_path / "q.jsonl", prompt_template="nope")
    with pytest.raises(ValueError, match="--answer-protocol: the math kind"):
        api.train_pairs(tmp_path / "r.jsonl", tmp_path / "q.jsonl", answer_protocol="summary-line")


def test_a_runs_rollouts_are_graded_again_under_another_protocol(tmp_path, shared_data):
    assert mad_eval(
        "single", "-k", "4", "--benchmark", "math500", "--data-dir", str(shared_data),
        "--limit", "5", "--out", "s", cwd=tmp_path,
    ).returncode == 0  # fmt: skip
    recorded = read_rollouts(tmp_path / "s", shared_data)
    assert recorded.answer == "boxed" and len(recorded.items) == 20
    turns = turns_of(tmp_path / "s")
    assert sorted(r.answer or "" for r in recorded.items) == sorted(
        t["answer"] or "" for t in turns
    )
    assert any(r.answer for r in recorded.items)
    again = read_rollouts(tmp_path / "s", shared_data, "answer-line")
    assert again.answer == "answer-line"  # the simulated agents boxed their answers
    assert all(r.answer is None and not r.correct for r in again.items)


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
            "no pair to write: of 1 rollout of 1 prompt (0 without an answer), dropped 1 "
            "prompts all correct, 0 all wrong and 0 with one distinct answer; nothing was "
            "written to p.jsonl.",
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
    api.train_prompts("aime24", tmp_path / "p.parquet", data_dir=shared_data)
    frame = pd.read_parquet(tmp_path / "p.parquet")
    rows = [json.loads(line) for line in (shared_data / "aime24.jsonl").read_text().splitlines()]
    assert len(frame) == len(rows) == 30
    for (_, row), source in zip(frame.iterrows(), rows, strict=True):
        question = Question(source["id"], source["problem"], str(source["answer"]))
        assert [dict(m) for m in row["prompt"]] == first_prompt(question, DEBATE)
        assert row["reward_model"]["ground_truth"] == str(source["answer"])


@pytest.mark.slow
def test_rewards_score_gold_solutions_plus_one_and_wrong_ones_minus_one(shared_data):
    rows = [json.loads(line) for line in (shared_data / "math500.jsonl").read_text().splitlines()]
    boxed = [r for r in rows[:60] if "\\boxed" in r["solution"]]
    assert len(boxed) >= 50
    for r in boxed:
        assert compute_score("math500", r["solution"], r["answer"])["score"] == 1.0
        head, box, tail = r["solution"].rpartition("\\boxed{")  # the last box is the answer
        wrong = head + box + "123456789+" + tail
        assert compute_score("math500", wrong, r["answer"])["score"] == -1.0
    assert compute_score("math500", "I am not sure.", "4")["score"] == -1.0
    texts = [boxed[0]["solution"], "\\boxed{x}"]
    golds = [boxed[0]["answer"], "5"]
    assert grpo_reward(texts, ground_truth=golds) == [1.0, -1.0]
    chats = [[{"role": "assistant", "content": t}] for t in texts]
    assert grpo_reward(chats, ground_truth=golds, prompts=["a", "b"]) == [1.0, -1.0]


@pytest.mark.slow
def test_training_imports_neither_verl_nor_trl():
    import subprocess
    import sys

    code = (
        "import sys, mad_eval.training, mad_eval.cli.train; "
        "print(any(m.split('.')[0] in ('verl', 'trl') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_help_names_the_train_commands(tmp_path):
    result = mad_eval("train", "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "pairs" in result.stdout and "prompts" in result.stdout
