"""Finished runs as tables and plots see them: each run's counts per question and its
metrics, all recomputed from turns.jsonl, and a name for the method it measured."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from mad_eval.backends import model_label
from mad_eval.grading.grader import ROUGE
from mad_eval.measure.alerts import UNCHECKED
from mad_eval.measure.bootstrap import (
    REPLICATES,
    difference,
    interval,
    p_value,
    replicate_values,
)
from mad_eval.measure.compute import Measuring, Totals
from mad_eval.measure.families import differences
from mad_eval.measure.formula import Formula
from mad_eval.measure.prices import Price, Prices
from mad_eval.measure.schema import formulas
from mad_eval.measure.scoring import Scoring
from mad_eval.measure.tallies import Tallies
from mad_eval.records import Stop, Turn, Verdict
from mad_eval.sanitize import valid_text, valid_value
from mad_eval.settings.config import RecordedConfig, is_single
from mad_eval.store.files import StoreError
from mad_eval.store.folder import RunStore
from mad_eval.store.lines import Debates
from mad_eval.store.manifest import RunManifest

if TYPE_CHECKING:
    import pandas as pd


class Interval(NamedTuple):
    """A number's 95% bootstrap interval over questions (None where undefined), and for a
    difference the paired test's p-value against zero."""

    low: float | None
    high: float | None
    p: float | None = None


class Sink(Protocol):
    """Anything else that counts a run's debates while it is measured (pairing's pools and
    spending), so the run's turns are read once."""

    def add(self, turns: list[Turn]) -> None: ...


# What can tell two methods apart, in the order a generated label lists them.
# The answer protocol changes what counts as an answer, so it tells methods apart too.
LABEL_FIELDS = ("model", "protocol", "agents", "rounds", "prompt", "answer", "temperature", "seed")


