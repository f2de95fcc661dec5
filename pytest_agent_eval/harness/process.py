"""Start and stop an agent's (or an MCP server's) whole process group, so nothing outlives the harness.

An orphaned CLI keeps spending on the real API, so three things stand behind every process started here:

* it leads a new process group (a new session), so :func:`stop_group` reaches the MCP servers and shells it
  spawned;
* on Linux it gets the parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``): when the harness dies,
  even by SIGKILL where no ``finally`` runs, the kernel kills it;
* in the sandbox (:mod:`pytest_agent_eval.harness.sandbox`) it is bubblewrap, with ``--die-with-parent`` and
  its own PID namespace: when bubblewrap dies, the kernel kills every process of the namespace, grandchildren
  that left the group included.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

KILL_WAIT_S = 3.0
_started: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()  # the groups of this process, while referenced
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` setting the parent-death signal (Linux only; elsewhere None and the group kill remains)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal would ever come.
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def start_group(command: Sequence[str], *, cwd: Path | str, env: Mapping[str, str], **popen: Any) -> subprocess.Popen:
    """``Popen`` of ``command`` as the leader of a new process group that dies with this process.

    Extra keyword arguments (``stdin``, ``stdout``, ``stderr``) go to ``Popen``. The parent-death signal is
    bound to the thread that forks, so call this from a thread that lives as long as the process should.
    """
    process = subprocess.Popen(
        list(command), cwd=cwd, env=dict(env), start_new_session=True, preexec_fn=die_with_parent(), **popen
    )
    _started.add(process)
    return process


def stop_all_groups() -> None:
    """Stop every group started here that still runs: a limit that fires in another thread (pytest-timeout's
    thread method) ends the agent this way, and the driver, seeing it die, reports the run as it does any."""
    for process in list(_started):
        if process.poll() is None:
            stop_group(process)


def stop_group(process: subprocess.Popen, wait_s: float = KILL_WAIT_S) -> None:
    """SIGTERM, then SIGKILL, the process's group until no member is left running (MCP servers included)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            _reap(process)
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()  # reap the leader, or its zombie keeps the group alive
            if not group_alive(process.pid):
                _reap(process)
                return
            time.sleep(0.05)


def _reap(process: subprocess.Popen) -> None:
    """Collect the leader's exit status: it is dead or a zombie by now, so this returns at once."""
    try:
        process.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        pass


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: an MCP server that outlived the CLI
    is reparented to init, which may take a second or more to reap it, and a zombie holds nothing."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return True  # no procfs (macOS): a zombie-only group counts as alive until reaped
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses, so split after the last ")"
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


WATCH_POLL_S = 0.5


def watched(command: Sequence[str], parent: int | None = None) -> list[str]:
    """``command`` under a watchdog that stops it when ``parent`` (this process by default) is gone.

    For a process this one cannot be the parent of — the agent under a tmux server, which outlives whoever
    started it — the parent-death signal does not reach, so the watchdog polls for the parent instead.
    """
    # isolated (-I): it starts, outside the sandbox, in the agent's repository, where -m would import a module the
    # agent wrote before the one installed
    return [sys.executable, "-I", "-m", __name__, "--watch", str(parent or os.getpid()), "--", *command]


def watchdog(parent: int, command: Sequence[str]) -> int:
    """Run ``command``; kill it when ``parent`` dies (then end the tmux server it runs under, if any); returns
    the command's exit status, or 137 when it was killed.

    The command stays in the watchdog's session, so a TUI keeps its controlling terminal; in the sandbox,
    killing bubblewrap ends its whole PID namespace.
    """
    process = subprocess.Popen(list(command), preexec_fn=die_with_parent())
    while process.poll() is None:
        if not _alive(parent):
            process.kill()
            process.wait()
            if os.environ.get("TMUX") and shutil.which("tmux"):
                subprocess.run(["tmux", "kill-server"], capture_output=True, timeout=10)
            return 137
        try:
            process.wait(timeout=WATCH_POLL_S)
        except subprocess.TimeoutExpired:
            pass
    return process.returncode


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return True  # no procfs: kill() said it exists


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "--watch" or args[2] != "--":
        print("usage: python -m pytest_agent_eval.harness.process --watch PID -- COMMAND…", file=sys.stderr)
        return 2
    return watchdog(int(args[1]), args[3:])


if __name__ == "__main__":
    sys.exit(main())
