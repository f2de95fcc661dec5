"""Residual context occupancy over synthetic transcripts with known answers, and the real ones.

Tool calls here carry no input unless said, so a call message adds ``len(name) + 2`` characters
("Read{}") to the next gap; result lengths are chosen so each gap's size is a round number. Around them a
step's framing (:data:`STEP_FRAMING`) is priced at the ratio where a gap measures its own result.
"""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.synth import Transcript, text, thinking, tool_use
from support.transcripts import transcripts

from pytest_agent_eval.agents.claude_code.transcript import read_lines, read_segments, read_session_file
from pytest_agent_eval.agents.claude_code.unshown import TOKENS_LEFT
from pytest_agent_eval.metrics import occupancy as occupancy_module
from pytest_agent_eval.metrics.figures import figures_of
from pytest_agent_eval.metrics.occupancy import (
    ALL_GAPS,
    BLOCK_FRAME_CHARS,
    BOUND,
    CALL_FRAME_CHARS,
    DEFAULT,
    FAMILIES,
    IMPLAUSIBLE,
    MEASURED,
    MESSAGE_FRAME_CHARS,
    PROSE_CHARS_PER_TOKEN,
    RESULT_FRAME_CHARS,
    Occupancy,
    family,
    occupancy,
    simple_estimate,
)
from pytest_agent_eval.model.scripted import thinking_text
from pytest_agent_eval.model.usage import count_tokens, text_tokens
from pytest_agent_eval.report.blocks.occupancy import render_occupancy
from pytest_agent_eval.tool import CODEGRAPH

CG = "mcp__codegraph__codegraph_explore"  # 33 chars + "{}"
SOURCEGRAPH = replace(CODEGRAPH, name="sourcegraph", explore="sg_keyword_search", cli="src")
TRANSCRIPTS = transcripts()
ID_CHARS = len("toolu_0001")
# The framing of a step that is not its result's: the call block and the two messages' wrappers.
STEP_FRAMING = 2 * MESSAGE_FRAME_CHARS + CALL_FRAME_CHARS + ID_CHARS
RESULT_FRAMING = RESULT_FRAME_CHARS + ID_CHARS


def step(t: Transcript, ctx: int, name: str, result_chars: int, prose: int = 0, **tool_input) -> str:
    """A request of size ``ctx`` calling ``name`` (after ``prose`` characters of text), then its result."""
    call = tool_use(name, **tool_input)
    t.message(*([text("p" * prose)] if prose else []), call, ctx=ctx)
    t.reply(call["id"], "x" * result_chars)
    return call["id"]


# -- family attribution ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "tool", "expected"),
    [
        ("Read", CODEGRAPH, "read"),
        ("NotebookRead", CODEGRAPH, "read"),
        ("Grep", CODEGRAPH, "search"),
        ("Glob", CODEGRAPH, "search"),
        ("Bash", CODEGRAPH, "bash"),
        ("BashOutput", CODEGRAPH, "bash"),
        (CG, CODEGRAPH, "tool"),
        ("mcp__codegraph__codegraph_node", CODEGRAPH, "tool"),
        ("Edit", CODEGRAPH, "other"),
        ("Task", CODEGRAPH, "other"),
        ("", CODEGRAPH, "other"),
        ("mcp__sourcegraph__sg_keyword_search", CODEGRAPH, "other"),
        ("mcp__sourcegraph__sg_keyword_search", SOURCEGRAPH, "tool"),
        ("mcp__sourcegraph__sg_read_file", SOURCEGRAPH, "tool"),
        (CG, SOURCEGRAPH, "other"),
        ("Read", SOURCEGRAPH, "read"),
    ],
)
def test_family(name, tool, expected):
    assert family(name, tool) == expected


def test_results_are_charged_to_their_family_and_the_retrieval_server_whatever_it_is():
    t = Transcript()
    names = ["Read", "NotebookRead", "Grep", "Glob", "Bash", "BashOutput", "mcp__sourcegraph__sg_read_file", "Edit"]
    for i, name in enumerate(names):
        step(t, 10_000 + 1_000 * i, name, 100)
    t.say("done", ctx=20_000)
    o = occupancy(t.session(), SOURCEGRAPH)
    assert o.residual_results == {"tool": 1, "read": 2, "search": 2, "bash": 2, "other": 1}
    assert o.contributed_chars == {"tool": 100, "read": 200, "search": 200, "bash": 200, "other": 100}
    assert render_occupancy(o, SOURCEGRAPH).splitlines()[2].startswith("  sourcegraph   ")


# -- calibration ------------------------------------------------------------------------------
def test_calibration_pools_clean_gaps_and_drops_one_far_above_the_lower_median():
    t = Transcript()
    step(t, 10_000, "Read", 994)  # gap 1,000 chars → Δ 500: 2.0 chars/tok
    step(t, 10_500, "Read", 994)  # → Δ 400: 2.5
    step(t, 10_900, "Read", 994)  # → Δ 250: 4.0 > 1.5 × lower median 2.5 → shed, dropped
    t.say("p" * 3_000, ctx=11_150)  # → Δ 100: 30 chars/tok, but prose, not a tool result
    step(t, 11_250, "Grep", 294)  # → Δ 10: only 300 chars, too small to measure
    t.say("done", ctx=11_260)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == pytest.approx(2_000 / 900)
    assert (o.calibration, o.calibrated) == (MEASURED, True)


def test_even_count_takes_the_lower_median():
    t = Transcript()
    step(t, 10_000, "Read", 994)  # Δ 500: 2.0
    step(t, 10_500, "Read", 994)  # Δ 300: 3.33 — above 1.5 × 2.0 (a true median, 2.67, would keep it)
    t.say("done", ctx=10_800)
    assert occupancy(t.session(), tool=CODEGRAPH).chars_per_token == 2.0


@pytest.mark.parametrize(("prose", "expected"), [(194, (2.0, MEASURED)), (195, (1_001 / 500, ALL_GAPS))])
def test_a_clean_gap_is_at_least_80_percent_tool_result(prose, expected):
    t = Transcript()
    step(t, 10_000, "Read", 800, prose=prose)  # 800 of 1,000 (or of 1,001) chars
    t.say("done", ctx=10_500)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.chars_per_token, o.calibration) == expected


def test_without_a_clean_gap_all_growing_gaps_are_pooled():
    t = Transcript()
    t.say("p" * 3_000, ctx=10_000)  # → Δ 1,000
    step(t, 11_000, "Read", 294)  # 300 chars → Δ 200
    step(t, 11_200, "Read", 394)  # 400 chars → Δ −50: shrinking, not pooled
    t.say("p" * 700, ctx=11_150)  # → Δ 0: not pooled
    t.say("done", ctx=11_150)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == 3_300 / 1_200
    assert (o.calibration, o.calibrated) == (ALL_GAPS, False)
    assert "2.75 chars/tok fallback over all gaps" in render_occupancy(o, tool=CODEGRAPH)


