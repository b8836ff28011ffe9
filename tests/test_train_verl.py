"""The verl recipe for self-debate RL against the pinned verl (0.9.1): its own ppo_trainer
config composed with mad-eval's keys, and the agent-loop worker run on real dataset rows
through verl's own single-turn agent loop and TransferQueue postprocess, with a scripted LLM
server and an in-memory TransferQueue. A full training step needs GPUs and a rollout server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

import numpy as np
import torch
import verl.trainer.ppo.v1.agent_loop_tq as agent_loop_tq
import verl.trainer.ppo.v1.replay_buffer as replay_buffer
import verl.utils.tensordict_utils as tu
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from tiny_model import build_tiny_model
from verl.protocol import DataProto
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

from mad_eval.records import Question
from mad_eval.training import TrainingError, compute_score, row_pair_prompt
from mad_eval.training.export import prompt_rows, write_rows
from mad_eval.training.verl_config import MANAGER, check_config
from mad_eval.training.verl_loop import SelfDebateAgentLoopManager, SelfDebateWorker

pytestmark = pytest.mark.train

RECIPE = [
    f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER}",
    "reward.custom_reward_function.path=pkg://mad_eval.training.rewards",
    "reward.custom_reward_function.name=compute_score",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.rollout.val_kwargs.n=2",
    "actor_rollout_ref.rollout.name=vllm",
    "data.max_prompt_length=2048",
    "data.max_response_length=512",
    "+self_debate.rule=freq",
    "+self_debate.per_prompt=2",
    "+self_debate.n=3",
]
MARK = "reply-mark"  # in every scripted first-turn reply, so a debate prompt is recognised


def verl_config(*overrides: str, recipe: list[str] = RECIPE):
    """verl 0.9.1's own ppo_trainer config with these overrides (later ones win)."""
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=[*recipe, *overrides])


def without(prefix: str) -> list[str]:
    return [o for o in RECIPE if not o.lstrip("+").startswith(prefix)]


def test_the_recipe_passes_on_verls_own_config():
    settings = check_config(verl_config())
    assert (settings.debate.rule, settings.debate.per_prompt, settings.n) == ("freq", 2, 3)
    assert check_config(verl_config(recipe=without("self_debate.n"))).n == 4  # rollout.n


@pytest.mark.parametrize(
    ("overrides", "recipe", "says"),
    [
        (
            ["custom_reward_function.path=/x/rewards.py"],
            RECIPE,
            "ignores the top-level key custom_reward_function.path (it would fall back "
            "silently); set reward.custom_reward_function.path instead",
        ),
        (["reward_model.reward_manager=dapo"], RECIPE, "set reward.reward_manager.name instead"),
        ([], without("reward.custom_reward_function"), "need mad-eval's verl reward"),
        (["reward.custom_reward_function.name=grpo_reward"], RECIPE, "name='grpo_reward'"),
        (["actor_rollout_ref.rollout.n=1"], RECIPE, "actor_rollout_ref.rollout.n to 2 or more"),
        (["data.max_prompt_length=1024"], RECIPE, "data.max_prompt_length (1024) must be above"),
        (
            ["actor_rollout_ref.rollout.prompt_length=1000"],
            RECIPE,
            "actor_rollout_ref.rollout.prompt_length (1000) must be above 2 x",
        ),
        (["+self_debate.pairs=2"], RECIPE, "unknown self_debate setting pairs"),
        (["+self_debate.rule=best"], without("self_debate.rule"), "self_debate.rule must be"),
        (["self_debate.per_prompt=0"], RECIPE, "self_debate.per_prompt must be an integer of 1"),
        (["self_debate.n=1"], RECIPE, "self_debate.n must be an integer of 2 or more"),
        (["trainer.use_v1=false"], RECIPE, "set trainer.use_v1=true"),
        ([], without("actor_rollout_ref.rollout.agent"), "read only by the self-debate"),
    ],
)
def test_each_config_verl_would_misread_is_refused_in_one_sentence(overrides, recipe, says):
    with pytest.raises(TrainingError, match=r"^[^\n]*$") as caught:
        check_config(verl_config(*overrides, recipe=recipe))
    assert says in str(caught.value)


