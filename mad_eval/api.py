"""mad-eval as a library, for a training loop or a notebook: run a debate, sample single
answers, judge critiques, recompute and load results. The command line is a thin layer
over these functions, and their keywords are its long options with underscores:

    import mad_eval
    result = mad_eval.run(model="openai:my-ckpt", base_url="http://localhost:8000/v1",
                          benchmark="math500", data_dir="data", agents=5, rounds=3)
    result.maj, result.debate, result.delta, result.turns()  # a pandas DataFrame

Each call runs to its end (resuming the run folder's records, like the command), in an
event loop of its own (in a thread when the caller's loop is running, as in Jupyter), and
needs no `if __name__ == "__main__":` guard. It prints nothing unless given a Listener (its
notes go to the `mad_eval` logger, which `logging.basicConfig()` shows), but a result whose
final answers mostly went unread warns (`SuspiciousResult`, a UserWarning). Errors and
warnings name these functions' keywords (`data_dir`), not the command line's options
(`--data-dir`); a keyword that is not a call's is refused with the nearest one.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from mad_eval.errors import COMMAND_LINE, SuspiciousResult, UserError, for_keywords
from mad_eval.progress import Listener
from mad_eval.settings.config import RENAMED
from mad_eval.words import counted, did_you_mean

if TYPE_CHECKING:  # numpy and pandas load when results are read, not on import
    from collections.abc import Coroutine
    from typing import Unpack

    from mad_eval.debate.execute import Job, Preview
    from mad_eval.experiments.run import ExperimentPlan
    from mad_eval.measure.prices import Prices
    from mad_eval.reporting.results import Run
    from mad_eval.serving.session import Serving
    from mad_eval.settings.keywords import RequestSettings, RunSettings, SingleSettings
    from mad_eval.tracking import Group, Target, Tracked
    from mad_eval.training.pairs import Summary

__all__ = [
    "Listener",
    "SuspiciousResult",
    "experiment",
    "experiment_plan",
    "experiment_tables",
    "judge",
    "load_run",
    "load_runs",
    "log",
    "plot",
    "report",
    "run",
    "run_plan",
    "single",
    "table",
    "train_pairs",
    "train_prompts",
    "view",
]

Call = TypeVar("Call", bound=Callable[..., Any])
# Run folders as a call takes them: a list, or one folder.
Folders = str | Path | Sequence[str | Path]


def _folders(given: Folders) -> list[Path]:
    """Run folders as given: a bare path is one folder, never a list of its characters."""
    if isinstance(given, str | Path):
        return [Path(given)]
    return [Path(folder) for folder in given]


class KeywordError(UserError, TypeError):
    """A call was given a keyword it does not take; the message names the one meant."""


def _worded(call: Call) -> Call:
    """`call` whose errors name its keywords (pass data_dir) where the caller is a program,
    not the command line (which names its options: pass --data-dir), and which refuses a
    keyword it does not take with the one meant."""

    @functools.wraps(call)
    def worded(*args: Any, **kwargs: Any) -> Any:
        try:
            _check_keywords(call, kwargs)
            return call(*args, **kwargs)
        except UserError as exc:
            if not COMMAND_LINE.get() and exc.args and isinstance(exc.args[0], str):
                exc.args = (for_keywords(exc.args[0], _keywords(call)), *exc.args[1:])
            raise

    return worded  # type: ignore[return-value]


def _check_keywords(call: Callable[..., Any], given: dict[str, Any]) -> None:
    """Refuse a keyword `call` does not take: a renamed one with its new name, another with
    the nearest (a run's settings are checked by name as they are planned)."""
    params = inspect.signature(call).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    for name in given:
        if name in params:
            continue
        if RENAMED.get(name) in params:
            raise KeywordError(f"'{name}' is now '{RENAMED[name]}': give it by its new name.")
        raise KeywordError(
            f"{call.__name__}() takes no '{name}'{did_you_mean(name, params)}; "
            f"it takes {', '.join(params)}."
        )


def _keywords(call: Callable[..., Any]) -> set[str]:
    """A call's keywords; a run's settings too for one that takes them."""
    from mad_eval.settings.config import run_defaults

    found: set[str] = set()
    for name, param in inspect.signature(call).parameters.items():
        found |= set(run_defaults()) if param.kind is param.VAR_KEYWORD else {name}
    return found


def _warn_alerts(result: Run) -> None:
    """Each of a result's alerts (metrics.json's) as a SuspiciousResult warning, worded with
    run's keywords, at the caller's line; the command line prints them itself."""
    if COMMAND_LINE.get():
        return
    for alert in result.alerts:
        text = f"{result.root}: {for_keywords(alert, _keywords(run))}"
        warnings.warn(text, SuspiciousResult, stacklevel=_caller_level())


def _caller_level() -> int:
    """The stack level, for warnings.warn called by our caller, of the first frame outside
    mad_eval: the line of the program that called the library."""
    package = str(Path(__file__).resolve().parent)
    frame: FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


@_worded
def run(
    *,
    out: str | Path | None = None,
    retry_failed: bool = False,
    serving: list[str] | dict[str, Any] | None = None,
    gpus: str | list[int] | None = None,
    log: str | Sequence[str] | None = None,
    listener: Listener | None = None,
    **settings: Unpack[RunSettings],
) -> Run:
    """Run (or resume) a multi-agent debate and return its results. `settings` are run
    options by name (mad_eval.settings.keywords.RunSettings: protocol, agents, rounds, model,
    base_url, benchmark, data_dir, limit, runs, seed, temperature, ...; see `mad-eval run
    --help`), each refused in one sentence if unknown or of the wrong type; `out` is the
    run folder (default: results/<benchmark>-<protocol>-n<N>-t<T>-<model>, then each
    setting not at its default, e.g. -temperature0.7). A model
    `serve:CHECKPOINT` is served by `vllm serve` for the run, with the settings `serving`
    (KEY=VALUE strings or a mapping: mad_eval.serving.spec) on the GPUs `gpus` ("0,1";
    default CUDA_VISIBLE_DEVICES, else nvidia-smi's), and stopped after it. `log`: trackers
    the finished run is sent to ("wandb:project=p", "mlflow:tracking_uri=URI"; see `log`)."""
    from mad_eval.tracking import targets

    listener = listener or Listener()
    sent_to = targets(log)  # a mistyped tracker is refused before any request
    # The debate's plan, questions and job are let go before the report: its peak memory
    # then holds no per-question state of the debate.
    root = _debate(out, retry_failed, serving, gpus, listener, settings)
    return _tracked(report(root), sent_to, listener)


def _tracked(result: Run, sent_to: Sequence[Target], listener: Listener) -> Run:
    """`result`, sent to each tracker first (a failure is a warning, never the run's)."""
    if sent_to:
        from mad_eval.tracking import track

        track([result], sent_to, listener)
    return result


def _debate(
    out: str | Path | None,
    retry_failed: bool,
    serving: list[str] | dict[str, Any] | None,
    gpus: str | list[int] | None,
    listener: Listener,
    settings: Mapping[str, Any],
) -> Path:
    """Run (or resume) the debate `run` is asked for; its folder."""
    from mad_eval.debate.execute import Job, drive, execute
    from mad_eval.debate.plan import make_plan

    served, whole = _planned(out, retry_failed, serving, gpus, settings)
    plan, store = whole.plan, whole.store
    record = plan.serving
    if settings.get("model") is None and not plan.config.roster:
        listener.say(
            "No --model given: using simulated agents (sim). "
            "Pass --model openai:NAME --base-url URL to benchmark a served checkpoint."
        )
    if served is None:
        work = execute([whole], listener)
    else:  # planned again on the servers' URLs each time they start
        if plan.shared.cache is not None:
            plan.shared.cache.close()
        if not retry_failed and whole.held() >= whole.requests:
            whole.check()
            label = served.spec.label
            listener.say(f"{store.root} holds every turn: reported, {label} not served.")
            return store.root

        def job(urls: list[str]) -> Coroutine[Any, Any, None]:
            planned = make_plan({**settings, "base_url": urls}, serving=record)
            return execute([Job(planned, store, retry_failed)], listener)

        left = whole.requests - whole.held()
        work = served.run(job, store.root, listener, task=f"{counted(left, 'turn')} left")
    drive(work, store.turns_path)
    return store.root


def _planned(
    out: str | Path | None,
    retry_failed: bool,
    serving: list[str] | dict[str, Any] | None,
    gpus: str | list[int] | None,
    settings: Mapping[str, Any],
    dry_run: bool = False,
) -> tuple[Serving | None, Job]:
    """A run's server (if its model is serve:) and its job, every setting checked before
    anything is asked or written."""
    from mad_eval.debate.execute import Job
    from mad_eval.debate.plan import Shared, make_plan
    from mad_eval.serving.session import prepare
    from mad_eval.store.files import refuse_records
    from mad_eval.store.folder import RunStore

    served = prepare(settings, serving, gpus, dry_run)  # None unless the model is serve:
    record = served.spec.record() if served else None
    given = served.placeholder(settings) if served else settings
    # A dry run's plan shares nothing, so no request cache is opened.
    plan = make_plan(given, Shared(None) if dry_run else None, serving=record)
    if out is None:  # a folder whose name mad-eval chose may not be a planted link
        store = RunStore(plan.config.default_out(plan.spec.max_tokens, plan.single), named=True)
    else:
        store = RunStore(Path(out))
    refuse_records(store.root, run_folder=True)  # never inside another run's records
    return served, Job(plan, store, retry_failed)


@_worded
def run_plan(
    *,
    out: str | Path | None = None,
    retry_failed: bool = False,
    serving: list[str] | dict[str, Any] | None = None,
    gpus: str | list[int] | None = None,
    log: str | Sequence[str] | None = None,
    **settings: Unpack[RunSettings],
) -> Preview:
    """What `run` with the same keywords would do, asking nothing and writing nothing (a
    dry run): its folder, questions and turns (needed and recorded), where its questions
    come from (`data_file`) and go (`endpoints`), and each server's `vllm serve` command.
    `log` is checked as `run` checks it."""
    from mad_eval.debate.execute import preview
    from mad_eval.tracking import targets

    targets(log)

    served, job = _planned(out, retry_failed, serving, gpus, dict(settings), dry_run=True)
    return preview(job, served, settings.get("data_dir"))


@_worded
def single(
    *,
    samples: int = 4,
    out: str | Path | None = None,
    retry_failed: bool = False,
    serving: list[str] | dict[str, Any] | None = None,
    gpus: str | list[int] | None = None,
    log: str | Sequence[str] | None = None,
    listener: Listener | None = None,
    **settings: Unpack[SingleSettings],
) -> Run:
    """Sample `samples` (K) independent answers per question, no debate: mean@K and maj@K.
    Each answer is a round-0 turn, seeded like a debate's round 0; `settings` are a run's
    (mad_eval.settings.keywords.SingleSettings), less protocol, agents and rounds."""
    from mad_eval.settings.config import MAX_AGENTS, ConfigError

    if type(samples) is not int or samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}.")
    if samples > MAX_AGENTS:
        raise ConfigError(f"--samples must be at most {MAX_AGENTS}, got {samples}.")
    for name in ("protocol", "agents", "rounds"):
        if name in settings:
            raise ConfigError(f"single takes no '{name}': it samples K answers, no debate.")
    return run(
        out=out,
        retry_failed=retry_failed,
        serving=serving,
        gpus=gpus,
        log=log,
        listener=listener,
        **settings,
        protocol="single",
        agents=samples,
        rounds=0,
    )


