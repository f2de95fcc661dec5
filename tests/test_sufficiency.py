"""Explore sufficiency: every bucket, each of the eight rules both ways (docs/metrics/sufficiency.md), runs
checked by hand."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.synth import Transcript, explore_response, text, tool_use
from support.transcripts import transcripts

from pytest_agent_eval.agents.claude_code.transcript import read_segments, read_session_file
from pytest_agent_eval.metrics.figures import figures_of
from pytest_agent_eval.metrics.scorecard import score_session
from pytest_agent_eval.metrics.sufficiency import BUCKETS, CallVerdict, Sufficiency, sufficiency
from pytest_agent_eval.report.blocks.sufficiency import render_sufficiency
from pytest_agent_eval.tool import CODEGRAPH, RetrievalTool

EXPLORE = "mcp__codegraph__codegraph_explore"
DATA = Path(__file__).parent / "data"
SHARED = transcripts()
SOURCEGRAPH = replace(CODEGRAPH, name="sourcegraph", explore="sg_keyword_search", cli="src")
HDA_MCP = "ccb/linux-hda-intel-suspend-fault-001/mcp/claude-code.txt"


def explore(t: Transcript, query: str, files: list[str], named: list[str] | None = None, thread: str | None = None):
    call = t.call(EXPLORE, thread=thread, query=query)
    t.reply(call, explore_response(dict.fromkeys(files, "code()"), named=named), thread=thread)
    return call


def then(t: Transcript, name: str, thread: str | None = None, **tool_input) -> str:
    """The agent's next action: one call in a later message, answered."""
    call = t.call(name, thread=thread, **tool_input)
    t.reply(call, "ok", thread=thread)
    return call


def judge(t: Transcript, tool: RetrievalTool = CODEGRAPH) -> Sufficiency:
    return sufficiency(t.session(), tool)


def only(t: Transcript) -> CallVerdict:
    [verdict] = judge(t).calls
    return verdict


def one_shot(name: str, **tool_input) -> CallVerdict:
    t = Transcript()
    explore(t, "q", ["lib/response.js"], named=["lib/router/index.js"])
    then(t, name, **tool_input)
    t.say("done")
    return judge(t).calls[0]


# -- the buckets -------------------------------------------------------------------------
def test_buckets_are_the_reference_array_worst_to_best():
    assert BUCKETS == (
        ("explore_again", "explore again", "insufficient: did not answer"),
        # "excerpt", not "allocation": allocation efficiency is another metric (docs/metrics/sufficiency.md)
        ("read_returned", "Read a file we returned", "excerpt: right file, not the part needed"),
        ("read_missed", "Read a file we did not return", "recall: file never surfaced"),
        ("search", "Grep/Glob", "recall (weak): still hunting for the file"),
        ("sufficient", "moved on / answered", "sufficient"),
    )


@pytest.mark.parametrize(
    ("name", "tool_input", "bucket", "reaction", "note"),
    [
        (EXPLORE, {"query": "again"}, "explore_again", "codegraph_explore", ""),
        ("mcp__codegraph__codegraph_search", {"query": "x"}, "explore_again", "codegraph_search", ""),
        ("Read", {"file_path": "/tmp/t-base/lib/response.js"}, "read_returned", "Read response.js", ""),
        ("Read", {"file_path": "/t/lib/router/index.js"}, "read_missed", "Read index.js", "(named, not returned)"),
        ("Read", {"file_path": "/t/lib/never/mentioned.js"}, "read_missed", "Read mentioned.js", ""),
        ("NotebookRead", {"notebook_path": "/t/lib/response.js"}, "read_returned", "Read response.js", ""),
        ("Grep", {"pattern": "send"}, "search", "Grep", ""),
        ("Glob", {"pattern": "**/*.js"}, "search", "Glob", ""),
        ("Edit", {"file_path": "/t/lib/response.js"}, "sufficient", "Edit", ""),
        ("Write", {"file_path": "/t/notes.md", "content": "x"}, "sufficient", "Write", ""),
        ("WebFetch", {"url": "https://example.com"}, "sufficient", "WebFetch", ""),
    ],
)
def test_each_bucket_from_the_next_tool(name, tool_input, bucket, reaction, note):
    verdict = one_shot(name, **tool_input)
    assert (verdict.bucket, verdict.reaction, verdict.note) == (bucket, reaction, note)


