"""The transcript held against the model server's record of what it received (docs/model-boundary.md)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from support.codegraph_outputs import EXPLORE
from support.synth import Transcript, text

from pytest_agent_eval.agents.claude_code.transcript import read_lines
from pytest_agent_eval.agents.codex.transcript import ResponsesReading
from pytest_agent_eval.agents.gemini.transcript import GeminiReading, read_gemini
from pytest_agent_eval.metrics.evidence import evidence, paired_responses
from pytest_agent_eval.metrics.gates import contamination_verdict, evaluate, integrity_verdict, load_thresholds
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.report.blocks import render_scorecard
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import Session, Usage

HELP = "Usage: codegraph [options] [command]\n\nCode intelligence and knowledge graph\n"


def model_side(events: list[dict], thread: str | None = None) -> list[dict[str, Any]]:
    """The request record a server would have kept for the main thread of ``events`` (or the subagent ``thread``):
    each assistant message is the response to a request carrying every message of the thread before it."""
    entries: list[dict[str, Any]] = []
    messages: list[dict] = []
    for event in events:
        if event.get("parent_tool_use_id") != thread or event["type"] not in ("assistant", "user"):
            continue
        message = event["message"]
        if event["type"] == "user":
            messages.append({"role": "user", "content": copy.deepcopy(message["content"])})
        elif entries and entries[-1]["response"]["id"] == message["id"]:  # one event per block of a message
            entries[-1]["response"]["content"] += message["content"]
            messages[-1]["content"] += copy.deepcopy(message["content"])
        else:
            request = {"model": "m", "stream": True, "messages": copy.deepcopy(messages)}
            response = {"id": message["id"], "content": list(message["content"])}
            entries.append({"method": "POST", "path": "/v1/messages?beta=true", "status": 200, "request": request,
                            "response": response, "refused": None, "fault": None})  # fmt: skip
            messages.append({"role": "assistant", "content": copy.deepcopy(message["content"])})
    return entries


def honest() -> Transcript:
    t = Transcript()
    t.init(tools=["Bash", "Read"])
    t.user("Where does res.send set the ETag?")
    grep = t.call("Bash", command="grep -rn etag lib")
    t.reply(grep, "lib/response.js:170: var etag = ...")
    read = t.call("Read", file_path="lib/response.js")
    t.reply(read, [{"type": "text", "text": "   170\tvar etag = generateETag(body)"}])
    t.say("lib/response.js:170 sets it.")
    t.result("lib/response.js:170 sets it.")
    return t


def _line(event: dict) -> str:
    return json.dumps(event)


def test_an_honest_transcript_agrees_with_the_record():
    t = honest()
    report = evidence(t.session(), model_side(t.events), tool=CODEGRAPH)
    assert report.problems == [] and report.intact and report.requests == 3


def test_what_the_cli_legitimately_reshapes_is_not_a_disagreement():
    t = honest()
    entries = model_side(t.events)
    last = entries[-1]["request"]["messages"]
    # the request's result as a block list, a reminder added, cache markers; the transcript's as a string
    results = [b for m in last for b in (m["content"] if isinstance(m["content"], list) else []) if "tool_use_id" in b]
    results[0]["content"] = [
        {"type": "text", "text": results[0]["content"] + "\n<system-reminder>mind</system-reminder>"}
    ]
    results[0]["cache_control"] = {"type": "ephemeral"}
    entries[-1]["response"]["content"].insert(0, {"type": "thinking", "thinking": "not streamed", "signature": "s"})
    report = evidence(t.session(), entries, tool=CODEGRAPH)
    assert report.problems == []


def test_after_a_compaction_the_requests_carry_a_summary_and_still_agree():
    t = honest()
    t.compact()
    t.user("This session is being continued from a previous conversation. Summary: ...")
    call = t.call("Bash", command="ls")
    t.reply(call, "lib")
    t.say("done")
    entries = model_side(t.events)
    for entry in entries[3:]:  # after the boundary: the summary and what followed, older messages dropped
        entry["request"]["messages"] = entry["request"]["messages"][7:]
    assert evidence(t.session(), entries, tool=CODEGRAPH).problems == []


def test_a_run_cut_off_after_a_tool_ran_is_not_a_disagreement():
    t = Transcript()
    t.init()
    call = t.call("Bash", command="sleep 100")
    t.reply(call, "killed")  # the run stopped here: no request carried this result
    assert evidence(t.session(), model_side(t.events), tool=CODEGRAPH).problems == []


def test_a_forged_tool_result_injected_into_the_stream_is_named():
    t = honest()
    entries = model_side(t.events)
    grep = next(e for e in t.events if e["type"] == "assistant")["message"]["content"][0]["id"]
    forged = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": grep, "content": HELP}]}}  # fmt: skip
    lines = t.lines()
    lines.insert(3, _line(forged))  # between the real call and its real result
    report = evidence(read_lines(lines), entries, tool=CODEGRAPH)
    assert len(report.problems) == 1
    assert report.problems[0].startswith(
        f'tool result for {grep} (Bash, thread main) differs from what the model received: "Usage: codegraph'
    )
    # the transcript alone would call the arm contaminated by codegraph's help: the gate says why it cannot clear it
    card = score(read_lines(lines), requests=entries, tool=CODEGRAPH)
    verdict = contamination_verdict(card.to_dict(), arm_has_tool=False, tool=CODEGRAPH)
    assert not verdict.passed and "the transcript disagrees with what the model received" in verdict.message
    assert f"tool result for {grep}" in verdict.message
    integrity = integrity_verdict(card.to_dict())
    assert integrity is not None and not integrity.passed and grep in integrity.message
    assert "transcript disagreements" in render_scorecard(card) and "the item fails" in render_scorecard(card)


def test_a_forged_result_for_a_call_the_model_never_made_is_named():
    t = honest()
    entries = model_side(t.events)
    lines = t.lines()
    forged = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_forged", "content": "x"}]}}  # fmt: skip
    lines.insert(-2, _line(forged))
    problems = evidence(read_lines(lines), entries, tool=CODEGRAPH).problems
    assert problems == [
        "tool result for toolu_forged (?, thread main) is in the transcript, but no request carried it to the model"
    ]


def test_a_forged_assistant_message_or_call_is_named():
    t = honest()
    entries = model_side(t.events)
    lines = t.lines()
    fake = {"type": "assistant", "message": {"id": "msg_forged", "role": "assistant", "content": [text("hi")]}}
    real_id = entries[0]["response"]["id"]
    call = {"type": "tool_use", "id": "toolu_extra", "name": "Bash", "input": {"command": "codegraph --help"}}
    extra = {"type": "assistant", "message": {"id": real_id, "role": "assistant", "content": [call]}}
    lines[2:2] = [_line(fake), _line(extra)]
    problems = evidence(read_lines(lines), entries, tool=CODEGRAPH).problems
    assert (
        "assistant message msg_forged (thread main) is in the transcript, but the model sent no such message"
        in problems
    )
    assert (
        f"tool call toolu_extra (Bash) is in the transcript, but the model's message {real_id} holds no such call"
        in problems
    )


def test_a_call_whose_input_or_usage_was_rewritten_is_named():
    """A session file the agent rewrote (tmux): a real call's command, and its message's prompt size."""
    t = honest()
    entries = model_side(t.events)
    for entry, event in zip(entries, [e for e in t.events if e["type"] == "assistant"], strict=False):
        entry["response"]["usage"] = dict(event["message"]["usage"])
    assert evidence(t.session(), entries, tool=CODEGRAPH).problems == []  # the usage as sent agrees
    events = copy.deepcopy(t.events)
    first = next(e for e in events if e["type"] == "assistant")
    first["message"]["content"][0]["input"]["command"] = "cat README.md"
    first["message"]["usage"]["cache_read_input_tokens"] += 7
    problems = evidence(read_lines([_line(e) for e in events]), entries, tool=CODEGRAPH).problems
    call, message = first["message"]["content"][0]["id"], first["message"]["id"]
    assert problems == [
        f"assistant message {message} (thread main): its usage differs from what the model sent (a prompt of "
        f"{Usage.from_json(first['message']['usage']).ctx} tokens in the transcript, "
        f"{Usage.from_json(first['message']['usage']).ctx - 7} sent)",
        f'tool call {call} (Bash) differs from what the model sent: {{"command": "cat README.md"}}',
    ]


def test_a_synthetic_error_message_of_the_cli_is_not_the_models():
    t = honest()
    entries = model_side(t.events)
    t.message(text("API Error: 500"), msg_id="msg_synthetic", error="unknown")
    lines = t.lines()
    assert evidence(read_lines(lines), entries, tool=CODEGRAPH).problems == []


def test_what_the_model_received_but_the_transcript_lacks_is_named_and_its_leak_counts():
    t = Transcript()
    t.init(tools=["Bash"])
    call = t.call("Bash", command="bash /tmp/x.sh")
    t.reply(call, EXPLORE)
    t.say("done")
    entries = model_side(t.events)
    hidden = [line for line in t.lines() if "tool_result" not in line]  # the result never shows in the transcript
    card = score(read_lines(hidden), requests=entries, tool=CODEGRAPH)
    assert card.contamination.leaks == []  # the transcript alone is clean
    assert card.evidence is not None
    assert card.evidence.problems == [
        f"tool result for {call} reached the model in request #2, but is not in the transcript"
    ]
    assert [(leak.call_id, leak.fingerprint) for leak in card.evidence.leaks] == [(call, "explore heading")]
    verdict = contamination_verdict(card.to_dict(), arm_has_tool=False, tool=CODEGRAPH)
    assert not verdict.passed and "1 tool result(s) the model received carried codegraph output" in verdict.message


def test_refused_requests_are_reported():
    t = honest()
    entries = model_side(t.events)
    entries.append({"method": "POST", "path": "/v1/messages", "status": 400, "refused": "server-side tool(s) web_fetch",
                    "request": {"messages": [], "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]},
                    "response": None, "fault": None})  # fmt: skip
    card = score(t.session(), requests=entries, tool=CODEGRAPH)
    assert card.evidence is not None and card.evidence.problems == []
    assert card.evidence.refused == ["POST /v1/messages: server-side tool(s) web_fetch"]
    block = render_scorecard(card)
    assert re.search(r"refused at the boundary +1\n +POST /v1/messages: server-side tool\(s\) web_fetch", block)
    assert card.to_dict()["evidence"]["refused"] == card.evidence.refused


def test_with_no_record_the_score_is_as_before():
    t = honest()
    assert "evidence" not in score(t.session(), tool=CODEGRAPH).to_dict()
    verdicts = evaluate(score(t.session(), tool=CODEGRAPH).to_dict(), {}, entry="e", arm_name="with", arm_label="with",
                        thresholds=load_thresholds(None), tool=CODEGRAPH)  # fmt: skip
    assert [v.gate for v in verdicts] == ["contamination"]


def test_a_rescore_holds_the_transcript_against_the_record_beside_it(tmp_path):
    from pytest_agent_eval.campaign.rescore import rescore
    from pytest_agent_eval.model.record import REQUESTS_FILE

    t = honest()
    entries = model_side(t.events)
    lines = t.lines()
    lines.insert(-2, _line({"type": "assistant", "message": {"id": "msg_forged", "content": [text("x")]}}))
    folder = tmp_path / "express"
    folder.mkdir()
    (folder / "run-express-without-1.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / REQUESTS_FILE).write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    (record,) = rescore(tmp_path)
    assert record.scores is not None
    assert record.scores["evidence"]["problems"] == [
        "assistant message msg_forged (thread main) is in the transcript, but the model sent no such message"
    ]


def test_a_record_without_a_messages_request_says_nothing_of_the_run():
    """A CLI that never spoke to the server (the plugin tests' scripted claude) leaves an empty record."""
    t = honest()
    probe = {"method": "GET", "path": "/v1/models", "status": 200, "request": None, "response": {}, "refused": None}
    assert score(t.session(), requests=[], tool=CODEGRAPH).evidence is None
    assert score(t.session(), requests=[probe], tool=CODEGRAPH).evidence is None
    assert score(t.session(), requests=model_side(t.events), tool=CODEGRAPH).evidence is not None


# -- edge inputs each rule must hold on (python bench/mutation.py metrics/evidence.py) ------------------------------
def _response(response_id: str, *blocks: dict, tools: bool = True) -> dict[str, Any]:
    request = {"model": "m", "messages": [], **({"tools": [{"name": "bash"}]} if tools else {})}
    return {"method": "POST", "path": "/v1/messages", "status": 200, "request": request,
            "response": {"id": response_id, "content": list(blocks)}, "refused": None}  # fmt: skip


def test_messages_named_by_the_agents_own_ids_are_paired_with_the_responses_in_order():
    """OpenCode's way (docs/model-boundary.md): a message pairs with the next response to a request offering tools
    with its calls, or without calls its text (blanks aside); a response passed over is not taken back, a subagent's
    thread goes on from the response that made its call, and a side request (a session title) pairs with nothing."""
    from pytest_agent_eval.agents.opencode.transcript import OpenCodeSession
    from pytest_agent_eval.metrics.evidence import paired_responses

    t = Transcript()
    answer = "It is in lib/a.js."
    a = t.message(text("Let me delegate."), {"type": "tool_use", "id": "c1", "name": "Task", "input": {}})
    t.message(text(answer), error="rate_limit")  # the CLI's note of an API error: never paired
    s = t.message({"type": "tool_use", "id": "c2", "name": "Bash", "input": {}}, thread="c1")
    t.reply("c2", "ok", thread="c1")
    t.reply("c1", "report")
    t.say(answer)
    t.events[-1]["message"]["model"] = "<synthetic>"  # the CLI's own message: never paired
    b = t.say(answer)
    plain = t.session()
    session = OpenCodeSession(timeline=plain.timeline, calls=plain.calls, results=plain.results)
    tool_use = {"type": "tool_use", "name": "bash", "input": {}}
    entries = [
        _response("r_x", dict(tool_use, id="c2")),  # before the delegation: the subagent may not go back to it
        _response("r_title", text(answer), tools=False),
        _response("r_early", text(answer)),  # before the delegation: a later message may not go back to it
        _response("r1", dict(tool_use, id="c1")),
        _response("r_sub", dict(tool_use, id="c2")),
        _response("r_cut", text("partial")),  # cut off and retried: passed over
        _response("r2", text("It is in"), {"type": "text"}, dict(text("lib/a.js."), id="blk_1")),  # an id, no call
    ]
    assert paired_responses(session, entries) == {a: "r1", s: "r_sub", b: "r2"}
    assert not [p for p in evidence(session, entries, tool=CODEGRAPH).problems if "the model sent no such message" in p]
    t = Transcript()  # the first response pairs, and the next follows it at once
    first = t.message({"type": "tool_use", "id": "c9", "name": "Bash", "input": {}})
    second = t.say("done")
    plain = t.session()
    session = OpenCodeSession(timeline=plain.timeline, calls=plain.calls, results=plain.results)
    entries = [_response("r_a", dict(tool_use, id="c9")), _response("r_b", text("done"))]
    assert paired_responses(session, entries) == {first: "r_a", second: "r_b"}
    assert paired_responses(plain, entries) == {m.id: m.id for m in plain.messages(None) if not m.error}


def test_usage_of_each_api_is_the_whole_prompt_its_cached_part_and_the_output():
    from pytest_agent_eval.metrics.evidence import _gemini_usage, _responses_usage, _whole_prompt

    assert _responses_usage(
        {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 30}, "output_tokens": 5}
    ) == (Usage(70, 30, 0, 5))
    assert _responses_usage({"input_tokens": 100, "input_tokens_details": None}) == Usage(100, 0, 0, 0)
    assert _responses_usage({"input_tokens": 100}) == Usage(100, 0, 0, 0)
    assert _responses_usage([]) is None
    gemini = {"promptTokenCount": 50, "cachedContentTokenCount": 20, "candidatesTokenCount": 7}
    assert _gemini_usage(gemini) == Usage(30, 20, 0, 7)
    assert _gemini_usage("x") is None
    assert _whole_prompt(True, 0, 0) is None  # a bool is no count
    assert _whole_prompt("9", 0, 0) is None
    assert _whole_prompt(10, 40, None) == Usage(0, 40, 0, 0)  # never a negative part