def test_an_untested_verl_needs_the_explicit_allow_key():
    with pytest.raises(TrainingError, match=r"tested with verl 0\.9\.1 only, found 0\.10\.0"):
        check_config(verl_config(), version="0.10.0")
    allowed = verl_config("+self_debate.allow_untested_verl=true")
    assert check_config(allowed, version="0.10.0") is not None


def test_the_manager_checks_the_config_and_rows_at_init(rows, tmp_path):
    """A user may start verl's own main: the manager refuses the same configs and rows."""
    manager = SelfDebateAgentLoopManager(
        config=verl_config(f"data.train_files={rows}"), llm_client=None
    )
    assert manager.agent_loop_workers_class.__ray_actor_class__ is SelfDebateWorker
    old = tmp_path / "old.jsonl"
    old.write_text('{"reward_model": {"ground_truth": "5"}, "extra_info": {"kind": "math"}}\n')
    with pytest.raises(TrainingError, match=r"old\.jsonl line 1: the row's extra_info lacks"):
        SelfDebateAgentLoopManager(config=verl_config(f"data.train_files={old}"), llm_client=None)
    with pytest.raises(TrainingError, match=r"rollout\.n to 2 or more"):
        SelfDebateAgentLoopManager(
            config=verl_config("actor_rollout_ref.rollout.n=1"), llm_client=None
        )


