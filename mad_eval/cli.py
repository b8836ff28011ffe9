"""The `mad-eval` command line: parses options, calls the library, prints."""

from __future__ import annotations

import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from mad_eval import options, train_cli
from mad_eval.config import DEFAULT_BENCHMARK
from mad_eval.errors import UserError
from mad_eval.layouts import ERRORS, FORMATS, LAYOUTS, REPLICATES
from mad_eval.ui import console, errors, fail, progress_bar, warn

if TYPE_CHECKING:
    from mad_eval.backends.cache import RequestCache
    from mad_eval.protocols import Protocol
    from mad_eval.store import Recorded, RunStore

# Each command imports what it needs when it runs: `mad-eval --help` and a mistyped option
# answer at once, without loading numpy, the prompt builders or the backends.

app = typer.Typer(
    help="Multi-agent debate evaluation: Maj vs Debate, per-round accuracy and transitions, "
    "LLM-judge critique scores, single-agent mean@K and maj@K, paper tables and figures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts show [brackets] literally, e.g. MODEL[@URL][*COUNT]
)
USER_ERRORS = (UserError,)


@app.command()
def run(
    protocol: options.Protocol = "decentralized",
    agents: options.Agents = None,
    rounds: options.Rounds = 3,
    agent: options.Agent = None,
    roster: options.Roster = None,
    prompt_style: options.PromptStyle = None,
    benchmark: options.Benchmark = DEFAULT_BENCHMARK,
    data_dir: options.DataDir = None,
    limit: options.Limit = None,
    answer_protocol: options.AnswerProtocol = None,
    model: options.Model = None,
    base_url: options.BaseUrl = None,
    api: options.Api = "chat",
    template: options.Template = "chat",
    runs: options.Runs = 1,
    seed: options.Seed = 0,
    temperature: options.Temperature = 1.0,
    top_p: options.TopP = 0.9,
    max_tokens: options.MaxTokens = None,
    max_model_len: options.MaxModelLen = None,
    tokenizer: options.Tokenizer = None,
    strip_think: options.StripThink = False,
    quote: options.Quote = None,
    extra_body: options.ExtraBody = None,
    concurrency: options.Concurrency = 64,
    timeout: options.Timeout = 600.0,
    retries: options.Retries = 5,
    backoff: options.Backoff = 1.0,
    cache: options.Cache = None,
    retry_failed: options.RetryFailed = False,
    tensor_parallel_size: options.TensorParallelSize = 1,
    gpu_memory_utilization: options.GpuMemoryUtilization = 0.9,
    enforce_eager: options.EnforceEager = False,
    dtype: options.Dtype = "auto",
    out: options.Out = None,
) -> None:
    """Run a multi-agent debate and report Maj, Debate, Δ and transitions.

    Running the same command again resumes an interrupted run in the same directory; add
    --retry-failed to ask its failed turns again.
    """
    settings = {k: v for k, v in locals().items() if k not in PLAN_ARGUMENTS}
    _execute(
        protocol=protocol,
        agents=agents,
        agent_options=agent or [],
        roster_file=roster,
        prompt_style=prompt_style,
        settings=settings,
    )


@app.command()
def single(
    samples: Annotated[
        int, typer.Option("--samples", "-k", help="Independent answers K per question.")
    ] = 4,
    benchmark: options.Benchmark = DEFAULT_BENCHMARK,
    data_dir: options.DataDir = None,
    limit: options.Limit = None,
    answer_protocol: options.AnswerProtocol = None,
    model: options.Model = None,
    base_url: options.BaseUrl = None,
    api: options.Api = "chat",
    template: options.Template = "chat",
    runs: options.Runs = 1,
    seed: options.Seed = 0,
    temperature: options.Temperature = 1.0,
    top_p: options.TopP = 0.9,
    max_tokens: options.MaxTokens = None,
    max_model_len: options.MaxModelLen = None,
    tokenizer: options.Tokenizer = None,
    extra_body: options.ExtraBody = None,
    concurrency: options.Concurrency = 64,
    timeout: options.Timeout = 600.0,
    retries: options.Retries = 5,
    backoff: options.Backoff = 1.0,
    cache: options.Cache = None,
    retry_failed: options.RetryFailed = False,
    tensor_parallel_size: options.TensorParallelSize = 1,
    gpu_memory_utilization: options.GpuMemoryUtilization = 0.9,
    enforce_eager: options.EnforceEager = False,
    dtype: options.Dtype = "auto",
    out: Annotated[
        Path | None,
        typer.Option(help="Run directory (default: results/<benchmark>-single-k<K>-<model>)."),
    ] = None,
) -> None:
    """Sample K answers per question without debate; report mean@K and maj@K.

    Each answer is one turn of round 0, seeded like a debate's round 0, so turns.jsonl is
    also a rollout file for `mad-eval train`. The same command resumes an interrupted run.
    """
    if samples < 1:
        raise fail(f"--samples must be at least 1, got {samples}.")
    settings = {k: v for k, v in locals().items() if k != "samples"}
    _execute(
        protocol="single",
        agents=samples,
        agent_options=[],
        roster_file=None,
        prompt_style=None,
        settings={**settings, "rounds": 0},
    )


