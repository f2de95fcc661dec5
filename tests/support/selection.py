"""A corpus of twelve entries over ten repositories and sizes, and its items as pytest selects them: what a shard
partitions (read in-process and by a subprocess with another hash seed)."""

from __future__ import annotations

from pytest_agent_eval.corpus.cases import Arm, cases_for
from pytest_agent_eval.corpus.load import CorpusEntry


def corpus(count: int = 12) -> list[CorpusEntry]:
    sizes = ("Small", "Medium", "Large")
    return [
        CorpusEntry(f"e{i}", "Go", f"https://example.com/r{i % (count - 2)}", sizes[i % 3], 10, ["q1", "q2", "q3"])
        for i in range(count)
    ]


def selection(runs: int = 2, arms: tuple[Arm, ...] = (Arm("with"), Arm("without"))) -> list:
    return [(case.id, case) for case in cases_for(corpus(), list(arms), runs, None)]
