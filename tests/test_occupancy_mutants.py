"""Occupancy's rules at their edges: the arithmetic of shedding, calibration, compaction and the simple estimate, pinned
where the suite in tests/test_occupancy.py let a change through (``bench/mutation.py metrics/occupancy.py``;
docs/benchmarks.md, "Mutation testing").

The helpers are held to exact figures on gaps built by hand (``_Gap``: what a transcript appends between two requests,
as ``_gaps`` reads it); what a whole run does, on transcripts written the way the CLI writes them (tests/support).
"""

from collections import deque
from dataclasses import fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.synth import Transcript, text, thinking, tool_use

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.metrics.occupancy import (
    BOUND,
    DEFAULT_CHARS_PER_TOKEN,
    FAMILIES,
    MEASURED,
    PIECE_RE,
    PROSE_CHARS_PER_TOKEN,
    Occupancy,
    SimpleEstimate,
    _beside_growth,
    _calibrate,
    _cross_check,
    _declared_output,
    _drop_unexplained,
    _envelope,
    _evict_oldest,
    _family_ratios,
    _Gap,
    _gaps,
    _holds,
    _measure_kept,
    _measured_scale,
    _message_frame,
    _pieces,
    _pooled,
    _Pricing,
    _Resident,
    _returning,
    _simple,
    _small_family_ratios,
    _unexplained_floor,
    count_pieces,
    occupancy,
    plausible,
)
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.transcript import MAIN


def _three_reads_and_a_hidden_thinking_read(t: Transcript, answer: str) -> Transcript:
    """Three Reads at 2.0 chars/token, then a Read beside empty thinking, and ``answer`` 4,000 tokens on."""
    for ctx in (10_000, 11_000, 12_000):
        step(t, ctx, "Read", 1_994)
    call = tool_use("Read")
    t.message({"type": "thinking", "thinking": "", "signature": "sig"}, call, ctx=13_000)
    t.reply(call["id"], "x" * 1_994)
    t.say(answer, ctx=17_000)
    return t


def step(t: Transcript, ctx: int, name: str, result_chars: int, prose: int = 0, **tool_input) -> str:
    """A request of size ``ctx`` calling ``name``, then its result (as tests/test_occupancy.py builds them)."""
    call = tool_use(name, **tool_input)
    t.message(*([{"type": "text", "text": "p" * prose}] if prose else []), call, ctx=ctx)
    t.reply(call["id"], "x" * result_chars)
    return call["id"]


def gap(chars: int, delta: int, **fields_) -> _Gap:
    """A gap of ``chars`` content characters, all a Read's result unless ``results`` says otherwise."""
    results = fields_.pop("results", [("read", chars, 0)])
    tool_chars = sum(c for _, c, _ in results)
    fields_.setdefault("uuids", [""] * len(results))  # each result's event, as _gaps keeps them
    return _Gap(chars=chars, delta=delta, tool_chars=tool_chars, results=results, **fields_)


# -- the record -------------------------------------------------------------------------------------------------------
def test_the_record_holds_every_figure_under_its_own_name():
    o = Occupancy(unexplained_beside=7, simple_chars_per_token=2.5, simple_residual=900, cross_check="off")
    o.implausible_chars_per_token = 0.5
    d = o.to_dict()
    stored = {f.name for f in fields(Occupancy)} - {"by_request"}  # asked for, never stored
    assert set(d) == stored | {"calibrated", "file_access", "base"}
    for name in stored:
        assert d[name] == getattr(o, name), name


# -- what a shrink takes ----------------------------------------------------------------------------------------------
def test_a_shrink_takes_unexplained_growth_oldest_first_to_the_fraction_of_a_token():
    grown = [(10.0, True, False), (5.0, False, True)]
    assert _drop_unexplained(grown, 4.0) == 0
    assert grown == [(6.0, True, False), (5.0, False, True)]  # the oldest, partly; what it was kept
    assert _drop_unexplained(grown, 0.5) == 0 and grown[0] == (5.5, True, False)
    assert _drop_unexplained(grown, 5.5) == 0 and grown == [(5.0, False, True)]  # exactly all of it: gone
    assert _drop_unexplained(grown, 8.0) == 3.0 and grown == []  # what is left for the results


def test_eviction_takes_the_oldest_results_to_the_fraction_of_a_token_and_never_the_gaps_own():
    resident = deque(
        [_Resident("read", 10.0, 20.0, "a"), _Resident("bash", 4.0, 8.0, "b"), _Resident("tool", 6.0, 9.0)]
    )
    assert _evict_oldest(resident, 0.5) == 0.5
    assert (resident[0].tokens, resident[0].chars) == (9.5, 19.0)  # its characters shrink with it
    assert _evict_oldest(resident, 9.5) == 9.5  # exactly the oldest: it leaves
    assert [r.uuid for r in resident] == ["b", ""]
    assert _evict_oldest(resident, 100.0, appended=1) == 4.0  # the last gap's own result stays
    assert [r.family for r in resident] == ["tool"] and resident[0].tokens == 6.0


# -- the calibration's centre, floor and ceiling ----------------------------------------------------------------------
def test_the_unexplained_floor_lies_three_scaled_mads_below_the_centre():
    # Deviations 0, 1, 2 from the centre 2.0: the median one, 1, scaled to a sigma.
    assert _unexplained_floor([1.0, 2.0, 4.0], 2.0) == pytest.approx(2.0 - 3 * 1.4826)
    # No spread: the centre over SHED_FACTOR.
    assert _unexplained_floor([2.0, 2.0, 5.0], 2.0) == pytest.approx(2.0 / 1.5)


def test_the_pooled_ratio_keeps_gaps_from_the_floor_to_the_ceiling_inclusive():
    # Ratios 2, 3, 3: the centre is 3, no spread, the floor 3 / 1.5 = 2.0 exactly: the gap on it is kept.
    gaps = [gap(2_000, 1_000), gap(3_000, 1_000), gap(3_000, 1_000)]
    assert _pooled(gaps, None) == (8_000 / 3_000, gaps)
    # Ratios 2, 2, 3: the centre 2, the ceiling 3.0 exactly; the gap on it is kept though it could have shed.
    gaps = [gap(2_000, 1_000), gap(2_000, 1_000), gap(3_000, 1_000, before=100_000)]
    assert _pooled(gaps, None) == (7_000 / 3_000, gaps)


def test_the_pooled_centre_is_the_lower_median():
    # Ratios 2, 2.9, 3.1: the centre 2.9 keeps them all (the lowest, 2, would shed the 3.1).
    gaps = [gap(2_000, 1_000), gap(2_900, 1_000), gap(3_100, 1_000, before=100_000)]
    assert _pooled(gaps, None) == (8_000 / 3_000, gaps)


@pytest.mark.parametrize(("before", "kept"), [(2_000, False), (1_999, True), (1_000, True)])
def test_a_gap_past_the_ceiling_is_kept_only_where_earlier_gaps_brought_less_than_it_lacks(before, kept):
    # At the centre 2.0 the thin gap's 4,000 characters cost 2,000 tokens: it grew 1,000 less. Only 2,000 characters
    # (1,000 tokens) before it could have shed that much.
    gaps = [gap(2_000, 1_000), gap(2_000, 1_000), gap(4_000, 1_000, before=before)]
    ratio, found = _pooled(gaps, None)
    assert found == (gaps if kept else gaps[:2])
    assert ratio == (8_000 / 3_000 if kept else 2.0)


def test_a_tiny_gap_past_the_ceiling_that_could_not_have_shed_is_kept():
    # Nothing before it: whatever it lacks was never there. (Its characters times its growth are below the ceiling.)
    gaps = [gap(2, 1), gap(2, 1), gap(5, 1, hidden=0.5)]
    assert _pooled(gaps, None) == ((2 + 2 + 5) / 2.5, gaps)


def test_a_gap_whose_net_growth_is_not_positive_is_never_pooled_however_small():
    hidden_all = gap(2_000, 1_000, hidden=1_000.0)  # every token of its growth was hidden thinking
    half_token = gap(1, 1, hidden=0.5)  # half a token of growth left: a ratio of 2
    assert _pooled([hidden_all, gap(2_000, 1_000)], None)[0] == 2.0
    assert _pooled([half_token], None) == (2.0, [half_token])