# run()'s options that make_plan takes by name; the rest are RunConfig settings.
PLAN_ARGUMENTS = {"protocol", "agents", "agent", "roster", "prompt_style"}


def _execute(
    *,
    protocol: str,
    agents: int | None,
    agent_options: list[str],
    roster_file: Path | None,
    prompt_style: str | None,
    settings: dict[str, Any],
) -> None:
    """Plan, run (or resume) and report: the body `run` and `single` share."""
    from mad_eval.engine import Engine
    from mad_eval.plan import make_plan
    from mad_eval.roster import parse_extra_body
    from mad_eval.store import RunStore

    out, model = settings.pop("out"), settings["model"]
    base_url, cache = settings.pop("base_url"), settings.pop("cache")
    retry_failed = settings.pop("retry_failed")
    command = "single" if protocol == "single" else "run"
    try:
        settings["extra_body"] = parse_extra_body(settings["extra_body"])
        plan = make_plan(
            protocol=protocol,
            agents=agents,
            agent_options=agent_options,
            roster_file=roster_file,
            prompt_style=prompt_style,
            benchmark=settings.pop("benchmark"),
            data_dir=settings.pop("data_dir"),
            limit=settings.pop("limit"),
            model=settings.pop("model"),
            settings={
                **settings,
                "base_urls": tuple(base_url or ()),
                "cache": str(cache) if cache else None,
            },
        )
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None

    config, questions = plan.config, plan.questions
    store = RunStore(out or config.default_out())

    async def debate() -> None:
        """One event loop for the whole run: the HTTP clients' connections belong to it."""
        try:
            seats = await plan.seats()
            done = store.open(config, plan.manifest_extra(seats), questions=questions)
            if retry_failed:
                done = _ask_again(store, done, plan.choice.protocol, config.agents)
            for warning in plan.warnings:
                warn("warning", warning)
            if model is None and not config.roster:
                console.print(
                    "No --model given: using simulated agents (sim). "
                    "Pass --model openai:NAME --base-url URL to benchmark a served checkpoint."
                )
            team = ", ".join(sorted({a.group for a in plan.team}))
            if protocol == "single":
                what = f"{config.agents} independent samples ({team}), no debate"
            else:
                what = (
                    f"{config.agents} agents ({team}), {config.rounds} rounds, "
                    f"{plan.choice.cls} protocol, {config.prompt_style} prompts"
                )
            console.print(
                f"{plan.spec.name}: {len(questions)} questions x {config.runs} run(s), "
                f"{what} -> {store.root}"
                + (f" (resuming: {len(done)} turns already recorded)" if done else "")
            )
            with progress_bar() as progress:
                task = progress.add_task(
                    "sampling" if protocol == "single" else "debating",
                    total=config.runs * len(questions) * (config.rounds + 1) * config.agents,
                )
                engine = Engine(
                    config,
                    plan.choice.protocol,
                    seats,
                    done,
                    store.append,
                    lambda turns: progress.advance(task, turns),
                )
                await engine.run(questions)
        finally:
            for backend in plan.backends.values():
                await backend.aclose()
            store.close()
            _close_cache(plan.cache)

    _resumable(debate(), "turn", store.turns_path)
    _report(store, command)


def _ask_again(store: RunStore, done: Recorded, protocol: Protocol, agents: int) -> Recorded:
    """--retry-failed: move the failed turns, and those built without them, out of the
    records, so the engine asks them again; return what stays done."""
    from mad_eval.engine import to_ask_again
    from mad_eval.store import SUPERSEDED, Recorded

    again = to_ask_again(done, protocol, agents)
    failed = sum(1 for key in again if done[key].failed)
    store.supersede(again)
    if again:
        console.print(
            f"Asking again {failed} failed {_plural(failed, 'turn')} and "
            f"{len(again) - failed} later {_plural(len(again) - failed, 'turn')} built "
            f"without them; the old records are in {store.root / SUPERSEDED}."
        )
    else:
        console.print("No failed turns to ask again.")
    return Recorded.index(store.turns_path)  # the records left, where they now lie


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


