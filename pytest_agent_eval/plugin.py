"""The pytest plugin: options and ini keys, the ``agent_eval`` marker, items, reports — glue only.

Items: any test that uses the agent fixtures (``evals/test_ab.py`` does) becomes one item per corpus entry ×
arm × run, with ids like ``express-with-1``, so ``-k express`` and ``-k "with and not without"`` select as
expected. A pinned arm (``--arms with@local:../cg,with@1.6.0``) shows as ``express-with:1.6.0-1``: pytest's
``-k`` cannot parse ``@``, so the id writes it as ``:`` and ``-k "with:1.6.0"`` selects that arm.
The harness work lives in :mod:`pytest_agent_eval.fixtures`, the figures in :mod:`pytest_agent_eval.score`,
the verdicts in :mod:`pytest_agent_eval.report.gates`, the tables in :mod:`pytest_agent_eval.report.tables`.

Every session writes a NEW campaign folder (:mod:`pytest_agent_eval.report.store`), or finishes the one
``--agent-eval-resume`` names; the controller makes it before xdist starts its workers and hands them the
path. Each item appends its record to the campaign when it finishes, wherever it ran. Under xdist each worker
also puts the record (plain data) on the test report; only the controller collects them, prints the tables
once, writes ``summary.json`` and ``report.html`` into the campaign, and applies ``--agent-eval-compare-fail``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.config import OPTIONS, THRESHOLDS_INI, Arm, OptionError, parse_arms, parse_positive_int, resolve
from pytest_agent_eval.corpus import CorpusEntry, CorpusError, load_corpus
from pytest_agent_eval.fixtures import (
    CONFIG_KEY,
    ITEM_ID_KEY,
    SESSION_KEY,
    EvalCase,
    _agent_eval_memo,
    agent_block_proven,
    agent_campaign,
    agent_case,
    agent_env,
    agent_eval_config,
    agent_failure_memo,
    agent_gate,
    agent_model_server,
    agent_result,
    agent_resumed,
    agent_run,
    agent_run_dir,
    agent_sandbox,
    agent_thresholds,
    agent_workspace,
    campaign_config,
    claude_cli,
    cli_block,
    codegraph,
    codegraph_warm,
    corpus_repo,
    indexed_repo,
    item_id,
    item_segments,
    mcp_config,
    record_of,
    select_campaign,
    start_campaign,
)
from pytest_agent_eval.harness.drivers import AgentInfraError
from pytest_agent_eval.harness.failures import FailureMemo
from pytest_agent_eval.harness.progress import listen
from pytest_agent_eval.harness.provenance import gather_provenance
from pytest_agent_eval.report import compare, gates, tables
from pytest_agent_eval.report.html import write_html
from pytest_agent_eval.report.store import (
    MANIFEST,
    Campaign,
    StoreError,
    config_hash,
    load_records,
    safe_name,
    write_atomic,
)
from pytest_agent_eval.resume_command import resume_command

__all__ = [  # the fixtures, re-exported so pytest finds them in this plugin module
    "_agent_eval_memo",
    "agent_block_proven",
    "agent_campaign",
    "agent_case",
    "agent_env",
    "agent_eval_config",
    "agent_failure_memo",
    "agent_gate",
    "agent_model_server",
    "agent_result",
    "agent_resumed",
    "agent_run",
    "agent_run_dir",
    "agent_sandbox",
    "agent_thresholds",
    "agent_workspace",
    "claude_cli",
    "cli_block",
    "codegraph",
    "codegraph_warm",
    "corpus_repo",
    "indexed_repo",
    "mcp_config",
]

CORPUS_KEY = pytest.StashKey[Any]()
DEFAULT_OUT = "agent-eval-out"
# What the terminal shows but the campaign does not keep: the blocks are re-derived from the segments.
_NOT_STORED = ("blocks",)
MARKER = (
    "agent_eval(entries=None, arms=None, runs=None, turns=None): an agent evaluation (a test using the agent "
    "fixtures), parametrized over corpus entry × arm × run; the arguments narrow the entries and override "
    "--arms/--agent-eval-runs/--agent-eval-turns for this test. Every generated item carries the marker, so "
    "-m agent_eval selects them"
)
_MARKER_ARGS = ("entries", "arms", "runs", "turns")


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
    try:
        cfg = resolve(
            lambda attr: config.getoption(f"agent_eval_{attr}"), lambda key: config.getini(key), config.rootpath
        )
        gates.load_thresholds(cfg.thresholds_file)  # a bad thresholds file is a usage error, before anything runs
    except (OptionError, gates.ThresholdError) as exc:
        raise pytest.UsageError(str(exc)) from None
    if cfg.out is None:
        cfg.out = config.rootpath / DEFAULT_OUT
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:
        if worker_input.get("agent_eval_campaign"):
            cfg.campaign_dir = Path(worker_input["agent_eval_campaign"])
        config.stash[SESSION_KEY] = worker_input.get("agent_eval_session") or uuid.uuid4().hex[:12]
    else:
        config.stash[SESSION_KEY] = session_id = uuid.uuid4().hex[:12]
        config.add_cleanup(FailureMemo(cfg.cache, session_id).clear)
        _check_campaign_paths(cfg)
        cfg.campaign_dir = cfg.resume
        config.pluginmanager.register(Reporter(config), "agent_eval_reporter")
        # Installs and index builds announce themselves; under xdist they run on workers, whose output
        # pytest does not show, and the builds are still listed in <cache>/builds.log.
        config.add_cleanup(listen(lambda text: _show_progress(config, text)))
    config.stash[CONFIG_KEY] = cfg


def _show_progress(config: pytest.Config, text: str) -> None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if terminal is None:
        return
    # Announcements come from inside fixtures, while output is captured: step around it, as live logging does.
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        terminal.ensure_newline()
        terminal.write_line(f"agent-eval: {text}")


def _check_campaign_paths(cfg: Any) -> None:
    """A resume folder or baseline that cannot be read is a usage error, before anything runs."""
    try:
        if cfg.resume is not None:
            Campaign.open(cfg.resume)
    except StoreError as exc:
        raise pytest.UsageError(f"--agent-eval-resume: {exc}") from None
    try:
        if cfg.compare is not None:
            load_records(cfg.compare)
    except StoreError as exc:
        raise pytest.UsageError(f"--agent-eval-compare: {exc}") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → worker: share the campaign folder, so every item lands in it."""
    folder = node.config.stash[CONFIG_KEY].campaign_dir
    node.workerinput["agent_eval_campaign"] = str(folder) if folder is not None else ""
    node.workerinput["agent_eval_session"] = node.config.stash[SESSION_KEY]


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


