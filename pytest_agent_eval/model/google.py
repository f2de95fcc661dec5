"""The forwarder to the real Gemini API: the key is added here, outside the sandbox, never in the agent's hands.

Gemini CLI in the sandbox talks to the harness's loopback server (:mod:`.server`) with a placeholder key
(``GEMINI_API_KEY`` in its environment is not a real one); this backend sends each Gemini API request
on to the API with the real key — ``x-goog-api-key`` from the harness's ``GEMINI_API_KEY`` — and relays the answer
untouched (usage included). Only the client's ``user-agent`` and ``x-goog-api-client`` headers pass; its own key
never does. The API is ``GOOGLE_GEMINI_BASE_URL`` of the harness's environment (the public API when unset). Its
transient errors (5xx, 429) are tried again by the server under the harness's retry policy (:mod:`.retry`), as the
Messages and Responses forwarders' are; a token count is relayed as it comes.

It is an allow-list (:meth:`GeminiForwarder.forward_refusal`): only what Gemini CLI needs — ``streamGenerateContent``
(query ``alt=sse``), ``generateContent`` and ``countTokens`` of the configured model (the ``-m`` the agent is run
with) or of a model Gemini CLI names itself for its subagents and side requests (:data:`GEMINI_CLI_MODELS`), on
``/v1beta/models/{model}:{method}`` exactly — and the path sent upstream is rebuilt from those parts, never
the client's. Any other method (``predictLongRunning``, ``batchGenerateContent``, ``embedContent``…), model, path
(``..``, encoded characters, files, caches, batches) or query is refused before anything is sent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .gemini import API_PREFIX, COUNT, GENERATE, STREAM, model_method
from .server import Passthrough
from .upstream import STAND_IN_KEY_MARK, checked_url, model_refusal, path_refusal, post

API_URL = "https://generativelanguage.googleapis.com"
_FORWARDED_HEADERS = ("user-agent", "x-goog-api-client")
# The methods Gemini CLI calls, and the query each is sent with.
METHODS = {STREAM: ("alt=sse",), GENERATE: ("",), COUNT: ("",)}
# The models Gemini CLI 0.61.0 asks for by itself besides the one it is run with (its bundle's config/models.js):
# its own subagents (the codebase investigator: measured, gemini-3-flash-preview) and side requests (loop detection,
# next-speaker check, summaries) name these. Any other model is refused.
GEMINI_CLI_MODELS = frozenset({
    "gemini-3-pro-preview", "gemini-3.1-pro-preview", "gemini-3.1-pro-preview-customtools", "gemini-3-flash-preview",
    "gemini-2.5-pro", "gemini-3.5-flash", "gemini-3.8-flash", "gemini-3-flash", "gemini-3.1-flash-lite",
    "gemini-3.5-flash-lite",
})  # fmt: skip


class GeminiForwarder:
    """Relays Gemini API requests to the real API with the harness's key (see the module docstring)."""

    def __init__(
        self, api_key: str | None = None, base_url: str | None = None, timeout: float = 600.0, model: str | None = None
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("GEMINI_API_KEY")
        if not key or STAND_IN_KEY_MARK in key:  # the placeholder the agent's own environment holds
            raise ValueError("the Gemini forwarder needs a real GEMINI_API_KEY in the harness's environment")
        url = checked_url(base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or API_URL, "GOOGLE_GEMINI_BASE_URL")
        self.key, self.base_url, self.timeout, self.model = key, url, timeout, model

    def forward_refusal(self, raw_path: str, request: Any) -> str | None:
        """Why the request on ``raw_path`` is not sent on (see the module docstring); None when it is one Gemini CLI
        makes, for the configured model."""
        method = model_method(urlsplit(raw_path).path)
        model = method[0] if method is not None else self.model
        paths = {f"{API_PREFIX}{model}:{name}": queries for name, queries in METHODS.items()}
        own = model in GEMINI_CLI_MODELS  # a subagent's or a side request's
        return path_refusal(raw_path, paths) or (None if own else model_refusal(model, self.model))

    def describe(self) -> str:
        return (
            f"real Gemini model via {self.base_url}, through the harness's forwarder (the key stays outside the "
            "sandbox; figures measure the model and the tool together)"
        )

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Passthrough:
        raise ValueError("the Gemini forwarder answers the Gemini API only")

    def forward_gemini(self, path: str, request: dict[str, Any], headers: Mapping[str, str] | None) -> Passthrough:
        """Send one request (``path``: ``/v1beta/models/{model}:{method}[?query]``, which :meth:`forward_refusal` let
        through) on, with the real key, on a path rebuilt from its model and method."""
        method = model_method(urlsplit(path).path)
        if self.forward_refusal(path, request) is not None or method is None:
            raise ValueError(f"the Gemini forwarder sends on only what it allows, not {path!r}")
        model, name = method
        upstream = f"{API_PREFIX}{model}:{name}" + (f"?{METHODS[name][0]}" if METHODS[name][0] else "")
        sent = {"content-type": "application/json"}
        for name, value in (headers or {}).items():
            if name.lower() in _FORWARDED_HEADERS:
                sent[name.lower()] = value
        sent["x-goog-api-key"] = self.key
        return post(f"{self.base_url}{upstream}", request, sent, self.timeout)
