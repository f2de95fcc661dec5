"""The run's settings: command-line options, their ini keys, the thresholds file, and a test's marker.

Precedence, stated once: the ``agent_eval`` marker's arguments (``entries=``, ``arms=``, ``runs=``, ``turns=``)
beat a command-line option for the one test they decorate (:func:`for_test`); a command-line option beats its ini
key (``[pytest]`` / ``[tool.pytest.ini_options]``), which beats the built-in default (:func:`resolve`). Thresholds
come from ``agent-eval.yaml`` (see :mod:`pytest_agent_eval.metrics.gates`).

The option table is :mod:`pytest_agent_eval.settings.options`, the parsers of the options' texts
:mod:`pytest_agent_eval.settings.parsers`: the settings are resolved for the first agent item (or, when a setting is
given, as the session starts), and defaults need no parser. Settings only: what a session learns as it runs (its
campaign folder) is the evaluation session's (:mod:`pytest_agent_eval.run.evaluation`). Nothing here touches
the network or npm.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_agent_eval.corpus.cases import Arm
from pytest_agent_eval.harness.cache import cache_root
from pytest_agent_eval.model.keys import is_real_gemini_key, is_real_key, is_real_openai_key
from pytest_agent_eval.settings.options import OPTIONS, THRESHOLDS_FILE, THRESHOLDS_INI, OptionError

# The tool (its fingerprints), the parsers and the shard planner load only when a setting needs them.
if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.settings.parsers import Rule
    from pytest_agent_eval.settings.shard import Shard
    from pytest_agent_eval.tool import RetrievalTool

DEFAULT_OUT = "agent-eval-out"
CAMPAIGN_TURNS = 3  # a campaign entry: its question and two in-flow follow-ups (docs/campaigns-and-ci.md)


# The real API ``auto`` forwards to, by the API the agent speaks: (backend, the variable holding its key, the check).
_REAL_APIS = {"messages": ("anthropic", "ANTHROPIC_API_KEY", is_real_key),
              "responses": ("openai", "OPENAI_API_KEY", is_real_openai_key),
              "gemini": ("gemini", "GEMINI_API_KEY", is_real_gemini_key)}  # fmt: skip


def auto_backend(api: str = "messages") -> tuple[str, str]:
    """What ``--agent-eval-backend auto`` is for an agent speaking ``api``, and why: the forwarder to the real API
    when its key variable holds a real key, else the scripted stand-in."""
    backend, variable, real = _REAL_APIS[api]
    key = os.environ.get(variable)
    if not key:
        return "scripted", f"no {variable}"
    return (backend, variable) if real(key) else ("scripted", "not a real key")


class AgentEvalConfig:
    """The session's settings: one attribute per option of :data:`OPTIONS` (its ``attr``), with the defaults
    below, and what :func:`resolve` derives from them (``thresholds_file``, ``tool_reference``,
    ``agent_reference``).

    ``AgentEvalConfig(runs=3)`` sets what it names. A plain class, not a dataclass: an xdist controller makes
    one in every session, evals or not, and generating a dataclass's methods for thirty fields costs such a suite
    more than the whole option table (``bench/load_bench.py --instructions``).
    """

    arms: list[Arm]  # made per config in __init__, as are the other lists and corpus_dir
    runs: int = 2
    turns: int | None = None  # None: every `||` turn of the question
    tool_version: str | None = None  # None: the tool's own default (RetrievalTool.version)
    corpus: Path = Path("corpus.json")
    corpus_dir: Path
    out: Path | None = None  # the parent of campaign folders; resolve() makes it agent-eval-out at rootdir
    model: str = "sonnet"
    effort: str = "high"
    max_budget_usd: float = 4.0
    agent_timeout: float = 900.0
    offline: bool = False
    backend: str = "auto"
    mode: str = "headless"
    thresholds_file: Path | None = None
    cassettes: list[Path]
    resume: Path | None = None  # a campaign folder to finish instead of starting a new one
    retries: int = 0  # extra attempts for a run that hit an infrastructure error
    compare: str | None = None  # a baseline: a saved baseline's name, "latest", a campaign folder or a JSON of records
    compare_fail: list[Rule]
    campaign: str | None = None  # run only corpus entries whose "campaign" is this
    include_contaminated: bool = False
    shard: Shard | None = None  # run only this shard of the selected items
    save_baseline: str | None = None  # keep this session's campaign as a named baseline
    replay: str | None = None  # a baseline whose transcripts the model replays, item by item (the $0 gate)
    compare_min_pairs: int | None = None  # None: every (entry, arm) the baseline scored must be matched
    tool_reference: str | None = None  # the MODULE:ATTR that named the tool, kept in the manifest for a resume
    agent_reference: str | None = None  # the MODULE:ATTR that named the agent, kept so too
    agents_reference: str | None = None  # --agent-eval-agents as given, kept so too
    json_path: Path | None = None  # also write the machine summary (summary.json) here
    stand_in_answers: str = "cite"  # how the scripted stand-in answers: cite, key, none, wrong
    judge: str | None = None  # MODULE:ATTR of a judge, or "model" (metrics/judge.py); None: no judge

    def __init__(self, **settings: Any) -> None:
        self.arms = [Arm("with"), Arm("without")]
        self.corpus_dir = cache_root() / "corpus"
        self.cassettes = []
        self.compare_fail = []
        self._tool: RetrievalTool | None = None
        self._agent: CodingAgent | None = None
        self._agents: list[CodingAgent] = []
        for name, value in settings.items():
            if name not in _SETTINGS:
                raise TypeError(f"AgentEvalConfig has no setting {name!r}")
            setattr(self, name, value)

    @property
    def tool(self) -> RetrievalTool:
        """The retrieval tool under test (--agent-eval-tool), else codegraph, imported when first read: its
        fingerprints cost more to load than the option table, and most sessions never read it."""
        if self._tool is not None:
            return self._tool
        from pytest_agent_eval.tool import CODEGRAPH

        return CODEGRAPH

    @tool.setter
    def tool(self, tool: RetrievalTool | None) -> None:
        self._tool = tool

    @property
    def agent(self) -> CodingAgent:
        """The coding agent that runs the items (--agent-eval-agent), else the built-in default, imported when first
        read."""
        if self._agent is not None:
            return self._agent
        if self._agents:
            return self._agents[0]
        from pytest_agent_eval.agents import DEFAULT_AGENT
        from pytest_agent_eval.agents.base import load_agent

        return load_agent(DEFAULT_AGENT)

    @agent.setter
    def agent(self, agent: CodingAgent | None) -> None:
        self._agent = agent

    @property
    def agents(self) -> list[CodingAgent]:
        """Every agent that runs the items (--agent-eval-agents), the session's own (:attr:`agent`) first."""
        return list(self._agents) if self._agents else [self.agent]

    @agents.setter
    def agents(self, agents: list[CodingAgent]) -> None:
        self._agents = list(agents)

    @property
    def drivers(self) -> list[str]:
        return ["headless", "tmux"] if self.mode == "all" else [self.mode]

    @property
    def default_tool_spec(self) -> str:
        """The build of arms that pin none: --agent-eval-tool-version, else the tool's own default."""
        return self.tool_version or self.tool.version

    def tool_spec(self, arm: Arm) -> str:
        return arm.tool_spec or self.default_tool_spec

    @property
    def cache(self) -> Path:
        return cache_root()

    def model_problem(self) -> str | None:
        """Why no agent could talk to its model here: a cassette that does not exist, the real API without a key.
        The plugin asks as its session starts (each item would fail at setup, and leave an empty campaign); a
        merge or rescore of what ran elsewhere has no model to talk to, and does not."""
        missing = next((path for path in self.cassettes if not path.is_file()), None)
        if missing is not None:
            return f"--agent-eval-cassette: {missing}: no such file"
        for api, (backend, variable, real) in _REAL_APIS.items():
            if self.backend != backend:  # the agents are imported only for a forwarder named outright
                continue
            if not real(os.environ.get(variable)):
                return (
                    f"--agent-eval-backend {backend}: needs a real {variable} in the environment "
                    "(offline, --agent-eval-backend scripted runs a stand-in model)"
                )
            other = next((agent for agent in self.agents if agent.api != api), None)
            if other is not None:
                return (
                    f"--agent-eval-backend {backend}: forwards the {api} API, but {other.title} speaks the "
                    f"{other.api} API (auto gives each agent its own API's forwarder, where its key is set)"
                )
        return None

    def output_problem(self) -> str | None:
        """Why the campaign folder (``--agent-eval-out``) or ``--agent-eval-json`` cannot be written, naming the
        setting; None when both can."""
        from pytest_agent_eval.harness.writes import unwritable

        if self.out is not None and (problem := unwritable(self.out)):
            return f"--agent-eval-out {self.out}: {problem}"
        if self.json_path is not None:
            problem = "is a folder (give a file name)" if self.json_path.is_dir() else unwritable(self.json_path.parent)
            if problem:
                return f"--agent-eval-json {self.json_path}: {problem}"
        return None