@pytest.mark.parametrize("printing", [[], ["--cfg", "job"]])
def test_verl_main_stops_on_an_ignored_key_before_ray_starts(tmp_path, printing):
    """Also when hydra is asked only to print the config, which it does without the task."""
    done = subprocess.run(
        [sys.executable, "-m", "mad_eval.training.verl_main", *RECIPE,
         "custom_reward_function.path=/x/rewards.py", f"hydra.run.dir={tmp_path}", *printing],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "error: verl 0.9.1's trainer ignores the top-level key custom_reward_function" in (
        done.stderr
    )
    assert "ray init" not in done.stdout + done.stderr


def test_verl_main_hands_a_checked_config_to_verls_main(rows, tmp_path, monkeypatch):
    """In process, with verl's main replaced: it gets the config composed from the overrides."""
    from verl.trainer import main_ppo

    from mad_eval.training import verl_main

    got = []
    monkeypatch.setattr(main_ppo, "main", SimpleNamespace(__wrapped__=got.append))
    argv = [*RECIPE, f"data.train_files={rows}", f"hydra.run.dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", ["verl_main", *argv])
    verl_main.main()
    (config,) = got
    assert config.actor_rollout_ref.rollout.agent.agent_loop_manager_class == MANAGER
    assert (config.self_debate.per_prompt, config.actor_rollout_ref.rollout.n) == (2, 4)
    assert config.trainer.use_v1 is True  # verl's own defaults are there too


# --- the agent-loop worker on a fake batch --------------------------------------------------


class FakeTQ:
    """TransferQueue's calls the worker makes, recorded in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, dict]] = []

    def init(self, *args, **kwargs) -> None:
        pass

    async def async_kv_put(self, **kwargs) -> None:
        self.log.append(("status", kwargs))

    async def async_kv_batch_put(self, **kwargs) -> None:
        self.log.append(("trajectories", kwargs))

    def statuses(self) -> dict[str, list[tuple[int, str]]]:
        """uid -> [(position in the log, status)]."""
        out: dict[str, list[tuple[int, str]]] = {}
        for i, (kind, call) in enumerate(self.log):
            if kind == "status":
                out.setdefault(call["key"], []).append((i, call["tag"]["status"]))
        return out

    def trajectories(self) -> dict[str, tuple[int, dict, dict, str]]:
        """key -> (position in the log, fields, tag, partition)."""
        out = {}
        for i, (kind, call) in enumerate(self.log):
            if kind == "trajectories":
                names = call["fields"].keys()  # iterating a TensorDict gives rows, not keys
                for j, key in enumerate(call["keys"]):
                    fields = {name: call["fields"][name][j] for name in names}
                    out[key] = (i, fields, call["tags"][j], call["partition_id"])
        return out


class ScriptedServer:
    """verl's LLM server client: each first-turn prompt gets `first` in turn (a session that
    finds `fail` raises), a debate prompt gets `debate`."""

    def __init__(self, tokenizer, first: list[str], debate: str = "\\boxed{5}", fail: int = -1):
        self.tokenizer, self.first, self.debate, self.fail = tokenizer, first, debate, fail
        self.seen: dict[str, int] = {}

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        prompt = self.tokenizer.decode(prompt_ids)
        if MARK in prompt:
            reply = self.debate
        else:
            turn = self.seen[prompt] = self.seen.get(prompt, -1) + 1
            if turn == self.fail:
                raise RuntimeError("the server dropped this request")
            reply = self.first[turn % len(self.first)]
        return TokenOutput(token_ids=self.tokenizer.encode(reply + "<|im_end|>"))


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen"))


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    questions = [Question("q1", "What is 2 + 3?", "5"), Question("q2", "What is 3 + 4?", "7")]
    out = tmp_path_factory.mktemp("rows") / "prompts.parquet"
    write_rows(prompt_rows(questions, "math500", "math"), out)
    return out


@pytest.fixture
def tq(monkeypatch) -> FakeTQ:
    fake = FakeTQ()
    monkeypatch.setattr(agent_loop_tq, "tq", fake)
    return fake


@pytest.fixture
def worker(model, tq) -> SelfDebateWorker:
    """The un-remoted worker, built by verl's own __init__ from verl's composed config."""
    config = verl_config(f"actor_rollout_ref.model.path={model}")
    OmegaConf.resolve(config)
    return SelfDebateWorker(config, None, None, None)


def run_batch(
    worker, rows: Path, server: ScriptedServer, validate: bool = False, step: int = 1
) -> list[str]:
    """One batch from verl's RLHFDataset through the worker, as the trainer submits it;
    returns the prompts' uids."""
    dataset = RLHFDataset(str(rows), worker.tokenizer, worker.config.data)
    batch = collate_fn([dataset[i] for i in range(len(dataset))])
    batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(dataset))], dtype=object)
    batch = tu.get_tensordict(batch)
    tu.assign_non_tensor_data(batch, "global_steps", step)
    if validate:
        tu.assign_non_tensor_data(batch, "validate", True)
    worker.llm_client = server

    async def go() -> None:
        await worker.generate_sequences(batch)
        while worker.background_tasks:
            await asyncio.gather(*list(worker.background_tasks))

    asyncio.run(go())
    return list(batch["uid"])


def text(worker, fields: dict) -> str:
    return worker.tokenizer.decode(fields["responses"].tolist(), skip_special_tokens=True)


FIRST = [f"{MARK} so \\boxed{{5}}", f"{MARK} \\boxed{{5}}", f"{MARK} it is \\boxed{{5}}",
         f"{MARK} \\boxed{{7}}"]  # fmt: skip


