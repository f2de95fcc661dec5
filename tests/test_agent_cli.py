"""What every real agent CLI behind the ``CodingAgent`` protocol (Codex, Gemini CLI, OpenCode; pinned, provisioned
into the cache) is held to alike, offline, in the harness's sandbox, against the scripted stand-in on loopback with
the real codegraph on express: the seal of the without-arm, the whole A/B item through the plugin, and the sandbox
run by an ordinary user. Each agent's own expectations are data here; what only one agent does is tested in its
tests/test_<agent>_cli.py.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.agent_cli import run_arm
from support.e2e import RealTools, inner_env, leftovers, package_venv, run_pytest, summary
from support.paths import REPO
from support.turn_attacks import CONFIG_PARENT, NEIGHBOURS, PERL_RAN, PLANT, neighbours, rewire

from pytest_agent_eval.agents.base import AgentSetup, CodingAgent
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.transcript import kept_rollout
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.gemini.transcript import kept_chat
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.agents.opencode.transcript import kept_config
from pytest_agent_eval.harness import sandbox
from pytest_agent_eval.harness.binds import LayoutChanged
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.workspace import make_workspace
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.tool import CODEGRAPH

# The ordinary user the sandbox is also checked as (`useradd -M -s /bin/sh agent-eval-user` makes one).
USER = os.environ.get("AGENT_EVAL_TEST_USER", "agent-eval-user")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _copy_node_package(build: Provisioned, base: Path) -> Path:
    """The npm install's node_modules (the launcher and its platform package); its launcher."""
    install = base / build.name
    shutil.copytree(Path(build.origin["path"]) / "node_modules", install / "node_modules", symlinks=True)
    return install / "node_modules" / ".bin" / build.name


def _copy_binary(build: Provisioned, base: Path) -> Path:
    """The one native binary the install links in."""
    binary = base / build.name / "bin" / build.name
    binary.parent.mkdir(parents=True)
    shutil.copy2(build.bin.resolve(), binary)
    return binary


@dataclass(frozen=True)
class Expect:
    """What one agent's runs look like where the agents differ."""

    agent: CodingAgent
    reference: str  # how --agent-eval-agent names it
    kept: Callable[[Path], Path]  # the file the harness keeps beside a run's first segment
    refusal_in: Callable[[Path], Path]  # where a run's shell results are written, from its first segment
    # the ways round the deny a probe tries, and what stops each: the seal, or the agent itself (its words)
    probes: dict[str, str]
    user_copy: Callable[[Provisioned, Path], Path] | None = None  # the install an ordinary user gets; its launcher
    deny_file: str = "config"  # the file of AgentConfig.files the deny is written in
    deny_shape: str = ""  # what the deny looks like in that file
    side_requests: int = 0  # requests to the model besides the session's messages (OpenCode's title)


SEAL = r"not found|No such file"
AGENTS = {
    "codex": Expect(
        CODEX, "pytest_agent_eval.agents.codex:CODEX", kept_rollout, kept_rollout,
        {"env codegraph --version": SEAL, "sh -c 'codegraph status'": SEAL, "$(echo codegraph) --help": SEAL},
        user_copy=_copy_node_package, deny_file="rules", deny_shape="prefix_rule(",
    ),
    "gemini": Expect(
        GEMINI, "pytest_agent_eval.agents.gemini:GEMINI", kept_chat, kept_chat,
        {
            "env codegraph --version": SEAL,
            "cg=codegraph; $cg --help": SEAL,
            # Gemini CLI's policy engine reads the inner command too
            "sh -c 'codegraph status'": re.escape(f"Tool execution denied by policy. {CODEGRAPH.deny_reason}"),
            # Gemini CLI refuses command substitution itself
            "$(echo codegraph) --help": r"^Command injection detected: command substitution",
        },
        user_copy=_copy_node_package, deny_file="policy", deny_shape="[[rule]]",
    ),
    "opencode": Expect(
        OPENCODE, "pytest_agent_eval.agents.opencode:OPENCODE", kept_config, lambda segment: segment,
        {"env codegraph --version": SEAL, "sh -c 'codegraph status'": SEAL, "$(echo codegraph) --help": SEAL},
        user_copy=_copy_binary, deny_shape='"codegraph*": "deny"', side_requests=1,
    ),
}  # fmt: skip


