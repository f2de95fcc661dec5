"""Drive ``gemini -p … --output-format stream-json`` over the turns of one question, one event stream per turn, and
keep its chat record.

Turn 1 starts a session under an id the driver chose (``--session-id``); each later turn is ``--resume <id>``, which
resends the history and appends to the same chat record. Streams land as ``run-<label>.jsonl``,
``run-<label>.t2.jsonl``, … with each process's stderr beside it, as Claude Code's segments do; after the last turn
(or a failed one) the chat record (``~/.gemini/tmp/<project>/chats/session-<time>-<id prefix>.jsonl``) is copied to
``run-<label>.chat`` beside them, where :func:`~.transcript.find_chat` finds it. It is read from the agent's HOME
without following any link the agent may have planted there (:mod:`pytest_agent_eval.harness.untrusted`).

A turn ends with the ``result`` event; Gemini CLI exits then. With its model unreachable Gemini CLI retries for
minutes on its own: the config allows it one attempt (:mod:`.config`), and the driver first checks the model's
address answers at all (:func:`check_reachable`, a few seconds at most), so such a turn fails at once, saying why.
Each turn is run by the shared turn runner (:class:`pytest_agent_eval.harness.drivers.turns.Turns`), as every
headless driver's: in the sandbox, stdout and stderr sockets the agent's shells cannot reopen.
"""

from __future__ import annotations

import os
import socket
import stat
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from urllib.parse import urlsplit

from pytest_agent_eval.agents.gemini.config import GEMINI_DIR, turn_command
from pytest_agent_eval.agents.gemini.transcript import FIRST_EVENT, kept_chat, read_gemini, subagent_chat
from pytest_agent_eval.harness import untrusted
from pytest_agent_eval.harness.drivers import RunRecord, TurnError
from pytest_agent_eval.harness.drivers.stream import NOT_JSON, event_of
from pytest_agent_eval.harness.drivers.turns import Turns
from pytest_agent_eval.harness.drivers.watch import STALL_S_STAND_IN
from pytest_agent_eval.harness.sandbox import Sandbox

TURN_END = "result"
REACH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class GeminiOptions:
    """How every turn of one run is started: the ``gemini`` executable, the model asked for, the model server's URL
    (checked before each turn), the deny policy, the time a turn may take, the silence that marks it stalled, the
    sandbox."""

    gemini: str
    model: str
    model_url: str
    policy: Path  # the harness's deny policy, given as an admin policy
    timeout_s: float = 900.0
    # Gemini CLI stops its MCP servers after the result: about 10 s, sealed, for codegraph
    exit_grace_s: float = 30.0
    stall_s: float = STALL_S_STAND_IN
    sandbox: Sandbox | None = None


def check_reachable(url: str, timeout_s: float = REACH_TIMEOUT_S) -> str | None:
    """Why the model at ``url`` cannot be reached (None when its address accepts a connection)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout_s):
            return None
    except OSError as exc:
        return f"the model at {url} is unreachable ({exc.strerror or exc}): Gemini CLI would retry it for minutes"


def run_gemini(
    questions: Sequence[str],
    *,
    label: str,
    out_dir: Path,
    cwd: Path,
    env: Mapping[str, str],
    options: GeminiOptions,
) -> RunRecord:
    """Run every turn and copy the chat record out; raises :class:`TurnError` (what was recorded kept, later turns not
    started) when the model is unreachable, or a turn does not end, fails, or leaves no chat record. ``env`` names
    the attempt's ``HOME``, which holds its ``.gemini``."""
    turns = Turns(questions, label=label, out_dir=out_dir, cwd=cwd, env=env, sandbox=options.sandbox, name="gemini",
                  timeout_s=options.timeout_s, grace_s=options.exit_grace_s, stall_s=options.stall_s)  # fmt: skip
    home, record = Path(env["HOME"]), turns.record
    session_id = str(uuid.uuid4())
    for turn in turns:
        unreachable = check_reachable(options.model_url)
        if unreachable is not None:
            _keep_chat(home, record)
            raise turns.failed(turn, unreachable, stderr=False)
        command = turn_command(options.gemini, options.model, turn.question, session_id, resume=turn.number > 1,
                               policy=options.policy)  # fmt: skip
        said = _Said()
        outcome = turns.run(turn, command, said.read)  # one attempt per request: the config allows no retry
        if said.session is not None and said.session != session_id:
            raise TurnError(
                f"turn {turn.number}: gemini ran session {said.session}, not {session_id} ({turn.segment})", record
            )
        record.session_id = record.session_id or said.session
        if said.status is None:
            _keep_chat(home, record)
            error = f": {said.error}" if said.error else ""
            raise turns.unended(turn, outcome, f"without ending the turn{error} ({turn.segment})")
        if said.status != "success":
            _keep_chat(home, record)
            raise turns.failed(turn, f"gemini reported {said.status}" + (f": {said.error}" if said.error else ""))
    chat = _keep_chat(home, record)
    if chat is None:
        raise TurnError(f"gemini left no chat record of session {session_id} under {home / GEMINI_DIR}", record)
    infra = read_gemini(record.segments, chat).infra_error
    if infra:
        raise TurnError(infra, record)
    return record