def test_a_training_prompt_gets_its_debate_turns_as_groups_of_their_own(worker, rows, tq):
    uids = run_batch(worker, rows, ScriptedServer(worker.tokenizer, FIRST))
    stored, statuses = tq.trajectories(), tq.statuses()
    for uid in uids:
        first = {s: stored[f"{uid}_{s}_0"] for s in range(4)}
        assert all(f[1]["uid"] == uid and f[3] == "train" for f in first.values())
        texts = [text(worker, first[s][1]) for s in range(4)]
        assert sorted(texts) == sorted(FIRST)
        row = {k: first[0][1][k] for k in ("data_source", "reward_model", "extra_info")}
        debate_keys = sorted(k for k in stored if k.startswith(f"{uid}_") and k.count("_") == 3)
        assert debate_keys == [f"{uid}_{j}_{s}_0" for j in range(2) for s in range(3)]
        for key in debate_keys:
            _, fields, _, partition = stored[key]
            j = key.split("_")[1]
            assert fields["uid"] == f"{uid}_{j}" and partition == "train"
            own, partner = (int(s.rsplit(" ", 1)[1]) for s in fields["extra_info"]["sources"])
            assert fields["raw_prompt"] == row_pair_prompt(row, texts[own], texts[partner])
            assert fields["extra_info"]["turn"] == "debate"
            # frequency pairing: the most common answer (5) with the second (7), never 5 with 5
            assert sorted(fields["extra_info"]["answers"]) == ["5", "7"]
            assert text(worker, fields) == "\\boxed{5}"
            # verl's reward loop scores it from the trajectory's own fields
            gold = fields["reward_model"]["ground_truth"]
            score = compute_score(fields["data_source"], "\\boxed{5}", gold, fields["extra_info"])
            assert score["acc"] == (1.0 if gold == "5" else 0.0)
        # verl's agent loop tokenized the debate prompt itself, not the first turn's
        debate_prompt = worker.tokenizer.decode(stored[debate_keys[0]][1]["prompts"].tolist())
        assert texts[0] in debate_prompt or texts[1] in debate_prompt or MARK in debate_prompt
        # finished only after every trajectory, debate ones included, was put
        assert [s for _, s in statuses[uid]] == ["running", "finished"]
        last_put = max(stored[k][0] for k in stored if k.startswith(uid))
        assert statuses[uid][-1][0] > last_put


def test_validation_samples_the_first_turn_only(worker, rows, tq):
    uids = run_batch(worker, rows, ScriptedServer(worker.tokenizer, FIRST), validate=True)
    stored = tq.trajectories()
    assert sorted(stored) == sorted(f"{uid}_{s}_0" for uid in uids for s in range(2))
    assert {partition for *_, partition in stored.values()} == {"val"}
    assert all([s for _, s in v] == ["running", "finished"] for v in tq.statuses().values())


def test_a_group_that_all_agrees_finishes_without_a_debate(worker, rows, tq):
    agree = [f"{MARK} \\boxed{{5}}"] * 4
    uids = run_batch(worker, rows, ScriptedServer(worker.tokenizer, agree))
    stored = tq.trajectories()
    assert sorted(stored) == sorted(f"{uid}_{s}_0" for uid in uids for s in range(4))
    assert all([s for _, s in v] == ["running", "finished"] for v in tq.statuses().values())


def test_the_authors_setting_pairs_an_unparsed_reply_as_an_answer(model, rows, tq):
    """Three 5s and a reply with no answer: mad-eval's own pairing finds one answer and no
    debate; under +self_debate.authors=true the unparsed reply is an answer of its own, so each
    prompt gets one debate context pairing a 5 with it."""
    config = verl_config(
        f"actor_rollout_ref.model.path={model}", "self_debate.per_prompt=1",
        "+self_debate.authors=true",
    )  # fmt: skip
    OmegaConf.resolve(config)
    authors = SelfDebateWorker(config, None, None, None)
    assert authors.self_debate.authors
    silent = [f"{MARK} \\boxed{{5}}", f"{MARK} so \\boxed{{5}}", f"{MARK} \\boxed{{5}} it is",
              f"{MARK} no idea"]  # fmt: skip
    uids = run_batch(authors, rows, ScriptedServer(authors.tokenizer, silent))
    stored = tq.trajectories()
    for uid in uids:
        debate_keys = sorted(k for k in stored if k.startswith(f"{uid}_") and k.count("_") == 3)
        gold = stored[f"{uid}_0_0"][1]["reward_model"]["ground_truth"]
        if gold != "5":  # the 7 question: every reply wrong, nothing to pair
            assert debate_keys == []
            continue
        assert debate_keys == [f"{uid}_0_{s}_0" for s in range(3)]
        answers = stored[debate_keys[0]][1]["extra_info"]["answers"]
        assert sorted(map(str, answers)) == ["5", "None"]
    with pytest.raises(TrainingError, match="per_prompt must be 1"):
        check_config(verl_config("+self_debate.authors=true"))


