"""DAPO's overlong penalty for verl users: verl 0.9.1's own DAPO reward manager with mad-eval's
compute_score, set by the keys docs/how-to/train-with-self-debate.md gives, loaded by verl's
reward-loop worker from verl's composed config, scoring replies (right/wrong, below, inside and
at the end of the buffer) of first-turn and debate-turn rows. The penalty is verl's;
compute_score grades only."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")  # verl's reward loop imports it

import numpy as np
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from tensordict import TensorDict
from tiny_model import build_tiny_model
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.experimental.reward_loop.reward_manager import DAPORewardManager
from verl.protocol import DataProto

from mad_eval.records import Question
from mad_eval.training import Overlong, compute_score, prompt_rows
from mad_eval.training.onpolicy import SelfDebate
from mad_eval.training.verl_config import MANAGER, check_config

pytestmark = pytest.mark.train

SELF_DEBATE = [
    f"+actor_rollout_ref.rollout.agent.agent_loop_manager_class={MANAGER}",
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.rollout.n=4",
    "+self_debate.rule=freq",
]


def dapo_keys(max_resp_len: int, buffer: int, factor: float, log: bool = False) -> list[str]:
    """The docs' keys (docs/how-to/train-with-self-debate.md): verl's DAPO reward manager
    around mad-eval's compute_score."""
    return [
        "reward.reward_manager.name=dapo",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
        f"+reward.reward_kwargs.overlong_buffer_cfg.len={buffer}",
        f"+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor={factor}",
        f"+reward.reward_kwargs.overlong_buffer_cfg.log={str(log).lower()}",
        f"+reward.reward_kwargs.max_resp_len={max_resp_len}",
        "reward.custom_reward_function.path=pkg://mad_eval.training.rewards",
        "reward.custom_reward_function.name=compute_score",
    ]


def verl_config(*overrides: str):
    """verl 0.9.1's own ppo_trainer config with these overrides, resolved as its main does."""
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose("ppo_trainer", overrides=list(overrides))
    OmegaConf.resolve(config)
    return config


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen"))


def reward_worker(config) -> RewardLoopWorker:
    """verl's reward-loop worker (un-remoted), built in the running event loop as Ray does:
    it loads the tokenizer, the custom reward function and the reward manager itself."""
    return RewardLoopWorker(config, reward_router_address=None)


def test_the_docs_keys_pass_the_check_and_build_verls_dapo_manager(model):
    config = verl_config(
        *SELF_DEBATE,
        *dapo_keys(8192, 2048, 1.0),
        "data.max_response_length=8192",
        "+self_debate.max_length=2048",  # the paper pairs 2,048-token replies of 8,192
        "data.max_prompt_length=6144",
        f"actor_rollout_ref.model.path={model}",
    )
    assert check_config(config) is not None

    async def build() -> DAPORewardManager:
        return reward_worker(config).reward_manager

    manager = asyncio.run(build())
    assert type(manager) is DAPORewardManager
    assert (manager.max_resp_len, manager.overlong_buffer_cfg.len) == (8192, 2048)
    assert manager.overlong_buffer_cfg.penalty_factor == 1.0
    assert manager.compute_score.args[0] is compute_score  # verl's partial around ours


MAX, BUFFER = 64, 16
LENGTHS = (20, MAX - BUFFER, MAX - BUFFER + 8, MAX)  # below, at the start, inside, at the end


def rows() -> tuple[dict, dict]:
    """A first-turn row and a debate-turn row of the same question (gold 5)."""
    (row,) = prompt_rows([Question("q1", "What is 2 + 3?", "5")], "math500", "math")
    group = SelfDebate().step(row, ["\\boxed{5}", "so \\boxed{5}", "\\boxed{5}", "\\boxed{7}"])
    debate = group.debates[0]
    assert debate["extra_info"]["turn"] == "debate"
    return row, debate


def reply_ids(tokenizer, answer: str, length: int) -> list[int]:
    """A reply of exactly `length` tokens, its end-of-turn token included (as verl's agent
    loop stores it), ending with the boxed answer."""
    body = [*tokenizer.encode(f" The answer is \\boxed{{{answer}}}"), tokenizer.eos_token_id]
    filler = tokenizer.encode(" so") * length
    ids = filler[: length - len(body)] + body
    assert len(ids) == length
    return ids


