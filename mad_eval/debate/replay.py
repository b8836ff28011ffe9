"""The exact messages a recorded turn was sent, rebuilt from the run's records, so a judge
reads what the agent read. Each rebuilt prompt is checked against the turn's messages_hash;
one that differs is refused, never judged in its place."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from mad_eval.data.benchmarks import DataMissingError, load_questions
from mad_eval.debate.context import (
    ContextError,
    EstimateCounter,
    Fitter,
    TokenCounter,
    load_counter,
)
from mad_eval.debate.prompts import RoundReplies, Speaker, read_prompt
from mad_eval.debate.reading import reading
from mad_eval.grading.kinds.choice import in_order
from mad_eval.grading.reasoning import parse_quoting
from mad_eval.records import Messages, Question, Turn, messages_hash, shown
from mad_eval.settings.templates import (
    Template,
    TemplateError,
    builtin_templates,
    load_template,
    recorded_template,
)
from mad_eval.store.files import StoreError
from mad_eval.store.folder import RunStore
from mad_eval.store.manifest import RunManifest, TeamSeat

SLOW_TOTAL, SLOW_EACH = 30.0, 0.01  # seconds rebuilding one template's prompts: all, each


class ReplayError(ValueError):
    """A turn's prompt cannot be rebuilt exactly; the message says why."""


class Replay:
    def __init__(self, manifest: RunManifest, questions: Mapping[str, Question]):
        self.manifest = manifest
        self.questions = questions
        self.style = manifest.prompt.style
        self.strip_think = manifest.prompt.strip_think
        self.template = manifest.prompt.template
        self.quote = manifest.config.quote  # runs from before --quote read final text
        self.recorded = manifest.prompt.prompt_templates or {}
        self.agents = len(manifest.team) or manifest.config.agents
        self.hub = manifest.protocol.hub
        # Prompts sent whole need no tokenizer: fitting returns them as built.
        self.whole = Fitter(EstimateCounter(self.template), strip_think=self.strip_think)
        self.fitters: dict[str, Fitter] = {}
        self.templates: dict[str, Template | TemplateError] = {}
        self.spent: dict[str, tuple[int, float]] = {}  # prompts rebuilt, seconds, by template

    def messages(self, turn: Turn, rounds: Mapping[int, RoundReplies]) -> Messages:
        """The messages `turn` was sent; `rounds` holds its question's turns of the rounds
        before it, by round and agent."""
        seat = self.manifest.seat(turn.agent)
        question = self.questions[turn.question]
        if turn.option_order is not None:  # it read its own order of the options
            try:
                question = in_order(question, turn.option_order)
            except ValueError as exc:
                raise ReplayError(str(exc)) from None
        fitter, budget = self.whole, None
        if turn.cut_tokens:  # shortened to fit: cut again with the same tokenizer and budget
            fitter, budget = self._fitter(seat), seat.prompt_budget
        persona, template, asks = self._role(turn.round, turn.agent)
        ref = template or seat.prompt_template or self.style
        speaker = Speaker(
            self._template(ref),
            turn.agent,
            self.agents,
            seat.persona if persona is None else persona,
            turn.agent == self.hub,
            parse_quoting(seat.quote or self.quote),
            self.hub,
            asks,
        )
        recorded = self.manifest.protocol.sees
        reads = set(recorded[turn.agent]) if recorded else set(turn.sees)
        earlier = [rounds.get(r, {}) for r in range(turn.round)]
        found = reading(
            turn.agent,
            turn.round,
            earlier,
            rounds.get(turn.round, {}),
            self.waves,
            speaker.template,
            {*reads, turn.agent},
            lambda views: list(turn.sees),
        )
        missing = [j for j in turn.sees if j not in found.read]
        if missing:
            raise ReplayError(f"the turns it read (agents {missing}) are not recorded")
        started = time.thread_time()
        try:
            fitted = read_prompt(speaker, question, found, fitter, budget)
        except ContextError as exc:
            raise ReplayError(str(exc)) from None
        except TemplateError as exc:  # the real data took it past a bound: not tried again
            self.templates[ref] = exc
            raise ReplayError(f"its prompt template cannot be used ({exc})") from None
        finally:
            self._timed(ref, time.thread_time() - started)
        if messages_hash(fitted.messages) != turn.messages_hash:
            raise ReplayError("its prompt, rebuilt, differs from the one recorded")
        return fitted.messages

    def waves(self, round_: int) -> list[list[int]]:
        """Round `round_`'s speaking order as the manifest records it (everyone at once
        where it records none)."""
        recorded = self.manifest.protocol.waves
        if recorded is None:
            return [list(range(self.agents))]
        if round_ >= len(recorded) or not _agent_lists(recorded[round_], self.agents):
            raise ReplayError(f"the manifest's speaking order of round {round_} is unusable")
        return [list(wave) for wave in recorded[round_]]

    def _role(self, round_: int, agent: int) -> tuple[str | None, str | None, tuple[str, ...]]:
        """The persona and template the protocol's role gave `agent` in `round_` (None:
        its seat's), and what its reply was asked to state, as the manifest records them."""
        protocol = self.manifest.protocol
        role = _at(protocol.roles, round_, agent)
        asks = _at(protocol.asks, round_, agent) or []
        if role is not None and not (
            isinstance(role, dict)
            and all(isinstance(role.get(k), str | None) for k in ("persona", "template"))
        ):
            raise ReplayError(f"the manifest's role of agent {agent} in round {round_} is unusable")
        if not (isinstance(asks, list) and all(isinstance(a, str) for a in asks)):
            raise ReplayError(f"the manifest's statements asked of agent {agent} are unusable")
        role = role or {}
        return role.get("persona"), role.get("template"), tuple(asks)

    def _timed(self, ref: str, seconds: float) -> None:
        """Refuse, for the rest of the replay, a template whose prompts have taken over
        SLOW_TOTAL seconds to rebuild at over SLOW_EACH each: each render is bounded, not
        every turn of a folder rendering just within the bound."""
        prompts, total = self.spent.get(ref, (0, 0.0))
        prompts, total = prompts + 1, total + seconds
        self.spent[ref] = (prompts, total)
        if total > SLOW_TOTAL and total / prompts > SLOW_EACH and ref in self.templates:
            self.templates[ref] = TemplateError(
                f"prompt template {shown(ref, 80)} takes {total / prompts:.1f} s a prompt to "
                "rebuild, "
                "too slow to replay its turns"
            )

    def check(self) -> None:
        """Load every template the manifest records, before any prompt is rebuilt: a
        TemplateError (one sentence) if one cannot be used, e.g. its text was edited."""
        for ref in self.recorded:
            self._load(ref)

    def _template(self, ref: str) -> Template:
        try:
            return self._load(ref)
        except TemplateError as exc:
            raise ReplayError(f"its prompt template cannot be loaded ({exc})") from None

    def _load(self, ref: str) -> Template:
        """The template the run recorded (its own text, so a file edited or moved since does
        not matter), in the sandbox as any template file; runs recorded before templates
        were data name a built-in one. A template that cannot be used is tried once: every
        later prompt of it is refused with the same sentence."""
        if ref not in self.templates:
            try:
                self.templates[ref] = self._read(ref)
            except TemplateError as exc:
                self.templates[ref] = exc
        found = self.templates[ref]
        if isinstance(found, TemplateError):
            raise TemplateError(str(found))
        return found

    def _read(self, ref: str) -> Template:
        recorded = self.recorded.get(ref)
        if recorded is not None:
            return recorded_template(
                ref, recorded.file, recorded.sha256, recorded.text, recorded.data
            )
        if ref in builtin_templates():
            return load_template(ref)
        raise TemplateError(
            f"manifest.json records no text of prompt template {shown(ref, 80)}, which is no "
            "built-in one."
        )

    def _fitter(self, seat: TeamSeat) -> Fitter:
        name = seat.tokenizer or "estimate"
        kwargs = seat.extra_body.get("chat_template_kwargs") or {}
        key = f"{name} {json.dumps(kwargs, sort_keys=True)}"
        if key not in self.fitters:
            counter: TokenCounter = EstimateCounter(self.template)
            if name.startswith("hf:"):
                tokenizer = name.removeprefix("hf:")
                try:
                    counter, _ = load_counter(tokenizer, seat.model, self.template)
                except ContextError:
                    raise ReplayError(
                        f"its prompt was shortened with tokenizer {shown(tokenizer, 80)}, which "
                        "cannot be loaded here"
                    ) from None
            counter = counter.with_template_kwargs(kwargs)
            self.fitters[key] = Fitter(counter, strip_think=self.strip_think)
        return self.fitters[key]