@dataclass
class Run:
    root: Path
    manifest: RunManifest
    tallies: Tallies
    metrics: dict[str, Any]
    verdicts: list[Verdict] = field(default_factory=list)
    # Failed turns whose request was sent (not a prompt too long to send): worth asking again.
    failed_sent: int = 0
    label: str = ""
    # More than its benchmark to set it apart in a table's columns (an experiment's table
    # with columns = ["benchmarks", "agents"]: "N=3"); "" for none.
    group: str = ""
    # What its tokens cost (docs/explanation/diagnostics.md, Cost); None: in tokens only.
    prices: Prices | None = None
    # Numbers counted on other tallies than the run's own (the compute-matched baselines,
    # on the questions a single run shares with it): formula name -> (formula, tallies).
    attached: dict[str, tuple[Formula, Tallies]] = field(default_factory=dict)
    # What else counted its debates as it was read (load_run's `keep`).
    kept: list[Sink] = field(default_factory=list)
    # The single run its compute-matched numbers were counted against (pairing.attach).
    paired: Run | None = None

    def tallies_of(self, name: str) -> Tallies:
        """The tallies a formula of the run is evaluated on."""
        found = self.attached.get(name)
        return found[1] if found else self.tallies

    @property
    def config(self) -> RecordedConfig:
        return self.manifest.config

    @property
    def maj(self) -> float | None:
        """The vote of the round-0 answers, in % (mean over seeded runs)."""
        return self.metrics.get("maj")

    @property
    def debate(self) -> float | None:
        """The vote after the last round, in %."""
        return self.metrics.get("debate")

    @property
    def delta(self) -> float | None:
        """Debate - Maj, in points."""
        return self.metrics.get("delta")

    @property
    def alerts(self) -> list[str]:
        """Why its numbers may mislead (metrics.json's `alerts`), one sentence each."""
        return list(self.metrics.get("alerts") or [])

    def headline(self) -> dict[str, Any]:
        """What a glance at the run shows: its settings and its main numbers (rounded)."""
        config, m = self.config, self.metrics
        found: dict[str, Any] = {"benchmark": self.benchmark, "protocol": config.protocol}
        if self.rounds == 0:
            found["k"] = config.agents
            numbers = {"mean@K": "mean_at_k", "maj@K": "maj_at_k"}
        else:
            found |= {"n": config.agents, "t": config.rounds}
            numbers = {"Maj": "maj", "Debate": "debate", "Δ": "delta"}
        if not self.voted:
            numbers = {"ROUGE-L": "rougeL", "Δ ROUGE-L": "rougeL_delta"}
        for name, key in numbers.items():
            value = m.get(key)
            found[name] = round(value, 1) if isinstance(value, int | float) else None
        found["questions"] = m.get("questions")
        if self.alerts:
            found["alerts"] = len(self.alerts)
        found["folder"] = str(self.root)
        return found

    def intervals(self, replicates: int = REPLICATES) -> dict[str, Interval]:
        """The headline's numbers' 95% bootstrap intervals over questions, by metrics.json
        key, with the paired p-value of a difference (Δ) against zero: what `table`'s CSV
        holds for them, for the console's headline."""
        if self.rounds == 0:
            keys = ["mean_at_k", "maj_at_k", "maj_at_k_bootstrap"]
        else:
            keys = ["maj", "debate", "delta"] if self.voted else [*ROUGE, "rougeL_delta"]
        keys = [k for k in keys if k in self.formulas]
        pairs = {k: pair for k, pair in differences(self.scoring).items() if k in keys}
        # Each set of tallies weighed once for all its numbers, a block of replicates at a
        # time (replicate_values: bootstrap_ci's draws), so no replicates x questions matrix
        # is held; the paired test's sides on the questions sorted, as paired_test has them.
        weighed: dict[int, tuple[Tallies, dict[str, Formula]]] = {}

        def weigh(tallies: Tallies, name: str) -> None:
            weighed.setdefault(id(tallies), (tallies, {}))[1][name] = self.formulas[name]

        for key in keys:
            weigh(self.tallies_of(key), key)
        paired = self.tallies.on(sorted(self.tallies.questions))
        for first, second in pairs.values():
            weigh(paired, first)
            weigh(paired, second)
        draws = {
            (tallies_id, name): values
            for tallies_id, (tallies, named) in weighed.items()
            if tallies.questions
            for name, values in replicate_values(tallies, named, replicates).items()
        }
        found: dict[str, Interval] = {}
        for key in keys:
            tallies = self.tallies_of(key)
            drawn = draws.get((id(tallies), key))
            low, high = (None, None) if drawn is None else interval(drawn)
            p = None
            if key in pairs and paired.questions:
                side_a, side_b = (draws[(id(paired), name)] for name in pairs[key])
                observed = difference(paired, *(self.formulas[name] for name in pairs[key]))
                p = None if math.isnan(observed) else p_value(observed, side_a - side_b)
            found[key] = Interval(low, high, p)
        return found

    def __repr__(self) -> str:
        """One line, never its records: Run(benchmark='arith', ..., Maj=68.0, ...)."""
        shown = [f"{_identifier(k)}={v!r}" for k, v in self.headline().items()]
        return f"Run({', '.join(shown)})"

    def _repr_html_(self) -> str:
        """A notebook's view: the headline as a one-row table, then each alert."""
        from html import escape

        from mad_eval.errors import for_keywords
        from mad_eval.settings.config import run_defaults

        found = self.headline()
        head = "".join(f"<th>{escape(str(k))}</th>" for k in found)
        row = "".join(f"<td>{escape('-' if v is None else str(v))}</td>" for v in found.values())
        keywords = {**run_defaults(), "retry_failed": False}  # a notebook calls mad_eval.run
        alerts = "".join(f"<li>{escape(for_keywords(a, keywords))}</li>" for a in self.alerts)
        return f"<table><thead><tr>{head}</tr></thead><tbody><tr>{row}</tr></tbody></table>" + (
            f"<ul>{alerts}</ul>" if alerts else ""
        )

    def turns(self) -> pd.DataFrame:
        """Every recorded turn as a row (turns.jsonl's fields as columns; a repeated key keeps
        its last record), for a notebook's own analysis."""
        import pandas as pd

        records = RunStore(self.root).turns()
        names = [f.name for f in dataclasses.fields(Turn)]
        rows = [[getattr(t, n) for n in names] for t in records]
        return pd.DataFrame(valid_value(rows), columns=names)  # pyarrow refuses a lone surrogate

    @property
    def benchmark(self) -> str:
        return self.manifest.benchmark.name

    @property
    def title(self) -> str:
        return self.manifest.benchmark.title

    @property
    def column(self) -> str:
        """The column group a table shows it under: its benchmark's title, and its group."""
        return valid_text(f"{self.title} {self.group}" if self.group else self.title)

    @property
    def rounds(self) -> int:
        return self.scoring.rounds

    @property
    def kind(self) -> str:
        return self.scoring.kind

    @functools.cached_property
    def scoring(self) -> Scoring:
        """How its answers are scored, read once from its manifest and its stops."""
        return Scoring.from_manifest(self.manifest, RunStore(self.root).stops())

    @functools.cached_property
    def escaping(self) -> str:
        """How its prompts quoted a reply holding a quoting tag: "escaped" (every template
        escapes the tags it quotes between), "as written" (none does: a template without
        tags), "mixed", or "unknown" (a recorded template that fails its hash); recorded
        templates are read back in the sandbox, never trusted."""
        from mad_eval.settings.templates import TemplateError, recorded_template

        records = self.manifest.prompt.prompt_templates
        if records is None:  # recorded before templates were data: built-in, tag-quoting
            return "escaped"
        try:
            escapes = {
                bool(recorded_template(ref, r.file, r.sha256, r.text, r.data).quote_tags)
                for ref, r in records.items()
            }
        except TemplateError:  # an edited manifest: its numbers still stand, this cannot
            return "unknown"
        return "mixed" if len(escapes) > 1 else "escaped" if escapes == {True} else "as written"

    @property
    def voted(self) -> bool:
        """Whether its answers are right or wrong and voted (a summary is scored instead)."""
        return self.scoring.voted

    @property
    def score(self) -> str:
        return self.scoring.rule

    @functools.cached_property
    def own_formulas(self) -> dict[str, Formula]:
        return formulas(self.scoring, bool(self.verdicts), *self.priced())

    def priced(self) -> tuple[Price | None, Price | None]:
        """Its agents' price and its judge's, from `prices` (None without)."""
        return run_prices(self.manifest, self.verdicts, self.prices)

    @property
    def formulas(self) -> dict[str, Formula]:
        """Every number of the run by formula name, its attached ones too."""
        if not self.attached:
            return self.own_formulas
        return self.own_formulas | {name: f for name, (f, _) in self.attached.items()}

    @property
    def single(self) -> bool:
        """A `mad-eval single` run: K independent samples per question, no debate."""
        return recorded_single(self.manifest)

    def describe(self) -> dict[str, str]:
        """The method's settings as short text, by LABEL_FIELDS name."""
        return describe(self.config)