def test_framing_that_leaves_no_gap_any_growth_falls_back_to_pricing_framing_as_characters():
    gaps = [gap(2_000, 1_000, frame=100), gap(2_400, 1_000, frame=100)]
    assert _pooled(gaps, 10.0) == _pooled(gaps, None) == (2.2, gaps)
    # and the family bars are taken on those terms: the tool's gap reads 1.2 against the Read's 2.0, 1,000 beyond
    gaps = [gap(2_000, 1_000, frame=100), gap(2_400, 2_000, frame=100, results=[("tool", 2_400, 0)])]
    denser: dict[str, float] = {}
    assert _pooled(gaps, 20.0, denser) == (2.0, [gaps[0]]) and denser == {"tool": pytest.approx(800)}
    # and where no gap grew at all, nothing measures the ratio
    assert _pooled([gap(2_000, 1_000, hidden=1_000.0)], None) == (DEFAULT_CHARS_PER_TOKEN, [])


# -- a family denser than the others (docs/metrics/occupancy.md, "Invisible growth") ---------------------------------
def _beside(kept: list[_Gap], nets: list[float]) -> tuple[list[_Gap], dict[str, float]]:
    """The gaps the growth rule keeps of ``kept`` (grown ``nets`` net of all but their results), and each family's
    growth beyond the other families' terms."""
    denser: dict[str, float] = {}
    left, chars, left_nets = _beside_growth(kept, sum(g.shown_chars for g in kept), nets, denser)
    assert chars == sum(g.shown_chars for g in left) and left_nets == [nets[kept.index(g)] for g in left]
    assert [g.beside for g in kept] == [g not in left for g in kept]
    return left, denser


def test_growth_beyond_the_other_families_terms_by_exactly_the_tolerance_is_no_bar_and_a_token_more_is():
    # The Read's gap reads 2.0: the tool's 9,500 characters cost 4,750 tokens at its terms. Grown 5,000, the 250
    # beyond are exactly 5% of that growth, more than 200 tokens: within the unexplained rule's tolerance.
    read, tool = gap(2_000, 1_000), gap(9_500, 5_000, results=[("tool", 9_500, 0)])
    assert _beside([read, tool], [1_000.0, 5_000.0]) == ([read, tool], {})
    assert _beside([read, tool], [1_000.0, 5_001.0]) == ([read, tool], {"tool": 251.0})  # 5% is 250.05


def test_a_gap_whose_hidden_thinking_the_declared_output_told_sets_no_other_familys_terms():
    # The Grep gap grew 6,000 of which the declared output told 5,000 hidden: its listing reads 3.0 net of it, and by
    # it the Read's 2.0 would be 1.5 times denser, 500 tokens beyond. The telling's error is many times the listing's
    # size: it judges nothing, and with no other family the Read is measured as it grew.
    read = gap(2_000, 1_000)
    grep = gap(3_000, 6_000, hidden=5_000.0, results=[("search", 3_000, 0)])
    assert _beside([read, grep], [1_000.0, 1_000.0]) == ([read, grep], {})
    # The same listing growing by what it shows does judge: the Read reads 1.5 times denser, context beside it.
    shown = gap(3_000, 1_000, results=[("search", 3_000, 0)])
    assert _beside([read, shown], [1_000.0, 1_000.0]) == ([shown], {"read": pytest.approx(1_000 - 2_000 / 3.0)})


def test_a_familys_bar_is_its_share_by_characters_of_its_gaps_growth_beyond_the_others():
    # Two gaps of the tool's and the Read's results read 6,000 characters at 1.667 against Bash's 2.0: 600 tokens
    # beyond its terms, the tool's 4,000 characters two thirds of it (its results in both gaps summed).
    mixed = [
        gap(2_000, 1_500, results=[("tool", 1_000, 0), ("read", 1_000, 0)]),
        gap(4_000, 2_500, results=[("read", 1_000, 0), ("tool", 3_000, 0)]),
    ]
    bash = gap(4_000, 2_000, results=[("bash", 4_000, 0)])
    left, denser = _beside([*mixed, bash], [1_500.0, 2_100.0, 2_000.0])
    assert left == [*mixed, bash]  # 1.2 times as dense: within GROWTH_FACTOR of Bash's, priced as they measured
    assert denser == {"tool": pytest.approx(400), "read": pytest.approx(200)}


def test_a_family_denser_in_its_own_gaps_and_in_gaps_it_shares_adds_both_bars():
    # Against Bash's 2.0, the tool's own gap and the gap it shares with the Read each grew 250 beyond: the tool's
    # bar is all of the first and half of the second (1,000 of its 2,000 characters).
    tool = gap(2_000, 1_250, results=[("tool", 2_000, 0)])
    shared = gap(2_000, 1_250, results=[("tool", 1_000, 0), ("read", 1_000, 0)])
    bash = gap(4_000, 2_000, results=[("bash", 4_000, 0)])
    assert _beside([tool, shared, bash], [1_250.0, 1_250.0, 2_000.0]) == (
        [tool, shared, bash],
        {"tool": 375.0, "read": 125.0},
    )


def test_a_family_exactly_growth_factor_denser_keeps_its_gaps_and_one_a_token_denser_is_beside():
    read = gap(1_270, 1_000)  # 1.27 chars/token
    tool = gap(1_000, 1_000, results=[("tool", 1_000, 0)])  # 1.0: GROWTH_FACTOR times as dense
    beyond = 1_000 - 1_000 / 1.27
    assert _beside([read, tool], [1_000.0, 1_000.0]) == ([read, tool], {"tool": pytest.approx(beyond)})
    assert _beside([read, tool], [1_000.0, 1_001.0]) == ([read], {"tool": pytest.approx(beyond + 1)})


def test_a_family_denser_by_characters_but_not_by_pieces_keeps_its_gaps():
    # The tool's 500 characters of "a;" are 500 pieces, the Read's 2,000 of "word " 400: grown 1,000 tokens each,
    # the tool reads 4x as dense by characters, half as dense by pieces: a denser file, priced as it measured.
    read = gap(2_000, 1_000, texts=["word " * 400])
    tool = gap(1_000, 1_000, results=[("tool", 1_000, 0)], texts=["a;" * 500])
    left, denser = _beside([read, tool], [1_000.0, 1_000.0])
    assert left == [read, tool] and denser == {"tool": pytest.approx(500)}
    # The same growth beside 1,000 characters of "word ": denser by both weights, context beside it or its own cost.
    tool = gap(1_000, 1_000, results=[("tool", 1_000, 0)], texts=["word " * 200])
    assert _beside([read, tool], [1_000.0, 1_000.0]) == ([read], {"tool": pytest.approx(500)})


def test_a_family_exactly_growth_factor_denser_by_pieces_keeps_its_gaps_and_one_a_token_denser_is_beside():
    read = gap(1_000, 1_000, texts=["x" * 1_000])  # one piece: 1,000 tokens a piece, 1.0 a character
    dense = [("tool", 500, 0)]
    tool = gap(500, 1_270, results=dense, texts=["x" * 500])  # 1,270 a piece: GROWTH_FACTOR times; 2.54 a character
    assert _beside([read, tool], [1_000.0, 1_270.0])[0] == [read, tool]
    tool = gap(500, 1_271, results=dense, texts=["x" * 500])
    assert _beside([read, tool], [1_000.0, 1_271.0])[0] == [read]


def test_a_gaps_pieces_are_its_results_scaled_to_all_it_shows_and_none_without_text():
    assert _pieces(gap(2_000, 1_000, results=[("read", 1_000, 0)], texts=["x" * 500 + " y" * 250])) == 502.0
    assert _pieces(gap(1_000, 1_000, texts=[""])) is None
    # a gap whose results show no text is weighed by its characters alone: 2x as dense, beside
    read = gap(1_000, 1_000, texts=["x" * 1_000])
    tool = gap(1_000, 2_000, results=[("tool", 1_000, 0)], texts=[""])
    assert _beside([read, tool], [1_000.0, 2_000.0])[0] == [read]


