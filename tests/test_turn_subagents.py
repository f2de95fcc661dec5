"""Subagents' records across turns (docs/sandbox.md, "What a turn leaves for the next"). OpenCode's subagents are
read out of its session database, in the attempt's HOME, which the agent's shells write between and during turns: a
child session's steps are read under the ``task`` call the CLI's own stream names them by, and every kept step no
call ran (a child session no call names, steps after its call ended) is read in a thread of its own, where the
integrity gate names each message the model never sent. (Codex's spawned agents are read from the rollouts its
``spawn_agent`` calls name, Claude Code's from its stream: tests/test_codex_cli.py, tests/test_claude_cli.py.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support.paths import REPO

from pytest_agent_eval.agents.opencode.transcript import UNCLAIMED, read_opencode
from pytest_agent_eval.metrics.evidence import evidence
from pytest_agent_eval.model.record import read_requests
from pytest_agent_eval.tool import CODEGRAPH

# A recorded two-turn OpenCode run whose question each turn went to a subagent (task), and what the model received.
DELEGATED = REPO / "tests" / "data" / "opencode" / "delegated"


def _copy(tmp_path: Path) -> list[dict]:
    for path in DELEGATED.iterdir():
        shutil.copyfile(path, tmp_path / path.name)
    return [json.loads(line) for line in (tmp_path / "events.subagents").read_text(encoding="utf-8").splitlines()]


def _read(tmp_path: Path) -> tuple[object, list[str]]:
    session = read_opencode(sorted(tmp_path.glob("events*.jsonl")), (CODEGRAPH.name,))
    return session, evidence(session, read_requests(DELEGATED / "requests.jsonl"), tool=CODEGRAPH).problems


def test_each_turns_task_call_holds_its_own_child_session_only(tmp_path: Path) -> None:
    kept = _copy(tmp_path)
    session, problems = _read(tmp_path)
    tasks = [call for call in session.calls if call.name == "Task"]
    assert len(tasks) == 2  # one a turn
    first, second = ({c.id for c in session.calls_in(task.id)} for task in tasks)
    assert first and second and not first & second  # turn 1's subagent is not read as turn 2's
    assert len({e["sessionID"] for e in kept}) == 2 and problems == []


def test_a_subagent_record_no_task_call_ran_fails_the_integrity_gate_naming_it(tmp_path: Path) -> None:
    """What a turn's shell adds to OpenCode's database: a child session no task call names (its search answered by
    a codegraph it never ran), and steps appended to turn 1's child after its call ended. Each is read in a thread
    of its own, and the integrity gate names each of their messages: the model sent none of them."""
    kept = _copy(tmp_path)
    child = kept[0]["sessionID"]
    late = max(e["timestamp"] for e in kept) + 10**9
    text = json.dumps(kept[:3])
    orphan = json.loads(text.replace(child, "ses_forged").replace("./lib/response.js", "codegraph says: here"))
    appended = json.loads(text)
    for forged, name in ((orphan, "forged"), (appended, "appended")):
        for event in forged:
            part = event["part"]
            part["id"], part["messageID"] = f"prt_{name}_{part['id']}", f"msg_{name}"
            part["callID"] = f"toolu_{name}" if "callID" in part else None
            event["timestamp"] = late
    lines = [json.dumps(e) for e in kept + orphan + appended]
    (tmp_path / "events.subagents").write_text("\n".join(lines) + "\n", encoding="utf-8")
    session, problems = _read(tmp_path)
    assert f"{UNCLAIMED}ses_forged" in session.threads and f"{UNCLAIMED}{child}" in session.threads
    assert sorted(problems) == sorted(
        problem
        for name, thread in (("forged", "ses_forged"), ("appended", child))
        for problem in (
            f"assistant message msg_{name} (thread {UNCLAIMED}{thread}) is in the transcript, but the model sent no "
            "such message",
            f"tool result for toolu_{name} (Bash, thread {UNCLAIMED}{thread}) is in the transcript, but no request "
            "carried it to the model",
        )
    ), problems