def test_no_further_call_is_the_final_answer():
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    t.say("res.send sets Content-Type in lib/response.js")
    t.result("answer")
    verdict = only(t)
    assert (verdict.bucket, verdict.reaction) == ("sufficient", "final answer")


# -- rule 1: only a later message counts -------------------------------------------------
def test_same_message_read_is_concurrent_and_the_later_action_decides():
    t = Transcript()
    e, r = t.calls(tool_use(EXPLORE, query="q"), tool_use("Read", file_path="/t/lib/response.js"))
    t.reply(e, explore_response({"lib/response.js": "code()"}))
    t.reply(r, "source")
    then(t, "Edit", file_path="/t/lib/response.js")
    s = judge(t)
    assert [(c.bucket, c.reaction) for c in s.calls] == [("sufficient", "Edit")]
    assert s.concurrent == 1


def test_a_read_in_a_later_message_is_a_reaction_not_concurrent():
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    then(t, "Read", file_path="/t/lib/response.js")
    s = judge(t)
    assert s.counts["read_returned"] == 1
    assert s.concurrent == 0


def test_two_explores_in_one_message_do_not_judge_each_other():
    t = Transcript()
    a, b = t.calls(tool_use(EXPLORE, query="a"), tool_use(EXPLORE, query="b"))
    t.reply(a, explore_response({"lib/a.js": "a()"}))
    t.reply(b, explore_response({"lib/b.js": "b()"}))
    then(t, "Read", file_path="/t/lib/b.js")
    s = judge(t)
    assert [(c.query, c.bucket, c.note) for c in s.calls] == [
        ("a", "read_missed", ""),
        ("b", "read_returned", ""),
    ]
    assert s.concurrent == 0  # an explore is not a file access


@pytest.mark.parametrize("command", ["cat lib/response.js", "grep -rn send lib/"])  # a shell read, a shell search
def test_a_shell_read_in_the_same_message_is_concurrent_too(command):
    t = Transcript()
    e, b = t.calls(tool_use(EXPLORE, query="q"), tool_use("Bash", command=command))
    t.reply(e, explore_response({"lib/response.js": "code()"}))
    t.reply(b, "source")
    t.say("done")
    s = judge(t)
    assert (s.calls[0].bucket, s.concurrent) == ("sufficient", 1)


def test_a_read_beside_two_explores_is_stepped_over_for_each():
    t = Transcript()
    a, b, r = t.calls(tool_use(EXPLORE, query="a"), tool_use(EXPLORE, query="b"), tool_use("Read", file_path="/t/x.js"))
    t.reply(a, explore_response({"lib/a.js": "a()"}))
    t.reply(b, explore_response({"lib/b.js": "b()"}))
    t.reply(r, "source")
    t.say("done")
    assert judge(t).concurrent == 2


def test_a_read_issued_before_the_explore_in_its_message_is_not_concurrent():
    t = Transcript()
    read, explore_, grep = tool_use("Read", file_path="/t/x.js"), tool_use(EXPLORE, query="q"), tool_use("Grep")
    r, e, g = t.calls(read, explore_, grep)
    t.reply(r, "source")
    t.reply(e, explore_response({"lib/a.js": "a()"}))
    t.reply(g, "lib/a.js:1")
    t.say("done")
    s = judge(t)
    assert (s.concurrent, s.calls[0].bucket) == (1, "sufficient")  # only the Grep after it was stepped over


# -- rule 2: bookkeeping is stepped over --------------------------------------------------
def test_toolsearch_then_explore_again_is_explore_again():
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    then(t, "ToolSearch", query="select:mcp__codegraph__codegraph_explore")
    explore(t, "q2", ["lib/utils.js"])
    t.say("done")
    assert [c.bucket for c in judge(t).calls] == ["explore_again", "sufficient"]


