"""The stand-in Messages-API server, spoken to with a plain HTTP client (urllib) on loopback."""

from __future__ import annotations

import http.client
import itertools
import json
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.synth import Transcript, explore_response, text, tool_use

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.model import AnthropicBackend, CassetteBackend, Faults, Reply, ScriptedBackend, serve
from pytest_agent_eval.model.record import RequestLog, read_requests, retries_by_turn
from pytest_agent_eval.model.retry import RetryPolicy
from pytest_agent_eval.model.scripted import COMPACT_INSTRUCTION, CONTINUATION, keywords
from pytest_agent_eval.model.usage import (
    UsageModel,
    count_tokens,
    declared_hidden,
    declared_server_context,
    hidden_signature,
    moved_context,
    server_context_id,
    text_tokens,
)
from pytest_agent_eval.run.backends import make_backend

pytestmark = pytest.mark.timeout(60)

EXPLORE_TEXT = (Path(__file__).parent / "data/explore-express-1.6.1.txt").read_text(encoding="utf-8")
EXPLORE = "mcp__codegraph__codegraph_explore"
CWD = "/work/repo"
SYSTEM = [{"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."}]
ENV = {"role": "system", "content": f"# Environment\n - Primary working directory: {CWD}\n"}


def _tool(name: str, **props: str) -> dict[str, Any]:
    properties = {key: {"type": kind} for key, kind in props.items()}
    return {"name": name, "input_schema": {"type": "object", "properties": properties, "required": list(props)}}


WITHOUT_TOOLS = [_tool("Agent", prompt="string"), _tool("Bash", command="string"), _tool("Grep", pattern="string"),
                 _tool("Read", file_path="string")]  # fmt: skip
WITH_TOOLS = [*WITHOUT_TOOLS, _tool(EXPLORE, query="string")]