def test_what_both_sides_compare_drops_reminders_and_folds_blanks():
    from pytest_agent_eval.metrics.evidence import _comparable

    assert _comparable("a <system-reminder>x\ny</system-reminder>b\n\n c ") == "a b c"
    assert _comparable("a<system-reminder>x</system-reminder>b") == "a b"
    assert _comparable("\tplain  text\n") == "plain text"


def test_a_request_path_is_read_without_its_query_or_a_trailing_slash():
    from pytest_agent_eval.metrics.evidence import reached_the_model

    assert reached_the_model([{"path": "/v1/messages/?beta=true"}])
    assert reached_the_model([{"path": "/v1/responses/"}])
    assert not reached_the_model([{"path": "/v1/models"}, {"path": "/v1/messagesX"}])


def test_a_refused_request_is_not_read_as_evidence():
    t = honest()
    entries = model_side(t.events)
    forged = copy.deepcopy(entries[-1])
    forged["response"]["id"], forged["refused"] = "msg_refused", "server-side tool(s) web_fetch"
    forged["request"]["messages"].append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}]}
    )
    report = evidence(t.session(), [*entries, forged], tool=CODEGRAPH)
    assert report.problems == [] and report.refused == ["POST /v1/messages?beta=true: server-side tool(s) web_fetch"]


