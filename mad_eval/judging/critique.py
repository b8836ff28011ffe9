"""LLM-judge critique scores: which turns are judged, the judge's requests, its verdicts.

Every debate turn (round >= 1) is judged on the exact messages the agent was sent (see
replay.py). A judge's answer is model output, so it is read defensively: only the last
JSON object in the text counts (fenced or not), every criterion must be present as an
integer in its range, and nothing is guessed. A bad answer gets one correction message; a
second bad answer is a judge failure, counted and shown, never a zero. Verdicts are
appended to judge.jsonl beside the run as they finish, so judging resumes like a run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from mad_eval.backends import Backend, Request, Sampling
from mad_eval.backends.base import every
from mad_eval.debate.prompts import judge_correction, judge_prompt
from mad_eval.debate.replay import Replay, ReplayError
from mad_eval.grading import reasoning
from mad_eval.grading.rubric import JUDGE_CRITERIA
from mad_eval.records import (
    Messages,
    Question,
    Setting,
    Turn,
    TurnKey,
    Verdict,
    derive_seed,
    messages_hash,
)
from mad_eval.sanitize import redact
from mad_eval.store.files import StoreError
from mad_eval.store.manifest import RunManifest

MAX_SCANNED = 20_000  # characters read from the end of an answer: the JSON comes last
MAX_OBJECTS = 200  # opening braces tried, so hostile text costs bounded time


class JudgeFormatError(ValueError):
    """The judge's answer holds no usable scores; the message says what is wrong."""


@dataclass(frozen=True)
class Scores:
    values: dict[str, int]  # criterion -> score, in JUDGE_CRITERIA order

    @property
    def total(self) -> int:
        return sum(self.values.values())


def parse_scores(text: str) -> Scores:
    """The scores in a judge's answer, or JudgeFormatError naming the first problem."""
    found = _last_object(text[-MAX_SCANNED:])
    if found is None:
        raise JudgeFormatError("it holds no JSON object.")
    values = {}
    for name, (top, _) in JUDGE_CRITERIA.items():
        if name not in found:
            raise JudgeFormatError(f'the JSON object has no "{name}".')
        value = found[name]
        if type(value) is not int or not 0 <= value <= top:
            raise JudgeFormatError(
                f'"{name}" must be an integer from 0 to {top}, not {json.dumps(value)}.'
            )
        values[name] = value
    return Scores(values)


def _last_object(text: str) -> dict | None:
    """The last JSON object in the text that names a criterion; code fences are skipped
    over naturally, since only the object itself is decoded."""
    decoder = json.JSONDecoder()
    starts = [i for i, c in enumerate(text) if c == "{"][-MAX_OBJECTS:]
    for start in reversed(starts):
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and any(name in value for name in JUDGE_CRITERIA):
            return value
    return None


@dataclass(frozen=True)
class Case:
    """A turn to judge, with the judge's first messages."""

    turn: Turn
    question: Question
    messages: Messages
    # The responses the judged agent read, then its reply: a simulated judge reads them here.
    quoted: tuple[str, ...] = ()

    @functools.cached_property  # asked when choosing what to judge and again in the verdict
    def prompt_hash(self) -> str:
        return messages_hash(self.messages)


def judge_cases(
    manifest: RunManifest,
    turns: list[Turn],
    questions: dict[str, Question],
    rounds: list[int],
    limit: int | None,
    reference: bool,
) -> tuple[list[Case], Counter[str]]:
    """The debate turns of `rounds` on the first `limit` questions, each with its judge
    prompt; and the turns left out, counted by reason."""
    order = manifest.benchmark.questions or sorted({t.question for t in turns})
    recorded = {t.question for t in turns}
    chosen = set([q for q in order if q in recorded][:limit])
    by_debate: dict[tuple[int, str], dict[int, dict[int, Turn]]] = defaultdict(dict)
    for t in turns:
        by_debate[(t.run, t.question)].setdefault(t.round, {})[t.agent] = t
    replay = Replay(manifest, questions)
    replay.check()  # a template edited in manifest.json: one sentence, nothing judged
    cases: list[Case] = []
    skipped: Counter[str] = Counter()
    for turn in sorted(turns, key=lambda t: t.key):
        if turn.round not in rounds or turn.question not in chosen:
            continue
        if turn.failed:
            skipped["the turn itself failed"] += 1
            continue
        if not turn.sees:
            skipped["it read no other response"] += 1
            continue
        debate = by_debate[(turn.run, turn.question)]
        previous = debate.get(turn.round - 1, {})
        try:
            context = replay.messages(turn, debate)
        except ReplayError as exc:
            skipped[str(exc)] += 1
            continue
        question = questions[turn.question]
        gold = question.gold if reference else None
        reply = reasoning.quoted(turn.text or "", turn.reasoning)  # its reasoning, then its answer
        quoted = (*(previous[j].text or "" for j in turn.sees), turn.text or "")
        cases.append(Case(turn, question, judge_prompt(context, reply, gold), quoted))
    return cases, skipped


