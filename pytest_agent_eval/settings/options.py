"""The option table: every setting's flag, ini key and help, as pytest registers them in every session.

The plugin registers these in every session of every project it is installed in, so this module holds data
only: how a text becomes a value lives in :mod:`pytest_agent_eval.settings.parsers` (``parse_<kind>``), which loads when
a setting is given.
"""

from __future__ import annotations

from typing import NamedTuple

# the models behind the agent (pytest_agent_eval.model); anthropic, openai and gemini are the forwarders to the real
# APIs
BACKENDS = ("auto", "anthropic", "openai", "gemini", "scripted", "cassette")
MODES = ("headless", "tmux", "all")  # non-interactive, the TUI in tmux, or both (docs/options.md)
# What the pinned Claude Code takes for --effort: it ignores any other value with a line on stderr, so a typo
# would run (and record) an effort that was never used.
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# How the scripted stand-in answers (pytest_agent_eval.model.scripted.ANSWER_POLICIES, docs/metrics/answers.md).
STAND_IN_ANSWERS = ("cite", "key", "none", "wrong")


class OptionError(ValueError):
    """A bad option, ini key or marker argument; the message names it."""


class Option(NamedTuple):
    """One setting: its flag, its ini key, the config field it fills, and how its text becomes a value."""

    flag: str
    ini: str
    attr: str
    kind: str  # how its text becomes a value: parsers.parse_<kind>
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
        "arms",
        "arms to run, comma-separated: with,without; an arm may pin a build: with@1.6.1, with@local:<path> "
        "(default with,without); item ids write @ as ':' (express-with:1.6.1-1), so -k 'with:1.6.1' selects it",
        "ARMS",
        short="--arms",
    ),
    Option(
        "--agent-eval-runs",
        "agent_eval_runs",
        "runs",
        "positive_int",
        "runs per corpus entry and arm (default 2)",
        "N",
    ),
    Option(
        "--agent-eval-turns",
        "agent_eval_turns",
        "turns",
        "positive_int",
        "use the first N '||' turns of each question (default: all)",
        "N",
    ),
    Option(
        "--agent-eval-tool-version",
        "agent_eval_tool_version",
        "tool_version",
        "version",
        "build of the retrieval tool for arms that pin none: a version, 'latest' or 'local:<path>' "
        "(default the version the tool pins, RetrievalTool.version)",
        "VERSION",
    ),
    Option(
        "--agent-eval-corpus",
        "agent_eval_corpus",
        "corpus",
        "path",
        "corpus file (default corpus.json at rootdir, else the one shipped with the package)",
        "FILE",
    ),
    Option(
        "--agent-eval-corpus-dir",
        "agent_eval_corpus_dir",
        "corpus_dir",
        "path",
        "where corpus repositories are cloned (default ~/.cache/pytest-agent-eval/corpus)",
        "DIR",
    ),
    Option(
        "--agent-eval-out",
        "agent_eval_out",
        "out",
        "path",
        "folder that holds campaign folders: each session writes a new <time>-<hash>/ in it with the manifest, "
        "items.jsonl, every item's transcripts, summary.json and report.html (default agent-eval-out at rootdir)",
        "DIR",
    ),
    Option(
        "--agent-eval-resume",
        "agent_eval_resume",
        "resume",
        "path",
        "finish this campaign folder: items it completed are re-scored from their transcripts, not re-run; "
        "the rest run into the same folder",
        "CAMPAIGN",
    ),
    Option(
        "--agent-eval-retries",
        "agent_eval_retries",
        "retries",
        "count",
        "re-run an item whose agent hit an infrastructure error up to N more times (gate failures are never "
        "retried; each failed attempt is kept in attempt-<k>/) (default 0)",
        "N",
    ),
    Option(
        "--agent-eval-compare",
        "agent_eval_compare",
        "compare",
        "baseline",
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
        "rules",
        "fail the session when a figure regressed against --agent-eval-compare, e.g. "
        "allocation:-5pt,sufficient_share:-10pt,residual_tokens:+20%; @95 after a rule fails it only when the "
        "change's 95% interval (the verdict's) lies beyond the threshold (allocation:-5pt@95)",
        "RULES",
    ),
    Option(
        "--agent-eval-campaign",
        "agent_eval_campaign",
        "campaign",
        "word",
        'run only the corpus entries tagged with this campaign ("campaign": "readme"), 3 turns unless '
        "--agent-eval-turns, and print the campaign tables",
        "NAME",
    ),
    Option(
        "--agent-eval-include-contaminated",
        "agent_eval_include_contaminated",
        "include_contaminated",
        "bool",
        "keep contaminated without-arm runs in the campaign tables (dropped by default)",
        is_flag=True,
    ),
    Option("--agent-eval-model", "agent_eval_model", "model", "word", "model the agent runs (default sonnet)", "MODEL"),
    Option(
        "--agent-eval-effort",
        "agent_eval_effort",
        "effort",
        "effort",
        f"the agent's --effort: {', '.join(EFFORTS)} (default high)",
        "EFFORT",
    ),
    Option(
        "--agent-eval-max-budget-usd",
        "agent_eval_max_budget_usd",
        "max_budget_usd",
        "positive_float",
        "the agent's --max-budget-usd per process (default 4)",
        "USD",
    ),
    Option(
        "--agent-eval-timeout",
        "agent_eval_timeout",
        "agent_timeout",
        "positive_float",
        "seconds one agent process may run before it is killed as an infrastructure error (default 900)",
        "SECONDS",
    ),
    Option(
        "--agent-eval-offline",
        "agent_eval_offline",
        "offline",
        "bool",
        "do not try to clone: take each corpus entry from its offline source (npm:, pypi:, a local path)",
        is_flag=True,
    ),
    Option(
        "--agent-eval-backend",
        "agent_eval_backend",
        "backend",
        "backend",
        f"model behind the agent: {', '.join(BACKENDS)} (default auto: "
        "the real API of the agent's kind when its key variable holds a real key (ANTHROPIC_API_KEY, "
        "OPENAI_API_KEY for the Responses API, GEMINI_API_KEY for the Gemini API), else scripted)",
        "NAME",
    ),
    Option(
        "--agent-eval-mode",
        "agent_eval_mode",
        "mode",
        "mode",
        "how the agent is driven: headless (its non-interactive mode: claude -p), tmux (its interactive UI, scored "
        "from its session file; Claude Code has one) or all (both; tmux items are named "
        "<entry>-<arm>-tmux-<run>) (default headless)",
        "MODE",
    ),
    Option(
        "--agent-eval-stand-in-answers",
        "agent_eval_stand_in_answers",
        "stand_in_answers",
        "stand_in_answers",
        "how the scripted stand-in answers: cite (what it saw), key (the corpus's answer key), none (names nothing) "
        "or wrong (a file outside the key) — to show the answer grades tell them apart (default cite)",
        "POLICY",
    ),
    Option(
        "--agent-eval-judge",
        "agent_eval_judge",
        "judge",
        "judge",
        "grade each answer with a judge too: MODULE:ATTR naming a pytest_agent_eval.metrics.judge.Judge object, or "
        "'model' (the built-in judge: a real model asked through the harness's forwarder, with its key set); its "
        "prompt, answer and grade are kept in the record and a rescore replays them (default: no judge)",
        "JUDGE",
    ),
    Option(
        "--agent-eval-cassette",
        "agent_eval_cassette",
        "cassettes",
        "paths",
        "recorded transcripts the cassette backend replays, comma-separated",
        "FILES",
    ),
    Option(
        "--agent-eval-save-baseline",
        "agent_eval_save_baseline",
        "save_baseline",
        "name",
        "keep this session's campaign as a named baseline in <out>/baselines/NAME (its records and the "
        "transcripts rescore and replay need), for --agent-eval-compare NAME and --agent-eval-replay NAME",
        "NAME",
    ),
    Option(
        "--agent-eval-replay",
        "agent_eval_replay",
        "replay",
        "baseline",
        "the $0 gate: each item's model replays that item's recorded transcript from this baseline (a name, "
        "'latest' or a campaign folder) while the tools run for real, so the figures measure this build's "
        "responses to the same calls",
        "BASELINE",
    ),
    Option(
        "--agent-eval-compare-min-pairs",
        "agent_eval_compare_min_pairs",
        "compare_min_pairs",
        "positive_int",
        "the compare gate fails unless at least N (entry, arm) pairs were scored on both sides (default: every "
        "one the baseline scored; a comparison of nothing always fails)",
        "N",
    ),
    Option(
        "--agent-eval-shard",
        "agent_eval_shard",
        "shard",
        "shard_option",
        "run shard I of N (1-based) of the selected items, e.g. 2/3 in job 2 of a 3-job CI matrix: a repository's "
        "items stay on one shard; merge the shards' campaigns with 'agent-eval merge'",
        "I/N",
    ),
    Option(
        "--agent-eval-tool",
        "agent_eval_tool",
        "tool",
        "tool",
        "the retrieval tool under test: a built-in tool's name (codegraph), an installed distribution's entry point "
        "(group pytest_agent_eval.tools) or MODULE:ATTR naming a pytest_agent_eval.RetrievalTool object (the module "
        "importable, e.g. through pytest's pythonpath ini) (default codegraph, pytest_agent_eval.CODEGRAPH)",
        "TOOL",
    ),
    Option(
        "--agent-eval-agent",
        "agent_eval_agent",
        "agent",
        "agent",
        "the coding agent that runs the items: a built-in agent's name (claude-code, codex, gemini, opencode), "
        "an installed distribution's entry point (group pytest_agent_eval.agents) or MODULE:ATTR naming a "
        "pytest_agent_eval.agents.base.CodingAgent object (the module importable, e.g. through pytest's pythonpath "
        "ini) (default Claude Code, pytest_agent_eval.agents.claude_code:CLAUDE_CODE)",
        "AGENT",
    ),
    Option(
        "--agent-eval-agents",
        "agent_eval_agents",
        "agents",
        "agents",
        "run every item with each of these agents, comma-separated, each as --agent-eval-agent takes one "
        "(claude-code,codex): the agent is an axis beside entry × arm × run, and arms are compared within each "
        "agent; the first is the session's agent, whose item ids stay as a one-agent session names them "
        "(express-with-1), the others' ids name theirs (express-codex-with-1). Instead of --agent-eval-agent, "
        "not with it",
        "AGENTS",
    ),
    Option(
        "--agent-eval-json",
        "agent_eval_json",
        "json_path",
        "path",
        "also write the session's machine summary (the campaign's summary.json) to this path",
        "PATH",
    ),
)
THRESHOLDS_INI = "agent_eval_thresholds"
THRESHOLDS_FILE = "agent-eval.yaml"  # at rootdir, else the packaged one (with the packaged corpus)
