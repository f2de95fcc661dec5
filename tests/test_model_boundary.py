"""Every API boundary refuses the provider's own tools, every forwarder is an allow-list, and the stand-in's simulated
prompt cache is per item (docs/model-boundary.md). The upstreams are fake APIs on 127.0.0.1, never the real ones."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.codex import fake_responses_api
from support.upstream import fake_api

from pytest_agent_eval.agents.gemini.config import STANDIN_API_KEY
from pytest_agent_eval.model import GeminiForwarder, OpenAIBackend, ScriptedBackend, serve
from pytest_agent_eval.model.gemini import stream_frames
from pytest_agent_eval.model.record import RequestLog, read_requests

pytestmark = pytest.mark.timeout(60)

MODEL = "stand-in-scripted"  # what Codex and Gemini CLI are told to ask for
FUNCTIONS = {"functionDeclarations": [{"name": "run_shell_command", "parameters": {"type": "object"}}]}
GEMINI_REQUEST = {"contents": [{"role": "user", "parts": [{"text": "Where does res.send set the ETag?"}]}],
                  "tools": [FUNCTIONS]}  # fmt: skip
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
# The Gemini API's own tools (Gemini CLI's google_web_search and web_fetch reach the model as the first two).
GEMINI_SERVER_TOOLS = ["googleSearch", "urlContext", "codeExecution", "fileSearch", "googleSearchRetrieval",
                       "googleMaps", "computerUse", "retrieval", "enterpriseWebSearch"]  # fmt: skip


def _post(url: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    sent = {"content-type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("tool", GEMINI_SERVER_TOOLS)
def test_the_gemini_stand_in_refuses_the_apis_own_tools_and_reports_them(tool: str, tmp_path: Path) -> None:
    with serve(ScriptedBackend()) as server, server.log.into(tmp_path / "requests.jsonl"):
        for path in (STREAM, f"/v1beta/models/{MODEL}:generateContent", f"/v1beta/models/{MODEL}:countTokens"):
            status, body = _post(server.url + path, {**GEMINI_REQUEST, "tools": [FUNCTIONS, {tool: {}}]})
            assert status == 400 and f"server-side tool(s) {tool}" in body.decode(), body
        counted = {"generateContentRequest": {**GEMINI_REQUEST, "tools": [{tool: {}}]}}
        assert _post(server.url + f"/v1beta/models/{MODEL}:countTokens", counted)[0] == 400
        assert _post(server.url + STREAM, GEMINI_REQUEST)[0] == 200  # functions only: answered
        refused = server.refused
    assert len(refused) == 4 and all(f"server-side tool(s) {tool}" in line for line in refused)
    entries = read_requests(tmp_path / "requests.jsonl")
    assert [bool(e["refused"]) for e in entries] == [True, True, True, True, False]


def test_a_cached_content_of_the_apis_side_is_refused() -> None:
    with serve(ScriptedBackend()) as server:
        status, body = _post(server.url + STREAM, {**GEMINI_REQUEST, "cachedContent": "cachedContents/abc"})
    assert status == 400 and "cachedContent in the request" in body.decode()


def _fake_gemini_api() -> Any:
    parts = [{"text": "from upstream"}]
    frames = b"".join(stream_frames(parts, "gemini-real", {"promptTokenCount": 7}, "resp-1"))
    return fake_api(lambda path, body: (frames, "text/event-stream"))


# What a request the agent's shell crafts for the forwarder might ask, each with the harness's key.
REFUSED_GEMINI_PATHS = [
    f"/v1beta/models/{MODEL}:predictLongRunning",
    f"/v1beta/models/{MODEL}:batchGenerateContent",
    f"/v1beta/models/{MODEL}:embedContent",
    "/v1beta/models/learnlm-2.0-flash-experimental:streamGenerateContent?alt=sse",  # another model
    "/v1beta/models/veo-3.0-generate-001:predictLongRunning",
    f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse&key=other",  # a query trick
    f"/v1beta/models/{MODEL}:generateContent?alt=sse",
    f"/v1beta/models/{MODEL}/../../files:generateContent",
    f"/v1beta/models/../models/{MODEL}:generateContent",
    f"/v1beta/models/{MODEL}%3AgenerateContent",
    f"/v1beta//models/{MODEL}:generateContent",
    "/v1beta/files",
    "/v1beta/cachedContents",
    "/upload/v1beta/files",
]


def test_the_gemini_forwarder_sends_on_only_gemini_clis_methods_for_the_configured_model(tmp_path: Path) -> None:
    log = RequestLog()
    with _fake_gemini_api() as api:
        forwarder = GeminiForwarder(api_key="the-harness-key", base_url=api.url, model=MODEL)
        with serve(forwarder, log=log) as server, log.into(tmp_path / "requests.jsonl"):
            key = {"x-goog-api-key": STANDIN_API_KEY}
            statuses = [_post(server.url + path, GEMINI_REQUEST, key)[0] for path in REFUSED_GEMINI_PATHS]
            refused = server.refused
            assert _post(server.url + STREAM, GEMINI_REQUEST, key)[0] == 200
            assert _post(server.url + f"/v1beta/models/{MODEL}:countTokens", {"contents": []}, key)[0] == 200
            # Gemini CLI's own subagent (the codebase investigator) asks its own model
            subagent = "/v1beta/models/gemini-3-flash-preview:streamGenerateContent?alt=sse"
            assert _post(server.url + subagent, GEMINI_REQUEST, key)[0] == 200
            with_search = {**GEMINI_REQUEST, "tools": [FUNCTIONS, {"googleSearch": {}}]}
            assert _post(server.url + STREAM, with_search, key)[0] == 400
    assert statuses == [400] * len(REFUSED_GEMINI_PATHS)
    assert len(refused) == len(REFUSED_GEMINI_PATHS)  # each listed, as the report shows them
    assert "only the configured model 'stand-in-scripted'" in refused[3]
    assert [path for path, _, _ in api.seen] == [STREAM, f"/v1beta/models/{MODEL}:countTokens", subagent]
    entries = read_requests(tmp_path / "requests.jsonl")
    assert sum(1 for e in entries if e["refused"]) == len(REFUSED_GEMINI_PATHS) + 1


def test_the_responses_forwarder_sends_on_only_codexs_path_for_the_configured_model() -> None:
    request = {"model": MODEL, "stream": True, "input": [{"type": "message", "role": "user", "content": "q"}]}
    with fake_responses_api(ScriptedBackend()) as api:
        backend = OpenAIBackend(api_key="sk-proj-" + "K3y" * 20, base_url=api.url + "/v1", model=MODEL)
        with serve(backend) as server:
            tried = [("/v1/responses?stream=false", request), ("/v1/responses/compact", request),
                     ("/v1/../v1/responses", request), ("/v1/batches", request), ("/v1/files", request),
                     ("/v1/responses", {**request, "model": "o3-pro"}),
                     ("/v1/responses", {**request, "tools": [{"type": "web_search"}]})]  # fmt: skip
            statuses = [_post(server.url + path, body)[0] for path, body in tried]
            refused = server.refused
            assert _post(server.url + "/v1/responses", request)[0] == 200
    assert statuses == [400] * len(tried) and len(refused) == len(tried)
    assert "model 'o3-pro': only the configured model" in refused[5] and "web_search" in refused[6]
    assert len(api.seen) == 1


def _messages(question: str) -> dict[str, Any]:
    system = [{"type": "text", "text": "You are a coding agent. " * 200}]
    return {"model": "m", "max_tokens": 10, "stream": False, "system": system,
            "messages": [{"role": "user", "content": question}]}  # fmt: skip


def test_the_simulated_prompt_cache_never_confirms_another_items_prompt(tmp_path: Path) -> None:
    """Two items served one after the other by a worker's stand-in: the second item's first request shares the
    first item's long system prompt, and is told nothing of it (no cache read); within an item, the cache holds."""

    def cached(question: str) -> int:
        status, body = _post(server.url + "/v1/messages", _messages(question))
        assert status == 200
        return json.loads(body)["usage"]["cache_read_input_tokens"]

    with serve(ScriptedBackend()) as server:
        with server.log.into(tmp_path / "item-1.jsonl"):
            assert cached("Where is the ETag set?") == 0
            assert cached("Where is the ETag set?") > 1000  # the same item's prompt again: read from its cache
        with server.log.into(tmp_path / "item-2.jsonl"):
            assert cached("Where is the ETag set?") == 0  # another item's: nothing confirmed
