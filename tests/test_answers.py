"""Answer keys and the grades read against them (docs/metrics/answers.md): the shipped keys hold against their
sources, a bad key is an error naming it, each grade tells answers built to hit, half-hit and miss the key, the
stand-in's answer policies are told apart, and a judge is asked once and replayed from the record."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO
from support.synth import Transcript, explore_response
from support.upstream import fake_api

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.rescore import rescore
from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.corpus.keys import AnswerKey, answer_sheet, check_key, defines
from pytest_agent_eval.corpus.load import CorpusEntry, CorpusError, load_corpus
from pytest_agent_eval.corpus.repos import fetch_repo
from pytest_agent_eval.metrics.answers import grade, names_symbol
from pytest_agent_eval.metrics.figures import figures_of
from pytest_agent_eval.metrics.gates import evaluate, load_thresholds
from pytest_agent_eval.metrics.judge import Judgement, ModelJudge, NoJudge, judge_run, load_judge, parse_reply
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.model.scripted import NO_ANSWER, ScriptedBackend, Step, Turn
from pytest_agent_eval.report.aggregate import aggregate
from pytest_agent_eval.report.blocks.answers import render_answers
from pytest_agent_eval.report.grades import NOT_GRADED, judge_text
from pytest_agent_eval.report.html import render_html
from pytest_agent_eval.report.terminal import arm_comparison
from pytest_agent_eval.report.verdict import verdicts
from pytest_agent_eval.settings.config import AgentEvalConfig
from pytest_agent_eval.settings.parsers import parse_rules
from pytest_agent_eval.tool import CODEGRAPH

EXPLORE = "mcp__codegraph__codegraph_explore"
SHIPPED = load_corpus(REPO / "corpus.json")
KEYED = [entry for entry in SHIPPED if entry.key is not None]
EXPRESS = next(entry for entry in SHIPPED if entry.name == "express")
# Express's first turn alone: lib/response.js and lib/utils.js, res.send and setCharset, two facts.
TURN_1 = AnswerKey("4.21.2", EXPRESS.key.turns[:1]) if EXPRESS.key else None
QUESTION = EXPRESS.questions[0]


# -- the keys --------------------------------------------------------------------------------------------------
def test_every_entry_with_an_offline_source_ships_a_key_in_both_copies_of_the_corpus() -> None:
    assert {e.name for e in SHIPPED if e.source} == {e.name for e in KEYED}
    assert len(KEYED) == 11
    packaged = load_corpus(REPO / "pytest_agent_eval" / "data" / "corpus.json")
    assert {e.name: e.key for e in packaged} == {e.name: e.key for e in SHIPPED}
    for entry in KEYED:  # one key per question turn, each for the version its source pins
        assert len(entry.key.turns) == len(entry.questions)
        assert entry.source.endswith(entry.key.version)


@pytest.mark.slow  # downloads each registry tarball once into the plugin's cache (corpus/repos.py)
@pytest.mark.parametrize("entry", KEYED, ids=lambda e: e.name)
def test_each_key_holds_against_its_source_at_its_pinned_version(entry: CorpusEntry) -> None:
    root = fetch_repo(entry, AgentEvalConfig().corpus_dir, offline=True)
    assert check_key(entry.key, root) == []


def test_check_key_names_a_missing_file_and_a_symbol_its_file_does_not_define(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.js").write_text("var send = require('./b')\nsend(body)\n")
    key = AnswerKey.from_dict(
        {"version": "1", "turns": [{"files": ["lib/a.js", "lib/gone.js"], "symbols": {"lib/a.js": ["send"]}}]}
    )
    assert check_key(key, tmp_path) == [
        f"turn 1: lib/gone.js does not exist in {tmp_path}",
        "turn 1: lib/a.js does not define send",
    ]


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("res.send = function send(body) {", "res.send"),
        ("exports.compileETag = function(val) {", "compileETag"),
        ("  async _request(configOrUrl, config) {", "Axios._request"),
        ("    def send(self, request, **kwargs):", "Session.send"),
        ("void TurboModuleBinding::install(\n    jsi::Runtime &runtime,", "TurboModuleBinding::install"),
        ("RCT_EXPORT_METHOD(multiSet:(NSArray *)kvPairs", "multiSet"),
        ("    function swap(uint amount0Out, uint amount1Out) external lock {", "UniswapV2Pair.swap"),
        ("  public void multiSet(final ReadableArray keyValueArray, final Callback callback) {", "multiSet"),
    ],
)
def test_a_definition_is_found_in_each_language_the_keys_name(source: str, name: str) -> None:
    assert defines(source, name)


@pytest.mark.parametrize(
    "source", ["var send = require('./send')", "this.send(body);", "  return dispatchRequest.call(this, config);"]
)
def test_an_import_or_a_call_defines_nothing(source: str) -> None:
    assert not defines(source, "send") and not defines(source, "dispatchRequest")


def _corpus(tmp_path: Path, key: Any, source: str = "npm:express@4.21.2", question: str = "How?||Where?") -> Path:
    entry = {"name": "express", "repo": "https://github.com/expressjs/express", "size": "Small", "files": 140}
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps({"JavaScript": [{**entry, "question": question, "source": source, "key": key}]}))
    return path


TURN = {"files": ["lib/response.js"], "symbols": {"lib/response.js": ["res.send"]}}


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ({"version": "4.21.3", "turns": [TURN, TURN]}, "holds for 4.21.3 but the source pins 4.21.2: recheck the key"),
        ({"version": "4.21.2", "turns": [TURN]}, "has 1 turn(s) but the question has 2"),
        ({"version": "4.21.2", "turns": [TURN, {**TURN, "files": ["/abs/x.js"]}]}, '"key turn 2" needs files'),
        ({"version": "4.21.2", "turns": [TURN, {**TURN, "symbols": {"lib/x.js": ["x"]}}]}, "'lib/x.js', which is not"),
        (
            {"version": "4.21.2", "turns": [TURN, {**TURN, "facts": [{"pattern": "etag", "says": "no such word"}]}]},
            "does not match what it says",
        ),
        ({"version": "4.21.2", "turns": [TURN, TURN], "answer": 1}, "unknown field 'answer'"),
    ],
)
def test_a_bad_key_is_an_error_naming_the_file_the_entry_and_the_problem(
    tmp_path: Path, key: dict, problem: str
) -> None:
    path = _corpus(tmp_path, key)
    with pytest.raises(CorpusError) as info:
        load_corpus(path)
    assert str(info.value).startswith(f'{path}: entry "express" (JavaScript #1): ')
    assert problem in str(info.value)


# -- the grades ------------------------------------------------------------------------------------------------
def _session(answer: str, explored: list[str] = (), reads: list[str] = (), question: str = QUESTION) -> Transcript:
    """One turn: an explore returning ``explored`` (in that order), a Read of each of ``reads``, then ``answer``."""
    t = Transcript()
    t.init(tools=["Read", EXPLORE])
    t.user(question)
    if explored:
        call = t.call(EXPLORE, query="res.send")
        t.reply(call, explore_response({path: "function x() {}\n" * 5 for path in explored}))
    for path in reads:
        call = t.call("Read", file_path=f"/repo/{path}")
        t.reply(call, "     1→function x() {}\n")
    t.say(answer)
    t.result(answer)
    return t


HIT = (
    "`res.send` in /repo/lib/response.js:111 sets the Content-Type when there is none, then calls the app's "
    "'etag fn'; ./lib/utils.js holds set_charset."
)
HALF = "`res.send` in lib/response.js sets the Content-Type."
MISS = "It is handled by the framework."


@pytest.mark.parametrize(("answer", "recall"), [(HIT, 1.0), (HALF, 0.5), (MISS, 0.0)], ids=["hit", "half", "miss"])
def test_key_recall_of_answers_built_to_hit_half_hit_and_miss_the_key(answer: str, recall: float) -> None:
    graded = grade(_session(answer).session(), TURN_1, questions=[QUESTION], tool=CODEGRAPH)
    assert graded.recall == recall
    card = score(_session(answer).session(), key=TURN_1, tool=CODEGRAPH)
    assert figures_of(card.to_dict(), has_tool=True)["key_recall"] == recall


def test_an_answer_that_repeats_its_question_names_nothing_by_it() -> None:
    echoed = f"Answer to: {QUESTION}"  # the question names res.send and the Content-Type
    assert grade(_session(echoed).session(), TURN_1, questions=[QUESTION], tool=CODEGRAPH).recall == 0.0
    echoed_grade = grade(_session(echoed).session(), TURN_1, tool=CODEGRAPH)
    assert echoed_grade.recall > 0  # the same text, the question not taken out


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ("`res.send`", True),
        ("res.send() picks it", True),
        ("Response#send", False),  # another qualifier: not this one
        ("the `send` method", True),
        ("we send the body", False),  # a prose word, not a name
        ("`setCharset`", True),
        ("set_charset adds it", True),
    ],
)
def test_a_symbol_is_named_however_the_answer_writes_it(answer: str, named: bool) -> None:
    name = "setCharset" if "harset" in answer.lower() else "res.send"
    assert names_symbol(answer, name) is named


@pytest.mark.parametrize(
    ("explored", "reads", "figures"),
    [
        # hit: both key files returned (response.js first) and read, nothing else read
        (["lib/response.js", "lib/utils.js"], ["lib/response.js", "lib/utils.js"], (1.0, 1.0, 1.0, 1)),
        # half: one key file returned second, it and another file read
        (["lib/router/index.js", "lib/response.js"], ["lib/response.js", "lib/view.js"], (0.5, 0.5, 0.5, 2)),
        # miss: no key file returned or read
        (["lib/router/index.js"], ["lib/view.js"], (0.0, 0.0, 0.0, None)),
    ],
    ids=["hit", "half", "miss"],
)
def test_retrieval_against_the_key_of_runs_built_to_hit_half_hit_and_miss_it(
    explored: list[str], reads: list[str], figures: tuple
) -> None:
    card = score(_session(MISS, explored, reads).session(), key=TURN_1, tool=CODEGRAPH)
    found = figures_of(card.to_dict(), has_tool=True)
    assert (found["key_seen"], found["read_recall"], found["read_precision"], found["key_rank"]) == figures


def test_a_key_file_a_search_listed_was_seen_and_not_read() -> None:
    t = Transcript()
    t.init(tools=["Grep", "Read"])
    call = t.call("Grep", pattern="etag")
    t.reply(call, "lib/utils.js\nlib/response.js\n")
    t.say(MISS)
    t.result(MISS)
    graded = grade(t.session(), TURN_1, tool=CODEGRAPH)
    assert graded.turns[0].seen == {"lib/response.js": "searched", "lib/utils.js": "searched"}
    assert (graded.read_recall, graded.read_precision, graded.rank) == (0.0, None, None)


def test_each_turn_is_graded_against_its_own_key(tmp_path: Path) -> None:
    first = _session("`res.send` in lib/response.js", ["lib/response.js"], question=EXPRESS.questions[0])
    second = _session("`app.set` in lib/application.js", ["lib/application.js"], question=EXPRESS.questions[1])
    third = _session(MISS, question=EXPRESS.questions[2])
    files = [first.write(tmp_path / "run.jsonl"), second.write(tmp_path / "run.t2.jsonl")]
    files.append(third.write(tmp_path / "run.t3.jsonl"))
    graded = grade(read_segments(files), EXPRESS.key, questions=EXPRESS.questions, tool=CODEGRAPH)
    assert [t.hits for t in graded.turns] == [2, 2, 0]
    # turn 2's key files: application.js returned in turn 2, response.js already in turn 1, utils.js never
    assert graded.turns[1].seen == {
        "lib/application.js": "returned",
        "lib/utils.js": None,
        "lib/response.js": "returned",
    }
    assert [t.rank for t in graded.turns] == [1, 1, None] and graded.rank == 1.0


def test_an_entry_without_a_key_reads_not_graded_never_zero() -> None:
    card = score(_session(MISS).session(), keyed=True, tool=CODEGRAPH)
    found = figures_of(card.to_dict(), has_tool=True)
    assert card.to_dict()["answers"] == {"graded": False}
    assert {found[n] for n in ("key_recall", "key_seen", "read_recall", "read_precision", "key_rank")} == {None}
    assert render_answers(card.answers) == "Answers: not graded (the corpus entry has no answer key)"
    records = [_record(MISS, "with", 1, key=None), _record(MISS, "without", 1, key=None)]
    found = aggregate(records)
    table = arm_comparison(found.rows[0], records, found)
    assert re.search(rf"answer key recall +{NOT_GRADED} +{NOT_GRADED}\n", table)
    assert "answer key recall not graded" in verdicts(found)[0].line(CODEGRAPH.name)


def _record(answer: str, arm: str, run: int, key: AnswerKey | None = TURN_1, stand_in: bool = True) -> ItemRecord:
    t = _session(answer, ["lib/response.js"] if arm == "with" else [], ["lib/response.js"])
    scores = score(t.session(), key=key, keyed=True, questions=[QUESTION], tool=CODEGRAPH).to_dict()
    scores["stand_in"] = "stand-in-scripted" if stand_in else None
    figures = figures_of(scores, has_tool=arm == "with")
    data = {"id": f"express-{arm}-{run}", "entry": "express", "arm": arm, "run": run, "outcome": "passed"}
    return ItemRecord.from_dict({**data, "scores": scores, "figures": figures})


def test_the_verdict_line_carries_each_arms_key_recall_and_says_it_grades_the_stand_in() -> None:
    records = [
        _record(HIT, "with", 1),
        _record(HIT, "with", 2),
        _record(HALF, "without", 1),
        _record(HALF, "without", 2),
    ]
    verdict = verdicts(aggregate(records))[0]  # the entry's (the overall one repeats it)
    assert (
        "answer key recall with 100.0% [100.0%–100.0%] · without 50.0% [50.0%–50.0%] "
        "(grades the stand-in's answers, not a model's) — with better on: "
    ) in verdict.line(CODEGRAPH.name)
    assert verdict.to_dict()["key_recall"] == {"with": 1.0, "without": 0.5}


# -- the stand-in answers well or badly on purpose ------------------------------------------------------------
def _stand_in_answer(policy: str) -> str:
    backend = ScriptedBackend(answers=policy, keys=answer_sheet([EXPRESS]))
    # the path as the CLI gave it, outside the folder the system prompt names: still a key file
    read = Step("Read", {"file_path": "/elsewhere/repo/lib/response.js"}, "res.send = function send(body) {\n")
    turn = Turn(QUESTION, [read], "/repo", {"Read": {}})
    return backend.decide(turn).blocks[-1]["text"]


def test_the_stand_ins_answer_policies_are_told_apart_by_the_grade() -> None:
    recall = {}
    for policy in ("key", "cite", "wrong", "none"):
        answer = _stand_in_answer(policy)
        recall[policy] = grade(
            _session(answer, reads=["lib/response.js"]).session(), TURN_1, questions=[QUESTION], tool=CODEGRAPH
        ).recall
    assert recall == {"key": 1.0, "cite": pytest.approx(2 / 6), "wrong": 0.0, "none": 0.0}
    assert _stand_in_answer("none") == NO_ANSWER and "`README.md`" in _stand_in_answer("wrong")
    assert "answers=key" in ScriptedBackend(answers="key").describe()


def test_an_unknown_answer_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="answers must be one of"):
        ScriptedBackend(answers="perfect")


# -- a judge ---------------------------------------------------------------------------------------------------
class CountingJudge:
    """A judge plug-in that counts how often it is asked: it grades 1 when the answer names res.send."""

    name = "counting"
    asked = 0

    def judge(self, question: str, answer: str, key: dict | None) -> Judgement:
        CountingJudge.asked += 1
        return Judgement(1.0 if "res.send" in answer else 0.0, "names res.send", prompt=question, reply="ok")


COUNTING = CountingJudge()


def test_a_judge_plug_in_is_loaded_by_module_and_attr() -> None:
    assert load_judge("test_answers:COUNTING") is COUNTING
    assert isinstance(load_judge("model"), ModelJudge)
    with pytest.raises(ValueError, match="--agent-eval-judge nowhere:JUDGE: cannot load it"):
        load_judge("nowhere:JUDGE")


def test_the_model_judge_records_its_prompt_reply_and_grade() -> None:
    sent = []
    judge = ModelJudge(send=lambda request: sent.append(request) or "Names the file and the setting.\nGRADE: 0.8")
    judged = judge_run(judge, [QUESTION], [HALF], TURN_1)
    assert judged["grade"] == 0.8 and judged["judge"] == "model"
    (turn,) = judged["turns"]
    assert turn["reply"].endswith("GRADE: 0.8") and turn["reason"] == "Names the file and the setting."
    assert QUESTION in turn["prompt"] and "lib/response.js" in turn["prompt"] and HALF in turn["prompt"]
    assert sent[0]["messages"][0]["content"] == turn["prompt"]
    assert parse_reply("no grade here").grade == 0.0


def test_a_judgement_is_recorded_once_and_replayed_by_a_rescore(tmp_path: Path) -> None:
    campaign = Campaign.create(tmp_path / "out", {"backend": "scripted"})
    t = _session(HALF, ["lib/response.js"])
    segment = t.write(campaign.item_dir("express-with-1") / "run-with-1.jsonl")
    CountingJudge.asked = 0
    scores = score(t.session(), key=TURN_1, keyed=True, questions=[QUESTION], tool=CODEGRAPH).to_dict()
    scores["judge"] = judge_run(COUNTING, [QUESTION], [HALF], TURN_1)
    data = {"id": "express-with-1", "entry": "express", "arm": "with", "run": 1, "outcome": "passed"}
    campaign.record({**data, "scores": scores, "segments": [str(segment.relative_to(campaign.path))]})
    assert CountingJudge.asked == 1
    (rescored,) = rescore(campaign.path)
    assert CountingJudge.asked == 1  # replayed from the record: never asked again
    assert rescored.scores["judge"] == scores["judge"] and rescored.figures["judge_grade"] == 1.0
    assert rescored.figures["key_recall"] == 0.5  # the key travelled in the record too
    assert judge_text([rescored]) == "judge counting: 1 run(s) graded, mean grade 1.00"
    assert judge_text([_record(HALF, "with", 1)]) == "no judge ran"
    skipped = _record(HALF, "with", 1)
    skipped.scores["judge"] = {"judge": "model", "grade": None, "skipped": "no real ANTHROPIC_API_KEY"}
    assert judge_text([skipped]) == "no judge ran (no real ANTHROPIC_API_KEY)"


# -- the docs' worked examples, replayed ------------------------------------------------------------------------
DOCS = REPO / "docs" / "metrics"


def test_the_key_recall_worked_example_is_what_the_grade_says() -> None:
    page = (DOCS / "answers.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `{1,2} ?(.+?) ?`{1,2} \| .+? \| (\d) of 6 → (\d+)% \|$", page, re.M)
    assert [answer for answer, _, _ in rows] == [HIT, HALF, MISS]
    for answer, hits, percent in rows:
        graded = grade(_session(answer).session(), TURN_1, questions=[QUESTION], tool=CODEGRAPH)
        assert (graded.turns[0].hits, round(graded.recall * 100)) == (int(hits), int(percent))


def test_the_retrieval_worked_example_is_what_the_figures_say() -> None:
    page = (DOCS / "key-retrieval.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (`lib/.+?) \| (`lib/.+?) \| (\d+)% \| (\d+)% \| (\d+)% \| (\d|None) \|$", page, re.M)
    assert len(rows) == 3
    for explored, reads, seen, read, precision, rank in rows:
        paths = [re.findall(r"`([^`]+)`", cell) for cell in (explored, reads)]
        found = figures_of(score(_session(MISS, *paths).session(), key=TURN_1, tool=CODEGRAPH).to_dict(), has_tool=True)
        shares = [round(found[n] * 100) for n in ("key_seen", "read_recall", "read_precision")]
        assert shares == [int(seen), int(read), int(precision)]
        assert found["key_rank"] == (None if rank == "None" else int(rank))


def test_report_html_shows_the_answers_the_paired_grade_and_whether_a_judge_ran(tmp_path: Path) -> None:
    records = [_record(HIT, "with", run) for run in (1, 2)] + [_record(HALF, "without", run) for run in (1, 2)]
    page = render_html(records, base_dir=tmp_path)
    section = page[
        page.index('<section id="answers">') : page.index("</section>", page.index('<section id="answers">'))
    ]
    assert '<td data-figure="key_recall">100.0% [100.0%–100.0%]</td>' in section
    assert "express: with − without +50.0% (every run gave the same value, 2 pairs)" in section
    assert '<p class="judge" id="judge">no judge ran</p>' in section
    assert '<span class="grade">answer key recall with 100.0% [100.0%–100.0%] · without 50.0%' in page
    keyless = render_html([_record(MISS, "with", 1, key=None)], base_dir=tmp_path)
    assert f'<td data-figure="key_recall">{NOT_GRADED}</td>' in keyless


def test_a_key_recall_threshold_gates_a_run_and_a_compare_rule_names_it(tmp_path: Path) -> None:
    (tmp_path / "agent-eval.yaml").write_text("arms:\n  with:\n    key_recall: {min: 0.75}\n")
    thresholds = load_thresholds(tmp_path / "agent-eval.yaml")
    for answer, passed in ((HIT, True), (HALF, False)):
        record = _record(answer, "with", 1)
        found = evaluate(
            record.scores, record.figures, entry="express", arm_name="with", arm_label="with",
            thresholds=thresholds, tool=CODEGRAPH
        )
        assert [v.passed for v in found if v.gate == "key_recall"] == [passed]
    keyless = _record(MISS, "with", 1, key=None)  # not graded: nothing to gate, never a 0 that fails
    found = evaluate(
        keyless.scores, keyless.figures, entry="express", arm_name="with", arm_label="with",
        thresholds=thresholds, tool=CODEGRAPH
    )
    assert [v.gate for v in found] == ["contamination"]
    (rule,) = parse_rules("key_recall:-10pt")
    assert (rule.metric, rule.threshold, rule.unit, rule.direction) == ("key_recall", 10, "pt", -1)


def test_a_subagents_reads_count_in_the_turn_that_spawned_it(tmp_path: Path) -> None:
    first = _session("`res.send` in lib/response.js", question=EXPRESS.questions[0])
    second = _session("`app.set` in lib/application.js", question=EXPRESS.questions[1])
    agent = second.call("Agent", prompt="find the etag function")
    read = second.call("Read", thread=agent, file_path="/repo/lib/utils.js")
    second.reply(read, "     1→exports.compileETag = function(val) {\n", thread=agent)
    second.reply(agent, "It is in lib/utils.js")
    files = [first.write(tmp_path / "run.jsonl"), second.write(tmp_path / "run.t2.jsonl")]
    session = read_segments(files)
    for message in session.messages(agent):  # as an interactive session's subagent file says: segment 0
        message.segment = 0
    graded = grade(session, EXPRESS.key.first(2), questions=EXPRESS.questions[:2], tool=CODEGRAPH)
    # read in turn 2, after turn 1's answer: not seen for turn 1, read for turn 2
    assert graded.turns[0].seen["lib/utils.js"] is None and graded.turns[0].read == []
    assert graded.turns[1].seen["lib/utils.js"] == "read" and graded.turns[1].read == ["lib/utils.js"]


def test_the_model_judge_asks_through_the_forwarder_with_the_harness_key(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-ant-api03-" + "k" * 40
    reply = {"content": [{"type": "text", "text": "Names the file.\nGRADE: 0.5"}]}
    with fake_api(lambda path, body: (json.dumps(reply).encode(), "application/json")) as upstream:
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", upstream.url)
        judged = ModelJudge().judge(QUESTION, HALF, TURN_1.turns[0].to_dict())
    ((path, headers, body),) = upstream.seen
    assert (path, headers["x-api-key"], body["messages"][0]["content"]) == ("/v1/messages", key, judged.prompt)
    assert (judged.grade, judged.reason) == (0.5, "Names the file.")


def test_the_model_judge_without_a_real_key_does_not_run_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(NoJudge, match="needs a real ANTHROPIC_API_KEY"):
        ModelJudge().judge(QUESTION, HALF, None)