@given(st.text(alphabet=st.sampled_from("aZ09 _-é\t\n\r\x0b\x0c\u00a0{}"), max_size=60) | st.text(max_size=40))
def test_pieces_are_counted_as_the_pattern_matches(text):
    assert count_pieces(text) == len(PIECE_RE.findall(text))


@pytest.mark.parametrize(
    ("text", "pieces"),
    [("", 0), (" ", 1), ("a ", 2), (" a", 1), ("  a", 2), ("a \n", 2), ("1234567", 3), ("x_y", 3), ("é", 1)],
)
def test_a_single_space_leads_the_next_piece_and_digits_go_three_to_a_piece(text, pieces):
    assert count_pieces(text) == pieces


def _spanning(dense: str, other: str) -> list[list[str]]:
    """The two families, and with each of the rest."""
    return [[dense, other], *([dense, other, f] for f in FAMILIES if f not in (dense, other))]


@pytest.mark.parametrize(("dense", "other"), [(d, o) for d in FAMILIES for o in FAMILIES if d != o])
def test_gaps_holding_every_family_leave_none_to_weigh_them_against_and_the_rule_weighs_the_rest(dense, other):
    # Gaps whose results span both families (and more) are disjoint from no other gap's: passed over, in whatever
    # order the families' names put them, the dense family is still weighed against the other: 250 beyond.
    spanning = [
        gap(1_000 * len(fams), 1_500, results=[(f, 1_000, 0) for f in fams]) for fams in _spanning(dense, other)
    ]
    own = [gap(2_000, 1_000, results=[(other, 2_000, 0)]), gap(2_000, 1_250, results=[(dense, 2_000, 0)])]
    assert _beside([*spanning, *own], [1_500.0] * len(spanning) + [1_000.0, 1_250.0]) == (
        [*spanning, *own],
        {dense: 250.0},
    )


# -- the bound, where every gap may hide growth -----------------------------------------------------------------------
def test_the_bound_is_the_least_dense_gap_up_to_the_ceiling_inclusive():
    # Ratios 1, 2, 2.5: the lower median 2, the ceiling 3: the least dense below it, 2.5.
    assert _envelope([gap(1_000, 1_000), gap(2_000, 1_000), gap(2_500, 1_000)]) == 2.5
    # Ratios 2, 3: the ceiling 3.0 exactly, and the gap on it bounds the ratio.
    assert _envelope([gap(2_000, 1_000), gap(3_000, 1_000)]) == 3.0


def test_the_bound_skips_gaps_whose_thinking_took_all_their_growth_but_not_half_a_token():
    assert _envelope([gap(2_000, 1_000, hidden=1_000.0), gap(2_000, 1_000)]) == 2.0
    assert _envelope([gap(1, 1, hidden=0.5)]) == 2.0
    assert _envelope([gap(2_000, 1_000, hidden=1_000.0)]) == DEFAULT_CHARS_PER_TOKEN


# -- a family's share of a gap ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("results", "prose", "share"),
    [
        ([("read", 95, 40)], 5, ("read", 95, 40)),  # exactly 95% of what the gap shows
        ([("read", 94, 40)], 6, None),
        ([("read", 50, 20), ("read", 45, 30)], 5, ("read", 95, 50)),  # one family's results summed, chars and framing
        ([("bash", 960, 10), ("tool", 30, 500)], 10, ("bash", 960, 10)),  # the family with the most characters
        ([("bash", 500, 10), ("tool", 500, 10)], 0, None),
        ([("read", 900, 10), ("bash", 50, 10), ("read", 50, 10)], 0, ("read", 950, 20)),
    ],
)
def test_a_gaps_family_share_is_the_family_holding_95_percent_of_what_it_shows(results, prose, share):
    chars = sum(c for _, c, _ in results) + prose
    assert gap(chars, 100, results=results).family_share() == share


def test_a_gap_without_results_has_no_family_share():
    assert _Gap(chars=100, delta=50).family_share() is None


def test_family_ratios_skip_a_gap_no_family_holds_and_measure_the_next():
    pricing = _Pricing(2.0, MEASURED)
    mixed = gap(1_000, 400, results=[("bash", 500, 0), ("tool", 500, 0)])
    grep = gap(1_000, 400, results=[("search", 1_000, 0)])
    assert _family_ratios([mixed, grep], pricing) == {"search": 2.5}


def _family_ratio(chars: int, delta: int, **fields_) -> dict[str, float]:
    """The family ratio one kept gap of a Read of ``chars`` characters measures, at 2.0 and 0.5 a framing character."""
    pricing = _Pricing(2.0, MEASURED, framing=0.5, framing_calibration=MEASURED)
    return _family_ratios([gap(chars + fields_.pop("prose", 0), delta, **fields_)], pricing)


@pytest.mark.parametrize(
    ("chars", "delta", "fields_", "ratios"),
    [
        (2_500, 1_000, {}, {"read": 2.5}),
        (2_500, 1_100, {"thinking_tokens": 100.0}, {"read": 2.5}),  # its visible thinking is no result's
        (2_500, 1_100, {"hidden": 100.0}, {"read": 2.5}),  # nor what its thinking hid
        (2_500, 1_050, {"results": [("read", 2_500, 100)], "frame": 100}, {"read": 2.5}),  # its framing at 0.5
        (3_000, 1_000, {}, {"read": 3.0}),  # SHED_FACTOR times the run's ratio: inclusive
        (4_000, 3_000, {}, {"read": 4_000 / 3_000}),  # the run's ratio over SHED_FACTOR: inclusive
        (3_001, 1_000, {}, {}),
        (2, 1, {}, {"read": 2.0}),  # a token measures
        (2_500, 0, {}, {}),  # no growth: nothing
    ],
)
def test_a_family_ratio_is_what_its_gaps_grew_net_of_the_rest_within_shed_factor_of_the_runs(
    chars, delta, fields_, ratios
):
    assert _family_ratio(chars, delta, **fields_) == ratios


# -- whether a gap holds what it shows --------------------------------------------------------------------------------
def _holding(delta: int, result: int = 4_000, prose: int = 0, **fields_) -> bool:
    pricing = _Pricing(2.0, MEASURED, framing=0.0, framing_calibration=MEASURED, family_ratio={"read": 4.0})
    return _holds(gap(result + prose, delta, results=[("read", result, 0)], **fields_), pricing)


@pytest.mark.parametrize(
    ("delta", "fields_", "holds"),
    [
        (1_000, {}, True),  # a Read at its family's ratio, 4.0
        (2_000, {}, False),  # at the run's ratio it would hold
        (1_200, {}, True),  # 200 off: the floor, inclusive
        (1_201, {}, False),
        (1_300, {"hidden": 300.0}, True),  # what its thinking hid is no result's
        (1_500, {"prose": 1_000}, True),  # the prose at the run's ratio
        (10_500, {"result": 40_000}, True),  # 500 off: within 5% of its growth
        (1_000, {"clearings": [(1, frozenset())]}, False),  # a compaction's gap measures nothing
    ],
)
def test_a_gap_holds_its_results_and_thinking_at_the_runs_terms_within_the_eviction_tolerance(delta, fields_, holds):
    assert _holding(delta, **fields_) is holds


# -- "other" measured on its small gaps -------------------------------------------------------------------------------
SMALL_PRICING = dict(chars_per_token=2.0, calibration=MEASURED, framing=0.5, framing_calibration=MEASURED)


def test_other_is_priced_at_what_its_small_gaps_grew_less_their_call_and_framing():
    # A spawned agent's 200-character id after a 12-character call: 160 framing characters, 60 of them the result's.
    spawn = gap(212, 6 + 50 + 30 + 200, results=[("other", 200, 60)], frame=160)
    grep = gap(212, 500, results=[("search", 200, 60)], frame=160)  # not all "other": no measure
    assert _small_family_ratios([spawn, grep, _Gap(chars=12, delta=30)], _Pricing(**SMALL_PRICING)) == {"other": 1.0}


