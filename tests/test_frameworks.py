"""The debate frameworks the literature compares, run through the real engine on the
simulated agents: judge-led debate (Liang et al.), ChatEval's orders, GroupDebate, MALLM's
paradigms, and the decision protocols (consensus that ends a debate, confidence-weighted,
approval, cumulative and Borda votes); a debate that ends early is recorded, and its later
rounds count its final answers."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import mad_eval, start, turns_by_key, turns_of, wait_for_lines, without_timing
from factories import sim_run

from mad_eval import api
from mad_eval.debate.replay import Replay
from mad_eval.errors import UserError
from mad_eval.experiments.parse import load_experiment
from mad_eval.protocols import check_protocol, resolve
from mad_eval.store.folder import RunStore
from mad_eval.voting.statements import STATEMENTS

FRAMEWORKS = {  # protocol: agents
    "judged": 3,
    "chateval": 3,
    "chateval:order=simultaneous": 3,
    "chateval:order=summarizer": 4,
    "group": 4,
    "relay": 3,
    "memory": 3,
    "report": 3,
    "decentralized:score=unanimity": 3,
    "decentralized:score=supermajority": 3,
    "decentralized:score=confidence": 3,
    "decentralized:score=approval": 3,
    "decentralized:score=cumulative": 3,
    "decentralized:score=borda": 3,
}


@pytest.mark.parametrize("protocol", list(FRAMEWORKS))
def test_every_framework_runs_end_to_end_and_its_metrics_hold_every_round(tmp_path, protocol):
    folder = sim_run(tmp_path / "r", protocol=protocol, agents=FRAMEWORKS[protocol], rounds=2)
    metrics = json.loads((folder / "metrics.json").read_text())
    assert [row["round"] for row in metrics["rounds"]] == [0, 1, 2]
    assert metrics["debate"] == metrics["rounds"][-1]["vote_accuracy"]
    stops = RunStore(folder).stops()
    turns = turns_by_key(folder)
    assert not [t["error"] for t in turns.values() if t["error"]]  # every prompt could be built
    assert metrics["failed_turns"] == 0
    for (run, question), stop in stops.items():  # nothing is said after a stop
        assert not any(k[:2] == (run, question) and k[2] > stop.round for k in turns)
        assert stop.why


@pytest.mark.parametrize(
    "protocol", ["judged", "chateval", "chateval:order=summarizer", "group", "relay", "memory"]
)
def test_every_prompt_is_rebuilt_from_the_records_alone(tmp_path, protocol):
    """The replay (the viewer's prompts, `mad-eval judge`'s contexts) rebuilds each turn's
    prompt, roles, speaking order and statements asked included, to its recorded hash."""
    folder = sim_run(
        tmp_path / "r", protocol=protocol, agents=FRAMEWORKS[protocol], rounds=2, limit=4
    )
    store = RunStore(folder)
    replay = Replay(store.manifest(), store.questions())
    debates: dict = {}
    for t in store.turns():
        debates.setdefault((t.run, t.question), {}).setdefault(t.round, {})[t.agent] = t
    rebuilt = 0
    for t in store.turns():
        messages = replay.messages(t, debates[t.run, t.question])  # a mismatch raises
        rebuilt += bool(messages)
    assert rebuilt == len(store.turns())


def test_the_judge_speaks_last_reads_both_sides_and_its_answer_is_the_debates(tmp_path):
    folder = sim_run(tmp_path / "r", protocol="judged", agents=3, rounds=3, limit=20)
    turns = turns_by_key(folder)
    assert turns[0, "arith-0", 0, 1]["sees"] == [0]  # the negative reads the affirmative
    assert turns[0, "arith-0", 0, 2]["sees"] == [0, 1]  # the judge reads both, this round
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["protocol"]["voters"] == [2] and manifest["protocol"]["score"] == "judge"
    stops = RunStore(folder).stops()
    assert stops, "the simulated judge ends some debates early"
    for (run, question), stop in stops.items():
        judge = turns[run, question, stop.round, 2]
        assert STATEMENTS.get("verdict").read(judge["text"]) == "end"
        assert stop.why == f"the judge ended the debate after round {stop.round}"
    for (run, question, _, agent), t in turns.items():
        if agent == 2 and (run, question) not in stops:
            assert STATEMENTS.get("verdict").read(t["text"]) in ("continue", "end", None)
    # Debate is the judge's final answer, whether the debate ended early or not.
    final = {}
    for (_, question, _, agent), t in sorted(turns.items()):
        if agent == 2:
            final[question] = t["correct"]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["debate"] == pytest.approx(100 * sum(final.values()) / len(final))


def test_the_judges_persona_and_verdict_request_reach_its_prompt():
    sent = []

    class Recording:
        spec = "sim"

        def __init__(self):
            from mad_eval.backends import make_backend

            self.inner = make_backend("sim")

        async def generate(self, request):
            sent.append(request)
            return await self.inner.generate(request)

    import asyncio

    from mad_eval.debate.engine import Engine, shared_seats
    from mad_eval.records import Question
    from mad_eval.settings.config import RunConfig

    config = RunConfig(agents=3, rounds=1, max_tokens=64)
    engine = Engine(config, resolve("judged").protocol, shared_seats(config, Recording()), {}, id)
    asyncio.run(engine.run([Question("q", "What is 2 + 2?", "4")]))
    judge = [r for r in sent if r.asks == ("verdict",)]
    assert len(judge) == 2 and len(sent) == 6
    system = judge[0].messages[0]
    assert system["role"] == "system" and "judge" in system["content"]
    assert STATEMENTS.get("verdict").instruction in judge[0].messages[-1]["content"]
    debaters = [r for r in sent if not r.asks]
    label = STATEMENTS.get("verdict").label
    assert all(label not in m["content"] for r in debaters for m in r.messages)


@pytest.mark.parametrize(
    ("protocol", "agents", "reads", "waves"),
    [
        ("chateval", 3, [list(range(3))] * 3, [[0], [1], [2]]),
        ("chateval:order=simultaneous", 3, [list(range(3))] * 3, [[0, 1, 2]]),
        ("chateval:order=summarizer", 4, [[3, 0], [3, 1], [3, 2], [0, 1, 2]], [[0, 1, 2], [3]]),
        ("group:size=2", 4, [[0, 1], [2, 0, 1], [2, 3], [0, 2, 3]], [[1, 3], [0, 2]]),
        ("relay", 3, [[2], [0], [1]], [[0], [1], [2]]),
        ("memory", 3, [list(range(3))] * 3, [[0], [1], [2]]),
        ("report", 3, [[0, 1, 2], [0, 1], [0, 2]], [[1, 2], [0]]),
    ],
)
def test_who_reads_whom_and_who_speaks_when(protocol, agents, reads, waves):
    chosen = resolve(protocol).protocol
    check_protocol(chosen, agents, 2)
    assert [chosen.sees(i, agents) for i in range(agents)] == reads
    assert chosen.schedule(1, agents) == waves


def test_chateval_summarizer_and_group_voters():
    assert resolve("chateval:order=summarizer").protocol.voters(4) == [0, 1, 2]
    assert resolve("group").protocol.voters(4) == [0, 1, 2, 3]
    group = resolve("group:size=2").protocol
    assert group.role(0, 1, 4).persona and group.role(1, 1, 4) is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"protocol": "judged", "agents": 2}, "judged needs two debaters and a judge"),
        ({"protocol": "chateval:order=summarizer", "agents": 2}, "needs two debaters and a sum"),
        ({"protocol": "group:size=3", "agents": 4}, "groups of 3 must divide the 4 agents"),
        ({"protocol": "group:size=2", "agents": 2}, "into two or more groups"),
        ({"protocol": "chateval:order=random"}, "order must be one of one-by-one, simultaneous"),
        (
            {"protocol": "judged", "agents": 3, "rounds": 0},
            r"judged: the judge's verdict may end a debate after any round, which needs debate "
            r"rounds: pass (--)?rounds 1",
        ),
        (
            {"protocol": "decentralized:score=unanimity", "rounds": 0},
            "score=unanimity ends a debate once its voters agree, which needs debate rounds",
        ),
    ],
)
def test_bad_framework_settings_get_one_sentence_before_any_request(tmp_path, settings, message):
    with pytest.raises(UserError, match=message):
        api.run(model="sim", benchmark="arith", limit=2, out=tmp_path / "r", **settings)
    assert not (tmp_path / "r" / "turns.jsonl").exists()


def test_a_rule_that_reads_confidences_needs_a_template_that_asks_for_them(tmp_path):
    silent = tmp_path / "silent.toml"
    silent.write_text(
        'description = "no answer format"\n'
        '[[round0]]\nrole = "user"\ncontent = "{{ question }}"\n'
        '[[debate]]\nrole = "user"\ncontent = "{{ question }}"\n'
    )
    with pytest.raises(UserError, match=r"reads confidence from agent 0's replies, but prompt"):
        api.run(
            model="sim",
            benchmark="arith",
            limit=2,
            out=tmp_path / "r",
            protocol="decentralized:score=confidence",
            prompt_template=str(silent),
        )
    assert not (tmp_path / "r" / "turns.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", list(FRAMEWORKS))
def test_a_run_killed_and_resumed_has_the_records_of_one_never_killed(tmp_path, protocol):
    args = ["run", "--model", "sim:delay=0.01", "--protocol", protocol]
    args += ["--agents", str(FRAMEWORKS[protocol]), "--rounds", "3", "--limit", "30"]
    args += ["--concurrency", "2"]
    proc = start([*args, "--out", "killed"], tmp_path)
    wait_for_lines(tmp_path / "killed" / "turns.jsonl", 30)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    resumed = mad_eval(*args, "--out", "killed", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert mad_eval(*args, "--out", "whole", cwd=tmp_path).returncode == 0
    killed, whole = turns_of(tmp_path / "killed"), turns_of(tmp_path / "whole")
    key = lambda t: (t["run"], t["question"], t["round"], t["agent"])  # noqa: E731
    assert without_timing(sorted(killed, key=key)) == without_timing(sorted(whole, key=key))
    assert RunStore(tmp_path / "killed").stops() == RunStore(tmp_path / "whole").stops()
    again = mad_eval(*args, "--out", "killed", cwd=tmp_path)  # finished: nothing asked
    assert again.returncode == 0, again.stderr
    stops = tmp_path / "killed" / "stops.jsonl"
    lines = stops.read_text().splitlines() if stops.exists() else []
    assert len(lines) == len(RunStore(tmp_path / "killed").stops())  # none recorded twice
    assert len(turns_of(tmp_path / "killed")) == len(whole)


@pytest.mark.slow
def test_the_frameworks_experiment_makes_its_table_offline(tmp_path, monkeypatch):
    """experiments/frameworks.toml, on fewer questions: every framework's cell runs on the
    simulated agents and its table row is that cell's metrics.json, cost per question beside
    its accuracy, and the judged and consensus rows say how many debates ended early."""
    shipped = Path(__file__).parents[1] / "experiments" / "frameworks.toml"
    text = shipped.read_text(encoding="utf-8")
    assert "limit = 100" in text and "runs = 2" in text
    path = tmp_path / shipped.name
    path.write_text(text.replace("limit = 100", "limit = 12").replace("runs = 2", "runs = 1"))
    monkeypatch.chdir(tmp_path)
    api.experiment(path)
    api.experiment_tables(path, replicates=100)
    out = tmp_path / "results" / "frameworks"
    frame = pd.read_csv(out / "tables" / "frameworks.csv")
    experiment = load_experiment(path)
    cells = {c.settings["protocol"]: experiment.folder(c) for c in experiment.cells if not c.single}
    assert len(cells) == 13
    for protocol, folder in cells.items():
        metrics = json.loads((folder / "metrics.json").read_text())
        rows = frame[frame["run_dir"].map(lambda d, f=folder: Path(d).resolve() == f.resolve())]
        values = rows.set_index("key")["value"]
        assert values["debate"] == pytest.approx(metrics["debate"], abs=0.05), protocol
        assert values["cost.requests"] == pytest.approx(metrics["cost"]["requests"], abs=0.05)
        assert values["cost.tokens"] == pytest.approx(metrics["cost"]["tokens"], abs=0.5)
    judged = json.loads((cells["judged"] / "metrics.json").read_text())
    assert 0 < judged["ended"] <= 100 and judged["cost"]["requests"] < 3 * 3
    assert "ended" not in json.loads((cells["decentralized"] / "metrics.json").read_text())


def test_a_mixed_team_runs_a_judged_debate_with_the_judge_on_its_own_model(tmp_path):
    """heterogeneous:topology=judged is the judged debate, its judge a stronger model: the
    judge alone decides, is asked for its verdict, and may end the debate."""
    team = ["sim:p0=0.3*2", "sim:p0=0.8"]
    folder = sim_run(
        tmp_path / "r", None, protocol="heterogeneous:topology=judged", agent=team,
        rounds=2, limit=20,
    )  # fmt: skip
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [seat["model"] for seat in manifest["team"]] == [
        "sim:p0=0.3",
        "sim:p0=0.3",
        "sim:p0=0.8",
    ]
    assert manifest["protocol"]["score"] == "judge" and manifest["protocol"]["voters"] == [2]
    assert RunStore(folder).stops()
    for t in turns_of(folder):
        stated = STATEMENTS.get("verdict").read(t["text"])
        assert (stated is not None) == (t["agent"] == 2)


def test_a_framework_written_for_a_team_size_takes_it_without_agents(tmp_path):
    judged = sim_run(tmp_path / "j", protocol="judged", rounds=1, limit=2)
    group = sim_run(tmp_path / "g", protocol="group:size=3", rounds=1, limit=2)
    assert json.loads((judged / "manifest.json").read_text())["config"]["agents"] == 3
    assert json.loads((group / "manifest.json").read_text())["config"]["agents"] == 6
    plain = sim_run(tmp_path / "d", protocol="relay", rounds=1, limit=2)
    assert json.loads((plain / "manifest.json").read_text())["config"]["agents"] == 5
