"""Drive ``claude -p`` over the turns of one question, one stream-json segment per turn.

Turn 1 starts a session; each later turn ``--resume``s it, so earlier tool output stays in the window.
Segments land as ``run-<label>.jsonl``, ``run-<label>.t2.jsonl``, … with each process's stderr beside it
(``run-<label>.stderr``, ``run-<label>.t2.stderr``).

The CLI fails in two known ways, and a watchdog handles both: it may hang after writing its ``result``
event (killed a few seconds later; the segment is complete and kept), or it may never write one (killed
at the timeout; the partial segment is kept and :class:`AgentInfraError` is raised).

A turn that ends in an API error (the CLI gave up retrying) ends the run at once, as a :class:`TurnError`;
a turn whose longest silence between stream-json lines exceeds ``HeadlessOptions.stall_s`` is marked stalled,
and the CLI's ``api_retry`` events are counted (see :mod:`.watch` for both judgements, which the interactive
driver shares).

The environment is passed to the child only; nothing here writes it to a file, so an API key in it never
lands on disk.

The CLI's stdout and stderr are sockets the harness reads, not pipes or a file: the agent's shells run as the
CLI's uid and could open ``/proc/<cli>/fd/1`` or ``fd/2`` to write forged stream-json lines into what is
recorded and scored (or into a host file), and a socket is the one kind of descriptor ``/proc`` will not open
(``ENXIO``). The ``ptrace`` family that could take one another way is denied by the sandbox's seccomp filter.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_agent_eval.agents.claude_code.events import describe, event_of, turn_api_error
from pytest_agent_eval.harness.drivers import AgentInfraError, RunRecord, TurnError, segment_name
from pytest_agent_eval.harness.drivers.watch import STALL_S_REAL_API, Silences
from pytest_agent_eval.harness.process import start_group, stop_group
from pytest_agent_eval.harness.sandbox import Sandbox

ALLOWED_TOOLS = "Grep,Glob,TodoWrite"
# Taken from the agent (and its subagents) in every arm: WebSearch runs on Anthropic's servers and WebFetch from the
# CLI, so either would let the sealed without-arm look the code up outside its sandbox, and the web has no place
# in an A/B of local code retrieval.
DISALLOWED_TOOLS = "WebSearch,WebFetch"
RESULT_GRACE_S = 5.0  # how long a CLI may linger after its result event before it counts as hung
_KILL_WAIT_S = 3.0


@dataclass(frozen=True)
class HeadlessOptions:
    """The flags every agent process gets; one object per run, shared by its turns and, as ``TmuxOptions.run``,
    by the interactive driver."""

    claude: str
    mcp_config: Path
    settings: Path
    model: str = "sonnet"
    effort: str = "high"
    max_budget_usd: float = 4.0  # -p only: the interactive CLI refuses it
    timeout_s: float = 900.0  # per turn
    result_grace_s: float = RESULT_GRACE_S  # -p only
    allowed_tools: str = ALLOWED_TOOLS
    stall_s: float = STALL_S_REAL_API  # a longer silence between a turn's lines marks it stalled (see .watch)
    sandbox: Sandbox | None = None  # where the agent's process tree runs; None only when a test switched it off

    def launch(self, command: list[str]) -> list[str]:
        """``command`` as started: inside the sandbox when there is one."""
        return self.sandbox.wrap(command) if self.sandbox is not None else command


def settings_flags(options: HeadlessOptions) -> list[str]:
    """Only the harness's settings and MCP servers: no user, project or local settings file (a repository's
    ``.claude/settings.json`` with ``disableAllHooks``, or one the agent writes in turn 1, changes nothing)."""
    return [
        "--setting-sources",
        "",
        "--strict-mcp-config",
        "--mcp-config",
        str(options.mcp_config),
        "--settings",
        str(options.settings),
    ]


def tool_flags(options: HeadlessOptions) -> list[str]:
    """The agent's tools, alike in both drivers: the web tools removed, the search tools allowed without asking."""
    return ["--disallowedTools", DISALLOWED_TOOLS, "--allowedTools", options.allowed_tools]


def build_command(question: str, options: HeadlessOptions, resume: str | None = None) -> list[str]:
    command = [
        options.claude,
        "-p",
        question,
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
        "--model",
        options.model,
        "--effort",
        options.effort,
        "--max-budget-usd",
        f"{options.max_budget_usd:g}",
        *settings_flags(options),
        *tool_flags(options),
    ]
    if resume:
        command += ["--resume", resume]
    return command


