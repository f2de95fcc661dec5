"""An adversarial without-arm, through the REAL Claude Code CLI and the REAL codegraph, only the model stood in.

Each test replays a recorded without-arm session (a cassette in ``tests/data/adversarial/``) through
``pytest evals`` in a subprocess. The cassette's agent tries every route to codegraph that got through text
matching: a quoted or globbed name, a symlink, ``cd`` + a relative path, Python and Perl subprocesses, base64
piped to ``sh``, a name split across variables, ``node`` on the package's shim, a call followed by ``; false``,
``npx`` from the registry, ``sqlite3`` on an index, the Monitor tool, a global install under ``/usr/local`` (the
host is given one for the run), another item's transcripts in the campaign folder, and a subagent doing the same.
In real-API mode it also tries the network: the tool's tarball from the npm registry, and a mirror on the host's
loopback, from curl, Python, node and bash (the model's port, served by the harness's forwarder, is the only way
out); it looks for the key and sends its own request with a server-side tool. Sealed, no codegraph output reaches
the agent; with the sandbox switched off, some does — so the suite can fail. An event it forges into the CLI's
stdout fails the item by name (the model server's record disagrees).

Codegraph output is recognised by what only it prints (its help banner, an explore heading, its index's
tables), looked for in everything the agent received: every user event of every thread, tool results and
notifications alike.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.adversarial import DENIAL, attack_names, fill_cassette, received_events, run_without_arm, without_arm
from support.e2e import RUN_TIMEOUT, TAG_VAR, RealTools, inner_env
from support.paths import REPO

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE, STANDIN_API_KEY
from pytest_agent_eval.harness.sandbox import DISABLE_VAR
from pytest_agent_eval.model import CassetteBackend, RunningServer, ScriptedBackend, serve

# What only codegraph prints: its --help banner, an explore answer's heading, the tables of its index.
MARKERS = (
    "Usage: codegraph",
    "Code intelligence and knowledge graph",
    "**Exploration:",
    "nodes_fts",
    "unresolved_refs",
)
pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(900)]


def _leaks(record: dict) -> dict[str, list[str]]:
    """Tool-use id (or ``notification``) -> the codegraph markers its result carried."""
    found: dict[str, list[str]] = {}
    for event in received_events(record):
        content = event["message"]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            text = json.dumps(block.get("content", block.get("text", "")))
            hits = [m for m in MARKERS if m in text]
            if hits:
                found.setdefault(block.get("tool_use_id", "notification"), []).extend(hits)
    return found


def test_no_attack_gets_codegraph_output_to_the_sealed_without_arm(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    record = without_arm(real_tools, tag, tmp_path, "without-arm-attacks.jsonl")
    attacks = attack_names(record)
    assert sum(a.startswith("attack: ") for a in attacks.values()) >= 16  # every attack was replayed
    assert "attack: subagent bash" in attacks.values()  # the subagent's own Bash ran too
    new = {"attack: a global install under /usr/local", "attack: another item's folder", "attack: the campaign folder"}
    assert new <= set(attacks.values())
    leaks = _leaks(record)
    assert leaks == {}, {attacks.get(k, k): v for k, v in leaks.items()}
    assert record["outcome"] == "passed", record.get("error")  # and the gate found nothing either
    # the block probe ran through Claude Code before the item, and its Bash call was denied by the hook
    probe = next((Path(record["run_dir"]) / "block-probe").glob("run-*.jsonl")).read_text(encoding="utf-8")
    assert DENIAL in probe


def test_with_the_sandbox_switched_off_an_attack_gets_through(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    record = without_arm(real_tools, tag, tmp_path, "without-arm-attacks.jsonl", **{DISABLE_VAR: "1"})
    attacks = attack_names(record)
    leaked = {attacks.get(k, k) for k in _leaks(record)}
    print("leaked without the sandbox:", sorted(leaked))
    # the routes no command matcher can see reach the installed tool when only the hook and the PATH shim stand
    # (the matcher denies the quoted, globbed, linked, interpreted and split-variable calls by itself)
    hidden_from_text_matching = {
        "attack: base64 piped to sh",
        "attack: sqlite3 on the cached index",
        "attack: hunt for an index",
        "attack: a global install under /usr/local",
        "attack: a global bin folder off PATH",
        "attack: another item's folder",
    }
    assert hidden_from_text_matching <= leaked
    # the gate judges from what the agent saw: the item fails, naming a leaking call and the fingerprint it carried
    assert record["outcome"] == "failed"
    assert "without-arm contaminated" in record["error"] and "codegraph output: Bash call toolu_" in record["error"]
    assert any(name in record["error"] for name in ("CLI usage", "index row", "index file row", "explore heading"))


def test_settings_and_environment_cannot_switch_the_hook_off(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    """Turn 1 writes ``disableAllHooks`` into the repository's and HOME's settings files; turn 2 calls the CLI.
    The harness's environment carries a ``CLAUDE_CONFIG_DIR`` whose hooks and ``apiKeyHelper`` would leave a
    trace, and credentials that must not travel. The sandbox is off, so the hook alone is being tested."""
    config = tmp_path / "user-claude"
    config.mkdir()
    trace = tmp_path / "user-config-was-read"
    helper = config / "key-helper.sh"
    helper.write_text(f"#!/bin/sh\ntouch {trace}.key\necho sk-ant-from-helper\n")
    helper.chmod(0o755)
    settings = {
        "apiKeyHelper": str(helper),
        "disableAllHooks": True,
        "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": f"touch {trace}.hook"}]}]},
    }
    (config / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    env = {DISABLE_VAR: "1", "CLAUDE_CONFIG_DIR": str(config), "CLAUDE_CODE_OAUTH_TOKEN": "oauth-must-not-pass",
           "ANTHROPIC_AUTH_TOKEN": "bearer-must-not-pass"}  # fmt: skip
    record = without_arm(real_tools, tag, tmp_path, "settings-then-call.jsonl", turns=2, **env)
    events = received_events(record)
    results = {r["tool_use_id"]: r for e in events for r in e["message"]["content"] if "tool_use_id" in r}
    attacks = {v: k for k, v in attack_names(record).items()}
    assert not results[attacks["attack: switch the hook off"]].get("is_error")  # the files were written
    repo = Path(json.loads(Path(record["driver"]["segments"][0]).read_text().splitlines()[0])["cwd"])
    assert json.loads((repo / ".claude" / "settings.json").read_text())["disableAllHooks"] is True
    denied = results[attacks["attack: call after the settings change"]]
    assert DENIAL in json.dumps(denied["content"])  # turn 2: the hook still ran and denied the call
    assert not list(tmp_path.glob("user-config-was-read*"))  # the user's hooks and key helper never ran


def test_killing_pytest_with_sigkill_leaves_no_agent_behind(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    cassette = fill_cassette("long-call.jsonl", real_tools, tmp_path / "cassette" / "long-call.jsonl")
    args = ["evals", "-k", "express", "--arms", "without", "--agent-eval-runs", "1", "--agent-eval-offline",
            "--agent-eval-turns=1", "--agent-eval-backend", "cassette", f"--agent-eval-cassette={cassette}",
            f"--agent-eval-out={tmp_path / 'out'}", "-p", "no:cacheprovider",
            f"--basetemp={tmp_path / 'bt'}"]  # fmt: skip
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=REPO,
        env=inner_env(real_tools, tag),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while not [cmd for _, cmd in _tagged(tag) if cmd.startswith("perl -e sleep 300")]:
            assert inner.poll() is None, "pytest ended before the agent's long call started"
            assert time.monotonic() < deadline, "the agent's long call never started"
            time.sleep(0.2)
        assert any("claude" in cmd for _, cmd in _tagged(tag))
        inner.send_signal(signal.SIGKILL)  # no finally, no fixture teardown runs
        inner.wait()
        deadline = time.monotonic() + 15
        while _tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _tagged(tag) == []
    finally:
        if inner.poll() is None:
            inner.kill()


def _tagged(tag: str) -> list[tuple[int, str]]:
    """Every live process carrying this test's tag in its environment (the CLI, its shells, their children)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if f"{TAG_VAR}={tag}".encode() in environ and state not in ("Z", "X"):
            found.append((int(proc.name), cmdline))
    return found


