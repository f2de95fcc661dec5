"""Synthetic Claude Code transcripts with known answers, written the way the CLI writes them.

    t = Transcript()
    t.init(tools=["Read", "mcp__codegraph__codegraph_explore"])
    e = t.call("mcp__codegraph__codegraph_explore", query="res.send")   # one message, one call
    t.reply(e, explore_response({"lib/response.js": "...source..."}))
    t.say("The answer cites `lib/response.js`.")
    t.result("lib/response.js does it")
    session = t.session()

Each assistant message is emitted as one event per content block, all with the same
``message.id`` and ``usage``, exactly as stream-json does. ``ctx`` sets the request's prompt
size (input + cache_read + cache_creation).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.claude_code.transcript import read_lines
from pytest_agent_eval.transcript import Session

_ids = itertools.count(1)


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(name: str, call_id: str | None = None, **tool_input: Any) -> dict:
    return {"type": "tool_use", "id": call_id or f"toolu_{next(_ids):04d}", "name": name, "input": tool_input}


def explore_response(
    sections: dict[str, str], headers: dict[str, str] | None = None, named: list[str] | None = None
) -> str:
    """A codegraph_explore response in the 1.6 format: blast radius, file sections, guidance.

    ``headers`` maps a path to its header's symbol list, e.g. ``"send(function), etag(calls)"``;
    ``named`` paths appear only in the blast radius, without a section.
    """
    headers = headers or {}
    lines = ["**Exploration: synthetic**", "", f"Found 3 symbols across {len(sections)} files.", ""]
    if named:
        lines += ["**Blast radius — what depends on these (update/verify before editing)**", ""]
        lines += [f"- `caller` ({p}:1) — 1 caller in `{p}`" for p in named]
        lines.append("")
    lines += ["**Source Code**", "", "> The code below is the verbatim source.", ""]
    for path, body in sections.items():
        header = f"**`{path}`**"
        if path in headers:
            header += f" — {headers[path]}"
        lines += [header, "", "```javascript", body, "```", ""]
    lines += ["", "> Some file sections were trimmed for size. Run another `codegraph_explore`."]
    return "\n".join(lines)


class Transcript:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.ctx = 10_000

    # -- events ---------------------------------------------------------------------------
    def init(
        self,
        tools: list[str] | None = None,
        mcp_servers: list[dict] | None = None,
        model: str | None = None,
        version: str | None = None,
    ) -> None:
        """``model``: the one the CLI asked for; ``version``: Claude Code's (both left out where None)."""
        event = {
            "type": "system",
            "subtype": "init",
            "session_id": "s-1",
            "tools": tools or ["Bash", "Glob", "Grep", "Read"],
            "mcp_servers": mcp_servers or [],
        }
        event |= {"model": model} if model else {}
        event |= {"claude_code_version": version} if version else {}
        self.events.append(event)

    def message(
        self,
        *blocks: dict,
        ctx: int | None = None,
        thread: str | None = None,
        msg_id: str | None = None,
        error: str | None = None,
    ) -> str:
        """One assistant request; ``ctx`` defaults to growing by 1,000 tokens per request."""
        self.ctx = ctx if ctx is not None else self.ctx + 1_000
        msg_id = msg_id or f"msg_{next(_ids):04d}"
        usage = {
            "input_tokens": 3,
            "cache_read_input_tokens": self.ctx - 3 - 100,
            "cache_creation_input_tokens": 100,
            "output_tokens": 2,
        }
        for block in blocks or (text(""),):
            event = {
                "type": "assistant",
                "parent_tool_use_id": thread,
                "session_id": "s-1",
                "message": {"id": msg_id, "role": "assistant", "content": [block], "usage": usage},
            }
            if error:
                event["error"] = error
            self.events.append(event)
        return msg_id

    def call(self, name: str, ctx: int | None = None, thread: str | None = None, **tool_input: Any) -> str:
        """A message with exactly one tool call; returns the call id."""
        block = tool_use(name, **tool_input)
        self.message(block, ctx=ctx, thread=thread)
        return block["id"]

    def calls(self, *blocks: dict, ctx: int | None = None, thread: str | None = None) -> list[str]:
        """Several tool calls fired in one message (the same-message rule)."""
        self.message(*blocks, ctx=ctx, thread=thread)
        return [b["id"] for b in blocks if b["type"] == "tool_use"]

    def reply(
        self, call_id: str, content: Any, is_error: bool | None = None, thread: str | None = None, uuid: str = ""
    ) -> None:
        block: dict = {"type": "tool_result", "tool_use_id": call_id, "content": content}
        if is_error is not None:
            block["is_error"] = is_error
        self.events.append(
            {
                "type": "user",
                "uuid": uuid or f"u-{call_id}",
                "parent_tool_use_id": thread,
                "message": {"role": "user", "content": [block]},
                "tool_use_result": {"stdout": "duplicated structured copy"},
            }
        )

    def say(self, value: str, ctx: int | None = None, thread: str | None = None) -> str:
        return self.message(text(value), ctx=ctx, thread=thread)

    def user(self, value: str) -> None:
        self.events.append({"type": "user", "message": {"role": "user", "content": value}})

    def compact(self, pre_tokens: int = 150_000, preserved: list[str] | None = None) -> None:
        """A boundary as Claude Code 2.1.332 writes it; ``preserved``: the uuids of the events it keeps."""
        meta: dict[str, Any] = {"trigger": "auto", "pre_tokens": pre_tokens}
        if preserved:
            meta["preserved_messages"] = {"anchor_uuid": "u-summary", "uuids": preserved, "all_uuids": preserved}
        self.events.append({"type": "system", "subtype": "compact_boundary", "compact_metadata": meta})

    def result(self, value: str, is_error: bool = False, num_turns: int = 1) -> None:
        self.events.append(
            {
                "type": "result",
                "subtype": "success",
                "is_error": is_error,
                "num_turns": num_turns,
                "result": value,
                "total_cost_usd": 0.01,
                "usage": {"input_tokens": 999_999},
            }
        )

    # -- output ---------------------------------------------------------------------------
    def lines(self) -> list[str]:
        return [json.dumps(e) for e in self.events]

    def session(self) -> Session:
        return read_lines(self.lines())

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text("\n".join(self.lines()) + "\n", encoding="utf-8")
        return path


def write_grep_session(path: Path) -> None:
    """A one-turn interactive session file: one Grep that finds lib/utils.js, and an answer naming it."""
    t = Transcript()
    grep = t.call("Grep", pattern="etag")
    t.reply(grep, "lib/utils.js")
    t.say("See lib/utils.js.")
    t.write(path)
