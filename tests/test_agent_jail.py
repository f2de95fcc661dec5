"""The Landlock jail for the shell commands of agents that take their shell from their user's password entry
(``CodingAgent.passwd_shell``: Codex): the sandbox binds over ``/etc/passwd`` a copy whose entry for the agent's uid
names the jailed shell, so a command the agent runs there cannot open the agent's ``/proc/<pid>/mem`` nor read its
``environ``; without it, it can (each check is also run the other way, so it can fail)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.codex import run_arm
from support.e2e import RealTools

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.jail import jailed_shell
from pytest_agent_eval.harness.sandbox import AGENT_UID, Sandbox, jailed_passwd, runtime_paths

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# What a shell command tries on the process that started it ($P): the accesses the jail exists to take away.
REACH = (
    '(exec 3</proc/$P/mem) 2>/dev/null && echo "mem OPENED" || echo "mem refused"; '
    'head -c 10 /proc/$P/environ >/dev/null 2>&1 && echo "environ READ" || echo "environ refused"'
)
REFUSED = ["mem refused", "environ refused"]
OPENED = ["mem OPENED", "environ READ"]
# A stand-in agent: runs the shell its user's password entry names, as Codex does (by absolute path, `-lc` once
# for its snapshot, then `-c` per command), and prints what each answered.
AGENT = """
import os, pwd, subprocess, sys
shell = pwd.getpwuid(os.getuid()).pw_shell
print("shell", os.path.basename(shell))
for flag in ("-lc", "-c"):
    done = subprocess.run([shell, flag, sys.argv[1] + '; echo "bash $BASH_VERSINFO"; exit 7'],
                          env={**os.environ, "P": str(os.getpid())}, capture_output=True, text=True)
    print(flag, done.returncode, done.stdout.strip().replace("\\n", " | "), done.stderr.strip())
"""


def _sandbox(passwd_shell: bool) -> Sandbox:
    readable = tuple(p.resolve() for p in runtime_paths())
    return Sandbox(hidden=(), readable=readable, writable=(), bwrap=shutil.which("bwrap") or "bwrap",
                   passwd_shell=passwd_shell)  # fmt: skip


def _agent_in(sealed: Sandbox) -> list[str]:
    done = subprocess.run(sealed.wrap([sys.executable, "-c", AGENT, REACH]), capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@needs_bwrap
def test_the_passwd_shell_of_a_sealed_agent_is_jailed_and_still_bash() -> None:
    sandbox.check_sandbox()
    lines = _agent_in(_sandbox(passwd_shell=True))
    # the same bash (its name, the login form, its exit status, its output), in a domain of its own
    assert lines == ["shell bash", *(f"{flag} 7 {' | '.join(REFUSED)} | bash 5 " for flag in ("-lc", "-c"))], lines


@needs_bwrap
def test_without_the_jailed_passwd_shell_a_command_reaches_the_agents_memory() -> None:
    sandbox.check_sandbox()
    lines = _agent_in(_sandbox(passwd_shell=False))
    assert [line.split(" ", 2)[2].split(" | ")[:2] for line in lines[1:]] == [OPENED, OPENED], lines


@needs_bwrap
def test_an_agent_with_a_shell_prefix_keeps_the_machines_passwd() -> None:
    sealed = replace(_sandbox(passwd_shell=False), shell_prefix_var=CLAUDE_CODE.shell_prefix_var)
    done = subprocess.run(sealed.wrap(["cat", "/etc/passwd"]), capture_output=True, text=True, timeout=60)
    assert done.stdout == Path("/etc/passwd").read_text() and jailed_shell() not in done.stdout


def test_the_passwd_copy_changes_the_agents_shell_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = tmp_path / "passwd"
    machine.write_text("root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:User,,,:/home/user:/bin/zsh\n")
    monkeypatch.setattr(sandbox, "PASSWD", machine)
    jailed_passwd.cache_clear()
    try:
        copy = jailed_passwd(AGENT_UID, jailed_shell())
        assert copy.read_text() == f"root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:User,,,:/home/user:{jailed_shell()}\n"
        assert not os.access(copy, os.W_OK) or os.geteuid() == 0  # read-only (root writes anyway)
        added = jailed_passwd(4242, jailed_shell()).read_text().splitlines()
        assert added[:2] == machine.read_text().splitlines()
        assert added[2] == f"agent-eval:x:4242:4242:agent-eval:/nonexistent:{jailed_shell()}"
    finally:
        jailed_passwd.cache_clear()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_sealed_codex_shell_cannot_reach_the_codex_process(real_tools: RealTools, tmp_path: Path) -> None:
    if not sandbox.enabled():
        pytest.skip("the sandbox is switched off")
    sandbox.check_sandbox()
    assert CODEX.passwd_shell
    codex = CODEX.provision(real_tools.cache)
    probe = 'P=$(pgrep -f "musl/bin/codex" | head -1); echo "pid $P"; ' + REACH
    arm = run_arm(tmp_path, real_tools.express, codex, real_tools.cache, model=CODEX.block_probe(probe))
    [call] = arm.session.calls
    answered = call.result.text if call.result is not None else ""
    assert "pid " in answered and "pid \n" not in answered, answered  # the probe found the Codex process
    assert all(line in answered for line in REFUSED), answered
