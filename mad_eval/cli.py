"""The `mad-eval` command line: parses options, calls the library, prints."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mad_eval.backends import BackendError
from mad_eval.benchmarks import BenchmarkError
from mad_eval.config import DEFAULT_BENCHMARK, ConfigError
from mad_eval.context import ContextError
from mad_eval.engine import Engine
from mad_eval.metrics import compute_metrics
from mad_eval.plan import make_plan
from mad_eval.prompts import STYLES
from mad_eval.protocols import ProtocolError, catalogue
from mad_eval.report import metrics_view
from mad_eval.roster import RosterError
from mad_eval.store import RunStore, StoreError

app = typer.Typer(
    help="Multi-agent debate evaluation: Maj vs Debate, per-round accuracy and transitions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts show [brackets] literally, e.g. MODEL[@URL][*COUNT]
)
console = Console()
errors = Console(stderr=True)
USER_ERRORS = (
    ConfigError,
    ProtocolError,
    BenchmarkError,
    BackendError,
    StoreError,
    RosterError,
    ContextError,
)


def fail(message: str) -> typer.Exit:
    # Escaped: a message may hold brackets, such as pip install 'mad-eval[vllm]'.
    errors.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


@app.command()
def run(
    protocol: Annotated[
        str,
        typer.Option(
            help="Debate protocol: a preset (see `mad-eval protocols`), NAME:key=value,... "
            "(e.g. sparse:degree=4) or pkg.module:Class for your own."
        ),
    ] = "decentralized",
    agents: Annotated[
        int | None, typer.Option(help="Number of agents N (default 5, or the roster's size).")
    ] = None,
    rounds: Annotated[
        int, typer.Option(help="Debate rounds T after the initial answers (round 0).")
    ] = 3,
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            metavar="MODEL[@URL][*COUNT]",
            help="A group of agents, repeated for a mixed team, e.g. "
            "--agent 'openai:a@http://host-a:8000/v1*3' --agent 'openai:b*2'.",
        ),
    ] = None,
    roster: Annotated[
        Path | None,
        typer.Option(
            help="TOML file of [[agent]] tables: model, count, name, base_url, "
            "temperature, top_p, max_tokens, max_model_len, tokenizer, persona."
        ),
    ] = None,
    prompt_style: Annotated[
        str | None,
        typer.Option(
            help=f"Debate prompt: {', '.join(STYLES)} (default: the preset's, else debate)."
        ),
    ] = None,
    benchmark: Annotated[
        str,
        typer.Option(
            help="Benchmark name (arith, math500, amc23, aime24, aime25) or a .jsonl path."
        ),
    ] = DEFAULT_BENCHMARK,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            envvar="MAD_EVAL_DATA",
            help="Read benchmark files from this folder instead of the Hugging Face hub.",
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Use only the first K questions.")] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model spec: openai:<model> (a server), vllm:<model folder or hub id> "
            "(in-process vLLM) or "
            "sim[:p0=..,s0=..,k=..,mbeta=..,skill=..,w=..,delay=..,words=..,think=..]."
        ),
    ] = None,
    base_url: Annotated[
        list[str] | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            envvar="OPENAI_BASE_URL",
            help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1; repeat it for "
            "replicas of the model (each request goes to the least busy one).",
        ),
    ] = None,
    api: Annotated[
        str,
        typer.Option(
            metavar="chat|completions",
            help="chat: send messages to /chat/completions (the server applies its chat "
            "template); completions: send the prompt text we render to /completions."
        ),
    ] = "chat",
    template: Annotated[
        str,
        typer.Option(
            metavar="chat|raw",
            help="How text prompts (--api completions, vllm:) are rendered: chat (the "
            "tokenizer's chat template) or raw (message texts, for base checkpoints)."
        ),
    ] = "chat",
    runs: Annotated[
        int, typer.Option(help="Independent seeded repetitions (the paper averages 5).")
    ] = 1,
    seed: Annotated[int, typer.Option(help="Base seed; every turn's seed derives from it.")] = 0,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 1.0,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling top-p.")] = 0.9,
    max_tokens: Annotated[
        int | None, typer.Option(help="Tokens per answer (default: the benchmark's budget).")
    ] = None,
    max_model_len: Annotated[
        int | None,
        typer.Option(
            help="Context length; prompts are fitted to it minus --max-tokens "
            "(default: what the server reports)."
        ),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="Tokenizer folder or hub id for counting prompt tokens "
            "(default: the model's own, else a conservative estimate)."
        ),
    ] = None,
    strip_think: Annotated[
        bool, typer.Option(help="Drop <think>...</think> from quoted responses.")
    ] = False,
    concurrency: Annotated[int, typer.Option(help="Requests in flight per endpoint.")] = 64,
    timeout: Annotated[
        float, typer.Option(help="Seconds one request attempt may take before it is retried.")
    ] = 600.0,
    retries: Annotated[
        int,
        typer.Option(
            help="Retries of a request after a rate limit, server error, timeout or dropped "
            "connection, with exponential backoff (or the server's Retry-After)."
        ),
    ] = 5,
    backoff: Annotated[
        float,
        typer.Option(
            help="Seconds before the first retry, doubled for each next one (up to 60), "
            "half of it random so clients that failed together do not return together."
        ),
    ] = 1.0,
    cache: Annotated[
        Path | None,
        typer.Option(
            help="SQLite file of answers already received; an identical request (same model, "
            "endpoint, messages, sampling and seed) is answered from it, not sent again."
        ),
    ] = None,
    tensor_parallel_size: Annotated[
        int, typer.Option(help="vllm: GPUs the in-process engine splits the model over.")
    ] = 1,
    gpu_memory_utilization: Annotated[
        float, typer.Option(help="vllm: fraction of GPU memory the engine may use.")
    ] = 0.9,
    enforce_eager: Annotated[
        bool,
        typer.Option(help="vllm: skip CUDA graph capture (starts faster, runs slower)."),
    ] = False,
    dtype: Annotated[
        str, typer.Option(help="vllm: weights type (auto, bfloat16, float16, float32).")
    ] = "auto",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Run directory (default: results/<benchmark>-<protocol>-n<N>-t<T>-<model>)."
        ),
    ] = None,
) -> None:
    """Run a multi-agent debate and report Maj, Debate, Δ and transitions.

    Running the same command again resumes an interrupted run in the same directory.
    """
    try:
        plan = make_plan(
            protocol=protocol,
            agents=agents,
            agent_options=agent or [],
            roster_file=roster,
            prompt_style=prompt_style,
            benchmark=benchmark,
            data_dir=data_dir,
            limit=limit,
            model=model,
            settings=dict(
                rounds=rounds,
                runs=runs,
                seed=seed,
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                max_model_len=max_model_len,
                tokenizer=tokenizer,
                strip_think=strip_think,
                api=api,
                template=template,
                dtype=dtype,
                base_urls=tuple(base_url or ()),
                concurrency=concurrency,
                timeout=timeout,
                retries=retries,
                backoff=backoff,
                cache=str(cache) if cache else None,
                tensor_parallel_size=tensor_parallel_size,
                gpu_memory_utilization=gpu_memory_utilization,
                enforce_eager=enforce_eager,
            ),
        )
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None

    config, questions = plan.config, plan.questions
    store = RunStore(out or config.default_out())

    async def debate() -> None:
        """One event loop for the whole run: the HTTP clients' connections belong to it."""
        try:
            seats = await plan.seats()
            done = store.open(config, plan.manifest_extra(seats))
            for warning in plan.warnings:
                errors.print(
                    f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True
                )
            if model is None and not config.roster:
                console.print(
                    "No --model given: using simulated agents (sim). "
                    "Pass --model openai:NAME --base-url URL to benchmark a served checkpoint."
                )
            team = ", ".join(sorted({a.group for a in plan.team}))
            console.print(
                f"{plan.spec.name}: {len(questions)} questions x {config.runs} run(s), "
                f"{config.agents} agents ({team}), {config.rounds} rounds, "
                f"{plan.choice.cls} protocol, {config.prompt_style} prompts -> {store.root}"
                + (f" (resuming: {len(done)} turns already recorded)" if done else "")
            )
            with _progress() as progress:
                task = progress.add_task(
                    "debating",
                    total=config.runs * len(questions) * (config.rounds + 1) * config.agents,
                )
                engine = Engine(
                    config,
                    plan.choice.protocol,
                    seats,
                    done,
                    store.append,
                    lambda: progress.advance(task),
                )
                await engine.run(questions)
        finally:
            for backend in plan.backends.values():
                await backend.aclose()
            store.close()
            if plan.cache:
                console.print(
                    f"Request cache {plan.cache.path}: {plan.cache.hits} answers reused, "
                    f"{plan.cache.stored} new ones stored."
                )
                plan.cache.close()

    try:
        asyncio.run(debate())
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        errors.print(
            f"Interrupted. Every finished turn is in {store.turns_path}; "
            "run the same command again to resume."
        )
        raise typer.Exit(code=130) from None
    _report(store)


@app.command()
def protocols() -> None:
    """List the protocols --protocol accepts by name, with what each does."""
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
    _report(RunStore(run_dir))


def _report(store: RunStore) -> None:
    """metrics.json from the run's records alone: its manifest and turns.jsonl."""
    try:
        manifest = store.manifest()
        turns = store.read_turns()
    except StoreError as exc:
        raise fail(str(exc)) from None
    config = manifest["config"]
    if not turns:
        raise fail(f"{store.turns_path} holds no turns yet; nothing to report.")
    groups: dict[str, list[int]] = {}
    for seat in manifest.get("team", []):
        groups.setdefault(seat["group"], []).append(seat["agent"])
    metrics = compute_metrics(
        turns,
        agents=config["agents"],
        rounds=config["rounds"],
        voters=manifest["protocol"]["voters"],
        seed=config["seed"],
        hub=manifest["protocol"].get("hub"),
        groups=groups,
    )
    store.write_metrics(metrics)
    console.print(metrics_view(metrics, title=store.root.name))
    console.print(f"Records: {store.turns_path}  Metrics: {store.metrics_path}")


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("turns"),
        TimeElapsedColumn(),
        console=console,
    )


if __name__ == "__main__":
    app()
