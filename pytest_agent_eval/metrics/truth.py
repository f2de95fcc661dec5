"""What a stand-in server knows about a session it served, held against what occupancy estimates.

The server keeps, per answered request, the prompt's tokens and each tool result's (:class:`~.server.Truth`),
keyed by the id of the reply, which the transcript records as the assistant message's id. So the tokens each
tool family occupies at the end of a session are read straight off the request that produced its last
main-thread message: no estimate, the count the usage figures were made from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..model.usage import PromptCount
from ..tool import RetrievalTool
from ..transcript import MAIN, Session
from .occupancy import FAMILIES, family


def read_truth_log(path: str | Path) -> dict[str, PromptCount]:
    """message id → the count of the request it answered, from a server's ``truth_log`` (JSON lines)."""
    counts: dict[str, PromptCount] = {}
    with Path(path).open(encoding="utf-8") as log:
        for number, line in enumerate(log, start=1):
            try:
                record = json.loads(line)
                hidden = int(record.get("hidden", 0))  # absent from logs written before hidden thinking was counted
                context = {str(k): int(v) for k, v in record.get("context", {}).items()}  # absent: none moved in
                counts[record["message_id"]] = PromptCount(
                    int(record["tokens"]), dict(record["results"]), hidden, context
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a truth record ({exc})") from None
    return counts


def resident_truth(session: Session, counts: Mapping[str, PromptCount], tool: RetrievalTool) -> dict[str, int] | None:
    """Tokens each family's tool results occupy in the main thread's last request, as the server counted
    them, less the session context the client moved into a result (:func:`~.usage.moved_context`: the CLI's reminders,
    there whichever result they ride on); None when the server did not answer that request (another server's session,
    a real API's)."""
    measured = [m for m in session.messages(MAIN) if m.usage is not None and m.usage.ctx > 0]
    if not measured or measured[-1].id not in counts:
        return None
    names = {call.id: call.name for call in session.calls}
    resident = dict.fromkeys(FAMILIES, 0)
    last = counts[measured[-1].id]
    for call_id, tokens in last.results.items():
        resident[family(names.get(call_id, ""), tool)] += tokens - last.context.get(call_id, 0)
    return resident


def evicted_truth(session: Session, counts: Mapping[str, PromptCount]) -> int | None:
    """Tokens of the main thread's tool results the server counted in some request it answered (a compaction's
    summary request too) that its last main-thread request no longer holds, each at its count; None when the server
    did not answer that request."""
    measured = [m for m in session.messages(MAIN) if m.usage is not None and m.usage.ctx > 0]
    if not measured or measured[-1].id not in counts:
        return None
    final = counts[measured[-1].id].results
    calls = {call.id for call in session.calls if call.thread == MAIN}
    seen: dict[str, int] = {}
    for count in counts.values():
        for call_id, tokens in count.results.items():
            if call_id in calls:
                seen[call_id] = tokens
    return sum(tokens for call_id, tokens in seen.items() if call_id not in final)