def test_other_measured_by_a_big_gap_is_not_measured_again_on_small_ones():
    spawn = gap(212, 286, results=[("other", 200, 60)], frame=160)
    assert _small_family_ratios([spawn], _Pricing(**SMALL_PRICING, family_ratio={"other": 3.0})) == {}


@pytest.mark.parametrize(
    ("small", "ratios"),
    [
        ([], {}),  # nothing measures it
        ([gap(100, 25, results=[("other", 100, 50)], frame=50)], {}),  # its framing took all its growth
        ([gap(1, 1, results=[("other", 1, 1)], frame=1)], {"other": 2.0}),  # half a token for a character
    ],
)
def test_other_is_measured_only_where_its_gaps_leave_it_growth(small, ratios):
    assert _small_family_ratios(small, _Pricing(**SMALL_PRICING)) == ratios


# -- a compaction's kept results, measured on the request after it ----------------------------------------------------
def _kept_after(growth: float, restored: float | None = None, calibration: str = MEASURED) -> dict[str, float]:
    """A boundary's gap with three results, the first and third kept (with one of an earlier gap, and one that came
    after the boundary); the summary's 450 characters, the kept calls' 40 and their framing cost 210 tokens, the other
    resident results 400: the kept two are priced 1,500 together."""
    boundary_gap = _Gap(
        chars=3_500 + 100 + 450,  # the results, what the gap showed before the boundary, the summary
        frame=180 + 200 + 20,
        tool_chars=3_500,
        results=[("read", 2_000, 60), ("read", 1_000, 60), ("bash", 500, 60)],
        uuids=["u1", "u2", "u3"],
        clearings=[(3, frozenset({"u1", "u3", "old"}))],
        calls=[(10, 80), (20, 80), (30, 80)],
        at_last_boundary=(100, 200),
    )
    resident = deque(
        [
            _Resident("read", 300.0, 600, "old"),
            _Resident("read", 1_200.0, 2_000, "u1"),
            _Resident("bash", 300.0, 500, "u3"),
            _Resident("tool", 100.0, 200, "u4"),
        ]
    )
    pricing = _Pricing(2.0, calibration, framing=0.5, framing_calibration=MEASURED)
    extra = {} if restored is None else {"restored": restored}
    return {r.uuid: tokens for r, tokens in _measure_kept(boundary_gap, resident, growth, pricing, **extra)}


@pytest.mark.parametrize(
    ("measured", "kept"),
    [
        (1_800, {"u1": 1_440.0, "u3": 360.0}),  # their prices' share of it
        (1_000, {"u1": 800.0, "u3": 200.0}),  # their prices over SHED_FACTOR: inclusive
        (2_250, {"u1": 1_800.0, "u3": 450.0}),  # their prices times SHED_FACTOR: inclusive
        (999, {}),
        (2_251, {}),
        (500, {}),  # below what they could cost at any ratio a tokenizer produces, yet a measure only under a bound
    ],
)
def test_the_kept_results_cost_the_growth_less_the_summary_their_calls_and_the_other_results(measured, kept):
    assert _kept_after(610 + measured) == pytest.approx(kept, abs=1e-9)


def test_under_a_bound_a_kept_result_may_measure_below_its_price_down_to_the_densest_ratio():
    # The bound prices results at most at what they cost: 500 tokens for 2,500 characters is 5 chars/token.
    assert _kept_after(610 + 500, calibration=BOUND) == pytest.approx({"u1": 400.0, "u3": 100.0})
    assert _kept_after(610 + 312, calibration=BOUND) == {}  # 8.01 chars/token: no tokenizer's


@pytest.mark.parametrize(
    ("measured", "restored", "kept"),
    [
        (2_600, 1_000, {"u1": 1_280.0, "u3": 320.0}),  # less the restored files, nearer their prices: restored
        (1_800, 1_000, {"u1": 1_440.0, "u3": 360.0}),  # less them, farther: none was restored
        (1_800, 1_800, {"u1": 1_440.0, "u3": 360.0}),  # they would be all of it
    ],
)
def test_restored_files_are_taken_out_of_the_measure_only_where_that_brings_it_nearer_the_prices(
    measured, restored, kept
):
    assert _kept_after(610 + measured, restored) == pytest.approx(kept, abs=1e-9)


def test_a_measure_as_far_below_the_prices_less_the_restored_files_as_above_them_keeps_the_restored_files():
    # 3,000 is twice their prices, 750 half: as far either way, so the files are not taken out, and 3,000 is too much.
    assert _kept_after(610 + 3_000, 2_250, calibration=BOUND) == {}


def _tiny_kept(measured: float, restored: float = 0.0) -> float | None:
    """One kept result of 2 characters priced a token, nothing else in the request: what it measures."""
    boundary_gap = _Gap(
        chars=2,
        tool_chars=2,
        results=[("read", 2, 0)],
        uuids=["u1"],
        clearings=[(1, frozenset({"u1"}))],
        calls=[(0, 0)],
    )
    found = _measure_kept(
        boundary_gap, deque([_Resident("read", 1.0, 2, "u1")]), measured, _Pricing(2.0, MEASURED), restored
    )
    return found[0][1] if found else None


@pytest.mark.parametrize(
    ("measured", "restored", "tokens"),
    [
        (1.2, 0.0, 1.2),  # a result of a token is measured like any
        (1.0, 0.1, 1.0),  # the measure is its price: no restored file is taken out
        (3.0, 2.1, pytest.approx(0.9)),  # less them, less than a token is left, nearer its price
    ],
)
def test_a_kept_result_of_a_token_is_measured_to_the_fraction(measured, restored, tokens):
    assert _tiny_kept(measured, restored) == tokens


# -- a clean gap measuring its own results ----------------------------------------------------------------------------
def _scale(delta: int, result: int = 2_000, thinking_measured: bool = False, **fields_) -> float:
    """The factor a measured gap of one Read (``result`` characters at 2.0, 1,000 tokens) brings its price to."""
    results = [("read", result, 0)] if result else []
    fields_.setdefault("measured", True)
    measured = gap(result + fields_.pop("thinking_chars", 0), delta, results=results, **fields_)
    measured.thinking_chars = measured.chars - result
    return _measured_scale(measured, _Pricing(2.0, MEASURED, framing_calibration=MEASURED), thinking_measured)


@pytest.mark.parametrize(
    ("delta", "fields_", "scale"),
    [
        (1_200, {}, 1.2),  # its growth over its price
        (0, {}, 1.0),  # it did not grow: nothing to measure
        (100, {"result": 0}, 1.0),  # nothing to price
        (1, {"result": 1}, 2.0),  # half a token priced, a token grown
        (1, {"result": 2, "hidden": 0.5}, 0.5),  # half a token grown net of what its thinking hid
        (1_200, {"measured": False}, 1.0),  # a gap the calibration did not keep prices at the run's terms
    ],
)
def test_a_measured_gap_brings_its_results_to_its_growth(delta, fields_, scale):
    assert _scale(delta, **fields_) == scale


@pytest.mark.parametrize("thinking_measured", [True, False])
def test_beside_thinking_of_a_measured_ratio_the_measure_and_the_price_are_weighed_by_the_thinking(thinking_measured):
    # 50 tokens of its own visible thinking and 100 returned: the gap measures its Read at 1,200 tokens, priced 1,000.
    scale = _scale(1_350, thinking_chars=450, thinking_tokens=50.0, returned=100.0, thinking_measured=thinking_measured)
    if thinking_measured:
        assert scale == pytest.approx((1_200 * 1_000**2 + 1_000 * 150**2) / (1_000**2 + 150**2) / 1_000)
    else:
        assert scale == pytest.approx(1.2)


# -- the run's figures ------------------------------------------------------------------------------------------------
def test_the_window_is_the_one_asked_for_and_an_empty_run_has_no_base():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)
    t.say("done", ctx=11_000)
    assert occupancy(t.session(), CODEGRAPH, window=128_000).window == 128_000
    assert occupancy(Transcript().session(), CODEGRAPH).ctx_base == 0


