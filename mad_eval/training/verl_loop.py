"""Self-debate RL on-policy in verl 0.9.1: an agent-loop manager whose workers sample each
prompt's first turn, pair its replies (training.onpolicy) and sample each pair's debate turn.

Set it on verl's V1 trainer (TransferQueue) with mad-eval's reward:

    python -m mad_eval.training.verl_main algorithm.adv_estimator=grpo \\
        data.train_files=prompts.parquet data.max_prompt_length=4096 \\
        data.max_response_length=1024 actor_rollout_ref.rollout.n=8 \\
        +actor_rollout_ref.rollout.agent.agent_loop_manager_class=\\
mad_eval.training.verl_loop.SelfDebateAgentLoopManager \\
        reward.custom_reward_function.path=pkg://mad_eval.training.rewards \\
        reward.custom_reward_function.name=compute_score \\
        +self_debate.rule=freq +self_debate.per_prompt=1 ...

(`mad-eval train prompts` writes the rows; self_debate keys: verl_config.SETTINGS.)

Per training prompt `uid`, verl runs rollout.n first-turn sessions stored under
`{uid}_{session}_0`. The session that settles last grades the group once, pairs it
(SelfDebate.step) and runs `self_debate.n` (default rollout.n) sessions of each pair's debate
row `j` under uid `{uid}_{j}`: keys `{uid}_{j}_{session}_0`, field `uid` `{uid}_{j}`. verl's
replay buffer groups trajectories by the key's first `_` part, so a prompt's debate turns are
sampled with its first turn; GRPO normalises by the field `uid`, so each debate context is its
own group. The prompt's status turns finished only when its debate sessions have settled.
Validation runs the first turn only.

Where verl's own rules read the whole prompt: a mini-batch is ppo_mini_batch_size x rollout.n
trajectories, so the debate turns add actor updates to a step; DAPO's group filter
(filter_groups) drops a prompt only when both turns' rewards are all equal. The overlong
penalty is verl's DAPO reward manager's (pairing reads correctness, never the reward); to pair
no truncated reply set +self_debate.max_length below data.max_response_length. Pairing draws
come from (self_debate.seed, step, the row's index and question id), so a resumed run pairs
the same replies the same way; +self_debate.authors=true pairs as the SDRL authors do
(training.sdrl), from a numpy RandomState per prompt.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
from verl.experimental.agent_loop import AgentLoopOutput
from verl.trainer.ppo.v1 import AgentLoopManagerTQ, AgentLoopWorkerTQ
from verl.trainer.ppo.v1.agent_loop_tq import _settle_session_tasks

from mad_eval.training.onpolicy import Group, NoAnswers
from mad_eval.training.verl_config import check_config, check_train_files, read_settings

# The fields of a verl row (RLHFDataset's item) that SelfDebate.step reads.
ROW_FIELDS = ("data_source", "ability", "reward_model", "extra_info")


@dataclass
class FirstTurn:
    """One training prompt's first-turn sessions as they settle."""

    n: int
    outputs: dict[int, AgentLoopOutput] = field(default_factory=dict)
    settled: int = 0
    failed: bool = False

    def settle(self, ok: bool) -> bool:
        """Count one session in; True for the last one."""
        self.settled += 1
        self.failed = self.failed or not ok
        return self.settled == self.n

    @property
    def complete(self) -> bool:
        return not self.failed and len(self.outputs) == self.n


def pairing_rng(
    seed: int, trajectory: dict[str, Any], extra_info: Any, authors: bool = False
) -> Any:
    """One prompt's pairing draws, the same whichever order the prompts settle in: a
    random.Random, or for the authors' setting a numpy RandomState (their draws' kind; their
    one stream across a step cannot be had while prompts pair concurrently)."""
    qid = extra_info.get("question_id", "") if isinstance(extra_info, dict) else ""
    key = f"{seed}/{trajectory['step']}/{trajectory['sample_index']}/{qid}"
    if authors:
        return np.random.RandomState(int.from_bytes(hashlib.sha256(key.encode()).digest()[:4]))
    return random.Random(key)


