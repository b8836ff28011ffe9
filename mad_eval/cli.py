"""The `mad-eval` command line: parses options, calls the library, prints."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mad_eval.backends import BackendError, Guarded, make_backend
from mad_eval.benchmarks import BenchmarkError, load_questions
from mad_eval.config import DEFAULT_BENCHMARK, DEFAULT_MODEL, ConfigError, RunConfig
from mad_eval.engine import Engine
from mad_eval.metrics import compute_metrics
from mad_eval.protocols import ProtocolError, get_protocol
from mad_eval.report import metrics_view
from mad_eval.store import RunStore, StoreError

app = typer.Typer(
    help="Multi-agent debate evaluation: Maj vs Debate, per-round accuracy and transitions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
errors = Console(stderr=True)
USER_ERRORS = (ConfigError, ProtocolError, BenchmarkError, BackendError, StoreError)


def fail(message: str) -> typer.Exit:
    errors.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


@app.command()
def run(
    protocol: Annotated[
        str, typer.Option(help="Debate protocol: decentralized.")
    ] = "decentralized",
    agents: Annotated[int, typer.Option(help="Number of agents N.")] = 5,
    rounds: Annotated[
        int, typer.Option(help="Debate rounds T after the initial answers (round 0).")
    ] = 3,
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
            help="Model spec: openai:<model> or sim[:p0=..,s0=..,k=..,mbeta=..,skill=..,w=..]."
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            envvar="OPENAI_BASE_URL",
            help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1.",
        ),
    ] = None,
    runs: Annotated[
        int, typer.Option(help="Independent seeded repetitions (the paper averages 5).")
    ] = 1,
    seed: Annotated[int, typer.Option(help="Base seed; every turn's seed derives from it.")] = 0,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 1.0,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling top-p.")] = 0.9,
    max_tokens: Annotated[
        int | None, typer.Option(help="Tokens per answer (default: the benchmark's budget).")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Requests in flight at once.")] = 64,
    timeout: Annotated[
        float, typer.Option(help="Seconds before one request counts as failed.")
    ] = 600.0,
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
        config = RunConfig(
            protocol=protocol,
            agents=agents,
            rounds=rounds,
            benchmark=benchmark,
            limit=limit,
            model=model or DEFAULT_MODEL,
            runs=runs,
            seed=seed,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            base_url=base_url,
            concurrency=concurrency,
            timeout=timeout,
        )
        config.validate()
        debate_protocol = get_protocol(protocol)
        debate_protocol.validate(agents)
        spec, questions = load_questions(benchmark, data_dir, limit)
        config = replace(config, max_tokens=max_tokens or spec.max_tokens)
        backend = Guarded(make_backend(config.model, base_url, timeout), concurrency)
    except USER_ERRORS as exc:
        raise fail(str(exc)) from None

    store = RunStore(out or config.default_out())
    manifest_extra = {
        "benchmark": {"name": spec.name, "kind": spec.kind, "questions": [q.id for q in questions]},
        "protocol": {"name": debate_protocol.name, "voters": debate_protocol.voters(agents)},
    }

    async def debate() -> None:
        """One event loop for the whole run: the HTTP client's connections belong to it."""
        try:
            await backend.check()
            done = store.open(config, manifest_extra)
            if model is None:
                console.print(
                    "No --model given: using simulated agents (sim). "
                    "Pass --model openai:NAME --base-url URL to benchmark a served checkpoint."
                )
            console.print(
                f"{spec.name}: {len(questions)} questions x {runs} run(s), {agents} agents, "
                f"{rounds} rounds, {config.model} -> {store.root}"
                + (f" (resuming: {len(done)} turns already recorded)" if done else "")
            )
            with _progress() as progress:
                task = progress.add_task(
                    "debating", total=runs * len(questions) * (rounds + 1) * agents
                )
                engine = Engine(
                    config,
                    debate_protocol,
                    backend,
                    done,
                    store.append,
                    lambda: progress.advance(task),
                )
                await engine.run(questions)
        finally:
            await backend.aclose()
            store.close()

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
    metrics = compute_metrics(
        turns,
        agents=config["agents"],
        rounds=config["rounds"],
        voters=manifest["protocol"]["voters"],
        seed=config["seed"],
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
