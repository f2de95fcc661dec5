import json

import pytest
from support.synth import Transcript, thinking, tool_use

from pytest_agent_eval.agents.claude_code import transcript
from pytest_agent_eval.agents.claude_code.transcript import read_lines, read_segments
from pytest_agent_eval.agents.claude_code.unshown import TOKENS_LEFT, result_suffix
from pytest_agent_eval.transcript import MAIN


@pytest.fixture(autouse=True, params=["msgspec", "stdlib"])
def decoding(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reader test with each decoding (``fast`` or not) as the default one."""
    if request.param == "stdlib":
        monkeypatch.setattr(transcript, "_msgspec_events", lambda: transcript._stdlib_event)


def test_usage_counted_once_per_message_id():
    t = Transcript()
    msg = t.message(thinking("plan"), tool_use("Read", file_path="a.js"), ctx=5_000)
    session = t.session()
    [message] = session.messages()
    assert message.id == msg
    assert message.usage.ctx == 5_000
    assert [c.name for c in message.calls] == ["Read"]
    assert session.parse.events == 2


def test_subagent_events_form_their_own_thread():
    t = Transcript()
    task = t.call("Task", prompt="find it")
    t.call("Grep", thread=task, pattern="x")
    session = t.session()
    assert [c.name for c in session.calls_in(MAIN)] == ["Task"]
    assert [c.name for c in session.calls_in(task)] == ["Grep"]


def test_bad_lines_are_counted_not_fatal():
    session = read_lines(['{"type":"assistant"', "not json", "[1]", '{"type":"weird"}'])
    assert session.parse.bad_lines == 3
    assert session.parse.events == 1


def test_indented_lines_and_trailing_garbage():
    session = read_lines(['   {"type":"result","result":"ok"}  ', '{"type":"result"} trailing', "", "   "])
    assert session.parse.events == 1
    assert session.parse.bad_lines == 1
    assert session.answer_texts() == ["ok"]


def test_an_api_error_names_the_http_status():
    t = Transcript()
    t.message(thinking("x"), error="server_error")
    t.result("API Error: 500", is_error=True)
    t.events[-1]["api_error_status"] = 500
    assert t.session().infra_error == "API error in assistant message: server_error (HTTP 500)"


def _line(event: dict) -> str:
    return json.dumps(event)


def test_every_kind_of_block_is_counted_by_its_characters():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 400}}
    lines = [
        _line(
            {
                "type": "assistant",
                "message": {
                    "id": "m1",
                    "content": [
                        {"type": "redacted_thinking", "data": "R" * 300},
                        {"type": "thinking", "thinking": "plan", "signature": "S" * 50},
                        {"type": "text", "text": "look"},
                        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.js"}},
                    ],
                },
            }
        ),
        _line(
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "one"}, image, {"type": "text", "text": "three"}],
                        },
                        image,
                    ]
                },
            }
        ),
    ]
    session = read_lines(lines)
    message, result, attached = session.timeline
    assert message.output_chars == 300 + len("plan") + len("look") + session.calls[0].input_chars
    # A multi-block result is the sum of its blocks, an image by its encoded source; the parsers read its text.
    assert (result.chars, result.text) == (3 + 400 + 5, "one\nthree")
    assert (attached.chars, attached.text) == (400, "")


def _session_line(event: dict, **keys: str) -> str:
    return json.dumps({**event, **keys})


def _task_session(folder, marked_from: int) -> tuple:
    """A session file whose Task result names agent ``a1``, and that agent's file (no meta file). Lines from
    ``marked_from`` on carry ``sessionId``, as a session file's events do; the earlier ones carry nothing."""
    task = {"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {"prompt": "look"}}
    events = [
        {"type": "assistant", "message": {"id": "m1", "content": [task], "usage": {"input_tokens": 10}}},
        {
            "type": "user",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_task", "content": "done"}]},
            "toolUseResult": {"agentId": "a1", "content": [{"type": "text", "text": "done"}]},
        },
        {"type": "assistant", "message": {"id": "m2", "content": [{"type": "text", "text": "answer"}]}},
    ]
    session_file = folder / "s1.jsonl"
    lines = [
        _session_line(event, **({"sessionId": "s1"} if n >= marked_from else {})) for n, event in enumerate(events)
    ]
    session_file.write_text("\n".join(lines) + "\n")
    agents = folder / "subagents"
    agents.mkdir()
    grep = {"type": "tool_use", "id": "toolu_grep", "name": "Grep", "input": {"pattern": "x"}}
    agent_event = {"type": "assistant", "message": {"id": "m3", "content": [grep]}, "sessionId": "s1"}
    (agents / "agent-a1.jsonl").write_text(json.dumps(agent_event) + "\n")
    return session_file


def test_a_single_session_file_read_as_segments_links_its_subagent_through_a_result_read_before_the_sniff(tmp_path):
    """The Task result comes before any line says the file is a session file: its agent id is still read."""
    session = read_segments([_task_session(tmp_path, marked_from=2)])
    assert [c.name for c in session.calls_in("toolu_task")] == ["Grep"]
    assert not session.ends_mid_turn  # a session file has no result event to miss


def test_a_file_no_line_marks_as_a_session_file_is_stream_json(tmp_path):
    session = read_segments([_task_session(tmp_path, marked_from=3)])  # no line carries sessionId
    assert [c.name for c in session.calls] == ["Task"]  # the agent file is not stitched in
    assert session.ends_mid_turn  # stream-json without its result event


def test_a_line_only_the_lenient_reading_accepts_keeps_its_result():
    """Infinity in the structured copy (which the typed decode skips) makes the line non-JSON to msgspec: the
    lenient reading takes it, and the result is read from its tool_result block all the same."""
    read = tool_use("Read", call_id="toolu_1", file_path="a.js")
    lines = [
        _line({"type": "assistant", "message": {"id": "m1", "content": [read]}}),
        _line(
            {
                "type": "user",
                "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"}]},
                "tool_use_result": {"file": {"content": "x = 1", "numLines": [1e999, {"deep": [[["y"]]]}]}},
            }
        ),
    ]
    session = read_lines(lines)
    [call] = session.calls
    assert call.result is not None and call.result.text == "x = 1"
    assert session.parse.bad_lines == 0


