"""Allocation efficiency over synthetic transcripts with known answers, and one real explore response."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from support.synth import Transcript, explore_response

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.metrics.allocation import allocation, citation_paths, code_span_names, symbol_owners
from pytest_agent_eval.report.blocks.allocation import render_allocation
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.tool.explore_answer import file_sections
from pytest_agent_eval.transcript import Session

EXPLORE = "mcp__codegraph__codegraph_explore"
DATA = Path(__file__).parent / "data"


def sized(chars: dict[str, int], headers: dict[str, str] | None = None) -> str:
    """An explore response whose file sections measure exactly ``chars`` (path → section size)."""
    bare = file_sections(explore_response(dict.fromkeys(chars, ""), headers))
    bodies = {s.path: "x" * (chars[s.path] - s.chars) for s in bare}
    text = explore_response(bodies, headers)
    assert {s.path: s.chars for s in file_sections(text)} == chars
    return text


def run(*responses: str, answer: str | None = None, queries: list[str] | None = None) -> Transcript:
    t = Transcript()
    for i, response in enumerate(responses):
        t.reply(t.call(EXPLORE, query=(queries or [f"q{i + 1}"] * len(responses))[i]), response)
    if answer is not None:
        t.result(answer)
    return t


def used(a) -> dict[str, tuple[str | None, str | None]]:
    return {f.path: (f.via, f.symbol) for f in a.by_file()}


THREE = {"lib/response.js": 6000, "lib/utils.js": 3000, "lib/express.js": 1000}


# -- path channel ------------------------------------------------------------------------
def test_one_of_three_files_cited():
    a = allocation(run(sized(THREE), answer="`res.send` lives in lib/utils.js.").session(), tool=CODEGRAPH)
    assert used(a) == {"lib/response.js": (None, None), "lib/utils.js": ("path", None), "lib/express.js": (None, None)}
    assert (a.used_chars, a.envelope_chars, a.path_used_chars) == (3000, 10000, 3000)
    assert a.efficiency == pytest.approx(0.3)
    assert a.path_efficiency == pytest.approx(0.3)
    assert a.answer_source == "result"


def test_bare_basename_counts_when_its_extension_was_shipped():
    a = allocation(
        run(sized(THREE), answer="The ETag comes from utils.js:225, then express.js.").session(), tool=CODEGRAPH
    )
    assert used(a)["lib/utils.js"] == ("path", None)
    assert used(a)["lib/express.js"] == ("path", None)
    assert a.used_chars == 4000


def test_dotted_expressions_are_not_files():
    assert citation_paths("res.send calls mime.contentType, see utils.js:225.", {"js"}) == ["utils.js"]
    # A bare name whose extension the envelope did not ship is prose, a folder-bearing one is a path.
    assert citation_paths("config.json and src/config.json", {"ts"}) == ["src/config.json"]
    a = allocation(
        run(sized(THREE), answer="res.send() calls mime.contentType and express.static").session(), tool=CODEGRAPH
    )
    assert a.used_chars == 0
    assert a.efficiency == 0.0


def test_absolute_and_line_suffixed_paths():
    answer = "See /…/t-base/lib/response.js:126 and [x](lib/utils.js#L20) and `lib/express.js:10-40`."
    assert citation_paths(answer, {"js"}) == ["/…/t-base/lib/response.js", "lib/utils.js", "lib/express.js"]
    a = allocation(run(sized(THREE), answer=answer).session(), tool=CODEGRAPH)
    assert a.efficiency == 1.0


def test_a_file_without_an_extension_is_cited_whole_or_with_its_folder():
    response = sized({"bin/www": 400, "Makefile": 300, "lib/app.js": 300})
    a = allocation(
        run(response, answer="Start at `/repo/bin/www:12`; `Makefile:3` builds it.").session(), tool=CODEGRAPH
    )
    assert used(a) == {"bin/www": ("path", None), "Makefile": ("path", None), "lib/app.js": (None, None)}
    # A bare basename of one is a word like any other: "www" cites nothing.
    assert (
        allocation(run(response, answer="The www server starts from the app.").session(), tool=CODEGRAPH).used_chars
        == 0
    )


def test_a_file_whose_name_reads_as_no_reference_is_cited_with_its_folder():
    """A dot file and an extension the reference pattern does not read (`.file-name`): named with a folder, each
    is a path like any other (docs/metrics/allocation.md); once these were credited by neither channel."""
    response = sized({"lib/.eslintrc": 200, "lib/weird.file-name": 300, "lib/app.js": 500})
    answer = "Lint rules: `lib/.eslintrc`; the loader reads /repo/lib/weird.file-name:4."
    a = allocation(run(response, answer=answer).session(), tool=CODEGRAPH)
    assert used(a) == {
        "lib/.eslintrc": ("path", None),
        "lib/weird.file-name": ("path", None),
        "lib/app.js": (None, None),
    }
    # Their basenames alone are words, as an extensionless one's is.
    a = allocation(run(response, answer="See .eslintrc and weird.file-name.").session(), tool=CODEGRAPH)
    assert a.used_chars == 0


def test_path_match_is_by_folder_boundary_not_substring():
    # `onse.js` is not `lib/response.js`; `other/utils.js` is a different file from `lib/utils.js`.
    a = allocation(run(sized(THREE), answer="onse.js and other/utils.js").session(), tool=CODEGRAPH)
    assert a.used_chars == 0


# -- symbol channel ----------------------------------------------------------------------
def test_symbol_credits_the_definer_not_a_caller():
    headers = {"src/element.ts": "mutateElement(function)", "src/drag.ts": "mutateElement(calls), drag(function)"}
    response = sized({"src/element.ts": 400, "src/drag.ts": 600}, headers)
    a = allocation(
        run(response, answer="Everything goes through `mutateElement(el, updates)`.").session(), tool=CODEGRAPH
    )
    assert used(a) == {"src/drag.ts": (None, None), "src/element.ts": ("symbol", "mutateElement")}
    assert a.efficiency == pytest.approx(0.4)
    assert a.path_efficiency == 0.0


@pytest.mark.parametrize("kind", ["calls", "imports", "instantiates", "references"])
def test_non_defining_kinds_never_credit(kind):
    response = sized({"a.js": 300}, {"a.js": f"createETagGenerator({kind})"})
    assert allocation(run(response, answer="`createETagGenerator`").session(), tool=CODEGRAPH).used_chars == 0


def test_a_definition_beats_an_import_alias():
    headers = {"lib/utils.js": "compileETag(function)", "lib/application.js": "compileETag(variable)"}
    response = sized({"lib/utils.js": 500, "lib/application.js": 700}, headers)
    a = allocation(run(response, answer="ETags are made by `compileETag`.").session(), tool=CODEGRAPH)
    assert used(a) == {"lib/application.js": (None, None), "lib/utils.js": ("symbol", "compileETag")}


def test_an_alias_alone_still_identifies_its_file():
    headers = {"lib/application.js": "compileETag(variable)", "lib/express.js": "createApplication(function)"}
    response = sized({"lib/application.js": 700, "lib/express.js": 300}, headers)
    a = allocation(run(response, answer="ETags are made by `compileETag`.").session(), tool=CODEGRAPH)
    assert used(a)["lib/application.js"] == ("symbol", "compileETag")
    assert a.used_chars == 700


@pytest.mark.parametrize(("owners", "credited"), [(2, 2), (3, 0), (4, 0)])
def test_a_name_on_three_or_more_files_identifies_none(owners, credited):
    chars = {f"lib/f{i}.js": 100 * (i + 1) for i in range(4)}
    headers = {path: "send(function)" for path in list(chars)[:owners]}
    a = allocation(run(sized(chars, headers), answer="It calls `send`.").session(), tool=CODEGRAPH)
    assert sum(1 for f in a.by_file() if f.via == "symbol") == credited


def test_ambiguity_counts_files_not_sections():
    # The same file returned by two calls is still one owner.
    headers = {"lib/a.js": "sendFile(function)", "lib/b.js": "sendFile(function)"}
    response = sized({"lib/a.js": 100, "lib/b.js": 200}, headers)
    a = allocation(run(response, response, answer="`sendFile`").session(), tool=CODEGRAPH)
    assert a.efficiency == 1.0


def test_prose_mentions_do_not_count_only_code_spans():
    response = sized({"lib/utils.js": 500, "lib/router.js": 500}, {"lib/utils.js": "createETagGenerator(function)"})
    prose = allocation(run(response, answer="It uses createETagGenerator to build it.").session(), tool=CODEGRAPH)
    inline = allocation(run(response, answer="It uses `createETagGenerator` to build it.").session(), tool=CODEGRAPH)
    fenced = allocation(
        run(response, answer="It does:\n\n```js\nvar g = createETagGenerator({})\n```\n").session(), tool=CODEGRAPH
    )
    assert (prose.used_chars, inline.used_chars, fenced.used_chars) == (0, 500, 500)


def test_short_names_and_stopwords_are_ignored():
    assert code_span_names("`get(data, value)` then `this.result` and `Error` and `send`") == ["send"]
    headers = {"a.js": "get(function), data(function), value(function), send(method)", "b.js": "Error(class)"}
    response = sized({"a.js": 300, "b.js": 100}, headers)
    a = allocation(run(response, answer="`get` `data` `value` `error` `Error`").session(), tool=CODEGRAPH)
    assert a.used_chars == 0
    assert allocation(run(response, answer="`res.send(body)`").session(), tool=CODEGRAPH).used_chars == 300


def test_path_channel_wins_over_symbol():
    response = sized({"lib/utils.js": 500}, {"lib/utils.js": "createETagGenerator(function)"})
    a = allocation(run(response, answer="`createETagGenerator` in lib/utils.js").session(), tool=CODEGRAPH)
    assert used(a)["lib/utils.js"] == ("path", None)


# -- accounting ---------------------------------------------------------------------------
def test_per_call_and_pooled_accounting():
    first = sized({"lib/response.js": 3000, "lib/utils.js": 1000})
    second = sized({"lib/express.js": 4000, "lib/view.js": 2000})
    a = allocation(
        run(first, second, answer="lib/response.js and lib/view.js", queries=["a", "b"]).session(), tool=CODEGRAPH
    )
    assert [(c.index, c.query, c.used_chars, c.envelope_chars, c.used_files, c.files) for c in a.calls] == [
        (1, "a", 3000, 4000, 1, 2),
        (2, "b", 2000, 6000, 1, 2),
    ]
    assert [c.efficiency for c in a.calls] == [pytest.approx(0.75), pytest.approx(1 / 3)]
    assert a.efficiency == pytest.approx(0.5)  # pooled by bytes, not the mean of the calls (54.2%)


def test_a_file_returned_twice_is_charged_twice():
    first = sized({"lib/response.js": 3000, "lib/express.js": 1000})
    second = sized({"lib/response.js": 2000, "lib/utils.js": 500})
    a = allocation(run(first, second, answer="Only lib/response.js matters.").session(), tool=CODEGRAPH)
    assert [(f.path, f.chars, f.call) for f in a.files] == [
        ("lib/response.js", 3000, 1),
        ("lib/express.js", 1000, 1),
        ("lib/response.js", 2000, 2),
        ("lib/utils.js", 500, 2),
    ]
    assert (a.used_chars, a.envelope_chars) == (5000, 6500)
    assert [(f.path, f.chars) for f in a.by_file()] == [
        ("lib/response.js", 5000),
        ("lib/express.js", 1000),
        ("lib/utils.js", 500),
    ]


def test_errored_and_empty_explores_are_skipped():
    t = Transcript()
    t.reply(t.call(EXPLORE, query="boom"), "Error: index locked", is_error=True)
    t.reply(t.call(EXPLORE, query="nothing"), "No symbols found for this query.")
    t.call(EXPLORE, query="never answered")
    t.reply(t.call("mcp__codegraph__codegraph_node", symbol="send"), sized({"lib/node.js": 900}))
    t.reply(t.call(EXPLORE, query="real"), sized({"lib/response.js": 800}))
    t.result("lib/response.js")
    a = allocation(t.session(), tool=CODEGRAPH)
    assert [(c.index, c.query) for c in a.calls] == [(2, "real")]  # numbered among answered explores
    assert (a.used_chars, a.envelope_chars) == (800, 800)


def test_nothing_returned_gives_no_efficiency():
    t = Transcript()
    t.reply(t.call(EXPLORE, query="boom"), "Error", is_error=True)
    t.result("lib/response.js")
    a = allocation(t.session(), tool=CODEGRAPH)
    assert a.efficiency is None
    assert a.path_efficiency is None
    assert a.to_dict()["calls"] == []
    assert render_allocation(a) == "Explore allocation: no codegraph_explore responses with file sections"


def test_any_retrieval_tool_explore():
    tool = replace(CODEGRAPH, name="sourcegraph", explore="sg_keyword_search", cli="src")
    t = Transcript()
    t.reply(t.call("mcp__sourcegraph__sg_keyword_search", query="x"), sized({"a/b.go": 100, "a/c.go": 300}))
    t.result("see b.go")
    assert allocation(t.session(), tool).efficiency == pytest.approx(0.25)
    assert allocation(t.session(), tool=CODEGRAPH).efficiency is None  # codegraph's explore never ran


# -- the answer ---------------------------------------------------------------------------
def test_result_events_are_pooled_across_segments(tmp_path):
    response = sized({"lib/response.js": 600, "lib/utils.js": 300, "lib/express.js": 100})
    first = run(response, answer="Turn 1: lib/response.js")
    second = Transcript()
    second.user("and the ETag?")
    second.result("Turn 2: `utils.js:40`")
    session = read_segments([first.write(tmp_path / "run.jsonl"), second.write(tmp_path / "run.t2.jsonl")])
    a = allocation(session, tool=CODEGRAPH)
    assert a.answer_source == "result"
    assert used(a) == {
        "lib/response.js": ("path", None),
        "lib/utils.js": ("path", None),
        "lib/express.js": (None, None),
    }
    assert a.efficiency == pytest.approx(0.9)


def test_code_spans_do_not_pair_across_answers():
    response = sized({"lib/utils.js": 500, "lib/a.js": 500}, {"lib/utils.js": "createETagGenerator(function)"})
    t = run(response, answer="Turn 1 has a stray ` backtick")
    t.result("Turn 2 names createETagGenerator in prose ` and ends.")
    assert allocation(t.session(), tool=CODEGRAPH).used_chars == 0


def test_fallback_to_last_main_thread_assistant_text():
    t = run(sized({"src/App.tsx": 700, "src/Scene.ts": 300}))
    t.say("Let me look at src/App.tsx first.")  # narration, not the answer
    task = t.call("Task", prompt="check")
    t.say("Subagent notes: App.tsx", thread=task)
    t.say("The nonce lives in `Scene.ts`.")
    a = allocation(t.session(), tool=CODEGRAPH)
    assert a.answer_source == "assistant"
    assert used(a) == {"src/App.tsx": (None, None), "src/Scene.ts": ("path", None)}


def test_no_answer_at_all():
    a = allocation(run(sized({"lib/a.js": 100})).session(), tool=CODEGRAPH)
    assert a.answer_source == "none"
    assert a.efficiency == 0.0
    assert "!! no final answer text found" in render_allocation(a)


def test_answer_globs_replace_citations():
    response = sized({"lib/response.js": 600, "lib/router/index.js": 300, "lib/utils.js": 100})
    t = run(response, answer="Everything is in lib/utils.js")
    a = allocation(t.session(), answer_globs=["lib/response.js"], tool=CODEGRAPH)
    assert a.answer_source == "globs"
    assert used(a) == {
        "lib/response.js": ("glob", None),
        "lib/router/index.js": (None, None),
        "lib/utils.js": (None, None),  # cited, but the globs decide
    }
    assert a.efficiency == pytest.approx(0.6)
    assert a.path_efficiency is None
    assert (
        allocation(t.session(), answer_globs=["response.js", "router/*.js"], tool=CODEGRAPH).used_chars == 900
    )  # path suffix
    assert allocation(t.session(), answer_globs=["*.ts"], tool=CODEGRAPH).used_chars == 0
    assert allocation(t.session(), answer_globs=["./lib/utils.js"], tool=CODEGRAPH).used_chars == 100
    assert "(1/3 files in the --answer set)" in render_allocation(a)


# -- the rendered block ---------------------------------------------------------------------
def seed_session() -> Session:
    """An express baseline's shape (run cg22): 2 calls, 4 files, 17,465 of 21,319 chars used."""
    headers = {"lib/application.js": "compileETag(variable), set(method)", "lib/express.js": "set(calls)"}
    first = sized({"lib/express.js": 1927, "lib/utils.js": 6396, "lib/response.js": 3725}, headers)
    second = sized({"lib/express.js": 1927, "lib/response.js": 3722, "lib/application.js": 3622}, headers)
    answer = "`res.send` (lib/response.js:126-220) sets Content-Type; the ETag comes from `compileETag`, utils.js:60."
    return run(first, second, answer=answer).session()


