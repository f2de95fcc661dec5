"""The forwarder to the real Gemini API: the key is added here, outside the sandbox, never in the agent's hands.

Gemini CLI in the sandbox talks to the harness's loopback server (:mod:`.server`) with a placeholder key
(``GEMINI_API_KEY`` in its environment is not a real one); this backend sends each Gemini API request
(``/v1beta/models/{model}:{method}``, its query kept) on to the API with the real key — ``x-goog-api-key`` from the
harness's ``GEMINI_API_KEY`` — and relays the answer untouched (usage included). Only the client's ``user-agent``
and ``x-goog-api-client`` headers pass; its own key never does. The API is ``GOOGLE_GEMINI_BASE_URL`` of the
harness's environment (the public API when unset).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..agents.gemini.config import STANDIN_API_KEY
from .server import Passthrough
from .upstream import checked_url, post

API_URL = "https://generativelanguage.googleapis.com"
_FORWARDED_HEADERS = ("user-agent", "x-goog-api-client")


class GeminiForwarder:
    """Relays Gemini API requests to the real API with the harness's key (see the module docstring)."""

    def __init__(self, api_key: str | None = None, base_url: str | None = None, timeout: float = 600.0) -> None:
        key = api_key if api_key is not None else os.environ.get("GEMINI_API_KEY")
        if not key or key == STANDIN_API_KEY:
            raise ValueError("the Gemini forwarder needs a real GEMINI_API_KEY in the harness's environment")
        url = checked_url(base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or API_URL, "GOOGLE_GEMINI_BASE_URL")
        self.key, self.base_url, self.timeout = key, url, timeout

    def describe(self) -> str:
        return (
            f"real Gemini model via {self.base_url}, through the harness's forwarder (the key stays outside the "
            "sandbox; figures measure the model and the tool together)"
        )

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Passthrough:
        raise ValueError("the Gemini forwarder answers the Gemini API only")

    def forward_gemini(self, path: str, request: dict[str, Any], headers: Mapping[str, str] | None) -> Passthrough:
        """Send one request (``path``: ``/v1beta/models/{model}:{method}[?query]``) on, with the real key."""
        sent = {"content-type": "application/json"}
        for name, value in (headers or {}).items():
            if name.lower() in _FORWARDED_HEADERS:
                sent[name.lower()] = value
        sent["x-goog-api-key"] = self.key
        return post(f"{self.base_url}{path}", request, sent, self.timeout)
