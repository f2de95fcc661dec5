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
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from pytest_agent_eval.plugin.hooks import item_state, plugin_of, record_of

# The harness, scoring and reports load when a body first needs them.
if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import AgentConfig, AgentSetup, CodingAgent
    from pytest_agent_eval.campaign.record import ItemRecord
    from pytest_agent_eval.campaign.store import Campaign
    from pytest_agent_eval.corpus.cases import EvalCase
    from pytest_agent_eval.corpus.keys import AnswerKey
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.harness.isolation import CliBlock
    from pytest_agent_eval.harness.provision import Provisioned
    from pytest_agent_eval.harness.sandbox import Sandbox
    from pytest_agent_eval.harness.workspace import Workspace
    from pytest_agent_eval.metrics import gates
    from pytest_agent_eval.model import ModelEndpoint
    from pytest_agent_eval.run.evaluation import AgentResult, EvalSession
    from pytest_agent_eval.run.item import ItemLife, ModelServers
    from pytest_agent_eval.settings.config import AgentEvalConfig
    from pytest_agent_eval.tool import RetrievalTool
    from pytest_agent_eval.transcript import Session

T = TypeVar("T")


def eval_session(config: pytest.Config) -> EvalSession:
    """This pytest session's :class:`~pytest_agent_eval.run.evaluation.EvalSession` (the plugin object's)."""
    return plugin_of(config).session


# -- configuration --------------------------------------------------------------------------------------------
def agent_campaign(request: pytest.FixtureRequest) -> Campaign:
    plugin = plugin_of(request.config)
    problem = plugin.settings.output_problem()  # found at collection, but by an xdist worker
    if problem:
        pytest.fail(problem, pytrace=False)
    from pytest_agent_eval.harness.writes import WriteFailed

    try:
        return plugin.session.item_campaign()
    except WriteFailed as exc:  # a full disk: one line naming the folder, no traceback
        pytest.fail(f"agent-eval: the campaign cannot be started: {exc}", pytrace=False)


def agent_resumed(request: pytest.FixtureRequest, agent_campaign: Campaign) -> dict[str, ItemRecord]:
    return eval_session(request.config).resumed()


def agent_failure_memo(request: pytest.FixtureRequest) -> FailureMemo:
    return plugin_of(request.config).failure_memo


# -- the item's life (pytest_agent_eval.run.item): each fixture is one step ----------------------------------
def coding_agent(agent_case: EvalCase, agent_eval_config: AgentEvalConfig) -> CodingAgent:
    return agent_case.agent or agent_eval_config.agent


def agent_item(
    request: pytest.FixtureRequest,
    agent_case: EvalCase,
    agent_eval_config: AgentEvalConfig,
    coding_agent: CodingAgent,
    agent_tool: RetrievalTool,
    agent_eval_memo: dict,
    agent_failure_memo: FailureMemo,
) -> ItemLife:
    from pytest_agent_eval.run.item import ItemLife

    campaign_dir = eval_session(request.config).campaign_dir
    return ItemLife(
        agent_case, agent_eval_config, coding_agent, agent_tool, agent_failure_memo, agent_eval_memo, campaign_dir
    )


def tool_build(agent_item: ItemLife) -> Provisioned:
    return agent_item.tool_build()


def agent_build(
    coding_agent: CodingAgent,
    agent_eval_config: AgentEvalConfig,
    agent_eval_memo: dict,
    agent_failure_memo: FailureMemo,
) -> Provisioned:
    from pytest_agent_eval.run.item import agent_build, remembered

    build = partial(agent_build, coding_agent, agent_eval_config.cache, agent_failure_memo)
    return remembered(agent_eval_memo, ("agent", coding_agent.name), build)


def corpus_repo(agent_item: ItemLife) -> Path:
    return agent_item.fetch_repo()


def indexed_repo(agent_item: ItemLife, corpus_repo: Path, tool_build: Provisioned) -> Path:
    return agent_item.index(corpus_repo, tool_build)


def agent_workspace(agent_item: ItemLife, indexed_repo: Path, tmp_path: Path) -> Workspace:
    return agent_item.workspace(indexed_repo, tmp_path / "workspace")


def agent_run_dir(request: pytest.FixtureRequest, agent_case: EvalCase, agent_campaign: Campaign) -> Path:
    from pytest_agent_eval.run.item import set_aside

    folder = agent_campaign.item_dir(item_state(request.node).item_id)
    # A resumed campaign re-running an item that errored: its old files are kept, never mixed in.
    set_aside(folder)
    return folder


def cli_block(agent_item: ItemLife, agent_build: Provisioned, tmp_path: Path) -> CliBlock:
    return agent_item.cli_block(agent_build, tmp_path / "shim")


def agent_setup(
    agent_item: ItemLife,
    tool_build: Provisioned,
    agent_workspace: Workspace,
    agent_run_dir: Path,
    agent_model_server: ModelEndpoint,
) -> AgentSetup:
    return agent_item.setup(tool_build, agent_workspace, agent_run_dir, agent_model_server.url)


