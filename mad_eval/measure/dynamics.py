"""Why a debate's vote moves, per question, in the terms Debate-or-Vote asks about: the
round-0 margin (how many voters were right before debate), the drift of mean agent
accuracy against what voting alone adds, the oracle gap, conformity to the previous
round's plurality, and what stopping early would have given. A metric family of voted
kinds (measure.families): counted a debate at a time into tally keys; every number is a
formula over them, so each has the bootstrap interval and paired test every other number has."""

from __future__ import annotations

from typing import Any

import numpy as np

from mad_eval.measure.base import Add, Context, Debate, Family, ScoredRound
from mad_eval.measure.formula import Formula, Rates, gain, percent, plain, total
from mad_eval.measure.scoring import Scoring
from mad_eval.measure.tallies import Tallies
from mad_eval.records import Turn
from mad_eval.voting.groups import Same, same_answer_as


def keys(scoring: Scoring) -> list[str]:
    """The tally keys of a debate of `rounds` rounds with `voters` voters (none without
    debate): `m{k}`, `m{k}_maj`, `m{k}_debate`, `m{k}_gain` (questions with k voters right
    in round 0; their vote before and after debate; their part of Delta), `oracle`,
    `adopt_right{r}`, `adopt_wrong{r}`, `flip_right{r}`, `flip_wrong{r}` and the same
    without `r` over all rounds, and the unanimity stop's `stop_acc`, `stop_round`,
    `stop_tok`, `stop_gen`."""
    rounds, voters = scoring.rounds, len(scoring.voters)
    if rounds == 0:
        return []
    found = [f"m{k}{s}" for k in range(voters + 1) for s in ("", "_maj", "_debate", "_gain")]
    tags = ["", *(str(r) for r in range(1, rounds + 1))]
    found += [f"{k}{t}" for t in tags for k in ("adopt_right", "adopt_wrong")]
    found += [f"{k}{t}" for t in tags for k in ("flip_right", "flip_wrong")]
    return [*found, "oracle", "stop_acc", "stop_round", "stop_tok", "stop_gen"]


def count(debate: Debate, add: Add) -> None:
    """Count one debate, its rounds as the votes family scored them."""
    scoring = debate.scoring
    count_dynamics(
        debate.turns, debate.rounds, scoring.rounds, list(scoring.voters), debate.same, add
    )


def count_dynamics(
    turns: list[Turn],
    rounds: dict[int, ScoredRound],
    last: int,
    voters: list[int],
    same: Same,
    add: Add,
) -> None:
    """Count one debate: its turns, and its rounds 0..`last` as the tally saw them."""
    first, final = rounds.get(0), rounds.get(last)
    if last == 0 or first is None or first.vote is None:  # no debate: nothing moved
        return
    right = sum(1 for t in first.live if t.agent in voters and t.correct)
    for k in range(len(voters) + 1):
        add(f"m{k}", k == right, 1)
    add(f"m{right}_maj", first.vote, 1)
    if final is not None and final.vote is not None:
        add(f"m{right}_debate", final.vote, 1)
        for k in range(len(voters) + 1):
            add(f"m{k}_gain", (final.vote - first.vote) if k == right else 0, 1)
        anyone = any(t.correct for r in rounds.values() for t in r.live)
        add("oracle", anyone and not final.vote, 1)
    for r in range(1, last + 1):
        if r - 1 in rounds and r in rounds and not rounds[r].carried:  # no move after a stop
            _conformity(rounds[r - 1], rounds[r], r, same, add)
    _stop(turns, rounds, last, add)


