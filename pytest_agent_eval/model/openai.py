"""The forwarder to the real Responses API (Codex CLI): the key is added here, outside the sandbox, never in the
agent's hands.

Codex in the sandbox talks to the harness's loopback server (:mod:`.server`) with a placeholder key (its provider's
``env_key``); this backend sends each ``POST /v1/responses`` on to the API with ``Authorization: Bearer`` from
``OPENAI_API_KEY`` of the harness's environment, and relays the answer untouched (the SSE stream, usage included).
Only the client's ``accept``, ``openai-beta``, ``originator``, ``user-agent``, ``session-id``, ``thread-id``,
``x-client-request-id`` and ``x-codex-*`` headers pass; its own auth headers never do. The API is ``OPENAI_BASE_URL``
of the harness's environment (as Codex takes it: the URL ``/responses`` is appended to, ``/v1`` included), the public
API when unset; ``HTTPS_PROXY``/``HTTP_PROXY`` are honoured. What the server refuses before anything is forwarded (a
hosted tool): :func:`~.refusal.responses_refusal`. It is an allow-list (:meth:`OpenAIBackend.forward_refusal`):
only ``POST /v1/responses``, no query, for the configured model (the one Codex is configured to ask for); anything
else is refused before anything is sent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pytest_agent_eval.model.keys import is_real_openai_key

from .server import Passthrough
from .upstream import checked_url, forwarder_description, model_refusal, path_refusal, post

API_URL = "https://api.openai.com/v1"
_FORWARDED_HEADERS = ("accept", "openai-beta", "originator", "user-agent", "session-id", "thread-id",
                      "x-client-request-id")  # fmt: skip
_FORWARDED_PREFIX = "x-codex-"
PATHS = {"/v1/responses": ("",)}  # what Codex CLI calls


class OpenAIBackend:
    def __init__(
        self, api_key: str | None = None, base_url: str | None = None, timeout: float = 600.0, model: str | None = None
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if not is_real_openai_key(key):
            raise ValueError("the openai backend needs a real OPENAI_API_KEY")
        self.credentials = {"authorization": f"Bearer {key}"}
        self.base_url = checked_url(base_url or os.environ.get("OPENAI_BASE_URL") or API_URL, "OPENAI_BASE_URL")
        self.timeout, self.model = timeout, model

    def forward_refusal(self, raw_path: str, request: Any) -> str | None:
        """Why the request on ``raw_path`` is not sent on; None when it is Codex's, for the configured model."""
        asked = request.get("model") if isinstance(request, dict) else None
        return path_refusal(raw_path, PATHS) or model_refusal(asked, self.model)

    def describe(self) -> str:
        return forwarder_description(self.base_url)

    def respond_responses(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Passthrough:
        sent = {"content-type": "application/json"}
        for name, value in (headers or {}).items():
            if name.lower() in _FORWARDED_HEADERS or name.lower().startswith(_FORWARDED_PREFIX):
                sent[name.lower()] = value
        sent.update(self.credentials)
        return post(f"{self.base_url}/responses", request, sent, self.timeout)

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        raise ValueError("the openai forwarder answers the Responses API only (an agent speaking the Messages API "
                         "takes --agent-eval-backend anthropic)")  # fmt: skip
