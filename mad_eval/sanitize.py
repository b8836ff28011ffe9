"""Text that crosses the process's edge: credentials redacted (`redact`, the one redaction
that every writer of a run's files and the console apply; `remember` adds a run's own
secrets), control characters taken out of what a server sent before it reaches a terminal,
and model text made encodable before anything reads it."""

from __future__ import annotations

import base64
import binascii
import os
import re
from typing import Any
from urllib.parse import unquote

HIDDEN = "***"
# A secret shorter than this is hidden where it stands (a URL, a header, a key), but not
# searched for in all text, where it would hide ordinary words and numbers.
MIN_SECRET = 6

# A URL's userinfo: from // to the LAST @ of the URL, since a password may hold an unencoded
# @ (or / ? #, which make the URL unreadable but must still not be shown); never across
# another //, whitespace or a quote, so the next URL in a list keeps its host.
_USERINFO = re.compile(r"(?<=//)(?:(?!//)[^\s\"'<>`])*@")
_QUERY_SECRET = re.compile(
    r"(?i)([?&;](?:api[_-]?key|key|token|access[_-]?token|auth|sig|signature|password|passwd"
    r"|secret|client[_-]?secret)=)[^&#\s\"'<>]+"
)
# name: value, name=value, "name": "value" for names that always hold a secret, as a server
# echoes a request's headers or body, or a TOML or JSON text writes them.
_SECRET_NAME = (
    r"(?:proxy-)?authorization|x-api-key|api[_-]?key|passwd|password|secret|cookie|set-cookie"
    r"|credentials?|[a-z0-9]+(?:[_-][a-z0-9]+)*[_-](?:key|token|secret|password)"
)
_ASSIGNED = re.compile(
    rf"(?i)(?<![\w-])(?P<q>[\"']?)(?P<name>{_SECRET_NAME})(?P=q)(?P<sep>[ \t]*[:=][ \t]*)"
    r"(?P<value>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'"
    r"|(?P<scheme>(?:bearer|basic|digest|token)[ \t]+)?[^\s\"',}\]&]+)"
)
# A command-line flag that names a secret (--api-key, --hf-token, --db-password, --api_key)
# and its value, as one argument (--api-key=K) or the next (--api-key K, shell-quoted or not,
# or the next item of a list written as text: "--api-key", "K"); a value starting with a dash
# is the next flag.
_SECRET_FLAG = r"--(?:[a-z0-9]+[_-])*(?:key|token|secret|password|passwd)"
_FLAG_VALUE = re.compile(
    rf"(?i)(?<![\w-])(?P<flag>{_SECRET_FLAG})(?:"
    r"(?P<sep>=|[ \t]+(?!-))(?P<value>(?:'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"|[^\s\"',\]])+)"
    r"|(?P<listed>(?P<q>[\"'])[ \t]*,[ \t]*(?P=q))(?P<item>[^\"'\n]*)(?=(?P=q)))"
)
_SECRET_FLAG_ARG = re.compile(rf"(?i){_SECRET_FLAG}")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_BASIC = re.compile(r"(?i)\b(basic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![\w+/=])")
_KEY_SHAPES = re.compile(r"\b(sk|hf|gsk|xai|pk|rk|ghp|gho|ghs|glpat)[-_][A-Za-z0-9_-]{12,}")
_SECRET_ENV = re.compile(r"(?i)(?:^|_)(?:key|token|secret|password)$")

# Keys of a structure (an extra body, a configuration) whose values are secrets, whatever
# their type; names are compared in snake case (apiKey, x-api-key -> api_key, x_api_key).
_SECRET_KEYS = {
    "api_key",
    "apikey",
    "key",
    "token",
    "secret",
    "secrets",
    "password",
    "passwd",
    "authorization",
    "proxy_authorization",
    "auth",
    "cookie",
    "set_cookie",
    "credential",
    "credentials",
}
_SECRET_END = re.compile(r"_(?:key|token|secret|password|passwd)$")
_SPECIAL_TOKENS = {"bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token"}
HEADER_MAPS = {"headers", "extra_headers", "default_headers", "http_headers"}
_AUTH_HEADER = re.compile(r"auth|key|token|secret|cookie|password|credential|signature|session")

# C0 and C1 controls but tab and newline, DEL, and the bidirectional overrides that can make
# a terminal show text in another order than it was written.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

_remembered: frozenset[str] = frozenset()  # replaced whole: read by other threads


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower().replace("-", "_")


def secret_key(key: Any) -> bool:
    """Whether a structure's key names a secret (api_key, token, x-api-key, my_secret, ...)."""
    if not isinstance(key, str):
        return False
    name = _snake(key)
    if name in _SPECIAL_TOKENS:
        return False
    return (
        name in _SECRET_KEYS
        or name.removeprefix("x_") in _SECRET_KEYS
        or bool(_SECRET_END.search(name))
    )


def _auth_header(key: Any) -> bool:
    return isinstance(key, str) and bool(_AUTH_HEADER.search(_snake(key)))


def _header_map(key: Any, value: Any) -> bool:
    return isinstance(key, str) and _snake(key) in HEADER_MAPS and isinstance(value, dict)


def redact(value: Any) -> Any:
    """`value` with credentials hidden: a string, or a dict or list (tuples become lists)
    all the way down, where a secret-looking key's value is hidden whatever its type."""
    if isinstance(value, str):
        return _redact_text(value)
    if isinstance(value, dict):
        return {key: _redact_entry(key, item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        # An argument list: a secret flag's value is the item after it.
        return [
            HIDDEN if i and secret_flag(value[i - 1]) and isinstance(item, str) else redact(item)
            for i, item in enumerate(value)
        ]
    return value


def secret_flag(arg: Any) -> bool:
    """Whether a command-line argument is a flag whose value is a secret (--api-key,
    --hf-token, --my-secret), the value following it as the next argument."""
    return isinstance(arg, str) and bool(_SECRET_FLAG_ARG.fullmatch(arg))


def _redact_entry(key: Any, value: Any) -> Any:
    if secret_key(key):
        return HIDDEN
    if _header_map(key, value):
        return {k: HIDDEN if _auth_header(k) else redact(v) for k, v in value.items()}
    return redact(value)


def _redact_text(text: str) -> str:
    for secret in _secret_values():
        text = text.replace(secret, HIDDEN)
    text = _USERINFO.sub(HIDDEN + "@", text)
    text = _QUERY_SECRET.sub(r"\1" + HIDDEN, text)
    text = _FLAG_VALUE.sub(_hide_flag, text)
    text = _ASSIGNED.sub(_hide_assigned, text)
    text = _BEARER.sub(r"\1" + HIDDEN, text)
    text = _BASIC.sub(_hide_basic, text)
    return _KEY_SHAPES.sub(r"\1-" + HIDDEN, text)


def _hide_assigned(match: re.Match[str]) -> str:
    value = match["value"]
    quote = value[0] if value[:1] in ("'", '"') else ""
    scheme = match["scheme"] or ""  # Bearer, Basic: what kind of credential it was
    return f"{match['q']}{match['name']}{match['q']}{match['sep']}{quote}{scheme}{HIDDEN}{quote}"


def _hide_flag(match: re.Match[str]) -> str:
    if match["listed"]:
        return f"{match['flag']}{match['listed']}{HIDDEN}"
    value = match["value"]
    quote = value[0] if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else ""
    return f"{match['flag']}{match['sep']}{quote}{HIDDEN}{quote}"


def _hide_basic(match: re.Match[str]) -> str:
    """Basic credentials are base64 of user:password; a word after "basic" is left alone."""
    value = match[2]
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return match[0]
    return match[1] + HIDDEN if b":" in decoded else match[0]


def _secret_values() -> list[str]:
    """The environment's credential variables' values (OPENAI_API_KEY, HF_TOKEN, ...) and
    the secrets `remember` was given, longest first."""
    found = {
        value for name, value in os.environ.items() if _SECRET_ENV.search(name) and len(value) >= 8
    }
    return sorted(found | _remembered, key=len, reverse=True)


def secrets_in(value: Any, hidden: bool = False) -> set[str]:
    """The secret strings a setting holds: every string (or number) under a secret-looking
    key or an auth-looking header, a header value's credentials, each secret flag's value
    in an argument list or a command line, and each URL's password (as written, decoded,
    and as the Basic value it is sent as)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if _header_map(key, item):
                for name, header in item.items():
                    found |= secrets_in(header, hidden or _auth_header(name))
            else:
                found |= secrets_in(item, hidden or secret_key(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found |= secrets_in(item, hidden or (i > 0 and secret_flag(value[i - 1])))
    elif isinstance(value, str):
        if hidden:
            found.add(value)
            found.add(value.split()[-1] if value.split() else value)  # "Bearer X": X
        for match in _FLAG_VALUE.finditer(value):  # "--api-key K" in a command line
            found.add((match["value"] or match["item"]).strip("'\""))
        for match in _USERINFO.finditer(value):
            found |= _url_secrets(match[0][:-1])
    elif hidden and isinstance(value, int | float) and not isinstance(value, bool):
        found.add(str(value))
    return {secret for secret in found if len(secret) >= MIN_SECRET and secret != HIDDEN}


def _url_secrets(userinfo: str) -> set[str]:
    user, _, password = userinfo.partition(":")
    if not password:
        return set()
    plain = f"{unquote(user)}:{unquote(password)}"
    try:
        basic = base64.b64encode(plain.encode("latin-1")).decode()
    except UnicodeEncodeError:
        basic = base64.b64encode(plain.encode()).decode()
    return {password, unquote(password), basic}


def remember(value: Any) -> None:
    """Hide the secrets `value` holds (secrets_in) wherever they appear from now on: a server
    that echoes a request's body or headers in an error must not have them recorded."""
    global _remembered
    _remembered = _remembered | secrets_in(value)


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` as Unicode that can be encoded: a JSON body may carry a lone surrogate
    ("\\ud800"), which no tokenizer or file accepts, so it becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


# How JSON writes a UTF-16 surrogate (\ud800-\udfff): the only way one gets into decoded text.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def valid_data(value: Any, line: str | bytes) -> Any:
    """`value`, the JSON `line` holds, with valid_text applied to every string in it (keys
    too) where the line escapes a surrogate; else `value` itself, at the cost of one search."""
    escape = _SURROGATE_ESCAPE_BYTES if isinstance(line, bytes) else SURROGATE_ESCAPE
    return valid_value(value) if escape.search(line) else value  # type: ignore[arg-type]


def valid_value(value: Any) -> Any:
    """`value` with valid_text applied to every string in it (keys, list and tuple items too):
    what pandas and pyarrow, which refuse a lone surrogate, are given."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, (list, tuple)):
        return [valid_value(item) for item in value]
    if isinstance(value, dict):
        return {valid_value(key): valid_value(item) for key, item in value.items()}
    return value


def printable(text: str) -> str:
    """`text` safe to print: control characters (escape sequences, carriage returns, bells)
    shown as U+FFFD instead of acted on by the terminal."""
    return _CONTROL.sub("\ufffd", text)


def outward(text: str) -> str:
    """What every message to the user goes through: redacted, then made printable."""
    return printable(redact(text))
