"""A tiny OpenAI-compatible chat server on localhost for end-to-end tests.

It answers every chat request with a boxed number derived from the request's seed, logs
each request body, and can be told to fail chosen requests with HTTP 500 every time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StubServer:
    def __init__(
        self,
        model: str = "stub-model",
        fail_if: Callable[[dict], bool] | None = None,
        delay: float = 0.0,
    ):
        self.model = model
        self.fail_if = fail_if  # requests for which this is true always answer 500
        self.delay = delay  # seconds each chat request takes, like a model generating
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            count = len(self.requests)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            return self._reply(body, count)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, body: dict[str, Any], count: int) -> tuple[int, dict[str, Any]]:
        if self.fail_if and self.fail_if(body):
            return 500, {"error": {"message": "injected failure", "type": "server_error"}}
        text = f"Reasoning... so the answer is \\boxed{{{body.get('seed', 0) % 3}}}"
        prompt = sum(len(m["content"].split()) for m in body["messages"])
        return 200, {
            "id": f"chatcmpl-{count}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": len(text.split()),
                "total_tokens": prompt + len(text.split()),
            },
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    self.send(
                        200, {"object": "list", "data": [{"id": stub.model, "object": "model"}]}
                    )
                else:
                    self.send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self.send(404, {"error": {"message": "not found"}})
                    return
                self.send(*stub.answer(body))

        return Handler