def _at(table: tuple[object, ...] | None, round_: int, agent: int) -> object:
    """table[round_][agent] of a manifest's per-round table, or None where it has none."""
    if table is None or round_ >= len(table):
        return None
    row = table[round_]
    return row[agent] if isinstance(row, list | tuple) and agent < len(row) else None


def _agent_lists(waves: object, agents: int) -> bool:
    return isinstance(waves, list | tuple) and all(
        isinstance(wave, list | tuple)
        and all(isinstance(a, int) and not isinstance(a, bool) and 0 <= a < agents for a in wave)
        for wave in waves
    )


def run_questions(
    root: Path, manifest: RunManifest, data_dir: Path | None = None
) -> dict[str, Question]:
    """The run's questions by id: from its questions.jsonl; a folder recorded before that
    file existed has them loaded again from its benchmark (from `data_dir`, else the hub)."""
    store = RunStore(root)
    recorded = store.questions()
    local = None
    if recorded is not None:
        where, fix, found = f"{store.questions_path}", "restore it from a copy", recorded
    else:
        benchmark = manifest.config.benchmark
        spec, questions = load_questions(benchmark, data_dir)
        answer = manifest.benchmark.answer  # None before protocols were data
        found = {q.id: replace(q, answer=answer or q.answer) for q in questions}
        where, fix = f"benchmark {benchmark} as loaded here", "give the benchmark file the run used"
        local = spec.local and spec.local["file"]
    missing = [qid for qid in manifest.benchmark.questions if qid not in found]
    if missing:
        problem = (
            f"{where} lacks {len(missing)} of the run's questions (e.g. {shown(missing[0], 80)})"
        )
        if local:  # the folder the run read is not the one read here: advised as the caller's
            raise DataMissingError(problem, manifest.config.benchmark, local)
        raise StoreError(f"{problem}; {fix}.")
    return found
