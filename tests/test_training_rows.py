"""Rows that carry their question: a pair prompt rebuilt from a first-turn row alone equals the
one `train pairs` wrote and agent 0's round-1 prompt in a real simulated debate; the prompt
lengths the train commands report; templates that cannot build a pair prompt refused early."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from cli_helpers import mad_eval, turns_of

import mad_eval as api
from mad_eval.backends.sim import SimBackend
from mad_eval.debate.context import EstimateCounter
from mad_eval.training import TrainingError, row_pair_prompt, row_question
from mad_eval.training.rows import prompt_length


@pytest.mark.slow
@pytest.mark.parametrize("template", ["debate", "conversation", "file"])
def test_a_first_turn_row_rebuilds_agent_zeros_round_one_prompt(
    tmp_path, shared_data, monkeypatch, template
):
    if template == "file":  # a user's file: the row carries its checked table, not its path
        path = tmp_path / "mine.toml"
        path.write_text(_builtin("debate"))
        template = str(path)
    sent: dict[int, list[dict[str, str]]] = {}
    generate = SimBackend.generate

    async def recording(self, request):
        sent[request.sampling.seed] = [dict(m) for m in request.messages]
        return await generate(self, request)

    monkeypatch.setattr(SimBackend, "generate", recording)
    common = {"benchmark": "math500", "data_dir": shared_data, "limit": 3}
    api.run(agents=2, rounds=1, prompt_template=template, out=tmp_path / "r", **common)
    rows = api.train_prompts("math500", tmp_path / "p.parquet", prompt_template=template,
                             data_dir=shared_data, limit=3)  # fmt: skip
    if template.endswith(".toml"):
        (tmp_path / "mine.toml").unlink()  # the row alone rebuilds it
    read = {r["extra_info"]["question_id"]: r for r in pd.read_parquet(tmp_path / "p.parquet")
            .to_dict("records")}  # fmt: skip
    turns = turns_of(tmp_path / "r")
    checked = 0
    said = {(t["question"], t["agent"]): t["text"] for t in turns if t["round"] == 0}
    for turn in (t for t in turns if t["round"] == 1 and t["agent"] == 0):
        own, peer = said[turn["question"], 0], said[turn["question"], 1]
        assert row_pair_prompt(read[turn["question"]], own, peer) == sent[turn["seed"]]
        checked += 1
    assert checked == 3 and len(rows) == 3


def _builtin(name: str) -> str:
    from mad_eval.settings.templates import builtin_templates

    return builtin_templates()[name].read_text(encoding="utf-8")


def test_pair_rows_rebuild_their_own_prompt_from_the_first_turn_row(tmp_path, shared_data):
    api.single(samples=8, benchmark="math500", data_dir=shared_data, limit=20, out=tmp_path / "s")
    summary = api.train_pairs(tmp_path / "s", tmp_path / "pairs.jsonl", data_dir=shared_data)
    api.train_prompts("math500", tmp_path / "p.jsonl", data_dir=shared_data, limit=20)
    firsts = {json.loads(line)["extra_info"]["question_id"]: json.loads(line)
              for line in (tmp_path / "p.jsonl").read_text().splitlines()}  # fmt: skip
    texts = {f"run{t['run']}/{t['question']}/round{t['round']}/agent{t['agent']}": t["text"]
             for t in turns_of(tmp_path / "s")}  # fmt: skip
    pairs = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert len(pairs) == summary.pairs >= 5
    for row in pairs:
        info = row["extra_info"]
        own, peer = (texts[s.split(":", 1)[1]] for s in info["sources"])
        first = firsts[info["question_id"]]
        assert row_pair_prompt(first, own, peer) == row["prompt"] == row_pair_prompt(row, own, peer)
        assert row_question(row).text == row_question(first).text == info["question"]


def test_the_train_commands_report_the_prompt_length_a_trainer_needs(tmp_path, shared_data):
    rows = api.train_prompts("math500", tmp_path / "p.jsonl", data_dir=shared_data, limit=10)
    count = EstimateCounter()
    longest = max(prompt_length(r["prompt"], count) for r in rows)
    base = max(prompt_length(row_pair_prompt(r, "", ""), count) for r in rows)
    assert rows.lengths.longest == longest and rows.lengths.pair_base == base > longest
    assert rows.lengths.debate_turn(1000) == base + 2000 and not rows.lengths.exact
    result = mad_eval("train", "prompts", "math500", "--out", "q.jsonl", "--limit", "10",
                      "--data-dir", str(shared_data), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"Longest prompt: {longest} tokens" in result.stdout
    assert f"max_prompt_length >= {base} + 2 x the response length" in result.stdout
    help_text = mad_eval("train", "pairs", "--help", cwd=tmp_path).stdout
    assert "--tokenizer" in help_text


def test_copies_says_they_are_separate_groups_and_the_old_name_points_to_it(tmp_path):
    rows = [
        {"prompt_id": "a", "question": "1+1?", "gold": "2", "response": "so \\boxed{2}"},
        {"prompt_id": "a", "question": "1+1?", "gold": "2", "response": "it is \\boxed{3}"},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = mad_eval("train", "pairs", "r.jsonl", "--out", "p.jsonl", "--copies", "3",
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 3
    assert "separate groups" in " ".join(result.stdout.split())
    assert "Longest prompt:" in result.stdout
    old = mad_eval("train", "pairs", "r.jsonl", "--out", "q.jsonl", "--repeats", "3", cwd=tmp_path)
    assert old.returncode == 2 and not (tmp_path / "q.jsonl").exists()
    assert "--repeats is now --copies" in " ".join(old.stderr.split())


def test_rows_without_their_question_are_refused_in_one_sentence():
    old = {"prompt": [], "reward_model": {"ground_truth": "4"}, "extra_info": {"kind": "math"}}
    with pytest.raises(TrainingError, match="lacks question, answer_protocol, template"):
        row_pair_prompt(old, "a", "b")


def test_a_template_that_cannot_build_a_pair_prompt_is_refused_before_writing(
    tmp_path, shared_data
):
    """Its round-0 prompts render; its debate turn reads what a pair has not (a third agent's
    reply), so `train prompts` refuses it in one sentence and writes nothing."""
    text = _builtin("debate").replace(
        "[[debate]]\n",
        '[[debate]]\nrole = "system"\ncontent = "{{ responses[2].text }}"\n\n[[debate]]\n',
        1,
    )
    path = tmp_path / "needs-three.toml"
    path.write_text(text)
    result = mad_eval("train", "prompts", "math500", "--out", "p.jsonl", "--limit", "2",
                      "--data-dir", str(shared_data), "--prompt-template", str(path),
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "needs-three" in result.stderr and not (tmp_path / "p.jsonl").exists()


def _without_gold(row: dict) -> None:
    del row["reward_model"]


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (lambda row: row["reward_model"].update(ground_truth=None), "reward_model.ground_truth"),
        (lambda row: row["reward_model"].update(ground_truth="  "), "reward_model.ground_truth"),
        (_without_gold, "reward_model.ground_truth"),
        (lambda row: row["extra_info"].update(question=""), "extra_info.question is empty"),
    ],
)
def test_a_row_without_a_gold_or_a_question_is_refused_before_any_step(tmp_path, spoil, said):
    """Graded against the text "None", every reply of such a row was trained as wrong: the row
    check of both trainers (before the model loads) and the step itself refuse it."""
    from mad_eval.training import SelfDebate
    from mad_eval.training.rows import check_rows

    api.train_prompts("arith", tmp_path / "p.jsonl", limit=1)
    row = json.loads((tmp_path / "p.jsonl").read_text())
    spoil(row)
    for call in (
        lambda: row_question(row),
        lambda: SelfDebate().step(row, ["\\boxed{1}", "\\boxed{2}"]),
        lambda: check_rows([("p.jsonl line 1", row)]),
    ):
        with pytest.raises(TrainingError, match=said):
            call()