def _build(real_tools: RealTools, agent: CodingAgent) -> Provisioned:
    """The agent's pinned install in the cache (shared and locked: installed once, then reused)."""
    return agent.provision(real_tools.cache, agent.version)


@pytest.mark.parametrize(
    ("name", "command"), [(name, command) for name, expect in AGENTS.items() for command in expect.probes]
)
def test_a_cli_call_the_deny_does_not_catch_finds_no_codegraph_in_the_sealed_without_arm(
    tmp_path: Path,
    real_tools: RealTools,
    name: str,
    command: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deny refuses the bare CLI; any other way to it (a wrapper, a shell, an expansion, a variable) meets the
    seal — the without-arm's sandbox holds no codegraph, though the host's PATH has one — or the agent's own refusal."""
    expect = AGENTS[name]
    monkeypatch.setenv("PATH", os.pathsep.join([str(real_tools.codegraph.bin.parent), os.environ["PATH"]]))
    outside = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60, executable="/bin/bash")
    assert outside.returncode == 0, outside.stderr  # the same command, unsealed, runs the tool
    build = _build(real_tools, expect.agent)
    arm = run_arm(expect.agent, tmp_path, real_tools.express, build, real_tools.cache,
                  model=expect.agent.block_probe(command))  # fmt: skip
    [call] = [c for c in arm.session.calls if c.name == "Bash"]
    assert call.result is not None and call.result.is_error, call.result
    said = expect.probes[command]
    if said == SEAL:
        assert CODEGRAPH.deny_marker not in call.result.text  # not the deny: the seal
    assert re.search(said, call.result.text), call.result.text
    assert not contamination(arm.session, tool=CODEGRAPH).contaminated