class Canned:
    """A backend that always gives the same reply (framing tests need no policy)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply

    def respond(self, request: dict[str, Any], headers: Any = None) -> Reply:
        return self.reply

    def describe(self) -> str:
        return "canned"


class Broken:
    def respond(self, request: dict[str, Any], headers: Any = None) -> Reply:
        raise RuntimeError("policy bug")

    def describe(self) -> str:
        return "broken"


# -- a tiny client ------------------------------------------------------------------------------
def _post(url: str, body: dict[str, Any], path: str = "/v1/messages?beta=true", timeout: float = 10):
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", "x-api-key": "k"})  # fmt: skip
    return urllib.request.urlopen(request, timeout=timeout)


def _events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """SSE frames → (event name, data); asserts each frame's name matches its data's type."""
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        data = json.loads(lines["data"])
        assert lines["event"] == data["type"]
        events.append((lines["event"], data))
    return events


def _stream(url: str, body: dict[str, Any]) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
    with _post(url, {**body, "stream": True}) as response:
        return _events(response.read()), response


def _assemble(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Rebuild the message from its events the way a streaming client does."""
    message: dict[str, Any] = {}
    partial: dict[int, str] = {}
    for name, data in events:
        if name == "message_start":
            message = data["message"]
        elif name == "content_block_start":
            assert data["index"] == len(message["content"])
            message["content"].append(dict(data["content_block"]))
        elif name == "content_block_delta":
            block, delta = message["content"][data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
        elif name == "content_block_stop" and data["index"] in partial:
            message["content"][data["index"]]["input"] = json.loads(partial[data["index"]])
        elif name == "message_delta":
            message.update(data["delta"])
            message["usage"] = data["usage"]
    return message


def _request(*messages: dict[str, Any], tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-5-5", "max_tokens": 1000, "system": SYSTEM, "tools": tools or [],
            "messages": list(messages), **extra}  # fmt: skip


def _user(value: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": value}]}


# -- SSE framing ----------------------------------------------------------------------------------
def test_stream_frames_text_tool_use_and_thinking_as_the_api_does() -> None:
    long_text = "The answer is in `lib/response.js`. " * 5
    reply = Reply([{"type": "thinking", "thinking": "plan: read the file", "signature": ""}, text(long_text),
                   tool_use("Read", "toolu_1", file_path="/repo/lib/response.js", limit=40)])  # fmt: skip
    with serve(Canned(reply)) as server:
        events, response = _stream(server.url, _request(_user("hi")))
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["request-id"].startswith("req_")
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 3
    assert names.count("content_block_delta") > 3 + 1  # text and tool input arrive in pieces
    deltas = [d["delta"]["type"] for n, d in events if n == "content_block_delta"]
    assert {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"} == set(deltas)
    message = _assemble(events)
    assert message["role"] == "assistant" and message["model"] == "claude-sonnet-5-5"
    assert message["id"].startswith("msg_") and message["stop_reason"] == "tool_use"
    thinking, said, call = message["content"]
    assert thinking["thinking"] == "plan: read the file" and thinking["signature"]
    assert said == text(long_text)
    assert call == tool_use("Read", "toolu_1", file_path="/repo/lib/response.js", limit=40)


def test_a_text_only_reply_ends_the_turn_and_the_non_streaming_form_matches() -> None:
    with serve(Canned(Reply.text("done"))) as server:
        events, _ = _stream(server.url, _request(_user("hi")))
        with _post(server.url, _request(_user("hi"))) as response:
            body = json.load(response)
    assert _assemble(events)["stop_reason"] == "end_turn"
    assert body["type"] == "message" and body["content"] == [text("done")] and body["stop_reason"] == "end_turn"
    assert set(body["usage"]) >= {"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}


def test_fields_the_cli_sends_are_tolerated() -> None:
    request = _request(
        _user("question"),
        {"role": "system", "content": "# Environment\n - Primary working directory: /x"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, text("a")]},
        _user("again"),
        thinking={"type": "adaptive", "display": "updates"},
        context_management={"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        output_config={"effort": "medium"},
        metadata={"user_id": "{}"},
        some_future_field={"x": 1},
    )
    with serve(Canned(Reply.text("ok"))) as server:
        events, _ = _stream(server.url, request)
        assert server.requests == [{**request, "stream": True}]
    assert _assemble(events)["content"] == [text("ok")]


def test_count_tokens_probes_and_unknown_paths() -> None:
    request = _request(_user("x" * 3000))
    with serve(Canned(Reply.text("ok"))) as server:
        with _post(server.url, request, path="/v1/messages/count_tokens?beta=true") as response:
            counted = json.load(response)["input_tokens"]
        with urllib.request.urlopen(server.url + "/", timeout=5) as response:
            assert response.status == 200
        head = urllib.request.Request(server.url + "/v1/messages", method="HEAD")
        with urllib.request.urlopen(head, timeout=5) as response:
            assert response.status == 200
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url + "/v1/nothing", timeout=5)
        assert json.load(missing.value)["error"]["type"] == "invalid_request_error"
        assert server.requests == []  # probes are not message requests
        assert server.token_counts == [request]
        events, _ = _stream(server.url, request)
    usage = _assemble(events)["usage"]
    assert counted == usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert counted >= text_tokens("x" * 3000) == 3000 // 6


def test_binds_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        serve(Canned(Reply.text("x")), host="0.0.0.0")
    with serve(Canned(Reply.text("x"))) as server:
        assert server.host == "127.0.0.1" and server.url == f"http://127.0.0.1:{server.port}"


# -- usage --------------------------------------------------------------------------------------
def test_usage_reads_the_shared_prefix_from_cache_and_grows_by_what_was_appended() -> None:
    first = _request(_user("Where is res.send?"), ENV, tools=WITH_TOOLS)
    call = tool_use(EXPLORE, "toolu_1", query="res.send")
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": EXPLORE_TEXT}
    appended = [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    second = {**first, "messages": [*first["messages"], *appended]}
    with serve(Canned(Reply.text("ok"))) as server:
        one = _assemble(_stream(server.url, first)[0])["usage"]
        two = _assemble(_stream(server.url, second)[0])["usage"]
    ctx = [u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in (one, two)]
    assert one["cache_read_input_tokens"] == 0 and 0 < one["input_tokens"] <= 10
    assert two["cache_read_input_tokens"] == ctx[0]  # everything the first request sent is cached
    # It grew by exactly what was appended, structure and role framing included.
    assert ctx[1] - ctx[0] == count_tokens(call) + count_tokens(result) + 2 * 4
    assert two["cache_creation_input_tokens"] == ctx[1] - ctx[0] - two["input_tokens"]
    assert [t.count.results for t in server.truth] == [{}, {"toolu_1": count_tokens(result)}]
    assert [t.count.tokens for t in server.truth] == ctx


def test_usage_ignores_moved_cache_markers_and_string_versus_block_content() -> None:
    model = UsageModel()
    plain = _request(_user("q"), {"role": "system", "content": "env"})
    marked = _request(
        {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}]},
        {"role": "system", "content": [{"type": "text", "text": "env"}]},
        _user("more"),
    )
    first, _ = model.usage(plain)
    second, _ = model.usage(marked)
    assert second["cache_read_input_tokens"] == sum(first.values())


def test_text_is_counted_in_pieces_so_code_is_denser_than_prose() -> None:
    prose = "The router walks the middleware stack until one of them sends a response. " * 20
    assert len(prose) / text_tokens(prose) > 4  # words are one token each
    assert len(EXPLORE_TEXT) / text_tokens(EXPLORE_TEXT) < 3  # punctuation and numbers are not
    assert text_tokens("sendOptionsResponse") == 4  # 19 letters: one token per six
    assert text_tokens("") == 0 and count_tokens("") == 1  # an empty string still has its quotes


def test_a_tool_result_costs_its_framing_on_top_of_its_text() -> None:
    small = {"type": "tool_result", "tool_use_id": "toolu_01abcdef0123456789abcdef", "content": "No matches found"}
    framing = count_tokens(small) - text_tokens(small["content"])
    assert 30 <= framing <= 50  # the API's ~40 tokens for type, id and the rest
    listed = {**small, "content": [{"type": "text", "text": small["content"]}]}
    assert count_tokens(listed) > count_tokens(small)  # a content array is more structure


def test_the_truth_is_kept_per_reply_and_appended_to_the_truth_log(tmp_path: Path) -> None:
    call = tool_use(EXPLORE, "toolu_1", query="res.send")
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": EXPLORE_TEXT}
    first = _request(_user("Where is res.send?"), tools=WITH_TOOLS)
    second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": [call]},
                                    {"role": "user", "content": [result]}]}  # fmt: skip
    log = tmp_path / "truth.jsonl"
    with serve(Canned(Reply.text("ok")), truth_log=log) as server:
        replies = [_assemble(_stream(server.url, request)[0]) for request in (first, second)]
        truth = server.truth
    assert [t.message_id for t in truth] == [r["id"] for r in replies]
    usage = replies[1]["usage"]
    assert (
        truth[1].count.tokens
        == usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    )
    assert truth[1].count.results == {"toolu_1": count_tokens(result)}
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert logged == [t.to_dict() for t in truth]


