"""Drive ``claude -p`` over the turns of one question, one stream-json segment per turn.

Turn 1 starts a session; each later turn ``--resume``s it, so earlier tool output stays in the window.
Segments land as ``run-<label>.jsonl``, ``run-<label>.t2.jsonl``, … with each process's stderr beside it
(``run-<label>.stderr``, ``run-<label>.t2.stderr``).

The CLI fails in two known ways, and a watchdog handles both: it may hang after writing its ``result``
event (killed a few seconds later; the segment is complete and kept), or it may never write one (killed
at the timeout; the partial segment is kept and :class:`AgentInfraError` is raised).

A turn that ends in an API error (the CLI gave up retrying) ends the run at once, as a :class:`TurnError`:
resuming a session whose last request failed only spends the next turn's retries on the same outage.

A turn may also *stall*: the CLI sits silent while it waits on a request. Its stream idle timeout never goes
below 300 s (``max(CLAUDE_STREAM_IDLE_TIMEOUT_MS, 300000)`` in 2.1.332), so a response that stops arriving
costs up to five minutes before the CLI retries — and then the turn succeeds, its wall time swollen. So the
driver times the gaps between stream-json lines, counts the CLI's ``api_retry`` events, and marks a turn whose
longest silence exceeds ``HeadlessOptions.stall_s`` as stalled; its time is no measurement of the agent.

The environment is passed to the child only; nothing here writes it to a file, so an API key in it never
lands on disk.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agent_eval.harness.drivers import AgentInfraError
from pytest_agent_eval.harness.process import start_group, stop_group
from pytest_agent_eval.harness.sandbox import Sandbox
from pytest_agent_eval.transcript import Session

ALLOWED_TOOLS = "Grep,Glob,TodoWrite"
RESULT_GRACE_S = 5.0  # how long a CLI may linger after its result event before it counts as hung
# The longest silence a turn may have before it counts as stalled. The CLI writes one line per whole message
# or tool result, so against the real API a silence is one message being generated (a long answer with
# thinking: a minute or two) or one tool call; against a local stand-in model every reply is immediate and
# the only long silences are tool calls (an index query: seconds) and the CLI waiting on a request.
STALL_S_REAL_API = 180.0
STALL_S_STAND_IN = 30.0
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
    stall_s: float = STALL_S_REAL_API  # -p only: a longer silence between stream lines marks the turn stalled
    sandbox: Sandbox | None = None  # where the agent's process tree runs; None only when a test switched it off

    def launch(self, command: list[str]) -> list[str]:
        """``command`` as started: inside the sandbox when there is one."""
        return self.sandbox.wrap(command) if self.sandbox is not None else command


@dataclass
class RunRecord:
    """What the driver did: one entry per agent process, in turn order."""

    label: str
    segments: list[Path] = field(default_factory=list)
    stderr: list[Path] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)
    hung_after_result: list[bool] = field(default_factory=list)
    session_id: str | None = None
    longest_silence_s: list[float] = field(default_factory=list)  # per turn: the longest gap between lines
    silence_after: list[str] = field(default_factory=list)  # per turn: the line that gap followed (see _what)
    api_retries: list[int] = field(default_factory=list)  # per turn: the CLI's api_retry events
    stall_s: float | None = None  # the threshold the turns were judged by (None: not measured)

    @property
    def stalled_turns(self) -> list[int]:
        """The turns (from 1) whose longest silence exceeded :attr:`stall_s`."""
        if self.stall_s is None:
            return []
        return [turn for turn, gap in enumerate(self.longest_silence_s, start=1) if gap > self.stall_s]

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "segments": [str(p) for p in self.segments],
            "stderr": [str(p) for p in self.stderr],
            "wall_s": [round(s, 3) for s in self.wall_s],
            "exit_codes": self.exit_codes,
            "hung_after_result": self.hung_after_result,
            "session_id": self.session_id,
            "longest_silence_s": [round(s, 3) for s in self.longest_silence_s],
            "silence_after": self.silence_after,
            "api_retries": self.api_retries,
            "stall_s": self.stall_s,
            "stalled_turns": self.stalled_turns,
        }


class TurnError(AgentInfraError):
    """A turn failed; ``run`` holds what the driver recorded up to and including it."""

    def __init__(self, message: str, run: RunRecord) -> None:
        super().__init__(message)
        self.run = run


def segment_name(label: str, turn: int, suffix: str = ".jsonl") -> str:
    """``run-<label>.jsonl`` for turn 1, ``run-<label>.t<N>.jsonl`` after it."""
    return f"run-{label}{'' if turn == 1 else f'.t{turn}'}{suffix}"


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
        "--allowedTools",
        options.allowed_tools,
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
        record.longest_silence_s.append(outcome.longest_silence_s)
        record.silence_after.append(outcome.silence_after)
        record.api_retries.append(outcome.api_retries)
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
        api_error = _turn_error(segment)
        if api_error:
            retried = f" after {outcome.api_retries} API retries" if outcome.api_retries else ""
            raise TurnError(f"turn {turn}: {api_error}{retried}{later}", record)
    return record


def _turn_error(segment: Path) -> str | None:
    """The API error a turn's segment ends in, as the transcript reader words it; None when it has none."""
    try:
        return Session.from_files([segment]).infra_error
    except Exception:  # an unreadable segment is the scorer's to report, naming its file and line
        return None


