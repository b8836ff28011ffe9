"""What one served checkpoint is: `ServeSpec`, read from a model spec `serve:CHECKPOINT`
and its settings, and the `vllm serve` command line that serves it.

Settings, by the same keys on the command line (`--serving KEY=VALUE`, repeated) and in an
experiment's [models] table (next to `model`):

    base            a LoRA adapter's base model (CHECKPOINT is then the adapter, served
                    under the label; --max-lora-rank follows its adapter_config.json)
    tensor_parallel GPUs per model copy (vllm --tensor-parallel-size), default 1
    data_parallel   copies inside one server (vllm --data-parallel-size), default 1
    replicas        servers started, each on its own GPUs, routed to as --base-url replicas
    max_model_len   vllm --max-model-len (default: the run's --max-model-len, if given)
    args            more `vllm serve` arguments, as one shell-quoted string

With vLLM's CPU build, the settings it needs to run a debate are added unless `args` set them
(installation.cpu_defaults); they are recorded with the rest.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from mad_eval.backends.base import served_name
from mad_eval.sanitize import redact
from mad_eval.serving.installation import cpu_defaults, launcher
from mad_eval.settings.config import ConfigError

PREFIX = "serve:"
SIZES = ("tensor_parallel", "data_parallel", "replicas", "max_model_len")
KEYS = ("base", *SIZES, "args")
# `vllm serve` arguments that change how fast or where a server runs, never what it answers
# (True: the flag takes a value); every other argument is taken to change the answers.
OPERATIONAL_ARGS = {
    "--api-key": True,
    "--block-size": True,
    "--cpu-offload-gb": True,
    "--disable-log-requests": False,
    "--disable-log-stats": False,
    "--distributed-executor-backend": True,
    "--enable-chunked-prefill": False,
    "--enable-prefix-caching": False,
    "--enforce-eager": False,
    "--gpu-memory-utilization": True,
    "--max-num-batched-tokens": True,
    "--max-num-seqs": True,
    "--no-enable-chunked-prefill": False,
    "--no-enable-prefix-caching": False,
    "--pipeline-parallel-size": True,
    "--swap-space": True,
    "--trust-remote-code": False,
    "--uvicorn-log-level": True,
}

# `vllm serve` arguments that decide where a server listens, or read arguments from a file
# that may: mad-eval's own --host (127.0.0.1, or a Ray node's IP) and --port come first,
# and a later one would win (--host 0.0.0.0: every interface). argparse also takes a
# flag's unambiguous prefix (--hos), and vllm takes underscores for dashes.
LISTENING_ARGS = (
    "--host",
    "--port",
    "--uds",
    "--config",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
    "--master-addr",
    "--master-port",
)


@dataclass(frozen=True)
class ServeSpec:
    """One checkpoint to serve: the label it answers to and prints under, where its
    weights are, how big each server is and how many run."""

    label: str  # --served-model-name, and the label tables print
    checkpoint: str  # a folder or hub id (with `base`: a LoRA adapter over base)
    base: str | None = None
    tensor_parallel: int = 1
    data_parallel: int = 1
    replicas: int = 1
    max_model_len: int | None = None
    args: tuple[str, ...] = ()  # extra `vllm serve` arguments
    launcher: str | None = None  # which vLLM serves it here (installation.Launcher.describe)

    @property
    def gpus(self) -> int:
        """GPUs one replica needs."""
        return self.tensor_parallel * self.data_parallel

    def record(self) -> dict[str, Any]:
        """What a run's manifest records of its server: at the top what changes the answers
        (a resume requires it unchanged), under "operational" what does not."""
        answering, operational = split_args(self.args)
        return {
            "checkpoint": self.checkpoint,
            "base": self.base,
            "max_model_len": self.max_model_len,
            "args": answering,
            "operational": {
                "tensor_parallel": self.tensor_parallel,
                "data_parallel": self.data_parallel,
                "replicas": self.replicas,
                "args": operational,
                "launcher": self.launcher,
            },
        }

    def command(self, port: int | str, host: str = "127.0.0.1") -> list[str]:
        """`vllm serve` for one replica on `port`, listening on `host` (this node only by
        default; a Ray-placed server listens on its node's IP)."""
        # serve:CKPT runs are asked for served_name(CKPT): a label of its own adds that name.
        names = list(dict.fromkeys([self.label, served_name(self.checkpoint)]))
        command = ["vllm", "serve", self.base or self.checkpoint]
        command += ["--host", host, "--port", str(port)]
        if self.base:
            command += ["--enable-lora", "--lora-modules"]
            command += [f"{name}={self.checkpoint}" for name in names]
        else:
            command += ["--served-model-name", *names]
        if self.tensor_parallel > 1:
            command += ["--tensor-parallel-size", str(self.tensor_parallel)]
        if self.data_parallel > 1:
            command += ["--data-parallel-size", str(self.data_parallel)]
        if self.max_model_len is not None:
            command += ["--max-model-len", str(self.max_model_len)]
        return command + list(self.args)


def shown(command: Sequence[str]) -> str:
    """A command line as a log or the console shows it: shell-quoted, its secrets hidden."""
    return redact(shlex.join(command))


def listening_arg(args: Sequence[str]) -> str | None:
    """The first argument that would change where a server listens (LISTENING_ARGS, in any
    spelling: --host=X, --host X, --hos X, --data_parallel_address X), if any."""
    for arg in args:
        flag = arg.partition("=")[0].replace("_", "-")
        long = len(flag) > 3 and flag.startswith("--")
        if long and any(known.startswith(flag) for known in LISTENING_ARGS):
            return arg
    return None


def runs_remote_code(args: Sequence[str]) -> bool:
    """Whether `vllm serve` arguments let the server run the Python code that comes with a
    checkpoint (--trust-remote-code, or its prefix or underscore spelling)."""
    for arg in args:
        flag = arg.partition("=")[0].replace("_", "-")
        if len(flag) > 7 and "--trust-remote-code".startswith(flag):
            return True
    return False


def split_args(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """`vllm serve` arguments split into those that may change the answers and the
    operational ones (OPERATIONAL_ARGS, with their values; a secret's value is hidden
    where they are written, by sanitize.redact)."""
    answering: list[str] = []
    operational: list[str] = []
    items = iter(args)
    for arg in items:
        flag, eq, value = arg.partition("=")
        takes_value = OPERATIONAL_ARGS.get(flag)
        if takes_value is None:
            answering.append(arg)
            continue
        if takes_value and not eq:
            value = next(items, "")
        operational += [flag, value] if takes_value else [flag]
    return answering, operational


def is_served(model: object) -> TypeGuard[str]:
    """Whether a model spec names a checkpoint mad-eval serves itself."""
    return isinstance(model, str) and model.startswith(PREFIX)


def settings_of(given: Mapping[str, Any] | Sequence[str] | None) -> dict[str, Any]:
    """`--serve KEY=VALUE` strings (or a mapping already) as a mapping."""
    if given is None:
        return {}
    if isinstance(given, Mapping):
        return dict(given)
    settings = {}
    for item in given:
        key, sep, value = str(item).partition("=")
        if not sep:
            raise ConfigError(
                f"--serving takes KEY=VALUE with a key of {', '.join(KEYS)}, got '{item}'."
            )
        settings[key.strip()] = value.strip()
    return settings


def parse_serve(
    model: str,
    settings: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    label: str | None = None,
    max_model_len: int | None = None,
    where: str = "--serving",
) -> ServeSpec:
    """A ServeSpec from `serve:CHECKPOINT` and its settings; ConfigError in one sentence
    (naming `where` the settings came from) for anything that cannot be served."""
    checkpoint = model[len(PREFIX) :] if model.startswith(PREFIX) else model
    if not checkpoint.strip():
        raise ConfigError(f"model spec '{model}' names no checkpoint, e.g. serve:Qwen/Qwen3-8B.")
    given = settings_of(settings)
    unknown = sorted(set(given) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"{where} has no setting '{unknown[0]}' for {model}; use {', '.join(KEYS)}."
        )
    sizes: dict[str, int | None] = {"max_model_len": max_model_len}
    for key in SIZES:
        if key in given:
            sizes[key] = _size(given[key], key, model, where)
    args = given.get("args") or ()
    if isinstance(args, str):
        try:
            args = shlex.split(args)
        except ValueError as exc:
            raise ConfigError(f"{where} args of {model} cannot be split ({exc}).") from None
    if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where} args of {model} must be a string of vllm serve arguments.")
    listening = listening_arg(args)
    if listening is not None:
        raise ConfigError(
            f"{where} args of {model} may not hold {redact(listening)!r}: mad-eval decides "
            "where its server listens (127.0.0.1, on a free port; a config file could change "
            "it), so remove it."
        )
    base = given.get("base")
    if base is not None and (not isinstance(base, str) or not base.strip()):
        raise ConfigError(f"{where} base of {model} must name a base model, got {base!r}.")
    _check_exists(checkpoint, model, "checkpoint")
    if base:
        _check_exists(base, model, "base model")
        args = [*args, *_lora_rank(checkpoint, args)]
    elif _is_adapter(checkpoint):
        raise ConfigError(
            f"{checkpoint} is a LoRA adapter: give its base model with {where} base=MODEL."
        )
    found = launcher()
    if found is not None and found.cpu_build:
        args = [*args, *cpu_defaults(args)]
    return ServeSpec(
        label=label or served_name(checkpoint),
        checkpoint=checkpoint,
        base=base or None,
        args=tuple(args),
        launcher=found.describe() if found else None,
        **{k: v for k, v in sizes.items() if v is not None},
    )


def _size(value: Any, key: str, model: str, where: str) -> int:
    try:
        number = int(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or number < 1 or str(number) != str(value).strip():
        raise ConfigError(
            f"{where} {key} of {model} must be a whole number of at least 1, got {value!r}."
        )
    return number


def looks_like_path(name: str) -> bool:
    """A folder, not a hub id (org/name): absolute, relative with ./ or ../, ~, or deeper."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1


def _check_exists(name: str, model: str, what: str) -> None:
    if looks_like_path(name) and not Path(name).expanduser().is_dir():
        raise ConfigError(f"the {what} folder {name} of {model} does not exist.")


# vLLM serves adapters up to rank 16 unless told more, and takes only these ranks.
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def _lora_rank(adapter: str, args: Sequence[str]) -> list[str]:
    """--max-lora-rank for an adapter folder of a rank above vLLM's default (16), unless
    the args set it."""
    if any(arg.startswith("--max-lora-rank") for arg in args):
        return []
    try:
        rank = json.loads((Path(adapter).expanduser() / "adapter_config.json").read_text())["r"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if type(rank) is not int or rank <= 16:
        return []
    fits = [r for r in LORA_RANKS if r >= rank]
    return ["--max-lora-rank", str(fits[0] if fits else rank)]


def _is_adapter(checkpoint: str) -> bool:
    folder = Path(checkpoint).expanduser()
    return (folder / "adapter_config.json").is_file() and not (folder / "config.json").is_file()


def place(spec: ServeSpec, pool: Sequence[int]) -> list[list[int]]:
    """Each replica's GPUs from the pool (an empty pool: one CPU slot, no GPUs set)."""
    if not pool:
        if spec.replicas > 1:
            raise ConfigError(
                f"{spec.label} asks for {spec.replicas} replicas but there are no GPUs (one CPU "
                "slot); give --gpus or --serving replicas=1."
            )
        return [[]]
    need = spec.gpus * spec.replicas
    if need > len(pool):
        raise ConfigError(
            f"{spec.label} needs {need} GPUs (tensor_parallel x data_parallel x replicas) but "
            f"the pool has {len(pool)} ({','.join(map(str, pool))})."
        )
    return [list(pool[i * spec.gpus : (i + 1) * spec.gpus]) for i in range(spec.replicas)]