def test_todowrite_then_read_is_judged_by_the_read():
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    then(t, "TodoWrite", todos=[])
    then(t, "Read", file_path="/t/lib/response.js")
    assert only(t).bucket == "read_returned"


def test_bookkeeping_alone_before_the_answer_is_moved_on():
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    then(t, "TodoWrite", todos=[])
    t.say("done")
    assert (only(t).bucket, only(t).reaction) == ("sufficient", "final answer")


# -- rule 3: subagents are a separate thread ------------------------------------------------
def test_parent_explore_is_not_blamed_for_a_subagent_read():
    t = Transcript()
    agent = t.call("Agent", subagent_type="Explore", prompt="look")
    explore(t, "sub q", ["lib/response.js"], thread=agent)
    explore(t, "parent q", ["lib/other.js"])
    then(t, "Read", thread=agent, file_path="/t/lib/response.js")
    t.reply(agent, "the subagent's report")
    t.say("done")
    s = judge(t)
    by_query = {c.query: c for c in s.calls}
    assert (by_query["parent q"].bucket, by_query["parent q"].thread) == ("sufficient", "main")
    assert (by_query["sub q"].bucket, by_query["sub q"].thread) == ("read_returned", agent)


def test_the_subagent_thread_is_shown_in_the_block():
    t = Transcript()
    agent = t.call("Agent", prompt="look")
    explore(t, "sub q", ["lib/response.js"], thread=agent)
    t.say("found it", thread=agent)
    t.reply(agent, "report")
    t.say("done")
    assert '1. [subagent] "sub q" [1 file] → final answer' in render_sufficiency(judge(t))


# -- rule 4: a delegation is judged by what the subagent did first ---------------------------
@pytest.mark.parametrize(
    ("delegate", "first", "tool_input", "bucket", "reaction"),
    [
        ("Agent", "Bash", {"command": "grep -rn sceneNonce packages/"}, "search", "Agent → Bash search"),
        ("Agent", "Grep", {"pattern": "sceneNonce"}, "search", "Agent → Grep"),
        ("Task", "Read", {"file_path": "/t/lib/response.js"}, "read_returned", "Task → Read response.js"),
        ("Agent", "Edit", {"file_path": "/t/lib/response.js"}, "sufficient", "Agent → Edit"),
    ],
)
def test_delegation_is_judged_by_the_subagents_first_call(delegate, first, tool_input, bucket, reaction):
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    agent = t.call(delegate, prompt="find the nonce")
    then(t, "ToolSearch", thread=agent, query="select:Grep")  # bookkeeping inside the subagent too
    then(t, first, thread=agent, **tool_input)
    t.reply(agent, "report")
    t.say("done")
    verdict = only(t)
    assert (verdict.bucket, verdict.reaction) == (bucket, reaction)


@pytest.mark.parametrize("said", [True, False])  # False: the subagent left no message (cut off, not recorded)
def test_delegation_that_never_runs_a_tool_is_moved_on(said):
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    agent = t.call("Agent", prompt="think")
    if said:
        t.say("nothing to look up", thread=agent)
    t.reply(agent, "report")
    t.say("done")
    assert (only(t).bucket, only(t).reaction) == ("sufficient", "Agent → moved on")


def test_nested_delegation_is_not_followed():
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    agent = t.call("Agent", prompt="delegate further")
    nested = t.call("Task", thread=agent, prompt="grep it")
    then(t, "Grep", thread=nested, pattern="x")  # the grandchild's grep is not the verdict
    t.reply(nested, "report", thread=agent)
    t.reply(agent, "report")
    t.say("done")
    assert (only(t).bucket, only(t).reaction) == ("sufficient", "Agent → moved on")