def test_the_truth_log_can_be_set_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_EVAL_TRUTH_LOG", str(tmp_path / "truth.jsonl"))
    with serve(Canned(Reply.text("ok"))) as server:
        _stream(server.url, _request(_user("hello")))
    [record] = [json.loads(line) for line in (tmp_path / "truth.jsonl").read_text().splitlines()]
    assert record["message_id"].startswith("msg_") and record["results"] == {} and record["tokens"] > 0


# -- faults -------------------------------------------------------------------------------------
def test_the_nth_request_fails_with_the_apis_json_error_and_the_next_succeeds() -> None:
    with serve(Canned(Reply.text("ok")), faults={2: "500", 3: "529"}) as server:
        _stream(server.url, _request(_user("1")))
        for status, kind in ((500, "api_error"), (529, "overloaded_error")):
            with pytest.raises(urllib.error.HTTPError) as failed:
                _post(server.url, _request(_user("2"), stream=True))
            assert failed.value.code == status and failed.value.headers["request-id"].startswith("req_")
            body = json.load(failed.value)
            assert body["type"] == "error" and body["error"]["type"] == kind
        events, _ = _stream(server.url, _request(_user("4")))
        assert [h.status for h in server.hits] == [200, 500, 529, 200]
        assert len(server.requests) == 4
    assert _assemble(events)["content"] == [text("ok")]


def test_the_harness_policy_retries_the_models_transient_failures_and_records_every_try(tmp_path: Path) -> None:
    """A 500, a 429 and a cut stream are retried by the server, so the client gets the answer of a later try; the
    request record keeps every try (``retried``) and retries_by_turn counts them."""
    policy = RetryPolicy(tries=4, backoff_s=(0.01,))
    log = RequestLog()
    with serve(Canned(Reply.text("ok")), faults={1: "500", 2: "429", 3: "break"}, retry=policy, log=log) as server:
        with log.into(tmp_path / "requests.jsonl") as path:
            events, _ = _stream(server.url, _request(_user("q")))
        assert [h.status for h in server.hits] == [500, 429, 0, 200] and len(server.requests) == 4  # 0: cut
    assert _assemble(events)["content"] == [text("ok")]
    entries = read_requests(path)
    assert [(e["status"], e["fault"], e.get("retried")) for e in entries] == [
        (500, "500", 1), (429, "429", 2), (0, "break", 3), (200, None, None),
    ]  # fmt: skip
    assert retries_by_turn(entries, [entries[0]["at"] - 1]) == [3]


def test_a_model_that_keeps_failing_is_given_up_with_an_error_no_agent_retries(tmp_path: Path) -> None:
    """The tries spent, the server answers HTTP 400 naming the model's status and message (an agent retries a 5xx
    on its own clock, never a 400), and the log says why for the harness."""
    log = RequestLog()
    with serve(
        Canned(Reply.text("ok")), faults=Faults(default="500"), retry=RetryPolicy(3, (0.01,)), log=log
    ) as server:
        with log.into(tmp_path / "requests.jsonl"):
            with pytest.raises(urllib.error.HTTPError) as failed:
                _post(server.url, _request(_user("q"), stream=True))
            reason = log.gave_up
        assert [h.status for h in server.hits] == [500, 500, 400] and len(server.requests) == 3
    body = json.load(failed.value)
    assert failed.value.code == 400 and body["error"]["type"] == "invalid_request_error"
    assert reason is not None and reason.startswith(
        "the model kept failing: HTTP 500 (api_error: Injected fault), 3 tries"
    )
    # what the agent reads holds no status or words an agent would retry on (OpenCode matches its messages)
    assert not re.search(r"\d|rate.limit|overloaded|server.error|internal|unavailable|try", body["error"]["message"])