# -- real-API mode: the network ------------------------------------------------------------------------------
# Shaped like an issued key so the plugin takes the real-API path; it only ever reaches the stand-in below.
SHAPED_KEY = "sk-ant-api03-" + "Qz7Rk2Lm9" * 6
NETWORK_ATTACKS = "network-attacks.jsonl"


@contextmanager
def _mirror(tools: RealTools) -> Iterator[int]:
    """A download site for the tool on the host's loopback: ``/help.txt`` (what the real codegraph prints for
    ``--help``) and ``/codegraph.tgz`` (a package whose ``bin/cli.sh`` prints it); yields its port."""
    help_text = subprocess.run([str(tools.codegraph.bin), "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "Usage: codegraph" in help_text
    script = f"#!/bin/sh\ncat <<'HELP'\n{help_text}HELP\n".encode()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/bin/cli.sh")
        info.size, info.mode = len(script), 0o755
        tar.addfile(info, io.BytesIO(script))
    files = {"/help.txt": help_text.encode(), "/codegraph.tgz": archive.getvalue()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def _real_api(backend: object) -> Iterator[tuple[RunningServer, dict[str, str]]]:
    """``backend`` served as the real API on loopback (plain HTTP: the harness's forwarder is what reaches it, never
    the agent); the server and the inner pytest's environment for it."""
    with serve(backend) as api:
        yield api, {"ANTHROPIC_API_KEY": SHAPED_KEY, "ANTHROPIC_BASE_URL": api.url}


def _real_api_without_arm(
    tools: RealTools, tag: str, tmp_path: Path, keep: str = "", **env: str
) -> tuple[dict, list[str]]:
    """The without-arm in real-API mode (``--agent-eval-backend anthropic``) against a TLS stand-in API replaying
    the network attacks (only the lines holding ``keep``, when given); the record and the API's request paths."""
    with _mirror(tools) as port:
        cassette = fill_cassette(NETWORK_ATTACKS, tools, tmp_path / "api" / NETWORK_ATTACKS, MIRROR=port)
        if keep:
            lines = cassette.read_text(encoding="utf-8").splitlines()
            cassette.write_text("".join(f"{line}\n" for line in lines if keep in line or "attack" not in line))
        with _real_api(CassetteBackend(cassette, CLAUDE_CODE)) as (api, api_env):
            record = without_arm(tools, tag, tmp_path, None, backend="anthropic", **api_env, **env)
            return record, [hit.path for hit in api.hits]


def _results(record: dict) -> dict[str, str]:
    """Attack description -> what its call returned."""
    attacks = attack_names(record)
    return {
        attacks[block["tool_use_id"]]: json.dumps(block.get("content"))
        for event in received_events(record)
        for block in event["message"]["content"]
        if isinstance(block, dict) and block.get("tool_use_id") in attacks
    }


def test_in_real_api_mode_the_agent_reaches_the_api_and_nowhere_else(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    record, paths = _real_api_without_arm(real_tools, tag, tmp_path)
    assert any(path.startswith("/v1/messages") for path in paths)  # the CLI reached the API, through the forwarder
    results = _results(record)
    assert sum(name.startswith("attack: ") for name in results) == 8, results
    assert _leaks(record) == {}, results
    assert record["outcome"] == "passed", record.get("error")
    # nothing but the model's port is in there: no DNS, no route, no proxy to ask (the forwarder holds the way out)
    print("network attack results:", json.dumps(results, indent=1))
    assert "Could not resolve host" in results["attack: download the tool from the npm registry"]
    for attack in ("a mirror on the host's loopback, through the proxy", "bash /dev/tcp to the mirror"):
        result = results[f"attack: {attack}"]
        assert "Connection refused" in result or "Failed to connect" in result, result


def test_in_real_api_mode_without_the_sandbox_the_mirror_gets_through(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    # the registry attacks are left out: with nothing in the way they would reach the internet
    record, _ = _real_api_without_arm(real_tools, tag, tmp_path, keep="127.0.0.1", **{DISABLE_VAR: "1"})
    attacks = attack_names(record)
    leaked = {attacks.get(k, k) for k in _leaks(record)}
    print("leaked without the sandbox:", sorted(leaked))
    assert {"attack: the mirror around the proxy", "attack: python urllib to the mirror",
            "attack: bash /dev/tcp to the mirror"} <= leaked  # fmt: skip
    assert record["outcome"] == "failed"


def test_in_real_api_mode_the_with_arm_explores_through_its_mcp_server(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """The same sandbox and forwarder around the with-arm: codegraph's MCP server runs inside and answers."""
    with _real_api(ScriptedBackend()) as (api, api_env):
        record = without_arm(real_tools, tag, tmp_path, None, backend="anthropic", arm="with", **api_env)
        assert any(hit.path.startswith("/v1/messages") for hit in api.hits)
    assert record["outcome"] == "passed", record.get("error")
    figures = record["figures"]
    assert figures["explore_calls"] >= 1 and figures["tool_residual"] > 0 and figures["allocation"] is not None


KEY_ATTACKS = "key-attacks.jsonl"


def test_in_real_api_mode_the_key_stays_outside_and_server_side_tools_are_refused(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    """The agent looks for the key (its environment, every process's, its files, the CLI's command line) and sends
    its own request with Anthropic's server-side web_fetch to the model's port: it finds the placeholder only, and
    the forwarder refuses the request, says so in the report, and never passes it on."""
    cassette = fill_cassette(KEY_ATTACKS, real_tools, tmp_path / "api" / KEY_ATTACKS)
    with _real_api(CassetteBackend(cassette, CLAUDE_CODE)) as (api, api_env):
        record, output = run_without_arm(real_tools, tag, tmp_path, None, backend="anthropic", **api_env)
        upstream = api.requests
    results = _results(record)
    assert sum(name.startswith("attack: ") for name in results) == 3, results
    transcript = "\n".join(Path(s).read_text(encoding="utf-8") for s in record["driver"]["segments"])
    assert SHAPED_KEY not in transcript, results  # in no environment, file or command line the agent could read
    assert STANDIN_API_KEY in results["attack: the key in the environment"], results
    refused = results["attack: a server-side web_fetch through the model's port"]
    assert "agent-eval: refused" in refused and "web_fetch_20250910" in refused, refused
    assert upstream and not any(t.get("type") for r in upstream for t in r.get("tools") or []), "a server tool passed"
    evidence = record["scores"]["evidence"]
    assert len(evidence["refused"]) == 1 and "web_fetch (web_fetch_20250910)" in evidence["refused"][0], evidence
    assert evidence["problems"] == [], evidence  # the refused request never reached the model: nothing disagrees
    assert record["outcome"] == "passed", record.get("error")
    assert f"REFUSED at the model boundary {record['id']}: POST /v1/messages: server-side tool(s) web_fetch" in output


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "sandbox off"])
def test_a_tool_result_forged_into_the_clis_stdout_cannot_be_written(
    real_tools: RealTools, tag: str, tmp_path: Path, sealed: bool
) -> None:
    """The agent's Bash writes a stream-json tool result carrying codegraph's help into /proc/$PPID/fd/1 (the CLI's
    stdout: the harness's stream). The stream is a socket, which /proc cannot reopen, even with the sandbox off;
    sealed, the command also runs in a Landlock domain of its own. The item passes on what really happened. (Had
    a forgery landed, the integrity check names it: tests/test_evidence.py.)"""
    record = without_arm(real_tools, tag, tmp_path, "forge-attacks.jsonl", **({} if sealed else {DISABLE_VAR: "1"}))
    written = _results(record)["attack: a forged tool result written to the CLI's stdout"]
    # the command carries the payload's text itself (printf's format): what tells is whether the write succeeded
    assert "blocked" in written and "written" not in written, written
    assert ("Permission denied" if sealed else "No such device or address") in written, written
    assert record["outcome"] == "passed", (written, record.get("error"))