@pytest.mark.parametrize("later_ctx", [None, 10_000, 9_000])
def test_without_a_growing_gap_the_ratio_is_the_default(later_ctx):
    t = Transcript()
    step(t, 10_000, "Read", 2_000)
    if later_ctx is not None:
        t.say("done", ctx=later_ctx)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.chars_per_token, o.calibration, o.calibrated, o.dispersion) == (3.0, DEFAULT, False, None)
    assert "measure: 3.00 chars/tok default · turns" in render_occupancy(o, tool=CODEGRAPH)


# -- framing, gaps that measure their own results, family ratios -----------------------------------
def test_small_gaps_measure_the_framing_and_the_ratio_is_taken_net_of_it():
    # The truth: 2.0 chars/token of content, half a token per framing character.
    framing = (STEP_FRAMING + RESULT_FRAMING) // 2  # (an even number of characters)
    t = Transcript()
    step(t, 10_000, "Read", 3_994)  # 4,000 chars → Δ 2,000 + the framing
    step(t, 12_000 + framing, "Read", 7_994)  # 8,000 chars → Δ 4,000 + the framing
    step(t, 16_000 + 2 * framing, "Grep", 94)  # 100 chars → Δ 50 + the framing: mostly framing
    t.say("done", ctx=16_050 + 3 * framing)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.framing_tokens_per_char, o.framing) == (pytest.approx(0.5, abs=1e-3), MEASURED)
    assert o.chars_per_token == pytest.approx(2.0, abs=0.001)
    # The big gaps price their own result (growth less the call's 3 tokens and the step's framing); the Grep
    # its 47 and its framing.
    own = 3 + STEP_FRAMING / 2
    assert o.residual == {
        "tool": 0,
        "read": round(2_000 + framing - own + 4_000 + framing - own),
        "search": round(47 + RESULT_FRAMING / 2),
        "bash": 0,
        "other": 0,
    }
    assert o.to_dict()["framing_tokens_per_char"] == pytest.approx(0.5, abs=1e-3)
    # The error bar on the same footing: the result priced at the run's terms against a gap its call is in.
    assert o.dispersion == pytest.approx((3 + STEP_FRAMING / 2) / (4_000 + framing), abs=1e-4)


@pytest.mark.parametrize(
    ("hidden", "delta"),
    [(False, 400), (False, 40), (True, 130)],
    ids=["above the bound", "below the characters' price", "redacted thinking"],
)
def test_without_a_believable_small_gap_there_is_no_framing_cost(hidden, delta):
    t = Transcript()
    step(t, 10_000, "Read", 3_994)
    grep = tool_use("Grep")
    blocks = [{"type": "redacted_thinking", "data": ""}, grep] if hidden else [grep]
    t.message(*blocks, ctx=12_000)
    t.reply(grep["id"], "x" * 94)
    t.say("done", ctx=12_000 + delta)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.framing_tokens_per_char, o.framing, o.chars_per_token) == (0.0, DEFAULT, 2.0)


def test_a_clean_gap_prices_its_own_results_so_a_lighter_one_is_not_read_as_eviction():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # 2,000 chars → Δ 1,000
    step(t, 11_000, "Read", 1_994)  # → Δ 1,000
    step(t, 12_000, "Read", 9_994)  # 10,000 chars of a lighter file → Δ 3,846, 327 short of the pooled ratio
    t.say("done", ctx=15_846)
    o = occupancy(t.session(), tool=CODEGRAPH)
    ratio = 14_000 / 5_846
    assert o.chars_per_token == pytest.approx(ratio)
    assert o.evicted == 0  # one ratio for every result would have shed 327 tokens of the first Read
    own = (6 + STEP_FRAMING) / ratio  # the call and the step's framing, at the ratio
    assert o.residual["read"] == round(2 * (1_000 - own) + 3_846 - own)


def test_a_family_is_priced_at_its_own_ratio_where_no_gap_of_its_own_measures_it():
    t = Transcript()
    step(t, 10_000, "Grep", 994)  # 1,000 chars → Δ 400: a listing, 2.9 chars/token net of the framing
    step(t, 10_400, "Read", 1_994)  # → Δ 1,000
    step(t, 11_400, "Read", 1_994)  # → Δ 1,000
    step(t, 12_400, "Grep", 494, prose=600)  # mostly prose: not clean, its result is priced
    t.say("done", ctx=13_000)
    o = occupancy(t.session(), tool=CODEGRAPH)
    ratio = 5_000 / 2_400
    own = (6 + STEP_FRAMING) / ratio
    search = 994 / (400 - own)
    assert o.chars_per_token == pytest.approx(ratio)
    assert o.family_chars_per_token["search"] == pytest.approx(search)
    assert o.residual["search"] == round(400 - own + 494 / search)


# -- attribution ------------------------------------------------------------------------------
def test_the_reminder_the_cli_adds_unseen_rides_on_each_user_messages_last_result():
    # Claude Code 2.1.332 appends its tokens-left reminder, which no transcript shows, to the last result of each user
    # message it sends a model whose capability has it (agents/claude_code/unshown.py): the model read it there.
    def scored(model: str) -> Occupancy:
        t = Transcript()
        t.init(model=model, version="2.1.332")
        step(t, 10_000, "Read", 994)
        grep, bash = tool_use("Grep"), tool_use("Bash")
        t.message(grep, bash, ctx=11_000)  # two results, one user message: the reminder rides on the second
        t.reply(grep["id"], "x" * 194)
        t.reply(bash["id"], "x" * 294)
        t.say("done", ctx=11_500)
        return occupancy(t.session(), CODEGRAPH)

    plain, reminded = scored("claude-sonnet-5-5"), scored("claude-sonnet-4-5-20250929")
    assert plain.residual_chars == {"tool": 0, "read": 994, "search": 194, "bash": 294, "other": 0}
    added = len(TOKENS_LEFT)
    assert reminded.residual_chars == {"tool": 0, "read": 994 + added, "search": 194, "bash": 294 + added, "other": 0}
    assert reminded.residual_results == plain.residual_results  # in the result, not a result of its own
    # and the figures say they count what no transcript shows
    assert (plain.unseen_suffix_chars, reminded.to_dict()["unseen_suffix_chars"]) == (0, added)
    assert "counted:" not in render_occupancy(plain, CODEGRAPH)
    assert f"counted: {added} chars the CLI appends unseen" in render_occupancy(reminded, CODEGRAPH)


