"""The plugin's hooks for a session that evaluates: items, their selection, reports, interrupts, the reporter.

:mod:`pytest_agent_eval.plugin` is what pytest imports in every session of every project the plugin is installed
in: the options, the fixtures' declarations, and the few hooks that decide whether a session evaluates. This
module is the rest of the plugin: it loads, and registers its hooks, with the first agent item collected, or as
the session starts when a setting is given, ``--agent-eval-only`` is, or xdist runs.

Items: any test that uses the agent fixtures (``evals/test_ab.py`` does) becomes one item per corpus entry ×
arm × run (:mod:`pytest_agent_eval.corpus.cases`), with ids like ``express-with-1``, so ``-k express`` and
``-k "with and not without"`` select as expected. A pinned arm (``--arms with@local:../cg,with@1.6.0``) shows
as ``express-with:1.6.0-1``: pytest's ``-k`` cannot parse ``@``, so the id writes it as ``:``.

The run's state lives in :class:`pytest_agent_eval.campaign.evaluation.EvalSession` (the campaign, the records, the
summary, the report, the compare gate); each hook here hands it what pytest knows and nothing more. The
fixtures' bodies live in :mod:`pytest_agent_eval.plugin.fixtures`, the settings in
:mod:`pytest_agent_eval.settings.config`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.corpus.cases import EvalCase
from pytest_agent_eval.harness.progress import append_to, follow, listen
from pytest_agent_eval.plugin import (
    CONFIG_KEY,
    HEADER_SHOWN_KEY,
    OPTED_OUT_KEY,
    header_lines,
    resolve_settings,
    settings,
)
from pytest_agent_eval.plugin.fixtures import (
    AGENT_RUNNING_KEY,
    FAILURES_ID_KEY,
    FAILURES_KEY,
    ITEM_ID_KEY,
    SESSION_KEY,
    SHARED_KEY,
    eval_session,
    failure_memo,
    record_of,
)
from pytest_agent_eval.settings.config import PACKAGED, AgentEvalConfig, OptionError
from pytest_agent_eval.settings.options import THRESHOLDS_FILE

# The corpus, the session, the reports and the harness load when an item first needs them.
if TYPE_CHECKING:
    from pytest_agent_eval.campaign.selection import Restored
    from pytest_agent_eval.corpus.load import CorpusEntry

CORPUS_KEY: pytest.StashKey[Any] = pytest.StashKey()
SETUP_S_KEY: pytest.StashKey[float] = pytest.StashKey()
SETUP_MARGIN_S = 900.0  # installs, the clone and the index, on top of the agent's own limit
TIMER_KEY: pytest.StashKey[threading.Timer] = pytest.StashKey()
INTERRUPTED_KEY: pytest.StashKey[bool] = pytest.StashKey()
RESTORED_KEY: pytest.StashKey[Any] = pytest.StashKey()
HOOKS_PLUGIN = "agent_eval_hooks"  # this module, registered by activate()
OPT_IN_HINT = "name their file or folder (pytest evals/) or pass --agent-eval to run them"


def configure(config: pytest.Config) -> None:
    """As the session starts, when a setting was given (a mistake in it is a usage error before any test runs),
    a campaign is resumed, compared or replayed, or xdist runs: the settings checked, the campaign claimed, the
    reporter registered."""
    worker_input = getattr(config, "workerinput", None)
    cfg = resolve_settings(config)
    if worker_input is not None:  # the controller restored a resumed campaign's settings: take the same
        restored = _restored_on_worker(worker_input.get("agent_eval_restored"))
    else:
        restored = _restored(config, cfg)
    if restored is not None:
        _apply(config, restored)
        cfg = resolve_settings(config)
    if cfg.thresholds_file is not None and cfg.thresholds_file != PACKAGED / THRESHOLDS_FILE:
        from pytest_agent_eval.metrics import gates  # the project's own file: a mistake is a usage error, now

        try:
            thresholds = gates.load_thresholds(cfg.thresholds_file)
        except gates.ThresholdError as exc:
            raise pytest.UsageError(str(exc)) from None
        names = _entry_names(cfg.corpus)
        unknown = thresholds.unknown_entry(names) if names is not None else None
        if unknown:
            raise pytest.UsageError(unknown)
    config.stash[CONFIG_KEY] = cfg
    config.stash[RESTORED_KEY] = restored
    activate(config)
    if restored is not None and restored.selected is not None:
        eval_session(config).keep_only = set(restored.selected)  # a resumed campaign runs what it selected
    if worker_input is None and (cfg.resume is not None or cfg.compare is not None or cfg.replay is not None):
        from pytest_agent_eval.campaign.evaluation import SessionError

        try:
            eval_session(config).claim()
        except SessionError as exc:
            raise pytest.UsageError(str(exc)) from None


def _entry_names(corpus: Path) -> list[str] | None:
    """The corpus's entry names; None when it cannot be read (the collection reports that, not this)."""
    from pytest_agent_eval.corpus.load import CorpusError, load_corpus

    try:
        return [entry.name for entry in load_corpus(corpus)]
    except CorpusError:
        return None


