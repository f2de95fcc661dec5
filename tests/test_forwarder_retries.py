"""Every forwarder to a real API (Messages, Responses, Gemini) is under the harness's one retry policy
(docs/model-boundary.md, "The model's transient errors: one retry policy"): the API's 5xx and 429 (after its
retry-after) and a connection closed before it answered are tried again, each try is in the request record, and a
model that keeps failing is given up with an error no agent retries, naming the API's status and message. The
upstream is a fake API on 127.0.0.1 that fails first, never the real one."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.upstream import Failure, fake_api

from pytest_agent_eval.model import AnthropicBackend, GeminiForwarder, OpenAIBackend, serve
from pytest_agent_eval.model.gemini import stream_frames
from pytest_agent_eval.model.record import RequestLog, read_requests
from pytest_agent_eval.model.responses import stream_events as response_events
from pytest_agent_eval.model.retry import RetryPolicy
from pytest_agent_eval.model.sse import Reply, stream_events

pytestmark = pytest.mark.timeout(60)

MODEL = "stand-in-scripted"
FAST = RetryPolicy(tries=3, backoff_s=(0.01,))  # the harness's policy with waits too short to matter


@dataclass(frozen=True)
class Api:
    """One forwarder's case: its backend for an upstream URL, the CLI's path and request, what the upstream streams
    when it answers, and an error body in the API's own shape."""

    name: str
    backend: Callable[[str], Any]
    path: str
    request: dict[str, Any]
    answer: bytes
    error: Callable[[int, str, str], dict[str, Any]]


def _messages_error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _responses_error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message}}


def _gemini_error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": kind}}


USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}  # fmt: skip
ANSWER = {
    "id": "msg_up",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "from upstream"}],
}
QUESTION = [{"type": "message", "role": "user", "content": "q"}]
APIS = [
    Api(
        "messages", lambda url: AnthropicBackend(api_key="sk-ant-api03-" + "K3y" * 20, base_url=url), "/v1/messages",
        {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "q"}]},
        b"".join(stream_events(Reply.text("from upstream"), "claude-real", {"input_tokens": 3}, "msg_01up")),
        _messages_error,
    ),
    Api(
        "responses", lambda url: OpenAIBackend(api_key="sk-proj-" + "K3y" * 20, base_url=url + "/v1"),
        "/v1/responses", {"model": MODEL, "stream": True, "input": QUESTION},
        b"".join(response_events([ANSWER], "gpt-real", USAGE, "resp_up")), _responses_error,
    ),
    Api(
        "gemini", lambda url: GeminiForwarder(api_key="the-harness-key", base_url=url, model=MODEL),
        f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "q"}]}]},
        b"".join(stream_frames([{"text": "from upstream"}], "gemini-real", {"promptTokenCount": 7}, "resp-1")),
        _gemini_error,
    ),
]  # fmt: skip


def _failure(api: Api, status: int, kind: str, message: str, retry_after: str | None = None) -> Failure:
    return (
        status,
        json.dumps(api.error(status, kind, message)).encode(),
        {"retry-after": retry_after} if retry_after else {},
    )


def _post(url: str, api: Api) -> tuple[int, bytes]:
    request = urllib.request.Request(url + api.path, data=json.dumps(api.request).encode(), method="POST",
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("api", APIS, ids=[api.name for api in APIS])
def test_the_apis_5xx_and_429_are_retried_by_the_forwarder_and_every_try_recorded(api: Api, tmp_path: Path) -> None:
    failures = [_failure(api, 503, "UNAVAILABLE", "overloaded"), _failure(api, 429, "RATE", "slow down", "0")]
    log = RequestLog()
    with fake_api(lambda path, body: (api.answer, "text/event-stream"), failures) as upstream:
        with serve(api.backend(upstream.url), retry=FAST, log=log) as server, log.into(tmp_path / "r.jsonl"):
            status, body = _post(server.url, api)
            hits = [h.status for h in server.hits]
    assert (status, body) == (200, api.answer)  # the agent sees the later try's answer, byte for byte
    assert [sent for _, _, sent in upstream.seen] == [api.request] * 3 and hits == [503, 429, 200]
    entries = read_requests(tmp_path / "r.jsonl")
    assert [(e["status"], e.get("retried")) for e in entries] == [(503, 1), (429, 2), (200, None)]
    assert (
        entries[0]["response"] == api.error(503, "UNAVAILABLE", "overloaded") and entries[0]["request"] == api.request
    )


@pytest.mark.parametrize("api", APIS, ids=[api.name for api in APIS])
def test_a_real_model_that_keeps_failing_is_given_up_naming_its_status_and_message(api: Api, tmp_path: Path) -> None:
    failures = [_failure(api, 500, "INTERNAL", "the model is down")] * FAST.tries
    log = RequestLog()
    with fake_api(lambda path, body: (api.answer, "text/event-stream"), failures) as upstream:
        with serve(api.backend(upstream.url), retry=FAST, log=log) as server, log.into(tmp_path / "r.jsonl"):
            status, body = _post(server.url, api)
            reason = log.gave_up
    assert len(upstream.seen) == FAST.tries
    # an error no agent retries on its own clock: a 400 of words alone (docs/model-boundary.md)
    message = json.loads(body)["error"]["message"]
    assert status == 400 and message.startswith("agent-eval: the model kept failing") and not re.search(r"\d", message)
    assert reason is not None and reason.startswith(
        "the model kept failing: HTTP 500 (INTERNAL: the model is down), 3 tries"
    )
    last = read_requests(tmp_path / "r.jsonl")[-1]
    assert last["status"] == 400 and last["gave_up"] == reason


@pytest.mark.parametrize("api", APIS, ids=[api.name for api in APIS])
def test_an_api_that_closed_the_connection_without_answering_is_tried_again(api: Api, tmp_path: Path) -> None:
    log = RequestLog()
    with fake_api(lambda path, body: (api.answer, "text/event-stream"), [(0, b"", {})]) as upstream:
        with serve(api.backend(upstream.url), retry=FAST, log=log) as server, log.into(tmp_path / "r.jsonl"):
            status, body = _post(server.url, api)
            errors = server.errors
    assert (status, body) == (200, api.answer) and len(upstream.seen) == 2 and errors == []
    first, answered = read_requests(tmp_path / "r.jsonl")
    assert (first["status"], first["retried"], answered["status"]) == (0, 1, 200)
    assert first["response"].startswith("could not be reached (Remote end closed connection without response")


def test_an_api_that_cannot_be_reached_is_given_up_saying_so(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    log = RequestLog()
    with serve(APIS[2].backend(url), retry=FAST, log=log) as server, log.into(tmp_path / "r.jsonl"):
        status, body = _post(server.url, APIS[2])
        reason = log.gave_up
    assert status == 400 and json.loads(body)["error"]["message"].startswith("agent-eval: the model kept failing")
    assert reason is not None and reason.startswith("the model kept failing: could not be reached (")
    assert "Connection refused" in reason and ", 3 tries over " in reason
