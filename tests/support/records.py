"""Scored item records with known figures (a with-arm run and a without-arm run, as a campaign records them) and a
campaign on disk holding one recorded two-segment item."""

from __future__ import annotations

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.tool import CODEGRAPH
from support.synth import Transcript, explore_response

EXPLORE = "mcp__codegraph__codegraph_explore"


def with_run(run: int, cite: bool = True, scale: int = 1, again: bool = False, entry: str = "express") -> dict:
    """A with-arm run: one explore (two with ``again``) returning response.js and utils.js, then the answer."""
    t = Transcript()
    t.init(tools=["Read", EXPLORE])
    grown = 0  # what the last tool result added to the next request's prompt, in tokens (~2 chars each)
    for query in ["res.send", "res.send body"][: 2 if again else 1]:
        call = t.call(EXPLORE, query=query, ctx=t.ctx + 100 + grown)
        response = explore_response(
            {
                "lib/response.js": "function send(body) {}\n" * 20 * scale,
                "lib/utils.js": "exports.etag = etag;\n" * 6 * scale,
            }
        )
        t.reply(call, response)
        grown = len(response) // 2
    answer = "res.send lives in `lib/response.js`." if cite else "It is handled by the framework."
    t.say(answer, ctx=t.ctx + 100 + grown)
    t.result(answer)
    return record(t, entry, "with", run)


def without_run(run: int, lines: int = 100, entry: str = "express") -> dict:
    t = Transcript()
    t.init()
    call = t.call("Read", file_path="/repo/lib/response.js")
    content = "     1→function send(body) {}\n" * lines
    t.reply(call, content)
    t.say("res.send lives in lib/response.js", ctx=t.ctx + 100 + len(content) // 2)
    t.result("res.send lives in lib/response.js")
    return record(t, entry, "without", run)


def record(t: Transcript, entry: str, arm: str, run: int) -> dict:
    return {
        "id": f"{entry}-{arm}-{run}",
        "entry": entry,
        "arm": arm,
        "run": run,
        "outcome": "passed",
        "scores": score_session(t.session(), tool=CODEGRAPH),
    }


def recorded_campaign(out, cite: bool = True) -> Campaign:
    """A campaign of one with-arm item with two segments on disk and a stray file a baseline leaves out."""
    campaign = Campaign.create(out, {"backend": "scripted"})
    folder = campaign.item_dir("express-with-1")
    segments = []
    for turn, name in enumerate(["run-with-1.jsonl", "run-with-1.t2.jsonl"], start=1):
        t = Transcript()
        t.init(tools=["Read", EXPLORE])
        call = t.call(EXPLORE, query=f"question {turn}")
        t.reply(call, explore_response({"lib/response.js": "function send(body) {}\n" * 20}))
        answer = "It lives in `lib/response.js`." if cite else "The framework does it."
        t.say(answer)
        t.result(answer)
        segments.append(t.write(folder / name))
    (folder / "run-with-1.stderr").write_text("noise")
    scores = score_session(read_segments(segments), tool=CODEGRAPH)
    campaign.record(
        ItemRecord(
            id="express-with-1",
            entry="express",
            arm="with",
            arm_label="with",
            run=1,
            outcome="passed",
            scores=scores,
            figures={"allocation": scores["allocation"]["efficiency"]},
            segments=[str(p.relative_to(campaign.path)) for p in segments],
        )
    )
    return campaign