def test_exact_attribution_base_and_error_bar():
    t = Transcript()
    step(t, 10_000, CG, 1_952, query="xy")  # 33 + 15 + 1,952 chars → Δ 1,000
    step(t, 11_000, "Read", 994)  # 1,000 chars → Δ 500; the ratio is 3,000 / 1,500 = 2.0
    step(t, 11_500, "Bash", 294)
    step(t, 11_650, "Edit", 94)
    step(t, 11_700, "Grep", 194)
    t.say("done", ctx=11_800)
    t.result("done")
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == 2.0
    # The two clean gaps price their own results: growth less the call and the step's framing at the ratio.
    codegraph, read = 1_000 - (48 + STEP_FRAMING) // 2, 500 - (6 + STEP_FRAMING) // 2
    assert o.residual == {"tool": codegraph, "read": read, "search": 97, "bash": 147, "other": 47}
    assert o.residual == o.contributed
    assert o.residual_chars == {"tool": 1_952, "read": 994, "search": 194, "bash": 294, "other": 94}
    base = 11_800 - codegraph - read - 97 - 147 - 47
    assert (o.file_access, o.ctx_final, o.ctx_base, o.base) == (read + 97 + 147, 11_800, 10_000, base)
    assert (o.turns, o.compactions, o.evicted) == (6, 0, 0)
    # Single-result gaps: |976 − 1,000| / 1,000 = 2.4%, |497 − 500| / 500 = 0.6%; the lower median.
    assert o.dispersion == pytest.approx(0.006)
    d = o.to_dict()
    assert d["residual"]["tool"] == codegraph and d["file_access"] == read + 244 and d["base"] == base
    assert d["calibrated"] is True and d["dispersion"] == pytest.approx(0.006)
    # Every figure is in the dict under its own name (reports and rescores read them by it).
    for name in ("ctx_final", "ctx_base", "chars_per_token", "calibration", "framing", "framing_tokens_per_char",
                 "family_chars_per_token", "residual", "contributed", "residual_chars", "residual_results",
                 "contributed_chars", "contributed_results", "evicted", "unexplained", "unexplained_thinking",
                 "thinking_chars_per_token", "compactions", "turns", "window", "tokens_processed"):  # fmt: skip
        assert d[name] == getattr(o, name), name


def test_the_error_bar_is_taken_on_gaps_that_are_95_percent_one_result():
    t = Transcript()
    step(t, 10_000, "Read", 950, prose=44)  # 95.0% one result: 475 priced vs Δ 500 → 5%
    step(t, 10_500, "Read", 994)  # 497 vs 500 → 0.6%
    step(t, 11_000, "Read", 994)  # 497 vs 530 → 6.2%
    step(t, 11_530, "Read", 930, prose=64)  # 93%: not counted (would be 1.1%)
    read, grep = tool_use("Read"), tool_use("Grep")
    t.calls(read, grep, ctx=12_000)
    t.reply(read["id"], "x" * 497)
    t.reply(grep["id"], "x" * 491)  # 98.8% tool result, but no one result dominates (would be 1.2%)
    t.say("done", ctx=12_500)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == 2.0  # 5,000 chars over 2,500 tokens, every gap clean
    assert o.dispersion == pytest.approx(0.05)


def test_usage_and_output_are_counted_once_per_message_id():
    t = Transcript()
    # Three content blocks → three assistant events with one id and one usage.
    call = tool_use("Read")
    t.message(thinking("t" * 50), text("a" * 44), call, ctx=10_000)
    t.reply(call["id"], "x" * 900)  # the gap: 50 + 44 + 6 + 900 = 1,000 chars, 90% tool result
    t.say("done", ctx=10_400)
    session = t.session()
    assert session.parse.event_types["assistant"] == 4
    o = occupancy(session, tool=CODEGRAPH)
    assert (o.turns, o.tokens_processed) == (2, 20_400)
    # The thinking is priced as prose; so short, it may hide what it counted: the gap bounds the ratio.
    assert (o.chars_per_token, o.calibration) == (pytest.approx(950 / (400 - 50 / PROSE_CHARS_PER_TOKEN)), BOUND)


def test_tokens_processed_sums_every_request_and_ignores_result_usage(tmp_path):
    segments = []
    for n, (first, second) in enumerate([(10_000, 12_000), (13_000, 15_500)]):
        t = Transcript()
        step(t, first, "Read", 994)
        t.say("done", ctx=second)
        t.result("done")  # carries usage.input_tokens = 999,999
        segments.append(t.write(tmp_path / f"run{'' if n == 0 else '.t2'}.jsonl"))
    o = occupancy(read_segments(segments), tool=CODEGRAPH)
    assert o.tokens_processed == 10_000 + 12_000 + 13_000 + 15_500
    assert (o.turns, o.ctx_base, o.ctx_final) == (4, 10_000, 15_500)


def test_a_subagent_has_its_own_window():
    t = Transcript()
    task = tool_use("Task")
    t.message(task, ctx=10_000)
    grep = tool_use("Grep")  # the subagent's events interleave, tagged with the Task call's id
    t.message(grep, ctx=3_000, thread=task["id"])
    t.reply(grep["id"], "x" * 5_000, thread=task["id"])
    t.say("found it", ctx=6_000, thread=task["id"])
    t.reply(task["id"], "x" * 994)  # only its summary enters the parent's window: 1,000 chars, Δ 500
    t.say("done", ctx=10_500)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.turns, o.ctx_final, o.chars_per_token) == (2, 10_500, 2.0)
    assert o.residual == {"tool": 0, "read": 0, "search": 0, "bash": 0, "other": 500 - (6 + STEP_FRAMING) // 2}
    assert o.tokens_processed == 10_000 + 10_500 + 3_000 + 6_000


# -- leaving the window ------------------------------------------------------------------------
def test_compaction_clears_the_resident_set():
    t = Transcript()
    step(t, 10_000, "Read", 994)  # Δ 500
    step(t, 10_500, "Bash", 1_994)  # Δ 1,000 → 2.0
    step(t, 11_500, "Grep", 494)
    t.compact(pre_tokens=12_000)
    t.user("This session is being continued from a previous conversation. " + "s" * 37)
    step(t, 3_000, "Read", 394)
    t.say("done", ctx=3_200)  # 400 chars, Δ 200: priced at the ratio, so no framing cost on top
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.compactions, o.chars_per_token, o.framing_tokens_per_char) == (1, 2.0, 0.0)
    read, bash = 500 - (6 + STEP_FRAMING) // 2, 1_000 - (6 + STEP_FRAMING) // 2  # clean: their own growth
    later = round(394 / (994 / read))  # at the ratio the first Read's own gap measured for the family
    assert o.residual == {"tool": 0, "read": later, "search": 0, "bash": 0, "other": 0}
    assert o.contributed == {"tool": 0, "read": read + later, "search": 247, "bash": bash, "other": 0}
    assert o.evicted == read + bash + 247
    assert o.base == 3_200 - later