def test_an_init_event_offers_its_tools_and_is_kept_whole(tmp_path):
    t = Transcript()
    servers = [{"name": "codegraph", "status": "connected"}]
    t.init(tools=["Read", "mcp__codegraph__codegraph_explore"], mcp_servers=servers)
    t.events[0]["slash_commands"] = ["compact"] * 500  # what the metrics never read: decoded when asked for
    t.say("done")
    path = t.write(tmp_path / "run.jsonl")
    session = read_segments([path])
    assert session.offers == [(["Read", "mcp__codegraph__codegraph_explore"], servers)]
    assert session.inits == [t.events[0]]
    assert all(isinstance(line, bytes) for line in session.init_lines)  # a copy, not a view holding the whole file


@pytest.mark.parametrize(
    ("key", "kept"),
    [("compact_metadata", "preserved_messages"), ("compactMetadata", "preservedMessages")],
    ids=["stream-json", "session file"],
)
def test_a_compaction_names_the_messages_it_keeps_by_their_events_uuids(key, kept):
    boundary = {"type": "system", "subtype": "compact_boundary", key: {"trigger": "auto", "pre_tokens": 9,
                kept: {"anchor_uuid": "a", "uuids": ["u-call", "u-result", 7]}}}  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x"}
    lines = [
        json.dumps({"type": "user", "uuid": "u-result", "message": {"role": "user", "content": [result]}}),
        json.dumps(boundary),
        json.dumps({"type": "system", "subtype": "compact_boundary", key: {"trigger": "auto"}}),
    ]
    session = read_lines(lines)
    result, first, second = session.timeline
    assert result.uuid == "u-result"
    assert (first.preserved, first.pre_tokens) == (frozenset({"u-call", "u-result"}), 9)
    assert second.preserved == frozenset()


def test_a_segments_declared_output_is_read_off_its_result_event():
    t = Transcript()
    t.say("done", ctx=10_000)
    t.result("done")
    t.events[-1]["usage"] = {"input_tokens": 3, "output_tokens": 3_310}
    assert t.session().results[0].output_tokens == 3_310


@pytest.mark.parametrize(
    ("model", "version", "reminded"),
    [
        ("claude-sonnet-4-5", "2.1.332", True),
        ("claude-opus-4-5-20251101", "2.1.332", True),  # a provider's dated id
        ("claude-sonnet-4-5[1m]", "2.1.332", True),  # with the context-window suffix
        ("claude-sonnet-5", "2.1.332", True),
        ("claude-sonnet-5-5", "2.1.332", False),  # the table gives it no total_tokens_reminder capability
        ("claude-sonnet-5-5-20260101", "2.1.332", False),  # not claude-sonnet-5 with a date
        ("stand-in-scripted", "2.1.332", False),  # a model the table does not hold
        ("claude-sonnet-4-5", "2.1.331", False),  # a version whose table nobody here read
        ("claude-sonnet-4-5", None, False),
        (None, "2.1.332", False),
    ],
)
def test_what_claude_code_appends_unseen_is_read_off_its_version_and_the_model_it_asked_for(model, version, reminded):
    # The tokens-left reminder (agents/claude_code/unshown.py): the init event names the model the CLI asked for,
    # whatever model answered (here the stand-in, which names itself).
    t = Transcript()
    t.init(model=model, version=version)
    t.say("done", ctx=10_000)
    t.result("done")
    for fast in (True, False):
        assert read_lines(t.lines(), fast=fast).result_suffix == (TOKENS_LEFT if reminded else "")
    assert result_suffix(version, model) == (TOKENS_LEFT if reminded else "")


@pytest.mark.parametrize("model", ["claude-sonnet-4-5-20250929", "claude-sonnet-5-5"])
def test_a_session_files_events_name_the_version_and_its_messages_the_model(model):
    # A session file has no init event: each event names the CLI's version, each message the model that answered.
    def event(kind: str, uuid: str, message: dict) -> str:
        return json.dumps({"type": kind, "sessionId": "s", "uuid": uuid, "version": "2.1.332", "message": message})

    lines = [
        event("user", "u1", {"role": "user", "content": "q"}),
        event("assistant", "a1", {"id": "m1", "role": "assistant", "model": model,
                                  "content": [{"type": "text", "text": "done"}]}),
    ]  # fmt: skip
    for fast in (True, False):
        assert read_lines(lines, fast=fast).result_suffix == ("" if model.endswith("5-5") else TOKENS_LEFT)