def cases_for(
    entries: list[CorpusEntry], arms: list[Arm], runs: int, turns: int | None, drivers: Sequence[str] = ("headless",)
) -> list[EvalCase]:
    return [
        EvalCase(entry, arm, run, tuple(entry.questions[:turns] if turns else entry.questions), driver)
        for entry in entries
        for arm in arms
        for driver in drivers
        for run in range(1, runs + 1)
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "agent_case" not in metafunc.fixturenames:
        return
    cfg = metafunc.config.stash[CONFIG_KEY]
    entries = _corpus(metafunc.config)
    arms, runs, turns = cfg.arms, cfg.runs, cfg.turns
    marker = metafunc.definition.get_closest_marker("agent_eval")
    if marker is not None:
        where = f"{metafunc.definition.nodeid}: @pytest.mark.agent_eval"
        unknown = sorted(set(marker.kwargs) - set(_MARKER_ARGS))
        if marker.args or unknown:
            raise pytest.Collector.CollectError(f"{where}: takes only keyword arguments {', '.join(_MARKER_ARGS)}")
        try:
            if marker.kwargs.get("arms") is not None:
                value = marker.kwargs["arms"]
                arms = parse_arms(value if isinstance(value, str) else ",".join(value))
            if marker.kwargs.get("runs") is not None:
                runs = parse_positive_int(marker.kwargs["runs"])
            if marker.kwargs.get("turns") is not None:
                turns = parse_positive_int(marker.kwargs["turns"])
        except OptionError as exc:
            raise pytest.Collector.CollectError(f"{where}: {exc}") from None
        wanted = marker.kwargs.get("entries")
        if wanted is not None:
            wanted = [wanted] if isinstance(wanted, str) else list(wanted)
            missing = [name for name in wanted if name not in {e.name for e in entries}]
            if missing:
                raise pytest.Collector.CollectError(f"{where}: entries not in the corpus: {', '.join(missing)}")
            entries = [e for e in entries if e.name in wanted]
    if cfg.campaign is not None:
        entries = select_campaign(entries, cfg.campaign)
        if not entries:
            raise pytest.Collector.CollectError(
                f'--agent-eval-campaign {cfg.campaign}: no corpus entry has "campaign": "{cfg.campaign}"'
            )
    params = [
        pytest.param(case, id=case.id, marks=pytest.mark.agent_eval)
        for case in cases_for(entries, arms, runs, turns, cfg.drivers)
    ]
    metafunc.parametrize("agent_case", params)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Campaign item ids are the case ids; two selected tests with the same case are told apart by name."""
    cases = {item: _case_of(item) for item in items}
    counts = Counter(case.id for case in cases.values() if case is not None)
    for item, case in cases.items():
        if case is not None:
            name = getattr(item, "originalname", item.name)
            item.stash[ITEM_ID_KEY] = case.id if counts[case.id] == 1 else f"{name}.{case.id}"


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
    """A generator for the hook wrappers above: a KeyboardInterrupt raised inside an agent item becomes
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
        record_of(item)["interrupted"] = True
        item.session.shouldstop = "agent-eval: interrupted (Ctrl-C)"
        raise AgentInterrupted(f"interrupted while {phase}; the agent was stopped, its files so far kept") from None


# -- reports ---------------------------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    case = _case_of(item)
    if case is None:
        return report
    record = record_of(item)
    if call.excinfo is not None and call.excinfo.errisinstance(AgentInterrupted):
        # Not a result of any kind: the campaign does not record it, and a resume runs the item again.
        report.longrepr = f"agent-eval: {case.id} {call.excinfo.value}"
        return report
    if record.get("interrupted"):
        return report  # the teardown of the interrupted item
    if call.excinfo is not None and call.excinfo.errisinstance(AgentInfraError):
        # An infrastructure failure is an ERROR whose message says which step failed, not a traceback to read.
        record["infra_error"] = str(call.excinfo.value)
        report.longrepr = f"agent-eval infrastructure error in {case.id}: {call.excinfo.value}"
    if report.when == "setup":
        record["setup_s"] = report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "error" if report.when == "setup" and report.failed else report.outcome
        cfg = item.config.stash[CONFIG_KEY]
        driver = record.get("driver") or {}
        ran_s = record.pop("setup_s", 0.0) + (call.duration if call.when == "call" else 0.0)
        record.update(
            id=item_id(item, case),
            nodeid=item.nodeid,
            entry=case.entry.name,
            language=case.entry.language,
            arm=case.arm.name,
            arm_label=case.arm.label,
            run=case.run,
            questions=list(case.questions),
            turns=len(case.questions),
            model=cfg.model,
            effort=cfg.effort,
            outcome=outcome,
            error=str(call.excinfo.value) if call.excinfo is not None else None,
            # A resumed item keeps the times of the session that ran it.
            wall_s=record.get("wall_s", round(ran_s, 3)),
            agent_s=record.get("agent_s", round(sum(driver.get("wall_s") or []), 3)),
        )
        data = json.loads(json.dumps(record, default=str))  # plain data: xdist serializes it
        if cfg.campaign_dir is not None:
            campaign = Campaign.open(cfg.campaign_dir)
            if not data.get("resumed"):
                folder = campaign.path / "items" / safe_name(data["id"])
                data["segments"] = [str(p.relative_to(campaign.path)) for p in item_segments(folder)]
                campaign.record({k: v for k, v in data.items() if k not in _NOT_STORED})
        report.agent_eval = data
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> Any:
    """An item with a stalled turn says so on its own line: its time is not the agent's."""
    data = getattr(report, "agent_eval", None)
    if report.when != "call" or not isinstance(data, dict) or not data.get("stalled"):
        return None
    letter = {"passed": ".", "failed": "F"}.get(report.outcome, "s")
    return report.outcome, letter, (f"{report.outcome.upper()} ({stall_note(data)})", {"yellow": True})


def stall_note(record: dict) -> str:
    """``stalled: turn 1 silent 280.4s after user tool_result (threshold 30s)`` from an item record."""
    driver = record.get("driver") or {}
    silences = driver.get("longest_silence_s") or []
    turns = [t for t in driver.get("stalled_turns") or [] if 0 < t <= len(silences)]
    after = driver.get("silence_after") or []
    what = ", ".join(
        f"turn {t} silent {silences[t - 1]:.1f}s" + (f" after {after[t - 1]}" if t <= len(after) else "") for t in turns
    )
    return f"stalled: {what} (threshold {driver.get('stall_s') or 0:g}s)"


class Reporter:
    """Controller-side: makes the campaign, gathers the records (local or from xdist workers), reports once."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, dict] = {}
        self.campaign: Campaign | None = None
        self.made_early: Path | None = None
        self.regressions: list[compare.Regression] | None = None
        self.written: list[Path] = []
        self.interrupted = False

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        self.interrupted = True  # a Ctrl-C anywhere, or the stop an interrupted agent item asked for

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Without xdist the first item makes the campaign (a session with no agent item makes none). Under xdist
        # the controller makes it before xdist starts its workers (its hook is trylast), to hand them the path.
        cfg = self.config.stash[CONFIG_KEY]
        if cfg.campaign_dir is None and self.config.pluginmanager.has_plugin("dsession"):
            self.made_early = start_campaign(cfg).path

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "agent_eval", None)
        if isinstance(data, dict):
            self.records[report.nodeid] = data

    def ordered(self) -> list[dict]:
        cfg = self.config.stash[CONFIG_KEY]
        corpus = self.config.stash.get(CORPUS_KEY, None)
        if corpus is None:  # an xdist controller collects nothing itself; the corpus order is still the order
            try:
                corpus = load_corpus(cfg.corpus)
            except CorpusError:
                corpus = []
        entry_order = {e.name: i for i, e in enumerate(corpus)} if isinstance(corpus, list) else {}
        arm_order = {arm.label: i for i, arm in enumerate(cfg.arms)}
        return sorted(
            self.records.values(),
            key=lambda r: (
                entry_order.get(r["entry"], 1 << 30),
                r["entry"],
                arm_order.get(r["arm_label"], 99),
                r["arm_label"],
                r["run"],
                r["nodeid"],
            ),
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the campaign's summary and report, then apply the regression gate to the exit status."""
        cfg = self.config.stash[CONFIG_KEY]
        if not self.records:
            if self.made_early is not None and [p.name for p in self.made_early.iterdir()] == [MANIFEST]:
                # Made for xdist workers that ran no agent item: an empty campaign is no campaign.
                (self.made_early / MANIFEST).unlink()
                self.made_early.rmdir()
            return
        if cfg.campaign_dir is None:
            return
        self.campaign = Campaign.open(cfg.campaign_dir)
        records = self.ordered()
        finish_manifest(self.campaign, records)
        meta = {
            "campaign": self.campaign.id,
            "corpus": str(cfg.corpus),
            "arms": [arm.label for arm in cfg.arms],
            "runs": cfg.runs,
            "model": cfg.model,
            "effort": cfg.effort,
            "backend": cfg.backend,
            "cg_version": cfg.cg_version,
        }
        summary = self.campaign.path / "summary.json"
        write_atomic(summary, json.dumps(tables.summary(records, meta), indent=2, default=str) + "\n")
        self.written = [summary, write_html(self.campaign)]
        if cfg.compare is not None:
            self.regressions = compare.compare(load_records(cfg.compare), records, cfg.compare_fail)
            if any(row.failed for row in self.regressions) and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.summarize(terminalreporter)
        self.say_how_to_resume(terminalreporter)  # last: the line to copy after an interrupt

    def summarize(self, terminalreporter: Any) -> None:
        if not self.records:
            return
        records = self.ordered()
        cfg = self.config.stash[CONFIG_KEY]
        verbose = self.config.getoption("verbose") > 0
        terminalreporter.write_sep("=", "agent-eval")
        report = tables.terminal_report(
            records,
            verbose=verbose,
            campaign=cfg.campaign is not None,
            include_contaminated=cfg.include_contaminated,
        )
        terminalreporter.write_line(report.rstrip())
        if self.regressions is not None:
            terminalreporter.write_line("")
            terminalreporter.write_line(f"COMPARE — {cfg.compare} (before) → this session (after)")
            terminalreporter.write_line(compare.render_comparison(self.regressions))
            failed = [row for row in self.regressions if row.failed]
            for entry in dict.fromkeys(row.entry for row in failed):
                rows = [row for row in failed if row.entry == entry]
                what = ", ".join(f"{row.arm} {row.metric} ({row.rule})" for row in rows)
                terminalreporter.write_line(f"agent-eval: REGRESSION in {entry}: {what}", red=True, bold=True)
            if failed:
                terminalreporter.write_line(
                    "agent-eval: the session fails: metrics regressed beyond --agent-eval-compare-fail", red=True
                )
        for record in records:
            if record.get("stalled"):
                terminalreporter.write_line(
                    f"agent-eval: {record['id']} {stall_note(record)}; its time is no measurement", yellow=True
                )
        if self.campaign is not None:
            drift = self.config_drift()
            if drift:
                terminalreporter.write_line(f"agent-eval: warning: {drift}", yellow=True)
            resumed = sum(1 for r in records if r.get("resumed"))
            note = f" ({resumed} re-scored from the resumed campaign, not re-run)" if resumed else ""
            terminalreporter.write_line(
                f"agent-eval: campaign {self.campaign.id}: {len(records)} run(s){note} in {self.campaign.path}"
            )
            for path in self.written:
                terminalreporter.write_line(f"agent-eval: wrote {path}")

    def say_how_to_resume(self, terminalreporter: Any) -> None:
        folder = self.config.stash[CONFIG_KEY].campaign_dir
        if not self.interrupted or folder is None or not Path(folder, MANIFEST).exists():
            return
        program = sys.argv[0] if sys.argv else "pytest"
        command = resume_command(program, self.config.invocation_params.args, Path(folder).resolve())
        terminalreporter.write_line(f"agent-eval: interrupted — resume with: {command}", yellow=True, bold=True)

    def config_drift(self) -> str | None:
        """A resumed campaign run with other settings mixes two configurations: say so, do not forbid it."""
        cfg = self.config.stash[CONFIG_KEY]
        if cfg.resume is None or self.campaign is None:
            return None
        try:
            entries = select_campaign(load_corpus(cfg.corpus), cfg.campaign)
        except CorpusError:
            return None
        now = config_hash(campaign_config(cfg, entries))
        then = self.campaign.manifest.get("config_hash")
        if now == then:
            return None
        return f"this session's settings differ from the resumed campaign's (config hash {now[:12]} ≠ {str(then)[:12]})"


def finish_manifest(campaign: Campaign, records: list[dict]) -> None:
    """Add what only the runs could tell — the resolved codegraph and Claude Code versions, the model backend,
    and where the code under test and the tools came from (``provenance``).

    The manifest's config and hash stay as written; a resumed campaign keeps the versions of arms it ran before.
    """
    manifest = Campaign.open(campaign.path).manifest
    versions = dict(manifest.get("versions") or {})
    codegraph = dict(versions.get("codegraph") or {})
    for label in dict.fromkeys(r["arm_label"] for r in records):
        found = sorted({str(r["tool_version"]) for r in records if r["arm_label"] == label and r.get("tool_version")})
        if found:
            codegraph[label] = ", ".join(found)
    claude = sorted({str(r["claude_version"]) for r in records if r.get("claude_version")})
    versions["codegraph"] = codegraph
    if claude:
        versions["claude_code"] = ", ".join(claude)
    manifest["versions"] = versions
    backend = next((r["backend"] for r in records if isinstance(r.get("backend"), dict)), None)
    if backend is not None:
        manifest["backend"] = backend
    manifest["provenance"] = gather_provenance(records, manifest.get("provenance"))
    write_atomic(campaign.path / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    campaign.manifest = manifest
