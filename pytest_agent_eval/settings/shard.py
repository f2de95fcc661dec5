"""The shard spec ``--agent-eval-shard I/N`` names: shard ``I`` (1-based) of ``N``. Which items a shard runs is the
campaign's (:mod:`pytest_agent_eval.campaign.shard`); the spec is a setting, read here, below it."""

from __future__ import annotations

from dataclasses import dataclass


class ShardError(ValueError):
    """A shard spec that cannot be read (``--agent-eval-shard 4/3``)."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def parse_shard(text: str) -> Shard:
    """``"2/3"`` → Shard(2, 3); ShardError says what is wrong."""
    index, slash, count = str(text).strip().partition("/")
    try:
        shard = Shard(int(index), int(count))
    except ValueError:
        raise ShardError(f"expected I/N (shard I of N, 1-based), e.g. 2/3, got {text!r}") from None
    if not slash or shard.count < 1 or not 1 <= shard.index <= shard.count:
        raise ShardError(f"expected I/N with 1 <= I <= N, got {text!r}")
    return shard
