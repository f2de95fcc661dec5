"""Run one agent process whose stdout is a stream of JSON lines, until the line that ends its turn, and keep it.

What every headless driver does with its CLI, whatever the CLI: start it as a process group of its own (with the
MCP servers it spawns), copy its stdout line by line into the turn's segment and its stderr beside it, watch each
line (the agent's own reading says what it is and whether it ends the turn), and stop the group when the turn has
ended and the CLI lingers (``grace_s`` later: it hung after its last word, the segment is complete), at the
timeout, or on an interrupt.

The CLI's stdout and stderr are sockets the harness reads, not pipes or a file: the agent's shells run as the
CLI's uid and could open ``/proc/<cli>/fd/1`` or ``fd/2`` to write forged lines into what is recorded and scored
(or into a host file), and a socket is the one kind of descriptor ``/proc`` will not open (``ENXIO``).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_agent_eval.harness.drivers import AgentInfraError, NotWritten, StreamOutcome
from pytest_agent_eval.harness.drivers.watch import Silences
from pytest_agent_eval.harness.process import start_group, stop_group
from pytest_agent_eval.harness.writes import WriteFailed, append_fd

RESULT_GRACE_S = 5.0  # how long a CLI may linger after the line that ended its turn before it counts as hung
_KILL_WAIT_S = 3.0

# Reads one line of the stream: (what it is, in a few words, for the silences; whether it ends the turn).
LineWatcher = Callable[[bytes], tuple[str, bool]]
NOT_JSON = "a non-JSON line"  # what a line that holds no JSON object is, for the silences


def event_of(raw: str | bytes) -> dict[str, Any] | None:
    """One line of a stream (or a transcript) as an event; None when it is not a JSON object."""
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def not_run(turn: int, turns: int) -> str:
    """What the message of a failed ``turn`` adds about the later turns of ``turns``, which are not started."""
    return f"; turns {turn + 1}-{turns} not run" if turn < turns else ""


def unended(outcome: StreamOutcome, timeout_s: float) -> str:
    """Why a turn's process gave up before the line that ends the turn: the timeout, or its exit."""
    return f"timed out after {timeout_s:g}s" if outcome.timed_out else exit_reason(outcome.exit_code)


def exit_reason(code: int | None) -> str:
    """How a process ended, in words: ``exited 3``, or ``killed by signal 9 (SIGKILL)`` for one a signal ended.

    A signal shows as a negative code when the agent is our own child, and as 128 + N when it ran in the sandbox:
    bubblewrap passes on a child's death by signal N as that status, as a shell does (docs/sandbox.md), and the
    relay in front of the agent (harness/relay.py) does the same."""
    signum = -code if code is not None and code < 0 else None
    if code is not None and 128 < code < 128 + signal.NSIG:
        signum = code - 128
    if signum is None:
        return f"exited {code}"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"killed by signal {signum}"
    return f"killed by signal {signum} ({name})"


def run_streaming(
    command: list[str],
    *,
    segment: Path,
    stderr: Path,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    grace_s: float,
    watch: LineWatcher,
    name: str,
) -> StreamOutcome:
    """Run ``command`` (the CLI called ``name`` in errors), its stdout into ``segment``, its stderr into
    ``stderr``."""
    ended = threading.Event()
    started = time.monotonic()
    outcome = StreamOutcome(Silences(started), started_at=time.time())
    stdout_ends, stderr_ends = _unopenable_stream(), _unopenable_stream()
    failed = threading.Event()  # the segment could not be written (a full disk): the turn ends here
    # unbuffered: a line is appended whole or cut back (harness/writes.py), never half-flushed later
    with segment.open("wb", buffering=0) as out, stderr.open("wb") as err, stdout_ends[0], stderr_ends[0]:
        try:
            process = start_group(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                  stdout=stdout_ends[1].fileno(), stderr=stderr_ends[1].fileno())  # fmt: skip
        except FileNotFoundError:
            raise AgentInfraError(f"{name} CLI not found: {command[0]}") from None
        except PermissionError:
            raise AgentInfraError(f"{name} CLI is not executable: {command[0]}") from None
        finally:
            stdout_ends[1].close()  # the CLI holds them now: the stream ends when its last holder exits
            stderr_ends[1].close()

        def keep_stderr() -> None:
            kept = True
            with stderr_ends[0].makefile("rb") as lines:
                while chunk := lines.read1(65536):  # read to the end whatever happens: a CLI blocked on it hangs
                    try:
                        if kept:
                            err.write(chunk)
                            err.flush()
                    except OSError:
                        kept = False  # a full disk: the stderr's end is lost, the segment's failure says why

        def pump() -> None:
            with stdout_ends[0].makefile("rb") as lines:  # closed by its reader, at the end of the stream
                for raw in lines:
                    now = time.monotonic()
                    try:
                        append_fd(out.fileno(), raw, segment)
                    except WriteFailed as exc:
                        outcome.write_error = str(exc)
                        failed.set()
                        ended.set()  # wakes the loop below, which stops the CLI
                        return
                    what, ends = watch(raw)
                    outcome.silences.line(now, what)
                    if ends:
                        ended.set()

        threads = [threading.Thread(target=pump, daemon=True), threading.Thread(target=keep_stderr, daemon=True)]
        for thread in threads:
            thread.start()
        deadline = started + timeout_s
        stopped = None
        try:
            while process.poll() is None:
                now = time.monotonic()
                if failed.is_set():
                    break
                if ended.is_set():
                    try:
                        process.wait(timeout=grace_s)
                    except subprocess.TimeoutExpired:
                        outcome.hung_after_end = True
                    break
                if now >= deadline:
                    outcome.timed_out = True
                    break
                ended.wait(timeout=min(0.2, deadline - now))
            # The agent's own time ends here: stopping what it left behind is the harness's.
            stopped = time.monotonic()
            if not ended.is_set():  # a turn that never finished was silent from its last line to here
                outcome.silences.until(stopped)
        finally:
            # Also on an interrupt (Ctrl-C, pytest-timeout): never leave the CLI or its MCP servers running.
            stop_group(process)
        outcome.exit_code = process.wait()
        outcome.wall_s = (stopped or time.monotonic()) - started
        for thread in threads:
            thread.join(timeout=_KILL_WAIT_S)
    if failed.is_set():
        raise NotWritten(f"{name} was stopped: its transcript could not be kept: {outcome.write_error}")
    outcome.ended = ended.is_set()
    return outcome


def _unopenable_stream() -> tuple[socket.socket, socket.socket]:
    """(the harness's end, the CLI's end) of a one-way stream the CLI writes and ``/proc/<pid>/fd`` cannot
    reopen."""
    ours, theirs = socket.socketpair()
    ours.shutdown(socket.SHUT_WR)  # nothing flows to the CLI this way
    return ours, theirs


def stderr_tail(path: Path, lines: int = 5) -> str:
    """The last lines of a process's stderr file, for an error message ("" when there are none)."""
    try:
        tail = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return ("; stderr: " + " | ".join(tail)) if tail else ""
