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

from mad_eval.measure.bootstrap import bootstrap_ci
from mad_eval.measure.counts import scored_rounds
from mad_eval.measure.mcnemar import mcnemar_p
from mad_eval.records import Question, Stop, Turn, Verdict
from mad_eval.reporting.results import Run
from mad_eval.sanitize import redact
from mad_eval.store.folder import RunStore
from mad_eval.voting.groups import answer_groups, same_answer_as
from mad_eval.voting.statements import STATEMENTS

# Tags a debate row may carry; the overview offers each as a filter.
TAGS = {
    "w2r": "vote went wrong → right",
    "r2w": "vote went right → wrong",
    "unanimous_wrong": "unanimous and wrong (last round)",
    "split": "split vote (last round)",
    "unparsed": "an unparsed answer",
    "failed": "a failed turn",
    "truncated": "a truncated reply",
    "stopped": "ended before the last round",
}
TIE_ANSWER = 40  # characters of each answer a tie's text names
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
    def stops(self) -> dict[tuple[int, str], Stop]:
        """The debates its protocol ended early (stops.jsonl)."""
        return RunStore(self.run.root).stops()

    @functools.cached_property
    def shape(self) -> dict[str, Any]:
        """Each round's speaking order, each agent's role name and what its reply was asked
        to state, per round, as the manifest records them (empty where it records none)."""
        protocol = self.run.manifest.protocol
        return {
            "waves": _rows(protocol.waves),
            "roles": [[_role_name(role) for role in row] for row in _rows(protocol.roles)],
            "asks": _rows(protocol.asks),
        }

    @functools.cached_property
    def where(self) -> tuple[dict[int, int], dict[str, int]]:
        """The tallies' row of each seeded run and column of each question."""
        tallies = self.run.tallies
        return (
            {run: i for i, run in enumerate(tallies.runs)},
            {q: j for j, q in enumerate(tallies.questions)},
        )


