"""What a Codex shell command, sealed in the harness's sandbox, can reach of the Codex process: today, and with the
sandbox's user given a jailed shell in its passwd entry (the route docs/agents/codex.md proposes; a prototype, not
the harness's).

    python tests/data/codex/shell_jail_probe.py CODEX EXPRESS CACHE OUT [--jail]

CODEX: the ``codex`` launcher of an install; EXPRESS: a copy of express; CACHE: the harness's cache folder; OUT: a fresh
folder. The block probe's model asks for one shell command that opens the Codex process's ``/proc/<pid>/mem``, its
``fd/1`` and reads its ``environ``; it prints what the command answered. Measured 2026-12-03 (Codex 0.171.0): without
``--jail`` ``mem OPENED``, ``environ READ``; with it ``mem refused``, ``environ refused``.

With ``--jail`` the sandbox binds, read-only, over ``/etc/passwd`` a copy whose entry for the agent's uid names a
wrapper called ``bash`` (Codex runs its user's shell from the password database, by name ``bash`` for bash syntax, as
``bash -lc CMD`` or ``bash -c CMD``), which runs CMD through the jail's launcher (a Landlock domain of its own).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from support.agent_cli import run_arm  # tests/ on sys.path: run from the repository root with PYTHONPATH=tests

from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.jail import launcher
from pytest_agent_eval.harness.provision import Provisioned

PROBE = (
    'P=$(pgrep -f "musl/bin/codex" | head -1); '
    '(exec 3</proc/$P/mem) 2>/dev/null && echo "mem OPENED" || echo "mem refused"; '
    '(exec 4</proc/$P/fd/1) 2>/dev/null && echo "fd/1 OPENED" || echo "fd/1 refused"; '
    'head -c 10 /proc/$P/environ >/dev/null 2>&1 && echo "environ READ" || echo "environ refused"'
)
WRAPPER = """#!/bin/sh
# Codex runs its user's shell as `bash -lc CMD` or `bash -c CMD`: CMD runs in the jail's Landlock domain instead
if [ "$#" -eq 2 ] && {{ [ "$1" = -c ] || [ "$1" = -lc ]; }}; then exec {launcher} "$2"; fi
echo "agent-eval: the jailed shell takes -c COMMAND only, not: $*" >&2
exit 126
"""


def jail_the_passwd_shell(folder: Path) -> None:
    """Make every sandbox of this process bind a passwd whose entry for the agent's uid is the jailed ``bash``."""
    folder.chmod(0o755)
    wrapper = folder / "bash"
    wrapper.write_text(WRAPPER.format(launcher=launcher()))
    wrapper.chmod(0o555)
    uid = str(sandbox.AGENT_UID)
    lines = [line for line in Path("/etc/passwd").read_text().splitlines() if line.split(":")[2:3] != [uid]]
    passwd = folder / "passwd"
    passwd.write_text("\n".join([*lines, f"agent:x:{uid}:{uid}:agent:/nonexistent:{wrapper}"]) + "\n")
    wrap = sandbox.Sandbox.wrap

    def wrap_with_passwd(self: sandbox.Sandbox, command: list[str]) -> list[str]:
        args = wrap(self, command)
        at = args.index("--dev")  # after every bind of the system folders (/etc among them)
        return [*args[:at], "--ro-bind", str(folder), str(folder), "--ro-bind", str(passwd), "/etc/passwd", *args[at:]]

    sandbox.Sandbox.wrap = wrap_with_passwd  # type: ignore[method-assign]


def main() -> int:
    codex, express, cache, out = (Path(a) for a in sys.argv[1:5])
    if "--jail" in sys.argv[5:]:
        jail_the_passwd_shell(Path(tempfile.mkdtemp(prefix="agent-eval-shell-")))
    build = Provisioned("codex", codex, CODEX.version, CODEX.version)
    arm = run_arm(CODEX, out, express, build, cache, model=CODEX.block_probe(PROBE))
    [call] = arm.session.calls
    print(call.result.text if call.result is not None else "(no result)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
