"""From command-line choices to a ready run: the protocol, the team, its backends and context
budgets, all checked before the first request."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mad_eval.backends import (
    Backend,
    Guarded,
    Replica,
    Request,
    RetryPolicy,
    Sampling,
    TransientError,
    Where,
    backend_type,
    make_backend,
    require_installed,
)
from mad_eval.backends.base import RequestError, Warn
from mad_eval.backends.cache import Cached, RequestCache
from mad_eval.data.benchmarks import BenchmarkSpec, load_questions, spec_kind
from mad_eval.debate.context import (
    ContextError,
    EstimateCounter,
    Fitter,
    TokenCounter,
    load_counter,
)
from mad_eval.debate.prompts import Speaker, build_prompt
from mad_eval.debate.seats import Seat
from mad_eval.grading.answers import get_answer_protocol
from mad_eval.grading.grader import check_answer_protocol
from mad_eval.grading.kinds.choice import listing
from mad_eval.progress import Listener
from mad_eval.protocols import (
    Choice,
    check_protocol,
    debate_shape,
    presets,
    resolve,
    role_templates,
)
from mad_eval.records import Question, shown
from mad_eval.sanitize import redact, remember
from mad_eval.settings.config import (
    DEFAULT_MODEL,
    ConfigError,
    RunConfig,
    is_single,
    run_defaults,
    unreached_files,
)
from mad_eval.settings.keywords import as_text, check_names, check_types, endpoints
from mad_eval.settings.roster import (
    Agent,
    Entry,
    entries_from_dicts,
    load_roster_file,
    parse_agent_option,
    parse_extra_body,
)
from mad_eval.settings.templates import Template, builtin_templates, check_template, load_template
from mad_eval.store.verdict_file import keep_verdicts_beside
from mad_eval.voting.rules import default_rule
from mad_eval.voting.statements import STATEMENTS, instructions

DEFAULT_AGENTS = 5
# Agents share a backend when they share a model, its endpoints, its tokenizer, and the
# way prompts reach it (the API and the template): within a run and across the runs of
# an experiment.
BackendKey = tuple[str, tuple[str, ...], str | None, str, str, str]


@dataclass
class Shared:
    """What the runs planned together share: one backend per model and endpoints, one
    request limit per endpoint, one request cache, tokenizers loaded once; so the runs of
    an experiment, scheduled at once, fill each server as one run would."""

    cache: RequestCache | None = None
    backends: dict[BackendKey, Backend] = field(default_factory=dict)
    slots: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    counters: dict[tuple[str | None, str | None, str], TokenCounter] = field(default_factory=dict)
    checked: set[int] = field(default_factory=set)  # backends found serving (by id)
    probed: set[tuple[BackendKey, str]] = field(default_factory=set)  # extra bodies sent
    # Who hears what the backends warn of while the runs go on (execute sets the caller's).
    listener: Listener = field(default_factory=Listener)
    # What runs planned together read alike (a protocol, a template and its check, a
    # benchmark's questions): made once, so planning 1,000 cells reads each file once.
    made: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def warn(self, text: str) -> None:
        self.listener.warn("warning", text)

    def retried(self, why: str) -> None:
        self.listener.retried(why)

    def once(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        if key not in self.made:
            self.made[key] = make()
        return self.made[key]

    async def check(self, backend: Backend) -> None:
        """Ask a backend whether it serves, once however many runs share it."""
        if id(backend) not in self.checked:
            await backend.check()
            self.checked.add(id(backend))

    async def aclose(self) -> None:
        for backend in self.backends.values():
            await backend.aclose()
        self.backends.clear()
        self.checked.clear()


@dataclass
class Plan:
    config: RunConfig
    choice: Choice
    spec: BenchmarkSpec
    questions: list[Question]
    team: list[Agent]
    backends: dict[BackendKey, Backend]
    fitters: dict[int, Fitter]  # by agent index
    templates: dict[str, Template]  # by the name or file the agents give
    answer: str  # the answer protocol: how replies write their answer, how it is read
    shared: Shared
    warnings: list[str] = field(default_factory=list)
    serving: dict[str, Any] | None = None  # a served model's server (ServeSpec.record())

    @property
    def cache(self) -> RequestCache | None:
        return self.shared.cache

    @property
    def single(self) -> bool:
        """K independent samples per question, no debate (settings.config.is_single)."""
        return is_single(self.choice.cls, self.config.rounds)

    def endpoints(self) -> dict[str, list[str]]:
        """Every URL the run's questions are sent to (credentials hidden), with the models
        asked there; a model answered in this process (sim, vllm:) is sent nowhere. What a
        dry run shows: a file from someone else may name its own server."""
        found: dict[str, list[str]] = {}
        for agent in self.team:
            urls = agent.base_urls
            if not urls and backend_type(agent.model).name == "openai":
                from mad_eval.backends.openai_backend import OPENAI_API

                urls = (os.environ.get("OPENAI_BASE_URL") or OPENAI_API,)
            for url in urls:
                models = found.setdefault(redact(url), [])
                if agent.model not in models:
                    models.append(agent.model)
        return found

    async def seats(self) -> list[Seat]:
        """Check every backend, then give each agent its prompt budget: the model's context
        length (given, or reported by the server) minus its max tokens."""
        for backend in self.backends.values():
            await self.shared.check(backend)
        await self.check_extra_bodies()
        seats = []
        unknown: set[str] = set()
        # The agent whose own answer decides (a hub, a judge), as the manifest records it.
        hub = self.choice.protocol.decision(len(self.team)).agent
        for agent in self.team:
            backend = self.backends[_key(agent, self.config)]
            length = agent.max_model_len or backend.max_model_len
            budget = None
            if length is not None:
                budget = length - agent.max_tokens  # type: ignore[operator]
                if budget < 1:
                    raise ConfigError(
                        f"agent {agent.index} ({agent.model}): a context of {length} tokens "
                        f"leaves no room for a prompt next to --max-tokens {agent.max_tokens}."
                    )
            elif backend_type(agent.model).context_length:
                unknown.add(agent.model)
            speaker = Speaker(
                self.templates[agent.prompt_template],
                agent.index,
                len(self.team),
                agent.persona,
                agent.index == hub,
                agent.quote,
                hub,
            )
            seats.append(Seat(agent, backend, self.fitters[agent.index], budget, speaker))
        if unknown:
            self.warnings.append(
                f"the context length of {', '.join(sorted(unknown))} is unknown (the server does "
                "not report it): prompts are not shortened; pass --max-model-len to set it."
            )
        return seats

    async def check_extra_bodies(self) -> None:
        """Each agent's extra body, checked once per backend that sends it."""
        sent = self.shared.probed
        for agent in self.team:
            key = _key(agent, self.config)
            body = json.dumps(agent.extra_body, sort_keys=True)
            if agent.extra_body and (key, body) not in sent:
                await check_extra_body(self.backends[key], agent.model, agent.extra_body)
                sent.add((key, body))

    def orders(self) -> dict[str, Any]:
        found = {q.id: q.meta["order"] for q in self.questions if "order" in q.meta}
        return {"orders": found} if found else {}

    def manifest_extra(self, seats: list[Seat]) -> dict[str, Any]:
        protocol, n = self.choice.protocol, len(self.team)
        decision = protocol.decision(n)
        served = {"serving": self.serving} if self.serving is not None else {}
        return served | {
            "benchmark": {
                "name": self.spec.name,
                "title": self.spec.title,
                "kind": self.spec.kind,
                "answer": self.answer,
                "answer_revision": get_answer_protocol(self.answer).revision,
                "questions": [q.id for q in self.questions],
                # A preference question's A/B order: which reply the agents saw first.
                **self.orders(),
            },
            "protocol": {
                "name": self.config.protocol,
                "class": self.choice.cls,
                "params": protocol.params(),
                "source": self.choice.source,
                "voters": decision.voters,
                "hub": decision.agent,
                "score": decision.rule or default_rule(self.spec.kind),
                "sees": [protocol.sees(i, n) for i in range(n)],
                **debate_shape(protocol, n, self.config.rounds),
            },
            "prompt": {
                "style": self.config.prompt_style,
                # Each prompt template's full text and hash: resuming with an edited one is
                # refused like any other change of setting.
                "prompt_templates": {
                    ref: {"file": str(t.path), "sha256": t.sha256, "text": t.source, "data": t.data}
                    for ref, t in self.templates.items()
                },
                "strip_think": self.config.strip_think,
                "api": self.config.api,
                "template": self.config.template,
                # What text-prompt backends (--api completions, vllm:) render messages with,
                # by tokenizer: the prompt text each turn sent follows from its messages.
                "templates": {
                    seat.fitter.counter.name: seat.fitter.counter.template_source
                    for seat in seats
                    if backend_type(seat.agent.model).renders_text(self.config.api)
                },
            },
            "team": [
                {
                    "agent": seat.agent.index,
                    "group": seat.agent.group,
                    "model": seat.agent.model,
                    "endpoints": redact(seat.agent.base_urls),
                    "temperature": seat.agent.temperature,
                    "top_p": seat.agent.top_p,
                    "max_tokens": seat.agent.max_tokens,
                    "prompt_budget": seat.budget,
                    "tokenizer": seat.fitter.counter.name,
                    "persona": seat.agent.persona,
                    "prompt_template": seat.agent.prompt_template,
                    "quote": str(seat.agent.quote),
                    "extra_body": seat.agent.extra_body,
                }
                for seat in seats
            ],
        }


