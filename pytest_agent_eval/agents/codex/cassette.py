"""Replay a recorded Codex run over the Responses API: the model's turns come from its rollout, the tools run for real.

The matching rules are the Messages cassette's (model/cassette.py): the N-th request gets the N-th recorded response,
where N is counted from the request itself — the model's responses already in its ``input`` (runs of consecutive
model output items: calls, reasoning, assistant text) — so a retried request gets the same answer and ``codex exec
resume`` continues where the recording did. Output items are sent as recorded (``call_id`` kept, so the CLI's
``function_call_output`` pairs up with them), with the recorded working directory rewritten to the replaying CLI's
(read from the request's ``<environment_context>``): the tools must run against the repository being evaluated.

A recording is the ``codex exec --json`` stream(s) of a run, whose rollout is found beside the first as
``agent-eval score`` finds it (``run-<label>.rollout``, or ``rollout-*<thread id>.jsonl``). Only the main thread is
replayed: Codex keeps a spawned agent's session in a rollout of its own. A recording with a line that cannot be read
is refused, naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.codex.stand_in import read_turn
from pytest_agent_eval.agents.codex.transcript import is_model_output, read_codex, recorded_responses
from pytest_agent_eval.model.cassette import rebase, recording_paths, refuse_unreadable
from pytest_agent_eval.model.sse import new_id


class ResponsesCassetteBackend:
    """A cassette of a Codex run: answers ``/v1/responses`` only."""

    stand_in_model = "stand-in-cassette"

    def __init__(self, paths: str | Path | Iterable[str | Path]) -> None:
        self.paths = recording_paths(paths)
        session = refuse_unreadable(read_codex(self.paths))
        assert session.rollout_file is not None  # read_codex found it, or raised
        self.rollout = session.rollout_file
        self.cwd, self.turns = recorded_responses(self.rollout)

    def describe(self) -> str:
        return (
            f"cassette replay of {len(self.turns)} recorded Responses turns from "
            f"{', '.join(p.name for p in [*self.paths, self.rollout])} — its figures measure the pipeline and the "
            "tool's responses, not a model"
        )

    def respond_responses(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> list[dict]:
        """The recorded output items of the request's turn (see the module docstring)."""
        done = responses_in(request)
        if done >= len(self.turns):
            text = f"(cassette exhausted: the recording has {len(self.turns)} responses)"
            content = [{"type": "output_text", "text": text, "annotations": []}]
            return [{"type": "message", "id": new_id("msg"), "status": "completed", "role": "assistant",
                     "content": content}]  # fmt: skip
        items = [_with_id(item) for item in self.turns[done]]
        cwd = read_turn(request).cwd
        if self.cwd and cwd and cwd != self.cwd:
            # encrypted reasoning is the API's own: never rewritten
            items = [{k: v if k == "encrypted_content" else rebase(v, self.cwd, cwd) for k, v in i.items()}
                     for i in items]  # fmt: skip
        return items

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        raise ValueError(f"this cassette recorded Codex's Responses API ({self.rollout}), not the Messages API")


def responses_in(request: dict[str, Any]) -> int:
    """How many of the model's responses a Responses request's history holds: runs of its output items."""
    count, inside = 0, False
    for item in request.get("input") or []:
        output = isinstance(item, dict) and is_model_output(item)
        count += output and not inside
        inside = output
    return count


def _with_id(item: dict[str, Any]) -> dict[str, Any]:
    """A recorded item as it is streamed: an assistant message needs an id its text deltas name."""
    if item.get("type") == "message" and not item.get("id"):
        return {**item, "id": new_id("msg")}
    return dict(item)
