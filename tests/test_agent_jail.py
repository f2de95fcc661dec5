"""The Landlock jail for the shell commands of agents without a prefix variable, which look their shell up
(``CodingAgent.shell_from``): in their user's password entry (Codex), in ``$SHELL`` (OpenCode), as the ``bash`` on
PATH (Gemini CLI). The sandbox puts the jailed shell there, so a command the agent runs cannot open the agent's
``/proc/<pid>/mem`` nor read its ``environ``, nor signal or renice it (nor the relay, nor the sandbox's init);
without it, it can reach the memory (each check is also run the other way)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.agent_cli import run_arm
from support.bwrap import BWRAP, needs_bwrap
from support.e2e import RealTools

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.jail import SHELL_SOURCES, jailed_shell
from pytest_agent_eval.harness.sandbox import AGENT_UID, Sandbox, jailed_passwd, runtime_paths

# What a shell command tries on the process that started it ($P): the accesses the jail exists to take away.
REACH = (
    '(exec 3</proc/$P/mem) 2>/dev/null && echo "mem OPENED" || echo "mem refused"; '
    'head -c 10 /proc/$P/environ >/dev/null 2>&1 && echo "environ READ" || echo "environ refused"; '
    'kill -0 $P 2>/dev/null && echo "kill ALLOWED" || echo "kill refused"; '
    'renice -n 0 -p $P >/dev/null 2>&1 && echo "renice ALLOWED" || echo "renice refused"'
)
REFUSED = ["mem refused", "environ refused", "kill refused", "renice refused"]
# The other processes that watch the agent, in a real run: the relay carrying the model's port, the sandbox's init.
WATCHERS = (
    '; pgrep -f "harness[.]relay" > "$TMPDIR/relay"; read R < "$TMPDIR/relay"; echo "relay $R"; I=1'
    + "".join(
        f'; kill -0 ${var} 2>/dev/null && echo "kill {name} ALLOWED" || echo "kill {name} refused"'
        f'; renice -n 0 -p ${var} >/dev/null 2>&1 && echo "renice {name} ALLOWED" || echo "renice {name} refused"'
        for var, name in (("R", "relay"), ("I", "init"))
    )
)
OPENED = ["mem OPENED", "environ READ"]
# A stand-in agent: looks its shell up as argv[2] says (as Codex, OpenCode, Gemini CLI do), runs it with `-lc`
# (Codex's snapshot) and `-c` (every command), and prints what each answered.
AGENT = """
import os, pwd, subprocess, sys
command, lookup = sys.argv[1:3]
shell = {"passwd": pwd.getpwuid(os.getuid()).pw_shell, "SHELL": os.environ.get("SHELL"), "PATH": "bash"}[lookup]
for flag in ("-lc", "-c"):
    done = subprocess.run([shell, flag, command + '; echo "bash $BASH_VERSINFO"; exit 7'],
                          env={**os.environ, "P": str(os.getpid())}, capture_output=True, text=True)
    print(flag, done.returncode, done.stdout.strip().replace("\\n", " | "), done.stderr.strip())