@dataclass
class _Said:
    """What a turn's events said: the session, the status of the ``result`` that ended the turn, what it died of."""

    session: str | None = None
    status: str | None = None
    error: str | None = None

    def read(self, raw: bytes) -> tuple[str, bool]:
        """One line of the stream: what it is (for the silences), and whether it ends the turn."""
        event = event_of(raw)
        if event is None:
            return NOT_JSON, False
        kind = str(event.get("type"))
        if kind == FIRST_EVENT and isinstance(event.get("session_id"), str):
            self.session = event["session_id"]
        error = event.get("error")
        if kind in ("error", TURN_END) and isinstance(error, dict) and isinstance(error.get("message"), str):
            self.error = error["message"]
        elif kind == "error" and isinstance(event.get("message"), str):
            self.error = event["message"]
        if kind == TURN_END:
            self.status = str(event.get("status") or "")
        return (f"{kind} {event.get('tool_name')}" if kind == "tool_use" else kind), kind == TURN_END


def _keep_chat(home: Path, record: RunRecord) -> Path | None:
    """Copy the session's chat record out of the agent's HOME to ``run-<label>.chat`` beside the first segment, and
    its subagents' to ``run-<label>.sub-<agent id>.chat``; None when there is none."""
    if not record.session_id or not record.segments:
        return None
    found = find_chat_in(home, record.session_id)
    if found is None:
        return None
    dest = kept_chat(record.segments[0])
    untrusted.copy_file(home, found, dest)
    subagents = found.parent / record.session_id  # chats/<session id>/<agent id>.jsonl, one per subagent run
    for name in _entries(home, subagents, stat.S_ISREG):
        agent_id = name.removesuffix(".jsonl")
        if name.endswith(".jsonl") and (kept := subagent_chat(dest, record.session_id, agent_id)) is not None:
            untrusted.copy_file(home, subagents / name, kept)
    return dest


def find_chat_in(home: Path, session_id: str) -> PurePath | None:
    """The path (relative to ``home``) of the chat record of ``session_id``,
    ``.gemini/tmp/<project>/chats/session-<time>-<id prefix>.jsonl``, walked without following links (the agent may
    have planted some); None when there is none. The first turn's file: a resumed turn starts a file of its own,
    named for the minute it starts in (only the header and the session's context), then goes on in the session's
    first file; in the same minute the two are one file."""
    tmp = PurePath(GEMINI_DIR, "tmp")
    found: list[PurePath] = []
    for project in _entries(home, tmp, stat.S_ISDIR):
        chats = tmp / project / "chats"
        found += [chats / name for name in _entries(home, chats, stat.S_ISREG)
                  if name.startswith("session-") and name.endswith(f"{session_id[:8]}.jsonl")]  # fmt: skip
    return sorted(found)[0] if found else None


def _entries(home: Path, relative: PurePath, kind: object) -> list[str]:
    """The names in the folder ``home/relative`` whose entry (not followed) is of ``kind``; none when it is missing.
    Raises :class:`~pytest_agent_eval.harness.untrusted.UntrustedFile` when a link stands on the way."""
    try:
        fd = untrusted.open_dir(home, relative)
    except FileNotFoundError:
        return []
    try:
        with os.scandir(fd) as entries:
            return [e.name for e in entries if kind(e.stat(follow_symlinks=False).st_mode)]  # type: ignore[operator]
    finally:
        os.close(fd)