def summary(view: RunView) -> dict[str, Any]:
    """The run's overview numbers, taken from its metrics.json (as load_run recomputes it),
    with the 95% bootstrap interval over questions of Maj, Debate and Δ (as `table` has it)."""
    m = view.run.metrics
    formulas = view.run.formulas
    return {
        "maj": m.get("maj"),
        "debate": m.get("debate"),
        "delta": m.get("delta"),
        "maj_std": m.get("maj_std"),
        "debate_std": m.get("debate_std"),
        "delta_std": m.get("delta_std"),
        **{
            f"{name}_ci": list(bootstrap_ci(view.run.tallies, formulas[name]))
            for name in ("maj", "debate", "delta")
            if name in formulas and m.get(name) is not None
        },
        "runs": m.get("runs"),
        "rounds": [
            {
                "round": r["round"],
                "vote_accuracy": r.get("vote_accuracy"),
                "ties": r.get("ties"),
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


@dataclass
class Shown:
    """One debate as its pages show it: its turns by (round, agent), and per round (0 to the
    run's last) the vote as the tallies counted it, the answer the rule picked, whether one
    answer is the majority, the tie its seeded draw broke (None: no tie) and each turn's
    answer group; `agreement` is the last round's largest group's share of its live turns."""

    run: int
    qid: str
    ordered: list[Turn]
    by_round: dict[int, dict[int, Turn]]
    votes: list[bool | None]
    answers: list[str | None]
    majority: list[bool]
    ties: list[str | None]
    group_of: dict[tuple[int, int], int]  # (round, agent): its answer's group
    agreement: float | None


def shown_debate(view: RunView, turns: list[Turn]) -> Shown:
    """What the pages show of one debate: its rounds as counts.Counting scored them (the same
    live turns, answer groups and the rule's pick, its tie broken by the same draw), its
    votes from the run's tallies."""
    run, qid = turns[0].run, turns[0].question
    rounds, voted, scoring = view.rounds, view.run.voted, view.run.scoring
    ordered = sorted(turns, key=lambda t: (t.round, t.agent))
    by_round: dict[int, dict[int, Turn]] = {}
    for t in ordered:
        by_round.setdefault(t.round, {})[t.agent] = t
    scored = scored_rounds(run, qid, turns, scoring)
    shown = Shown(run, qid, ordered, by_round, [], [], [], [], {}, None)
    for r in range(rounds + 1):
        found = scored.get(r)
        live = found.live if found is not None else []
        groups = found.groups if found is not None and voted else answer_groups(live, scoring.same)
        shown.votes.append(_vote(view, r, run, qid) if voted else None)
        picked = found.picked if found is not None and voted else None
        shown.answers.append(picked.answer if picked is not None else None)
        shown.ties.append(tie_text(found.tie, picked) if found is not None and voted else None)
        shown.majority.append(_number(groups, shown.group_of))
        if r == rounds and live and voted:
            shown.agreement = max((len(g) for g in groups), default=0) / len(live)
    return shown


def tie_text(tie: list[Any] | None, picked: Turn | None) -> str | None:
    """The tie a vote's seeded draw broke, as the page says it ("tie 2×43, 2×40 → 43 by
    seeded draw"); None where no draw decided. What was drawn among is answer groups for
    the rules here (a plugin's rule may draw among turns)."""
    if not tie:
        return None
    sizes = [(len(c), c[0]) if isinstance(c, list) and c else (1, c) for c in tie]
    among = ", ".join(f"{n}×{_short(getattr(t, 'answer', None))}" for n, t in sizes)
    return f"tie {among} → {_short(picked.answer if picked else None)} by seeded draw"


def _short(answer: str | None, most: int = TIE_ANSWER) -> str:
    if answer is None:
        return "no answer"
    return answer if len(answer) <= most else answer[: most - 1] + "…"


def paired_votes(
    a: list[dict[str, Any]], b: list[dict[str, Any]], shared: set[str]
) -> dict[str, Any]:
    """Two runs' votes on the `shared` debates (index rows, by "run/question" key): for
    Maj (round 0) and Debate (the last round) the paired 2×2 of right and wrong and
    McNemar's exact p (a debate either run has no vote on is left out)."""
    theirs = {row["key"]: row for row in b if row["key"] in shared}
    pairs = [(row, theirs[row["key"]]) for row in a if row["key"] in theirs]
    found = {}
    for name, at in (("maj", 0), ("debate", -1)):
        cells = {"both_right": 0, "a_only": 0, "b_only": 0, "both_wrong": 0}
        for x, y in pairs:
            va, vb = x["votes"][at], y["votes"][at]
            if va is None or vb is None:
                continue
            cells[("both_right", "a_only", "b_only", "both_wrong")[2 * (not va) + (not vb)]] += 1
        found[name] = {**cells, "p": mcnemar_p(cells["a_only"], cells["b_only"])}
    return found


def _number(groups: list[list[Turn]], group_of: dict[tuple[int, int], int]) -> bool:
    """Number one round's answer groups, the most common first (ties in the order found),
    into `group_of`; whether one answer is more common than every other (then each other
    answer differs from the round's majority)."""
    found = sorted(groups, key=len, reverse=True)  # stable: ties stay
    for g, group in enumerate(found):
        for turn in group:
            group_of[(turn.round, turn.agent)] = g
    return len(found) == 1 or (len(found) > 1 and len(found[0]) > len(found[1]))


def tags_of(view: RunView, shown: Shown, turns: list[Turn]) -> list[str]:
    """The debate's TAGS: how its vote moved, how its last round split, what went wrong."""
    tags = []
    votes, rounds, voted = shown.votes, view.rounds, view.run.voted
    if voted and votes[0] is not None and votes[-1] is not None and rounds > 0:
        if not votes[0] and votes[-1]:
            tags.append("w2r")
        if votes[0] and not votes[-1]:
            tags.append("r2w")
    last = _tally(view, f"unanimous{rounds}", shown.run, shown.qid) if voted else None
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
    if (shown.run, shown.qid) in view.stops:
        tags.append("stopped")
    return tags


def debate_row(
    view: RunView, turns: list[Turn], verdicts: dict[tuple, Verdict], file: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One debate's summary row (for the index) and its page (for its own file)."""
    shown = shown_debate(view, turns)
    question = (view.questions or {}).get(shown.qid)
    totals = [
        v.total
        for v in (verdicts.get(t.key) for t in turns)
        if v is not None and v.total is not None
    ]
    key = f"{shown.run}/{shown.qid}"
    row = {
        "key": key,
        "seed_run": shown.run,
        "question": shown.qid,
        "file": file,
        "text": question.text[:SNIPPET] if question else "",
        "gold": question.gold if question else None,
        "votes": shown.votes,
        "answers": shown.answers,
        "ties": shown.ties,
        "tags": tags_of(view, shown, turns),
        "agreement": shown.agreement,
        "tokens": sum(t.completion_tokens or 0 for t in turns),
        "critique": sum(totals) / len(totals) if totals else None,
        "critique_min": min(totals) if totals else None,
        "search": " ".join(dict.fromkeys(t.answer for t in shown.ordered if t.answer)),
    }
    return row, debate_page(view, shown, question, verdicts)


def debate_page(
    view: RunView, shown: Shown, question: Question | None, verdicts: dict[tuple, Verdict]
) -> dict[str, Any]:
    """One debate's page: its question, its rounds' votes and answers, and every turn."""
    scoring, voted = view.run.scoring, view.run.voted
    stop = view.stops.get((shown.run, shown.qid))
    asks = view.shape["asks"]
    return {
        "key": f"{shown.run}/{shown.qid}",
        "seed_run": shown.run,
        "question": {
            "id": shown.qid,
            "text": question.text if question else None,
            "gold": question.gold if question else None,
            "kind": question.kind if question else view.run.kind,
            "missing": None if question else view.missing,
        },
        "agents": scoring.agents,
        "rounds": view.rounds,
        "voters": list(scoring.voters),
        "hub": scoring.hub,
        "votes": shown.votes,
        "answers": shown.answers,
        "ties": shown.ties,
        "majority": shown.majority,
        "waves": view.shape["waves"],
        "roles": view.shape["roles"],
        "stop": {"round": stop.round, "why": stop.why} if stop else None,
        "turns": [
            {
                **_turn_page(view, t, shown.by_round, scoring.same, verdicts.get(t.key), voted),
                "group": shown.group_of.get((t.round, t.agent)),
                "stated": _stated(t, _cell(asks, t.round, t.agent) or ()),
            }
            for t in shown.ordered
        ],
    }


def _rows(table: tuple[Any, ...] | None) -> list[list[Any]]:
    """A manifest's per-round table as lists, [] where it has none or one that is no table."""
    if not isinstance(table, tuple | list):
        return []
    return [list(row) if isinstance(row, list | tuple) else [] for row in table]


def _cell(rows: list[list[Any]], round_: int, agent: int) -> Any:
    return rows[round_][agent] if round_ < len(rows) and agent < len(rows[round_]) else None


def _role_name(role: Any) -> str | None:
    name = role.get("name") if isinstance(role, dict) else None
    return str(name)[:40] if name else ("role" if role else None)


def _stated(turn: Turn, asks: Any) -> dict[str, Any]:
    """What the turn's reply states of what it was asked (voting.statements), as read."""
    if not isinstance(asks, list | tuple):
        return {}
    names = [name for name in asks if isinstance(name, str) and name in STATEMENTS]
    return {name: STATEMENTS.get(name).read(turn.text) for name in names}


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
        "option_order": turn.option_order,
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
