"""verl settings for self-debate RL, checked before verl starts Ray (imports no verl).

`check_config(cfg)` reads a composed verl config (an OmegaConf DictConfig or a plain dict)
and refuses, in one sentence, what verl 0.9.1 would ignore or what cannot work on-policy:
the legacy top-level reward keys its trainer never reads, a reward that is not mad-eval's
`compute_score` under the self-debate manager, a group of one, a prompt too short for a
debate turn, and unknown or bad `self_debate` settings. `read_settings(cfg)` gives the
manager's settings. Usage (on-policy; see mad_eval.training.verl_loop):

    python -m mad_eval.training.verl_main \\
        +actor_rollout_ref.rollout.agent.agent_loop_manager_class=\\
mad_eval.training.verl_loop.SelfDebateAgentLoopManager \\
        reward.custom_reward_function.path=pkg://mad_eval.training.rewards \\
        reward.custom_reward_function.name=compute_score \\
        +self_debate.rule=freq +self_debate.per_prompt=1 ...
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from mad_eval.training.errors import TrainingError
from mad_eval.training.onpolicy import SelfDebate
from mad_eval.training.pairs import PAIRINGS
from mad_eval.training.rows import check_rows

TESTED_VERL = "0.9.1"
MANAGER = "mad_eval.training.verl_loop.SelfDebateAgentLoopManager"
# In verl 0.9.1's RolloutConfig but not its yaml: set it with a leading + (hydra's append).
MANAGER_KEY = "actor_rollout_ref.rollout.agent.agent_loop_manager_class"
REWARDS_MODULE = "mad_eval.training.rewards"
REWARD_PATH = f"pkg://{REWARDS_MODULE}"

# self_debate.<key>: (default, what it accepts), the keys the manager reads.
SETTINGS: dict[str, tuple[Any, str]] = {
    "rule": ("freq", f"one of {', '.join([*PAIRINGS, *PAIRINGS.values()])}"),
    "per_prompt": (1, "an integer of 1 or more (debate contexts per prompt)"),
    "n": (None, "an integer of 2 or more (debate-turn samples per context), or null for rollout.n"),
    "max_length": (None, "an integer of 1 or more (tokens), or null for no length filter"),
    "seed": (0, "an integer"),
    "stop_unparsed": (10, "an integer of 1 or more (steps in a row with no parsed reply)"),
    "authors": (False, "true or false (the SDRL authors' pairing, with per_prompt 1)"),
    "allow_untested_verl": (False, "true or false"),
}

# Top-level keys verl 0.9.1 keeps in its config (legacy_reward_impl.yaml) but main_ppo never
# reads (only its fully-async recipe migrates them): the key that works instead, by prefix.
LEGACY: dict[str, str | None] = {
    "custom_reward_function.": "reward.custom_reward_function.",
    "reward_model.num_workers": "reward.num_workers",
    "reward_model.reward_manager": "reward.reward_manager.name",
    "reward_model.reward_loop_source": "reward.reward_manager.source",
    "reward_model.reward_loop_module_path": "reward.reward_manager.module.path",
    "reward_model.reward_loop_class_name": "reward.reward_manager.module.name",
    "reward_model.model.path": "reward.reward_model.model_path",
    "reward_model.model.": None,  # external_lib, trust_remote_code: no 0.9.1 equivalent
    "reward_model.reward_kwargs": "reward.reward_kwargs",
    "reward_model.rollout.": "reward.reward_model.rollout.",
    "reward_model.": "reward.reward_model.",
    "sandbox_fusion.": "reward.sandbox_fusion.",
}


@dataclass(frozen=True)
class Settings:
    """What the self-debate manager runs: the pairing step and the debate turn's group size."""

    debate: SelfDebate
    n: int  # debate-turn samples per debate context (its GRPO group)
    allow_untested_verl: bool = False


def get(cfg: Any, dotted: str, default: Any = None) -> Any:
    """`cfg`'s value at a dotted key (interpolations resolved), or `default` when absent."""
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def _leaves(node: Any, prefix: str) -> list[tuple[str, Any]]:
    if not isinstance(node, Mapping):
        return [(prefix, node)]
    return [leaf for key, value in node.items() for leaf in _leaves(value, f"{prefix}.{key}")]


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def verl_version() -> str | None:
    """The installed verl's version, None when verl is not installed."""
    try:
        return metadata.version("verl")
    except metadata.PackageNotFoundError:
        return None


