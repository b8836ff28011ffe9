"""Weights & Biases: one W&B run per run folder, its id the folder's key, so logging the
folder again resumes that run. wandb is imported only when a run is logged; W&B's own
settings (WANDB_MODE=offline, WANDB_DIR, WANDB_API_KEY, `wandb login`) apply as usual."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from mad_eval.tracking.base import Group, Tracker, TrackerFailed
from mad_eval.tracking.payload import Payload

DEFAULT_PROJECT = "mad-eval"
# Seconds W&B may take to start a run (its default is 90) or wait at a login prompt.
INIT_TIMEOUT_S = 30.0


class WandbTracker(Tracker):
    name = "wandb"
    package = "wandb"
    keys: ClassVar[dict[str, str]] = {
        "project": f"the W&B project (default {DEFAULT_PROJECT})",
        "entity": "the W&B team or user (default: the API key's)",
        "group": "the W&B group (default: the experiment's name; none for one run)",
        "dir": "where W&B keeps its local files (default: WANDB_DIR, else ./wandb)",
    }

    def where(self) -> str:
        place = "/".join(filter(None, [self.options.get("entity"), self.project]))
        mode = os.environ.get("WANDB_MODE", "").strip().lower()
        return f"project {place}" + (f", {mode}" if mode in ("offline", "disabled") else "")

    @property
    def project(self) -> str:
        return self.options.get("project") or DEFAULT_PROJECT

    def log(self, payload: Payload, files: Path, group: Group | None) -> str:
        try:
            import wandb
        except ImportError as exc:
            raise TrackerFailed(f"wandb cannot be imported: {exc}") from None
        try:
            run = wandb.init(
                project=self.project,
                entity=self.options.get("entity") or None,
                group=self.options.get("group") or (group.name if group else None),
                name=payload.name,
                id=payload.key,
                resume="allow",
                reinit="create_new",  # a caller's own W&B run (a training loop's) goes on
                job_type="eval",
                config=payload.config,
                dir=self.options.get("dir") or None,
                settings=wandb.Settings(
                    console="off",
                    silent=True,
                    init_timeout=INIT_TIMEOUT_S,
                    login_timeout=INIT_TIMEOUT_S,
                ),
            )
        except Exception as exc:
            raise TrackerFailed(f"{type(exc).__name__}: {exc}") from None
        try:
            _send(wandb, run, payload, files)
        except Exception as exc:
            run.finish(exit_code=1)
            raise TrackerFailed(f"{type(exc).__name__}: {exc}") from None
        run.finish()
        return str(run.id)


def _send(wandb: Any, run: Any, payload: Payload, files: Path) -> None:
    """The run's numbers as its summary, the per-round series by step (the round), then the
    tables, and the folder as an artifact. A resumed W&B run keeps the steps it has (W&B never
    rewrites history), so its series stay the first ones sent; the tables come at the step
    after its last, and its summary and config are the new ones."""
    run.config.update(payload.config, allow_val_change=True)
    steps: dict[int, dict[str, Any]] = {}
    for name, points in payload.series.items():
        for step, value in points:
            steps.setdefault(step, {})[name] = value
    for step in sorted(steps):
        run.log(steps[step], step=step)
    if payload.tables:
        run.log({f"tables/{name}": wandb.Table(dataframe=t) for name, t in payload.tables.items()})
    run.summary.update(payload.metrics)
    artifact = wandb.Artifact(f"mad-eval-{payload.key}", type="mad-eval-run")
    artifact.add_dir(str(files))
    run.log_artifact(artifact)
