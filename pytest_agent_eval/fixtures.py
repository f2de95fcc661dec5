"""The fixtures an eval test touches, from the provisioned tools down to the scored run.

    def test_mine(agent_result, agent_gate):
        agent_gate(agent_result)                       # contamination + agent-eval.yaml thresholds
        assert agent_result.figures["codegraph_calls"] >= 1

Any test that requests one of them (or carries ``@pytest.mark.agent_eval``) is parametrized over
corpus entry × arm × run by the plugin. Every harness step is lazy: nothing is provisioned, cloned or
indexed until an item runs, so ``--collect-only`` needs no network and no npm.

A harness step that fails raises :class:`AgentInfraError`, which the plugin reports as an ERROR that
says which step — never as a failed gate.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_agent_eval.config import AgentEvalConfig, Arm
from pytest_agent_eval.corpus import CorpusEntry
from pytest_agent_eval.harness.drivers import AgentInfraError, warm_mcp_server
from pytest_agent_eval.harness.drivers.headless import HeadlessOptions, RunRecord, run_headless
from pytest_agent_eval.report import gates
from pytest_agent_eval.tool import CODEGRAPH

CONFIG_KEY = pytest.StashKey[AgentEvalConfig]()
RECORD_KEY = pytest.StashKey[dict]()

# Every agent process gets these on top of the isolated HOME/TMPDIR: no prompt hook feeding the without-arm,
# no daemon outliving the run, no telemetry or update traffic, no deferred tool loading hiding schemas.
AGENT_ENV = {
    "CODEGRAPH_NO_PROMPT_HOOK": "1",
    "DO_NOT_TRACK": "1",
    "CODEGRAPH_NO_DAEMON": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "IS_SANDBOX": "1",
    "ENABLE_TOOL_SEARCH": "false",
    "CLAUDE_CODE_ENABLE_TASKS": "false",
}
# The CLI only needs *a* key to talk to the local stand-in server; a real key never goes there.
STANDIN_API_KEY = "sk-ant-agent-eval-local-stand-in"

T = TypeVar("T")


@dataclass(frozen=True)
class EvalCase:
    """One item: a corpus entry, an arm, a run number, and the turns it asks."""

    entry: CorpusEntry
    arm: Arm
    run: int
    questions: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.entry.name}-{self.arm.label}-{self.run}"


@dataclass(frozen=True)
class ModelEndpoint:
    """Where the agent's API requests go: ``url`` None means the real API, straight from the CLI."""

    backend: str
    description: str
    url: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.backend, "description": self.description, "url": self.url}


@dataclass(frozen=True)
class CliBlock:
    path: str
    settings: Path


@dataclass
class AgentResult:
    """A scored run: the driver's record, the score as plain data, and its named figures."""

    case: EvalCase
    run: RunRecord
    score: dict[str, Any]
    figures: dict[str, Any]
    blocks: str


def record_of(node: pytest.Item) -> dict:
    """The plain-data record of an item that the plugin ships to the controller."""
    if RECORD_KEY not in node.stash:
        node.stash[RECORD_KEY] = {}
    return node.stash[RECORD_KEY]


def _step(what: str, action: Callable[[], T]) -> T:
    """Run a harness step; any failure becomes an infrastructure error naming the step."""
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


# -- configuration --------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def agent_eval_config(request: pytest.FixtureRequest) -> AgentEvalConfig:
    """The resolved options (see :mod:`pytest_agent_eval.config` for precedence)."""
    return request.config.stash[CONFIG_KEY]


@pytest.fixture
def agent_case(request: pytest.FixtureRequest) -> EvalCase:
    """The item's entry × arm × run; the plugin parametrizes it, so this body only runs when it did not."""
    raise pytest.UsageError(f"{request.node.nodeid}: agent_case is parametrized by the agent-eval plugin only")


@pytest.fixture(scope="session")
def _agent_eval_memo() -> dict:
    """Per-worker memo: provision, fetch and index once per key (the harness also caches on disk, locked)."""
    return {}


# -- tools, repository, index --------------------------------------------------------------------------------
@pytest.fixture
def codegraph(agent_case: EvalCase, agent_eval_config: AgentEvalConfig, _agent_eval_memo: dict) -> Any:
    """The codegraph build of this item's arm, provisioned once per version."""
    from pytest_agent_eval.harness.provision import provision_codegraph

    spec = agent_eval_config.tool_spec(agent_case.arm)
    return _memo(
        _agent_eval_memo,
        ("codegraph", spec),
        lambda: _step(f"provisioning codegraph {spec}", lambda: provision_codegraph(spec, agent_eval_config.cache)),
    )