@app.command()
def judge(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A debate run directory.")],
    judge_model: Annotated[
        str,
        typer.Option(
            "--judge",
            metavar="SPEC",
            help="The judge's model spec: openai:<model> (a server), vllm:<model> "
            "(in-process) or sim-judge[:bad=..] (simulated, to try the pipeline offline).",
        ),
    ],
    base_url: options.BaseUrl = None,
    rounds: Annotated[
        str | None,
        typer.Option(metavar="A..B", help="Debate rounds to judge: A..B, R or R,S (default: all)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="Judge only the run's first LIMIT questions.")
    ] = None,
    reference: Annotated[bool, typer.Option(help="Show the judge the gold answer.")] = False,
    data_dir: options.DataDir = None,
    temperature: Annotated[float, typer.Option(help="The judge's sampling temperature.")] = 0.0,
    top_p: Annotated[float, typer.Option(help="The judge's nucleus sampling top-p.")] = 1.0,
    max_tokens: Annotated[int, typer.Option(help="Tokens per judge answer.")] = 2048,
    seed: Annotated[int, typer.Option(help="Base seed of the judge's requests.")] = 0,
    concurrency: options.Concurrency = 64,
    timeout: options.Timeout = 600.0,
    retries: options.Retries = 5,
    backoff: options.Backoff = 1.0,
    cache: options.Cache = None,
    extra_body: options.ExtraBody = None,
) -> None:
    """Score every debate turn's critique with an LLM judge; write judge.jsonl and metrics.json.

    The judge reads exactly the messages the agent was sent and its reply, and scores
    conflict identification (0-2), critique correctness (0-3), critique specificity (0-2)
    and engagement and revision (0-2). Questions come from the run folder (--data-dir only
    for a folder recorded before it held questions.jsonl). Running it again resumes.
    """
    from mad_eval.config import ConfigError, RunConfig
    from mad_eval.judge import Judge, judge_cases, parse_rounds, pending
    from mad_eval.plan import check_extra_body, judge_backend
    from mad_eval.records import Setting
    from mad_eval.replay import run_questions
    from mad_eval.roster import parse_extra_body
    from mad_eval.store import JudgeLog, RunStore, StoreError

    store = RunStore(run_dir)
    try:
        body = parse_extra_body(extra_body)
        setting = Setting(
            judge_model, reference, temperature, top_p, max_tokens, seed, body or None
        )
        manifest = store.manifest()
        turns = store.read_turns()
        total = manifest.config["rounds"]
        if total == 0:
            raise StoreError(
                f"{run_dir} has no debate rounds (T = 0): there is no critique to judge."
            )
        if limit is not None and limit < 1:
            raise ConfigError(f"--limit must be at least 1, got {limit}.")
        chosen = parse_rounds(rounds, total)
        config = RunConfig(
            model=judge_model,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            seed=seed,
            base_urls=tuple(base_url or ()),
            concurrency=concurrency,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            cache=str(cache) if cache else None,
            extra_body=body,
        )
        config.validate()
        questions = run_questions(store.root, manifest, data_dir)
        cases, skipped = judge_cases(manifest, turns, questions, chosen, limit, reference)
        backend, request_cache = judge_backend(judge_model, config)
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None

    log = JudgeLog(store.root)

    async def score() -> None:
        try:
            todo = pending(cases, log.open(setting))
            await backend.check()
            await check_extra_body(backend, judge_model, body)
            console.print(
                f"Judging {len(cases)} debate turns of {store.root} (rounds "
                f"{', '.join(map(str, chosen))}) with {setting.describe()}"
                + (f"; {len(cases) - len(todo)} already judged" if len(todo) < len(cases) else "")
            )
            for reason, count in skipped.items():
                warn("skipped", f"{count} {'turn' if count == 1 else 'turns'}: {reason}.")
            with progress_bar("verdicts") as progress:
                task = progress.add_task("judging", total=len(todo))
                judge = Judge(backend, setting, log.append, lambda: progress.advance(task))
                await judge.run(todo)
        finally:
            await backend.aclose()
            log.close()
            _close_cache(request_cache)

    _resumable(score(), "verdict", log.path)
    _report(store)
    console.print(f"Verdicts: {log.path}")


@app.command()
def protocols() -> None:
    """List the protocols --protocol accepts by name, with what each does."""
    from mad_eval.protocols import catalogue

    table = Table(title="protocols", show_lines=False)
    table.add_column("name", style="bold")
    table.add_column("what it does")
    table.add_column("from", style="dim")
    for name, description, source in catalogue():
        table.add_row(name, description, _relative(source))
    console.print(table)
    console.print(
        "Parameters: NAME:key=value,... (e.g. sparse:degree=4, centralized:hub=2). "
        "Your own class: --protocol pkg.module:Class."
    )


@app.command()
def templates(
    template: Annotated[
        str | None,
        typer.Argument(
            metavar="[NAME|FILE]",
            help="A template to show, rendered for a sample 3-agent debate; none: list them.",
        ),
    ] = None,
    round_: Annotated[
        int, typer.Option("--round", help="The round to show (2 shows a conversation's growth).")
    ] = 1,
    agent: Annotated[int, typer.Option(help="The agent (0-2) whose prompt to show.")] = 1,
) -> None:
    """List the prompt templates --prompt-template accepts by name, or show one's messages."""
    from mad_eval.templates import TemplateError, builtin_templates, load_template, sample_prompt

    if template is None:
        table = Table(title="prompt templates", show_lines=False)
        for column in ("name", "what the agent is asked", "file"):
            table.add_column(column, style="bold" if column == "name" else None)
        try:
            for name, path in builtin_templates().items():
                table.add_row(name, load_template(name).description, _relative(str(path)))
        except TemplateError as exc:
            raise fail(str(exc)) from None
        console.print(table)
        console.print("Show one: mad-eval templates NAME|FILE [--round R] [--agent I].")
        return
    if not (0 <= agent <= 2 and 0 <= round_ <= 5):
        raise fail("--agent must lie in 0..2 and --round in 0..5.")
    try:
        messages = sample_prompt(load_template(template), agent, round_)
    except TemplateError as exc:
        raise fail(str(exc)) from None
    for message in messages:
        console.print(f"[{message['role']}]", style="bold", markup=False)
        # soft_wrap: the exact text, never broken at the terminal's width
        console.print(message["content"], markup=False, highlight=False, soft_wrap=True)


@app.command()
def benchmarks() -> None:
    """List the benchmarks --benchmark accepts by name: kind, source and description."""
    from mad_eval.benchmarks import BenchmarkError, list_specs

    table = Table(title="benchmarks", show_lines=False)
    for column in ("name", "kind", "parameters (default)", "source", "description"):
        table.add_column(column, style="bold" if column == "name" else None)
    try:
        specs = list_specs()
    except BenchmarkError as exc:
        raise fail(str(exc)) from None
    for spec in specs:
        params = ", ".join(f"{k}={v}" for k, v in spec.params.items())
        table.add_row(spec.name, spec.kind, params, spec.source, spec.description)
    console.print(table)
    console.print(
        "Parameters: NAME:key=value (e.g. mmlu:subject=anatomy, or mmlu:anatomy). Local files "
        "are read from --data-dir or $MAD_EVAL_DATA; any .jsonl or .toml path works too."
    )


def _relative(source: str) -> str:
    try:
        return str(Path(source).relative_to(Path.cwd()))
    except ValueError:
        return source


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (holding manifest.json).")],
) -> None:
    """Recompute metrics.json from turns.jsonl and print it."""
    from mad_eval.store import RunStore

    _report(RunStore(run_dir))


