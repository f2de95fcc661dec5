"""The run's settings: command-line options, their ini keys, and the thresholds file.

Precedence, stated once: the ``agent_eval`` marker's arguments (``entries=``, ``arms=``, ``runs=``, ``turns=``)
beat a command-line option for the one test they decorate (:func:`for_test`); a command-line option beats its ini
key (``[pytest]`` / ``[tool.pytest.ini_options]``), which beats the built-in default (:func:`resolve`).
Thresholds come from ``agent-eval.yaml`` (see :mod:`pytest_agent_eval.report.gates`).

Nothing here touches the network or npm: it only parses text.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_agent_eval.cases import ARM_NAMES, Arm

# pytest imports this module in every session (the option table), evals or not: the tool (its fingerprints) and
# the shard planner load only when a setting needs them.
if TYPE_CHECKING:
    from pytest_agent_eval.shard import Shard
    from pytest_agent_eval.tool import RetrievalTool

BACKENDS = ("auto", "anthropic", "scripted", "cassette")  # the models behind the agent (pytest_agent_eval.model)
MODES = ("headless", "tmux", "all")  # seed 004's MODE token: claude -p, the TUI in tmux, or both
DEFAULT_OUT = "agent-eval-out"
CAMPAIGN_TURNS = 3  # the seeds' campaign: the README question and two in-flow follow-ups


_PLACEHOLDER_WORDS = ("placeholder", "dummy", "fake", "test", "xxx", "your")


def is_real_key(key: str | None) -> bool:
    """An ANTHROPIC_API_KEY that looks issued by Anthropic, not a stand-in such as ``sk-test`` or ``dummy``:
    what ``--agent-eval-backend auto`` decides by (here, so the report header need not load the model package)."""
    if not key or not key.startswith("sk-ant-") or len(key) < 40:
        return False
    return not any(word in key.lower() for word in _PLACEHOLDER_WORDS)


class OptionError(ValueError):
    """A bad option or ini value; the message names the option."""


class AgentEvalConfig:
    """The session's settings: one attribute per option of :data:`OPTIONS` (its ``attr``), with the defaults
    below, and what the plugin fills in (``campaign_dir``, ``thresholds_file``, ``tool_reference``).

    ``AgentEvalConfig(runs=3)`` sets what it names. A plain class, not a dataclass: pytest makes one in every
    session, evals or not, and generating a dataclass's methods for thirty fields costs a suite that runs no eval
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
    campaign_dir: Path | None = None  # the campaign folder this session writes; set by the plugin
    shard: Shard | None = None  # run only this shard of the selected items
    save_baseline: str | None = None  # keep this session's campaign as a named baseline
    replay: str | None = None  # a baseline whose transcripts the model replays, item by item (the $0 gate)
    compare_min_pairs: int | None = None  # None: every (entry, arm) the baseline scored must be matched
    tool_reference: str | None = None  # the MODULE:ATTR that named the tool, kept in the manifest for a resume
    json_path: Path | None = None  # also write the machine summary (summary.json) here

    def __init__(self, **settings: Any) -> None:
        self.arms = [Arm("with"), Arm("without")]
        self.corpus_dir = cache_root() / "corpus"
        self.cassettes = []
        self.compare_fail = []
        self._tool: RetrievalTool | None = None
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


_SETTINGS = frozenset(AgentEvalConfig.__annotations__) | {"tool"}


PACKAGED = Path(__file__).resolve().parent / "data"  # the default corpus.json and agent-eval.yaml ship here


