"""What the viewer shows of a run, computed from its records alone: one summary row per
debate (what the overview's filters and sorting read) and one page of detail per debate.

Every number a filter reads (the vote of each round, unanimity) is the run's own tally
(`results.load_run`, counted by counts.Counting through the run's scoring rule), so the
page never re-derives a vote in the browser."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mad_eval.protocols.scoring import answer_groups, get_rule, same_answer_as, vote_ties
from mad_eval.records import Question, Turn, Verdict
from mad_eval.reporting.results import Run
from mad_eval.sanitize import redact
from mad_eval.store.folder import RunStore

# Tags a debate row may carry; the overview offers each as a filter.
TAGS = {
    "w2r": "vote went wrong → right",
    "r2w": "vote went right → wrong",
    "unanimous_wrong": "unanimous and wrong (last round)",
    "split": "split vote (last round)",
    "unparsed": "an unparsed answer",
    "failed": "a failed turn",
    "truncated": "a truncated reply",
}
SNIPPET = 300  # characters of a question's text kept in the index (search and list)


@dataclass
class RunView:
    """A loaded run and what its pages need besides its tallies: its questions (None when
    they cannot be read: the reason is in `missing`), its verdicts by turn key, and a way to
    rebuild the prompt each turn was sent (None when it cannot be rebuilt)."""

    run: Run
    questions: dict[str, Question] | None
    missing: str | None
    replay: Any  # replay.Replay | None

    @property
    def rounds(self) -> int:
        return self.run.scoring.rounds

    @functools.cached_property
    def where(self) -> tuple[dict[int, int], dict[str, int]]:
        """The tallies' row of each seeded run and column of each question."""
        tallies = self.run.tallies
        return (
            {run: i for i, run in enumerate(tallies.runs)},
            {q: j for j, q in enumerate(tallies.questions)},
        )


def summary(view: RunView) -> dict[str, Any]:
    """The run's overview numbers, taken from its metrics.json (as load_run recomputes it)."""
    m = view.run.metrics
    return {
        "maj": m.get("maj"),
        "debate": m.get("debate"),
        "delta": m.get("delta"),
        "maj_std": m.get("maj_std"),
        "debate_std": m.get("debate_std"),
        "delta_std": m.get("delta_std"),
        "rounds": [
            {
                "round": r["round"],
                "vote_accuracy": r.get("vote_accuracy"),
                "agent_accuracy": r.get("agent_accuracy"),
                "unanimous": r.get("unanimous"),
            }
            for r in m.get("rounds", [])
        ],
        "transitions": [
            {k: t.get(k) for k in ("from_round", "to_round", "c2i", "i2c", "delta")}
            for t in m.get("transitions", [])
        ],
        "critique": m.get("critique"),
        "turns": m.get("turns"),
        "unparsed": m.get("unparsed"),
        "failed_turns": m.get("failed_turns"),
    }


def _tally(view: RunView, key: str, run: int, qid: str) -> tuple[float, float] | None:
    """A tally's numerator and denominator for one debate; None when the key is absent."""
    tallies = view.run.tallies
    if key not in tallies.num:
        return None
    rows, cols = view.where
    row, col = rows[run], cols[qid]
    return float(tallies.num[key][row, col]), float(tallies.den[key][row, col])


def _vote(view: RunView, r: int, run: int, qid: str) -> bool | None:
    """Whether round r's system answer was right, as the run's tallies counted it (None: the
    round has no vote, e.g. every voter failed, or the kind is not voted)."""
    found = _tally(view, f"vote{r}", run, qid)
    if found is None or found[1] == 0:
        return None
    return found[0] > 0


def cell_class(turn: Turn, voted: bool) -> str:
    """How a grid cell is colored."""
    if turn.failed:
        return "failed"
    if turn.answer is None:
        return "unparsed"
    if not voted:
        return "scored"
    return "right" if turn.correct else "wrong"


