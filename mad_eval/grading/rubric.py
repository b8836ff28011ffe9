"""The LLM judge's rubric: the seed paper's four critique criteria, in our own words, each
with its top score; and how tables and the console name them. Plain data, so what lists
or prints the criteria does not load the prompt builders."""

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

# What the judge's scores are tallied as: each criterion, and their sum.
CRITIQUE = (*JUDGE_CRITERIA, "total")


def scores_problem(scores: dict[str, int] | None, total: int | None) -> str | None:
    """What is wrong with a verdict's scores as a judge.jsonl line records them (every
    criterion scored within its range, the total their sum; or neither), or None."""
    if scores is None:
        return None if total is None else "a total without scores"
    if scores.keys() != JUDGE_CRITERIA.keys():
        return f"scores of other criteria than the rubric's ({', '.join(JUDGE_CRITERIA)})"
    for name, (top, _) in JUDGE_CRITERIA.items():
        if not 0 <= scores[name] <= top:
            return f"a {name} score of {scores[name]}, not 0 to {top}"
    if total != sum(scores.values()):
        return "a total that is not the sum of its scores"
    return None


# Short column headers for the judge's criteria, on the console and in tables.
CRITIQUE_HEADERS = {
    "conflict_identification": "conflict",
    "critique_correctness": "correctness",
    "critique_specificity": "specificity",
    "engagement_revision": "engagement",
    "total": "total",
}