SEED_BLOCK = """\
Explore allocation — share of returned bytes the answer used (2 calls, 4 files):
  efficiency  81.9%  17,465 of 21,319 chars   (3/4 files cited; path-cited alone 64.9%)
  call 1:  84.0%  10,121/12,048 chars  2/3 files
  call 2:  79.2%  7,344/9,271 chars  2/3 files
  *  34.9%   7447  lib/response.js  path
  *  30.0%   6396  lib/utils.js  path
     18.1%   3854  lib/express.js  —
  *  17.0%   3622  lib/application.js  symbol `compileETag`"""


def test_rendered_block_matches_the_seed():
    assert render_allocation(allocation(seed_session(), tool=CODEGRAPH)) == SEED_BLOCK


def test_rendered_block_indent():
    lines = render_allocation(allocation(seed_session(), tool=CODEGRAPH), indent="  ").splitlines()
    assert lines[0].startswith("  Explore allocation")
    assert lines[1].startswith("    efficiency")


def test_envelope_view_lists_each_call_s_sections():
    block = render_allocation(allocation(seed_session(), tool=CODEGRAPH), envelope=True)
    assert block.startswith(SEED_BLOCK + "\n")
    assert block[len(SEED_BLOCK) + 1 :].splitlines() == [
        '  envelope of call 1 "q1": 12,048 chars, 3 files',
        "       16.0%   1927  lib/express.js",
        "    *  53.1%   6396  lib/utils.js",
        "    *  30.9%   3725  lib/response.js",
        '  envelope of call 2 "q2": 9,271 chars, 3 files',
        "       20.8%   1927  lib/express.js",
        "    *  40.1%   3722  lib/response.js",
        "    *  39.1%   3622  lib/application.js",
    ]


