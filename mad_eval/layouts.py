"""The paper tables' layouts: for each, the row parts and columns it shows, each column a
number of metrics.json; and the formats and error bars a table can have. Plain data, so
the command line lists them without loading the table machinery (tables.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mad_eval.rubric import CRITIQUE, CRITIQUE_HEADERS


@dataclass(frozen=True)
class Column:
    header: str
    key: str  # the number's name in metrics.formulas
    better: str | None = "max"  # which end is bolded: max, min or None
    digits: int = 1
    signed: bool = False
    scored: bool = False  # the system's answer, so the run's scoring rule (mad_eval.rules)
    optional: bool = False  # left out of a table where no method has a value for it
    # A number of the same run this one is tested against (on the questions both
    # have), instead of the baseline method's same number.
    against: str | None = None


# A layout: for a run's number of debate rounds and of voters, the table's row parts (a
# label appended to the method's, "" for none) and each part's columns.
Layout = Callable[[int, int], list[tuple[str, list[Column]]]]


def _debate(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    return [
        (
            "",
            [
                Column("Maj", "maj", scored=True),
                Column("Debate", "debate", scored=True),
                Column("Δ", "delta", signed=True, scored=True),
            ],
        )
    ]


def _single(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """mean@K and the exact maj@K (the vote of all K answers). Round 0 is K independent
    samples in any run, a debate's as much as `mad-eval single`'s."""
    return [("", [Column("mean@K", "round0.agent_accuracy"), Column("maj@K", "maj", scored=True)])]


def _single_bootstrap(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """mean@K and verl's maj@K/mean (rules.bootstrap_maj), which metrics.json has for runs
    without debate only (`maj_at_k_bootstrap`)."""
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


def _budget(rounds: int, voters: int) -> list[tuple[str, list[Column]]]:
    """Debate against self-consistency given the same compute (mad_eval.matched): the vote
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


LAYOUTS: dict[str, Layout] = {
    "debate": _debate,
    "single": _single,
    "rounds": _rounds,
    "transitions": _transitions,
    "lengths": _lengths,
    "diversity": _diversity,
    "critique": _critique,
    "rouge": _rouge,
    "single-bootstrap": _single_bootstrap,
    "budget": _budget,
}
# Layouts whose debate runs are each paired with a `mad-eval single` run of their model and
# benchmark among the runs given (mad_eval.budget); those single runs are no rows.
PAIRED = ("budget",)
# What a layout's numbers are, where its headers cannot say it all: below a Markdown table,
# in a comment above a LaTeX one.
LAYOUT_NOTES = {
    "single": "maj@K is exact: the vote of all K answers of each question",
    "single-bootstrap": "maj@K (bootstrap) is verl's maj@K/mean: the vote of K answers drawn "
    "with replacement, its correctness averaged over 1000 draws (numpy seed 42) per question",
    "budget": "maj@G is the vote of G = N(T+1) samples of the paired single run (as many "
    "generations as the debate); SC@tokens the vote of m samples, m the debate's tokens on "
    "the question over a sample's, rounded and clipped to [1, K]; both averaged over seeded "
    "subsamples and tested against Debate on the questions both answered",
}
FORMATS = ("csv", "latex", "md")
ERRORS = ("std", "ci", "none")
# Question resamples behind every bootstrap interval and paired test (mad_eval.stats).
REPLICATES = 2000