@_worded
def judge(
    run_dir: str | Path,
    judge: str,
    *,
    rounds: str | None = None,
    limit: int | None = None,
    reference: bool = False,
    data_dir: str | Path | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_tokens: int = 2048,
    seed: int = 0,
    extra_body: str | dict[str, Any] | None = None,
    log: str | Sequence[str] | None = None,
    listener: Listener | None = None,
    **operational: Unpack[RequestSettings],
) -> Run:
    """Score every debate turn's critique with the LLM judge `judge` (a model spec) into
    the run's judge.jsonl, and return the run's results with the critique scores.
    `operational` takes how requests travel: base_url, concurrency, timeout, retries,
    backoff and cache (mad_eval.settings.keywords.RequestSettings)."""
    from mad_eval.debate.execute import drive
    from mad_eval.judging.runner import judge_run
    from mad_eval.store.folder import RunStore
    from mad_eval.tracking import targets

    listener = listener or Listener()
    sent_to = targets(log)
    settings = dict(
        rounds=rounds,
        limit=limit,
        reference=reference,
        data_dir=data_dir,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        seed=seed,
        extra_body=extra_body,
    )
    work = judge_run(Path(run_dir), judge, settings, operational, listener)
    drive(work, RunStore(Path(run_dir)).judge_path, "verdict")
    return _tracked(report(run_dir), sent_to, listener)


