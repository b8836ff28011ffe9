"""Every prompt the harness sends, so evaluation, the judge's replay and training build
identical contexts: debate prompts from templates (mad_eval.settings.templates), the answer-format
instructions, and the LLM judge's rubric.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from mad_eval.debate.context import ContextError, EstimateCounter, Fitted, Fitter, Reply
from mad_eval.debate.reading import Reading
from mad_eval.grading.answers import get_answer_protocol
from mad_eval.grading.grader import check_answer_protocol
from mad_eval.grading.kinds import get_kind
from mad_eval.grading.reasoning import (
    FINAL,
    TAIL_MARKER,
    VERBATIM,
    Quoting,
    quoted,
    tag_pattern,
    verbatim,
)
from mad_eval.grading.rubric import JUDGE_CRITERIA
from mad_eval.records import Messages, Question, Turn
from mad_eval.settings.templates import Quote, Step, Template, common_data
from mad_eval.voting.statements import instructions

# The tags prompts quote model text between: the debate's responses, and the judge's
# context and reply. Quoted text holding one has its "<" escaped, visibly, so no reply can
# close its own quote and open another agent's, or forge the judge's view of the debate.
DEBATE_TAGS = tag_pattern("response")
JUDGE_TAGS = tag_pattern("context", "reply")


def quotable(text: str, tags: re.Pattern[str] = DEBATE_TAGS) -> str:
    """`text` safe to quote between `tags`: any such tag inside it is escaped."""
    return tags.sub("&lt;", text)


def answer_format(kind: str, answer: str | None = None) -> str:
    """The instruction that tells an agent how to write its final answer: the answer
    protocol's sentence for the kind, so prompt and grader cannot disagree."""
    protocol = get_answer_protocol(check_answer_protocol(kind, answer))
    return protocol.instruction(get_kind(kind).what)


@dataclass(frozen=True)
class Speaker:
    """Who a prompt is for: the agent, its template, what the template may say of it, and
    what it reads of each reply it is shown."""

    template: Template
    agent: int
    agents: int
    persona: str | None = None
    hub: bool = False
    quote: Quoting = FINAL
    hub_agent: int | None = None  # the protocol's hub, when it has one
    asks: tuple[str, ...] = ()  # what its reply must state besides the answer (statements)


@dataclass(frozen=True)
class Said:
    """A response as a prompt quotes it, where no Turn records it (training pairs): its
    text, whose responses its author had read, and its reasoning."""

    text: str | None
    sees: list[int] = field(default_factory=list)
    reasoning: str | None = None
    reply: str | None = None  # as written, where it differs from `text`

    @property
    def failed(self) -> bool:
        return False  # a response handed over as text was written


# A round's turns by agent; a debate's history is its rounds so far, round 0 first.
RoundReplies = Mapping[int, "Turn | Said"]


def build_prompt(
    speaker: Speaker,
    question: Question,
    history: Sequence[RoundReplies],
    sees: list[int],
    fitter: Fitter,
    budget: int | None,
    transcript: Sequence[tuple[int, Turn | Said]] = (),
    opening: RoundReplies | None = None,
) -> Fitted:
    """The prompt an agent is sent in round len(history), fitted to `budget`: its
    template rendered with the responses it reads (`sees`: agents whose previous-round turns
    it reads, in order) and, for a template with history, its whole conversation so far,
    whose round 0 reads `opening` (the replies of agents who spoke before it in round 0).
    `transcript` (agent, turn) is every earlier reply the agent reads or wrote, in the order
    said, for a template that quotes it (`said`).
    The engine, the judge's replay and the training pairs all build prompts here."""
    template, agent = speaker.template, speaker.agent
    asked = answer_format(question.kind, question.answer)
    if speaker.asks:
        asked = f"{asked} {instructions(speaker.asks)}"
    common = common_data(
        question.text,
        asked,
        agent,
        speaker.agents,
        speaker.persona,
        speaker.hub,
        speaker.hub_agent,
    )
    rounds = range(1, len(history) + 1) if template.history else range(len(history), 0, -1)[:1]
    plan: list[tuple[int, list[int], bool]] = []  # (round, agents read, own apart)
    for r in rounds:
        read = sees if r == len(history) else _turn(history[r], agent).sees
        own_apart = template.history and agent not in read and agent in history[r - 1]
        plan.append((r, read, own_apart))
    if not template.history and plan and not plan[0][1]:
        plan = []  # nobody to read: the question alone, as in round 0
    first = list(opening.items()) if template.history and opening else []
    replies = [_reply(turn, speaker.quote, fitter) for _, turn in first]
    for r, read, apart in plan:
        said = [_turn(history[r - 1], j) for j in (*read, *([agent] if apart else []))]
        replies += [_reply(turn, speaker.quote, fitter) for turn in said]
    transcript = transcript if plan and template.transcript else ()
    replies += [_reply(turn, speaker.quote, fitter) for _, turn in transcript]

    exact = speaker.quote.how == "verbatim"

    def build(cut: list[Reply]) -> Messages:
        opened = [_quote(j, cut[n], False, exact) for n, (j, _) in enumerate(first)]
        steps, at = [], len(first)
        for r, read, apart in plan:
            quotes = [_quote(j, cut[at + n], j == agent, exact) for n, j in enumerate(read)]
            at += len(read)
            own = next((q for q in quotes if q.own), None)
            if apart:
                own, at = _quote(agent, cut[at], True, exact), at + 1
            steps.append(Step(r, tuple(quotes), own))
        if transcript:
            quotes = [
                _quote(j, cut[at + n], j == agent, exact) for n, (j, _) in enumerate(transcript)
            ]
            steps[-1] = replace(steps[-1], said=tuple(quotes))
        return template.render(common, steps, Step(0, tuple(opened), None) if opened else None)

    return fitter.fit(build, replies, budget)


