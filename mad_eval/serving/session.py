"""A `serve:` model for one run (`mad-eval run`, `single`, `mad_eval.run`): its settings
checked before anything starts, its replicas served around the run's work."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mad_eval.progress import Listener
from mad_eval.serving.installation import NO_VLLM, has_vllm
from mad_eval.serving.launch import (
    LocalServer,
    Server,
    ServerError,
    first_error,
    first_exit,
    replicas,
    why_it_ended,
)
from mad_eval.serving.pool import gpu_pool
from mad_eval.serving.spec import (
    ServeSpec,
    is_served,
    parse_serve,
    place,
    runs_remote_code,
    shown,
)
from mad_eval.settings.config import ConfigError

# Where a run is planned (and checked) before its servers exist: never asked.
PLACEHOLDER = "http://127.0.0.1:9/v1"
RESTARTS = 2  # a server that exits mid-run is started again this many times at most


@dataclass(frozen=True)
class Serving:
    """A run's served model: what to serve, and each replica's GPUs."""

    spec: ServeSpec
    placement: list[list[int]]
    make: Callable[..., Server] = LocalServer  # or a RayServer factory (--ray)

    def commands(self) -> list[str]:
        """Each replica's `vllm serve` command as a dry run shows it (its port is picked as
        it starts; secrets hidden), and how it starts when no `vllm` on PATH serves."""
        launcher = self.spec.launcher or ""
        how = f" (started as {launcher})" if launcher.startswith("python -m") else ""
        return [shown(self.spec.command("PORT")) + how for _ in self.placement]

    def placeholder(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The run's settings with stand-in endpoints, to check them all before serving."""
        return {**settings, "base_url": [PLACEHOLDER] * len(self.placement)}

    async def run(
        self,
        work: Callable[[list[str]], Awaitable[None]],
        folder: Path,
        listener: Listener,
        restarts: int = RESTARTS,
        task: str = "",
        **limits: float,
    ) -> None:
        """Serve, do `work(urls)`, stop the servers whatever happens; their logs in `folder`.
        A server that exits mid-run stops the work (which records nothing unfinished) and
        all are started again, `restarts` times at most, the work resuming on them. `task`
        says what the work is, once the servers are busy with it."""
        label = self.spec.label
        if runs_remote_code(self.spec.args):  # an experiment file may come from anyone
            listener.warn(
                "warning",
                f"{label} is served with --trust-remote-code: vllm runs the Python code that "
                f"comes with {self.spec.base or self.spec.checkpoint}.",
            )
        last_error = None  # the first error of the server's last death
        for attempt in range(restarts + 1):
            async with replicas(
                self.spec, self.placement, folder, listener, self.make, **limits
            ) as servers:
                listener.say(f"Server {label} busy" + (f": {task}." if task else "."))
                dead = await _until_done_or_exit(work([s.url or "" for s in servers]), servers)
            if dead is None:
                return
            code, error = dead.exit_code, first_error(dead.log)
            if error is not None and error == last_error:  # the same requests, the same crash
                raise ServerError(
                    f"the vllm server for {label} exited by itself mid-run (code {code}) twice "
                    f"on the same error, so it is not started again; see {dead.log}"
                    f"{why_it_ended(dead.log)}"
                )
            if attempt == restarts:
                raise ServerError(
                    f"the vllm server for {label} exited by itself mid-run (code {code}) "
                    f"{restarts + 1} times; see {dead.log}{why_it_ended(dead.log)}"
                )
            last_error = error
            listener.say(
                f"Server {label} exited by itself mid-run (code {code}); starting again "
                f"({attempt + 1} of {restarts}), the run resumes; log: {dead.log}"
            )


async def _until_done_or_exit(work: Awaitable[None], servers: list[Server]) -> Server | None:
    """Run `work` to its end (None; its error raised), or until a server exits (that server;
    the work cancelled, and waited for)."""
    job, watch = asyncio.ensure_future(work), asyncio.ensure_future(first_exit(servers))
    try:
        done, _ = await asyncio.wait({job, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled from outside: nothing is left running
        for task in (job, watch):
            task.cancel()
        await asyncio.gather(job, watch, return_exceptions=True)
        raise
    if job in done:  # the work ended (even as a server went): its outcome stands
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
        job.result()
        return None
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)
    return watch.result()


def prepare(
    settings: Mapping[str, Any],
    serving: Mapping[str, Any] | Sequence[str] | None,
    gpus: str | Sequence[int] | None,
    dry_run: bool = False,
) -> Serving | None:
    """The run's Serving if its model is serve:CHECKPOINT (None otherwise), every setting
    checked in one sentence before any server starts (and vllm found, unless `dry_run`)."""
    model = settings.get("model")
    if not is_served(model):
        if serving:
            raise ConfigError(f"--serving is for a serve:CHECKPOINT model, not {model or 'sim'}.")
        if gpus is not None:
            raise ConfigError(f"--gpus is for a serve:CHECKPOINT model, not {model or 'sim'}.")
        return None
    assert isinstance(model, str)
    if settings.get("base_url"):
        raise ConfigError(
            f"--base-url (or OPENAI_BASE_URL) is for openai: models; {model} is served on its "
            "own URLs."
        )
    length = settings.get("max_model_len")
    # The user's own settings first (a mistyped checkpoint), then what the machine lacks.
    spec = parse_serve(model, serving, max_model_len=length if type(length) is int else None)
    placement = place(spec, gpu_pool(gpus))
    if not dry_run:
        require_vllm(model)
    return Serving(spec, placement)


def require_vllm(what: str) -> None:
    """A vLLM to serve with (installation.launcher), or one sentence saying to install it."""
    if not has_vllm():
        raise ConfigError(f"cannot serve {what}: {NO_VLLM}")
