"""Console tables for metrics.json (rich)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from mad_eval.grading.grader import ROUGE
from mad_eval.grading.rubric import CRITIQUE, CRITIQUE_HEADERS, JUDGE_CRITERIA
from mad_eval.measure import families
from mad_eval.measure.base import Context, Family
from mad_eval.measure.scoring import Scoring
from mad_eval.voting.rules import RULES, default_rule
from mad_eval.words import counted

if TYPE_CHECKING:
    from mad_eval.reporting.results import Interval


def fmt(
    value: float | None, std: float | None = None, digits: int = 1, signed: bool = False
) -> str:
    if value is None:
        return "-"
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    return f"{text} ± {std:.{digits}f}" if std is not None else text


def p_text(p: float, equals: str = "") -> str:
    """A p-value as printed: a bootstrap's smallest (1 / (1 + replicates)) is "<0.001"."""
    return "<0.001" if p < 0.001 else f"{equals}{p:.3f}"


def scored_by(metrics: dict[str, Any]) -> str:
    """The scoring rule, as a header says it, where it is not the kind's usual one (runs
    measured before rules existed have none recorded: theirs is the usual one)."""
    kind = metrics.get("kind", "math")
    rule = metrics.get("score") or default_rule(kind)
    if rule == default_rule(kind):
        return ""
    described = f": {RULES.get(rule).description}" if rule in RULES else ""
    return f"Scored by score={rule}{described}."


# A run folder's name in parts, each with the separator that ends it.
NAME_PARTS = re.compile(r"[^-_,=/ ]*[-_,=/ ]|[^-_,=/ ]+")


