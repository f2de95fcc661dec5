"""A Codex run replayed: the cassette answers the Responses API with the recorded rollout's output items, matched to
each request as the Messages cassette matches (counted from the request's own history), the working directory
rewritten to the replaying CLI's. The recordings are real Codex CLI 0.171.0 sessions (``tests/data/codex/``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.agents.codex.cassette import ResponsesCassetteBackend, responses_in
from pytest_agent_eval.model import CassetteBackend, serve
from pytest_agent_eval.model.record import RequestLog, read_requests
from pytest_agent_eval.model.responses import assemble_response
from pytest_agent_eval.run.backends import cassette_backend, make_backend

from support.replay import post  # isort: skip
from support.synth import Transcript  # isort: skip

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/codex"
RECORDED_CWD = "/tmp/h29codex/repo"


def _last_request(arm: str) -> dict[str, Any]:
    return json.loads((DATA / arm / "last-request.json").read_text(encoding="utf-8"))


def _cut(request: dict[str, Any], items: int, cwd: str = RECORDED_CWD) -> dict[str, Any]:
    """The request with its first ``items`` input items, as if run in ``cwd``."""
    cut = json.loads(json.dumps(request["input"][:items]).replace(RECORDED_CWD, cwd))
    return {**request, "input": cut}


def _call(item: dict[str, Any]) -> tuple[Any, ...]:
    return item["type"], item.get("call_id"), item.get("name"), item.get("namespace"), item.get("arguments")


def _recorded_outputs(arm: str) -> list[list[dict[str, Any]]]:
    """Each recorded request's output items, straight from the rollout (the oracle the replay is held to)."""
    rollout = next((DATA / arm).glob("rollout-*.jsonl"))
    groups: list[list[dict[str, Any]]] = [[]]
    for line in rollout.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        payload = record["payload"]
        if record["type"] == "response_item" and (
            payload["type"] == "function_call" or (payload["type"] == "message" and payload["role"] == "assistant")
        ):
            groups[-1].append(payload)
        elif record["type"] == "token_usage_record":
            groups.append([])
    return [g for g in groups if g]


def _claude_segment(folder: Path) -> Path:
    """A Claude Code stream-json segment: one answer."""
    transcript = Transcript()
    transcript.init(tools=["Read"])
    transcript.say("It is in lib/response.js.")
    transcript.result("It is in lib/response.js.")
    return transcript.write(folder / "run-with-1.jsonl")


def test_a_codex_recording_is_a_responses_cassette_and_a_claude_one_a_messages_cassette(tmp_path: Path) -> None:
    assert isinstance(cassette_backend(DATA / "with" / "events.jsonl"), ResponsesCassetteBackend)
    assert isinstance(make_backend("cassette", paths=[DATA / "with" / "events.jsonl"]), ResponsesCassetteBackend)
    assert isinstance(cassette_backend([_claude_segment(tmp_path)]), CassetteBackend)


@pytest.mark.parametrize("arm", ["with", "without"])
def test_each_request_gets_the_recorded_response_its_history_has_reached(arm: str, tmp_path: Path) -> None:
    request = _last_request(arm)
    recorded = _recorded_outputs(arm)
    # each recorded response was asked for by the history up to where its items begin (the last, the whole of it)
    outputs = [item.get("type") == "function_call" or item.get("role") == "assistant" for item in request["input"]]
    ends = [i for i in range(1, len(outputs)) if outputs[i] and not outputs[i - 1]] + [len(outputs)]
    assert len(ends) == len(recorded)
    log = RequestLog()
    with serve(cassette_backend(DATA / arm / "events.jsonl"), log=log) as server, log.into(tmp_path / "r.jsonl"):
        answers = []
        for end in ends:
            status, body = post(server.url, _cut(request, end), "/v1/responses")
            assert status == 200
            answers.append(assemble_response(body)["output"])
        retried = post(server.url, _cut(request, ends[0]), "/v1/responses")[1]
        again = assemble_response(retried)["output"]
    for answer, expected in zip(answers, recorded, strict=True):
        assert [_call(i) for i in answer] == [_call(i) for i in expected]
    assert answers[-1][0]["content"] == recorded[-1][0]["content"]  # the answer's text, as recorded
    assert again == answers[0]
    # the record holds what was sent: the evidence check reads the response's id and output from it
    entries = read_requests(tmp_path / "r.jsonl")
    assert [e["response"]["output"] for e in entries[:-1]] == answers