def test_to_dict_shape():
    session = seed_session()
    d = allocation(session, tool=CODEGRAPH).to_dict()
    assert d["efficiency"] == pytest.approx(17465 / 21319)
    assert d["path_efficiency"] == pytest.approx(13843 / 21319)
    assert (d["used_chars"], d["envelope_chars"], d["path_used_chars"]) == (17465, 21319, 13843)
    assert d["answer_source"] == "result"
    assert d["files"][-1] == {
        "path": "lib/application.js",
        "chars": 3622,
        "via": "symbol",
        "symbol": "compileETag",
        "call": 2,
    }
    assert d["calls"][0] == {
        "index": 1,
        "call": session.calls[0].id,  # the explore call's tool_use id: reports join on it
        "query": "q1",
        "efficiency": pytest.approx(10121 / 12048),
        "path_efficiency": pytest.approx(10121 / 12048),
        "used_chars": 10121,
        "envelope_chars": 12048,
        "files": 3,
        "used_files": 2,
    }
    call2 = d["calls"][1]
    assert (call2["efficiency"], call2["path_efficiency"]) == (pytest.approx(7344 / 9271), pytest.approx(3722 / 9271))


# -- a real response -------------------------------------------------------------------------
def test_real_express_response():
    text = (DATA / "explore-express-1.6.1.txt").read_text(encoding="utf-8")
    chars = {s.path: s.chars for s in file_sections(text)}
    assert chars == {"lib/response.js": 8174, "lib/utils.js": 1536, "lib/router/index.js": 3040}
    t = Transcript()
    t.reply(t.call(EXPLORE, query="How does res.send decide the Content-Type and ETag"), text)
    t.result(
        "`res.send` in `lib/response.js` sets Content-Type through mime.contentType and computes the ETag "
        "with the generator from `createETagGenerator`; `next(err)` is only the router's error path."
    )
    a = allocation(t.session(), tool=CODEGRAPH)
    assert used(a) == {
        "lib/response.js": ("path", None),
        "lib/utils.js": ("symbol", "createETagGenerator"),
        "lib/router/index.js": (None, None),
    }
    assert (a.used_chars, a.envelope_chars, a.path_used_chars) == (8174 + 1536, 12750, 8174)
    assert render_allocation(a).splitlines()[1] == (
        "  efficiency  76.2%  9,710 of 12,750 chars   (2/3 files cited; path-cited alone 64.1%)"
    )


