"""Usage figures for a stand-in model, as a prompt-caching client would see them.

The prompt's size is estimated from its serialized form: ``chars / CHARS_PER_TOKEN`` over the
system prompt, the tool definitions and every message content block (JSON, ``cache_control``
markers removed because the CLI moves them between requests). 3.0 chars/token sits between
English prose (~4) and the code/JSON-heavy prompts of a coding agent (the seeds measure ~2.3 for
explore output), so ``ctx`` grows by roughly what a request appended.

Split: the longest prefix (in whole units: system, tools, then each content block) shared with
an earlier request is ``cache_read``; of the new part, a few tokens are plain ``input`` (what
follows the client's last cache breakpoint) and the rest ``cache_creation``. So
``input + cache_read + cache_creation`` is the whole prompt, as in the real API.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from typing import Any

CHARS_PER_TOKEN = 3.0
# Tokens after the client's last cache breakpoint; Claude Code's requests show single digits here.
FRESH_INPUT_TOKENS = 4
# Earlier prompts remembered for prefix matching (a cache holds many conversations at once).
REMEMBERED_PROMPTS = 64


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(_without_cache_control(value), ensure_ascii=False, sort_keys=True)


def prompt_units(request: dict[str, Any]) -> list[str]:
    """The prompt as an ordered list of serialized pieces; a cached prefix is a run of equal leading pieces."""
    system = request.get("system") or []
    system = [{"type": "text", "text": system}] if isinstance(system, str) else system
    units = [_dumps(system), _dumps(request.get("tools") or [])]
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        # A string and a one-text-block list are the same prompt (the CLI sends either for one message).
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        units.extend(f"{message.get('role')}:{_dumps(block)}" for block in blocks)
    return units


def _shared_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class UsageModel:
    """Remembers recent prompts and prices each new one against the longest shared prefix."""

    def __init__(self) -> None:
        self._seen: deque[list[str]] = deque(maxlen=REMEMBERED_PROMPTS)
        self._lock = threading.Lock()

    def usage(self, request: dict[str, Any]) -> dict[str, int]:
        units = prompt_units(request)
        with self._lock:
            shared = max((_shared_prefix(units, old) for old in self._seen), default=0)
            self._seen.append(units)
        total = max(1, estimate_tokens("".join(units)))
        cached = min(total, estimate_tokens("".join(units[:shared])))
        fresh = min(total - cached, FRESH_INPUT_TOKENS)
        return {
            "input_tokens": fresh,
            "cache_creation_input_tokens": total - cached - fresh,
            "cache_read_input_tokens": cached,
        }

    def count(self, request: dict[str, Any]) -> int:
        """What ``/v1/messages/count_tokens`` answers: the whole prompt, without touching the cache."""
        return max(1, estimate_tokens("".join(prompt_units(request))))