def _conformity(before: ScoredRound, after: ScoredRound, r: int, same: Same, add: Add) -> None:
    """Each agent's move from round r-1 to r against round r-1's plurality answer (a group
    strictly larger than every other; none on a tie): whether an agent that held another
    answer adopted it, and whether an agent that was right stayed right, split by whether
    the plurality was right."""
    sizes = sorted((len(g) for g in before.groups), reverse=True)
    if not sizes or (len(sizes) > 1 and sizes[0] == sizes[1]):
        return
    top = next(g for g in before.groups if len(g) == sizes[0])
    side = "right" if top[0].correct else "wrong"
    holders = {t.agent for t in top}
    previous = {t.agent: t for t in before.live}
    for t in after.live:
        u = previous.get(t.agent)
        if u is None:
            continue
        if u.agent not in holders:
            adopted = same_answer_as(t, top[0], same)
            for tag in (str(r), ""):
                add(f"adopt_{side}{tag}", adopted, 1)
        if u.correct:
            for tag in (str(r), ""):
                add(f"flip_{side}{tag}", not t.correct, 1)


def _stop(turns: list[Turn], rounds: dict[int, ScoredRound], last: int, add: Add) -> None:
    """The debate stopped at the first round whose answers all agree (else at the last):
    its vote there, that round, and the tokens and answers it took to get there."""
    stop = next((r for r in sorted(rounds) if rounds[r].unanimous), last)
    if rounds.get(stop) is None or rounds[stop].vote is None:
        return
    spent = [t for t in turns if t.round <= stop]
    add("stop_acc", bool(rounds[stop].vote), 1)
    add("stop_round", stop, 1)
    add("stop_tok", sum((t.prompt_tokens or 0) + (t.completion_tokens or 0) for t in spent), 1)
    add("stop_gen", len(spent), 1)


def dynamics_formulas(rounds: int, voters: int) -> dict[str, Formula]:
    """The numbers of the keys above, in metrics.json:
    - `margin{k}.share`, `.maj`, `.debate`, `.delta`, `.delta_part` (% of questions with k
      voters right in round 0; their Maj, Debate, Delta; the points of the run's Delta they
      make, which sum to it over k);
    - `drift` and `move{r}.drift` (mean agent accuracy after the last round, or round r,
      less before; 0 for a martingale) and `aggregation` (what the vote adds over the mean
      agent, after less before: Delta = drift + aggregation), `round{r}.vote_over_agent`;
    - `oracle_gap` (% of questions some agent answered right in some round while the final
      vote was wrong: a diagnostic, never an accuracy);
    - `conformity.*` and `move{r}.*`: `adopt_right` / `adopt_wrong` (% of agents not holding
      the previous round's plurality answer that took it up, when it was right / wrong),
      `c2i_right` / `c2i_wrong` (% of right agents that turned wrong, under a right / wrong
      plurality);
    - `stop{r}.accuracy`, `.tokens`, `.generations` (the vote and cost had the debate
      stopped after round r) and `stop_unanimous.*` (stopped at the first unanimous round:
      `accuracy`, `delta` against the full debate, `round`, `tokens`, `generations`,
      `tokens_saved` in %)."""
    if rounds == 0:
        return {}
    found: dict[str, Formula] = {}
    for k in range(voters + 1):
        found |= {
            f"margin{k}.share": percent(f"m{k}"),
            f"margin{k}.maj": percent(f"m{k}_maj"),
            f"margin{k}.debate": percent(f"m{k}_debate"),
            f"margin{k}.delta": gain(f"m{k}_maj", f"m{k}_debate"),
            f"margin{k}.delta_part": percent(f"m{k}_gain"),
        }
    found["drift"] = gain("agent0", f"agent{rounds}")
    found["aggregation"] = lambda rates: (
        100.0
        * ((rates[f"vote{rounds}"] - rates[f"agent{rounds}"]) - (rates["vote0"] - rates["agent0"]))
    )
    for r in range(rounds + 1):
        found[f"round{r}.vote_over_agent"] = gain(f"agent{r}", f"vote{r}")
    for r in range(1, rounds + 1):
        found[f"move{r}.drift"] = gain(f"agent{r - 1}", f"agent{r}")
    found["oracle_gap"] = percent("oracle")
    for tag, head in [*((str(r), f"move{r}") for r in range(1, rounds + 1)), ("", "conformity")]:
        found |= {
            f"{head}.adopt_right": percent(f"adopt_right{tag}"),
            f"{head}.adopt_wrong": percent(f"adopt_wrong{tag}"),
            f"{head}.c2i_right": percent(f"flip_right{tag}"),
            f"{head}.c2i_wrong": percent(f"flip_wrong{tag}"),
        }
    for r in range(rounds + 1):
        found |= {
            f"stop{r}.accuracy": percent(f"vote{r}"),
            f"stop{r}.delta": gain(f"vote{rounds}", f"vote{r}"),
            f"stop{r}.tokens": through(r, "tokens"),
            f"stop{r}.generations": through(r, "generations"),
            f"stop{r}.tokens_saved": _saved(through(r, "tokens"), through(rounds, "tokens")),
        }
    found |= {
        "stop_unanimous.accuracy": percent("stop_acc"),
        "stop_unanimous.delta": gain(f"vote{rounds}", "stop_acc"),
        "stop_unanimous.round": plain("stop_round"),
        "stop_unanimous.tokens": plain("stop_tok"),
        "stop_unanimous.generations": plain("stop_gen"),
        "stop_unanimous.tokens_saved": _saved(plain("stop_tok"), through(rounds, "tokens")),
    }
    return found


