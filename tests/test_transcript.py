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
