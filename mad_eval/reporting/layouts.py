"""The paper tables' layouts: for each, the row parts and columns it shows, each column a
number of metrics.json, and the words that describe it; and the formats and error bars a table
can have. Plain data, so the command line lists them without loading the table machinery
(tables.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from mad_eval.grading.rubric import CRITIQUE, CRITIQUE_HEADERS
from mad_eval.registry import Registry


@dataclass(frozen=True)
class Column:
    header: str
    key: str  # the number's name in schema.formulas
    better: str | None = "max"  # which end is bolded: max, min or None
    digits: int = 1
    signed: bool = False
    scored: bool = False  # the system's answer, so the run's scoring rule (mad_eval.voting.rules)
    optional: bool = False  # left out of a table where no method has a value for it
    # A number of the same run this one is tested against (on the questions both
    # have), instead of the baseline method's same number.
    against: str | None = None


# A layout: for a run's number of debate rounds and of voters, the table's row parts (a
# label appended to the method's, "" for none) and each part's columns.
Layout = Callable[[int, int], list[tuple[str, list[Column]]]]


def _debate(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """Maj, Debate and Δ; a run without debate (a single run) has its Maj alone, its other
    cells "-" (its "Debate" would be its Maj again and its Δ 0)."""
    columns = [Column("Maj", "maj", scored=True)]
    if rounds:
        columns += [
            Column("Debate", "debate", scored=True),
            Column("Δ", "delta", signed=True, scored=True),
        ]
    return [("", columns)]


def _frameworks(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """Maj, Debate and Δ beside what they cost per question, so frameworks of different
    shapes (a judge, summaries, early stops) compare at the compute each spent."""
    return [
        (
            "",
            [
                *_debate(rounds, voters)[0][1],
                Column("ended %", "ended", None, optional=True),
                Column("requests", "cost.requests", "min"),
                Column("tokens", "cost.tokens", "min", 0),
            ],
        )
    ]


def _single(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """mean@K and the exact maj@K (the vote of all K answers). Round 0 is K independent
    samples in any run, a debate's as much as `mad-eval single`'s."""
    return [("", [Column("mean@K", "round0.agent_accuracy"), Column("maj@K", "maj", scored=True)])]


def _single_bootstrap(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """mean@K and verl's maj@K/mean (voting.maj_at_k.bootstrap_maj), which metrics.json
    has for runs without debate only (`maj_at_k_bootstrap`)."""
    return [
        (
            "",
            [
                Column("mean@K", "round0.agent_accuracy"),
                Column("maj@K (bootstrap)", "maj_at_k_bootstrap"),
            ],
        )
    ]


def _rounds(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    return [
        (
            "",
            [Column(f"R{r}", f"round{r}.vote_accuracy", scored=True) for r in range(rounds + 1)],
        )
    ]


def _transitions(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    return [
        (
            f"{r - 1}→{r}",
            [
                Column("C→I", f"move{r}.c2i", better="min"),
                Column("I→C", f"move{r}.i2c"),
                Column("Δ", f"move{r}.delta", signed=True),
            ],
        )
        for r in range(1, rounds + 1)
    ]


def _lengths(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """Mean completion tokens of right and wrong answers, and (where some method recorded
    them) of a reasoning model's reasoning and final content, per round."""
    return [
        (
            f"round {r}",
            [
                Column("correct", f"round{r}.length_right", better=None, digits=0),
                Column("incorrect", f"round{r}.length_wrong", better=None, digits=0),
                Column("reasoning", f"round{r}.reasoning_tokens", None, 0, optional=True),
                Column("final", f"round{r}.final_tokens", None, 0, optional=True),
            ],
        )
        for r in range(rounds + 1)
    ]


