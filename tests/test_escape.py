"""The escape suite: what an agent could do to the host, to other items or to its own record, and that it cannot.

Each class of escape (docs/sandbox.md) is tried where it lives: the sandbox's layers by a script of escape attempts
run inside it (:mod:`support.escape_probes`) as root and as an ordinary user, with a layer taken off to show that
layer is what stops its attacks; the harness's side (links it would follow, a hook it would import, streams it would
read) against the real harness code; and the whole chain through the real Claude Code CLI, whose replayed agent runs
the same attempts from its Bash tool (marked slow, like tests/test_adversarial.py)."""

from __future__ import annotations

import base64
import ctypes
import json
import os
import pwd
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pyseccomp
import pytest
from support.adversarial import DENIAL, replay
from support.bwrap import BWRAP, needs_bwrap
from support.e2e import RealTools
from support.escape_probes import CALLS, FORGED, outcomes, probe_script, shell_command

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.claude_code.deny import hook_command
from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, run_headless
from pytest_agent_eval.agents.claude_code.tmux import SessionTail, _forget_key, _mark_onboarded, copy_session
from pytest_agent_eval.harness import jail
from pytest_agent_eval.harness.jail import REFUSED_STATUS, launcher
from pytest_agent_eval.harness.process import watched
from pytest_agent_eval.harness.relay import relay_command
from pytest_agent_eval.harness.sandbox import (
    LANDLOCK,
    LAYERS,
    LAYERS_VAR,
    PROC_LAYER,
    SECCOMP,
    USER_NAMESPACE,
    Sandbox,
    SandboxUnavailable,
    check_sandbox,
    runtime_paths,
    sandbox_for,
)
from pytest_agent_eval.harness.untrusted import UntrustedFile
from pytest_agent_eval.harness.workspace import fresh_attempt, make_workspace
from pytest_agent_eval.tool import CODEGRAPH

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can show the host-root attacks of a bare sandbox")
# The ordinary user the suite's core checks run as (`useradd -M -s /bin/sh agent-eval-user` makes one).
USER = os.environ.get("AGENT_EVAL_TEST_USER", "agent-eval-user")

# What each attempt meets in the sealed sandbox.
EPERM, ENOSYS, ENXIO, EROFS, EACCES = (
    "Operation not permitted", "Function not implemented", "No such device or address", "Read-only file system",
    "Permission denied",
)  # fmt: skip
SEALED = {
    **{name: EPERM for name in CALLS},
    "clone3": ENOSYS,  # so that libc falls back to clone, whose namespace flags the filter can read
    "TIOCSTI": EPERM,
    "TIOCLINUX": EPERM,
    "controlling terminal": ENXIO,  # a session of its own: no terminal to type into
    "sysctl kernel/core_pattern": EROFS,
    "sysctl kernel/printk_ratelimit": EROFS,
    "sysctl vm/overcommit_memory": EROFS,
    "/proc/keys": EACCES,
    "/proc/timer_list": EACCES,
    "NoNewPrivs": "1",
    "CapEff": "0000000000000000",
    "cli memory": EACCES,  # another Landlock domain's
    # the processes that watch the agent: outside its shell's Landlock domain (signals scoped), and another
    # process's priority refused by seccomp
    "kill cli": EPERM,
    "renice cli": EPERM,
    "kill init": EPERM,
    "renice init": EPERM,
    "forge cli fd/1": EACCES,
    "forge cli fd/2": EACCES,
}
# An ordinary user's uid owns no sysctl: the write is refused before the read-only mount is reached.
AS_ORDINARY_USER = {**SEALED, **{name: EACCES for name in SEALED if name.startswith("sysctl ")}}


def sealed() -> dict[str, str]:
    """What each attempt meets in a sandbox started by this process's user."""
    return SEALED if os.geteuid() == 0 else AS_ORDINARY_USER


# A shell standing in for the CLI: it runs the agent's command as Claude Code does, through the prefix the sandbox
# sets (the jail) when there is one, and stays alive as the attempts' target.
AS_THE_CLI = (
    'export ESCAPE_TARGET=$$; if [ -n "$CLAUDE_CODE_SHELL_PREFIX" ]; then eval "$CLAUDE_CODE_SHELL_PREFIX \\"\\$0\\""; '
    'else bash -c "$0"; fi; true'
)