@dataclass
class _Outcome:
    exit_code: int | None = None
    wall_s: float = 0.0
    saw_result: bool = False
    timed_out: bool = False
    hung_after_result: bool = False
    session_id: str | None = None
    longest_silence_s: float = 0.0
    silence_after: str = "start"
    api_retries: int = 0


def _run_process(
    command: list[str], segment: Path, stderr_path: Path, cwd: Path, env: Mapping[str, str], options: HeadlessOptions
) -> _Outcome:
    outcome = _Outcome()
    result_seen = threading.Event()
    started = time.monotonic()
    with segment.open("wb") as out, stderr_path.open("wb") as err:
        try:
            # A new session makes the CLI and the MCP servers it spawned one process group, killed together.
            process = start_group(
                command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
            )
        except FileNotFoundError:
            raise AgentInfraError(f"claude CLI not found: {command[0]}") from None
        except PermissionError:
            raise AgentInfraError(f"claude CLI is not executable: {command[0]}") from None

        last_line = [started]
        last_what = ["start"]

        def silence(now: float) -> None:
            if now - last_line[0] > outcome.longest_silence_s:
                outcome.longest_silence_s = now - last_line[0]
                outcome.silence_after = last_what[0]

        def pump() -> None:
            assert process.stdout is not None
            for raw in process.stdout:
                now = time.monotonic()
                silence(now)
                last_line[0] = now
                out.write(raw)
                out.flush()
                event = _event(raw)
                last_what[0] = _what(event)
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
                silence(ended)
        finally:
            # Also on an interrupt (Ctrl-C, pytest-timeout): never leave the CLI or its MCP servers running.
            stop_group(process)
        outcome.exit_code = process.wait()
        outcome.wall_s = (ended or time.monotonic()) - started
        reader.join(timeout=_KILL_WAIT_S)
    outcome.saw_result = result_seen.is_set()
    return outcome


def _what(event: dict | None) -> str:
    """A line, in a word or three, so a stall says what it waited on: after ``user tool_result`` or ``system
    init`` the CLI waited on the model (a request, its retries); after ``assistant tool_use <name>``, on a tool."""
    if event is None:
        return "a non-JSON line"
    kind = str(event.get("type"))
    if kind == "system":
        return f"system {event.get('subtype')}"
    content = (event.get("message") or {}).get("content") if isinstance(event.get("message"), dict) else None
    if isinstance(content, list) and content and isinstance(content[-1], dict):
        last = content[-1]
        return " ".join(str(x) for x in (kind, last.get("type"), last.get("name")) if x)
    return kind


def _event(raw: bytes) -> dict | None:
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _stderr_tail(path: Path, lines: int = 5) -> str:
    try:
        tail = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return ("; stderr: " + " | ".join(tail)) if tail else ""