async def check_extra_body(backend: Backend, model: str, body: dict[str, Any]) -> None:
    """Send `body` once, in a one-token request to every endpoint of `backend`, so a field
    the server refuses stops the run before it starts, in one sentence, instead of failing
    it request by request. A transient failure proves nothing: the run will retry it."""
    if not body:
        return
    # A server refuses min_tokens above max_tokens: the one token must not be the fault.
    least = body.get("min_tokens")
    request = Request(
        [{"role": "user", "content": "Say OK."}],
        Sampling(0.0, 1.0, least if type(least) is int and least > 1 else 1, 0),
        Question("extra-body-check", "Say OK.", "OK"),
        extra_body=body,
    )
    try:
        await backend.probe(request)
    except RequestError as exc:
        raise ConfigError(
            f"{model} refused the extra body {json.dumps(redact(body))} ({exc}); fix --extra-body "
            "or the roster's extra_body."
        ) from None
    except (TransientError, TimeoutError):
        pass


@dataclass(frozen=True)
class Asked:
    """A run's settings as asked: checked by name and type, each default filled in, files
    named as text; what RunConfig holds as it is given in `fields`, the rest resolved by
    make_plan (the protocol's preset, the team, the benchmark's data)."""

    protocol: str
    model: str | None
    agents: int | None
    agent: tuple[str, ...]  # --agent MODEL[@URL][*COUNT] per group
    roster: str | None  # a roster file
    data_dir: str | None
    prompt_template: str | None  # None: the preset's, else debate
    quote: str | None  # None: the preset's, else final
    config_fields: dict[str, Any]  # RunConfig's other fields, by their names

    @classmethod
    def of(cls, choices: Mapping[str, Any]) -> Asked:
        check_names(choices, run_defaults(), "a run")
        check_types(choices, "a run")
        given = {**run_defaults(), **as_text(choices)}
        own = {f.name: given.pop(f.name) for f in fields(cls) if f.name != "config_fields"}
        given["base_urls"] = endpoints(given.pop("base_url"))
        if given["extra_body"] is None or isinstance(given["extra_body"], str):
            given["extra_body"] = parse_extra_body(given["extra_body"])
        given["cache"] = str(given["cache"]) if given["cache"] else None
        own["agent"] = tuple(own["agent"] or ())
        return cls(**own, config_fields=given)