def activate(config: pytest.Config) -> None:
    """Once per session, before its first agent item is collected (or as it starts, see :func:`configure`): the
    failure memo's id, the cleanups, the reporter, and the channel install, clone and index progress comes by."""
    if config.pluginmanager.has_plugin(HOOKS_PLUGIN):
        return
    settings(config)
    config.pluginmanager.register(sys.modules[__name__], HOOKS_PLUGIN)
    worker_input = getattr(config, "workerinput", None)
    # An xdist worker writes into the campaign its controller named: stashed before a resume's selection (in
    # configure) makes the session, which takes it when made.
    if worker_input is not None:
        config.stash[FAILURES_ID_KEY] = worker_input.get("agent_eval_session") or uuid.uuid4().hex
        if worker_input.get("agent_eval_shared"):
            config.stash[SHARED_KEY] = worker_input["agent_eval_shared"]
        progress = worker_input.get("agent_eval_progress")
        if progress:  # pytest does not show a worker's output: the controller shows what it appends there
            config.add_cleanup(listen(append_to(Path(progress), f"[{worker_input.get('workerid', '?')}] ")))
        return
    config.stash[FAILURES_ID_KEY] = uuid.uuid4().hex[:12]
    # The failure memo is on disk, written by whichever process provisions: forget it if any item could have.
    config.add_cleanup(lambda: failure_memo(config).clear() if _evaluated(config) else None)
    config.add_cleanup(lambda: config.stash[SESSION_KEY].close() if SESSION_KEY in config.stash else None)
    reporter = Reporter(config)
    config.pluginmanager.register(reporter, "agent_eval_reporter")
    config.add_cleanup(reporter.stop_following)
    # Installs, clones and index builds announce themselves (here; under xdist, the workers' come through a file).
    config.add_cleanup(listen(lambda text: _show_progress(config, text)))


def _evaluated(config: pytest.Config) -> bool:
    """Whether this session had an evaluation (made its session or its failure memo): only then is there
    anything of it to clean up."""
    return SESSION_KEY in config.stash or FAILURES_KEY in config.stash


def _restored(config: pytest.Config, cfg: AgentEvalConfig) -> Restored | None:
    """With --agent-eval-resume: the campaign's selection and settings (a flag contradicting them: a usage error)."""
    if cfg.resume is None:
        return None
    from pytest_agent_eval.campaign.selection import ResumeError, restore
    from pytest_agent_eval.campaign.store import Campaign, StoreError

    try:
        manifest = Campaign.open(cfg.resume).manifest
    except StoreError as exc:
        raise pytest.UsageError(f"--agent-eval-resume: {exc}") from None
    try:
        return restore(
            manifest, lambda attr: config.getoption(f"agent_eval_{attr}"), config.option.keyword, config.option.markexpr
        )
    except ResumeError as exc:
        raise pytest.UsageError(str(exc)) from None


def _restored_on_worker(data: dict[str, Any] | None) -> Restored | None:
    """What the xdist controller restored (see :func:`pytest_configure_node`), as it restored it."""
    if not data:
        return None
    from pytest_agent_eval.campaign.selection import Restored

    return Restored.from_dict(data)


