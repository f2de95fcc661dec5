"""The plugin of a session that evaluates: one object per pytest config, whose methods are the hooks and whose
attributes are the session's state (its settings, its :class:`~pytest_agent_eval.run.evaluation.EvalSession`,
its failure memo, the progress of xdist's workers, what it deselected), as pytest-xdist's ``DSession`` is.

:mod:`pytest_agent_eval.plugin` is what pytest imports in every session of every project the plugin is installed
in: the options, the fixtures' declarations, and the few hooks that decide whether a session evaluates. When one
does (its first agent item is collected; or, as it starts, a setting is given, ``--agent-eval-only`` is, or
xdist runs) it registers :class:`AgentEvalPlugin` under :data:`PLUGIN_NAME`; fixtures reach it by
:func:`plugin_of`, and an item's own state (:class:`ItemState`) by :func:`item_state`.

Items: any test that uses the agent fixtures (``evals/test_ab.py`` does) becomes one item per corpus entry ×
arm × run (:mod:`pytest_agent_eval.corpus.cases`), with ids like ``express-with-1``, so ``-k express`` and
``-k "with and not without"`` select as expected. A pinned arm (``--arms with@local:../cg,with@1.6.0``) shows
as ``express-with:1.6.0-1``: pytest's ``-k`` cannot parse ``@``, so the id writes it as ``:``. With
``--agent-eval-agents``, an agent other than the session's own (the first listed) is named after the entry:
``express-codex-with-1``.

The run's records, summary, report and compare gate are the EvalSession's; each hook hands it what pytest knows
and nothing more. Which tests are agent items and which of them run is :mod:`pytest_agent_eval.plugin.items`; how
the session's caveats become warnings, :mod:`pytest_agent_eval.plugin.caveats`.
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
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agent_eval.harness.progress import append_to, follow, listen
from pytest_agent_eval.plugin.items import OPT_IN_HINT, case_of, deselect_other_arms, marks_for, opt_in
from pytest_agent_eval.settings.config import PACKAGED, AgentEvalConfig, OptionError
from pytest_agent_eval.settings.options import THRESHOLDS_FILE

# The corpus, the session, the reports and the harness load when an item first needs them.
if TYPE_CHECKING:
    from pytest_agent_eval.campaign.record import ItemRecord
    from pytest_agent_eval.campaign.selection import Restored
    from pytest_agent_eval.corpus.load import CorpusEntry
    from pytest_agent_eval.harness.failures import FailureMemo
    from pytest_agent_eval.run.evaluation import EvalSession

PLUGIN_NAME = "agent_eval_session"  # the AgentEvalPlugin, in the config's plugin manager


@dataclass
class ItemState:
    """What the plugin keeps for one agent item (in the item's stash, under :data:`ITEM_KEY`)."""

    item_id: str  # its id in the campaign: the case id, unless two tests share it
    record: ItemRecord | None = None  # made by record_of when first needed; the fixtures fill it in
    # Set while the item's agent runs (inside set-up: agent_run is a fixture), so a Ctrl-C names what it interrupted.
    agent_running: bool = False
    interrupted: bool = False  # by Ctrl-C: no result of any kind, the campaign does not record it
    setup_s: float = 0.0  # its set-up's duration (the agent runs there), counted in its time
    timer: threading.Timer | None = None  # pytest-timeout's limit, enforced by ending the agent's processes


# Typed by annotation, not made as StashKey[T](): a subscript builds a typing alias at import.
ITEM_KEY: pytest.StashKey[ItemState] = pytest.StashKey()


def item_state(item: pytest.Item) -> ItemState:
    """The agent item's state, made on first use (its id is the case id until the collection names it)."""
    state = item.stash.get(ITEM_KEY, None)
    if state is None:
        state = item.stash[ITEM_KEY] = ItemState(item.callspec.params["agent_case"].id)  # type: ignore[attr-defined]
    return state


def record_of(item: pytest.Item) -> ItemRecord:
    """The item's record, made on first use; the fixtures fill it in, the plugin finishes and ships it."""
    state = item_state(item)
    if state.record is None:
        from pytest_agent_eval.run.evaluation import new_record

        case = item.callspec.params["agent_case"]  # type: ignore[attr-defined]
        state.record = new_record(case, state.item_id, item.nodeid, plugin_of(item.config).settings)
    return state.record


def plugin_of(config: pytest.Config) -> AgentEvalPlugin:
    """The session's plugin object, registered the first time it is asked for (its first agent item)."""
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        plugin = AgentEvalPlugin(config, resolve_settings(config))
        config.pluginmanager.register(plugin, PLUGIN_NAME)
        plugin.listen()
    return plugin


def start(config: pytest.Config, settings_given: bool) -> AgentEvalPlugin:
    """As the session starts, when a setting was given (a mistake in it is a usage error before any test runs),
    a campaign is resumed, compared or replayed, or xdist runs: the settings checked, a resumed campaign's
    restored, the campaign claimed, the plugin registered."""
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
    plugin = AgentEvalPlugin(config, cfg, restored, settings_given)
    config.pluginmanager.register(plugin, PLUGIN_NAME)
    plugin.listen()
    if restored is not None and restored.selected is not None:
        plugin.session.keep_only = set(restored.selected)  # a resumed campaign runs what it selected
    if restored is not None and worker_input is None:
        _note_thresholds(plugin, cfg)
    if worker_input is None and (cfg.resume is not None or cfg.compare is not None or cfg.replay is not None):
        from pytest_agent_eval.run.evaluation import SessionError

        try:
            plugin.session.claim()
        except SessionError as exc:
            raise pytest.UsageError(str(exc)) from None
    return plugin


def resolve_settings(config: pytest.Config) -> AgentEvalConfig:
    """The settings as the options and ini keys give them now; a bad value is a usage error naming it."""
    from pytest_agent_eval.settings.config import resolve

    try:
        cfg = resolve(
            lambda attr: config.getoption(f"agent_eval_{attr}"), lambda key: _ini(config, key), config.rootpath
        )
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    problem = cfg.model_problem()
    if problem:
        raise pytest.UsageError(problem)
    return cfg


def _ini(config: pytest.Config, key: str) -> Any:
    try:
        return config.getini(key)
    except (ValueError, pytest.UsageError) as exc:  # a bool key pytest cannot read ("maybe"): name the key
        raise OptionError(f"ini {key}: expected true or false ({exc})") from None


def _entry_names(corpus: Path) -> list[str] | None:
    """The corpus's entry names; None when it cannot be read (the collection reports that, not this)."""
    from pytest_agent_eval.corpus.load import CorpusError, load_corpus

    try:
        return [entry.name for entry in load_corpus(corpus)]
    except CorpusError:
        return None


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


def _note_thresholds(plugin: AgentEvalPlugin, cfg: AgentEvalConfig) -> None:
    """A resume gated with other thresholds than its campaign was: said among the session's warnings."""
    from pytest_agent_eval.campaign.selection import thresholds_drift
    from pytest_agent_eval.campaign.store import Campaign, StoreError

    assert cfg.resume is not None
    try:
        drift = thresholds_drift(Campaign.open(cfg.resume).manifest, cfg.thresholds_file)
    except StoreError:
        return  # claiming the campaign says why it cannot be read
    if drift:
        plugin.session.problems.append(drift)


def _restored_on_worker(data: dict[str, Any] | None) -> Restored | None:
    """What the xdist controller restored (see :meth:`AgentEvalPlugin.pytest_configure_node`), as it restored it."""
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


class AgentInterrupted(Exception):
    """Ctrl-C during an agent item, turned into this item's error so that pytest reports it and stops cleanly."""


class AgentEvalPlugin:
    """One session's evaluation as pytest sees it: its hooks, and the state they share.

    In an xdist worker it collects, runs and records its items; in the controller (or a session without xdist)
    it also gathers the records, follows the workers' progress and reports once.
    """

    def __init__(
        self,
        config: pytest.Config,
        settings: AgentEvalConfig,
        restored: Restored | None = None,
        settings_given: bool = False,
    ) -> None:
        self.config = config
        self.settings = settings
        self.restored = restored  # a resumed campaign's selection and settings, handed to xdist's workers
        self.settings_given = settings_given  # the header then also names the programs the agents run with
        self.worker_input: dict[str, Any] | None = getattr(config, "workerinput", None)
        # Under xdist, in every process: what makes the sessions of the controller and its workers share one
        # campaign (the arguments of EvalSession.share), applied when a process makes its session, if it ever does.
        self.shared: dict[str, Any] | None = None
        # The id of this session's failure memo: the controller's, handed to its workers (one memo for all).
        self.memo_id = uuid.uuid4().hex[:12]
        if self.worker_input is not None:
            self.memo_id = self.worker_input.get("agent_eval_session") or uuid.uuid4().hex
            self.shared = self.worker_input.get("agent_eval_shared") or None
        self._session: EvalSession | None = None
        self._failures: FailureMemo | None = None
        self._corpus: list[CorpusEntry] | Exception | None = None
        self.header_shown = False
        self.opted_out = 0  # agent items deselected because nobody asked for them (here; a worker's, at the end)
        self.opted_out_on_workers = 0
        self.deselected_entries: dict[str, None] = {}  # entries of agent items -k left out, in collection order
        self.selected_agent_items = 0
        self.interrupted = False
        self.raised: list[str] = []  # warnings a filter naming AgentEvalWarning made errors: the summary names them
        self.raised_by = ""  # that filter: -W … or the ini's filterwarnings
        self.exchange: Path | None = None  # under xdist: a folder for what workers tell the controller as they go
        self._stop_following: Callable[[], None] | None = None

    def listen(self) -> None:
        """Show install, clone and index progress (a worker appends it to the file its controller follows), and
        clean up at the end: the failure memo, the resume lock, the followed files."""
        config = self.config
        if self.worker_input is not None:
            progress = self.worker_input.get("agent_eval_progress")
            if progress:  # pytest does not show a worker's output: the controller shows what it appends there
                config.add_cleanup(listen(append_to(Path(progress), f"[{self.worker_input.get('workerid', '?')}] ")))
            return
        config.add_cleanup(self._forget_failures)
        config.add_cleanup(lambda: self._session.close() if self._session is not None else None)
        config.add_cleanup(self.stop_following)
        config.add_cleanup(listen(self._show_progress))

    def _forget_failures(self) -> None:
        """The failure memo is on disk, written by whichever process provisions (under xdist, the workers): forget
        it if any item could have, that is if this session made its evaluation or its memo."""
        if self._session is not None or self._failures is not None:
            self.failure_memo.clear()

    # -- the state ---------------------------------------------------------------------------------------------
    @property
    def session(self) -> EvalSession:
        """This pytest session's :class:`~pytest_agent_eval.run.evaluation.EvalSession`, made when first
        needed (a session that runs no agent item makes none)."""
        if self._session is None:
            from pytest_agent_eval.run.evaluation import EvalSession

            option = self.config.option
            session = self._session = EvalSession(self.settings)
            session.invoked_with(_named_args(self.config), option.keyword, option.markexpr, option.pyargs)
            if self.shared is not None:
                session.share(**self.shared)
        return self._session

    @property
    def failure_memo(self) -> FailureMemo:
        """This session's provisioning failures (:mod:`pytest_agent_eval.harness.failures`), seen by every xdist
        worker: a failed clone, install or build is tried once per session."""
        if self._failures is None:
            from pytest_agent_eval.harness.failures import FailureMemo

            self._failures = FailureMemo(self.settings.cache, self.memo_id)
        return self._failures

    @property
    def progress(self) -> Path | None:
        """Under xdist: the file workers append their announcements to."""
        return self.exchange / "progress.log" if self.exchange is not None else None

    @property
    def groups(self) -> Path | None:
        """Under xdist: the file workers write their items' xdist groups to (see
        :mod:`pytest_agent_eval.plugin.loadgroup`)."""
        return self.exchange / "groups.json" if self.exchange is not None else None

    def corpus(self) -> list[CorpusEntry]:
        """Loaded once per session; a bad corpus is a collection error naming file, entry and field."""
        from pytest_agent_eval.corpus.load import CorpusError, load_corpus

        if self._corpus is None:
            try:
                self._corpus = load_corpus(self.settings.corpus)
            except CorpusError as exc:
                self._corpus = exc
        if isinstance(self._corpus, Exception):
            raise pytest.Collector.CollectError(f"agent-eval corpus: {self._corpus}")
        return self._corpus

    # -- the header ----------------------------------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """What an evaluation in this session would run against, when the settings are known as it starts (given,
        or under xdist). Otherwise the same line follows the collection, if it found agent items: a suite without
        them shows none and resolves no settings for it."""
        if self.worker_input is not None:  # a worker's header is never shown
            return []
        self.header_shown = True
        # xdist alone puts the settings in the header of unit-test sessions too: no programs are looked for there
        return self.header_lines() if self.settings_given else [self.settings_line()]

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        """The settings line, when the header could not show it (no setting given): once, if agent items remain."""
        shown = config.option.no_header or config.option.verbose < 0
        cases = [case for case in map(case_of, items) if case is not None]
        if shown or not cases:
            return []
        selected = list(dict.fromkeys(case.arm.label for case in cases))
        configured = [arm.label for arm in self.settings.arms]
        if not self.header_shown:
            return self.header_lines(selected)
        if selected != [arm for arm in configured if arm in selected] or len(selected) != len(configured):
            # the header named the configured arms; a test (or -k) that runs fewer says which ran
            return [f"agent-eval: selected {len(cases)} agent item(s), arms {','.join(selected)}"]
        return []

    def header_lines(self, arms: Sequence[str] | None = None) -> list[str]:
        """The settings line, which bubblewrap and Node.js the agents will run with (the machine's or bundled), and
        what the kernel's Landlock cannot scope here, if anything (docs/sandbox.md)."""
        from pytest_agent_eval.harness.jail import scoping_caveat
        from pytest_agent_eval.harness.runtimes import header_line

        caveat = scoping_caveat()
        return [self.settings_line(arms), header_line(), *([caveat] if caveat else [])]

    def settings_line(self, selected: Sequence[str] | None = None) -> str:
        """The model (and why ``auto`` chose it), the arms (and the agents, when several are listed), the corpus and
        where campaigns go."""
        from pytest_agent_eval.settings.config import auto_backend

        cfg = self.settings
        backend = cfg.backend
        if backend == "auto":
            # the default agent (Claude Code) speaks the Messages API: it need not be imported to say so
            chosen, why = auto_backend(cfg.agent.api if cfg.agent_reference else "messages")
            what = "scripted stand-in model" if why.startswith("no ") else "scripted"
            what = "the real API" if chosen != "scripted" else what
            backend = f"auto → {what} ({why})"
        arms = ",".join(selected or [arm.label for arm in cfg.arms])  # after collection: the arms selected
        if cfg.agents_reference is not None:  # several agents: each arm of each
            arms += f" × agents {', '.join(agent.title for agent in cfg.agents)}"
        claimed = self._session.campaign_dir if self._session is not None else None  # a resumed campaign
        return f"agent-eval: backend {backend}; arms {arms}; corpus {cfg.corpus}; campaigns in {claimed or cfg.out}"

    # -- xdist -------------------------------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller → worker: what names the one campaign every item lands in (see
        :meth:`~pytest_agent_eval.run.evaluation.EvalSession.share`), and a resumed campaign's settings, so
        every worker selects what the controller restored."""
        session = self._session
        folder = session.campaign_dir if session is not None else None  # known here only when it was claimed
        replay = session.replay_path if session is not None else None
        node.workerinput["agent_eval_shared"] = {
            **(self.shared or {}),
            "campaign_dir": str(folder) if folder is not None else None,
            "replay_dir": str(replay) if replay is not None else None,
        }
        restored = self.restored
        node.workerinput["agent_eval_restored"] = restored.to_dict() if restored is not None else None
        node.workerinput["agent_eval_session"] = self.memo_id  # one failure memo
        node.workerinput["agent_eval_progress"] = str(self.progress) if self.progress is not None else ""
        groups = self.groups if node.config.getvalue("dist") == "loadgroup" else None
        node.workerinput["agent_eval_groups"] = str(groups) if groups is not None else ""

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", None) or {}
        self.opted_out_on_workers = max(self.opted_out_on_workers, output.get("agent_eval_opted_out", 0))
        # Every worker collects every item, and the controller none: what -k selected is the workers' to say.
        self.selected_agent_items = max(self.selected_agent_items, output.get("agent_eval_selected_items", 0))
        for entry in output.get("agent_eval_deselected_entries", ()):
            self.deselected_entries.setdefault(entry, None)
        if output.get("agent_eval_selection"):
            self.session.note_selection(output["agent_eval_selection"])

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """``--dist loadgroup`` that keeps its groups on pytest versions where xdist's own grouping is lost."""
        if config.getvalue("dist") != "loadgroup" or self.groups is None:
            return None
        from pytest_agent_eval.plugin.loadgroup import GroupScheduling

        return GroupScheduling(config, log, self.groups)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # The first item makes the campaign (a session with no agent item makes none, and loads nothing for one).
        # Under xdist every process must name the same one: before xdist starts its workers (its hook is
        # trylast), the controller fixes what the name is made of, to hand to them.
        if self.worker_input is not None or not session.config.pluginmanager.has_plugin("dsession"):
            return
        cfg = self.settings
        self.shared = {
            "campaign_dir": None,  # configure_node hands the workers the controller's, when it has one
            "replay_dir": None,
            "out": str(cfg.out),
            "corpus": str(cfg.corpus),
            "started": time.time(),
            "nonce": self.memo_id,
        }
        if self._session is not None:  # claimed already (--agent-eval-resume, -compare, -replay): name it now
            self._session.share(**self.shared)
        self.follow_workers()

    def follow_workers(self) -> None:
        """Show the workers' install, clone and index progress as it comes (see harness/progress.py)."""
        self.exchange = Path(tempfile.mkdtemp(prefix="agent-eval-xdist-"))
        self._stop_following = follow(self.exchange / "progress.log", self._show_worker_progress)

    def stop_following(self) -> None:
        """Show what the workers announced last and remove their files (at the session's end, or at exit)."""
        stop, self._stop_following = self._stop_following, None
        if stop is not None:
            stop()
        if self.exchange is not None:
            shutil.rmtree(self.exchange, ignore_errors=True)

    def _show_progress(self, text: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if terminal is None:
            return
        # Announcements come from inside fixtures, while output is captured: step around it, as live logging does.
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            terminal.ensure_newline()
            terminal.write_line(f"agent-eval: {text}")

    def _show_worker_progress(self, line: str) -> None:
        """A worker's announcement, shown by the controller's follower thread. The controller captures nothing
        while xdist runs; its own lines go out between those of xdist's loop, as live logging's do from a thread."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.ensure_newline()
            terminal.write_line(f"agent-eval: {line}")

    # -- items -------------------------------------------------------------------------------------------------
    def parametrize(self, metafunc: pytest.Metafunc, marker: pytest.Mark | None) -> None:
        """A test using the agent fixtures, parametrized over corpus entry × agent × arm × run as its marker narrows
        them."""
        from pytest_agent_eval.corpus.cases import SelectionError, cases_for, select_entries
        from pytest_agent_eval.settings.config import for_test

        cfg = self.settings
        try:
            test = for_test(cfg, marker.args, marker.kwargs) if marker is not None else for_test(cfg)
        except OptionError as exc:
            where = f"{metafunc.definition.nodeid}: @pytest.mark.agent_eval"
            raise pytest.Collector.CollectError(f"{where}: {exc}") from None
        try:
            entries = select_entries(self.corpus(), test.entries, cfg.campaign)
        except SelectionError as exc:
            where = f"{metafunc.definition.nodeid}: @pytest.mark.agent_eval: " if test.entries is not None else ""
            raise pytest.Collector.CollectError(f"{where}{exc}") from None
        own = cfg.agent.name  # the session's agent: its items' ids do not name it
        agents = [None if agent.name == own else agent for agent in test.agents]
        cases = cases_for(entries, test.arms, test.runs, test.turns, cfg.drivers, agents)
        params = [pytest.param(case, id=case.id, marks=marks_for(cfg, case)) for case in cases]
        metafunc.parametrize("agent_case", params)

    @pytest.hookimpl(trylast=True)  # after pytest's own -k/-m deselection
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        deselect_other_arms(config, items)
        self.opted_out = opt_in(config, items)
        self._name_items(items)
        self._check_outputs(items)
        groups = (self.worker_input or {}).get("agent_eval_groups")
        if groups:  # an xdist worker under --dist loadgroup: tell the controller's scheduler the groups
            _write_groups(Path(groups), items)

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        """The entries of agent items ``-k`` (or a marker expression) left out: named if it selected none."""
        for item in items:
            case = case_of(item)
            if case is not None:
                self.deselected_entries.setdefault(case.entry.name, None)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected_agent_items = sum(1 for item in session.items if case_of(item) is not None)

    def _nothing_selected(self, config: pytest.Config) -> str | None:
        """``-k nosuchentry`` selected no agent item, though there were some: which entries there are."""
        keyword = config.getoption("keyword", "") or ""
        if self.worker_input is not None or self.selected_agent_items or not self.deselected_entries or not keyword:
            return None
        entries = ", ".join(self.deselected_entries)
        return f"agent-eval: -k {keyword!r} selected no agent item; the entries are {entries} (e.g. -k express)"

    def _name_items(self, items: list[pytest.Item]) -> None:
        """Campaign item ids are the case ids; two selected tests with the same case are told apart by name. Then
        a resumed campaign's selection and ``--agent-eval-shard`` narrow the agent items (the session decides)."""
        cases = {item: case_of(item) for item in items}
        counts = Counter(case.id for case in cases.values() if case is not None)
        ids: dict[pytest.Item, str] = {}
        for item, case in cases.items():
            if case is not None:
                name = getattr(item, "originalname", item.name)
                ids[item] = item_state(item).item_id = case.id if counts[case.id] == 1 else f"{name}.{case.id}"
        if not ids:
            return
        session = self.session
        keep = session.select([(ids[item], cases[item]) for item in ids])
        dropped = [item for item in ids if ids[item] not in keep]
        if dropped:
            items[:] = [item for item in items if item not in ids or ids[item] in keep]
            self.config.hook.pytest_deselected(items=dropped)
        if hasattr(self.config, "workeroutput"):  # the controller of an xdist run collects nothing: tell it
            self.config.workeroutput["agent_eval_selection"] = session.selection_record()

    def _check_outputs(self, items: list[pytest.Item]) -> None:
        """The campaign's folder and ``--agent-eval-json`` must be writable: found out before an agent item runs,
        as one usage error naming the setting, not by every item's setup (nor, for the summary, at the session's
        end). An xdist worker cannot stop the session so (its controller would see a crash): its items fail at
        setup, each with that one line."""
        if self.config.option.collectonly or self.worker_input is not None:
            return
        if not any(case_of(item) for item in items):
            return
        problem = self.settings.output_problem()
        if problem:
            raise pytest.UsageError(problem)

    # -- pytest-timeout ----------------------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        """Under ``--timeout-method thread`` pytest-timeout would end the whole process, losing the record: for an
        agent item the limit instead ends the agent's processes, so the run fails as a timed-out run and is kept."""
        if case_of(item) is None or settings.method != "thread" or not settings.timeout:
            return None

        from pytest_agent_eval.harness.process import stop_all_groups

        timer = threading.Timer(settings.timeout, stop_all_groups)
        timer.name = f"agent-eval timeout {item.nodeid}"
        timer.daemon = True
        timer.start()
        item_state(item).timer = timer
        return True

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        state = item.stash.get(ITEM_KEY, None)
        if state is None or state.timer is None:
            return None
        state.timer.cancel()
        state.timer = None
        return True

    # -- interrupts --------------------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        return (yield from _interruptible(item, "while setting up"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        return (yield from _interruptible(item, "while running"))

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.interrupted = True  # a Ctrl-C anywhere, or the stop an interrupted agent item asked for

    # -- reports -----------------------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        if case_of(item) is None:
            return report
        state = item_state(item)
        if state.interrupted:
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
            state.setup_s = report.duration
        if report.when == "call" or (report.when == "setup" and not report.passed):
            from pytest_agent_eval.harness.writes import WriteFailed

            try:
                report.agent_eval = self.session.finish_item(
                    record,
                    outcome="error" if report.when == "setup" and report.failed else report.outcome,
                    error=str(call.excinfo.value) if call.excinfo is not None else None,
                    ran_s=state.setup_s + (call.duration if call.when == "call" else 0.0),
                )
            except WriteFailed as exc:
                # Not recorded (a full disk): the item fails with the one line that says where, and a resume runs
                # it again once there is space; the records written before stay whole.
                before = f"{report.longrepr}\n" if isinstance(report.longrepr, str) else ""  # the item's own error
                report.outcome = "failed"
                report.longrepr = f"{before}agent-eval: {record.id} not recorded: {exc}"
        return report

    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        """An item with a stalled turn says so on its own line: its time is not the agent's."""
        data = getattr(report, "agent_eval", None)
        if report.when != "call" or not isinstance(data, dict) or not data.get("stalled"):
            return None
        from pytest_agent_eval.metrics.format import stall_note

        letter = {"passed": ".", "failed": "F"}.get(report.outcome, "s")
        return (
            report.outcome,
            letter,
            (f"{report.outcome.upper()} ({stall_note(data.get('driver') or {})})", {"yellow": True}),
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "agent_eval", None)
        if data is not None and self.worker_input is None:  # a worker's reports reach its controller's session
            self.session.collect(report.nodeid, data)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output = getattr(session.config, "workeroutput", None)
        if output is not None:  # a worker tells its controller what it selected and left out (each collects all)
            output["agent_eval_opted_out"] = self.opted_out
            output["agent_eval_selected_items"] = self.selected_agent_items
            output["agent_eval_deselected_entries"] = list(self.deselected_entries)
            return
        self.stop_following()  # before the summary: the workers are done
        if self._session is None:
            return
        from pytest_agent_eval.plugin.caveats import error_filter, warn_raised

        failed = self._session.finish()
        # Issued here, inside pytest's warnings capture of this hook: they are listed in the warnings summary, and
        # -W / filterwarnings apply to them as to any warning of a test.
        folder = self._session.campaign_dir  # the warnings are about its summary: they point at a line of it
        where = folder / "summary.json" if folder is not None and (folder / "summary.json").is_file() else folder
        self.raised = [text for text in self._session.warnings() if warn_raised(f"agent-eval: warning: {text}", where)]
        self.raised_by = error_filter(self.config) if self.raised else ""
        if (failed or self.raised) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self._session.empty_shard and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # a job of the matrix with nothing to do has not failed

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if self.worker_input is not None:
            return
        session = self._session
        opted_out = max(self.opted_out, self.opted_out_on_workers)
        if config.getoption("verbose") > -2:
            nothing = self._nothing_selected(config)
            if nothing:
                terminalreporter.write_line(nothing, yellow=True)
            if opted_out:
                why = " by --agent-eval-skip" if config.getoption("agent_eval_skip") else f": {OPT_IN_HINT}"
                terminalreporter.write_line(f"agent-eval: {opted_out} agent evaluation item(s) deselected{why}")
            if config.getoption("agent_eval_only") and not (session and session.records):
                terminalreporter.write_line("agent-eval: --agent-eval-only, and no agent evaluation item ran")
            if session is not None and session.empty_shard:
                shard, selected = self.settings.shard, len(session.selection["selected"])
                terminalreporter.write_line(f"agent-eval: shard {shard} holds none of the {selected} selected item(s)")
        verbosity = config.getoption("verbose")
        # One line per run by default and at -v; every run's blocks at -vv (report.html always has them).
        lines = session.terminal_lines(verbose=verbosity > 1) if session else []
        if verbosity <= -2:  # -qq: the verdict lines, not the tables
            lines = [line for line in lines if line.text.startswith("agent-eval:")]
        if lines or self.raised:
            terminalreporter.write_sep("=", "agent-eval")
        for line in lines:
            terminalreporter.write_line(line.text, **line.markup)
        for text in self.raised:
            terminalreporter.write_line(f"agent-eval: warning: {text} (an error by {self.raised_by})", red=True)
        for record in session.ordered() if session else []:
            if record.stalled:
                from pytest_agent_eval.metrics.format import stall_note

                note = stall_note(record.driver or {})
                terminalreporter.write_line(f"agent-eval: {record.id} {note}; its time is no measurement", yellow=True)
        self.say_how_to_resume(terminalreporter, config)  # last: the line to copy after an interrupt

    def say_how_to_resume(self, terminalreporter: Any, config: pytest.Config) -> None:
        if not self.interrupted:
            return
        # The xdist controller ran no item: its session names the campaign as its workers did.
        session = self.session if self.shared is not None else self._session
        folder = session.campaign_dir if session is not None else None
        if folder is None:
            return
        from pytest_agent_eval.campaign.resume_command import resume_command
        from pytest_agent_eval.campaign.store import MANIFEST

        if not (Path(folder) / MANIFEST).exists():
            return
        program = sys.argv[0] if sys.argv else "pytest"
        command = resume_command(program, config.invocation_params.args, Path(folder).resolve())
        terminalreporter.write_line(f"agent-eval: interrupted — resume with: {command}", yellow=True, bold=True)


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


def _interruptible(item: pytest.Item, phase: str) -> Any:
    """The body of the set-up and call hook wrappers: a KeyboardInterrupt raised inside an agent item becomes
    :class:`AgentInterrupted` and stops the session after it.

    By then the driver has stopped the agent's process group (its ``finally``) and its segments are on disk.
    Left as a KeyboardInterrupt, the item would get no report, and pytest's own ``tmp_path`` teardown, which
    expects one, dies with a KeyError traceback at the end of the session.
    """
    try:
        return (yield)
    except KeyboardInterrupt:
        if case_of(item) is None:
            raise
        state = item_state(item)
        state.interrupted = True
        item.session.shouldstop = "agent-eval: interrupted (Ctrl-C)"
        # The agent runs while its item is set up (the fixtures drive it): say so, not "setting up".
        what = f"the agent's run of {state.item_id}" if state.agent_running else f"{phase} {state.item_id}"
        raise AgentInterrupted(f"interrupted {what}; the agent was stopped, its files so far kept") from None


def _write_groups(path: Path, items: list[pytest.Item]) -> None:
    from pytest_agent_eval.plugin.loadgroup import group_of, write_groups

    found = {item.nodeid: group_of(item.iter_markers("xdist_group")) for item in items}
    write_groups(path, {nodeid: group for nodeid, group in found.items() if group is not None})