@pytest.fixture(scope="session")
def claude_cli(agent_eval_config: AgentEvalConfig) -> Any:
    """The Claude Code CLI (the one on PATH, else an npm install into the cache)."""
    from pytest_agent_eval.harness.provision import provision_claude

    return _step("provisioning the claude CLI", lambda: provision_claude(None, agent_eval_config.cache))


@pytest.fixture
def corpus_repo(agent_case: EvalCase, agent_eval_config: AgentEvalConfig, _agent_eval_memo: dict) -> Path:
    """The entry's repository under ``--corpus-dir``, fetched once."""
    from pytest_agent_eval.harness.repos import fetch_repo

    entry, cfg = agent_case.entry, agent_eval_config
    return _memo(
        _agent_eval_memo,
        ("repo", entry.name),
        lambda: _step(f"fetching {entry.name}", lambda: fetch_repo(entry, cfg.corpus_dir, offline=cfg.offline)),
    )


@pytest.fixture
def indexed_repo(corpus_repo: Path, codegraph: Any, agent_eval_config: AgentEvalConfig) -> Path:
    """A copy of the repository indexed by this arm's codegraph (once per repository × build, locked)."""
    from pytest_agent_eval.harness.index import indexed_copy

    return _step(
        f"indexing {corpus_repo.name} with codegraph {codegraph.version}",
        lambda: indexed_copy(corpus_repo, codegraph, agent_eval_config.cache),
    )


@pytest.fixture
def agent_workspace(indexed_repo: Path, tmp_path: Path) -> Any:
    """This item's own copy of the indexed repository, with an isolated HOME and TMPDIR."""
    from pytest_agent_eval.harness.workspace import make_workspace

    return _step("making the workspace", lambda: make_workspace(indexed_repo, tmp_path / "workspace"))


@pytest.fixture
def agent_run_dir(agent_case: EvalCase, agent_eval_config: AgentEvalConfig) -> Path:
    """``<out>/<entry>/<item id>/``: segments, stderr, MCP config and hook settings of this item."""
    assert agent_eval_config.out is not None
    folder = agent_eval_config.out / agent_case.entry.name / agent_case.id
    if folder.exists():  # an explicit --agent-eval-out reused: never mix an old run's segments in
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


# -- isolation -----------------------------------------------------------------------------------------------
@pytest.fixture
def cli_block(claude_cli: Any, agent_run_dir: Path, tmp_path: Path) -> CliBlock:
    """PATH without the codegraph CLI + a PreToolUse hook denying it, both probed; the item aborts if not."""
    from pytest_agent_eval.harness.isolation import self_check, shim_path, write_hook_settings

    cli = CODEGRAPH.cli
    # claude must resolve on the agent's PATH wherever it was provisioned; node is expected on PATH already.
    path_env = os.pathsep.join([str(Path(claude_cli.bin).parent), os.environ.get("PATH", "")])
    shimmed = shim_path(path_env, cli, tmp_path / "shim")
    settings = write_hook_settings(agent_run_dir / "hook-settings.json", cli)
    _step("CLI block self-check", lambda: self_check(shimmed, settings, cli, required=("claude", "node")))
    return CliBlock(path=shimmed, settings=settings)


@pytest.fixture
def mcp_config(agent_case: EvalCase, codegraph: Any, agent_workspace: Any, agent_run_dir: Path) -> Path:
    """``mcp-codegraph.json`` (with-arm) or ``mcp-empty.json`` (without-arm), passed with --strict-mcp-config."""
    if agent_case.arm.has_tool:
        path = agent_run_dir / "mcp-codegraph.json"
        servers = {
            CODEGRAPH.name: {
                "type": "stdio",
                "command": str(codegraph.bin),
                "args": ["serve", "--mcp", "--path", str(agent_workspace.repo)],
                "env": {"CODEGRAPH_NO_DAEMON": "1", "DO_NOT_TRACK": "1"},
            }
        }
    else:
        path = agent_run_dir / "mcp-empty.json"
        servers = {}
    path.write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n", encoding="utf-8")
    return path


# -- model ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def agent_model_server(agent_eval_config: AgentEvalConfig) -> Iterator[ModelEndpoint]:
    """Per worker: the local Messages-API server for a stand-in backend; nothing for the real API."""
    from pytest_agent_eval.model import AnthropicBackend, CassetteBackend, make_backend, serve

    cfg = agent_eval_config
    options: dict[str, Any] = {"paths": cfg.cassettes} if cfg.backend == "cassette" else {}
    backend = _step(f"model backend {cfg.backend}", lambda: make_backend(cfg.backend, **options))
    if isinstance(backend, AnthropicBackend):
        yield ModelEndpoint("anthropic", backend.describe())
        return
    name = "cassette" if isinstance(backend, CassetteBackend) else "scripted"
    server = serve(backend)
    try:
        yield ModelEndpoint(name, backend.describe(), server.url)
    finally:
        server.stop()