def make_plan(
    choices: Mapping[str, Any],
    shared: Shared | None = None,
    serving: dict[str, Any] | None = None,
) -> Plan:
    """Resolve and check everything a run needs; raise a user error with one sentence.
    `choices` names settings as run_defaults() does (the rest keep their defaults); runs
    planned with one `shared` share its backends, endpoint limits and request cache.
    `serving`: the server mad-eval starts for a serve: model, as its manifest records it."""
    asked = Asked.of(choices)
    fresh = shared is None
    shared = shared or Shared()
    choice: Choice = shared.once(("protocol", asked.protocol), lambda: resolve(asked.protocol))
    config = _config(asked, choice)
    # Its URLs' passwords, extra bodies' secrets and its server's --api-key, wherever echoed.
    remember([config.to_dict(), serving])
    _check_protocol(config, choice)
    templates = _templates(config, choice, shared)
    _check_agents(config, templates)
    _check_asks(config, choice, templates)
    spec, questions, answer = _questions(config, asked.data_dir, shared)
    _check_options(config, choice, questions)
    config = replace(config, max_tokens=config.max_tokens or spec.max_tokens)
    if fresh and config.cache:
        shared.cache = RequestCache(config.cache)
        keep_verdicts_beside(config.cache)
    warnings = list(
        shared.once(("unused", config.protocol, *templates), lambda: _unused(config, templates))
    )
    team = config.team()  # now: max_tokens is resolved
    backends, fitters = _wire(team, config, shared, warnings)
    return Plan(
        config=config,
        choice=choice,
        spec=spec,
        questions=questions,
        team=team,
        backends=backends,
        fitters=fitters,
        templates=templates,
        answer=answer,
        shared=shared,
        warnings=warnings,
        serving=serving,
    )


