"""Run one of the agent's shell commands in a Landlock domain of its own, out of reach of the CLI's process.

The agent's shells run as the CLI's uid, so without more they could open ``/proc/<cli>/mem`` and write into the
CLI's memory (forging what it records), or ``/proc/<cli>/fd/…``; no uid, capability or seccomp rule tells them
from the CLI. Landlock does: a process in a Landlock domain may not ptrace — nor open the ``/proc`` files that
ptrace's access check guards (``mem``, ``fd``, ``environ``, ``maps``) — a process outside its domain. An agent
that runs every shell command behind a prefix it reads from a variable (``CodingAgent.shell_prefix_var``: one
executable's path) gets :func:`launcher` there from the sandbox, a script running this file
with ``python -I -S``: it enters a domain of its own, then runs the command with bash.
Everything the command starts stays in the domain; the CLI, its MCP servers, hooks and the relay stay outside.

The domain restricts nothing else: the one file-system right it handles is making block devices, which no process
in the sandbox may do anyway (a ruleset must handle one right to exist).
"""

from __future__ import annotations

import ctypes
import os
import sys

# Landlock's system calls have one number on every architecture (Linux 5.13+).
_CREATE_RULESET, _RESTRICT_SELF = 444, 446
_ACCESS_FS_MAKE_BLOCK = 1 << 11
_PR_SET_NO_NEW_PRIVS = 38
REFUSED_STATUS = 126  # what a shell answers for a command it cannot run


_launcher: list[str] = []  # the one launcher of this process, once written (no functools: see launcher)


def launcher() -> str:
    """An executable running this file with a python3, isolated (``-I``: nothing comes from the command's
    current folder, the agent's repository) and without site-packages (``-S``: it needs the standard library
    only, and skipping them halves the start-up every Bash command pays); written once per process into a folder
    of its own (removed at exit), readable by all as the sandbox may run as another user."""
    # imported here, not above: every Bash command starts this file, and these would double its start-up
    import atexit
    import shlex
    import shutil
    import tempfile
    from pathlib import Path

    if _launcher:
        return _launcher[0]
    folder = Path(tempfile.mkdtemp(prefix="agent-eval-jail-"))
    atexit.register(shutil.rmtree, folder, True)
    folder.chmod(0o755)
    script = folder / "jail"
    # The system's python3 where there is one (this file needs the standard library only): it is in every
    # sandbox, any user can run it, and it starts faster than a virtualenv's interpreter.
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    command = shlex.join([python, "-I", "-S", str(Path(__file__).resolve())])
    script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    script.chmod(0o555)
    _launcher.append(str(script))
    return _launcher[0]


def enter_domain() -> None:
    """Put this process (and what it will start) in a new Landlock domain; OSError naming Landlock if refused."""
    libc = ctypes.CDLL(None, use_errno=True)
    handled = ctypes.c_uint64(_ACCESS_FS_MAKE_BLOCK)  # struct landlock_ruleset_attr, its first field
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(handled), ctypes.sizeof(handled), 0)
    if ruleset < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"landlock: no ruleset ({os.strerror(errno)}); the kernel needs Landlock (5.13+)")
    try:
        # required for an unprivileged process; bubblewrap has set it already
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"landlock: the domain was refused ({os.strerror(errno)})")
    finally:
        os.close(ruleset)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -I -m pytest_agent_eval.harness.jail 'COMMAND'", file=sys.stderr)
        return 2
    bash = next((path for path in ("/bin/bash", "/usr/bin/bash") if os.path.exists(path)), "bash")
    try:
        enter_domain()
    except OSError as exc:  # never run the command outside the domain
        print(f"agent-eval: {exc.strerror}; the command was not run", file=sys.stderr)
        return REFUSED_STATUS
    os.execvp(bash, [bash, "-c", args[0]])
    return REFUSED_STATUS  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
