"""OpenCode's subagents (its ``task`` tool), kept out of its session database for the reader.

A ``task`` call runs a subagent in a child session of its own: the parent's ``--format json`` stream shows the
call (``state.metadata.sessionId`` names the child session, ``state.output`` its final answer) but none of the
child's steps, although each is a model request. OpenCode keeps every session's parts in its database
(``$XDG_DATA_HOME/opencode/opencode.db``, SQLite: ``session{id, parent_id}``, ``message{id, session_id, data}``,
``part{id, message_id, session_id, time_created, data}``, ``data`` the part as JSON). After a turn whose stream
started a subagent, the driver reads the run's descendant sessions there and keeps their model steps beside the
first segment (``run-<label>.subagents``, :func:`~.transcript.kept_subagents`), one line per part, written as the
event ``--format json`` streams for such a part (``step_start``, ``tool_use``, ``text``, ``reasoning``,
``step_finish``; ``timestamp`` its creation), so the reader reads a child as it reads the parent.

The database lies in the agent's HOME, which the agent may change: it (and its write-ahead log, which holds the
latest writes) is copied out without following any link (:mod:`pytest_agent_eval.harness.untrusted`), and opened
with SQLite's ``trusted_schema`` off, its three tables checked to be tables.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePath
from typing import Any

from pytest_agent_eval.harness import untrusted

DATABASE = PurePath("opencode", "opencode.db")  # under $XDG_DATA_HOME
_WAL = "-wal"
_TABLES = ("session", "message", "part")
# OpenCode's part types → the event types its stream carries them as.
EVENT_TYPES = {"step-start": "step_start", "step-finish": "step_finish", "tool": "tool_use", "text": "text",
               "reasoning": "reasoning"}  # fmt: skip


class SubagentsError(RuntimeError):
    """OpenCode's database could not be read for the subagents' steps (named, with why)."""


def keep_subagents(home: Path, data_home: Path, session_id: str, dest: Path) -> int:
    """Write the model steps of every session descending from ``session_id`` to ``dest``, read from the database
    under ``data_home`` (inside the attempt's ``home``, walked from it); returns how many sessions. Raises
    :class:`SubagentsError` (or :class:`~pytest_agent_eval.harness.untrusted.UntrustedFile`) when it cannot."""
    relative = data_home.relative_to(home) / DATABASE
    with tempfile.TemporaryDirectory(prefix="opencode-db-") as folder:
        copy = Path(folder) / DATABASE.name
        untrusted.copy_file(home, relative, copy)
        try:
            untrusted.copy_file(home, relative.with_name(relative.name + _WAL), copy.with_name(copy.name + _WAL))
        except FileNotFoundError:
            pass  # everything was checkpointed into the database
        try:
            sessions, events = _read(copy, session_id)
        except sqlite3.Error as exc:
            raise SubagentsError(f"{home / relative}: not OpenCode's session database ({exc})") from None
    dest.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")
    return len(sessions)


def _read(database: Path, session_id: str) -> tuple[list[str], list[dict[str, Any]]]:
    connection = sqlite3.connect(database)
    try:
        connection.execute("PRAGMA trusted_schema = OFF")
        kinds = dict(connection.execute("SELECT name, type FROM sqlite_master WHERE name IN (?, ?, ?)", _TABLES))
        if any(kinds.get(table) != "table" for table in _TABLES):
            raise sqlite3.DatabaseError(f"no tables {', '.join(_TABLES)}")
        sessions = _descendants(connection, session_id)
        marks = ", ".join("?" * len(sessions))
        rows = connection.execute(
            "SELECT part.id, part.message_id, part.session_id, part.time_created, part.data, message.data FROM part "
            f"JOIN message ON message.id = part.message_id WHERE part.session_id IN ({marks}) "
            "ORDER BY part.time_created, part.id",
            sessions,
        ).fetchall()
    finally:
        connection.close()
    return sessions, list(_events(rows))


def _descendants(connection: sqlite3.Connection, session_id: str) -> list[str]:
    """The sessions whose parent chain leads to ``session_id`` (a subagent's own subagents too), parents first."""
    found, parents = [], [session_id]
    while parents and len(found) < 10_000:
        marks = ", ".join("?" * len(parents))
        rows = connection.execute(f"SELECT id FROM session WHERE parent_id IN ({marks}) ORDER BY id", parents)
        parents = [str(row[0]) for row in rows if str(row[0]) not in found]
        found += parents
    return found


def _events(rows: Iterable[tuple[Any, ...]]) -> Iterable[dict[str, Any]]:
    """The model's parts (its assistant messages', not the prompt) as stream events."""
    for part_id, message_id, session_id, created, data, message in rows:
        part, said = _json(data), _json(message)
        if said.get("role") != "assistant" or part.get("type") not in EVENT_TYPES:
            continue
        part.update(id=part_id, sessionID=session_id, messageID=message_id)
        yield {"type": EVENT_TYPES[part["type"]], "timestamp": created, "sessionID": session_id, "part": part}


def _json(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
