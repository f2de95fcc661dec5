"""Gemini CLI's subagents: ``invoke_agent`` (on by default in 0.61.0, ``experimental.enableAgents``) runs a subagent
whose requests reach the model server but whose records are a chat record of its own
(``chats/<session id>/<agent id>.jsonl``). Over a real session against the stand-in delegating to
``codebase_investigator`` (tests/data/gemini/delegated, made by ``record.py --delegate``): the stand-in delegates
and answers as a subagent, the reader puts the subagent's run under the delegating call's thread, the evidence check
holds the whole to the request record, a replay answers the subagent too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.gemini.transcript import COMPLETE_TOOL, kept_chat, kept_subagent_chat, read_gemini
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.model import ScriptedBackend, serve
from pytest_agent_eval.model.gemini import assemble
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.run.backends import cassette_backend
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import MAIN

from support.replay import post, segments  # isort: skip

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/gemini/delegated"
STREAM = "/v1beta/models/{}:streamGenerateContent?alt=sse"


def _entries() -> list[dict[str, Any]]:
    return read_requests(DATA / "requests.jsonl")


def _calls(parts: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(p["functionCall"]["name"], p["functionCall"]["args"]) for p in parts if "functionCall" in p]


def _parts(response: dict[str, Any]) -> list[dict[str, Any]]:
    return response["candidates"][0]["content"]["parts"]


def _subagent_file() -> Path:
    [found] = DATA.glob("*/*.jsonl")
    return found


def test_the_subagents_run_is_read_into_the_delegating_calls_thread() -> None:
    session = read_gemini(segments(DATA))
    [delegated] = [c for c in session.calls if c.name == "invoke_agent"]
    assert (delegated.thread, delegated.input["agent_name"]) == (MAIN, "codebase_investigator")
    assert [c.name for c in session.calls_in(delegated.id)] == ["Grep", COMPLETE_TOOL]
    # each response named by its place in the request record: the subagent's between the delegating one and the next
    places = [(m.id, m.thread) for m in session.messages(thread=None)]
    threads = [MAIN, delegated.id, delegated.id, MAIN, MAIN, MAIN]
    assert places == [(f"gemini-response-{n}", thread) for n, thread in enumerate(threads, start=1)]
    assert len(places) == len(_entries())
    assert "subagents" not in session.unread


def test_the_session_agrees_with_the_request_record_subagent_included_and_a_forged_subagent_record_does_not(
    tmp_path: Path,
) -> None:
    assert evidence(read_gemini(segments(DATA)), _entries(), tool=CODEGRAPH).intact
    shutil.copytree(DATA, tmp_path / "run")
    forged = tmp_path / "run" / _subagent_file().relative_to(DATA)
    forged.write_text(forged.read_text(encoding="utf-8").replace('"pattern":"res\\\\.send"', '"pattern":"x"'),
                      encoding="utf-8")  # fmt: skip
    problems = evidence(read_gemini(segments(tmp_path / "run")), _entries(), tool=CODEGRAPH).problems
    assert any("Grep) differs from what the model sent" in p for p in problems), problems


def test_without_the_subagents_chat_record_the_session_says_so_and_the_evidence_fails(tmp_path: Path) -> None:
    """What reading only the session's chat record did: the subagent's requests reached the model, and the Session
    has none of them; the main thread's messages still pair with their own responses (by their calls and text)."""
    shutil.copytree(DATA, tmp_path / "run")
    shutil.rmtree(tmp_path / "run" / _subagent_file().parent.name)
    session = read_gemini(segments(tmp_path / "run"))
    assert "chat record of subagent" in session.unread["subagents"]
    problems = evidence(session, _entries(), tool=CODEGRAPH).problems
    assert [p.split(" (")[0].split(" for ")[0] for p in problems] == ["tool call toolu_01093b81d2349c4fc6b85f66",
                                                                      "tool result"], problems  # fmt: skip
    assert all("reached the model in request #3, but is not in the transcript" in p for p in problems)


def test_the_kept_records_are_the_harnesss_names_for_them_and_read_alike(tmp_path: Path) -> None:
    shutil.copy(DATA / "events.jsonl", tmp_path / "run-with-1.jsonl")
    chat = kept_chat(tmp_path / "run-with-1.jsonl")
    shutil.copy(next(DATA.glob("session-*.jsonl")), chat)
    shutil.copy(_subagent_file(), kept_subagent_chat(chat, _subagent_file().stem))
    kept = GEMINI.record_files([tmp_path / "run-with-1.jsonl"])
    subagent = f"run-with-1.sub-{_subagent_file().stem}.chat"
    assert [p.name for p in kept] == ["run-with-1.jsonl", "run-with-1.chat", subagent]
    read = GEMINI.read_transcript([tmp_path / "run-with-1.jsonl"])
    assert [(c.id, c.thread) for c in read.calls] == [(c.id, c.thread) for c in read_gemini(segments(DATA)).calls]


def test_the_stand_in_delegates_and_answers_as_the_subagent_as_it_did_through_the_real_cli() -> None:
    """Every recorded request asked of the stand-in again: the same calls (ids aside), the subagent's search through
    its own ``grep_search`` and its end through ``complete_task``, its report filling the tool's schema."""
    entries = _entries()
    with serve(ScriptedBackend(delegate=True)) as server:
        for entry in entries:
            model = entry["path"].split("/models/")[1].split(":")[0]
            status, body = post(server.url, entry["request"], STREAM.format(model))
            assert status == 200, body
            assert _calls(_parts(assemble(body))) == _calls(_parts(entry["response"]))
    [complete] = [c for e in entries for c in _calls(_parts(e["response"])) if c[0] == COMPLETE_TOOL]
    report = complete[1]["report"]
    assert set(report) == {"SummaryOfFindings", "ExplorationTrace", "RelevantLocations"}
    assert "lib/response.js" in report["SummaryOfFindings"]


def test_a_delegating_recording_replays_the_subagents_responses_too() -> None:
    entries = _entries()
    with serve(cassette_backend(segments(DATA))) as server:
        for entry in entries:
            status, body = post(server.url, entry["request"], STREAM.format("any"))
            assert status == 200, body
            assert _calls(_parts(assemble(body))) == _calls(_parts(entry["response"]))
    assert json.dumps(entries[1]["request"]).count(COMPLETE_TOOL) >= 1  # the subagent's first request


def test_a_subagent_record_of_another_agent_is_not_read_and_the_session_says_so(tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "run")
    planted = tmp_path / "run" / _subagent_file().relative_to(DATA)
    planted.write_text(planted.read_text(encoding="utf-8").replace(_subagent_file().stem, "someone-else", 1),
                       encoding="utf-8")  # fmt: skip
    session = read_gemini(segments(tmp_path / "run"))
    assert f"{planted} is not it" in session.unread["subagents"]
    assert not [c for c in session.calls if c.thread != MAIN]


def test_messages_named_out_of_place_still_pair_with_their_own_responses() -> None:
    """A message's name is its guessed place among the streamed responses; subagents run side by side interleave
    their requests in an order no record keeps, so the evidence pairs messages with responses by their calls and
    text, in each thread's own order, not by name. Two names swapped, the Session still agrees with the record."""
    session = read_gemini(segments(DATA))
    first, second = [m for m in session.messages(thread=None) if m.thread != MAIN]
    first.id, second.id = second.id, first.id
    assert evidence(session, _entries(), tool=CODEGRAPH).intact
