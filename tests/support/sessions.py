"""Canned sessions with known outcomes: a clean with-arm and without-arm, a contaminated without-arm, an API
error, a run that never finished, and a two-turn run written to disk as the CLI writes a resumed session."""

from __future__ import annotations

from pathlib import Path

from support.synth import Transcript, explore_response

EXPLORE = "mcp__codegraph__codegraph_explore"


def with_clean(answer: str = "res.send lives in `lib/response.js`.") -> Transcript:
    t = Transcript()
    t.init(tools=["Bash", "Read", EXPLORE])
    call = t.call(EXPLORE, query="res.send")
    t.reply(call, explore_response({"lib/response.js": "function send() {}\n" * 40, "lib/express.js": "x\n" * 60}))
    t.say(answer)
    t.result(answer)
    return t


def without_clean() -> Transcript:
    t = Transcript()
    t.init()
    call = t.call("Read", file_path="lib/response.js")
    t.reply(call, "     1→function send() {}\n" * 30)
    t.say("It is `lib/response.js`.")
    t.result("It is `lib/response.js`.")
    return t


def without_contaminated(
    command: str = "codegraph explore 'res.send'",
    output: str = "**Exploration: res.send**\n\n**`lib/response.js`** — send(function)\n\nfunction send() {}\n",
) -> Transcript:
    """A without-arm whose shell ``command`` printed the tool's ``output`` (codegraph's by default)."""
    t = Transcript()
    t.init()
    call = t.call("Bash", command=command)
    t.reply(call, output)
    t.result("It is `lib/response.js`.")
    return t


def api_error() -> Transcript:
    t = Transcript()
    t.init()
    t.message(error="rate_limit")
    t.result("API Error: rate limited", is_error=True)
    return t


def no_result() -> Transcript:
    t = Transcript()
    t.init()
    t.say("thinking about it")
    return t


def two_turn_run(folder: Path) -> Path:
    """run-with-1.jsonl + run-with-1.t2.jsonl: one session, resumed once."""
    first = Transcript()
    first.init(tools=["Read", EXPLORE])
    call = first.call(EXPLORE, query="res.send Content-Type")
    first.reply(
        call,
        explore_response(
            {"lib/response.js": "x = 1\n" * 300, "lib/express.js": "y = 2\n" * 100}, {"lib/response.js": "send(method)"}
        ),
    )
    first.say("`send` in lib/response.js decides it.")
    first.result("`send` in lib/response.js decides it.")
    second = Transcript()
    second.ctx = first.ctx
    read = second.call("Read", file_path="/tmp/t/lib/express.js")
    second.reply(read, "     1→y = 2\n" * 100)
    second.say("lib/express.js wires it.")
    second.result("lib/express.js wires it.")
    first.write(folder / "run-with-1.jsonl")
    second.write(folder / "run-with-1.t2.jsonl")
    return folder / "run-with-1.jsonl"
