"""``agent-eval check-agent``: a short conformance run of a coding agent (docs/extending.md, "Checking a new
agent"): what it declares, then one without-arm item's whole life against the scripted stand-in — the deny proven
through the agent, the run sealed, the stand-in's decisions spoken in the agent's tools, calls made, the tool's CLI
refused by the agent's own deny. Each check passes or fails naming why."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.tool import RetrievalTool

QUESTION = "Where does send decide the Content-Type of the response?"
_SOURCE = {  # a repository small enough to index and search at once, with a file the stand-in's Grep finds
    "lib/response.js": "function send(body) {\n  // decide the Content-Type\n  return contentType(body);\n}\n",
    "lib/type.js": "function contentType(body) {\n  return typeof body === 'string' ? 'text/html' : 'json';\n}\n",
}
SPOKEN = ("Read", "Grep", "Bash")  # the common tools the stand-in's without-arm asks for


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
        Check("stand-in dialect", problem is None, problem or f"the stand-in speaks {agent.stand_in}'s tools to it"),
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


def check_agent(agent: CodingAgent, tool: RetrievalTool, folder: Path) -> list[Check]:
    """Every check, the run's files under ``folder``; the run is skipped where a declaration rules it out."""
    checks = declared(agent)
    if not all(c.passed for c in checks[:2]):
        return [*checks, Check("run", False, "not driven: fix what it declares first")]
    from pytest_agent_eval.campaign.record import ItemRecord
    from pytest_agent_eval.corpus.cases import Arm, EvalCase
    from pytest_agent_eval.corpus.load import CorpusEntry
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.harness.item import ItemLife
    from pytest_agent_eval.metrics.contamination import contamination
    from pytest_agent_eval.settings.config import AgentEvalConfig

    for path, text in _SOURCE.items():
        (folder / "corpus" / "conformance" / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / "corpus" / "conformance" / path).write_text(text, encoding="utf-8")
    entry = CorpusEntry("conformance", "JavaScript", "https://example.invalid/conformance.git", "small", 2, [QUESTION])
    case = EvalCase(entry, Arm("without"), 1, (QUESTION,))
    cfg = AgentEvalConfig(backend="scripted", offline=True, retries=0, corpus_dir=folder / "corpus", tool=tool)
    life = ItemLife(case, cfg, agent, tool, FailureMemo(cfg.cache, "check-agent"))
    record = ItemRecord(id=case.id, entry=entry.name, arm="without", arm_label="without", run=1)
    try:
        run = life.live(folder / "items" / case.id, folder / "scratch", record)
        session = agent.read_transcript(run.segments)
    except Exception as exc:  # what the harness says went wrong is the finding
        return [*checks, Check("run", False, f"{type(exc).__name__}: {exc}")]
    names = [call.name for call in session.calls]
    spoken = [name for name in names if name in SPOKEN]
    found = contamination(session, tool)
    return [
        *checks,
        Check("deny proven", True, f"the block probe's call of {tool.cli} was refused through the agent"),
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
