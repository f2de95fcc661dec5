"""What one run of an agent is made of, whatever the agent: what its configuration wrote (:class:`AgentConfig`), how
it is driven (:class:`DriveOptions`) and the run itself (:class:`Drive`), which the shared turn runner
(:mod:`pytest_agent_eval.harness.drivers.turns`) reads. The agents' protocol
(:mod:`pytest_agent_eval.agents.base`) names them for an implementation; they live here, below it, so that the
harness never imports the agents (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agent_eval.harness.provision import Provisioned
    from pytest_agent_eval.harness.sandbox import Sandbox


@dataclass(frozen=True)
class AgentConfig:
    """What :meth:`CodingAgent.configure` wrote: ``files`` by role (the agent's own driver finds them there, e.g.
    ``"mcp"``, ``"settings"``), ``env`` the variables that point the agent at them and at the model (added to
    its environment), ``readable`` what the sandbox must show read-only for it at its own path (its config files),
    ``binds`` what it must show read-only at a path inside HOME (docs/sandbox.md, "Every turn sealed as the
    first")."""

    files: Mapping[str, Path] = field(default_factory=dict, hash=False)
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    readable: tuple[Path, ...] = ()
    # (source, destination): a file or folder of the harness's, outside anything the agent can write, shown
    # read-only where the CLI insists on reading it inside HOME (pytest_agent_eval.harness.binds.seal_home)
    binds: tuple[tuple[Path, Path], ...] = ()


@dataclass(frozen=True)
class DriveOptions:
    """How one run is driven, whatever the agent: the model and effort asked for, the budget (where the agent
    takes one), the time a turn may take, the silence that marks a turn stalled, the sandbox (None only where a
    test switched it off)."""

    model: str = "sonnet"
    effort: str = "high"
    max_budget_usd: float = 4.0
    timeout_s: float = 900.0  # per turn
    stall_s: float = 180.0
    sandbox: Sandbox | None = None


@dataclass(frozen=True)
class Drive:
    """One run for :meth:`CodingAgent.drive`: ``questions`` asked as the turns of one session in ``mode``, under
    ``config`` (what :meth:`CodingAgent.configure` wrote) and ``options``; the agent's process starts in ``cwd`` with
    exactly ``env``, and the transcript's segments are written to ``out_dir`` as ``run-<label>…``."""

    build: Provisioned
    questions: Sequence[str]
    mode: str
    config: AgentConfig
    options: DriveOptions
    label: str
    out_dir: Path
    cwd: Path
    env: Mapping[str, str]
