"""The two-layer CLI block (docs/sandbox.md) and the contamination counter behind it (docs/metrics/contamination.md).

Every invocation form is checked three ways: the real hook program (a subprocess fed the hook JSON,
as Claude Code runs it) denies it, ``invokes_cli`` sees it, and the contamination metric counts it.
Every mention is allowed and never counted.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli_forms import INVOCATIONS, MENTIONS
from support.synth import Transcript
from support.unprivileged import folder_mode, run_bound_by_permissions

from pytest_agent_eval.agents.base import AgentConfig
from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.claude_code.deny import HOOK_MODULE, hook_command, write_hook_settings
from pytest_agent_eval.harness import isolation
from pytest_agent_eval.harness.isolation import IsolationError, shim_path
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.tool.cli_matcher import invokes_cli


def run_hook(payload: str | bytes, cli: str = "codegraph") -> subprocess.CompletedProcess:
    """The hook program exactly as the settings file runs it, from a cwd outside this checkout."""
    return subprocess.run(
        shlex.split(hook_command(cli)),
        input=payload.encode() if isinstance(payload, str) else payload,
        capture_output=True,
        cwd="/",
        timeout=60,
    )


def hook_event(command: str, tool_name: str = "Bash") -> str:
    return json.dumps(
        {
            "session_id": "s-1",
            "hook_event_name": "PreToolUse",
            "tool_name": tool_name,
            "tool_input": {"command": command, "description": "probe"},
            "tool_use_id": "toolu_1",
        }
    )


def decision(done: subprocess.CompletedProcess) -> str | None:
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return None
    output = json.loads(done.stdout)
    assert output["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    return output["hookSpecificOutput"]["permissionDecision"]


def one_bash_call(command: str, result: str, is_error: bool | None) -> Transcript:
    t = Transcript()
    t.init()
    call = t.call("Bash", command=command)
    t.reply(call, result, is_error=is_error)
    t.result("done")
    return t


@pytest.mark.parametrize("command", INVOCATIONS)
def test_invocation_is_denied(command):
    done = run_hook(hook_event(command))
    assert decision(done) == "deny"
    # What Claude Code hands the agent for a denial is the hook's own reason, the only proof of a block.
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"] == CODEGRAPH.deny_reason


# The matcher and the metric apart from the hook program (a subprocess a form): fast enough for every mutant of
# metrics/contamination.py (bench/mutation.yaml deselects the hook's two tests there).
@pytest.mark.parametrize("command", INVOCATIONS)
def test_invocation_is_seen_and_counted(command):
    assert invokes_cli(command, cli=CODEGRAPH.cli)
    denial = "PreToolUse:Bash hook denied this tool: " + CODEGRAPH.deny_reason
    session = one_bash_call(command, denial, True).session()
    blocked = contamination(session, tool=CODEGRAPH)
    assert (blocked.cli_calls, blocked.cli_blocked, blocked.leaks) == (1, 1, [])
    assert not blocked.contaminated
    assert blocked.to_dict()["commands"] == [
        {
            "call_id": session.calls[0].id,
            "tool": "Bash",
            "command": command,
            "blocked": True,
            "thread": "main",
            "printed": False,
        }
    ]

    leaked = contamination(
        one_bash_call(command, "**Exploration: x**\nsrc/router.js ...", None).session(), tool=CODEGRAPH
    )
    assert (leaked.cli_calls, leaked.cli_blocked, len(leaked.leaks)) == (1, 0, 1)
    assert leaked.contaminated and leaked.to_dict()["contaminated"] is True


@pytest.mark.parametrize("command", MENTIONS)
def test_mention_is_allowed(command):
    assert decision(run_hook(hook_event(command))) is None


@pytest.mark.parametrize("command", MENTIONS)
def test_mention_is_not_counted(command):
    assert not invokes_cli(command, cli=CODEGRAPH.cli)
    report = contamination(one_bash_call(command, "src/a.js: codegraph", False).session(), tool=CODEGRAPH)
    assert (report.cli_calls, report.cli_blocked, report.leaks) == (0, 0, [])


def test_other_cli_names_are_honoured():
    assert invokes_cli("sg search foo", cli="sg")
    assert not invokes_cli("codegraph explore x", cli="sg")
    assert decision(run_hook(hook_event("/opt/bin/sg search foo"), cli="sg")) == "deny"
    assert decision(run_hook(hook_event("codegraph explore x"), cli="sg")) is None


def test_only_bash_is_judged():
    # A Grep call searching for the word is not a shell command at all.
    assert decision(run_hook(hook_event("codegraph explore x", tool_name="Grep"))) is None


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b"\xff\xfe\x00garbage",
        b'{"tool_name": "Bash"}',
        b'{"tool_name": "Bash", "tool_input": 3}',
    ],
)
def test_hook_allows_on_bad_input(payload):
    done = run_hook(payload)
    assert done.returncode == 0 and done.stdout == b""


@settings(deadline=None)
@given(st.text(alphabet=st.sampled_from(list("codegraph $()`'\"\\|&;<>{}#=\n\t-/.xe%")), max_size=60))
def test_invokes_cli_never_raises(command):
    assert invokes_cli(command, cli=CODEGRAPH.cli) in (True, False)


@settings(deadline=None)
@given(st.text(max_size=120))
def test_a_leading_cli_word_is_always_an_invocation(arguments):
    # Whatever follows — unbalanced quotes, stray operators — cannot hide the first command.
    assert invokes_cli("codegraph " + arguments, cli=CODEGRAPH.cli)


def test_a_failed_call_is_not_proof_of_a_block():
    # `command not found` shows the agent nothing of the tool: not blocked (no hook denial), and no leak either.
    report = contamination(
        one_bash_call("codegraph x; echo done", "bash: codegraph: command not found\ndone", False).session(),
        tool=CODEGRAPH,
    )
    assert (report.cli_calls, report.cli_blocked, report.leaks, report.contaminated) == (1, 0, [], False)
    # `; false` makes the call fail after the tool printed everything: an error status, yet a leak.
    failed = contamination(
        one_bash_call("codegraph explore x; false", "**Exploration: x**\n", True).session(), tool=CODEGRAPH
    )
    assert (failed.cli_blocked, [leak.fingerprint for leak in failed.leaks]) == (0, ["explore heading"])


def test_unanswered_and_empty_calls_are_neither_blocked_nor_output():
    t = Transcript()
    t.call("Bash", command="codegraph explore x")  # the run ended before the result came back
    empty = t.call("Bash", command="codegraph status")
    t.reply(empty, "", is_error=False)
    report = contamination(t.session(), tool=CODEGRAPH)
    assert (report.cli_calls, report.cli_blocked, report.leaks) == (2, 0, [])


# -- the PATH layer --------------------------------------------------------------------------
def executable(path: Path, body: str = "#!/bin/sh\necho hello-from-${0##*/}\n") -> Path:
    path.write_text(body)
    path.chmod(0o755)
    return path


@pytest.fixture
def bins(tmp_path):
    """PATH = first : tools (codegraph next to node, claude, dup) : later (dup)."""
    first, tools, later = tmp_path / "first", tmp_path / "tools", tmp_path / "later"
    for folder in (first, tools, later):
        folder.mkdir()
    executable(first / "early")
    for name in ("codegraph", "node", "claude", "dup"):
        executable(tools / name)
    (tools / "lib").mkdir()
    (tools / "relative-node").symlink_to("node")  # a relative link must still resolve through the shim
    executable(later / "dup", "#!/bin/sh\necho later-dup\n")
    return first, tools, later


def test_shim_hides_the_cli_and_keeps_order(bins, tmp_path):
    first, tools, later = bins
    original = os.pathsep.join([str(first), str(tools), "", str(later)])
    shimmed = shim_path(original, "codegraph", tmp_path / "shim")
    parts = shimmed.split(os.pathsep)
    assert parts[0] == str(first) and parts[2] == "" and parts[3] == str(later)
    mirror = Path(parts[1])
    assert mirror.parent == tmp_path / "shim"
    assert sorted(p.name for p in mirror.iterdir()) == ["claude", "dup", "lib", "node", "relative-node"]

    assert shutil.which("codegraph", path=original) == str(tools / "codegraph")
    assert shutil.which("codegraph", path=shimmed) is None
    assert shutil.which("early", path=shimmed) == str(first / "early")
    # `dup` exists in two folders: the shimmed one still wins, as it did before.
    out = subprocess.run(["dup"], env={"PATH": shimmed}, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "hello-from-dup"
    for name in ("node", "relative-node"):
        out = subprocess.run([name], env={"PATH": shimmed}, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == f"hello-from-{name}"
    assert shim_path(original, "codegraph", tmp_path / "shim") == shimmed  # rebuilt, not doubled


def test_shim_leaves_a_path_without_the_cli_alone(bins, tmp_path):
    first, _, later = bins
    (later / "codegraph").write_text("not executable")
    path = os.pathsep.join([str(first), str(later), str(tmp_path / "missing")])
    assert shim_path(path, "codegraph", tmp_path / "shim") == path


def test_a_path_folder_the_user_cannot_search_is_passed_over(bins, tmp_path):
    """An ordinary user's PATH may name a folder it cannot read, as root's ``~/.cargo/bin`` under a 0700 /root:
    nothing in it runs for that user, so it stays on PATH as it was and the folders after it are shimmed. One it
    can search but not list may hold the CLI the user can run, and no mirror of it can be built: an error names
    it."""
    _, tools, _ = bins
    home = tmp_path / "root-home"
    (home / "bin").mkdir(parents=True)
    executable(home / "bin" / "codegraph")
    path = os.pathsep.join([str(home / "bin"), str(tools)])
    code = (
        "from pytest_agent_eval.harness.isolation import shim_path\n"
        f"print(shim_path({path!r}, 'codegraph', {str(tmp_path / 'shim')!r}))"
    )
    with folder_mode(home, 0o000):
        done = run_bound_by_permissions(code)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.strip().split(os.pathsep)
    assert first == str(home / "bin") and Path(second).parent == tmp_path / "shim", done.stdout
    with folder_mode(home / "bin", 0o111):
        done = run_bound_by_permissions(code)
    assert f"IsolationError: PATH folder {home / 'bin'} holds `codegraph` but this user cannot list it" in done.stderr


# -- the hook layer and the self-check ---------------------------------------------------------
def test_hook_settings_run_the_hook_module(tmp_path):
    settings = write_hook_settings(tmp_path / "out" / "hook-settings.json", "codegraph")
    data = json.loads(settings.read_text())
    [group] = data["hooks"]["PreToolUse"]
    assert group["matcher"] == "Bash"
    [hook] = group["hooks"]
    assert hook["type"] == "command"
    assert shlex.split(hook["command"]) == [sys.executable, "-I", "-m", HOOK_MODULE, "--cli", "codegraph"]


def hook_settings(folder: Path, matcher: str, command: str) -> Path:
    """A settings file with one hand-written hook (only shell builtins: the shimmed PATH has no cat)."""
    group = {"matcher": matcher, "hooks": [{"type": "command", "command": command}]}
    path = folder / "hook-settings.json"
    path.write_text(json.dumps({"hooks": {"PreToolUse": [group]}}))
    return path


def self_check(
    path: str, settings: Path, cli: str, required=("claude", "node"), proven_hooks: set[str] | None = None
) -> None:
    """The harness's check of both layers, with Claude Code's hook as the agent's deny."""
    config = AgentConfig(files={"settings": settings})
    proven = set() if proven_hooks is None else proven_hooks
    isolation.self_check(path, cli, required, lambda env: CLAUDE_CODE.check_deny(config, cli, env, proven))


