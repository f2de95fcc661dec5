"""Drive ``codex exec --json`` over the turns of one question, one event stream per turn, and keep its rollout.

Turn 1 starts a session (its ``thread.started`` names the thread); each later turn is ``codex exec resume
<thread id>``, which resends the history and appends to the same rollout. Streams land as ``run-<label>.jsonl``,
``run-<label>.t2.jsonl``, … with each process's stderr beside it, as Claude Code's segments do; after the last turn
(or a failed one) Codex's rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread id>.jsonl``) is copied to
``run-<label>.rollout`` beside them, where :func:`~.transcript.find_rollout` finds it. It is read from the agent's
HOME without following any link the agent may have planted there (:mod:`pytest_agent_eval.harness.untrusted`), and
so are the rollouts of the subagents its ``spawn_agent`` calls started, to ``run-<label>.subagents``.

A turn ends with ``turn.completed`` or ``turn.failed``; Codex exits then (a CLI still running a few seconds later
is stopped, its stream kept). A turn that never ends is stopped at the timeout; a turn that failed ends the run.
Each turn is run by the shared turn runner (:class:`pytest_agent_eval.harness.drivers.turns.Turns`), as every
headless driver's: in the sandbox, stdout and stderr sockets the agent's shells cannot reopen through ``/proc`` to
forge events.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from pytest_agent_eval.agents.codex.config import CODEX_HOME_DIR, exec_command
from pytest_agent_eval.agents.codex.transcript import (
    FIRST_EVENT,
    kept_rollout,
    kept_subagents,
    read_codex,
    spawned_agents,
)
from pytest_agent_eval.harness import untrusted
from pytest_agent_eval.harness.drivers import RunRecord, TurnError
from pytest_agent_eval.harness.drivers.stream import NOT_JSON, RESULT_GRACE_S, event_of
from pytest_agent_eval.harness.drivers.turns import Turns
from pytest_agent_eval.harness.drivers.watch import STALL_S_STAND_IN
from pytest_agent_eval.harness.sandbox import Sandbox
from pytest_agent_eval.transcript import Session, read_records

TURN_ENDS = ("turn.completed", "turn.failed")


@dataclass(frozen=True)
class CodexOptions:
    """How every turn of one run is started: the ``codex`` executable, the time a turn may take, the silence that
    marks it stalled, the sandbox (None only when a test switched it off)."""

    codex: str
    timeout_s: float = 900.0
    exit_grace_s: float = RESULT_GRACE_S
    stall_s: float = STALL_S_STAND_IN
    sandbox: Sandbox | None = None


def run_codex(
    questions: Sequence[str],
    *,
    label: str,
    out_dir: Path,
    cwd: Path,
    env: Mapping[str, str],
    options: CodexOptions,
) -> RunRecord:
    """Run every turn and copy the rollout out; raises :class:`TurnError` (what was recorded kept, later turns not
    started) when a turn does not end, fails, or leaves no rollout. ``env`` names the attempt's ``HOME``, which holds
    its ``CODEX_HOME`` (``.codex``)."""
    turns = Turns(questions, label=label, out_dir=out_dir, cwd=cwd, env=env, sandbox=options.sandbox, name="codex",
                  timeout_s=options.timeout_s, grace_s=options.exit_grace_s, stall_s=options.stall_s)  # fmt: skip
    home, record = Path(env["HOME"]), turns.record
    for turn in turns:
        said = _Said()
        # no retries of Codex's own: the config sets them to 0
        outcome = turns.run(turn, exec_command(options.codex, turn.question, record.session_id), said.read)
        record.session_id = record.session_id or said.thread
        if said.end is None:
            _keep_rollout(home, record)
            raise turns.unended(turn, outcome)
        if not record.session_id:
            raise turns.failed(turn, f"no {FIRST_EVENT} event in {turn.segment}")
        if said.end != "turn.completed":
            _keep_rollout(home, record)
            raise turns.failed(turn, f"codex reported {said.end}" + (f": {said.error}" if said.error else ""))
    rollout = _keep_rollout(home, record)
    if rollout is None:
        raise TurnError(f"codex left no rollout of thread {record.session_id} under {home / CODEX_HOME_DIR}", record)
    infra = read_codex(record.segments, rollout).infra_error
    if infra:
        raise TurnError(infra, record)
    return record


@dataclass
class _Said:
    """What a turn's events said: the thread, the event that ended the turn, what it died of (an ``error`` event, or
    ``turn.failed``'s: the model server's refusal, a dropped stream)."""

    thread: str | None = None
    end: str | None = None
    error: str | None = None

    def read(self, raw: bytes) -> tuple[str, bool]:
        """One line of the stream: what it is (for the silences), and whether it ends the turn."""
        event = event_of(raw)
        if event is None:
            return NOT_JSON, False
        kind, item = str(event.get("type")), event.get("item")
        if kind == FIRST_EVENT and isinstance(event.get("thread_id"), str):
            self.thread = event["thread_id"]
        if kind in TURN_ENDS:
            self.end = kind
        error = event.get("error") if kind == "turn.failed" else event if kind == "error" else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            self.error = error["message"]
        return (f"{kind} {item.get('type')}" if isinstance(item, dict) else kind), kind in TURN_ENDS


def _keep_rollout(home: Path, record: RunRecord) -> Path | None:
    """Copy the thread's rollout out of the agent's HOME to ``run-<label>.rollout`` beside the first segment;
    None when there is none (no thread, or Codex wrote none)."""
    if not record.session_id or not record.segments:
        return None
    found = find_rollout_in(home, record.session_id)
    if found is None:
        return None
    dest = kept_rollout(record.segments[0])
    untrusted.copy_file(home, found, dest)
    _keep_subagents(home, dest, kept_subagents(record.segments[0]))
    return dest


def _keep_subagents(home: Path, rollout: Path, dest: Path) -> None:
    """Copy the rollouts of the threads ``spawn_agent`` started (a subagent's own too), one after another, to
    ``dest`` (``run-<label>.subagents``); none written when the run spawned none. A spawned thread whose rollout
    is missing is left out: the reader says so."""
    pending = spawned_agents(read_records(rollout, Session(), "a Codex rollout"))
    kept: list[bytes] = []
    seen: set[str] = set()
    while pending:
        agent = pending.pop(0)
        found = None if agent in seen else find_rollout_in(home, agent)
        seen.add(agent)
        if found is None:
            continue
        data = untrusted.read_bytes(home, found)
        kept.append(data if data.endswith(b"\n") else data + b"\n")
        pending += spawned_agents(_objects(data))
    if kept:
        dest.write_bytes(b"".join(kept))
    else:
        dest.unlink(missing_ok=True)


def _objects(data: bytes) -> list[dict]:
    """The JSON objects of JSON lines (the reader names any other line; here it is only passed over)."""
    objects = []
    for line in data.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def find_rollout_in(home: Path, thread_id: str) -> PurePath | None:
    """The path (relative to ``home``) of the rollout of ``thread_id`` under ``home/.codex/sessions``, walked without
    following links (the agent may have planted some); None when there is none."""
    name_end = f"-{thread_id}.jsonl"
    sessions = PurePath(CODEX_HOME_DIR, "sessions")
    try:
        fd = untrusted.open_dir(home, sessions)
    except FileNotFoundError:
        return None
    pending = [(fd, sessions)]
    found: list[PurePath] = []
    try:
        while pending:
            folder, relative = pending.pop()
            try:
                with os.scandir(folder) as entries:
                    listed = [(e.name, e.stat(follow_symlinks=False).st_mode) for e in entries]
                for name, mode in listed:
                    if stat.S_ISDIR(mode):
                        pending.append((untrusted.open_dir(home, relative / name), relative / name))
                    elif stat.S_ISREG(mode) and name.startswith("rollout-") and name.endswith(name_end):
                        found.append(relative / name)
            finally:
                os.close(folder)
    finally:
        for folder, _ in pending:
            os.close(folder)
    return sorted(found)[-1] if found else None