def test_a_compaction_keeps_the_results_it_names_and_evicts_the_rest_once():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # Δ 1,000 → 2.0
    step(t, 11_000, "Bash", 994)  # Δ 500
    kept = step(t, 11_500, CG, 3_950, query="xy")  # 2,000 tokens at the ratio; the boundary keeps it
    t.compact(preserved=["a-call", f"u-{kept}"])
    t.user("This session is being continued from a previous conversation. " + "s" * 37)
    t.say("done", ctx=3_000)
    o = occupancy(t.session(), tool=CODEGRAPH)
    read, bash = (delta - (6 + STEP_FRAMING) // 2 for delta in (1_000, 500))
    assert o.compactions == 1
    assert o.residual == {"tool": 1_975, "read": 0, "search": 0, "bash": 0, "other": 0}
    assert o.residual_results["tool"] == 1
    assert o.evicted == read + bash  # once: what the boundary did not keep
    assert sum(o.contributed.values()) - sum(o.residual.values()) == o.evicted


def _compacted_after_a_dense_read(growth_of_result: int) -> tuple[Occupancy, float]:
    """Two Reads at 2.0 chars/token, then a third whose gap holds a boundary that keeps it; the request after the
    boundary holds the first request's context again, the summary, the kept call and the kept result, which grew by
    ``growth_of_result``. The third Read's price at its family's ratio (the earlier Reads') comes back too."""
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # the session's first request: its context is the post-compaction one's
    step(t, 11_000, "Read", 1_994)
    kept = step(t, 12_000, "Read", 1_994)
    t.compact(preserved=[f"u-{kept}"])
    summary = "This session is being continued from a previous conversation. " * 6
    t.user(summary)
    # What the rest of that request costs at the run's terms (no small gap measures framing: a character at 2.0)
    call_frame = MESSAGE_FRAME_CHARS + CALL_FRAME_CHARS + ID_CHARS
    rest = len(summary) / PROSE_CHARS_PER_TOKEN + (len("Read{}") + call_frame + BLOCK_FRAME_CHARS) / 2
    t.say("done", ctx=10_000 + round(rest) + growth_of_result)
    return occupancy(t.session(), tool=CODEGRAPH), 1_000 - (6 + STEP_FRAMING) / 2


def test_a_result_kept_across_a_compaction_is_measured_against_the_first_request():
    # Its own gap holds the boundary, so no gap measures it; at its family's ratio it would be 936 tokens.
    o, priced = _compacted_after_a_dense_read(1_400)
    assert o.residual["read"] == pytest.approx(1_400, abs=2) and priced < 1_000
    assert o.evicted == pytest.approx(2 * priced)  # the two earlier Reads, once
    assert sum(o.contributed.values()) - sum(o.residual.values()) == pytest.approx(o.evicted, abs=1)


def test_growth_after_a_compaction_far_beyond_the_kept_results_is_not_theirs():
    # Files the CLI restores after a compaction (not in the transcript) grow the request too: beyond SHED_FACTOR of
    # the kept results' prices, the request is not measuring them, and they keep their prices.
    o, priced = _compacted_after_a_dense_read(6_000)
    assert o.residual["read"] == pytest.approx(priced, abs=2)


def test_read_results_a_compaction_evicted_and_the_cli_restored_are_not_the_kept_results():
    # Claude Code 2.1.332 restores the files whose Read results the boundary evicted, appended to the last kept result:
    # the two earlier Reads (at their price) came back with it, and the kept Read measures what is left.
    o, priced = _compacted_after_a_dense_read(2 * round(1_000 - (6 + STEP_FRAMING) / 2) + 1_100)
    assert o.residual["read"] == pytest.approx(1_100, abs=3) and priced < 1_000
    assert o.evicted == pytest.approx(2 * priced)  # they left the window's results all the same


def test_a_second_compaction_evicts_what_the_first_kept_unless_it_keeps_it_again():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    kept = step(t, 11_000, "Bash", 994)
    t.compact(preserved=[f"u-{kept}"])
    step(t, 5_000, "Grep", 994)
    t.compact()
    t.say("done", ctx=4_000)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.compactions, sum(o.residual.values())) == (2, 0)
    assert o.evicted == sum(o.contributed.values())


def test_growth_the_transcript_does_not_show_is_neither_a_result_nor_an_eviction():
    # Three clean gaps at 2.0 chars/token; the fourth also holds thinking streamed empty that counted 3,000 tokens.
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    step(t, 11_000, "Read", 1_994)
    step(t, 12_000, "Read", 1_994)
    call = tool_use("Read")
    t.message({"type": "thinking", "thinking": "", "signature": "sig"}, call, ctx=13_000)
    t.reply(call["id"], "x" * 1_994)
    step(t, 17_000, "Read", 1_994)  # Δ 1,000 + 3,000 hidden, then an ordinary gap
    t.say("done", ctx=18_000)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == pytest.approx(2.0)  # the plain pooled ratio would read 1.33 and shed 1,600
    assert o.evicted == 0
    assert o.unexplained == o.unexplained_thinking == pytest.approx(3_000, abs=20)  # less the block's framing
    own = (6 + STEP_FRAMING) / 2
    assert o.residual["read"] == pytest.approx(5 * (1_000 - own), abs=5)  # the hidden gap's at the family's ratio


def test_a_gap_far_denser_than_the_others_beyond_their_spread_is_not_calibrated_on():
    # A CLI reminder of 1,500 tokens the transcript does not show, in a gap without thinking.
    t = Transcript()
    ctx = 10_000
    for delta in (1_000, 1_010, 990, 1_005, 2_500):
        step(t, ctx, "Read", 1_994)
        ctx += delta
    t.say("done", ctx=ctx)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == pytest.approx(8_000 / 4_005)
    assert o.evicted == 0 and o.unexplained == pytest.approx(1_500, abs=30)


def test_growth_beside_a_result_of_a_family_denser_than_the_others_is_unexplained_not_its_price():
    # Context the server adds beside the retrieval tool's result, 600 tokens no transcript shows, in a gap without
    # thinking: the tool's only gap reads at 1.25 chars/token against the Read's 2.0, too few gaps for a spread.
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    step(t, 11_000, CG, 1_994)
    t.say("done", ctx=12_600)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == pytest.approx(2.0)
    own = (6 + STEP_FRAMING) / 2  # the call and the step's framing, at the ratio
    assert o.residual["tool"] == 997  # its characters at the Read's ratio, not the 1,600 - own its gap grew
    # the 600 tokens, less the framing the ratio does not price into the result
    assert o.evicted == 0 and o.unexplained == pytest.approx(1_600 - 997 - own, abs=20)
    assert o.unexplained_beside == o.unexplained  # theirs or context: the data cannot tell, its error bar is itself
    # The family's bar: the same growth, its call and framing too (the gap's characters at the Read's ratio)
    assert set(o.denser) == {"tool"} and o.unexplained <= o.denser["tool"] <= 1_600 - 997
    rendered = render_occupancy(o, tool=CODEGRAPH)
    assert f"of which {o.unexplained:,} beside results, theirs or not: ±{o.unexplained:,}" in rendered


