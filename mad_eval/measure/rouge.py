"""The core family of a summary kind: the ROUGE of the system's summary (the consensus one
unless the run names another rule) and the agents' mean ROUGE, per round."""

from __future__ import annotations

from mad_eval.grading.grader import ROUGE
from mad_eval.measure.base import Add, Context, Debate, Family
from mad_eval.measure.formula import Formula, gain, percent
from mad_eval.measure.scoring import Scoring


def keys(scoring: Scoring) -> list[str]:
    """The system's summary's ROUGE (`rouge1{r}`, `rouge2{r}`, `rougeL{r}`; none parsed
    scores 0) and the agents' (`agent_rouge1{r}`, ...; an unparsed summary scores 0)."""
    rounds = range(scoring.rounds + 1)
    return [f"{p}{m}{r}" for r in rounds for m in ROUGE for p in ("", "agent_")]


def count(debate: Debate, add: Add) -> None:
    for r, found in debate.rounds.items():
        if found.scored:
            picked = found.picked
            for m in ROUGE:
                add(f"{m}{r}", picked.rouge[m] if picked and picked.rouge else 0.0, 1)
        for t in found.live:
            for m in ROUGE:
                add(f"agent_{m}{r}", t.rouge[m] if t.rouge else 0.0, 1)


def formulas(context: Context) -> dict[str, Formula]:
    """F1 in percent: the system's summary after the last round (`rougeL`) and after each
    round (`round1.rougeL`), the agents' mean per round (`round1.agent_rougeL`), and the
    last round's gain over round 0 (`rougeL_delta`)."""
    rounds = context.scoring.rounds
    found: dict[str, Formula] = {}
    for m in ROUGE:
        found[m] = percent(f"{m}{rounds}")
        found[f"{m}_delta"] = gain(f"{m}0", f"{m}{rounds}")
    for r in range(rounds + 1):
        for m in ROUGE:
            found[f"round{r}.{m}"] = percent(f"{m}{r}")
            found[f"round{r}.agent_{m}"] = percent(f"agent_{m}{r}")
    return found


FAMILY = Family(
    name="rouge",
    console=("rouge",),
    formulas=formulas,
    applies=lambda context: not context.scoring.voted,
    keys=keys,
    count=count,
)
