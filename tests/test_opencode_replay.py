"""An OpenCode run replayed: the Messages cassette answers each request with the recorded step its history has
reached (counted from the request's own assistant messages), the calls as OpenCode received them (its tool names, the
model's ``toolu_`` ids), the working directory rewritten to the replaying CLI's. The recordings are real OpenCode
1.18.33 sessions against the scripted stand-in, with the stand-in's request record (``tests/data/opencode/``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.agents.opencode.cassette import REPLAY_TITLE, OpenCodeCassetteBackend
from pytest_agent_eval.agents.opencode.transcript import read_opencode
from pytest_agent_eval.model import CassetteBackend, serve
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.run.backends import cassette_backend

from support.replay import post, segments  # isort: skip

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/opencode"


def _entries(arm: str) -> list[dict[str, Any]]:
    return read_requests(DATA / arm / "requests.jsonl")


def _answer(url: str, request: dict[str, Any]) -> list[dict[str, Any]]:
    status, body = post(url, {**request, "stream": False}, "/v1/messages")
    assert status == 200, body
    return json.loads(body)["content"]


def test_an_opencode_recording_is_a_messages_cassette_of_its_own() -> None:
    backend = cassette_backend(segments(DATA / "with"))
    assert isinstance(backend, OpenCodeCassetteBackend) and isinstance(backend, CassetteBackend)
    assert backend.cwd == (DATA / "with" / "events.cwd").read_text(encoding="utf-8")


@pytest.mark.parametrize("arm", ["with", "without", "two-turns", "delegated"])
def test_each_recorded_request_gets_the_recorded_response(arm: str) -> None:
    entries = _entries(arm)
    with serve(cassette_backend(segments(DATA / arm))) as server:
        answers = [_answer(server.url, entry["request"]) for entry in entries]
        again = _answer(server.url, entries[2]["request"])  # a retried request
    # the first request is OpenCode's session title (no tools): no step of the recording
    assert not entries[0]["request"].get("tools")
    assert answers[0] == [{"type": "text", "text": REPLAY_TITLE}]
    assert answers[1:] == [entry["response"]["content"] for entry in entries[1:]]
    assert again == answers[2]


def test_the_replayed_steps_are_the_recorded_sessions() -> None:
    backend = cassette_backend(segments(DATA / "two-turns"))
    recorded = read_opencode(segments(DATA / "two-turns"))
    replayed = [block for reply in backend.turns["main"] for block in reply.blocks if block["type"] == "tool_use"]
    assert [(b["id"], b["name"], b["input"]) for b in replayed] == [(c.id, *c.sent_as) for c in recorded.calls]
    assert all(c.id.startswith("toolu_") for c in recorded.calls) and len(replayed) == 4


def test_the_recorded_working_directory_is_rewritten_to_the_replaying_clis() -> None:
    backend = cassette_backend(segments(DATA / "without"))
    recorded = backend.cwd
    request = _entries("without")[2]["request"]
    moved = json.loads(json.dumps(request).replace(recorded, "/work/elsewhere"))
    reads = [block["input"]["command"] for block in backend.respond(moved).blocks]
    assert reads == ["cat -n /work/elsewhere/lib/response.js", "cat -n /work/elsewhere/lib/router/index.js"]
    assert backend.respond(request).blocks[0]["input"]["command"] == f"cat -n {recorded}/lib/response.js"


def test_without_its_working_directory_a_recording_replays_its_paths_as_recorded_and_says_so(tmp_path: Path) -> None:
    for source in (DATA / "without").iterdir():
        shutil.copy(source, tmp_path / source.name)
    (tmp_path / "events.cwd").unlink()
    backend = cassette_backend(segments(tmp_path))
    assert backend.cwd is None and "no events.cwd beside it: paths replayed as recorded" in backend.describe()


def test_past_the_recording_the_cassette_says_it_is_exhausted() -> None:
    request = _entries("with")[-1]["request"]
    done = {**request, "messages": [*request["messages"], {"role": "assistant", "content": "x"}]}
    (block,) = cassette_backend(segments(DATA / "with")).respond(done).blocks
    assert "cassette exhausted: thread main has 3 recorded turns" in block["text"]


def test_an_opencode_cassette_with_a_torn_line_is_refused_naming_it(tmp_path: Path) -> None:
    for source in (DATA / "with").iterdir():
        shutil.copy(source, tmp_path / source.name)
    events = tmp_path / "events.jsonl"
    events.write_text(events.read_text(encoding="utf-8") + '{"type": "text", "sessionID": "ses_x", "par\n',
                      encoding="utf-8")  # fmt: skip
    with pytest.raises(ValueError, match=rf"cassette has 1 unreadable line\(s\): {events}:\d+"):
        cassette_backend(events)


def test_a_baseline_packs_the_working_directory_and_config_kept_beside_the_first_segment() -> None:
    kept = OPENCODE.record_files(segments(DATA / "two-turns"))
    names = ["events.jsonl", "events.t2.jsonl", "events.opencode.json", "events.cwd", "events.subagents"]
    assert [path.name for path in kept] == names
    assert [path.is_file() for path in kept] == [True] * 4 + [False]  # no subagent ran: nothing kept, nothing packed
    assert all(path.is_file() for path in OPENCODE.record_files(segments(DATA / "delegated")))