def test_the_worked_example_of_the_docs_page():
    """docs/metrics/allocation.md, "A worked example"."""
    first = sized({"lib/response.js": 2000, "lib/utils.js": 500}, {"lib/utils.js": "compileETag(function)"})
    second = sized({"lib/response.js": 1000, "lib/view.js": 1500})
    answer = "`res.send` in `lib/response.js:126` sets the ETag through `compileETag`."
    a = allocation(run(first, second, answer=answer).session(), tool=CODEGRAPH)
    assert used(a) == {
        "lib/response.js": ("path", None),
        "lib/view.js": (None, None),
        "lib/utils.js": ("symbol", "compileETag"),
    }
    assert (a.used_chars, a.path_used_chars, a.envelope_chars) == (3500, 3000, 5000)
    assert (a.efficiency, a.path_efficiency, a.answer_source) == (0.7, 0.6, "result")
    assert [(c.efficiency, c.used_files, c.files) for c in a.calls] == [(1.0, 2, 2), (0.4, 1, 2)]


# -- edge inputs each rule must hold on (python bench/mutation.py metrics/allocation.py) -----------------------------
def test_unmatched_names_the_answer_globs_no_returned_file_matches():
    """The ``--answer`` typo warning (docs/metrics/allocation.md): a glob no returned file matches, and only that."""
    a = allocation(run(sized(THREE), answer="x").session(), tool=CODEGRAPH)
    assert a.unmatched(["lib/response.js", "utils.js", "lib/*.ts", "lib/respones.js"]) == [
        "lib/*.ts",
        "lib/respones.js",
    ]
    assert a.unmatched([]) == []


