"""One OpenAI-compatible endpoint (vLLM, SGLang, TGI, the OpenAI API), one attempt per call:
retries, replicas and limits are the guard's job (base.Guarded).

Requests go out through aiohttp directly, one keep-alive connection pool per endpoint, with
orjson for the bodies: the openai SDK's request and response layers cost more CPU per
request than a fast server takes to answer (perf/client.py). Errors keep the SDK's names
(RateLimitError, APIConnectionError, ...), so records read as they did.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
import urllib.request
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
import orjson
from yarl import URL

from mad_eval.backends.base import (
    DISCONNECTED,
    GARBLED,
    RATE_LIMITED,
    SERVER_ERROR,
    TIMED_OUT,
    Backend,
    BackendError,
    BackendType,
    Generation,
    Render,
    Request,
    RequestError,
    TransientError,
    Where,
    answered,
)
from mad_eval.backends.bodies import MAX_REPLY_BYTES, ReplyTooLarge, parse_json, read_body
from mad_eval.grading.reasoning import ends_in_reasoning
from mad_eval.records import shown
from mad_eval.sanitize import printable, redact, valid_text

OPENAI_API = "https://api.openai.com/v1"
# Local servers (vLLM) accept any key; the OpenAI API needs one.
PLACEHOLDER_KEY = "EMPTY"
# Status codes worth another try: request timeout, conflict, rate limit, server errors.
RETRYABLE = {408, 409, 429}
# The names the openai SDK gives these statuses, which records have always used.
STATUS_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
}


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
        render: Render | None = None,
    ):
        if api == "completions" and render is None:
            raise ValueError("the completions API needs a function that renders the prompt")
        self.model = model
        self.aliases: frozenset[str] = frozenset()  # its other names on the server
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
        try:
            root = URL((self.base_url or OPENAI_API).rstrip("/"))
        except ValueError as exc:
            raise BackendError(
                f"base URL '{redact(self.base_url)}' cannot be read ({exc}); percent-encode "
                "the reserved characters of a user name or password (/ as %2F, ? as %3F, "
                "# as %23, @ as %40)."
            ) from None
        authorization = f"Bearer {api_key or PLACEHOLDER_KEY}"
        if root.user is not None:  # a proxy's login in the URL goes as basic auth instead
            login = f"{root.user}:{root.password or ''}".encode("latin-1")
            authorization = f"Basic {base64.b64encode(login).decode()}"
            root = root.with_user(None)
        self.url = f"{root}/chat/completions" if api == "chat" else f"{root}/completions"
        self.models_url = f"{root}/models"
        self.headers = {"Authorization": authorization, "Content-Type": "application/json"}
        self.proxy = proxy_for(root)
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def session(self) -> aiohttp.ClientSession:
        """The endpoint's connection pool, made in the running event loop on first use. It
        has no limit of its own: the guard's slots bound the requests in flight, so the pool
        holds at most that many connections."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            # Not trust_env: aiohttp would then look up ~/.netrc and the proxy in a thread on
            # every request (twice a turn's CPU); the proxy is found once, in __init__.
            self._session = aiohttp.ClientSession(connector=connector, timeout=self.timeout)
            self._loop = loop
        return self._session

    async def generate(self, request: Request) -> Generation:
        s = request.sampling
        extra = dict(request.extra_body)
        opened = False
        body: dict[str, Any] = {"model": self.model}
        if self.api == "chat":
            body["messages"] = request.messages
        else:
            assert self.render is not None
            # The chat template's switches go into our rendering of the prompt.
            body["prompt"] = prompt = self.render(
                request.messages, extra.pop("chat_template_kwargs", {})
            )
            opened = ends_in_reasoning(prompt)
        body.update(seed=s.seed, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_tokens)
        body.update(extra)
        start = time.perf_counter()
        status, headers, raw = await self._post(body)
        if status != 200:
            message = f"{_status_name(status)}: HTTP {status}: {_error_message(raw)}"
            if status in RETRYABLE or status >= 500:
                why = RATE_LIMITED if status == 429 else SERVER_ERROR
                raise TransientError(message, retry_after(headers), why)
            raise RequestError(message)
        generation = read_reply(raw, self.api, opened)
        generation.latency = time.perf_counter() - start
        if not served_as(generation.served_model, self.model, self.aliases):
            raise RequestError(
                "ModelMismatch: the server answered with model "
                f"{shown(generation.served_model, 80)}, "
                f"not {shown(self.model, 80)}"
            )
        return generation

    async def _post(self, body: dict[str, Any]) -> tuple[int, Any, bytes]:
        """(status, headers, body bytes) of one POST; a connection that fails or a server
        that does not answer in time is transient, a body past MAX_REPLY_BYTES a RequestError."""
        try:
            async with self.session().post(
                self.url, data=_dumps(body), headers=self.headers, proxy=self.proxy
            ) as response:
                return response.status, response.headers, await read_body(response)
        except TimeoutError as exc:  # aiohttp's own time limit (the guard's is a cancel)
            raise TransientError("APITimeoutError: Request timed out.", why=TIMED_OUT) from exc
        except aiohttp.ClientError as exc:
            message = f"APIConnectionError: {_describe(exc)}"
            raise TransientError(message, why=DISCONNECTED) from exc

    async def check(self) -> None:
        where = redact(self.base_url) if self.base_url else "the OpenAI API"
        try:
            async with self.session().get(
                self.models_url, headers=self.headers, proxy=self.proxy
            ) as response:
                status, body = response.status, await read_body(response)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise BackendError(
                f"no OpenAI-compatible server answers at {where} ({_describe(exc)}); "
                "start it or fix --base-url."
            ) from exc
        except ReplyTooLarge:
            raise BackendError(
                f"the server at {where} answered its model list with more than "
                f"{MAX_REPLY_BYTES >> 20} MiB; check that it is an OpenAI-compatible server."
            ) from None
        if status == 401:
            raise BackendError(f"the server at {where} refused the API key; set OPENAI_API_KEY.")
        if status == 404:
            return  # a server without /models can still serve chat completions
        if status != 200:
            raise BackendError(
                f"the server at {where} answered its model list with HTTP {status} "
                f"({printable(_error_message(body))}); check that it is an OpenAI-compatible "
                "server."
            )
        try:
            data = parse_json(body)["data"]
            served = {str(m["id"]): m for m in data}
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise BackendError(
                f"the server at {where} answered its model list with something else: "
                f"{_first_bytes(body)}; check that it is an OpenAI-compatible server."
            ) from None
        if served and self.model not in served:
            names = ", ".join(repr(printable(name)) for name in list(served)[:10])
            raise BackendError(
                f"the server at {where} does not serve model '{self.model}'; it serves: {names}."
            )
        length = served.get(self.model, {}).get("max_model_len")
        self.max_model_len = length if type(length) is int else None
        # vLLM serves one model under several names and answers under the first of them.
        root = served.get(self.model, {}).get("root")
        if root is not None:
            self.aliases = frozenset(n for n, m in served.items() if m.get("root") == root)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def proxy_for(url: URL) -> str | None:
    """The proxy HTTP(S)_PROXY names for `url`, unless NO_PROXY exempts its host: what the
    openai SDK honoured, read once per endpoint."""
    if url.host is None or urllib.request.proxy_bypass(url.host):
        return None
    return urllib.request.getproxies().get(url.scheme or "")