def test_the_recorded_working_directory_is_rewritten_to_the_replaying_clis() -> None:
    request = _last_request("without")
    backend = cassette_backend(DATA / "without" / "events.jsonl")
    assert backend.cwd == RECORDED_CWD
    (read, index) = backend.respond_responses(_cut(request, 6, cwd="/work/elsewhere"))
    assert json.loads(read["arguments"]) == {"cmd": "cat -n /work/elsewhere/lib/response.js"}
    assert json.loads(index["arguments"]) == {"cmd": "cat -n /work/elsewhere/lib/router/index.js"}
    unmoved = backend.respond_responses(_cut(request, 6))
    assert json.loads(unmoved[0]["arguments"]) == {"cmd": f"cat -n {RECORDED_CWD}/lib/response.js"}


def test_responses_are_counted_from_runs_of_the_models_items() -> None:
    request = _last_request("without")
    assert responses_in({"input": request["input"][:4]}) == 0
    # two calls in one response (one run), then their outputs, then the next call
    assert responses_in({"input": request["input"][:9]}) == 2
    assert responses_in(request) == 3


def test_a_resumed_session_replays_the_second_turn_from_the_one_rollout() -> None:
    backend = cassette_backend([DATA / "two-turns" / "events.jsonl", DATA / "two-turns" / "events.t2.jsonl"])
    assert len(backend.turns) == 6 and backend.turns[2][0]["type"] == "message"  # turn 1 ends with its answer
    assert backend.turns[3][0]["namespace"] == "mcp__codegraph"  # turn 2 explores again


def test_past_the_recording_the_cassette_says_it_is_exhausted() -> None:
    request = _last_request("with")
    backend = cassette_backend(DATA / "with" / "events.jsonl")
    done = {**request, "input": [*request["input"], {"type": "message", "role": "assistant",
                                                      "content": [{"type": "output_text", "text": "x"}]}]}  # fmt: skip
    (item,) = backend.respond_responses(done)
    assert "cassette exhausted: the recording has 3 responses" in item["content"][0]["text"]


def test_a_responses_cassette_answers_no_messages_request_and_a_messages_cassette_no_responses_one(
    tmp_path: Path,
) -> None:
    with serve(cassette_backend(DATA / "with" / "events.jsonl")) as server:
        status, _ = post(server.url, {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "/v1/messages")
        errors = server.errors
    assert status == 500 and "recorded Codex's Responses API" in errors[0]
    with serve(cassette_backend([_claude_segment(tmp_path)])) as server:
        status, body = post(server.url, _last_request("with"), "/v1/responses")
    assert status == 400 and b"does not answer the Responses API" in body


def test_a_cassette_with_a_torn_line_is_refused_naming_it(tmp_path: Path) -> None:
    for source in (DATA / "with").iterdir():
        shutil.copy(source, tmp_path / source.name)
    rollout = next(tmp_path.glob("rollout-*.jsonl"))
    rollout.write_text(rollout.read_text(encoding="utf-8") + '{"type": "response_item", "payl\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"cassette has 1 unreadable line\(s\): {rollout}:\d+: not a JSON object"):
        cassette_backend(tmp_path / "events.jsonl")


def test_hosted_tools_are_refused_for_every_backend_and_codexs_own_tools_pass() -> None:
    from pytest_agent_eval.model.refusal import responses_refusal

    request = _last_request("with")
    assert responses_refusal(request) is None
    # the tool search Codex offers a model it knows runs on Codex's side
    known = json.loads((DATA / "known-model-tools.json").read_text(encoding="utf-8"))
    assert responses_refusal({"tools": known}) is None
    hosted = [{"type": "web_search"}, {"type": "mcp", "server_label": "gh", "server_url": "https://x.invalid"},
              {"type": "tool_search"}, {"type": "code_interpreter", "container": {"type": "auto"}}]  # fmt: skip
    for tool in hosted:
        assert "only tools the agent runs itself" in str(responses_refusal({"tools": [tool]}))
    with serve(cassette_backend(DATA / "with" / "events.jsonl")) as server:
        status, body = post(server.url, {**request, "tools": [*request["tools"], hosted[1]]}, "/v1/responses")
        refused = server.refused
    assert status == 400 and b"gh (mcp)" in body and refused[0].startswith("POST /v1/responses: hosted tool(s)")