def test_a_multi_dot_basename_counts_by_its_last_extension():
    """The shipped extensions are the last dot's: ``js`` for ``app.test.js``, so a bare ``app.test.js`` is a file."""
    session = run(sized({"src/app.test.js": 400, "src/app.ts": 600}), answer="See app.test.js.").session()
    a = allocation(session, tool=CODEGRAPH)
    assert used(a) == {"src/app.ts": (None, None), "src/app.test.js": ("path", None)}


def test_a_tilde_fence_is_code():
    headers = {"lib/utils.js": "compileETag(function)"}
    answer = "It is built here:\n~~~js\nvar fn = compileETag(val)\n~~~\n"
    session = run(sized({"lib/utils.js": 500, "lib/a.js": 500}, headers), answer=answer).session()
    a = allocation(session, tool=CODEGRAPH)
    assert used(a)["lib/utils.js"] == ("symbol", "compileETag")


def test_an_answer_with_a_fenced_block_and_inline_code_reads_both():
    headers = {"lib/utils.js": "compileETag(function)", "lib/view.js": "renderView(function)"}
    answer = "```js\ncompileETag(val)\n```\nand `renderView` draws it."
    session = run(sized({"lib/utils.js": 500, "lib/view.js": 500}, headers), answer=answer).session()
    a = allocation(session, tool=CODEGRAPH)
    assert used(a) == {"lib/utils.js": ("symbol", "compileETag"), "lib/view.js": ("symbol", "renderView")}


