"""What every driver watches a turn for, whatever it reads the turn from: an API error that ends the run at
once, and the silences that mark a turn stalled (this module judges the silences; an agent's driver reads its
own lines for errors, as Claude Code's ``events`` module in its agent's folder does).

Claude Code's headless driver reads the turn from the CLI's stream-json stdout, the interactive one from the
session file the CLI appends to; both are JSON lines written one per whole message, tool result or request, so
the same judgement applies to both:

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

from dataclasses import dataclass

# The longest silence a turn may have before it counts as stalled (see the module's docstring).
STALL_S_REAL_API = 180.0
STALL_S_STAND_IN = 30.0


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