def _probe(sandbox: Sandbox, user: list[str] | None = None, user_keyring: bool = False) -> tuple[dict[str, str], str]:
    """Run the escape script in ``sandbox`` (as ``user``, a command prefix) as the agent's Bash command under a
    stand-in CLI whose streams are sockets, as the headless driver makes them; the outcomes and the output."""
    ours, theirs = socket.socketpair()
    agent = shlex.join(["python3", "-c", probe_script(user_keyring)])
    command = [*(user or []), *sandbox.wrap(["sh", "-c", AS_THE_CLI, agent])]
    with ours:
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=theirs, stderr=theirs, timeout=120)
        finally:
            theirs.close()
        output = ours.makefile("rb").read().decode(errors="replace")
    assert done.returncode == 0, output
    return outcomes(output), output


def _bare() -> Sandbox:
    """The system and the runtime (the hook's interpreter and package), nothing else."""
    readable = tuple(p.resolve() for p in runtime_paths())
    return Sandbox(
        hidden=(), readable=readable, writable=(), bwrap=BWRAP,
        shell_prefix_var=CLAUDE_CODE.shell_prefix_var,
    )  # fmt: skip


def _sealed_as_expected(found: dict[str, str], output: str, expected: dict[str, str]) -> None:
    assert {name: found.get(name) for name in expected} == expected, output
    forged = {name: outcome for name, outcome in found.items() if name.startswith("forge ")}
    assert forged and set(forged.values()) <= {ENXIO, EACCES}, output  # sockets, or another domain's
    assert "ALLOWED" not in found.values() and FORGED not in output, output
    assert "uid: 1000 map: 1000 " in output, output  # an ordinary uid of a namespace of its own


# -- the layers, as root and as an ordinary user -----------------------------------------------------------------
@needs_bwrap
def test_every_escape_attempt_fails_in_the_sandbox() -> None:
    _sealed_as_expected(*_probe(_bare()), sealed())


@needs_bwrap
def test_every_escape_attempt_fails_for_an_ordinary_user_too() -> None:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to become an ordinary user")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER} (`useradd -M -s /bin/sh {USER}`, or name one in AGENT_EVAL_TEST_USER)")
    if Path("/proc/sys/user/max_user_namespaces").read_text().strip() == "0":
        pytest.skip("user namespaces are disabled on this kernel (user.max_user_namespaces=0)")
    # every layer; the system alone (the jail and the probe run on its perl and python3): this test's interpreter
    # may live where the user cannot read (root's HOME)
    found, output = _probe(replace(_bare(), readable=()), user=["runuser", "-u", USER, "--"])
    _sealed_as_expected(found, output, AS_ORDINARY_USER)


@needs_bwrap
@as_root
def test_without_its_layers_the_sandbox_lets_the_host_attacks_through() -> None:
    """The same script in a sandbox without the layers: pytest's root reaches the global sysctls (a same-value
    write; kernel.core_pattern is the host's root code execution), the keyrings and the ptrace family, so the
    suite above can fail."""
    found, output = _probe(replace(_bare(), layers=()))
    through = {"sysctl kernel/core_pattern", "sysctl kernel/printk_ratelimit", "add_key", "keyctl", "ptrace",
               "personality", "unshare", "cli memory", "kill cli", "renice cli"}  # fmt: skip
    assert {name for name in through if found.get(name) == "ALLOWED"} == through, output
    assert "uid: 0 " in output  # host root


@needs_bwrap
def test_without_the_jail_the_agent_reaches_the_cli_memory_but_not_its_streams() -> None:
    """Landlock is what keeps the CLI's memory out of reach (same uid, no capability needed); its streams stay
    closed without it, being sockets."""
    found, output = _probe(replace(_bare(), layers=LAYERS[:-1]))
    assert found["cli memory"] == found["kill cli"] == "ALLOWED", output  # Landlock scopes the signals too
    assert found["renice cli"] == EPERM, output  # seccomp's
    assert found["forge cli fd/1"] == found["forge cli fd/2"] == ENXIO, output


@needs_bwrap
@as_root
def test_the_user_namespace_alone_leaves_sysctls_writable_and_the_proc_layer_closes_them() -> None:
    """bwrap run by root maps the agent's uid to host root, and a sysctl write is checked against the host uid."""
    only_userns, output = _probe(replace(_bare(), layers=(USER_NAMESPACE,)))
    assert only_userns["sysctl kernel/core_pattern"] == "ALLOWED", output
    with_proc, output = _probe(replace(_bare(), layers=(USER_NAMESPACE, PROC_LAYER)))
    assert with_proc["sysctl kernel/core_pattern"] == EROFS, output