def test_the_evidence_dict_names_every_figure():
    t = honest()
    data = evidence(t.session(), model_side(t.events), tool=CODEGRAPH).to_dict()
    unchecked = data.pop("unchecked")  # this record's responses carry no usage: said, never guessed
    assert data == {"requests": 3, "refused": [], "problems": [], "leaks": [], "intact": True}
    assert len(unchecked) == 3 and unchecked[0].endswith("(thread main): the model's response records no usage")


def test_a_call_the_request_carries_without_a_name_is_named_by_a_question_mark():
    t = honest()
    entries = model_side(t.events)
    entries[-1]["request"]["messages"] += [
        "not a message",
        {"role": "assistant", "content": ["not a block", {"type": "tool_use", "id": "toolu_ghost", "input": {}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "an id is no call", "id": "toolu_text"}]},
    ]
    entries.append({"method": "POST", "path": "/v1/messages", "request": None, "response": None, "refused": None})
    report = evidence(t.session(), entries, tool=CODEGRAPH)
    assert report.requests == 4
    assert report.problems == [
        "tool call toolu_ghost (?) reached the model in request #3, but is not in the transcript"
    ]


def test_a_leak_only_the_model_received_is_named_with_its_call_and_line_and_counted_once():
    from pytest_agent_eval.metrics.contamination import Leak

    t = honest()
    entries = model_side(t.events)
    entries[-1]["request"]["messages"] += [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_mcp", "name": "mcp__codegraph__codegraph_explore", "input": {}},
            {"type": "tool_use", "id": "toolu_hidden", "name": "Bash", "input": {"command": "cat /tmp/n"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_mcp", "content": EXPLORE},  # the arm's own: no leak
            {"type": "tool_result", "tool_use_id": "toolu_hidden", "content": EXPLORE},
        ]},
    ]  # fmt: skip
    [leak] = evidence(t.session(), entries, tool=CODEGRAPH).leaks
    heading = "**Exploration: How does res.send decide the Content-Type and ETag**"
    assert leak.to_dict() == {
        "thread": "?",  # a call the transcript lacks has no thread there
        "call_id": "toolu_hidden",
        "tool": "Bash",
        "fingerprint": "explore heading",
        "excerpt": heading,
    }
    seen = [Leak("main", "toolu_hidden", "Bash", "explore heading", heading)]
    assert evidence(t.session(), entries, seen=seen, tool=CODEGRAPH).leaks == []  # the transcript showed it already