def test_a_family_denser_than_the_others_below_the_factor_keeps_its_price_and_says_its_bar():
    # The same two gaps, the tool's growing by 1,250 tokens: 1.25x the Read's density, a denser file or 250 tokens of
    # context beside it. Priced at what its own gap measured, with that growth beyond the Read's terms as its bar.
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    step(t, 11_000, CG, 1_994)
    t.say("done", ctx=12_250)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.unexplained == 0 and o.unexplained_beside == 0
    assert o.family_chars_per_token["tool"] < o.family_chars_per_token["read"]  # priced as the denser family it read
    # Its bar: what its price holds beyond the same characters at the Read's terms.
    assert set(o.denser) == {"tool"} and o.denser["tool"] == pytest.approx(
        o.residual["tool"] - o.residual["read"], abs=5
    )
    assert o.to_dict()["denser"] == o.denser
    rendered = render_occupancy(o, tool=CODEGRAPH)
    bar = f"codegraph ±{o.denser['tool']:,} tok"
    assert f"read denser than the other families, their own cost or context beside them: {bar}" in rendered


def _prose_read_then_tool(result: str, grown: int) -> Occupancy:
    """A Read of 2,000 characters of prose ("word " 400 times) growing its gap by 1,000 tokens, then the tool's
    ``result``, its gap growing by ``grown``."""
    t = Transcript()
    for ctx, name, shown in ((10_000, "Read", "word " * 400), (11_000, CG, result)):
        call = tool_use(name)
        t.message(call, ctx=ctx)
        t.reply(call["id"], shown)
    t.say("done", ctx=11_000 + grown)
    return occupancy(t.session(), tool=CODEGRAPH)


def test_a_family_denser_by_characters_but_not_by_pieces_is_priced_as_its_gap_measured():
    # The tool's 2,000 characters are numbers and punctuation ("1,2;" 500 times, 2,000 pieces), the Read's 400 pieces:
    # grown 1,600 tokens, the tool reads 1.6x as dense by characters, a third as dense by pieces. A denser file, not
    # context beside it: priced at what its gap measured (less the call and framing at the run's terms), nothing
    # unexplained; its bar all the same, since the data do not say which.
    o = _prose_read_then_tool("1,2;" * 500, 1_600)
    assert o.unexplained == 0 and o.unexplained_beside == 0
    assert 1_450 < o.residual["tool"] < 1_600 and set(o.denser) == {"tool"}
    # The same growth beside a listing of one piece: denser by both, context beside it or its own cost.
    beside = _prose_read_then_tool("x" * 2_000, 1_600)
    assert beside.residual["tool"] < 1_000 and beside.unexplained_beside > 500


def test_a_family_as_dense_as_the_others_within_the_tolerance_has_no_bar():
    # 5% denser: within the tolerance that makes growth unexplained, max(200 tokens, 5%), no bar and no line.
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    step(t, 11_000, CG, 1_994)
    t.say("done", ctx=12_050)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.denser == {}
    assert "read denser than the other families" not in render_occupancy(o, tool=CODEGRAPH)


def test_a_ratio_no_tokenizer_produces_is_never_used_and_the_block_says_what_was_measured():
    # Every gap grew by 3,500 tokens for 2,000 characters, 0.57 chars/token: growth the transcript does not show.
    t = Transcript()
    ctx = 10_000
    for _ in range(4):
        step(t, ctx, "Read", 1_994)
        ctx += 3_500
    t.say("done", ctx=ctx)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.calibration == IMPLAUSIBLE and o.implausible_chars_per_token == pytest.approx(0.58, abs=0.02)
    # neither measure is a ratio
    assert o.chars_per_token == simple_estimate(t.session(), CODEGRAPH).chars_per_token == 3.0
    assert o.residual["read"] == pytest.approx(4 * 1_994 / 3.0, rel=0.01)  # not 4 × 3,500 of growth
    assert o.evicted == 0 and o.unexplained > 4 * 2_500
    assert "(the gaps measured 0.57, which no tokenizer produces)" in render_occupancy(o, tool=CODEGRAPH)


def test_the_simple_estimate_cross_checks_the_residual_and_the_block_says_where_they_disagree():
    # Ordinary gaps: the two agree within their error bars.
    t = Transcript()
    for ctx in (10_000, 11_000, 12_000):
        step(t, ctx, "Read", 1_994)
    t.say("done", ctx=13_000)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.simple_chars_per_token == pytest.approx(2.0, rel=0.01) and o.simple_residual == 2_991
    assert o.cross_check == "" and "cross-check" not in render_occupancy(o, tool=CODEGRAPH)
    # Thinking streamed empty counted 4,000 tokens, then left when the CLI resumed: occupancy takes the shrink from
    # that growth, the simple estimate from the results (it evicts them), so they disagree, and the block says so.
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    call = tool_use("Read")
    t.message({"type": "thinking", "thinking": "", "signature": "sig"}, call, ctx=11_000)
    t.reply(call["id"], "x" * 1_994)
    t.say("next question", ctx=16_000)
    t.say("done", ctx=12_000)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.evicted < 20 and o.simple_residual < sum(o.residual.values()) / 2  # a rounding, not a shedding
    assert o.cross_check.startswith(f"residual {sum(o.residual.values()):,} tok vs the simple estimate's ")
    assert f"\n  cross-check: {o.cross_check}" in render_occupancy(o, tool=CODEGRAPH)


def test_a_gap_that_falls_short_sheds_only_what_was_there_before_it():
    # The first gap (a Read after much prose: not calibrated on) grew by half what the run's ratio prices its Read at:
    # nothing was resident before it to shed, so nothing is evicted, and its result costs at most what the gap grew.
    t = Transcript()
    step(t, 10_000, "Read", 1_994, prose=3_000)
    ctx = 10_500
    for _ in range(3):
        step(t, ctx, "Read", 1_994)
        ctx += 1_000
    t.say("done", ctx=ctx)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == pytest.approx(2.0, rel=0.01)
    assert o.evicted == 0  # it used to evict the gap's own result: 500 tokens no request ever dropped
    assert o.residual["read"] == pytest.approx(500 + 3 * (1_000 - (6 + STEP_FRAMING) / 2), rel=0.02)


def test_a_gap_that_reads_thin_sheds_only_what_earlier_gaps_brought():
    # A Grep gap at 2.0 chars/token, then a Read that reads at 3.5: past the ceiling of 1.5 × the lower median, as if
    # it had shed, but only 2,000 characters were there before it, far less than its shortfall at 2.0. It did not
    # shed: its file is sparse, and it calibrates and prices its own result.
    t = Transcript()
    step(t, 10_000, "Grep", 1_994)
    step(t, 11_000, "Read", 34_994)
    t.say("done", ctx=21_000)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.evicted == 0 and o.chars_per_token > 3.0
    assert o.residual["read"] == pytest.approx(10_000 - (6 + STEP_FRAMING) / 2, rel=0.02)