_SETTINGS = frozenset(AgentEvalConfig.__annotations__) | {"tool", "agent", "agents"}


PACKAGED = Path(__file__).resolve().parents[1] / "data"  # the default corpus.json and agent-eval.yaml ship here


# -- precedence: an option beats its ini key, which beats the default; a parser error gets the option named --
def resolve(get_option: Callable[[str], Any], get_ini: Callable[[str], Any], rootpath: Path) -> AgentEvalConfig:
    """Build the config from option values (None when not given) and ini values ('' when not set).

    Raises OptionError naming the flag (or ini key) whose value is bad.
    """
    own_corpus = rootpath / "corpus.json"
    config = AgentEvalConfig(corpus=own_corpus if own_corpus.is_file() else PACKAGED / "corpus.json")
    given_agents = None
    for option in OPTIONS:
        raw = get_option(option.attr)
        source = option.flag
        if raw is None or (option.is_flag and raw is False):
            raw = get_ini(option.ini)
            source = f"ini {option.ini}"
            if raw is False or raw in (None, "", []):  # an unset bool key reads False
                continue
        try:
            from pytest_agent_eval.settings.parsers import parser_of  # for a setting given: the defaults need none

            value = parser_of(option)(raw)
        except OptionError as exc:
            raise OptionError(f"{source}: {exc}") from None
        base = Path.cwd() if source == option.flag else rootpath
        if isinstance(value, Path):
            value = base / value
        elif isinstance(value, list):
            value = [base / v if isinstance(v, Path) else v for v in value]
        setattr(config, option.attr, value)
        if option.attr == "tool":
            config.tool_reference = str(raw).strip()
        elif option.attr == "agent":
            config.agent_reference = str(raw).strip()
        elif option.attr == "agents":
            config.agents_reference = str(raw).strip()
            given_agents = source
    if given_agents is not None and config.agent_reference is not None:
        # Two answers to "which agent is the session's": its first of the list, or the one named alone.
        raise OptionError(
            f"{given_agents} and --agent-eval-agent (or its ini key) exclude each other: list every agent in "
            "--agent-eval-agents, the session's own first"
        )
    if config.out is None:
        config.out = rootpath / DEFAULT_OUT
    if config.campaign is not None and config.turns is None:
        config.turns = CAMPAIGN_TURNS  # occupancy costs only on later turns (docs/metrics/occupancy.md)
    if config.compare_fail and config.compare is None:
        raise OptionError("--agent-eval-compare-fail: needs a baseline: --agent-eval-compare (or its ini key)")
    if config.compare_min_pairs is not None and config.compare is None:
        raise OptionError("--agent-eval-compare-min-pairs: needs a baseline: --agent-eval-compare (or its ini key)")
    if config.replay is not None and config.backend not in ("auto", "cassette"):
        raise OptionError(
            f"--agent-eval-replay: the recorded transcripts are the model; it cannot run with "
            f"--agent-eval-backend {config.backend}"
        )
    if config.backend == "cassette" and not config.cassettes and config.replay is None:
        raise OptionError(
            "--agent-eval-backend cassette: needs --agent-eval-cassette FILES (or ini agent_eval_cassette)"
        )
    thresholds = get_ini(THRESHOLDS_INI)
    config.thresholds_file = (rootpath / thresholds) if thresholds else None
    if config.thresholds_file is None and (rootpath / THRESHOLDS_FILE).is_file():
        config.thresholds_file = rootpath / THRESHOLDS_FILE
    elif config.thresholds_file is None and config.corpus == PACKAGED / "corpus.json":
        config.thresholds_file = PACKAGED / THRESHOLDS_FILE  # set for the packaged corpus, not for a project's own
    return config


