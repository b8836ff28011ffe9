"""Pure functions from turns to the paper's numbers (in percent): Maj, Debate, Delta,
per-round accuracy and transitions, averaged over seeded runs with their spread."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mad_eval.grading import equivalent
from mad_eval.records import Turn, derive_seed


@dataclass(frozen=True)
class Vote:
    answer: str | None
    correct: bool


def majority_vote(turns: list[Turn], rng: random.Random) -> Vote:
    """Plurality over extracted answers grouped by equivalence (not by string); ties are
    broken by `rng`. Unparsed answers do not vote; no answer at all is a wrong vote."""
    groups: list[list[Turn]] = []
    for turn in turns:
        if turn.answer is None:
            continue
        for group in groups:
            if equivalent(turn.answer, group[0].answer):  # type: ignore[arg-type]
                group.append(turn)
                break
        else:
            groups.append([turn])
    if not groups:
        return Vote(None, False)
    top = max(len(g) for g in groups)
    winner = rng.choice([g for g in groups if len(g) == top])
    return Vote(winner[0].answer, bool(winner[0].correct))


def percent(hits: Iterable[bool]) -> float | None:
    values = list(hits)
    return 100.0 * sum(values) / len(values) if values else None


def run_metrics(
    turns: list[Turn], voters: list[int], rounds: int, seed: int, hub: int | None = None
) -> dict[str, Any]:
    """The numbers of one seeded run. Failed turns are left out of every rate."""
    by_round: dict[int, dict[str, list[Turn]]] = defaultdict(lambda: defaultdict(list))
    by_agent: dict[tuple[str, int], dict[int, Turn]] = defaultdict(dict)
    for t in turns:
        by_round[t.round][t.question].append(t)
        by_agent[(t.question, t.agent)][t.round] = t

    per_round = []
    for r in range(rounds + 1):
        votes = []
        for qid, qturns in sorted(by_round[r].items()):
            ballot = sorted(
                (t for t in qturns if t.agent in voters and not t.failed), key=lambda t: t.agent
            )
            if ballot:  # a question whose every voter failed has no vote to score
                rng = random.Random(derive_seed(seed, "vote", ballot[0].run, qid, r))
                votes.append(majority_vote(ballot, rng).correct)
        live = [t for q in by_round[r].values() for t in q if not t.failed]
        row = {
            "round": r,
            "vote_accuracy": percent(votes),
            "agent_accuracy": percent(bool(t.correct) for t in live),
        }
        if hub is not None:
            row["hub_accuracy"] = percent(bool(t.correct) for t in live if t.agent == hub)
        per_round.append(row)

    transitions = []
    for r in range(1, rounds + 1):
        pairs = [
            (bool(seen[r - 1].correct), bool(seen[r].correct))
            for seen in by_agent.values()
            if r - 1 in seen and r in seen and not seen[r - 1].failed and not seen[r].failed
        ]
        c2i = percent(before and not after for before, after in pairs)
        i2c = percent(after and not before for before, after in pairs)
        transitions.append(
            {
                "from_round": r - 1,
                "to_round": r,
                "c2i": c2i,
                "i2c": i2c,
                "delta": None if c2i is None or i2c is None else i2c - c2i,
            }
        )

    maj, debate = per_round[0]["vote_accuracy"], per_round[-1]["vote_accuracy"]
    return {
        "maj": maj,
        "debate": debate,
        "delta": None if maj is None or debate is None else debate - maj,
        "rounds": per_round,
        "transitions": transitions,
        "turns": len(turns),
        "unparsed": sum(1 for t in turns if not t.failed and t.answer is None),
        "failed_turns": sum(1 for t in turns if t.failed),
    }


def mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation across runs (std is None with fewer than 2 runs)."""
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    std = float(np.std(present, ddof=1)) if len(present) > 1 else None
    return float(np.mean(present)), std


