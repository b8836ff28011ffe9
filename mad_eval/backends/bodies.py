"""HTTP reply bodies read within bounds: a server (or a proxy before it) may send a body
without end, a small gzip body that decompresses to gigabytes, or JSON nested past any
parser's stack; none may cost more than one reply's memory or end in a traceback."""

from __future__ import annotations

from typing import Any

import aiohttp

from mad_eval.backends.base import RequestError
from mad_eval.foreign import loads

# The most bytes one reply may hold, counted after decompression: far past any completion
# (a 128k-token reply is under 1 MiB of JSON), far below what exhausts a machine's memory.
MAX_REPLY_BYTES = 16 * 1024 * 1024


class ReplyTooLarge(RequestError):
    """A reply past MAX_REPLY_BYTES. Its turn fails at once, never retried: a server that
    sends such a body sends it again, and each try reads another MAX_REPLY_BYTES."""

    def __init__(self, status: int):
        super().__init__(
            f"ResponseTooLarge: HTTP {status} with a body of more than "
            f"{MAX_REPLY_BYTES >> 20} MiB (decompressed), the most one reply may hold"
        )


async def read_body(response: aiohttp.ClientResponse) -> bytes:
    """The body, decompressed, read in chunks with a running count: ReplyTooLarge as soon
    as it passes MAX_REPLY_BYTES, so neither an endless body nor a gzip bomb is held whole."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise ReplyTooLarge(response.status)
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """A body's JSON, as records.loads reads it. orjson stops at 1,024 levels of nesting and
    Python's parser, tried after it, raises RecursionError at about as many: here that is a
    ValueError, like any body that is no JSON."""
    try:
        return loads(body)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
