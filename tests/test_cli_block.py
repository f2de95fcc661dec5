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

INVOCATIONS = [
    "codegraph explore 'how does routing work'",
    "/abs/path/bin/codegraph explore x",
    "./node_modules/.bin/codegraph status",
    "~/.npm-global/bin/codegraph explore x",
    "VAR=1 codegraph explore x",
    "CODEGRAPH_NO_PROMPT_HOOK=1 FOO='a b' codegraph explore x",
    "ls .codegraph && codegraph explore x",
    "false || codegraph explore x",
    "cd /repo; codegraph explore x",
    "echo q | codegraph explore x",
    "codegraph explore x | head -50",
    "ls\ncodegraph explore x",
    'echo "$(codegraph explore x)"',
    "out=$(codegraph explore x)",
    "echo `codegraph explore x`",
    "cat <(codegraph explore x)",
    "(cd /repo && codegraph explore x)",
    "{ codegraph explore x; }",
    "if true; then codegraph explore x; fi",
    "for q in a b; do codegraph explore $q; done",
    "env codegraph explore x",
    "env -i PATH=/usr/bin codegraph explore x",
    "env -S 'codegraph explore x'",
    "$(which codegraph) explore x",
    '"$(command -v codegraph)" explore x',
    "`which codegraph` explore x",
    "CG=$(which codegraph); $CG explore x",
    'A=1 CG=`command -v codegraph`\n"$CG" explore x',
    "export CG=/opt/cg/bin/codegraph && ${CG} explore x",
    "bash -c 'codegraph explore x'",
    'sh -c "cd /repo && codegraph explore x"',
    "bash -lc 'VAR=1 codegraph explore x'",
    "bash <<EOF\ncodegraph explore x\nEOF",
    "bash <<< 'codegraph explore x'",
    "eval 'codegraph explore x'",
    "echo x | xargs codegraph explore",
    "echo x | xargs -I{} codegraph explore {}",
    "find . -maxdepth 1 -exec codegraph explore {} \\;",
    "find /usr -name '*.js' -execdir codegraph status +",
    "npx @colbymchenry/codegraph explore x",
    "npx -y @colbymchenry/codegraph@1.6.1 explore x",
    "npx codegraph explore x",
    "npx --package=@colbymchenry/codegraph codegraph explore x",
    "pnpm dlx @colbymchenry/codegraph explore x",
    "bunx @colbymchenry/codegraph explore x",
    "bun x codegraph explore x",
    "npm exec -- codegraph explore x",
    "npm exec --yes @colbymchenry/codegraph -- explore x",
    "yarn dlx @colbymchenry/codegraph explore x",
    "node ./bin/codegraph.js explore x",
    "node /usr/lib/node_modules/@colbymchenry/codegraph/dist/bin/codegraph.js explore x",
    "node /x/node_modules/@colbymchenry/codegraph/npm-shim.js explore x",
    "node --max-old-space-size=4096 /x/node_modules/@colbymchenry/codegraph/dist/cli.js explore x",
    "/usr/bin/node $(which codegraph) explore x",
    "node -e \"require('child_process').execSync('codegraph explore x')\"",
    "/x/node_modules/@colbymchenry/codegraph/dist/cli.js explore x",
    "sudo codegraph explore x",
    "sudo -u root -E codegraph explore x",
    "time codegraph explore x",
    "nohup codegraph serve > /tmp/log 2>&1 &",
    "timeout 5 codegraph explore x",
    "timeout -s KILL 30 codegraph explore x",
    "command codegraph explore x",
    "exec codegraph explore x",
    "'codegraph' explore x",
    "$'codegraph' explore x",
    "\\codegraph explore x",
    "codegraph explore 'unbalanced",
    # a script piped or fed into a shell: what echo / printf / cat print is the script it runs
    "echo 'codegraph explore x' | sh",
    "printf 'codegraph x\\n' | bash",
    "echo codegraph x | bash -s",
    "sh <<< 'codegraph x'",
    "cat <<EOF | sh\ncodegraph x\nEOF",
    "cat <<'EOF' | bash -x\nset -e\ncd /repo\ncodegraph explore x\nEOF",
    "echo -e 'cd /repo\\ncodegraph explore x' | bash -ex",
    "printf '%s\\n' 'codegraph explore x' | zsh",
    "echo 'codegraph explore x' |\n  dash -s -- arg",
    "echo 'codegraph explore x' | cat | ksh",
    "echo 'codegraph explore x' |& bash -",
    # a lookup of the CLI, made in this same command, used as the command word
    "CG=$(command -v codegraph); $CG explore x",
    'CG=$(type -P codegraph) && "$CG" explore x',
    '"$(which codegraph)" explore',
    "`which codegraph` x",
    # de-quoted before any shortcut; globs that can match the name; names made for it; the package's shim and runtime
    "code''graph explore x",
    '"code"graph explore x',
    "c\\odegraph explore x",
    "c?degraph explore x",
    "/opt/cg/bin/c*graph explore x",
    "[c]odegraph explore x",
    "~/.cache/*/c?degraph/1.6.1/node_modules/.bin/codegraph explore x",
    "ln -s /opt/cg/node_modules/.bin/codegraph x; ./x explore q",
    "cp /opt/cg/node_modules/.bin/codegraph /tmp/y && /tmp/y explore q",
    "alias q='codegraph explore'; q routing",
    "cd /opt/cg/node_modules/.bin && ./codegraph explore x",
    "cd /opt/cg/node_modules/@colbymchenry/codegraph && node npm-shim.js explore x",
    "cd /opt/cg/node_modules/@colbymchenry/codegraph-linux-x64 && ./node lib/dist/bin/codegraph.js explore x",
    "/opt/cg/node_modules/@colbymchenry/codegraph-linux-x64/node /tmp/anything.js",
    "/opt/cg/node_modules/@colbymchenry/codegraph-linux-x64/bin/codegraph explore x",
    "a=code; b=graph; $a$b explore x",
    'a=code; "${a}graph" explore x',
    "codegraph explore x; false",
    "python3 -c \"import subprocess; subprocess.run(['codegraph', 'explore', 'x'])\"",
    "perl -e 'system(\"codegraph explore x\")'",
]