MARKER_ARGS = ("entries", "arms", "runs", "turns", "agents")


class TestSettings(NamedTuple):
    """What one eval test runs: the session's settings, narrowed by its ``agent_eval`` marker."""

    arms: list[Arm]
    runs: int
    turns: int | None
    entries: list[str] | None  # the corpus entries it names; None: every entry
    agents: list[CodingAgent]  # the agents that run it, the session's own first when it is among them


def for_test(config: AgentEvalConfig, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> TestSettings:
    """The marker's arguments over the session's settings; OptionError names the bad argument."""
    from pytest_agent_eval.settings.parsers import parse_agents, parse_arms, parse_positive_int

    kwargs = kwargs or {}
    unknown = sorted(set(kwargs) - set(MARKER_ARGS))
    if args or unknown:
        raise OptionError(f"takes only keyword arguments {', '.join(MARKER_ARGS)}")
    arms, runs, turns = config.arms, config.runs, config.turns
    if kwargs.get("arms") is not None:
        value = kwargs["arms"]
        arms = parse_arms(value if isinstance(value, str) else ",".join(value))
    if kwargs.get("runs") is not None:
        runs = parse_positive_int(kwargs["runs"])
    if kwargs.get("turns") is not None:
        turns = parse_positive_int(kwargs["turns"])
    agents = config.agents
    if kwargs.get("agents") is not None:
        value = kwargs["agents"]
        agents = parse_agents(value if isinstance(value, str) else ",".join(value))
    wanted = kwargs.get("entries")
    entries = None if wanted is None else ([wanted] if isinstance(wanted, str) else list(wanted))
    return TestSettings(arms, runs, turns, entries, agents)
