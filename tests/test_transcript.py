import json

from synth import Transcript, thinking, tool_use

from pytest_agent_eval.transcript import MAIN, Session


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
    session = Session.from_lines(['{"type":"assistant"', "not json", "[1]", '{"type":"weird"}'])
    assert session.parse.bad_lines == 3
    assert session.parse.events == 1


def test_indented_lines_and_trailing_garbage():
    session = Session.from_lines(['   {"type":"result","result":"ok"}  ', '{"type":"result"} trailing', "", "   "])
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
    session = Session.from_lines(lines)
    message, result, attached = session.timeline
    assert message.output_chars == 300 + len("plan") + len("look") + session.calls[0].input_chars
    # A multi-block result is the sum of its blocks, an image by its encoded source; the parsers read its text.
    assert (result.chars, result.text) == (3 + 400 + 5, "one\nthree")
    assert (attached.chars, attached.text) == (400, "")