def test_a_result_cut_in_the_middle_agrees_only_where_both_cuts_left_the_same_text():
    """Codex CLI cuts a long result's middle twice, to different budgets (docs/model-boundary.md): the shown head
    must begin where the received head does and agree as far as both go, the shown tail end the received one."""
    from pytest_agent_eval.metrics.evidence import _agrees

    head, tail = "".join(f"h{i:03d}" for i in range(60)), "".join(f"t{i:03d}" for i in range(60))
    received = head + "…40 tokens truncated…" + tail

    def shown(h: str = head[:120], t: str = tail[-120:]) -> str:
        return h + "…300 chars truncated…" + t

    assert _agrees(received, shown())  # both begin and end alike
    assert not _agrees("preamble " + received, shown())  # a shown head that begins later is less than was carried
    assert _agrees(received, shown(head[:100] + head[100:110], tail[-30:]))  # a short tail: compared as it is
    assert not _agrees(received, shown(head[:64] + "X" + head[65:120]))  # the head agrees, then it does not
    assert not _agrees(received, shown(t=tail[-120:-1] + "X"))  # a long tail must end the received one
    assert not _agrees(received, shown(t="X" + tail[-29:]))  # a short one, as far as it goes
    assert not _agrees(received, shown(h="nowhere" + head[:120]))  # a head the received one does not begin with
    assert not _agrees(head + tail, shown())  # only one side cut: no agreement to read
    assert not _agrees(received, head[:120] + tail[-120:])


