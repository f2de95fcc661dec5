"""Ways of driving the agent (``headless``: ``claude -p``), and what they share.

An :class:`AgentInfraError` means the run produced no transcript worth scoring — the CLI is missing, it
timed out, it wrote no result event, the API failed — which is never a verdict on the retrieval tool.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_agent_eval.harness.process import start_group, stop_group

# What every agent process runs with, whatever drives it (besides the retrieval tool's own RetrievalTool.env):
# no telemetry or updates, bypassPermissions allowed as root, MCP tools offered directly, Grep/Glob not hidden
# by tasks.
AGENT_ENV = {
    "DO_NOT_TRACK": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "IS_SANDBOX": "1",
    "ENABLE_TOOL_SEARCH": "false",
    "CLAUDE_CODE_ENABLE_TASKS": "false",
}
# The CLI only needs *a* key to talk to the harness's loopback server (a stand-in, or the forwarder that adds the
# real one outside the sandbox); a real key never goes into the agent's environment.
STANDIN_API_KEY = "sk-ant-agent-eval-local-stand-in"


# The only variables of the harness's environment an agent gets: what a shell and node need to run, locale,
# CA bundles for the real API, and the CLI's retry knob. Everything else — CLAUDE_CONFIG_DIR (the user's own
# hooks and apiKeyHelper), CLAUDE_CODE_OAUTH_TOKEN, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_USE_BEDROCK or _VERTEX, npm
# settings, the host's proxies, ANTHROPIC_API_KEY (the forwarder holds it: pytest_agent_eval.model.anthropic) —
# never passes.
ALLOWED_ENV = frozenset(
    {
        "PATH", "HOME", "TMPDIR", "TMP", "TEMP", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "TZ", "LANG",
        "LANGUAGE", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "CLAUDE_CODE_MAX_RETRIES",
    }
)  # fmt: skip
ALLOWED_PREFIXES = ("LC_", "AGENT_EVAL_E2E_")  # locale; the tag the end-to-end tests find their processes by


def agent_environment(base: Mapping[str, str], model_url: str) -> dict[str, str]:
    """The allow-listed part of ``base`` with the agent's flags, the model server's address (a stand-in, or the
    harness's forwarder to the real API) and a placeholder key: no credential of ``base`` ever passes."""
    env = {k: v for k, v in base.items() if k in ALLOWED_ENV or k.startswith(ALLOWED_PREFIXES)}
    env.update(AGENT_ENV)
    env.update(ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY=STANDIN_API_KEY)
    return env


class AgentInfraError(RuntimeError):
    """The harness, the CLI or the API failed; the message says which."""


def warm_mcp_server(command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float = 120.0) -> float:
    """Start an MCP stdio server, wait for its answer to ``initialize``, stop it; returns the seconds it took.

    Run once before the agent so the first real start (loading the index, filling the OS cache) is not part of
    the measured run: an agent facing a cold start turns to Read/grep and the A/B measures latency instead of
    retrieval. Raises AgentInfraError when the server does not answer.
    """
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pytest-agent-eval-prewarm", "version": "1"},
        },
    }
    started = time.monotonic()
    try:
        process = start_group(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        raise AgentInfraError(f"cannot start MCP server {command[0]}: {exc}") from None
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.flush()
        answer = _read_response(process, timeout_s)
        if answer is None:
            raise AgentInfraError(
                f"MCP server {' '.join(command)} did not answer initialize within {timeout_s:g}s"
                f" (exit code {process.poll()})"
            )
    finally:
        _stop(process)
    return time.monotonic() - started


def _read_response(process: subprocess.Popen, timeout_s: float) -> dict | None:
    """The first JSON-RPC response with id 1 on stdout; None on timeout or exit."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                return None
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # servers may log to stdout before speaking JSON-RPC
                if isinstance(message, dict) and message.get("id") == 1 and ("result" in message or "error" in message):
                    return message
    return None


def _stop(process: subprocess.Popen) -> None:
    """Close its pipes (a stdio server exits on EOF), give it a moment, then stop its group."""
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    stop_group(process)