def read_prompt(
    speaker: Speaker,
    question: Question,
    found: Reading[Turn] | Reading[Turn | Said],
    fitter: Fitter,
    budget: int | None,
) -> Fitted:
    """The prompt of what an agent reads as it speaks (reading.Reading), as build_prompt
    builds it: the engine's and the replay's one call."""
    history: Sequence[RoundReplies] = found.history
    return build_prompt(
        speaker, question, history, found.sees, fitter, budget, found.said, found.opening
    )


def _reply(turn: Turn | Said, quoting: Quoting, fitter: Fitter) -> Reply:
    """A turn as `quoting` says to quote it: its final content, with all of its reasoning
    (full) or the reasoning's last tokens (tail:N); or the reply as written (verbatim),
    which fitting cuts as one text, from its start."""
    text, reasoning = turn.text or "", turn.reasoning or ""
    if quoting.how == "verbatim":
        return Reply(verbatim(turn.text, turn.reasoning, getattr(turn, "reply", None)))
    if quoting.how == "final" or not reasoning:
        return Reply(text)
    if quoting.how == "tail" and fitter.count_text(reasoning) > quoting.tokens:
        reasoning = TAIL_MARKER + fitter.tail(reasoning, quoting.tokens)
    return Reply(text, reasoning)


def _quote(agent: int, reply: Reply, own: bool, exact: bool = False) -> Quote:
    """A reply as the template sees it; `exact`: quoted verbatim, as one text."""
    if exact:
        return Quote(agent, f"agent {agent}", reply.text, own, reply.text, "", reply.text)
    text = quoted(reply.text, reply.reasoning)
    return Quote(agent, f"agent {agent}", text, own, reply.text, reply.reasoning)


def first_prompt(question: Question, template: Template, agents: int = 2) -> Messages:
    """The round-0 prompt of `question` (training's first-turn rows)."""
    speaker = Speaker(template, 0, agents)
    return build_prompt(speaker, question, [], [], Fitter(EstimateCounter()), None).messages


def pair_prompt(question: Question, own: str, partner: str, template: Template) -> Messages:
    """Self-debate training (SDRL): the round-1 prompt of agent 0 in a two-agent debate
    that reads its own round-0 answer `own` and its partner's: the context a trained model
    meets again in evaluation. Under a template with history, `own` is an assistant turn; a
    template that quotes replies as written (.verbatim) is given the texts as they are."""
    speaker = Speaker(template, 0, 2, quote=VERBATIM if template.verbatim else FINAL)
    history = [{0: Said(own), 1: Said(partner)}]
    return build_prompt(
        speaker, question, history, [0, 1], Fitter(EstimateCounter()), None
    ).messages


def _turn(round_: RoundReplies, agent: int) -> Turn | Said:
    if agent not in round_:
        raise ContextError(f"the turn of agent {agent} that this prompt quotes is not recorded")
    return round_[agent]


JUDGE_SYSTEM = (
    "You grade how one participant in a multi-agent debate dealt with the other "
    "participants' responses. Grade the reply, not whether its final answer is right, "
    "except where the rubric says so."
)


def judge_prompt(context: Messages, reply: str, reference: str | None = None) -> Messages:
    """The judge's messages: the context the agent saw (its own messages, verbatim), its
    reply, the rubric, and optionally the gold answer; the judge answers in JSON."""
    seen = "\n\n".join(f"[{m['role']}]\n{quotable(m['content'], JUDGE_TAGS)}" for m in context)
    rubric = "\n".join(
        f"- {name} (0 to {top}): {text}" for name, (top, text) in JUDGE_CRITERIA.items()
    )
    keys = ", ".join(f'"{name}": <integer>' for name in JUDGE_CRITERIA)
    gold = f"The correct final answer is: {reference}\n\n" if reference is not None else ""
    content = (
        f"The participant was shown this:\n<context>\n{seen}\n</context>\n\n"
        f"The participant replied:\n<reply>\n{quotable(reply, JUDGE_TAGS)}\n</reply>\n\n{gold}"
        f"Score the reply on each criterion:\n{rubric}\n\n"
        f"Answer with only a JSON object: {{{keys}}}"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": content}]


def judge_correction(problem: str) -> str:
    """The one follow-up a malformed judge answer gets."""
    keys = ", ".join(f"{name} (0 to {top})" for name, (top, _) in JUDGE_CRITERIA.items())
    return (
        f"Your answer could not be used: {problem} Reply again with only a JSON object "
        f"holding an integer for each of {keys}."
    )
