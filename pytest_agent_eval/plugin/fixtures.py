"""The bodies of the plugin's fixtures, from the provisioned tools down to the scored run.

:mod:`pytest_agent_eval.plugin` declares each fixture (its name, scope, what it requests and what it is for);
its body is the function of the same name here, called with what it requested, so that this module, and the
harness it imports, load only when an agent item is set up.

A harness step that fails raises :class:`AgentInfraError`, which the plugin reports as an ERROR that
says which step — never as a failed gate. With ``--agent-eval-retries N`` the agent's run (not provisioning)
is tried up to N more times on such an error; each failed attempt's files are kept in ``attempt-<k>/``.

Every item writes into the session's campaign folder (:mod:`pytest_agent_eval.campaign.store`), and fills in
its typed record (:class:`~pytest_agent_eval.campaign.record.ItemRecord`) as it goes. With
``--agent-eval-resume`` an item the campaign already completed is not run again: :func:`agent_result`
re-scores its saved segments, and nothing below it (provisioning, index, agent) is even set up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack, nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_agent_eval.plugin import settings

# The harness, scoring and reports load when a body first needs them.
if TYPE_CHECKING:
    from pytest_agent_eval.campaign.evaluation import AgentResult, EvalSession
    from pytest_agent_eval.campaign.record import ItemRecord
    from pytest_agent_eval.campaign.store import Campaign
    from pytest_agent_eval.corpus.cases import EvalCase
    from pytest_agent_eval.harness.drivers.headless import RunRecord
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.harness.isolation import CliBlock
    from pytest_agent_eval.metrics import gates
    from pytest_agent_eval.model import ModelEndpoint
    from pytest_agent_eval.settings.config import AgentEvalConfig
    from pytest_agent_eval.tool import RetrievalTool

SESSION_KEY: pytest.StashKey[EvalSession] = pytest.StashKey()
RECORD_KEY: pytest.StashKey[ItemRecord] = pytest.StashKey()
# this session's provisioning failures, shared with xdist workers
FAILURES_KEY: pytest.StashKey[FailureMemo] = pytest.StashKey()
FAILURES_ID_KEY: pytest.StashKey[str] = pytest.StashKey()  # their session id: the controller's, handed to its workers
ITEM_ID_KEY: pytest.StashKey[str] = pytest.StashKey()
# Set while the item's agent runs (inside set-up: agent_run is a fixture), so a Ctrl-C names what it interrupted.
AGENT_RUNNING_KEY: pytest.StashKey[bool] = pytest.StashKey()
# Under xdist, in every process: what makes the sessions of the controller and its workers share one campaign
# (the arguments of EvalSession.share), applied when a process makes its session, if it ever does.
SHARED_KEY: pytest.StashKey[dict[str, Any]] = pytest.StashKey()

T = TypeVar("T")


def eval_session(config: pytest.Config) -> EvalSession:
    """This pytest session's :class:`~pytest_agent_eval.campaign.evaluation.EvalSession`, made when first needed."""
    if SESSION_KEY not in config.stash:
        from pytest_agent_eval.campaign.evaluation import EvalSession

        session = config.stash[SESSION_KEY] = EvalSession(settings(config))
        session.invoked_with(_named_args(config), config.option.keyword, config.option.markexpr, config.option.pyargs)
        if SHARED_KEY in config.stash:
            session.share(**config.stash[SHARED_KEY])
    return config.stash[SESSION_KEY]


def failure_memo(config: pytest.Config) -> FailureMemo:
    """This session's provisioning failures (:mod:`pytest_agent_eval.harness.failures`), made when first needed."""
    if FAILURES_KEY not in config.stash:
        from pytest_agent_eval.harness.failures import FailureMemo

        config.stash[FAILURES_KEY] = FailureMemo(settings(config).cache, config.stash[FAILURES_ID_KEY])
    return config.stash[FAILURES_KEY]


def record_of(node: pytest.Item) -> ItemRecord:
    """The item's record, made on first use; the fixtures fill it in, the plugin finishes and ships it."""
    from pytest_agent_eval.campaign.evaluation import new_record

    if RECORD_KEY not in node.stash:
        case = node.callspec.params["agent_case"]  # type: ignore[attr-defined]
        node.stash[RECORD_KEY] = new_record(case, item_id(node, case), node.nodeid, settings(node.config))
    return node.stash[RECORD_KEY]


