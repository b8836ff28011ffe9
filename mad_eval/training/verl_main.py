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


def main() -> None:
    import hydra
    from verl.trainer import main_ppo

    @hydra.main(
        config_path="pkg://verl.trainer.config", config_name="ppo_trainer", version_base=None
    )
    def run(config: Any) -> None:
        main_ppo.main.__wrapped__(checked(config))  # verl's main, under hydra.main's wrapper

    run()


if __name__ == "__main__":
    main()
