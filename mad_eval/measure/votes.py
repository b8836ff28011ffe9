"""The core family of a voted kind: the system's vote per round as the scoring rule picks it
(Maj, Debate, Delta), the agents' and the hub's accuracy, diversity (unanimity, entropy,
pairwise agreement, correlation), answer lengths, and the moves between rounds."""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import combinations

import numpy as np

from mad_eval.measure.base import Add, Context, Debate, Family
from mad_eval.measure.formula import Formula, Rates, gain, percent, plain
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn
from mad_eval.voting.maj_at_k import bootstrap_maj


def keys(scoring: Scoring) -> list[str]:
    """`vote{r}` (right system answers), `agent{r}` (right answers), `hub{r}` (the hub's;
    a failed turn wrong), `tie{r}` (votes the rule's seeded draw decided), `unanimous{r}`
    (questions whose answers all agree), `entropy{r}` (bits summed over questions),
    `agree{r}` (agent pairs equally right or wrong),
    `len_right{r}` and `len_wrong{r}` (completion tokens over right / wrong answers),
    `reasoning_len{r}` and `final_len{r}` (over the answers whose reasoning tokens are
    known), for debate rounds `c2i{r}` and `i2c{r}` (agents moving right->wrong and
    wrong->right into round r), and without debate `maj_boot0` (verl's bootstrap maj@K,
    voting.maj_at_k.bootstrap_maj)."""
    rounds = scoring.rounds
    names = ["vote", "tie", "agent", "unanimous", "entropy", "agree", "len_right", "len_wrong"]
    names += ["reasoning_len", "final_len"]
    names += ["hub"] if scoring.hub is not None else []
    found = [f"{k}{r}" for r in range(rounds + 1) for k in names]
    found += [f"{k}{r}" for r in range(1, rounds + 1) for k in ("c2i", "i2c")]
    return found + (["maj_boot0"] if rounds == 0 else [])


def count(debate: Debate, add: Add) -> None:
    """Count one debate's rounds as the rule scored them, then each agent's moves."""
    scoring = debate.scoring
    for r, found in debate.rounds.items():
        if found.scored:
            add(f"vote{r}", bool(found.vote), 1)
            add(f"tie{r}", found.tie is not None, 1)
        if scoring.hub is not None:
            # A failed hub turn is a wrong answer in every hub number, as the hub rule
            # scores it: hub_accuracy and a hub-scored vote_accuracy are one number.
            spoken = debate.spoken(r)
            mine = [t for t in debate.turns if t.round == spoken and t.agent == scoring.hub]
            add(f"hub{r}", sum(bool(t.correct) and not t.failed for t in mine), len(mine))
        live = found.live
        if not live:
            continue
        if scoring.rounds == 0 and (ballot := [t for t in live if t.agent in scoring.voters]):
            add("maj_boot0", bootstrap_maj(ballot), 1)
        right = [bool(t.correct) for t in live]
        add(f"agent{r}", sum(right), len(right))
        add(f"unanimous{r}", found.unanimous, 1)
        add(f"entropy{r}", entropy_bits(live, found.groups), 1)
        pairs = list(combinations(right, 2))
        add(f"agree{r}", sum(a == b for a, b in pairs), len(pairs))
        if found.carried:
            continue  # nothing was written in it: the lengths are the spoken rounds'
        for t in live:
            if t.completion_tokens is not None:
                add(f"len_right{r}" if t.correct else f"len_wrong{r}", t.completion_tokens, 1)
            if t.reasoning_tokens is not None:
                add(f"reasoning_len{r}", t.reasoning_tokens, 1)
            final = final_tokens(t)
            if final is not None:
                add(f"final_len{r}", final, 1)
    seen: dict[int, dict[int, Turn]] = defaultdict(dict)
    for t in debate.turns:
        if not t.failed:
            seen[t.agent][t.round] = t
    for rounds in seen.values():
        for r in range(1, scoring.rounds + 1):
            if r not in rounds and debate.spoken(r) in rounds:  # ended before r: it stays
                rounds[r] = rounds[debate.spoken(r)]
            if r - 1 in rounds and r in rounds:
                before, after = bool(rounds[r - 1].correct), bool(rounds[r].correct)
                add(f"c2i{r}", before and not after, 1)
                add(f"i2c{r}", after and not before, 1)