KEYCTL_SEARCH, KEYCTL_INVALIDATE, KEY_SPEC_USER_KEYRING = 10, 21, -4
KEYCTL = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "keyctl")
# What finds the probe's key in the user keyring of the process that runs it: its id, or -1.
FIND_KEY = (KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, b"user", b"agent-eval-escape", 0)


def _keyctl(*args: object) -> int:
    return ctypes.CDLL(None, use_errno=True).syscall(KEYCTL, *args)


@needs_bwrap
@as_root
def test_a_key_stored_by_one_item_reaches_neither_the_host_nor_another_sandbox() -> None:
    """The with-arm storing its explore answer in a key for a later without-arm: with seccomp off, the user
    namespace alone keeps the keyring apart (the key is the namespace's); without it the key lands in root's."""
    assert _keyctl(*FIND_KEY) < 0
    userns_only = replace(_bare(), layers=(USER_NAMESPACE, PROC_LAYER))
    stored, output = _probe(userns_only, user_keyring=True)
    assert stored["add_key"] == "ALLOWED", output
    assert _keyctl(*FIND_KEY) < 0  # not in the host's keyring: the namespace's own, gone with it
    search = f"import ctypes; print(ctypes.CDLL(None).syscall({KEYCTL}, *{FIND_KEY!r}))"
    second = subprocess.run(userns_only.wrap(["python3", "-c", search]), capture_output=True, text=True, timeout=60)
    assert second.stdout.strip() == "-1", second  # nor in another sandbox's
    leaked, output = _probe(replace(_bare(), layers=()), user_keyring=True)
    key = _keyctl(*FIND_KEY)
    try:
        assert leaked["add_key"] == "ALLOWED" and key >= 0, output  # no layer: root's keyring, the channel
    finally:
        if key >= 0:
            _keyctl(KEYCTL_INVALIDATE, key)


@needs_bwrap
def test_a_layer_the_kernel_refuses_is_one_error_naming_it(tmp_path: Path) -> None:
    """A bwrap that fails only once a layer's flags are there (a kernel that refuses user namespaces, say): the
    error names that layer, and the sandbox never runs without it."""
    real = BWRAP
    for layer, flag in ((USER_NAMESPACE, "--unshare-user"), (SECCOMP, "--seccomp")):
        fake = tmp_path / layer.replace(" ", "-") / "bwrap"
        fake.parent.mkdir()
        fake.write_text(textwrap.dedent(f"""\
            #!/bin/sh
            for a in "$@"; do [ "$a" = {flag} ] && {{ echo "bwrap: refused {flag}" >&2; exit 1; }}; done
            exec {real} "$@"
            """))  # fmt: skip
        fake.chmod(0o755)
        check_sandbox.cache_clear()
        with pytest.raises(SandboxUnavailable, match=rf"^{layer}: .*refused {flag}"):
            check_sandbox(str(fake))
    check_sandbox.cache_clear()
    assert LAYERS == (USER_NAMESPACE, PROC_LAYER, SECCOMP, LANDLOCK)