# -- rule 5: shell file access counts ----------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "bucket", "reaction"),
    [
        ("sed -n '100,200p' lib/x.js", "read_returned", "Bash Read x.js"),
        ("head -50 /repo/lib/x.js", "read_returned", "Bash Read x.js"),
        ("cat lib/elsewhere.js", "read_missed", "Bash Read elsewhere.js"),
        ("grep -rn 'send' lib/", "search", "Bash search"),
        ("rg etag", "search", "Bash search"),
        ("find . -name '*.js'", "search", "Bash search"),
        ("cat > /tmp/note.md <<EOF\nnotes\nEOF", "sufficient", "Bash write"),
        ("echo done > /tmp/out.txt", "sufficient", "Bash write"),
        ("npm test", "sufficient", "Bash"),
        # a > or << inside quotes redirects nothing; a read inside $( … ) or backticks is a read
        ("grep -n '=> {' lib/", "search", "Bash search"),
        ('rg "self->next"', "search", "Bash search"),
        ("grep 'a << b' lib/", "search", "Bash search"),
        ("awk '$3 > 10' lib/x.js", "read_returned", "Bash Read x.js"),
        ('echo "$(cat lib/x.js)"', "read_returned", "Bash Read x.js"),
        ("x=`head -n 40 lib/x.js`", "read_returned", "Bash Read x.js"),
        ("cat <<'EOF' > /tmp/a.md\nnotes\nEOF", "sufficient", "Bash write"),
        ('echo "a > b" > /tmp/c.txt', "sufficient", "Bash write"),
    ],
)
def test_shell_reads_and_searches_count(command, bucket, reaction):
    t = Transcript()
    explore(t, "q", ["lib/x.js"])
    then(t, "Bash", command=command)
    t.say("done")
    verdict = only(t)
    assert (verdict.bucket, verdict.reaction) == (bucket, reaction)


# -- rule 6: returned means the source was shipped ----------------------------------------------
def test_named_not_returned_is_a_recall_miss_with_the_flag():
    t = Transcript()
    explore(t, "q", ["components/App.tsx"], named=["components/canvases/StaticCanvas.tsx"])
    then(t, "Read", file_path="/repo/packages/excalidraw/components/canvases/StaticCanvas.tsx")
    verdict = only(t)
    assert (verdict.bucket, verdict.note) == ("read_missed", "(named, not returned)")


def test_real_express_response_ships_three_files():
    response = (DATA / "explore-express-1.6.1.txt").read_text(encoding="utf-8")
    verdicts = {}
    for path in ("/tmp/t-base/lib/router/index.js", "/tmp/t-base/lib/application.js"):
        t = Transcript()
        e = t.call(EXPLORE, query="How does res.send decide the Content-Type and ETag")
        t.reply(e, [text(response)])  # MCP results arrive as a list of text blocks
        then(t, "Read", file_path=path)
        verdicts[path] = only(t)
    assert verdicts["/tmp/t-base/lib/router/index.js"].files == 3
    assert verdicts["/tmp/t-base/lib/router/index.js"].bucket == "read_returned"
    assert (verdicts["/tmp/t-base/lib/application.js"].bucket, verdicts["/tmp/t-base/lib/application.js"].note) == (
        "read_missed",
        "",
    )


# -- rule 7: a file an earlier explore shipped still counts as returned --------------------------
def test_reread_of_an_earlier_explores_file_is_allocation_with_the_note():
    t = Transcript()
    explore(t, "first", ["lib/response.js", "lib/utils.js"])
    explore(t, "second", ["lib/response.js"])
    then(t, "Read", file_path="/tmp/t-new/lib/utils.js", offset=195)
    s = judge(t)
    assert (s.calls[1].bucket, s.calls[1].reaction, s.calls[1].note) == (
        "read_returned",
        "Read utils.js",
        "(returned by an earlier explore)",
    )
    assert "→ Read utils.js (returned by an earlier explore)" in render_sufficiency(s)


def test_a_later_explore_does_not_count_as_earlier():
    t = Transcript()
    explore(t, "first", ["lib/response.js"])
    then(t, "Read", file_path="/t/lib/utils.js")
    explore(t, "second", ["lib/utils.js"])
    t.say("done")
    assert [c.bucket for c in judge(t).calls] == ["read_missed", "sufficient"]


