"""One OpenAI-compatible endpoint (vLLM, SGLang, TGI, the OpenAI API), one attempt per call:
retries, replicas and limits are the guard's job (base.Guarded)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

import openai

from mad_eval.backends.base import Backend, BackendError, Generation, Request, TransientError
from mad_eval.prompts import Messages

# Local servers (vLLM) accept any key; the client insists on having one.
PLACEHOLDER_KEY = "EMPTY"
# Status codes worth another try: request timeout, conflict, rate limit, server errors.
RETRYABLE = {408, 409, 429}


class OpenAIBackend(Backend):
    """`api="chat"` sends the messages to /chat/completions, where the server applies the
    model's chat template; `api="completions"` sends `render(messages)` to /completions, so
    the prompt text is the one we rendered and recorded (base checkpoints, custom templates)."""

    def __init__(
        self,
        model: str,
        base_url: str | None,
        timeout: float = 600.0,
        api: str = "chat",
        render: Callable[[Messages], str] | None = None,
    ):
        if api == "completions" and render is None:
            raise ValueError("the completions API needs a function that renders the prompt")
        self.model = model
        self.spec = f"openai:{model}"
        self.api = api
        self.render = render
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
            max_retries=0,  # the guard retries, with backoff and Retry-After, on any replica
        )

    async def generate(self, request: Request) -> Generation:
        s = request.sampling
        sampling = dict(temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens)
        start = time.perf_counter()
        try:
            if self.api == "chat":
                response = await self.client.chat.completions.create(
                    model=self.model,
                    messages=request.messages,  # type: ignore[arg-type]
                    seed=s.seed,
                    **sampling,  # type: ignore[arg-type]
                )
            else:
                assert self.render is not None
                response = await self.client.completions.create(
                    model=self.model,
                    prompt=self.render(request.messages),
                    seed=s.seed,
                    **sampling,  # type: ignore[arg-type]
                )
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code in RETRYABLE or exc.status_code >= 500:
                raise TransientError(
                    f"{type(exc).__name__}: HTTP {exc.status_code}: {_message(exc)}",
                    retry_after(exc.response.headers),
                ) from exc
            raise
        latency = time.perf_counter() - start
        if not response.choices:
            raise ValueError("the server returned no choices")
        choice = response.choices[0]
        text = choice.message.content if self.api == "chat" else choice.text  # type: ignore[union-attr]
        usage = response.usage
        return Generation(
            text=text or "",
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


def retry_after(headers: object) -> float | None:
    """Seconds from a Retry-After header (a number or an HTTP date), or None."""
    value = getattr(headers, "get", lambda _: None)("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return exc.message
