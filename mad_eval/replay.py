"""The exact messages a recorded turn was sent, rebuilt from the run's records, so a judge
reads what the agent read. Each rebuilt prompt is checked against the turn's messages_hash;
one that differs is refused, never judged in its place."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mad_eval.benchmarks import load_questions
from mad_eval.context import ContextError, EstimateCounter, Fitter, load_counter
from mad_eval.engine import agent_prompt
from mad_eval.prompts import Messages
from mad_eval.records import Question, Turn, messages_hash
from mad_eval.store import StoreError


class ReplayError(ValueError):
    """A turn's prompt cannot be rebuilt exactly; the message says why."""


class Replay:
    def __init__(self, manifest: dict[str, Any], questions: Mapping[str, Question]):
        config, prompt = manifest["config"], manifest.get("prompt", {})
        self.questions = questions
        self.style = prompt.get("style", config.get("prompt_style", "debate"))
        self.strip_think = prompt.get("strip_think", config.get("strip_think", False))
        self.template = prompt.get("template", config.get("template", "chat"))
        self.team = {seat["agent"]: seat for seat in manifest.get("team", [])}
        # Prompts sent whole need no tokenizer: fitting returns them as built.
        self.whole = Fitter(EstimateCounter(self.template), strip_think=self.strip_think)
        self.fitters: dict[str, Fitter] = {}

    def messages(self, turn: Turn, previous: Mapping[int, Turn]) -> Messages:
        """The messages `turn` was sent; `previous` holds its question's turns of the round
        before, by agent."""
        seat = self.team.get(turn.agent, {})
        question = self.questions[turn.question]
        missing = [j for j in turn.sees if j not in previous]
        if missing:
            raise ReplayError(f"the turns it read (agents {missing}) are not recorded")
        fitter, budget = self.whole, None
        if turn.cut_tokens:  # shortened to fit: cut again with the same tokenizer and budget
            fitter, budget = self._fitter(seat), seat.get("prompt_budget")
        try:
            fitted = agent_prompt(
                question,
                previous,
                turn.sees,
                turn.agent,
                seat.get("persona"),
                self.style,
                fitter,
                budget,
            )
        except ContextError as exc:
            raise ReplayError(str(exc)) from None
        if messages_hash(fitted.messages) != turn.messages_hash:
            raise ReplayError("its prompt, rebuilt, differs from the one recorded")
        return fitted.messages

    def _fitter(self, seat: dict[str, Any]) -> Fitter:
        name = seat.get("tokenizer") or "estimate"
        if name not in self.fitters:
            counter = EstimateCounter(self.template)
            if name.startswith("hf:"):
                tokenizer = name.removeprefix("hf:")
                try:
                    counter, _ = load_counter(tokenizer, seat["model"], self.template)
                except ContextError:
                    raise ReplayError(
                        f"its prompt was shortened with tokenizer {tokenizer!r}, which cannot "
                        "be loaded here"
                    ) from None
            self.fitters[name] = Fitter(counter, strip_think=self.strip_think)
        return self.fitters[name]


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
    return found