def test_an_explore_input_without_a_string_query_has_an_empty_one():
    t = Transcript()
    t.reply(t.call(EXPLORE, depth=2), sized({"lib/a.js": 100}))
    t.result("see lib/a.js")
    assert [c.query for c in allocation(t.session(), tool=CODEGRAPH).calls] == [""]


def test_the_allocation_names_the_tool_it_measured():
    tool = replace(CODEGRAPH, name="sourcegraph", explore="sg_keyword_search", cli="src")
    t = Transcript()
    t.reply(t.call("mcp__sourcegraph__sg_keyword_search", query="x"), sized({"a/b.go": 100}))
    t.result("see b.go")
    assert allocation(t.session(), tool).explore == "sg_keyword_search"


def test_a_files_row_is_the_first_call_that_returned_it():
    session = run(sized({"lib/b.js": 100}), sized({"lib/a.js": 100, "lib/b.js": 100}), answer="x").session()
    a = allocation(session, tool=CODEGRAPH)
    assert {f.path: f.call for f in a.by_file()} == {"lib/a.js": 2, "lib/b.js": 1}


def test_symbol_owners_looks_up_only_the_names_asked_for():
    sections = file_sections(explore_response({"lib/a.js": ""}, {"lib/a.js": "alpha(function), beta(function)"}))
    assert symbol_owners(sections, {"alpha"}) == {"alpha": {"lib/a.js"}}
    assert symbol_owners(sections) == {"alpha": {"lib/a.js"}, "beta": {"lib/a.js"}}
