"""A `serve:` model for one run (`mad-eval run`, `single`, `mad_eval.run`): its settings
checked before anything starts, its replicas served around the run's work."""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mad_eval.progress import Listener
from mad_eval.serving.launch import served
from mad_eval.serving.pool import gpu_pool
from mad_eval.serving.spec import ServeSpec, is_served, parse_serve, place
from mad_eval.setup.config import ConfigError

# Where a run is planned (and checked) before its servers exist: never asked.
PLACEHOLDER = "http://127.0.0.1:9/v1"


@dataclass(frozen=True)
class Serving:
    """A run's served model: what to serve, and each replica's GPUs."""

    spec: ServeSpec
    placement: list[list[int]]

    def placeholder(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The run's settings with stand-in endpoints, to check them all before serving."""
        return {**settings, "base_urls": [PLACEHOLDER] * len(self.placement)}

    async def run(
        self,
        work: Callable[[list[str]], Awaitable[None]],
        folder: Path,
        listener: Listener,
        **limits: float,
    ) -> None:
        """Serve, do `work(urls)`, stop the servers whatever happens; their logs in `folder`."""
        async with served(self.spec, self.placement, folder, listener, **limits) as urls:
            await work(urls)


def prepare(
    settings: Mapping[str, Any],
    serving: Mapping[str, Any] | Sequence[str] | None,
    gpus: str | Sequence[int] | None,
) -> Serving | None:
    """The run's Serving if its model is serve:CHECKPOINT (None otherwise), every setting
    checked in one sentence before any server starts."""
    model = settings.get("model")
    if not is_served(model):
        if serving:
            raise ConfigError(f"--serving is for a serve:CHECKPOINT model, not {model or 'sim'}.")
        if gpus is not None:
            raise ConfigError(f"--gpus is for a serve:CHECKPOINT model, not {model or 'sim'}.")
        return None
    assert isinstance(model, str)
    if shutil.which("vllm") is None:
        raise ConfigError(
            f"cannot serve {model}: no vllm command found; install vllm or put it on PATH."
        )
    if settings.get("base_urls"):
        raise ConfigError(
            f"--base-url (or OPENAI_BASE_URL) is for openai: models; {model} is served on its "
            "own URLs."
        )
    length = settings.get("max_model_len")
    spec = parse_serve(model, serving, max_model_len=length if type(length) is int else None)
    return Serving(spec, place(spec, gpu_pool(gpus)))