@app.command()
def table(
    run_dirs: Annotated[
        list[Path], typer.Argument(metavar="RUN", help="Run directories, any number.")
    ],
    layout: Annotated[
        str,
        typer.Option(
            metavar="|".join(LAYOUTS),
            help="debate: Maj, Debate, Δ per benchmark; single: mean@K, maj@K (exact); "
            "single-bootstrap: maj@K as verl estimates it (1000 seeded resamples); rounds: vote "
            "accuracy after each round; transitions: C→I, I→C per round; lengths: tokens of "
            "correct and incorrect answers per round; diversity: unanimous share, answer "
            "entropy, ρ and N_eff per round; critique: the judge's scores; rouge: the consensus "
            "summary's ROUGE-1/2/L per round (summary benchmarks).",
        ),
    ] = "debate",
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="|".join(FORMATS),
            help="csv: tidy, a row per method, benchmark and number, with std, 95% bootstrap "
            "interval and p-value; latex: booktabs, best values bold; md: Markdown.",
        ),
    ] = "md",
    label: Annotated[
        list[str] | None,
        typer.Option(
            metavar="RUN=NAME",
            help="Name a run's method (repeatable); by default the settings that differ "
            "between the runs name them.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(help="The method others are tested against (default: the first)."),
    ] = None,
    error: Annotated[
        str,
        typer.Option(
            metavar="|".join(ERRORS),
            help="Error bars in latex and md: std over seeded runs, half the 95% bootstrap "
            "interval over questions, or none.",
        ),
    ] = "std",
    replicates: Annotated[
        int, typer.Option(help="Bootstrap resamples of the questions.")
    ] = REPLICATES,
    out: Annotated[
        Path | None, typer.Option(help="Write the table here, not to the screen.")
    ] = None,
) -> None:
    """Print a paper table of several runs, grouped by benchmark and method."""
    from mad_eval.results import load_runs, parse_labels
    from mad_eval.store import StoreError
    from mad_eval.tables import render, tidy

    for value, allowed, name in (
        (layout, LAYOUTS, "--layout"),
        (fmt, FORMATS, "--format"),
        (error, ERRORS, "--error"),
    ):
        if value not in allowed:
            raise fail(f"{name} must be one of {', '.join(allowed)}, got '{value}'.")
    if replicates < 100:
        raise fail(f"--replicates must be at least 100, got {replicates}.")
    try:
        runs = load_runs(run_dirs, parse_labels(label or []))
        text = render(tidy(runs, layout, baseline, replicates), fmt, error)
    except (StoreError, ValueError) as exc:
        raise fail(str(exc)) from None
    if out is None:
        print(text, end="")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"Wrote {out} ({layout} layout, {len(runs)} runs).")


