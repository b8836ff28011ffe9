"""Runs every (run, question) debate at once under the backend's concurrency limit.

There is no global round barrier: round t of one question starts as soon as round t-1 of
that question is done, so a slow question never idles the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from mad_eval import grading
from mad_eval.backends import Backend, Request, Sampling
from mad_eval.config import RunConfig
from mad_eval.prompts import Messages, debate_prompt, question_prompt
from mad_eval.protocols import Protocol
from mad_eval.records import Question, Turn, derive_seed, messages_hash

TurnKey = tuple[int, str, int, int]


class Engine:
    def __init__(
        self,
        config: RunConfig,
        protocol: Protocol,
        backend: Backend,
        done: Mapping[TurnKey, Turn],
        on_turn: Callable[[Turn], None],
        on_progress: Callable[[], None] = lambda: None,
    ):
        if config.max_tokens is None:
            raise ValueError("resolve max_tokens (the benchmark's budget) before running")
        self.config = config
        self.protocol = protocol
        self.backend = backend
        self.done = done
        self.on_turn = on_turn
        self.on_progress = on_progress

    async def run(self, questions: list[Question]) -> None:
        await asyncio.gather(
            *(self.debate(run, q) for run in range(self.config.runs) for q in questions)
        )

    async def debate(self, run: int, question: Question) -> list[Turn]:
        """All rounds of one debate; returns the last round's turns."""
        previous: list[Turn] = []
        for round_ in range(self.config.rounds + 1):
            previous = await asyncio.gather(
                *(
                    self.turn(run, question, round_, agent, previous)
                    for agent in range(self.config.agents)
                )
            )
        return previous

    async def turn(
        self, run: int, question: Question, round_: int, agent: int, previous: list[Turn]
    ) -> Turn:
        key = (run, question.id, round_, agent)
        if key in self.done:
            self.on_progress()
            return self.done[key]

        sees = self.visible(agent, previous)
        messages = self.prompt(question, agent, sees, previous)
        config = self.config
        sampling = Sampling(
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_tokens,  # type: ignore[arg-type]
            seed=derive_seed(config.seed, run, question.id, round_, agent),
        )
        state = previous[agent].state if previous else None
        generation = await self.backend.generate(Request(messages, sampling, question, state))
        answer, correct = None, None
        if generation.error is None:
            grade = await asyncio.to_thread(grading.grade, generation.text or "", question.gold)
            answer, correct = grade.answer, grade.correct

        turn = Turn(
            run=run,
            question=question.id,
            round=round_,
            agent=agent,
            model=self.backend.spec,
            seed=sampling.seed,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            messages_hash=messages_hash(messages),
            sees=sees,
            text=generation.text,
            answer=answer,
            correct=correct,
            finish_reason=generation.finish_reason,
            prompt_tokens=generation.prompt_tokens,
            completion_tokens=generation.completion_tokens,
            latency=round(generation.latency, 4),
            error=generation.error,
            state=generation.state,
        )
        self.on_turn(turn)
        self.on_progress()
        return turn

    def visible(self, agent: int, previous: list[Turn]) -> list[int]:
        """Whose previous-round turns go into the prompt: the protocol's choice, less failures."""
        if not previous:
            return []
        return [j for j in self.protocol.sees(agent, self.config.agents) if not previous[j].failed]

    @staticmethod
    def prompt(question: Question, agent: int, sees: list[int], previous: list[Turn]) -> Messages:
        if not sees:
            return question_prompt(question.text)
        responses = [("you" if j == agent else f"agent {j}", previous[j].text or "") for j in sees]
        return debate_prompt(question.text, responses)
