"""Codex CLI: the stand-in's Responses API, and Codex's records read into the common Session.

The sessions under ``tests/data/codex/`` are real: Codex CLI 0.171.0 against the scripted stand-in
(``tests/data/codex/README.md`` says how they were made)."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.agents.codex.stand_in import output_items, read_turn
from pytest_agent_eval.agents.codex.transcript import (
    CodexSession,
    find_rollout,
    is_codex_events,
    kept_rollout,
    kept_subagents,
    read_codex,
    recorded_responses,
)
from pytest_agent_eval.cli import main
from pytest_agent_eval.metrics.contamination import contamination
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.metrics.occupancy import FAMILIES, occupancy
from pytest_agent_eval.metrics.truth import read_truth_log, resident_truth
from pytest_agent_eval.model import Reply, ScriptedBackend, serve
from pytest_agent_eval.model.scripted import thinking_text
from pytest_agent_eval.model.usage import UsageModel, count_tokens, declared_hidden, text_tokens
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import TranscriptError

pytestmark = pytest.mark.timeout(60)

DATA = Path(__file__).parent / "data/codex"
ARMS = ("with", "without", "two-turns")
EXPLORE_TEXT = (Path(__file__).parent / "data/explore-express-1.6.1.txt").read_text(encoding="utf-8")
CWD = "/work/repo"
QUESTION = "How does res.send decide the Content-Type and ETag?"
SHELL = {"type": "function", "name": "exec_command",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}  # fmt: skip
QUERY = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
THOUGHT = {"type": "thinking", "thinking": "the flow decides it", "signature": "sig_1"}
NAMESPACE = {"type": "namespace", "name": "mcp__codegraph", "description": "codegraph",
             "tools": [{"type": "function", "name": "codegraph_explore", "parameters": QUERY}]}  # fmt: skip


def _message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def _request(*items: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    context = _message("user", f"<environment_context>\n  <cwd>{CWD}</cwd>\n</environment_context>")
    start = [_message("developer", "You are Codex."), context, _message("user", QUESTION)]
    return {"model": "stand-in-scripted", "stream": True, "store": False, "tools": tools, "input": [*start, *items]}


def _post(url: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    request = urllib.request.Request(url + "/v1/responses", data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = []
    for frame in raw.split("\n\n"):
        if frame.strip():
            lines = dict(line.split(": ", 1) for line in frame.splitlines())
            data = json.loads(lines["data"])
            assert lines["event"] == data["type"]
            events.append((lines["event"], data))
    return events


def _result(call: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call["call_id"], "output": EXPLORE_TEXT}


def _output(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [data["item"] for name, data in events if name == "response.output_item.done"]


# -- the stand-in speaks the Responses API ------------------------------------------------------------
def test_the_responses_stream_explores_in_the_mcp_namespace_and_counts_usage_as_the_truth(tmp_path: Path) -> None:
    log = tmp_path / "truth.jsonl"
    first = _request(tools=[SHELL, NAMESPACE])
    with serve(ScriptedBackend(), truth_log=log) as server:
        events = _post(server.url, first)
        [call] = _output(events)
        result = {"type": "function_call_output", "call_id": call["call_id"], "output": EXPLORE_TEXT}
        second = {**first, "input": [*first["input"], call, result]}
        later = _post(server.url, second)
        truth = server.truth
    names = [name for name, _ in events]
    assert names == ["response.created", "response.output_item.added", "response.output_item.done",
                     "response.completed"]  # fmt: skip
    assert call["type"] == "function_call" and (call["namespace"], call["name"]) == (
        "mcp__codegraph",
        "codegraph_explore",
    )
    assert json.loads(call["arguments"]) == {"query": QUESTION}
    completed = later[-1][1]["response"]
    usage = completed["usage"]
    assert completed["id"] == truth[1].message_id and completed["model"] == ScriptedBackend.stand_in_model
    # input_tokens is the whole prompt, the cached part (the first request, repeated) included
    assert usage["input_tokens"] == truth[1].count.tokens == UsageModel().count_prompt(second).tokens
    assert usage["input_tokens_details"]["cached_tokens"] == truth[0].count.tokens
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}
    assert set(truth[1].count.results) == {call["call_id"]}
    assert [json.loads(line)["message_id"] for line in log.read_text().splitlines()] == [t.message_id for t in truth]


THINKS = {"hidden_thinking": (0, 3_000), "summarised": True, "visible_thinking": (600,)}
CODEX_ASKS = {"reasoning": {"summary": "auto"}, "include": ["reasoning.encrypted_content"]}  # Codex 0.171.0's


def test_the_stand_ins_thinking_is_reasoning_counted_as_output_summarised_and_priced_when_it_comes_back() -> None:
    first = {**_request(tools=[SHELL, NAMESPACE]), **CODEX_ASKS}
    with serve(ScriptedBackend(**THINKS)) as server:
        events = _post(server.url, first)
        shown, call = _output(events)
        second = {**first, "input": [*first["input"], shown, call, _result(call)]}
        later = _post(server.url, second)
        hiding, read = _output(later)
        third = {**second, "input": [*second["input"], hiding, read, _result(read)]}
        _post(server.url, third)
        truth = server.truth
    # step 0: 600 characters of reasoning, streamed as its summary; all of it output, named as reasoning
    assert shown["type"] == "reasoning" and shown["id"].startswith("rs_") and declared_hidden(shown) == 0
    summary = shown["summary"][0]["text"]
    assert shown["summary"] == [{"type": "summary_text", "text": summary}] and len(summary) == 600
    streamed = "".join(d["delta"] for name, d in events if name == "response.reasoning_summary_text.delta")
    added = next(d["item"] for name, d in events if name == "response.output_item.added")
    assert streamed == summary and added["summary"] == []  # the summary comes in deltas
    usage = events[-1][1]["response"]["usage"]
    assert 0 < usage["output_tokens_details"]["reasoning_tokens"] < usage["output_tokens"]
    # step 1: 3,000 tokens of reasoning shown only as a summary: counted in the output, declared in encrypted_content
    assert hiding["summary"][0]["text"].startswith("Planning step 2") and declared_hidden(hiding) == 3_000
    usage = later[-1][1]["response"]["usage"]
    assert usage["output_tokens"] > usage["output_tokens_details"]["reasoning_tokens"] > 3_000
    # sent back (as Codex sends it), the reasoning is in the prompt: its summary and what it hid, not its encryption
    assert [t.count.hidden for t in truth] == [0, 0, 3_000]
    assert truth[2].count.tokens == UsageModel().count_prompt(third).tokens
    plain = {**third, "input": [i for i in third["input"] if i.get("type") != "reasoning"]}
    assert truth[2].count.tokens - UsageModel().count_prompt(plain).tokens == (
        count_tokens([summary]) + count_tokens([hiding["summary"][0]["text"]]) + 3_000
    )


def test_reasoning_is_shown_and_carried_only_as_the_request_asks() -> None:
    request = _request(tools=[SHELL, NAMESPACE])  # no summary asked, no encrypted content included
    with serve(ScriptedBackend(**THINKS)) as server:
        events = _post(server.url, request)
    reasoning, _ = _output(events)
    assert reasoning["summary"] == [] and "encrypted_content" not in reasoning
    assert not any(name.startswith("response.reasoning_summary") for name, _ in events)
    usage = events[-1][1]["response"]["usage"]
    assert usage["output_tokens_details"]["reasoning_tokens"] >= text_tokens(thinking_text(600, f"{QUESTION}0"))
    hidden = output_items({**request, "reasoning": {"summary": "none"}}, Reply([THOUGHT]))[0]
    assert hidden["summary"] == [] and declared_hidden(hidden) == text_tokens(THOUGHT["thinking"])


def test_the_answer_streams_as_text_deltas_of_one_assistant_message() -> None:
    with serve(ScriptedBackend()) as server:
        events = _post(server.url, _request(tools=[]))
    [message] = _output(events)
    assert message["role"] == "assistant" and message["content"][0]["type"] == "output_text"
    deltas = "".join(data["delta"] for name, data in events if name == "response.output_text.delta")
    assert deltas == message["content"][0]["text"] == "OK."


def test_without_the_namespace_the_shell_greps_reads_then_tries_the_cli() -> None:
    grep_output = "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n./lib/response.js\n"
    request = _request(tools=[SHELL])
    with serve(ScriptedBackend()) as server:
        [grep] = _output(_post(server.url, request))
        request["input"] += [grep, {"type": "function_call_output", "call_id": grep["call_id"], "output": grep_output}]
        [read] = _output(_post(server.url, request))
    assert grep["name"] == "exec_command" and "namespace" not in grep
    assert json.loads(grep["arguments"])["cmd"].startswith("grep -rliE 'res\\.send' ")
    assert json.loads(read["arguments"]) == {"cmd": f"cat -n {CWD}/lib/response.js"}


def test_a_backend_without_a_policy_refuses_the_responses_api() -> None:
    class Canned:
        def respond(self, request: dict[str, Any], headers: Any = None) -> Reply:
            return Reply.text("ok")

        def describe(self) -> str:
            return "canned"

    with serve(Canned()) as server, pytest.raises(urllib.error.HTTPError) as error:
        _post(server.url, _request(tools=[]))
    assert error.value.code == 400 and "Responses API: canned" in error.value.read().decode()


@pytest.mark.parametrize("arm", ARMS[:2])
def test_codexs_real_last_request_is_read_as_the_policy_wrote_it_and_counted_as_the_truth(arm: str) -> None:
    request = json.loads((DATA / arm / "last-request.json").read_text(encoding="utf-8"))
    turn = read_turn(request)
    assert turn.question == QUESTION and turn.cwd == "/tmp/h29codex/repo"
    expected = ["mcp__codegraph__codegraph_explore", "Read"] if arm == "with" else ["Grep", "Read", "Read", "Bash"]
    assert [step.name for step in turn.steps] == expected
    assert all(step.result for step in turn.steps)
    last = read_truth_log_lines(DATA / arm / "truth.jsonl")[-1]
    count = UsageModel().count_prompt(request)
    assert count.tokens == last["tokens"] and count.results == last["results"]


def read_truth_log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- Codex's records → Session ------------------------------------------------------------------------
def _session(arm: str) -> CodexSession:
    return read_codex(sorted((DATA / arm).glob("events*.jsonl")))


def test_the_with_arm_session_reads_as_requests_calls_and_results() -> None:
    session = _session("with")
    truth = read_truth_log_lines(DATA / "with" / "truth.jsonl")
    messages = session.messages()
    assert [m.id for m in messages] == [t["message_id"] for t in truth]  # the ids the stand-in answered with
    assert [m.usage.ctx for m in messages if m.usage] == [t["tokens"] for t in truth]
    assert [[c.name for c in m.calls] for m in messages] == [["mcp__codegraph__codegraph_explore"], ["Bash"], []]
    explore, read = session.calls
    assert explore.input == {"query": QUESTION} and explore.answered
    assert explore.result is not None and explore.result.text.startswith("**Exploration: ")
    assert read.input["command"] == "cat -n /tmp/h29codex/repo/lib/response.js" and read.answered
    assert read.result is not None and read.result.text.startswith("Warning: truncated output")
    assert read.result.chars > len(read.result.text)  # Codex's header occupies the window too
    assert session.answer_texts() == [messages[-1].text] and messages[-1].text.startswith("Answer to: ")
    assert session.stand_in == ScriptedBackend.stand_in_model and session.infra_error is None
    assert not session.ends_mid_turn and session.notices[0].startswith("Model metadata for `stand-in-scripted`")
    assert set(session.unread) == {"offered_tools", "answering_model"}


def test_a_call_a_deny_rule_refused_is_read_from_the_rollout_though_the_events_leave_it_out() -> None:
    session = _session("without")
    events = (DATA / "without" / "events.jsonl").read_text(encoding="utf-8")
    [cli] = [c for c in session.calls if c.input["command"].startswith("codegraph ")]
    assert "codegraph explore" not in events
    assert cli.result is not None and cli.result.is_error and "rejected" in cli.result.text
    report = contamination(session, tool=CODEGRAPH)
    assert (report.cli_calls, report.cli_blocked, report.contaminated) == (1, 1, False)


@pytest.mark.parametrize("arm", ARMS)
def test_occupancy_of_a_codex_session_matches_the_stand_ins_own_counts(arm: str) -> None:
    """bench/occupancy_accuracy.py's measure: Σ|estimate − truth| / Σ truth over the families, ≤ 1%."""
    session = _session(arm)
    truth = resident_truth(session, read_truth_log(DATA / arm / "truth.jsonl"), tool=CODEGRAPH)
    assert truth is not None
    estimate = occupancy(session, tool=CODEGRAPH).residual
    error = sum(abs(estimate[f] - truth[f]) for f in FAMILIES) / sum(truth.values())
    assert error <= 0.01, (estimate, truth)


