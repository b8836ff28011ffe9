"""Benchmark kinds beyond math: number (GSM8K), choice (CommonsenseQA, HellaSwag, MMLU),
preference (HH-RLHF) and summary (CNN/DailyMail): extraction, grading, specs, the seeded A/B
order, the consensus summary, and a run of each end to end."""

from __future__ import annotations

import dataclasses
import gzip
import inspect
import json
from pathlib import Path

import pytest
from cli_helpers import mad_eval, turns_of
from factories import turn
from kind_files import COMMONSENSE_QA, GSM8K, cnn_row, hh_row, write_all, write_jsonl

from mad_eval import api
from mad_eval.data.benchmarks import BenchmarkError, load_questions, load_spec, read_jsonl
from mad_eval.debate.prompts import answer_format
from mad_eval.grading import grader as grading
from mad_eval.grading.grader import (
    Grade,
    consensus,
    extract_choice,
    extract_number,
    extract_summary,
    grade,
    number_gold,
    rouge,
)
from mad_eval.measure.counts import tally
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn

OPTIONS = ["cupboard", "oven", "refrigerator", "garden"]

# ---- number ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so she keeps \boxed{31}", "31"),
        (r"\boxed{1,250}", "1250"),
        (r"\boxed{\$1,250.00}", "1250"),
        (r"\boxed{18 \text{ dollars}}", "18"),
        ("The answer is 3.5 hours.", "7/2"),
        (r"\boxed{\frac{3}{4}}", "3/4"),
        (r"\boxed{0.75}", "3/4"),
        (r"\boxed{-7}", "-7"),
        ("The answer is 10,000.", "10000"),
        ("36 - 5 = 31\n#### 31", "31"),
        (r"\boxed{50\%}", "50"),
        # Malformed: unparsed, never a guess.
        ("I computed 17 and 42 along the way.", None),  # no box, cue or ####
        (r"\boxed{5 apples and 3 pears}", None),  # two different numbers
        (r"\boxed{2,5}", None),  # not a thousands separator: two numbers
        (r"\boxed{1e5}", None),
        (r"\boxed{x2}", None),
        (r"\boxed{}", None),
        (r"\boxed{3/0}", None),
        ("The answer is about ten.", None),
    ],
)
def test_number_extraction(text: str, expected: str | None) -> None:
    assert extract_number(text) == expected


def test_number_grading_compares_exact_values() -> None:
    assert number_gold("She keeps 36 - 5 = <<36-5=31>>31.\n#### 31") == "31"
    assert number_gold("#### 1,250") == "1250"
    assert grade(r"\boxed{1250}", "1250", "number") == Grade("1250", True)
    assert grade(r"\boxed{7.50}", number_gold("#### 7.5"), "number") == Grade("15/2", True)
    assert grade(r"\boxed{7.51}", "15/2", "number") == Grade("751/100", False)
    assert grade("no number here", "31", "number") == Grade(None, False)


# ---- choice and preference ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"Thinking it over, \boxed{C}", "C"),
        (r"\boxed{(C)}", "C"),
        (r"\boxed{\text{C}}", "C"),
        ("(B)", "B"),
        ("The answer is B.", "B"),
        ("The answer is (D) garden.", "D"),
        ("**Answer: C**", "C"),
        ("Option C", "C"),
        ("C. refrigerator", "C"),
        ("refrigerator", "C"),  # the text of exactly one option
        ("The answer is Refrigerator.", "C"),
        # Malformed: unparsed, never a guess.
        (r"\boxed{E}", None),  # no option E among four
        ("The answer is B because milk spoils", None),  # a letter must stand alone
        ("I think it is c", None),  # lower case could be a word
        ("The answer is a fridge", None),
        ("It could be the oven or the refrigerator.", None),
        (r"\boxed{42}", None),
        ("", None),
    ],
)
def test_choice_extraction(text: str, expected: str | None) -> None:
    assert extract_choice(text, OPTIONS) == expected


def test_option_text_matching_two_options_is_unparsed() -> None:
    assert extract_choice("yes", ["yes", "no", "yes"]) is None
    assert extract_choice("no", ["yes", "no", "yes"]) == "B"


def test_preference_answers_name_a_response() -> None:
    replies = ["About nine minutes.", "Eggs cannot be boiled."]
    assert grade(r"\boxed{A}", "A", "preference", replies) == Grade("A", True)
    assert grade("Response B", "A", "preference", replies) == Grade("B", False)
    assert grade(r"\boxed{C}", "A", "preference", replies) == Grade(None, False)


