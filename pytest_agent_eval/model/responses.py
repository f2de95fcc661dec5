"""The OpenAI Responses API's side of the stand-in: its reasoning items, usage, response and stream.

An agent speaking it (Codex CLI: ``POST /v1/responses`` with ``stream: true``) has its requests read for the policy,
and the policy's reply spoken in its tools, by its own folder's speech (its agent's ``stand_in.py``,
:mod:`pytest_agent_eval.model.speech`); what the API itself does with the output items is here.

The policy's thinking is rendered as the real API renders reasoning: a ``reasoning`` item ``{id, summary:
[{type: "summary_text", text}], encrypted_content}``. The thinking's text is the summary, streamed only when the
request asks for one (``reasoning.summary``, Codex 0.171.0 sends ``"auto"``), else hidden with the rest; the hidden
tokens are declared in ``encrypted_content`` (:func:`~.usage.hidden_signature`), sent only when the request includes
``reasoning.encrypted_content`` (Codex does, and sends the item back in the next requests' ``input``, where the
counting model prices it as the real API does: its summary plus what it hid). All reasoning is output:
``output_tokens`` counts it, ``output_tokens_details.reasoning_tokens`` names it.

The SSE stream is the one Codex parses: ``response.created``, per output item ``response.output_item.added``
(``response.output_text.delta``…, or a reasoning summary's ``response.reasoning_summary_part.added``,
``response.reasoning_summary_text.delta``… ``.done``, ``response.reasoning_summary_part.done``)
``response.output_item.done``, then ``response.completed`` with ``usage{input_tokens,
input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens, total_tokens}``.
``input_tokens`` is the whole prompt, cached part included, as the real API reports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .sse import CHUNK_CHARS, data_events, event, new_id
from .usage import count_tokens, declared_hidden, hidden_signature, text_tokens

# What a request includes to get each reasoning item's encrypted content (and send it back, with ``store: false``).
ENCRYPTED_REASONING = "reasoning.encrypted_content"


def _summary_asked(request: dict[str, Any]) -> bool:
    reasoning = request.get("reasoning")
    return isinstance(reasoning, dict) and reasoning.get("summary") not in (None, "none")


def reasoning_item(request: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """A thinking block as a reasoning item: its text the summary when one is asked, else hidden with what the block
    hid; the hidden tokens declared in ``encrypted_content`` (see the module docstring)."""
    text = str(block.get("thinking") or "")
    shown = text if _summary_asked(request) else ""
    hidden = declared_hidden(block) + (text_tokens(text) if not shown else 0)
    summary = [{"type": "summary_text", "text": shown}] if shown else []
    return {"type": "reasoning", "id": new_id("rs"), "summary": summary,
            "encrypted_content": hidden_signature(hidden, new_id("enc"))}  # fmt: skip


def as_requested(request: dict[str, Any], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output items as the API sends them: a reasoning item's ``encrypted_content`` only where the request
    includes it (``include: ["reasoning.encrypted_content"]``)."""
    if ENCRYPTED_REASONING in (request.get("include") or []):
        return items
    return [_without_encryption(item) for item in items]


def _without_encryption(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "encrypted_content"} if item.get("type") == "reasoning" else item


def content_text(content: Any) -> str:
    """An item's ``content`` (or a reasoning item's ``summary``) as text: a string, or its parts' texts."""
    if isinstance(content, str):
        return content
    parts = [p.get("text") for p in content or [] if isinstance(p, dict)]
    return "\n".join(p for p in parts if isinstance(p, str))


def generated(item: dict[str, Any]) -> dict[str, Any]:
    """What the model generated of an output item, as the counting model prices every stand-in's output: the
    Messages API's content block of it (a text, a thinking, a tool_use with its call id, name and input). The
    Responses API's own item ids, status, annotations and encryption are not the model's output."""
    if item.get("type") == "message":
        return {"type": "text", "text": content_text(item.get("content"))}
    if item.get("type") == "reasoning":
        return {"type": "thinking", "thinking": content_text(item.get("summary"))}
    try:
        arguments = json.loads(item.get("arguments") or "{}")
    except ValueError:
        arguments = item.get("arguments")
    return {"type": "tool_use", "id": item.get("call_id"), "name": item.get("name"), "input": arguments}


