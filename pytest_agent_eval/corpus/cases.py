"""What a test becomes: arms, and the items (corpus entry × agent × arm × run) an eval test is parametrized over.

Plain data, no pytest: the plugin turns each :class:`EvalCase` into one item, ``agent-eval`` reads arms back
from stored records.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the settings hold arms; the corpus loads with the first eval
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.corpus.load import CorpusEntry

WITH, WITHOUT = "with", "without"
ARM_NAMES = (WITH, WITHOUT)


# Named tuples, not frozen dataclasses: the settings hold arms, and a frozen dataclass costs about five times as
# much to define (bench/load_bench.py --instructions).
class Arm(NamedTuple):
    """One side of the A/B. ``tool_spec`` pins the tool's build (``1.6.1``, ``latest``, ``local:<path>``);
    None means ``--agent-eval-tool-version``."""

    name: str
    tool_spec: str | None = None

    @property
    def label(self) -> str:
        """The arm as it appears in item ids and tables; a local path shows only its last part."""
        if self.tool_spec is None:
            return self.name
        spec = self.tool_spec
        if spec.startswith("local:"):
            spec = "local:" + (Path(spec[len("local:") :]).name or spec[len("local:") :])
        return f"{self.name}@{spec}"

    @property
    def has_tool(self) -> bool:
        """Whether the agent is given the retrieval tool. Only the without-arm is not (the original harness's
        ``new``/``baseline`` arms, read back by ``agent-eval rescore``, both ran it)."""
        return self.name != WITHOUT


class EvalCase(NamedTuple):
    """One item: a corpus entry, an arm, a run number, and the turns it asks; ``agent`` is the coding agent that
    runs it when that is not the session's own (``--agent-eval-agents``' first), None when it is."""

    entry: CorpusEntry
    arm: Arm
    run: int
    questions: tuple[str, ...]
    driver: str = "headless"
    agent: CodingAgent | None = None

    @property
    def id(self) -> str:
        """``express-with-1`` (``express-with-tmux-1`` when driven in tmux); a pinned arm writes ``@`` as ``:``
        (``express-with:1.6.0-1``), because ``pytest -k`` cannot parse ``@`` and can parse ``-k "with:1.6.0"``.
        Another agent than the session's own is named after the entry (``express-codex-with-1``): the session's
        own items keep the ids a one-agent campaign gave them, so its baselines and resumes still match."""
        driver = "" if self.driver == "headless" else f"-{self.driver}"
        agent = "" if self.agent is None else f"-{self.agent.name}"
        return f"{self.entry.name}{agent}-{self.arm.label.replace('@', ':')}{driver}-{self.run}"


def cases_for(
    entries: list[CorpusEntry],
    arms: list[Arm],
    runs: int,
    turns: int | None,
    drivers: Sequence[str] = ("headless",),
    agents: Sequence[CodingAgent | None] = (None,),
) -> list[EvalCase]:
    """entry × agent × arm × driver × run (``agents``: None for the session's own agent)."""
    return [
        EvalCase(entry, arm, run, tuple(entry.questions[:turns] if turns else entry.questions), driver, agent)
        for entry in entries
        for agent in agents
        for arm in arms
        for driver in drivers
        for run in range(1, runs + 1)
    ]


class SelectionError(ValueError):
    """A test or a campaign that selects no entry, or one the corpus does not have."""


def select_entries(entries: list[CorpusEntry], wanted: Sequence[str] | None, campaign: str | None) -> list[CorpusEntry]:
    """The entries a test runs: the ones its marker names (all without one), of ``--agent-eval-campaign`` if set."""
    if wanted is not None:
        missing = [name for name in wanted if name not in {e.name for e in entries}]
        if missing:
            raise SelectionError(f"entries not in the corpus: {', '.join(missing)}")
        entries = [e for e in entries if e.name in wanted]
    if campaign is not None:
        entries = select_campaign(entries, campaign)
        if not entries:
            raise SelectionError(f'--agent-eval-campaign {campaign}: no corpus entry has "campaign": "{campaign}"')
    return entries


def select_campaign(entries: list[CorpusEntry], campaign: str | None) -> list[CorpusEntry]:
    """The entries tagged with ``--agent-eval-campaign`` (all of them without one)."""
    return entries if campaign is None else [e for e in entries if e.campaign == campaign]
