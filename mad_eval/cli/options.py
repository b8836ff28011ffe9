"""Every command-line option, declared once: its name (the API keyword it fills), its type
and its help. A command names the options it takes; each default comes from the API
function the command calls (or RunConfig, for a run's settings), never from here."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.models import OptionInfo

# Light registries (names and words, no machinery): the help lists what each option accepts.
from mad_eval.errors import UserError
from mad_eval.grading.answers import ANSWER_PROTOCOLS
from mad_eval.reporting.layouts import ERRORS, FORMATS, LAYOUTS
from mad_eval.settings.config import REQUESTS, spec_files
from mad_eval.tracking.base import TRACKERS


@dataclass(frozen=True)
class Option:
    type: Any
    info: OptionInfo  # typer.Option(...): flags, help, metavar, environment variable


def _names(kind: str) -> str:
    """The built-in specs of a kind ("protocols", "benchmarks", "templates") by name."""
    return ", ".join(spec_files(kind))


def _listed(names: Callable[[], str]) -> str:
    """A registry's names for a help text; an installed package that breaks the registry
    (a name taken twice) is reported when the option is used, not when the CLI starts."""
    try:
        return names()
    except UserError:
        return "(unreadable: an installed plug-in clashes; the command says how)"


def _answer_protocol(default: str, use: str = "") -> str:
    return (
        f"How replies write their final answer and how it is read{use}: "
        f"{_listed(lambda: ', '.join(ANSWER_PROTOCOLS))} (default: {default}); math-verify "
        "takes Math-Verify's settings after a colon, e.g. math-verify:precision=2 "
        "(docs/reference/answer-protocols.md)."
    )


# Help said once and used by more than one command.
PRICES = (
    "A TOML file of dollars per 1M input, cached input and output tokens "
    "(docs/explanation/diagnostics.md#cost)"
)
TRAIN_OUT = "File to write: .parquet (verl's format) or .jsonl, the same rows."
# measure.bootstrap.REPLICATES, the calls' default (None), written out for --help because
# importing it would load numpy whenever the command line starts (tests/test_options.py
# keeps the two equal).
REPLICATES = 2000


OPTIONS: dict[str, Option] = {
    "protocol": Option(
        str,
        typer.Option(
            help=f"Debate protocol: a preset ({_names('protocols')}; see `mad-eval "
            "protocols`), NAME:key=value,... (e.g. sparse:degree=4) or pkg.module:Class for "
            "your own."
        ),
    ),
    "agents": Option(
        int | None,
        typer.Option(
            help="Number of agents N (default 5, the roster's size, or the protocol's own: "
            "judged 3)."
        ),
    ),
    "rounds": Option(
        int,
        typer.Option(help="Debate rounds T after the initial answers (round 0)."),
    ),
    "agent": Option(
        list[str] | None,
        typer.Option(
            "--agent",
            metavar="MODEL[@URL][*COUNT]",
            help="A group of agents, repeated for a mixed team, e.g. "
            "--agent 'openai:a@http://host-a:8000/v1*3' --agent 'openai:b*2'.",
        ),
    ),
    "serving": Option(
        list[str] | None,
        typer.Option(
            "--serving",
            metavar="KEY=VALUE",
            help="A serve:CHECKPOINT model's serving setting, repeated: base (a LoRA adapter's "
            "base model), tensor_parallel, data_parallel, replicas, max_model_len, args (more "
            "vllm serve arguments, one quoted string), e.g. --serving replicas=2.",
        ),
    ),
    "gpus": Option(
        str | None,
        typer.Option(
            metavar="0,1,...|0-3",
            help="GPUs serve: models' servers may take, packed as many at once as they hold "
            "(default: CUDA_VISIBLE_DEVICES, else what nvidia-smi lists; none: one server at a "
            "time, no GPU set).",
        ),
    ),
    "ray": Option(
        str | None,
        typer.Option(
            metavar="ADDRESS|auto",
            help="Serve serve: models on this Ray cluster (HOST:PORT, ray://HOST:PORT, or auto: "
            "the one this node joined), each server a Ray actor placed on a node with its GPUs; "
            "needs pip install 'ray[default]'; not with --gpus.",
        ),
    ),
    "roster": Option(
        Path | None,
        typer.Option(
            help="TOML file of [[agent]] tables: model, count, name, base_url, "
            "temperature, top_p, max_tokens, max_model_len, tokenizer, persona, prompt_template, "
            "quote, extra_body."
        ),
    ),
    "prompt_template": Option(
        str | None,
        typer.Option(
            metavar="NAME|FILE",
            help=f"Prompt template: a built-in one ({_names('templates')}; see `mad-eval "
            "templates`) or your own .toml file (default: the preset's, else debate).",
        ),
    ),
    # The old name of --prompt-template, refused with the new one.
    "prompt_style": Option(str | None, typer.Option(hidden=True)),
    "benchmark": Option(
        str,
        typer.Option(
            help=f"Benchmark name ({_names('benchmarks')}; see `mad-eval benchmarks`), with "
            "parameters as NAME:key=value (e.g. mmlu:subject=anatomy), a spec .toml or a .jsonl "
            "path."
        ),
    ),
    "data_dir": Option(
        Path | None,
        typer.Option(
            envvar="MAD_EVAL_DATA",
            help="Read benchmark files from this folder instead of the Hugging Face hub "
            "(`mad-eval data fetch` writes them, `mad-eval data check` checks them).",
        ),
    ),
    "limit": Option(
        int | None,
        typer.Option(help="Use only the first LIMIT questions."),
    ),
    "model": Option(
        str | None,
        typer.Option(
            help="Model spec: openai:<model> (a server), vllm:<model folder or hub id> "
            "(in-process vLLM), serve:<checkpoint folder or hub id> (served by mad-eval with "
            "vllm serve, see --serving) or "
            "sim[:p0=..,s0=..,k=..,mbeta=..,skill=..,w=..,delay=..,words=..,think=..]."
        ),
    ),
    "base_url": Option(
        list[str] | None,
        typer.Option(
            metavar="URL",
            envvar="OPENAI_BASE_URL",
            help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1; repeat it for "
            "replicas of the model: a question's requests go to one replica, picked by a hash "
            "of the question's id (its prefix cache then serves the whole debate), and to the "
            "least busy one only when that replica falls behind or fails.",
        ),
    ),
    "api": Option(
        str,
        typer.Option(
            metavar="chat|completions",
            help="chat: send messages to /chat/completions (the server applies its chat "
            "template); completions: send the prompt text we render to /completions.",
        ),
    ),
    "template": Option(
        str,
        typer.Option(
            metavar="chat|raw|bare",
            help="How text prompts (--api completions, vllm:) are rendered: chat (the "
            "tokenizer's chat template), raw (message texts, each followed by a blank line, "
            "for base checkpoints) or bare (message texts as they are, nothing added).",
        ),
    ),
    "runs": Option(
        int,
        typer.Option(help="Independent seeded repetitions (the paper averages 5)."),
    ),
    "seed": Option(
        int,
        typer.Option(help="Base seed; every turn's seed derives from it."),
    ),
    "temperature": Option(
        float,
        typer.Option(help="Sampling temperature."),
    ),
    "top_p": Option(
        float,
        typer.Option(help="Nucleus sampling top-p."),
    ),
    "max_tokens": Option(
        int | None,
        typer.Option(help="Tokens per answer (default: the benchmark's budget)."),
    ),
    "max_model_len": Option(
        int | None,
        typer.Option(
            help="Context length; prompts are fitted to it minus --max-tokens "
            "(default: what the server reports)."
        ),
    ),
    "tokenizer": Option(
        str | None,
        typer.Option(
            help="Tokenizer folder or hub id for counting prompt tokens "
            "(default: the model's own, else a conservative estimate)."
        ),
    ),
    "answer_protocol": Option(
        str | None,
        typer.Option(
            metavar="NAME",
            help=_answer_protocol("the benchmark's, e.g. boxed for math500")
            + " The prompt's answer instruction follows it.",
        ),
    ),
    "strip_think": Option(
        bool,
        typer.Option(
            help="Drop <think>...</think> left inside quoted text (runs recorded before reasoning "
            "was kept apart; --quote decides what peers read)."
        ),
    ),
    "quote": Option(
        str | None,
        typer.Option(
            metavar="final|full|tail:N|verbatim",
            help="What an agent reads of each reply it is shown: its final content (default), its "
            "reasoning too (full), the last N tokens of its reasoning too (tail:N), or the "
            "reply exactly as written, think tags included, nothing escaped (verbatim).",
        ),
    ),
    "extra_body": Option(
        str | None,
        typer.Option(
            metavar="JSON",
            help="Request fields merged into every request, e.g. "
            '\'{"chat_template_kwargs": {"enable_thinking": true}, "top_k": 20, "min_p": 0}\'; '
            "in-process vLLM takes the sampling ones and the chat template's switches.",
        ),
    ),
    "concurrency": Option(
        int,
        typer.Option(help="Requests in flight per endpoint."),
    ),
    "timeout": Option(
        float,
        typer.Option(
            help="Seconds one request attempt may take before it is asked again from the "
            "start; on a slow server raise it or lower --concurrency."
        ),
    ),
    "retries": Option(
        int,
        typer.Option(
            help="Retries of a request after a rate limit, server error, timeout or dropped "
            "connection, with exponential backoff (or the server's Retry-After)."
        ),
    ),
    "backoff": Option(
        float,
        typer.Option(
            help="Seconds before the first retry, doubled for each next one (up to 60), "
            "half of it random so clients that failed together do not return together."
        ),
    ),
    "cache": Option(
        Path | None,
        typer.Option(
            help="SQLite file of answers already received; an identical request (same model, "
            "endpoint, messages, sampling and seed) is answered from it, not sent again. "
            "Math-verify's verdicts are kept beside it (FILE.verdicts), so nothing is graded "
            "twice."
        ),
    ),
    "retry_failed": Option(
        bool,
        typer.Option(
            help="Ask every failed turn of the run again, with the later turns of its debate that "
            "were built without it; the replaced records move to the run's superseded/ folder."
        ),
    ),
    "tensor_parallel_size": Option(
        int,
        typer.Option(help="vllm: GPUs the in-process engine splits the model over."),
    ),
    "gpu_memory_utilization": Option(
        float,
        typer.Option(help="vllm: fraction of GPU memory the engine may use."),
    ),
    "enforce_eager": Option(
        bool,
        typer.Option(help="vllm: skip CUDA graph capture (starts faster, runs slower)."),
    ),
    "dtype": Option(
        str,
        typer.Option(help="vllm: weights type (auto, bfloat16, float16, float32)."),
    ),
    "out": Option(
        Path | None,
        typer.Option(
            help="Run directory (default: results/<benchmark>-<protocol>-n<N>-t<T>-<model>, "
            "then each setting not at its default, e.g. -l50-temperature0.7)."
        ),
    ),
}

# What a command adds or words its own way.
OPTIONS["samples"] = Option(
    int, typer.Option("--samples", "-k", help="Independent answers K per question.")
)
SINGLE_OUT = Option(
    Path | None,
    typer.Option(
        help="Run directory (default: results/<benchmark>-single-k<K>-<model>, then each "
        "setting not at its default, e.g. -l50-temperature0.7)."
    ),
)
OPTIONS["prices"] = Option(
    Path | None,
    typer.Option(metavar="FILE", help=f"{PRICES}: metrics.json's cost gains usd_per_1k."),
)
OPTIONS["single"] = Option(
    Path | None,
    typer.Option(
        metavar="RUN",
        help="A `mad-eval single -k K` run of the same model and benchmark (K >= N(T+1)): "
        "add the compute-matched baselines (maj@N(T+1), self-consistency at the debate's "
        "tokens) to metrics.json, tested against Debate.",
    ),
)
OPTIONS["judge"] = Option(
    str,
    typer.Option(
        "--judge",
        metavar="SPEC",
        help="The judge's model spec: openai:<model> (a server), vllm:<model> "
        "(in-process) or sim-judge[:bad=..] (simulated, to try the pipeline offline).",
    ),
)
OPTIONS["reference"] = Option(bool, typer.Option(help="Show the judge the gold answer."))
JUDGE = {
    "rounds": Option(
        str | None,
        typer.Option(metavar="A..B", help="Debate rounds to judge: A..B, R or R,S (default: all)."),
    ),
    "limit": Option(int | None, typer.Option(help="Judge only the run's first LIMIT questions.")),
    "temperature": Option(float, typer.Option(help="The judge's sampling temperature.")),
    "top_p": Option(float, typer.Option(help="The judge's nucleus sampling top-p.")),
    "max_tokens": Option(int, typer.Option(help="Tokens per judge answer.")),
    "seed": Option(int, typer.Option(help="Base seed of the judge's requests.")),
}


# `mad-eval table` and `plot`.
OPTIONS["layout"] = Option(
    str,
    typer.Option(
        metavar=_listed(lambda: "|".join(LAYOUTS)),
        help=_listed(lambda: "; ".join(f"{n}: {layout.summary}" for n, layout in LAYOUTS.items()))
        + ".",
    ),
)
OPTIONS["format"] = Option(
    str,
    typer.Option(
        "--format",
        metavar="|".join(FORMATS),
        help="csv: tidy, a row per method, benchmark and number, with std, 95% bootstrap "
        "interval and p-value; latex: booktabs, best values bold; md: Markdown.",
    ),
)
OPTIONS["label"] = Option(
    list[str] | None,
    typer.Option(
        metavar="RUN=NAME",
        help="Name a run's method (repeatable); by default the settings that differ "
        "between the runs name them.",
    ),
)
OPTIONS["baseline"] = Option(
    str | None,
    typer.Option(help="The method others are tested against (default: the first)."),
)
OPTIONS["error"] = Option(
    str,
    typer.Option(
        metavar="|".join(ERRORS),
        help="Error bars in latex and md: std over seeded runs, half the 95% bootstrap "
        "interval over questions, or none.",
    ),
)
OPTIONS["replicates"] = Option(
    int | None,
    typer.Option(help="Bootstrap resamples of the questions."),
)
TABLE = {
    "out": Option(Path | None, typer.Option(help="Write the table here, not to the screen.")),
    "prices": Option(
        Path | None, typer.Option(metavar="FILE", help=f"{PRICES}: the cost layout adds money.")
    ),
}
PLOT = {"out": Option(Path, typer.Option(help="Folder the PNG files are written to."))}
OPTIONS["style"] = Option(
    str,
    typer.Option(
        metavar="paper|notes",
        help="paper: no title in the figure (its caption says what it shows); notes: each "
        "figure's title above its panels. Both keep a method's colour (colour-blind safe) in "
        "every figure, draw every 95% interval and mark simulated agents.",
    ),
)

# `mad-eval run`, `single`, `judge`, `experiment run` and `log`.
LOG_HELP = (
    f"Send the finished run to a tracker ({_listed(lambda: ', '.join(TRACKERS))}), repeatable: "
    "wandb[:project=P,entity=E,group=G,dir=D] or mlflow[:tracking_uri=URI,experiment=E] (pip "
    "install 'mad-eval[wandb]' or 'mad-eval[mlflow]'). A failing tracker is one warning; "
    "`mad-eval log` sends it later."
)
OPTIONS["log"] = Option(
    list[str] | None,
    typer.Option("--log", metavar="TRACKER[:KEY=VALUE,...]", help=LOG_HELP),
)
# `mad-eval log --to`: `data fetch --to` is a folder.
LOG_TO = Option(list[str], typer.Option("--to", metavar="TRACKER[:KEY=VALUE,...]", help=LOG_HELP))
OPTIONS["group"] = Option(
    str | None,
    typer.Option(help="Track the runs as one group (a W&B group, an MLflow parent run)."),
)

# `mad-eval run` and `experiment run`.
OPTIONS["dry_run"] = Option(
    bool,
    typer.Option(
        help="Print the runs, the turns each needs and holds, where the questions are read "
        "from and sent to, and each server's vllm serve command; ask and write nothing."
    ),
)

# `mad-eval train pairs` and `prompts`.
OPTIONS["pairing"] = Option(
    str,
    typer.Option(
        metavar="freq|rand",
        help="freq (or frequency): a rollout of the most common answer and one of the "
        "second most common; rand (or random): two distinct rollouts drawn uniformly.",
    ),
)
OPTIONS["per_prompt"] = Option(int, typer.Option(help="Pairs per prompt, at most."))
OPTIONS["max_length"] = Option(
    int | None,
    typer.Option(help="Leave out rollouts longer than this many characters (e.g. truncated ones)."),
)
OPTIONS["copies"] = Option(
    int,
    typer.Option(
        help="Copies of each pair's row, in a row. verl and TRL make every row its own group, "
        "so C copies are C groups; for one group of R debate-turn replies keep 1 and set "
        "rollout.n (verl) or num_generations (TRL) to R.",
    ),
)
# The old name of --copies: it read as the paper's R replies per debate context, which it is not.
OPTIONS["repeats"] = Option(int | None, typer.Option(hidden=True))
PAIRS = {
    "out": Option(Path, typer.Option(help=TRAIN_OUT)),
    "seed": Option(int, typer.Option(help="Seed of the draws and of each pair's order.")),
    "prompt_template": Option(
        str,
        typer.Option(
            metavar="NAME|FILE",
            help="Prompt template, as in evaluation: debate (the own rollout quoted as agent "
            "0's), conversation (the own rollout an assistant turn), another built-in one or a "
            ".toml file.",
        ),
    ),
    "answer_protocol": Option(
        str | None,
        typer.Option(
            metavar="NAME",
            help=_answer_protocol(
                "the run's, else boxed; the rollouts are graded with it", " by the reward"
            ),
        ),
    ),
}
PAIRS["tokenizer"] = Option(
    str | None,
    typer.Option(
        help="Tokenizer folder or hub id that counts the prompts' tokens, as the trainer's "
        "max_prompt_length does (default: an estimate at 2 characters per token).",
    ),
)
PROMPTS = {
    "out": PAIRS["out"],
    "tokenizer": PAIRS["tokenizer"],
    "prompt_template": Option(
        str,
        typer.Option(
            metavar="NAME|FILE",
            help="Prompt template whose round-0 messages are written: debate, conversation, "
            "another built-in one or a .toml file.",
        ),
    ),
    "answer_protocol": Option(
        str | None,
        typer.Option(metavar="NAME", help=_answer_protocol("the benchmark's", " by the reward")),
    ),
}

# `mad-eval view`.
OPTIONS["open"] = Option(
    bool, typer.Option("--open", help="Open the site in the default browser once written.")
)
OPTIONS["serve"] = Option(
    int | None,
    typer.Option(
        metavar="PORT",
        help="Also serve the site on http://127.0.0.1:PORT/TOKEN/, TOKEN drawn at random "
        "each time (this machine only; only the site's own pages get its files: requests "
        "addressed to any host but localhost, 127.0.0.1 or [::1], or sent by another "
        "site's page, are refused) until Ctrl-C; without it, open index.html from the folder.",
    ),
)
VIEW = {
    "out": Option(
        Path,
        typer.Option(
            help="The folder the site is written into (made if missing; never a run folder). "
            "Default: a folder named for the runs given, under results/view/. A site of the "
            "same runs there is replaced; one of other runs only with --force."
        ),
    ),
    "force": Option(
        bool,
        typer.Option("--force", help="Replace a site of other runs that --out holds."),
    ),
}

# `mad-eval templates NAME`.
OPTIONS["show_round"] = Option(
    int, typer.Option("--round", help="The round to show (2 shows a conversation's growth).")
)
OPTIONS["show_agent"] = Option(
    int, typer.Option("--agent", help="The agent (0-2) whose prompt to show.")
)

# `mad-eval data fetch|check`.
OPTIONS["to"] = Option(
    Path,
    typer.Option(metavar="FOLDER", help="The folder to write the files into (made if missing)."),
)
OPTIONS["force"] = Option(
    bool, typer.Option("--force", help="Write a file again that the folder already holds.")
)
CHECK = {
    "benchmark": Option(
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help="A benchmark whose file must be there, as --benchmark names it (repeatable); "
            "none: every benchmark file the folder holds.",
        ),
    )
}


# experiment run --retry-failed: the run option's meaning, for every cell.
EXPERIMENT_RETRY = Option(
    bool,
    typer.Option(
        help="Ask every failed turn of every run again, with the later turns of its debate that "
        "were built without it (a served model whose runs hold some is served again); the "
        "replaced records move to each run's superseded/ folder."
    ),
)


# experiment run --log: every cell, grouped as the experiment, instead of [experiment] log.
EXPERIMENT_LOG = Option(
    list[str] | None,
    typer.Option(
        "--log",
        metavar="TRACKER[:KEY=VALUE,...]",
        help=f"{LOG_HELP} Every run goes, grouped as the experiment; given, it replaces the "
        "file's [experiment] log.",
    ),
)


def argument(
    name: str, kind: Any, default: Any = inspect.Parameter.empty, **given: Any
) -> inspect.Parameter:
    """A positional argument of a command: its parameter name, type and typer.Argument's
    settings (metavar, help, envvar, ...)."""
    return inspect.Parameter(
        name,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        default=default,
        annotation=Annotated[kind, typer.Argument(**given)],
    )


def defaults_of(function: Callable[..., Any]) -> dict[str, Any]:
    """The keyword defaults of an API function: what the command leaves out means that."""
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.kind is p.KEYWORD_ONLY or p.default is not p.empty
    }


def command(
    app: typer.Typer,
    names: list[str],
    defaults: Mapping[str, Any] | None = None,
    own: Mapping[str, Option] | None = None,
    arguments: list[inspect.Parameter] | None = None,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register `function(**chosen)` as a command taking `arguments` and the options
    `names` (the command's `own` wording first, else OPTIONS), each defaulting to
    `defaults[name]` (required where there is none)."""
    defaults = defaults or {}

    def register(function: Callable[..., None]) -> Callable[..., None]:
        params = list(arguments or [])
        for name in names:
            option = (own or {}).get(name, OPTIONS[name])  # declared there in any case
            default = defaults.get(name, inspect.Parameter.empty)
            if default == ():  # a list option given no times
                default = None
            params.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=default,
                    annotation=Annotated[option.type, option.info],
                )
            )

        @functools.wraps(function)
        def call(**chosen: Any) -> None:
            function(**chosen)

        call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        call.__annotations__ = {p.name: p.annotation for p in params}
        del call.__wrapped__  # typer reads the signature given here, not the function's
        app.command()(call)
        return function

    return register