class SelfDebateWorker(AgentLoopWorkerTQ.__ray_actor_class__):  # type: ignore[name-defined,misc]
    """verl's TransferQueue agent-loop worker, plus each training prompt's debate turn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = read_settings(self.config)
        self.self_debate, self.debate_n = settings.debate, settings.n
        self.first_turns: dict[str, FirstTurn] = {}
        self.watch = self.self_debate.watch()  # over this worker's share of each step
        self.watched: dict[int, list[Group]] = {}  # each step's groups, until judged

    async def generate_sequences(self, batch: Any) -> None:
        """verl's; a training batch first judges the steps before it (AnswerWatch), here
        where an error reaches the trainer: one raised in a prompt's task only fails it."""
        if not ("validate" in batch and batch["validate"]):  # noqa: RUF019 (a TensorDict)
            self._judge(int(batch["global_steps"]))
        return await super().generate_sequences(batch)

    async def _run_prompt(
        self, prompt: dict, sampling_params: dict, trajectory: dict, trace: bool = False
    ) -> None:
        """verl's per-prompt run; a training prompt's sessions are watched (FirstTurn)."""
        if trajectory["validate"]:
            return await super()._run_prompt(prompt, sampling_params, trajectory, trace)
        uid = prompt["uid"]
        n = int(prompt.get("__rollout_n__", self.config.actor_rollout_ref.rollout.n))
        self.first_turns[uid] = FirstTurn(n)
        try:
            await super()._run_prompt(prompt, sampling_params, trajectory, trace)
        finally:
            self.first_turns.pop(uid, None)

    async def _run_agent_loop(
        self,
        sampling_params: dict[str, Any],
        trajectory: dict[str, Any],
        *,
        agent_name: str,
        trace: bool = True,
        **kwargs: Any,
    ) -> Any:
        """One session; the first turn's last one to settle then runs the debate turn, so
        verl's _run_prompt marks the prompt finished only after it."""
        run = super()._run_agent_loop
        group = None if trajectory["validate"] else self.first_turns.get(kwargs["uid"])
        if group is None:  # validation, or a debate session
            return await run(
                sampling_params, trajectory, agent_name=agent_name, trace=trace, **kwargs
            )
        ok = False
        try:
            result = await run(
                sampling_params, trajectory, agent_name=agent_name, trace=trace, **kwargs
            )
            ok = True
        finally:
            last = group.settle(ok)
        if last and group.complete:
            await self._debate(group, sampling_params, trajectory, agent_name, trace, kwargs)
        return result

    async def _agent_loop_postprocess(self, output: Any, validate: bool, **kwargs: Any) -> Any:
        """verl's postprocess (into TransferQueue); a first-turn session's output is kept."""
        result = await super()._agent_loop_postprocess(output, validate, **kwargs)
        group = None if validate else self.first_turns.get(kwargs["uid"])
        outputs = output if isinstance(output, list) else [output]
        if group is not None and outputs:
            group.outputs[int(kwargs["session_id"])] = outputs[-1]
        return result

    async def _debate(
        self,
        group: FirstTurn,
        sampling_params: dict[str, Any],
        trajectory: dict[str, Any],
        agent_name: str,
        trace: bool,
        kwargs: dict[str, Any],
    ) -> None:
        """Pair the first turn's replies and sample each pair's debate turn as its own group."""
        outputs = [group.outputs[s] for s in range(group.n)]
        texts = [self.tokenizer.decode(o.response_ids, skip_special_tokens=True) for o in outputs]
        lengths = [len(o.response_ids) for o in outputs]
        row = {key: kwargs.get(key) for key in ROW_FIELDS}
        debate = self.self_debate
        rng = pairing_rng(debate.seed, trajectory, row["extra_info"], debate.authors)
        # Grading waits on math-verify's worker processes: off the event loop.
        step = await asyncio.to_thread(self.self_debate.step, row, texts, lengths, rng)
        self.watched.setdefault(int(trajectory["step"]), []).append(step)
        fields = {key: value for key, value in kwargs.items() if key != "session_id"}
        tasks = [
            asyncio.create_task(
                self._run_agent_loop(
                    sampling_params,
                    trajectory,
                    agent_name=agent_name,
                    trace=trace,
                    **{
                        **fields,
                        "uid": f"{kwargs['uid']}_{j}",
                        "raw_prompt": debate["prompt"],
                        # RLHFDataset keeps the row's prompt column beside raw_prompt
                        **({"prompt": debate["prompt"]} if "prompt" in fields else {}),
                        "extra_info": debate["extra_info"],
                        "session_id": session,
                    },
                )
            )
            for j, debate in enumerate(step.debates)
            for session in range(self.debate_n)
        ]
        errors = await _settle_session_tasks(tasks)
        if errors:
            raise errors[0]

    def _judge(self, current: int) -> None:
        for number in sorted(n for n in self.watched if n < current):
            warning = self.watch.step(self.watched.pop(number))
            if warning:
                warnings.warn(warning, NoAnswers, stacklevel=2)


SelfDebateAgentLoopWorker = ray.remote(SelfDebateWorker)


class SelfDebateAgentLoopManager(AgentLoopManagerTQ):
    """verl's TransferQueue agent-loop manager with self-debate workers; set it as
    `+actor_rollout_ref.rollout.agent.agent_loop_manager_class`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        check_config(self.config)  # verl's own main may have started without verl_main
        check_train_files(self.config)
        self.agent_loop_workers_class = SelfDebateAgentLoopWorker
