"""Sharding a campaign across machines: which of the selected items shard I of N runs.

A CI job matrix (GitHub Actions, GitLab ``parallel:``, Buildkite) is the scheduler; this module only decides,
identically on every machine and Python version, which items each job takes. Items are grouped by repository,
so one repository's clone and its index builds (every tool version of it) happen on one shard only; groups are
assigned greedily, heaviest first (longest processing time), to the least-loaded shard. A group's weight is the
sum over its items of the entry's size class weight × the item's turns (so arms and runs count by being items).
Ties are broken by the sha256 of the group key, never by Python's randomized ``hash()``.

Plain Python, no pytest: the plugin hands in (item id, case) pairs after ``-k``/``-m`` selection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pytest_agent_eval.corpus.cases import EvalCase

# Relative cost of one turn on a repository of each size class (corpus.json: Small < ~150 files, Medium
# ~150-1500, Large > ~1500): the agent reads more and the index takes longer on larger repositories.
SIZE_WEIGHTS = {"Small": 1, "Medium": 2, "Large": 4}


def group_key(case: EvalCase) -> str:
    """The unit that stays on one shard: the repository (its clone, and its index for every tool version)."""
    return case.entry.repo


def item_weight(case: EvalCase) -> int:
    return SIZE_WEIGHTS.get(case.entry.size, SIZE_WEIGHTS["Medium"]) * max(1, len(case.questions))


def partition(items: Sequence[tuple[str, EvalCase]], count: int) -> list[list[str]]:
    """The item ids of each of ``count`` shards (index 0 is shard 1), each in the order the items came.

    Deterministic given the items: groups are placed heaviest first, ties by sha256 of the key, each on the
    least-loaded shard (the lowest index among equals).
    """
    weights: dict[str, int] = {}
    for _, case in items:
        key = group_key(case)
        weights[key] = weights.get(key, 0) + item_weight(case)
    order = sorted(weights, key=lambda key: (-weights[key], hashlib.sha256(key.encode("utf-8")).hexdigest(), key))
    loads = [0] * count
    shard_of: dict[str, int] = {}
    for key in order:
        target = min(range(count), key=lambda i: (loads[i], i))
        shard_of[key] = target
        loads[target] += weights[key]
    shards: list[list[str]] = [[] for _ in range(count)]
    for item_id, case in items:
        shards[shard_of[group_key(case)]].append(item_id)
    return shards