def test_short_results_of_the_agents_own_tools_are_priced_at_the_ratio_their_small_gaps_measure():
    # Reads at 2.0 chars/token measure the run, small Bash gaps its framing (0.3 tokens a character); a spawned agent's
    # id and its wait's status (short JSON, 1.0 chars/token here) come back in small gaps of their own. At the run's
    # ratio they would cost half what they do.
    frame = 184  # a step's: its call and result blocks, the two messages' wrappers
    t = Transcript()
    ctx = 10_000
    for _ in range(3):
        step(t, ctx, "Read", 1_994)
        ctx += 1_000
    small = [("Bash", 100, 2.0)] * 3 + [("spawn_agent", 200, 1.0), ("wait_agent", 200, 1.0)]
    for name, result, chars_per_token in small:
        step(t, ctx, name, result)
        ctx += round((len(name) + 2) / 2.0 + result / chars_per_token + frame * 0.3)
    t.say("done", ctx=ctx)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.family_chars_per_token["other"] == pytest.approx(1.0, rel=0.05)
    own_framing = 2 * RESULT_FRAMING * o.framing_tokens_per_char
    assert o.residual["other"] == pytest.approx(400 + own_framing, rel=0.05)  # not 2 × 200 at the run's 2.1


def test_a_shrink_takes_unexplained_growth_before_any_result():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    call = tool_use("Read")
    t.message({"type": "thinking", "thinking": "", "signature": "sig"}, call, ctx=11_000)
    t.reply(call["id"], "x" * 1_994)
    t.say("next question", ctx=16_000)  # 1,000 for the result, 4,000 hidden
    t.say("done", ctx=12_000)  # the CLI dropped the earlier turn's thinking: 4,000 tokens left, no result did
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.unexplained == 0
    assert o.evicted <= 15  # the hidden growth less the thinking block's framing, at most
    assert sum(o.residual.values()) >= sum(o.contributed.values()) - 15


@pytest.mark.parametrize("back", [True, False], ids=["sent again", "left out"])
def test_thinking_a_resumed_turn_left_out_and_sent_again_is_neither_unexplained_nor_a_result(back):
    # Claude Code 2.1.332 on --resume: the new turn's first request leaves the earlier turn's visible thinking out,
    # the next one sends it again. Three clean gaps at 2.0 chars/token, then 9,000 characters of thinking (2,000
    # tokens at prose's ratio) before a Read.
    t = Transcript()
    for ctx in (10_000, 11_000, 12_000):
        step(t, ctx, "Read", 1_994)
    call = tool_use("Read")
    t.message(thinking("t" * 9_000), call, ctx=13_000)
    t.reply(call["id"], "x" * 1_994)
    t.say("answer", ctx=16_000)  # Δ 3,000: the thinking's 2,000 and the result's 1,000
    t.user("next question")
    step(t, 14_100, "Read", 1_994)  # Δ −1,900: the thinking left, the answer and the question came
    t.say("done", ctx=14_100 + (3_200 if back else 1_200))  # a denser file: 1,200 tokens (and the thinking again)
    o = occupancy(t.session(), tool=CODEGRAPH)
    own = (6 + STEP_FRAMING) / 2
    assert (o.evicted, o.unexplained) == (0, 0)
    # Either way the last gap measures its own result: net of the thinking that came back, or as it grew (its ratio,
    # pooled, moves the others' framing by a few tokens).
    assert o.residual["read"] == pytest.approx(4 * (1_000 - own) + 1_200 - own, abs=30)


@pytest.mark.parametrize("delta", [1_994, 100])
def test_a_gap_across_a_compaction_is_neither_calibrated_on_nor_shed(delta):
    # Δ 1,994 would pull the pooled ratio down to 1.2; Δ 100 would read as a 894-token shortfall.
    t = Transcript()
    step(t, 10_000, "Read", 994)  # Δ 500 → 2.0
    grep = step(t, 10_500, "Grep", 994)
    t.compact()
    t.reply(grep + "-late", "x" * 994)  # a result that arrives after the boundary stays resident
    t.say("done", ctx=10_500 + delta)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.chars_per_token, o.compactions) == (2.0, 1)
    assert o.residual == {"tool": 0, "read": 0, "search": 0, "bash": 0, "other": 497}
    assert o.evicted == 500 - (6 + STEP_FRAMING) // 2 + 497


def test_micro_compaction_sheds_the_oldest_results_first():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # 997 tok, Δ 1,000 → 2.0
    step(t, 11_000, "Bash", 994)  # 497 tok, Δ 500
    step(t, 11_500, "Grep", 1_994)  # 997 tok, Δ 1,000
    step(t, 12_500, CG, 1_950, query="xy")  # 975 tok appended, yet the context shrank by 200
    t.say("done", ctx=12_300)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == 2.0
    # The clean gaps price their own results: growth less the call and the step's framing.
    read, bash, search = (delta - (6 + STEP_FRAMING) // 2 for delta in (1_000, 500, 1_000))
    # Shortfall 975 + 200 = 1,175: all of Read's, then the rest of it from Bash's.
    assert o.evicted == 1_175
    left = bash - (1_175 - read)
    assert o.residual == {"tool": 975, "read": 0, "search": search, "bash": left, "other": 0}
    assert o.residual_results == {"tool": 1, "read": 0, "search": 1, "bash": 1, "other": 0}
    assert o.residual_chars["bash"] == round(994 * left / bash)
    assert o.contributed["read"] == read
    assert "· evicted 1,175 tok" in render_occupancy(o, tool=CODEGRAPH)


@pytest.mark.parametrize(
    ("result_chars", "shortfall", "evicted"),
    [(1_994, 199, 0), (1_994, 201, 201), (20_000, 450, 0), (20_000, 600, 600)],
)
def test_a_shortfall_within_the_larger_of_200_tokens_and_5_percent_is_noise(result_chars, shortfall, evicted):
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # Δ 1,000 → 2.0; its own gap prices it
    # As much prose as result keeps this gap out of calibration; only the result is priced.
    step(t, 11_000, "Bash", result_chars, prose=result_chars)
    t.say("done", ctx=11_000 + result_chars // 2 - shortfall)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert o.chars_per_token == 2.0
    assert o.evicted == evicted
    assert o.residual["read"] == 1_000 - (6 + STEP_FRAMING) // 2 - evicted
    assert o.residual["bash"] == result_chars // 2


# -- robustness -----------------------------------------------------------------------------------
def test_an_empty_session():
    o = occupancy(read_lines([]), tool=CODEGRAPH)
    assert (o.turns, o.ctx_final, o.base, o.tokens_processed, o.calibration) == (0, 0, 0, 0, DEFAULT)
    assert (
        render_occupancy(o, tool=CODEGRAPH).splitlines()[1] == "  final context            0 tok    0.0% of 200k window"
    )


def test_messages_without_usage_orphan_results_and_flat_gaps():
    t = Transcript()
    step(t, 10_000, "Read", 994)
    t.say("an error, no usage")
    del t.events[-1]["message"]["usage"]
    t.reply("toolu_nobody_called", "x" * 100)
    step(t, 10_600, "Bash", 200)  # Δ 600 over 1,000 + 18 + 100 chars: a clean gap, the only one
    t.say("flat", ctx=10_600)  # Δ 0 for Bash's 200 chars: 107 tokens short, below the tolerance
    t.say("shrinking", ctx=10_100)  # Δ −500 with nothing priced: 500 tokens shed, the oldest first
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert (o.turns, o.ctx_final) == (4, 10_100)
    ratio = 1_118 / 600
    assert o.chars_per_token == ratio
    assert o.contributed_results == {"tool": 0, "read": 1, "search": 0, "bash": 1, "other": 1}
    # The clean gap's growth, less its call, its prose and the framing of its messages and call, is its two results'.
    framing = 4 * MESSAGE_FRAME_CHARS + CALL_FRAME_CHARS + ID_CHARS + BLOCK_FRAME_CHARS
    results = 600 - (24 + framing) / ratio
    assert o.contributed["read"] == round(results * 994 / 1_094)
    assert o.contributed["other"] == round(results * 100 / 1_094)
    # The shrink sheds them both, then the rest of its 500 tokens from Bash's 107.
    assert o.evicted == 500
    bash = round(200 / ratio - (500 - results))
    assert o.residual == {"tool": 0, "read": 0, "search": 0, "bash": bash, "other": 0}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Read", "Grep", "Bash", CG, "Edit", "compact"]),
            st.integers(0, 20_000),
            st.integers(-30_000, 30_000),
        ),
        max_size=12,
    )
)
def test_residual_never_exceeds_contributed(steps):
    t = Transcript()
    ctx = 50_000
    for name, chars, delta in steps:
        if name == "compact":
            t.compact()
        else:
            step(t, ctx, name, chars)
        ctx = max(1, ctx + delta)
    t.say("done", ctx=ctx)
    o = occupancy(t.session(), tool=CODEGRAPH)
    assert all(0 <= o.residual[f] <= o.contributed[f] for f in FAMILIES)
    assert abs(sum(o.contributed.values()) - sum(o.residual.values()) - o.evicted) <= len(FAMILIES)
    assert o.base >= 0 and o.chars_per_token > 0


