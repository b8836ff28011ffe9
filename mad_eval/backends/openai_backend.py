"""Any OpenAI-compatible chat-completions server (vLLM, SGLang, TGI, the OpenAI API)."""

from __future__ import annotations

import os
import time

import openai

from mad_eval.backends.base import Backend, BackendError, Generation, Request

# Local servers (vLLM) accept any key; the client insists on having one.
PLACEHOLDER_KEY = "EMPTY"


class OpenAIBackend(Backend):
    def __init__(self, model: str, base_url: str | None, timeout: float = 600.0):
        self.model = model
        self.spec = f"openai:{model}"
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        if self.base_url and not self.base_url.startswith(("http://", "https://")):
            raise BackendError(
                f"base URL '{self.base_url}' needs a scheme, e.g. http://{self.base_url}."
            )
        api_key = os.environ.get("OPENAI_API_KEY")
        if not api_key and not self.base_url:
            raise BackendError(
                f"model '{self.spec}' needs a server: pass --base-url (or set OPENAI_BASE_URL) "
                "for a local server, or set OPENAI_API_KEY for the OpenAI API."
            )
        self.client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=api_key or PLACEHOLDER_KEY,
            timeout=timeout,
            max_retries=2,
        )

    async def generate(self, request: Request) -> Generation:
        s = request.sampling
        start = time.perf_counter()
        response = await self.client.chat.completions.create(
            model=self.model,
            messages=request.messages,  # type: ignore[arg-type]
            temperature=s.temperature,
            top_p=s.top_p,
            max_tokens=s.max_tokens,
            seed=s.seed,
        )
        latency = time.perf_counter() - start
        if not response.choices:
            raise ValueError("the server returned no choices")
        choice = response.choices[0]
        usage = response.usage
        return Generation(
            text=choice.message.content or "",
            finish_reason=choice.finish_reason,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            latency=latency,
        )

    async def check(self) -> None:
        where = self.base_url or "the OpenAI API"
        try:
            models = await self.client.models.list()
        except openai.APIConnectionError as exc:
            raise BackendError(
                f"no OpenAI-compatible server answers at {where} ({exc}); "
                "start it or fix --base-url."
            ) from exc
        except openai.AuthenticationError as exc:
            raise BackendError(
                f"the server at {where} refused the API key; set OPENAI_API_KEY."
            ) from exc
        except openai.NotFoundError:
            return  # a server without /models can still serve chat completions
        served = {m.id: m for m in models.data}
        if served and self.model not in served:
            raise BackendError(
                f"the server at {where} does not serve model '{self.model}'; "
                f"it serves: {', '.join(list(served)[:10])}."
            )
        length = getattr(served.get(self.model), "max_model_len", None)
        self.max_model_len = length if isinstance(length, int) else None

    async def aclose(self) -> None:
        await self.client.close()