@pytest.mark.parametrize("name", list(AGENTS))
def test_a_config_the_agent_rewrote_is_not_what_the_next_turn_reads(
    tmp_path: Path, real_tools: RealTools, name: str
) -> None:
    """The config (the file of the deny among it) is bound read-only, from the harness's folder: a shell of the agent
    cannot drop the deny for a later turn, neither by writing the file nor by renaming the folder it is shown in and
    leaving its own copy in its place (before the harness's files lived outside HOME, Codex's next turn bound the
    agent's copy: the deny was gone). Gemini CLI's policy and OpenCode's config are shown at their own paths, outside
    anything the agent can write: there, both are refused."""
    expect = AGENTS[name]
    workspace = make_workspace(real_tools.express, tmp_path / "ws", CODEGRAPH.state_dirs)
    setup = AgentSetup(config_dir=tmp_path / "config", home=workspace.home, model_url="http://127.0.0.1:9",
                       mcp_servers=(), denied_cli=CODEGRAPH.cli, deny_reason=CODEGRAPH.deny_reason)  # fmt: skip
    config = expect.agent.configure(setup)
    sealed = sandbox.sandbox_for(cache=real_tools.cache, writable=[workspace.home], readable=list(config.readable),
                                 binds=config.binds, tool=CODEGRAPH)  # fmt: skip
    path = config.files[expect.deny_file]
    # where the agent finds it: at its own path, or where the harness binds it in HOME
    shown = next((dest / path.relative_to(source) for source, dest in config.binds if path.is_relative_to(source)),
                 path)  # fmt: skip
    script = f"echo '{{}}' > {shown}; rm -f {shown}; rm -rf {shown.parent}; cat {shown}"
    done = subprocess.run(sealed.wrap(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=60)
    assert expect.deny_shape in done.stdout and CODEGRAPH.deny_reason in path.read_text(), done.stderr
    home = workspace.home
    top = home / shown.relative_to(home).parts[0] if shown.is_relative_to(home) else shown.parent
    script = f"mv {top} {top}-moved; mkdir -p {shown.parent}; echo '{{}}' > {shown}; ls -d {top}-moved"
    moved = subprocess.run(sealed.wrap(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=60)
    assert f"{top}-moved" in moved.stdout, moved  # renamed (outside HOME, on the sandbox's own tmpfs: gone after)
    if shown.is_relative_to(home):  # the next turn does not start: what the harness binds over is gone
        with pytest.raises(LayoutChanged, match=f"{top}/.*: nothing where the harness binds"):
            sealed.wrap(["cat", str(shown)])
    else:  # the next turn, in a sandbox built again, shows the harness's file
        again = subprocess.run(sealed.wrap(["cat", str(shown)]), capture_output=True, text=True, timeout=60)
        assert expect.deny_shape in again.stdout, again
    shutil.rmtree(tmp_path / "ws")


@pytest.mark.parametrize("name", list(AGENTS))
def test_the_ab_eval_runs_both_arms_through_the_agent(
    real_tools: RealTools, name: str, tag: str, tmp_path: Path
) -> None:
    """``pytest evals -k express --agent-eval-agent <agent> --agent-eval-backend scripted --agent-eval-offline``:
    the harness's whole item (provisioning, index, workspace, sandbox, block probe, the three turns, scoring,
    gates) with the agent."""
    expect = AGENTS[name]
    _build(real_tools, expect.agent)
    out = tmp_path / "out"
    args = ["evals", "-k", "express", "--agent-eval-runs", "1", "--agent-eval-agent", expect.reference,
            "--agent-eval-backend", "scripted", "--agent-eval-offline", f"--agent-eval-out={out}"]  # fmt: skip
    done = run_pytest(args, REPO, inner_env(real_tools, tag), tmp_path)
    assert done.returncode == 0 and re.search(r"\b2 passed\b", done.stdout), done.stdout[-3000:]
    assert "measure the pipeline and the tool's responses, not a model" in done.stdout  # a stand-in says so
    records = summary(out)
    assert sorted(records) == ["express-with-1", "express-without-1"]
    agent = expect.agent
    for record in records.values():
        assert (record["agent"], record["agent_version"], record["outcome"]) == (agent.name, agent.version, "passed")
        assert record["driver"]["exit_codes"] == [0, 0, 0] and record["contaminated"] is False
        assert record["scores"]["evidence"]["intact"] is True  # held to the model server's record
        assert expect.kept(Path(record["driver"]["segments"][0])).is_file()
    # the deny was proven through the agent once per process: its probe's shell call came back refused
    [probe] = [expect.refusal_in(p) for p in out.glob("*/items/*/block-probe/run-block-probe.jsonl")]
    assert CODEGRAPH.deny_marker in probe.read_text(encoding="utf-8")
    with_arm, without = records["express-with-1"]["scores"], records["express-without-1"]["scores"]
    assert len(with_arm["contamination"]["mcp_calls"]) == 3 and with_arm["occupancy"]["residual"]["tool"] > 0
    assert without["contamination"]["cli_calls"] == without["contamination"]["cli_blocked"] == 3
    assert leftovers(tag, tmp_path) == []


def _as_ordinary_user(real_tools: RealTools, name: str, *extra: str) -> tuple[dict, pwd.struct_passwd]:
    """tests/support/agent_cli.py run as a script by the ordinary user :data:`USER` (bubblewrap through an unprivileged
    user namespace), with ``extra`` arguments: what it printed, and the user. The user gets a copy of the agent's
    install and of express, and a Python of the system's with this package (root's cache and Python are not theirs to
    read)."""
    expect = AGENTS[name]
    assert expect.user_copy is not None
    system_python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or shutil.which("runuser") is None or not system_python.is_file():
        pytest.skip("needs root, runuser and the system's python3 to become an ordinary user")
    try:
        user = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER} (`useradd -M -s /bin/sh {USER}`, or name one in AGENT_EVAL_TEST_USER)")
    build = _build(real_tools, expect.agent)
    base = Path(tempfile.mkdtemp(prefix=f"agent-eval-{name}-user-"))  # pytest's tmp_path is root's alone
    try:
        base.chmod(0o755)
        launcher = expect.user_copy(build, base)
        shutil.copytree(real_tools.express, base / "express", symlinks=True,
                        ignore=shutil.ignore_patterns(*CODEGRAPH.state_dirs))  # fmt: skip
        for folder in ("cache", "out", "home"):
            (base / folder).mkdir()
            os.chown(base / folder, user.pw_uid, user.pw_gid)
        python = package_venv(system_python, base / "venv")
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base / "home"), "LANG": "C.UTF-8"}  # a user's own
        script = Path(__file__).parent / "support" / "agent_cli.py"
        command = [str(shutil.which("runuser")), "-u", USER, "--", str(python), str(script), expect.reference,
                   str(launcher), str(base / "express"), str(base / "cache"), str(base / "out"),
                   *(arg.replace("@BASE@", str(base)) for arg in extra)]  # fmt: skip
        done = subprocess.run(command, env=env, cwd=base, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1]), user
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("name", [name for name, expect in AGENTS.items() if expect.user_copy is not None])
def test_the_agent_runs_sealed_for_an_ordinary_user_too(real_tools: RealTools, name: str) -> None:
    """The harness run by an ordinary user: the without-arm, sealed, as root runs it."""
    expect = AGENTS[name]
    result, user = _as_ordinary_user(real_tools, name)
    assert result["uid"] == user.pw_uid and result["exit_codes"] == [0]
    assert result["requests"] == result["messages"] + expect.side_requests and result["messages"] > 1
    assert result["answers"][0].startswith("Answer to: How does")
    assert (result["cli_blocked"], result["contaminated"], result["mcp_calls"]) == (1, False, 0)
    assert result["shell_ran"] >= 2  # its search and a read ran through the sandbox's shell (the jail's)