# -- the rendered block -----------------------------------------------------------------------------
SEED_BLOCK = """\
Residual context occupancy at end of run:
  final context       54,950 tok   27.5% of 200k window
  codegraph           13,941 tok   25.4% of ctx    7.0% of 200k win   (31,312 chars, 2 results)
  Read                     0 tok    0.0% of ctx    0.0% of 200k win   (0 chars, 0 results)
  Grep/Glob                0 tok    0.0% of ctx    0.0% of 200k win   (0 chars, 0 results)
  Bash                     0 tok    0.0% of ctx    0.0% of 200k win   (0 chars, 0 results)
  → file-access            0 tok    0.0% of ctx    0.0% of 200k win   (0 chars, 0 results)
  other tools             33 tok    0.1% of ctx    0.0% of 200k win   (73 chars, 1 result)
  base (prompt+prose)  40,976 tok   74.6% of ctx   20.5% of 200k win
    of which fixed    37,726 tok  system + tool schemas + question, before any tool answered
  measure: 2.25 chars/tok measured ±0.9% · turns 6 · compactions 0"""


def test_the_block_has_the_seed_layout():
    o = Occupancy(ctx_final=54_950, ctx_base=37_726, chars_per_token=2.246, calibration=MEASURED, dispersion=0.009)
    o.residual.update(tool=13_941, other=33)
    o.residual_chars.update(tool=31_312, other=73)
    o.residual_results.update(tool=2, other=1)
    o.turns = 6
    assert render_occupancy(o, tool=CODEGRAPH) == SEED_BLOCK


def test_the_block_names_the_tool_and_a_default_ratio():
    o = Occupancy(ctx_final=1_000, ctx_base=900, turns=1, compactions=2, evicted=1_500, window=128_000)
    lines = render_occupancy(o, SOURCEGRAPH).splitlines()
    assert lines[1] == "  final context        1,000 tok    0.8% of 128k window"
    assert lines[2].startswith("  sourcegraph              0 tok")
    assert lines[-1] == "  measure: 3.00 chars/tok default · turns 1 · compactions 2 · evicted 1,500 tok"


# -- real transcripts ---------------------------------------------------------------------------------
STREAM_RUNS = {
    "ccb/linux-hda-intel-suspend-fault-001/baseline/claude-code.txt": 24,
    "ccb/linux-hda-intel-suspend-fault-001/mcp/claude-code.txt": 33,
    "ccb/bustub-hyperloglog-impl-001/baseline/claude-code.txt": 0,  # a <synthetic> message, zero usage
    "ccb/bustub-hyperloglog-impl-001/mcp/claude-code.txt": 0,
    "sjarmak/dependency_recognition-java-unkn__pshKMge/claude-code.txt": 3,
    "gleam/basic_query.ndjson": 1,
}


def _sane(o: Occupancy) -> None:
    assert all(0 <= o.residual[f] <= o.contributed[f] for f in FAMILIES)
    assert o.tokens_processed >= o.ctx_final
    assert render_occupancy(o, tool=CODEGRAPH).startswith("Residual context occupancy at end of run:")


@pytest.mark.parametrize(("path", "turns"), STREAM_RUNS.items())
def test_real_stream_json_runs(path, turns):
    o = occupancy(read_segments([TRANSCRIPTS / path]), SOURCEGRAPH)
    _sane(o)
    assert (o.turns, o.compactions) == (turns, 0)
    if "/mcp/" in path and turns:
        assert o.residual["tool"] > 0 and o.contributed_results["tool"] == 27  # 12 + 12 + 2 + 1


def test_real_session_with_a_compaction():
    [path] = (TRANSCRIPTS / "spotter").glob("*.jsonl")
    o = occupancy(read_session_file(path), tool=CODEGRAPH)
    _sane(o)
    assert o.compactions == 1
    assert o.turns == 139
    assert o.calibrated
    # The compaction summarised everything before it away: what is left is less than was added.
    assert o.evicted > 0 and sum(o.residual.values()) < sum(o.contributed.values())
    assert o.ctx_final < 170_251


def test_a_real_sessions_grep_listings_denser_by_characters_are_a_denser_file_by_their_pieces(monkeypatch):
    # spotter's Grep listings (a real model's counts, nobody here wrote them) read 1.37x its other families by
    # characters, past GROWTH_FACTOR, and 1.02x by pieces: priced as their gaps measured, nothing beside them. Weighed
    # by characters alone, they would be context: 250 tokens moved out of the results into unexplained.
    [path] = (TRANSCRIPTS / "spotter").glob("*.jsonl")
    session = read_session_file(path)
    o = occupancy(session, tool=CODEGRAPH)
    assert o.unexplained_beside == 0 and o.denser["search"] > 0
    monkeypatch.setattr(occupancy_module, "_denser_by_pieces", lambda *_: True)
    by_characters = occupancy(session, tool=CODEGRAPH)
    assert by_characters.unexplained_beside > 200
    assert by_characters.residual["search"] < o.residual["search"] - 200


def test_real_session_file_matches_its_stream_json_twin():
    folder = TRANSCRIPTS / "sjarmak/dependency_recognition-java-unkn__pshKMge"
    [session_file] = (folder / "sessions/projects/-workspace").glob("*.jsonl")
    streamed = occupancy(read_segments([folder / "claude-code.txt"]), tool=CODEGRAPH).to_dict()
    interactive = occupancy(read_session_file(session_file), tool=CODEGRAPH).to_dict()
    assert streamed == interactive


