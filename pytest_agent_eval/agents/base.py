"""The coding agent under test, described once: how it is installed, reaches a model, is given an MCP server,
is denied the retrieval tool's CLI, is driven, and how its transcript is read into the common Session.

The harness (:mod:`pytest_agent_eval.run.item`) drives any :class:`CodingAgent` the same way; only its
implementation knows the agent's flags, config files and transcript format. Claude Code
(:mod:`pytest_agent_eval.agents.claude_code`) is the built-in one. A project selects another with
``--agent-eval-agent MODULE:ATTR`` (ini ``agent_eval_agent``), naming a :class:`CodingAgent` object (see
:func:`load_agent`), as ``--agent-eval-tool`` names a retrieval tool.

Where agents differ (see docs/extending.md, "Adding an agent"), and so what an implementation decides:

* the model API it speaks (:attr:`CodingAgent.api`: the harness's model server answers ``messages`` and
  ``responses``), and how it is pointed at the loopback endpoint (environment variables, or its config file);
* its config: files given by flags, or a folder under HOME (``$CODEX_HOME``, ``~/.gemini``), with the MCP servers
  in its own format;
* the deny of the tool's CLI: a PreToolUse hook, a rules file, a policy file or a permission table; whichever,
  a denied shell call's result, as :meth:`CodingAgent.read_transcript` gives it, must carry the tool's
  ``deny_marker``: that is the contamination metric's only proof of a block;
* how turns continue (``--resume <id>``, ``exec resume``) and where the per-request token counts are (the
  stream, or a session file beside it): the driver and the reader, between them, put them in the Session.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

# What a run is made of is the harness's (its turn runner reads a Drive); the protocol names them here, where an
# agent's implementation imports the types its methods take.
from pytest_agent_eval.harness.drivers.drive import AgentConfig, Drive
from pytest_agent_eval.harness.drivers.drive import DriveOptions as DriveOptions

if TYPE_CHECKING:
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.harness.provision import Provisioned
    from pytest_agent_eval.model.scripted import SpokenTool
    from pytest_agent_eval.transcript import Session
    from pytest_agent_eval.transcript.sample import Sample

# The model APIs the harness's model server answers (pytest_agent_eval.model.server): Anthropic Messages
# (``POST /v1/messages``), OpenAI Responses (``POST /v1/responses``) and Gemini (``POST /v1beta/models/…``).
ModelApi = Literal["messages", "responses", "gemini"]
HEADLESS, INTERACTIVE = "headless", "tmux"  # the modes an item is driven in (--agent-eval-mode)
# The tool dialects the scripted stand-in model speaks (pytest_agent_eval.model): each built-in agent's tools in its
# API — Claude Code's Bash/Read/Grep (messages), Codex CLI's shell (responses), Gemini CLI's (gemini), OpenCode's
# bash (messages).
STAND_IN_DIALECTS = ("claude-code", "codex", "gemini", "opencode")


@dataclass(frozen=True)
class StandIn:
    """A ``stand_in`` for an agent that offers a built-in agent's API but some of the tools the scripted stand-in asks
    for (``Bash``, ``Read``, ``Grep``) under names of its own: the ``dialect`` (of :data:`STAND_IN_DIALECTS`, the
    Messages API's ``claude-code`` one) and its names for them (:class:`~pytest_agent_eval.model.scripted.SpokenTool`:
    the stand-in hears its calls in the common names and asks for them in its own)."""

    dialect: str
    tools: tuple[SpokenTool, ...] = ()


@dataclass(frozen=True)
class McpServer:
    """An MCP stdio server the agent is given: its name (the agent's tools are ``mcp__<name>__…`` in the common
    vocabulary), its command line and its own environment."""

    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class AgentSetup:
    """What the harness hands :meth:`CodingAgent.configure` for one agent process tree (an attempt of the run,
    or the block probe).

    ``config_dir`` is a folder outside the workspace for the agent's config files (the item's run folder, or the
    probe's); the sandbox shows only the files :class:`AgentConfig` lists. ``home`` is the attempt's HOME,
    renewed for every attempt (an agent that reads its config under HOME writes it there, each time).
    ``model_url`` is the harness's loopback model server (a stand-in, a cassette, or the forwarder to the real
    API). ``mcp_servers`` is empty in the without-arm. ``denied_cli`` is the retrieval tool's CLI, which the
    agent's shell must not run; ``deny_reason`` is what the denial tells the model (it contains the tool's
    ``deny_marker``).
    """

    config_dir: Path
    home: Path
    model_url: str
    mcp_servers: tuple[McpServer, ...]
    denied_cli: str
    deny_reason: str


class CodingAgent(ABC):
    """Everything the harness needs of a coding agent; nothing outside its implementation names it.

    An implementation is a frozen dataclass (or any object) with these attributes and methods:

    ``name`` is its id in records and folder names (``claude-code``); ``title`` how reports name it;
    ``package`` and ``version`` the npm package and the pinned release :meth:`provision` installs;
    ``executable`` the command the package provides; ``runtimes`` what else must resolve on its PATH;
    ``api`` the model API it speaks; ``modes`` the ways it can be driven (``headless``; ``tmux`` where it has an
    interactive UI worth driving); ``passed_env`` the variables of the harness's environment it may get besides
    the common allow-list (:data:`pytest_agent_eval.harness.drivers.ALLOWED_ENV`); ``shell_prefix_var`` the
    variable through which it runs every shell command behind a prefix (the sandbox puts its jail there; None
    when it has none); ``shell_from`` where an agent without one looks its shell up instead, so where the sandbox
    puts the jailed shell (``"passwd"``: its user's password entry, ``"SHELL"``, ``"PATH"``: a ``bash`` there; None
    by default: nowhere); ``managed_paths`` the machine-wide settings it would read (hidden by the sandbox);
    ``stand_in`` the dialect of :data:`STAND_IN_DIALECTS` in which the scripted stand-in model asks for its tools
    (the built-in agent whose tool names and API it shares), or a :class:`StandIn` naming the dialect and the
    agent's own names of its tools, None when it shares none: then the stand-in cannot drive it, and an item of it
    against the stand-in is an error saying so, never a run without tool calls.
    """

    name: str
    title: str
    package: str
    version: str
    executable: str
    api: ModelApi
    modes: tuple[str, ...]
    runtimes: tuple[str, ...]
    passed_env: frozenset[str]
    shell_prefix_var: str | None
    shell_from: str | None = None
    managed_paths: tuple[Path, ...]
    stand_in: str | StandIn | None = None

    def provision(self, cache: Path, spec: str | None = None) -> Provisioned:
        """The agent's CLI, ready to run: with ``spec`` (a version or ``latest``) installed from npm under ``cache``
        (locked, recorded in ``builds.log``); without, the :attr:`executable` on PATH when there is one, else the
        pinned :attr:`version`. Its ``origin`` is the record's ``agent_provision``."""
        from pytest_agent_eval.harness.provision import provision_agent

        return provision_agent(self.executable, self.package, self.version, spec, Path(cache))

    @abstractmethod
    def environment(self, model_url: str) -> dict[str, str]:
        """The agent's own variables: no telemetry, updates or first-run prompts; the model endpoint and a
        placeholder key where the agent takes them from its environment (never a real key: the forwarder holds
        it)."""

    def process_environment(self, base: Mapping[str, str], model_url: str) -> dict[str, str]:
        """The environment of the agent's process: the allow-listed part of ``base`` (the common list and
        :attr:`passed_env`: no credential of ``base`` passes) with :meth:`environment`."""
        from pytest_agent_eval.harness.drivers import passed_environment

        return {**passed_environment(base, self.passed_env), **self.environment(model_url)}

    @abstractmethod
    def configure(self, setup: AgentSetup) -> AgentConfig:
        """Write the agent's config for one process tree: the MCP servers, the deny of ``setup.denied_cli``, the
        settings that keep the user's own config out; return where they are."""

    @abstractmethod
    def check_deny(self, config: AgentConfig, cli: str, env: Mapping[str, str], proven: set[str]) -> list[str]:
        """Check the deny ``config`` installs without starting the agent (run its hook program, parse its rules
        on a few commands): the problems found, empty when it holds. What is in ``proven`` passed earlier in
        this process and need not run again; add what passes."""

    @abstractmethod
    def block_probe(self, command: str) -> Any:
        """A model backend (:class:`pytest_agent_eval.model.server.Backend`, in :attr:`api`) that asks for one
        shell call of ``command`` and then ends the turn: the probe that proves the deny through the agent."""

    @property
    def stand_in_dialect(self) -> str | None:
        """The dialect of :attr:`stand_in` (one of :data:`STAND_IN_DIALECTS` when it is right)."""
        return self.stand_in.dialect if isinstance(self.stand_in, StandIn) else self.stand_in

    @property
    def stand_in_tools(self) -> tuple[SpokenTool, ...]:
        """The agent's own names of the stand-in's tools (:class:`StandIn`), none when it offers them as they are."""
        return self.stand_in.tools if isinstance(self.stand_in, StandIn) else ()

    def stand_in_problem(self) -> str | None:
        """Why the scripted stand-in model cannot drive this agent (its :attr:`stand_in` dialect), None when it can."""
        if self.stand_in_tools and self.stand_in_dialect != "claude-code":
            return (
                f"{self.title} ({self.name}) declares its own names of the stand-in's tools in the "
                f"{self.stand_in_dialect!r} dialect: the stand-in speaks renamed tools in the Messages API's "
                "(StandIn('claude-code', tools=...)) only"
            )
        if self.stand_in_dialect in STAND_IN_DIALECTS:
            return None
        declared = "declares no stand_in" if self.stand_in is None else f"declares stand_in={self.stand_in!r}"
        return (
            f"{self.title} ({self.name}) {declared}: the scripted stand-in model asks for tools in the dialect of a "
            f"built-in agent ({', '.join(STAND_IN_DIALECTS)}: its tool names in its API), and would make no tool "
            "call in another agent's tools; declare the dialect whose tools the agent offers (stand_in=...), with "
            "its own names of those it names otherwise (stand_in=StandIn('claude-code', tools=(SpokenTool(...), "
            "...))), or run it against a real model (--agent-eval-backend anthropic, openai or gemini) or a cassette "
            '(docs/extending.md, "The stand-in model and a new agent")'
        )

    def speech(self) -> Any:
        """How the scripted stand-in's decisions are spoken in this agent's tools and API (a
        :class:`pytest_agent_eval.model.speech.Speech`, in its folder's ``stand_in.py``): the model server reads the
        agent's requests with it and renders the policy's reply back. None: the agent's tools are the common
        vocabulary (Claude Code's), or it shares a built-in agent's (its :attr:`stand_in` names it)."""
        return None

    def cassette(self, segments: Sequence[Path]) -> Any:
        """A model backend (:class:`pytest_agent_eval.model.server.Backend`) that replays this agent's recorded run
        (its ``segments``) in the API it speaks. None: it has none of its own, and replays as the built-in agent its
        :attr:`stand_in` names, whose record format it shares
        (:func:`pytest_agent_eval.run.backends.cassette_backend`)."""
        return None

    def ends_turn(self, event: Mapping[str, Any]) -> bool:
        """Whether ``event``, the last of a segment, ends a finished turn (a segment that ends otherwise was cut off:
        its item runs again on resume). Default: a stream-json ``result`` or a ``turn.completed`` (the events Claude
        Code's and Codex CLI's headless streams end a turn with)."""
        return event.get("type") in ("result", "turn.completed")

    def read_interactive(self, path: Path) -> Session:
        """The session of an interactive session file, or of the newest in a folder of them (``agent-eval score
        --session``); a TranscriptError when the agent keeps none that agent-eval reads."""
        from pytest_agent_eval.transcript import TranscriptError

        raise TranscriptError(
            f"{self.title} keeps no interactive session file agent-eval reads: give its record's FILEs"
        )

    def drive(self, run: Drive) -> RunRecord:
        """Drive ``run`` (:meth:`run_session`); a mode the agent does not have is a ValueError naming it."""
        if run.mode not in self.modes:
            raise ValueError(f"{self.title} is driven {' or '.join(self.modes)} only, not {run.mode!r}")
        return self.run_session(run)

    @abstractmethod
    def run_session(self, run: Drive) -> RunRecord:
        """Ask ``run.questions`` as the turns of one session, in ``run.mode`` (one of :attr:`modes`), with the
        transcript's segments written to ``run.out_dir`` as ``run-<label>…``. Raises
        :class:`~pytest_agent_eval.harness.drivers.AgentInfraError` when the run yields nothing to score
        (:class:`~pytest_agent_eval.harness.drivers.TurnError`, with the record so far, when a turn fails)."""

    def record_files(self, segments: Sequence[Path]) -> list[Path]:
        """Every file :meth:`read_transcript` reads for a run whose segments are ``segments``: the segments, and any
        record the driver kept beside them (Codex's rollout). A baseline packs them all, so it reads back whole."""
        return list(segments)

    def recognise(self, sample: Sample) -> str | None:
        """Is this mine? The kind of this agent's record the file that ``sample`` begins is (a short name the
        output uses: ``rollout``, ``chat record``…), or None when it is not one. It decides from the records'
        content, never from the file's name nor its first line alone (``agent-eval score`` asks every agent; a file
        two agents claim is refused, naming both). An agent that does not say is never guessed."""
        return None

    def read_record(self, files: Sequence[Path], kind: str, companion: Path | None = None) -> list[Session]:
        """The session(s) in ``files`` (one record of ``kind``, with its later turns' files), as a user gives them to
        ``agent-eval score``, ``companion`` the record it needs beside it when given (Codex's rollout, Gemini CLI's
        chat record). A file holding several runs is several sessions. What the record does not hold is said in
        each session's ``missing``, never read as zero. Default: :meth:`read_transcript`."""
        return [self.read_transcript(files)]

    @abstractmethod
    def read_transcript(self, segments: Sequence[Path]) -> Session:
        """The common Session of what :meth:`drive` wrote (the record's ``segments``, in turn order): tools in the
        common vocabulary (``Bash``, ``Read``, ``mcp__<server>__<tool>``), one Message per model request with its
        usage, a denied call's result carrying the tool's ``deny_marker``."""


def load_agent(reference: str) -> CodingAgent:
    """The :class:`CodingAgent` that ``MODULE:ATTR`` names (``MODULE`` importable: installed, or on pytest's
    ``pythonpath``); raises ValueError saying what is wrong."""
    from pytest_agent_eval.reference import load_reference

    return load_reference(reference, CodingAgent)