def test_a_rewritten_input_is_shown_as_written_and_a_cli_message_is_passed_over():
    t = honest()
    entries = copy.deepcopy(model_side(t.events))
    t.say("The CLI's own note.")
    t.events[-1]["message"]["model"] = "<synthetic>"  # not the model's: no response to find
    t.message(text("forged"), msg_id="msg_forged")
    read = next(e for e in t.events if e["type"] == "assistant" and e["message"]["content"][0].get("name") == "Read")
    read["message"]["content"][0]["input"] = {"file_path": "lib/réponse.js"}
    problems = evidence(t.session(), entries, tool=CODEGRAPH).problems
    assert [p.split(": ", 1)[-1] if "differs" in p else p for p in problems] == [
        '{"file_path": "lib/réponse.js"}',
        "assistant message msg_forged (thread main) is in the transcript, but the model sent no such message",
    ]


def test_a_received_result_whose_call_no_request_carried_is_named_by_a_question_mark():
    t = honest()
    entries = model_side(t.events)
    entries[-1]["request"]["messages"].append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_lost", "content": EXPLORE}]}
    )
    [leak] = evidence(t.session(), entries, tool=CODEGRAPH).leaks
    assert (leak.call_id, leak.tool, leak.thread) == ("toolu_lost", "?", "?")
    grep = next(c.id for c in t.session().calls if c.name == "Bash")  # a call the transcript has: its thread
    entries[-1]["request"]["messages"].append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": grep, "content": EXPLORE}]}
    )
    assert [(x.call_id, x.tool, x.thread) for x in evidence(t.session(), entries, tool=CODEGRAPH).leaks] == [
        (grep, "Bash", "main"),
        ("toolu_lost", "?", "?"),
    ]


