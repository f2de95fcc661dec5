"""The forwarder to the real Responses API (Codex CLI with OPENAI_API_KEY): the key is added outside the sandbox, the
agent holds only a stand-in key, hosted tools are refused, every request is recorded. The upstream is a fake
Responses API on 127.0.0.1 (tests/support/codex.py), never the real one."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.codex import fake_responses_api

from pytest_agent_eval.agents.base import AgentSetup
from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.codex.config import STANDIN_API_KEY
from pytest_agent_eval.model import OpenAIBackend, ScriptedBackend, serve
from pytest_agent_eval.model.keys import is_real_openai_key
from pytest_agent_eval.model.record import RequestLog, read_requests
from pytest_agent_eval.model.responses import assemble_response
from pytest_agent_eval.run.backends import make_backend, resolve_backend
from pytest_agent_eval.settings.config import AgentEvalConfig
from pytest_agent_eval.tool import CODEGRAPH

pytestmark = pytest.mark.timeout(60)

KEY = "sk-proj-" + "K3y" * 20
DATA = Path(__file__).parent / "data/codex"
REQUEST = json.loads((DATA / "with" / "last-request.json").read_text(encoding="utf-8"))
FIRST = {**REQUEST, "input": REQUEST["input"][:4]}  # the question, before any answer
# What Codex 0.171.0 sends with every request (tests/data/codex/README.md, "headers").
CODEX_HEADERS = {
    "authorization": f"Bearer {STANDIN_API_KEY}", "originator": "codex_exec", "accept": "text/event-stream",
    "user-agent": "codex_exec/0.171.0", "session-id": "s1", "thread-id": "t1", "x-client-request-id": "t1",
    "x-codex-window-id": "t1:0", "x-codex-beta-features": "b", "accept-encoding": "zstd,gzip",
    "chatgpt-account-id": "acct", "openai-organization": "org-client",
}  # fmt: skip


def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    headers = {"content-type": "application/json", **CODEX_HEADERS}
    request = urllib.request.Request(url + "/v1/responses", data=json.dumps(body).encode(), method="POST",
                                     headers=headers)  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_forwarder_adds_the_key_and_passes_only_codexs_own_headers(tmp_path: Path) -> None:
    log = RequestLog()
    with fake_responses_api(ScriptedBackend()) as api:
        backend = OpenAIBackend(api_key=KEY, base_url=api.url + "/v1")
        with serve(backend, log=log) as forwarder, log.into(tmp_path / "requests.jsonl"):
            status, body = _post(forwarder.url, FIRST)
    assert status == 200
    ((path, headers, sent),) = api.seen
    assert path == "/v1/responses" and sent == FIRST
    assert headers["authorization"] == f"Bearer {KEY}"  # the client's stand-in key never passes
    assert {k: headers.get(k) for k in ("originator", "session-id", "x-codex-window-id", "x-codex-beta-features")} == {
        "originator": "codex_exec",
        "session-id": "s1",
        "x-codex-window-id": "t1:0",
        "x-codex-beta-features": "b",
    }
    assert not {"chatgpt-account-id", "openai-organization"} & set(headers)
    assert headers["accept-encoding"] == "identity"  # urllib's own: a compressed stream could not be read back
    # relayed untouched, and the record keeps the response as the stream carried it (what evidence reads)
    relayed = assemble_response(body)
    assert relayed["output"][0]["namespace"] == "mcp__codegraph" and relayed["model"] == "gpt-real"
    (entry,) = read_requests(tmp_path / "requests.jsonl")
    assert entry["request"] == FIRST and entry["status"] == 200 and entry["response"] == relayed


def test_the_upstream_is_openai_base_url_and_a_bad_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_responses_api(ScriptedBackend()) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/proxy/v1/")
        with serve(make_backend("openai")) as forwarder:
            assert _post(forwarder.url, FIRST)[0] == 200
    assert api.seen[0][0] == "/proxy/v1/responses" and api.seen[0][1]["authorization"] == f"Bearer {KEY}"
    monkeypatch.setenv("OPENAI_BASE_URL", "api.openai.com")
    with pytest.raises(ValueError, match="OPENAI_BASE_URL must be an http"):
        OpenAIBackend()


def test_without_a_real_key_there_is_no_forwarder_and_auto_is_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    for placeholder in (
        "",
        "sk-test",
        STANDIN_API_KEY,
        "sk-proj-your-key-here-" + "x" * 30,
        "sk-ant-api03-" + "a" * 40,
    ):
        assert not is_real_openai_key(placeholder), placeholder
        with pytest.raises(ValueError, match="needs a real OPENAI_API_KEY"):
            OpenAIBackend(api_key=placeholder)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert (resolve_backend("auto", "responses"), resolve_backend("auto", "messages")) == ("openai", "scripted")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    assert resolve_backend("auto", "responses") == "scripted"


def test_a_session_names_a_forwarder_it_cannot_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    problem = AgentEvalConfig(backend="openai", agent=CODEX).model_problem()
    assert problem is not None and problem.startswith("--agent-eval-backend openai: needs a real OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert AgentEvalConfig(backend="openai", agent=CODEX).model_problem() is None
    problem = AgentEvalConfig(backend="openai", agent=CLAUDE_CODE).model_problem()
    assert problem == (
        "--agent-eval-backend openai: forwards the responses API, but Claude Code speaks the messages API (auto "
        "gives each agent its own API's forwarder, where its key is set)"
    )


def test_a_hosted_tool_is_refused_and_never_forwarded() -> None:
    hosted = {"type": "web_search", "name": "web"}
    with fake_responses_api(ScriptedBackend()) as api, serve(OpenAIBackend(api_key=KEY, base_url=api.url)) as forwarder:
        status, body = _post(forwarder.url, {**FIRST, "tools": [*FIRST["tools"], hosted]})
    assert status == 400 and b"web (web_search)" in body and api.seen == []


def test_the_agent_gets_a_stand_in_key_and_its_home_never_holds_the_real_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    env = CODEX.process_environment(dict(os.environ), "http://127.0.0.1:9")
    assert KEY not in json.dumps(env) and env["AGENT_EVAL_MODEL_KEY"] == STANDIN_API_KEY
    setup = AgentSetup(tmp_path, tmp_path / "home", "http://127.0.0.1:9", (), CODEGRAPH.cli, CODEGRAPH.deny_reason)
    config = CODEX.configure(setup)
    assert KEY not in json.dumps(dict(config.env))
    written = [p.read_text(encoding="utf-8") for p in (tmp_path / "home").rglob("*") if p.is_file()]
    assert written and not any(KEY in text for text in written)


def test_the_harness_serves_the_forwarder_for_codex_when_auto_finds_a_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agent_eval.run.item import model_endpoint

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-" + "R" * 40)
    with model_endpoint(AgentEvalConfig(backend="auto", agent=CODEX)) as endpoint:
        assert (endpoint.backend, endpoint.real) == ("openai", True) and "api.openai.com/v1" in endpoint.description
    with model_endpoint(AgentEvalConfig(backend="auto", agent=CLAUDE_CODE)) as endpoint:
        assert endpoint.backend == "anthropic"
    monkeypatch.delenv("OPENAI_API_KEY")
    with model_endpoint(AgentEvalConfig(backend="auto", agent=CODEX)) as endpoint:
        assert (endpoint.backend, endpoint.real) == ("scripted", False)


def test_each_agent_of_a_mixed_session_gets_the_model_of_its_own_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto with only OPENAI_API_KEY set: Codex talks to the forwarder, Claude Code to the stand-in, in one worker."""
    from pytest_agent_eval.run.item import ModelServers

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    cfg = AgentEvalConfig(backend="auto", agents=[CLAUDE_CODE, CODEX])
    servers = ModelServers(cfg)
    try:
        codex, claude = servers.for_agent(CODEX), servers.for_agent(CLAUDE_CODE)
        assert (codex.backend, codex.real) == ("openai", True)
        assert (claude.backend, claude.real) == ("scripted", False)
        assert servers.for_agent(CODEX) is codex and codex.url != claude.url  # one server per backend, kept
    finally:
        servers.close()
    mixed = AgentEvalConfig(backend="openai", agents=[CODEX, CLAUDE_CODE])
    assert "Claude Code speaks the messages API" in str(mixed.model_problem())
    assert AgentEvalConfig(backend="openai", agents=[CODEX]).model_problem() is None