def item_id(node: pytest.Item, case: EvalCase) -> str:
    """The item's id in the campaign: the case id, unless the plugin had to tell two tests apart."""
    return node.stash.get(ITEM_ID_KEY, case.id)


def set_aside(folder: Path) -> Path | None:
    """Move a run's files (segments, stderr, run.json, the model's request record) into the next free
    ``attempt-<k>/``; None if none."""
    from pytest_agent_eval.model.record import REQUESTS_FILE

    kept = ("run.json", REQUESTS_FILE)
    files = [p for p in folder.iterdir() if p.is_file() and (p.name.startswith("run-") or p.name in kept)]
    if not files:
        return None
    k = 1
    while (folder / f"attempt-{k}").exists():
        k += 1
    target = folder / f"attempt-{k}"
    target.mkdir()
    for path in files:
        path.rename(target / path.name)
    return target


def provenance(record: ItemRecord, repo: Path, tool: Any, claude: Any, offline: bool) -> None:
    """Where the item's code under test and tools came from (see :func:`pytest_agent_eval.harness.repos.
    fetched_source` and :class:`pytest_agent_eval.harness.provision.Provisioned`), and what to warn about."""
    from pytest_agent_eval.harness.provenance import git_state
    from pytest_agent_eval.harness.repos import fallback_warning, fetched_source

    # A repository the harness did not fetch (a test's own folder) is described as a local path.
    record.source = fetched_source(repo) or {"kind": "local", "path": str(repo), "git_state": git_state(repo)}
    record.tool_provision = dict(getattr(tool, "origin", None) or {})
    record.claude_provision = dict(getattr(claude, "origin", None) or {})
    fallback = fallback_warning(repo, offline)
    record.warnings = [fallback] if fallback else []


def note_driver(record: ItemRecord, run: RunRecord) -> None:
    """Put the driver's record on the item's, with ``stalled`` up front: a stalled turn's time is no
    measurement of the agent, so whatever compares times must see it without digging."""
    record.driver = run.to_dict()
    record.stalled = bool(run.stalled_turns)


def _step(what: str, action: Callable[[], T]) -> T:
    """Run a harness step; any failure becomes an infrastructure error naming the step."""
    from pytest_agent_eval.harness.drivers import AgentInfraError

    try:
        return action()
    except AgentInfraError:
        raise
    except Exception as exc:
        raise AgentInfraError(f"{what}: {exc}") from exc


def _memo(memo: dict, key: Any, make: Callable[[], T]) -> T:
    if key not in memo:
        memo[key] = make()
    return memo[key]