def _apply(config: pytest.Config, restored: Restored) -> None:
    """As if the resumed campaign's options, -k and -m (and, when this command line names none, its test paths
    and --pyargs) had been typed on this command line."""
    for attr, text in restored.options.items():
        setattr(config.option, f"agent_eval_{attr}", text)
    config.option.keyword = restored.keyword
    config.option.markexpr = restored.markexpr
    if restored.args and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = list(restored.args)  # collection reads them after pytest_configure
        config.args_source = pytest.Config.ArgsSource.ARGS
        config.option.pyargs = config.option.pyargs or restored.pyargs


def _show_progress(config: pytest.Config, text: str) -> None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if terminal is None:
        return
    # Announcements come from inside fixtures, while output is captured: step around it, as live logging does.
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        terminal.ensure_newline()
        terminal.write_line(f"agent-eval: {text}")


def _show_worker_progress(config: pytest.Config, line: str) -> None:
    """A worker's announcement, shown by the controller's follower thread. The controller captures nothing
    while xdist runs; its own lines go out between those of xdist's loop, as live logging's do from a thread."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.ensure_newline()
        terminal.write_line(f"agent-eval: {line}")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → worker: what names the one campaign every item lands in (see
    :meth:`~pytest_agent_eval.campaign.evaluation.EvalSession.share`), and a resumed campaign's settings, so every
    worker
    selects what the controller restored."""
    folder = settings(node.config).campaign_dir  # known here only when the session was claimed
    session = node.config.stash.get(SESSION_KEY, None)
    replay = session.replay_path if session is not None else None
    node.workerinput["agent_eval_shared"] = {
        **node.config.stash[SHARED_KEY],
        "campaign_dir": str(folder) if folder is not None else None,
        "replay_dir": str(replay) if replay is not None else None,
    }
    restored = node.config.stash.get(RESTORED_KEY, None)
    node.workerinput["agent_eval_restored"] = restored.to_dict() if restored is not None else None
    node.workerinput["agent_eval_session"] = node.config.stash[FAILURES_ID_KEY]  # one failure memo
    reporter = node.config.pluginmanager.get_plugin("agent_eval_reporter")
    progress = reporter.progress if reporter is not None else None
    node.workerinput["agent_eval_progress"] = str(progress) if progress is not None else ""
    groups = reporter.groups if reporter is not None and node.config.getvalue("dist") == "loadgroup" else None
    node.workerinput["agent_eval_groups"] = str(groups) if groups is not None else ""


# -- items -----------------------------------------------------------------------------------------------------
def _corpus(config: pytest.Config) -> list[CorpusEntry]:
    """Loaded once per session; a bad corpus is a collection error naming file, entry and field."""
    from pytest_agent_eval.corpus.load import CorpusError, load_corpus

    if CORPUS_KEY not in config.stash:
        path = settings(config).corpus
        try:
            config.stash[CORPUS_KEY] = load_corpus(path)
        except CorpusError as exc:
            config.stash[CORPUS_KEY] = exc
    loaded = config.stash[CORPUS_KEY]
    if isinstance(loaded, CorpusError):
        raise pytest.Collector.CollectError(f"agent-eval corpus: {loaded}")
    return loaded


def generate_tests(metafunc: pytest.Metafunc, marker: pytest.Mark | None) -> None:
    """A test using the agent fixtures, parametrized over corpus entry × arm × run as its marker narrows them."""
    activate(metafunc.config)
    from pytest_agent_eval.corpus.cases import SelectionError, cases_for, select_entries
    from pytest_agent_eval.settings.parsers import for_test

    cfg = settings(metafunc.config)
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
    metafunc.parametrize("agent_case", [pytest.param(case, id=case.id, marks=_marks(cfg, case)) for case in cases])


def _marks(cfg: AgentEvalConfig, case: EvalCase) -> list[pytest.MarkDecorator]:
    """Every item: the marker itself; an xdist group per (repository, tool build), so ``--dist loadgroup`` keeps
    one worker's clone and index; and a pytest-timeout limit from its own agent limit, so a project-wide
    ``timeout =`` does not kill it mid-run."""
    limit = cfg.agent_timeout * len(case.questions) * (1 + cfg.retries) + SETUP_MARGIN_S
    return [
        pytest.mark.agent_eval,
        pytest.mark.xdist_group(name=f"{case.entry.name}@{cfg.tool_spec(case.arm)}"),
        pytest.mark.timeout(limit),
    ]


