"""verl's PPO main behind mad-eval's config check: a key verl 0.9.1 would ignore, or a
self-debate setting that cannot work, stops here in one sentence before Ray starts.

    python -m mad_eval.training.verl_main <verl's hydra overrides> [+self_debate.KEY=VALUE ...]

It composes verl's own `ppo_trainer` config (verl.trainer.config) exactly as
`python -m verl.trainer.main_ppo` does, runs `verl_config.check_config`, then calls verl's main
with the composed config. verl is imported only when it runs.
"""

from __future__ import annotations

import sys
from typing import Any

from mad_eval.training.errors import TrainingError
from mad_eval.training.verl_config import check_config, check_train_files


def checked(config: Any) -> Any:
    """The config, or exit 2 with the check's sentence (as mad-eval's commands end)."""
    try:
        if check_config(config) is not None:  # the self-debate manager: its rows must pair
            check_train_files(config)
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return config


# hydra's own options that take a value; every other argument but a flag is an override.
_VALUED = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
           "--config-dir", "-cd", "--info", "-i", "--experimental-rerun"}  # fmt: skip


def printed_overrides(argv: list[str]) -> list[str] | None:
    """The overrides of a call that asks hydra to print the config (`--cfg job`), which hydra
    does without running the task, so without the check; None for a call that runs."""
    if not any(a in ("--cfg", "-c") or a.startswith("--cfg=") for a in argv):
        return None
    overrides, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED:
            skip = True
        elif not arg.startswith("-"):
            overrides.append(arg)
    return overrides


def main() -> None:
    import hydra
    from verl.trainer import main_ppo

    overrides = printed_overrides(sys.argv[1:])
    if overrides is not None:  # the same check before hydra prints what it composed
        from hydra import compose, initialize_config_module

        with initialize_config_module("verl.trainer.config", version_base=None):
            checked(compose("ppo_trainer", overrides=overrides))

    @hydra.main(
        config_path="pkg://verl.trainer.config", config_name="ppo_trainer", version_base=None
    )
    def run(config: Any) -> None:
        main_ppo.main.__wrapped__(checked(config))  # verl's main, under hydra.main's wrapper

    run()


if __name__ == "__main__":
    main()
