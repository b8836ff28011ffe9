"""MLflow: one MLflow run per run folder, found again by its key (the tag mad_eval.key), so
logging the folder again updates that run; an experiment's cells are children of one parent
run. Talks to the tracking server through MlflowClient (no global active run); mlflow is
imported only when a run is logged."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from mad_eval.sanitize import redact
from mad_eval.tracking.base import Group, Tracker, TrackerFailed
from mad_eval.tracking.payload import Payload

DEFAULT_EXPERIMENT = "mad-eval"
KEY_TAG = "mad_eval.key"
GROUP_TAG = "mad_eval.group"
PARENT_TAG = "mlflow.parentRunId"
# MLflow's own bounds: a param value's characters, and entities in one log_batch call.
PARAM_CHARS = 6000
BATCH = 1000
PARAMS_PER_BATCH = 100
# An unreachable server is given up after one retry within this many seconds a request (MLflow
# otherwise retries for minutes); a user's own MLFLOW_HTTP_REQUEST_* settings win.
BOUNDED = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "15"}


class MlflowTracker(Tracker):
    name = "mlflow"
    package = "mlflow"
    keys: ClassVar[dict[str, str]] = {
        "tracking_uri": "the tracking server or store (default: MLFLOW_TRACKING_URI, else "
        "MLflow's default), e.g. http://host:5000 or sqlite:///mlflow.db",
        "experiment": f"the MLflow experiment (default {DEFAULT_EXPERIMENT})",
    }

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._client: Any = None
        self._parents: dict[str, str] = {}  # group key -> parent run id, this command's

    def where(self) -> str:
        uri = self.options.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI") or "default"
        return f"{redact(uri)}, experiment {self.experiment}"

    @property
    def experiment(self) -> str:
        return self.options.get("experiment") or DEFAULT_EXPERIMENT

    def log(self, payload: Payload, files: Path, group: Group | None) -> str:
        try:
            with _bounded():
                return self._log(payload, files, group)
        except TrackerFailed:
            raise
        except Exception as exc:
            raise TrackerFailed(f"{type(exc).__name__}: {exc}") from None

    def _log(self, payload: Payload, files: Path, group: Group | None) -> str:
        from mlflow.entities import Metric, Param

        client = self.client()
        experiment = self._experiment_id(client)
        tags = {KEY_TAG: payload.key, "mad_eval.folder": payload.name}
        if group is not None:
            tags[PARENT_TAG] = self._parent(client, experiment, group)
        found = client.search_runs(
            [experiment], filter_string=f"tags.`{KEY_TAG}` = '{payload.key}'", max_results=1
        )
        if found:  # sent before: what it holds is not sent twice
            run_id, had = found[0].info.run_id, found[0]
            for key, value in tags.items():
                client.set_tag(run_id, key, value)
        else:
            made = client.create_run(experiment, run_name=payload.name, tags=tags)
            run_id, had = made.info.run_id, None
        now = int(time.time() * 1000)
        # MLflow never changes a param once logged: a folder's config stays what it was.
        known = set(had.data.params) if had else set()
        params = [Param(k, v) for k, v in flatten(payload.config).items() if k not in known]
        latest = dict(had.data.metrics) if had else {}
        metrics = [Metric(k, v, now, 0) for k, v in payload.metrics.items() if latest.get(k) != v]
        for key, points in payload.series.items():
            held = set()
            if had and key in latest:
                held = {(m.step, m.value) for m in client.get_metric_history(run_id, key)}
            metrics += [Metric(key, v, now, step) for step, v in points if (step, v) not in held]
        for start in range(0, len(params), PARAMS_PER_BATCH):
            client.log_batch(run_id, params=params[start : start + PARAMS_PER_BATCH])
        for start in range(0, len(metrics), BATCH):
            client.log_batch(run_id, metrics=metrics[start : start + BATCH])
        for name, frame in payload.tables.items():  # replaced whole (log_table appends rows)
            text = frame.to_json(orient="split", index=False)
            client.log_text(run_id, text, f"tables/{name}.json")
        client.log_artifacts(run_id, str(files), "run")
        client.set_terminated(run_id)
        return str(run_id)

    def client(self) -> Any:
        if self._client is None:
            from mlflow import MlflowClient

            self._client = MlflowClient(tracking_uri=self.options.get("tracking_uri") or None)
        return self._client

    def _experiment_id(self, client: Any) -> str:
        found = client.get_experiment_by_name(self.experiment)
        return str(found.experiment_id if found else client.create_experiment(self.experiment))

    def _parent(self, client: Any, experiment: str, group: Group) -> str:
        """The group's parent run: found by its tag, else made (and ended in close())."""
        key = hashlib.sha256(f"{group.name}\n{group.source}".encode()).hexdigest()[:16]
        if key not in self._parents:
            found = client.search_runs(
                [experiment], filter_string=f"tags.`{GROUP_TAG}` = '{key}'", max_results=1
            )
            if found:
                self._parents[key] = found[0].info.run_id
            else:
                tags = {GROUP_TAG: key, "mad_eval.source": group.source}
                made = client.create_run(experiment, run_name=group.name, tags=tags)
                self._parents[key] = made.info.run_id
        return self._parents[key]

    def close(self) -> None:
        if self._client is None:
            return
        with _bounded():
            for run_id in self._parents.values():
                self._client.set_terminated(run_id)


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as MLflow params: config.model = "sim", a list as its JSON, each value
    cut to MLflow's bound."""
    found: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found |= flatten(value, f"{name}.")
        else:
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            found[name] = text[:PARAM_CHARS]
    return found


@contextlib.contextmanager
def _bounded() -> Iterator[None]:
    """BOUNDED's settings while MLflow is asked, where the user set none; restored after."""
    added = {k: v for k, v in BOUNDED.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)