# -- leaving the window, run by run -----------------------------------------------------------------------------------
def test_a_gap_holding_two_boundaries_appends_each_result_once():
    t = Transcript()
    step(t, 10_000, "Read", 994)  # Δ 500 → 2.0
    grep = step(t, 10_500, "Grep", 994)
    t.compact()
    t.reply(grep + "-late", "x" * 994)  # arrives between the two boundaries: the second evicts it
    t.compact()
    t.say("done", ctx=3_000)
    o = occupancy(t.session(), CODEGRAPH)
    assert o.compactions == 2 and o.contributed_results == {"tool": 0, "read": 1, "search": 1, "bash": 0, "other": 1}
    assert o.residual == dict.fromkeys(o.residual, 0) and o.evicted == sum(o.contributed.values())


def test_a_shortfall_of_exactly_200_tokens_is_noise():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # Δ 1,000 → 2.0
    step(t, 11_000, "Bash", 1_994, prose=1_994)  # not calibrated on: priced 997 at the ratio
    t.say("done", ctx=11_000 + 997 - 200)
    o = occupancy(t.session(), CODEGRAPH)
    assert (o.chars_per_token, o.evicted, o.residual["bash"]) == (2.0, 0, 997)


def test_a_gap_short_by_half_a_token_more_than_was_there_before_it_prices_its_result_half_a_token_lower():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # Δ 1,000 → 2.0; its own gap prices it at 936 (less its call and framing)
    step(t, 11_000, "Bash", 1_995, prose=1_995)  # priced 997.5, yet the gap grew 61: 936.5 short
    t.say("done", ctx=11_061)
    o = occupancy(t.session(), CODEGRAPH)
    assert o.contributed["read"] == 936 and o.evicted == 936
    assert o.contributed["bash"] == o.residual["bash"] == 997  # 997.5 less the half token, not round(997.5) = 998


def _resumed(name: str = "Read", chars: int = 294, grown: int = 147 + 60) -> Transcript:
    """As in tests/test_occupancy.py's resumed turn (three Reads at 2.0, then 9,000 characters of thinking, 2,000
    tokens at prose's ratio, that leave on the next turn's first request), but the gap the thinking comes back in holds
    a ``name`` result of ``chars`` characters, grown ``grown`` beside the thinking (by default a 294-character Read: too
    small to calibrate on, it holds what it shows with the thinking at the run's terms)."""
    t = Transcript()
    for ctx in (10_000, 11_000, 12_000):
        step(t, ctx, "Read", 1_994)
    call = tool_use("Read")
    t.message({"type": "thinking", "thinking": "t" * 9_000, "signature": "sig"}, call, ctx=13_000)
    t.reply(call["id"], "x" * 1_994)
    t.say("answer", ctx=16_000)  # Δ 3,000: the thinking's 2,000 and the result's 1,000
    t.user("next question")
    step(t, 14_100, name, chars)  # Δ −1,900: the thinking left
    t.say("done", ctx=14_100 + 2_000 + grown)  # it came back, with the result and the step's framing
    return t


def test_thinking_sent_again_beside_a_result_too_small_to_measure_is_neither_unexplained_nor_its_price():
    t = _resumed()
    o = occupancy(t.session(), CODEGRAPH)
    assert (o.evicted, o.unexplained) == (0, 0)
    # and it leaves again, first of all that is resident, when the CLI resumes once more
    t.user("last question")
    step(t, 14_300, "Read", 294)
    t.say("done", ctx=14_300 + 147 + 60)
    assert occupancy(t.session(), CODEGRAPH).evicted == 0


def test_where_thinking_came_back_a_gap_the_calibration_did_not_keep_still_prices_its_result_at_the_ratio():
    t = _resumed()
    step(t, 16_207, "Bash", 994, prose=2_001)  # priced 497; its prose, call and framing 1,077: and 500 nothing shows
    t.say("end", ctx=16_207 + 497 + 1_077 + 500)
    o = occupancy(t.session(), CODEGRAPH)
    assert (o.chars_per_token, o.residual["bash"], o.unexplained) == (2.0, 497, 500)


def test_a_family_measured_in_the_gap_its_thinking_came_back_in_is_measured_net_of_that_thinking():
    # The resumed turn's thinking (2,000 tokens) comes back beside a Grep listing of 2,994 characters at about 1.8
    # chars/token: the listing's family ratio is what is left once the thinking is taken out, not its double.
    o = occupancy(_resumed("Grep", 2_994, 1_663 + 60).session(), CODEGRAPH)
    assert o.family_chars_per_token["search"] == pytest.approx(1.8, rel=0.01)
    assert o.unexplained == 0


def test_what_thinking_hid_is_told_again_with_the_declared_outputs_framing_at_the_runs_ratio():
    # Reads at 2.5 chars/token, no small gap: a framing character costs 0.4 tokens, not the stand-in's 0.5. The
    # segment declares what its messages show so priced, and 3,000 tokens more: what the empty thinking hid.
    def run(grown: int, output: int | None) -> Transcript:
        t = Transcript()
        for ctx in (10_000, 11_000, 12_000):
            step(t, ctx, "Read", 2_494)
        call = tool_use("Read")
        t.message({"type": "thinking", "thinking": "", "signature": "sig"}, call, ctx=13_000)
        t.reply(call["id"], "x" * 2_494)
        step(t, 13_000 + grown, "Bash", 994, prose=2_000)  # not calibrated on: priced at the ratio
        t.say("done", ctx=14_500 + grown)
        t.result("done")
        t.events[-1]["usage"] = {"output_tokens": output}
        return t

    messages = run(4_000, None).session().messages(MAIN)
    shown = sum(m.output_chars / PROSE_CHARS_PER_TOKEN + _message_frame(m) * 0.4 for m in messages)
    hidden = round(shown) + 3_000 - shown
    o = occupancy(run(1_000 + round(hidden), round(shown) + 3_000).session(), CODEGRAPH)
    assert o.chars_per_token == pytest.approx(2.5, abs=0.005)
    assert o.unexplained_thinking == pytest.approx(hidden, abs=5)  # at 0.5 a framing character, 50 tokens less
    assert o.residual["bash"] == round(994 / 2.5)


def test_a_gap_that_grew_exactly_200_tokens_past_what_it_shows_has_no_unexplained_growth():
    t = Transcript()
    step(t, 10_000, "Read", 1_994)  # Δ 1,000 → 2.0
    step(t, 11_000, "Bash", 1_994, prose=1_995)  # priced 997; its prose, call and framing 1,074 at the ratio
    t.say("done", ctx=11_000 + 997 + 1_074 + 200)
    assert occupancy(t.session(), CODEGRAPH).unexplained == 0


def test_growth_without_thinking_is_unexplained_but_not_thinkings():
    t = Transcript()
    ctx = 10_000
    for delta in (1_000, 1_010, 990, 1_005, 2_500):  # the last: a reminder of 1,500 tokens nothing shows
        step(t, ctx, "Read", 1_994)
        ctx += delta
    t.say("done", ctx=ctx)
    o = occupancy(t.session(), CODEGRAPH)
    assert o.unexplained > 1_000 and o.unexplained_thinking == 0


def test_a_result_of_a_token_in_a_gap_that_shrank_with_nothing_before_it_costs_nothing():
    t = Transcript()
    step(t, 10_000, "Read", 3)  # a token at the default ratio, and the context shrank by 500
    t.say("done", ctx=9_500)
    o = occupancy(t.session(), CODEGRAPH)
    assert (o.residual["read"], o.evicted, o.residual_results["read"]) == (0, 0, 1)


def test_a_familys_residual_characters_are_its_results_summed():
    t = Transcript()
    for ctx in (10_000, 11_000):
        step(t, ctx, "Read", 1_994)
    t.say("done", ctx=12_000)
    assert occupancy(t.session(), CODEGRAPH).residual_chars["read"] == 2 * 1_994


