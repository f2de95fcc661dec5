"""What a replayed campaign's figures mean: which measure the build under test, which the recording fixed.

Under ``--agent-eval-replay`` every assistant turn is the recorded one (same calls, same queries, same answer
text), and the tools run for real against this session's build. So a figure measures the new build only
insofar as it depends on the tools' *responses*, not on what the model chose to do:

* **measured** — the build's responses themselves, judged against the recorded (fixed) answer and next actions:
  allocation and path allocation (the share of each new response the fixed answer cites: padding or a missed
  file shows as a drop), the tool's residual tokens, explore errors, and the split of Reads into
  *read a file it returned* vs *read a file it did not return* (the recorded Read is fixed; whether the new
  response carried that file is not), plus leaks (a result's content).
* **partly** — the fixed conversation with the new responses in it: final context, tokens processed, and the
  shares over them. They move with the responses' size, but a real model would have reacted to a different
  response (explored again, read less), which the replay cannot show.
* **fixed by the recording** — what the model chose: the number of calls and turns, explore-again, search and
  moved-on shares (the next action is the recorded one whatever the response), CLI attempts.
* **not measured** — cost (the stand-in model's tokens are simulated) and duration (no model latency).
"""

from __future__ import annotations

from pathlib import Path

from pytest_agent_eval.metrics.figures import FIGURES

MEASURED, PARTLY, FIXED, NOT_MEASURED = "measured", "partly", "fixed by the recording", "not measured"

MEANING = {
    "allocation": MEASURED,
    "path_allocation": MEASURED,
    "tool_residual": MEASURED,
    "residual_tokens": MEASURED,
    "explore_errors": MEASURED,
    "read_returned_share": MEASURED,
    "read_missed_share": MEASURED,
    "leaks": MEASURED,
    "key_rank": MEASURED,  # where the new build's responses put the first key file
    "file_access_residual": PARTLY,  # the recorded Reads/Greps, run for real over the same repository
    "ctx_final": PARTLY,
    "tokens_processed": PARTLY,
    "residual_share": PARTLY,
    "window_share": PARTLY,
    "key_seen": PARTLY,  # the new responses' files, with the recorded reads and searches
    "turns": FIXED,
    "tool_calls": FIXED,
    "read_calls": FIXED,
    "retrieval_calls": FIXED,
    "explore_calls": FIXED,
    "explore_again_share": FIXED,
    "search_share": FIXED,
    "sufficient_share": FIXED,
    "cli_calls": FIXED,
    "cli_blocked": FIXED,
    "key_recall": FIXED,  # the recorded answer
    "judge_grade": FIXED,
    "read_recall": FIXED,
    "read_precision": FIXED,
    "cost_usd": NOT_MEASURED,
    "duration_s": NOT_MEASURED,
}


def meaning(figure: str) -> str:
    """How far a figure measures the build under replay (every catalogue figure is classified)."""
    return MEANING[FIGURES[figure].name]


def caveat(figure: str) -> str | None:
    """What a comparison row of a replay says about a figure that does not measure the build; None if it does."""
    found = meaning(figure)
    return None if found == MEASURED else f"{found} under replay"


def figures_by_meaning() -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {MEASURED: [], PARTLY: [], FIXED: [], NOT_MEASURED: []}
    for name in FIGURES:
        grouped[meaning(name)].append(name)
    return grouped


def replay_note(source: str | Path) -> str:
    """The paragraph every replayed report carries: what was replayed, and which figures to read."""
    grouped = figures_by_meaning()
    return "\n".join(
        [
            f"REPLAY of {source}: every model turn is the recorded one; the tools ran for real against this build.",
            f"  measures this build: {', '.join(grouped[MEASURED])}",
            f"  partly (the fixed conversation with this build's responses in it): {', '.join(grouped[PARTLY])}",
            f"  fixed by the recording (the model's choices, not the build's): {', '.join(grouped[FIXED])}",
            f"  not measured (simulated / no model latency): {', '.join(grouped[NOT_MEASURED])}",
        ]
    )