def read_settings(cfg: Any) -> Settings:
    """The `self_debate` group's settings, each checked (unknown keys refused)."""
    given = get(cfg, "self_debate", {}) or {}
    if not isinstance(given, Mapping):
        raise TrainingError(
            f"self_debate must be a group of settings (+self_debate.rule=freq ...), got {given!r}."
        )
    unknown = sorted(str(k) for k in given if k not in SETTINGS)
    if unknown:
        raise TrainingError(
            f"unknown self_debate setting {', '.join(unknown)}: the settings are "
            f"{', '.join(SETTINGS)}."
        )
    values = {key: given.get(key, default) for key, (default, _) in SETTINGS.items()}
    checks = {
        "rule": lambda v: isinstance(v, str) and v in (*PAIRINGS, *PAIRINGS.values()),
        "per_prompt": lambda v: _integer(v) and v >= 1,
        "n": lambda v: v is None or (_integer(v) and v >= 2),
        "max_length": lambda v: v is None or (_integer(v) and v >= 1),
        "seed": _integer,
        "stop_unparsed": lambda v: _integer(v) and v >= 1,
        "authors": lambda v: isinstance(v, bool),
        "allow_untested_verl": lambda v: isinstance(v, bool),
    }
    for key, ok in checks.items():
        if not ok(values[key]):
            raise TrainingError(
                f"self_debate.{key} must be {SETTINGS[key][1]}, got {values[key]!r}."
            )
    rollout_n = get(cfg, "actor_rollout_ref.rollout.n", 1)
    debate = SelfDebate(
        rule=values["rule"],
        per_prompt=values["per_prompt"],
        max_length=values["max_length"],
        seed=values["seed"],
        stop_unparsed=values["stop_unparsed"],
        authors=values["authors"],
    )
    n = values["n"] if values["n"] is not None else rollout_n
    return Settings(debate, int(n), values["allow_untested_verl"])


def _is_mad_eval_rewards(path: str) -> bool:
    """Whether verl's module path (pkg://a.b, pkg://a/b, file://x.py or a file) is ours."""
    if path.startswith("pkg://"):
        return path[len("pkg://") :].replace("/", ".") == REWARDS_MODULE
    from mad_eval.training import rewards

    file = path[len("file://") :] if path.startswith("file://") else path
    return os.path.exists(file) and os.path.samefile(file, rewards.__file__)


def _check_legacy(cfg: Any) -> None:
    for top in ("custom_reward_function", "reward_model", "sandbox_fusion"):
        for key, value in _leaves(get(cfg, top), top):
            if value is None:
                continue
            prefix = next(p for p in LEGACY if key == p or key.startswith(p))
            instead = LEGACY[prefix]
            if instead is not None and prefix.endswith("."):
                instead += key[len(prefix) :]
            fix = "remove it" if instead is None else f"set {instead} instead"
            raise TrainingError(
                f"verl {TESTED_VERL}'s trainer ignores the top-level key {key} (it would fall "
                f"back silently); {fix}."
            )


def _check_reward(cfg: Any, manager: bool) -> None:
    path = get(cfg, "reward.custom_reward_function.path")
    name = get(cfg, "reward.custom_reward_function.name")
    ours = isinstance(path, str) and bool(path) and _is_mad_eval_rewards(path)
    if (manager and not ours) or (ours and name != "compute_score"):
        raise TrainingError(
            "the self-debate manager and mad-eval's rows need mad-eval's verl reward: set "
            f"reward.custom_reward_function.path={REWARD_PATH} and "
            f"reward.custom_reward_function.name=compute_score (got path={path!r}, "
            f"name={name!r})."
        )


def _check_overlong(cfg: Any) -> None:
    """DAPO's overlong penalty is verl's DAPO reward manager's: the settings it would ignore,
    or read against another length, are refused (each gave no penalty without a word)."""
    misplaced = "reward.custom_reward_function.reward_kwargs.overlong_buffer_cfg"
    if get(cfg, misplaced) is not None:
        raise TrainingError(
            f"{misplaced} reaches compute_score, which adds no penalty; set "
            "+reward.reward_kwargs.overlong_buffer_cfg.* (and reward.reward_manager.name=dapo)."
        )
    if get(cfg, "reward.reward_kwargs.overlong_buffer_cfg.enable") is not True:
        return
    manager = get(cfg, "reward.reward_manager.name")
    if manager != "dapo":
        raise TrainingError(
            f"the overlong buffer is read only by verl's DAPO reward manager: set "
            f"reward.reward_manager.name=dapo, got {manager!r}."
        )
    limit, response = (
        get(cfg, "reward.reward_kwargs.max_resp_len"),
        get(cfg, "data.max_response_length"),
    )
    if limit != response:
        raise TrainingError(
            f"+reward.reward_kwargs.max_resp_len must equal data.max_response_length ({response}) "
            f"for the overlong penalty to start where replies are cut, got {limit!r}."
        )