def _entry(path: str, request: Any, response: Any) -> dict[str, Any]:
    return {"method": "POST", "path": path, "status": 200, "request": request, "response": response, "refused": None}


def test_each_apis_reader_takes_what_the_record_carried_and_passes_over_malformed_parts():
    """A record is the model server's, but a response cut off, a part of an unknown shape or an item without an id is
    passed over, never a failure; what is well formed is read: calls, results, the streamed answer's text without its
    thoughts, and nothing the API does not call a result."""
    from pytest_agent_eval.agents.gemini.transcript import response_name
    from pytest_agent_eval.metrics.evidence import _received

    stream, once = "/v1beta/models/m:streamGenerateContent", "/v1beta/models/m:generateContent"
    gemini_request = {
        "contents": [
            "junk",
            {"parts": None},
            {"parts": ["junk", {"functionCall": {"id": "g0", "name": "read_file", "args": {}}}]},
            {"parts": [{"functionResponse": {"id": "g0", "response": {"output": "hello"}}}]},
        ]
    }
    parts = [{"text": "planning", "thought": True}, {"text": "A"}, {"text": "B"}, {"functionCall": {"id": "g1"}}]
    entries = [
        _entry(stream, gemini_request, {"candidates": [{"content": {"parts": parts}}]}),
        _entry(stream, {}, {"candidates": []}),  # nothing streamed: no response to name
        _entry(stream, {}, {"candidates": ["junk"]}),
        _entry(stream, {}, "cut off"),
        _entry(once, {}, {"candidates": [{"content": {"parts": [{"text": "a side answer"}]}}]}),  # not streamed
    ]
    received = _received(entries, GeminiReading)
    assert received.answers == [(response_name(1), frozenset({"g1"}), "A B"), (response_name(2), frozenset(), "")]
    assert (received.calls, received.results) == ({"g0": ("Read", 1)}, {"g0": {"hello": 1}})  # in the common vocabulary

    items = [
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call", "name": "shell"},  # no call_id
        {"type": "message", "call_id": "c_msg"},  # not a call
        "junk",
    ]
    responses_request = {
        "input": [
            "junk",
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "hi"}]},
        ]
    }
    entries = [
        _entry("/v1/responses", responses_request, {"id": "resp_1", "output": items}),
        _entry("/v1/responses", {}, {"id": "resp_2", "output": None}),
        _entry("/v1/responses", {}, {"output": []}),  # no id: no response to keep
    ]
    received = _received(entries, ResponsesReading)
    assert received.sent == {"resp_1": {"c1"}, "resp_2": set()}
    assert received.results == {"c1": {"hi": 1}}

    messages_request = {"messages": [{"role": "user", "content": [{"type": "text", "tool_use_id": "t9", "text": "x"}]}]}
    received = _received([_entry("/v1/messages", messages_request, {"id": "m1", "content": None})], None)
    assert (received.sent, received.results) == ({"m1": set()}, {})  # a text block with an id is no result