def test_another_threads_explore_is_not_earlier():
    t = Transcript()
    agent = t.call("Agent", prompt="look")
    explore(t, "sub", ["lib/utils.js"], thread=agent)
    t.say("report", thread=agent)
    t.reply(agent, "report")
    explore(t, "parent", ["lib/response.js"])
    then(t, "Read", file_path="/t/lib/utils.js")
    parent = next(c for c in judge(t).calls if c.query == "parent")
    assert (parent.bucket, parent.note) == ("read_missed", "")


# -- rule 8: errored calls are counted, not bucketed ----------------------------------------------
def test_errored_and_unanswered_explores_are_counted_not_bucketed():
    t = Transcript()
    bad = t.call(EXPLORE, query="not indexed")
    t.reply(bad, "Error: project not indexed", is_error=True)
    then(t, "Read", file_path="/t/lib/response.js")
    t.call(EXPLORE, query="cut off")  # the run ended before it returned
    s = judge(t)
    assert (s.errors, s.answered) == (2, 0)
    assert [(c.bucket, c.reaction) for c in s.calls] == [(None, "errored"), (None, "no response")]
    assert s.counts == dict.fromkeys(s.counts, 0)
    assert render_sufficiency(s) == (
        "Explore sufficiency: no answered codegraph_explore calls (2 errored/unanswered calls, not bucketed)"
    )


def test_is_error_false_is_answered_and_an_errored_explore_ships_nothing_earlier():
    t = Transcript()
    bad = t.call(EXPLORE, query="bad")
    t.reply(bad, explore_response({"lib/utils.js": "x"}), is_error=True)
    good = t.call(EXPLORE, query="good")
    t.reply(good, explore_response({"lib/response.js": "x"}), is_error=False)
    then(t, "Read", file_path="/t/lib/utils.js")
    s = judge(t)
    assert (s.errors, s.answered) == (1, 1)
    assert (s.calls[1].bucket, s.calls[1].note) == ("read_missed", "")


# -- turns and queries ----------------------------------------------------------------------------
def test_an_answered_turn_ends_the_search_for_a_reaction():
    """A text-only message ends the turn; the next question's explore is not a verdict on this one."""
    t = Transcript()
    explore(t, "q1", ["lib/response.js"])
    t.say("Answer one.")
    t.user("And the ETag?")
    explore(t, "q2", ["lib/utils.js"])
    t.say("Answer two.")
    assert [(c.bucket, c.reaction) for c in judge(t).calls] == [
        ("sufficient", "final answer"),
        ("sufficient", "final answer"),
    ]


def test_thinking_before_the_next_call_does_not_end_the_turn():
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    t.message(text("Let me look again."), tool_use(EXPLORE, query="q2"))
    assert judge(t).calls[0].bucket == "explore_again"


def test_query_falls_back_to_the_first_string_input():
    t = Transcript()
    e = t.call(EXPLORE, depth=2, task="how does routing work")
    t.reply(e, explore_response({"lib/router/index.js": "x"}))
    t.say("done")
    assert only(t).query == "how does routing work"


# -- runs checked by hand ----------------------------------------------------------------------------
def cg22_express_baseline() -> Transcript:
    t = Transcript()
    first = t.call(EXPLORE, query="res.send Content-Type ETag generation")
    t.reply(first, [text((DATA / "explore-express-1.6.1.txt").read_text(encoding="utf-8"))])
    explore(t, "response.js res.send function body", ["lib/response.js", "lib/utils.js", "lib/application.js"])
    then(t, "Read", file_path="/private/tmp/t-base/lib/response.js")
    t.say("res.send picks the Content-Type from the body type and generates the ETag in lib/utils.js")
    t.result("answer")
    return t


def test_cg22_express_run_baseline_1():
    s = judge(cg22_express_baseline())
    assert [(c.bucket, c.reaction) for c in s.calls] == [
        ("explore_again", "codegraph_explore"),
        ("read_returned", "Read response.js"),
    ]