def test_a_model_that_never_answers_is_warned_of_then_stopped(worker, rows, tq):
    """Each step is judged when the worker sees the next one start: step 1's silence is
    warned of at step 2, and with stop_unparsed=2, step 2's stops the run at step 3."""
    from mad_eval.training.onpolicy import AnswerWatch, NoAnswers

    worker.watch = AnswerWatch(limit=2)
    silent = ScriptedServer(worker.tokenizer, [f"{MARK} no idea"] * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoAnswers)
        run_batch(worker, rows, silent, step=1)
    with pytest.warns(NoAnswers, match=r"no first-turn reply of this step \(8 replies\)"):
        run_batch(worker, rows, silent, step=2)
    with pytest.raises(TrainingError, match="of the last 2 steps gave an answer"):
        run_batch(worker, rows, silent, step=3)


def test_a_failed_first_turn_session_fails_its_prompt_with_no_debate(worker, rows, tq):
    uids = run_batch(worker, rows, ScriptedServer(worker.tokenizer, FIRST, fail=2))
    stored = tq.trajectories()
    assert not [k for k in stored if k.count("_") == 3]
    assert {uid: [s for _, s in tq.statuses()[uid]][-1] for uid in uids} == dict.fromkeys(
        uids, "failure"
    )


def test_verl_samples_the_debate_turn_with_its_prompt_and_normalises_it_apart(
    worker, rows, tq, monkeypatch
):
    """The keys the worker wrote, read back by verl's own replay buffer and GRPO advantage."""
    uids = run_batch(worker, rows, ScriptedServer(worker.tokenizer, FIRST))
    stored = tq.trajectories()
    tags = {k: v[2] for k, v in stored.items()}
    for uid in uids:
        tags[uid] = {"is_prompt": True, "status": "finished", "global_steps": 1}
    monkeypatch.setattr(replay_buffer.tq, "kv_list", lambda *a, **k: {"train": dict(tags)})
    monkeypatch.setattr(replay_buffer.tq, "kv_clear", lambda *a, **k: None)
    buffer = replay_buffer.ReplayBuffer("sync", None, None, "drop", {})
    batch, _ = buffer.sample(global_steps=1, partition_id="train", batch_size=1)
    (uid,) = {key.split("_")[0] for key in batch.keys}
    assert sorted(batch.keys) == sorted(k for k in stored if k.startswith(uid))  # both turns

    # rewards: first turn right, right, right, wrong; every debate reply right
    first_right = {s: "\\boxed{5}" in text(worker, stored[f"{uid}_{s}_0"][1]) for s in range(4)}
    rewards = [
        (1.0 if first_right[int(k.split("_")[1])] else -1.0) if k.count("_") == 2 else 1.0
        for k in batch.keys
    ]
    data = DataProto.from_dict(
        tensors={
            "response_mask": torch.ones(len(rewards), 1, dtype=torch.int64),
            "token_level_rewards": torch.tensor(rewards).unsqueeze(1),
        },
        non_tensors={"uid": np.array([stored[k][1]["uid"] for k in batch.keys], dtype=object)},
    )
    out = compute_advantage_for_multi_trajectories(data, batch.keys, "grpo", num_repeat=4)
    advantages = dict(zip(batch.keys, out.batch["advantages"][:, 0].tolist(), strict=True))
    debate = [a for k, a in advantages.items() if k.count("_") == 3]
    first = [advantages[f"{uid}_{s}_0"] for s in range(4)]
    assert len(debate) == 6 and all(a == 0.0 for a in debate)  # all right: no signal, alone
    assert sum(first) == pytest.approx(0.0, abs=1e-5) and min(first) < 0 < max(first)
