"""What every agent's driver shares: the error that says a run produced nothing to score, the record of what
the driver did (:class:`RunRecord`), the segment naming, the environment an agent may inherit, and warming
the MCP server before the measured run. The drivers themselves are the agents' (``CodingAgent.drive``).

An :class:`AgentInfraError` means the run produced no transcript worth scoring — the CLI is missing, it
timed out, it wrote no result event, the API failed — which is never a verdict on the retrieval tool.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agent_eval.harness.drivers.watch import Silences
from pytest_agent_eval.harness.process import start_group, stop_group

# The only variables of the harness's environment an agent gets (besides those its CodingAgent.passed_env
# names): what a shell and node need to run, locale, CA bundles for the real API. Everything else — the user's
# own agent config folders and tokens, npm settings, the host's proxies, the API key (the forwarder holds it:
# pytest_agent_eval.model.anthropic) — never passes.
ALLOWED_ENV = frozenset(
    {
        "PATH", "HOME", "TMPDIR", "TMP", "TEMP", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "TZ", "LANG",
        "LANGUAGE", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
    }
)  # fmt: skip
ALLOWED_PREFIXES = ("LC_", "AGENT_EVAL_E2E_")  # locale; the tag the end-to-end tests find their processes by


def passed_environment(base: Mapping[str, str], also: Iterable[str] = ()) -> dict[str, str]:
    """The allow-listed part of ``base`` (and the variables ``also`` names): no credential of ``base`` passes."""
    allowed = ALLOWED_ENV.union(also)
    return {k: v for k, v in base.items() if k in allowed or k.startswith(ALLOWED_PREFIXES)}


class AgentInfraError(RuntimeError):
    """The harness, the CLI or the API failed; the message says which."""


class NotWritten(AgentInfraError):
    """The run's files could not be written (a full disk): the message names the folder and its free space. Never
    retried: another attempt would meet the same disk; a resume runs the item once there is space."""


@dataclass
class StreamOutcome:
    """How one process went: its longest silence, exit code, time, and whether its turn ended, timed out, or it
    lingered after the end."""

    silences: Silences
    started_at: float = 0.0  # when it started (Unix seconds): the model server's record is told apart by turn with it
    exit_code: int | None = None
    wall_s: float = 0.0
    ended: bool = False
    timed_out: bool = False
    hung_after_end: bool = False
    write_error: str | None = None  # its segment could not be written (a full disk): it was stopped


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
    silence_after: list[str] = field(default_factory=list)  # per turn: the line that gap followed (watch.describe)
    # per turn: requests the CLI sent again — headless counts its api_retry events, which a retry after the stream
    # idle timeout does not produce (the silence flags that one); tmux counts repeated request lines
    api_retries: list[int] = field(default_factory=list)
    stall_s: float | None = None  # the threshold the turns were judged by (None: not measured)
    started_at: list[float] = field(default_factory=list)  # per turn a headless driver ran: when (not kept)

    def watched(self, silences: Silences, api_retries: int) -> None:
        """Add one turn's longest silence and retry count."""
        self.longest_silence_s.append(silences.longest_s)
        self.silence_after.append(silences.after)
        self.api_retries.append(api_retries)

    def streamed(self, segment: Path, stderr: Path, outcome: StreamOutcome, api_retries: int) -> None:
        """Add one turn a headless driver ran (:func:`~.stream.run_streaming`): its files, time, exit, silences."""
        self.segments.append(segment)
        self.started_at.append(outcome.started_at)
        self.stderr.append(stderr)
        self.wall_s.append(outcome.wall_s)
        self.exit_codes.append(outcome.exit_code)
        self.hung_after_result.append(outcome.hung_after_end)
        self.watched(outcome.silences, api_retries)

    @property
    def stalled_turns(self) -> list[int]:
        """The turns (from 1) whose longest silence exceeded :attr:`stall_s`."""
        if self.stall_s is None:
            return []
        return [turn for turn, gap in enumerate(self.longest_silence_s, start=1) if gap > self.stall_s]

    @property
    def agent_s(self) -> float:
        """The agent's time: its turns' times as the record keeps them (to the ms), added up, so that the figure
        and a rescore of the record (which adds the kept times) agree to the ms."""
        return round(sum(round(s, 3) for s in self.wall_s), 3)

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


def warm_mcp_server(command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float = 120.0) -> float:
    """Start an MCP stdio server, wait for its answer to ``initialize``, stop it; returns the seconds it took.

    Run once before the agent so the first real start (loading the index, filling the OS cache) is not part of
    the measured run: an agent facing a cold start turns to Read/grep and the A/B measures latency instead of
    retrieval. Raises AgentInfraError when the server does not answer.
    """
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pytest-agent-eval-prewarm", "version": "1"},
        },
    }
    started = time.monotonic()
    try:
        process = start_group(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        raise AgentInfraError(f"cannot start MCP server {command[0]}: {exc}") from None
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.flush()
        answer = _read_response(process, timeout_s)
        if answer is None:
            raise AgentInfraError(
                f"MCP server {' '.join(command)} did not answer initialize within {timeout_s:g}s"
                f" (exit code {process.poll()})"
            )
    finally:
        _stop(process)
    return time.monotonic() - started


def _read_response(process: subprocess.Popen, timeout_s: float) -> dict | None:
    """The first JSON-RPC response with id 1 on stdout; None on timeout or exit."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                return None
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # servers may log to stdout before speaking JSON-RPC
                if isinstance(message, dict) and message.get("id") == 1 and ("result" in message or "error" in message):
                    return message
    return None


def _stop(process: subprocess.Popen) -> None:
    """Close its pipes (a stdio server exits on EOF), give it a moment, then stop its group."""
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    stop_group(process)
