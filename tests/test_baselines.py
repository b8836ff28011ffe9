"""DebateLLM's systems that are no debate, as single-model baselines, through the real engine
on the simulated agents: Medprompt's choice shuffle (each agent reads the options in its own
seeded order; its letter is mapped back before grading and voting), Ensemble Refinement
(samples, then aggregations that read them all) and Solo Performance Prompting."""

from __future__ import annotations

import json
import random
import signal

import pytest
from cli_helpers import mad_eval, start, turns_of, wait_for_lines, without_timing
from kind_files import write_all
from viewer_helpers import read_data

from mad_eval import api
from mad_eval.debate.replay import Replay, run_questions
from mad_eval.errors import UserError
from mad_eval.grading.kinds.choice import LETTERS, in_order, letter_back, listing
from mad_eval.protocols import Protocol, ProtocolError, check_protocol, resolve
from mad_eval.records import Question, Turn
from mad_eval.store.folder import RunStore

MMLU = "mmlu_professional_medicine"


def medprompt(tmp_path, shared_data, name="m", **settings):
    settings = {"agents": 5, "rounds": 0, "limit": 8, **settings}
    out = tmp_path / name
    api.run(protocol="medprompt", benchmark=MMLU, data_dir=str(shared_data), out=out, **settings)
    return out


def questions_of(folder):
    return {q.id: q for q in RunStore(folder).questions().values()}


def test_each_agent_reads_its_own_order_and_its_letter_is_mapped_back(tmp_path, shared_data):
    folder = medprompt(tmp_path, shared_data, model="sim:p0=0.6")
    questions = questions_of(folder)
    orders = set()
    for t in turns_of(folder):
        question, order = questions[t["question"]], t["option_order"]
        assert sorted(order) == list(range(len(question.options)))
        orders.add(tuple(order))
        view = in_order(question, order)
        read = view.gold if t["text"].endswith(f"{{{view.gold}}}") else None
        if read is not None:  # it wrote its view's gold letter: mapped back, the true gold
            assert t["answer"] == question.gold and t["correct"] is True
        assert t["correct"] == (t["answer"] == question.gold)
    assert len(orders) > 5  # the orders differ between agents and questions
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["rounds"][0]["vote_accuracy"] is not None


def test_a_sure_agent_is_always_right_through_any_order(tmp_path, shared_data):
    folder = medprompt(tmp_path, shared_data, model="sim:p0=1.0")
    turns = turns_of(folder)
    assert all(t["correct"] for t in turns)
    # Its reply names its view's letter, which is the gold's only where the order kept it.
    moved = [t for t in turns if t["answer"] not in t["text"][-3:]]
    assert moved


