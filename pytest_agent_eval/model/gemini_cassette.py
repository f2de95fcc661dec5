"""Replay a recorded Gemini CLI run over the Gemini API: the model's turns come from its chat record.

A recording is the ``gemini --output-format stream-json`` stream(s) of a run, with its chat record found beside the
first as ``agent-eval score`` finds it (``run-<label>.chat``, or ``session-*-<id prefix>.jsonl``;
:func:`~pytest_agent_eval.agents.gemini.transcript.read_gemini`). The matching rules are the Messages cassette's
(:mod:`.cassette`): the N-th ``:streamGenerateContent`` (or ``:generateContent``) request gets the N-th recorded
response, N counted from the request itself (the ``model`` turns in its ``contents``), so a retried request gets the
same answer and ``--resume`` continues where the recording did. Each response is sent as the model sent it: its text,
then its calls as ``functionCall{id, name, args}`` under the names the CLI offers (``run_shell_command``,
``mcp_NAME_tool``) and the model's ids, so the CLI's ``functionResponse``s pair up with them; its thinking, where the
record kept some, as the stand-in renders it (:func:`~.gemini.with_thinking`: the recorded thoughts, and a signature
declaring the rest of ``tokens.thoughts``), so the replay counts the thinking the recording did. The recorded working
directory (the session context's first workspace directory) is rewritten to the replaying CLI's.

A request offering no tools is no step of the recording (the CLI's own side requests): it is answered with text, as
the scripted stand-in answers it. ``:countTokens`` is answered by the server's counting model. A recording with a
line that cannot be read is refused, naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.gemini.transcript import SHELL_NAME, SHELL_TOOL, read_gemini

from ..transcript import UserText
from .cassette import rebase, recording_paths, refuse_unreadable
from .gemini import gemini_name, read_turn, with_thinking, workspace_directory
from .usage import text_tokens

SIDE_REQUEST_TEXT = "OK."


class GeminiCassetteBackend:
    """A cassette of a Gemini CLI run: answers the Gemini API (``respond_gemini``) only."""

    stand_in_model = "stand-in-cassette"

    def __init__(self, paths: str | Path | Iterable[str | Path]) -> None:
        self.paths = recording_paths(paths)
        session = refuse_unreadable(read_gemini(self.paths))
        assert session.chat_file is not None  # read_gemini found it, or raised
        self.chat = session.chat_file
        self.turns: list[list[dict[str, Any]]] = []
        self.thinking: list[tuple[str, int]] = []  # per turn: its thoughts' text, and the tokens its thinking cost
        for message in session.messages(thread=None):
            parts: list[dict[str, Any]] = [{"text": message.text}] if message.text else []
            parts += [{"functionCall": {"id": call.id, "name": sent_name(call.name), "args": dict(call.input)}}
                      for call in message.calls]  # fmt: skip
            if parts:
                self.turns.append(parts)
                self.thinking.append(session.thinking.get(message.id, ("", 0)))
        texts = (workspace_directory(event.text) for event in session.timeline if isinstance(event, UserText))
        self.cwd = next((cwd for cwd in texts if cwd), None)

    def describe(self) -> str:
        return (
            f"cassette replay of {len(self.turns)} recorded Gemini turns from "
            f"{', '.join(p.name for p in [*self.paths, self.chat])} — its figures measure the pipeline and the "
            "tool's responses, not a model"
        )

    def respond_gemini(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> list[dict]:
        """The recorded parts of the request's turn (see the module docstring)."""
        if not any(isinstance(group, dict) and group.get("functionDeclarations") for group in request.get("tools") or []
                   ):  # fmt: skip
            return [{"text": SIDE_REQUEST_TEXT}]
        done = responses_in(request)
        if done >= len(self.turns):
            return [{"text": f"(cassette exhausted: the recording has {len(self.turns)} responses)"}]
        parts = [dict(part) for part in self.turns[done]]
        cwd = read_turn(request).cwd
        parts = rebase(parts, self.cwd, cwd) if self.cwd and cwd and cwd != self.cwd else parts
        thought, spent = self.thinking[done]
        if not (thought or spent):
            return parts
        return with_thinking(request, parts, thought, max(0, spent - text_tokens(thought)))

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        raise ValueError(f"this cassette recorded Gemini CLI's Gemini API ({self.chat}), not the Messages API")


def sent_name(common: str) -> str:
    """The name the CLI offered a tool under, from the common one the reader gave its call."""
    return SHELL_TOOL if common == SHELL_NAME else gemini_name(common)


def responses_in(request: dict[str, Any]) -> int:
    """How many of the model's responses a Gemini request's history holds: its ``model`` turns."""
    return sum(1 for content in request.get("contents") or [] if isinstance(content, dict)
               and content.get("role") == "model")  # fmt: skip