def run_headless(
    questions: Sequence[str],
    *,
    label: str,
    out_dir: Path,
    cwd: Path,
    env: Mapping[str, str],
    options: HeadlessOptions,
) -> RunRecord:
    """Run every turn; raises :class:`TurnError` (partial segments kept, later turns not started) when a turn
    yields no result event or ends in an API error."""
    if not questions:
        raise ValueError("no question to ask")
    out_dir.mkdir(parents=True, exist_ok=True)
    record = RunRecord(label=label, stall_s=options.stall_s)
    for turn, question in enumerate(questions, start=1):
        if turn > 1 and not record.session_id:
            raise TurnError(f"turn {turn}: no session id in {record.segments[-1]}, so it cannot be resumed", record)
        segment = out_dir / segment_name(label, turn)
        stderr = out_dir / segment_name(label, turn, ".stderr")
        command = options.launch(build_command(question, options, record.session_id))
        outcome = _run_process(command, segment, stderr, cwd, env, options)
        record.segments.append(segment)
        record.stderr.append(stderr)
        record.wall_s.append(outcome.wall_s)
        record.exit_codes.append(outcome.exit_code)
        record.hung_after_result.append(outcome.hung_after_result)
        record.watched(outcome.silences, outcome.api_retries)
        record.session_id = outcome.session_id or record.session_id
        later = f"; turns {turn + 1}-{len(questions)} not run" if turn < len(questions) else ""
        if not outcome.saw_result:
            why = (
                f"timed out after {options.timeout_s:g}s"
                if outcome.timed_out
                else f"exited with code {outcome.exit_code}"
            )
            raise TurnError(
                f"turn {turn}: claude {why} without a result event (partial segment kept: {segment})"
                + _stderr_tail(stderr)
                + later,
                record,
            )
        api_error = turn_api_error(segment.read_bytes().splitlines())
        if api_error:
            retried = f" after {outcome.api_retries} API retries" if outcome.api_retries else ""
            raise TurnError(f"turn {turn}: {api_error}{retried}{later}", record)
    return record


@dataclass
class _Outcome:
    silences: Silences
    exit_code: int | None = None
    wall_s: float = 0.0
    saw_result: bool = False
    timed_out: bool = False
    hung_after_result: bool = False
    session_id: str | None = None
    api_retries: int = 0


def _run_process(
    command: list[str], segment: Path, stderr_path: Path, cwd: Path, env: Mapping[str, str], options: HeadlessOptions
) -> _Outcome:
    result_seen = threading.Event()
    started = time.monotonic()
    outcome = _Outcome(Silences(started))
    stdout, stderr = _unopenable_stream(), _unopenable_stream()
    with segment.open("wb") as out, stderr_path.open("wb") as err, stdout[0], stderr[0]:
        try:
            # A new session makes the CLI and the MCP servers it spawned one process group, killed together.
            process = start_group(
                command,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout[1].fileno(),
                stderr=stderr[1].fileno(),
            )
        except FileNotFoundError:
            raise AgentInfraError(f"claude CLI not found: {command[0]}") from None
        except PermissionError:
            raise AgentInfraError(f"claude CLI is not executable: {command[0]}") from None
        finally:
            stdout[1].close()  # the CLI holds them now: the stream ends when its last holder exits
            stderr[1].close()

        def keep_stderr() -> None:
            with stderr[0].makefile("rb") as lines:
                while chunk := lines.read1(65536):
                    err.write(chunk)
                    err.flush()

        def pump() -> None:
            with stdout[0].makefile("rb") as lines:  # closed by its reader, at the end of the stream
                for raw in lines:
                    now = time.monotonic()
                    out.write(raw)
                    out.flush()
                    event = event_of(raw)
                    outcome.silences.line(now, describe(event))
                    if event is None:
                        continue
                    if isinstance(event.get("session_id"), str) and event["session_id"]:
                        outcome.session_id = event["session_id"]
                    if event.get("type") == "system" and event.get("subtype") == "api_retry":
                        outcome.api_retries += 1
                    if event.get("type") == "result":
                        result_seen.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        copier = threading.Thread(target=keep_stderr, daemon=True)
        copier.start()
        deadline = started + options.timeout_s
        ended = None
        try:
            while process.poll() is None:
                now = time.monotonic()
                if result_seen.is_set():
                    try:
                        process.wait(timeout=options.result_grace_s)
                    except subprocess.TimeoutExpired:
                        outcome.hung_after_result = True
                    break
                if now >= deadline:
                    outcome.timed_out = True
                    break
                result_seen.wait(timeout=min(0.2, deadline - now))
            # The agent's own time ends here: stopping what it left behind is the harness's.
            ended = time.monotonic()
            if not result_seen.is_set():  # a turn that never finished was silent from its last line to here
                outcome.silences.until(ended)
        finally:
            # Also on an interrupt (Ctrl-C, pytest-timeout): never leave the CLI or its MCP servers running.
            stop_group(process)
        outcome.exit_code = process.wait()
        outcome.wall_s = (ended or time.monotonic()) - started
        reader.join(timeout=_KILL_WAIT_S)
        copier.join(timeout=_KILL_WAIT_S)
    outcome.saw_result = result_seen.is_set()
    return outcome


def _unopenable_stream() -> tuple[socket.socket, socket.socket]:
    """(the harness's end, the CLI's end) of a one-way stream the CLI writes and ``/proc/<pid>/fd`` cannot
    reopen."""
    ours, theirs = socket.socketpair()
    ours.shutdown(socket.SHUT_WR)  # nothing flows to the CLI this way
    return ours, theirs


def _stderr_tail(path: Path, lines: int = 5) -> str:
    try:
        tail = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return ("; stderr: " + " | ".join(tail)) if tail else ""
