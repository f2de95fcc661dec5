"""Drive ``opencode run --format json`` over the turns of one question, one event stream per turn.

Turn 1 starts a session (every event names its ``sessionID``); each later turn is ``opencode run --session <id>``,
which continues it. Streams land as ``run-<label>.jsonl``, ``run-<label>.t2.jsonl``, … with each process's stderr
beside it, as the other agents' segments do, and the config the run was given is copied beside the first
(``run-<label>.opencode.json``: the reader names the MCP servers' tools from it). A turn that ran a subagent (a
``task`` call: a child session, whose steps the stream leaves out) has the child sessions' steps kept beside the
first segment too (``run-<label>.subagents``, read out of OpenCode's database: :mod:`.subagents`).

A turn ends with a ``step_finish`` whose reason is not ``tool-calls`` (the model answered), or with an ``error``
event; OpenCode exits then (a CLI still running a few seconds later is stopped, its stream kept). A turn that never
ends is stopped at the timeout; a turn that failed ends the run. Each turn is run by the shared turn runner
(:class:`pytest_agent_eval.harness.drivers.turns.Turns`), as every headless driver's.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_agent_eval.agents.opencode.config import run_command
from pytest_agent_eval.agents.opencode.subagents import SubagentsError, keep_subagents
from pytest_agent_eval.agents.opencode.transcript import (
    child_session,
    ends_turn,
    error_text,
    kept_config,
    kept_cwd,
    kept_subagents,
)
from pytest_agent_eval.harness.drivers import RunRecord
from pytest_agent_eval.harness.drivers.stream import NOT_JSON, RESULT_GRACE_S, event_of
from pytest_agent_eval.harness.drivers.turns import Turns
from pytest_agent_eval.harness.drivers.watch import STALL_S_STAND_IN
from pytest_agent_eval.harness.sandbox import Sandbox


@dataclass(frozen=True)
class OpenCodeOptions:
    """How every turn of one run is started: the ``opencode`` executable, the config it is given (copied beside the
    first segment), the time a turn may take, the silence that marks it stalled, the sandbox (None only when a test
    switched it off)."""

    opencode: str
    config: Path
    timeout_s: float = 900.0
    exit_grace_s: float = RESULT_GRACE_S
    stall_s: float = STALL_S_STAND_IN
    sandbox: Sandbox | None = None


def run_opencode(
    questions: Sequence[str],
    *,
    label: str,
    out_dir: Path,
    cwd: Path,
    env: Mapping[str, str],
    options: OpenCodeOptions,
) -> RunRecord:
    """Run every turn; raises :class:`TurnError` (what was recorded kept, later turns not started) when a turn does
    not end or fails, or its subagents' steps cannot be kept. ``env`` names the attempt's ``HOME`` and
    ``XDG_DATA_HOME`` (inside it), which holds OpenCode's database."""
    turns = Turns(questions, label=label, out_dir=out_dir, cwd=cwd, env=env, sandbox=options.sandbox,
                  name="opencode", timeout_s=options.timeout_s, grace_s=options.exit_grace_s,
                  stall_s=options.stall_s)  # fmt: skip
    record = turns.record
    delegated = False
    for turn in turns:
        if turn.number == 1:
            shutil.copyfile(options.config, kept_config(turn.segment))
            kept_cwd(turn.segment).write_text(str(cwd), encoding="utf-8")
        said = _Said()
        outcome = turns.run(turn, run_command(options.opencode, turn.question, record.session_id), said.read)
        record.session_id = record.session_id or said.session
        delegated = delegated or said.delegated
        unkept = None
        if delegated and record.session_id:  # kept before any failure is said: what ran stays readable
            unkept = _keep_subagents(env, record.session_id, kept_subagents(record.segments[0]))
        if said.error is not None:
            raise turns.failed(turn, f"opencode reported an error: {said.error}")
        if not said.ended:
            raise turns.unended(turn, outcome)
        if said.session is None or said.session != record.session_id:
            raise turns.failed(turn, f"{turn.segment} is not of session {record.session_id}", stderr=False)
        if unkept is not None:
            raise turns.failed(turn, unkept, stderr=False)
    return record


def _keep_subagents(env: Mapping[str, str], session_id: str, dest: Path) -> str | None:
    """Keep the steps of the run's subagents (every turn's, so far) at ``dest``; why it could not, or None."""
    try:
        keep_subagents(Path(env["HOME"]), Path(env["XDG_DATA_HOME"]), session_id, dest)
    except (OSError, SubagentsError, KeyError, ValueError) as exc:
        return f"the subagents' steps (task) could not be read out of OpenCode's database: {exc}"
    return None


@dataclass
class _Said:
    """What a turn's events said: the session, whether the model answered, what it died of (an ``error`` event),
    whether a subagent ran (a ``task`` call's child session)."""

    session: str | None = None
    ended: bool = False
    error: str | None = None
    delegated: bool = False

    def read(self, raw: bytes) -> tuple[str, bool]:
        """One line of the stream: what it is (for the silences), and whether it ends the turn."""
        event = event_of(raw)
        if event is None:
            return NOT_JSON, False
        kind = str(event.get("type"))
        part = event.get("part") if isinstance(event.get("part"), dict) else {}
        if isinstance(event.get("sessionID"), str):
            self.session = self.session or event["sessionID"]
        self.delegated = self.delegated or (kind == "tool_use" and child_session(part) is not None)
        if kind == "error":
            self.error = error_text(event.get("error"))
        ends = kind == "error" or ends_turn(event)
        self.ended = self.ended or ends
        return (f"{kind} {part.get('tool')}" if kind == "tool_use" else kind), ends