def test_a_broken_stream_stops_mid_message() -> None:
    with serve(Canned(Reply.text("a long answer " * 20)), faults=Faults({1: "break"})) as server:
        response = _post(server.url, _request(_user("q"), stream=True))
        assert response.status == 200
        with pytest.raises(http.client.IncompleteRead) as cut:
            response.read()
        names = [name for name, _ in _events(cut.value.partial)]
        assert names == ["message_start", "ping", "content_block_start", "content_block_delta"]
        events, _ = _stream(server.url, _request(_user("q")))  # the server itself is fine
    assert [n for n, _ in events][-1] == "message_stop"


def test_a_stalled_stream_goes_silent_mid_message_then_finishes() -> None:
    answer = "a long answer " * 20
    with serve(Canned(Reply.text(answer)), faults=Faults({1: "stall"}, stall_s=1.5)) as server:
        response = _post(server.url, _request(_user("q"), stream=True))
        arrived = []  # (when, bytes) per read, to find the silence
        while data := response.read1():
            arrived.append((time.monotonic(), data))
        assert server.hits[0].fault == "stall"
        events, _ = _stream(server.url, _request(_user("q")))  # only the planned request stalls
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(arrived)]
    longest = max(range(len(gaps)), key=gaps.__getitem__)
    assert 1.4 <= gaps[longest] < 5 and sorted(gaps)[-2] < 0.5
    before = b"".join(data for _, data in arrived[: longest + 1])
    names = ["message_start", "ping", "content_block_start", "content_block_delta"]
    assert [name for name, _ in _events(before)] == names  # silent after the first delta
    assert _assemble(_events(b"".join(data for _, data in arrived)))["content"] == [text(answer)]
    assert [n for n, _ in events][-1] == "message_stop"


def test_a_stalled_stream_holds_up_no_other_request_and_a_kept_alive_connection_serves_the_next() -> None:
    """Several CLIs (xdist workers, subagents) talk to one server at once: one slow answer must delay nobody
    else, and a connection the client keeps alive must carry its next request (what Node's agent does)."""
    with serve(Canned(Reply.text("ok")), faults=Faults({1: "stall"}, stall_s=3.0)) as server:
        host, port = server.host, server.port
        stalled = http.client.HTTPConnection(host, port, timeout=10)
        body = json.dumps(_request(_user("q"), stream=True))
        stalled.request("POST", "/v1/messages", body=body, headers={"content-type": "application/json"})
        stalled_response = stalled.getresponse()  # headers came; the stream is now silent for 3 s
        kept = http.client.HTTPConnection(host, port, timeout=10)
        started = time.monotonic()
        for _ in range(2):  # two requests, one connection
            kept.request("POST", "/v1/messages", body=body, headers={"content-type": "application/json"})
            response = kept.getresponse()
            assert [n for n, _ in _events(response.read())][-1] == "message_stop"
        answered_s = time.monotonic() - started
        assert [n for n, _ in _events(stalled_response.read())][-1] == "message_stop"
        stalled.close()
        kept.close()
    assert answered_s < 1.0  # not after the stalled one
    assert sorted(str(h.fault) for h in server.hits) == ["None", "None", "stall"]


def test_a_hanging_request_never_answers_until_the_server_stops() -> None:
    server = serve(Canned(Reply.text("ok")), faults=Faults(default="hang"))
    try:
        with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
            _post(server.url, _request(_user("q"), stream=True), timeout=1)
        assert len(server.requests) == 1 and server.hits[0].fault == "hang"
    finally:
        started = time.monotonic()
        server.stop()
    assert time.monotonic() - started < 5


def test_unknown_fault_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        Faults({1: "explode"})


def test_a_failing_backend_answers_500_and_keeps_the_traceback() -> None:
    with serve(Broken()) as server:
        with pytest.raises(urllib.error.HTTPError) as failed:
            _post(server.url, _request(_user("q"), stream=True))
        assert failed.value.code == 500
        assert "policy bug" in server.errors[0]


# -- the scripted policy, through the server ----------------------------------------------------
def _turn(url: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """One request; returns the assembled reply and appends it to ``messages``."""
    message = _assemble(_stream(url, _request(*messages, tools=tools, **extra))[0])
    messages.append({"role": "assistant", "content": message["content"]})
    return message


def _result(messages: list[dict[str, Any]], call_id: str, content: str, is_error: bool = False) -> None:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}
    messages.append({"role": "user", "content": [block]})


