"""Every prompt the harness sends, so evaluation and training build identical contexts.

A debate prompt is laid out for vLLM's prefix cache: the material agents share (the problem,
then the quoted responses in the protocol's order) comes first, and what differs per agent
(which response was its own, its role) comes last.
"""

from __future__ import annotations

import re

Messages = list[dict[str, str]]

ANSWER_FORMAT = "Reason step by step, then give your final answer in \\boxed{}."
# What each benchmark kind asks of the reply's end, so its grader can read the answer.
ANSWER_FORMATS = {
    "math": ANSWER_FORMAT,
    "number": "Reason step by step, then give your final answer as a single number in \\boxed{}.",
    "choice": (
        "Reason step by step, then give the letter of the one option you choose, and nothing "
        "else, in \\boxed{}."
    ),
    "preference": (
        "Reason step by step, then give the letter of the better response, A or B, and nothing "
        "else, in \\boxed{}."
    ),
    "summary": (
        'End your reply with a line that starts with "Summary:", followed by your summary of '
        "the article in three or four sentences and nothing after it."
    ),
}
PREFERENCE_INSTRUCTION = (
    "Below is a conversation between a human and an AI assistant, and two candidate "
    "responses for the assistant's next turn. Which response is better: more helpful, "
    "honest and harmless?"
)

# Each peer response is quoted inside these tags, so a reader (the simulated agents,
# the LLM judge) can take the prompt apart again without guessing.
RESPONSE_OPEN = '<response from="{who}">'
RESPONSE_CLOSE = "</response>"
_RESPONSE_BLOCK = re.compile(r'<response from="[^"\n]*">\n(.*?)\n</response>', re.DOTALL)


def _tags(*names: str) -> re.Pattern[str]:
    """The "<" that opens or closes one of these tags, however spaced or cased."""
    return re.compile(r"<(?=\s*/?\s*(?:{})\b)".format("|".join(names)), re.IGNORECASE)


# The tags prompts quote model text between: the debate's responses, and the judge's
# context and reply. Quoted text holding one has its "<" escaped, visibly, so no reply can
# close its own quote and open another agent's, or forge the judge's view of the debate.
DEBATE_TAGS = _tags("response")
JUDGE_TAGS = _tags("context", "reply")
_ANY_TAG = _tags("response", "context", "reply")


def quotable(text: str, tags: re.Pattern[str] = DEBATE_TAGS) -> str:
    """`text` safe to quote between `tags`: any such tag inside it is escaped."""
    return tags.sub("&lt;", text)


def holds_quoting_tags(text: str | None) -> bool:
    """Whether a reply wrote (by design or by chance) a tag that prompts quote with."""
    return text is not None and _ANY_TAG.search(text) is not None


STYLES = {
    "debate": "weigh the other responses and keep or change your answer",
    "reflection": "re-examine your own answer step by step, the others only as a cross-check",
    "verification": "check every step of every response, then answer",
    "roles": "agent 0 defends the majority answer, agent 1 attacks it, the rest judge",
    "personas": "the debate prompt, with a different system prompt (persona) per agent",
    "critique": "name the main conflict, critique each competing argument, keep or revise",
}

INSTRUCTIONS = {
    "debate": (
        "Examine these responses critically. Check each line of reasoning, point out any "
        "mistakes, and decide whether to keep your previous answer or change it."
    ),
    "reflection": (
        "Re-examine your own previous response first. Go through it again step by step as if "
        "someone else had written it, and look for errors in logic or calculation. Use any "
        "other responses only as a cross-check. Then keep your answer or correct it."
    ),
    "verification": (
        "Verify every response above in turn. For each one, go through its steps in order, "
        "say whether each step is valid, and name the first wrong step if there is one. Then "
        "give the answer that survives this verification."
    ),
    # The paper's critique-measurement setting: the reply lays out the private critique
    # that `mad-eval judge` scores (conflict, critique, keep-or-revise decision).
    "critique": (
        "First name the main conflict among the responses above: on what do they disagree, "
        "and which answers compete? Then critique each competing argument step by step, "
        "saying which steps hold, which fail and why. Decide whether to keep your previous "
        "answer or revise it, and say which you do and for what reason."
    ),
}

ROLES = {
    "advocate": (
        "Your role in this round is the advocate. Find the answer that most of the responses "
        "above agree on and make the strongest case for it, answering the objections raised "
        "against it. Then state the answer you finally hold."
    ),
    "critic": (
        "Your role in this round is the critic. Find the answer that most of the responses "
        "above agree on and argue against it: look for its weakest step and make the "
        "strongest case for an alternative. Then state the answer you finally hold."
    ),
    "judge": (
        "Your role in this round is a judge. Weigh the arguments above impartially, decide "
        "which reasoning holds up, and give the answer you find correct."
    ),
}

PERSONAS = (
    "You are a careful analyst who checks every step before moving on to the next.",
    "You are a skeptical reviewer who looks for hidden assumptions and errors in any argument.",
    "You are a practical problem solver who tests each claim on small concrete cases.",
    "You are a patient teacher who explains reasoning plainly, one step at a time.",
    "You are an inventive thinker who looks for a second way to reach the answer.",
)


def role_of(agent: int) -> str:
    """The role-assigned debate: agent 0 advocates, agent 1 criticises, the rest judge."""
    return ("advocate", "critic")[agent] if agent < 2 else "judge"


