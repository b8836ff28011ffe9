"""The exact messages a recorded turn was sent, rebuilt from the run's records, so a judge
reads what the agent read. Each rebuilt prompt is checked against the turn's messages_hash;
one that differs is refused, never judged in its place."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mad_eval.benchmarks import load_questions
from mad_eval.context import ContextError, EstimateCounter, Fitter, TokenCounter, load_counter
from mad_eval.prompts import Messages, Round, Speaker, build_prompt
from mad_eval.reasoning import parse_quoting
from mad_eval.records import Question, Turn, messages_hash
from mad_eval.store import StoreError
from mad_eval.templates import Template, TemplateError, load_template, parse_template


class ReplayError(ValueError):
    """A turn's prompt cannot be rebuilt exactly; the message says why."""


class Replay:
    def __init__(self, manifest: dict[str, Any], questions: Mapping[str, Question]):
        config, prompt = manifest["config"], manifest.get("prompt", {})
        self.questions = questions
        self.style = prompt.get("style", config.get("prompt_style", "debate"))
        self.strip_think = prompt.get("strip_think", config.get("strip_think", False))
        self.template = prompt.get("template", config.get("template", "chat"))
        self.quote = config.get("quote", "final")  # runs from before --quote read final text
        self.recorded = prompt.get("prompt_templates", {})
        self.team = {seat["agent"]: seat for seat in manifest.get("team", [])}
        self.agents = len(self.team) or config.get("agents", 1)
        self.hub = manifest.get("protocol", {}).get("hub")
        # Prompts sent whole need no tokenizer: fitting returns them as built.
        self.whole = Fitter(EstimateCounter(self.template), strip_think=self.strip_think)
        self.fitters: dict[str, Fitter] = {}
        self.templates: dict[str, Template] = {}

    def messages(self, turn: Turn, rounds: Mapping[int, Round]) -> Messages:
        """The messages `turn` was sent; `rounds` holds its question's turns of the rounds
        before it, by round and agent."""
        seat = self.team.get(turn.agent, {})
        question = self.questions[turn.question]
        previous = rounds.get(turn.round - 1, {})
        missing = [j for j in turn.sees if j not in previous]
        if missing:
            raise ReplayError(f"the turns it read (agents {missing}) are not recorded")
        fitter, budget = self.whole, None
        if turn.cut_tokens:  # shortened to fit: cut again with the same tokenizer and budget
            fitter, budget = self._fitter(seat), seat.get("prompt_budget")
        speaker = Speaker(
            self._template(seat.get("prompt_template", self.style)),
            turn.agent,
            self.agents,
            seat.get("persona"),
            turn.agent == self.hub,
            parse_quoting(seat.get("quote", self.quote)),
        )
        history = [rounds.get(r, {}) for r in range(turn.round)]
        try:
            fitted = build_prompt(speaker, question, history, turn.sees, fitter, budget)
        except ContextError as exc:
            raise ReplayError(str(exc)) from None
        if messages_hash(fitted.messages) != turn.messages_hash:
            raise ReplayError("its prompt, rebuilt, differs from the one recorded")
        return fitted.messages

    def _template(self, ref: str) -> Template:
        """The template the run recorded (its own text, so a file edited or moved since does
        not matter); runs recorded before templates were data name a built-in one."""
        if ref not in self.templates:
            recorded = self.recorded.get(ref)
            try:
                if recorded is None:
                    self.templates[ref] = load_template(ref)
                else:
                    path = Path(recorded["file"])
                    self.templates[ref] = parse_template(
                        recorded["data"], recorded["text"], path, path.stem
                    )
            except TemplateError as exc:
                raise ReplayError(f"its prompt template cannot be loaded ({exc})") from None
        return self.templates[ref]

    def _fitter(self, seat: dict[str, Any]) -> Fitter:
        name = seat.get("tokenizer") or "estimate"
        kwargs = (seat.get("extra_body") or {}).get("chat_template_kwargs") or {}
        key = f"{name} {json.dumps(kwargs, sort_keys=True)}"
        if key not in self.fitters:
            counter: TokenCounter = EstimateCounter(self.template)
            if name.startswith("hf:"):
                tokenizer = name.removeprefix("hf:")
                try:
                    counter, _ = load_counter(tokenizer, seat["model"], self.template)
                except ContextError:
                    raise ReplayError(
                        f"its prompt was shortened with tokenizer {tokenizer!r}, which cannot "
                        "be loaded here"
                    ) from None
            counter = counter.with_template_kwargs(kwargs)
            self.fitters[key] = Fitter(counter, strip_think=self.strip_think)
        return self.fitters[key]


def run_questions(manifest: dict[str, Any], data_dir: Path | None) -> dict[str, Question]:
    """The run's questions by id, loaded again from its benchmark (texts are not recorded)."""
    benchmark = manifest["config"]["benchmark"]
    _, questions = load_questions(benchmark, data_dir)
    found = {q.id: q for q in questions}
    wanted = manifest.get("benchmark", {}).get("questions", [])
    missing = [qid for qid in wanted if qid not in found]
    if missing:
        raise StoreError(
            f"benchmark {benchmark} as loaded here lacks {len(missing)} of the run's questions "
            f"(e.g. {missing[0]!r}); pass the --data-dir the run used."
        )
    answer = manifest.get("benchmark", {}).get("answer")  # None before protocols were data
    return {qid: replace(q, answer=answer or q.answer) for qid, q in found.items()}
