"""Replay a recorded Gemini CLI run over the Gemini API: the model's turns come from its chat record.

A recording is the ``gemini --output-format stream-json`` stream(s) of a run, with its chat record found beside the
first as ``agent-eval score`` finds it (``run-<label>.chat``, or ``session-*-<id prefix>.jsonl``;
:func:`~pytest_agent_eval.agents.gemini.transcript.read_gemini`). The matching rules are the Messages cassette's
(model/cassette.py): a ``:streamGenerateContent`` (or ``:generateContent``) request gets the recorded response its
history has reached, read off the request itself, so a retried request gets the same answer and ``--resume`` continues
where the recording did. The place is what survives Gemini CLI compressing its history (a summary replacing the older
turns, :func:`request_place`): the turn's question, the last user text, and how many ``model`` turns follow it; only a
request whose question the recording never asked is placed by its count of ``model`` turns. Each response is sent as
the model sent it: its text, then its calls as ``functionCall{id, name, args}`` under the names the CLI offers
(``run_shell_command``, ``mcp_NAME_tool``) and the model's ids, so the CLI's ``functionResponse``s pair up with them;
its thinking, where the record kept some, as the stand-in renders it (model/gemini.py, with_thinking: the recorded
thoughts, and a signature declaring the rest of ``tokens.thoughts``), so the replay counts the thinking the recording
did. The recorded working directory (the session context's first workspace directory) is rewritten to the replaying
CLI's.

A request offering no tools is no step of the recording (the CLI's own side requests): it is answered with text, as
the scripted stand-in answers it. ``:countTokens`` is answered by the server's counting model. A recording with a
line that cannot be read is refused, naming the file and line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.gemini.stand_in import gemini_name, read_turn, workspace_directory
from pytest_agent_eval.agents.gemini.transcript import SENT_KEYS, SENT_NAMES, SHELL_NAME, SHELL_TOOL, read_gemini
from pytest_agent_eval.model.cassette import rebase, recording_paths, refuse_unreadable
from pytest_agent_eval.model.gemini import with_thinking
from pytest_agent_eval.model.usage import text_tokens
from pytest_agent_eval.transcript import Compaction, Message, Session, UserText

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
        self.places: list[tuple[str, int]] = []  # per turn: its question, and how many responses to it came before
        for message, place in zip(session.messages(thread=None), response_places(session), strict=True):
            parts: list[dict[str, Any]] = [{"text": message.text}] if message.text else []
            parts += [{"functionCall": {"id": call.id, **sent_call(call.name, call.input)}} for call in message.calls]
            if parts:
                self.turns.append(parts)
                self.thinking.append(session.thinking.get(message.id, ("", 0)))
                self.places.append(place)
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
        done = self.turn_of(request)
        if done >= len(self.turns):
            return [{"text": f"(cassette exhausted: the recording has {len(self.turns)} responses)"}]
        parts = [dict(part) for part in self.turns[done]]
        cwd = read_turn(request).cwd
        parts = rebase(parts, self.cwd, cwd) if self.cwd and cwd and cwd != self.cwd else parts
        thought, spent = self.thinking[done]
        if not (thought or spent):
            return parts
        return with_thinking(request, parts, thought, max(0, spent - text_tokens(thought)))

    def turn_of(self, request: dict[str, Any]) -> int:
        """The recorded response ``request`` asks for: the one at its place (:func:`request_place`; a recorded text
        may hold the CLI's context before the question, in one text, as a subagent's first does); of a question
        the recording asked more than once, the first such at or after the count of the request's ``model`` turns
        (a compression only lowers that count); of one it never asked, the count itself."""
        done = responses_in(request)
        question, since = request_place(request)
        matches = [n for n, (asked, answered) in enumerate(self.places)
                   if question and asked.endswith(question) and answered == since]  # fmt: skip
        if not matches:
            return done
        return next((n for n in matches if n >= done), matches[-1])

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        raise ValueError(f"this cassette recorded Gemini CLI's Gemini API ({self.chat}), not the Messages API")


def sent_call(common: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A call as the model sent it (its ``name`` and ``args``), from the common name and input the reader gave it
    (the inverse of :func:`~pytest_agent_eval.agents.gemini.transcript.common_call`)."""
    if common == SHELL_NAME:
        return {"name": SHELL_TOOL, "args": dict(arguments)}
    if common in SENT_NAMES:
        return {"name": SENT_NAMES[common], "args": {SENT_KEYS.get(key, key): v for key, v in arguments.items()}}
    return {"name": gemini_name(common), "args": dict(arguments)}


def responses_in(request: dict[str, Any]) -> int:
    """How many of the model's responses a Gemini request's history holds: its ``model`` turns."""
    return sum(1 for content in request.get("contents") or [] if isinstance(content, dict)
               and content.get("role") == "model")  # fmt: skip


def request_place(request: dict[str, Any]) -> tuple[str, int]:
    """Where a Gemini request stands in its session, as a compression of its history leaves it: the text of its last
    ``user`` turn that is no tool result (the question; of the first turn, whose question follows the session context
    in the same turn, the last part), and how many ``model`` turns follow it. Gemini CLI compresses by replacing the
    turns before a user text with a summary (``findCompressSplitPoint`` splits only there), so the question being
    answered and the responses to it stay."""
    contents = [c for c in request.get("contents") or [] if isinstance(c, dict)]
    for at in range(len(contents) - 1, -1, -1):
        parts = [p for p in contents[at].get("parts") or [] if isinstance(p, dict)]
        if contents[at].get("role") == "user" and not any("functionResponse" in p for p in parts):
            texts = [p["text"] for p in parts if isinstance(p.get("text"), str)]
            if texts:
                return texts[-1], sum(1 for c in contents[at + 1 :] if c.get("role") == "model")
    return "", responses_in(request)


def response_places(session: Session) -> list[tuple[str, int]]:
    """Each response's place (:func:`request_place`) in a recorded session: the user text before it in its thread (a
    subagent's runs on a prompt of its own) and how many responses of that thread came between. A history written
    again (after a :class:`Compaction`) repeats questions asked before (the first with the session context before
    it, in one text): those are no new turn."""
    places: list[tuple[str, int]] = []
    question: dict[str, tuple[str, int]] = {}  # thread → its question, and the responses to it so far
    asked: dict[str, set[str]] = {}
    rewritten: set[str] = set()
    for event in session.timeline:
        if isinstance(event, Compaction):
            rewritten.add(event.thread)
        elif isinstance(event, UserText):
            seen = asked.setdefault(event.thread, set())
            if not (event.thread in rewritten and any(event.text.endswith(q) for q in seen)):
                question[event.thread] = (event.text, 0)
                seen.add(event.text)
        elif isinstance(event, Message):
            text, since = question.get(event.thread, ("", 0))
            places.append((text, since))
            question[event.thread] = (text, since + 1)
            rewritten.discard(event.thread)
    return places