@app.command()
def plot(
    run_dirs: Annotated[
        list[Path], typer.Argument(metavar="RUN", help="Run directories, any number.")
    ],
    out: Annotated[Path, typer.Option(help="Folder the PNG files are written to.")] = Path(
        "results/plots"
    ),
    label: Annotated[
        list[str] | None,
        typer.Option(metavar="RUN=NAME", help="Name a run's method (repeatable), as in table."),
    ] = None,
    replicates: Annotated[
        int, typer.Option(help="Bootstrap resamples for the 95% intervals drawn.")
    ] = REPLICATES,
) -> None:
    """Draw accuracy by round, transitions and diversity (N_eff) as PNG files."""
    from mad_eval.plots import draw  # matplotlib loads only when plotting
    from mad_eval.results import load_runs, parse_labels
    from mad_eval.store import StoreError

    try:
        runs = load_runs(run_dirs, parse_labels(label or []))
        written = draw(runs, out, replicates)
    except (StoreError, ValueError) as exc:
        raise fail(str(exc)) from None
    for path in written:
        console.print(f"Wrote {path}")


def _resumable(work: Coroutine[Any, Any, None], what: str, records: Path) -> None:
    """Run `work` in one event loop. An error ends it in one sentence; Ctrl-C, SIGTERM or
    SIGHUP cancels it (every request in flight with it, none recorded) and says where the
    finished records are."""
    import asyncio

    from mad_eval.verifier import stop_graders

    signals: list[signal.Signals] = []

    async def main() -> None:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGTERM, signal.SIGHUP):  # asyncio.run handles SIGINT itself

            def stop(sig: signal.Signals = sig) -> None:
                signals.append(sig)
                task.cancel()

            loop.add_signal_handler(sig, stop)
        try:
            await work
        except asyncio.CancelledError:
            stop_graders()  # a grade in progress would hold up the exit for seconds
            raise

    try:
        asyncio.run(main())
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        sig = signals[0] if signals else signal.SIGINT
        how = "Interrupted (Ctrl-C)" if sig == signal.SIGINT else f"Stopped by {sig.name}"
        errors.print(
            f"{how}. Every finished {what} is in {records}; run the same command again to resume.",
            highlight=False,
        )
        raise typer.Exit(code=128 + sig) from None


def _close_cache(cache: RequestCache | None) -> None:
    if cache is None:
        return
    console.print(
        f"Request cache {cache.path}: {cache.hits} answers reused, {cache.stored} new ones stored."
    )
    cache.close()


def _report(store: RunStore, command: str | None = None) -> None:
    """metrics.json from the run's records alone: its manifest and turns.jsonl. After a
    `command` that made the run, say how to ask its failed turns again."""
    from mad_eval.report import metrics_view
    from mad_eval.results import load_run
    from mad_eval.store import StoreError

    try:
        run = load_run(store.root)
        store.write_metrics(run.metrics)
    except StoreError as exc:
        raise fail(str(exc)) from None
    console.print(metrics_view(run.metrics, title=store.root.name))
    console.print(f"Records: {store.turns_path}  Metrics: {store.metrics_path}")
    # A prompt that did not fit was never sent: asking again would fail the same way.
    sent = run.failed_sent
    if sent and command:
        warn(
            "failed",
            f"{sent} {_plural(sent, 'request')} failed (their errors are in turns.jsonl); "
            f"run the same mad-eval {command} command with --retry-failed to ask again.",
        )


app.add_typer(train_cli.app, name="train")

if __name__ == "__main__":
    app()