def test_rendered_block_of_a_hand_checked_run():
    assert render_sufficiency(judge(cg22_express_baseline())) == "\n".join(
        [
            "Explore sufficiency — what the agent did NEXT (2 answered calls):",
            "    1  50%  explore again                  insufficient: did not answer",
            "    1  50%  Read a file we returned        excerpt: right file, not the part needed",
            "    0   0%  Read a file we did not return  recall: file never surfaced",
            "    0   0%  Grep/Glob                      recall (weak): still hunting for the file",
            "    0   0%  moved on / answered            sufficient",
            '  1. "res.send Content-Type ETag generation" [3 files] → codegraph_explore',
            '  2. "response.js res.send function body" [3 files] → Read response.js',
        ]
    )


def test_excalidraw_run2_recall_then_allocation_through_a_subagent():
    t = Transcript()
    explore(t, "how does the canvas render", ["components/App.tsx"])
    explore(t, "renderer pipeline", ["renderer/renderScene.ts"])
    explore(
        t,
        "interactive vs static canvas",
        ["components/App.tsx", "components/canvases/InteractiveCanvas.tsx"],
        named=["components/canvases/StaticCanvas.tsx"],
    )
    then(t, "Read", file_path="/repo/excalidraw/packages/excalidraw/components/canvases/StaticCanvas.tsx")
    explore(t, "shape generation", ["element/src/shape.ts", "element/src/renderElement.ts"])
    agent = t.call("Agent", subagent_type="Explore", prompt="trace the shape cache")
    then(t, "Bash", thread=agent, command="cat packages/element/src/shape.ts")
    t.reply(agent, "report")
    t.say("done")
    s = judge(t)
    assert [(c.bucket, c.reaction, c.note) for c in s.calls] == [
        ("explore_again", "codegraph_explore", ""),
        ("explore_again", "codegraph_explore", ""),
        ("read_missed", "Read StaticCanvas.tsx", "(named, not returned)"),
        ("read_returned", "Agent → Bash Read shape.ts", ""),
    ]


def test_excalidraw_canvas_nonce_has_no_sufficient_call():
    t = Transcript()
    explore(t, "canvasNonce data flow", ["components/App.tsx"])
    explore(t, "where is canvasNonce set", ["scene/Renderer.ts"])
    explore(t, "sceneNonce", ["scene/Scene.ts"])
    agent = t.call("Agent", prompt="find where sceneNonce changes")
    then(t, "Grep", thread=agent, pattern="sceneNonce")
    t.reply(agent, "report")
    t.say("done")
    block = render_sufficiency(judge(t))
    assert "    2  67%  explore again" in block
    assert "    1  33%  Grep/Glob" in block
    assert "    0   0%  moved on / answered" in block
    assert block.endswith('3. "sceneNonce" [1 file] → Agent → Grep')


def test_note_line_counts_concurrent_and_errored():
    t = Transcript()
    e, r = t.calls(tool_use(EXPLORE, query="q"), tool_use("Grep", pattern="send"))
    t.reply(e, explore_response({"lib/response.js": "x"}))
    t.reply(r, "lib/response.js:111")
    bad = t.call(EXPLORE, query="broken")
    t.reply(bad, "boom", is_error=True)
    t.say("done")
    block = render_sufficiency(judge(t))
    assert block.splitlines()[0] == "Explore sufficiency — what the agent did NEXT (1 answered call):"
    assert '2. "broken" [0 files] → errored (not bucketed)' in block
    assert (
        block.splitlines()[-1]
        == "  note: 1 concurrent file access stepped over · 1 errored/unanswered call (not bucketed)"
    )


def test_to_dict_shape():
    session = cg22_express_baseline().session()
    data = sufficiency(session, tool=CODEGRAPH).to_dict()
    explore_ids = [call.id for call in session.calls if call.name.endswith("codegraph_explore")]
    # Each verdict names the call it judged, so reports join them by id, not by position.
    assert [verdict.pop("call") for verdict in data["calls"]] == explore_ids
    assert data == {
        "counts": {"explore_again": 1, "read_returned": 1, "read_missed": 0, "search": 0, "sufficient": 0},
        "calls": [
            {
                "query": "res.send Content-Type ETag generation",
                "files": 3,
                "bucket": "explore_again",
                "reaction": "codegraph_explore",
                "note": "",
                "thread": "main",
            },
            {
                "query": "response.js res.send function body",
                "files": 3,
                "bucket": "read_returned",
                "reaction": "Read response.js",
                "note": "",
                "thread": "main",
            },
        ],
        "errors": 0,
        "concurrent": 0,
        "answered": 2,
    }