# The options of `mad-eval run`, in --help's order; `single` takes the same but the debate's.
RUN = [
    "protocol",
    "agents",
    "rounds",
    "agent",
    "roster",
    "prompt_template",
    "prompt_style",
    "benchmark",
    "data_dir",
    "limit",
    "answer_protocol",
    "model",
    "base_url",
    "serving",
    "gpus",
    "api",
    "template",
    "runs",
    "seed",
    "temperature",
    "top_p",
    "max_tokens",
    "max_model_len",
    "tokenizer",
    "strip_think",
    "quote",
    "extra_body",
    "concurrency",
    "timeout",
    "retries",
    "backoff",
    "cache",
    "retry_failed",
    "dry_run",
    "log",
    "tensor_parallel_size",
    "gpu_memory_utilization",
    "enforce_eager",
    "dtype",
    "out",
]
DEBATE_ONLY = (
    *("protocol", "agents", "rounds", "agent", "roster", "prompt_template", "prompt_style"),
    "strip_think",
)
SINGLE = ["samples", *(name for name in RUN if name not in (*DEBATE_ONLY, "quote", "dry_run"))]
# How requests travel (settings/config.py REQUESTS), but the endpoints, which come first.
OPERATIONAL = [name for name in REQUESTS if name != "base_url"]
