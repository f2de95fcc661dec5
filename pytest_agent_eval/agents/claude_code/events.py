"""What Claude Code's drivers read in a turn's lines as they come (stream-json, or a session file as it grows):
the API error that ends a run, what a line says the CLI waits on (a line's JSON object: ``harness.drivers.stream``).

See :mod:`pytest_agent_eval.harness.drivers.watch` for the judgement (an API error ends the run; the longest
silence between lines marks a stalled turn).
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_agent_eval.agents.claude_code.transcript import read_lines
from pytest_agent_eval.harness.drivers.stream import NOT_JSON


def turn_api_error(lines: Iterable[str | bytes]) -> str | None:
    """The API error a turn's lines end in, as the transcript reader words it; None when there is none.

    ``lines``: a stream-json segment, or what a session file grew by during the turn."""
    try:
        return read_lines(lines).infra_error
    except Exception:  # an unreadable line is the scorer's to report, naming its file and line
        return None


def describe(event: dict | None) -> str:
    """A line in a word or three, so a stall says what it waited on: after ``user tool_result``, ``system
    init`` or ``api-request`` the CLI waited on the model (a request, its retries); after ``assistant tool_use
    <name>``, on a tool."""
    if event is None:
        return NOT_JSON
    kind = str(event.get("type"))
    if kind == "system":
        return f"system {event.get('subtype')}"
    content = (event.get("message") or {}).get("content") if isinstance(event.get("message"), dict) else None
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = content[-1]
        return " ".join(str(x) for x in (kind, last.get("type"), last.get("name")) if x)
    return kind