def debate_row(
    view: RunView, turns: list[Turn], verdicts: dict[tuple, Verdict], file: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One debate's summary row (for the index) and its page (for its own file)."""
    run_index, qid = turns[0].run, turns[0].question
    rounds, voted = view.rounds, view.run.voted
    scoring = view.run.scoring
    alike = scoring.same
    rule = get_rule(scoring.rule)
    ordered = sorted(turns, key=lambda t: (t.round, t.agent))
    by_round: dict[int, dict[int, Turn]] = {}
    for t in ordered:
        by_round.setdefault(t.round, {})[t.agent] = t
    votes = [_vote(view, r, run_index, qid) if voted else None for r in range(rounds + 1)]
    picked: list[str | None] = []
    voters, hub, seed = list(scoring.voters), scoring.hub, scoring.seed
    agreement = None
    group_of: dict[tuple[int, int], int] = {}  # (round, agent): its answer's group
    majority: list[bool] = []
    for r in range(rounds + 1):
        live = [t for t in sorted(by_round.get(r, {}).values(), key=lambda t: t.agent)]
        live = [t for t in live if not t.failed]
        majority.append(_group(live, alike, group_of))
        answer = None
        if voted and rule.scored(live, voters, hub):
            # The same draw counts.Counting makes, for the answer's text (its rightness is
            # the tally's, above).
            chosen = rule.pick(live, voters, hub, vote_ties(seed, run_index, qid, r), alike)
            answer = chosen.answer if chosen is not None else None
        picked.append(answer)
        if r == rounds and live and voted:
            groups = answer_groups(live, alike)
            agreement = max((len(g) for g in groups), default=0) / len(live)
    tags = []
    if voted and votes[0] is not None and votes[-1] is not None and rounds > 0:
        if not votes[0] and votes[-1]:
            tags.append("w2r")
        if votes[0] and not votes[-1]:
            tags.append("r2w")
    last = _tally(view, f"unanimous{rounds}", run_index, qid) if voted else None
    if last is not None and last[1] > 0:
        if last[0] > 0 and votes[-1] is False:
            tags.append("unanimous_wrong")
        if last[0] == 0:
            tags.append("split")
    if any(t.answer is None and not t.failed for t in turns):
        tags.append("unparsed")
    if any(t.failed for t in turns):
        tags.append("failed")
    if any(t.finish_reason == "length" or t.truncated_in_reasoning for t in turns):
        tags.append("truncated")
    totals = [
        v.total
        for v in (verdicts.get(t.key) for t in turns)
        if v is not None and v.total is not None
    ]
    question = (view.questions or {}).get(qid)
    text = question.text if question else ""
    row = {
        "key": f"{run_index}/{qid}",
        "seed_run": run_index,
        "question": qid,
        "file": file,
        "text": text[:SNIPPET],
        "gold": question.gold if question else None,
        "votes": votes,
        "answers": picked,
        "tags": tags,
        "agreement": agreement,
        "tokens": sum(t.completion_tokens or 0 for t in turns),
        "critique": sum(totals) / len(totals) if totals else None,
        "critique_min": min(totals) if totals else None,
        "search": " ".join(dict.fromkeys(t.answer for t in ordered if t.answer)),
    }
    page = {
        "key": row["key"],
        "seed_run": run_index,
        "question": {
            "id": qid,
            "text": text if question else None,
            "gold": question.gold if question else None,
            "kind": question.kind if question else view.run.kind,
            "missing": None if question else view.missing,
        },
        "agents": view.run.scoring.agents,
        "rounds": rounds,
        "voters": voters,
        "hub": hub,
        "votes": votes,
        "answers": picked,
        "majority": majority,
        "turns": [
            {
                **_turn_page(view, t, by_round, alike, verdicts.get(t.key), voted),
                "group": group_of.get((t.round, t.agent)),
            }
            for t in ordered
        ],
    }
    return row, page


def _group(live: list[Turn], alike: Any, groups: dict[tuple[int, int], int]) -> bool:
    """Number one round's answers by equivalence, the most common first (ties in agent
    order), into `groups`; whether one answer is more common than every other (then each
    other answer differs from the round's majority)."""
    found = sorted(answer_groups(live, alike), key=len, reverse=True)  # stable: ties stay
    for g, group in enumerate(found):
        for turn in group:
            groups[(turn.round, turn.agent)] = g
    return len(found) == 1 or (len(found) > 1 and len(found[0]) > len(found[1]))


def _turn_page(
    view: RunView,
    turn: Turn,
    by_round: dict[int, dict[int, Turn]],
    alike: Any,
    verdict: Verdict | None,
    voted: bool,
) -> dict[str, Any]:
    before = by_round.get(turn.round - 1, {}).get(turn.agent)
    changed = False
    if before is not None and not turn.failed and not before.failed:
        if (turn.answer is None) != (before.answer is None):
            changed = True
        elif turn.answer is not None:
            changed = not same_answer_as(turn, before, alike)
    prompt, prompt_note = None, None
    if view.replay is None:
        prompt_note = view.missing or "the run's prompts cannot be rebuilt"
    else:
        from mad_eval.debate.replay import ReplayError

        try:
            prompt = view.replay.messages(turn, by_round)
        except (ReplayError, KeyError) as exc:
            prompt_note = f"The prompt cannot be rebuilt exactly: {exc}."
    return {
        "round": turn.round,
        "agent": turn.agent,
        "class": cell_class(turn, voted),
        "changed": bool(changed),
        "answer": turn.answer,
        "correct": turn.correct,
        "sees": list(turn.sees),
        "text": turn.text,
        "reasoning": turn.reasoning,
        "prompt": prompt,
        "prompt_note": prompt_note,
        "model": turn.model,
        "seed": turn.seed,
        "finish_reason": turn.finish_reason,
        "truncated": turn.finish_reason == "length" or turn.truncated_in_reasoning,
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "reasoning_tokens": turn.reasoning_tokens,
        "latency": turn.latency,
        "error": redact(turn.error),  # a folder from elsewhere may predate redaction
        "rouge": turn.rouge,
        "verdict": None
        if verdict is None
        else {
            "scores": verdict.scores,
            "total": verdict.total,
            "failure": verdict.failure,
            "error": redact(verdict.error),
            "raw": verdict.raw,
            "judge": redact(verdict.setting.get("judge")),
        },
    }


def question_order(qid: str) -> tuple:
    """A sort key that puts math500-2 before math500-10: runs of digits compare as numbers."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.split(r"(\d+)", qid)
        if part
    )


def alerts_of(run: Run) -> list[str]:
    """The run's alerts (one sentence each) as its metrics.json holds them, else as its
    recomputed metrics do; none for a folder written before alerts existed."""
    found = RunStore(run.root).alerts()
    if found is None:
        found = [a for a in run.metrics.get("alerts") or [] if a.strip()]
    return found


def debates_of(view: RunView) -> Iterator[list[Turn]]:
    """The run's debates, a debate at a time, from its turns.jsonl."""
    yield from RunStore(view.run.root).debates().each