MENTIONS = [
    "grep codegraph src/",
    "grep -rn 'codegraph explore' .",
    "rg -l codegraph -g '*.md'",
    "ls .codegraph",
    "ls -la .codegraph/ node_modules/@colbymchenry/codegraph/",
    "which codegraph",
    "command -v codegraph",
    "type codegraph",
    "cat codegraph.md",
    "cat .codegraph/config.json",
    "sed -n '1,20p' codegraph.md",
    "echo codegraph",
    "echo 'run codegraph explore later'",
    "git log --grep codegraph",
    "rm -rf .codegraph",
    "find / -iname '*codegraph*' 2>/dev/null",
    "ps aux | grep codegraph",
    "npm ls @colbymchenry/codegraph",
    "npm view @colbymchenry/codegraph version",
    "node scripts/codegraph-report.js",
    "echo hi > codegraph",
    "cat > notes.md <<'EOF'\ncodegraph explore x\nEOF",
    "# codegraph explore x",
    "echo \"unbalanced 'codegraph",
    "echo codegraph | grep code",
    "echo 'codegraph is great' > notes.txt",
    "echo 'codegraph explore x' | tee notes.txt",
    "echo 'codegraph explore x'; sh",
    "printf 'echo %s\\n' codegraph | sh",  # the shell only echoes the word
    "bash < script.sh",  # the script's text is not in the command: undecidable, so allowed
    "$CG explore x",  # set by an earlier command: cannot be resolved here
    "CG=codegraph $CG explore x",  # the shell expands $CG before this assignment takes effect
    "node scripts/*.js",  # globs that match anything name nothing in particular
    "node */index.js",
    "./*.sh",
    "c* --help",
    "ls c?degraph",  # a glob that spells the name, as an argument
    "ln -s /opt/cg/bin/codegraph x",  # a name made for it, never run
    "cd /opt/cg/node_modules/.bin && ls",
    "cd /opt/cg/node_modules/@colbymchenry/codegraph-linux-x64 && node --version",  # PATH's node, not the bundled one
]


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
def test_invocation_is_denied_seen_and_counted(command):
    done = run_hook(hook_event(command))
    assert decision(done) == "deny"
    assert "codegraph" in json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert invokes_cli(command, cli=CODEGRAPH.cli)

    # What Claude Code hands the agent for a denial: the hook's own reason, the only proof of a block.
    denial = (
        "PreToolUse:Bash hook denied this tool: "
        + json.loads(done.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    )
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
def test_mention_is_allowed_and_not_counted(command):
    assert decision(run_hook(hook_event(command))) is None
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