def entropy_bits(turns: list[Turn], groups: list[list[Turn]]) -> float:
    """Shannon entropy of the agents' answers (`groups`: their answer_groups); every
    unparsed answer falls in one more class."""
    sizes = [len(g) for g in groups]
    sizes.append(sum(1 for t in turns if t.answer is None))
    total = sum(sizes)
    return -sum(s / total * math.log2(s / total) for s in sizes if s)


def final_tokens(turn: Turn) -> int | None:
    """The tokens of a reply's final content: its completion tokens less its reasoning
    tokens, where the server counted those (a reasoning model's replies)."""
    if turn.completion_tokens is None or turn.reasoning_tokens is None:
        return None
    return turn.completion_tokens - turn.reasoning_tokens


def formulas(context: Context) -> dict[str, Formula]:
    """`maj`, `debate`, `delta` (the rule's votes in percent); without debate maj@K both
    exactly (`maj_at_k`) and as verl estimates it (`maj_at_k_bootstrap`); per round
    `round{r}.*` (accuracies, `ties`: the share of votes a seeded draw decided, diversity,
    lengths) and per move `move{r}.*` (c2i, i2c)."""
    rounds, agents = context.scoring.rounds, context.scoring.agents
    found: dict[str, Formula] = {
        "maj": percent("vote0"),
        "debate": percent(f"vote{rounds}"),
        "delta": gain("vote0", f"vote{rounds}"),
    }
    if rounds == 0:  # independent samples: the single-agent numbers
        found["mean_at_k"] = percent("agent0")
        found["maj_at_k"] = percent("vote0")  # exact: the vote of all K answers
        found["maj_at_k_bootstrap"] = percent("maj_boot0")  # verl's maj@K/mean
    for r in range(rounds + 1):
        found |= {
            f"round{r}.vote_accuracy": percent(f"vote{r}"),
            f"round{r}.ties": percent(f"tie{r}"),
            f"round{r}.agent_accuracy": percent(f"agent{r}"),
            f"round{r}.unanimous": percent(f"unanimous{r}"),
            f"round{r}.entropy": plain(f"entropy{r}"),
            f"round{r}.rho": _rho(r),
            f"round{r}.n_eff": _n_eff(r, agents),
            f"round{r}.length_right": plain(f"len_right{r}"),
            f"round{r}.length_wrong": plain(f"len_wrong{r}"),
            f"round{r}.reasoning_tokens": plain(f"reasoning_len{r}"),
            f"round{r}.final_tokens": plain(f"final_len{r}"),
        }
        if context.scoring.hub is not None:
            found[f"round{r}.hub_accuracy"] = percent(f"hub{r}")
    for r in range(1, rounds + 1):
        found |= {
            f"move{r}.c2i": percent(f"c2i{r}"),
            f"move{r}.i2c": percent(f"i2c{r}"),
            f"move{r}.delta": gain(f"c2i{r}", f"i2c{r}"),
        }
    return found


def _rho(r: int) -> Formula:
    """Correlation of two agents' correctness: for exchangeable agents right with probability
    p, P(two agree) = 1 - 2p(1-p)(1-rho). Undefined when every answer is right or wrong."""

    def rho(rates: Rates) -> np.ndarray:
        p, agree = rates[f"agent{r}"], rates[f"agree{r}"]
        spread = 2 * p * (1 - p)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(spread > 0, 1 - (1 - agree) / np.where(spread > 0, spread, 1), np.nan)

    return rho


def _n_eff(r: int, agents: int) -> Formula:
    """The correlation lemma's effective ensemble size N / (1 + (N-1) rho): N independent
    agents are worth N, perfectly correlated ones are worth one."""

    def n_eff(rates: Rates) -> np.ndarray:
        scale = 1 + (agents - 1) * _rho(r)(rates)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(scale > 0, agents / np.where(scale > 0, scale, 1), np.nan)

    return n_eff


def tests(scoring: Scoring) -> dict[str, tuple[str, str]]:
    return {"delta": ("debate", "maj")}


FAMILY = Family(
    name="votes",
    console=("headline", "rounds", "transitions", "reasoning", "groups"),
    formulas=formulas,
    applies=lambda context: context.scoring.voted,
    keys=keys,
    count=count,
    tests=tests,
)