def batch(tokenizer, items: list[tuple[dict, list[int]]]) -> DataProto:
    """Rows and replies laid out as verl's trainer hands them to the reward loop: prompts
    left-padded, responses right-padded, the attention mask marking real tokens."""
    prompts = [
        tokenizer.encode(tokenizer.apply_chat_template(row["prompt"], tokenize=False,
                                                       add_generation_prompt=True))
        for row, _ in items
    ]  # fmt: skip
    width_p, width_r = max(map(len, prompts)), max(len(r) for _, r in items)
    pad = tokenizer.pad_token_id
    p_ids, r_ids, masks = [], [], []
    for prompt, (_, reply) in zip(prompts, items, strict=True):
        p_ids.append([pad] * (width_p - len(prompt)) + prompt)
        r_ids.append(reply + [pad] * (width_r - len(reply)))
        masks.append([0] * (width_p - len(prompt)) + [1] * (len(prompt) + len(reply))
                     + [0] * (width_r - len(reply)))  # fmt: skip
    prompts_t, responses_t = torch.tensor(p_ids), torch.tensor(r_ids)
    tensors = {
        "prompts": prompts_t,
        "responses": responses_t,
        "input_ids": torch.cat([prompts_t, responses_t], dim=1),
        "attention_mask": torch.tensor(masks),
    }

    def column(key: str) -> np.ndarray:
        out = np.empty(len(items), dtype=object)
        out[:] = [row[key] for row, _ in items]
        return out

    return DataProto(
        batch=TensorDict(tensors, batch_size=len(items)),
        non_tensor_batch={k: column(k) for k in ("data_source", "reward_model", "extra_info")},
    )


@pytest.mark.parametrize(("factor", "log"), [(1.0, False), (0.5, True)])
def test_verls_dapo_manager_adds_the_overlong_penalty_to_mad_evals_grade(model, factor, log):
    config = verl_config(
        *SELF_DEBATE,
        *dapo_keys(MAX, BUFFER, factor, log),
        f"data.max_response_length={MAX}",
        "data.max_prompt_length=512",
        f"actor_rollout_ref.model.path={model}",
    )
    assert check_config(config) is not None
    first, debate = rows()
    cases = [(row, answer, n) for row in (first, debate) for answer in "57" for n in LENGTHS]

    async def score() -> tuple[list[dict], DataProto]:
        worker = reward_worker(config)
        tokenizer = worker.input_tokenizer
        data = batch(tokenizer, [(row, reply_ids(tokenizer, a, n)) for row, a, n in cases])
        return await worker.compute_score_batch(data), data

    results, data = asyncio.run(score())
    overlong = Overlong(MAX, BUFFER, factor)
    expected = [(1.0 if answer == "5" else -1.0) + overlong.penalty(n) for _, answer, n in cases]
    assert [float(r["reward_score"]) for r in results] == pytest.approx(expected)
    assert min(expected) == pytest.approx(-1.0 - factor)  # a wrong reply at the end of the buffer
    for (_, answer, n), result in zip(cases, results, strict=True):
        info = result["reward_extra_info"]
        assert info["acc"] == (1.0 if answer == "5" else 0.0)  # the grade, never penalised
        assert info["pred"] == answer
        # verl copies compute_score's dict as it came: its `score` key is the unpenalised one
        assert info["score"] == (1.0 if answer == "5" else -1.0)
        logged = {"overlong_reward", "overlong"} if log else set()
        assert set(info) == {"score", "acc", "pred", *logged}
        if log:
            assert float(info["overlong_reward"]) == pytest.approx(overlong.penalty(n))
            assert bool(info["overlong"]) == (n > MAX - BUFFER)
    # the debate turn's row scores as the first turn's does, reply for reply
    half = len(cases) // 2
    scores = [float(r["reward_score"]) for r in results]
    assert scores[:half] == scores[half:]
    # the trainer's token-level reward: the score on each reply's last real token
    rm_scores = DAPORewardManager.assemble_rm_scores(data, [r["reward_score"] for r in results])
    assert rm_scores.sum(dim=1).tolist() == pytest.approx(expected)
    last = [n - 1 for *_, n in cases]
    assert rm_scores[torch.arange(len(cases)), last].tolist() == pytest.approx(expected)