def test_a_cut_in_the_middle_keeps_both_ends_on_both_sides_and_a_second_mark_is_text():
    """An honest cut keeps a head and a tail on each side; a result whose text holds another mark after the cut (a
    quoted truncated output) is compared from its first."""
    from pytest_agent_eval.metrics.evidence import _agrees

    head, tail = "h" * 40, "t" * 40
    assert not _agrees(head + "…5 tokens truncated…" + tail, "…9 chars truncated…" + tail)  # the shown head lost
    assert not _agrees("…5 tokens truncated…" + tail, head + "…9 chars truncated…" + tail)  # the carried head lost
    assert not _agrees(head + "…5 tokens truncated…", head + "…9 chars truncated…" + tail)
    quoted = "quoted: …3 chars truncated… end" + tail
    assert _agrees(head + "…5 tokens truncated…" + quoted, head + "…9 chars truncated…" + quoted)


def test_a_result_the_run_was_cut_off_after_does_not_hide_a_later_forgery():
    t = Transcript()
    t.init()
    call = t.call("Bash", command="sleep 100")
    t.reply(call, "killed")  # the run stopped here: allowed
    t.reply("toolu_forged", "made up")  # no call, no request: named
    problems = evidence(t.session(), model_side(t.events), tool=CODEGRAPH).problems
    assert [p for p in problems if "toolu_forged" in p and "no request carried it" in p]


def test_a_subagent_goes_on_from_its_call_and_a_response_it_took_is_not_paired_again():
    from pytest_agent_eval.agents.opencode.transcript import OpenCodeSession
    from pytest_agent_eval.metrics.evidence import paired_responses

    t = Transcript()
    a = t.message(text("Let me delegate."), {"type": "tool_use", "id": "c1", "name": "Task", "input": {}})
    s = t.message(text("y"), thread="c1")
    t.reply("c1", "report")
    b = t.say("y")
    plain = t.session()
    session = OpenCodeSession(timeline=plain.timeline, calls=plain.calls, results=plain.results)
    entries = [
        _response("r_retry", text("y")),  # before the delegation: the subagent may not go back to it
        _response("r1", {"type": "tool_use", "id": "c1", "name": "task", "input": {}}),
        _response("r_sub", text("y")),
        _response("r_main", text("y")),  # the same text: the main thread's, the subagent's being taken
    ]
    assert paired_responses(session, entries) == {a: "r1", s: "r_sub", b: "r_main"}


