"""The pytest plugin: options and ini keys, the ``agent_eval`` marker, items, reports — glue only.

Items: any test that uses the agent fixtures (``evals/test_ab.py`` does) becomes one item per corpus entry ×
arm × run, with ids like ``express-with-1``, so ``-k express`` and ``-k "with and not without"`` select as
expected. The harness work lives in :mod:`pytest_agent_eval.fixtures`, the figures in
:mod:`pytest_agent_eval.score`, the verdicts in :mod:`pytest_agent_eval.report.gates`, the tables in
:mod:`pytest_agent_eval.report.tables`.

Under xdist each worker puts its item's record (plain data) on the test report; only the controller collects
them, prints the tables once and writes ``summary.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agent_eval.config import OPTIONS, THRESHOLDS_INI, Arm, OptionError, parse_arms, parse_positive_int, resolve
from pytest_agent_eval.corpus import CorpusEntry, CorpusError, load_corpus
from pytest_agent_eval.fixtures import (
    CONFIG_KEY,
    EvalCase,
    _agent_eval_memo,
    agent_case,
    agent_env,
    agent_eval_config,
    agent_gate,
    agent_model_server,
    agent_result,
    agent_run,
    agent_run_dir,
    agent_thresholds,
    agent_workspace,
    claude_cli,
    cli_block,
    codegraph,
    codegraph_warm,
    corpus_repo,
    indexed_repo,
    mcp_config,
    record_of,
)
from pytest_agent_eval.harness.drivers import AgentInfraError
from pytest_agent_eval.report import gates, tables

__all__ = [  # the fixtures, re-exported so pytest finds them in this plugin module
    "_agent_eval_memo",
    "agent_case",
    "agent_env",
    "agent_eval_config",
    "agent_gate",
    "agent_model_server",
    "agent_result",
    "agent_run",
    "agent_run_dir",
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
MARKER = (
    "agent_eval(entries=None, arms=None, runs=None, turns=None): an agent evaluation (a test using the agent "
    "fixtures), parametrized over corpus entry × arm × run; the arguments narrow the entries and override "
    "--arms/--runs/--turns for this test. Every generated item carries the marker, so -m agent_eval selects them"
)
_MARKER_ARGS = ("entries", "arms", "runs", "turns")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agent-eval", "A/B evaluation of a retrieval MCP server (option > ini key > default)")
    for option in OPTIONS:
        dest = f"agent_eval_{option.attr}"
        if option.is_flag:
            group.addoption(option.flag, action="store_true", default=None, dest=dest, help=option.help)
        else:
            group.addoption(option.flag, default=None, dest=dest, metavar=option.metavar, help=option.help)
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
    worker_input = getattr(config, "workerinput", None)
    if cfg.out is None:
        # One timestamped folder per session; workers take the controller's, so every item lands in it.
        if worker_input is not None and "agent_eval_out" in worker_input:
            cfg.out = Path(worker_input["agent_eval_out"])
        else:
            cfg.out = config.rootpath / "agent-eval-out" / time.strftime("%Y%m%d-%H%M%S")
    config.stash[CONFIG_KEY] = cfg
    if worker_input is None:
        config.pluginmanager.register(Reporter(config), "agent_eval_reporter")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller → worker: share the output folder picked at configure time."""
    node.workerinput["agent_eval_out"] = str(node.config.stash[CONFIG_KEY].out)


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


def cases_for(entries: list[CorpusEntry], arms: list[Arm], runs: int, turns: int | None) -> list[EvalCase]:
    return [
        EvalCase(entry, arm, run, tuple(entry.questions[:turns] if turns else entry.questions))
        for entry in entries
        for arm in arms
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
    params = [
        pytest.param(case, id=case.id, marks=pytest.mark.agent_eval) for case in cases_for(entries, arms, runs, turns)
    ]
    metafunc.parametrize("agent_case", params)


# -- reports ---------------------------------------------------------------------------------------------------
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("agent_case") if callspec is not None else None
    if not isinstance(case, EvalCase):
        return report
    record = record_of(item)
    if call.excinfo is not None and call.excinfo.errisinstance(AgentInfraError):
        # An infrastructure failure is an ERROR whose message says which step failed, not a traceback to read.
        record["infra_error"] = str(call.excinfo.value)
        report.longrepr = f"agent-eval infrastructure error in {case.id}: {call.excinfo.value}"
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "error" if report.when == "setup" and report.failed else report.outcome
        cfg = item.config.stash[CONFIG_KEY]
        record.update(
            id=case.id,
            nodeid=item.nodeid,
            entry=case.entry.name,
            language=case.entry.language,
            arm=case.arm.name,
            arm_label=case.arm.label,
            run=case.run,
            turns=len(case.questions),
            model=cfg.model,
            effort=cfg.effort,
            outcome=outcome,
        )
        report.agent_eval = json.loads(json.dumps(record, default=str))  # plain data: xdist serializes it
    return report


class Reporter:
    """Controller-side: gathers the records from reports (local or from xdist workers) and reports once."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, dict] = {}

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

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.records:
            return
        records = self.ordered()
        cfg = self.config.stash[CONFIG_KEY]
        verbose = self.config.getoption("verbose") > 0
        terminalreporter.write_sep("=", "agent-eval")
        terminalreporter.write_line(tables.terminal_report(records, verbose=verbose).rstrip())
        assert cfg.out is not None
        cfg.out.mkdir(parents=True, exist_ok=True)
        meta = {
            "corpus": str(cfg.corpus),
            "arms": [arm.label for arm in cfg.arms],
            "runs": cfg.runs,
            "model": cfg.model,
            "effort": cfg.effort,
            "backend": cfg.backend,
            "cg_version": cfg.cg_version,
        }
        path = cfg.out / "summary.json"
        path.write_text(json.dumps(tables.summary(records, meta), indent=2, default=str) + "\n", encoding="utf-8")
        terminalreporter.write_line(f"agent-eval: figures of {len(records)} run(s) written to {path}")
