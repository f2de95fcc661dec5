"""What every driver watches a turn for, whatever it reads the turn from: an API error that ends the run at
once, and the silences that mark a turn stalled.

The headless driver reads the turn from the CLI's stream-json stdout, the interactive one from the session file
the CLI appends to; both are JSON lines written one per whole message, tool result or request, so the same
judgement applies to both:

* **API error** — the CLI gave up on a request after its own retries and wrote a synthetic assistant message
  carrying the error (``error``; in session files also ``isApiErrorMessage`` and ``apiErrorStatus``). Resuming
  or typing the next turn only spends that turn's retries on the same outage, so the run ends there.
* **Stall** — the longest gap between lines. Against the real API a silence is one message being generated (a
  long answer with thinking: a minute or two) or one tool call; against a local stand-in model every reply is
  immediate, so the only long silences are tool calls (an index query: seconds) and the CLI waiting on a
  request that stopped answering. Measured with 2.1.332 (``bench/cli_timeouts.py``): a request never answered is
  given up after 360 s (``API_TIMEOUT_MS`` unset) and retried with an ``api_retry`` event; a stream that stops
  arriving, after its idle timeout, which never goes below 300 s, and retried *without* one. Either way the turn
  then succeeds with the wait in its wall time — the issue-13 "280 s stall" that read as "time saved 94%". A turn
  silent longer than the threshold is stalled; its time is no measurement of the agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_agent_eval.agents.claude_code.transcript import read_lines

# The longest silence a turn may have before it counts as stalled (see the module's docstring).
STALL_S_REAL_API = 180.0
STALL_S_STAND_IN = 30.0


def turn_api_error(lines: Iterable[str | bytes]) -> str | None:
    """The API error a turn's lines end in, as the transcript reader words it; None when there is none.

    ``lines``: a stream-json segment, or what a session file grew by during the turn."""
    try:
        return read_lines(lines).infra_error
    except Exception:  # an unreadable line is the scorer's to report, naming its file and line
        return None


def event_of(raw: str | bytes) -> dict | None:
    """One transcript line as an event; None when it is not a JSON object."""
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def describe(event: dict | None) -> str:
    """A line in a word or three, so a stall says what it waited on: after ``user tool_result``, ``system
    init`` or ``api-request`` the CLI waited on the model (a request, its retries); after ``assistant tool_use
    <name>``, on a tool."""
    if event is None:
        return "a non-JSON line"
    kind = str(event.get("type"))
    if kind == "system":
        return f"system {event.get('subtype')}"
    content = (event.get("message") or {}).get("content") if isinstance(event.get("message"), dict) else None
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = content[-1]
        return " ".join(str(x) for x in (kind, last.get("type"), last.get("name")) if x)
    return kind


@dataclass
class Silences:
    """The longest gap between a turn's lines so far, and the line it followed."""

    last_at: float  # when the turn started or its last line came (time.monotonic())
    last_what: str = "start"
    longest_s: float = 0.0
    after: str = "start"

    def line(self, now: float, what: str | None) -> None:
        """A line came at ``now``; ``what`` describes it (:func:`describe`), None for a line that says nothing of
        what the CLI waits on (a session file's bookkeeping), which keeps the label of the line before."""
        self.until(now)
        self.last_at, self.last_what = now, what or self.last_what

    def until(self, now: float) -> None:
        """Count the silence since the last line up to ``now`` (a turn that never finished ends here)."""
        if now - self.last_at > self.longest_s:
            self.longest_s, self.after = now - self.last_at, self.last_what
