"""The forwarder to the real Messages API: the key is added here, outside the sandbox, never in the agent's hands.

The CLI in the sandbox talks to the harness's loopback server (:mod:`.server`) with a placeholder key; this backend
sends each Messages request (and each token count) on to the API with the real credentials — ``x-api-key`` from
``ANTHROPIC_API_KEY``, or ``Authorization: Bearer`` from ``ANTHROPIC_AUTH_TOKEN`` — and relays the answer untouched
(usage included). Only the client's ``anthropic-*``, ``user-agent`` and ``x-app`` headers pass; its own auth
headers never do. The API is ``ANTHROPIC_BASE_URL`` of the harness's environment (the public API when unset), and
``HTTPS_PROXY``/``HTTP_PROXY`` of that environment are honoured. What the server refuses before anything is
forwarded: :mod:`.refusal`. It is an allow-list (:meth:`AnthropicBackend.forward_refusal`): only ``POST
/v1/messages`` and ``POST /v1/messages/count_tokens``, with no query or ``beta=true`` (Claude Code's), and, when
given one, for the configured model; anything else is refused before anything is sent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pytest_agent_eval.model.keys import is_real_key

from .server import Passthrough
from .upstream import checked_url, forwarder_description, model_refusal, path_refusal, post

API_URL = "https://api.anthropic.com"
_FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "user-agent", "x-app")
PATHS = {path: ("", "beta=true") for path in ("/v1/messages", "/v1/messages/count_tokens")}  # what Claude Code calls


class AnthropicBackend:
    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        auth_token: str | None = None,
        model: str | None = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        token = auth_token if auth_token is not None else os.environ.get("ANTHROPIC_AUTH_TOKEN")
        if is_real_key(key):
            self.credentials = {"x-api-key": str(key)}
        elif token:
            self.credentials = {"authorization": f"Bearer {token}"}
        else:
            raise ValueError("the anthropic backend needs a real ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)")
        self.base_url = checked_url(base_url or os.environ.get("ANTHROPIC_BASE_URL") or API_URL, "ANTHROPIC_BASE_URL")
        self.timeout, self.model = timeout, model

    def forward_refusal(self, raw_path: str, request: Any) -> str | None:
        """Why the request on ``raw_path`` is not sent on; None when it is one Claude Code makes (for the configured
        model, when one is given: Claude Code names a dated model for an alias, and a small one for side requests)."""
        asked = request.get("model") if isinstance(request, dict) else None
        return path_refusal(raw_path, PATHS) or model_refusal(asked, self.model)

    def describe(self) -> str:
        return forwarder_description(self.base_url)

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Passthrough:
        return self._forward("/v1/messages", request, headers)

    def count_tokens(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Passthrough:
        return self._forward("/v1/messages/count_tokens", request, headers)

    def _forward(self, path: str, request: dict[str, Any], headers: Mapping[str, str] | None) -> Passthrough:
        sent = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
        for name, value in (headers or {}).items():
            if name.lower() in _FORWARDED_HEADERS:
                sent[name.lower()] = value
        sent.update(self.credentials)
        return post(f"{self.base_url}{path}", request, sent, self.timeout)
