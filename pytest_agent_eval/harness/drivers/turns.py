"""The shared turn runner: what every headless driver does with a turn, whatever the CLI, and the hardening that
comes with it, so that a driver (a plug-in's too) gets it by using :class:`Turns` rather than by copying it.

For each turn of a run: its files (``run-<label>.jsonl``, ``.t2.jsonl``, … and the stderr beside each), its command
started inside the run's sandbox (:func:`launched`: the seal, and the jailed shell the sandbox puts where the agent
runs its shell commands; a turn that moved a bind of the harness's fails before it starts), run by
:func:`~.stream.run_streaming` (stdout and stderr are sockets, which the agent's shells cannot reopen through
``/proc/<cli>/fd/1`` to forge lines into what is recorded), what it did added to the :class:`RunRecord`, and the
:class:`TurnError` of a failed turn worded alike (``turn N: … ; stderr: … ; turns N+1-M not run``).

What stays the driver's: the CLI's command line for a turn, how a line of its stream is read (whether it ends the
turn, the session it names), and what it keeps beside the segments. ``agent-eval check-agent`` proves the stdout
cannot be reopened from inside (docs/extending.md, "Checking a new agent").
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agent_eval.harness.drivers import AgentInfraError, RunRecord, StreamOutcome, TurnError, segment_name
from pytest_agent_eval.harness.drivers.stream import (
    RESULT_GRACE_S,
    LineWatcher,
    not_run,
    run_streaming,
    stderr_tail,
    unended,
)

if TYPE_CHECKING:
    from pytest_agent_eval.harness.drivers.drive import Drive
    from pytest_agent_eval.harness.sandbox import Sandbox


def launched(command: list[str], sandbox: Sandbox | None) -> list[str]:
    """``command`` as started: inside ``sandbox`` when there is one (None only where a test switched it off). A turn
    that changed where the sandbox binds the harness's files in HOME fails here, before the next turn starts, naming
    what changed."""
    from pytest_agent_eval.harness.binds import LayoutChanged

    if sandbox is None:
        return command
    try:
        return sandbox.wrap(command)
    except LayoutChanged as exc:
        raise AgentInfraError(f"the sandbox cannot be built as the harness made it: {exc}") from exc


class Launches:
    """What a driver's options (a frozen dataclass with a ``sandbox`` field) start a command with: the interactive
    driver's pane too (:func:`launched`)."""

    sandbox: Sandbox | None  # where the agent's process tree runs; None only when a test switched it off

    def launch(self, command: list[str]) -> list[str]:
        return launched(command, self.sandbox)


@dataclass(frozen=True)
class Turn:
    """One turn of a run: its number (from 1), its question, its files, and what the message of its failure adds
    about the later turns (``later``)."""

    number: int
    question: str
    segment: Path
    stderr: Path
    later: str


@dataclass
class Turns:
    """The turns of one run of the CLI called ``name`` (in errors): iterate them, :meth:`run` each one's command,
    raise :meth:`failed` for one that failed. ``record`` is the run's :class:`RunRecord`."""

    questions: Sequence[str]
    label: str
    out_dir: Path
    cwd: Path
    env: Mapping[str, str]
    sandbox: Sandbox | None
    name: str
    timeout_s: float = 900.0  # per turn
    grace_s: float = RESULT_GRACE_S  # how long the CLI may linger after the line that ended its turn
    stall_s: float | None = None  # a longer silence between a turn's lines marks it stalled (see .watch)
    record: RunRecord = field(init=False)

    def __post_init__(self) -> None:
        if not self.questions:
            raise ValueError("no question to ask")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.record = RunRecord(label=self.label, stall_s=self.stall_s)

    @classmethod
    def of(cls, run: Drive, name: str, grace_s: float = RESULT_GRACE_S) -> Turns:
        """The turns of ``run`` (what :meth:`CodingAgent.run_session <pytest_agent_eval.agents.base.CodingAgent.
        run_session>` is given): its questions, files, environment, sandbox, time per turn and stall threshold."""
        options = run.options
        return cls(run.questions, label=run.label, out_dir=run.out_dir, cwd=run.cwd, env=run.env,
                   sandbox=options.sandbox, name=name, timeout_s=options.timeout_s, grace_s=grace_s,
                   stall_s=options.stall_s)  # fmt: skip

    def __iter__(self) -> Iterator[Turn]:
        turns = len(self.questions)
        for number, question in enumerate(self.questions, start=1):
            segment = self.out_dir / segment_name(self.label, number)
            stderr = self.out_dir / segment_name(self.label, number, ".stderr")
            yield Turn(number, question, segment, stderr, not_run(number, turns))

    def run(self, turn: Turn, command: list[str], watch: LineWatcher) -> StreamOutcome:
        """Run ``command`` (the CLI's argv for ``turn``) in the sandbox, its stream read by ``watch``, and add it to
        :attr:`record` (its API retries: :meth:`retried`)."""
        outcome = run_streaming(launched(command, self.sandbox), segment=turn.segment, stderr=turn.stderr,
                                cwd=self.cwd, env=self.env, timeout_s=self.timeout_s, grace_s=self.grace_s,
                                watch=watch, name=self.name)  # fmt: skip
        self.record.streamed(turn.segment, turn.stderr, outcome, 0)
        return outcome

    def retried(self, api_retries: int) -> None:
        """The last turn's requests the CLI sent again by itself (what its stream counted)."""
        self.record.api_retries[-1] = api_retries

    def failed(self, turn: Turn, why: str, stderr: bool = True) -> TurnError:
        """The error that ends the run at ``turn`` because of ``why``: with the end of its stderr (unless
        ``stderr`` is False) and the later turns, which are not run."""
        return TurnError(f"turn {turn.number}: {why}{stderr_tail(turn.stderr) if stderr else ''}{turn.later}",
                         self.record)  # fmt: skip

    def unended(self, turn: Turn, outcome: StreamOutcome, end: str | None = None) -> TurnError:
        """The error of a turn whose process gave up before the line that ends it (the timeout, or its exit):
        ``<name> timed out after 900s`` or ``<name> exited 1``, then ``end`` (by default: without ending the turn,
        and its segment)."""
        end = end or f"without ending the turn ({turn.segment})"
        return self.failed(turn, f"{self.name} {unended(outcome, self.timeout_s)} {end}")
