"""The pytest plugin: its options and ini keys, the ``agent_eval`` marker, its hooks and its fixtures.

pytest imports this module in every session of every project the plugin is installed in, so it is the thin
layer only: the options, the fixtures' declarations, and the hooks that decide whether the session evaluates.
One that does (its first agent item is collected, or, as it starts, a setting is given, ``--agent-eval-only``
is, or xdist runs) registers the plugin object that runs it, :class:`pytest_agent_eval.plugin.hooks.AgentEvalPlugin`
(its methods are the hooks, its attributes the session's state); the fixtures' bodies are
:mod:`pytest_agent_eval.plugin.fixtures`, the settings :mod:`pytest_agent_eval.settings.config`.
``tests/test_plugin_load.py`` checks what loads; ``bench/load_bench.py`` measures what the plugin adds to a suite.

    def test_mine(agent_result, agent_gate):
        agent_gate(agent_result)                       # contamination + agent-eval.yaml thresholds
        assert agent_result.figures["retrieval_calls"] >= 1

Any test that requests one of the fixtures (or carries ``@pytest.mark.agent_eval``) is parametrized over
corpus entry × agent × arm × run (one agent unless ``--agent-eval-agents`` lists several). Every harness step
is lazy: nothing is provisioned, cloned or indexed until an item runs, so ``--collect-only`` needs no network and
no npm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.settings.options import OPTIONS, THRESHOLDS_FILE, THRESHOLDS_INI

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from pytest_agent_eval.agents.base import AgentConfig, AgentSetup, CodingAgent
    from pytest_agent_eval.campaign.record import ItemRecord
    from pytest_agent_eval.campaign.store import Campaign
    from pytest_agent_eval.corpus.cases import EvalCase
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.harness.isolation import CliBlock
    from pytest_agent_eval.metrics import gates
    from pytest_agent_eval.model import ModelEndpoint
    from pytest_agent_eval.plugin.hooks import AgentEvalPlugin
    from pytest_agent_eval.run.evaluation import AgentResult
    from pytest_agent_eval.run.item import ItemLife, ModelServers
    from pytest_agent_eval.settings.config import AgentEvalConfig
    from pytest_agent_eval.tool import RetrievalTool

MARKER = (
    "agent_eval(entries=None, arms=None, runs=None, turns=None, agents=None): an agent evaluation (a test using "
    "the agent fixtures), parametrized over corpus entry × agent × arm × run; the arguments narrow the entries and "
    "override --arms/--agent-eval-runs/--agent-eval-turns/--agent-eval-agents for this test. Every generated item "
    "carries the marker, so -m agent_eval selects them"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agent-eval", "A/B evaluation of a retrieval MCP server (option > ini key > default)")
    for option in OPTIONS:
        dest = f"agent_eval_{option.attr}"
        text = option.help.replace("%", "%%")  # argparse %-formats help (residual:+20%)
        names = [option.flag] + ([option.short] if option.short else [])
        if option.is_flag:
            group.addoption(*names, action="store_true", default=None, dest=dest, help=text)
        elif option.bare is not None:
            group.addoption(*names, nargs="?", const=option.bare, default=None, dest=dest, metavar=option.metavar,
                            help=text)  # fmt: skip
        else:
            group.addoption(*names, default=None, dest=dest, metavar=option.metavar, help=text)
        if option.is_flag:
            parser.addini(option.ini, f"{option.help} [ini for {option.flag}]", type="bool", default=False)
        else:
            parser.addini(option.ini, f"{option.help} [ini for {option.flag}]", default="")
    parser.addini(THRESHOLDS_INI, "thresholds file, relative to rootdir (default agent-eval.yaml)", default="")
    # Which items run, not how: in the spirit of pytest-benchmark's --benchmark-skip / --benchmark-only.
    group.addoption(
        "--agent-eval",
        action="store_true",
        dest="agent_eval_run",
        help="run the agent evaluations wherever they are collected (by default they run only when their file "
        "or a folder holding it is named on the command line: they run agents, which costs money with a real key)",
    )
    group.addoption(
        "--agent-eval-skip", action="store_true", dest="agent_eval_skip", help="never run agent evaluations"
    )
    group.addoption(
        "--agent-eval-only",
        action="store_true",
        dest="agent_eval_only",
        help="run only the agent evaluations (implies --agent-eval)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(parser: pytest.Parser) -> Any:
    """A project's conftest.py that adds an option of the plugin's (``--arms``, an ``--agent-eval-…``) ended in
    argparse's traceback: a usage error naming the option and the way out instead. pytest 9 refuses the second
    option as the conftest adds it; pytest 8 only when it parses the command line, so the options are compared
    here once the conftests are in."""
    import argparse

    ours = {name for option in OPTIONS for name in (option.flag, option.short) if name}
    try:
        loaded = yield
    except argparse.ArgumentError as exc:
        taken = sorted(name for name in ours if f" {name}" in str(exc))
        if not taken:
            raise
        raise pytest.UsageError(_option_taken(taken)) from None
    # pytest keeps a group's options in .options, the conftests' ungrouped ones in ._anonymous (no public API)
    groups = [*getattr(parser, "_groups", ()), getattr(parser, "_anonymous", None)]
    names = [name for group in groups if group is not None for option in group.options for name in option.names()]
    taken = sorted(name for name in ours if names.count(name) > 1)
    if taken:
        raise pytest.UsageError(_option_taken(taken))
    return loaded


def _option_taken(names: list[str]) -> str:
    return (
        f"{', '.join(names)}: a conftest.py (or another plugin) adds this option, which the agent-eval plugin "
        "(pytest-retrieval-ab) already has: rename the project's own (e.g. --my-arms), or run without the plugin "
        "(-p no:agent_eval)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    if config.getoption("agent_eval_skip") and config.getoption("agent_eval_only"):
        raise pytest.UsageError("--agent-eval-skip and --agent-eval-only exclude each other")
    # Otherwise the plugin object registers with the first agent item.
    given = _settings_given(config)
    if given or _under_xdist(config) or config.getoption("agent_eval_only"):
        from pytest_agent_eval.plugin.hooks import start

        start(config, settings_given=given)


def _settings_given(config: pytest.Config) -> bool:
    """Whether a setting was given (an option, an ini key, the project's agent-eval.yaml): it is checked as the
    session starts, so that a mistake is a usage error before any test runs. Defaults alone cannot be wrong, and
    are resolved when first read."""
    if any(config.getoption(f"agent_eval_{option.attr}") not in (None, False) for option in OPTIONS):
        return True
    if any(_ini_given(config, key) for key in (*(option.ini for option in OPTIONS), THRESHOLDS_INI)):
        return True
    return (config.rootpath / THRESHOLDS_FILE).is_file()


def _ini_given(config: pytest.Config, key: str) -> bool:
    try:
        return config.getini(key) not in ("", False)
    except (ValueError, pytest.UsageError):  # a bool key pytest cannot read: resolving the settings names the key
        return True


def _under_xdist(config: pytest.Config) -> bool:
    """The controller of an xdist run, which must name its campaign and follow its workers' progress from the
    start; or a worker whose controller restored a resumed campaign (its selection applies from the start)."""
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:
        return bool(worker_input.get("agent_eval_restored"))
    return getattr(config.option, "dist", "no") != "no"


def _plugin(config: pytest.Config) -> AgentEvalPlugin:
    """The session's plugin object, registered now if no agent item or setting did yet."""
    from pytest_agent_eval.plugin.hooks import plugin_of

    return plugin_of(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test using the agent fixtures: parametrized over the corpus by the plugin object."""
    marker = metafunc.definition.get_closest_marker("agent_eval")
    if "agent_case" not in metafunc.fixturenames:
        if marker is not None:
            raise pytest.Collector.CollectError(
                f"{metafunc.definition.nodeid}: @pytest.mark.agent_eval on a test that uses none of the agent "
                "fixtures: request agent_result (the scored run), and agent_gate to apply the gates"
            )
        return
    _plugin(metafunc.config).parametrize(metafunc, marker)


# -- fixtures --------------------------------------------------------------------------------------------------
# Declared here, where pytest finds them in every session; a fixture's body is the function of the same name in
# pytest_agent_eval.plugin.fixtures, with the same parameters (typed there), loaded when an item first sets one up.
def _body(name: str, requested: dict[str, Any]) -> Any:
    from pytest_agent_eval.plugin import fixtures

    return getattr(fixtures, name)(**requested)


@pytest.fixture(scope="session")
def agent_eval_config(request: pytest.FixtureRequest) -> AgentEvalConfig:
    """The resolved options (see :mod:`pytest_agent_eval.settings.config` for precedence)."""
    return _plugin(request.config).settings


@pytest.fixture
def agent_case(request: pytest.FixtureRequest) -> EvalCase:
    """The item's entry × agent × arm × run; the plugin parametrizes it, so this body only runs when it did not."""
    raise pytest.UsageError(f"{request.node.nodeid}: agent_case is parametrized by the agent-eval plugin only")


@pytest.fixture(scope="session")
def agent_campaign(request) -> Campaign:
    """The campaign folder this session writes: new, or the one --agent-eval-resume names."""
    return _body("agent_campaign", locals())


@pytest.fixture(scope="session")
def agent_resumed(request, agent_campaign) -> dict[str, ItemRecord]:
    """With --agent-eval-resume: the records of the items the campaign completed, by id (else empty)."""
    return _body("agent_resumed", locals())


@pytest.fixture(scope="session")
def agent_eval_memo() -> dict:
    """Per-worker memo: provision, fetch and index once per key (the harness also caches on disk, locked)."""
    return {}


@pytest.fixture(scope="session")
def agent_failure_memo(request) -> FailureMemo:
    """The provisioning failures of this session, seen by every xdist worker (see
    :mod:`pytest_agent_eval.harness.failures`): a failed clone, install or build is tried once per session."""
    return _body("agent_failure_memo", locals())


# -- the item's life: each fixture one step of pytest_agent_eval.run.item.ItemLife --------------------------
@pytest.fixture(scope="session")
def agent_tool(agent_eval_config: AgentEvalConfig) -> RetrievalTool:
    """The retrieval tool under test (``--agent-eval-tool``; codegraph unless a project names its own)."""
    return agent_eval_config.tool


@pytest.fixture
def coding_agent(agent_case, agent_eval_config) -> CodingAgent:
    """The coding agent that runs this item: the session's (``--agent-eval-agent``, or the first of
    ``--agent-eval-agents``; the built-in one unless a project names its own), or the other agent the item's id
    names."""
    return _body("coding_agent", locals())


@pytest.fixture
def agent_item(
    request, agent_case, agent_eval_config, coding_agent, agent_tool, agent_eval_memo, agent_failure_memo
) -> ItemLife:
    """This item's life as one harness object (:class:`pytest_agent_eval.run.item.ItemLife`): the fixtures
    below each call one of its steps."""
    return _body("agent_item", locals())


@pytest.fixture
def tool_build(agent_item) -> Any:
    """The retrieval tool's build of this item's arm, provisioned once per version (and tried once per session)."""
    return _body("tool_build", locals())


@pytest.fixture
def agent_build(coding_agent, agent_eval_config, agent_eval_memo, agent_failure_memo) -> Any:
    """The item's agent's CLI (the one on PATH, else its pinned release installed from npm into the cache),
    provisioned once per agent per worker."""
    return _body("agent_build", locals())


@pytest.fixture
def corpus_repo(agent_item) -> Path:
    """The entry's repository under ``--agent-eval-corpus-dir``, fetched once (and tried once per session)."""
    return _body("corpus_repo", locals())


@pytest.fixture
def indexed_repo(agent_item, corpus_repo, tool_build) -> Path:
    """A copy of the repository indexed by this arm's tool build (once per repository × build, locked)."""
    return _body("indexed_repo", locals())


@pytest.fixture
def agent_workspace(agent_item, indexed_repo, tmp_path) -> Any:
    """This item's own copy of the indexed repository (the without-arm's without the tool's state), with an
    isolated HOME and TMPDIR."""
    return _body("agent_workspace", locals())


@pytest.fixture
def agent_run_dir(request, agent_case, agent_campaign) -> Path:
    """``<campaign>/items/<item id>/``: the item's transcript, stderr and the agent's config files."""
    return _body("agent_run_dir", locals())


# -- isolation -----------------------------------------------------------------------------------------------
@pytest.fixture
def cli_block(agent_item, agent_build, tmp_path) -> CliBlock:
    """The agent's PATH without the tool's CLI (a mirror of each folder that holds it)."""
    return _body("cli_block", locals())


@pytest.fixture
def agent_setup(agent_item, tool_build, agent_workspace, agent_run_dir, agent_model_server) -> AgentSetup:
    """What the agent is configured from: the with-arm's MCP server, the model's endpoint, the CLI to deny."""
    return _body("agent_setup", locals())


@pytest.fixture
def agent_config(agent_item, agent_setup, cli_block) -> AgentConfig:
    """The agent's config for the run (MCP servers, the deny of the tool's CLI, settings), written into the run
    folder or HOME, with both layers of the block checked; the item aborts if either leaks."""
    return _body("agent_config", locals())


@pytest.fixture
def agent_sandbox(
    agent_item, agent_build, tool_build, agent_workspace, cli_block, agent_config, agent_model_server
) -> Iterator[Any]:
    """The bubblewrap sandbox the agent runs in (see :mod:`pytest_agent_eval.harness.sandbox`); the item errors,
    saying what to install, where it cannot be had. It has no network: with a stand-in model only the model
    server's port is carried in, with the real API only a proxy to the API's host and port
    (:mod:`pytest_agent_eval.harness.relay`)."""
    yield from _body("agent_sandbox", locals())


# -- model ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def agent_replay_source(request, tmp_path_factory) -> Campaign | None:
    """With --agent-eval-replay: the baseline's records and transcripts, unpacked once per worker."""
    return _body("agent_replay_source", locals())


@pytest.fixture(scope="session")
def agent_model_servers(agent_eval_config) -> Iterator[ModelServers]:
    """The worker's loopback model servers, one per backend its agents resolve to (started when first needed)."""
    yield from _body("agent_model_servers", locals())


@pytest.fixture
def agent_model_server(request, coding_agent) -> Iterator[ModelEndpoint]:
    """The model this item's agent talks to: the worker's server for its API (a stand-in, or the forwarder to the
    real API), or under replay the item's own recording."""
    yield from _body("agent_model_server", locals())


@pytest.fixture
def agent_env(agent_item, agent_workspace, cli_block, agent_config, agent_model_server) -> dict[str, str]:
    """The agent's environment: isolated HOME/TMPDIR, the blocked PATH, the agent's and the tool's flags, the
    model endpoint."""
    return _body("agent_env", locals())


@pytest.fixture
def tool_warm(agent_item, tool_build, indexed_repo, agent_workspace, agent_env) -> Any:
    """Start the MCP server and stop it before the first agent of this build and index, so its cold start
    (node, native modules, the index read from disk) is not measured; later items find it all cached."""
    return _body("tool_warm", locals())


@pytest.fixture
def agent_block_proven(agent_item, agent_build, agent_setup, agent_sandbox, agent_workspace, agent_env) -> None:
    """Once per agent per worker: a probe session through the agent itself, in the sandbox, whose shell call of the tool
    must come back denied (see :mod:`pytest_agent_eval.run.probe`); the item errors if not."""
    return _body("agent_block_proven", locals())


# -- the run -------------------------------------------------------------------------------------------------
@pytest.fixture
def agent_run(
    request, agent_item, agent_build, agent_setup, agent_workspace, agent_env, agent_model_server, tool_warm,
    agent_sandbox, agent_block_proven,
) -> RunRecord:  # fmt: skip
    """Drive the agent over the item's turns; the transcript lands in :func:`agent_run_dir`.

    An infrastructure error (no result event, an API error in the transcript) is retried up to
    ``--agent-eval-retries`` times, each failed attempt moved to ``attempt-<k>/`` first.
    """
    return _body("agent_run", locals())


@pytest.fixture
def agent_result(request, agent_case, agent_campaign, agent_resumed) -> AgentResult:
    """The run scored: figures attached to ``user_properties`` (junitxml carries them) and to the report.

    An item a resumed campaign completed is re-scored from its saved segments instead of being run.
    """
    return _body("agent_result", locals())


@pytest.fixture(scope="session")
def agent_thresholds(agent_eval_config) -> gates.Thresholds:
    """Thresholds from ``agent-eval.yaml`` (validated when the session started)."""
    return _body("agent_thresholds", locals())


@pytest.fixture
def agent_gate(request, agent_thresholds, agent_tool) -> Callable[[AgentResult], None]:
    """``agent_gate(result)`` FAILS the item on contamination or a threshold, naming each gate."""
    return _body("agent_gate", locals())
