"""Debate runs paired with the `mad-eval single` run of the same model and benchmark: the
compute-matched numbers (mad_eval.measure.matched) attached to each debate Run and set in its
metrics as the `matched` section, so tables, plots and metrics.json show them like any
other number. Reads the two folders' turns a debate at a time, each folder once when loaded
with `load_for_pairing`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mad_eval.measure.bootstrap import REPLICATES
from mad_eval.measure.matched import SamplePool, SamplePooling, Spending, formulas, match, section
from mad_eval.measure.prices import Prices
from mad_eval.measure.scoring import Scoring
from mad_eval.reporting.results import (
    Run,
    Sink,
    load_run,
    method_names,
    name_runs,
    recorded_single,
)
from mad_eval.store.files import StoreError
from mad_eval.store.folder import RunStore
from mad_eval.store.manifest import RunManifest
from mad_eval.words import counted


class PairingError(StoreError):
    """A debate run has no single run to be matched with; the message names what to run."""


def split(runs: list[Run]) -> tuple[list[Run], list[Run]]:
    """The debate runs and the single runs (which serve as pools, never as rows)."""
    return [r for r in runs if not r.single], [r for r in runs if r.single]


def single_run(run: Run) -> Run:
    """`run`, checked to be a single run: given as one, a debate run is refused."""
    if not run.single:
        raise PairingError(
            f"{run.root} is a debate ({counted(run.scoring.agents, 'agent')}, "
            f"{counted(run.rounds, 'round')}), not a `mad-eval single` run; give the single run "
            "of the debate's model and benchmark."
        )
    return run


def generations(run: Run) -> int:
    """G = N(T+1): the generations a debate makes per question."""
    return run.scoring.agents * (run.rounds + 1)


def _model(run: Run) -> str | None:
    """The run's one model spec; None for a team of several models."""
    roster = run.config.roster
    models = {entry.model for entry in roster} if roster else {run.config.model}
    return models.pop() if len(models) == 1 else None


def _wanted(debate: Run) -> str:
    model = _model(debate) or "MODEL"
    return (
        f"`mad-eval single -k {generations(debate)} --model {model} "
        f"--benchmark {debate.benchmark}` (with the debate's --limit and --runs)"
    )


def pick_single(debate: Run, singles: list[Run]) -> Run:
    """The single run `debate` is matched with: of its model and benchmark, the one with the
    most samples per question (its K times its seeded runs, which are pooled)."""
    if debate.single:
        raise PairingError(
            f"{debate.root} is a single run (K samples, no debate); give a debate run, "
            "and the single run of its model and benchmark beside it."
        )
    model = _model(debate)
    if model is None:
        raise PairingError(
            f"{debate.root} is a team of several models; compute-matched baselines need the "
            "debate and the single run to be one model."
        )
    if not debate.voted:
        raise PairingError(
            f"{debate.root} ran {debate.benchmark}, a summary benchmark: compute-matched "
            "baselines vote answers, which summaries do not have."
        )
    mine = [s for s in singles if _model(s) == model and s.benchmark == debate.benchmark]
    if not mine:
        given = ", ".join(f"{s.root} ({_model(s)} on {s.benchmark})" for s in singles)
        among = f" (given: {given})" if given else ""
        raise PairingError(
            f"{debate.root} has no single run of {model} on {debate.benchmark} to be matched "
            f"with{among}; run {_wanted(debate)} and give its folder too."
        )
    best = max(mine, key=lambda s: s.scoring.agents * s.metrics["runs"])
    pooled = best.scoring.agents * best.metrics["runs"]
    if pooled < generations(debate):
        raise PairingError(
            f"{best.root} has {pooled} samples per question, fewer than the "
            f"G = N(T+1) = {generations(debate)} generations of {debate.root}; run "
            f"{_wanted(debate)}."
        )
    return best


