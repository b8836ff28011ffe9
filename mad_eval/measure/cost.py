"""What a debate costs per question: generations asked, requests sent, prompt, completion
and reasoning tokens, the prompt tokens a prefix cache can reuse, latency summed and along
the debate's critical path, and money at the prices a file gives (prices.py). A metric family
(measure.families): counted a debate at a time into tally keys, the judge's from its
verdicts, and read out by formulas, so a cost has the same intervals and tests as an
accuracy."""

from __future__ import annotations

from collections.abc import Iterable

from mad_eval.measure.base import Add, Context, Debate, Family, VerdictCounts
from mad_eval.measure.formula import Formula, percent, plain, total
from mad_eval.measure.prices import Price
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Turn, Verdict

# Tally keys, each summed per question: a round's carry its number (`ptok2`), the whole
# debate's none (`ptok`). `prefix` is the exception: prompt tokens a prefix cache can reuse
# over the prompt tokens measured, a pooled share.
KEYS = ("gen", "req", "ptok", "ctok", "rtok", "cached", "prefix", "lat", "wall")
# The numbers of metrics.json's `cost` (whole debate) and `cost_by_round` rows, per question.
FIELDS = {
    "generations": "gen",  # answers asked for, failed ones included
    "requests": "req",  # requests sent, retries included; none for a cached answer
    "prompt_tokens": "ptok",
    "completion_tokens": "ctok",
    "reasoning_tokens": "rtok",  # of the completion tokens, where the server counted them
    "cached_tokens": "cached",  # of the prompt tokens, a prefix already sent that round
    "latency": "lat",  # seconds, summed over requests: what the server was busy with
    "wall_latency": "wall",  # seconds along the debate: each round's slowest answer
}
# The keys a turn's token counts make: a question's are unknown (not 0) when an answer in it
# came without its counts (a server that gives none, or gave no numbers: Turn.usage_invalid).
TOKEN_KEYS = frozenset({"ptok", "ctok", "cached"})
JUDGE_KEYS = ("judge_gen", "judge_req", "judge_ptok", "judge_ctok", "judge_lat")


def keys(scoring: Scoring) -> list[str]:
    return [f"{k}{r}" for r in range(scoring.rounds + 1) for k in KEYS] + list(KEYS)


def count(debate: Debate, add: Add) -> None:
    """Count one debate's cost; a debate its protocol ended early spent nothing in its later
    rounds, which count 0 for it, so a round's cost is per question, as the whole's is."""
    rounds = debate.scoring.rounds
    count_cost(debate.turns, rounds, add)
    stopped = debate.scoring.stopped(debate.run, debate.question)
    for r in range(rounds + 1 if stopped is None else stopped + 1, rounds + 1):
        for key in KEYS:
            add(f"{key}{r}", 0.0, 0.0 if key in ("prefix", "rtok") else 1.0)


def count_cost(turns: Iterable[Turn], rounds: int, add: Add) -> None:
    """Count one debate's cost: every turn of one run and one question, failed ones too
    (they were asked, and may have been sent; a failed request's tokens count 0). A
    question with an answer whose token counts are unknown has unknown token costs: left
    out of their mean, not counted as 0. One pass over the turns: a report counts every
    turn of a run."""
    # round -> the sum of each of KEYS in their order (gen, req, ptok, ctok, rtok, cached,
    # prefix, lat, wall), then the context tokens the prefix share is a share of
    sums: dict[int, list[float]] = {}
    seen_reasoning: set[int] = set()
    unknown: set[int] = set()  # rounds with an answer whose token counts the server did not give
    for t in turns:
        if t.round > rounds:
            continue
        row = sums.get(t.round)
        if row is None:
            row = sums[t.round] = [0.0] * (len(KEYS) + 1)
        if t.error is None and (t.prompt_tokens is None or t.completion_tokens is None):
            unknown.add(t.round)
        row[0] += 1
        row[1] += t.attempts
        if t.prompt_tokens is not None:
            row[2] += t.prompt_tokens
        if t.completion_tokens is not None:
            row[3] += t.completion_tokens
        if t.reasoning_tokens is not None:
            row[4] += t.reasoning_tokens
            seen_reasoning.add(t.round)
        if t.context_tokens and t.prefix_tokens is not None:
            if t.prompt_tokens is not None:
                row[5] += t.prompt_tokens * t.prefix_tokens / t.context_tokens
            row[6] += t.prefix_tokens
            row[9] += t.context_tokens
        row[7] += t.latency
        row[8] = max(row[8], t.latency)
    whole = [0.0] * (len(KEYS) + 1)
    for r, row in sums.items():
        for i, key in enumerate(KEYS):
            den = row[9] if key == "prefix" else float(key != "rtok" or r in seen_reasoning)
            if key in TOKEN_KEYS and r in unknown:
                add(f"{key}{r}", 0.0, 0.0)  # unknown: this question is left out of the mean
            else:
                add(f"{key}{r}", row[i], den)
            whole[i] += row[i]
        whole[9] += row[9]
    if sums:
        for i, key in enumerate(KEYS):
            den = whole[9] if key == "prefix" else float(key != "rtok" or bool(seen_reasoning))
            if key in TOKEN_KEYS and unknown:
                add(key, 0.0, 0.0)
            else:
                add(key, whole[i], den)


