"""One item's life as one object, usable without pytest: provision → index → workspace → seal → agent config →
environment → warm → prove the block → drive, with retries → the driver's record.

:class:`ItemLife` holds what an item is (its case, the settings, the agent and the tool) and what a process
shares across items (``memo``: what was provisioned, warmed and proven; ``failures``: what failed to provision
this session). Each step is a method, so the plugin's fixtures call one each (a test may replace any of them
with its own), and :meth:`ItemLife.live` runs them all in order.

A harness step that fails raises :class:`~pytest_agent_eval.harness.drivers.AgentInfraError` naming the step —
never a verdict on the tool. With ``retries`` the agent's run (not provisioning) is tried up to that many more
times on such an error; each failed attempt's files are kept in ``attempt-<k>/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_agent_eval.agents.base import AgentConfig, AgentSetup, CodingAgent, Drive, DriveOptions, McpServer
from pytest_agent_eval.harness.drivers import AgentInfraError, NotWritten, RunRecord, TurnError
from pytest_agent_eval.harness.writes import DISK_FULL, WriteFailed, cannot_write, replace_whole

if TYPE_CHECKING:
    from pytest_agent_eval.campaign.record import ItemRecord
    from pytest_agent_eval.corpus.cases import EvalCase
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.harness.isolation import CliBlock
    from pytest_agent_eval.harness.provision import Provisioned
    from pytest_agent_eval.harness.sandbox import Sandbox
    from pytest_agent_eval.harness.workspace import Workspace
    from pytest_agent_eval.model import Faults, ModelEndpoint
    from pytest_agent_eval.settings.config import AgentEvalConfig
    from pytest_agent_eval.tool import RetrievalTool

T = TypeVar("T")


def step(what: str, action: Callable[[], T], where: Path | None = None) -> T:
    """Run a harness step; any failure becomes an infrastructure error naming the step (a full disk: the folder,
    the file's or ``where``, and its free space)."""
    try:
        return action()
    except AgentInfraError:
        raise
    except WriteFailed as exc:
        raise NotWritten(f"{what}: {exc}") from exc
    except OSError as exc:
        if exc.errno in DISK_FULL and (exc.filename is not None or where is not None):  # where, and the space left
            written = Path(exc.filename) if exc.filename is not None else Path(where or ".") / "its files"
            raise NotWritten(f"{what}: {cannot_write(written, exc)}") from exc
        raise AgentInfraError(f"{what}: {exc}") from exc
    except Exception as exc:
        raise AgentInfraError(f"{what}: {exc}") from exc


def remembered(memo: dict, key: Any, make: Callable[[], T]) -> T:
    """``make()``, once per ``key`` in ``memo``."""
    if key not in memo:
        memo[key] = make()
    return memo[key]


def agent_build(agent: CodingAgent, cache: Path, failures: FailureMemo) -> Provisioned:
    """The agent's CLI, provisioned (and tried once per session)."""
    provision = partial(step, f"provisioning {agent.title}", lambda: agent.provision(cache))
    return failures.attempt(agent.name, provision)


@contextmanager
def model_endpoint(
    cfg: AgentEvalConfig, api: str | None = None, agent: CodingAgent | None = None, faults: Faults | None = None
) -> Iterator[ModelEndpoint]:
    """The loopback model server of ``cfg.backend`` for an agent speaking ``api`` (the session's agent's when not
    given): a stand-in, a cassette, or the forwarder to the real API; the model's transient failures retried by the
    harness's policy (model/retry.py). ``faults``: what the server injects (a test's)."""
    from pytest_agent_eval.model import ModelEndpoint, ScriptedBackend, serve
    from pytest_agent_eval.model.retry import HARNESS_RETRY
    from pytest_agent_eval.run.backends import make_backend, resolve_backend

    # the forwarder (anthropic, openai, gemini): the agent's CLI gets its loopback URL, not the key
    name = resolve_backend(cfg.backend, api or cfg.agent.api)
    options: dict[str, Any] = {"paths": cfg.cassettes} if name == "cassette" else {}
    configured = getattr(agent or cfg.agent, "model", None)  # the model Codex and Gemini CLI are told to ask for
    if name in ("openai", "gemini") and isinstance(configured, str):
        options["model"] = configured  # the forwarder sends on requests for that model only
    backend = step(f"model backend {name}", lambda: make_backend(name, **options))
    if isinstance(backend, ScriptedBackend):  # the stand-in calls the tool under test, and the agent's, by their names
        speaks = (agent or cfg.agent).stand_in_tools
        backend = replace(backend, explore=cfg.tool.explore, cli=cfg.tool.cli, answers=cfg.stand_in_answers,
                          speaks=speaks)  # fmt: skip
        if cfg.stand_in_answers in ("key", "wrong"):  # it names the key, or a file outside it (docs/metrics/answers.md)
            from pytest_agent_eval.corpus.keys import answer_sheet
            from pytest_agent_eval.corpus.load import load_corpus

            backend = replace(backend, keys=answer_sheet(load_corpus(cfg.corpus)))
    server = serve(backend, faults=faults, retry=HARNESS_RETRY)  # the one retry policy, whatever the agent
    try:
        yield ModelEndpoint(name, backend.describe(), server.url, log=server.log)
    finally:
        server.stop()


class ModelServers:
    """A process's model servers: one per backend its items' agents resolve to, started when first asked for. The
    stand-in answers every agent's API from one server; ``auto`` may resolve to the real API for one agent (its key
    set) and the stand-in for another, so agents speaking different APIs may need different servers."""

    def __init__(self, cfg: AgentEvalConfig) -> None:
        self.cfg = cfg
        self._started: dict[tuple[str, tuple], ModelEndpoint] = {}
        self._stack = ExitStack()

    def for_agent(self, agent: CodingAgent) -> ModelEndpoint:
        from pytest_agent_eval.run.backends import resolve_backend

        name = resolve_backend(self.cfg.backend, agent.api)
        key = (name, agent.stand_in_tools)  # an agent naming the stand-in's tools its own way is spoken to so
        if key not in self._started:
            self._started[key] = self._stack.enter_context(model_endpoint(self.cfg, agent.api, agent))
        return self._started[key]

    def close(self) -> None:
        self._stack.close()


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


def note_retries(run: RunRecord, run_dir: Path, endpoint: ModelEndpoint) -> None:
    """The run's ``api_retries`` per turn from the model server's record of this attempt: the tries the harness
    retried and the agent's own re-sends alike (model.record.retries_by_turn); left as the driver counted them where
    the server keeps no record or the driver did not time its turns (tmux)."""
    from pytest_agent_eval.model.record import REQUESTS_FILE, read_requests, retries_by_turn

    if endpoint.log is None or len(run.started_at) != len(run.api_retries):
        return
    try:
        entries = read_requests(run_dir / REQUESTS_FILE)
    except (OSError, ValueError):
        return
    run.api_retries = retries_by_turn(entries, run.started_at)


def note_driver(record: ItemRecord, run: RunRecord) -> None:
    """Put the driver's record on the item's, with ``stalled`` up front: a stalled turn's time is no
    measurement of the agent, so whatever compares times must see it without digging."""
    record.driver = run.to_dict()
    record.stalled = bool(run.stalled_turns)


def provenance(record: ItemRecord, repo: Path, tool: Any, agent: Any, offline: bool) -> None:
    """Where the item's code under test and tools came from (see :func:`pytest_agent_eval.corpus.repos.
    fetched_source` and :class:`pytest_agent_eval.harness.provision.Provisioned`), and what to warn about."""
    from pytest_agent_eval.corpus.repos import fallback_warning, fetched_source
    from pytest_agent_eval.harness.provenance import git_state

    # A repository the harness did not fetch (a test's own folder) is described as a local path.
    record.source = fetched_source(repo) or {"kind": "local", "path": str(repo), "git_state": git_state(repo)}
    record.tool_provision = dict(getattr(tool, "origin", None) or {})
    record.agent_provision = dict(getattr(agent, "origin", None) or {})
    fallback = fallback_warning(repo, offline)
    record.warnings = [fallback] if fallback else []


@dataclass
class ItemLife:
    """One item (``case``: entry × arm × run × driver) run by ``agent`` with ``tool``, under ``cfg``."""

    case: EvalCase
    cfg: AgentEvalConfig
    agent: CodingAgent
    tool: RetrievalTool
    failures: FailureMemo
    memo: dict = field(default_factory=dict)  # per process: provisioned, fetched, warmed, proven
    campaign_dir: Path | None = None  # the campaign the item writes into: hidden from the agent with its siblings

    # -- tools, repository, index --------------------------------------------------------------------------
    def tool_build(self) -> Provisioned:
        """The tool's build of this arm, provisioned once per version (and tried once per session)."""
        from pytest_agent_eval.harness.provision import provision_tool

        tool, spec = self.tool, self.cfg.tool_spec(self.case.arm)
        provision = partial(
            step, f"provisioning {tool.name} {spec}", lambda: provision_tool(tool, spec, self.cfg.cache)
        )
        key = ("tool", tool.name, spec)
        return remembered(self.memo, key, lambda: self.failures.attempt(f"{tool.name} {spec}", provision))

    def fetch_repo(self) -> Path:
        """The entry's repository under the corpus folder, fetched once (and tried once per session)."""
        from pytest_agent_eval.corpus.repos import fetch_repo

        entry, cfg = self.case.entry, self.cfg
        fetch = partial(step, f"fetching {entry.name}", lambda: fetch_repo(entry, cfg.corpus_dir, offline=cfg.offline))
        key = f"repo {entry.name} {entry.repo} {entry.source} offline={cfg.offline} in {cfg.corpus_dir}"
        return remembered(self.memo, ("repo", entry.name), lambda: self.failures.attempt(key, fetch))

    def index(self, repo: Path, build: Provisioned) -> Path:
        """A copy of ``repo`` indexed by ``build`` (once per repository × build, locked)."""
        from pytest_agent_eval.harness.index import indexed_copy

        index = partial(
            step,
            f"indexing {repo.name} with {self.tool.name} {build.version}",
            lambda: indexed_copy(repo, self.tool, build, self.cfg.cache),
        )
        return self.failures.attempt(f"index {repo} with {build.bin}", index)

    def workspace(self, indexed: Path, folder: Path) -> Workspace:
        """The item's own copy of ``indexed`` (the without-arm's without the tool's state), HOME and TMPDIR."""
        from pytest_agent_eval.harness.workspace import make_workspace

        return step("making the workspace", lambda: make_workspace(indexed, folder, self._state_left_out))

    @property
    def _state_left_out(self) -> tuple[str, ...]:
        return () if self.case.arm.has_tool else self.tool.state_dirs

    # -- isolation -----------------------------------------------------------------------------------------
    def cli_block(self, build: Provisioned, folder: Path) -> CliBlock:
        """PATH without the tool's CLI (mirrors in ``folder``), where the agent and node still resolve."""
        from pytest_agent_eval.harness.isolation import CliBlock, shim_path
        from pytest_agent_eval.harness.runtimes import with_node

        # the agent must resolve on its PATH wherever it was provisioned, and node (the machine's or the bundled)
        path_env = os.pathsep.join([str(Path(build.bin).parent), with_node(os.environ.get("PATH", ""))])
        return CliBlock(shim_path(path_env, self.tool.cli, folder), folder)

    def setup(self, tool_build: Provisioned, workspace: Workspace, config_dir: Path, model_url: str) -> AgentSetup:
        """What the agent is configured from: the with-arm's MCP server, the deny of the tool's CLI."""
        servers = ()
        if self.case.arm.has_tool:
            command = self.tool.mcp_command(tool_build.bin, workspace.repo)
            servers = (McpServer(self.tool.name, tuple(command), dict(self.tool.env)),)
        return AgentSetup(config_dir, workspace.home, model_url, servers, self.tool.cli, self.tool.deny_reason)

    def configure(self, setup: AgentSetup, block: CliBlock) -> AgentConfig:
        """The agent's config written, and both layers of the block checked (the PATH every item, the agent's
        deny once per process and config); the item aborts if either leaks."""
        from pytest_agent_eval.harness.isolation import self_check

        config = step("writing the agent's config", lambda: self.agent.configure(setup), setup.config_dir)
        proven: set[str] = self.memo.setdefault("proven denies", set())  # the PATH layer is checked every item
        cli, required = self.tool.cli, (self.agent.executable, *self.agent.runtimes)
        check = partial(self.agent.check_deny, config, cli, proven=proven)
        step("CLI block self-check", lambda: self_check(block.path, cli, required, check))
        return config

    @contextmanager
    def sandbox(
        self,
        build: Provisioned,
        tool_build: Provisioned,
        workspace: Workspace,
        block: CliBlock,
        config: AgentConfig,
        endpoint: ModelEndpoint,
    ) -> Iterator[Sandbox | None]:
        """The bubblewrap sandbox the agent runs in (None where a test switched it off), its model port carried in."""
        from pytest_agent_eval.harness import runtimes, sandbox
        from pytest_agent_eval.harness.relay import carried

        if not sandbox.enabled():
            yield None
            return
        step("sandbox", sandbox.check_sandbox)
        node = runtimes.node()
        # Of the run folder, only the agent's config files: the folder also receives this attempt's transcript
        # and stderr, and an earlier attempt's (attempt-<k>/), which no later attempt may read.
        readable = [*sandbox.install_paths(build.bin), *config.readable, block.folder, *(node.reads if node else ())]
        # its MCP server runs inside, under the agent
        tool_install = sandbox.install_paths(tool_build.bin) if self.case.arm.has_tool else []
        writable = [workspace.repo, workspace.home, workspace.tmp]
        # The campaign holds the other items' transcripts (the with-arm's tool answers); only this item's folder
        # comes back. The corpus folder may lie outside the cache.
        cfg = self.cfg
        campaigns = self.campaign_dir.parent if self.campaign_dir is not None else cfg.out
        hidden = [p for p in (cfg.out, campaigns, cfg.corpus_dir) if p is not None]
        # The model's port is the only way out, whatever the backend: the real API is reached through the harness's
        # forwarder on that port, which holds the key (see pytest_agent_eval.model.anthropic).
        with ExitStack() as stack:
            relay = step("model relay", lambda: stack.enter_context(carried(endpoint.url)))
            yield step(
                "sandbox",
                lambda: sandbox.sandbox_for(
                    cache=cfg.cache, writable=writable, readable=readable, hidden=hidden, relay=relay,
                    tool=self.tool, tool_install=tool_install, shell_prefix_var=self.agent.shell_prefix_var,
                    shell_from=self.agent.shell_from, managed=self.agent.managed_paths, binds=config.binds,
                ),
            )  # fmt: skip

    def environment(
        self, workspace: Workspace, block: CliBlock, config: AgentConfig, endpoint: ModelEndpoint
    ) -> dict[str, str]:
        """The agent's environment: the allow-listed part of this process's with the workspace's HOME and TMPDIR,
        the agent's flags and endpoint, its config's variables, the tool's flags, npm closed, the blocked PATH."""
        from pytest_agent_eval.harness.sandbox import npm_env

        env = self.agent.process_environment(workspace.env(os.environ), endpoint.url)
        env.update(config.env)
        env.update(self.tool.env)
        env.update(npm_env(workspace.home), PATH=block.path)
        return env

    def warm(self, tool_build: Provisioned, indexed: Path, workspace: Workspace, env: dict[str, str]) -> float | None:
        """Start and stop the with-arm's MCP server once per build and index, so its cold start is not measured."""
        from pytest_agent_eval.harness.drivers import warm_mcp_server

        if not self.case.arm.has_tool:
            return None
        command = self.tool.mcp_command(tool_build.bin, workspace.repo)
        key = ("warm", str(tool_build.bin), str(indexed))
        return remembered(self.memo, key, lambda: warm_mcp_server(command, cwd=workspace.repo, env=env))

    def prove_block(
        self,
        build: Provisioned,
        setup: AgentSetup,
        sandbox: Sandbox | None,
        workspace: Workspace,
        env: dict[str, str],
    ) -> None:
        """Once per agent per process: a probe session through the agent itself, in the sandbox, whose shell call of the
        tool must come back denied (:mod:`pytest_agent_eval.run.probe`); ``setup.config_dir`` receives its
        files."""
        from pytest_agent_eval.run.probe import prove_block

        options = DriveOptions(sandbox=sandbox)
        probe = partial(
            prove_block, self.agent, build, setup, options, cwd=workspace.repo, env=env,
            deny_marker=self.tool.deny_marker,
        )  # fmt: skip
        key = ("block proven", self.agent.name)
        remembered(self.memo, key, lambda: step(f"CLI block probe through {self.agent.title}", probe))

    # -- the run -------------------------------------------------------------------------------------------
    def drive_options(self, endpoint: ModelEndpoint, sandbox: Sandbox | None) -> DriveOptions:
        from pytest_agent_eval.harness.drivers.watch import STALL_S_REAL_API, STALL_S_STAND_IN

        cfg = self.cfg
        return DriveOptions(
            model=cfg.model,
            effort=cfg.effort,
            max_budget_usd=cfg.max_budget_usd,
            timeout_s=cfg.agent_timeout,
            stall_s=STALL_S_REAL_API if endpoint.real else STALL_S_STAND_IN,
            sandbox=sandbox,
        )

    def run(
        self,
        build: Provisioned,
        setup: AgentSetup,
        options: DriveOptions,
        workspace: Workspace,
        indexed: Path,
        env: dict[str, str],
        endpoint: ModelEndpoint,
        record: ItemRecord,
    ) -> RunRecord:
        """Drive the agent over the item's turns into ``setup.config_dir`` (the run folder), retrying an
        infrastructure error ``cfg.retries`` times; ``record`` gets the attempts and the driver's record."""
        case, run_dir = self.case, setup.config_dir
        if case.driver not in self.agent.modes:
            raise AgentInfraError(f"{self.agent.title} cannot be driven {case.driver} (it has {self.agent.modes})")
        problem = self.agent.stand_in_problem() if endpoint.backend == "scripted" else None
        if problem is not None:  # else its without-arm would answer with no tool call, and pass
            raise AgentInfraError(problem)
        record.mode = case.driver
        attempts = self.cfg.retries + 1
        for attempt in range(attempts):
            step("renewing the workspace", partial(self._fresh_attempt, workspace, indexed if attempt else None))
            unrecorded = None  # why the model server could not record this attempt's requests (a full disk)
            gave_up = None  # why it gave up on the model (model/retry.py)
            try:
                # an agent whose config lives under HOME writes it again in the renewed one
                config = step("writing the agent's config", lambda: self.agent.configure(setup), setup.config_dir)
                with _recording(endpoint, run_dir):
                    try:
                        run = self.agent.drive(Drive(
                            build, case.questions, mode=case.driver, config=config, options=options,
                            label=f"{case.arm.label}-{case.run}".replace("/", "_"), out_dir=run_dir,
                            cwd=workspace.repo, env={**env, **config.env},
                        ))  # fmt: skip
                    finally:
                        unrecorded = endpoint.log.failure if endpoint.log is not None else None
                        gave_up = endpoint.log.gave_up if endpoint.log is not None else None
                    if unrecorded:  # the model server answered the agent an error instead (a full disk)
                        raise NotWritten(f"the model's request record could not be kept: {unrecorded}")
                note_retries(run, run_dir, endpoint)
                infra = step("reading the transcript", partial(self.agent.read_transcript, run.segments)).infra_error
                if infra:
                    raise AgentInfraError(infra)
                break
            except WriteFailed as exc:  # the request record could not even be begun
                raise NotWritten(str(exc)) from None
            except AgentInfraError as exc:
                if isinstance(exc, TurnError):
                    note_retries(exc.run, run_dir, endpoint)
                    note_driver(record, exc.run)
                if isinstance(exc, NotWritten):
                    raise
                if unrecorded:  # the agent met the server's error for it
                    raise NotWritten(f"the model's request record could not be kept: {unrecorded}") from exc
                if gave_up:  # the model's own status and message, whatever the CLI made of them
                    exc = AgentInfraError(f"{gave_up} (the agent: {exc})")
                if attempt == attempts - 1:
                    if record.attempts:
                        raise AgentInfraError(f"{exc} (attempt {attempt + 1} of {attempts})") from exc
                    raise exc
                kept = set_aside(run_dir)
                record.attempts.append({"error": str(exc), "folder": kept.name if kept else None})
        note_driver(record, run)
        try:
            replace_whole(run_dir / "run.json", (json.dumps(run.to_dict(), indent=2) + "\n").encode())
        except WriteFailed as exc:
            raise NotWritten(str(exc)) from None
        return run

    def _fresh_attempt(self, workspace: Workspace, source: Path | None) -> None:
        """A HOME and TMPDIR no earlier process wrote (the block probe's, or an earlier attempt's), and for a
        retry (``source``: the indexed repository) a fresh repository copy: nothing an attempt left reaches the
        next (see harness.workspace.fresh_attempt)."""
        from pytest_agent_eval.harness.sandbox import npm_env
        from pytest_agent_eval.harness.workspace import fresh_attempt

        fresh_attempt(workspace, source, self._state_left_out)
        npm_env(workspace.home)  # the npm settings files the agent's environment names

    def note_run(
        self,
        record: ItemRecord,
        build: Provisioned,
        tool_build: Provisioned,
        repo: Path,
        endpoint: ModelEndpoint,
        run_dir: Path,
    ) -> None:
        """What the record says of the run before it starts: the model, the tool's and the agent's builds, where
        the code came from (``repo``: the fetched repository, else the one indexed)."""
        record.backend, record.run_dir = endpoint.to_dict(), str(run_dir)
        record.tool_version = tool_build.version
        record.tool_spec = self.cfg.tool_spec(self.case.arm)
        record.agent, record.agent_version = self.agent.name, build.version
        provenance(record, repo, tool_build, build, self.cfg.offline)

    # -- all of it -----------------------------------------------------------------------------------------
    def live(self, run_dir: Path, scratch: Path, record: ItemRecord) -> RunRecord:
        """The whole life, without pytest: every step above in order, the item's files in ``run_dir`` (a fresh
        folder), its workspace and PATH mirrors in ``scratch``, what it learnt in ``record``."""
        from pytest_agent_eval.campaign.store import PROBE_FOLDER

        build = agent_build(self.agent, self.cfg.cache, self.failures)
        tool_build = self.tool_build()
        repo = self.fetch_repo()
        indexed = self.index(repo, tool_build)
        workspace = self.workspace(indexed, scratch / "workspace")
        block = self.cli_block(build, scratch / "shim")
        with ExitStack() as stack:
            endpoint = stack.enter_context(model_endpoint(self.cfg, self.agent.api, self.agent))
            setup = self.setup(tool_build, workspace, run_dir, endpoint.url)
            config = self.configure(setup, block)
            sandbox = stack.enter_context(self.sandbox(build, tool_build, workspace, block, config, endpoint))
            env = self.environment(workspace, block, config, endpoint)
            self.warm(tool_build, indexed, workspace, env)
            self.prove_block(build, replace(setup, config_dir=run_dir / PROBE_FOLDER), sandbox, workspace, env)
            self.note_run(record, build, tool_build, repo, endpoint, run_dir)
            options = self.drive_options(endpoint, sandbox)
            return self.run(build, setup, options, workspace, indexed, env, endpoint, record)


def _recording(endpoint: ModelEndpoint, folder: Path) -> ContextManager[Any]:
    """The model server records this attempt's requests in the item's folder (outside the sandbox)."""
    from pytest_agent_eval.model.record import REQUESTS_FILE

    return endpoint.log.into(folder / REQUESTS_FILE) if endpoint.log is not None else nullcontext()