def _diversity(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    return [
        (
            f"round {r}",
            [
                Column("unanimous", f"round{r}.unanimous", better=None),
                Column("entropy", f"round{r}.entropy", better=None, digits=2),
                Column("ρ", f"round{r}.rho", better=None, digits=2),
                Column("N_eff", f"round{r}.n_eff", better=None, digits=2),
            ],
        )
        for r in range(rounds + 1)
    ]


def _critique(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    parts = [(f"round {r}", f"round{r}.") for r in range(1, rounds + 1)] + [("all", "")]
    return [
        (
            part,
            [
                *(
                    Column(CRITIQUE_HEADERS[name], f"{where}critique_{name}", digits=2)
                    for name in CRITIQUE
                ),
                Column("fail %", f"{where}judge_failure_rate", better=None),
            ],
        )
        for part, where in parts
    ]


def _rouge(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """The paper's summarisation table: the consensus summary's ROUGE after each round."""
    headers = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeL": "ROUGE-L"}
    return [
        (
            f"round {r}",
            [Column(header, f"round{r}.{m}", scored=True) for m, header in headers.items()],
        )
        for r in range(rounds + 1)
    ]


def _cost(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """What each round and the whole debate cost per question, and the judge's apart
    (where the run was judged); money where a prices file was given."""

    def columns(head: str) -> list[Column]:
        return [
            Column("calls", f"{head}.generations", None),
            Column("requests", f"{head}.requests", None),
            Column("prompt tok", f"{head}.prompt_tokens", None, 0),
            Column("completion tok", f"{head}.completion_tokens", None, 0),
            Column("reasoning tok", f"{head}.reasoning_tokens", None, 0, optional=True),
            Column("tokens", f"{head}.tokens", "min", 0),
            Column("prefix %", f"{head}.prefix_share", None, optional=True),
            Column("latency s", f"{head}.latency", None, 2),
            Column("wall s", f"{head}.wall_latency", None, 2, optional=True),
            Column("$ / 1k q", f"{head}.usd_per_1k", "min", 3, optional=True),
        ]

    parts = [(f"round {r}", columns(f"cost{r}")) for r in range(rounds + 1)]
    judge = [c for c in columns("judge_cost") if "prefix" not in c.key and "wall" not in c.key]
    judge = [dataclasses.replace(c, optional=True) for c in judge if "reasoning" not in c.key]
    return [*parts, ("all", columns("cost")), ("judge", judge)]


def _margin(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """Delta split by how many voters were right before debate: where debate helps (few
    right) and where it hurts (a right majority talked out of its answer)."""
    if rounds == 0:
        return []
    parts = [
        (
            f"{k}/{voters} right",
            [
                Column("questions %", f"margin{k}.share", None),
                Column("Maj", f"margin{k}.maj", None, scored=True),
                Column("Debate", f"margin{k}.debate", None, scored=True),
                Column("Δ", f"margin{k}.delta", None, signed=True, scored=True),
                Column("Δ part", f"margin{k}.delta_part", None, signed=True, scored=True),
            ],
        )
        for k in range(voters + 1)
    ]
    whole = [
        Column("Maj", "maj", scored=True),
        Column("Debate", "debate", scored=True),
        Column("Δ", "delta", signed=True, scored=True),
        Column("oracle gap", "oracle_gap", "min", scored=True),
    ]
    return [*parts, ("all", whole)]


def _drift(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """Is this debate a martingale? The change in mean agent accuracy per round (tested
    against zero), and Delta split into that drift and what the vote adds over the mean
    agent (aggregation)."""
    if rounds == 0:
        return []
    parts = [
        (
            f"{r - 1}→{r}",
            [
                Column("agents before", f"round{r - 1}.agent_accuracy", None),
                Column("agents after", f"round{r}.agent_accuracy", None),
                Column("drift", f"move{r}.drift", None, signed=True),
            ],
        )
        for r in range(1, rounds + 1)
    ]
    whole = [
        Column("agents before", "round0.agent_accuracy", None),
        Column("agents after", f"round{rounds}.agent_accuracy", None),
        Column("drift", "drift", None, signed=True),
        Column("aggregation", "aggregation", None, signed=True, scored=True),
        Column("Δ", "delta", signed=True, scored=True),
    ]
    return [*parts, (f"0→{rounds}", whole)]


def _conformity(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """How agents follow the previous round's plurality answer, right or wrong."""

    def columns(head: str) -> list[Column]:
        return [
            Column("adopt (right plur.)", f"{head}.adopt_right", None),
            Column("adopt (wrong plur.)", f"{head}.adopt_wrong", "min"),
            Column("C→I (right plur.)", f"{head}.c2i_right", "min"),
            Column("C→I (wrong plur.)", f"{head}.c2i_wrong", "min"),
        ]

    if rounds == 0:
        return []
    parts = [(f"{r - 1}→{r}", columns(f"move{r}")) for r in range(1, rounds + 1)]
    return [*parts, ("all", columns("conformity"))]


def _stopping(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """The debate replayed as if it had stopped after round r, or at the first round whose
    answers all agree: its vote, its cost, and the change from the full debate."""
    if rounds == 0:
        return []

    def columns(head: str) -> list[Column]:
        return [
            Column("accuracy", f"{head}.accuracy", scored=True),
            Column("Δ vs full", f"{head}.delta", None, signed=True, scored=True),
            Column("tokens", f"{head}.tokens", "min", 0),
            Column("calls", f"{head}.generations", None),
            Column("tokens saved %", f"{head}.tokens_saved", None),
        ]

    parts = [(f"after round {r}", columns(f"stop{r}")) for r in range(rounds + 1)]
    unanimous = [*columns("stop_unanimous"), Column("stop round", "stop_unanimous.round", None, 2)]
    return [*parts, ("at unanimity", unanimous)]


def _budget(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """Debate against self-consistency given the same compute (mad_eval.measure.matched): the vote
    of G = N(T+1) single samples, and of as many as the debate's tokens buy (m)."""
    return [
        (
            "",
            [
                Column("Maj", "maj", scored=True),
                Column("Debate", "debate", scored=True),
                Column("maj@G", "matched.maj_at_generations", against="debate"),
                Column("SC@tokens", "matched.sc_at_tokens", against="debate"),
                Column("tokens/question", "matched.debate_tokens", better=None, digits=0),
                Column("m", "matched.samples_at_tokens", better=None),
            ],
        )
    ]


@dataclass(frozen=True)
class TableLayout:
    """A paper table's layout, registered by its name: its columns, what it shows in a few
    words (`mad-eval table --help` lists them), what its numbers are where the headers cannot
    say it all (below a Markdown table, in a comment above a LaTeX one), and whether its debate
    runs are each paired with a `mad-eval single` run of their model and benchmark among the
    runs given (mad_eval.reporting.pairing; those single runs are no rows)."""

    name: str
    columns: Layout
    summary: str
    note: str | None = None
    paired: bool = False


# Other packages add theirs through the `mad_eval.layouts` entry-point group.
LAYOUTS: Registry[TableLayout] = Registry("table layout", "mad_eval.layouts", holds=TableLayout)
for _layout in (
    TableLayout("debate", _debate, "Maj, Debate, Δ per benchmark"),
    TableLayout(
        "single",
        _single,
        "mean@K, maj@K (exact)",
        note="maj@K is exact: the vote of all K answers of each question",
    ),
    TableLayout("rounds", _rounds, "vote accuracy after each round"),
    TableLayout("transitions", _transitions, "C→I, I→C per round"),
    TableLayout("lengths", _lengths, "tokens of correct and incorrect answers per round"),
    TableLayout("diversity", _diversity, "unanimous share, answer entropy, ρ and N_eff per round"),
    TableLayout("critique", _critique, "the judge's scores"),
    TableLayout(
        "rouge", _rouge, "the consensus summary's ROUGE-1/2/L per round (summary benchmarks)"
    ),
    TableLayout(
        "single-bootstrap",
        _single_bootstrap,
        "maj@K as verl estimates it (1000 seeded resamples)",
        note=(
            "maj@K (bootstrap) is verl's maj@K/mean: the vote of K answers drawn with "
            "replacement, its correctness averaged over 1000 draws (numpy seed 42) per question"
        ),
    ),
    TableLayout(
        "cost",
        _cost,
        "calls, requests, tokens, latency and money per question, per round and for the judge",
        note=(
            "per question: calls are answers asked for, requests those sent (retries included, "
            "cached answers not); latency is summed over requests, wall is each round's slowest "
            "answer added up; prefix % is the share of prompt tokens a prefix cache can reuse"
        ),
    ),
    TableLayout(
        "margin",
        _margin,
        "Δ split by how many voters were right in round 0, and the oracle gap",
        note=(
            "k/N right: questions with k of the N voters right in round 0; Δ part is the points "
            "of the run's Δ those questions make (the parts add up to Δ); the oracle gap counts "
            "questions some agent got right in some round while the final vote was wrong, a "
            "diagnostic and not an accuracy"
        ),
    ),
    TableLayout(
        "drift",
        _drift,
        "change in mean agent accuracy per round, Δ = drift + aggregation",
        note=(
            "drift is the change in mean agent accuracy (0 for a martingale); aggregation is the "
            "change in what the vote adds over the mean agent; Δ = drift + aggregation"
        ),
    ),
    TableLayout(
        "conformity",
        _conformity,
        "agents adopting the previous round's plurality, right or wrong",
        note=(
            "adopt: agents not holding the previous round's plurality answer that took it up; "
            "C→I: agents right before that turned wrong; each split by whether that plurality was"
            " right"
        ),
    ),
    TableLayout(
        "stopping",
        _stopping,
        "the vote and cost had the debate stopped after round r or at unanimity",
        note=(
            "replayed from the recorded rounds, no new requests: the vote had the debate stopped "
            "after round r or at the first round whose answers all agree"
        ),
    ),
    TableLayout(
        "budget",
        _budget,
        (
            "Maj, Debate, and self-consistency given the debate's compute, maj@G (G = N(T+1)) and"
            " the vote of the m samples its tokens buy, each debate run paired with a `mad-eval "
            "single` run of its model and benchmark among the runs given"
        ),
        note=(
            "maj@G is the vote of G = N(T+1) samples of the paired single run (as many "
            "generations as the debate); SC@tokens the vote of m samples, m the debate's tokens "
            "on the question over a sample's, rounded and clipped to [1, K], K the samples the "
            "single run pools per question over its seeded runs; both averaged over "
            "seeded subsamples and tested against Debate on the questions both answered"
        ),
        paired=True,
    ),
    TableLayout(
        "frameworks",
        _frameworks,
        "Maj, Debate, Δ, the share of debates ended early, requests and tokens per question",
        note=(
            "requests and tokens are per question, each framework's own (a debate ended early "
            "spent nothing after it); ended % is the share of debates its protocol ended "
            "before the last round, whose answers there count as final"
        ),
    ),
):
    LAYOUTS.add(_layout.name, _layout)

FORMATS = ("csv", "latex", "md")
ERRORS = ("std", "ci", "none")