def pairing_sinks(manifest: RunManifest) -> list[Sink]:
    """What pairing counts of a run as it is loaded: a single run's pools of samples, a
    debate run's tokens (load_run's `keep`)."""
    scoring = Scoring.from_manifest(manifest)
    if recorded_single(manifest):
        return [SamplePooling(scoring.same)]
    return [Spending(scoring.rounds)]


def load_for_pairing(root: Path, prices: Prices | None = None) -> Run:
    """A run loaded with what pairing needs counted in the same pass: its turns read once."""
    return load_run(root, prices, keep=pairing_sinks)


def _kept(run: Run, kind: type) -> Any:
    return next((sink for sink in run.kept if isinstance(sink, kind)), None)


def read_pools(single: Run) -> dict[str, SamplePool]:
    """The single run's pools: those counted as it was loaded, else read from its turns."""
    pooling = _kept(single, SamplePooling)
    if pooling is None:
        pooling = SamplePooling(single.scoring.same)
        for debate in RunStore(single.root).debates().each:
            pooling.add(debate)
    return pooling.pools()


def attach(debate: Run, single: Run, pools: dict[str, SamplePool], replicates: int) -> None:
    """Count the debate's tokens (unless counted as it was loaded), match it with the pools
    and attach the numbers."""
    spending = _kept(debate, Spending)
    if spending is None:
        spending = Spending(debate.rounds)
        for turns in RunStore(debate.root).debates().each:
            spending.add(turns)
    found = match(spending, debate.tallies, pools, generations(debate))
    if not found.tallies.questions:
        raise PairingError(
            f"{debate.root} and {single.root} share no question; run the single run on the "
            "debate's questions (the same --benchmark and --limit)."
        )
    for name, formula in formulas().items():
        debate.attached[name] = (formula, found.tallies)
    debate.paired = single
    made = section(found, debate.tallies, debate.formulas["debate"], replicates)
    debate.metrics["matched"] = {"single_run": str(single.root.resolve()), **made}


def paired_before(store: RunStore) -> Path | None:
    """The single run a debate's metrics.json was last matched with, while it is still
    there: `report` pairs them again, so recomputing never drops the matched numbers."""
    metrics = store.metrics()  # a newer layout is refused, not overwritten unread
    if metrics is None:
        return None
    matched = metrics.get("matched")
    found = matched.get("single_run") if isinstance(matched, dict) else None
    if not isinstance(found, str) or not RunStore.holds_run(found):
        return None
    return Path(found)


def pair(
    debates: list[Run], singles: list[Run], replicates: int = REPLICATES, strict: bool = True
) -> list[Run]:
    """Attach to each debate run its matched numbers against its single run; return the
    debate runs paired. Strict: a debate run without one is a PairingError; else skipped."""
    pools: dict[Path, dict[str, SamplePool]] = {}
    paired = []
    for debate in debates:
        try:
            single = pick_single(debate, singles)
        except PairingError:
            if strict:
                raise
            continue
        if single.root not in pools:
            pools[single.root] = read_pools(single)
        attach(debate, single, pools[single.root], replicates)
        paired.append(debate)
    return paired


def load_paired(
    roots: list[Path],
    labels: dict[str, str] | None = None,
    replicates: int = REPLICATES,
    prices: Prices | None = None,
) -> list[Run]:
    """The debate runs among `roots`, named as load_runs names them and each paired with
    the single run of its model and benchmark among `roots`."""
    manifests = [(root, RunStore(root).manifest()) for root in roots]
    if all(recorded_single(manifest) for _, manifest in manifests):
        raise PairingError(
            "every run given is a single run; give the debate runs too, each with the single "
            "run of its model and benchmark."
        )
    pools = {name for r, m in manifests if recorded_single(m) for name in (str(r), r.name)}
    mine = {k: v for k, v in (labels or {}).items() if k not in pools}
    method_names([(r, m) for r, m in manifests if not recorded_single(m)], mine)  # clash: now
    debates, singles = split([load_for_pairing(root, prices) for root in roots])
    pair(name_runs(debates, mine), singles, replicates)
    return debates