def test_a_result_is_shown_as_the_reader_shows_its_call_whichever_side_carried_the_call():
    """Codex's shell output is shown without its header; the call's name comes from a request, or else from the
    response that made it: a result with neither is shown whole."""
    from pytest_agent_eval.metrics.evidence import _received

    output = '{"output": "hi", "metadata": {"exit_code": 0}}'

    def call(call_id: str) -> dict[str, Any]:
        return {"type": "function_call", "call_id": call_id, "name": "exec_command", "arguments": '{"cmd": "ls"}'}

    def result(call_id: str) -> dict[str, Any]:
        return {"type": "function_call_output", "call_id": call_id, "output": output}

    entries = [
        _entry("/v1/responses", {}, {"id": "r1", "output": [call("sent")]}),
        _entry("/v1/responses", {"input": [result("sent"), call("carried"), result("carried"), result("none")]}, {}),
    ]
    shown = _received(entries, ResponsesReading).shown
    assert (shown["sent"], shown["carried"], shown["none"]) == ({"hi"}, {"hi"}, {output})


def test_a_session_that_offers_no_reading_of_an_api_lists_its_exchanges_unchecked():
    """Claude Code's Session reads the Messages API only: a record of Responses and Gemini exchanges is named as not
    checked, per API, never read as Messages."""
    responses = _entry("/v1/responses", {}, {"id": "resp_1", "output": []})
    gemini = _entry("/v1beta/models/m:streamGenerateContent", {}, {"candidates": []})
    for entries, apis in (
        ([responses], ["Responses"]),
        ([gemini], ["Gemini"]),
        ([responses, gemini], ["Gemini", "Responses"]),
    ):
        assert evidence(Session(), entries, tool=CODEGRAPH).unchecked == [
            f"the {api} API's exchanges: Session offers no reading of their items (Session.api_reading)" for api in apis
        ]


def test_a_gemini_runs_messages_pair_with_the_responses_its_record_holds():
    """Gemini names its messages by its own ids: each is paired with a response of the record, read through the
    Gemini reading its Session offers."""
    folder = Path(__file__).parent / "data/gemini/with"
    session = read_gemini(sorted(folder.glob("events*.jsonl")))
    paired = paired_responses(session, read_requests(folder / "requests.jsonl"))
    assert paired and set(paired) == {m.id for m in session.messages(None) if not m.error}


def test_a_result_cut_down_in_a_subagents_record_is_named_as_in_the_main_thread():
    """Claude Code keeps a subagent's steps in the subagent's thread: a result its record shows less of than the
    subagent's model received is a forgery there too, named with its thread."""
    t = Transcript()
    t.init(tools=["Task", "Bash"])
    task = t.call("Task", description="find it", prompt="Where is res.send defined?")
    grep = t.call("Bash", thread=task, command="grep -rn 'res.send =' lib")
    found = "lib/response.js:107:res.send = function send(body) {\nlib/response.js:108:  var chunk = body;"
    t.reply(grep, found, thread=task)
    t.say("lib/response.js:107", thread=task)
    t.reply(task, "res.send is defined in lib/response.js:107")
    t.say("In lib/response.js.")
    entries = model_side(t.events) + model_side(t.events, thread=task)
    assert evidence(t.session(), entries, tool=CODEGRAPH).problems == []
    shown = found.split("\n")[0]
    next(e for e in t.events if e.get("uuid") == f"u-{grep}")["message"]["content"][0]["content"] = shown
    assert evidence(t.session(), entries, tool=CODEGRAPH).problems == [
        f'tool result for {grep} (Bash, thread {task}) differs from what the model received: "{shown}"'
    ]
