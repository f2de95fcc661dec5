"""bench/score_diff.py says which figures moved between two outputs of a scoring change, and which are new."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
_spec = importlib.util.spec_from_file_location("score_diff", BENCH / "score_diff.py")
score_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(score_diff)


def _output(value: dict) -> str:
    return f"{json.dumps(value)}\n--- stderr\n\n--- exit 0\n"


def test_moved_lists_each_changed_figure_then_the_new_and_the_gone():
    before = {"occupancy": {"residual": {"read": 14_859, "tool": 0}, "chars_per_token": 2.99, "old": 1}}
    after = {"occupancy": {"residual": {"read": 14_821, "tool": 0}, "chars_per_token": 3.0, "cross_check": ""}}
    assert score_diff.moved(_output(before), _output(after)) == [
        "occupancy.residual.read: 14859 → 14821",
        "occupancy.chars_per_token: 2.99 → 3.0",
        "new: occupancy.cross_check = ",
        "gone: occupancy.old (was 1)",
    ]
    assert score_diff.moved("Residual context occupancy …\n--- stderr\n", "other text\n--- stderr\n") == []