@_worded
def report(
    run_dir: str | Path,
    prices: str | Path | Prices | None = None,
    *,
    single: str | Path | None = None,
) -> Run:
    """Recompute the run's metrics.json from its records alone and return its results;
    `prices` names a prices file (README: Cost) to put its cost in money too. With
    `single`, a `mad-eval single` run of the same model and benchmark, the compute-matched
    baselines too (metrics.json's `matched` section; mad_eval.measure.matched); without, the single
    run metrics.json was matched with before, while it is there."""
    from mad_eval.measure.prices import read_prices
    from mad_eval.reporting.pairing import load_for_pairing, pair, paired_before, single_run
    from mad_eval.store.folder import RunStore

    store = RunStore(Path(run_dir))
    single = single if single is not None else paired_before(store)
    if single is None:
        result = load_run(store.root, prices)
    else:  # each run's turns read once: what pairing counts is counted as it is loaded
        result = load_for_pairing(store.root, read_prices(prices))
        pair([result], [single_run(load_for_pairing(Path(single)))])
    store.write_metrics(result.metrics)
    _warn_alerts(result)
    return result


@_worded
def load_run(run_dir: str | Path, prices: str | Path | Prices | None = None) -> Run:
    """A finished (or partial) run's results from its folder, without writing anything
    (`prices`: a prices file, for its cost in money)."""
    from mad_eval.measure.prices import read_prices
    from mad_eval.reporting import results

    return results.load_run(Path(run_dir), read_prices(prices))