def test_with_arm_explores_reads_the_trimmed_file_then_cites_section_headers() -> None:
    question = "How does res.send decide the Content-Type and ETag?"
    messages = [_user(question), ENV]
    with serve(make_backend("scripted")) as server:
        explore = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        assert (explore["name"], explore["input"]) == (EXPLORE, {"query": question})
        _result(messages, explore["id"], EXPLORE_TEXT)
        read = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        # the first gap marker names charsetRegExp (lib/response.js:57): its file is Read
        assert (read["name"], read["input"]) == ("Read", {"file_path": f"{CWD}/lib/response.js"})
        _result(messages, read["id"], "1\tvar res = module.exports")
        answer = _turn(server.url, messages, WITH_TOOLS)
    assert answer["stop_reason"] == "end_turn"
    said = answer["content"][0]["text"]
    for path in ("lib/response.js", "lib/utils.js", "lib/router/index.js"):
        assert f"`{path}`" in said
    assert "`createETagGenerator`" in said and "`jsonp`" in said


def _call_ids(item: Path) -> list[str]:
    """The ids of the calls a scripted server, its log pointed at ``item``'s record, makes in a with-arm turn."""
    messages = [_user("How does res.send decide the Content-Type and ETag?"), ENV]
    item.mkdir(parents=True)
    log = RequestLog()
    with serve(make_backend("scripted"), log=log) as server, log.into(item / "model-requests.jsonl"):
        explore = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        _result(messages, explore["id"], EXPLORE_TEXT)
        read = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        _result(messages, read["id"], "1\tvar res = module.exports")
        _turn(server.url, messages, WITH_TOOLS)
        replies = [message["content"] for message in messages if message["role"] == "assistant"]
        return [block["id"] for content in replies for block in content if block["type"] == "tool_use"]


def test_an_items_call_ids_are_the_same_in_every_campaign_and_its_own(tmp_path: Path) -> None:
    """Random call ids moved the token count of every prompt that repeats them (digits and letters are counted in
    pieces), so two runs of one campaign differed by a few tokens: an item's ids come from its folder's name."""
    first = _call_ids(tmp_path / "campaign-1" / "items" / "express-with-1")
    again = _call_ids(tmp_path / "campaign-2" / "items" / "express-with-1")
    other = _call_ids(tmp_path / "campaign-2" / "items" / "express-with-2")
    assert len(first) == 2 and len(set(first)) == 2 and first == again
    assert all(re.fullmatch(r"toolu_01[0-9a-f]{22}", call) for call in first)
    assert not set(other) & set(first)
    with serve(make_backend("scripted")) as server:  # a server no item's record is pointed at: ids as before
        messages = [_user("How does res.send work?"), ENV]
        assert _turn(server.url, messages, WITH_TOOLS)["content"][0]["id"] not in first


def test_with_arm_can_explore_the_elided_names_instead() -> None:
    messages = [_user("How does res.send work?"), ENV]
    with serve(make_backend("scripted", follow_up="explore")) as server:
        first = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        _result(messages, first["id"], EXPLORE_TEXT)
        again = _turn(server.url, messages, WITH_TOOLS)["content"][0]
    assert again["name"] == EXPLORE and again["input"]["query"].split()[:2] == ["charsetRegExp", "status"]


def test_with_arm_answers_after_an_untrimmed_response_and_greps_after_an_empty_one() -> None:
    untrimmed = explore_response({"lib/a.js": "function a() {}"}, headers={"lib/a.js": "a(function)"})
    untrimmed = untrimmed.replace("trimmed", "shown")
    messages = [_user("where is a?"), ENV]
    with serve(make_backend("scripted")) as server:
        call = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        _result(messages, call["id"], untrimmed)
        assert _turn(server.url, messages, WITH_TOOLS)["content"][0]["text"].endswith("- `lib/a.js`: `a`")
        empty = [_user("where is zebra_stripes?"), ENV]
        call = _turn(server.url, empty, WITH_TOOLS)["content"][0]
        _result(empty, call["id"], "No results found")
        grep = _turn(server.url, empty, WITH_TOOLS)["content"][0]
    assert (grep["name"], grep["input"]["pattern"]) == ("Grep", "zebra_stripes")


def test_without_arm_greps_reads_source_first_tries_the_cli_once_then_answers() -> None:
    question = "How does res.send decide the Content-Type?"
    messages = [_user(question), ENV]
    with serve(make_backend("scripted", reads=2)) as server:
        grep = _turn(server.url, messages, WITHOUT_TOOLS)["content"][0]
        assert (grep["name"], grep["input"]["pattern"]) == ("Grep", r"res\.send")
        _result(messages, grep["id"], "Found 3 files\nHistory.md\nlib/response.js\ntest/res.send.js")
        reads = _turn(server.url, messages, WITHOUT_TOOLS)["content"]
        # two calls in one message; source before docs and tests
        assert [r["input"]["file_path"] for r in reads] == [f"{CWD}/lib/response.js", f"{CWD}/test/res.send.js"]
        _result(messages, reads[0]["id"], "110\t */\n111\tres.send = function send(body) {\n112\t  var chunk")
        messages[-1]["content"].append(
            {"type": "tool_result", "tool_use_id": reads[1]["id"], "content": "1\t'use strict'"}
        )
        bash = _turn(server.url, messages, WITHOUT_TOOLS)["content"][0]
        assert bash["name"] == "Bash" and bash["input"]["command"] == f'codegraph explore "{question}"'
        _result(messages, bash["id"], "codegraph: command not found", is_error=True)
        answer = _turn(server.url, messages, WITHOUT_TOOLS)["content"][0]["text"]
        assert "- `lib/response.js`: `res.send`" in answer and "`test/res.send.js`" in answer
        # a second question starts the policy again (a CLI reminder alone is not a question)
        messages.append(
            {"role": "user", "content": [text("<system-reminder>\nbackground task done\n</system-reminder>")]}
        )
        assert _turn(server.url, messages, WITHOUT_TOOLS)["stop_reason"] == "end_turn"
        messages.append(_user("And where is res.json?"))
        again = _turn(server.url, messages, WITHOUT_TOOLS)["content"][0]
    assert (again["name"], again["input"]["pattern"]) == ("Grep", r"res\.json")


