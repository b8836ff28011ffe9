"""From command-line choices to a ready run: the protocol, the team, its backends and context
budgets, all checked before the first request."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mad_eval.backends import Backend, Guarded, make_backend
from mad_eval.benchmarks import BenchmarkSpec, load_questions
from mad_eval.config import DEFAULT_MODEL, ConfigError, RunConfig
from mad_eval.context import Fitter, TokenCounter, load_counter
from mad_eval.engine import Seat
from mad_eval.protocols import Choice, check_protocol, resolve
from mad_eval.records import Question
from mad_eval.roster import Agent, Entry, entries_from_dicts, load_roster_file, parse_agent_option
from mad_eval.store import redact

DEFAULT_AGENTS = 5


@dataclass
class Plan:
    config: RunConfig
    choice: Choice
    spec: BenchmarkSpec
    questions: list[Question]
    team: list[Agent]
    backends: dict[tuple[str, str | None], Backend]
    fitters: dict[int, Fitter]  # by agent index
    warnings: list[str] = field(default_factory=list)

    async def seats(self) -> list[Seat]:
        """Check every backend, then give each agent its prompt budget: the model's context
        length (given, or reported by the server) minus its max tokens."""
        for backend in self.backends.values():
            await backend.check()
        seats = []
        unknown: set[str] = set()
        for agent in self.team:
            backend = self.backends[(agent.model, agent.base_url)]
            length = agent.max_model_len or backend.max_model_len
            budget = None
            if length is not None:
                budget = length - agent.max_tokens  # type: ignore[operator]
                if budget < 1:
                    raise ConfigError(
                        f"agent {agent.index} ({agent.model}): a context of {length} tokens "
                        f"leaves no room for a prompt next to --max-tokens {agent.max_tokens}."
                    )
            elif not agent.model.startswith("sim"):
                unknown.add(agent.model)
            endpoint = redact(agent.base_url) if agent.base_url else None
            seats.append(Seat(agent, backend, self.fitters[agent.index], budget, endpoint))
        if unknown:
            self.warnings.append(
                f"the context length of {', '.join(sorted(unknown))} is unknown (the server does "
                "not report it): prompts are not shortened; pass --max-model-len to set it."
            )
        return seats

    def manifest_extra(self, seats: list[Seat]) -> dict[str, Any]:
        protocol, n = self.choice.protocol, len(self.team)
        return {
            "benchmark": {
                "name": self.spec.name,
                "kind": self.spec.kind,
                "questions": [q.id for q in self.questions],
            },
            "protocol": {
                "name": self.config.protocol,
                "class": self.choice.cls,
                "params": protocol.params(),
                "source": self.choice.source,
                "voters": protocol.voters(n),
                "hub": protocol.hub,
                "sees": [protocol.sees(i, n) for i in range(n)],
            },
            "prompt": {"style": self.config.prompt_style, "strip_think": self.config.strip_think},
            "team": [
                {
                    "agent": seat.agent.index,
                    "group": seat.agent.group,
                    "model": seat.agent.model,
                    "endpoint": seat.endpoint,
                    "temperature": seat.agent.temperature,
                    "top_p": seat.agent.top_p,
                    "max_tokens": seat.agent.max_tokens,
                    "prompt_budget": seat.budget,
                    "tokenizer": seat.fitter.counter.name,
                    "persona": seat.agent.persona,
                }
                for seat in seats
            ],
        }


def make_plan(
    *,
    protocol: str,
    agents: int | None,
    agent_options: list[str],
    roster_file: Path | None,
    prompt_style: str | None,
    benchmark: str,
    data_dir: Path | None,
    limit: int | None,
    model: str | None,
    settings: dict[str, Any],
) -> Plan:
    """Resolve and check everything a run needs; raise a user error with one sentence.
    `settings` holds the remaining RunConfig fields as the user gave them."""
    choice = resolve(protocol)
    roster = _roster(agent_options, roster_file, choice)
    if roster and model:
        raise ConfigError(
            "--model names one model for all agents; with --agent or --roster, "
            "name each agent's model there instead."
        )
    n_roster = sum(entry.count for entry in roster)
    config = RunConfig(
        protocol=protocol,
        agents=agents if agents is not None else (n_roster or DEFAULT_AGENTS),
        benchmark=benchmark,
        limit=limit,
        model=model or DEFAULT_MODEL,
        prompt_style=prompt_style or choice.prompt_style or "debate",
        roster=roster,
        **settings,
    )
    config.validate()
    if choice.cls == "heterogeneous" and not roster:
        raise ConfigError(
            "the heterogeneous protocol needs a team: pass --agent MODEL[@URL][*COUNT] "
            "(repeated) or --roster FILE, or use a preset that lists one."
        )
    check_protocol(choice.protocol, config.agents)
    spec, questions = load_questions(benchmark, data_dir, limit)
    config = replace(config, max_tokens=config.max_tokens or spec.max_tokens)

    team = config.team()
    backends: dict[tuple[str, str | None], Backend] = {}
    slots: dict[str, asyncio.Semaphore] = {}  # one limit per endpoint, whatever it serves
    counters: dict[tuple[str | None, str], TokenCounter] = {}
    fitters: dict[int, Fitter] = {}
    by_counter: dict[int, Fitter] = {}
    warnings: list[str] = []
    for agent in team:
        where = (agent.model, agent.base_url)
        if where not in backends:
            inner = make_backend(agent.model, agent.base_url, config.timeout)
            endpoint = slots.setdefault(
                agent.base_url or agent.model, asyncio.Semaphore(config.concurrency)
            )
            backends[where] = Guarded(inner, endpoint)
        name = (agent.tokenizer, agent.model)
        if name not in counters:
            counters[name], warning = load_counter(*name)
            if warning:
                warnings.append(warning)
        counter = counters[name]
        fitters[agent.index] = by_counter.setdefault(
            id(counter), Fitter(counter, strip_think=config.strip_think)
        )
    return Plan(config, choice, spec, questions, team, backends, fitters, warnings)


def _roster(
    agent_options: list[str], roster_file: Path | None, choice: Choice
) -> tuple[Entry, ...]:
    if agent_options and roster_file:
        raise ConfigError("give the team with --agent options or with --roster, not both.")
    if agent_options:
        return tuple(parse_agent_option(text) for text in agent_options)
    if roster_file:
        return load_roster_file(roster_file)
    if choice.protocol.roster is not None:
        return entries_from_dicts(choice.protocol.roster, f"protocol preset {choice.source}")
    return ()