def _config(asked: Asked, choice: Choice) -> RunConfig:
    """The run's configuration: the team from --agent, --roster or the preset; the prompt
    template and quoting given, else the preset's; checked."""
    roster = _roster(list(asked.agent), asked.roster, choice)
    if roster and asked.model:
        raise ConfigError(
            "--model names one model for all agents; with --agent or --roster, "
            "name each agent's model there instead."
        )
    n_roster = sum(entry.count for entry in roster)
    config = RunConfig(
        protocol=asked.protocol,
        agents=asked.agents
        if asked.agents is not None
        else (n_roster or choice.protocol.agents or DEFAULT_AGENTS),
        model=asked.model or DEFAULT_MODEL,
        prompt_style=asked.prompt_template or choice.prompt_template or "debate",
        quote=asked.quote or choice.quote or "final",
        roster=roster,
        **asked.config_fields,
    )
    config.validate()
    return config


def _check_protocol(config: RunConfig, choice: Choice) -> None:
    """The protocol can run this team."""
    if choice.cls == "heterogeneous" and not config.roster:
        raise ConfigError(
            "the heterogeneous protocol needs a team: pass --agent MODEL[@URL][*COUNT] "
            "(repeated) or --roster FILE, or use a preset that lists one."
        )
    check_protocol(choice.protocol, config.agents, config.rounds)


def _templates(config: RunConfig, choice: Choice, shared: Shared) -> dict[str, Template]:
    """Each prompt template the agents use, by the name or file they give, checked."""
    roles = role_templates(choice.protocol, config.agents, config.rounds)
    refs = dict.fromkeys([*(agent.prompt_template for agent in config.team()), *roles])
    return {
        ref: _checked_template(ref, choice, config.protocol, config.agents, shared) for ref in refs
    }


def _check_agents(config: RunConfig, templates: Mapping[str, Template]) -> None:
    """Each agent's template, backend and extra body can work together."""
    team = config.team()
    for agent in team:
        template = templates[agent.prompt_template]
        if template.verbatim and agent.quote.how != "verbatim":
            raise ConfigError(
                f"prompt template {template.path} quotes replies as written (.verbatim), "
                f"which --quote {agent.quote} does not give (it drops or re-formats their "
                "reasoning); pass --quote verbatim."
            )
    for entry in config.roster or (Entry(config.model),):
        require_installed(entry.model)
    for agent in team:
        if agent.extra_body and not backend_type(agent.model).extra_body:
            raise ConfigError(
                f"agent {agent.index} ({agent.model}) takes no extra body fields: --extra-body "
                "and extra_body are for servers and in-process vLLM."
            )


def _check_asks(config: RunConfig, choice: Choice, templates: Mapping[str, Template]) -> None:
    """Every agent whose reply must state something for the decision or the stop rule
    (protocols.Protocol.asks) is asked for it by its template: a template that never shows
    {{ answer_format }} would leave the rule reading only fallbacks."""
    protocol, n = choice.protocol, config.agents
    for agent in config.team():
        for round_ in range(min(config.rounds, 1) + 1):
            asks = protocol.asks(agent.index, round_, n)
            if not asks:
                continue
            role = protocol.role(agent.index, round_, n)
            ref = role.template if role and role.template else agent.prompt_template
            template = templates.get(ref) or load_template(ref)
            unknown = [name for name in asks if name not in STATEMENTS]
            if unknown:
                raise ConfigError(
                    f"{config.protocol} asks agent {agent.index} for {unknown[0]!r}, which is "
                    f"no statement mad-eval reads; known: {', '.join(STATEMENTS)}."
                )
            speaker = Speaker(template, agent.index, n, asks=tuple(asks))
            probe = Question("probe", "?", "0")
            messages = build_prompt(speaker, probe, [], [], Fitter(EstimateCounter()), None)
            if instructions(asks) not in "\n".join(m["content"] for m in messages.messages):
                raise ConfigError(
                    f"{config.protocol} reads {' and '.join(asks)} from agent {agent.index}'s "
                    f"replies, but prompt template {template.path} never asks for it: it does "
                    "not show {{ answer_format }}, where the request is written; use a "
                    "template that does."
                )


