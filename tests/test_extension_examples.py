"""The worked examples of docs/architecture.md ("Extension points, one worked example
each"), built as the page shows them and entered in their one registry: each must work
end to end with no other change, or the page is wrong."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from factories import compute_metrics, sim_run

from mad_eval import api
from mad_eval.grading import answers
from mad_eval.grading.answers import ANSWER_PROTOCOLS, AnswerProtocol
from mad_eval.grading.grader import grade
from mad_eval.grading.kinds import KINDS, Kind
from mad_eval.measure.base import Add, Context, Debate, Family
from mad_eval.measure.formula import Formula, percent
from mad_eval.measure.scoring import Scoring
from mad_eval.reporting.layouts import LAYOUTS, Column, TableLayout
from mad_eval.voting.rules import RULES, Rule


def turns(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "turns.jsonl").read_text().splitlines()]


# ---- a benchmark and a benchmark kind ------------------------------------------------------


@dataclass(frozen=True)
class IntegerKind(Kind):
    """One integer, compared exactly."""

    def read(self, found, text, options):
        ok = found and found.strip().lstrip("+-").isdigit()
        return found.strip().lstrip("+") if ok else None

    def gold(self, raw, options):
        return self.read(raw, None, options)

    def candidates(self, question, k):
        return tuple(str(int(question.gold) + d) for d in range(k))


INTEGER = IntegerKind("integer", "your final answer as an integer")


def test_a_benchmark_file_and_a_kind_module_make_a_runnable_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registered
) -> None:
    registered(KINDS, "integer", INTEGER)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "ints.toml").write_text(
        textwrap.dedent(
            """\
            name = "ints"
            description = "Ints: three integer questions"
            kind = "integer"
            answer = "boxed"
            max_tokens = 256

            [local]
            file = "ints.jsonl"
            question = "problem"
            answer = "solution"
            """
        )
    )
    rows = [{"problem": f"What is {a} + {a}?", "solution": str(2 * a)} for a in (3, 5, 7)]
    (tmp_path / "ints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    run = api.run(model="sim:p0=0.5", benchmark="ints", data_dir=tmp_path, agents=3,
                  rounds=1, out=tmp_path / "r")  # fmt: skip

    recorded = turns(tmp_path / "r")
    assert len(recorded) == 3 * 3 * 2
    questions = (tmp_path / "r" / "questions.jsonl").read_text().splitlines()
    golds = {q["id"]: q["gold"] for q in map(json.loads, questions)}
    assert sorted(golds.values()) == ["10", "14", "6"]
    for t in recorded:
        assert t["answer"].isdigit()
        assert t["correct"] == (t["answer"] == golds[t["question"]])
    assert run.metrics["kind"] == "integer"
    assert 0 <= run.maj <= 100


# ---- an answer protocol --------------------------------------------------------------------


def _last_line(reply: str) -> tuple[str | None, bool]:
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    return (lines[-1] if lines else None), False


FINAL_LINE = AnswerProtocol(
    "final-line",
    "the reply's last non-empty line",
    answers._STEP_BY_STEP + " alone on the last line of your reply.",
    "{answer}",
    True,
    _last_line,
)


def test_an_answer_protocol_entry_is_found_and_graded(registered) -> None:
    registered(ANSWER_PROTOCOLS, "final-line", FINAL_LINE)
    # The kinds it serves name it among their `answers`.
    registered(KINDS, "integer", replace(INTEGER, answers=("boxed", "final-line")))
    reply = "Two sevens are fourteen.\n\n14\n"
    assert grade(reply, "14", "integer", (), "final-line").correct
    assert not grade("Two sevens.\n15", "14", "integer", (), "final-line").correct
    assert FINAL_LINE.instruction("an integer").endswith("alone on the last line of your reply.")


# ---- a scoring rule ------------------------------------------------------------------------


class FirstAgent(Rule):
    name = "first-agent"
    description = "agent 0's own answer in every round"

    def pick(self, live, voters, hub, rng, same):
        return next((t for t in live if t.agent == 0 and t.answer is not None), None)


@pytest.fixture
def first_agent() -> Iterator[None]:
    RULES.add("first-agent", FirstAgent(), owner="this test")
    yield
    RULES.remove("first-agent")


def test_a_scoring_rule_decides_maj_and_debate(tmp_path: Path, first_agent: None) -> None:
    run = api.load_run(
        sim_run(tmp_path / "r", protocol="decentralized:score=first-agent", agents=3, rounds=2)
    )
    recorded = turns(tmp_path / "r")
    first = [t for t in recorded if t["agent"] == 0]
    for r, number in ((0, run.maj), (2, run.debate)):
        mine = [t for t in first if t["round"] == r]
        assert number == pytest.approx(100 * sum(bool(t["correct"]) for t in mine) / len(mine))
    assert run.metrics["score"] == "first-agent"


# ---- a protocol ----------------------------------------------------------------------------

STAR = """
from mad_eval.protocols.base import Protocol


class Star(Protocol):
    name = "star"
    description = "agent 0 reads everyone; the others read agent 0 and themselves"

    def sees(self, agent, n_agents):
        return list(range(n_agents)) if agent == 0 else sorted({0, agent})
