"""The pytest plugin: options and ini keys, the ``agent_eval`` marker, items, reports — glue only.

Items: any test that uses the agent fixtures (``evals/test_ab.py`` does) becomes one item per corpus entry ×
arm × run (:mod:`pytest_agent_eval.cases`), with ids like ``express-with-1``, so ``-k express`` and
``-k "with and not without"`` select as expected. A pinned arm (``--arms with@local:../cg,with@1.6.0``) shows
as ``express-with:1.6.0-1``: pytest's ``-k`` cannot parse ``@``, so the id writes it as ``:``.

The run's state lives in :class:`pytest_agent_eval.session.EvalSession` (the campaign, the records, the
summary, the report, the compare gate); each hook here hands it what pytest knows and nothing more. The
harness work lives in :mod:`pytest_agent_eval.fixtures`, the settings in :mod:`pytest_agent_eval.config`.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval import fixtures
from pytest_agent_eval.campaign.selection import Restored, ResumeError, restore
from pytest_agent_eval.campaign.store import MANIFEST, Campaign, StoreError
from pytest_agent_eval.cases import EvalCase, SelectionError, cases_for, select_entries
from pytest_agent_eval.config import OPTIONS, THRESHOLDS_INI, AgentEvalConfig, OptionError, for_test, resolve
from pytest_agent_eval.corpus import CorpusEntry, CorpusError, load_corpus
from pytest_agent_eval.fixtures import CONFIG_KEY, FAILURES_KEY, ITEM_ID_KEY, SESSION_KEY, record_of
from pytest_agent_eval.harness.drivers import AgentInfraError
from pytest_agent_eval.harness.drivers.headless import stall_note
from pytest_agent_eval.harness.failures import FailureMemo
from pytest_agent_eval.harness.progress import listen
from pytest_agent_eval.report import gates
from pytest_agent_eval.resume_command import resume_command
from pytest_agent_eval.session import EvalSession, SessionError

CORPUS_KEY = pytest.StashKey[Any]()
SETUP_S_KEY = pytest.StashKey[float]()
INTERRUPTED_KEY = pytest.StashKey[bool]()
RESTORED_KEY = pytest.StashKey[Any]()
MARKER = (
    "agent_eval(entries=None, arms=None, runs=None, turns=None): an agent evaluation (a test using the agent "
    "fixtures), parametrized over corpus entry × arm × run; the arguments narrow the entries and override "
    "--arms/--agent-eval-runs/--agent-eval-turns for this test. Every generated item carries the marker, so "
    "-m agent_eval selects them"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agent-eval", "A/B evaluation of a retrieval MCP server (option > ini key > default)")
    for option in OPTIONS:
        dest = f"agent_eval_{option.attr}"
        text = option.help.replace("%", "%%")  # argparse %-formats help (residual:+20%)
        names = [option.flag] + ([option.short] if option.short else [])
        if option.is_flag:
            group.addoption(*names, action="store_true", default=None, dest=dest, help=text)
        else:
            group.addoption(*names, default=None, dest=dest, metavar=option.metavar, help=text)
        parser.addini(option.ini, f"{option.help} [ini for {option.flag}]", default="")
    parser.addini(THRESHOLDS_INI, "thresholds file, relative to rootdir (default agent-eval.yaml)", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    config.pluginmanager.register(fixtures, "agent_eval_fixtures")  # the fixtures users and evals/ touch
    worker_input = getattr(config, "workerinput", None)
    try:
        cfg = _resolve(config)
        if worker_input is not None:  # the controller restored a resumed campaign's settings: take the same
            restored = worker_input.get("agent_eval_restored")
            restored = Restored.from_dict(restored) if restored else None
        else:
            restored = _restored(config, cfg)
        if restored is not None:
            _apply(config, restored)
            cfg = _resolve(config)
        gates.load_thresholds(cfg.thresholds_file)  # a bad thresholds file is a usage error, before anything runs
    except (OptionError, gates.ThresholdError, ResumeError) as exc:
        raise pytest.UsageError(str(exc)) from None
    session = EvalSession(cfg)
    session.invoked_with(config.args, config.option.keyword, config.option.markexpr)
    session.keep_only = set(restored.selected) if restored is not None and restored.selected is not None else None
    config.stash[CONFIG_KEY] = cfg
    config.stash[SESSION_KEY] = session
    config.stash[RESTORED_KEY] = restored
    if worker_input is not None:  # an xdist worker writes into the campaign its controller made
        session.join(worker_input.get("agent_eval_campaign") or None, worker_input.get("agent_eval_replay") or None)
        config.stash[FAILURES_KEY] = FailureMemo(cfg.cache, worker_input.get("agent_eval_session") or uuid.uuid4().hex)
        return
    failures = config.stash[FAILURES_KEY] = FailureMemo(cfg.cache, uuid.uuid4().hex[:12])
    config.add_cleanup(failures.clear)
    try:
        session.claim()
    except SessionError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.add_cleanup(session.close)
    config.pluginmanager.register(Reporter(session), "agent_eval_reporter")
    # Installs and index builds announce themselves; under xdist they run on workers, whose output
    # pytest does not show, and the builds are still listed in <cache>/builds.log.
    config.add_cleanup(listen(lambda text: _show_progress(config, text)))


def _resolve(config: pytest.Config) -> AgentEvalConfig:
    return resolve(lambda attr: config.getoption(f"agent_eval_{attr}"), lambda key: config.getini(key), config.rootpath)


def _restored(config: pytest.Config, cfg: AgentEvalConfig) -> Restored | None:
    """With --agent-eval-resume: the campaign's selection and settings (a flag contradicting them: ResumeError)."""
    if cfg.resume is None:
        return None
    try:
        manifest = Campaign.open(cfg.resume).manifest
    except StoreError as exc:
        raise pytest.UsageError(f"--agent-eval-resume: {exc}") from None
    return restore(
        manifest, lambda attr: config.getoption(f"agent_eval_{attr}"), config.option.keyword, config.option.markexpr
    )


