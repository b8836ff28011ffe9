"""Judge-led debate (Liang et al., "Encouraging Divergent Thinking"): an affirmative and a
negative debater speak in turn, and a judge who reads them both after every round either
ends the debate with its answer or lets it go on; the judge's answer is the debate's."""

from __future__ import annotations

from collections.abc import Sequence

from mad_eval.protocols.base import Decision, Protocol, ProtocolError, Role
from mad_eval.records import Turn
from mad_eval.voting.statements import STATEMENTS

AFFIRMATIVE = (
    "You are the affirmative side of a debate. Give your answer and defend it; where the "
    "other side shows a real mistake, correct it."
)
NEGATIVE = (
    "You are the negative side of a debate. Look for what is wrong in the other side's "
    "answer and argue for a better one; agree only where it is right."
)
JUDGE = (
    "You are the judge of a debate between an affirmative and a negative side. Weigh both "
    "sides, give the answer you find best supported, and say whether the debate can end."
)


ENDS = ("verdict", "answer")


class Judged(Protocol):
    name = "judged"
    description = (
        "Liang et al.: an affirmative and a negative debater in turn; a judge (the last "
        "agent) reads both each round, may end the debate, and gives its answer"
    )

    agents = 3  # two debaters and a judge

    def __init__(self, personas: bool = True, ends: str = "verdict"):
        """`personas`: the debaters and the judge are told their roles (system prompts);
        false leaves each agent's own persona (a template of the user's that says it).
        `ends`: what ends the debate early: the judge's "Verdict: end" line with an answer
        (verdict), or any answer the judge gives (answer: Liang et al.'s moderator, whose
        non-empty "debate_answer" ends it; read with --answer-protocol debate-answer)."""
        if ends not in ENDS:
            raise ProtocolError(
                f"judged:ends={ends!r} is not one of: {', '.join(ENDS)} (what ends the "
                "debate: the judge's verdict line, or any answer the judge gives)."
            )
        self.personas = personas
        self.ends = ends

    @staticmethod
    def judge(n_agents: int) -> int:
        return n_agents - 1

    def validate(self, n_agents: int) -> None:
        super().validate(n_agents)
        if n_agents != 3:
            raise ProtocolError(
                f"judged needs two debaters and a judge, the last agent: --agents 3, got "
                f"{n_agents}."
            )

    def sees(self, agent: int, n_agents: int) -> list[int]:
        judge = self.judge(n_agents)
        debaters = list(range(judge))
        if agent == judge:
            return debaters
        return [j for j in debaters if j != agent] + [agent]

    def schedule(self, round_: int, n_agents: int) -> list[list[int]]:
        return [[agent] for agent in range(n_agents)]

    def role(self, agent: int, round_: int, n_agents: int) -> Role | None:
        if not self.personas:
            return None
        if agent == self.judge(n_agents):
            return Role(persona=JUDGE, name="judge")
        if agent == 0:
            return Role(persona=AFFIRMATIVE, name="affirmative")
        return Role(persona=NEGATIVE, name="negative")

    def asks(self, agent: int, round_: int, n_agents: int) -> list[str]:
        if self.ends == "answer" or agent != self.judge(n_agents):
            return []
        return ["verdict"]

    def decision(self, n_agents: int) -> Decision:
        judge = self.judge(n_agents)
        return Decision("judge", [judge], judge)

    def stop_rule(self, n_agents: int) -> str | None:
        return "judged: the judge's verdict may end a debate after any round"

    def stop(self, rounds: Sequence[Sequence[Turn]]) -> str | None:
        judge = rounds[-1][-1]
        if judge.failed or judge.answer is None:
            return None  # no answer to end with: the debate goes on
        if self.ends == "verdict" and STATEMENTS.get("verdict").read(judge.text) != "end":
            return None  # "continue", or no verdict it could read: it goes on
        return f"the judge ended the debate after round {len(rounds) - 1}"