def through(rounds: int, field: str) -> Formula:
    """A cost field summed over rounds 0..`rounds`: what a debate stopped there spent (the
    cost family's tally keys)."""
    keys = {"tokens": ("ptok", "ctok"), "generations": ("gen",)}[field]
    return total(*(f"{k}{r}" for r in range(rounds + 1) for k in keys))


def _saved(spent: Formula, full: Formula) -> Formula:
    """The share of the full debate's tokens a stop saved, in %; NaN where the debate
    counted no tokens (a backend that reports none)."""

    def saved(rates: Rates) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return 100.0 * (1 - spent(rates) / full(rates))

    return saved


def differences(rounds: int, voters: int) -> dict[str, tuple[str, str]]:
    """The numbers that are one number less another, by name: (first, second). A table
    tests each against zero with a paired test on the same questions, and metrics.json
    gives the drift's p-values so. (Delta is the votes family's.)"""
    found: dict[str, tuple[str, str]] = {}
    if rounds == 0:
        return found
    found |= {
        "drift": (f"round{rounds}.agent_accuracy", "round0.agent_accuracy"),
        "aggregation": (f"round{rounds}.vote_over_agent", "round0.vote_over_agent"),
        "stop_unanimous.delta": ("stop_unanimous.accuracy", "debate"),
    }
    for r in range(1, rounds + 1):
        found[f"move{r}.delta"] = (f"move{r}.i2c", f"move{r}.c2i")
        found[f"move{r}.drift"] = (f"round{r}.agent_accuracy", f"round{r - 1}.agent_accuracy")
    for r in range(rounds + 1):
        found[f"stop{r}.delta"] = (f"stop{r}.accuracy", "debate")
    for k in range(voters + 1):
        found[f"margin{k}.delta"] = (f"margin{k}.debate", f"margin{k}.maj")
    return found


def intervals(context: Context) -> list[str]:
    """The drifts and the aggregation: metrics.json gives their interval and test."""
    rounds = context.scoring.rounds
    if rounds == 0:
        return []
    return ["drift", "aggregation", *(f"move{r}.drift" for r in range(1, rounds + 1))]


def questions(summary: dict[str, Any], tallies: Tallies) -> None:
    """How many questions each margin row holds, beside their share (mean over runs)."""
    for row in summary.get("margins", []):
        counts = tallies.num[f"m{row['right_in_round0']}"].sum(axis=1)
        row["questions"] = float(counts.mean())


FAMILY = Family(
    name="dynamics",
    console=("dynamics",),
    formulas=lambda context: dynamics_formulas(context.scoring.rounds, len(context.scoring.voters)),
    applies=lambda context: context.scoring.voted,
    keys=keys,
    count=count,
    compact=True,
    intervals=intervals,
    tests=lambda scoring: differences(scoring.rounds, len(scoring.voters)),
    finish=questions,
    lists={
        "margin": ("margins", 0, lambda n: {"right_in_round0": n}),
        "stop": ("stopping", 0, lambda n: {"after_round": n}),
    },
)