@pytest.mark.parametrize("beyond", [0, 1_000], ids=["holds it", "grew 1,000 more"])
def test_thinking_the_declared_output_told_was_hidden_stays_unexplained_when_it_comes_back(beyond):
    # Three Reads at 2.0; a Read beside empty thinking that counted 3,000 tokens (the segment declares it); the next
    # turn's first request leaves it out, the next sends it again beside a small Read. Back, it is still growth
    # nothing shows; where that gap grew by more than it and what it shows, all of its growth is unexplained.
    t = _three_reads_and_a_hidden_thinking_read(Transcript(), "answer")  # Δ 4,000: the result's 1,000, 3,000 hidden
    t.user("next question")
    step(t, 14_050, "Read", 294)  # Δ −2,950: the hidden thinking left (the shrink takes 2,950 of its 3,000)
    t.say("done", ctx=14_050 + 3_000 + 147 + 60 + beyond)
    t.result("done")
    t.events[-1]["usage"] = {"output_tokens": round(_shown(t.session())) + 3_000}
    o = occupancy(t.session(), CODEGRAPH)
    assert o.evicted == 0
    assert o.unexplained == pytest.approx(50 + 3_000 + beyond, abs=60)


def test_a_gap_whose_thinking_may_hide_and_whose_segment_tells_nothing_is_never_calibrated_on(tmp_path):
    # The first segment's one hiding gap is told what it hid, so the run is calibrated again; the second segment's
    # gap of redacted thinking grew 400 tokens more than its Read, and nothing says what that was.
    first = _three_reads_and_a_hidden_thinking_read(Transcript(), "done")
    first.result("done")
    first.events[-1]["usage"] = {"output_tokens": round(_shown(first.session())) + 3_000}
    second = Transcript()
    call = tool_use("Read")
    second.message({"type": "redacted_thinking", "data": ""}, call, ctx=17_100)
    second.reply(call["id"], "x" * 1_994)
    second.say("done", ctx=17_100 + 1_400)
    second.result("done")
    session = read_segments([first.write(tmp_path / "run.jsonl"), second.write(tmp_path / "run.t2.jsonl")])
    assert occupancy(session, CODEGRAPH).chars_per_token == pytest.approx(2.0, abs=0.01)


# -- what the transcript appended, gap by gap -------------------------------------------------------------------------
def test_each_gap_counts_its_content_framing_thinking_and_results_as_the_transcript_shows_them():
    t = Transcript()
    read = tool_use("Read", "toolu_r1", file_path="a.py")
    # the short one may hide what it counted; 500 characters show it
    t.message(thinking("s" * 10), thinking("t" * 600), thinking("u" * 500), read, ctx=10_000)
    t.reply(read["id"], "x" * 100, is_error=True)
    t.reply("toolu_none", "y" * 50)  # no call: "other", in the same user message
    t.user("question")
    t.message(thinking("s" * 5), {"type": "redacted_thinking", "data": ""}, text("a"))
    for event in t.events[-3:]:
        event["message"]["usage"] = {"input_tokens": 1}  # a measure all the same
    t.user("more")  # a user message of its own
    t.user("again")  # in the same one
    t.compact()
    t.say("done", ctx=2_000)
    t.say("end", ctx=2_500)
    session = t.session()
    first, second, third = session.messages(MAIN)[:3]
    ctxs, gaps, compactions = _gaps(session, CODEGRAPH)
    assert (ctxs, compactions, [g.delta for g in gaps]) == ([10_000, 1, 2_000, 2_500], 1, [-9_999, 1_999, 500])
    a, b, c = gaps
    error_frame = len('{"type":"tool_result","tool_use_id":"","content":"","is_error":true}') + len("toolu_r1")
    orphan_frame = len('{"type":"tool_result","tool_use_id":"","content":""}') + len("toolu_none")
    assert a.results == [("read", 100, error_frame), ("other", 50, orphan_frame)]
    call_frame = len('{"role":"assistant","content":[]}') + len('{"type":"tool_use","id":"","name":"","input":}')
    assert a.calls == [(session.calls[0].input_chars, call_frame + 8), (0, call_frame + 10)]  # no call: nothing
    assert (a.chars, a.tool_chars) == (first.output_chars + 100 + 50 + len("question"), 150)
    user_message, text_block = len('{"role":"assistant","content":[]}'), len('{"type":"text","text":""}')
    assert a.frame == _message_frame(first) + error_frame + orphan_frame + user_message + text_block
    assert (a.thinking_chars, a.thinking_blocks, a.hiding_blocks, a.before) == (1_110, 3, 1, 0)
    assert (b.thinking_chars, b.thinking_blocks, b.hiding_blocks, b.before) == (5, 2, 2, a.chars)
    assert b.frame == _message_frame(second) + 2 * text_block + user_message
    assert b.clearings == [(0, frozenset())] and b.at_last_boundary == (b.chars, b.frame)
    assert (c.chars, c.before, c.hiding_blocks) == (third.output_chars, 0, 0)  # a compaction: nothing before it


def test_a_result_without_its_call_is_never_the_retrieval_tools_whatever_its_name():
    t = Transcript()
    t.message(text("a"), ctx=10_000)
    t.reply("toolu_none", "y" * 50)
    t.say("done", ctx=10_100)
    _, [orphan], _ = _gaps(t.session(), replace(CODEGRAPH, name="xx"))
    assert orphan.results[0][0] == "other"


# -- the cross-check against the simple estimate ----------------------------------------------------------------------
def _checked(refined: int, simple: int, dispersion: float | None, simple_dispersion: float | None) -> str:
    out = Occupancy(dispersion=dispersion)
    out.residual["read"] = refined
    _cross_check(out, SimpleEstimate(2.0, MEASURED, simple_dispersion, {"read": simple}))
    return out.cross_check


@pytest.mark.parametrize(
    ("refined", "simple", "dispersion", "simple_dispersion", "said"),
    [
        (10_000, 8_500, 0.2, None, ""),  # within occupancy's error bar
        (10_000, 8_500, None, 0.1, "+1,500 tok, beyond ±10%"),  # beyond the simple estimate's
        (10_000, 8_500, 0.1, 0.2, ""),  # the larger bar
        (10_000, 9_400, None, None, "+600 tok, beyond ±5%"),  # no bar: 5%
        (1_000, 800, None, None, ""),  # 200 tokens: the eviction floor, inclusive
        (1_000, 799, None, None, "+201 tok, beyond ±5%"),
    ],
)
def test_the_residual_is_held_against_the_simple_estimates_beyond_the_larger_error_bar(
    refined, simple, dispersion, simple_dispersion, said
):
    found = _checked(refined, simple, dispersion, simple_dispersion)
    assert found.endswith(said) if said else found == ""
    if said:
        assert found.startswith(f"residual {refined:,} tok vs the simple estimate's {simple:,} (2.00 chars/tok): ")


def test_the_cross_check_keeps_the_simple_estimates_ratio_to_three_places_and_checks_nothing_unmeasured():
    out = Occupancy()
    out.residual["read"] = 10_000
    _cross_check(out, SimpleEstimate(2_000 / 900, "all gaps", None, {"read": 5_000}))
    assert (out.simple_chars_per_token, out.simple_residual, out.cross_check) == (2.222, 5_000, "")


def test_a_subagents_output_in_a_segments_declared_output_tells_nothing_of_the_main_threads_thinking():
    def run(subagent: bool) -> float:
        t = Transcript()
        task = tool_use("Task")
        t.message(thinking("t" * 900), task, ctx=10_000)
        if subagent:
            t.message(text("looking"), ctx=3_000, thread=task["id"])
        t.reply(task["id"], "x" * 994)
        t.say("done", ctx=10_500)
        t.result("done")
        t.events[-1]["usage"] = {"output_tokens": 300}
        return occupancy(t.session(), CODEGRAPH).thinking_chars_per_token

    assert run(subagent=False) == pytest.approx(4.25, abs=0.01)  # what the main thread's thinking cost
    assert run(subagent=True) == PROSE_CHARS_PER_TOKEN  # the sum may be the subagent's too: prose's ratio


# -- what a segment's declared output tells ---------------------------------------------------------------------------
def _shown(session) -> float:
    """What the main thread's messages show, as the declared output counts them: prose's ratio, half a token a
    framing character."""
    return sum(m.output_chars / PROSE_CHARS_PER_TOKEN + _message_frame(m) * 0.5 for m in session.messages(MAIN))