# -- real transcripts nobody here wrote ---------------------------------------------------------------
def test_sourcegraph_arm_finds_twelve_explore_calls():
    s = sufficiency(read_segments([SHARED / HDA_MCP]), SOURCEGRAPH)
    assert len(s.calls) == 12
    assert (s.answered, s.errors) == (12, 0)
    # Eleven are followed by another Sourcegraph call; the last by `ls -la /tests/`, a shell search.
    assert s.counts == {"explore_again": 11, "read_returned": 0, "read_missed": 0, "search": 1, "sufficient": 0}
    assert s.calls[-1].reaction == "Bash search"
    assert {c.reaction for c in s.calls[:-1]} == {"sg_keyword_search", "sg_read_file", "sg_commit_search"}


@pytest.mark.parametrize(
    "path",
    sorted(p.relative_to(SHARED).as_posix() for p in SHARED.rglob("*") if p.suffix in (".txt", ".jsonl", ".ndjson")),
)
def test_every_real_transcript_scores(path):
    session = read_segments([SHARED / path])
    for tool in (CODEGRAPH, SOURCEGRAPH, replace(CODEGRAPH, name="grep", explore="Grep", cli="grep")):
        s = sufficiency(session, tool)
        explores = sum(tool.is_explore(c.name) for c in session.calls)
        assert s.answered + s.errors == explores == len(s.calls)
        assert render_sufficiency(s)


def test_real_subagent_thread_is_judged_on_its_own(tmp_path):
    """spotter's Task subagent, stitched in, with Grep standing in for the explore tool."""
    session_file = tmp_path / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
    shutil.copy(SHARED / "spotter" / session_file.name, session_file)
    shutil.copytree(SHARED / "spotter" / "subagents", tmp_path / session_file.stem / "subagents")
    session = read_session_file(session_file)
    [task] = [c for c in session.calls if c.name == "Task"]
    s = sufficiency(session, replace(CODEGRAPH, name="grep", explore="Grep", cli="grep"))
    in_subagent = [c for c in s.calls if c.thread == task.id]
    assert len(in_subagent) == 2  # the subagent's two Greps, judged inside its thread
    assert len(s.calls) == 12


def test_the_worked_example_of_the_docs_page():
    """docs/metrics/sufficiency.md, "A worked example", call by call."""
    t = Transcript()
    t.init(tools=["Read", "Grep", EXPLORE])
    first, beside = t.calls(
        tool_use(EXPLORE, query="res.send Content-Type"), tool_use("Read", file_path="lib/express.js")
    )
    t.reply(first, explore_response({"lib/response.js": "send()", "lib/utils.js": "etag()"}))
    t.reply(beside, "     1→module.exports = app")
    bookkeeping, read = t.calls(tool_use("TodoWrite", todos=[]), tool_use("Read", file_path="lib/response.js"))
    t.reply(bookkeeping, "ok")
    t.reply(read, "ok")
    explore(t, "etag generation", ["lib/etag.js"], named=["lib/request.js"])
    then(t, "Read", file_path="lib/request.js")
    explore(t, "res.format", ["lib/view.js"])
    then(t, "Grep", pattern="format")
    explore(t, "router", ["lib/router/index.js"])
    failed = t.call(EXPLORE, query="router layer")
    t.reply(failed, "Error: the index is being rebuilt", True)
    explore(t, "content negotiation", ["lib/response.js"])
    t.say("res.send sets it in `lib/response.js`.")
    s = judge(t)
    assert [(c.query, c.bucket, c.reaction, c.note) for c in s.calls] == [
        ("res.send Content-Type", "read_returned", "Read response.js", ""),
        ("etag generation", "read_missed", "Read request.js", "(named, not returned)"),
        ("res.format", "search", "Grep", ""),
        ("router", "explore_again", "codegraph_explore", ""),
        ("router layer", None, "errored", "(not bucketed)"),
        ("content negotiation", "sufficient", "final answer", ""),
    ]
    assert s.counts == dict.fromkeys(("explore_again", "read_returned", "read_missed", "search", "sufficient"), 1)
    assert (s.answered, s.errors, s.concurrent) == (5, 1, 1)
    figures = figures_of(score_session(t.session(), tool=CODEGRAPH), has_tool=True)
    assert figures["explore_calls"] == 5 and figures["explore_errors"] == 1
    assert {figures[f"{key}_share"] for key, _, _ in BUCKETS} == {0.2}