def cache_root() -> Path:
    """Where provisioned CLIs, indexes and the corpus clones live across runs."""
    if os.environ.get("AGENT_EVAL_CACHE"):
        return Path(os.environ["AGENT_EVAL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-agent-eval"


# -- value parsers: each raises OptionError naming nothing but the value; the caller adds the option ------------
def parse_arms(text: str) -> list[Arm]:
    arms: list[Arm] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, spec = part.partition("@")
        if name not in ARM_NAMES:
            raise OptionError(
                f"unknown arm {name!r} in {text!r} (arms are 'with' and 'without', optionally @<version>)"
            )
        if "@" in part and not spec:
            raise OptionError(f"arm {part!r} has an empty version after '@'")
        if spec.startswith("local:") and not spec[len("local:") :]:
            raise OptionError(f"arm {part!r}: local: needs a path")
        arms.append(Arm(name, spec or None))
    if not arms:
        raise OptionError(f"no arm in {text!r}")
    labels = [a.label for a in arms]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise OptionError(f"arm {duplicates[0]!r} given twice in {text!r}")
    return arms


def parse_positive_int(text: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise OptionError(f"expected a positive integer, got {text!r}")
    return value


def parse_count(text: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise OptionError(f"expected a whole number >= 0, got {text!r}")
    return value


# Named tuples, not frozen dataclasses, here and below: this module loads in every pytest session (see
# AgentEvalConfig).
class Rule(NamedTuple):
    """One regression rule of compare-fail (pytest-benchmark's UX): ``residual_tokens:+20%``.

    The sign is the direction that fails (``-`` a drop, ``+`` a rise; without one, the figure's bad direction);
    ``pt`` is percentage points of a share, ``%`` a change relative to the baseline. With ``@95``
    (``confidence``) the rule is noise-aware: it fails only when the change's 95% bootstrap interval lies
    entirely beyond the threshold, and cannot decide over fewer than three runs a side.
    """

    metric: str
    threshold: float  # in the unit's terms: 5 means 5pt or 5%
    unit: str  # "pt" | "%"
    direction: int  # -1 a drop fails, +1 a rise fails
    confidence: int | None = None  # percent; None: the point change decides

    def __str__(self) -> str:
        level = f"@{self.confidence}" if self.confidence is not None else ""
        return f"{self.metric}:{'+' if self.direction > 0 else '-'}{self.threshold:g}{self.unit}{level}"

    def change(self, before: float, after: float) -> float:
        """The change in the rule's unit: points of a share, or percent of the baseline."""
        if self.unit == "pt":
            return (after - before) * 100
        if before == 0:
            return 0.0 if after == 0 else math.copysign(math.inf, after)
        return (after / before - 1) * 100

    def fails(self, change: float) -> bool:
        # A hair of tolerance so a change of exactly the threshold fails despite float rounding.
        return change * self.direction >= self.threshold - 1e-9


# Patterns, compiled (and cached by re) when first matched: most sessions never read a rule or a name.
_RULE_PATTERN = r"^(?P<metric>[a-z_]+):(?P<sign>[+-]?)(?P<number>\d+(?:\.\d+)?)(?P<unit>pt|%)(?:@(?P<confidence>\d+))?$"


def parse_rules(text: str) -> list[Rule]:
    """``"allocation:-5pt,residual_tokens:+20%"`` → rules; the error names the first token it cannot read.

    A rule names a figure of :mod:`pytest_agent_eval.metrics.figures` that has a better direction (an old
    spelling such as ``residual`` or ``sufficient`` is read as today's name).
    """
    from pytest_agent_eval.metrics.figures import FIGURES, lookup  # the catalogue loads only when a rule is read

    rules = []
    for token in (t.strip() for t in str(text).split(",")):
        if not token:
            continue
        match = re.match(_RULE_PATTERN, token)
        if match is None:
            raise OptionError(
                f"cannot read {token!r}: expected METRIC:[+|-]NUMBER(pt|%)[@CONFIDENCE], "
                "e.g. allocation:-5pt, residual_tokens:+20% or allocation:-5pt@95"
            )
        figure = lookup(match["metric"])
        if figure is None or figure.better is None:
            known = ", ".join(f.name for f in FIGURES.values() if f.better is not None)
            raise OptionError(f"unknown metric in {token!r}; known: {known}")
        if match["unit"] == "pt" and not figure.is_share:
            raise OptionError(
                f"{token!r}: {figure.name} is not a share, so points mean nothing; "
                f"use a relative threshold like {figure.name}:+20%"
            )
        confidence = int(match["confidence"]) if match["confidence"] else None
        if confidence is not None and not 50 <= confidence <= 99:
            raise OptionError(f"{token!r}: the confidence after '@' is a percent between 50 and 99, e.g. @95")
        sign = match["sign"]
        direction = (1 if sign == "+" else -1) if sign else -figure.better
        rules.append(Rule(figure.name, float(match["number"]), match["unit"], direction, confidence))
    if not rules:
        raise OptionError(f"no rule in {text!r}")
    return rules


def parse_positive_float(text: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise OptionError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise OptionError(f"expected a positive number, got {text!r}")
    return value


def parse_version(text: str) -> str:
    value = str(text).strip()
    if not value or any(c.isspace() for c in value):
        raise OptionError(f"expected a version ('1.6.1', 'latest' or 'local:<path>'), got {text!r}")
    if value == "local:":
        raise OptionError("local: needs a path")
    return value


def parse_tool(text: str) -> RetrievalTool:
    from pytest_agent_eval.tool import load_tool

    try:
        return load_tool(str(text))
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def parse_word(text: str) -> str:
    value = str(text).strip()
    if not value or any(c.isspace() for c in value):
        raise OptionError(f"expected a single word, got {text!r}")
    return value


def parse_backend(text: str) -> str:
    value = str(text).strip()
    if value not in BACKENDS:
        raise OptionError(f"expected one of {', '.join(BACKENDS)}, got {text!r}")
    return value


def parse_mode(text: str) -> str:
    value = str(text).strip()
    if value not in MODES:
        raise OptionError(f"expected one of {', '.join(MODES)}, got {text!r}")
    return value


_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def parse_name(text: str) -> str:
    """A baseline's name: one safe path component."""
    value = str(text).strip()
    if not re.match(_NAME_PATTERN, value):
        raise OptionError(f"expected a name of letters, digits, '.', '_' or '-', got {text!r}")
    return value


def parse_baseline(text: str) -> str:
    """A baseline as given (a name, 'latest' or a path): :func:`pytest_agent_eval.campaign.baseline.find`
    resolves it once the out folder is known."""
    value = os.path.expanduser(str(text).strip())
    if not value:
        raise OptionError("expected a baseline name, 'latest' or a folder, got an empty value")
    return value


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise OptionError(f"expected true or false, got {text!r}")


def parse_path(text: str) -> Path:
    value = str(text).strip()
    if not value:
        raise OptionError("expected a path, got an empty value")
    return Path(os.path.expanduser(value))


def parse_paths(text: str) -> list[Path]:
    paths = [parse_path(part) for part in str(text).split(",") if part.strip()]
    if not paths:
        raise OptionError("expected one or more comma-separated paths")
    return paths


def parse_shard_option(text: str) -> Shard:
    from pytest_agent_eval.shard import ShardError, parse_shard

    try:
        return parse_shard(text)
    except ShardError as exc:
        raise OptionError(str(exc)) from None


class Option(NamedTuple):
    """One setting: its flag, its ini key, how its text becomes a value, and the config field it fills."""

    flag: str
    ini: str
    attr: str
    parse: Callable[[Any], Any]
    help: str
    metavar: str | None = None
    is_flag: bool = False
    short: str | None = None  # a second spelling users type in the headline command (--arms)
    bare: str | None = None  # the value the flag takes when given without one (--agent-eval-compare: latest)


OPTIONS: tuple[Option, ...] = (
    Option(
        "--agent-eval-arms",
        "agent_eval_arms",
        "arms",
        parse_arms,
        "arms to run, comma-separated: with,without; an arm may pin a build: with@1.6.1, with@local:<path> "
        "(default with,without); item ids write @ as ':' (express-with:1.6.1-1), so -k 'with:1.6.1' selects it",
        "ARMS",
        short="--arms",
    ),
    Option(
        "--agent-eval-runs",
        "agent_eval_runs",
        "runs",
        parse_positive_int,
        "runs per corpus entry and arm (default 2)",
        "N",
    ),
    Option(
        "--agent-eval-turns",
        "agent_eval_turns",
        "turns",
        parse_positive_int,
        "use the first N '||' turns of each question (default: all)",
        "N",
    ),
    Option(
        "--agent-eval-tool-version",
        "agent_eval_tool_version",
        "tool_version",
        parse_version,
        "build of the retrieval tool for arms that pin none: a version, 'latest' or 'local:<path>' "
        "(default the version the tool pins, RetrievalTool.version)",
        "VERSION",
    ),
    Option(
        "--agent-eval-corpus",
        "agent_eval_corpus",
        "corpus",
        parse_path,
        "corpus file (default corpus.json at rootdir, else the one shipped with the package)",
        "FILE",
    ),
    Option(
        "--agent-eval-corpus-dir",
        "agent_eval_corpus_dir",
        "corpus_dir",
        parse_path,
        "where corpus repositories are cloned (default ~/.cache/pytest-agent-eval/corpus)",
        "DIR",
    ),
    Option(
        "--agent-eval-out",
        "agent_eval_out",
        "out",
        parse_path,
        "folder that holds campaign folders: each session writes a new <time>-<hash>/ in it with the manifest, "
        "items.jsonl, every item's transcripts, summary.json and report.html (default agent-eval-out at rootdir)",
        "DIR",
    ),
    Option(
        "--agent-eval-resume",
        "agent_eval_resume",
        "resume",
        parse_path,
        "finish this campaign folder: items it completed are re-scored from their transcripts, not re-run; "
        "the rest run into the same folder",
        "CAMPAIGN",
    ),
    Option(
        "--agent-eval-retries",
        "agent_eval_retries",
        "retries",
        parse_count,
        "re-run an item whose agent hit an infrastructure error up to N more times (gate failures are never "
        "retried; each failed attempt is kept in attempt-<k>/) (default 0)",
        "N",
    ),
    Option(
        "--agent-eval-compare",
        "agent_eval_compare",
        "compare",
        parse_baseline,
        "baseline to compare this session against at the end: a name saved with --agent-eval-save-baseline, "
        "'latest' (the newest campaign in --agent-eval-out; the flag alone, after the test paths, means it), a "
        "campaign folder or a JSON of item records",
        "BASELINE",
        bare="latest",
    ),
    Option(
        "--agent-eval-compare-fail",
        "agent_eval_compare_fail",
        "compare_fail",
        parse_rules,
        "fail the session when a figure regressed against --agent-eval-compare, e.g. "
        "allocation:-5pt,sufficient_share:-10pt,residual_tokens:+20%; @95 after a rule fails it only when the "
        "change's 95% bootstrap interval lies beyond the threshold (allocation:-5pt@95)",
        "RULES",
    ),
    Option(
        "--agent-eval-campaign",
        "agent_eval_campaign",
        "campaign",
        parse_word,
        'run only the corpus entries tagged with this campaign ("campaign": "readme"), 3 turns unless '
        "--agent-eval-turns, and print the seed's campaign tables",
        "NAME",
    ),
    Option(
        "--agent-eval-include-contaminated",
        "agent_eval_include_contaminated",
        "include_contaminated",
        parse_bool,
        "keep contaminated without-arm runs in the campaign tables (dropped by default)",
        is_flag=True,
    ),
    Option(
        "--agent-eval-model", "agent_eval_model", "model", parse_word, "model the agent runs (default sonnet)", "MODEL"
    ),
    Option(
        "--agent-eval-effort",
        "agent_eval_effort",
        "effort",
        parse_word,
        "the agent's --effort (default high)",
        "EFFORT",
    ),
    Option(
        "--agent-eval-max-budget-usd",
        "agent_eval_max_budget_usd",
        "max_budget_usd",
        parse_positive_float,
        "the agent's --max-budget-usd per process (default 4)",
        "USD",
    ),
    Option(
        "--agent-eval-timeout",
        "agent_eval_timeout",
        "agent_timeout",
        parse_positive_float,
        "seconds one agent process may run before it is killed as an infrastructure error (default 900)",
        "SECONDS",
    ),
    Option(
        "--agent-eval-offline",
        "agent_eval_offline",
        "offline",
        parse_bool,
        "do not try to clone: take each corpus entry from its offline source (npm:, pypi:, a local path)",
        is_flag=True,
    ),
    Option(
        "--agent-eval-backend",
        "agent_eval_backend",
        "backend",
        parse_backend,
        f"model behind the agent: {', '.join(BACKENDS)} (default auto: the real API when "
        "ANTHROPIC_API_KEY holds a real key, else scripted)",
        "NAME",
    ),
    Option(
        "--agent-eval-mode",
        "agent_eval_mode",
        "mode",
        parse_mode,
        "how the agent is driven: headless (claude -p, stream-json), tmux (the interactive TUI, scored from its "
        "session file) or all (both; tmux items are named <entry>-<arm>-tmux-<run>) (default headless)",
        "MODE",
    ),
    Option(
        "--agent-eval-cassette",
        "agent_eval_cassette",
        "cassettes",
        parse_paths,
        "recorded transcripts the cassette backend replays, comma-separated",
        "FILES",
    ),
    Option(
        "--agent-eval-save-baseline",
        "agent_eval_save_baseline",
        "save_baseline",
        parse_name,
        "keep this session's campaign as a named baseline in <out>/baselines/NAME (its records and the "
        "transcripts rescore and replay need), for --agent-eval-compare NAME and --agent-eval-replay NAME",
        "NAME",
    ),
    Option(
        "--agent-eval-replay",
        "agent_eval_replay",
        "replay",
        parse_baseline,
        "the $0 gate: each item's model replays that item's recorded transcript from this baseline (a name, "
        "'latest' or a campaign folder) while the tools run for real, so the figures measure this build's "
        "responses to the same calls",
        "BASELINE",
    ),
    Option(
        "--agent-eval-compare-min-pairs",
        "agent_eval_compare_min_pairs",
        "compare_min_pairs",
        parse_positive_int,
        "the compare gate fails unless at least N (entry, arm) pairs were scored on both sides (default: every "
        "one the baseline scored; a comparison of nothing always fails)",
        "N",
    ),
    Option(
        "--agent-eval-shard",
        "agent_eval_shard",
        "shard",
        parse_shard_option,
        "run shard I of N (1-based) of the selected items, e.g. 2/3 in job 2 of a 3-job CI matrix: a repository's "
        "items stay on one shard; merge the shards' campaigns with 'agent-eval merge'",
        "I/N",
    ),
    Option(
        "--agent-eval-tool",
        "agent_eval_tool",
        "tool",
        parse_tool,
        "the retrieval tool under test: MODULE:ATTR naming a pytest_agent_eval.RetrievalTool object (the module "
        "importable, e.g. through pytest's pythonpath ini) (default codegraph, pytest_agent_eval.CODEGRAPH)",
        "MODULE:ATTR",
    ),
    Option(
        "--agent-eval-json",
        "agent_eval_json",
        "json_path",
        parse_path,
        "also write the session's machine summary (the campaign's summary.json) to this path",
        "PATH",
    ),
)
THRESHOLDS_INI = "agent_eval_thresholds"


def resolve(get_option: Callable[[str], Any], get_ini: Callable[[str], Any], rootpath: Path) -> AgentEvalConfig:
    """Build the config from option values (None when not given) and ini values ('' when not set).

    Raises OptionError naming the flag (or ini key) whose value is bad.
    """
    own_corpus = rootpath / "corpus.json"
    config = AgentEvalConfig(corpus=own_corpus if own_corpus.is_file() else PACKAGED / "corpus.json")
    for option in OPTIONS:
        raw = get_option(option.attr)
        source = option.flag
        if raw is None or (option.is_flag and raw is False):
            raw = get_ini(option.ini)
            source = f"ini {option.ini}"
            if raw in (None, "", []):
                continue
        try:
            value = option.parse(raw)
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
    if config.out is None:
        config.out = rootpath / DEFAULT_OUT
    if config.campaign is not None and config.turns is None:
        config.turns = CAMPAIGN_TURNS  # seed 002: occupancy is only chargeable over several turns
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
    if config.thresholds_file is None and (rootpath / "agent-eval.yaml").is_file():
        config.thresholds_file = rootpath / "agent-eval.yaml"
    elif config.thresholds_file is None and config.corpus == PACKAGED / "corpus.json":
        config.thresholds_file = PACKAGED / "agent-eval.yaml"  # set for the packaged corpus, not for a project's own
    return config


MARKER_ARGS = ("entries", "arms", "runs", "turns")


class TestSettings(NamedTuple):
    """What one eval test runs: the session's settings, narrowed by its ``agent_eval`` marker."""

    arms: list[Arm]
    runs: int
    turns: int | None
    entries: list[str] | None  # the corpus entries it names; None: every entry


def for_test(config: AgentEvalConfig, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> TestSettings:
    """The marker's arguments over the session's settings; OptionError names the bad argument."""
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
    wanted = kwargs.get("entries")
    entries = None if wanted is None else ([wanted] if isinstance(wanted, str) else list(wanted))
    return TestSettings(arms, runs, turns, entries)
