"""Command-line options `run` and `single` share, declared once: name = type + help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Protocol = Annotated[
    str,
    typer.Option(
        help="Debate protocol: a preset (see `mad-eval protocols`), NAME:key=value,... "
        "(e.g. sparse:degree=4) or pkg.module:Class for your own."
    ),
]

Agents = Annotated[
    int | None, typer.Option(help="Number of agents N (default 5, or the roster's size).")
]

Rounds = Annotated[int, typer.Option(help="Debate rounds T after the initial answers (round 0).")]

Agent = Annotated[
    list[str] | None,
    typer.Option(
        "--agent",
        metavar="MODEL[@URL][*COUNT]",
        help="A group of agents, repeated for a mixed team, e.g. "
        "--agent 'openai:a@http://host-a:8000/v1*3' --agent 'openai:b*2'.",
    ),
]

Roster = Annotated[
    Path | None,
    typer.Option(
        help="TOML file of [[agent]] tables: model, count, name, base_url, "
        "temperature, top_p, max_tokens, max_model_len, tokenizer, persona, prompt_template, "
        "quote, extra_body."
    ),
]

PromptStyle = Annotated[
    str | None,
    typer.Option(
        "--prompt-template",
        "--prompt-style",
        metavar="NAME|FILE",
        help="Prompt template: a built-in one (debate, reflection, verification, roles, "
        "personas, critique, own-apart, conversation, anonymous) or your own .toml file "
        "(default: the preset's, else debate). --prompt-style is the older name.",
    ),
]

Benchmark = Annotated[
    str,
    typer.Option(
        help="Benchmark name (see `mad-eval benchmarks`: arith, math500, gsm8k, mmlu:SUBJECT, "
        "hh_rlhf, cnn_dailymail, ...), a spec .toml or a .jsonl path."
    ),
]

DataDir = Annotated[
    Path | None,
    typer.Option(
        envvar="MAD_EVAL_DATA",
        help="Read benchmark files from this folder instead of the Hugging Face hub.",
    ),
]

Limit = Annotated[int | None, typer.Option(help="Use only the first LIMIT questions.")]

Model = Annotated[
    str | None,
    typer.Option(
        help="Model spec: openai:<model> (a server), vllm:<model folder or hub id> "
        "(in-process vLLM) or "
        "sim[:p0=..,s0=..,k=..,mbeta=..,skill=..,w=..,delay=..,words=..,think=..]."
    ),
]

BaseUrl = Annotated[
    list[str] | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        envvar="OPENAI_BASE_URL",
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1; repeat it for "
        "replicas of the model (each request goes to the least busy one).",
    ),
]

Api = Annotated[
    str,
    typer.Option(
        metavar="chat|completions",
        help="chat: send messages to /chat/completions (the server applies its chat "
        "template); completions: send the prompt text we render to /completions.",
    ),
]

Template = Annotated[
    str,
    typer.Option(
        metavar="chat|raw",
        help="How text prompts (--api completions, vllm:) are rendered: chat (the "
        "tokenizer's chat template) or raw (message texts, for base checkpoints).",
    ),
]

Runs = Annotated[int, typer.Option(help="Independent seeded repetitions (the paper averages 5).")]

Seed = Annotated[int, typer.Option(help="Base seed; every turn's seed derives from it.")]

Temperature = Annotated[float, typer.Option(help="Sampling temperature.")]

TopP = Annotated[float, typer.Option(help="Nucleus sampling top-p.")]

MaxTokens = Annotated[
    int | None, typer.Option(help="Tokens per answer (default: the benchmark's budget).")
]

MaxModelLen = Annotated[
    int | None,
    typer.Option(
        help="Context length; prompts are fitted to it minus --max-tokens "
        "(default: what the server reports)."
    ),
]

Tokenizer = Annotated[
    str | None,
    typer.Option(
        help="Tokenizer folder or hub id for counting prompt tokens "
        "(default: the model's own, else a conservative estimate)."
    ),
]

AnswerProtocol = Annotated[
    str | None,
    typer.Option(
        metavar="NAME",
        help="How replies write their final answer and how it is read: boxed, answer-line, "
        "math-verify, braces (default: the benchmark's, e.g. boxed for math500). The prompt's "
        "answer instruction follows it.",
    ),
]

StripThink = Annotated[
    bool,
    typer.Option(
        help="Drop <think>...</think> left inside quoted text (runs recorded before reasoning "
        "was kept apart; --quote decides what peers read)."
    ),
]

Quote = Annotated[
    str | None,
    typer.Option(
        metavar="final|full|tail:N",
        help="What an agent reads of each reply it is shown: its final content (default), its "
        "reasoning too (full), or the last N tokens of its reasoning too (tail:N).",
    ),
]

ExtraBody = Annotated[
    str | None,
    typer.Option(
        metavar="JSON",
        help="Request fields merged into every request, e.g. "
        '\'{"chat_template_kwargs": {"enable_thinking": true}, "top_k": 20, "min_p": 0}\'; '
        "in-process vLLM takes the sampling ones and the chat template's switches.",
    ),
]

Concurrency = Annotated[int, typer.Option(help="Requests in flight per endpoint.")]

Timeout = Annotated[
    float, typer.Option(help="Seconds one request attempt may take before it is retried.")
]

Retries = Annotated[
    int,
    typer.Option(
        help="Retries of a request after a rate limit, server error, timeout or dropped "
        "connection, with exponential backoff (or the server's Retry-After)."
    ),
]

Backoff = Annotated[
    float,
    typer.Option(
        help="Seconds before the first retry, doubled for each next one (up to 60), "
        "half of it random so clients that failed together do not return together."
    ),
]

Cache = Annotated[
    Path | None,
    typer.Option(
        help="SQLite file of answers already received; an identical request (same model, "
        "endpoint, messages, sampling and seed) is answered from it, not sent again."
    ),
]

RetryFailed = Annotated[
    bool,
    typer.Option(
        help="Ask every failed turn of the run again, with the later turns of its debate that "
        "were built without it; the replaced records move to the run's superseded/ folder."
    ),
]

TensorParallelSize = Annotated[
    int, typer.Option(help="vllm: GPUs the in-process engine splits the model over.")
]

GpuMemoryUtilization = Annotated[
    float, typer.Option(help="vllm: fraction of GPU memory the engine may use.")
]

EnforceEager = Annotated[
    bool,
    typer.Option(help="vllm: skip CUDA graph capture (starts faster, runs slower)."),
]

Dtype = Annotated[str, typer.Option(help="vllm: weights type (auto, bfloat16, float16, float32).")]

Out = Annotated[
    Path | None,
    typer.Option(help="Run directory (default: results/<benchmark>-<protocol>-n<N>-t<T>-<model>)."),
]
