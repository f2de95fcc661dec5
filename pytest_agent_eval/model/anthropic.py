"""Forward requests to the real Messages API, relaying its stream untouched (usage included)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_agent_eval.config import is_real_key

from .server import Passthrough

API_URL = "https://api.anthropic.com"
_FORWARDED_HEADERS = ("anthropic-version", "anthropic-beta", "user-agent", "x-app")


class AnthropicBackend:
    def __init__(self, api_key: str | None = None, base_url: str = API_URL, timeout: float = 600.0) -> None:
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        if not is_real_key(key):
            raise ValueError("the anthropic backend needs a real ANTHROPIC_API_KEY")
        self.api_key = str(key)
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def describe(self) -> str:
        return f"real model via {self.base_url} (figures measure the model and the tool together)"

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Passthrough:
        sent = {"content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": self.api_key}
        for name, value in (headers or {}).items():
            if name.lower() in _FORWARDED_HEADERS:
                sent[name.lower()] = value
        upstream = urllib.request.Request(
            f"{self.base_url}/v1/messages", data=json.dumps(request).encode(), headers=sent, method="POST"
        )
        try:
            response = urllib.request.urlopen(upstream, timeout=self.timeout)
        except urllib.error.HTTPError as error:
            return Passthrough(error.code, dict(error.headers), iter([error.read()]))
        return Passthrough(response.status, dict(response.headers), _chunks(response))


def _chunks(response: Any) -> Iterator[bytes]:
    with response:
        while data := response.read1(65536):
            yield data