def _apply(config: pytest.Config, restored: Restored) -> None:
    """As if the resumed campaign's options, -k and -m had been typed on this command line."""
    for attr, text in restored.options.items():
        setattr(config.option, f"agent_eval_{attr}", text)
    config.option.keyword = restored.keyword
    config.option.markexpr = restored.markexpr


def _show_progress(config: pytest.Config, text: str) -> None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if terminal is None:
        return
    # Announcements come from inside fixtures, while output is captured: step around it, as live logging does.
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        terminal.ensure_newline()
        terminal.write_line(f"agent-eval: {text}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → worker: share the campaign folder, so every item lands in it, and a resumed
    campaign's settings, so every worker selects what the controller restored."""
    folder = node.config.stash[CONFIG_KEY].campaign_dir
    node.workerinput["agent_eval_campaign"] = str(folder) if folder is not None else ""
    restored = node.config.stash[RESTORED_KEY]
    node.workerinput["agent_eval_restored"] = restored.to_dict() if restored is not None else None
    replay = node.config.stash[SESSION_KEY].replay_path
    node.workerinput["agent_eval_replay"] = str(replay) if replay is not None else ""
    node.workerinput["agent_eval_session"] = node.config.stash[FAILURES_KEY].session_id  # one failure memo


# -- items -----------------------------------------------------------------------------------------------------
def _corpus(config: pytest.Config) -> list[CorpusEntry]:
    """Loaded once per session; a bad corpus is a collection error naming file, entry and field."""
    if CORPUS_KEY not in config.stash:
        path = config.stash[CONFIG_KEY].corpus
        try:
            config.stash[CORPUS_KEY] = load_corpus(path)
        except CorpusError as exc:
            config.stash[CORPUS_KEY] = exc
    loaded = config.stash[CORPUS_KEY]
    if isinstance(loaded, CorpusError):
        raise pytest.Collector.CollectError(f"agent-eval corpus: {loaded}")
    return loaded


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "agent_case" not in metafunc.fixturenames:
        return
    cfg = metafunc.config.stash[CONFIG_KEY]
    marker = metafunc.definition.get_closest_marker("agent_eval")
    try:
        test = for_test(cfg, marker.args, marker.kwargs) if marker is not None else for_test(cfg)
    except OptionError as exc:
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: @pytest.mark.agent_eval: {exc}") from None
    try:
        entries = select_entries(_corpus(metafunc.config), test.entries, cfg.campaign)
    except SelectionError as exc:
        where = f"{metafunc.definition.nodeid}: @pytest.mark.agent_eval: " if test.entries is not None else ""
        raise pytest.Collector.CollectError(f"{where}{exc}") from None
    cases = cases_for(entries, test.arms, test.runs, test.turns, cfg.drivers)
    metafunc.parametrize("agent_case", [pytest.param(case, id=case.id, marks=pytest.mark.agent_eval) for case in cases])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Campaign item ids are the case ids; two selected tests with the same case are told apart by name.

    Runs after ``-k``/``-m`` deselected; then a resumed campaign's selection and ``--agent-eval-shard`` narrow the
    agent items (the session decides), and the rest are deselected as ``-k`` would."""
    cases = {item: _case_of(item) for item in items}
    counts = Counter(case.id for case in cases.values() if case is not None)
    for item, case in cases.items():
        if case is not None:
            name = getattr(item, "originalname", item.name)
            item.stash[ITEM_ID_KEY] = case.id if counts[case.id] == 1 else f"{name}.{case.id}"
    session = config.stash[SESSION_KEY]
    agent_items = [(item.stash[ITEM_ID_KEY], case) for item, case in cases.items() if case is not None]
    keep = session.select(agent_items)
    dropped = [item for item, case in cases.items() if case is not None and item.stash[ITEM_ID_KEY] not in keep]
    if dropped:
        items[:] = [item for item in items if cases[item] is None or item.stash[ITEM_ID_KEY] in keep]
        config.hook.pytest_deselected(items=dropped)
    if hasattr(config, "workeroutput"):  # the controller of an xdist run collects nothing: tell it
        config.workeroutput["agent_eval_selection"] = session.selection_record()


def _case_of(item: pytest.Item) -> EvalCase | None:
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("agent_case") if callspec is not None else None
    return case if isinstance(case, EvalCase) else None


# -- interrupts ------------------------------------------------------------------------------------------------
class AgentInterrupted(Exception):
    """Ctrl-C during an agent item, turned into this item's error so that pytest reports it and stops cleanly."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    return (yield from _interruptible(item, "setting up"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    return (yield from _interruptible(item, "running"))


def _interruptible(item: pytest.Item, phase: str) -> Any:
    """The body of the hook wrappers above: a KeyboardInterrupt raised inside an agent item becomes
    :class:`AgentInterrupted` and stops the session after it.

    By then the driver has stopped the agent's process group (its ``finally``) and its segments are on disk.
    Left as a KeyboardInterrupt, the item would get no report, and pytest's own ``tmp_path`` teardown, which
    expects one, dies with a KeyError traceback at the end of the session.
    """
    try:
        return (yield)
    except KeyboardInterrupt:
        if _case_of(item) is None:
            raise
        item.stash[INTERRUPTED_KEY] = True
        item.session.shouldstop = "agent-eval: interrupted (Ctrl-C)"
        raise AgentInterrupted(f"interrupted while {phase}; the agent was stopped, its files so far kept") from None


# -- reports ---------------------------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if _case_of(item) is None:
        return report
    if item.stash.get(INTERRUPTED_KEY, False):
        # Not a result of any kind: the campaign does not record it, and a resume runs the item again.
        if call.excinfo is not None and call.excinfo.errisinstance(AgentInterrupted):
            report.longrepr = f"agent-eval: {record_of(item).id} {call.excinfo.value}"
        return report
    record = record_of(item)
    if call.excinfo is not None and call.excinfo.errisinstance(AgentInfraError):
        # An infrastructure failure is an ERROR whose message says which step failed, not a traceback to read.
        record.infra_error = str(call.excinfo.value)
        report.longrepr = f"agent-eval infrastructure error in {record.id}: {call.excinfo.value}"
    if report.when == "setup":
        item.stash[SETUP_S_KEY] = report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        report.agent_eval = item.config.stash[SESSION_KEY].finish_item(
            record,
            outcome="error" if report.when == "setup" and report.failed else report.outcome,
            error=str(call.excinfo.value) if call.excinfo is not None else None,
            ran_s=item.stash.get(SETUP_S_KEY, 0.0) + (call.duration if call.when == "call" else 0.0),
        )
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """An item with a stalled turn says so on its own line: its time is not the agent's."""
    data = getattr(report, "agent_eval", None)
    if report.when != "call" or not isinstance(data, dict) or not data.get("stalled"):
        return None
    letter = {"passed": ".", "failed": "F"}.get(report.outcome, "s")
    return (
        report.outcome,
        letter,
        (f"{report.outcome.upper()} ({stall_note(data.get('driver') or {})})", {"yellow": True}),
    )


class Reporter:
    """Controller-side hooks: each hands the session what it needs."""

    def __init__(self, session: EvalSession) -> None:
        self.session = session
        self.interrupted = False

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.interrupted = True  # a Ctrl-C anywhere, or the stop an interrupted agent item asked for

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Without xdist the first item makes the campaign (a session with no agent item makes none). Under xdist
        # the controller makes it before xdist starts its workers (its hook is trylast), to hand them the path.
        if session.config.pluginmanager.has_plugin("dsession"):
            self.session.start_early()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.session.note_selection(getattr(node, "workeroutput", {}).get("agent_eval_selection"))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.session.collect(report.nodeid, getattr(report, "agent_eval", None))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.session.finish() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        lines = self.session.terminal_lines(verbose=config.getoption("verbose") > 0)
        if lines:
            terminalreporter.write_sep("=", "agent-eval")
        for line in lines:
            terminalreporter.write_line(line.text, **line.markup)
        for record in self.session.ordered():
            if record.stalled:
                note = stall_note(record.driver or {})
                terminalreporter.write_line(f"agent-eval: {record.id} {note}; its time is no measurement", yellow=True)
        self.say_how_to_resume(terminalreporter, config)  # last: the line to copy after an interrupt

    def say_how_to_resume(self, terminalreporter: Any, config: pytest.Config) -> None:
        folder = self.session.cfg.campaign_dir
        if not self.interrupted or folder is None or not (Path(folder) / MANIFEST).exists():
            return
        program = sys.argv[0] if sys.argv else "pytest"
        command = resume_command(program, config.invocation_params.args, Path(folder).resolve())
        terminalreporter.write_line(f"agent-eval: interrupted — resume with: {command}", yellow=True, bold=True)