def persona_for(style: str, agent: int, persona: str | None = None) -> str | None:
    """The system prompt of an agent: its roster persona if it has one, else a built-in
    persona under the personas style, else none."""
    if persona:
        return persona
    return PERSONAS[agent % len(PERSONAS)] if style == "personas" else None


def choice_question(question: str, options: list[str], instruction: str | None = None) -> str:
    """A multiple-choice question as agents read it: the question, then lettered options."""
    lead = f"{instruction}\n\n" if instruction else ""
    listed = "\n".join(f"{chr(ord('A') + i)}. {option}" for i, option in enumerate(options))
    return f"{lead}{question}\n\n{listed}"


def preference_question(
    conversation: str, responses: list[str], instruction: str | None = None
) -> str:
    """A two-way preference question: the conversation, then responses A and B."""
    shown = "\n\n".join(
        f"Response {chr(ord('A') + i)}:\n{text}" for i, text in enumerate(responses)
    )
    return f"{instruction or PREFERENCE_INSTRUCTION}\n\nConversation:\n{conversation}\n\n{shown}"


def answer_format(kind: str) -> str:
    if kind not in ANSWER_FORMATS:
        raise ValueError(f"unknown benchmark kind {kind!r}; known: {', '.join(ANSWER_FORMATS)}")
    return ANSWER_FORMATS[kind]


def question_prompt(question: str, system: str | None = None, kind: str = "math") -> Messages:
    """Round 0: the agent answers the question on its own."""
    return _messages(system, f"{question}\n\n{answer_format(kind)}")


def debate_prompt(
    question: str,
    responses: list[tuple[str, str]],
    *,
    own: str | None = None,
    style: str = "debate",
    agent: int = 0,
    system: str | None = None,
    kind: str = "math",
) -> Messages:
    """Round t >= 1: the question, the quoted previous-round responses, and the request to
    weigh them. `responses` holds (who, text) pairs in the order the protocol chose; `own`
    names the one that is this agent's own previous response."""
    if style not in STYLES:
        raise ValueError(f"unknown prompt style {style!r}; known: {', '.join(STYLES)}")
    quoted = "\n\n".join(
        f"{RESPONSE_OPEN.format(who=who)}\n{quotable(text)}\n{RESPONSE_CLOSE}"
        for who, text in responses
    )
    if own is None:
        whose = "None of these is your own previous response."
    else:
        whose = f"Your own previous response is the one from {own}."
    instruction = ROLES[role_of(agent)] if style == "roles" else INSTRUCTIONS.get(style)
    content = (
        f"Problem:\n{question}\n\n"
        f"Here are the responses to this problem from the previous round:\n\n{quoted}\n\n"
        f"{whose} {instruction or INSTRUCTIONS['debate']} {answer_format(kind)}"
    )
    return _messages(system, content)


def pair_prompt(question: str, first: str, second: str, kind: str = "math") -> Messages:
    """Self-debate training (SDRL): the model weighs two of its own rollouts and answers.
    It is the debate prompt of an agent that reads agents 0 and 1 and is neither of them,
    so a trained model meets in evaluation exactly the context it was trained on."""
    return debate_prompt(question, [("agent 0", first), ("agent 1", second)], agent=2, kind=kind)


def quoted_responses(prompt: str) -> list[str]:
    """The peer responses quoted in a debate prompt, in order (inverse of debate_prompt)."""
    return _RESPONSE_BLOCK.findall(prompt)


def _messages(system: str | None, user: str) -> Messages:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": user}]


# The LLM judge's rubric (the seed paper's four critique criteria, in our own words): each
# criterion with its top score and what earns the points.
JUDGE_CRITERIA = {
    "conflict_identification": (
        2,
        "Did the reply find the real disagreement among the responses it read? 0: it does "
        "not mention one, or names a conflict that is not there; 1: it notices that the "
        "responses differ but not where their reasoning parts; 2: it names the exact point "
        "(step, claim or value) where the competing arguments diverge.",
    ),
    "critique_correctness": (
        3,
        "Are its judgements of the arguments right? 0: it endorses wrong steps or rejects "
        "right ones throughout; 1: mostly wrong; 2: mostly right with a real slip; 3: every "
        "judgement it makes of a step is right.",
    ),
    "critique_specificity": (
        2,
        'Does it point at particular steps? 0: generic remarks only ("this looks wrong"); '
        "1: it points at some steps without showing what is wrong with them; 2: it quotes or "
        "names the faulty steps and shows why they fail or hold.",
    ),
    "engagement_revision": (
        2,
        "Does its keep-or-revise decision follow from the critique? 0: it ignores the other "
        "responses, or changes its answer against its own critique; 1: the decision is "
        "stated but loosely tied to the critique; 2: it keeps or revises exactly as its "
        "critique warrants and says why.",
    ),
}

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
    return _messages(JUDGE_SYSTEM, content)


def judge_correction(problem: str) -> str:
    """The one follow-up a malformed judge answer gets."""
    keys = ", ".join(f"{name} (0 to {top})" for name, (top, _) in JUDGE_CRITERIA.items())
    return (
        f"Your answer could not be used: {problem} Reply again with only a JSON object "
        f"holding an integer for each of {keys}."
    )
