"""Text that crosses the process's edge: credentials redacted from what is printed or
recorded, control characters taken out of what a server sent before it reaches a terminal,
and model text made encodable before anything reads it."""

from __future__ import annotations

import os
import re
from typing import Any

HIDDEN = "***"
# A URL's user:password@, query parameters that carry credentials, bearer tokens, and the
# shapes of the common API keys.
_USERINFO = re.compile(r"(?<=//)[^/@\s]+@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth|sig|signature|password|secret)=)"
    r"[^&#\s]+"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',]+")
_KEY_SHAPES = re.compile(r"\b(sk|hf|gsk|xai|pk)[-_][A-Za-z0-9_-]{12,}")
_SECRET_ENV = re.compile(r"(?i)(?:^|_)(?:key|token|secret|password)$")
# C0 and C1 controls but tab and newline, DEL, and the bidirectional overrides that can make
# a terminal show text in another order than it was written.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _secret_values() -> list[str]:
    """Values of the environment's credential variables (OPENAI_API_KEY, HF_TOKEN, ...)."""
    found = {
        value for name, value in os.environ.items() if _SECRET_ENV.search(name) and len(value) >= 8
    }
    return sorted(found, key=len, reverse=True)


def redact(value: Any) -> Any:
    """`value` with credentials hidden: in a string, or in each string of a list."""
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if not isinstance(value, str):
        return value
    for secret in _secret_values():
        value = value.replace(secret, HIDDEN)
    value = _USERINFO.sub(HIDDEN + "@", value)
    value = _QUERY_SECRET.sub(r"\1" + HIDDEN, value)
    value = _BEARER.sub(r"\1" + HIDDEN, value)
    return _KEY_SHAPES.sub(r"\1-" + HIDDEN, value)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` as Unicode that can be encoded: a JSON body may carry a lone surrogate
    ("\\ud800"), which no tokenizer or file accepts, so it becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


# How JSON writes a UTF-16 surrogate (\ud800-\udfff): the only way one gets into decoded text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def valid_data(value: Any, line: str | bytes) -> Any:
    """`value`, the JSON `line` holds, with valid_text applied to every string in it (keys
    too) where the line escapes a surrogate; else `value` itself, at the cost of one search."""
    escape = _SURROGATE_ESCAPE_BYTES if isinstance(line, bytes) else _SURROGATE_ESCAPE
    return _valid(value) if escape.search(line) else value  # type: ignore[arg-type]


def _valid(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [_valid(item) for item in value]
    if isinstance(value, dict):
        return {_valid(key): _valid(item) for key, item in value.items()}
    return value


def printable(text: str) -> str:
    """`text` safe to print: control characters (escape sequences, carriage returns, bells)
    shown as U+FFFD instead of acted on by the terminal."""
    return _CONTROL.sub("\ufffd", text)


def outward(text: str) -> str:
    """What every message to the user goes through: redacted, then made printable."""
    return printable(redact(text))