@_worded
def load_runs(
    run_dirs: Folders,
    label: dict[str, str] | None = None,
    prices: str | Path | None = None,
) -> list[Run]:
    """Several runs' results, each named for the setting that tells it apart (or `label`:
    folder -> name), as tables compare them. `run_dirs`: a list of run folders (a single
    path is one folder, never a list of its characters)."""
    from mad_eval.measure.prices import read_prices
    from mad_eval.reporting import results

    return results.load_runs(_folders(run_dirs), label, prices=read_prices(prices))


@_worded
def experiment(
    path: str | Path,
    listener: Listener | None = None,
    gpus: str | list[int] | None = None,
    ray: str | None = None,
    retry_failed: bool = False,
    log: str | Sequence[str] | None = None,
) -> dict[str, Run]:
    """Run (or resume) every cell of an experiment file on one engine, write each cell's
    metrics.json, and return the cells' results by folder name. Its serve: models are
    served on the GPUs `gpus` ("0,1" or "0-3"; default CUDA_VISIBLE_DEVICES, else what
    nvidia-smi lists, else one CPU slot), as many servers at once as the GPUs hold; or,
    with `ray` (a cluster address or "auto"), as Ray actors the cluster places.
    `retry_failed`: every cell asks its failed turns again (a served model whose cells
    hold some is served again). `log`: trackers every cell is sent to, grouped as the
    experiment (instead of the file's [experiment] log)."""
    from mad_eval.debate.execute import drive
    from mad_eval.experiments import load_experiment
    from mad_eval.experiments.run import run_experiment
    from mad_eval.tracking import track

    listener = listener or Listener()
    loaded = load_experiment(Path(path))
    sent_to = _experiment_targets(loaded.path, loaded.log, log)
    work = run_experiment(loaded, listener, gpus, ray, retry_failed)
    drive(work, f"its run folder under {loaded.out}")
    results = {cell.name: report(loaded.folder(cell), loaded.prices) for cell in loaded.cells}
    if sent_to:
        group = _experiment_group(loaded.name, loaded.out)
        folders = [loaded.folder(cell) for cell in loaded.cells]
        track(results.values(), sent_to, listener, group, folders)
    return results