def _check_lengths(cfg: Any, max_length: int | None) -> None:
    """A debate prompt holds two first-turn replies: at most the response length each, or
    self_debate.max_length when that is shorter (longer replies are not paired)."""
    for where in ("data.max_", "actor_rollout_ref.rollout."):
        prompt = get(cfg, f"{where}prompt_length")
        response = get(cfg, f"{where}response_length")
        if not (_integer(prompt) and _integer(response)):
            continue
        reply, limit = response, f"{where}response_length"
        if max_length is not None and max_length < response:
            reply, limit = max_length, "self_debate.max_length"
        if prompt <= 2 * reply:
            raise TrainingError(
                f"{where}prompt_length ({prompt}) must be above 2 x {limit} ({2 * reply}): a "
                "debate-turn prompt holds the question and two first-turn replies "
                "(`mad-eval train prompts` prints the length it needs)."
            )


def check_config(cfg: Any, version: str | None = None) -> Settings | None:
    """Refuse, in one sentence, a verl config that verl would silently misread or that cannot
    run self-debate; return the manager's settings when the self-debate manager is set.
    `version`: the verl version to check against (default: the installed one)."""
    manager = get(cfg, MANAGER_KEY) == MANAGER
    settings = read_settings(cfg)
    version = version if version is not None else verl_version()
    if version != TESTED_VERL and not settings.allow_untested_verl:
        raise TrainingError(
            f"mad-eval's verl recipe is tested with verl {TESTED_VERL} only, found "
            f"{version or 'no verl'}; install verl=={TESTED_VERL}, or set "
            "+self_debate.allow_untested_verl=true to run it anyway."
        )
    _check_legacy(cfg)
    _check_reward(cfg, manager)
    _check_overlong(cfg)
    given = get(cfg, "self_debate") or {}
    if not manager:
        if any(key != "allow_untested_verl" for key in given):
            raise TrainingError(
                "self_debate settings are read only by the self-debate agent loop manager: set "
                f"+{MANAGER_KEY}={MANAGER} (verl's yaml lacks the key, hence the +)."
            )
        return None
    if get(cfg, "trainer.use_v1") is not True:
        raise TrainingError(
            f"the self-debate manager runs on verl's V1 trainer (TransferQueue): set "
            f"trainer.use_v1=true, got {get(cfg, 'trainer.use_v1')!r}."
        )
    rollout_n = get(cfg, "actor_rollout_ref.rollout.n")
    if not _integer(rollout_n) or rollout_n < 2:
        raise TrainingError(
            f"self-debate samples a group of first-turn replies per prompt to pair: set "
            f"actor_rollout_ref.rollout.n to 2 or more, got {rollout_n!r}."
        )
    _check_lengths(cfg, settings.debate.max_length)
    return settings


def train_rows(files: Any) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """The rows of data.train_files that are local Parquet or JSON Lines files, each with
    where it is; verl fetches others (hdfs://...) itself, so they are not read here."""
    from mad_eval.data.benchmarks import read_jsonl

    paths = [files] if isinstance(files, str) else list(files or [])
    for path in paths:
        path = str(path)
        if not os.path.isfile(path):
            continue
        if path.endswith(".parquet"):
            import pandas as pd

            try:  # the two columns read, not the prompts
                frame = pd.read_parquet(path, columns=["reward_model", "extra_info"])
            except (KeyError, ValueError):
                frame = pd.read_parquet(path)
            rows = cast(list[dict[str, Any]], frame.to_dict("records"))  # columns are text
            for i, row in enumerate(rows, 1):
                yield f"{path} row {i}", row
        elif path.endswith(".jsonl"):
            yield from read_jsonl(Path(path), path)


def check_train_files(cfg: Any) -> int:
    """Refuse, before any step, training rows the self-debate manager could not pair."""
    return check_rows(train_rows(get(cfg, "data.train_files")))