def fold_name(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` cells, broken only after a '-', '_', ',', '=', '/'
    or space, so no part of a run's name is cut (unless one part alone is wider)."""
    lines, line = [], ""
    for part in NAME_PARTS.findall(text):
        if line and cell_len((line + part).rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += part
        while cell_len(line) > width:  # one part wider than the console
            lines.append(line[:width])
            line = line[width:]
    return [*lines, line.rstrip()]


@dataclass(frozen=True)
class Title:
    """A table's title as a line of its own at the console's width: rich would wrap a
    table's own title at the table's width, cutting a run's name mid-part."""

    text: str

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text("\n".join(fold_name(self.text, options.max_width)), style="table.title")


def metrics_view(
    metrics: dict[str, Any],
    title: str,
    escaping: str = "escaped",
    intervals: Mapping[str, Interval] | None = None,
) -> Group:
    """The console's tables of a run's metrics: the scoring rule where it is not the usual
    one, then each panel (PANELS, in its order) that a metric family applying to the run
    names (Family.console); `escaping` says how its prompts quoted a reply holding a quoting
    tag (results.Run.escaping); `intervals` (results.Run.intervals) the headline numbers'
    95% intervals and Δ's p-value."""
    runs = metrics["runs"]
    spread = f" (mean ± std over {runs} runs)" if runs > 1 else ""
    shown = View(metrics, f"{title}{spread}", escaping, dict(intervals or {}))
    named = {panel for family in _applying(metrics) for panel in family.console}
    parts = [scored_by(metrics)] if scored_by(metrics) else []  # above the tables
    for name, panel in PANELS.items():
        if name in named:
            parts += panel(shown)
    return Group(*parts)


@dataclass(frozen=True)
class View:
    """What a panel is drawn from: the run's metrics.json, the headline's title and how its
    prompts quoted replies holding a quoting tag."""

    metrics: dict[str, Any]
    title: str
    escaping: str
    intervals: dict[str, Interval] = field(default_factory=dict)

    def number(self, key: str, digits: int = 1, signed: bool = False) -> str:
        """A headline number: its value (± std over runs), its 95% interval over questions
        and, for a difference, the paired p-value against zero."""
        m = self.metrics
        text = fmt(m.get(key), m.get(f"{key}_std"), digits, signed)
        found = self.intervals.get(key)
        if found is None or found.low is None or found.high is None:
            return text
        sign = "+" if signed else ""
        text += f" [{found.low:{sign}.{digits}f}, {found.high:{sign}.{digits}f}]"
        return text + ("" if found.p is None else f" p{p_text(found.p, '=')}")

    def caption(self) -> list[Text]:
        """What the headline's brackets are, as a line under it (none without brackets)."""
        if not any(i.low is not None for i in self.intervals.values()):
            return []
        tested = any(i.p is not None for i in self.intervals.values())
        p = "; p: Δ tested against 0 on the same questions" if tested else ""
        return [Text(f"[ ] is a 95% bootstrap interval over questions{p}.")]


def _applying(metrics: dict[str, Any]) -> list[Family]:
    """The metric families whose numbers metrics.json holds (paired ones too)."""
    agents = metrics["agents"]
    scoring = Scoring(
        agents=agents,
        rounds=metrics["rounds_of_debate"],
        voters=tuple(metrics.get("voters") or range(agents)),
        kind=metrics.get("kind", "math"),
        seed=0,
        hub=metrics.get("hub"),
        rule=metrics.get("score") or "",
    )
    context = Context(scoring, judged=bool(metrics.get("judge")))
    return [family for family in families.every() if family.applies(context)]


def headline_view(view: View) -> list[Any]:
    """Maj, Debate and Δ; without debate mean@K, maj@K and verl's estimate of maj@K."""
    metrics = view.metrics
    headline = Table()
    if metrics["rounds_of_debate"] == 0:  # mad-eval single: K samples, no debate
        k = metrics["agents"]
        cells = {f"mean@{k}": view.number("mean_at_k"), f"maj@{k}": view.number("maj_at_k")}
        if "maj_at_k_bootstrap" in metrics:  # verl's estimate (metrics.json before had none)
            cells[f"maj@{k} (verl bootstrap)"] = view.number("maj_at_k_bootstrap")
        for name in cells:
            headline.add_column(name, justify="right")
        headline.add_row(*cells.values())
    else:
        for name in ("Maj", "Debate", "Δ"):
            headline.add_column(name, justify="right")
        headline.add_row(
            view.number("maj"), view.number("debate"), view.number("delta", signed=True)
        )
    return [Title(view.title), headline, *view.caption()]


def rounds_view(view: View) -> list[Any]:
    """Accuracy by round: the system's answer, the mean agent, the hub, unanimity."""
    metrics = view.metrics
    hub = metrics.get("hub")
    rounds = Table(title="Accuracy by round (%)", title_justify="left")
    # The system's answer: the vote, or what the scoring rule picked.
    system = f"score={metrics['score']}" if scored_by(metrics) else "vote"
    columns = ["round", system, "mean agent"]
    columns += [f"hub (agent {hub})"] if hub is not None else []
    for name in [*columns, "unanimous", "N_eff", "prefix share"]:
        rounds.add_column(name, justify="right")
    for row in metrics["rounds"]:
        tied = " †" if row.get("ties") else ""  # metrics.json before ties were counted: none
        row_cells = [
            str(row["round"]),
            fmt(row["vote_accuracy"], row["vote_accuracy_std"]) + tied,
            fmt(row["agent_accuracy"], row["agent_accuracy_std"]),
        ]
        if hub is not None:
            row_cells.append(fmt(row["hub_accuracy"], row["hub_accuracy_std"]))
        row_cells.append(fmt(row.get("unanimous")))
        n_eff = row.get("n_eff")
        row_cells.append("-" if n_eff is None else f"{n_eff:.2f}")
        share = row.get("prefix_share")
        row_cells.append("-" if share is None else f"{100 * share:.0f}%")
        rounds.add_row(*row_cells)
    shares = [
        f"round {row['round']} {row['ties']:.1f}%" for row in metrics["rounds"] if row.get("ties")
    ]
    if shares:
        rounds.caption = (
            "† a tie broken by the seeded draw decided this share of the round's votes: "
            f"{', '.join(shares)}."
        )
        rounds.caption_justify = "left"
    return [rounds]


def transitions_view(view: View) -> list[Any]:
    """The agents' moves between rounds (none without debate)."""
    if not view.metrics["transitions"]:
        return []
    moves = Table(title="Agent transitions (% of agents)", title_justify="left")
    for name in ("rounds", "correct→incorrect", "incorrect→correct", "Δ"):
        moves.add_column(name, justify="right")
    for row in view.metrics["transitions"]:
        moves.add_row(
            f"{row['from_round']}→{row['to_round']}",
            fmt(row["c2i"], row["c2i_std"]),
            fmt(row["i2c"], row["i2c_std"]),
            fmt(row["delta"], row["delta_std"], signed=True),
        )
    return [moves]


def groups_view(view: View) -> list[Any]:
    """Each agent group's own vote, where the team has several groups."""
    if not view.metrics.get("groups"):
        return []
    groups = Table(title="By agent group (%)", title_justify="left")
    for name in ("group", "agents", "Maj", "Debate", "Δ", "agent acc. round 0 → last"):
        groups.add_column(name, justify="right")
    for g in view.metrics["groups"]:
        first, last = g["rounds"][0]["agent_accuracy"], g["rounds"][-1]["agent_accuracy"]
        groups.add_row(
            g["group"],
            ",".join(map(str, g["agents"])),
            fmt(g["maj"]),
            fmt(g["debate"]),
            fmt(g["delta"], signed=True),
            f"{fmt(first)} → {fmt(last)}",
        )
    return [groups]


def rouge_views(view: View) -> list[Any]:
    """A summary run: the consensus summary's ROUGE after the last round and its gain over
    round 0, then ROUGE by round, of the consensus and of the mean agent."""
    metrics, title = view.metrics, view.title
    usual = metrics.get("score", "consensus") == "consensus"
    picked = "consensus summary" if usual else "system's summary"
    headline = Table()
    for name in ("ROUGE-1", "ROUGE-2", "ROUGE-L", "Δ ROUGE-L (vs round 0)"):
        headline.add_column(name, justify="right")
    headline.add_row(*(view.number(m) for m in ROUGE), view.number("rougeL_delta", signed=True))
    rounds = Table(title="ROUGE F1 by round (%)", title_justify="left")
    for name in ("round", "R-1", "R-2", "R-L", "mean agent R-L", "prefix share"):
        rounds.add_column(name, justify="right")
    for row in metrics["rounds"]:
        share = row.get("prefix_share")
        rounds.add_row(
            str(row["round"]),
            *(fmt(row[m], row[f"{m}_std"]) for m in ROUGE),
            fmt(row["agent_rougeL"], row["agent_rougeL_std"]),
            "-" if share is None else f"{100 * share:.0f}%",
        )
    return [Title(f"{title}: {picked}, ROUGE F1 (%)"), headline, *view.caption(), rounds]


def matched_view(metrics: dict[str, Any]) -> Table:
    """Debate against self-consistency given the same compute (metrics.json's `matched`):
    each number with its 95% interval, and the baselines' paired p-value against Debate."""
    m = metrics["matched"]
    table = Table(
        title=f"Compute-matched baselines, {counted(m['questions'], 'question')} shared with "
        f"{m['single_run']} (%)",
        title_justify="left",
    )
    for name in ("number", "value", "95% interval", "p vs Debate"):
        table.add_column(name, justify="right" if name != "number" else "left")
    g = m["generations"]
    clipped = f"{100 * m.get('clipped_share', 0):.0f}%"
    rows = [
        (f"Debate (N={metrics['agents']}, T={metrics['rounds_of_debate']})", None, 1),
        (f"maj@G, G = N(T+1) = {g:.0f}", "maj_at_generations", 1),
        ("SC at equal tokens", "sc_at_tokens", 1),
        (f"  m, samples it buys ({clipped} at K = {m['samples']}, pooled)", "samples_at_tokens", 1),
        ("  debate tokens per question", "debate_tokens", 0),
        ("  tokens per single sample", "sample_tokens", 0),
    ]
    for label, key, digits in rows:
        if key is None:
            table.add_row(label, fmt(metrics["debate"], metrics["debate_std"]), "", "")
            continue
        low, high = m[f"{key}_ci"]
        interval = "-" if low is None else f"[{low:.{digits}f}, {high:.{digits}f}]"
        p = m.get(f"{key}_p_vs_debate")
        table.add_row(
            label,
            fmt(m[key], m[f"{key}_std"], digits=digits),
            interval,
            "" if p is None else p_text(p),
        )
    return table


def dynamics_view(metrics: dict[str, Any]) -> Table:
    """Is the debate worth its compute: its cost per question, the drift of mean agent
    accuracy (is it a martingale?), what the vote adds, the oracle gap, and the unanimity
    stop replayed. `mad-eval table --layout cost|margin|drift|conformity|stopping` has more."""
    cost, stop = metrics["cost"], metrics["stop_unanimous"]
    table = Table(title="Cost and diagnostics (per question)", title_justify="left")
    cells = {"tokens": fmt(cost["tokens"], digits=0)}
    if cost.get("usd_per_1k") is not None:
        cells["$ / 1k questions"] = fmt(cost["usd_per_1k"], digits=3)
    low, high = metrics.get("drift_ci") or (None, None)
    p = metrics.get("drift_p")
    interval = f" [{low:+.1f}, {high:+.1f}]" if low is not None and high is not None else ""
    tested = "" if p is None else f", p{p_text(p, '=')}"
    cells["drift (95% CI, p)"] = fmt(metrics["drift"], signed=True) + interval + tested
    cells["aggregation"] = fmt(metrics["aggregation"], signed=True)
    cells["oracle gap"] = fmt(metrics["oracle_gap"])
    saved = stop["tokens_saved"]
    cells["stop at unanimity"] = fmt(stop["accuracy"]) + (
        f" ({saved:.0f}% tokens saved)" if saved is not None else ""
    )
    for name in cells:
        table.add_column(name, justify="right")
    table.add_row(*cells.values())
    return table


def reasoning_view(metrics: dict[str, Any]) -> Table:
    """A reasoning model's turns by round: mean tokens of reasoning and of final content, and
    the replies cut off inside their reasoning (no answer, left out of the vote)."""
    table = Table(title="Reasoning by round (mean tokens per answer)", title_justify="left")
    for name in ("round", "reasoning", "final content", "truncated in reasoning"):
        table.add_column(name, justify="right")
    for row in metrics["rounds"]:
        table.add_row(
            str(row["round"]),
            fmt(row.get("reasoning_tokens"), row.get("reasoning_tokens_std"), digits=0),
            fmt(row.get("final_tokens"), row.get("final_tokens_std"), digits=0),
            str(row.get("truncated_in_reasoning", 0)),
        )
    return table


# What a prompt did with a reply holding a tag it quotes between, by Run.escaping.
QUOTED = {
    "escaped": "escaped when quoted",
    "as written": "quoted as written: the run's template quotes without tags",
    "mixed": "escaped only by the templates that quote between tags",
    "unknown": "escaped or not: unknown, the run's recorded template fails its hash",
}


def _footer(metrics: dict[str, Any], escaping: str) -> str:
    tags = metrics.get("replies_with_quoting_tags")
    escaped = f"; replies holding quoting tags ({QUOTED[escaping]}): {tags}" if tags else ""
    truncated = metrics.get("truncated_in_reasoning")
    refused = metrics.get("refusals")
    notes = [f"{truncated} cut off in their reasoning"] if truncated else []
    notes += [f"{refused} refused"] if refused else []
    cut = f" ({', '.join(notes)})" if notes else ""
    invalid = metrics.get("usage_invalid")
    if invalid:
        escaped += f"; replies whose token counts were no numbers (unknown): {invalid}"
    return (
        f"{counted(metrics['questions'], 'question')}, {counted(metrics['agents'], 'agent')}, "
        f"{counted(metrics['turns'], 'turn')}; replies with no answer read (every round, every "
        f"run): {metrics['unparsed']}{cut}, "
        f"failed turns: {metrics['failed_turns']}, stopped at max tokens: "
        f"{metrics.get('length_stops', 0)}, prompts cut to fit: "
        f"{metrics.get('context_cut_turns', 0)}; requests sent: "
        f"{metrics.get('requests_sent', metrics['turns'])}, turns retried: "
        f"{metrics.get('retried_turns', 0)}, answers from the cache: "
        f"{metrics.get('cached_turns', 0)}{escaped}"
    )


def critique_view(metrics: dict[str, Any]) -> Table:
    """The judge's mean scores per debate round and over all of them, with its failures."""
    judge = metrics["judge"]
    table = Table(
        title=f"Critique scores by {judge['setting']['judge']} (mean per judged turn)",
        title_justify="left",
    )
    table.add_column("round", justify="right")
    for name, (top, _) in JUDGE_CRITERIA.items():
        table.add_column(f"{CRITIQUE_HEADERS[name]} (0-{top})", justify="right")
    for name in ("total (0-9)", "judged", "judge failures"):
        table.add_column(name, justify="right")
    rows = [(str(row["round"]), row, row) for row in metrics["rounds"] if "judged" in row]
    rows.append(("all", metrics, judge))  # the overall means sit at the top level
    for label, scores, counts in rows:
        table.add_row(
            label,
            *(
                fmt(scores[f"critique_{n}"], scores[f"critique_{n}_std"], digits=2)
                for n in CRITIQUE
            ),
            str(counts["judged"]),
            str(counts["judge_failures"]),
        )
    return table


def _when(present: Callable[[dict[str, Any]], bool], draw: Callable[[dict[str, Any]], Any]):
    """A panel of one table, drawn where metrics.json holds its numbers."""
    return lambda view: [draw(view.metrics)] if present(view.metrics) else []


# The console's panels in the order it prints them; each metric family names those that show
# its numbers (Family.console). A panel draws nothing where metrics.json lacks its numbers.
PANELS: dict[str, Callable[[View], list[Any]]] = {
    "headline": headline_view,
    "rounds": rounds_view,
    "transitions": transitions_view,
    "rouge": rouge_views,
    "dynamics": _when(lambda m: "drift" in m, dynamics_view),
    "reasoning": _when(
        lambda m: bool(m.get("reasoning_turns") or m.get("truncated_in_reasoning")),
        reasoning_view,
    ),
    "critique": _when(lambda m: bool(m.get("judge")), critique_view),
    "matched": _when(lambda m: bool(m.get("matched")), matched_view),
    "groups": groups_view,
    "footer": lambda view: [_footer(view.metrics, view.escaping)],
}