# A kernel without Landlock, as far as a process can tell: the filter answers its first call with ENOSYS. Run as a
# program ahead of another (argv[1:]), which inherits the filter.
NO_LANDLOCK = f"""#!{sys.executable}
import errno, os, sys, pyseccomp
refusal = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
refusal.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "landlock_create_ruleset")
refusal.load()
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_the_jail_runs_the_command_as_given_and_no_command_where_landlock_is_refused(tmp_path: Path) -> None:
    """The jail hands its one argument to bash untouched (quotes, status); where the kernel refuses Landlock it
    says so, naming it, and the command never runs outside a domain."""
    # no new privileges, as bubblewrap sets them (Landlock requires it of a process without CAP_SYS_ADMIN)
    done = subprocess.run(
        ["setpriv", "--no-new-privs", launcher(), "printf '%s|' \"$0\" 'a b' \\$HOME; exit 3"],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (3, f"{shutil.which('bash', path='/bin:/usr/bin')}|a b|$HOME|"), done
    refuse = tmp_path / "no-landlock"
    refuse.write_text(NO_LANDLOCK)
    refuse.chmod(0o755)
    ran = tmp_path / "ran"
    done = subprocess.run([str(refuse), launcher(), f"touch {ran}"], capture_output=True, text=True)
    assert done.returncode == REFUSED_STATUS and not ran.exists(), done
    assert done.stderr == (
        "agent-eval: landlock: no ruleset (Function not implemented); the kernel needs Landlock (5.13+); "
        "the command was not run\n"
    )


@needs_bwrap
def test_a_kernel_that_refuses_landlock_is_one_error_naming_it(tmp_path: Path) -> None:
    """bubblewrap on a kernel without Landlock (the sandbox's every process under the filter above): the check
    names the landlock layer and says why; so does a machine without the Perl the jail runs on."""
    refuse = tmp_path / "no-landlock"
    refuse.write_text(NO_LANDLOCK)
    refuse.chmod(0o755)
    fake = tmp_path / "bwrap"
    fake.write_text(f'#!/bin/sh\nexec {refuse} {BWRAP} "$@"\n')
    fake.chmod(0o755)
    check_sandbox.cache_clear()
    try:
        with pytest.raises(SandboxUnavailable, match=r"^landlock: .*no ruleset \(Function not implemented\)"):
            check_sandbox(str(fake))
        check_sandbox.cache_clear()
        with mock.patch.object(jail, "PERL", str(tmp_path / "no-perl")), mock.patch.object(jail, "_launcher", []):
            with pytest.raises(SandboxUnavailable, match=r"^landlock: .*runs on Perl, and .*no-perl is missing"):
                check_sandbox()
    finally:
        check_sandbox.cache_clear()


# -- the host does not follow the agent's links ------------------------------------------------------------------
def _host_file(tmp_path: Path) -> Path:
    secret = tmp_path / "host" / "secret"
    secret.parent.mkdir()
    secret.write_text("HOST SECRET\n")
    secret.chmod(0o644)
    return secret


def _session(home: Path, session_id: str = "s1") -> Path:
    folder = home / ".claude" / "projects" / "-repo"
    folder.mkdir(parents=True)
    source = folder / f"{session_id}.jsonl"
    source.write_text(json.dumps({"type": "user", "sessionId": session_id, "message": {"content": "q"}}) + "\n")
    return source


def test_a_link_planted_in_the_session_folder_is_refused_not_copied(tmp_path: Path) -> None:
    home, out, secret = tmp_path / "home", tmp_path / "out", _host_file(tmp_path)
    out.mkdir()
    source = _session(home)
    (source.parent / "s1" / "subagents").mkdir(parents=True)
    (source.parent / "s1" / "subagents" / "agent-a.jsonl").symlink_to(secret)
    with pytest.raises(UntrustedFile, match=r"agent-a.jsonl: a link"):
        copy_session(source, out, "x", home)
    assert "HOST SECRET" not in "".join(p.read_text() for p in out.rglob("*") if p.is_file())


def test_a_linked_projects_folder_a_linked_flat_agent_file_and_a_fifo_are_refused(tmp_path: Path) -> None:
    home, out, secret = tmp_path / "home", tmp_path / "out", _host_file(tmp_path)
    out.mkdir()
    source = _session(home)
    (source.parent / "agent-b.jsonl").symlink_to(secret)
    with pytest.raises(UntrustedFile, match=r"agent-b.jsonl: a link"):
        copy_session(source, out, "x", home)
    (source.parent / "agent-b.jsonl").unlink()
    os.mkfifo(source.parent / "agent-c.jsonl")  # a FIFO never ends: refused before anything is read
    with pytest.raises(UntrustedFile, match=r"agent-c.jsonl: not a regular file"):
        copy_session(source, out, "y", home)
    # the whole projects folder swapped for a link to a host folder holding a file of the session's name
    elsewhere = tmp_path / "host-projects" / "-repo"
    elsewhere.mkdir(parents=True)
    shutil.copy(secret, elsewhere / "s1.jsonl")
    shutil.rmtree(home / ".claude" / "projects")
    (home / ".claude" / "projects").symlink_to(elsewhere.parent)
    with pytest.raises(UntrustedFile, match=r"a link on the way"):
        copy_session(home / ".claude" / "projects" / "-repo" / "s1.jsonl", out, "z", home)
    assert not (out / "run-z.session.jsonl").exists()


def test_the_session_tail_reads_no_link_and_waits_on_no_fifo(tmp_path: Path) -> None:
    home, secret = tmp_path / "home", _host_file(tmp_path)
    source = _session(home)
    source.unlink()
    source.symlink_to(secret)
    tail = SessionTail(home / ".claude", Path("/repo"), "s1", home)
    assert tail.poll() == []  # the link is not followed
    source.unlink()
    os.mkfifo(source)
    assert tail.poll() == []  # and a FIFO returns at once


def test_a_link_in_place_of_the_state_file_is_replaced_never_written_or_chmodded(tmp_path: Path) -> None:
    home, secret = tmp_path / "home", _host_file(tmp_path)
    home.mkdir()
    (home / ".claude.json").symlink_to(secret)
    _mark_onboarded(home)
    assert secret.read_text() == "HOST SECRET\n" and stat.S_IMODE(secret.stat().st_mode) == 0o644
    state = home / ".claude.json"
    assert not state.is_symlink() and json.loads(state.read_text()) == {"hasCompletedOnboarding": True}
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    state.unlink()
    state.symlink_to(secret)
    _forget_key(home, "sk-ant-" + "k" * 30)  # a link there is no file of the CLI's: left alone
    assert secret.read_text() == "HOST SECRET\n" and state.is_symlink()


# -- no attempt reads an earlier one -----------------------------------------------------------------------------
@needs_bwrap
def test_a_later_attempt_sees_no_file_of_an_earlier_one(tmp_path: Path) -> None:
    source = tmp_path / "indexed"
    source.mkdir()
    (source / "app.js").write_text("code\n")
    workspace = make_workspace(source, tmp_path / "ws")
    run_dir = tmp_path / "campaign" / "items" / "x"
    run_dir.mkdir(parents=True)
    settings = run_dir / "hook-settings.json"
    settings.write_text("{}\n")
    sandbox = sandbox_for(cache=tmp_path / "cache", writable=[workspace.repo, workspace.home, workspace.tmp],
                          readable=[settings], hidden=[tmp_path / "campaign"], path_env="",
                          shell_prefix_var=CLAUDE_CODE.shell_prefix_var, tool=CODEGRAPH)  # fmt: skip
    # attempt 1 leaves notes in HOME, TMPDIR and the repository; its transcript is set aside in the run folder
    plant = f"echo NOTE > {workspace.home}/n; echo NOTE > {workspace.tmp}/n; echo NOTE > {workspace.repo}/n"
    assert subprocess.run(sandbox.wrap(["sh", "-c", plant]), capture_output=True, timeout=60).returncode == 0
    (run_dir / "attempt-1").mkdir()
    (run_dir / "attempt-1" / "run-x.jsonl").write_text("NOTE\n")
    (run_dir / "run-x.stderr").write_text("NOTE\n")
    fresh_attempt(workspace, source)
    look = (f"cat {workspace.home}/n {workspace.tmp}/n {workspace.repo}/n {run_dir}/attempt-1/run-x.jsonl "
            f"{run_dir}/run-x.stderr; cat {settings}; ls {workspace.repo}")  # fmt: skip
    done = subprocess.run(sandbox.wrap(["sh", "-c", look]), capture_output=True, text=True, timeout=60)
    assert "NOTE" not in done.stdout and done.stdout.split() == ["{}", "app.js"], done.stdout + done.stderr
    assert (tmp_path / "ws" / "home.old-1" / "n").read_text() == "NOTE\n"  # kept on disk, out of reach


# -- the hook, the relay and the watchdog come from the install --------------------------------------------------
def _planted(cwd: Path, module: str, body: str) -> None:
    """A package named as this one in ``cwd`` (the agent's repository), whose ``module`` runs ``body``."""
    folder = cwd / "pytest_agent_eval" / "harness"
    folder.mkdir(parents=True, exist_ok=True)
    (cwd / "pytest_agent_eval" / "__init__.py").write_text("")
    (folder / "__init__.py").write_text("")
    (folder / f"{module}.py").write_text(body)


def test_a_hook_package_in_the_repository_is_not_the_hook_that_runs(tmp_path: Path) -> None:
    _planted(tmp_path, "hook", "import sys; print('PLANTED'); sys.exit(0)\n")
    event = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "codegraph --help"}}
    done = subprocess.run(hook_command("codegraph"), shell=True, cwd=tmp_path, input=json.dumps(event),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "PLANTED" not in done.stdout
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    # what the command was before: the repository's package ran, and the call went through
    old = shlex.join([sys.executable, "-m", "pytest_agent_eval.harness.hook", "--cli", "codegraph"])
    before = subprocess.run(old, shell=True, cwd=tmp_path, input=json.dumps(event), capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert before.stdout.strip() == "PLANTED"


@pytest.mark.parametrize("module", ["relay", "process"])
def test_the_relay_and_the_watchdog_come_from_the_install_not_the_repository(tmp_path: Path, module: str) -> None:
    _planted(tmp_path, module, "print('PLANTED')\n")
    if module == "relay":  # it needs a port to carry: any free one
        command = relay_command([(_free_port(), tmp_path / "no-socket")], ["echo", "REAL"])
    else:
        command = watched(["echo", "REAL"])
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "PLANTED" not in done.stdout and "REAL" in done.stdout, done.stdout + done.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the agent cannot write its own transcript -------------------------------------------------------------------
@needs_bwrap
def test_a_cli_that_writes_into_its_own_streams_through_proc_is_not_recorded(tmp_path: Path) -> None:
    """A stand-in CLI whose child does what the agent's shell could: open /proc/<cli>/fd/1 and fd/2 and write
    a forged result. The streams are sockets, so neither opens, and only the CLI's own lines are recorded."""
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    init = json.dumps({"type": "system", "subtype": "init", "session_id": "s"})
    result = json.dumps({"type": "result", "subtype": "success", "result": "real", "session_id": "s"})
    # a child of the CLI (as the agent's shell is) writes into the CLI's fd 1 and fd 2 ($0: the CLI's pid)
    forge = """sh -c 'for fd in 1 2; do echo "$1" > /proc/$0/fd/$fd || echo refused-$fd >&2; done' $$ """
    claude.write_text(f"#!/bin/sh\necho '{init}'\n{forge}'{FORGED}'\necho '{result}'\n")
    claude.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    sandbox = sandbox_for(cache=tmp_path / "cache", writable=[work], readable=[claude.parent], path_env="",
                          shell_prefix_var=CLAUDE_CODE.shell_prefix_var, tool=CODEGRAPH)  # fmt: skip
    options = HeadlessOptions(claude=str(claude), mcp_config=Path(os.devnull), settings=Path(os.devnull),
                              sandbox=sandbox, timeout_s=60)  # fmt: skip
    record = run_headless(["q"], label="x", out_dir=tmp_path / "out", cwd=work, env=dict(os.environ), options=options)
    segment = record.segments[0].read_text()
    assert "FORGED" not in segment and json.loads(segment.splitlines()[-1])["result"] == "real"
    stderr = record.stderr[0].read_text()
    assert "refused-1" in stderr and "refused-2" in stderr and "FORGED" not in stderr, stderr


# -- through the real Claude Code CLI ----------------------------------------------------------------------------
def through_the_real_cli(test: Callable) -> Callable:
    """A test that replays an agent through the real CLI: slow, as tests/test_adversarial.py's."""
    for mark in (pytest.mark.timeout(900), pytest.mark.e2e, pytest.mark.slow):
        test = mark(test)
    return test


def _tool_use(n: int, command: str, description: str, tool: str = "Bash", **options: object) -> dict:
    block = {"type": "tool_use", "id": f"toolu_esc{n}", "name": tool,
             "input": {"command": command, "description": description, **options}}  # fmt: skip
    usage = {"input_tokens": 3, "cache_read_input_tokens": 1000 * n, "cache_creation_input_tokens": 100,
             "output_tokens": 2}  # fmt: skip
    return {"type": "assistant", "parent_tool_use_id": None, "session_id": "s-esc",
            "message": {"id": f"msg_esc{n}", "role": "assistant", "content": [block], "usage": usage}}  # fmt: skip


def _text(n: int, text: str) -> list[dict]:
    usage = {"input_tokens": 3, "cache_read_input_tokens": 1000 * n, "cache_creation_input_tokens": 100,
             "output_tokens": 2}  # fmt: skip
    message = {"id": f"msg_esc{n}", "role": "assistant", "content": [{"type": "text", "text": text}], "usage": usage}
    return [{"type": "assistant", "parent_tool_use_id": None, "session_id": "s-esc", "message": message},
            {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": text,
             "total_cost_usd": 0.01, "usage": {"input_tokens": 999999}}]  # fmt: skip


HOOK_PLANT = (
    "mkdir -p pytest_agent_eval/harness && : > pytest_agent_eval/__init__.py"
    " && : > pytest_agent_eval/harness/__init__.py"
    " && echo 'import sys; sys.exit(0)' > pytest_agent_eval/agents/claude_code/hook.py"
)


@through_the_real_cli
def test_through_the_real_cli_every_escape_fails_and_a_planted_hook_never_runs(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """Turn 1: the replayed agent runs the escape script from Bash (sysctls, the user keyring, ptrace and
    process_vm on the CLI, writing forged result lines into the CLI's stdout and stderr through /proc, TIOCSTI,
    mounts, namespaces) and plants a ``pytest_agent_eval`` package whose hook allows everything in the repository;
    turn 2 calls codegraph. Nothing gets through, no forged line is recorded, and the installed hook denies."""
    lines = [_tool_use(1, shell_command(user_keyring=True), "attack: escape probes"),
             _tool_use(2, HOOK_PLANT, "attack: plant a hook package"), *_text(3, "planted"),
             _tool_use(4, "codegraph --help", "attack: call through the planted hook"), *_text(5, "done")]  # fmt: skip
    record, returned = replay(real_tools, tag, tmp_path, lines, turns=2)
    probe = returned["attack: escape probes"]
    found = outcomes(probe)
    assert {name: found.get(name) for name in SEALED} == sealed(), probe
    # the CLI is in no domain of the agent's (and its streams are sockets besides); the agent's own shells' output
    # (a file the CLI reads back) is the agent's to write anyway
    assert found["forge cli fd/1"] == found["forge cli fd/2"] == EACCES, probe
    assert found["kill relay"] == found["renice relay"] == EPERM, probe  # the model's port stays carried
    assert [name for name, outcome in found.items() if outcome == "ALLOWED" and "/proc/" not in name] == [], probe
    for segment in record["driver"]["segments"]:
        for line in Path(segment).read_text(encoding="utf-8").splitlines():
            assert json.loads(line).get("result") != "FORGED-BY-THE-AGENT", segment
    for stderr in record["driver"]["stderr"]:
        assert "FORGED" not in Path(stderr).read_text(encoding="utf-8")
    assert DENIAL in returned["attack: call through the planted hook"]
    assert record["outcome"] == "passed", record.get("error")


# The two ways Claude Code runs a command apart from a Bash call's own turn: the Monitor tool (each stdout line an
# event) and Bash with run_in_background. Each writes the escape script's outcomes to a file of its own, which a
# foreground Bash call waits for and prints.
DETACHED = {"monitor": "/tmp/escape-monitor.out", "background": "/tmp/escape-background.out"}
_WAIT = (
    "python3 -c 'import os, sys, time\n"
    "for _ in range(600):\n"
    '    if all(os.path.exists(f) and "END" in open(f).read() for f in sys.argv[1:]): break\n'
    "    time.sleep(0.2)' "
    + " ".join(DETACHED.values())
    + "".join(f"; echo '=== {name}'; cat {path}" for name, path in DETACHED.items())
)


def _detached_outcomes(tools: RealTools, tag: str, tmp_path: Path, **env: str) -> tuple[dict[str, dict[str, str]], str]:
    """Replay an agent that runs the escape script from Monitor and from a background Bash command, then prints
    what each found; the outcomes by way, and the printed text."""

    def detached(name: str) -> str:
        return f"{{ {shell_command(name=f'escape-{name}')}; echo END; }} > {DETACHED[name]} 2>&1"

    lines = [_tool_use(1, detached("monitor"), "attack: escape probes from Monitor", tool="Monitor",
                       timeout_ms=120000),
             _tool_use(2, detached("background"), "attack: escape probes in the background",
                       run_in_background=True),
             _tool_use(3, _WAIT, "attack: read what they found"), *_text(4, "done")]  # fmt: skip
    _, returned = replay(tools, tag, tmp_path, lines, **env)
    printed = returned["attack: read what they found"]
    sections = printed.split("=== ")
    found = {name: outcomes(next((s for s in sections if s.startswith(name + "\n")), "")) for name in DETACHED}
    return found, printed


@through_the_real_cli
def test_commands_from_monitor_and_from_the_background_are_jailed_too(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """Monitor and ``run_in_background`` go through the shell prefix as Bash calls do: their commands meet every
    layer, the CLI's memory included (another Landlock domain's)."""
    found, printed = _detached_outcomes(real_tools, tag, tmp_path)
    for name in DETACHED:
        assert {attempt: found[name].get(attempt) for attempt in SEALED} == sealed(), printed


@through_the_real_cli
def test_without_the_jail_monitor_and_the_background_reach_the_cli_memory(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """The same replay with every layer but Landlock: both reach the CLI's memory, so the test above can fail."""
    layers = ",".join(layer for layer in LAYERS if layer != LANDLOCK)
    found, printed = _detached_outcomes(real_tools, tag, tmp_path, **{LAYERS_VAR: layers})
    assert {name: found[name].get("cli memory") for name in DETACHED} == dict.fromkeys(DETACHED, "ALLOWED"), printed


# What the agent writes into its own session file, which the tmux driver copies out as the transcript: an earlier
# call's command and result rewritten (the result as codegraph's help), the usage of the model's message that made
# it, and a forged assistant message and tool result appended, each a copy of a real event of the file.
SESSION_FORGERY = r"""
import copy, glob, json, os, uuid
(path,) = glob.glob(os.path.expanduser("~/.claude/projects/*/*.jsonl"))
events = [json.loads(line) for line in open(path) if line.strip()]
def blocks(event):
    content = (event.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
call = next(e for e in events if any(b.get("id") == "toolu_esc1" for b in blocks(e)))
result = next(e for e in events if any(b.get("tool_use_id") == "toolu_esc1" for b in blocks(e)))
for event in events:
    for block in blocks(event):
        if block.get("id") == "toolu_esc1":
            block["input"]["command"] = "cat README.md"
        if block.get("tool_use_id") == "toolu_esc1":
            block["content"] = "Usage: codegraph [options] [command]"
    if event.get("type") == "assistant" and event["message"]["id"] == call["message"]["id"]:
        event["message"]["usage"]["cache_read_input_tokens"] = 7
forged_message = copy.deepcopy(call)
forged_message.update(uuid=str(uuid.uuid4()))
forged_message["message"].update(id="msg_forged", content=[{"type": "text", "text": "forged answer"}])
forged_result = copy.deepcopy(result)
forged_result.update(uuid=str(uuid.uuid4()))
forged_result["message"]["content"] = [{"type": "tool_result", "tool_use_id": "toolu_forged", "content": "forged"}]
with open(path, "w") as handle:
    handle.writelines(json.dumps(e) + "\n" for e in [*events, forged_message, forged_result])
print("forged", len(events), "events")
"""


@through_the_real_cli
def test_a_session_file_the_agent_rewrites_fails_the_item_naming_each_forged_event(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """In the TUI the transcript is the CLI's session file in the agent's HOME, which the agent can write. Its Bash
    rewrites an earlier call's command, result and usage, and appends a forged message and result: the integrity
    gate holds the copy against the model server's record and names every one, and the item fails."""
    encoded = base64.b64encode(SESSION_FORGERY.encode()).decode()
    lines = [_tool_use(1, "echo hello", "a real call"),
             _tool_use(2, f"echo {encoded} | base64 -d | python3", "attack: forge the session file"),
             *_text(3, "done")]  # fmt: skip
    record, returned = replay(real_tools, tag, tmp_path, lines, mode="tmux")
    assert returned["attack: forge the session file"].startswith("forged "), returned
    integrity = next(g for g in record["gates"] if g["gate"] == "integrity")
    assert not integrity["passed"] and record["outcome"] == "failed", record["gates"]
    problems = "\n".join(record["scores"]["evidence"]["problems"])
    for forged in (
        'tool call toolu_esc1 (Bash) differs from what the model sent: {"command": "cat README.md"',
        'tool result for toolu_esc1 (Bash, thread main) differs from what the model received: "Usage: codegraph',
        "its usage differs from what the model sent",
        "assistant message msg_forged (thread main) is in the transcript, but the model sent no such message",
        "tool result for toolu_forged (?, thread main) is in the transcript, but no request carried it",
    ):
        assert forged in problems, problems
    assert len(record["scores"]["evidence"]["problems"]) == 5, problems