def _dumps(body: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # a lone surrogate from a benchmark file: orjson refuses, JSON escapes it
        return json.dumps(body).encode()


def _status_name(status: int) -> str:
    return STATUS_NAMES.get(status) or (
        "InternalServerError" if status >= 500 else "APIStatusError"
    )


def _error_message(body: bytes) -> str:
    """What an error body says: its `error.message` (OpenAI's and vLLM's shape), else its
    first bytes."""
    try:
        data = parse_json(body)
    except (UnicodeDecodeError, ValueError):
        return _first_bytes(body)
    error = data.get("error", data) if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str) and error:
        return error
    return _first_bytes(body)


def _describe(exc: BaseException) -> str:
    """What failed, in the system's words where it has some ("Connection refused", "Name or
    service not known") rather than the client library's."""
    error = getattr(exc, "os_error", None)
    if isinstance(error, OSError):
        if error.errno and error.errno > 0:
            return os.strerror(error.errno)
        if error.strerror:
            return error.strerror
    return str(exc) or type(exc).__name__


# Where servers put a reply's reasoning: vLLM's field, and its older name (also SGLang's and
# DeepSeek's API).
REASONING_FIELDS = ("reasoning", "reasoning_content")


def read_reply(body: bytes, api: str, opened: bool = False) -> Generation:
    """The first choice of a 200 response body, its reasoning apart from its final content.
    A body that is not a JSON completion (an HTML error page from a proxy, cut or
    undecodable bytes, no choices, a content or refusal that is not text) is transient. A
    completion without text is the model's own answer, an unparsed one: counted, never
    dropped; a refusal (OpenAI's `refusal` field) is recorded as one. `opened`: the prompt
    we rendered ends inside a think block."""
    try:
        data = parse_json(body)
        choice = data["choices"][0]
        message = choice["message"] if api == "chat" else choice
        text = message["content"] if api == "chat" else message["text"]
        refusal = message.get("refusal")
        if not isinstance(text, str | None) or not isinstance(refusal, str | None):
            raise TypeError("not text")
        reasoning = next(
            (r for f in REASONING_FIELDS if isinstance(r := message.get(f), str) and r), None
        )
    except (UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise TransientError(
            f"BadResponse: HTTP 200 with a body that is not a {api} completion: "
            f"{_first_bytes(body)}",
            why=GARBLED,
        ) from None
    finish = choice.get("finish_reason")
    counts, invalid = read_usage(data.get("usage"))
    model = data.get("model")
    return answered(
        valid_text(text) if text is not None else None,
        valid_text(reasoning) if reasoning is not None else None,
        finish_reason=finish if isinstance(finish, str) else None,
        opened=opened,
        refusal=valid_text(refusal) if refusal else None,
        usage_invalid=invalid,
        served_model=model if isinstance(model, str) else None,
        **counts,
    )


# More tokens than any model reads or writes in one request: a count past it is no count.
MAX_TOKENS = 10**9


def read_usage(usage: object) -> tuple[dict[str, int | None], bool]:
    """The token counts of a reply's `usage`, and whether any it gave was no count (not a
    whole number from 0 to MAX_TOKENS: -5, "lots", 12.5, true): such a count is recorded as
    unknown (None), like one the server did not give."""
    fields: dict[str, int | None] = {
        "prompt_tokens": None,
        "completion_tokens": None,
        "reasoning_tokens": None,
    }
    if usage is None:
        return fields, False
    if not isinstance(usage, dict):
        return fields, True
    details = usage.get("completion_tokens_details")
    given = {
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "reasoning_tokens": details.get("reasoning_tokens") if isinstance(details, dict) else None,
    }
    invalid = not isinstance(details, dict | None)
    for name, value in given.items():
        if value is None:
            continue
        if type(value) is int and 0 <= value <= MAX_TOKENS:
            fields[name] = value
        else:
            invalid = True
    return fields, invalid


def served_as(served: str | None, requested: str, aliases: frozenset[str] = frozenset()) -> bool:
    """Whether a reply naming model `served` answers a request for `requested`: the same
    name, no name at all, another name the server lists for the same model, or a dated
    snapshot of it (gpt-4o -> gpt-4o-2024-08-06)."""
    if served is None or served == requested or served in aliases:
        return True
    return served.startswith(requested + "-") and served[len(requested) + 1 :][:1].isdigit()


def _first_bytes(body: bytes, limit: int = 80) -> str:
    """The start of a body, as an error message can show it: printable, with its length."""
    head = body[:limit].decode("utf-8", errors="replace")
    more = f"... ({len(body)} bytes)" if len(body) > limit else ""
    return printable(repr(head)) + more


def retry_after(headers: object) -> float | None:
    """Seconds from a Retry-After header (a number or an HTTP date), or None. A number is
    returned as the server wrote it (NaN, infinite, negative too): the guard's retry policy
    cuts it to its own bounds, and says so."""
    value = getattr(headers, "get", lambda _: None)("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


def _build(spec: str, model: str, where: Where) -> OpenAIBackend:
    return OpenAIBackend(model, where.base_url, where.timeout, where.api, where.render)


TYPE = BackendType(
    name="openai",
    usage="openai:<model> for an OpenAI-compatible server",
    build=_build,
    text_apis=frozenset({"completions"}),
    context_length=True,
    extra_body=True,
    tokenizer=True,
    needs_name=True,
    identity=("api",),
)
