"""The seal of the without-arm, part by part: the bubblewrap sandbox, the agent's allow-listed environment, the
workspace without the index, npm without a registry, and process groups that die with the harness."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from support.bwrap import BWRAP, needs_bwrap
from support.unprivileged import folder_mode, run_bound_by_permissions

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE, STANDIN_API_KEY
from pytest_agent_eval.harness.binds import LayoutChanged, seal_home
from pytest_agent_eval.harness.jail import launcher
from pytest_agent_eval.harness.process import group_alive, start_group, stop_group, watched
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.sandbox import (
    CLOSED_REGISTRY,
    SYSTEM_ROOTS,
    Sandbox,
    SandboxUnavailable,
    check_sandbox,
    install_paths,
    npm_env,
    sandbox_for,
    sealed_binds,
    tool_installs,
    tool_matches,
)
from pytest_agent_eval.harness.untrusted import UntrustedFile
from pytest_agent_eval.harness.workspace import make_workspace
from pytest_agent_eval.tool import CODEGRAPH


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A fake host: a cache with a tool install and a claude install, a PATH folder holding the tool."""
    root = tmp_path / "host"
    tool_bin = root / "cache" / "codegraph" / "1.0" / "node_modules" / ".bin"
    tool_bin.mkdir(parents=True)
    (tool_bin / "codegraph").write_text("#!/bin/sh\necho CODEGRAPH OUTPUT\n")
    (tool_bin / "codegraph").chmod(0o755)
    claude_bin = root / "cache" / "claude" / "1.0" / "node_modules" / ".bin"
    claude_bin.mkdir(parents=True)
    (claude_bin / "claude").write_text("#!/bin/sh\necho CLAUDE RUNS\n")
    (claude_bin / "claude").chmod(0o755)
    global_bin = root / "usr-local-bin"
    global_bin.mkdir()
    (global_bin / "codegraph").symlink_to(tool_bin / "codegraph")
    (global_bin / "other").write_text("#!/bin/sh\necho OTHER\n")
    (global_bin / "other").chmod(0o755)
    work = root / "work"
    work.mkdir()
    return root


