"""Whether the Hugging Face hub can be reached, found out in seconds: offline, its client
retries each download for tens of seconds, printing every try, before it gives up."""

from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0


@functools.cache
def hub_reachable() -> bool:
    """Whether a connection to the hub's endpoint opens (asked once per process). With
    HF_HUB_OFFLINE the client needs no probe, and behind a proxy only the client can tell."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or any(
        os.environ.get(f"{name}_proxy") or os.environ.get(f"{name.upper()}_PROXY")
        for name in ("https", "http", "all")
    ):
        return True
    url = urlsplit(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True
