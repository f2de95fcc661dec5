"""An adversarial without-arm, through the REAL Claude Code CLI and the REAL codegraph, only the model stood in.

Each test replays a recorded without-arm session (a cassette in ``tests/data/adversarial/``) through
``pytest evals`` in a subprocess. The cassette's agent tries every route to codegraph that got through text
matching: a quoted or globbed name, a symlink, ``cd`` + a relative path, Python and Perl subprocesses, base64
piped to ``sh``, a name split across variables, ``node`` on the package's shim, a call followed by ``; false``,
``npx`` from the registry, ``sqlite3`` on an index, the Monitor tool, and a subagent doing the same. Sealed, no
codegraph output reaches the agent; with the sandbox switched off, some does — so the suite can fail.

Codegraph output is recognised by what only it prints (its help banner, an explore heading, its index's
tables), looked for in everything the agent received: every user event of every thread, tool results and
notifications alike.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import RealTools
from e2e_support import RUN_TIMEOUT, TAG_VAR, inner_env, run_pytest, summary

from pytest_agent_eval.harness.sandbox import DISABLE_VAR

REPO = Path(__file__).resolve().parents[1]
CASSETTES = REPO / "tests" / "data" / "adversarial"
# What only codegraph prints: its --help banner, an explore answer's heading, the tables of its index.
MARKERS = (
    "Usage: codegraph",
    "Code intelligence and knowledge graph",
    "**Exploration:",
    "nodes_fts",
    "unresolved_refs",
)
DENIAL = "agent-eval: the `codegraph` CLI is not available in this evaluation arm"

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(900)]


def _cassette(name: str, tools: RealTools, dest: Path) -> Path:
    """The cassette with this machine's cache, codegraph version and indexed express filled in."""
    text = (CASSETTES / name).read_text(encoding="utf-8")
    for placeholder, value in (
        ("@CACHE@", tools.cache),
        ("@VERSION@", tools.codegraph.version),
        ("@IDX@", tools.express),
    ):
        text = text.replace(placeholder, str(value))
    # a command the agent hides from text matching: it travels base64-encoded and is decoded in the shell
    text = re.sub(r"@BASE64\((.*?)\)@", lambda m: base64.b64encode(m.group(1).encode()).decode(), text)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text, encoding="utf-8")
    return dest


def _without_arm(tools: RealTools, tag: str, tmp_path: Path, cassette: str, turns: int = 1, **env: str) -> dict:
    """Run ``evals`` on express's without-arm replaying ``cassette``; the item's record."""
    out = tmp_path / "out"
    args = ["evals", "-k", "express", "--arms", "without", "--agent-eval-runs", "1", "--agent-eval-offline",
            f"--agent-eval-turns={turns}", "--agent-eval-backend", "cassette",
            f"--agent-eval-cassette={_cassette(cassette, tools, tmp_path / 'cassette' / cassette)}",
            f"--agent-eval-out={out}"]  # fmt: skip
    done = run_pytest(args, REPO, inner_env(tools, tag, **env), tmp_path)
    record = summary(out)["express-without-1"]
    assert record["outcome"] != "error", record.get("infra_error") or done.stdout[-3000:]
    return record


def _received(record: dict) -> list[dict]:
    """Every user event of the run (tool results of every thread, notifications), as recorded."""
    events = []
    for segment in record["driver"]["segments"]:
        for line in Path(segment).read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("type") == "user":
                events.append(event)
    return events


def _leaks(record: dict) -> dict[str, list[str]]:
    """Tool-use id (or ``notification``) -> the codegraph markers its result carried."""
    found: dict[str, list[str]] = {}
    for event in _received(record):
        content = event["message"]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            text = json.dumps(block.get("content", block.get("text", "")))
            hits = [m for m in MARKERS if m in text]
            if hits:
                found.setdefault(block.get("tool_use_id", "notification"), []).extend(hits)
    return found


def _attacks(record: dict) -> dict[str, str]:
    """Tool-use id -> the attack's description, from the replayed session."""
    names = {}
    for segment in record["driver"]["segments"]:
        for line in Path(segment).read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            for block in (event.get("message") or {}).get("content") or [] if event.get("type") == "assistant" else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[block["id"]] = str(block["input"].get("description", block["name"]))
    return names


def test_no_attack_gets_codegraph_output_to_the_sealed_without_arm(
    real_tools: RealTools, tag: str, tmp_path: Path
) -> None:
    record = _without_arm(real_tools, tag, tmp_path, "without-arm-attacks.jsonl")
    attacks = _attacks(record)
    assert sum(a.startswith("attack: ") for a in attacks.values()) >= 16  # every attack was replayed
    assert "attack: subagent bash" in attacks.values()  # the subagent's own Bash ran too
    leaks = _leaks(record)
    assert leaks == {}, {attacks.get(k, k): v for k, v in leaks.items()}
    assert record["outcome"] == "passed", record.get("error")  # and the gate found nothing either
    # the block probe ran through Claude Code before the item, and its Bash call was denied by the hook
    probe = next((Path(record["run_dir"]) / "block-probe").glob("run-*.jsonl")).read_text(encoding="utf-8")
    assert DENIAL in probe


def test_with_the_sandbox_switched_off_an_attack_gets_through(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    record = _without_arm(real_tools, tag, tmp_path, "without-arm-attacks.jsonl", **{DISABLE_VAR: "1"})
    attacks = _attacks(record)
    leaked = {attacks.get(k, k) for k in _leaks(record)}
    print("leaked without the sandbox:", sorted(leaked))
    # the routes no command matcher can see reach the installed tool when only the hook and the PATH shim stand
    # (the matcher denies the quoted, globbed, linked, interpreted and split-variable calls by itself)
    hidden_from_text_matching = {
        "attack: base64 piped to sh",
        "attack: sqlite3 on the cached index",
        "attack: hunt for an index",
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
    record = _without_arm(real_tools, tag, tmp_path, "settings-then-call.jsonl", turns=2, **env)
    results = {r["tool_use_id"]: r for e in _received(record) for r in e["message"]["content"] if "tool_use_id" in r}
    attacks = {v: k for k, v in _attacks(record).items()}
    assert not results[attacks["attack: switch the hook off"]].get("is_error")  # the files were written
    repo = Path(json.loads(Path(record["driver"]["segments"][0]).read_text().splitlines()[0])["cwd"])
    assert json.loads((repo / ".claude" / "settings.json").read_text())["disableAllHooks"] is True
    denied = results[attacks["attack: call after the settings change"]]
    assert DENIAL in json.dumps(denied["content"])  # turn 2: the hook still ran and denied the call
    assert not list(tmp_path.glob("user-config-was-read*"))  # the user's hooks and key helper never ran


def test_killing_pytest_with_sigkill_leaves_no_agent_behind(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    cassette = _cassette("long-call.jsonl", real_tools, tmp_path / "cassette" / "long-call.jsonl")
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