def test_self_check_passes_on_a_good_setup(bins, tmp_path):
    _, tools, _ = bins
    path = shim_path(os.pathsep.join([str(tools), "/usr/bin", "/bin"]), "codegraph", tmp_path / "shim")
    self_check(path, write_hook_settings(tmp_path / "hook-settings.json", "codegraph"), "codegraph")


def test_a_proven_hook_is_not_probed_again_but_the_path_still_is(bins, tmp_path):
    _, tools, _ = bins
    path = shim_path(str(tools), "codegraph", tmp_path / "shim")
    settings = write_hook_settings(tmp_path / "hook-settings.json", "codegraph")
    proven: set[str] = set()
    self_check(path, settings, "codegraph", proven_hooks=proven)
    assert proven == {hook_command("codegraph")}
    leaky = hook_settings(tmp_path, "Bash", "while read -r _; do :; done")
    with pytest.raises(IsolationError, match="allowed"):
        self_check(path, leaky, "codegraph", proven_hooks=proven)  # a different command is probed
    assert proven == {hook_command("codegraph")}
    with pytest.raises(IsolationError, match="still resolves"):
        self_check(str(tools), settings, "codegraph", proven_hooks=proven)


def test_self_check_quotes_an_interpreter_path_with_spaces(bins, tmp_path, monkeypatch):
    _, tools, _ = bins
    # A wrapper, not a symlink: a linked interpreter looks for pyvenv.cfg beside the link and loses the venv.
    spaced = tmp_path / "my python" / "python"
    spaced.parent.mkdir()
    executable(spaced, f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    monkeypatch.setattr(sys, "executable", str(spaced))
    assert shlex.split(hook_command("codegraph"))[0] == str(spaced)
    path = shim_path(str(tools), "codegraph", tmp_path / "shim")
    self_check(path, write_hook_settings(tmp_path / "hook-settings.json", "codegraph"), "codegraph")


def test_self_check_fails_without_the_shim(bins, tmp_path):
    _, tools, _ = bins
    settings = write_hook_settings(tmp_path / "hook-settings.json", "codegraph")
    with pytest.raises(IsolationError, match=r"`codegraph` still resolves to .*tools/codegraph"):
        self_check(str(tools), settings, "codegraph")


def test_self_check_fails_when_a_required_tool_is_lost(bins, tmp_path):
    _, tools, _ = bins
    path = shim_path(str(tools), "codegraph", tmp_path / "shim")
    settings = write_hook_settings(tmp_path / "hook-settings.json", "codegraph")
    with pytest.raises(IsolationError, match="required tool `git-lfs-nowhere` is not found") as info:
        self_check(path, settings, "codegraph", required=("claude", "node", "git-lfs-nowhere"))
    assert "claude" not in str(info.value) and "still resolves" not in str(info.value)


def test_self_check_fails_on_a_hook_that_lets_everything_through(bins, tmp_path):
    _, tools, _ = bins
    path = shim_path(str(tools), "codegraph", tmp_path / "shim")
    settings = hook_settings(tmp_path, "Bash", "while read -r _; do :; done")
    with pytest.raises(IsolationError) as info:
        self_check(path, settings, "codegraph")
    assert "allowed `/opt/agent-eval-probe/bin/codegraph explore probe`" in str(info.value)
    assert "allowed `VAR=1 codegraph explore probe`" in str(info.value)


def test_self_check_fails_on_a_hook_that_blocks_mentions(bins, tmp_path):
    _, tools, _ = bins
    path = shim_path(str(tools), "codegraph", tmp_path / "shim")
    settings = hook_settings(tmp_path, "Bash|Read", "while read -r _; do :; done; exit 2")
    with pytest.raises(IsolationError, match="denied `grep codegraph src/`"):
        self_check(path, settings, "codegraph")


def test_self_check_fails_without_a_bash_hook(bins, tmp_path):
    _, tools, _ = bins
    path = shim_path(str(tools), "codegraph", tmp_path / "shim")
    settings = hook_settings(tmp_path, "Read", "exit 2")
    with pytest.raises(IsolationError, match="installs no PreToolUse hook for Bash"):
        self_check(path, settings, "codegraph")
