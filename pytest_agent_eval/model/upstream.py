"""One request to a real model API, relayed untouched: what each forwarder (anthropic, openai, google) sends.

The harness's own environment decides the route (``HTTPS_PROXY``/``HTTP_PROXY`` are honoured by urllib); the answer,
an error status included, comes back as a :class:`~.server.Passthrough` the server relays byte for byte.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from .server import Passthrough, Unreachable

# What the placeholder key each built-in agent is handed holds (its config's STANDIN_API_KEY): never the harness's key.
STAND_IN_KEY_MARK = "agent-eval-local-stand-in"


def checked_url(url: str, setting: str) -> str:
    """``url`` without a trailing slash; a ValueError naming ``setting`` unless it is http(s) with a host."""
    url = url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{setting} must be an http(s) URL with a host, not {url!r}")
    return url


def path_refusal(raw: str, allowed: Mapping[str, tuple[str, ...]]) -> str | None:
    """Why a request on ``raw`` (its path and query as the client sent them) is not one a forwarder sends on: its path
    must be one of ``allowed`` (path → the queries it may carry), exactly, with nothing encoded or relative in it."""
    parts = urlsplit(raw)
    if unquote(raw) != raw or "/." in parts.path or "//" in parts.path or parts.fragment:
        return f"path {raw!r}: encoded, relative or doubled segments; only the CLI's own paths are forwarded"
    if parts.path not in allowed:
        listed = f" ({', '.join(sorted(allowed))})" if allowed else ""
        return f"path {parts.path!r}: not one the agent's CLI needs{listed}"
    if parts.query not in allowed[parts.path]:
        return f"query {parts.query!r} on {parts.path}: only {', '.join(repr(q) for q in allowed[parts.path])}"
    return None


def model_refusal(asked: Any, model: str | None) -> str | None:
    """Why a request for model ``asked`` is not forwarded: the forwarder holds the agent's configured ``model``
    (None: the CLI names its model itself, and any is sent on)."""
    if model is None or asked == model:
        return None
    return f"model {asked!r}: only the configured model {model!r} is forwarded"


def forwarder_description(base_url: str) -> str:
    """What a forwarder says it is, for the report's model line."""
    return (
        f"real model via {base_url}, through the harness's forwarder (the key stays outside the sandbox; "
        "figures measure the model and the tool together)"
    )


def post(url: str, request: dict[str, Any], headers: Mapping[str, str], timeout: float) -> Passthrough:
    """POST ``request`` as JSON to ``url`` with exactly ``headers``; the answer as it came. :class:`Unreachable` when
    no answer came (a timeout is raised as it is)."""
    upstream = urllib.request.Request(url, data=json.dumps(request).encode(), headers=dict(headers), method="POST")
    try:
        response = urllib.request.urlopen(upstream, timeout=timeout)
    except urllib.error.HTTPError as error:
        return Passthrough(error.code, dict(error.headers), iter([error.read()]))
    except (urllib.error.URLError, ConnectionError) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, TimeoutError):
            raise
        raise Unreachable(f"could not be reached ({reason})") from error
    return Passthrough(response.status, dict(response.headers), _chunks(response))


def _chunks(response: Any) -> Iterator[bytes]:
    with response:
        while data := response.read1(65536):
            yield data