def test_the_rollout_is_found_beside_the_events_or_given(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    shutil.copyfile(DATA / "with" / "events.jsonl", events)
    assert is_codex_events(events) and not is_codex_events(DATA / "with" / "truth.jsonl")
    with pytest.raises(TranscriptError, match=r"no rollout-.*jsonl beside it.*--rollout"):
        find_rollout(events)
    other = next((DATA / "without").glob("rollout-*.jsonl"))
    with pytest.raises(TranscriptError, match=r"the rollout of session .* not of"):
        read_codex(events, other)
    rollout = next((DATA / "with").glob("rollout-*.jsonl"))
    assert len(read_codex(events, rollout).calls) == 2


def test_agent_eval_score_recognises_a_codex_events_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["score", str(DATA / "without" / "events.jsonl"), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["contamination"]["cli_blocked"] == 1 and card["occupancy"]["residual"]["bash"] > 0
    events = tmp_path / "events.jsonl"
    shutil.copyfile(DATA / "with" / "events.jsonl", events)
    assert main(["score", str(events)]) == 0  # alone: read as far as it goes, saying what the rollout would add
    out = capsys.readouterr().out
    assert "not in this record (requests)" in out and "--rollout" in out and "codegraph_explore used 1x" in out
    rollout = next((DATA / "with").glob("rollout-*.jsonl"))
    assert main(["score", str(events), "--rollout", str(rollout), "--brief"]) == 0
    assert "STAND-IN MODEL" in capsys.readouterr().out


def _copy_with(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    """The with-arm's rollout beside an events file of ``events`` (after its own thread.started)."""
    source = DATA / "with" / "events.jsonl"
    first = source.read_text(encoding="utf-8").splitlines()[0]
    rollout = next((DATA / "with").glob("rollout-*.jsonl"))
    shutil.copyfile(rollout, tmp_path / rollout.name)
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join([first, *map(json.dumps, events)]) + "\n", encoding="utf-8")
    return path


def test_a_failed_turn_is_an_infra_error_and_a_turn_without_an_end_is_unfinished(tmp_path: Path) -> None:
    turn_failed = {"type": "turn.failed", "error": {"message": "stream disconnected"}}
    failed = read_codex(_copy_with(tmp_path, [{"type": "turn.started"}, turn_failed]))
    assert failed.infra_error == "result event is an error (turn.failed): stream disconnected"
    assert failed.answer_texts() == []
    cut = read_codex(_copy_with(tmp_path, [{"type": "turn.started"}]))
    assert cut.ends_mid_turn and cut.infra_error is None


def _thread(thread: str, parent: str | None, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rollout of ``thread``: its session_meta, a task_started, each item closed by a usage record."""
    meta = {"id": thread, **({"parent_thread_id": parent} if parent else {})}
    records = [{"type": "session_meta", "payload": meta}, {"type": "event_msg", "payload": {"type": "task_started"}}]
    for number, item in enumerate(items):
        records.append({"type": "response_item", "payload": item})
        if item["type"] != "function_call_output":
            usage = {"input_tokens": 100 + number, "output_tokens": 5}
            records.append({"type": "token_usage_record", "payload": {"response_id": f"resp_{thread}{number}",
                                                                       "usage": usage}})  # fmt: skip
    return records


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_spawned_subagents_kept_rollout_is_read_under_the_spawning_call(tmp_path: Path) -> None:
    spawn = {"type": "function_call", "namespace": "multi_agent_v1", "name": "spawn_agent", "call_id": "c1",
             "arguments": json.dumps({"message": "find ETag"})}  # fmt: skip
    started = {"type": "function_call_output", "call_id": "c1", "output": '{"agent_id":"T2","nickname":"N"}'}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    grep = {"type": "function_call", "name": "exec_command", "call_id": "c2", "arguments": '{"cmd": "grep -rl ETag ."}'}
    found = {"type": "function_call_output", "call_id": "c2", "output": "Process exited with code 0\nOutput:\n./a.js"}
    events = _write_jsonl(tmp_path / "run-x.jsonl", [{"type": "thread.started", "thread_id": "T1"},
                                                     {"type": "turn.started"}, {"type": "turn.completed"}])  # fmt: skip
    _write_jsonl(kept_rollout(events), _thread("T1", None, [spawn, started, answer]))
    alone = read_codex(events)
    assert "T2" in alone.unread["subagents"] and [m.thread for m in alone.messages(None)] == ["main", "main"]
    _write_jsonl(kept_subagents(events), _thread("T2", "T1", [grep, found, answer]))
    session = read_codex(events)
    assert "subagents" not in session.unread
    assert [(m.id, m.thread) for m in session.messages(None)] == [
        ("resp_T10", "main"), ("resp_T20", "c1"), ("resp_T22", "c1"), ("resp_T12", "main")]  # fmt: skip
    [child_grep] = session.calls_in("c1")
    assert child_grep.name == "Bash" and child_grep.result.text == "./a.js"
    assert all(r.main_output_only for r in session.results)
    _write_jsonl(kept_subagents(events), _thread("T2", "T9", [grep, found, answer]))
    with pytest.raises(TranscriptError, match=r"run-x\.subagents: thread T2's parent T9 is not T1 nor a subagent"):
        read_codex(events)


def test_files_that_are_not_codexs_records_are_refused_naming_them(tmp_path: Path) -> None:
    claude = tmp_path / "run.jsonl"
    claude.write_text('{"type": "system", "subtype": "init"}\n', encoding="utf-8")
    with pytest.raises(TranscriptError, match=r"run\.jsonl: not a codex exec --json stream"):
        read_codex(claude, claude)
    events = DATA / "with" / "events.jsonl"
    with pytest.raises(TranscriptError, match=r"events\.jsonl: not a Codex rollout file \(no session_meta record\)"):
        read_codex(events, events)
    with pytest.raises(TranscriptError, match=r"nowhere\.jsonl: no such file"):
        read_codex(events, tmp_path / "nowhere.jsonl")


def test_faults_and_the_non_streaming_form_apply_to_the_responses_api_too() -> None:
    body = {**_request(tools=[SHELL, NAMESPACE]), "stream": False}
    data = json.dumps(body).encode()
    with serve(ScriptedBackend(), faults={1: "500"}) as server:
        post = urllib.request.Request(server.url + "/v1/responses", data=data, method="POST")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(post, timeout=10)
        with urllib.request.urlopen(post, timeout=10) as response:
            answer = json.loads(response.read())
        truth = server.truth
    assert error.value.code == 500 and len(truth) == 1  # the failed request was never answered, nor counted
    assert answer["id"] == truth[0].message_id and answer["status"] == "completed"
    assert (
        answer["output"][0]["namespace"] == "mcp__codegraph"
        and answer["usage"]["input_tokens"] == truth[0].count.tokens
    )


def test_a_resumed_session_reads_each_turns_events_and_the_one_rollout_codex_appended_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    session = _session("two-turns")
    truth = read_truth_log_lines(DATA / "two-turns" / "truth.jsonl")
    assert [m.id for m in session.messages()] == [t["message_id"] for t in truth] and len(truth) == 6
    assert [r.subtype for r in session.results] == ["turn.completed", "turn.completed"]
    # each turn declares its output (its requests' summed, reasoning included): occupancy prices hidden reasoning by it
    assert [m.segment for m in session.messages()] == [0, 0, 0, 1, 1, 1]
    assert [r.output_tokens for r in session.results] == [
        sum(m.usage.output for m in session.messages() if m.segment == turn) for turn in (0, 1)
    ]
    first, second = session.answer_texts()
    assert first.startswith("Answer to: How does res.send") and second.startswith("Answer to: Where is the ETag")
    with pytest.raises(TranscriptError, match=r"thread .*, not .*events\.jsonl's"):
        read_codex([DATA / "two-turns" / "events.jsonl", DATA / "with" / "events.jsonl"])
    assert main(["score", str(DATA / "two-turns" / "events.jsonl"), "--json"]) == 0  # finds events.t2.jsonl
    card = json.loads(capsys.readouterr().out)
    assert card["results"] == 2 and [Path(f).name for f in card["files"]] == ["events.jsonl", "events.t2.jsonl"]


@pytest.mark.parametrize("arm", ("with", "without"))
def test_a_codex_session_is_held_to_the_responses_the_model_sent_and_the_requests_it_received(arm: str) -> None:
    """metrics.evidence reads the Responses API's items: calls by call_id, results as function_call_output; Codex's
    rollout cuts a long result's middle to another budget than the request (chars, not tokens), which agrees. The
    responses: the output items Codex recorded, with the stand-in's own count of each prompt."""
    session = _session(arm)
    last = json.loads((DATA / arm / "last-request.json").read_text(encoding="utf-8"))
    _, outputs = recorded_responses(session.rollout_file)
    truth = read_truth_log_lines(DATA / arm / "truth.jsonl")
    responses = [
        {"id": t["message_id"], "output": items, "usage": {"input_tokens": t["tokens"]}}
        for t, items in zip(truth, outputs, strict=True)
    ]
    entries = [{"path": "/v1/responses", "request": {"input": []}, "response": r} for r in responses[:-1]]
    entries.append({"path": "/v1/responses", "request": last, "response": responses[-1]})
    report = evidence(session, entries, tool=CODEGRAPH)
    assert report.intact and report.requests == len(responses), report.problems
    outputs = [i for i in last["input"] if i.get("type") == "function_call_output"]
    assert any("truncated\u2026" in json.dumps(o["output"], ensure_ascii=False) for o in outputs)  # cut twice
    forged = json.loads(json.dumps(last).replace("res.send", "res.sent"))
    entries[-1] = {**entries[-1], "request": forged}
    assert any("differs from what the model received" in p for p in evidence(session, entries, tool=CODEGRAPH).problems)
