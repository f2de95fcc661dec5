"""``agent-eval check-agent``: a short conformance run of a coding agent (docs/extending.md, "Checking a new
agent"): what it declares, then one without-arm item's whole life against the scripted stand-in — the deny proven
through the agent, its stdout not reopenable from inside, the run sealed, the stand-in's decisions spoken in the
agent's tools, calls made, the tool's CLI refused by the agent's own deny. Each check passes or fails naming why.

The stdout check is a second probe session beside the block probe (:func:`~.probe.shell_probe`): the stand-in asks
the agent's shell to append a forged line to ``/proc/<pid>/fd/1`` and ``fd/2`` of each process it runs under, with
the jail taken off for this session alone, so that what stops the line is the stream itself — a socket, which
``/proc`` will not reopen, as the shared turn runner makes it (:mod:`pytest_agent_eval.harness.drivers.turns`) — and
not the jail's Landlock domain (tests/test_escape.py shows both layers apart). It passes when no forged line reached
the files the driver recorded. The shell only walks up from itself to the harness's process (or to the sandbox's
first process), never into any other process's streams.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agent_eval.run.item import ItemLife

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import AgentSetup, CodingAgent
    from pytest_agent_eval.harness.provision import Provisioned
    from pytest_agent_eval.harness.sandbox import Sandbox
    from pytest_agent_eval.harness.workspace import Workspace
    from pytest_agent_eval.tool import RetrievalTool

QUESTION = "Where does send decide the Content-Type of the response?"
_SOURCE = {  # a repository small enough to index and search at once, with a file the stand-in's Grep finds
    "lib/response.js": "function send(body) {\n  // decide the Content-Type\n  return contentType(body);\n}\n",
    "lib/type.js": "function contentType(body) {\n  return typeof body === 'string' ? 'text/html' : 'json';\n}\n",
}
SPOKEN = ("Read", "Grep", "Bash")  # the common tools the stand-in's without-arm asks for
STDOUT_PROBE = "stdout-probe"  # its label and folder, beside the block probe's in the item's folder
FORGED = "agent-eval-forged"  # the type of the line the probe's shell forges: no CLI writes such an event
_DONE = "agent-eval stdout probe: done"
_NOT_BELOW = "agent-eval stdout probe: not below the harness"
# POSIX sh, in whichever shell the agent runs: H is the harness's pid, unless the shell's pid namespace is not the
# harness's (inside a sandbox: the walk ends at its first process). Outside one the walk must end at the harness,
# and nothing is written unless it does: the shell never writes into a process the harness did not start.
_PROBE = r'''H=@PID@; n=$(readlink /proc/self/ns/pid 2>/dev/null)
if [ -n "$n" ] && [ "$n" != "@NS@" ]; then H=0; fi
p=$PPID; chain=
while [ "${p:-0}" -gt 0 ] && [ "$p" != "$H" ]; do
  chain="$chain $p"; p=$(sed -n 's/^PPid:[[:space:]]*//p' /proc/$p/status 2>/dev/null)
done
if [ "$H" != 0 ] && [ "$p" != "$H" ]; then chain=; echo "@NOT_BELOW@"; fi
for p in $chain; do
  c=$(cat /proc/$p/comm 2>/dev/null)
  for fd in 1 2; do
    f=/proc/$p/fd/$fd
    if e=$( (printf '\n{"type":"@FORGED@","into":"%s (%s)"}\n' "$f" "$c" >> "$f") 2>&1 )
    then echo "opened $f ($c) -> $(readlink "$f")"; else echo "refused $f ($c): ${e##*: }"; fi
  done
done
echo "@DONE@"'''


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    why: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.why}"


def declared(agent: CodingAgent) -> list[Check]:
    """What the agent declares, checked without running it."""
    from pytest_agent_eval.agents.base import HEADLESS
    from pytest_agent_eval.harness import sandbox

    problem = agent.stand_in_problem()
    jail = agent.shell_prefix_var or agent.shell_from
    return [
        Check("stand-in dialect", problem is None, problem or _spoken_as(agent)),
        Check("headless", HEADLESS in agent.modes, f"driven {', '.join(agent.modes)}"),
        Check(
            "jail",
            bool(jail) and sandbox.enabled(),
            f"its shell runs jailed through {jail}"
            if jail
            else "it declares neither shell_prefix_var nor shell_from: the sandbox has nowhere to put the jailed "
            "shell, so its shell commands would run unjailed",
        ),
    ]


def stdout_probe_command(harness_pid: int, harness_ns: str) -> str:
    """The probe's shell command (see the module's docstring), for a harness process ``harness_pid`` in the pid
    namespace ``harness_ns`` (``readlink /proc/self/ns/pid``)."""
    return (
        _PROBE.replace("@PID@", str(harness_pid))
        .replace("@NS@", harness_ns)
        .replace("@FORGED@", FORGED)
        .replace("@NOT_BELOW@", _NOT_BELOW)
        .replace("@DONE@", _DONE)
    )


def forged_lines(folder: Path, label: str, said: str = "") -> list[tuple[str, str]]:
    """(where the shell wrote, the file) of each write of the probe's into the run ``run-<label>…`` of ``folder``: a
    forged line recorded whole in a segment or stderr file (the probe's event, not text inside another event), or,
    from what the shell ``said``, a stream it opened that is one of those files (a file not opened to append has
    the forged line written over by the CLI's next one)."""
    found = []
    for path in sorted(folder.glob(f"run-{label}*")):
        for line in path.read_bytes().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == FORGED:
                found.append((str(event.get("into")), path.name))
    for line in said.splitlines():
        into, _, target = line.removeprefix("opened ").partition(" -> ")
        if line.startswith("opened ") and f"/run-{label}" in target:
            found.append((into, Path(target).name))
    return found


def stdout_check(
    agent: CodingAgent, build: Provisioned, setup: AgentSetup, sandbox: Sandbox | None, cwd: Path, env: dict[str, str]
) -> Check:
    """The stdout probe (the module's docstring) through ``agent`` in ``sandbox`` without its jail, its files in
    ``setup.config_dir``."""
    from pytest_agent_eval.agents.base import DriveOptions
    from pytest_agent_eval.harness.sandbox import LANDLOCK
    from pytest_agent_eval.run.probe import shell_probe

    name = "stdout not reopenable"
    unjailed = None if sandbox is None else replace(sandbox, layers=tuple(x for x in sandbox.layers if x != LANDLOCK))
    command = stdout_probe_command(os.getpid(), os.readlink("/proc/self/ns/pid"))
    results: list[str] = []
    failure = None
    try:
        _, results = shell_probe(agent, build, setup, DriveOptions(sandbox=unjailed), command, cwd=cwd, env=env,
                                 label=STDOUT_PROBE)  # fmt: skip
    except Exception as exc:  # a forged line may be what broke the reading: the files say first
        failure = f"{type(exc).__name__}: {exc}"
    said = "\n".join(results)
    forged = forged_lines(setup.config_dir, STDOUT_PROBE, said)
    if forged:
        into, where = forged[0]
        return Check(
            name,
            False,
            f"a line the agent's shell wrote into {into} was recorded in {where}: the CLI's stdout or stderr is a pipe "
            "or a file, which /proc reopens, so the agent could forge what is scored; run each turn through the "
            "shared turn runner (pytest_agent_eval.harness.drivers.turns.Turns), whose streams are sockets",
        )
    tried = [line for line in said.splitlines() if line.startswith(("opened ", "refused "))]
    if failure is not None or _DONE not in said or _NOT_BELOW in said or not tried:
        why = (
            f"the probe failed: {failure}" if failure is not None
            else "the agent's shell is not below the harness's process, so its streams cannot be tried"
            if _NOT_BELOW in said
            else f"the agent never ran the probe's shell call to the end (it returned {said[:200]!r})"
        )  # fmt: skip
        return Check(name, False, why)
    refusals = sorted({line.rpartition(": ")[2] for line in tried if line.startswith("refused ")})
    return Check(
        name,
        True,
        f"its shell, unjailed, wrote into fd 1 and fd 2 of the {len(tried) // 2} process(es) it runs under and none "
        f"of it was recorded ({', '.join(refusals) or 'no refusal'})",
    )


def _spoken_as(agent: CodingAgent) -> str:
    """How the stand-in speaks to ``agent``: a built-in agent's tools, with the agent's own names of some."""
    renamed = ", ".join(f"{tool.common} as {tool.name}" for tool in agent.stand_in_tools)
    return f"the stand-in speaks {agent.stand_in_dialect}'s tools to it" + (f" ({renamed})" if renamed else "")


def check_agent(agent: CodingAgent, tool: RetrievalTool, folder: Path) -> list[Check]:
    """Every check, the run's files under ``folder``; the run is skipped where a declaration rules it out."""
    checks = declared(agent)
    if not all(c.passed for c in checks[:2]):
        return [*checks, Check("run", False, "not driven: fix what it declares first")]
    from pytest_agent_eval.campaign.record import ItemRecord
    from pytest_agent_eval.corpus.cases import Arm, EvalCase
    from pytest_agent_eval.corpus.load import CorpusEntry
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.metrics.contamination import contamination
    from pytest_agent_eval.settings.config import AgentEvalConfig

    for path, text in _SOURCE.items():
        (folder / "corpus" / "conformance" / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / "corpus" / "conformance" / path).write_text(text, encoding="utf-8")
    entry = CorpusEntry("conformance", "JavaScript", "https://example.invalid/conformance.git", "small", 2, [QUESTION])
    case = EvalCase(entry, Arm("without"), 1, (QUESTION,))
    cfg = AgentEvalConfig(backend="scripted", offline=True, retries=0, corpus_dir=folder / "corpus", tool=tool)
    life = _Conformance(case, cfg, agent, tool, FailureMemo(cfg.cache, "check-agent"))
    record = ItemRecord(id=case.id, entry=entry.name, arm="without", arm_label="without", run=1)
    try:
        run = life.live(folder / "items" / case.id, folder / "scratch", record)
        session = agent.read_transcript(run.segments)
    except Exception as exc:  # what the harness says went wrong is the finding
        return [*checks, *life.stdout, Check("run", False, f"{type(exc).__name__}: {exc}")]
    names = [call.name for call in session.calls]
    spoken = [name for name in names if name in SPOKEN]
    found = contamination(session, tool)
    return [
        *checks,
        Check("deny proven", True, f"the block probe's call of {tool.cli} was refused through the agent"),
        *life.stdout,
        Check("calls", bool(names), f"the without-arm made {len(names)} call(s)" if names else "it made no call"),
        Check(
            "stand-in spoken in its tools",
            bool(spoken),
            f"read back as {', '.join(dict.fromkeys(spoken))}"
            if spoken
            else f"none of its calls ({', '.join(names) or 'none'}) reads back as {', '.join(SPOKEN)}",
        ),
        Check(
            "deny in the run",
            found.cli_blocked >= 1 and not found.contaminated,
            f"{found.cli_blocked} of {found.cli_calls} call(s) of {tool.cli} refused with the deny marker, "
            f"{len(found.leaks)} leak(s)",
        ),
    ]


class _Conformance(ItemLife):
    """An item's life with the stdout probe run after the block probe, in the same sandbox and setup."""

    stdout: tuple[Check, ...] = ()

    def prove_block(
        self, build: Provisioned, setup: AgentSetup, sandbox: Sandbox | None, workspace: Workspace, env: dict[str, str]
    ) -> None:
        super().prove_block(build, setup, sandbox, workspace, env)
        folder = replace(setup, config_dir=setup.config_dir.parent / STDOUT_PROBE)
        self.stdout = (stdout_check(self.agent, build, folder, sandbox, workspace.repo, env),)