def test_by_request_keeps_what_each_family_had_resident_as_each_request_was_sent():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    step(t, 11_000, "Bash", 994)
    step(t, 11_500, "Grep", 1_994)
    step(t, 12_500, CG, 1_950, query="xy")  # the context shrank: Read's result is shed, then part of Bash's
    t.say("done", ctx=12_300)
    o = occupancy(t.session(), by_request=True, tool=CODEGRAPH)
    assert [r["ctx"] for r in o.by_request] == [10_000, 11_000, 11_500, 12_500, 12_300]
    assert o.by_request[0] == {"ctx": 10_000, "tool": 0, "read": 0, "search": 0, "bash": 0, "other": 0}
    assert o.by_request[1]["read"] > 0 and o.by_request[-1]["read"] == 0  # there, then shed
    assert {fam: o.by_request[-1][fam] for fam in o.residual} == o.residual  # the last is the residual
    # asked for only: the figures and what a record keeps are the same without it
    plain = occupancy(t.session(), tool=CODEGRAPH)
    assert plain.by_request == [] and plain.to_dict() == o.to_dict()


def test_by_request_across_a_compaction_and_on_real_transcripts():
    t = Transcript()
    step(t, 10_000, "Read", 994)
    step(t, 10_500, "Bash", 1_994)
    t.compact(pre_tokens=12_000)
    t.user("This session is being continued from a previous conversation. " + "s" * 37)
    step(t, 3_000, "Read", 394)
    t.say("done", ctx=3_200)
    o = occupancy(t.session(), by_request=True, tool=CODEGRAPH)
    assert len(o.by_request) == o.turns and o.by_request[3]["bash"] == 0  # cleared by the compaction
    assert {fam: o.by_request[-1][fam] for fam in o.residual} == o.residual
    for path in sorted(TRANSCRIPTS.rglob("*.jsonl"))[:6]:
        session = read_segments([path])
        found = occupancy(session, by_request=True, tool=CODEGRAPH)
        assert len(found.by_request) == found.turns, path
        if found.by_request:
            assert {fam: found.by_request[-1][fam] for fam in found.residual} == found.residual, path


def test_visible_thinking_is_priced_at_what_the_declared_output_leaves_with_each_call_counted_with_its_id():
    # The declared output counts a call's id like the rest of its block: the stand-in's counting model does. Six calls'
    # ids (30 characters each) left out of what the messages show were read as thinking, 9% of it.
    t = Transcript()
    think = thinking(thinking_text(3_000, "where is it handled"))
    calls = [tool_use("Read", f"toolu_01{i:022x}", file_path=f"src/module_{i}.py") for i in range(6)]
    t.message(think, *calls, ctx=10_000)
    for call in calls:
        t.reply(call["id"], "x" * 994)
    t.say("done", ctx=14_000)
    t.result("done")
    t.events[-1]["usage"] = {"output_tokens": count_tokens([think, *calls]) + count_tokens([text("done")])}
    shown = think["thinking"]
    assert occupancy(t.session(), tool=CODEGRAPH).thinking_chars_per_token == pytest.approx(
        len(shown) / text_tokens(shown), rel=0.05
    )


@pytest.mark.parametrize("told", [True, False], ids=["output declared", "no declared output"])
def test_a_result_beside_thinking_far_bigger_than_itself_is_priced_mostly_at_the_ratio(told):
    # Two equal Reads, each after 4,500 characters of thinking; their gaps grew 1,600 and 1,400 tokens. The declared
    # output says the two blocks cost 2,000 together, not which cost what: the 200 between the gaps is the thinking's
    # as likely as the results'.
    t = Transcript()
    shown = count_tokens([text("done")])
    for ctx in (10_000, 11_000, 12_000):
        shown += count_tokens([tool_use("Read", f"toolu_{ctx}")])
        step(t, ctx, "Read", 1_994)
    ctx = 13_000
    for seed, delta in (("a", 1_600), ("b", 1_400)):
        call = tool_use("Read")
        shown += count_tokens([call])
        t.message(thinking(thinking_text(4_500, seed)), call, ctx=ctx)
        t.reply(call["id"], "x" * 994)
        ctx += delta
    t.say("done", ctx=ctx)
    t.result("done")
    if told:
        t.events[-1]["usage"] = {"output_tokens": shown + 2_000}
    o = occupancy(t.session(), by_request=True, tool=CODEGRAPH)
    first, second = (o.by_request[i + 1]["read"] - o.by_request[i]["read"] for i in (3, 4))
    if told:  # the measure weighs as the price squared, the price as the thinking's (twice it): a fifth and four fifths
        assert abs(first - second) <= 60
    else:  # the thinking's ratio is prose's, assumed: its error would be the ratio's too, and the measures stand
        assert first - second == pytest.approx(200, abs=5)
    assert (o.evicted, o.unexplained) == (0, 0)


@pytest.mark.parametrize("told", [True, False], ids=["output declared", "no declared output"])
def test_a_segments_declared_output_tells_what_its_one_hiding_gap_hid(told):
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # Δ 1,000 → 2.0
    call = tool_use("Read")
    t.message({"type": "thinking", "thinking": "", "signature": "sig"}, call, ctx=11_000)
    t.reply(call["id"], "x" * 1_994)  # a denser file: 1,200 tokens, and 3,000 of thinking not streamed
    t.say("done", ctx=15_200)
    t.result("done")
    if told:  # the output of the three requests: what they show (91 tokens, as the stand-in counts), 3,000 hidden
        t.events[-1]["usage"] = {"output_tokens": 3_091}
    o = occupancy(t.session(), tool=CODEGRAPH)
    own = (6 + STEP_FRAMING) / 2
    if told:  # the hiding gap is explained: it prices its own result, and what it hid is unexplained growth
        assert o.residual["read"] == pytest.approx(1_000 - own + 1_200 - own, abs=40)
        assert o.unexplained == pytest.approx(3_000, abs=100)  # less what the estimate of the shown output misses
    else:  # it only grew by more than its result at the ratio: that is all it can say
        assert o.residual["read"] == pytest.approx(2 * (1_000 - own), abs=5)
        assert o.unexplained == pytest.approx(3_000 + 1_200 - (1_000 - own), abs=100)
    assert o.evicted == 0


def test_the_residual_figures_of_the_docs_page():
    """docs/metrics/occupancy.md, "The figures built on it"."""
    scores = {"occupancy": {"ctx_final": 20_000, "residual": {"tool": 0, "read": 1_500, "search": 500, "bash": 0}}}
    without = figures_of(scores, has_tool=False)
    assert (without["file_access_residual"], without["residual_tokens"]) == (2_000, 2_000)
    assert (without["residual_share"], without["window_share"]) == (0.1, 0.01)
    assert figures_of(scores, has_tool=True)["residual_tokens"] == 0