def describe(config: RecordedConfig) -> dict[str, str]:
    """A run's settings as short text, by LABEL_FIELDS name; `answer` is empty where the run
    read answers with its benchmark's own answer protocol."""
    if config.roster:
        model = "+".join(f"{model_label(e.model)}x{e.count}" for e in config.roster)
    else:
        model = model_label(config.model)
    answer = config.answer_protocol
    return {
        "model": model,
        "protocol": config.protocol,
        "agents": f"N={config.agents}",
        "rounds": f"T={config.rounds}",
        "prompt": config.prompt_style,
        "answer": f"answer={answer}" if answer else "",
        "temperature": f"temp={config.temperature}",
        "seed": f"seed={config.seed}",
    }


def _identifier(name: str) -> str:
    """A headline's name as a repr shows it: mean@K as mean_at_K, Δ as delta."""
    for shown, spelled in (("@", "_at_"), ("Δ ROUGE-L", "rougeL_delta"), ("ROUGE-L", "rougeL")):
        name = name.replace(shown, spelled)
    return name.replace("Δ", "delta")


def run_models(manifest: RunManifest) -> list[str]:
    """The model specs its agents used."""
    seated = [seat.model for seat in manifest.team]
    return list(dict.fromkeys(seated)) or [manifest.config.model]