def _run(sandbox: Sandbox, script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(sandbox.wrap(["sh", "-c", script]), cwd=cwd, capture_output=True, text=True, timeout=60)


# -- the sandbox ---------------------------------------------------------------------------------------------
@needs_bwrap
def test_the_tool_is_gone_every_way_but_claude_and_the_workspace_remain(host: Path, tmp_path: Path) -> None:
    cache, work, path_bin = host / "cache", host / "work", host / "usr-local-bin"
    claude = cache / "claude" / "1.0" / "node_modules" / ".bin" / "claude"
    # the PATH folder is exposed (as /usr/local/bin would be): its other programs run, its codegraph does not
    readable = [*install_paths(claude), path_bin]
    sandbox = sandbox_for(cache=cache, writable=[work], readable=readable, path_env=str(path_bin), tool=CODEGRAPH)
    tool = cache / "codegraph" / "1.0" / "node_modules" / ".bin" / "codegraph"
    script = textwrap.dedent(f"""
        {tool} ; {path_bin}/codegraph ; ls {cache}/codegraph ; ls {cache}
        {claude} && {path_bin}/other && echo written > {work}/out ; touch {host}/escape
    """)
    done = _run(sandbox, script, work)
    assert "CODEGRAPH OUTPUT" not in done.stdout
    assert "CLAUDE RUNS" in done.stdout and "OTHER" in done.stdout  # claude and the rest of PATH still run
    assert (work / "out").read_text() == "written\n"  # the workspace is writable
    assert not (host / "escape").exists()  # nothing else is
    assert tool.is_file()  # hidden in the sandbox only
    # outside the sandbox the same script does reach the tool: the test can fail
    assert "CODEGRAPH OUTPUT" in subprocess.run(["sh", "-c", script], capture_output=True, text=True).stdout


@needs_bwrap
def test_an_exposed_folder_does_not_bring_a_hidden_one_back(host: Path) -> None:
    cache, work = host / "cache", host / "work"
    # exposing the whole host (a checkout holding the cache, say) must keep the cache hidden
    sandbox = sandbox_for(cache=cache, writable=[work], readable=[host], path_env="", tool=CODEGRAPH)
    done = _run(sandbox, f"cat {cache}/codegraph/1.0/node_modules/.bin/codegraph; ls {host}", work)
    assert "CODEGRAPH OUTPUT" not in done.stdout and "work" in done.stdout


@needs_bwrap
def test_the_user_home_and_tmp_are_hidden(host: Path, tmp_path: Path) -> None:
    secret = Path.home() / f".agent-eval-sandbox-test-{os.getpid()}"
    secret.write_text("user's own file\n")
    try:
        (tmp_path / "other-item").mkdir()
        sandbox = sandbox_for(cache=host / "cache", writable=[host / "work"], path_env="", tool=CODEGRAPH)
        done = _run(sandbox, f"cat {secret}; ls {tmp_path}", host / "work")
    finally:
        secret.unlink()
    assert "user's own file" not in done.stdout
    assert "other-item" not in done.stdout  # another item's folder under /tmp is not there


def test_tool_installs_finds_the_cli_on_path_and_what_it_links_to(host: Path) -> None:
    path_bin = host / "usr-local-bin"
    found = tool_installs(CODEGRAPH, str(path_bin))
    assert path_bin / "codegraph" in found
    assert (host / "cache" / "codegraph" / "1.0" / "node_modules" / ".bin" / "codegraph").resolve() in found


def test_tool_installs_passes_over_what_the_user_cannot_search(tmp_path: Path) -> None:
    """A PATH folder the user cannot read (root's ``~/.cargo/bin`` under a 0700 /root, for an ordinary user) holds
    nothing that runs for it: no error. A link on PATH into such a folder is found, and hidden, as it is."""
    home = tmp_path / "root-home"
    package = home / "lib" / "node_modules" / "codegraph"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text("{}")
    (package / "dist" / "bin.js").write_text("")
    (home / "bin").mkdir()
    (home / "bin" / "codegraph").symlink_to(package / "dist" / "bin.js")
    shown = tmp_path / "usr-local-bin"
    shown.mkdir()
    (shown / "codegraph").symlink_to(package / "dist" / "bin.js")
    path = os.pathsep.join([str(home / "bin"), str(shown)])
    code = (
        "import json\nfrom pytest_agent_eval.harness.sandbox import tool_installs\n"
        "from pytest_agent_eval.tool import CODEGRAPH\n"
        f"print(json.dumps([str(p) for p in tool_installs(CODEGRAPH, {path!r})]))"
    )
    with folder_mode(home, 0o000):
        done = run_bound_by_permissions(code)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert str(shown / "codegraph") in found and str(package / "dist" / "bin.js") in found, found
    assert not any(p.startswith(str(home / "bin")) for p in found), found
    # with the folder readable, the link's package is found too: what the locked run left out, it could not see
    assert str(package) in json.loads(run_bound_by_permissions(code).stdout)


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to become nobody")
def test_the_sandbox_works_for_an_ordinary_user() -> None:
    # pytest's tmp_path is root's alone; nobody must be able to reach the folders
    root = Path(tempfile.mkdtemp(prefix="agent-eval-nobody-"))
    try:
        root.chmod(0o755)
        shown, hidden = root / "shown", root / "shown" / "hidden"
        hidden.mkdir(parents=True)
        (shown / "f").write_text("SHOWN\n")
        (hidden / "f").write_text("SECRET\n")
        sandbox = Sandbox(hidden=(hidden,), readable=(shown,), writable=(), bwrap=BWRAP)
        script = f"cat {shown}/f; cat {hidden}/f; {_UNMASK.format(hidden)}"
        user = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        done = subprocess.run([*user, *sandbox.wrap(["sh", "-c", script])], capture_output=True, text=True, timeout=60)
        plain = subprocess.run([*user, "sh", "-c", script], capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(root)
    assert "SHOWN" in done.stdout and "SECRET" not in done.stdout, done.stderr
    assert "SECRET" in plain.stdout  # the same user outside the sandbox sees the file


# Ways to take a mask off: unmount it, or unmount it from a user namespace of one's own (where one has every
# capability over a mount namespace of one's own).
_UNMASK = "umount {0}; cat {0}/f; unshare -Urm sh -c 'umount {0}; cat {0}/f'"


@needs_bwrap
def test_no_capability_inside_so_no_mask_comes_off(tmp_path: Path) -> None:
    """As root (CI, containers) too: without ``--cap-drop ALL`` the agent could ``umount`` a mask."""
    shown, hidden = tmp_path / "shown", tmp_path / "shown" / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "f").write_text("SECRET\n")
    sandbox = Sandbox(hidden=(hidden,), readable=(shown,), writable=(), bwrap=BWRAP)
    done = _run(sandbox, f"grep CapEff /proc/self/status; {_UNMASK.format(hidden)}", tmp_path)
    assert "CapEff:\t0000000000000000" in done.stdout and "SECRET" not in done.stdout, done.stdout + done.stderr
    if os.geteuid() == 0:  # the same sandbox with its capabilities (and none of the other layers, each of which
        # stops the umount too): the mask comes off, so the test can fail
        bare = replace(sandbox, layers=()).wrap(["sh", "-c", _UNMASK.format(hidden)])
        with_caps = [a for a in bare if a not in ("--cap-drop", "ALL")]
        assert "SECRET" in subprocess.run(with_caps, capture_output=True, text=True, timeout=60).stdout


def test_a_missing_bwrap_names_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap"):
        check_sandbox(str(tmp_path / "no-bwrap"))


# -- environment, workspace, npm -----------------------------------------------------------------------------
def test_the_agent_environment_is_built_from_an_allow_list() -> None:
    base = {
        "PATH": "/usr/bin",
        "HOME": "/ws/home",
        "LC_ALL": "C.UTF-8",
        "CLAUDE_CONFIG_DIR": "/home/me/.claude",
        "CLAUDE_CODE_OAUTH_TOKEN": "oauth",
        "ANTHROPIC_AUTH_TOKEN": "bearer",
        "ANTHROPIC_API_KEY": "sk-ant-real",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "CLAUDE_CODE_USE_VERTEX": "1",
        "NODE_OPTIONS": "--require /home/me/evil.js",
        "npm_config_registry": "https://registry.npmjs.org/",
        "HTTPS_PROXY": "http://proxy.corp:8080",
        "no_proxy": "*",
        "NODE_EXTRA_CA_CERTS": "/etc/corp-ca.pem",
        "SOMETHING_ELSE": "x",
    }
    standin = CLAUDE_CODE.process_environment(base, "http://127.0.0.1:1234")
    assert standin["ANTHROPIC_API_KEY"] == STANDIN_API_KEY and standin["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:1234"
    # the real API too is reached through a loopback server of the harness (the forwarder holds the key)
    assert "sk-ant-real" not in standin.values()
    for env in (standin,):
        assert {"PATH", "HOME", "LC_ALL", "NODE_EXTRA_CA_CERTS"} <= env.keys()
        for name in ("CLAUDE_CONFIG_DIR", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
                     "CLAUDE_CODE_USE_VERTEX", "NODE_OPTIONS", "npm_config_registry", "SOMETHING_ELSE", "HTTPS_PROXY",
                     "no_proxy"):  # fmt: skip
            assert name not in env


def test_the_without_arm_workspace_holds_no_index(tmp_path: Path) -> None:
    source = tmp_path / "indexed"
    (source / ".codegraph").mkdir(parents=True)
    (source / ".codegraph" / "codegraph.db").write_text("index")
    (source / "lib").mkdir()
    (source / "lib" / "a.js").write_text("a")
    without = make_workspace(source, tmp_path / "without", CODEGRAPH.state_dirs)
    assert not (without.repo / ".codegraph").exists() and (without.repo / "lib" / "a.js").is_file()
    assert (make_workspace(source, tmp_path / "with").repo / ".codegraph" / "codegraph.db").is_file()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed")
def test_npx_cannot_fetch_a_package(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), **npm_env(home)}
    assert env["npm_config_registry"] == CLOSED_REGISTRY
    done = subprocess.run(
        ["npx", "-y", "left-pad@1.3.0"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert not list((home / ".npm").rglob("left-pad*"))


# -- process groups ------------------------------------------------------------------------------------------
def test_stop_group_ends_the_leader_and_its_children(tmp_path: Path) -> None:
    process = start_group(["sh", "-c", "sleep 300 & sleep 300"], cwd=tmp_path, env=os.environ)
    time.sleep(0.3)
    assert group_alive(process.pid)
    stop_group(process)
    assert not group_alive(process.pid) and process.returncode is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_group_started_by_a_killed_harness_dies_with_it(tmp_path: Path) -> None:
    """The harness (a Python process that started a child with start_group) is SIGKILLed: no finally runs,
    and the child must still die."""
    pid_file = tmp_path / "child.pid"
    harness = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, sys, time
            from pytest_agent_eval.harness.process import start_group
            child = start_group([sys.executable, "-c", "import time; time.sleep(300)"], cwd="/", env=os.environ)
            open({str(pid_file)!r}, "w").write(str(child.pid))
            time.sleep(300)
        """)],
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the harness never started its child"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert group_alive(child)
    harness.kill()
    harness.wait()
    deadline = time.monotonic() + 10
    while group_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(child)


def test_the_watchdog_kills_its_command_when_the_watched_parent_dies(tmp_path: Path) -> None:
    """The tmux driver's case: the agent's parent is a tmux server, so the harness is watched instead."""
    harness = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    marker = tmp_path / "started"
    command = watched([sys.executable, "-c", f"open({str(marker)!r}, 'w'); import time; time.sleep(300)"], harness.pid)
    dog = subprocess.Popen(command, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline and dog.poll() is None
            time.sleep(0.05)
        assert group_alive(dog.pid)
        harness.kill()
        harness.wait()
        assert dog.wait(timeout=10) == 137
        deadline = time.monotonic() + 5
        while group_alive(dog.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(dog.pid)  # the watched command went with it
    finally:
        stop_group(dog)


@needs_bwrap
def test_node_under_a_hidden_folder_still_runs_but_its_global_tool_does_not(host: Path) -> None:
    """nvm's layout: node and the global packages under one prefix in HOME (here: in the hidden cache)."""
    prefix = host / "cache" / "nvm" / "v20"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "node").write_text("#!/bin/sh\necho NODE RUNS\n")
    (prefix / "bin" / "node").chmod(0o755)
    package = prefix / "lib" / "node_modules" / "@colbymchenry" / "codegraph"
    package.mkdir(parents=True)
    (package / "package.json").write_text("{}")
    (package / "cli.sh").write_text("#!/bin/sh\necho CODEGRAPH OUTPUT\n")
    (package / "cli.sh").chmod(0o755)
    (prefix / "bin" / "codegraph").symlink_to(package / "cli.sh")
    sandbox = sandbox_for(cache=host / "cache", writable=[host / "work"], path_env=str(prefix / "bin"), tool=CODEGRAPH)
    done = _run(sandbox, f"{prefix}/bin/node; {package}/cli.sh; {prefix}/bin/codegraph", host / "work")
    assert "NODE RUNS" in done.stdout and "CODEGRAPH OUTPUT" not in done.stdout


@needs_bwrap
def test_other_items_of_the_campaign_are_hidden_but_this_one_is_readable(host: Path) -> None:
    out = host / "work" / "agent-eval-out"
    mine, other = out / "c1" / "items" / "express-without-1", out / "c1" / "items" / "express-with-1"
    for folder in (mine, other):
        folder.mkdir(parents=True)
        (folder / "run.jsonl").write_text(f"transcript of {folder.name}\n")
    sandbox = sandbox_for(cache=host / "cache", writable=[], readable=[mine], hidden=[out], path_env="", tool=CODEGRAPH)
    done = _run(sandbox, f"cat {mine}/run.jsonl {other}/run.jsonl", host)
    assert "transcript of express-without-1" in done.stdout and "express-with-1" not in done.stdout


@needs_bwrap
def test_without_a_network_only_the_relayed_port_is_reachable(host: Path) -> None:
    relayed, other = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    answers = []

    def answer(server: socket.socket, text: bytes) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.sendall(text)
                answers.append(text)

    for server, text in ((relayed, b"MODEL"), (other, b"ELSEWHERE")):
        threading.Thread(target=answer, args=(server, text), daemon=True).start()
    port, other_port = relayed.getsockname()[1], other.getsockname()[1]
    probe = textwrap.dedent("""
        import socket, sys
        for port in sys.argv[1:]:
            try:
                with socket.create_connection(("127.0.0.1", int(port)), timeout=5) as s:
                    print(port, s.recv(100).decode() or "EMPTY")
            except OSError as exc:
                print(port, "REFUSED", type(exc).__name__)
    """)
    try:
        with carried(f"http://127.0.0.1:{port}") as relay:
            sandbox = sandbox_for(
                cache=host / "cache", writable=[host / "work"], relay=relay, path_env="", tool=CODEGRAPH
            )
            command = sandbox.wrap([sys.executable, "-c", probe, str(port), str(other_port)])
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        relayed.close()
        other.close()
    assert f"{port} MODEL" in done.stdout, done.stderr
    assert f"{other_port} REFUSED" in done.stdout  # the host's other loopback ports do not exist in there


# -- the allow-list ------------------------------------------------------------------------------------------
@needs_bwrap
def test_the_root_holds_the_system_the_runtime_and_the_item_and_nothing_else(host: Path) -> None:
    work, mine = host / "work", host / "run"
    mine.mkdir()
    sandbox = sandbox_for(cache=host / "cache", writable=[work], readable=[mine], path_env="", tool=CODEGRAPH)
    shown = [*sandbox.readable, *sandbox.writable, Path(launcher())]  # and the jail's launcher (harness.jail)
    # every folder on the way to a shown path holds that way only: /root shows .pyenv (the hook's interpreter)
    # but not .cache, .npm or .claude; /tmp shows the item's folders but not other items'
    ways: dict[Path, set[str]] = {}
    for path in shown:
        for parent, child in zip(path.parents, [path, *path.parents], strict=False):
            if not any(parent == root or parent.is_relative_to(root) for root in sandbox.system):
                ways.setdefault(parent, set()).add(child.name)
    script = "import json, os, sys; print(json.dumps({p: sorted(os.listdir(p)) for p in sys.argv[1:]}))"
    done = subprocess.run(sandbox.wrap([sys.executable, "-c", script, *map(str, ways)]), capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    listed = json.loads(done.stdout)
    system = {root.name for root in sandbox.system if root.exists() or root.is_symlink()}
    assert set(listed["/"]) == system | {"dev", "proc", "tmp"} | ways[Path("/")], listed["/"]
    for parent, children in ways.items():
        if parent != Path("/"):
            assert set(listed[str(parent)]) == children, parent
    for absent in ("/home", "/opt", "/srv", "/var", "/mnt", "/media", "/boot", "/work", "/root"):
        assert Path(absent) in ways or absent.lstrip("/") not in listed["/"]


def _fake_global_install(prefix: Path) -> Path:
    """npm's layout of ``npm install -g @colbymchenry/codegraph`` under ``prefix``, with a platform bundle, an
    alias install, a copy in an npm cache and a tarball; returns the bin link."""
    package = prefix / "lib" / "node_modules" / "@colbymchenry" / "codegraph"
    bundle = package.parent / "codegraph-linux-x64" / "lib" / "dist" / "bin"
    for folder in (package, bundle, prefix / "bin", prefix / "share" / "npm-cache" / "_cacache" / "content-v2"):
        folder.mkdir(parents=True, exist_ok=True)
    (package / "package.json").write_text('{"name": "@colbymchenry/codegraph"}')
    for script in (package / "npm-shim.js", bundle / "codegraph.js"):
        script.write_text("#!/bin/sh\necho CODEGRAPH OUTPUT\n")
        script.chmod(0o755)
    (prefix / "share" / "npm-cache" / "_cacache" / "content-v2" / "blob").write_text("CODEGRAPH OUTPUT\n")
    (prefix / "share" / "codegraph-1.6.1.tgz").write_text("CODEGRAPH OUTPUT\n")
    alias = prefix / "lib" / "node_modules" / "cg"  # npm i -g cg@npm:@colbymchenry/codegraph
    alias.mkdir()
    (alias / "package.json").write_text('{"name": "@colbymchenry/codegraph"}')
    (alias / "run.sh").write_text("#!/bin/sh\necho CODEGRAPH OUTPUT\n")
    (alias / "run.sh").chmod(0o755)
    (prefix / "bin" / "codegraph").symlink_to(package / "npm-shim.js")
    (prefix / "bin" / "other").write_text("#!/bin/sh\necho OTHER\n")
    (prefix / "bin" / "other").chmod(0o755)
    return prefix / "bin" / "codegraph"


@needs_bwrap
def test_a_global_install_in_an_allowed_folder_is_found_and_masked(host: Path, tmp_path: Path) -> None:
    """The tool installed globally (as under /usr/local) in a folder the sandbox allows, and not on PATH: only the
    search of the allowed folders can find it."""
    prefix = tmp_path / "usr-local"
    link = _fake_global_install(prefix)
    modules = prefix / "lib" / "node_modules"
    sandbox = sandbox_for(
        cache=host / "cache", writable=[host / "work"], path_env="", system=(*SYSTEM_ROOTS, prefix), tool=CODEGRAPH
    )
    scope, share = modules / "@colbymchenry", prefix / "share"
    script = textwrap.dedent(f"""
        {link}; {scope}/codegraph/npm-shim.js; {scope}/codegraph-linux-x64/lib/dist/bin/codegraph.js
        cat {share}/npm-cache/_cacache/content-v2/blob {share}/codegraph-1.6.1.tgz; ls {scope}; {modules}/cg/run.sh
        {prefix}/bin/other
    """)
    done = _run(sandbox, script, host / "work")
    assert "OTHER" in done.stdout  # the rest of the prefix is there
    assert "CODEGRAPH" not in done.stdout and "codegraph" not in done.stdout, done.stdout
    assert "CODEGRAPH OUTPUT" in subprocess.run(["sh", "-c", script], capture_output=True, text=True).stdout


@needs_bwrap
def test_the_with_arm_install_stays_although_the_search_would_mask_it(host: Path, tmp_path: Path) -> None:
    prefix = tmp_path / "usr-local"
    link = _fake_global_install(prefix)
    install = install_paths(link)
    sandbox = sandbox_for(cache=host / "cache", writable=[host / "work"], path_env="", tool_install=install,
                          system=(*SYSTEM_ROOTS, prefix), tool=CODEGRAPH)  # fmt: skip
    assert "CODEGRAPH OUTPUT" in _run(sandbox, str(link), host / "work").stdout


def test_the_search_names_every_entry_after_the_cli_or_the_package(tmp_path: Path) -> None:
    tool = replace(CODEGRAPH, cli="cg", package="@acme/code-graph")
    names = ["cg", "cg.js", "code-graph", "code-graph-linux-x64", "code-graph-2.0.0.tgz", "npm-@acme-code-graph-2.zip",
             "cgx", "mycg", "code-graphs", "npmrc", "unrelated"]  # fmt: skip
    for name in names:
        (tmp_path / "share" / name).mkdir(parents=True)
    (tmp_path / "node_modules" / "@acme").mkdir(parents=True)
    assert {p.relative_to(tmp_path).as_posix() for p in tool_matches(tool, tmp_path)} == {
        "share/cg", "share/cg.js", "share/code-graph", "share/code-graph-linux-x64", "share/code-graph-2.0.0.tgz",
        "share/npm-@acme-code-graph-2.zip", "share/npmrc", "node_modules/@acme",
    }  # fmt: skip


def test_a_bind_of_the_harnesss_file_into_home_is_checked_every_start_without_following_links(tmp_path: Path) -> None:
    """harness.binds: the harness's files written outside HOME, placeholders made in it, and before every start the
    layout they are bound in is checked; what a turn changed (a renamed folder and a link in its place, a file where
    a folder was, a file gone) fails the start, naming it; a link planted where a placeholder goes is refused."""
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    cache.mkdir()
    binds = seal_home(tmp_path / "harness", home, {".cli/config.toml": "deny = true\n", ".cli/rules": {"a": "x"}})
    assert (home / ".cli" / "config.toml").read_text() == "" and list((home / ".cli" / "rules").iterdir()) == []
    box = sandbox_for(cache=cache, writable=[home], binds=binds, tool=CODEGRAPH)
    args = box.wrap(["true"])
    source, dest = box.binds[0]
    assert ["--ro-bind", str(source), str(dest)] == args[args.index(str(source)) - 1 : args.index(str(source)) + 2]
    (home / ".cli").rename(home / ".cli-moved")
    (home / ".cli").symlink_to(os.path.relpath(cache, home))
    with pytest.raises(LayoutChanged, match=re.escape(f"{home / '.cli'}: a link on the way")):
        box.wrap(["true"])
    (home / ".cli").unlink()
    (home / ".cli-moved").rename(home / ".cli")
    box.wrap(["true"])  # as the harness made it again
    (home / ".cli" / "rules").rmdir()
    (home / ".cli" / "rules").write_text("")
    with pytest.raises(LayoutChanged, match=r"rules: a file where the harness binds a folder"):
        box.wrap(["true"])
    (home / ".cli" / "rules").unlink()
    with pytest.raises(LayoutChanged, match=r"rules: nothing where the harness binds a folder"):
        box.wrap(["true"])
    (home / ".cli" / "rules").symlink_to(cache)
    with pytest.raises(LayoutChanged, match=r"rules: a link where the harness binds a folder"):
        box.wrap(["true"])
    with pytest.raises(UntrustedFile, match="a link or a file on the way"):
        seal_home(tmp_path / "harness", home, {".cli/rules/deny.rules": "x"})
    assert list(cache.iterdir()) == []  # nothing made through the link
    # a HOME named through a link (a sandbox's writable folders are resolved, the agent's config names it as given)
    (tmp_path / "named").symlink_to(tmp_path)
    named = [(s, tmp_path / "named" / d.relative_to(tmp_path)) for s, d in binds]
    assert sealed_binds(named, [home.resolve()]) == box.binds