# -- edge inputs each rule must hold on (python bench/mutation.py metrics/sufficiency.py) ----------------------------
def test_a_shell_write_or_a_bash_call_without_a_command_in_the_same_message_is_not_concurrent():
    t = Transcript()
    e, w, n = t.calls(tool_use(EXPLORE, query="q"), tool_use("Bash", command="echo x > /tmp/o"), tool_use("Bash"))
    t.reply(e, explore_response({"lib/response.js": "code()"}))
    t.reply(w, "")
    t.reply(n, "")
    t.say("done")
    assert judge(t).concurrent == 0


def test_the_query_is_the_query_input_wherever_it_stands():
    t = Transcript()
    e = t.call(EXPLORE, depth="deep", query="how does routing work")
    t.reply(e, explore_response({"lib/router/index.js": "x"}))
    t.say("done")
    assert only(t).query == "how does routing work"


def test_an_explore_input_with_no_string_value_has_an_empty_query():
    t = Transcript()
    e = t.call(EXPLORE, depth=2)
    t.reply(e, explore_response({"lib/router/index.js": "x"}))
    t.say("done")
    assert only(t).query == ""


@pytest.mark.parametrize(
    ("tool_input", "reaction"),
    [
        ({"file_path": "README.md"}, "Read README.md"),  # a bare file name: no folder to cut
        ({"file_path": "/t/lib/"}, "Read lib"),  # a folder's trailing slash is not its name
        ({"file_path": "/t/docs/INDEX"}, "Read INDEX"),
        ({}, "Read"),  # no path at all: the verb alone, no trailing blank
    ],
)
def test_a_reads_label_is_the_files_own_name(tool_input, reaction):
    assert one_shot("Read", **tool_input).reaction == reaction


def test_only_the_mcp_prefix_is_cut_from_an_explore_again():
    """``mcp__server__tool`` shows as ``tool``; a name the tool owns without that prefix is shown whole."""
    assert one_shot("codegraph__codegraph_search", query="x").reaction == "codegraph__codegraph_search"


def test_an_errored_explore_still_names_its_call():
    t = Transcript()
    bad = t.call(EXPLORE, query="not indexed")
    t.reply(bad, "Error: project not indexed", is_error=True)
    t.say("done")
    assert only(t).call_id == bad


def test_a_subagent_message_holding_bookkeeping_then_a_read_is_judged_by_the_read():
    """Rule 4 steps over bookkeeping inside one subagent message, not the rest of that message."""
    t = Transcript()
    explore(t, "q", ["lib/response.js"])
    agent = t.call("Agent", prompt="look")
    s, r = t.calls(tool_use("TodoWrite", todos=[]), tool_use("Read", file_path="/t/lib/response.js"), thread=agent)
    t.reply(s, "ok", thread=agent)
    t.reply(r, "source", thread=agent)
    t.reply(agent, "report")
    t.say("done")
    assert (only(t).bucket, only(t).reaction) == ("read_returned", "Agent → Read response.js")


def test_the_note_is_carried_across_a_delegation():
    t = Transcript()
    explore(t, "q", ["lib/response.js"], named=["lib/router/index.js"])
    agent = t.call("Agent", prompt="look")
    then(t, "Read", thread=agent, file_path="/t/lib/router/index.js")
    t.reply(agent, "report")
    t.say("done")
    assert (only(t).reaction, only(t).note) == ("Agent → Read index.js", "(named, not returned)")