def run_prices(
    manifest: RunManifest, verdicts: list[Verdict], prices: Prices | None
) -> tuple[Price | None, Price | None]:
    """Its agents' price and its judge's under `prices` (None without prices or verdicts)."""
    if prices is None:
        return None, None
    judge = prices.of([verdicts[0].setting["judge"]]) if verdicts else None
    return prices.of(run_models(manifest)), judge


def measure(
    manifest: RunManifest,
    debates: Debates,
    verdicts: list[Verdict] | None = None,
    prices: Prices | None = None,
    sinks: Sequence[Sink] = (),
    stops: Mapping[tuple[int, str], Stop] | None = None,
) -> tuple[Tallies, dict[str, Any], Totals]:
    """The run's counts per question, its metrics.json and its plain sums, from its records
    alone: its turns, read a debate at a time (each also handed to `sinks`), and, when it
    has been judged, the judge's verdicts; its cost in money when given `prices`."""
    price, judge_price = run_prices(manifest, verdicts or [], prices)
    groups: dict[str, list[int]] = {}
    for seat in manifest.team:
        groups.setdefault(seat.group, []).append(seat.agent)
    measuring = Measuring(
        debates.runs,
        debates.questions,
        Scoring.from_manifest(manifest, stops),
        groups=groups,
        price=price,
        judge_price=judge_price,
    )
    for debate in debates.each:
        measuring.add(debate)
        for sink in sinks:
            sink.add(debate)
    found = measuring.tallies(verdicts)
    metrics = measuring.metrics(found, verdicts)
    return found, metrics, measuring.totals


def load_run(
    root: Path,
    prices: Prices | None = None,
    keep: Callable[[RunManifest], list[Sink]] | None = None,
) -> Run:
    """Read one run directory; a folder that is no run, or holds no turns, is a StoreError.
    Its turns are read a debate at a time and never held all at once. With `prices`, its
    cost is in money too; with `keep`, what it gives for the run's manifest counts the same
    debates, in the same pass, and is kept as the Run's `kept`."""
    store = RunStore(root)
    manifest = store.manifest()
    shape = store.shape(manifest)  # records of no turn of the run are refused, not counted
    debates = store.debates(shape)
    if not debates.count:
        raise StoreError(f"{store.turns_path} holds no turns yet; nothing to report.")
    verdicts = store.verdicts(shape)
    sinks = keep(manifest) if keep is not None else []
    stops = store.stops(shape)
    found, metrics, totals = measure(manifest, debates, verdicts, prices, sinks, stops)
    if shape.grades is None:  # no golds to hold its verdicts to
        metrics["alerts"] = [*metrics["alerts"], UNCHECKED]
    failed = totals.total("failed_sent")
    return Run(
        store.root,
        manifest,
        found,
        metrics,
        verdicts,
        failed_sent=failed,
        prices=prices,
        kept=sinks,
    )


def recorded_single(manifest: RunManifest) -> bool:
    """Whether a run folder holds a single run (settings.config.is_single), by its protocol's
    recorded class (its name's head, in a manifest written before the class was)."""
    protocol = manifest.protocol
    return is_single(protocol.cls or protocol.name.partition(":")[0], manifest.config.rounds)