def _check_options(config: RunConfig, choice: Choice, questions: list[Question]) -> None:
    """A protocol that shows each agent its own order of a question's options
    (Protocol.option_order) runs only on questions that list their options last."""
    if not choice.protocol.reorders:
        return
    for question in questions:
        if listing(question) is None:
            problem = "has no options" if not question.options else "does not end with them"
            raise ConfigError(
                f"{config.protocol} shows each agent the options of a choice question in its "
                f"own order, and question {shown(question.id, 80)} of {config.benchmark} "
                f"({question.kind}) {problem}; use a choice or preference benchmark."
            )


def _questions(
    config: RunConfig, data_dir: str | None, shared: Shared
) -> tuple[BenchmarkSpec, list[Question], str]:
    """The benchmark, its questions (each graded by the run's answer protocol) and that
    answer protocol: read once however many runs share them."""
    kind = shared.once(("kind", config.benchmark), lambda: spec_kind(config.benchmark))
    answer = _answer_protocol(config.answer_protocol, *kind)
    spec, questions = shared.once(
        ("questions", config.benchmark, str(data_dir), config.limit),
        lambda: load_questions(config.benchmark, _path(data_dir), config.limit),
    )
    questions = [q if q.answer == answer else replace(q, answer=answer) for q in questions]
    return spec, questions, answer


def _wire(
    team: list[Agent], config: RunConfig, shared: Shared, warnings: list[str]
) -> tuple[dict[BackendKey, Backend], dict[int, Fitter]]:
    """Each agent's backend and prompt fitter, shared where agents (or runs) share a model,
    its endpoints and tokenizer; a tokenizer that could not be loaded is said in `warnings`."""
    backends: dict[BackendKey, Backend] = {}
    fitters: dict[int, Fitter] = {}
    by_counter: dict[int, Fitter] = {}
    for agent in team:
        backend = backend_type(agent.model)
        name = (agent.tokenizer, agent.model if backend.tokenizer else None, config.template)
        if name not in shared.counters:
            shared.counters[name], warning = load_counter(*name)
            if warning:
                warnings.append(warning)
        counter = shared.counters[name].with_template_kwargs(_template_kwargs(agent))
        if id(counter) not in by_counter:
            by_counter[id(counter)] = Fitter(counter, strip_think=config.strip_think)
        fitters[agent.index] = by_counter[id(counter)]
        key = _key(agent, config)
        if key not in shared.backends:
            shared.backends[key] = _backend(
                agent, counter, config, shared.slots, shared.cache, shared.warn, shared.retried
            )
        backends[key] = shared.backends[key]
    return backends, fitters


def _unused(config: RunConfig, templates: Mapping[str, Template]) -> list[str]:
    """The working directory's files that a built-in name this run uses does not reach:
    said once, so a user who meant to shadow ours knows theirs was left out."""
    said, protocol = [], config.protocol
    for path in unreached_files("templates", builtin_templates()):
        if path.stem in templates:
            said.append(
                f"{path} is not used: '{path.stem}' is a built-in template; pass "
                f"--prompt-template {path} to use yours."
            )
    for path in unreached_files("protocols", presets()):
        if path.stem == protocol.partition(":")[0]:
            said.append(
                f"{path} is not used: '{protocol}' is a built-in protocol; rename the file "
                "and pass --protocol with its new name to use yours."
            )
    return said


def _checked_template(
    ref: str, choice: Choice, protocol: str, agents: int, shared: Shared
) -> Template:
    """A prompt template, rendered on sample data as `protocol`'s agents read each other:
    once per template, protocol and team size however many runs share them."""
    template = shared.once(("template", ref), lambda: load_template(ref))

    def check() -> None:
        check_template(template, [choice.protocol.sees(i, agents) for i in range(agents)])

    shared.once(("checked", ref, protocol, agents), check)
    return template


def _answer_protocol(given: str | None, kind: str, default: str) -> str:
    """The answer protocol a run grades with: --answer-protocol, else the benchmark's."""
    try:
        return check_answer_protocol(kind, given or default)
    except ValueError as exc:
        raise ConfigError(f"--answer-protocol: {exc}") from None


