"""Occupancy holds whatever the tokenizer: every bench class, made with the stand-in counting under each of its
counting models (its own, uniform chars/token, o200k_base, cl100k_base; bench/make_occupancy_sessions.py), held to
its figure, beside the simple calibrated estimate (docs/metrics/occupancy.md, "Accuracy against the truth")."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
_spec = importlib.util.spec_from_file_location("occupancy_accuracy", BENCH / "occupancy_accuracy.py")
accuracy = importlib.util.module_from_spec(_spec)
sys.modules["occupancy_accuracy"] = accuracy  # its dataclass looks its module up
_spec.loader.exec_module(accuracy)
_agents_spec = importlib.util.spec_from_file_location("agent_occupancy", BENCH / "agent_occupancy.py")
agents = importlib.util.module_from_spec(_agents_spec)
_agents_spec.loader.exec_module(agents)

MODELS = ("stand-in", "uniform", "o200k_base", "cl100k_base")
CLASSES = ("calibration", "held-out", "ordinary", "multi-turn", "growth", "hidden-thinking", "long-thinking",
           "compaction")  # fmt: skip
GOAL = 0.01
# Each class's mean error as bench/occupancy_accuracy.py measures it, rounded up: a change that loses accuracy fails.
FIGURES = {
    "stand-in": {"calibration": 0.0055, "held-out": 0.0095, "ordinary": 0.0025, "multi-turn": 0.0020,
                 "growth": 0.0145, "hidden-thinking": 0.0100, "long-thinking": 0.0090, "compaction": 0.0085},
    "uniform": {"calibration": 0.0030, "held-out": 0.0035, "ordinary": 0.0025, "multi-turn": 0.0020, "growth": 0.0050,
                "hidden-thinking": 0.0045, "long-thinking": 0.0100, "compaction": 0.0075},
    "o200k_base": {"calibration": 0.0040, "held-out": 0.0060, "ordinary": 0.0025, "multi-turn": 0.0020,
                   "growth": 0.0095, "hidden-thinking": 0.0075, "long-thinking": 0.0095, "compaction": 0.0065},
    "cl100k_base": {"calibration": 0.0040, "held-out": 0.0065, "ordinary": 0.0025, "multi-turn": 0.0020,
                    "growth": 0.0095, "hidden-thinking": 0.0080, "long-thinking": 0.0100, "compaction": 0.0065},
}  # fmt: skip
# Where the goal is not met, and why (docs/metrics/occupancy.md, "What it cannot see"): context the server counts
# beside a result with nothing in the transcript to tell it makes its family read denser; where it reads denser than
# GROWTH_FACTOR by characters and by pieces, the family is priced at the other families' terms, which are not its own
# (growth/one-without: a Read beside 3,000 tokens priced at the one Grep listing's ratio, +14.7% under the stand-in's
# counting, -5.2% under the BPE ones). The family's bar, Occupancy.denser, covers it
# (test_a_family_read_denser_than_the_others_is_off_by_no_more_than_its_bar). Results are scored against their own
# tokens, the context apart.
MISSES = {("stand-in", "growth")}


@pytest.fixture(scope="module")
def scores():
    return {model: accuracy.score(sessions, truth) for model, sessions, truth in accuracy.corpora()}


def test_every_class_is_made_under_every_counting_model(scores):
    assert set(scores) == set(MODELS)
    for model in MODELS:
        assert set(CLASSES) <= set(scores[model]), model
        assert all(scores[model][cls].sessions >= 2 for cls in CLASSES), model


@pytest.mark.parametrize(("model", "cls"), [(m, c) for m in MODELS for c in FIGURES[m]])
def test_each_class_holds_its_figure(scores, model, cls):
    s = scores[model][cls]
    assert s.mean <= FIGURES[model][cls]
    if (model, cls) not in MISSES:
        assert s.mean <= GOAL
    assert s.false_evictions == 0  # on growth too, where the ratio read the context: a gap sheds what was there


@pytest.mark.parametrize(("model", "cls"), [(m, c) for m in MODELS for c in FIGURES[m]])
def test_occupancy_is_no_worse_than_the_simple_estimate_on_any_class(scores, model, cls):
    s = scores[model][cls]
    assert s.mean <= s.simple_mean


@pytest.mark.parametrize(("model", "cls"), [(m, c) for m in MODELS for c in CLASSES])
def test_a_family_read_denser_than_the_others_is_off_by_no_more_than_its_bar(scores, model, cls):
    # Its gaps' growth beyond the other families' terms is its own cost or context beside it: the residual's bar.
    s = scores[model][cls]
    assert s.beyond_bar == 0
    if cls == "growth":  # every session whose results' family the context made read denser has its bar
        assert s.bars >= 3


@pytest.mark.parametrize("model", MODELS)
def test_growth_beside_results_is_reported_unexplained_within_five_percent_of_what_the_server_hid(scores, model):
    # Results are scored on their own tokens; the context beside them is unexplained in every session (in three as
    # growth beside a family far denser than the others, in every-step-without as a gap beyond the gaps' spread), off
    # what the server hid only by what the other families' terms misprice the family beside it (growth/one-without's
    # Read, +14.7% under the stand-in's counting: 655 tokens of it priced as the Read's).
    s = scores[model]["growth"]
    assert 0.95 * s.hidden <= s.unexplained <= 1.05 * s.hidden


@pytest.mark.parametrize("model", MODELS)
def test_what_the_server_hid_is_reported_as_unexplained_not_priced(scores, model):
    # Thinking the server counted and did not stream: within 3% summed over the class, under every counting model.
    s = scores[model]["hidden-thinking"]
    assert s.unexplained == pytest.approx(s.hidden, rel=0.03)


AGENTS = ("codex", "gemini", "opencode")
CASES_PER_AGENT = ("plain-with", "plain-without", "delegated-with", "delegated-without", "two-turns-with")
# "other" (spawning a subagent and waiting for it: a few dozen tokens of JSON ids) misses its share: the one small gap
# that measures the framing density is the spawn's, so its result reads at the run's ratio, where ids tokenise at about
# 1.5 chars/token (docs/metrics/occupancy.md, "What it cannot see"). Its bound: at most 28% of the family (Codex under
# the stand-in's own counting), and OTHER_TOKENS in one session; every other family holds the goal.
FAMILY_FIGURES = {"other": 0.28}
OTHER_TOKENS = 90


@pytest.fixture(scope="module")
def agent_scores():
    return agents.score_agents()


def test_every_agent_is_made_under_every_counting_model(agent_scores):
    assert set(agent_scores) == {(model, agent) for model in MODELS for agent in AGENTS}
    assert all(s.sessions == len(CASES_PER_AGENT) for s, _ in agent_scores.values())


@pytest.mark.parametrize(("model", "agent"), [(m, a) for m in MODELS for a in AGENTS])
def test_every_agents_sessions_hold_the_goal_under_every_counting_model(agent_scores, model, agent):
    # bench/make_agent_sessions.py's cases: one question and two turns with the tool, a subagent in both arms.
    s, families = agent_scores[(model, agent)]
    assert s.mean <= GOAL and s.false_evictions == 0
    assert s.mean <= s.simple_mean
    assert all(f.mean <= FAMILY_FIGURES.get(fam, GOAL) for fam, f in families.items()), {
        fam: f.mean for fam, f in families.items()
    }


@pytest.mark.parametrize(("model", "agent"), [(m, a) for m in MODELS for a in AGENTS])
def test_the_other_family_of_every_agent_is_off_by_no_more_than_its_stated_bound(agent_scores, model, agent):
    _, families = agent_scores[(model, agent)]
    assert families["other"].worst_tokens <= OTHER_TOKENS