def load_runs(
    roots: list[Path],
    labels: dict[str, str] | None = None,
    groups: dict[str, str] | None = None,
    prices: Prices | None = None,
) -> list[Run]:
    """Read runs and name their methods: a --label given for the folder, else the fewest
    settings that differ between the runs (model, protocol, N, ...), else the model.
    Two runs of one benchmark under one name are refused before any turn is read: their
    numbers would be mixed up."""
    named = method_names([(root, RunStore(root).manifest()) for root in roots], labels, groups)
    runs = [load_run(root, prices) for root in roots]
    for run, (label, group) in zip(runs, named, strict=True):
        run.label, run.group = label, group
    return runs


def name_runs(
    runs: list[Run], labels: dict[str, str] | None = None, groups: dict[str, str] | None = None
) -> list[Run]:
    """Name loaded runs' methods as load_runs does."""
    named = method_names([(run.root, run.manifest) for run in runs], labels, groups)
    for run, (label, group) in zip(runs, named, strict=True):
        run.label, run.group = label, group
    return runs


def method_names(
    found: list[tuple[Path, RunManifest]],
    labels: dict[str, str] | None = None,
    groups: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """Each run's method label and column group, from its folder and manifest alone (so a
    clash is refused before anything is measured): a --label given for the folder, else the
    fewest differing settings, else the model; an answer protocol that is not the
    benchmark's own is always named."""
    labels = dict(labels or {})
    described = [describe(manifest.config) for _, manifest in found]
    fields: tuple[str, ...] = LABEL_FIELDS
    if all(recorded_single(manifest) for _, manifest in found):
        fields = tuple(f for f in fields if f != "agents")  # K is shown per benchmark
    # The fewest differing settings that tell the runs of each benchmark apart, in order.
    varying = [f for f in fields if len({d[f] for d in described}) > 1]
    chosen: list[str] = []
    for setting in varying:
        chosen.append(setting)
        names = {
            (_joined(d, chosen), manifest.benchmark.name)
            for d, (_, manifest) in zip(described, found, strict=True)
        }
        if len(names) == len(found):
            break
    # The answer protocol alone says little: the model names the method beside it.
    shown = [*(f for f in chosen if f != "answer"), "answer"]
    shown = shown if len(shown) > 1 else ["model", "answer"]
    named = []
    for (root, _), settings in zip(found, described, strict=True):
        group = (groups or {}).get(str(root), "")
        given = labels.pop(str(root), None) or labels.pop(root.name, None)
        label = given or _joined(settings, shown)
        named.append((valid_text(label), group))  # matplotlib and pyarrow refuse a lone surrogate
    if labels:
        unknown = ", ".join(sorted(labels))
        given = ", ".join(str(root) for root, _ in found)
        raise StoreError(
            f"--label names {unknown}, which is not one of the runs given ({given}); "
            "name a run by its folder as given or by the folder's last part."
        )
    seen: dict[tuple[str, str, str], Path] = {}
    for (root, manifest), (label, group) in zip(found, named, strict=True):
        benchmark = manifest.benchmark.name
        other = seen.setdefault((label, benchmark, group), root)
        if other != root:
            raise StoreError(
                f"{other} and {root} are both '{label}' on "
                f"{' '.join(filter(None, (benchmark, group)))}; "
                f"name them apart with --label {root}=NAME."
            )
    return named


def _joined(settings: dict[str, str], names: list[str]) -> str:
    return " ".join(filter(None, (settings[f] for f in names)))


def parse_labels(options: list[str]) -> dict[str, str]:
    """--label RUN=NAME options, RUN being the run folder as given or its last part."""
    labels = {}
    for option in options:
        folder, equals, name = option.partition("=")
        if not equals or not folder or not name:
            raise StoreError(f"--label '{option}' must look like RUN_DIR=NAME.")
        labels[str(Path(folder))] = name
    return labels