@pytest.mark.parametrize(
    ("name", "attack"),
    [(name, "plant") for name, expect in AGENTS.items() if expect.user_copy is not None]
    + [(name, "rewire") for name in CONFIG_PARENT]
    + [(name, "neighbours") for name in AGENTS if name in NEIGHBOURS],
)
def test_every_turn_is_sealed_as_the_first_for_an_ordinary_user_too(
    real_tools: RealTools, name: str, attack: str
) -> None:
    """tests/test_turn_seal.py's two classes and tests/test_turn_neighbours.py's, run by an ordinary user: a turn that
    rewired the folder of the harness's files in HOME fails the next, naming the link; a write into the agent's global
    configuration is refused, and the next turn receives none of it; what a turn plants for the CLI to read at
    start-up (hooks, MCP servers, environment files) starts nothing, and nothing runs before the jail's domain."""
    if attack == "rewire":  # the user's cache, relative to the folder turn 1 makes in its TMPDIR
        prepare, exploit = rewire(name, "../../../../cache")
    elif attack == "neighbours":
        prepare, exploit = neighbours(name), "echo second"
    else:
        prepare, exploit = PLANT[name], "echo second"
    result, user = _as_ordinary_user(real_tools, name, "--two-turns", prepare, exploit)
    assert result["uid"] == user.pw_uid and result["seen"] == [], result
    if attack == "neighbours":
        assert result["error"] is None and len(result["results"]) == 2, result
        assert "planted" in result["results"][0] and "second" in result["results"][1], result
        left = result["left"]
        assert set(left) <= {PERL_RAN} and "OPENED" not in left.get(PERL_RAN, ""), result
    elif attack == "rewire":
        assert "the sandbox cannot be built as the harness made it" in result["error"], result
        assert f"/out/without/home/{CONFIG_PARENT[name]}: a link on the way" in result["error"], result
    else:
        assert result["error"] is None and len(result["results"]) == 2, result
        assert "Read-only file system" in result["results"][0] and "second" in result["results"][1], result
        assert result["server_ran"] is False