"""


def test_a_protocol_class_given_by_import_path_sets_who_reads_whom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "star_protocol.py").write_text(STAR)
    monkeypatch.syspath_prepend(str(tmp_path))
    sim_run(tmp_path / "r", protocol="star_protocol:Star", agents=4, rounds=1, limit=2)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["protocol"]["sees"] == [[0, 1, 2, 3], [0, 1], [0, 2], [0, 3]]
    debate = [t for t in turns(tmp_path / "r") if t["round"] == 1]
    assert {t["agent"]: t["sees"] for t in debate} == {0: [0, 1, 2, 3], 1: [0, 1], 2: [0, 2],
                                                       3: [0, 3]}  # fmt: skip


# ---- a backend -----------------------------------------------------------------------------

ECHO = """
from mad_eval.backends.base import Backend, BackendType, Generation, Request


class Echo(Backend):
    def __init__(self, spec: str):
        self.spec = spec  # the model spec, as the run names it

    async def generate(self, request: Request) -> Generation:
        return Generation(text=request.messages[-1]["content"], prompt_tokens=0,
                          completion_tokens=0)


TYPE = BackendType(
    name="echo",
    usage="or echo for a backend that repeats the prompt",
    build=lambda spec, rest, where: Echo(spec),
)
"""


def test_a_backend_module_and_its_prefix_serve_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registered
) -> None:
    from mad_eval.backends import BACKENDS

    (tmp_path / "echo_backend.py").write_text(ECHO)
    monkeypatch.syspath_prepend(str(tmp_path))
    registered(BACKENDS, "echo", "echo_backend:TYPE")
    try:
        sim_run(tmp_path / "r", model="echo", agents=2, rounds=1, limit=2)
    finally:
        sys.modules.pop("echo_backend", None)
    recorded = turns(tmp_path / "r")
    assert len(recorded) == 2 * 2 * 2 and all(t["error"] is None for t in recorded)
    round0 = [t for t in recorded if t["round"] == 0]
    assert all(t["text"].endswith("in \\boxed{}.") for t in round0)  # the prompt, repeated


# ---- a table layout ------------------------------------------------------------------------


def _hub(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    return [
        ("", [Column(f"R{r}", f"round{r}.hub_accuracy", optional=True) for r in range(rounds + 1)])
    ]


HUB = TableLayout("hub", _hub, "the hub's own accuracy per round")


@pytest.mark.slow
def test_a_layout_function_makes_a_table(tmp_path: Path, registered) -> None:
    from mad_eval.reporting.tables import render, tidy

    registered(LAYOUTS, "hub", HUB)
    [run] = api.load_runs([sim_run(tmp_path / "r", protocol="centralized", agents=3, rounds=2)])
    frame = tidy([run], "hub")
    assert api.table([tmp_path / "r"], "hub", format="md") == render(frame, "md")
    assert list(frame["metric"]) == ["R0", "R1", "R2"]
    hub = [round_["hub_accuracy"] for round_ in run.metrics["rounds"]]
    assert list(frame["value"]) == pytest.approx(hub)
    assert "| Method | Arith R0 | Arith R1 | Arith R2 |" in render(frame, "md")


# ---- a metric family -----------------------------------------------------------------------


def _unparsed_keys(scoring: Scoring) -> list[str]:
    return [f"unparsed{r}" for r in range(scoring.rounds + 1)]


def _unparsed_count(debate: Debate, add: Add) -> None:
    for r, scored in debate.rounds.items():
        add(f"unparsed{r}", sum(t.answer is None for t in scored.live), len(scored.live))


def _unparsed_formulas(context: Context) -> dict[str, Formula]:
    return {
        f"round{r}.unparsed_share": percent(f"unparsed{r}")
        for r in range(context.scoring.rounds + 1)
    }


UNPARSED = Family(
    name="unparsed",
    formulas=_unparsed_formulas,
    keys=_unparsed_keys,
    count=_unparsed_count,
    intervals=lambda context: list(_unparsed_formulas(context)),
)


def test_a_metric_family_module_and_its_registry_line_measure_a_run(registered) -> None:
    from factories import turn

    from mad_eval.measure import families

    registered(families.FAMILIES, "unparsed", UNPARSED)
    # Round 0: one of three agents unparsed on each of two questions; round 1: none, but
    # agent 2 failed on q2 (no turn to count).
    made = [turn(q, 0, a, None if a == 0 else "4", a != 0) for q in ("q1", "q2") for a in range(3)]
    made += [
        turn(q, 1, a, "4", True, failed=(q, a) == ("q2", 2)) for q in ("q1", "q2") for a in range(3)
    ]
    rows = compute_metrics(made, Scoring(3, 1, (0, 1, 2), kind="math", seed=0))["rounds"]
    assert [row["unparsed_share"] for row in rows] == pytest.approx([100 / 3, 0.0])
    assert rows[0]["unparsed_share_ci"] == pytest.approx([100 / 3, 100 / 3])  # alike questions


def test_the_examples_are_the_pages_own() -> None:
    """The names used here are the ones the page shows, so the two cannot drift apart."""
    page = (Path(__file__).parents[1] / "docs" / "architecture.md").read_text()
    for shown in ('IntegerKind("integer"', '"final-line"', 'name = "first-agent"',
                  "class Star(Protocol)", 'name="echo"', 'f"round{r}.hub_accuracy"',
                  'kind = "math"', 'FAMILY = Family(name="unparsed"',
                  'percent(f"unparsed{r}")'):  # fmt: skip
        assert shown in page
