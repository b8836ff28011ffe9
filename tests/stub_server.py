"""A tiny OpenAI-compatible chat server on localhost for end-to-end tests.

It answers every chat or completions request with a boxed number derived from the
request's seed (or what `reply` writes), logs each request body, and can be told to fail
chosen requests with HTTP 500 every time (`fail_if`) or to misbehave on chosen attempts
(`fault`): answer 429 or 503 (with a Retry-After header when `retry_after` is set), hang
past the client's timeout, drop the connection, or answer 200 with a body no completion
is made of (BAD_BODIES: an HTML page, cut JSON, invalid UTF-8, no choices) or with one
that is well formed but unusable (no content, another model's name), or changed as a test
says (`edit`), or refuse it with an error that echoes its Authorization header and extra
fields, as some servers do ("echo"), or answer it (or its model list: `models_fault`) with
a hostile body (HOSTILE_BODIES: one without end, a gzip bomb, JSON nested 100,000 deep).
Given a tokenizer folder and a context length it counts tokens as vLLM does and refuses,
like vLLM, a prompt that leaves no room for max_tokens. Like vLLM with a reasoning parser,
it can return a reply's <think> part in a message field of its own (`reasoning_field`). It
models a prefix cache: how many prompt characters extend a prefix it has already seen
(`reused_chars` of `prompt_chars`), with a prefill time for the others when
`prefill_per_char` is set.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import json
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# 200 bodies a proxy or a failing server may send instead of a completion.
BAD_BODIES = {
    "html": (b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
    "notjson": (b'{"id": "cmpl-1", "choices": [{"index": 0, "mess', "application/json"),
    "badutf8": (b'{"choices": [{"message": {"content": "\xff\xfe"}}]}', "application/json"),
    "nochoices": (
        b'{"id": "cmpl-1", "object": "chat.completion", "choices": []}',
        "application/json",
    ),
}


# 200 bodies a hostile server sends: a completion whose content never ends (the body lasts
# until the client hangs up), about 1 MB of gzip that decompresses to BOMB_BYTES, and JSON
# nested past every parser's stack.
HOSTILE_BODIES = ("endless", "gzipbomb", "deep")
BOMB_BYTES = 256 << 20
DEEP_JSON = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
_OPEN_COMPLETION = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "'


@functools.cache
def gzip_bomb() -> bytes:
    """A chat completion whose content is BOMB_BYTES of "a", gzipped (made once)."""
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: the gzip format
    block = b"a" * (1 << 20)
    parts = [packer.compress(_OPEN_COMPLETION)]
    parts += [packer.compress(block) for _ in range(BOMB_BYTES // len(block))]
    parts += [packer.compress(b'"}, "finish_reason": "stop"}]}'), packer.flush()]
    return b"".join(parts)


def split_reasoning(text: str, field: str) -> dict[str, str | None]:
    """A reply as vLLM's think-tag reasoning parsers return it: the reasoning up to
    </think> in `field`, the rest in content (None when empty, or when the reply stopped
    before </think>); a reply without think tags is all content."""
    if "<think>" not in text and "</think>" not in text:
        return {"content": text, field: None}
    thought, closed, content = text.removeprefix("<think>").partition("</think>")
    return {"content": (content or None) if closed else None, field: thought}


def _echo(body: dict[str, Any], headers: dict[str, str]) -> str:
    """A refusal that repeats what it was sent, header and fields, as validation errors do."""
    extra = {k: v for k, v in body.items() if k not in ("model", "messages", "prompt")}
    fields = "; ".join(f"{key}: input {json.dumps(value)}" for key, value in extra.items())
    return f"invalid request (Authorization: {headers.get('Authorization')}): {fields}"


def _common(a: str, b: str) -> int:
    """The length of the longest common prefix of a and b."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 refuses connections when a client opens dozens at once,
    # which the client would see (and retry) as a dropped connection.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (killed, or gave up waiting) is no server error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class StubServer:
    def __init__(
        self,
        model: str = "stub-model",
        fail_if: Callable[[dict], bool] | None = None,
        delay: float = 0.0,
        reply: Callable[[dict], str] | None = None,
        tokenizer: Path | None = None,
        max_model_len: int | None = None,
        fault: Callable[[dict, int], str | None] | None = None,
        retry_after: float | str | None = None,
        hang: float = 5.0,
        aliases: tuple[str, ...] = (),
        reasoning_field: str | None = None,
        refuse_fields: tuple[str, ...] = (),
        prefill_per_char: float = 0.0,
        edit: Callable[[dict, dict, int], None] | None = None,
        models_fault: str | None = None,
        port: int = 0,  # 0: one the kernel picks
        host: str = "127.0.0.1",  # a Ray-placed stand-in listens on its node's IP
    ):
        self.model = model
        # More names for the same model (vLLM's --served-model-name a b): listed with the
        # same root, and answered, as vLLM does, under the first name.
        self.aliases = aliases
        self.reply = reply or (
            lambda body: f"Reasoning... so the answer is \\boxed{{{body['seed'] % 3}}}"
        )
        self.tokenizer = None
        if tokenizer:
            from transformers import AutoTokenizer  # only tests that count tokens pay for it

            self.tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        self.max_model_len = max_model_len
        self.fail_if = fail_if  # requests for which this is true always answer 500
        self.delay = delay  # seconds each chat request takes, like a model generating
        # fault(body, attempt) -> "429" | "503" | "hang" | "drop" | a BAD_BODIES or
        # HOSTILE_BODIES name | "nullcontent" | "othermodel" | None, where attempt counts
        # the requests seen with this body's seed (1 for the first).
        self.fault = fault
        self.models_fault = models_fault  # a HOSTILE_BODIES name: the model list's answer
        self.retry_after = retry_after  # a number, or a header value sent as written
        # edit(payload, body, attempt): change a 200 answer in place before it is sent (a
        # null or non-text content, a refusal, usage counts that are no counts).
        self.edit = edit
        self.hang = hang  # seconds a "hang" fault sleeps before answering
        self.attempts: dict[int, int] = {}
        self.arrivals: list[float] = []  # monotonic time each request arrived
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each POST's headers, as received
        self.refused = 0  # prompts refused for exceeding the context length
        # Like vLLM's --reasoning-parser: a chat reply's <think> part goes in this message
        # field ("reasoning", or "reasoning_content" as older servers name it), the rest in
        # content (null when the token limit fell inside the reasoning), and the reasoning's
        # tokens in usage.completion_tokens_details.
        self.reasoning_field = reasoning_field
        # Request fields answered with HTTP 400, as the OpenAI API answers fields it lacks.
        self.refuse_fields = refuse_fields
        # A model of vLLM's prefix cache: of each prompt's characters, how many extend a
        # prefix this server has seen before (the longest common prefix with any earlier
        # prompt), and seconds of prefill for each character that does not.
        self.prompts: list[str] = []  # every prompt seen, sorted
        self.prompt_chars = 0
        self.reused_chars = 0
        self.prefill_per_char = prefill_per_char
        self._lock = threading.Lock()
        self._closing = threading.Event()  # ends an endless body a client still reads
        self._server = _Server((host, port), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def answer(
        self, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, Any]] | str:
        """The status and payload to send, or "drop" to close the connection unanswered, or
        the name of a BAD_BODIES or HOSTILE_BODIES entry to send instead of a completion."""
        headers = headers or {}
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.arrivals.append(time.monotonic())
            count = len(self.requests)
            seed = body.get("seed")
            self.attempts[seed] = attempt = self.attempts.get(seed, 0) + 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            fault = self.fault(body, attempt) if self.fault else None
            if fault == "drop" or fault in BAD_BODIES or fault in HOSTILE_BODIES:
                return fault
            if fault in ("429", "503"):
                message = "rate limited" if fault == "429" else "overloaded"
                return int(fault), {"error": {"message": message}}
            if fault == "echo":
                return 400, {"error": {"message": _echo(body, headers)}}
            new_chars = self._prefill(body)
            time.sleep(self.hang if fault == "hang" else self.delay)
            time.sleep(new_chars * self.prefill_per_char)
            status, payload = self._reply(body, count)
            if status == 200 and fault == "nullcontent":
                choice = payload["choices"][0]
                if "message" in choice:
                    choice["message"]["content"] = None
                else:
                    choice["text"] = None
            if status == 200 and fault == "othermodel":
                payload["model"] = "some-other-model"
            if status == 200 and self.edit is not None:
                self.edit(payload, body, attempt)
            return status, payload
        finally:
            with self._lock:
                self.in_flight -= 1

    def _prefill(self, body: dict[str, Any]) -> int:
        """Count a prompt against the prefix cache model; return its characters not reused.
        Among sorted strings, the longest common prefix with any of them is the longest with
        one of the two the prompt sorts between."""
        if "messages" in body:
            prompt = "".join(f"<{m['role']}>{m['content']}" for m in body["messages"])
        else:
            prompt = str(body.get("prompt", ""))
        with self._lock:
            at = bisect.bisect_left(self.prompts, prompt)
            neighbours = self.prompts[max(at - 1, 0) : at + 1]
            reused = max((_common(prompt, other) for other in neighbours), default=0)
            self.prompts.insert(at, prompt)
            self.prompt_chars += len(prompt)
            self.reused_chars += reused
        return len(prompt) - reused

    def _reply(self, body: dict[str, Any], count: int) -> tuple[int, dict[str, Any]]:
        if self.fail_if and self.fail_if(body):
            return 500, {"error": {"message": "injected failure", "type": "server_error"}}
        refused = [name for name in self.refuse_fields if name in body]
        if refused:
            message = f"Unrecognized request argument supplied: {refused[0]}"
            return 400, {"error": {"message": message, "type": "invalid_request_error"}}
        chat = "messages" in body
        prompt, pieces = self._count(body)
        limit = body.get("max_tokens") or 1 << 30
        if self.max_model_len and prompt + limit > self.max_model_len:
            message = (
                f"This model's maximum context length is {self.max_model_len} tokens. However, "
                f"you requested {prompt + limit} tokens ({prompt} in the messages, "
                f"{limit} in the completion)."
            )
            self.refused += 1
            return 400, {"error": {"message": message, "type": "BadRequestError"}}
        pieces_out = pieces(self.reply(body))
        finish = "length" if len(pieces_out) > limit else "stop"
        text = "".join(pieces_out[:limit])
        completion = min(len(pieces_out), limit)
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        usage_details = {}
        if chat and self.reasoning_field:
            message = split_reasoning(text, self.reasoning_field)
            choice["message"] = {"role": "assistant", **message}
            thought = message[self.reasoning_field]
            reasoning = len(pieces(thought)) if thought else 0
            usage_details = {"completion_tokens_details": {"reasoning_tokens": reasoning}}
        elif chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return 200, {
            "id": f"cmpl-{count}",
            "object": "chat.completion" if chat else "text_completion",
            "created": 0,
            "model": self.model if body["model"] in self.aliases else body["model"],
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                **usage_details,
            },
        }

    def _count(self, body: dict[str, Any]) -> tuple[int, Callable[[str], list[str]]]:
        """Prompt tokens, and how to split a reply into tokens (words without a tokenizer)."""
        if self.tokenizer is None:
            texts = (
                [m["content"] for m in body["messages"]] if "messages" in body else [body["prompt"]]
            )
            words = sum(len(text.split()) for text in texts)
            return words, lambda text: [w + " " for w in text.split()]
        if "messages" in body:
            rendered = self.tokenizer.apply_chat_template(
                body["messages"], tokenize=False, add_generation_prompt=True
            )
        else:
            rendered = body["prompt"]
        ids = self.tokenizer.encode(rendered, add_special_tokens=False)

        def pieces(text: str) -> list[str]:
            out = self.tokenizer.encode(text, add_special_tokens=False)
            return [self.tokenizer.decode([i]) for i in out]

        return len(ids), pieces

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            # Headers and body go out in separate writes: with Nagle's algorithm the body
            # waited for the client's delayed ACK, about 44 ms on every request.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def send(
                self, status: int, payload: dict[str, Any] | bytes, kind: str = "application/json"
            ) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                if status in (429, 503) and stub.retry_after is not None:
                    wait = stub.retry_after
                    self.send_header("Retry-After", wait if isinstance(wait, str) else f"{wait:g}")
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                # The client may have given up waiting (a "hang" fault): nothing to answer.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def send_hostile(self, name: str) -> None:
                """A HOSTILE_BODIES answer, with status 200."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if name == "endless":  # no length: the body would end with the connection
                    self.close_connection = True
                    self.send_header("Connection", "close")
                    self.end_headers()
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        self.wfile.write(_OPEN_COMPLETION)
                        block = b"a" * (1 << 16)
                        while not stub._closing.is_set():
                            self.wfile.write(block)
                    return
                data = DEEP_JSON if name == "deep" else gzip_bomb()
                if name == "gzipbomb":
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/health":  # as vLLM answers once it is up
                    self.send(200, {})
                elif self.path.rstrip("/") == "/v1/models" and stub.models_fault:
                    self.send_hostile(stub.models_fault)
                elif self.path.rstrip("/") == "/v1/models":
                    models = []
                    for name in (stub.model, *stub.aliases):
                        model = {"id": name, "object": "model", "root": "/models/stub"}
                        if stub.max_model_len:
                            model["max_model_len"] = stub.max_model_len  # as vLLM reports it
                        models.append(model)
                    self.send(200, {"object": "list", "data": models})
                else:
                    self.send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:  # a client killed while it was sending
                    self.send(400, {"error": {"message": "the request body is not JSON"}})
                    return
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/v1/completions"):
                    self.send(404, {"error": {"message": "not found"}})
                    return
                answer = stub.answer(body, dict(self.headers.items()))
                if answer == "drop":  # as a crashed or restarted server would
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if answer in HOSTILE_BODIES:
                    self.send_hostile(answer)
                    return
                if isinstance(answer, str):
                    self.send(200, *BAD_BODIES[answer])
                    return
                self.send(*answer)

        return Handler
