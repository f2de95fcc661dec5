"""Replay a recorded run over the Messages API: the model's turns come from its transcript, read by the agent that
recorded it (Claude Code's stream-json segments, by default), the tools run for real. An agent speaking another API
replays through a cassette of its own folder (:meth:`~pytest_agent_eval.agents.base.CodingAgent.cassette`), which
shares these rules and helpers.

The N-th request of a thread gets the N-th recorded assistant message of that thread, where N is
counted from the request itself (assistant messages already in its conversation), so a retried
request gets the same answer and ``--resume`` continues where the recording did. A subagent's
requests are recognised by their first user message: the ``prompt`` of the recorded Agent/Task call
that spawned it. Tool-use ids are kept as recorded, so the CLI's results pair up with them.

A replay usually runs in another working copy than the recording (a new workspace per item), so the
recorded working directory in tool inputs (a Read's ``file_path``, a path in a Bash command) is rewritten
to the replaying CLI's own: the tools must run against the repository being evaluated, not the old copy.

A cassette with a line that cannot be read (a torn last line, a line over the size limit) is refused, naming the
file and line: replaying it would stop short of the recording without a word.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..transcript import DELEGATION_TOOLS, MAIN, Session
from .scripted import user_question, working_directory
from .sse import Reply, tool_use

_REPLAYABLE_BLOCKS = frozenset({"text", "thinking"})
S = TypeVar("S", bound=Session)


class RecordReader(Protocol):
    """What a cassette asks of the agent that recorded it (a :class:`~pytest_agent_eval.agents.base.CodingAgent`,
    which the model package, below the agents, does not import): its reader."""

    def read_transcript(self, segments: Sequence[Path]) -> Session: ...


class CassetteBackend:
    """A cassette of a run over the Messages API, read by ``agent`` (the one a record names; for a record from
    before records named one, the caller passes the agent runs were then made by: Claude Code)."""

    stand_in_model = "stand-in-cassette"

    def __init__(self, paths: str | Path | Iterable[str | Path], agent: RecordReader) -> None:
        self.agent = agent
        self.paths = recording_paths(paths)
        session = refuse_unreadable(self.read(self.paths))
        self.turns = recorded_turns(session)
        self.cwd = self.recorded_cwd(session)
        self.prompts = {
            str(call.input["prompt"]).strip(): call.id
            for call in session.calls
            if call.name in DELEGATION_TOOLS and isinstance(call.input.get("prompt"), str)
        }

    def read(self, paths: list[Path]) -> Session:
        """The recorded session, as the agent that recorded it reads its segments."""
        return self.agent.read_transcript(paths)

    def recorded_cwd(self, session: Session) -> str | None:
        """The working directory the recording ran in (its tool inputs name it), None when it names none."""
        return next((str(i["cwd"]) for i in session.inits if isinstance(i.get("cwd"), str) and i["cwd"]), None)

    def describe(self) -> str:
        count = sum(len(turns) for turns in self.turns.values())
        return (
            f"cassette replay of {count} recorded turns from {', '.join(p.name for p in self.paths)} — its figures "
            "measure the pipeline and the tool's responses, not a model"
        )

    def thread_of(self, request: dict[str, Any]) -> str:
        for message in request.get("messages") or []:
            question = user_question(message) if isinstance(message, dict) else None
            if question is not None:
                return self.prompts.get(question, MAIN)
        return MAIN

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        thread = self.thread_of(request)
        done = sum(1 for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")
        recorded = self.turns.get(thread, [])
        if done < len(recorded):
            reply = recorded[done]
            cwd = working_directory(request)
            if self.cwd and cwd and cwd != self.cwd:
                reply = Reply(rebase(reply.blocks, self.cwd, cwd), reply.stop_reason)
            return reply
        return Reply.text(f"(cassette exhausted: thread {thread} has {len(recorded)} recorded turns)")


def recorded_turns(session: Session) -> dict[str, list[Reply]]:
    """Thread → the model's replies in it, in order: text, thinking and calls as the model sent them (the name and
    input the CLI was given, :attr:`ToolCall.sent_as`; the id kept, so the CLI's results pair up with it)."""
    turns: dict[str, list[Reply]] = {}
    for message in session.messages(thread=None):
        # A message the CLI synthesised (rate limit, API error) never came from the model.
        if message.error:
            continue
        blocks = [dict(b) for b in message.blocks if b.get("type") in _REPLAYABLE_BLOCKS]
        blocks += [tool_use(*(call.sent_as or (call.name, call.input)), call.id) for call in message.calls]
        if blocks:
            turns.setdefault(message.thread, []).append(Reply(blocks))
    return turns


def recording_paths(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """A recording's files, in order: one path or several."""
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


def refuse_unreadable(session: S) -> S:
    """The session read from a recording; a ValueError naming each torn or unreadable line (a replay would silently
    stop short of it)."""
    if session.parse.bad_lines:
        where = "; ".join(session.parse.bad_at)
        raise ValueError(f"cassette has {session.parse.bad_lines} unreadable line(s): {where}")
    return session


def rebase(value: Any, old: str, new: str) -> Any:
    """``value`` with every occurrence of the directory ``old`` in its strings replaced by ``new``."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [rebase(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: rebase(item, old, new) for key, item in value.items()}
    return value