@pytest.mark.slow
def test_the_orders_come_from_the_seed_and_a_killed_run_resumes_them(tmp_path, shared_data):
    args = ["run", "--model", "sim:delay=0.01", "--protocol", "medprompt", "--agents", "5"]
    args += ["--rounds", "0", "--benchmark", MMLU, "--data-dir", str(shared_data)]
    args += ["--limit", "40", "--concurrency", "2"]
    proc = start([*args, "--out", "killed"], tmp_path)
    wait_for_lines(tmp_path / "killed" / "turns.jsonl", 30)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert mad_eval(*args, "--out", "killed", cwd=tmp_path).returncode == 0
    assert mad_eval(*args, "--out", "whole", cwd=tmp_path).returncode == 0
    key = lambda t: (t["run"], t["question"], t["round"], t["agent"])  # noqa: E731
    killed, whole = turns_of(tmp_path / "killed"), turns_of(tmp_path / "whole")
    assert without_timing(sorted(killed, key=key)) == without_timing(sorted(whole, key=key))
    other = mad_eval(*args, "--seed", "7", "--out", "seeded", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    assert {key(t): t["option_order"] for t in turns_of(tmp_path / "seeded")} != {
        key(t): t["option_order"] for t in whole
    }


def test_a_shuffled_turns_prompt_is_rebuilt_exactly(tmp_path, shared_data):
    folder = medprompt(tmp_path, shared_data, limit=3)
    store = RunStore(folder)
    manifest = store.manifest()
    replay = Replay(manifest, run_questions(folder, manifest))
    for line in (folder / "turns.jsonl").read_text().splitlines():
        turn = Turn.from_json(line)
        messages = replay.messages(turn, {})
        question = replay.questions[turn.question]
        shown = in_order(question, turn.option_order or [])
        assert listing(shown) in messages[-1]["content"]


def test_preference_questions_are_shuffled_too(tmp_path):
    data = write_all(tmp_path / "data")
    api.run(
        protocol="medprompt",
        benchmark="hh_rlhf",
        data_dir=str(data),
        agents=4,
        rounds=0,
        model="sim:p0=1.0",
        out=tmp_path / "r",
    )
    turns = turns_of(tmp_path / "r")
    assert all(t["correct"] for t in turns)
    assert {tuple(t["option_order"]) for t in turns} == {(0, 1), (1, 0)}


def test_shuffling_a_benchmark_without_options_is_one_sentence_before_any_request(tmp_path):
    with pytest.raises(UserError, match=r"has no options; use a choice or preference") as exc:
        api.run(protocol="medprompt", benchmark="arith", limit=3, out=tmp_path / "r")
    assert str(exc.value).count(". ") == 0
    assert not (tmp_path / "r" / "turns.jsonl").exists()


def test_an_order_that_is_no_permutation_is_refused_before_the_run():
    class Broken(Protocol):
        name, description = "broken", "returns a bad order"

        def sees(self, agent, n_agents):
            return []

        def option_order(self, agent, n_agents, options, seed):
            return [0, 0, 1, 2]

    with pytest.raises(ProtocolError, match=r"order of the option indices 0\.\.3"):
        check_protocol(Broken(), 3)


def test_mapping_back_inverts_the_view_for_every_order():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(2, 7)
        options = [f"option {i}" for i in range(n)]
        gold = rng.choice(LETTERS[:n])
        text = "Pick one.\n\n" + "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
        question = Question("q", text, gold, {"options": options}, "choice")
        order = rng.sample(range(n), n)
        view = in_order(question, order)
        assert view.options == [options[i] for i in order]
        assert letter_back(view.gold, order) == gold
        for letter in LETTERS[:n]:  # the option a view's letter names is the one mapped to
            assert (
                view.options[LETTERS.index(letter)]
                == options[LETTERS.index(letter_back(letter, order))]
            )
    assert letter_back(None, [1, 0]) is None and letter_back("Z", [1, 0]) == "Z"


def test_ensemble_refinement_aggregates_every_sample_once_then_ends(tmp_path):
    out = tmp_path / "r"
    api.run(protocol="ensemble_refinement", benchmark="arith", limit=6, agents=3, rounds=3, out=out)
    turns = turns_of(out)
    assert {t["round"] for t in turns} == {0, 1}
    assert all(t["sees"] == [0, 1, 2] for t in turns if t["round"] == 1)
    stops = RunStore(out).stops()
    assert len(stops) == 6 and all(s.round == 1 for s in stops.values())
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["debate"] == metrics["rounds"][1]["vote_accuracy"]
    manifest = json.loads((out / "manifest.json").read_text())
    text = json.dumps(manifest["prompt"])
    assert "Several reasoning paths were written" in text
    with pytest.raises(UserError, match=r"aggregates its samples in round 1.*rounds 1 or more"):
        api.run(protocol="ensemble_refinement", benchmark="arith", rounds=0, out=tmp_path / "z")


def test_solo_performance_prompting_is_one_request_that_casts_personas(tmp_path):
    sent = []
    choice = resolve("spp")
    assert choice.prompt_template == "spp"
    out = tmp_path / "r"
    api.run(protocol="spp", benchmark="arith", limit=4, agents=1, rounds=0, out=out)
    turns = turns_of(out)
    assert len(turns) == 4 and all(t["round"] == 0 and t["agent"] == 0 for t in turns)
    manifest = RunStore(out).manifest()
    replay = Replay(manifest, run_questions(out, manifest))
    for line in (out / "turns.jsonl").read_text().splitlines():
        sent.append(replay.messages(Turn.from_json(line), {}))
    assert all("personas" in m[-1]["content"] for m in sent)


def test_the_baselines_are_listed_by_their_papers():
    from mad_eval.protocols import catalogue

    rows = {name: description for name, description, _ in catalogue()}
    assert rows["medprompt"].startswith("Medprompt")
    assert rows["ensemble_refinement"].startswith("Ensemble Refinement")
    assert rows["spp"].startswith("Solo Performance Prompting")


def test_the_viewer_shows_each_agents_order_of_the_options(tmp_path, shared_data):
    folder = medprompt(tmp_path, shared_data, limit=2)
    site = api.view([folder], tmp_path / "site").parent
    recorded = {(t.question, t.agent): t.option_order for t in RunStore(folder).turns()}
    shown = {}
    for row in read_data(site, "index")["runs"][0]["debates"]:
        page = read_data(site, row["file"])
        for t in page["turns"]:
            shown[(row["question"], t["agent"])] = t["option_order"]
    assert shown == recorded
    assert all(order is not None for order in shown.values())