def _average(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in keys:
        out[key], out[f"{key}_std"] = mean_std([row[key] for row in rows])
    return out


def compute_metrics(
    turns: list[Turn],
    agents: int,
    rounds: int,
    voters: list[int],
    seed: int,
    hub: int | None = None,
    groups: dict[str, list[int]] | None = None,
) -> dict[str, Any]:
    """metrics.json: means over runs, their sample std, and each run's own numbers.
    With a `hub`, its own accuracy per round; with several `groups` (label -> agents), the
    same numbers for each group's agents alone, the vote taken among them."""
    by_run: dict[int, list[Turn]] = defaultdict(list)
    for t in turns:
        by_run[t.run].append(t)
    per_run = [
        {"run": run, **run_metrics(by_run[run], voters, rounds, seed, hub)}
        for run in sorted(by_run)
    ]
    if not per_run:
        raise ValueError("no turns recorded yet: nothing to measure.")

    headline = _average(per_run, ("maj", "debate", "delta"))
    round_keys = ("vote_accuracy", "agent_accuracy") + (
        ("hub_accuracy",) if hub is not None else ()
    )
    share = prefix_share(turns)
    per_round = [
        {
            "round": r,
            **_average([p["rounds"][r] for p in per_run], round_keys),
            "prefix_share": share["by_round"].get(r),
        }
        for r in range(rounds + 1)
    ]
    transitions = [
        {
            "from_round": r - 1,
            "to_round": r,
            **_average([p["transitions"][r - 1] for p in per_run], ("c2i", "i2c", "delta")),
        }
        for r in range(1, rounds + 1)
    ]
    live = [t for t in turns if not t.failed]
    metrics = {
        "runs": len(per_run),
        "questions": len({t.question for t in turns}),
        "agents": agents,
        "rounds_of_debate": rounds,
        "voters": voters,
        "hub": hub,
        **headline,
        "rounds": per_round,
        "transitions": transitions,
        "turns": len(turns),
        "unparsed": sum(p["unparsed"] for p in per_run),
        "unparsed_pct": percent(t.answer is None for t in live),
        "failed_turns": sum(p["failed_turns"] for p in per_run),
        "length_stops": sum(1 for t in live if t.finish_reason == "length"),
        "context_cut_turns": sum(1 for t in turns if t.cut_tokens),
        "context_cut_tokens": sum(t.cut_tokens for t in turns),
        # Serving: answers that needed retries, requests sent in all, answers from the cache.
        "retried_turns": sum(1 for t in turns if t.attempts > 1),
        "requests_sent": sum(t.attempts for t in turns),
        "cached_turns": sum(1 for t in turns if t.cached),
        "prefix_share": share["overall"],
        "per_run": per_run,
    }
    if groups and len(groups) > 1:
        metrics["groups"] = [
            {"group": label, **group_metrics(turns, members, rounds, seed)}
            for label, members in groups.items()
        ]
    return metrics


def group_metrics(turns: list[Turn], members: list[int], rounds: int, seed: int) -> dict[str, Any]:
    """One agent group's numbers: its agents' accuracy and transitions, and their own vote."""
    mine = [t for t in turns if t.agent in members]
    found = compute_metrics(mine, len(members), rounds, members, seed)
    keep = ("maj", "debate", "delta", "rounds", "transitions", "unparsed", "failed_turns")
    rows = {key: found[key] for key in keep}
    for row in rows["rounds"]:
        row.pop("prefix_share")
    return {"agents": members, **rows}


def prefix_share(turns: list[Turn]) -> dict[str, Any]:
    """The fraction of prompt tokens that repeat a prefix another agent already sent for the
    same question and round: what vLLM's prefix cache can skip. Pooled over runs."""
    shared: dict[int, int] = defaultdict(int)
    total: dict[int, int] = defaultdict(int)
    for t in turns:
        if t.context_tokens and t.prefix_tokens is not None:
            shared[t.round] += t.prefix_tokens
            total[t.round] += t.context_tokens
    by_round = {r: shared[r] / total[r] for r in sorted(total)}
    overall = sum(shared.values()) / sum(total.values()) if total else None
    return {"overall": overall, "by_round": by_round}