def _named_args(config: pytest.Config) -> list[str]:
    """The test paths the command line named (not testpaths), absolute, so that a resume from another folder
    finds them; a --pyargs module name stays as it is."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    here = config.invocation_params.dir
    named = []
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        named.append(f"{os.path.abspath(here / path)}{sep}{rest}" if (here / path).exists() else arg)
    return named


# -- configuration --------------------------------------------------------------------------------------------
def agent_campaign(request: pytest.FixtureRequest) -> Campaign:
    problem = settings(request.config).output_problem()  # found at collection, but by an xdist worker
    if problem:
        pytest.fail(problem, pytrace=False)
    return eval_session(request.config).item_campaign()


def agent_resumed(request: pytest.FixtureRequest, agent_campaign: Campaign) -> dict[str, ItemRecord]:
    return eval_session(request.config).resumed()


def agent_failure_memo(request: pytest.FixtureRequest) -> FailureMemo:
    return failure_memo(request.config)


# -- tools, repository, index --------------------------------------------------------------------------------
def tool_build(
    agent_case: EvalCase,
    agent_tool: RetrievalTool,
    agent_eval_config: AgentEvalConfig,
    agent_eval_memo: dict,
    agent_failure_memo: FailureMemo,
) -> Any:
    from pytest_agent_eval.harness.provision import provision_tool

    spec = agent_eval_config.tool_spec(agent_case.arm)
    provision = partial(
        _step,
        f"provisioning {agent_tool.name} {spec}",
        lambda: provision_tool(agent_tool, spec, agent_eval_config.cache),
    )
    return _memo(
        agent_eval_memo,
        ("tool", agent_tool.name, spec),
        lambda: agent_failure_memo.attempt(f"{agent_tool.name} {spec}", provision),
    )


def claude_cli(agent_eval_config: AgentEvalConfig, agent_failure_memo: FailureMemo) -> Any:
    from pytest_agent_eval.harness.provision import provision_claude

    provision = partial(_step, "provisioning the claude CLI", lambda: provision_claude(None, agent_eval_config.cache))
    return agent_failure_memo.attempt("claude", provision)


def corpus_repo(
    agent_case: EvalCase, agent_eval_config: AgentEvalConfig, agent_eval_memo: dict, agent_failure_memo: FailureMemo
) -> Path:
    from pytest_agent_eval.harness.repos import fetch_repo

    entry, cfg = agent_case.entry, agent_eval_config
    fetch = partial(_step, f"fetching {entry.name}", lambda: fetch_repo(entry, cfg.corpus_dir, offline=cfg.offline))
    key = f"repo {entry.name} {entry.repo} {entry.source} offline={cfg.offline} in {cfg.corpus_dir}"
    return _memo(agent_eval_memo, ("repo", entry.name), lambda: agent_failure_memo.attempt(key, fetch))


def indexed_repo(
    corpus_repo: Path,
    agent_tool: RetrievalTool,
    tool_build: Any,
    agent_eval_config: AgentEvalConfig,
    agent_failure_memo: FailureMemo,
) -> Path:
    from pytest_agent_eval.harness.index import indexed_copy

    index = partial(
        _step,
        f"indexing {corpus_repo.name} with {agent_tool.name} {tool_build.version}",
        lambda: indexed_copy(corpus_repo, agent_tool, tool_build, agent_eval_config.cache),
    )
    return agent_failure_memo.attempt(f"index {corpus_repo} with {tool_build.bin}", index)


def agent_workspace(agent_case: EvalCase, agent_tool: RetrievalTool, indexed_repo: Path, tmp_path: Path) -> Any:
    from pytest_agent_eval.harness.workspace import make_workspace

    without = () if agent_case.arm.has_tool else agent_tool.state_dirs
    return _step("making the workspace", lambda: make_workspace(indexed_repo, tmp_path / "workspace", without))


def agent_run_dir(request: pytest.FixtureRequest, agent_case: EvalCase, agent_campaign: Campaign) -> Path:
    folder = agent_campaign.item_dir(item_id(request.node, agent_case))
    # A resumed campaign re-running an item that errored: its old files are kept, never mixed in.
    set_aside(folder)
    return folder


# -- isolation -----------------------------------------------------------------------------------------------
def cli_block(
    claude_cli: Any, agent_tool: RetrievalTool, agent_run_dir: Path, tmp_path: Path, agent_eval_memo: dict
) -> CliBlock:
    from pytest_agent_eval.harness.isolation import CliBlock, self_check, shim_path, write_hook_settings

    cli = agent_tool.cli
    from pytest_agent_eval.harness.runtimes import with_node

    # claude must resolve on the agent's PATH wherever it was provisioned, and node (the machine's or the bundled).
    path_env = os.pathsep.join([str(Path(claude_cli.bin).parent), with_node(os.environ.get("PATH", ""))])
    shimmed = shim_path(path_env, cli, tmp_path / "shim")
    settings = write_hook_settings(agent_run_dir / "hook-settings.json", cli)
    proven: set[str] = agent_eval_memo.setdefault("proven hooks", set())  # the PATH layer is checked every item
    _step("CLI block self-check", lambda: self_check(shimmed, settings, cli, ("claude", "node"), proven))
    return CliBlock(path=shimmed, settings=settings)


def agent_sandbox(
    agent_case: EvalCase,
    agent_eval_config: AgentEvalConfig,
    claude_cli: Any,
    agent_tool: RetrievalTool,
    tool_build: Any,
    agent_workspace: Any,
    cli_block: CliBlock,
    mcp_config: Path,
    agent_model_server: ModelEndpoint,
    tmp_path: Path,
) -> Iterator[Any]:
    from pytest_agent_eval.harness import runtimes, sandbox
    from pytest_agent_eval.harness.relay import carried

    if not sandbox.enabled():
        yield None
        return
    _step("sandbox", sandbox.check_sandbox)
    node = runtimes.node()
    # Of the run folder, only the two files the CLI is given: the folder also receives this attempt's transcript
    # and stderr, and an earlier attempt's (attempt-<k>/), which no later attempt may read.
    readable = [
        *sandbox.install_paths(claude_cli.bin),
        cli_block.settings,
        mcp_config,
        tmp_path / "shim",
        *(node.reads if node else ()),
    ]
    # its MCP server runs inside, under the agent
    tool_install = sandbox.install_paths(tool_build.bin) if agent_case.arm.has_tool else []
    workspace = [agent_workspace.repo, agent_workspace.home, agent_workspace.tmp]
    # The campaign holds the other items' transcripts (the with-arm's tool answers); only this item's folder
    # comes back. The corpus folder may lie outside the cache.
    cfg = agent_eval_config
    campaigns = cfg.campaign_dir.parent if cfg.campaign_dir is not None else cfg.out
    hidden = [p for p in (cfg.out, campaigns, cfg.corpus_dir) if p is not None]
    # The model's port is the only way out, whatever the backend: the real API is reached through the harness's
    # forwarder on that port, which holds the key (see pytest_agent_eval.model.anthropic).
    with ExitStack() as stack:
        relay = _step("model relay", lambda: stack.enter_context(carried(agent_model_server.url)))
        yield _step(
            "sandbox",
            lambda: sandbox.sandbox_for(
                cache=cfg.cache, writable=workspace, readable=readable, hidden=hidden, relay=relay,
                tool=agent_tool, tool_install=tool_install,
            ),
        )  # fmt: skip


def mcp_config(
    agent_case: EvalCase, agent_tool: RetrievalTool, tool_build: Any, agent_workspace: Any, agent_run_dir: Path
) -> Path:
    if agent_case.arm.has_tool:
        path = agent_run_dir / f"mcp-{agent_tool.name}.json"
        command = agent_tool.mcp_command(tool_build.bin, agent_workspace.repo)
        servers = {
            agent_tool.name: {"type": "stdio", "command": command[0], "args": command[1:], "env": dict(agent_tool.env)}
        }
    else:
        path = agent_run_dir / "mcp-empty.json"
        servers = {}
    path.write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n", encoding="utf-8")
    return path


# -- model ---------------------------------------------------------------------------------------------------
def agent_replay_source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Campaign | None:
    from pytest_agent_eval.campaign import baseline
    from pytest_agent_eval.campaign.store import Campaign

    path = eval_session(request.config).replay_path
    if path is None:
        return None
    folder = tmp_path_factory.mktemp("replay")
    return _step(f"unpacking the replay baseline {path}", lambda: Campaign.open(baseline.unpack(path, folder)))


def agent_model_server(request: pytest.FixtureRequest, agent_eval_config: AgentEvalConfig) -> Iterator[ModelEndpoint]:
    from pytest_agent_eval.campaign import baseline
    from pytest_agent_eval.model import (
        AnthropicBackend,
        CassetteBackend,
        ModelEndpoint,
        ScriptedBackend,
        make_backend,
        serve,
    )

    cfg = agent_eval_config
    source: Campaign | None = request.getfixturevalue("agent_replay_source")
    if source is not None:
        record = record_of(request.node)
        segments = _step(
            "finding the item's recording",
            lambda: baseline.recording(source, record.id, record.entry, record.arm, record.run, record.test),
        )
        backend = _step("reading the item's recording", lambda: CassetteBackend(segments))
        replayed = str(eval_session(request.config).replay_path)
        server = serve(backend)
        try:
            yield ModelEndpoint("cassette", backend.describe(), server.url, replay=replayed, log=server.log)
        finally:
            server.stop()
        return
    options: dict[str, Any] = {"paths": cfg.cassettes} if cfg.backend == "cassette" else {}
    backend = _step(f"model backend {cfg.backend}", lambda: make_backend(cfg.backend, **options))
    if isinstance(backend, ScriptedBackend):  # the stand-in calls the tool under test by its own names
        backend = replace(backend, explore=cfg.tool.explore, cli=cfg.tool.cli)
    if isinstance(backend, AnthropicBackend):  # the forwarder: the agent's CLI gets its loopback URL, not the key
        name = "anthropic"
    else:
        name = "cassette" if isinstance(backend, CassetteBackend) else "scripted"
    server = serve(backend)
    try:
        yield ModelEndpoint(name, backend.describe(), server.url, log=server.log)
    finally:
        server.stop()


def agent_env(
    agent_tool: RetrievalTool, agent_workspace: Any, cli_block: CliBlock, agent_model_server: ModelEndpoint
) -> dict[str, str]:
    from pytest_agent_eval.harness.drivers import agent_environment
    from pytest_agent_eval.harness.sandbox import npm_env

    env = agent_environment(agent_workspace.env(os.environ), agent_model_server.url)
    env.update(agent_tool.env)
    env.update(npm_env(agent_workspace.home), PATH=cli_block.path)
    return env


def tool_warm(
    agent_case: EvalCase,
    agent_tool: RetrievalTool,
    tool_build: Any,
    indexed_repo: Path,
    agent_workspace: Any,
    agent_env: dict[str, str],
    agent_eval_memo: dict,
) -> float | None:
    from pytest_agent_eval.harness.drivers import warm_mcp_server

    if not agent_case.arm.has_tool:
        return None
    command = agent_tool.mcp_command(tool_build.bin, agent_workspace.repo)
    return _memo(
        agent_eval_memo,
        ("warm", str(tool_build.bin), str(indexed_repo)),
        lambda: warm_mcp_server(command, cwd=agent_workspace.repo, env=agent_env),
    )


def agent_block_proven(
    claude_cli: Any,
    agent_tool: RetrievalTool,
    cli_block: CliBlock,
    agent_sandbox: Any,
    agent_workspace: Any,
    agent_env: dict[str, str],
    agent_run_dir: Path,
    agent_eval_memo: dict,
) -> None:
    from pytest_agent_eval.campaign.store import PROBE_FOLDER
    from pytest_agent_eval.harness.drivers.headless import HeadlessOptions
    from pytest_agent_eval.harness.probe import prove_block

    options = HeadlessOptions(
        claude=str(claude_cli.bin), mcp_config=Path(os.devnull), settings=cli_block.settings, sandbox=agent_sandbox
    )
    probe = partial(
        prove_block,
        options,
        agent_tool.cli,
        cwd=agent_workspace.repo,
        env=agent_env,
        out_dir=agent_run_dir / PROBE_FOLDER,
    )
    _memo(agent_eval_memo, "block proven", lambda: _step("CLI block probe through Claude Code", probe))


# -- the run -------------------------------------------------------------------------------------------------
def agent_run(
    request: pytest.FixtureRequest,
    agent_case: EvalCase,
    agent_eval_config: AgentEvalConfig,
    claude_cli: Any,
    agent_workspace: Any,
    agent_run_dir: Path,
    mcp_config: Path,
    cli_block: CliBlock,
    agent_env: dict[str, str],
    agent_model_server: ModelEndpoint,
    tool_warm: float | None,
    agent_sandbox: Any,
    agent_block_proven: None,
) -> RunRecord:
    from pytest_agent_eval.agents.claude_code.transcript import read_segments
    from pytest_agent_eval.harness.drivers import AgentInfraError
    from pytest_agent_eval.harness.drivers.headless import HeadlessOptions, TurnError, run_headless
    from pytest_agent_eval.harness.drivers.tmux import TmuxOptions, run_tmux
    from pytest_agent_eval.harness.drivers.watch import STALL_S_REAL_API, STALL_S_STAND_IN

    cfg = agent_eval_config
    record = record_of(request.node)
    tool = request.getfixturevalue("tool_build")  # already set up: mcp_config and the index depend on it
    record.backend = agent_model_server.to_dict()
    record.run_dir = str(agent_run_dir)
    record.tool_version = tool.version
    record.tool_spec = cfg.tool_spec(agent_case.arm)
    record.claude_version = claude_cli.version
    # The fetched repository under the index; a test that supplies its own indexed_repo has none.
    fetched = "corpus_repo" in request.fixturenames
    repo = request.getfixturevalue("corpus_repo") if fetched else request.getfixturevalue("indexed_repo")
    provenance(record, repo, tool, claude_cli, cfg.offline)
    options = HeadlessOptions(
        claude=str(claude_cli.bin),
        mcp_config=mcp_config,
        settings=cli_block.settings,
        model=cfg.model,
        effort=cfg.effort,
        max_budget_usd=cfg.max_budget_usd,
        timeout_s=cfg.agent_timeout,
        stall_s=STALL_S_REAL_API if agent_model_server.real else STALL_S_STAND_IN,
        sandbox=agent_sandbox,
    )
    if agent_case.driver == "tmux":
        drive = partial(run_tmux, options=TmuxOptions(run=options))
    else:
        drive = partial(run_headless, options=options)
    record.mode = agent_case.driver
    attempts = record.attempts
    request.node.stash[AGENT_RUNNING_KEY] = True
    try:
        for attempt in range(cfg.retries + 1):
            _step("renewing the workspace", partial(_fresh_attempt, request, agent_case, agent_workspace, attempt > 0))
            try:
                with _recording(agent_model_server, agent_run_dir):
                    run = drive(
                        agent_case.questions,
                        label=f"{agent_case.arm.label}-{agent_case.run}".replace("/", "_"),
                        out_dir=agent_run_dir,
                        cwd=agent_workspace.repo,
                        env=agent_env,
                    )
                infra = _step("reading the transcript", partial(read_segments, run.segments)).infra_error
                if infra:
                    raise AgentInfraError(infra)
                break
            except AgentInfraError as exc:
                if isinstance(exc, TurnError):
                    note_driver(record, exc.run)
                if attempt == cfg.retries:
                    if attempts:
                        raise AgentInfraError(f"{exc} (attempt {attempt + 1} of {cfg.retries + 1})") from exc
                    raise
                kept = set_aside(agent_run_dir)
                attempts.append({"error": str(exc), "folder": kept.name if kept else None})
    except KeyboardInterrupt:
        raise  # the key stays set: the interrupt hook names the agent's run
    except BaseException:
        request.node.stash[AGENT_RUNNING_KEY] = False
        raise
    request.node.stash[AGENT_RUNNING_KEY] = False
    note_driver(record, run)
    (agent_run_dir / "run.json").write_text(json.dumps(run.to_dict(), indent=2) + "\n", encoding="utf-8")
    return run


def _recording(endpoint: ModelEndpoint, folder: Path) -> ContextManager[Any]:
    """The model server records this attempt's requests in the item's folder (outside the sandbox)."""
    from pytest_agent_eval.model.record import REQUESTS_FILE

    return endpoint.log.into(folder / REQUESTS_FILE) if endpoint.log is not None else nullcontext()


def _fresh_attempt(request: pytest.FixtureRequest, case: EvalCase, workspace: Any, retry: bool) -> None:
    """A HOME and TMPDIR no earlier process wrote (the block probe's, or an earlier attempt's), and for a retry a
    fresh repository copy: nothing an attempt left reaches the next (see harness.workspace.fresh_attempt)."""
    from pytest_agent_eval.harness.sandbox import npm_env
    from pytest_agent_eval.harness.workspace import fresh_attempt

    tool = request.getfixturevalue("agent_tool")
    source = request.getfixturevalue("indexed_repo") if retry else None
    fresh_attempt(workspace, source, () if case.arm.has_tool else tool.state_dirs)
    npm_env(workspace.home)  # the npm settings files the agent's environment names


def agent_result(
    request: pytest.FixtureRequest,
    agent_case: EvalCase,
    agent_campaign: Campaign,
    agent_resumed: dict[str, ItemRecord],
) -> AgentResult:
    from pytest_agent_eval.agents.claude_code.transcript import read_segments
    from pytest_agent_eval.campaign.evaluation import AgentResult
    from pytest_agent_eval.campaign.record import same_item
    from pytest_agent_eval.harness.drivers import AgentInfraError
    from pytest_agent_eval.metrics import gates
    from pytest_agent_eval.metrics.figures import figures_of
    from pytest_agent_eval.metrics.scorecard import score as score_of
    from pytest_agent_eval.model.record import requests_beside
    from pytest_agent_eval.report.blocks import render_scorecard
    from pytest_agent_eval.report.terminal import model_notes

    record = record_of(request.node)
    done = agent_resumed.get(record.id)
    if done is not None and done.nodeid is not None and not same_item(done.nodeid, record.nodeid or ""):
        done = None  # the same id from another test (test_a.express-with-1 vs test_b's): not this item's run
    if done is not None:
        agent_run = _step("reading the resumed item", lambda: _resumed_run(agent_campaign, done))
        keep = (
            "backend", "tool_version", "tool_spec", "claude_version", "driver", "attempts", "wall_s", "agent_s",
            "stalled", "source", "tool_provision", "claude_provision", "warnings",
        )  # fmt: skip
        for key in keep:
            setattr(record, key, getattr(done, key))
        record.segments, record.resumed = list(done.segments), True
    else:
        agent_run = request.getfixturevalue("agent_run")
    session = _step("reading the transcript", lambda: read_segments(agent_run.segments))
    if session.infra_error:
        raise AgentInfraError(session.infra_error)
    tool = request.getfixturevalue("agent_tool")
    requests = _step("reading the model's request record", partial(requests_beside, agent_run.segments[0]))
    # scored once: the figures and the printed blocks come from one card
    card = score_of(session, tool, requests=requests)
    score = card.to_dict()
    figures = figures_of(
        score, has_tool=agent_case.arm.has_tool, wall_s=agent_run.agent_s, tool=tool, stalled=record.stalled
    )
    if done is None:
        (agent_run.segments[0].parent / "score.json").write_text(json.dumps(score, indent=2) + "\n", encoding="utf-8")
    # Known even when the test never calls agent_gate: the campaign tables drop contaminated without-arms.
    record.contaminated = not gates.contamination_verdict(score, agent_case.arm.has_tool, tool).passed
    record.figures, record.scores, record.blocks = figures, score, render_scorecard(card)
    for name, value in figures.items():
        if value is not None:
            request.node.user_properties.append((f"agent_eval.{name}", value))
    for note in model_notes([record]):  # junit's reader too learns that the figures are a stand-in model's
        request.node.user_properties.append(("agent_eval.model_backend", note))
    return AgentResult(case=agent_case, run=agent_run, score=score, figures=figures, blocks=record.blocks or "")


def _resumed_run(campaign: Campaign, done: ItemRecord) -> RunRecord:
    """The driver's record of a completed item, rebuilt from what the campaign saved."""
    from pytest_agent_eval.harness.drivers.headless import RunRecord

    driver = done.driver or {}
    return RunRecord(
        label=str(driver.get("label") or done.id),
        segments=campaign.segments(done),
        wall_s=list(driver.get("wall_s") or [done.agent_s or 0.0]),
        exit_codes=list(driver.get("exit_codes") or []),
        hung_after_result=list(driver.get("hung_after_result") or []),
        session_id=driver.get("session_id"),
        longest_silence_s=list(driver.get("longest_silence_s") or []),
        silence_after=list(driver.get("silence_after") or []),
        api_retries=list(driver.get("api_retries") or []),
        stall_s=driver.get("stall_s"),
    )


def agent_thresholds(agent_eval_config: AgentEvalConfig) -> gates.Thresholds:
    from pytest_agent_eval.metrics import gates

    return gates.load_thresholds(agent_eval_config.thresholds_file)


def agent_gate(
    request: pytest.FixtureRequest, agent_thresholds: gates.Thresholds, agent_tool: RetrievalTool
) -> Callable[[AgentResult], None]:
    from pytest_agent_eval.metrics import gates

    def check(result: AgentResult) -> None:
        case = result.case
        verdicts = gates.evaluate(
            result.score,
            result.figures,
            entry=case.entry.name,
            arm_name=case.arm.name,
            arm_label=case.arm.label,
            thresholds=agent_thresholds,
            tool=agent_tool,
        )
        record = record_of(request.node)
        record.gates = [v.to_dict() for v in verdicts]
        record.contaminated = not verdicts[0].passed
        request.node.user_properties.append(("agent_eval.contaminated", record.contaminated))
        message = gates.failure_message(verdicts, case.entry.name, case.arm.label)
        if message:
            pytest.fail(message, pytrace=False)

    return check