"""


def _sandbox(shell_from: str | None) -> Sandbox:
    readable = tuple(p.resolve() for p in runtime_paths())
    return Sandbox(hidden=(), readable=readable, writable=(), bwrap=BWRAP,
                   shell_from=shell_from)  # fmt: skip


def _agent_in(sealed: Sandbox, lookup: str) -> list[str]:
    # $SHELL as a login sets it (CI's runner leaves it unset): the jailed run must override it, the other keeps it.
    login = {**os.environ, "SHELL": shutil.which("bash") or "/bin/bash"}
    done = subprocess.run(sealed.wrap([sys.executable, "-c", AGENT, REACH, lookup]), capture_output=True,
                          text=True, timeout=60, env=login)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@needs_bwrap
@pytest.mark.parametrize("lookup", SHELL_SOURCES)
def test_the_shell_an_agent_looks_up_is_jailed_and_still_bash(lookup: str) -> None:
    sandbox.check_sandbox()
    lines = _agent_in(_sandbox(shell_from=lookup), lookup)
    # the same bash (the login form too, its exit status, its output), in a domain of its own
    assert lines == [f"{flag} 7 {' | '.join(REFUSED)} | bash 5 " for flag in ("-lc", "-c")], lines


@needs_bwrap
@pytest.mark.parametrize("lookup", SHELL_SOURCES)
def test_without_the_jailed_shell_a_command_reaches_the_agents_memory(lookup: str) -> None:
    sandbox.check_sandbox()
    lines = _agent_in(_sandbox(shell_from=None), lookup)
    assert [line.split(" ", 2)[2].split(" | ")[:2] for line in lines] == [OPENED, OPENED], lines


@needs_bwrap
def test_an_agent_with_a_shell_prefix_keeps_the_machines_passwd_shell_and_path() -> None:
    sealed = replace(_sandbox(shell_from=None), shell_prefix_var=CLAUDE_CODE.shell_prefix_var)
    look = 'cat /etc/passwd; echo "$SHELL:$PATH"'
    done = subprocess.run(sealed.wrap(["sh", "-c", look]), capture_output=True, text=True, timeout=60)
    assert done.stdout == Path("/etc/passwd").read_text() + f"{os.environ.get('SHELL', '')}:{os.environ['PATH']}\n"


def test_a_shell_lookup_the_sandbox_does_not_know_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"shell_from 'ZSH'.*passwd, SHELL, PATH"):
        _sandbox(shell_from="ZSH")


def test_the_passwd_copy_changes_the_agents_shell_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = tmp_path / "passwd"
    machine.write_text("root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:User,,,:/home/user:/bin/zsh\n")
    monkeypatch.setattr(sandbox, "PASSWD_FILE", machine)
    jailed_passwd.cache_clear()
    try:
        lines = jailed_passwd(AGENT_UID, jailed_shell()).read_text().splitlines()
        assert lines == ["root:x:0:0:root:/root:/bin/bash", f"user:x:1000:1000:User,,,:/home/user:{jailed_shell()}"]
        added = jailed_passwd(4242, jailed_shell()).read_text().splitlines()
        assert added == [*machine.read_text().splitlines(), f"agent-eval:x:4242:4242:agent-eval:/nonexistent:"
                                                             f"{jailed_shell()}"]  # fmt: skip
    finally:
        jailed_passwd.cache_clear()


# -- the real agents: their shell call opens nothing of their process ------------------------------------------
# How each probe finds the agent's process: the native binary Codex's launcher starts, the node process of Gemini
# CLI, the OpenCode binary.
AGENTS: dict[str, tuple[Any, str]] = {
    "codex": (CODEX, "musl/bin/codex"),
    "gemini": (GEMINI, "node_modules/.bin/gemini"),
    "opencode": (OPENCODE, "node_modules/.bin/opencode run"),
}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_sealed_agents_shell_cannot_reach_the_agents_process(real_tools: RealTools, tmp_path: Path,
                                                                 name: str) -> None:  # fmt: skip
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    agent, pattern = AGENTS[name]
    assert agent.shell_from in SHELL_SOURCES and agent.shell_prefix_var is None
    build = agent.provision(real_tools.cache)
    # pgrep and no $( ): Gemini CLI refuses a command substitution
    probe = f'pgrep -f "{pattern}" > "$TMPDIR/pid"; read P < "$TMPDIR/pid"; echo "pid $P"; ' + REACH + WATCHERS
    arm = run_arm(agent, tmp_path, real_tools.express, build, real_tools.cache, model=agent.block_probe(probe))
    [call] = arm.session.calls
    answered = call.result.text if call.result is not None else ""
    assert "pid " in answered and "pid \n" not in answered, answered  # the probe found the agent's process
    assert all(line in answered for line in REFUSED), answered
    assert "relay \n" not in answered and "relay " in answered, answered  # the probe found the relay
    assert all(f"{what} {name} refused" in answered for what in ("kill", "renice") for name in ("relay", "init"))
