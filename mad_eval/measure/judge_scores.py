"""The critique family: the judge's scores of a judged run's turns (mean score per criterion
and the judge's failure rate), over every debate round and per round."""

from __future__ import annotations

from mad_eval.grading.rubric import CRITIQUE
from mad_eval.measure.base import Context, Family, VerdictCounts
from mad_eval.measure.formula import Formula, percent, plain
from mad_eval.measure.scoring import Scoring
from mad_eval.records import Verdict


def _tags(rounds: int) -> list[str]:
    return ["", *(str(r) for r in range(1, rounds + 1))]


def verdict_keys(scoring: Scoring) -> list[str]:
    """`score{r}:{name}` (a criterion's scores, or `total`, summed over the turns scored;
    its denominator counts them) and `judge_fail{r}` (judge failures of the turns scored or
    failed); without `r`, over every round."""
    tags = _tags(scoring.rounds)
    return [f"score{t}:{c}" for t in tags for c in CRITIQUE] + [f"judge_fail{t}" for t in tags]


def count_verdicts(verdicts: list[Verdict], counts: VerdictCounts) -> None:
    """A verdict whose request failed counts nowhere: it is to be asked again."""
    num, den = counts.num, counts.den
    for v in verdicts:
        if v.error is not None:
            continue
        at = counts.at(v)
        for tag in ("", str(v.round)):
            num[f"judge_fail{tag}"][at] += v.scores is None
            den[f"judge_fail{tag}"][at] += 1
            if v.scores is None:
                continue
            for name in CRITIQUE:
                num[f"score{tag}:{name}"][at] += v.total if name == "total" else v.scores[name]
                den[f"score{tag}:{name}"][at] += 1


def formulas(context: Context) -> dict[str, Formula]:
    """The judge's mean scores and failure rate over all debate rounds (`critique_total`)
    and per round (`round1.critique_total`)."""
    found: dict[str, Formula] = {}
    for r in ["", *range(1, context.scoring.rounds + 1)]:
        where = f"round{r}." if r != "" else ""
        found |= {f"{where}critique_{name}": plain(f"score{r}:{name}") for name in CRITIQUE}
        found[f"{where}judge_failure_rate"] = percent(f"judge_fail{r}")
    return found


FAMILY = Family(
    name="critique",
    console=("critique",),
    formulas=formulas,
    applies=lambda context: context.judged,
    verdict_keys=verdict_keys,
    count_verdicts=count_verdicts,
    intervals=lambda context: list(formulas(context)),
)
