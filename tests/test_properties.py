"""Random and truncated event streams never crash the reader or the metrics, and the figures stay sane."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.synth import explore_response

from pytest_agent_eval.agents.claude_code.transcript import read_lines
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import Session

TOOLS = [
    "Read",
    "Grep",
    "Glob",
    "Bash",
    "Edit",
    "Task",
    "Agent",
    "ToolSearch",
    "TodoWrite",
    "mcp__codegraph__codegraph_explore",
    "mcp__codegraph__codegraph_node",
]
IDS = [f"toolu_{i}" for i in range(6)]
PATHS = ["lib/a.js", "lib/b.js", "/repo/lib/a.js", "src/x.py", "a.js"]

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=20))
junk = st.dictionaries(st.text(max_size=8), json_scalars, max_size=4)

tool_inputs = st.one_of(
    st.fixed_dictionaries({"query": st.text(max_size=30)}),
    st.fixed_dictionaries({"file_path": st.sampled_from(PATHS)}),
    st.fixed_dictionaries(
        {
            "command": st.sampled_from(
                [
                    "cat lib/a.js",
                    "sed -n '1,5p' lib/b.js",
                    "grep -rn x .",
                    "codegraph explore q",
                    "cat > /tmp/x <<EOF\nEOF",
                    "ls",
                    "VAR=1 /usr/bin/codegraph x",
                ]
            )
        }
    ),
    junk,
)
blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=60)),
    st.builds(lambda t: {"type": "thinking", "thinking": t}, st.text(max_size=40)),
    st.builds(
        lambda i, n, inp: {"type": "tool_use", "id": i, "name": n, "input": inp},
        st.sampled_from(IDS),
        st.sampled_from(TOOLS),
        tool_inputs,
    ),
    junk,
)
usage = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "input_tokens": st.integers(0, 50),
            "cache_read_input_tokens": st.integers(0, 200_000),
            "cache_creation_input_tokens": st.integers(0, 20_000),
            "output_tokens": st.integers(0, 500),
        }
    ),
)
threads = st.one_of(st.none(), st.sampled_from(IDS))
result_content = st.one_of(
    st.text(max_size=80),
    st.builds(
        lambda paths: explore_response({p: "x = 1\n" * 5 for p in paths}, {p: "alpha(function)" for p in paths}),
        st.lists(st.sampled_from(PATHS), max_size=3),
    ),
    st.just("No such tool available: mcp__codegraph__codegraph_explore"),
    st.lists(st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=30)), max_size=2),
)

events = st.one_of(
    st.builds(
        lambda mid, b, u, th: {
            "type": "assistant",
            "parent_tool_use_id": th,
            "message": {"id": mid, "content": [b], "usage": u},
        },
        st.sampled_from(["m1", "m2", "m3", "m4", "m5"]),
        blocks,
        usage,
        threads,
    ),
    st.builds(
        lambda i, c, e, th: {
            "type": "user",
            "parent_tool_use_id": th,
            "message": {"content": [{"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e}]},
        },
        st.sampled_from([*IDS, "unknown"]),
        result_content,
        st.one_of(st.none(), st.booleans()),
        threads,
    ),
    st.builds(lambda t: {"type": "user", "message": {"content": t}}, st.text(max_size=30)),
    st.just({"type": "system", "subtype": "compact_boundary"}),
    st.builds(lambda tools: {"type": "system", "subtype": "init", "tools": tools}, st.lists(st.sampled_from(TOOLS))),
    st.builds(
        lambda t, e: {"type": "result", "subtype": "success", "is_error": e, "result": t},
        st.text(max_size=40),
        st.booleans(),
    ),
    junk,
)


def check(session: Session) -> None:
    data = score(session, tool=CODEGRAPH).to_dict()
    occ = data["occupancy"]
    for family, tokens in occ["residual"].items():
        assert 0 <= tokens <= occ["contributed"][family] + 1e-6
    assert occ["chars_per_token"] > 0
    for share in (data["allocation"]["efficiency"], data["allocation"]["path_efficiency"]):
        assert share is None or 0.0 <= share <= 1.0
    assert data["allocation"]["used_chars"] <= data["allocation"]["envelope_chars"]
    suf = data["sufficiency"]
    assert all(n >= 0 for n in suf["counts"].values())
    con = data["contamination"]
    assert con["cli_blocked"] <= con["cli_calls"] == len(con["commands"])
    # contaminated: the output reached the agent (a leak), or may have (a CLI call that printed something)
    assert con["contaminated"] is bool(con["leaks"] or any(c["printed"] for c in con["commands"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events, max_size=40))
def test_random_event_streams(stream: list[dict]) -> None:
    check(read_lines(json.dumps(e) for e in stream))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(events, min_size=1, max_size=25), st.data())
def test_truncated_streams(stream: list[dict], data: st.DataObject) -> None:
    text = "\n".join(json.dumps(e) for e in stream)
    cut = data.draw(st.integers(0, len(text)))
    session = read_lines(text[:cut].splitlines())
    assert session.parse.events + session.parse.bad_lines <= len(stream)
    check(session)