def judge_backend(
    model: str, config: RunConfig, warn: Warn, retried: Warn | None = None
) -> tuple[Backend, RequestCache | None]:
    """The LLM judge behind the same guard, endpoint limits and request cache as the agents:
    `config` carries the judge's sampling, extra body and the operational settings; `warn`
    hears what the guard warns of as it goes, `retried` how each request asked again failed."""
    require_installed(model)
    judge = Agent(
        index=0,
        group="judge",
        model=model,
        base_urls=config.base_urls,
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_tokens,
        max_model_len=config.max_model_len,
        tokenizer=config.tokenizer,
        persona=None,
        prompt_template=config.prompt_style,
        extra_body=config.extra_body,
    )
    backend = backend_type(model)
    if config.extra_body and not backend.extra_body:
        raise ConfigError(f"the judge {model} takes no extra body fields (--extra-body).")
    counter: TokenCounter = EstimateCounter()
    if backend.renders_text(config.api):  # only an in-process judge needs its chat template
        counter, _ = load_counter(config.tokenizer, model, config.template)
        counter = counter.with_template_kwargs(_template_kwargs(judge))
    cache = RequestCache(config.cache) if config.cache else None
    return _backend(judge, counter, config, {}, cache, warn, retried), cache


def _key(agent: Agent, config: RunConfig) -> BackendKey:
    return (
        agent.model,
        agent.base_urls,
        agent.tokenizer,
        config.api,
        config.template,
        config.dtype,
    )


def _template_kwargs(agent: Agent) -> dict[str, Any]:
    return agent.extra_body.get("chat_template_kwargs") or {}


def _backend(
    agent: Agent,
    counter: TokenCounter,
    config: RunConfig,
    slots: dict[str, asyncio.Semaphore],
    cache: RequestCache | None,
    warn: Warn,
    retried: Warn | None = None,
) -> Backend:
    """The agent's model behind the guard (a replica per endpoint), and the cache if asked;
    `warn` and `retried` hear what the guard says as the run goes."""
    served = backend_type(agent.model)
    render = counter.render if served.renders_text(config.api) else None
    if config.template != "chat" and served.tokenizer and render is None:
        raise ConfigError(
            f"--template {config.template} needs --api completions: the chat endpoint "
            "applies the server's own chat template."
        )
    urls: tuple[str | None, ...] = agent.base_urls or (None,)
    engine = dict(
        max_model_len=agent.max_model_len,
        tensor_parallel_size=config.tensor_parallel_size,
        gpu_memory_utilization=config.gpu_memory_utilization,
        dtype=config.dtype,
        enforce_eager=config.enforce_eager,
        add_special_tokens=config.template != "chat",
    )
    replicas = [
        Replica(
            make_backend(agent.model, Where(url, config.timeout, config.api, render, engine)),
            slots.setdefault(slot, asyncio.Semaphore(config.concurrency)),
            redact(url),
        )
        for url, slot in zip(urls, agent.slots, strict=True)
    ]
    if render is not None:  # found out now, not at the first request
        try:
            render([{"role": "user", "content": "2 + 2?"}])
        except ContextError as exc:
            raise ConfigError(f"agent {agent.index} ({agent.model}): {exc}") from None
    retry = RetryPolicy(config.retries, config.backoff)
    # A question's requests stay on one replica (its prefix cache) until it has a quarter of
    # a replica's request limit more waiting than the least busy one.
    margin = max(1, config.concurrency // 4)
    backend: Backend = Guarded(replicas, config.timeout, retry, margin, warn, retried)
    if cache is None:
        return backend
    identity = {
        "model": agent.model,
        "endpoints": sorted(redact(url) for url in agent.base_urls),
        "api": config.api if "api" in served.identity else None,
        "template": counter.template_source if render else None,
        "dtype": config.dtype if "dtype" in served.identity else None,
    }
    return Cached(backend, cache, identity)


def _path(given: str | None) -> Path | None:
    return Path(given) if given else None


def _roster(agent_options: list[str], roster_file: str | None, choice: Choice) -> tuple[Entry, ...]:
    if agent_options and roster_file:
        raise ConfigError("give the team with --agent options or with --roster, not both.")
    if agent_options:
        return tuple(parse_agent_option(text) for text in agent_options)
    if roster_file:
        return load_roster_file(Path(roster_file))
    if choice.protocol.roster is not None:
        return entries_from_dicts(choice.protocol.roster, f"protocol preset {choice.source}")
    return ()
