"""The Gemini API's side of the stand-in: its paths, the thinking as the API renders it, the usage, the response and
its stream.

An agent speaking it (Gemini CLI: ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``; it may ask
``:generateContent``, the same not streamed, and ``:countTokens`` too) has its requests read for the policy, and the
policy's reply spoken in its tools, by its own folder's speech (its agent's ``stand_in.py``,
:mod:`pytest_agent_eval.model.speech`); what the API itself does with the parts is here.

The SSE stream is ``data: <GenerateContentResponse>`` frames (no event names): text in chunks, each call whole, the
last frame with ``finishReason`` and ``usageMetadata{promptTokenCount, cachedContentTokenCount,
candidatesTokenCount, totalTokenCount}``; ``promptTokenCount`` is the whole prompt, cached part included, as the
real API reports it. Each frame names the response (``responseId``).

The policy's thinking is rendered as the real API renders it: thought parts ``{text, thought: true}`` only where the
request asks for them (``generationConfig.thinkingConfig.includeThoughts``; Gemini CLI 0.61.0 does), before the
answer; the response's first call (or, without one, its last part) carries a ``thoughtSignature``, which declares the
thinking the parts do not show (:func:`~.usage.hidden_signature`). All of it is counted in
``usageMetadata.thoughtsTokenCount``, none of it in ``candidatesTokenCount``; ``totalTokenCount`` adds both to the
prompt. Gemini CLI sends no thought part back, only the signature on its call part: the prompt holds the signature's
text, never the thinking.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .sse import CHUNK_CHARS, new_id
from .usage import count_tokens, hidden_signature, signed_hidden, text_tokens

# The Gemini API: POST /v1beta/models/{model}:{method}
API_PREFIX = "/v1beta/models/"
STREAM, GENERATE, COUNT = "streamGenerateContent", "generateContent", "countTokens"


def model_method(path: str) -> tuple[str, str] | None:
    """(model, method) of a Gemini API path ``/v1beta/models/{model}:{method}``; None for any other path."""
    if not path.startswith(API_PREFIX) or ":" not in path:
        return None
    model, method = path[len(API_PREFIX) :].rsplit(":", 1)
    return (model, method) if model and "/" not in model else None


def _thoughts_asked(request: dict[str, Any]) -> bool:
    config = (request.get("generationConfig") or {}).get("thinkingConfig")
    return isinstance(config, dict) and bool(config.get("includeThoughts"))


def with_thinking(request: dict[str, Any], parts: list[dict[str, Any]], thought: str, hidden: int) -> list[dict]:
    """``parts`` after thinking of ``thought`` shown and ``hidden`` tokens more, as the API renders it: a thought part
    first where the request asks for thoughts, and a ``thoughtSignature`` on the first call (else the last part) that
    declares what no part shows (see the module docstring)."""
    shown = thought if _thoughts_asked(request) else ""
    rendered = ([{"text": shown, "thought": True}] if shown else []) + [dict(part) for part in parts]
    if rendered:
        signed = next((part for part in rendered if "functionCall" in part), rendered[-1])
        signed["thoughtSignature"] = hidden_signature(hidden + text_tokens(thought) - text_tokens(shown), new_id("sig"))
    return rendered


def thoughts_tokens(parts: list[dict[str, Any]]) -> int:
    """The thinking a response's parts cost: its thought parts' text and what their signature declares hidden."""
    shown = sum(text_tokens(str(p.get("text") or "")) for p in parts if p.get("thought"))
    return shown + sum(signed_hidden(p.get("thoughtSignature")) for p in parts)


def usage_metadata(prompt_tokens: int, cached_tokens: int, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage the Gemini API reports: ``promptTokenCount`` is the whole prompt, cached part included;
    ``candidatesTokenCount`` the response but its thinking, which is ``thoughtsTokenCount`` (only where there is
    some, as the API reports it). A signature is no output: it is the thinking, carried."""
    answer = [{k: v for k, v in p.items() if k != "thoughtSignature"} for p in parts if not p.get("thought")]
    output, thoughts = max(1, count_tokens(answer)), thoughts_tokens(parts)
    total = prompt_tokens + output + thoughts
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": output, "totalTokenCount": total}
    usage |= {"thoughtsTokenCount": thoughts} if thoughts else {}
    return usage | ({"cachedContentTokenCount": cached_tokens} if cached_tokens else {})


def response_json(parts: list[dict[str, Any]], model: str, usage: dict[str, Any], response_id: str) -> dict[str, Any]:
    """The whole (non-streamed) response."""
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model, "responseId": response_id}


def _frame(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\r\n\r\n".encode()


def stream_frames(parts: list[dict[str, Any]], model: str, usage: dict[str, Any], response_id: str) -> Iterator[bytes]:
    """The SSE byte frames of one streamed response: text in chunks, each call whole, then the finish and usage."""
    chunks: list[dict[str, Any]] = []
    for part in parts:
        if "text" in part:
            text, flags = part["text"], ({"thought": True} if part.get("thought") else {})
            pieces = [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)] or [""]
            chunks += [{"text": piece, **flags} for piece in pieces]
            if "thoughtSignature" in part:  # on the part's last chunk, as the API streams it
                chunks[-1]["thoughtSignature"] = part["thoughtSignature"]
        else:
            chunks.append(part)
    for index, chunk in enumerate(chunks):
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [chunk]}, "index": 0}
        frame: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": response_id}
        if index == len(chunks) - 1:
            candidate["finishReason"] = "STOP"
            frame["usageMetadata"] = usage
        yield _frame(frame)


def assemble(stream: bytes) -> dict[str, Any] | None:
    """The response a relayed SSE stream carried (its parts joined, the last frame's usage and id), as far as it got;
    None when no frame came. What the real API showed the client, read back for the request record."""
    response: dict[str, Any] | None = None
    parts: list[dict[str, Any]] = []
    for line in stream.decode("utf-8", "replace").splitlines():
        try:
            frame = json.loads(line[5:]) if line.startswith("data:") else None
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            continue
        response = {**(response or {}), **{k: v for k, v in frame.items() if k != "candidates"}}
        for candidate in frame.get("candidates") or []:
            content = candidate.get("content") if isinstance(candidate, dict) else None
            for part in (content or {}).get("parts") or []:
                joins = isinstance(part, dict) and "text" in part and parts and "text" in parts[-1]
                if joins and bool(part.get("thought")) == bool(parts[-1].get("thought")):
                    parts[-1] = {**parts[-1], **part, "text": parts[-1]["text"] + str(part["text"])}
                elif isinstance(part, dict):
                    parts.append(dict(part))
    if response is None:
        return None
    return {**response, "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}
