"""Give it the file, get the session: whose record a file is, asked of every agent (``CodingAgent.recognise``).

``agent-eval score`` and ``agent-eval rescore`` of a plain folder read whatever an agent wrote, as a user has it
(docs/usage.md, "Scoring records you already have"). Each built-in agent says from the file's content whether it is
its record, and of which kind (every agent the registry knows: the built-in ones and those installed distributions offer
through entry points); a file two agents claim is refused naming both (no order of asking decides it); a
file none claims is read as Claude Code's stream-json, whose reader says what it lacks. Agents of one class (a
plug-in that is a built-in agent under another name) read a file alike: they make one claim, the first asked's (the
built-in one's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agent_eval.agents.built_in import UNNAMED_AGENT
from pytest_agent_eval.agents.registry import known_agents, resolve_agent
from pytest_agent_eval.transcript import TranscriptError
from pytest_agent_eval.transcript.sample import sample

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.transcript import Session

UNRECOGNISED = "stream-json"  # what a file no agent claims is read as: Claude Code's, whose reader says what it lacks


@dataclass(frozen=True)
class Recognised:
    """A file's agent and the kind of its record (``kind`` as the agent names it); ``claimed``: whether the agent said
    so (False: no agent did, and it is read as Claude Code's)."""

    agent: CodingAgent
    kind: str
    claimed: bool = True

    def describe(self) -> str:
        return f"{self.agent.title} {self.kind}" if self.claimed else "no agent's record it recognises"


def agents() -> list[CodingAgent]:
    """Every agent asked: the registry's (built in, or offered by an installed distribution's entry point)."""
    return known_agents()


def recognise(path: str | Path, asked: Sequence[CodingAgent] | None = None) -> Recognised:
    """Whose record ``path`` is; a TranscriptError naming both when two agents claim it."""
    path = Path(path)
    head = sample(path)
    claims: list[tuple[CodingAgent, str]] = []
    for agent in asked if asked is not None else agents():
        kind = agent.recognise(head)
        if kind and not any(type(claimant) is type(agent) for claimant, _ in claims):
            claims.append((agent, kind))
    if len(claims) > 1:
        named = " and ".join(f"{agent.title}'s {kind}" for agent, kind in claims)
        raise TranscriptError(f"{path}: could be {named}: give each agent's record in a file of its own")
    if claims:
        return Recognised(*claims[0])
    return Recognised(resolve_agent(UNNAMED_AGENT), UNRECOGNISED, claimed=False)


def read_given(
    files: Sequence[str | Path], companion: str | Path | None = None, agent: CodingAgent | None = None
) -> tuple[Recognised, list[Session]]:
    """The sessions in ``files`` (one record and its later turns, in order), read by the agent whose record the
    first is — or by ``agent`` when named (its own transcript when it does not claim the file) — with ``companion``
    (a rollout, a chat record) when given; a later file another agent claims is an error naming both."""
    paths = [Path(f) for f in files]
    found = recognise(paths[0], None if agent is None else [agent])
    named_unclaimed = agent is not None and not found.claimed
    if named_unclaimed:
        found = Recognised(agent, found.kind, claimed=False)
    for later in paths[1:]:
        other = recognise(later)
        if other.claimed and found.claimed and other.agent.name != found.agent.name:
            raise TranscriptError(
                f"{later}: {other.describe()}, while {paths[0]} is {found.describe()}: one session's files are one "
                "agent's"
            )
    if named_unclaimed:
        sessions = [found.agent.read_transcript(paths)]
    else:
        sessions = found.agent.read_record(paths, found.kind, Path(companion) if companion else None)
    for session in sessions:
        say_no_usage(session)
    return found, sessions


def say_no_usage(session: Session) -> None:
    """A record whose requests all carry no usage, or only zeros (a proxy in front of the model that reports none),
    says so in ``missing``: its token figures are unknown, not 0."""
    # a request that failed (Claude Code's <synthetic> error message) has no usage to give: the error says it
    messages = [m for m in session.messages(None) if not m.error and m.model != "<synthetic>"]
    if "usage" in session.missing or not messages:
        return
    if all(m.usage is None or (m.usage.ctx == 0 and m.usage.output == 0) for m in messages):
        session.missing["usage"] = (
            f"none of its {len(messages)} request(s) carries a token count (absent, or 0: the model, or a proxy in "
            "front of it, reported none): the token figures (occupancy, the residuals) are unknown, not 0"
        )