def _experiment_group(name: str, folder: Path) -> Group:
    """The group an experiment's cells are tracked as: its name, its folder's absolute path
    (the same whether `experiment run --log` or `log FOLDER` sends them)."""
    from mad_eval.tracking import Group

    return Group(name, str(folder.resolve()))


def _experiment_targets(
    path: Path, written: list[str], given: str | Sequence[str] | None
) -> list[Target]:
    """The trackers an experiment's cells go to: `given`, else its file's [experiment] log
    (a mistake there named as the file's)."""
    from mad_eval.experiments.cells import ExperimentError
    from mad_eval.tracking import TrackingError, targets

    if given is not None:
        return targets(given)
    try:
        return targets(written)
    except TrackingError as exc:
        raise ExperimentError(f"{path}: [experiment] log: {exc}") from None


@_worded
def experiment_plan(
    path: str | Path,
    gpus: str | list[int] | None = None,
    ray: str | None = None,
    log: str | Sequence[str] | None = None,
) -> ExperimentPlan:
    """What running an experiment would ask, asking nothing and writing nothing: each
    cell's questions, the turns it needs and those its folder already holds, the order
    its serve: models would take the GPUs `gpus` in (`serving`), and where its questions
    come from and go (`exposure`: endpoints, benchmark files outside its folder, each
    server's command). `log` (else the file's) is checked as running it checks it."""
    from mad_eval.experiments import load_experiment
    from mad_eval.experiments.run import ExperimentPlan, dry_run_exposed, serving_plan

    experiment = load_experiment(Path(path))
    _experiment_targets(experiment.path, experiment.log, log)  # checked as a run checks them
    states, exposure = dry_run_exposed(experiment)
    return ExperimentPlan(experiment, states, serving_plan(experiment, states, gpus, ray), exposure)


@_worded
def experiment_tables(path: str | Path, replicates: int | None = None) -> list[Path]:
    """Write an experiment's declared tables (CSV, LaTeX, Markdown), figures and
    summary.md into its folder, from the cells' records; return the files written."""
    from mad_eval.experiments import load_experiment
    from mad_eval.experiments.tables import write_tables
    from mad_eval.measure.bootstrap import REPLICATES

    return write_tables(load_experiment(Path(path)), replicates or REPLICATES)


@_worded
def view(run_dirs: Folders, out: str | Path | None = None, *, force: bool = False) -> Path:
    """Write a static site of the runs' debates (opens from file://, needs no server or
    network: docs/how-to/read-debates.md); return its index.html. `run_dirs`: run folders,
    or folders holding them (one path: one folder). `out`: by default a folder named for
    `run_dirs` under results/view/; a site of other runs there is replaced only with
    `force`. What it wrote and replaced goes to the `mad_eval` logger."""
    from mad_eval.viewer import build_site

    written = build_site(_folders(run_dirs), None if out is None else Path(out), force)
    logging.getLogger("mad_eval").info(written.sentence())
    return written.index


@_worded
def log(
    run_dirs: Folders,
    to: str | Sequence[str],
    *,
    group: str | None = None,
    listener: Listener | None = None,
) -> Tracked:
    """Send finished run folders (or folders holding them; one path: one folder) to the
    trackers `to` ("wandb:project=p,entity=e,group=g", "mlflow:tracking_uri=URI,experiment=E"),
    one tracked run per folder, named like it, under the group `group` when given. A folder
    sent before with the same records sends nothing; one whose records changed updates its
    tracked run. A tracker that fails is warned about and listed in the result's `failed`."""
    from mad_eval.experiments.cells import recorded_name
    from mad_eval.reporting.paper import run_folders
    from mad_eval.reporting.results import load_run as load
    from mad_eval.tracking import Group, targets, track

    listener = listener or Listener()
    sent_to = targets(to, "--to")
    if not sent_to:
        raise KeywordError("log() needs at least one tracker in 'to'.")
    given = _folders(run_dirs)
    roots = run_folders(given)
    together = Group(group, "mad-eval log") if group else None
    if together is None and len(given) == 1 and (name := recorded_name(given[0])):
        together = _experiment_group(name, given[0])  # an experiment's folder: its cells' group
    # Read one at a time: a folder holding hundreds of runs is never in memory at once.
    return track((load(root) for root in roots), sent_to, listener, together, roots)


