"""The model's side of the evidence: every request a model server received, and what it answered.

The server (stand-in or forwarder) runs outside the sandbox and appends one JSON line per request to the file
its :class:`RequestLog` points at (an item's run folder, :data:`REQUESTS_FILE`), so what the model saw is on
record where the agent cannot write. A line: ``method``, ``path``, ``status``, ``request`` (the JSON body, or
None), ``response`` (the message returned, read back from its stream when relayed; or the JSON body; or None),
``refused`` (why the server refused it, or None), ``fault`` (an injected fault, or None) and ``at`` (when it was
answered, Unix seconds); a try the server retried (:mod:`.retry`) also has ``retried`` (its number from 1), the
answer it gave up with ``gave_up`` (why).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_agent_eval.harness.writes import WriteFailed, append_line

REQUESTS_FILE = "model-requests.jsonl"


class RequestLog:
    """Where a server records its requests: nowhere until :meth:`into` points it at a file (one item's)."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path
        self._lock = threading.Lock()
        self.failure: str | None = None  # the first write that failed while recording into the current file
        self.gave_up: str | None = None  # why the server last gave up on the model (model/retry.py), this file's

    @property
    def path(self) -> Path | None:
        return self._path

    @contextmanager
    def into(self, path: Path) -> Iterator[Path]:
        """Record into ``path`` while the block runs (a session-wide server serves one item at a time)."""
        append_line(path, b"")  # a run that sent nothing has a record too: an empty one (WriteFailed if it cannot)
        with self._lock:
            before, self._path, failure, self.failure = self._path, Path(path), self.failure, None
            gave_up, self.gave_up = self.gave_up, None
        try:
            yield Path(path)
        finally:
            with self._lock:
                self._path, self.failure, self.gave_up = before, failure, gave_up

    def write(self, entry: dict[str, Any]) -> None:
        """Append one entry, whole or not at all; WriteFailed (kept in :attr:`failure`) when it cannot be (a full
        disk): the server then answers the agent with an error rather than leave it waiting."""
        with self._lock:
            if self._path is None:
                return
            line = json.dumps(entry, ensure_ascii=False) + "\n"
            try:  # opened per line: a retry moves the file away
                append_line(self._path, line.encode("utf-8"))
            except WriteFailed as exc:
                self.failure = self.failure or str(exc)
                raise


def read_requests(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a request record; a line that is not one is an error naming the file and line."""
    entries = []
    with Path(path).open(encoding="utf-8") as log:
        for number, line in enumerate(log, start=1):
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a request record line ({exc})") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                raise ValueError(f"{path}:{number}: not a request record line (no path)")
            entries.append(entry)
    return entries


def requests_beside(segment: str | Path) -> list[dict[str, Any]] | None:
    """The request record in a run's folder (beside its first segment); None when its server kept none."""
    path = Path(segment).parent / REQUESTS_FILE
    return read_requests(path) if path.is_file() else None


def retries_by_turn(entries: list[dict[str, Any]], starts: list[float]) -> list[int]:
    """Per turn (``starts``: when each began, Unix seconds), the model requests sent again: the tries the server
    retried (``retried``, :mod:`.retry`) and the agent's own — a request the same as the one before it, which failed
    (an error status, a cut stream, no answer). Entries without a time (records from before ``at``) are not
    counted."""
    counts = [0] * len(starts)
    previous: dict[str, Any] | None = None
    for entry in entries:
        at = entry.get("at")
        if entry.get("request") is None or not isinstance(at, (int, float)) or not starts:
            continue
        turn = max((i for i, start in enumerate(starts) if start <= at), default=0)
        if entry.get("retried"):
            counts[turn] += 1
        elif previous is not None and not previous.get("retried") and entry["request"] == previous["request"]:
            counts[turn] += previous.get("status") != 200 or previous.get("fault") == "break"
        previous = entry
    return counts