def usage_json(prompt_tokens: int, cached_tokens: int, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage a caching Responses API reports: ``input_tokens`` is the whole prompt, cached part included;
    ``output_tokens`` what the model generated (:func:`generated`) and the reasoning it hid (its ``encrypted_content``
    declares it), of which ``reasoning_tokens`` the reasoning, summary and hidden."""
    reasoning = sum(count_tokens(generated(i)) + declared_hidden(i) for i in items if i.get("type") == "reasoning")
    output = max(1, sum(count_tokens(generated(i)) + declared_hidden(i) for i in items))
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt_tokens + output,
    }


def response_json(
    items: list[dict[str, Any]], model: str, usage: dict[str, Any] | None, response_id: str, status: str
) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "status": status, "model": model, "output": items,
            "usage": usage}  # fmt: skip


def _event(name: str, data: dict[str, Any], sequence: list[int]) -> bytes:
    sequence[0] += 1
    return event(name, {"type": name, "sequence_number": sequence[0], **data})


def stream_events(items: list[dict[str, Any]], model: str, usage: dict[str, Any], response_id: str) -> Iterator[bytes]:
    """The SSE byte frames of one streamed response."""
    sequence = [-1]
    yield _event("response.created", {"response": response_json([], model, None, response_id, "in_progress")}, sequence)
    for index, item in enumerate(items):
        if item["type"] == "message":
            yield _event("response.output_item.added", {"output_index": index, "item": {**item, "content": []}},
                         sequence)  # fmt: skip
            text = item["content"][0]["text"]
            for start in range(0, len(text), CHUNK_CHARS):
                delta = {"item_id": item["id"], "output_index": index, "content_index": 0,
                         "delta": text[start : start + CHUNK_CHARS]}  # fmt: skip
                yield _event("response.output_text.delta", delta, sequence)
        elif item["type"] == "reasoning":
            yield _event("response.output_item.added", {"output_index": index, "item": {**item, "summary": []}},
                         sequence)  # fmt: skip
            for summary_index, part in enumerate(item.get("summary") or []):
                yield from _summary_events(item["id"], index, summary_index, part, sequence)
        else:
            yield _event("response.output_item.added", {"output_index": index, "item": item}, sequence)
        yield _event("response.output_item.done", {"output_index": index, "item": item}, sequence)
    done = response_json(items, model, usage, response_id, "completed")
    yield _event("response.completed", {"response": done}, sequence)


def _summary_events(
    item_id: str, index: int, summary_index: int, part: dict[str, Any], sequence: list[int]
) -> Iterator[bytes]:
    """One summary part of a reasoning item, its text streamed in pieces as the API streams a reasoning summary."""
    where = {"item_id": item_id, "output_index": index, "summary_index": summary_index}
    text = str(part.get("text") or "")
    yield _event("response.reasoning_summary_part.added", {**where, "part": {**part, "text": ""}}, sequence)
    for start in range(0, len(text), CHUNK_CHARS):
        yield _event("response.reasoning_summary_text.delta", {**where, "delta": text[start : start + CHUNK_CHARS]},
                     sequence)  # fmt: skip
    yield _event("response.reasoning_summary_text.done", {**where, "text": text}, sequence)
    yield _event("response.reasoning_summary_part.done", {**where, "part": part}, sequence)


_ENDED = ("response.completed", "response.failed", "response.incomplete")


def assemble_response(stream: bytes) -> dict[str, Any] | None:
    """The response a Responses SSE stream carried (``id``, ``status``, ``output``, ``usage``): its final event's
    when it got that far, else ``response.created``'s with the output items done so far; None when it never
    started one. What a relayed stream showed the client, read back for the request record."""
    response: dict[str, Any] | None = None
    done: list[dict[str, Any]] = []
    for data in data_events(stream):
        kind = data.get("type")
        if kind in ("response.created", *_ENDED) and isinstance(data.get("response"), dict):
            response = dict(data["response"])
            if kind in _ENDED:
                return response
        elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            done.append(data["item"])
    return {**response, "output": done} if response is not None else None
