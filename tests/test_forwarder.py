"""The forwarder to the real API (docs/model-boundary.md): the key is added outside the sandbox, server-side tools are
refused, and every request is recorded. The upstream is a fake Messages API on 127.0.0.1, never the real one."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from typing import Any

import pytest
from support.upstream import Upstream, fake_api

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE, STANDIN_API_KEY
from pytest_agent_eval.model import AnthropicBackend, serve
from pytest_agent_eval.model.record import RequestLog, read_requests
from pytest_agent_eval.model.refusal import refusal
from pytest_agent_eval.model.sse import Reply, assemble, stream_events, tool_use

KEY = "sk-ant-api03-" + "K3y" * 20
CALL = tool_use("Bash", {"command": "ls"}, "toolu_01abc")


def fake_messages_api() -> ContextManager[Upstream]:
    """A Messages API on loopback: streams one tool call for /v1/messages, counts for count_tokens."""

    def answer(path: str, body: Any) -> tuple[bytes, str]:
        if path.startswith("/v1/messages/count_tokens"):
            return json.dumps({"input_tokens": 42}).encode(), "application/json"
        usage = {"input_tokens": 3, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        return b"".join(stream_events(Reply([CALL]), "claude-real", usage, "msg_01upstream")), "text/event-stream"

    return fake_api(answer)


def _post(url: str, body: dict[str, Any], path: str = "/v1/messages?beta=true") -> tuple[int, bytes]:
    """POST as the CLI in the sandbox does: with the placeholder key."""
    headers = {"content-type": "application/json", "x-api-key": STANDIN_API_KEY, "authorization": "Bearer nope",
               "anthropic-beta": "some-beta", "anthropic-version": "2023-06-01"}  # fmt: skip
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


REQUEST = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "q"}],
           "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}]}  # fmt: skip


def test_the_forwarder_adds_the_key_and_the_client_never_needs_it(tmp_path: Path) -> None:
    log = RequestLog()
    with fake_messages_api() as api, serve(AnthropicBackend(api_key=KEY, base_url=api.url), log=log) as forwarder:
        with log.into(tmp_path / "requests.jsonl"):
            status, body = _post(forwarder.url, REQUEST)
            count_status, count = _post(forwarder.url, {**REQUEST, "stream": False}, "/v1/messages/count_tokens")
    assert status == 200 and assemble(body)["content"] == [CALL]
    assert count_status == 200 and json.loads(count) == {"input_tokens": 42}
    (path, headers, sent), (count_path, _, _) = api.seen
    assert (path, count_path) == ("/v1/messages", "/v1/messages/count_tokens")
    assert headers["x-api-key"] == KEY and "authorization" not in headers  # the client's placeholder never passes
    assert headers["anthropic-beta"] == "some-beta" and sent == REQUEST
    # the record: what the model received, and what it answered, read back from the relayed stream
    first, second = read_requests(tmp_path / "requests.jsonl")
    assert first["request"] == REQUEST and first["status"] == 200 and first["refused"] is None
    assert first["response"]["id"] == "msg_01upstream" and first["response"]["content"] == [CALL]
    assert second["path"] == "/v1/messages/count_tokens" and second["response"] == {"input_tokens": 42}


def test_an_auth_token_goes_as_a_bearer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with fake_messages_api() as api, serve(AnthropicBackend(auth_token="tok-123", base_url=api.url)) as forwarder:
        assert _post(forwarder.url, REQUEST)[0] == 200
    assert api.seen[0][1]["authorization"] == "Bearer tok-123" and "x-api-key" not in api.seen[0][1]


SERVER_SIDE = [
    {"type": "web_search_20250305", "name": "web_search"},
    {"type": "web_fetch_20250910", "name": "web_fetch"},
    {"type": "code_execution_20250825", "name": "code_execution"},
    {"type": "computer_20250124", "name": "computer", "display_width_px": 1, "display_height_px": 1},
    {"type": "bash_20250124", "name": "bash"},
]


@pytest.mark.parametrize("tool", SERVER_SIDE, ids=[t["type"] for t in SERVER_SIDE])
def test_a_request_with_a_server_side_tool_is_refused_and_never_forwarded(tool: dict, tmp_path: Path) -> None:
    log = RequestLog()
    with fake_messages_api() as api, serve(AnthropicBackend(api_key=KEY, base_url=api.url), log=log) as forwarder:
        with log.into(tmp_path / "requests.jsonl"):
            status, body = _post(forwarder.url, {**REQUEST, "tools": [*REQUEST["tools"], tool]})
            count_status, _ = _post(forwarder.url, {**REQUEST, "tools": [tool]}, "/v1/messages/count_tokens")
        refused = forwarder.refused
    assert (status, count_status) == (400, 400) and api.seen == []
    assert f"{tool['name']} ({tool['type']})" in json.loads(body)["error"]["message"]
    assert len(refused) == 2 and refused[0].startswith("POST /v1/messages: server-side tool(s)")
    entries = read_requests(tmp_path / "requests.jsonl")
    assert [e["status"] for e in entries] == [400, 400] and all(tool["type"] in e["refused"] for e in entries)


@pytest.mark.parametrize("field_name", ["mcp_servers", "container"])
def test_mcp_servers_or_a_container_are_refused(field_name: str) -> None:
    value = (
        [{"type": "url", "url": "https://example.invalid/mcp", "name": "x"}] if field_name == "mcp_servers" else "c1"
    )
    with fake_messages_api() as api, serve(AnthropicBackend(api_key=KEY, base_url=api.url)) as forwarder:
        assert _post(forwarder.url, {**REQUEST, field_name: value})[0] == 400
    assert api.seen == []


def test_custom_tools_pass_the_refusal() -> None:
    assert refusal(REQUEST) is None
    assert refusal({**REQUEST, "tools": [{"type": "custom", "name": "x", "input_schema": {}}]}) is None


def test_only_the_messages_calls_are_forwarded() -> None:
    """Claude Code 2.1.332 calls POST /v1/messages?beta=true only (checked against the stand-in); count_tokens is
    forwarded too; any other path, query or model is refused and listed (a GET answered locally, an empty model
    list), and never reaches the API."""
    tried = ["/v1/files", "/v1/messages/batches", "/v1/messages/../messages/batches", "/v1/messages?beta=true&x=1",
             "/v1/%6dessages", "/v1/messages/count_tokens?url=http://x"]  # fmt: skip
    with fake_messages_api() as api:
        backend = AnthropicBackend(api_key=KEY, base_url=api.url, model="m")
        with serve(backend) as forwarder:
            assert [_post(forwarder.url, REQUEST, path)[0] for path in tried] == [400] * len(tried)
            assert _post(forwarder.url, {**REQUEST, "model": "claude-opus-4-1"})[0] == 400
            with urllib.request.urlopen(forwarder.url + "/v1/models", timeout=10) as models:
                assert json.loads(models.read())["data"] == []
            refused = forwarder.refused
            assert _post(forwarder.url, REQUEST)[0] == 200  # the configured model, on Claude Code's path
    assert len(api.seen) == 1
    assert len(refused) == len(tried) + 1 and "model 'claude-opus-4-1': only the configured model 'm'" in refused[-1]
    assert "POST /v1/files: path '/v1/files': not one the agent's CLI needs" in refused[0]


def test_the_agent_environment_holds_no_credential() -> None:
    base = {"PATH": "/bin", "HOME": "/h", "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_AUTH_TOKEN": "tok",
            "ANTHROPIC_BASE_URL": "https://api.anthropic.com", "CLAUDE_CODE_OAUTH_TOKEN": "o"}  # fmt: skip
    env = CLAUDE_CODE.process_environment(base, "http://127.0.0.1:4321")
    assert env["ANTHROPIC_API_KEY"] == STANDIN_API_KEY and env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4321"
    assert not {"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"} & set(env)
    assert not any(secret in value for value in env.values() for secret in (KEY, "tok", "https://api.anthropic"))