# ---- summary -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The article says...\nSummary: The harbour reopened.", "The harbour reopened."),
        ("Summary: first try\nOn reflection:\n**Summary:** second try.", "second try."),
        ("## Summary:\nLine one.\nLine two.", "Line one.\nLine two."),
        ("In summary: the harbour reopened.", None),  # not a line of its own
        ("The harbour reopened.", None),  # no marker: unparsed
        ("Summary:   ", None),
        ("Summary: " + "x" * (grading.MAX_SUMMARY_CHARS + 1), None),
    ],
)
def test_summary_extraction(text: str, expected: str | None) -> None:
    assert extract_summary(text) == expected


def test_rouge_scores_a_summary_against_the_reference() -> None:
    same = rouge("The harbour reopened on Monday.", "The harbour reopened on Monday.")
    assert same == {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}
    assert rouge("cats purr", "dogs bark loudly") == {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    graded = grade("Summary: the harbour reopened", "The harbour reopened on Monday.", "summary")
    assert graded.answer == "the harbour reopened" and graded.correct is None
    assert graded.rouge["rouge1"] == pytest.approx(2 * 1.0 * 0.6 / 1.6, abs=1e-6)


def summaries_tallied(turns, voters):
    """A summary benchmark's round-0 counts by its default rule (consensus)."""
    return tally(turns, Scoring(len(voters), 0, tuple(voters), kind="summary", seed=0))


def _summary_turn(agent: int, answer: str | None, score: float) -> Turn:
    scores = None if answer is None else {"rouge1": score, "rouge2": score, "rougeL": score}
    found = turn("q", 0, agent, answer, False)
    return dataclasses.replace(found, text=answer, correct=None, rouge=scores)


def test_consensus_never_reads_the_reference() -> None:
    # The rule takes the summaries alone: there is no reference for it to read.
    assert list(inspect.signature(consensus).parameters) == ["summaries"]
    central = "the harbour reopened after the storm on monday"
    summaries = [
        "the harbour reopened after the storm",
        central,
        "the harbour reopened on monday",
        "bakery gives bread to crews",
    ]
    assert consensus(summaries) == 1
    # The outlier is the one closest to the reference (score 0.9): an oracle would pick it.
    turns = [_summary_turn(i, s, 0.9 if i == 3 else 0.1 * (i + 1)) for i, s in enumerate(summaries)]
    turns.append(_summary_turn(4, None, 0.0))  # unparsed: no say in the consensus
    found = summaries_tallied(turns, voters=[0, 1, 2, 3, 4])
    assert found.num["rougeL0"][0, 0] == pytest.approx(0.2)  # agent 1's own score
    assert found.num["agent_rougeL0"][0, 0] == pytest.approx(0.1 + 0.2 + 0.3 + 0.9 + 0.0)
    assert found.den["agent_rougeL0"][0, 0] == 5
    # The same summaries scored against any other reference: the same summary is picked.
    rescored = [_summary_turn(t.agent, t.answer, 0.5 + 0.1 * t.agent) for t in turns[:4]]
    assert summaries_tallied(rescored, [0, 1, 2, 3]).num["rougeL0"][0, 0] == pytest.approx(0.6)


def test_consensus_ties_go_to_the_first_summary() -> None:
    assert consensus(["a b", "c d"]) == 0
    assert consensus(["only one"]) == 0


def test_every_kind_has_an_answer_format() -> None:
    assert all(answer_format(kind) for kind in grading.KINDS)
    assert '"Summary:"' in answer_format("summary")


# ---- specs and loading -------------------------------------------------------------------


def test_each_kind_loads_from_a_local_file(tmp_path: Path) -> None:
    data = write_all(tmp_path)
    _, gsm = load_questions("gsm8k", data)
    assert [q.gold for q in gsm] == ["31", "1250", "15/2"]
    assert {q.kind for q in gsm} == {"number"}
    assert gsm[0].text == GSM8K[0]["question"]  # the text as in the source

    _, csqa = load_questions("commonsense_qa", data)
    assert [q.id for q in csqa] == ["csqa-a", "csqa-b", "csqa-c"]
    assert [q.gold for q in csqa] == ["C", "A", "E"]
    assert csqa[0].options == COMMONSENSE_QA[0]["choices"]["text"]
    assert csqa[0].text.endswith("\n\nA. cupboard\nB. oven\nC. refrigerator\nD. garden\nE. mailbox")

    spec, swag = load_questions("hellaswag", data)
    assert [q.id for q in swag] == ["11", "12"]
    assert [q.gold for q in swag] == ["B", "C"]  # 0-based labels
    assert swag[0].text.startswith(spec.instruction)

    _, hh = load_questions("hh_rlhf", data)
    assert {q.kind for q in hh} == {"preference"}
    first = hh[0]
    assert first.options[ord(first.gold) - ord("A")] == "About nine minutes for a firm yolk."
    assert "Human: How long should I boil egg number 0?" in first.text
    assert "Assistant:" not in first.text.split("Conversation:")[1].split("Response A:")[0]

    _, cnn = load_questions("cnn_dailymail", data)
    assert cnn[0].gold == cnn_row(0)["highlights"] and cnn[0].kind == "summary"


def test_the_preference_order_is_seeded_recorded_and_carries_no_signal(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "hh_rlhf.jsonl", [hh_row(i) for i in range(400)])
    _, questions = load_questions("hh_rlhf", tmp_path)
    golds = [q.gold for q in questions]
    assert 0.4 < golds.count("A") / len(golds) < 0.6  # position says nothing
    for q in questions:
        chosen_at = q.meta["order"].index("chosen")
        assert q.gold == "AB"[chosen_at]
        assert q.options[chosen_at] == "About nine minutes for a firm yolk."
    _, again = load_questions("hh_rlhf", tmp_path)
    assert [q.gold for q in again] == golds  # the same every time it is loaded
    # Another seed in a spec of one's own gives another order.
    spec = (Path(__file__).parents[1] / "benchmarks" / "hh_rlhf.toml").read_text()
    mine = tmp_path / "hh_other.toml"
    mine.write_text(
        spec.replace('name = "hh_rlhf"', 'name = "hh_other"').replace("seed = 0", "seed = 7")
    )
    _, other = load_questions(mine, tmp_path)
    assert [q.gold for q in other] != golds


def test_a_preference_conversation_may_be_its_own_field(tmp_path: Path) -> None:
    spec = (Path(__file__).parents[1] / "benchmarks" / "hh_rlhf.toml").read_text()
    mine = tmp_path / "hh_prompt.toml"
    mine.write_text(spec.replace('name = "hh_rlhf"', 'name = "hh_prompt"') + 'prompt = "talk"\n')
    row = {"talk": " Human: hi? ", "chosen": " Hello! ", "rejected": "Go away.", "src": "x"}
    write_jsonl(tmp_path / "hh_rlhf.jsonl", [row])
    _, [question] = load_questions(mine, tmp_path)
    said = {"chosen": "Hello!", "rejected": "Go away."}
    replies = [said[name] for name in question.meta["order"]]
    assert question.options == replies and question.meta["src"] == "x"
    assert "talk" not in question.meta
    assert question.text.endswith(
        f"Conversation:\nHuman: hi?\n\nResponse A:\n{replies[0]}\n\nResponse B:\n{replies[1]}"
    )


def test_mmlu_takes_a_subject_and_the_preset_is_professional_medicine(shared_data: Path) -> None:
    preset, questions = load_questions("mmlu_professional_medicine", shared_data)
    named, same = load_questions("mmlu:professional_medicine", shared_data)
    assert preset.name == named.name == "mmlu_professional_medicine"
    assert [(q.id, q.text, q.gold) for q in questions] == [(q.id, q.text, q.gold) for q in same]
    assert len(questions) == 272 and {q.gold for q in questions} == set("ABCD")
    assert named.local["file"] == "mmlu_professional_medicine.jsonl"
    anatomy = load_spec("mmlu:subject=anatomy")
    assert anatomy.name == "mmlu_anatomy" and anatomy.hub["file"].startswith("anatomy/")
    with pytest.raises(BenchmarkError, match=r"local data file 'mmlu_anatomy\.jsonl'"):
        load_questions("mmlu:anatomy", shared_data)
    with pytest.raises(BenchmarkError, match="its parameters: subject=VALUE"):
        load_questions("mmlu:topic=anatomy", shared_data)
    with pytest.raises(BenchmarkError, match="not accepted"):
        load_questions("mmlu:../secrets", shared_data)


@pytest.mark.parametrize(
    ("name", "row", "problem"),
    [
        ("gsm8k", {"question": "Q?", "answer": "#### about ten"}, "does not end in one number"),
        (
            "commonsense_qa",
            {**COMMONSENSE_QA[0], "answerKey": "F"},
            "neither an option letter nor a 0-based index",
        ),
        ("commonsense_qa", {**COMMONSENSE_QA[0], "choices": {"text": "one"}}, "list of 2 to 26"),
        ("commonsense_qa", {"id": "x", "question": "Q?", "answerKey": "A"}, "missing field"),
        ("hh_rlhf", {"chosen": "\n\nHuman: hi\n\nAssistant: ", "rejected": "x"}, "is empty"),
    ],
)
def test_bad_rows_are_refused_in_one_sentence(
    tmp_path: Path, name: str, row: dict, problem: str
) -> None:
    write_jsonl(tmp_path / f"{name}.jsonl", [row])
    with pytest.raises(BenchmarkError, match=problem) as found:
        load_questions(name, tmp_path)
    assert f"{name}.jsonl line 1" in str(found.value)


def test_options_may_be_arrays_as_parquet_gives_them(tmp_path: Path) -> None:
    import numpy as np

    from mad_eval.data.benchmarks import _options

    row = {"choices": {"text": np.array(["a", "b", "c"])}}
    assert _options(row, "choices.text", "here") == ["a", "b", "c"]


def test_gzipped_json_lines_are_read(tmp_path: Path) -> None:
    path = tmp_path / "test.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n{"a": 2}\n'))
    assert [row for _, row in read_jsonl(path, "test.jsonl.gz")] == [{"a": 1}, {"a": 2}]


@pytest.mark.slow
def test_benchmarks_lists_every_spec_with_kind_and_source(tmp_path: Path) -> None:
    result = mad_eval("benchmarks", cwd=tmp_path, env={"COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│" in line}
    expected = {
        "gsm8k": ("number", "openai/gsm8k"),
        "commonsense_qa": ("choice", "tau/commonsense_qa"),
        "hellaswag": ("choice", "Rowan/hellaswag"),
        "mmlu": ("choice", "cais/mmlu"),
        "mmlu_professional_medicine": ("choice", "local mmlu_professional_medicine.jsonl"),
        "hh_rlhf": ("preference", "Anthropic/hh-rlhf"),
        "cnn_dailymail": ("summary", "abisee/cnn_dailymail"),
        "math500": ("math", "local math500.jsonl"),
        "arith": ("math", "built in"),
    }
    for name, (kind, source) in expected.items():
        cells = [cell.strip() for cell in lines[name].split("│")]
        assert cells[2] == kind and source in lines[name], lines[name]
    assert "subject=professional_medicine" in lines["mmlu"]
    assert "terms=2-4, digits=3, ops=add.sub.mul.div" in lines["arith"]
    assert "arith:terms=2,digits=1" in result.stdout


# ---- end to end --------------------------------------------------------------------------


def _run(tmp_path: Path, benchmark: str, data: Path, *extra: str) -> Path:
    out = tmp_path / benchmark.replace(":", "_")
    args = ("run", "--benchmark", benchmark, "--data-dir", str(data), "--out", str(out))
    result = mad_eval(*args, "--agents", "3", "--rounds", "2", *extra, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("benchmark", "kind"),
    [("gsm8k", "number"), ("commonsense_qa", "choice"), ("hellaswag", "choice")],
)
def test_voting_kinds_run_end_to_end(tmp_path: Path, benchmark: str, kind: str) -> None:
    data = write_all(tmp_path / "data")
    out = _run(tmp_path, benchmark, data, "--runs", "2")
    _, questions = load_questions(benchmark, data)
    golds = {q.id: q for q in questions}
    turns = turns_of(out)
    assert len(turns) == 2 * len(questions) * 3 * 3
    for t in turns:
        q = golds[t["question"]]
        assert t["answer"] is not None  # the simulated agents answer in the asked format
        assert t["correct"] == (t["answer"] == q.gold)
        if kind == "choice":
            assert t["answer"] in "ABCDE"[: len(q.options)]
    metrics = json.loads((out / "metrics.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert metrics["kind"] == manifest["benchmark"]["kind"] == kind
    assert metrics["unparsed"] == 0
    last = max(t["round"] for t in turns)
    votes = [m["round"] for m in metrics["rounds"]]
    assert votes == [0, 1, 2] and metrics["rounds_of_debate"] == last
    assert {"maj", "debate", "delta"} <= set(metrics) and len(metrics["transitions"]) == 2


def test_the_preference_run_records_the_order_and_grades_by_it(tmp_path: Path) -> None:
    data = write_all(tmp_path / "data", hh=8)
    out = _run(tmp_path, "hh_rlhf", data)
    manifest = json.loads((out / "manifest.json").read_text())
    orders = manifest["benchmark"]["orders"]
    assert set(orders) == set(manifest["benchmark"]["questions"])
    assert {tuple(o) for o in orders.values()} == {("chosen", "rejected"), ("rejected", "chosen")}
    for t in turns_of(out):
        chosen = "AB"[orders[t["question"]].index("chosen")]
        assert t["correct"] == (t["answer"] == chosen)


@pytest.mark.slow
def test_mmlu_professional_medicine_runs_as_the_issue_asks(
    tmp_path: Path, shared_data: Path
) -> None:
    args = ("run", "--benchmark", "mmlu_professional_medicine", "--data-dir", str(shared_data))
    result = mad_eval(*args, "--out", "mmlu", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    turns = turns_of(tmp_path / "mmlu")
    _, questions = load_questions("mmlu_professional_medicine", shared_data)
    golds = {q.id: q.gold for q in questions}
    assert len(turns) == 272 * 5 * 4
    assert all(
        t["answer"] in "ABCD" and t["correct"] == (t["answer"] == golds[t["question"]])
        for t in turns
    )
    metrics = json.loads((tmp_path / "mmlu" / "metrics.json").read_text())
    assert metrics["questions"] == 272 and metrics["kind"] == "choice"


def test_summaries_run_end_to_end_with_rouge_by_round(tmp_path: Path) -> None:
    data = write_all(tmp_path / "data", cnn=4)
    out = _run(tmp_path, "cnn_dailymail", data)
    _, questions = load_questions("cnn_dailymail", data)
    reference = {q.id: q.gold for q in questions}
    turns = turns_of(out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["kind"] == "summary" and "maj" not in metrics
    for r in range(3):
        picked, agents = [], []
        for qid in reference:
            mine = sorted(
                (t for t in turns if t["question"] == qid and t["round"] == r),
                key=lambda t: t["agent"],
            )
            assert all(t["rouge"] == rouge(t["answer"], reference[qid]) for t in mine)
            chosen = mine[consensus([t["answer"] for t in mine])]
            picked.append(chosen["rouge"])
            agents += [t["rouge"]["rougeL"] for t in mine]
        row = metrics["rounds"][r]
        for m in ("rouge1", "rouge2", "rougeL"):
            assert row[m] == pytest.approx(100 * sum(p[m] for p in picked) / len(picked))
        assert row["agent_rougeL"] == pytest.approx(100 * sum(agents) / len(agents))
    assert metrics["rougeL"] == metrics["rounds"][2]["rougeL"]
    # The rouge table prints metrics.json's numbers; a voting layout is refused in one sentence.
    table = api.table([out], "rouge", format="csv")
    rows = [line.split(",") for line in table.splitlines()[1:]]
    header = table.splitlines()[0].split(",")
    for row in rows:
        cell = dict(zip(header, row, strict=True))
        r, key = int(cell["part"].split()[-1]), cell["key"].split(".")[1]
        assert float(cell["value"]) == pytest.approx(metrics["rounds"][r][key])
    refused = mad_eval("table", str(out), "--layout", "debate", cwd=tmp_path)
    assert refused.returncode == 2 and "use --layout rouge" in refused.stderr


@pytest.mark.slow
def test_unparsed_answers_are_counted_never_guessed(tmp_path: Path) -> None:
    from stub_server import StubServer

    data = write_all(tmp_path / "data")
    # Agent replies by seed: a box, a bare letter, a letter past the options, prose.
    forms = [r"so \boxed{C}", "(A)", r"\boxed{F}", "I would keep it cold somewhere."]
    with StubServer(reply=lambda body: forms[body["seed"] % 4]) as server:
        out = tmp_path / "csqa"
        result = mad_eval(
            "run", "--benchmark", "commonsense_qa", "--data-dir", str(data), "--out", str(out),
            "--model", f"openai:{server.model}", "--base-url", server.base_url,
            "--agents", "2", "--rounds", "1", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    turns = turns_of(out)
    expected = {0: "C", 1: "A", 2: None, 3: None}
    assert [t["answer"] for t in turns] == [expected[t["seed"] % 4] for t in turns]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["unparsed"] == sum(1 for t in turns if t["answer"] is None) > 0


def test_training_data_carries_the_kind_to_the_reward(tmp_path: Path) -> None:
    from mad_eval.training.rewards import compute_score, grpo_reward

    data = write_all(tmp_path / "data")
    result = mad_eval(
        "train", "prompts", "commonsense_qa", "--data-dir", str(data), "--out", "p.jsonl",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    first = rows[0]
    assert first["ability"] == "choice" and first["reward_model"]["ground_truth"] == "C"
    assert first["extra_info"]["kind"] == "choice" and len(first["extra_info"]["options"]) == 5
    assert first["prompt"][-1]["content"].endswith(answer_format("choice"))
    info = first["extra_info"]
    assert compute_score("commonsense_qa", r"\boxed{C}", "C", info)["score"] == 1.0
    assert compute_score("commonsense_qa", "refrigerator", "C", info)["score"] == 1.0
    assert compute_score("commonsense_qa", r"\boxed{F}", "C", info)["score"] == -1.0
    assert grpo_reward([r"\boxed{C}", r"\boxed{A}"], ["C", "C"], extra_info=[info, info]) == [
        1.0,
        -1.0,
    ]
    out = _run(tmp_path, "cnn_dailymail", data)
    refused = mad_eval(
        "train", "pairs", str(out), "--data-dir", str(data), "--out", "x.jsonl", cwd=tmp_path
    )
    assert refused.returncode == 2 and "scored, not right or wrong" in refused.stderr


def test_the_simulated_agents_pick_among_the_options() -> None:
    from mad_eval.backends.sim import question_candidates
    from mad_eval.records import Question

    q = Question("q", "Pick one.\n\nA. x\nB. y\nC. z", "B", {"options": ["x", "y", "z"]}, "choice")
    assert question_candidates(q, 4) == ("B", "A", "C")
    article = Question("a", "Summarise.\n\n" + cnn_row(1)["article"], "ref", {}, "summary")
    found = question_candidates(article, 4)
    assert found[0].startswith("The harbour of town 1 reopened") and len(set(found)) == 4
    assert all("Summarise" not in summary for summary in found)


def test_the_project_specs_read_their_hub_files(tmp_path: Path, monkeypatch) -> None:
    """The hub path of the new specs, on stand-in files of the hub's format: CommonsenseQA's
    parquet (choices as a struct of arrays) and HH-RLHF's gzipped JSON Lines."""
    import huggingface_hub
    import pandas as pd

    monkeypatch.delenv("MAD_EVAL_DATA", raising=False)
    csqa = tmp_path / "csqa.parquet"
    pd.DataFrame(COMMONSENSE_QA).to_parquet(csqa)
    hh = tmp_path / "hh.jsonl.gz"
    hh.write_bytes(gzip.compress("".join(json.dumps(hh_row(i)) + "\n" for i in range(3)).encode()))
    files = {"tau/commonsense_qa": csqa, "Anthropic/hh-rlhf": hh}
    seen = []

    def download(repo_id: str, filename: str, **kwargs: object) -> str:
        seen.append((repo_id, filename))
        return str(files[repo_id])

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    _, questions = load_questions("commonsense_qa")
    assert [q.gold for q in questions] == ["C", "A", "E"]
    assert questions[2].options == COMMONSENSE_QA[2]["choices"]["text"]
    _, pairs = load_questions("hh_rlhf")
    assert len(pairs) == 3 and all(len(q.options) == 2 for q in pairs)
    assert seen == [
        ("tau/commonsense_qa", "data/validation-00000-of-00001.parquet"),
        ("Anthropic/hh-rlhf", "helpful-base/test.jsonl.gz"),
    ]


def test_each_kind_parses_its_gold() -> None:
    from mad_eval.grading.kinds import KINDS

    assert KINDS.get("number").gold("She keeps 31.\n#### 1,250", ()) == "1250"
    assert KINDS.get("number").gold("#### about ten", ()) is None
    choice = KINDS.get("choice")
    assert choice.gold("2", OPTIONS) == "C" and choice.gold("c", OPTIONS) == "C"
    assert KINDS.get("preference").gold("B", ["x", "y"]) == "B"
    assert KINDS.get("choice").gold("E", OPTIONS) is None
    assert KINDS.get("math").gold(r"\frac{1}{2}", ()) == r"\frac{1}{2}"
    assert KINDS.get("summary").gold("The reference.", ()) == "The reference."