def _thinking_run(t: Transcript, thinking_chars: int = 900, *, hiding: bool = False) -> Transcript:
    """A Read after ``thinking_chars`` of visible thinking (and a redacted block, with ``hiding``), then the answer;
    the segment declares what its messages show with the thinking at 4.0 chars/token, rounded."""
    read = tool_use("Read")
    blocks = [thinking("t" * thinking_chars), *([{"type": "redacted_thinking", "data": ""}] if hiding else []), read]
    t.message(*blocks, ctx=10_000)
    t.reply(read["id"], "x" * 994)
    t.say("done", ctx=10_500)
    t.result("done")
    shown = _shown(t.session()) - thinking_chars / PROSE_CHARS_PER_TOKEN + thinking_chars / 4.0
    t.events[-1]["usage"] = {"output_tokens": round(shown)}
    return t


def _told(session) -> tuple[float, bool, list[_Gap]]:
    _, gaps, _ = _gaps(session, CODEGRAPH)
    return (*_declared_output(session, gaps), gaps)


@pytest.mark.parametrize("thinking_chars", [900, 500])
def test_visible_thinking_costs_what_the_declared_output_leaves_once_the_rest_is_priced(thinking_chars):
    session = _thinking_run(Transcript(), thinking_chars).session()
    ratio, measured, gaps = _told(session)
    tokens = session.results[0].output_tokens - _shown(session) + thinking_chars / PROSE_CHARS_PER_TOKEN
    assert (ratio, measured) == (pytest.approx(thinking_chars / tokens, abs=1e-9), True)
    assert ratio == pytest.approx(4.0, abs=0.05)
    assert gaps[0].thinking_tokens == pytest.approx(tokens, abs=1e-9) and gaps[0].hidden == 0


@pytest.mark.parametrize(("thinking_chars", "output", "ratio"), [(900, 389, 3.0), (1_350, 289, 6.75)])
def test_visible_thinking_measured_at_shed_factor_of_proses_ratio_either_way_is_taken(thinking_chars, output, ratio):
    # Every figure exact: the messages show 9 + 18 characters besides the thinking (4 + 2 tokens at prose's ratio), and
    # 83 + 83 framing characters (83 tokens).
    t = Transcript()
    t.message(thinking("t" * thinking_chars), text("c" * 9), ctx=10_000)
    t.message(text("d" * 9), text("e" * 9), ctx=10_500)
    t.result("done")
    t.events[-1]["usage"] = {"output_tokens": output}
    assert _told(t.session())[:2] == (ratio, True)


def test_a_segment_with_redacted_thinking_tells_what_its_one_gap_hid_not_what_visible_thinking_costs():
    session = _thinking_run(Transcript(), hiding=True).session()
    ratio, measured, gaps = _told(session)
    assert (ratio, measured) == (PROSE_CHARS_PER_TOKEN, False)
    assert gaps[0].hidden == pytest.approx(session.results[0].output_tokens - _shown(session), abs=1e-9)
    assert gaps[0].hidden == pytest.approx(900 / 4.0 - 900 / PROSE_CHARS_PER_TOKEN, abs=1)
    session.results[0].output_tokens = round(_shown(session)) - 1  # less than the messages show: nothing hid
    assert _told(session)[2][0].hidden == 0.0


def test_a_ratio_of_visible_thinking_beyond_shed_factor_of_prose_is_not_taken():
    session = _thinking_run(Transcript()).session()
    session.results[0].output_tokens -= 120  # 900 characters in about 105 tokens: 8.6 chars/token
    assert _told(session)[:2] == (PROSE_CHARS_PER_TOKEN, False)


def test_a_segment_whose_thinking_may_hide_in_two_gaps_tells_neither_what_it_hid():
    t = Transcript()
    for ctx in (10_000, 11_000):
        read = tool_use("Read")
        t.message({"type": "redacted_thinking", "data": ""}, read, ctx=ctx)
        t.reply(read["id"], "x" * 994)
    t.say("done", ctx=12_000)
    t.result("done")
    t.events[-1]["usage"] = {"output_tokens": 3_000}
    assert [g.hidden for g in _told(t.session())[2]] == [0.0, 0.0]


@pytest.mark.parametrize("where", ["first", "later"])
def test_a_segment_with_a_compaction_tells_nothing_its_summary_may_be_in_the_sum(where):
    t = Transcript()
    if where == "first":
        t.compact()
    _thinking_run(t)
    if where == "later":
        t.events.insert(2, {"type": "system", "subtype": "compact_boundary", "compact_metadata": {"trigger": "auto"}})
    assert _told(t.session())[:2] == (PROSE_CHARS_PER_TOKEN, False)


def test_a_segment_that_declares_nothing_is_passed_over_and_the_next_one_measured(tmp_path):
    first = Transcript()
    step(first, 9_000, "Read", 994)
    first.say("ok", ctx=9_500)
    first.result("ok")  # no output declared
    second = _thinking_run(Transcript())
    session = read_segments([first.write(tmp_path / "run.jsonl"), second.write(tmp_path / "run.t2.jsonl")])
    assert _told(session)[:2] == (pytest.approx(4.0, abs=0.05), True)


def test_where_the_declared_output_is_the_main_threads_alone_a_subagents_messages_are_passed_over():
    t = Transcript()
    task = tool_use("Task")
    t.message(thinking("t" * 900), task, ctx=9_000)
    t.message(text("looking"), ctx=3_000, thread=task["id"])
    t.reply(task["id"], "x" * 994)
    t.say("done", ctx=9_500)
    t.result("done")
    shown = _shown(t.session()) - 900 / PROSE_CHARS_PER_TOKEN + 900 / 4.0
    t.events[-1]["usage"] = {"output_tokens": round(shown)}
    session = t.session()
    session.results[0].main_output_only = True  # as Codex's rollouts declare it
    assert _told(session)[:2] == (pytest.approx(4.0, abs=0.05), True)


# -- thinking that leaves and comes back ------------------------------------------------------------------------------
def _given_back(*deltas: int, results_in: tuple[int, ...] = (), hidden: float = 0.0) -> list[tuple[float, float]]:
    """Gaps of these growths, the first with 2,000 tokens of visible thinking (and ``hidden``); those numbered in
    ``results_in`` with a result: what each was given back, and of it what was hidden."""
    gaps = [_Gap(delta=d, results=[("read", 100, 0)] if i in results_in else []) for i, d in enumerate(deltas)]
    gaps[0].thinking_tokens, gaps[0].hidden = 2_000.0, hidden
    _returning(gaps)
    return [(g.returned, g.returned_hidden) for g in gaps]


@pytest.mark.parametrize(
    ("deltas", "results_in", "given"),
    [
        ((3_000, -1_900, 3_200), (), 2_000.0),  # it left with a shrink of at least 2,000 / 1.5, and came back
        ((3_000, -1_000, 3_200), (), 0.0),  # too small a shrink to have taken it out
        ((3_000, -1_900, 3_200), (1,), 0.0),  # a shrink with a result is not the thinking leaving
        ((3_000, -1_900, 0, 500), (), 2_000.0),  # a flat gap is not given it
        ((3_000, -1_900, 1), (), 2_000.0),  # a gap that grew a token is
    ],
)
def test_visible_thinking_a_shrink_took_out_is_given_back_to_the_next_gap_that_grows(deltas, results_in, given):
    assert _given_back(*deltas, results_in=results_in)[-1] == (given, 0.0)


def test_without_thinking_before_it_a_shrink_takes_nothing_out():
    gaps = [_Gap(delta=-100), _Gap(delta=500)]
    _returning(gaps)
    assert (gaps[1].returned, gaps[1].returned_hidden) == (0.0, 0.0)


def test_thinking_the_declared_output_told_was_hidden_leaves_and_comes_back_with_the_visible():
    assert _given_back(3_000, -2_000, 3_500, hidden=500.0)[-1] == (2_500.0, 500.0)


def test_a_compaction_takes_the_thinking_into_its_summary_for_good():
    gaps = [_Gap(delta=3_000, thinking_tokens=2_000.0), _Gap(delta=-5_000, clearings=[(0, frozenset())])]
    gaps += [_Gap(delta=-1_900), _Gap(delta=3_200)]
    _returning(gaps)
    assert gaps[-1].returned == 0.0


