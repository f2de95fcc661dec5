"""A Gemini CLI run replayed: the Gemini cassette answers ``:streamGenerateContent`` (and ``:generateContent``) with
the recorded response its history has reached (counted from the request's own ``model`` turns), the calls under the
names the CLI offers and the model's ids, the working directory rewritten to the replaying CLI's. The recordings are
real Gemini CLI sessions against the scripted stand-in, with the stand-in's request record (``tests/data/gemini/``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.gemini.cassette import SIDE_REQUEST_TEXT, GeminiCassetteBackend, sent_call
from pytest_agent_eval.agents.gemini.transcript import kept_chat, read_gemini
from pytest_agent_eval.model import serve
from pytest_agent_eval.model.gemini import assemble
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.run.backends import cassette_backend

from support.replay import post, segments  # isort: skip

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/gemini"
GENERATE = "/v1beta/models/gemini-2.5-pro:generateContent"
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


def _entries(arm: str) -> list[dict[str, Any]]:
    return read_requests(DATA / arm / "requests.jsonl")


def _parts(response: dict[str, Any]) -> list[dict[str, Any]]:
    return response["candidates"][0]["content"]["parts"]


def test_a_gemini_recording_is_a_gemini_cassette() -> None:
    backend = cassette_backend(segments(DATA / "with"))
    assert isinstance(backend, GeminiCassetteBackend)
    assert backend.cwd == "/tmp/gemini-record-9cru7khl/with/repo"
    assert "3 recorded Gemini turns" in backend.describe() and backend.chat.name in backend.describe()


@pytest.mark.parametrize("arm", ["with", "without"])
def test_each_recorded_request_gets_the_recorded_response(arm: str) -> None:
    entries = _entries(arm)
    with serve(cassette_backend(segments(DATA / arm))) as server:
        answers = []
        for entry in entries:
            status, body = post(server.url, entry["request"], STREAM)
            assert status == 200, body
            answers.append(_parts(assemble(body)))
        status, body = post(server.url, entries[1]["request"], GENERATE)  # a retried request, not streamed
        counted = post(server.url, {"contents": entries[1]["request"]["contents"]}, GENERATE.replace(
            "generateContent", "countTokens"))  # fmt: skip
    assert answers == [_parts(entry["response"]) for entry in entries]
    assert status == 200 and _parts(json.loads(body)) == answers[1]
    assert counted[0] == 200 and json.loads(counted[1])["totalTokens"] > 0


def test_the_replayed_turns_are_the_recorded_sessions_over_three_turns() -> None:
    backend = cassette_backend(segments(DATA / "three-turns"))
    recorded = read_gemini(segments(DATA / "three-turns"))
    messages = recorded.messages(thread=None)
    assert len(backend.turns) == len(messages) == 12
    calls = [part["functionCall"] for parts in backend.turns for part in parts if "functionCall" in part]
    assert calls == [{"id": c.id, **sent_call(c.name, c.input)} for c in recorded.calls]
    assert [parts[0]["text"] for parts in backend.turns if "text" in parts[0]] == [r.text for r in recorded.results]


def test_the_recorded_working_directory_is_rewritten_to_the_replaying_clis() -> None:
    backend = cassette_backend(segments(DATA / "without"))
    recorded = backend.cwd
    assert recorded
    request = _entries("without")[1]["request"]
    moved = json.loads(json.dumps(request).replace(recorded, "/work/elsewhere"))
    commands = [part["functionCall"]["args"]["command"] for part in backend.respond_gemini(moved)]
    assert commands == ["cat -n /work/elsewhere/lib/response.js", "cat -n /work/elsewhere/lib/router/index.js"]
    assert backend.respond_gemini(request)[0]["functionCall"]["args"]["command"] == f"cat -n {recorded}/lib/response.js"


def test_a_request_offering_no_tools_and_one_past_the_recording_get_text() -> None:
    backend = cassette_backend(segments(DATA / "with"))
    request = _entries("with")[-1]["request"]
    assert backend.respond_gemini({**request, "tools": []}) == [{"text": SIDE_REQUEST_TEXT}]
    done = {**request, "contents": [*request["contents"], {"role": "model", "parts": [{"text": "x"}]}]}
    assert backend.respond_gemini(done) == [{"text": "(cassette exhausted: the recording has 3 responses)"}]


def test_a_gemini_cassette_answers_no_messages_request(tmp_path: Path) -> None:
    with serve(cassette_backend(segments(DATA / "with"))) as server:
        status, _ = post(server.url, {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "/v1/messages")
        errors = server.errors
    assert status == 500 and "recorded Gemini CLI's Gemini API" in errors[0]


def test_a_gemini_cassette_with_a_torn_line_is_refused_naming_it(tmp_path: Path) -> None:
    for source in (DATA / "with").iterdir():
        shutil.copy(source, tmp_path / source.name)
    chat = next(tmp_path.glob("session-*.jsonl"))
    chat.write_text(chat.read_text(encoding="utf-8") + '{"id": "x", "type": "gemi\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"cassette has 1 unreadable line\(s\): {chat}:\d+"):
        cassette_backend(tmp_path / "events.jsonl")


def test_a_baseline_packs_the_chat_record_kept_beside_the_first_segment(tmp_path: Path) -> None:
    for source in (DATA / "with").iterdir():
        shutil.copy(source, tmp_path / source.name)
    chat = next(tmp_path.glob("session-*.jsonl"))
    chat.rename(kept_chat(tmp_path / "events.jsonl"))  # as the driver keeps it
    kept = GEMINI.record_files([tmp_path / "events.jsonl"])
    assert [path.name for path in kept] == ["events.jsonl", "events.chat"]
    # what a baseline unpacks (those files alone) replays
    packed = tmp_path / "packed"
    packed.mkdir()
    for path in kept:
        shutil.copy(path, packed / path.name)
    assert len(cassette_backend(packed / "events.jsonl").turns) == 3


def _compressed(backend: GeminiCassetteBackend, question: str, answered: list[int]) -> dict[str, Any]:
    """A request after Gemini CLI compressed its history (``ChatCompressionService``): the session so far replaced
    by a summary and the model's acknowledgement, then the kept turns from ``question`` on: the recorded responses
    ``answered`` and their calls' results."""
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "<state_snapshot>what happened so far</state_snapshot>"}]},
        {"role": "model", "parts": [{"text": "Got it. Thanks for the additional context!"}]},
        {"role": "user", "parts": [{"text": question}]},
    ]
    for turn in answered:
        calls = [part["functionCall"] for part in backend.turns[turn] if "functionCall" in part]
        results = [{"functionResponse": {"id": c["id"], "name": c["name"], "response": {"output": "…"}}} for c in calls]
        contents += [{"role": "model", "parts": backend.turns[turn]}, {"role": "user", "parts": results}]
    return {"contents": contents, "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}


def test_a_request_whose_history_was_compressed_gets_the_response_its_turn_reached() -> None:
    """A compression leaves fewer ``model`` turns than responses were given (2 here, after 9): the request is placed
    by its question and the responses to it since, which survive, not by that count (which placed it in turn 1)."""
    backend = cassette_backend(segments(DATA / "three-turns"))
    third = "What would I change to make res.send skip the ETag for bodies larger than 1 MB?"
    second = "Where is the ETag function configured, and how does the app setting reach res.send?"
    def answered(request: dict[str, Any]) -> list[dict[str, Any]]:  # its calls and text, not its thinking
        return [{k: v for k, v in part.items() if k in ("functionCall", "text")}
                for part in backend.respond_gemini(request) if not part.get("thought")]  # fmt: skip

    assert answered(_compressed(backend, third, [8])) == backend.turns[9]
    assert answered(_compressed(backend, second, [])) == backend.turns[4]  # compressed before the turn's first request
    assert answered(_compressed(backend, third, [8, 9, 10])) == backend.turns[11]  # the turn's answer