def pending(cases: list[Case], done: dict[TurnKey, Verdict]) -> list[Case]:
    """Cases still to judge: never judged, judged on another prompt (the rubric or the
    run's records changed), or whose request failed."""
    return [
        case
        for case in cases
        if (v := done.get(case.turn.key)) is None
        or v.prompt_hash != case.prompt_hash
        or v.error is not None
    ]


class Judge:
    def __init__(
        self,
        backend: Backend,
        setting: Setting,
        on_verdict: Callable[[Verdict], None],
        on_progress: Callable[[], None] = lambda: None,
    ):
        self.backend = backend
        self.setting = setting
        self.on_verdict = on_verdict
        self.on_progress = on_progress

    async def run(self, cases: list[Case]) -> None:
        await every(self.verdict(case) for case in cases)

    async def verdict(self, case: Case) -> Verdict:
        """Ask the judge; a malformed answer is shown its problem once and asked again."""
        s = self.setting
        messages, raw = case.messages, []
        scores, failure, error = None, None, None
        attempts, latency, endpoint, cached = 0, 0.0, None, True
        tokens: dict[str, int | None] = {"prompt_tokens": None, "completion_tokens": None}
        for attempt in range(2):
            seed = derive_seed(s.seed, "judge", *case.turn.key, attempt)
            sampling = Sampling(s.temperature, s.top_p, s.max_tokens, seed)
            request = Request(
                messages, sampling, case.question, quoted=case.quoted, extra_body=s.extra_body or {}
            )
            generation = await self.backend.generate(request)
            attempts += generation.attempts
            latency += generation.latency
            endpoint = generation.endpoint or endpoint
            cached = cached and generation.cached
            for name in tokens:
                count = getattr(generation, name)
                if count is not None:
                    tokens[name] = (tokens[name] or 0) + count
            if generation.error is not None:
                error = generation.error
                break
            text = generation.text or ""
            raw.append(text)
            try:
                scores = parse_scores(text).values
                break
            except JudgeFormatError as exc:
                failure = str(exc)
                correction = {"role": "user", "content": judge_correction(failure)}
                messages = [*messages, {"role": "assistant", "content": text}, correction]
        verdict = Verdict(
            *case.turn.key,
            setting=redact(dataclasses.asdict(s)),  # the extra body's secrets hidden
            prompt_hash=case.prompt_hash,
            raw=raw,
            scores=scores,
            total=sum(scores.values()) if scores else None,
            failure=None if scores or error else failure,
            error=error,
            attempts=attempts,
            latency=round(latency, 4),
            endpoint=endpoint,
            cached=cached and error is None,
            prompt_tokens=tokens["prompt_tokens"],
            completion_tokens=tokens["completion_tokens"],
        )
        self.on_verdict(verdict)
        self.on_progress()
        return verdict


def parse_rounds(text: str | None, rounds: int) -> list[int]:
    """--rounds: 'A..B', 'R' or 'R,S,...' among the debate rounds 1..T (None: all)."""
    every = list(range(1, rounds + 1))
    if text is None:
        return every
    try:
        if ".." in text:
            low, _, high = text.partition("..")
            chosen = list(range(int(low), int(high) + 1))
        else:
            chosen = [int(part) for part in text.split(",")]
    except ValueError:
        chosen = []
    if not chosen or any(r not in every for r in chosen):
        raise StoreError(
            f"--rounds '{text}' must name debate rounds among 1..{rounds}, as 'A..B', 'R' or 'R,S'."
        )
    return sorted(set(chosen))
