"""A Gemini CLI session resumed (``gemini --resume <id>``) reads into a Session holding what each request carried.

Gemini CLI 0.61.0, loading a session's history from its chat record, rebuilds each answered call's result twice (from
the ``gemini`` record's ``toolCalls[].result`` and from the ``user`` record that sent it): every request of a resumed
turn carries each earlier result twice, and the model's context holds both (docs/agents/gemini.md, "Resuming").
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from support.gemini import held_results

from pytest_agent_eval.agents.gemini.transcript import read_gemini
from pytest_agent_eval.metrics.occupancy import FAMILIES, family, occupancy
from pytest_agent_eval.metrics.truth import read_truth_log
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import Compaction, Session, ToolResult, UserText

DATA = Path(__file__).parent / "data/gemini"
SESSION = "5e55a1d0-0000-4000-8000-000000000001"
CONTEXT = {"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}


# -- a chat record as Gemini CLI 0.61.0 writes one (the shape of a real two-turn run's, cut down) -------------------
def _answer(call: str, output: str) -> dict[str, Any]:
    return {"functionResponse": {"id": call, "name": "run_shell_command", "response": {"output": output}}}


def _turn(number: int, question: str) -> list[dict[str, Any]]:
    """One turn's records: the question, a response calling ``cat``, its result, the answer."""
    call, output = f"call-{number}", f"Output: line {number}\n" * 200 + "Process Group PGID: 7"
    tool_call = {"id": f"run_shell_command__{call}", "name": "run_shell_command", "args": {"command": "cat -n a.js"},
                 "result": [_answer(call, output)], "status": "success"}  # fmt: skip
    tokens = {"input": 1000 * number, "output": 10, "cached": 0, "thoughts": 0, "tool": 0, "total": 1000 * number}
    return [
        {"id": f"q{number}", "type": "user", "content": [{"text": question}]},
        {"id": f"g{number}a", "type": "gemini", "content": "", "toolCalls": [tool_call], "tokens": tokens},
        {"id": f"u{number}", "type": "user", "content": [_answer(call, output)]},
        {"id": f"g{number}b", "type": "gemini", "content": f"Answer {number}", "tokens": tokens},
    ]


def _loaded(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as a resume loads it (the later ``$set`` of ``messages``): the context, then each record, a
    ``gemini`` one as its API parts followed by its calls' results under its own id."""
    loaded = [{"id": "ctx", "type": "user", "content": [CONTEXT]}]
    for record in history:
        if record["type"] == "gemini":
            calls = record.get("toolCalls") or []
            parts = [{"functionCall": {"id": c["id"], "name": c["name"], "args": c["args"]}} for c in calls]
            loaded.append({"id": record["id"], "type": "gemini", "content": parts or [{"text": record["content"]}]})
            if calls:
                answers = [a for c in calls for a in c["result"]]
                loaded.append({"id": record["id"], "type": "user", "content": answers})
        else:
            loaded.append(record)
    return loaded


def _resumed_session(tmp_path: Path, turns: int) -> Session:
    """A session of ``turns`` turns, each after the first by ``--resume``, as Gemini CLI records it."""
    lines: list[dict[str, Any]] = [{"sessionId": SESSION, "projectHash": "p"}]
    lines.append({"$set": {"messages": [{"id": "ctx", "type": "user", "content": [CONTEXT]}]}})
    history: list[dict[str, Any]] = []
    for number in range(1, turns + 1):
        if number > 1:  # the resume: the header again, the context, then the history loaded
            lines += [{"sessionId": SESSION, "projectHash": "p"}, {"$set": {"messages": _loaded([])}}]
            lines += [{"$set": {"sessionId": SESSION}}, {"$set": {"messages": _loaded(history)}}]
        records = _turn(number, f"Question {number}?")
        lines += records
        history += records
    chat = tmp_path / "run-1.chat"
    chat.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    events = []
    for number in range(1, turns + 1):
        path = tmp_path / (f"run-1.t{number}.jsonl" if number > 1 else "run-1.jsonl")
        stream = [{"type": "init", "session_id": SESSION, "model": "m"},
                  {"type": "message", "role": "assistant", "content": f"Answer {number}", "delta": True},
                  {"type": "result", "status": "success", "stats": {}}]  # fmt: skip
        path.write_text("".join(json.dumps(e) + "\n" for e in stream), encoding="utf-8")
        events.append(path)
    return read_gemini(events, chat)


def test_a_resumed_turns_requests_hold_each_earlier_result_twice(tmp_path: Path) -> None:
    session = _resumed_session(tmp_path, 2)
    assert held_results(session) == [Counter(), Counter({"call-1": 1}), Counter({"call-1": 2}),
                                     Counter({"call-1": 2, "call-2": 1})]  # fmt: skip
    assert not any(isinstance(item, Compaction) for item in session.timeline)  # a resume is no compaction
    # the second copy comes where the history was loaded: after the first answer, before the second question
    kinds = [type(item).__name__ for item in session.timeline]
    assert kinds[kinds.index("Message", 3) :] == ["Message", "ToolResult", "UserText", "Message", "ToolResult",
                                                  "Message"]  # fmt: skip
    [first, second] = [t for t in session.timeline if isinstance(t, ToolResult) and t.call_id == "call-1"]
    assert (second.text, second.chars, second.is_error) == (first.text, first.chars, first.is_error)
    assert [c.id for c in session.calls] == ["call-1", "call-2"] and session.calls[0].result is first
    assert [t.text for t in session.timeline if isinstance(t, UserText)][1:] == ["Question 1?", "Question 2?"]


def test_each_resume_repeats_a_result_once_however_many_turns_follow(tmp_path: Path) -> None:
    """The third turn's history holds the first turn's result twice, as the second's did: not four times."""
    held = held_results(_resumed_session(tmp_path, 3))
    assert held[-1] == Counter({"call-1": 2, "call-2": 2, "call-3": 1})


def _per_request(session: Session, folder: Path) -> list[tuple[int, int]]:
    """(estimate, truth) of the tool results' tokens each request held, as occupancy estimates them and as the
    stand-in counted them; the N-th response's truth is the N-th the stand-in counted."""
    names = {call.id: call.name for call in session.calls}
    counts = read_truth_log(folder / "truth.jsonl").values()
    estimates = occupancy(session, by_request=True, tool=CODEGRAPH).by_request
    pairs = []
    for estimate, count in zip(estimates, counts, strict=True):
        truth = dict.fromkeys(FAMILIES, 0)
        for call_id, tokens in count.results.items():
            truth[family(names.get(call_id, ""), tool=CODEGRAPH)] += tokens - count.context.get(call_id, 0)
        pairs.append((sum(estimate[f] for f in FAMILIES), sum(truth.values())))
    return pairs


def test_every_request_of_the_recorded_three_turn_session_holds_what_the_stand_in_counted() -> None:
    """tests/data/gemini/three-turns was recorded resumed too: the stand-in counted each earlier result twice from
    the first request of each resumed turn (5 and 9). The last request came right before only because the third
    turn's compaction wrote the history again (each result twice in it); those before it were 33-50% low."""
    folder = DATA / "three-turns"
    session = read_gemini([folder / "events.jsonl", folder / "events.t2.jsonl", folder / "events.t3.jsonl"])
    counts = list(read_truth_log(folder / "truth.jsonl").values())
    assert all(tokens == 2 * counts[3].results[call] for call, tokens in counts[4].results.items())
    pairs = _per_request(session, folder)
    error = sum(abs(estimate - truth) for estimate, truth in pairs) / sum(truth for _, truth in pairs)
    assert error <= 0.01, pairs
