"""`serve:CHECKPOINT`: a checkpoint that mad-eval serves itself with `vllm serve`
(mad_eval.serving starts the servers and gives the run their URLs); to the run it is an
OpenAI-compatible server asked for the checkpoint's served name."""

from __future__ import annotations

from dataclasses import replace

from mad_eval.backends.base import BackendError, Where, served_name
from mad_eval.backends.openai_backend import TYPE as OPENAI
from mad_eval.backends.openai_backend import OpenAIBackend


def _build(spec: str, checkpoint: str, where: Where) -> OpenAIBackend:
    if where.base_url is None:
        raise BackendError(
            f"'{spec}' has no server: serve: models are started by mad-eval run, single and "
            "experiment; elsewhere give openai:NAME --base-url URL."
        )
    name = served_name(checkpoint)
    return OpenAIBackend(name, where.base_url, where.timeout, where.api, where.render)


# What the run sees is an OpenAI-compatible server: the same capabilities as openai:.
TYPE = replace(
    OPENAI,
    name="serve",
    usage="serve:<checkpoint> for a checkpoint mad-eval serves with vllm serve",
    build=_build,
)