@pytest.hookimpl(trylast=True)  # after pytest's own -k/-m deselection
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _arms_by_name(config, items)
    _opt_in(config, items)
    _name_items(config, items)
    _check_outputs(config, items)
    groups = getattr(config, "workerinput", {}).get("agent_eval_groups")
    if groups:  # an xdist worker under --dist loadgroup: tell the controller's scheduler the groups
        _write_groups(Path(groups), items)


def _check_outputs(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The campaign's folder and ``--agent-eval-json`` must be writable: found out before an agent item runs, as
    one usage error naming the setting, not by every item's setup (nor, for the summary, at the session's end).
    An xdist worker cannot stop the session so (its controller would see a crash): its items fail at setup,
    each with that one line."""
    if config.option.collectonly or hasattr(config, "workerinput") or not any(_case_of(item) for item in items):
        return
    problem = settings(config).output_problem()
    if problem:
        raise pytest.UsageError(problem)


def _write_groups(path: Path, items: list[pytest.Item]) -> None:
    from pytest_agent_eval.plugin.loadgroup import group_of, write_groups

    found = {item.nodeid: group_of(item.iter_markers("xdist_group")) for item in items}
    write_groups(path, {nodeid: group for nodeid, group in found.items() if group is not None})


def _arms_by_name(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``-k with`` / ``-k without`` select one arm each: pytest matches substrings, and "with" is one of
    "without", so the expression is evaluated again for agent items with those two words naming the arm."""
    expression = config.getoption("keyword")
    if not expression or not any(_case_of(item) for item in items):
        return
    from pytest_agent_eval.plugin.keywords import ARM_WORD, KeywordSyntaxError, arm_keyword_matcher, keyword_match

    if not ARM_WORD.search(expression):
        return
    keep, dropped = [], []
    for item in items:
        case = _case_of(item)
        try:
            wanted = case is None or keyword_match(expression, arm_keyword_matcher(item, case.arm.name))
        except KeywordSyntaxError:
            return  # a form this reader does not know: pytest's own selection stands
        (keep if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _opt_in(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Evals are opt-in: an agent item runs when its path is named (or --agent-eval); the rest are deselected."""
    run_all = config.getoption("agent_eval_run") or config.getoption("agent_eval_only")
    named = _named_paths(config)
    keep, dropped = [], []
    for item in items:
        if _case_of(item) is None:
            wanted = not config.getoption("agent_eval_only")
        elif config.getoption("agent_eval_skip"):
            wanted = False
        else:
            wanted = run_all or _is_named(item, named, config)
        (keep if wanted else dropped).append(item)
    config.stash[OPTED_OUT_KEY] = sum(1 for item in dropped if _case_of(item) is not None)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _named_paths(config: pytest.Config) -> list[str]:
    """The paths (and --pyargs modules) the command line names; none when pytest chose them (testpaths, cwd)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    return [arg.split("::")[0] for arg in config.args]


def _is_named(item: pytest.Item, named: list[str], config: pytest.Config) -> bool:
    """The item's file, a folder holding it, or (with --pyargs) its module or package is named."""
    here = config.invocation_params.dir
    item_paths = {Path(os.path.abspath(item.path)), item.path.resolve()}  # evals/test_ab.py may be a symlink
    module = getattr(getattr(item, "module", None), "__name__", "")
    for arg in named:
        if config.option.pyargs and (module == arg or module.startswith(arg + ".")):
            return True
        arg_paths = {Path(os.path.abspath(here / arg)), (here / arg).resolve()}
        if any(a == p or a in p.parents for a in arg_paths for p in item_paths):
            return True
    return False


def _name_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Campaign item ids are the case ids; two selected tests with the same case are told apart by name. Then
    a resumed campaign's selection and ``--agent-eval-shard`` narrow the agent items (the session decides)."""
    cases = {item: _case_of(item) for item in items}
    counts = Counter(case.id for case in cases.values() if case is not None)
    for item, case in cases.items():
        if case is not None:
            name = getattr(item, "originalname", item.name)
            item.stash[ITEM_ID_KEY] = case.id if counts[case.id] == 1 else f"{name}.{case.id}"
    agent_items = [(item.stash[ITEM_ID_KEY], case) for item, case in cases.items() if case is not None]
    if not agent_items:
        return
    session = eval_session(config)
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


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker tells its controller how many agent items it left out (each worker collects them all)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["agent_eval_opted_out"] = session.config.stash.get(OPTED_OUT_KEY, 0)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """The settings line, when the header could not show it (no setting given): once, if agent items remain."""
    shown = config.stash.get(HEADER_SHOWN_KEY, False) or config.option.no_header or config.option.verbose < 0
    if shown or not any(_case_of(item) for item in items):
        return []
    return header_lines(config)


# -- pytest-timeout --------------------------------------------------------------------------------------------
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """Under ``--timeout-method thread`` pytest-timeout would end the whole process, losing the record: for an
    agent item the limit instead ends the agent's processes, so the run fails as a timed-out run and is kept."""
    if _case_of(item) is None or settings.method != "thread" or not settings.timeout:
        return None

    from pytest_agent_eval.harness.process import stop_all_groups

    timer = threading.Timer(settings.timeout, stop_all_groups)
    timer.name = f"agent-eval timeout {item.nodeid}"
    timer.daemon = True
    timer.start()
    item.stash[TIMER_KEY] = timer
    return True


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    timer = item.stash.get(TIMER_KEY, None)
    if timer is None:
        return None
    timer.cancel()
    del item.stash[TIMER_KEY]
    return True


# -- interrupts ------------------------------------------------------------------------------------------------
class AgentInterrupted(Exception):
    """Ctrl-C during an agent item, turned into this item's error so that pytest reports it and stops cleanly."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    return (yield from _interruptible(item, "while setting up"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    return (yield from _interruptible(item, "while running"))


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
        item_id = record_of(item).id
        # The agent runs while its item is set up (the fixtures drive it): say so, not "setting up".
        what = f"the agent's run of {item_id}" if item.stash.get(AGENT_RUNNING_KEY, False) else f"{phase} {item_id}"
        raise AgentInterrupted(f"interrupted {what}; the agent was stopped, its files so far kept") from None


# -- reports ---------------------------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if _case_of(item) is None:
        return report
    if item.stash.get(INTERRUPTED_KEY, False):
        # Not a result of any kind: the campaign does not record it, and a resume runs the item again.
        if call.excinfo is not None and call.excinfo.errisinstance(AgentInterrupted):
            report.longrepr = f"agent-eval: {call.excinfo.value}"
        return report
    from pytest_agent_eval.harness.drivers import AgentInfraError

    record = record_of(item)
    if call.excinfo is not None and call.excinfo.errisinstance(AgentInfraError):
        # An infrastructure failure is an ERROR whose message says which step failed, not a traceback to read.
        record.infra_error = str(call.excinfo.value)
        report.longrepr = f"agent-eval infrastructure error in {record.id}: {call.excinfo.value}"
    if report.when == "setup":
        item.stash[SETUP_S_KEY] = report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        report.agent_eval = eval_session(item.config).finish_item(
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
    from pytest_agent_eval.report.format import stall_note

    letter = {"passed": ".", "failed": "F"}.get(report.outcome, "s")
    return (
        report.outcome,
        letter,
        (f"{report.outcome.upper()} ({stall_note(data.get('driver') or {})})", {"yellow": True}),
    )


class Reporter:
    """Controller-side hooks: each hands the session what it needs; without an agent item there is none."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.opted_out_on_workers = 0
        self.interrupted = False
        self.raised: list[str] = []  # warnings a filter naming AgentEvalWarning made errors: the summary names them
        self.raised_by = ""  # that filter: -W … or the ini's filterwarnings
        self.exchange: Path | None = None  # under xdist: a folder for what workers tell the controller as they go
        self._stop_following: Callable[[], None] | None = None

    @property
    def progress(self) -> Path | None:
        """Under xdist: the file workers append their announcements to."""
        return self.exchange / "progress.log" if self.exchange is not None else None

    @property
    def groups(self) -> Path | None:
        """Under xdist: the file workers write their items' xdist groups to (see
        :mod:`pytest_agent_eval.plugin.loadgroup`)."""
        return self.exchange / "groups.json" if self.exchange is not None else None

    @property
    def session(self) -> Any:
        return self.config.stash.get(SESSION_KEY, None)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        self.opted_out_on_workers = max(self.opted_out_on_workers, output.get("agent_eval_opted_out", 0))
        if output.get("agent_eval_selection"):
            eval_session(self.config).note_selection(output["agent_eval_selection"])

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.interrupted = True  # a Ctrl-C anywhere, or the stop an interrupted agent item asked for

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # The first item makes the campaign (a session with no agent item makes none, and loads nothing for one).
        # Under xdist every process must name the same one: before xdist starts its workers (its hook is
        # trylast), the controller fixes what the name is made of, to hand to them.
        if session.config.pluginmanager.has_plugin("dsession"):
            cfg = settings(self.config)
            shared = self.config.stash[SHARED_KEY] = {
                "campaign_dir": None,  # configure_node hands the workers the controller's, when it has one
                "replay_dir": None,
                "out": str(cfg.out),
                "corpus": str(cfg.corpus),
                "started": time.time(),
                "nonce": self.config.stash[FAILURES_ID_KEY],
            }
            if self.session is not None:  # claimed already (--agent-eval-resume, -compare, -replay): name it now
                self.session.share(**shared)
            self.follow_workers()

    def follow_workers(self) -> None:
        """Show the workers' install, clone and index progress as it comes (see harness/progress.py)."""
        self.exchange = Path(tempfile.mkdtemp(prefix="agent-eval-xdist-"))
        progress = self.exchange / "progress.log"
        self._stop_following = follow(progress, lambda line: _show_worker_progress(self.config, line))

    def stop_following(self) -> None:
        """Show what the workers announced last and remove their files (at the session's end, or at exit)."""
        stop, self._stop_following = self._stop_following, None
        if stop is not None:
            stop()
        if self.exchange is not None:
            shutil.rmtree(self.exchange, ignore_errors=True)

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """``--dist loadgroup`` that keeps its groups on pytest versions where xdist's own grouping is lost."""
        if config.getvalue("dist") != "loadgroup" or self.groups is None:
            return None
        from pytest_agent_eval.plugin.loadgroup import GroupScheduling

        return GroupScheduling(config, log, self.groups)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "agent_eval", None)
        if data is not None:
            eval_session(self.config).collect(report.nodeid, data)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stop_following()  # before the summary: the workers are done
        if self.session is None:
            return
        failed = self.session.finish()
        # Issued here, inside pytest's warnings capture of this hook: they are listed in the warnings summary, and
        # -W / filterwarnings apply to them as to any warning of a test.
        where = settings(self.config).campaign_dir
        self.raised = [text for text in self.session.warnings() if _warn_raised(f"agent-eval: warning: {text}", where)]
        self.raised_by = _error_filter(self.config) if self.raised else ""
        if (failed or self.raised) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.session.empty_shard and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # a job of the matrix with nothing to do has not failed

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        opted_out = max(config.stash.get(OPTED_OUT_KEY, 0), self.opted_out_on_workers)
        if config.getoption("verbose") > -2:
            if opted_out:
                why = " by --agent-eval-skip" if config.getoption("agent_eval_skip") else f": {OPT_IN_HINT}"
                terminalreporter.write_line(f"agent-eval: {opted_out} agent evaluation item(s) deselected{why}")
            if config.getoption("agent_eval_only") and not (self.session and self.session.records):
                terminalreporter.write_line("agent-eval: --agent-eval-only, and no agent evaluation item ran")
            if self.session is not None and self.session.empty_shard:
                shard, selected = settings(config).shard, len(self.session.selection["selected"])
                terminalreporter.write_line(f"agent-eval: shard {shard} holds none of the {selected} selected item(s)")
        verbosity = config.getoption("verbose")
        # One line per run by default and at -v; every run's blocks at -vv (report.html always has them).
        lines = self.session.terminal_lines(verbose=verbosity > 1) if self.session else []
        if verbosity <= -2:  # -qq: the verdict lines, not the tables
            lines = [line for line in lines if line.text.startswith("agent-eval:")]
        if lines or self.raised:
            terminalreporter.write_sep("=", "agent-eval")
        for line in lines:
            terminalreporter.write_line(line.text, **line.markup)
        for text in self.raised:
            terminalreporter.write_line(f"agent-eval: warning: {text} (an error by {self.raised_by})", red=True)
        for record in self.session.ordered() if self.session else []:
            if record.stalled:
                from pytest_agent_eval.report.format import stall_note

                note = stall_note(record.driver or {})
                terminalreporter.write_line(f"agent-eval: {record.id} {note}; its time is no measurement", yellow=True)
        self.say_how_to_resume(terminalreporter, config)  # last: the line to copy after an interrupt

    def say_how_to_resume(self, terminalreporter: Any, config: pytest.Config) -> None:
        if not self.interrupted:
            return
        if SHARED_KEY in self.config.stash:  # the xdist controller: its workers name the campaign as it would
            eval_session(self.config)
        folder = settings(self.config).campaign_dir
        if folder is None:
            return
        from pytest_agent_eval.campaign.resume_command import resume_command
        from pytest_agent_eval.campaign.store import MANIFEST

        if not (Path(folder) / MANIFEST).exists():
            return
        program = sys.argv[0] if sys.argv else "pytest"
        command = resume_command(program, config.invocation_params.args, Path(folder).resolve())
        terminalreporter.write_line(f"agent-eval: interrupted — resume with: {command}", yellow=True, bold=True)


def _warn_raised(text: str, where: Path | None) -> bool:
    """Issue a warning of the plugin's class, located at ``where`` (the campaign folder: the warning is about it,
    not about a line of this plugin); True when a filter naming :class:`AgentEvalWarning` made it an error, which
    the caller turns into a failed session rather than an internal error.

    A filter that makes *every* warning an error (a project's ``filterwarnings = error``, ``-W error``) is about
    the project's own code: under it these caveats of a campaign (a stand-in model, n=1) are listed in the
    warnings summary as they are without it, and fail nothing."""
    from pytest_agent_eval.warnings import AgentEvalWarning

    module = __name__  # a filter naming the plugin's module (ignore::...:pytest_agent_eval.*) applies too
    with warnings.catch_warnings():  # pytest's own capture (record) stays: only the filters are restored
        action, category = _deciding_filter(AgentEvalWarning, text, module)
        if action == "error" and not issubclass(category, AgentEvalWarning):
            warnings.filterwarnings("always", category=AgentEvalWarning)
        try:
            warnings.warn_explicit(AgentEvalWarning(text), AgentEvalWarning, str(where or "agent-eval"), 0, module)
        except AgentEvalWarning:
            return True
    return False


def _deciding_filter(category: type[Warning], text: str, module: str) -> tuple[str, type[Warning]]:
    """The action and category of the first warnings filter that matches, as :mod:`warnings` picks it."""
    for action, message, filtered, named, line in warnings.filters:
        if _matched(message, text) and _matched(named, module) and issubclass(category, filtered) and line == 0:
            return action, filtered
    return warnings.defaultaction, Warning


def _matched(pattern: Any, value: str) -> bool:
    """A filter's message or module matches as :mod:`warnings` has it: None always, a plain string exactly (the
    interpreter's own default filters), else a regex from its start."""
    if pattern is None or isinstance(pattern, str):
        return pattern is None or pattern == value
    return pattern.match(value) is not None


def _error_filter(config: pytest.Config) -> str:
    """Where the filter that made the plugin's warnings errors was given: ``-W …`` (first: the command line wins),
    else the ini file's ``filterwarnings``."""
    for spec in config.known_args_namespace.pythonwarnings or []:
        if spec.startswith("error") and "AgentEvalWarning" in spec:
            return f"-W {spec}"
    for spec in config.getini("filterwarnings"):
        if spec.strip().startswith("error") and "AgentEvalWarning" in spec:
            ini = config.inipath.name if config.inipath else "the ini file"
            return f"filterwarnings = {spec.strip()} in {ini}"
    return "a warnings filter naming AgentEvalWarning"
