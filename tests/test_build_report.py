"""The report serves a build decision: two builds paired, the gate's verdicts, the backend by name, simulated
costs said to be simulated, and what a replay's figures mean."""

from __future__ import annotations

import re

from support.records import with_run, without_run

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.metrics.figures import FIGURES
from pytest_agent_eval.report import replay
from pytest_agent_eval.report.compare import gate
from pytest_agent_eval.report.html import render_html
from pytest_agent_eval.report.terminal import header, model_fields, terminal_report
from pytest_agent_eval.settings.parsers import parse_rules

SCRIPTED = {"name": "scripted", "description": "scripted policy agent", "url": "http://127.0.0.1:1"}


def labelled(run: dict, label: str, backend=SCRIPTED) -> dict:
    return {**run, "id": f"{run['id']}-{label}", "arm_label": label, "backend": backend}


def two_builds() -> list[dict]:
    runs = []
    for run in (1, 2):
        runs.append(labelled(with_run(run), "with@1.6.1"))
        runs.append(labelled(with_run(run, scale=3), "with@local:cg"))
    return runs


def paired_tables(page: str) -> list[str]:
    return re.findall(r'<table class="figures paired" data-arms="([^"]+)"', page)


def test_html_pairs_two_builds_of_the_tool():
    page = render_html(two_builds(), "two builds")
    assert paired_tables(page) == ["with@1.6.1 − with@local:cg"]
    # with a without-arm as well: each build against it, and the two builds against each other
    three = [*two_builds(), labelled(without_run(1), "without"), labelled(without_run(2), "without")]
    tables = paired_tables(render_html(three, "three arms"))
    assert tables == ["with@1.6.1 − without", "with@local:cg − without", "with@1.6.1 − with@local:cg"]


def test_html_shows_the_comparison_and_its_verdicts():
    before = [with_run(1), with_run(2), without_run(1), without_run(2)]
    after = [with_run(1, cite=False), with_run(2, cite=False), without_run(1), without_run(2)]
    result = gate(before, after, parse_rules("allocation:-5pt"))
    page = render_html(after, "t", comparison=result, compared_with="baselines/main")
    section = re.search(r'<section id="comparison" data-gate="failed">(.*?)</section>', page, re.S).group(1)
    assert "<h2>Compared with baselines/main</h2>" in section
    assert "gate: FAILED — 2 of 2 baseline (entry, arm) pair(s) compared; 1 regression(s)" in section
    failed_rows = re.findall(r'<tr class="failed">(.*?)</tr>', section)
    assert len(failed_rows) == 1 and "FAILED allocation:-5pt" in failed_rows[0]
    assert "<td>express</td><td>with</td><td>allocation</td>" in failed_rows[0]
    assert 'id="comparison"' not in render_html(after, "no baseline")


def test_backend_by_name_and_no_stray_question_mark_for_an_item_that_errored_early():
    errored = {"id": "express-with-3", "entry": "express", "arm": "with", "run": 3, "outcome": "error",
               "error": "provisioning codegraph 9.9.9: no such version", "backend": None}  # fmt: skip
    records = [labelled(with_run(1), "with"), labelled(with_run(2), "with"), errored]
    text = header([ItemRecord.from_dict(r) for r in records])
    assert "?" not in text and text.startswith("model backend: scripted policy agent")
    page = render_html(records, "t")
    assert "model backend: ?" not in page and "{&#x27;name&#x27;" not in page
    assert "backend scripted</li>" in page  # each run's line names it
    # and what answered: the stand-in, not the model the CLI was told (the records say "sonnet")
    told = [{**r, "model": "sonnet"} for r in records[:2]]
    assert (
        "<li>model: stand-in-scripted (a stand-in model) answered every request; sonnet is only what the CLI "
        "was told</li>" in render_html(told, "t")
    )


def test_costs_under_a_stand_in_model_are_marked_simulated():
    records = [labelled(with_run(1), "with"), labelled(without_run(1), "without")]
    page = render_html(records, "t")
    assert "<th>cost (simulated)</th>" in page
    text = terminal_report(records)
    assert "costs are SIMULATED" in text and "cost (simulated)" in text
    real = {"name": "anthropic", "description": "Anthropic Messages API"}
    billed = [labelled(with_run(1), "with", real), labelled(without_run(1), "without", real)]
    assert "simulated" not in render_html(billed, "t") and "SIMULATED" not in terminal_report(billed)


def test_every_figure_says_what_it_means_under_replay():
    grouped = replay.figures_by_meaning()
    assert sorted(name for names in grouped.values() for name in names) == sorted(FIGURES)
    assert {"allocation", "tool_residual", "read_returned_share"} <= set(grouped[replay.MEASURED])
    assert {"explore_again_share", "sufficient_share", "turns"} <= set(grouped[replay.FIXED])
    assert set(grouped[replay.NOT_MEASURED]) == {"cost_usd", "duration_s"}
    note = replay.replay_note("agent-eval-out/baselines/recorded")
    assert note.startswith("REPLAY of agent-eval-out/baselines/recorded: every model turn is the recorded one")
    replayed = {**SCRIPTED, "name": "cassette", "replay": "agent-eval-out/baselines/recorded"}
    runs = [labelled(with_run(1), "with", replayed), labelled(with_run(2), "with", replayed)]
    result = gate([with_run(1), with_run(2)], runs, parse_rules("allocation:-5pt"))
    page = render_html(runs, "t", comparison=result, compared_with="recorded")
    assert 'id="replay-note"' in page and "measures this build: " in page
    rows = dict(re.findall(r"<td>express</td><td>with</td><td>(\w+)</td>.*?<td>([^<]*)</td></tr>", page))
    assert rows["allocation"] == "ok allocation:-5pt"  # the build's own figure: no caveat
    assert rows["cost_usd"] == "(not measured under replay)"
    assert rows["sufficient_share"] == "(fixed by the recording under replay)"
    assert replay.caveat("allocation") is None


def test_the_model_named_is_what_answered_and_the_one_requested_is_kept_apart():
    def answered_by(backend, models: list[str]) -> ItemRecord:
        run = labelled(with_run(1), "with", backend)
        return ItemRecord.from_dict({**run, "model": "sonnet", "scores": {**run["scores"], "models": models}})

    replayed = {**SCRIPTED, "name": "cassette"}  # a cassette replays a real model's messages: still a stand-in
    assert model_fields([answered_by(replayed, ["claude-sonnet-4-5"])], "sonnet") == {
        "model": "stand-in-cassette",
        "model_requested": "sonnet",
        "model_note": "stand-in-cassette (a stand-in model) answered every request; sonnet is only what the CLI "
        "was told",
    }
    assert model_fields([answered_by(SCRIPTED, ["stand-in-scripted"])], "opus")["model"] == "stand-in-scripted"
    real = {"name": "anthropic", "description": "Anthropic Messages API"}
    assert model_fields([answered_by(real, ["claude-sonnet-4-5"])], "claude-sonnet-4-5") == {
        "model": "claude-sonnet-4-5",
        "model_requested": "claude-sonnet-4-5",
    }
