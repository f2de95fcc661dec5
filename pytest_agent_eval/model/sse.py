"""The assistant reply a backend decides on, and its Messages-API wire forms (SSE stream and JSON).

The event order is the one the real API sends and Claude Code parses: ``message_start``, then per
content block ``content_block_start`` / ``content_block_delta``… / ``content_block_stop``, then
``message_delta`` (stop_reason, usage) and ``message_stop``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .usage import count_tokens, declared_hidden

# Text and tool input are streamed in pieces of this many characters, as the API streams tokens.
CHUNK_CHARS = 40


@dataclass
class Reply:
    """One assistant message: ``blocks`` are API content blocks (text, tool_use, thinking)."""

    blocks: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def final_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if any(b.get("type") == "tool_use" for b in self.blocks) else "end_turn"

    @classmethod
    def text(cls, text: str) -> Reply:
        return cls([{"type": "text", "text": text}])


class IdSource:
    """The ids one item's answers carry, the same every time the item is asked the same things: the ``n``-th id of a
    prefix is drawn from ``seed`` (the item's folder name), so two runs of a campaign send the CLI the same call ids
    and the token counts of the prompts that repeat them do not move (docs/report.md, "Two runs of one campaign").
    A count per prefix: a side request that draws a message id does not shift the next call id."""

    def __init__(self, seed: str) -> None:
        self.seed = seed
        self._drawn: Counter[str] = Counter()
        self._lock = threading.Lock()

    def new(self, prefix: str) -> str:
        with self._lock:
            number = self._drawn[prefix]
            self._drawn[prefix] += 1
        digest = hashlib.sha256(f"{self.seed}\0{prefix}\0{number}".encode()).hexdigest()
        return f"{prefix}_01{digest[:22]}"


_serving = threading.local()  # the IdSource of the item the current request thread answers for, if any


@contextmanager
def ids_from(source: IdSource | None) -> Iterator[None]:
    """Draw :func:`new_id` from ``source`` on this thread while the block runs (a server's request thread)."""
    before, _serving.source = getattr(_serving, "source", None), source
    try:
        yield
    finally:
        _serving.source = before


def new_id(prefix: str) -> str:
    """An id of the API's form: the serving item's next (:class:`IdSource`), or a random one outside an item."""
    source = getattr(_serving, "source", None)
    return source.new(prefix) if source is not None else f"{prefix}_01{uuid.uuid4().hex[:22]}"


def tool_use(name: str, tool_input: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id or new_id("toolu"), "name": name, "input": tool_input}


def output_tokens(reply: Reply) -> int:
    """Output tokens of the reply's blocks, counted as the prompt is (see :mod:`.usage`), hidden thinking included."""
    return max(1, count_tokens(reply.blocks) + sum(map(declared_hidden, reply.blocks)))


def message_json(reply: Reply, model: str, usage: dict[str, int], message_id: str) -> dict[str, Any]:
    """The non-streaming response body."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": reply.blocks,
        "stop_reason": reply.final_stop_reason,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": output_tokens(reply)},
    }


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]


def _block_events(index: int, block: dict[str, Any]) -> Iterator[bytes]:
    kind = block.get("type")
    if kind == "text":
        yield event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        )
        for piece in _pieces(block.get("text", "")):
            delta = {"type": "text_delta", "text": piece}
            yield event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        yield event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        for piece in _pieces(json.dumps(block.get("input") or {}, ensure_ascii=False)):
            delta = {"type": "input_json_delta", "partial_json": piece}
            yield event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        yield event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        for piece in _pieces(block.get("thinking", "")):
            delta = {"type": "thinking_delta", "thinking": piece}
            yield event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        signature = {"type": "signature_delta", "signature": block.get("signature") or "c2NyaXB0ZWQ="}
        yield event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": signature})
    else:
        raise ValueError(f"cannot stream a content block of type {kind!r}")
    yield event("content_block_stop", {"type": "content_block_stop", "index": index})


def stream_events(reply: Reply, model: str, usage: dict[str, int], message_id: str) -> Iterator[bytes]:
    """The SSE byte frames of one streamed message."""
    start_usage = {**usage, "output_tokens": 1}
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    yield event("message_start", {"type": "message_start", "message": message})
    yield event("ping", {"type": "ping"})
    for index, block in enumerate(reply.blocks):
        yield from _block_events(index, block)
    final_usage = {**usage, "output_tokens": output_tokens(reply)}
    delta = {"stop_reason": reply.final_stop_reason, "stop_sequence": None}
    yield event("message_delta", {"type": "message_delta", "delta": delta, "usage": final_usage})
    yield event("message_stop", {"type": "message_stop"})


def data_events(stream: bytes) -> Iterator[dict[str, Any]]:
    """Each ``data:`` line of an SSE stream that holds a JSON object, in order (a torn or foreign line is skipped)."""
    for line in stream.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        try:
            data = json.loads(line[5:])
        except ValueError:
            continue
        if isinstance(data, dict):
            yield data


def assemble(stream: bytes) -> dict[str, Any] | None:
    """The message an SSE stream carried (``id`` and ``content``, tool inputs parsed), as far as it got; None when
    it never started one. What a relayed stream showed the client, read back for the request record."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for data in data_events(stream):
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), dict):
            message = dict(data["message"])
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            blocks[int(data.get("index") or 0)] = dict(data["content_block"])
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            index, delta = int(data.get("index") or 0), data["delta"]
            block = blocks.setdefault(index, {})
            if delta.get("type") == "input_json_delta":
                inputs[index] = inputs.get(index, "") + str(delta.get("partial_json") or "")
            for key in ("text", "thinking"):
                if isinstance(delta.get(key), str):
                    block[key] = str(block.get(key) or "") + delta[key]
    if message is None:
        return None
    for index, text in inputs.items():
        try:
            blocks[index]["input"] = json.loads(text)
        except ValueError:
            blocks[index]["input"] = text  # cut mid-input: kept as it came
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message
