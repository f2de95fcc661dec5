"""The harness's one retry policy for the model's transient errors, the same whatever agent is asking.

The model server (stand-in or forwarder) stands between every agent and its model, so it is where a transient
failure of the model — HTTP 5xx, a 429 (waited out as its ``retry-after`` says), a stream cut before it reached the
agent, a real API a forwarder could not reach (``server.Unreachable``) — is retried: the agent sees the answer of a
later try, after a short, bounded wait, whichever CLI it is and however that CLI's own retries are set. Every try
the server retried is in the request record (``retried``: the try's number), so the item's ``api_retries`` counts
it (docs/usage.md, "When something goes wrong").

When the tries are spent the server gives up with an error no agent retries on its own clock (HTTP 400, naming the
model's status and message and how many tries took how long): the item ends at once as an infrastructure error that
says so, rather than wait out a CLI's own back-off (OpenCode's grows to 30 s a retry) or read as a timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

# What the server retries: the API's transient statuses (overloaded, rate-limited, its own errors, a gateway's).
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504, 529})


@dataclass(frozen=True)
class RetryPolicy:
    """``tries`` in all (the first and ``tries - 1`` retries), ``backoff_s[k]`` before retry k+1 (the last value
    for any later), a ``retry-after`` honoured up to ``max_wait_s``. The defaults give up within 7 s of waiting, or
    ``3 × max_wait_s`` when the API asks for longer waits."""

    tries: int = 4
    backoff_s: tuple[float, ...] = (1.0, 2.0, 4.0)
    max_wait_s: float = 30.0

    def wait_s(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (from 1): the API's ``retry-after`` where it gave one (in
        seconds), else the back-off; never more than ``max_wait_s``."""
        try:
            asked = float(retry_after) if retry_after is not None else None
        except ValueError:
            asked = None  # an HTTP date: the back-off instead
        wait = asked if asked is not None else self.backoff_s[min(retry, len(self.backoff_s)) - 1]
        return max(0.0, min(wait, self.max_wait_s))


# The harness's policy (ItemLife's model endpoint); a server started without one answers every fault as it comes.
HARNESS_RETRY = RetryPolicy()
