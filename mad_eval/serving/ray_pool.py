"""Servers placed on a Ray cluster (`--ray ADDRESS|auto`): `RayServer`, LocalServer's
interface over a Ray actor that asks for the server's GPUs and runs a LocalServer on the
node Ray picks, listening on that node's IP.

The actor is not detached: it dies with the driver (mad-eval), and its server, started with
the parent-death signal from the actor's own event-loop thread, dies with the actor. Ray is
imported only here, and this module only when --ray is given."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mad_eval.errors import UserError
from mad_eval.serving.launch import LocalServer, ServerError
from mad_eval.serving.spec import ServeSpec
from mad_eval.store.files import write_atomically

ACTOR_CPUS = 0.1  # the actor only waits on its server; vLLM's own CPUs are not Ray's to count
LOG_BYTES = 8 << 20  # a remote log is copied back up to its last 8 MiB


class RayError(UserError):
    """--ray cannot be used: one sentence saying why."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayError(
            "--ray needs Ray on this machine: pip install 'ray[default]' (or mad-eval[ray])."
        ) from None
    return ray


@contextlib.contextmanager
def cluster(address: str) -> Iterator[list[int]]:
    """Join the Ray cluster at `address` ("auto": the one this node belongs to) unless this
    process already has, and leave it after; the cluster's GPUs as a pool of slots (which
    GPU a server gets is Ray's choice: the slots only bound how many run at once)."""
    ray = _ray()
    if not address or not address.strip():
        raise RayError("--ray takes a cluster address (HOST:PORT or ray://HOST:PORT) or auto.")
    joined = not ray.is_initialized()
    if joined:
        try:
            ray.init(address=address.strip(), log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayError(f"--ray {address}: cannot join the Ray cluster ({exc}).") from None
    try:
        yield list(range(int(ray.cluster_resources().get("GPU", 0))))
    finally:
        if joined:
            ray.shutdown()


def driver_node() -> str:
    """This process's Ray node: a server placed elsewhere keeps its log on its own node."""
    return _ray().get_runtime_context().get_node_id()


def refuse_unplaceable(specs: Iterable[ServeSpec], address: str) -> None:
    """A server's GPUs must be on one node: a model wider than the cluster's largest node
    would wait for a place forever, so it is refused first."""
    ray = _ray()
    largest = max(
        (int(node["Resources"].get("GPU", 0)) for node in ray.nodes() if node.get("Alive")),
        default=0,
    )
    for spec in specs:
        if spec.gpus > largest:
            raise RayError(
                f"{spec.label} needs {spec.gpus} GPUs on one node (tensor_parallel x "
                f"data_parallel) but the largest node of the Ray cluster {address} has {largest}."
            )


class _Actor:
    """Runs on the node Ray places it: one LocalServer on the GPUs Ray gave it."""

    def __init__(
        self, spec: ServeSpec, log: str, driver_node: str, start_timeout: float, grace: float
    ):
        import ray

        context = ray.get_runtime_context()
        self.local = context.get_node_id() == driver_node  # the experiment folder is here
        if not self.local:  # another node: its own log, copied back at stop
            folder = Path(tempfile.gettempdir()) / "mad-eval-servers" / context.get_actor_id()
            log = str(folder / Path(log).name)
        gpus = [int(g) for g in ray.get_gpu_ids()]
        host = ray.util.get_node_ip_address()
        self.server = LocalServer(
            spec, gpus, Path(log), start_timeout=start_timeout, grace=grace, host=host
        )

    async def start(self) -> tuple[str, str, list[int], str]:
        """("ok", url, GPUs, where the log is) or ("error", sentence, GPUs, log)."""
        try:
            url = await self.server.start()
        except ServerError as error:  # its message and log's error, as the driver raises them
            return "error", str(error), self.server.gpus, str(self.server.log)
        return "ok", url, self.server.gpus, str(self.server.log)

    def alive(self) -> bool:
        return self.server.alive()

    async def stop(self) -> tuple[int | None, bytes | None]:
        """Stop the server; its exit code, and its log's bytes when the driver cannot see it."""
        await self.server.stop()
        if self.local:
            return self.server.exit_code, None
        data = None
        with contextlib.suppress(OSError), self.server.log.open("rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - LOG_BYTES, 0))
            data = f.read()
        shutil.rmtree(self.server.log.parent, ignore_errors=True)  # copied to the driver
        return self.server.exit_code, data


class RayServer:
    """LocalServer's start()/stop()/alive() for a server Ray places on a node with
    len(gpus) free GPUs (the ids given only count them: Ray picks which)."""

    def __init__(
        self,
        spec: ServeSpec,
        gpus: Sequence[int],
        log: Path,
        *,
        start_timeout: float = 900,
        grace: float = 30,
    ):
        self.spec, self.log, self.want = spec, Path(log), len(gpus)
        self.start_timeout, self.grace = start_timeout, grace
        self.gpus: list[int] = []  # Ray's ids on its node, once placed
        self.url: str | None = None
        self.exit_code: int | None = None
        self.remote_log: str | None = None  # where the log is on another node
        self.actor: Any = None
        self._alive = False

    @property
    def where(self) -> str:
        return f"on the Ray cluster, {self.want} GPU(s)" if self.want else "on the Ray cluster"

    async def start(self) -> str:
        """Place the actor, start its server and wait until it answers; its base URL."""
        ray = _ray()
        actor_class = ray.remote(_Actor)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.actor = actor_class.options(
            num_gpus=self.want, num_cpus=ACTOR_CPUS, max_restarts=0, lifetime="non_detached"
        ).remote(
            self.spec,
            str(self.log.resolve()),  # the worker's directory is not this one
            driver_node(),
            self.start_timeout,
            self.grace,
        )
        try:
            state, said, self.gpus, where = await self.actor.start.remote()
        except BaseException:
            await self.stop()
            raise
        if state != "ok":
            await self.stop()
            raise ServerError(said)
        if where != str(self.log):
            self.remote_log = where
        self.url, self._alive = said, True
        return said

    def alive(self) -> bool:
        """Whether its server still runs (a dead actor or node: no)."""
        if not self._alive or self.actor is None:
            return False
        ray = _ray()
        try:
            self._alive = bool(ray.get(self.actor.alive.remote(), timeout=30))
        except Exception:  # the actor or its node died
            self._alive = False
        return self._alive

    async def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after grace), bring its log back if it ran on
        another node, and kill the actor; idempotent."""
        actor, self.actor, self._alive = self.actor, None, False
        if actor is None:
            return
        ray = _ray()
        try:
            self.exit_code, data = await actor.stop.remote()
            if data is not None:
                write_atomically(self.log, data, "its log is lost.", durable=False)  # never a link
        except Exception:  # a dead actor took its server with it
            pass
        finally:
            ray.kill(actor, no_restart=True)

    def kill(self) -> None:
        """Kill the actor at once (its server goes with it): the last resort."""
        if self.actor is not None:
            with contextlib.suppress(Exception):
                _ray().kill(self.actor, no_restart=True)
            self.actor = None