def agent_config(agent_item: ItemLife, agent_setup: AgentSetup, cli_block: CliBlock) -> AgentConfig:
    return agent_item.configure(agent_setup, cli_block)


def agent_sandbox(
    agent_item: ItemLife,
    agent_build: Provisioned,
    tool_build: Provisioned,
    agent_workspace: Workspace,
    cli_block: CliBlock,
    agent_config: AgentConfig,
    agent_model_server: ModelEndpoint,
) -> Iterator[Sandbox | None]:
    with agent_item.sandbox(
        agent_build, tool_build, agent_workspace, cli_block, agent_config, agent_model_server
    ) as sandbox:
        yield sandbox


# -- model ---------------------------------------------------------------------------------------------------
def agent_replay_source(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Campaign | None:
    from pytest_agent_eval.campaign import baseline
    from pytest_agent_eval.campaign.store import Campaign
    from pytest_agent_eval.run.item import step

    path = eval_session(request.config).replay_path
    if path is None:
        return None
    folder = tmp_path_factory.mktemp("replay")
    return step(f"unpacking the replay baseline {path}", lambda: Campaign.open(baseline.unpack(path, folder)))


def agent_model_servers(agent_eval_config: AgentEvalConfig) -> Iterator[ModelServers]:
    from pytest_agent_eval.run.item import ModelServers

    servers = ModelServers(agent_eval_config)
    try:
        yield servers
    finally:
        servers.close()


def agent_model_server(request: pytest.FixtureRequest, coding_agent: CodingAgent) -> Iterator[ModelEndpoint]:
    from pytest_agent_eval.campaign import baseline
    from pytest_agent_eval.model import ModelEndpoint, serve
    from pytest_agent_eval.model.retry import HARNESS_RETRY
    from pytest_agent_eval.run.backends import cassette_backend
    from pytest_agent_eval.run.item import step

    source: Campaign | None = request.getfixturevalue("agent_replay_source")
    if source is None:
        yield request.getfixturevalue("agent_model_servers").for_agent(coding_agent)
        return
    record = record_of(request.node)
    segments = step(
        "finding the item's recording",
        lambda: baseline.recording(source, record.id, record.entry, record.arm, record.run, record.test),
    )
    backend = step("reading the item's recording", lambda: cassette_backend(segments, coding_agent))
    replayed = str(eval_session(request.config).replay_path)
    server = serve(backend, retry=HARNESS_RETRY)
    try:
        yield ModelEndpoint("cassette", backend.describe(), server.url, replay=replayed, log=server.log)
    finally:
        server.stop()


def agent_env(
    agent_item: ItemLife,
    agent_workspace: Workspace,
    cli_block: CliBlock,
    agent_config: AgentConfig,
    agent_model_server: ModelEndpoint,
) -> dict[str, str]:
    return agent_item.environment(agent_workspace, cli_block, agent_config, agent_model_server)


def tool_warm(
    agent_item: ItemLife,
    tool_build: Provisioned,
    indexed_repo: Path,
    agent_workspace: Workspace,
    agent_env: dict[str, str],
) -> float | None:
    return agent_item.warm(tool_build, indexed_repo, agent_workspace, agent_env)


def agent_block_proven(
    agent_item: ItemLife,
    agent_build: Provisioned,
    agent_setup: AgentSetup,
    agent_sandbox: Sandbox | None,
    agent_workspace: Workspace,
    agent_env: dict[str, str],
) -> None:
    from pytest_agent_eval.campaign.store import PROBE_FOLDER

    probe = replace(agent_setup, config_dir=agent_setup.config_dir / PROBE_FOLDER)
    agent_item.prove_block(agent_build, probe, agent_sandbox, agent_workspace, agent_env)


# -- the run -------------------------------------------------------------------------------------------------
def agent_run(
    request: pytest.FixtureRequest,
    agent_item: ItemLife,
    agent_build: Provisioned,
    agent_setup: AgentSetup,
    agent_workspace: Workspace,
    agent_env: dict[str, str],
    agent_model_server: ModelEndpoint,
    tool_warm: float | None,
    agent_sandbox: Sandbox | None,
    agent_block_proven: None,
) -> RunRecord:
    record = record_of(request.node)
    tool = request.getfixturevalue("tool_build")  # already set up: the agent's config and the index depend on it
    indexed = request.getfixturevalue("indexed_repo")
    # The fetched repository under the index; a test that supplies its own indexed_repo has none.
    repo = request.getfixturevalue("corpus_repo") if "corpus_repo" in request.fixturenames else indexed
    agent_item.note_run(record, agent_build, tool, repo, agent_model_server, agent_setup.config_dir)
    options = agent_item.drive_options(agent_model_server, agent_sandbox)
    state = item_state(request.node)
    state.agent_running = True
    try:
        run = agent_item.run(
            agent_build, agent_setup, options, agent_workspace, indexed, agent_env, agent_model_server, record
        )
    except KeyboardInterrupt:
        raise  # the flag stays set: the interrupt hook names the agent's run
    except BaseException:
        state.agent_running = False
        raise
    state.agent_running = False
    return run


def agent_result(
    request: pytest.FixtureRequest,
    agent_case: EvalCase,
    agent_campaign: Campaign,
    agent_resumed: dict[str, ItemRecord],
) -> AgentResult:
    from pytest_agent_eval.campaign.record import same_item
    from pytest_agent_eval.harness.drivers import AgentInfraError
    from pytest_agent_eval.metrics import gates
    from pytest_agent_eval.metrics.figures import figures_of
    from pytest_agent_eval.metrics.scorecard import score as score_of
    from pytest_agent_eval.model.record import requests_beside
    from pytest_agent_eval.report.blocks import render_scorecard
    from pytest_agent_eval.report.terminal import model_notes
    from pytest_agent_eval.run.evaluation import AgentResult
    from pytest_agent_eval.run.item import step

    record = record_of(request.node)
    done = agent_resumed.get(record.id)
    if done is not None and done.nodeid is not None and not same_item(done.nodeid, record.nodeid or ""):
        done = None  # the same id from another test (test_a.express-with-1 vs test_b's): not this item's run
    if done is not None:
        agent_run = step("reading the resumed item", lambda: _resumed_run(agent_campaign, done))
        keep = (
            "backend", "tool_version", "tool_spec", "agent", "agent_version", "driver", "attempts", "wall_s",
            "agent_s", "stalled", "source", "tool_provision", "agent_provision", "warnings",
        )  # fmt: skip
        for key in keep:
            setattr(record, key, getattr(done, key))
        record.segments, record.resumed = list(done.segments), True
    else:
        agent_run = request.getfixturevalue("agent_run")
    agent = request.getfixturevalue("coding_agent")
    session = step("reading the transcript", lambda: agent.read_transcript(agent_run.segments))
    if session.infra_error:
        raise AgentInfraError(session.infra_error)
    tool = request.getfixturevalue("agent_tool")
    requests = step("reading the model's request record", partial(requests_beside, agent_run.segments[0]))
    # scored once: the figures and the printed blocks come from one card
    entry, questions = agent_case.entry, list(agent_case.questions)  # the turns this item asked
    key = entry.key.first(len(questions)) if entry.key is not None else None
    card = score_of(session, tool, requests=requests, key=key, keyed=True, questions=questions)
    score = card.to_dict()
    # A judge is asked once per run: a resumed item keeps the judgement its record holds (metrics/judge.py).
    judged = (done.scores or {}).get("judge") if done is not None else None
    judge = request.getfixturevalue("agent_eval_config").judge
    if judged is None and judge:
        judged = step("asking the judge", partial(_judged, judge, questions, key, session))
    if judged:
        score["judge"] = judged
    figures = figures_of(
        score, has_tool=agent_case.arm.has_tool, wall_s=agent_run.agent_s, tool=tool, stalled=record.stalled
    )
    if done is None:
        from pytest_agent_eval.harness.drivers import NotWritten
        from pytest_agent_eval.harness.writes import WriteFailed, replace_whole

        try:
            replace_whole(agent_run.segments[0].parent / "score.json", (json.dumps(score, indent=2) + "\n").encode())
        except WriteFailed as exc:  # a full disk: an infrastructure error naming the folder, no traceback
            raise NotWritten(str(exc)) from None
    # Known even when the test never calls agent_gate: the campaign tables drop contaminated without-arms.
    record.contaminated = not gates.contamination_verdict(score, agent_case.arm.has_tool, tool).passed
    record.figures, record.scores, record.blocks = figures, score, render_scorecard(card)
    for name, value in figures.items():
        if value is not None:
            request.node.user_properties.append((f"agent_eval.{name}", value))
    for note in model_notes([record]):  # junit's reader too learns that the figures are a stand-in model's
        request.node.user_properties.append(("agent_eval.model_backend", note))
    return AgentResult(case=agent_case, run=agent_run, score=score, figures=figures, blocks=record.blocks or "")


def _judged(reference: str, questions: list[str], key: AnswerKey | None, session: Session) -> dict[str, Any]:
    """The judge's judgement of each turn's answer; why none, when the judge cannot run here (no real key)."""
    from pytest_agent_eval.metrics.answers import turn_answers
    from pytest_agent_eval.metrics.judge import NoJudge, judge_run, load_judge

    try:
        return judge_run(load_judge(reference), questions, turn_answers(session, len(questions)), key)
    except NoJudge as exc:
        return {"judge": reference, "grade": None, "skipped": str(exc)}


def _resumed_run(campaign: Campaign, done: ItemRecord) -> RunRecord:
    """The driver's record of a completed item, rebuilt from what the campaign saved."""
    from pytest_agent_eval.harness.drivers import RunRecord

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