@pytest.fixture
def agent_env(agent_workspace: Any, cli_block: CliBlock, agent_model_server: ModelEndpoint) -> dict[str, str]:
    """The agent's environment: isolated HOME/TMPDIR, the blocked PATH, the flags, the model endpoint."""
    env = agent_workspace.env(os.environ)
    env["PATH"] = cli_block.path
    env.update(AGENT_ENV)
    if agent_model_server.url is not None:
        env["ANTHROPIC_BASE_URL"] = agent_model_server.url
        env["ANTHROPIC_API_KEY"] = STANDIN_API_KEY
        env.pop("ANTHROPIC_AUTH_TOKEN", None)
    return env


@pytest.fixture
def codegraph_warm(
    agent_case: EvalCase, codegraph: Any, agent_workspace: Any, agent_env: dict[str, str]
) -> float | None:
    """Start the MCP server once and stop it before the agent, so its cold start is not measured."""
    if not agent_case.arm.has_tool:
        return None
    command = [str(codegraph.bin), "serve", "--mcp", "--path", str(agent_workspace.repo)]
    return warm_mcp_server(command, cwd=agent_workspace.repo, env=agent_env)


# -- the run -------------------------------------------------------------------------------------------------
@pytest.fixture
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
    codegraph_warm: float | None,
) -> RunRecord:
    """Drive ``claude -p`` over the item's turns; segments land in :func:`agent_run_dir`."""
    cfg = agent_eval_config
    record = record_of(request.node)
    record.update(backend=agent_model_server.to_dict(), run_dir=str(agent_run_dir))
    options = HeadlessOptions(
        claude=str(claude_cli.bin),
        mcp_config=mcp_config,
        settings=cli_block.settings,
        model=cfg.model,
        effort=cfg.effort,
        max_budget_usd=cfg.max_budget_usd,
        timeout_s=cfg.agent_timeout,
    )
    run = run_headless(
        agent_case.questions,
        label=f"{agent_case.arm.label}-{agent_case.run}".replace("/", "_"),
        out_dir=agent_run_dir,
        cwd=agent_workspace.repo,
        env=agent_env,
        options=options,
    )
    record["driver"] = run.to_dict()
    (agent_run_dir / "run.json").write_text(json.dumps(run.to_dict(), indent=2) + "\n", encoding="utf-8")
    return run


@pytest.fixture
def agent_result(request: pytest.FixtureRequest, agent_case: EvalCase, agent_run: RunRecord) -> AgentResult:
    """The run scored: figures attached to ``user_properties`` (junitxml carries them) and to the report."""
    from pytest_agent_eval.score import render_session, score_session
    from pytest_agent_eval.transcript import Session

    session = _step("reading the transcript", lambda: Session.from_files(agent_run.segments))
    if session.infra_error:
        raise AgentInfraError(session.infra_error)
    score = score_session(session, tool=CODEGRAPH)
    figures = gates.figures(score, wall_s=sum(agent_run.wall_s), tool=CODEGRAPH)
    blocks = render_session(session, tool=CODEGRAPH)
    (agent_run.segments[0].parent / "score.json").write_text(json.dumps(score, indent=2) + "\n", encoding="utf-8")
    record = record_of(request.node)
    record.update(figures=figures, score=score, blocks=blocks)
    for name, value in figures.items():
        if value is not None:
            request.node.user_properties.append((f"agent_eval.{name}", value))
    return AgentResult(case=agent_case, run=agent_run, score=score, figures=figures, blocks=blocks)


@pytest.fixture(scope="session")
def agent_thresholds(agent_eval_config: AgentEvalConfig) -> gates.Thresholds:
    """Thresholds from ``agent-eval.yaml`` (validated when the session started)."""
    return gates.load_thresholds(agent_eval_config.thresholds_file)


@pytest.fixture
def agent_gate(request: pytest.FixtureRequest, agent_thresholds: gates.Thresholds) -> Callable[[AgentResult], None]:
    """``agent_gate(result)`` FAILS the item on contamination or a threshold, naming each gate."""

    def check(result: AgentResult) -> None:
        case = result.case
        verdicts = gates.evaluate(
            result.score,
            result.figures,
            entry=case.entry.name,
            arm_name=case.arm.name,
            arm_label=case.arm.label,
            thresholds=agent_thresholds,
            tool=CODEGRAPH,
        )
        record = record_of(request.node)
        record["gates"] = [v.to_dict() for v in verdicts]
        record["contaminated"] = not verdicts[0].passed
        request.node.user_properties.append(("agent_eval.contaminated", record["contaminated"]))
        message = gates.failure_message(verdicts, case.entry.name, case.arm.label)
        if message:
            pytest.fail(message, pytrace=False)

    return check