def count_judge_cost(verdicts: list[Verdict], counts: VerdictCounts) -> None:
    """The judge's cost of each question judged (JUDGE_KEYS): every verdict, a failed
    request's too, counts what it cost; each question with a verdict counts once in every
    key's denominator."""

    def spent(v: Verdict, key: str, amount: float) -> None:
        at = counts.at(v)
        counts.num[key][at] += amount
        counts.den[key][at] = 1  # per question judged

    for v in verdicts:
        spent(v, "judge_gen", 1)
        spent(v, "judge_req", v.attempts)
        spent(v, "judge_ptok", v.prompt_tokens or 0)
        spent(v, "judge_ctok", v.completion_tokens or 0)
        spent(v, "judge_lat", v.latency)


def cost_formulas(rounds: int, price: Price | None = None) -> dict[str, Formula]:
    """The cost per question of each round (`cost2.prompt_tokens`) and of the whole debate
    (`cost.prompt_tokens`): FIELDS, `tokens` (prompt and completion), `prefix_share` (%),
    and with a price, `usd_per_1k` (dollars per 1,000 questions)."""
    found: dict[str, Formula] = {}
    for tag, head in [*((str(r), f"cost{r}") for r in range(rounds + 1)), ("", "cost")]:
        for name, key in FIELDS.items():
            found[f"{head}.{name}"] = plain(f"{key}{tag}")
        found[f"{head}.tokens"] = total(f"ptok{tag}", f"ctok{tag}")
        found[f"{head}.prefix_share"] = percent(f"prefix{tag}")
        if price is not None:
            found[f"{head}.usd_per_1k"] = price.usd_per_1k(tag)
    return found


def judge_cost_formulas(price: Price | None = None) -> dict[str, Formula]:
    """The judge's cost per question judged, apart from the agents' (`judge_cost.*`)."""
    found: dict[str, Formula] = {
        "judge_cost.generations": plain("judge_gen"),
        "judge_cost.requests": plain("judge_req"),
        "judge_cost.prompt_tokens": plain("judge_ptok"),
        "judge_cost.completion_tokens": plain("judge_ctok"),
        "judge_cost.tokens": total("judge_ptok", "judge_ctok"),
        "judge_cost.latency": plain("judge_lat"),
    }
    if price is not None:
        found["judge_cost.usd_per_1k"] = price.usd_per_1k("", judge=True)
    return found


def formulas(context: Context) -> dict[str, Formula]:
    """Every run's cost, priced with its agents' price; a judged run's judge's cost too."""
    found = cost_formulas(context.scoring.rounds, context.price)
    if context.judged:
        found |= judge_cost_formulas(context.judge_price)
    return found


FAMILY = Family(
    name="cost",
    formulas=formulas,
    keys=keys,
    count=count,
    compact=True,
    verdict_keys=lambda scoring: list(JUDGE_KEYS),
    count_verdicts=count_judge_cost,
    lists={"cost": ("cost_by_round", 0, lambda n: {"round": n})},
)
