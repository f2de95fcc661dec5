"""What each request of a Gemini CLI session held: the results a request carried (the model server's record) and
those the Session holds before each message, to be held to each other."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pytest_agent_eval.transcript import Compaction, Message, Session, ToolResult


def sent_results(request: dict[str, Any]) -> Counter[str]:
    """The results a Gemini API request carried: call id → how many times (its ``functionResponse`` parts)."""
    parts = [p for content in request.get("contents") or [] for p in content.get("parts") or []]
    return Counter(p["functionResponse"]["id"] for p in parts if "functionResponse" in p)


def held_results(session: Session) -> list[Counter[str]]:
    """Per message, the results (call id → how many) the context held when it was asked for: those since the last
    compaction."""
    held: Counter[str] = Counter()
    per_message = []
    for item in session.timeline:
        if isinstance(item, Compaction):
            held = Counter()
        elif isinstance(item, ToolResult):
            held[item.call_id] += 1
        elif isinstance(item, Message):
            per_message.append(Counter(held))
    return per_message