def test_without_arm_tries_the_next_keyword_when_grep_finds_nothing() -> None:
    messages = [_user("How does Express negotiate acceptable languages?"), ENV]
    with serve(make_backend("scripted")) as server:
        first = _turn(server.url, messages, WITHOUT_TOOLS)["content"][0]
        _result(messages, first["id"], "No files found")
        second = _turn(server.url, messages, WITHOUT_TOOLS)["content"][0]
    assert [first["input"]["pattern"], second["input"]["pattern"]] == keywords(messages[0]["content"][0]["text"])[:2]
    assert (first["input"]["pattern"], second["input"]["pattern"]) == ("acceptable", "negotiate")


def test_subagent_requests_grep_once_then_summarise() -> None:
    system = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332; cc_is_subagent=true;"}]
    messages = [_user("Find where etag is generated"), ENV]
    tools = [t for t in WITHOUT_TOOLS if t["name"] != "Agent"]
    with serve(make_backend("scripted")) as server:
        grep = _turn(server.url, messages, tools, system=system)["content"][0]
        assert (grep["name"], grep["input"]["pattern"]) == ("Grep", "generated")
        _result(messages, grep["id"], f"Found 3 files\nREADME.md\n{CWD}/lib/utils.js\n{CWD}/lib/app.js")
        summary = _turn(server.url, messages, tools, system=system)
    assert summary["stop_reason"] == "end_turn"
    assert summary["content"] == [text("Searched for generated: `lib/app.js`, `lib/utils.js`, `README.md`.")]


def test_requests_without_tools_get_a_plain_answer() -> None:
    with serve(make_backend("scripted")) as server:
        message = _turn(server.url, [_user("Summarise this conversation")], [])
    assert message["content"] == [text("OK.")]