@_worded
def table(
    run_dirs: Folders,
    layout: str = "debate",
    *,
    format: str = "md",
    label: dict[str, str] | list[str] | None = None,
    baseline: str | None = None,
    error: str = "std",
    replicates: int | None = None,
    out: str | Path | None = None,
    prices: str | Path | None = None,
) -> str:
    """A paper table of the runs (run folders, or folders holding them; one path: one
    folder), grouped by benchmark and method, as CSV, LaTeX or Markdown text (`format`),
    also written to `out` when given. `label` names runs' methods (folder -> name, or
    RUN=NAME strings); `replicates`: bootstrap resamples (default 2000)."""
    from mad_eval.reporting.paper import make_table

    return make_table(
        _folders(run_dirs),
        layout,
        format,
        label,
        baseline,
        error,
        replicates,
        None if out is None else Path(out),
        None if prices is None else Path(prices),
    )


@_worded
def plot(
    run_dirs: Folders,
    out: str | Path = "results/plots",
    *,
    label: dict[str, str] | list[str] | None = None,
    replicates: int | None = None,
    style: str = "paper",
) -> list[Path]:
    """Draw the runs' figures (accuracy by round, transitions, diversity, margin, drift,
    stopping; budget where a debate run has its single run) as PNG files in `out`; return
    the files written. `run_dirs`: run folders, or folders holding them (one path: one
    folder). `label` names runs' methods, as table's does. `style`: "paper" (no title in
    the figure: its caption says it) or "notes" (the title drawn above the panels); in
    both, each method keeps its colour in every figure and simulated agents are marked."""
    from mad_eval.reporting.paper import make_plots

    return make_plots(_folders(run_dirs), Path(out), label, replicates, style)


@_worded
def train_pairs(
    source: str | Path,
    out: str | Path,
    *,
    pairing: str = "freq",
    per_prompt: int = 1,
    max_length: int | None = None,
    copies: int = 1,
    seed: int = 0,
    prompt_template: str = "debate",
    answer_protocol: str | None = None,
    data_dir: str | Path | None = None,
    tokenizer: str | None = None,
) -> Summary:
    """Self-debate RL pairs from the rollouts of a run folder (its round-0 turns) or a JSON
    Lines file, written to `out` (.parquet or .jsonl) as verl data; return what was read,
    dropped and kept, and `lengths`: the longest prompt in tokens (counted with `tokenizer`,
    else estimated), what the trainer's max_prompt_length must reach."""
    from mad_eval.training.export import write_pairs

    return write_pairs(
        Path(source),
        Path(out),
        pairing,
        per_prompt,
        max_length,
        copies,
        seed,
        prompt_template,
        answer_protocol,
        None if data_dir is None else Path(data_dir),
        tokenizer,
    )


@_worded
def train_prompts(
    benchmark: str | Path,
    out: str | Path,
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    prompt_template: str = "debate",
    answer_protocol: str | None = None,
    tokenizer: str | None = None,
) -> list[dict[str, Any]]:
    """Write a benchmark's first-turn prompts (what round 0 asks) to `out` as verl data;
    return the rows written, whose `lengths` give the longest prompt and the debate turn's
    base (an on-policy debate turn needs base + 2 x the response length)."""
    from mad_eval.training.export import write_prompts

    return write_prompts(
        benchmark,
        Path(out),
        None if data_dir is None else Path(data_dir),
        limit,
        prompt_template,
        answer_protocol,
        tokenizer,
    )