def test_thinking_that_left_on_exactly_its_share_comes_back_and_leaves_again_as_often_as_the_cli_resumes():
    gaps = [_Gap(delta=3_000, thinking_tokens=1_500.0, hidden=300.0), _Gap(delta=-1_200), _Gap(delta=3_000)]
    gaps += [_Gap(delta=-1_800), _Gap(delta=3_000)]  # a shrink of exactly 1,800 / 1.5 takes it all out
    _returning(gaps)
    assert [(g.returned, g.returned_hidden) for g in gaps] == [(0, 0), (0, 0), (1_800, 300), (0, 0), (1_800, 300)]


# -- the calibration's fall-backs and framing -------------------------------------------------------------------------
def test_without_a_clean_gap_every_growing_gap_with_content_is_pooled_and_no_framing_is_priced():
    gaps = [_Gap(chars=1, delta=1), _Gap(chars=0, delta=50), _Gap(chars=300, delta=100), _Gap(chars=300, delta=0)]
    pricing = _calibrate(gaps)
    assert (pricing.chars_per_token, pricing.calibration, pricing.framing) == (301 / 101, "all gaps", 0.0)
    assert _calibrate([_Gap(chars=300, delta=-10)]).framing == 0.0


def test_a_small_gap_of_framing_alone_measures_a_token_a_character_the_densest_structure_believed():
    small = gap(0, 100, results=[("bash", 0, 60)], frame=100)  # an empty result: its growth is all structure
    big = [gap(2_000, 1_000 + 100, frame=100), gap(4_000, 2_000 + 100, frame=100)]
    pricing = _calibrate([*big, small])
    assert (pricing.framing, pricing.framing_calibration, pricing.chars_per_token) == (1.0, MEASURED, 2.0)


def test_the_framing_density_is_the_lower_median_of_the_small_gaps():
    smalls = [gap(0, round(100 * density), results=[("bash", 0, 60)], frame=100) for density in (0.3, 0.5, 0.7)]
    big = [gap(2_000, 1_000 + 50, frame=100), gap(4_000, 2_000 + 50, frame=100)]
    assert _calibrate([*big, *smalls]).framing == 0.5


def test_a_small_gap_of_500_characters_still_measures_the_framing():
    t = Transcript()
    step(t, 10_000, "Read", 3_994)
    step(t, 12_061, "Read", 7_994)
    step(t, 16_122, "Grep", 494)  # 500 characters with its call
    t.say("done", ctx=16_122 + 250 + 61)
    assert occupancy(t.session(), CODEGRAPH).framing == MEASURED


def test_other_measured_on_small_gaps_joins_the_families_big_gaps_measured():
    t = Transcript()
    step(t, 10_000, "Grep", 994)  # a listing at 2.9 chars/token, net of the framing
    ctx = 10_400
    for _ in range(2):
        step(t, ctx, "Read", 1_994)
        ctx += 1_000
    for name in ("Bash", "Bash", "Bash", "spawn_agent", "wait_agent"):
        step(t, ctx, name, 100 if name == "Bash" else 200)
        ctx += round((len(name) + 2) / 2.0 + (50 if name == "Bash" else 200) + 184 * 0.3)
    t.say("done", ctx=ctx)
    o = occupancy(t.session(), CODEGRAPH)
    assert {"search", "other"} <= set(o.family_chars_per_token)


def test_growth_beside_thinking_is_not_reported_as_beside_a_family():
    t = Transcript()
    for ctx in (10_000, 11_000, 12_000):
        step(t, ctx, "Read", 1_994)
    call = tool_use("Read")
    t.message({"type": "thinking", "thinking": "", "signature": "sig"}, call, ctx=13_000)
    t.reply(call["id"], "x" * 1_994)
    t.say("done", ctx=17_000)  # Δ 1,000 for the result, 3,000 the thinking hid
    o = occupancy(t.session(), CODEGRAPH)
    assert o.unexplained > 2_500 and o.unexplained_beside == 0


# -- the simple calibrated estimate -----------------------------------------------------------------------------------
def test_the_simple_estimates_error_bar_is_the_lower_median_over_gaps_that_are_95_percent_one_result():
    gaps = [gap(1_000, delta) for delta in (500, 400, 600, 500)]  # errors 0, 25%, 16.7%, 0
    gaps.append(gap(1_000, 500, results=[("read", 950, 0)]))  # exactly 95% one result, priced 475: 5%
    gaps.append(gap(1_000, 500, results=[("read", 500, 0), ("bash", 500, 0)]))  # no one result: not counted
    simple = _simple(gaps)
    assert (simple.chars_per_token, simple.calibration) == (2.0, MEASURED)
    assert simple.dispersion == pytest.approx(0.05)


def test_without_a_clean_gap_the_simple_estimate_pools_every_growing_gap_with_content_and_no_thinking():
    gaps = [
        _Gap(chars=2_000, delta=100, thinking_blocks=1),  # may hide growth
        _Gap(chars=2_000, delta=100, clearings=[(0, frozenset())]),  # holds a compaction
        _Gap(chars=0, delta=50),  # nothing to price
        _Gap(chars=5, delta=1),
        _Gap(chars=300, delta=99),
    ]
    simple = _simple(gaps)
    assert (simple.chars_per_token, simple.calibration) == (305 / 100, "all gaps")
    assert _simple([_Gap(chars=5, delta=1)]).chars_per_token == 5.0  # a token of growth measures


def test_without_a_growing_gap_the_simple_estimate_takes_the_default():
    simple = _simple([_Gap(chars=300, delta=-5)])
    assert (simple.chars_per_token, simple.calibration, simple.dispersion) == (3.0, "default", None)


def test_the_simple_estimate_keeps_what_a_compaction_names_and_sheds_the_oldest_after():
    gaps = [
        gap(2_000, 1_000, results=[("tool", 2_000, 0)], uuids=["u1"]),  # the only clean gap: 2.0
        gap(1_000, -500, results=[("read", 600, 0), ("bash", 400, 0)], uuids=["u2", "u3"]),
    ]
    gaps[1].clearings = [(1, frozenset({"u1", "u2"}))]  # kept: the earlier gap's result, and its own first
    assert _simple(gaps).residual == {"tool": 1_000, "read": 300, "bash": 200, "search": 0, "other": 0}
    # A shrink of 1,100 beyond its own result: all of the oldest, then part of the next.
    gaps.append(gap(2_200, -1_000, results=[("read", 200, 0)], uuids=["u4"]))
    gaps[-1].chars += 2_000  # mostly prose: not clean
    assert _simple(gaps).residual == {"tool": 0, "read": 300, "bash": 200, "search": 0, "other": 0}


def test_a_gap_holding_two_boundaries_leaves_the_simple_estimate_nothing_of_them():
    gaps = [gap(2_000, 1_000, uuids=["u1"])]
    gaps.append(gap(2_000, 100, results=[("read", 1_000, 0), ("bash", 1_000, 0)], uuids=["u2", "u3"]))
    gaps[1].clearings = [(1, frozenset()), (2, frozenset())]
    assert sum(_simple(gaps).residual.values()) == 0


def test_the_simple_estimate_sheds_past_the_larger_of_200_tokens_and_5_percent_of_what_was_appended():
    gaps = [gap(2_000, 1_000, results=[("tool", 2_000, 0)], uuids=["u1"])]  # 2.0
    gaps.append(gap(2_400, 0, results=[("read", 400, 0)], uuids=["u2"]))  # 200 short: the floor, inclusive
    gaps.append(gap(40_000, 9_600, results=[("read", 20_000, 0)], uuids=["u3"]))  # 400 short of 10,000: within 5%
    assert _simple(gaps).residual == {"tool": 1_000, "read": 10_200, "bash": 0, "search": 0, "other": 0}


@pytest.mark.parametrize(("ratio", "plausible_"), [(1.0, True), (8.0, True), (0.99, False), (8.01, False)])
def test_a_plausible_ratio_is_one_from_1_to_8_chars_a_token_inclusive(ratio, plausible_):
    assert plausible(ratio) is plausible_
