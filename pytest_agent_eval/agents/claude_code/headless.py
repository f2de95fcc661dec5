"""Drive ``claude -p`` over the turns of one question, one stream-json segment per turn.

Turn 1 starts a session; each later turn ``--resume``s it, so earlier tool output stays in the window.
Segments land as ``run-<label>.jsonl``, ``run-<label>.t2.jsonl``, … with each process's stderr beside it
(``run-<label>.stderr``, ``run-<label>.t2.stderr``).

The CLI fails in two known ways, and a watchdog handles both: it may hang after writing its ``result``
event (killed a few seconds later; the segment is complete and kept), or it may never write one (killed
at the timeout; the partial segment is kept and :class:`AgentInfraError` is raised).

A turn that ends in an API error (the CLI gave up retrying) ends the run at once, as a :class:`TurnError`;
a turn whose longest silence between stream-json lines exceeds ``HeadlessOptions.stall_s`` is marked stalled,
and the CLI's ``api_retry`` events are counted (see :mod:`.watch` for both judgements, which the interactive
driver shares).

The environment is passed to the child only; nothing here writes it to a file, so an API key in it never
lands on disk.

Each turn is run by the shared turn runner (:class:`pytest_agent_eval.harness.drivers.turns.Turns`), as every
headless agent's: in the sandbox, with the CLI's stdout and stderr sockets, which the agent's shells cannot reopen
through ``/proc`` to write forged stream-json lines. The ``ptrace`` family that could take one another way is denied
by the sandbox's seccomp filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_agent_eval.agents.claude_code.events import describe, turn_api_error
from pytest_agent_eval.harness.drivers import RunRecord, TurnError
from pytest_agent_eval.harness.drivers.stream import RESULT_GRACE_S, event_of
from pytest_agent_eval.harness.drivers.turns import Launches, Turns
from pytest_agent_eval.harness.drivers.watch import STALL_S_REAL_API
from pytest_agent_eval.harness.sandbox import Sandbox

ALLOWED_TOOLS = "Grep,Glob,TodoWrite"
# Taken from the agent (and its subagents) in every arm: WebSearch runs on Anthropic's servers and WebFetch from the
# CLI, so either would let the sealed without-arm look the code up outside its sandbox, and the web has no place
# in an A/B of local code retrieval.
DISALLOWED_TOOLS = "WebSearch,WebFetch"


@dataclass(frozen=True)
class HeadlessOptions(Launches):
    """The flags every agent process gets; one object per run, shared by its turns and, as ``TmuxOptions.run``,
    by the interactive driver."""

    claude: str
    mcp_config: Path
    settings: Path
    model: str = "sonnet"
    effort: str = "high"
    max_budget_usd: float = 4.0  # -p only: the interactive CLI refuses it
    timeout_s: float = 900.0  # per turn
    result_grace_s: float = RESULT_GRACE_S  # -p only
    allowed_tools: str = ALLOWED_TOOLS
    stall_s: float = STALL_S_REAL_API  # a longer silence between a turn's lines marks it stalled (see .watch)
    sandbox: Sandbox | None = None  # where the agent's process tree runs; None only when a test switched it off


def settings_flags(options: HeadlessOptions) -> list[str]:
    """Only the harness's settings and MCP servers: no user, project or local settings file (a repository's
    ``.claude/settings.json`` with ``disableAllHooks``, or one the agent writes in turn 1, changes nothing)."""
    return [
        "--setting-sources",
        "",
        "--strict-mcp-config",
        "--mcp-config",
        str(options.mcp_config),
        "--settings",
        str(options.settings),
    ]


def tool_flags(options: HeadlessOptions) -> list[str]:
    """The agent's tools, alike in both drivers: the web tools removed, the search tools allowed without asking."""
    return ["--disallowedTools", DISALLOWED_TOOLS, "--allowedTools", options.allowed_tools]


def build_command(question: str, options: HeadlessOptions, resume: str | None = None) -> list[str]:
    command = [
        options.claude,
        "-p",
        question,
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
        "--model",
        options.model,
        "--effort",
        options.effort,
        "--max-budget-usd",
        f"{options.max_budget_usd:g}",
        *settings_flags(options),
        *tool_flags(options),
    ]
    if resume:
        command += ["--resume", resume]
    return command


def run_headless(
    questions: Sequence[str],
    *,
    label: str,
    out_dir: Path,
    cwd: Path,
    env: Mapping[str, str],
    options: HeadlessOptions,
) -> RunRecord:
    """Run every turn; raises :class:`TurnError` (partial segments kept, later turns not started) when a turn
    yields no result event or ends in an API error."""
    turns = Turns(questions, label=label, out_dir=out_dir, cwd=cwd, env=env, sandbox=options.sandbox, name="claude",
                  timeout_s=options.timeout_s, grace_s=options.result_grace_s, stall_s=options.stall_s)  # fmt: skip
    record = turns.record
    for turn in turns:
        if turn.number > 1 and not record.session_id:
            raise TurnError(
                f"turn {turn.number}: no session id in {record.segments[-1]}, so it cannot be resumed", record
            )
        seen = _Seen()
        outcome = turns.run(turn, build_command(turn.question, options, record.session_id), seen.read)
        turns.retried(seen.api_retries)
        record.session_id = seen.session_id or record.session_id
        if not outcome.ended:
            raise turns.unended(turn, outcome, f"without a result event (partial segment kept: {turn.segment})")
        api_error = turn_api_error(turn.segment.read_bytes().splitlines())
        if api_error:
            retried = f" after {seen.api_retries} API retries" if seen.api_retries else ""
            raise turns.failed(turn, f"{api_error}{retried}", stderr=False)
    return record


@dataclass
class _Seen:
    """What a turn's stream said besides its end: the session it belongs to, the CLI's retries."""

    session_id: str | None = None
    api_retries: int = 0

    def read(self, raw: bytes) -> tuple[str, bool]:
        """One line of the stream: what it is (for the silences), and whether it ends the turn."""
        event = event_of(raw)
        if event is None:
            return describe(event), False
        if isinstance(event.get("session_id"), str) and event["session_id"]:
            self.session_id = event["session_id"]
        if event.get("type") == "system" and event.get("subtype") == "api_retry":
            self.api_retries += 1
        return describe(event), event.get("type") == "result"