def test_scripted_can_emit_thinking_and_refuses_unknown_follow_ups() -> None:
    with serve(make_backend("scripted", thinking=True)) as server:
        blocks = _turn(server.url, [_user("where is res.send?"), ENV], WITH_TOOLS)["content"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"] and "where is res.send" in blocks[0]["thinking"]
    with pytest.raises(ValueError, match="follow_up"):
        ScriptedBackend(follow_up="guess")


# -- cassette -----------------------------------------------------------------------------------
def _recording(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    t = Transcript()
    t.init()
    grep = t.call("Grep", pattern="etag")
    t.reply(grep, "Found 1 file\nlib/utils.js")
    agent = t.call("Agent", prompt="Find the etag generator", description="find etag")
    sub = t.call("Read", thread=agent, file_path="/r/lib/utils.js")
    t.reply(sub, "1\tfunction etag()", thread=agent)
    t.say("It is createETagGenerator.", thread=agent)
    t.reply(agent, "It is createETagGenerator.")
    t.message(text("rate limited"), error="rate_limit")  # the CLI's synthetic message is never replayed
    t.say("`lib/utils.js` builds the ETag.")
    t.result("`lib/utils.js` builds the ETag.")
    return t.write(tmp_path / "run.jsonl"), {"grep": grep, "agent": agent, "sub": sub}


def test_a_cassette_with_a_torn_line_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    path, _ = _recording(tmp_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")  # torn
    with pytest.raises(ValueError, match=rf"1 unreadable line\(s\): {re.escape(str(path))}:{len(lines)}: not a JSON"):
        make_backend("cassette", paths=path)


def test_cassette_replays_each_threads_turns_request_by_request(tmp_path: Path) -> None:
    path, ids = _recording(tmp_path)
    main = [_user("Where is the ETag made?"), ENV]
    sub = [_user("Find the etag generator")]
    with serve(make_backend("cassette", paths=path)) as server:
        first = _turn(server.url, main, WITHOUT_TOOLS)["content"]
        again = _assemble(_stream(server.url, _request(*main[:-1], tools=WITHOUT_TOOLS))[0])["content"]
        assert first == again  # a retried request gets the same recorded turn
        assert first == [tool_use("Grep", ids["grep"], pattern="etag")]
        _result(main, ids["grep"], "Found 1 file\nlib/utils.js")
        assert _turn(server.url, main, WITHOUT_TOOLS)["content"][0]["id"] == ids["agent"]
        assert _turn(server.url, sub, WITHOUT_TOOLS)["content"][0] == tool_use(
            "Read", ids["sub"], file_path="/r/lib/utils.js"
        )
        _result(sub, ids["sub"], "1\tfunction etag()")
        assert _turn(server.url, sub, WITHOUT_TOOLS)["content"] == [text("It is createETagGenerator.")]
        _result(main, ids["agent"], "It is createETagGenerator.")
        assert _turn(server.url, main, WITHOUT_TOOLS)["content"] == [text("`lib/utils.js` builds the ETag.")]
        main.append(_user("one more?"))
        exhausted = _turn(server.url, main, WITHOUT_TOOLS)["content"][0]["text"]
    assert "cassette exhausted" in exhausted
    assert "not a model" in CassetteBackend(path, CLAUDE_CODE).describe()


# -- backends by name ---------------------------------------------------------------------------
REAL_LOOKING = "sk-ant-api03-" + "Q" * 40


def test_make_backend_by_name_and_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "not a model" in make_backend("scripted").describe()
    for placeholder in ("", "sk-test", "sk-ant-placeholder-" + "x" * 40, "dummy"):
        monkeypatch.setenv("ANTHROPIC_API_KEY", placeholder)
        assert isinstance(make_backend("auto"), ScriptedBackend)
        with pytest.raises(ValueError, match="real ANTHROPIC_API_KEY"):
            make_backend("anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_LOOKING)
    backend = make_backend("auto")
    assert isinstance(backend, AnthropicBackend) and backend.base_url == "https://api.anthropic.com"
    assert "real model" in backend.describe()
    with pytest.raises(ValueError, match="unknown model backend"):
        make_backend("gpt")


def test_the_forwarding_backend_relays_an_upstream_stream_untouched() -> None:
    """Pointed at a second local server (never the real API), the stream and usage pass through."""
    with serve(Canned(Reply.text("from upstream"))) as upstream:
        forwarding = AnthropicBackend(api_key=REAL_LOOKING, base_url=upstream.url)
        with serve(forwarding) as server:
            events, _ = _stream(server.url, _request(_user("q")))
            with pytest.raises(urllib.error.HTTPError) as missing:
                _post(server.url, {"bad": True}, path="/v1/messages/x")
        assert missing.value.code == 400  # no path of Claude Code's: refused, never sent on
        assert len(upstream.requests) == 1 and upstream.requests[0]["messages"] == [_user("q")]
    assert _assemble(events)["content"] == [text("from upstream")]


# -- what real models do to the context ------------------------------------------------------------
def test_hidden_thinking_is_counted_as_its_signature_declares_and_named_in_the_truth() -> None:
    model = UsageModel()
    plain = _request(
        _user("q"), {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": "s"}]}
    )
    hiding = {"type": "thinking", "thinking": "", "signature": hidden_signature(1_234, "n")}
    hidden = _request(_user("q"), {"role": "assistant", "content": [hiding]})
    assert model.count_prompt(hidden).tokens - model.count_prompt(plain).tokens >= 1_234
    assert (model.count_prompt(hidden).hidden, model.count_prompt(plain).hidden) == (1_234, 0)
    assert declared_hidden({"type": "text", "text": hidden_signature(5, "n")}) == 0  # only a thinking block hides


LEFT = "<system-reminder>\n<total_tokens>14956424 tokens left</total_tokens>\n</system-reminder>"
SKILLS = "<system-reminder>\nThe following skills are available for the Skill tool:\n- dataviz\n</system-reminder>"


def test_the_session_context_the_cli_moves_into_a_kept_result_is_named_in_the_truth() -> None:
    # After a compaction Claude Code 2.1.332 appends the first message's reminders to the last kept result's text.
    source = '1\tQUOTED = "<system-reminder>x</system-reminder>"\n2\tdone()\n'  # a file may quote one
    moved = {"type": "tool_result", "tool_use_id": "t1", "content": f"{source}\n\n{LEFT}\n\n{SKILLS}"}
    own = {"type": "tool_result", "tool_use_id": "t1", "content": f"{source}\n\n{LEFT}"}
    assert moved_context(moved) == count_tokens(moved) - count_tokens(own) > 0
    assert moved_context(own) == 0  # the tokens-left reminder rides on every latest result: part of its cost
    assert moved_context({"type": "tool_result", "tool_use_id": "t1", "content": source}) == 0
    listed = {"type": "tool_result", "tool_use_id": "t2", "content": [text("out"), text(LEFT), text(SKILLS)]}
    assert moved_context(listed) == count_tokens(text(SKILLS))
    assert moved_context(text(SKILLS)) == 0  # only inside a tool result
    count = UsageModel().count_prompt(_request(_user("q"), {"role": "user", "content": [moved, listed]}))
    assert count.context == {"t1": moved_context(moved), "t2": moved_context(listed)}
    assert count.to_dict()["context"] == count.context
    assert "context" not in UsageModel().count_prompt(_request(_user("q"))).to_dict()  # only where some moved


def test_the_policy_hides_summarises_or_shows_its_thinking_by_step() -> None:
    messages = [_user("How does res.send work?"), ENV]
    backend = make_backend("scripted", hidden_thinking=(0, 3_000), summarised=True, visible_thinking=(600,))
    with serve(backend) as server:
        first = _turn(server.url, messages, WITH_TOOLS)["content"]
        assert [b["type"] for b in first] == ["thinking", "tool_use"]  # step 0: 600 characters shown, nothing hidden
        assert len(first[0]["thinking"]) == 600 and declared_hidden(first[0]) == 0
        _result(messages, first[1]["id"], EXPLORE_TEXT)
        second = _turn(server.url, messages, WITH_TOOLS)
        assert second["content"][0]["thinking"].startswith("Planning step 2")  # a summary, far shorter than 3,000
        assert declared_hidden(second["content"][0]) == 3_000
        assert server.truth[-1].count.hidden == 0  # counted from the next request on, which holds it
        assert second["usage"]["output_tokens"] > 3_000  # the output counts what it hid


def test_server_side_context_is_counted_beside_the_result_its_call_id_declares_and_named_in_the_truth() -> None:
    result = {"type": "tool_result", "tool_use_id": server_context_id(2_500, "n"), "content": "1\tx = 1\n"}
    plain = {**result, "tool_use_id": "toolu_01plain"}
    with_context = UsageModel().count_prompt(_request(_user("q"), {"role": "user", "content": [result]}))
    without = UsageModel().count_prompt(_request(_user("q"), {"role": "user", "content": [plain]}))
    assert with_context.tokens - without.tokens == 2_500 + count_tokens(result) - count_tokens(plain)
    assert with_context.hidden == 2_500 and without.hidden == 0
    assert with_context.results == {result["tool_use_id"]: count_tokens(result)}  # beside the result, not its own
    assert declared_server_context({**result, "type": "text"}) == 0  # only a tool result carries it


def test_the_policy_declares_server_side_context_by_step() -> None:
    messages = [_user("How does res.send work?"), ENV]
    with serve(make_backend("scripted", server_context=(0, 1_200))) as server:
        first = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        assert declared_server_context({"type": "tool_result", "tool_use_id": first["id"]}) == 0
        _result(messages, first["id"], EXPLORE_TEXT)
        second = next(b for b in _turn(server.url, messages, WITH_TOOLS)["content"] if b["type"] == "tool_use")
        _result(messages, second["id"], "1\tmodule.exports = send\n")
        _turn(server.url, messages, WITH_TOOLS)
        assert server.truth[-1].count.hidden == 1_200  # the request that holds the second result holds it


def test_a_compaction_summary_carries_the_question_and_the_policy_answers_after_it() -> None:
    question = "How does res.send work?"
    instruction = {"type": "text", "text": f"CRITICAL: Respond with TEXT ONLY.\n\n{COMPACT_INSTRUCTION}, paying ..."}
    messages = [_user(question), ENV]
    with serve(make_backend("scripted")) as server:
        explore = _turn(server.url, messages, WITH_TOOLS)["content"][0]
        _result(messages, explore["id"], EXPLORE_TEXT)
        messages[-1]["content"].append(instruction)
        summary = _turn(server.url, messages, WITH_TOOLS)["content"][0]["text"]
        assert f"Current question: {question}" in summary and EXPLORE in summary
        continued = [_user(f"{CONTINUATION} that ran out of context. Summary:\n{summary}"), ENV]
        answer = _turn(server.url, continued, WITH_TOOLS)
    assert answer["stop_reason"] == "end_turn"  # it answers with what the compaction kept, not explore again


def test_a_request_in_an_agents_own_tools_is_routed_to_the_speech_its_agent_declares():
    """The server names no agent: the agents' package provides the built-in agents' speech (agents/<name>/stand_in.py)
    and the server routes a request by its API and the speech that claims it; Claude Code's tools are the common
    vocabulary."""
    from pytest_agent_eval.agents.codex import CODEX
    from pytest_agent_eval.agents.gemini import GEMINI
    from pytest_agent_eval.agents.opencode import OPENCODE
    from pytest_agent_eval.model.speech import known_speeches, speech_for

    speeches = known_speeches()
    assert set(speeches) == {CODEX.speech(), GEMINI.speech(), OPENCODE.speech()}
    shell = {"name": "bash", "input_schema": {"properties": {"command": {}, "description": {}}}}
    assert speech_for("messages", {"tools": [shell]}, speeches) is OPENCODE.speech()
    assert speech_for("messages", {"tools": [{"name": "Bash", "input_schema": {}}]}, speeches) is None
    assert speech_for("responses", {"input": []}, speeches) is CODEX.speech()
    assert speech_for("gemini", {"contents": []}, speeches) is GEMINI.speech()
