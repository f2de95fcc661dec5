"""EvalSession: one pytest session's evaluation — its campaign's life, the records coming in, and what goes
out at the end (manifest versions, ``summary.json``, ``report.html``, the compare gate, the terminal lines).

Plain Python: the plugin's hooks each call one method here, and nothing here imports pytest. Under xdist,
every process has one: a worker's appends its items to the shared campaign; the controller's makes the
campaign, gathers the workers' records (plain data) and reports once.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.registry import origin_of
from pytest_agent_eval.campaign.manifest import campaign_config, finish_manifest, plugins_of, update_manifest
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.selection import corpus_hash, given_options, thresholds_record
from pytest_agent_eval.campaign.store import (
    MANIFEST,
    Campaign,
    StoreError,
    campaign_name,
    config_hash,
    load_records,
    point_latest,
    write_atomic,
)
from pytest_agent_eval.corpus.cases import EvalCase, select_campaign
from pytest_agent_eval.corpus.load import CorpusEntry, CorpusError, load_corpus
from pytest_agent_eval.settings.config import AgentEvalConfig

# The baselines, the shard planner and the reports load when a session has something for them.
if TYPE_CHECKING:
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.report.compare import GateResult

SUMMARY = "summary.json"


@dataclass
class AgentResult:
    """A scored run, as the ``agent_result`` fixture gives it: the driver's record, the score as plain data, and
    its named figures."""

    case: EvalCase
    run: RunRecord
    score: dict[str, Any]
    figures: dict[str, Any]
    blocks: str


class SessionError(ValueError):
    """A setting that makes the session impossible (a resume folder in use, a baseline that cannot be read)."""


@dataclass
class Line:
    """One line of the terminal summary, with how it is marked (``red``, ``yellow``, ``bold``)."""

    text: str
    markup: dict[str, bool] = field(default_factory=dict)


class EvalSession:
    def __init__(self, cfg: AgentEvalConfig) -> None:
        self.cfg = cfg
        # The campaign folder this session writes: a resumed one (claim), the one the xdist controller named
        # (share), or the one its first item made (start); None until then.
        self.campaign_dir: Path | None = None
        self.records: dict[str, ItemRecord] = {}  # by node id: the controller's gathered records
        self.campaign: Campaign | None = None
        self.gate: GateResult | None = None
        self.compare_path: Path | None = None  # --agent-eval-compare resolved (a saved name, latest, a folder)
        self.replay_path: Path | None = None  # --agent-eval-replay resolved
        self.saved_baseline: Path | None = None
        self.written: list[Path] = []
        self.problems: list[str] = []  # what could not be read (records of a resumed campaign or a baseline) or written
        self._resumed: dict[str, ItemRecord] | None = None
        self._held = contextlib.ExitStack()
        # What the session selected, for the manifest (see campaign/selection.py); "selected" once collected.
        self.selection: dict[str, Any] = {
            "args": [],
            "keyword": "",
            "markexpr": "",
            "mode": cfg.mode,
            "selected": None,
            "options": given_options(cfg),
        }
        self.shard_ids: list[str] | None = None
        self.keep_only: set[str] | None = None  # a resumed campaign's selected ids: nothing else runs
        self.corpus_name: str | None = None  # under xdist: the corpus as the controller names it (see share)
        self._tables: dict[bool, tuple[str, list[str]]] = {}  # the rendered tables and their caveats, by verbosity

    # -- the campaign's life ---------------------------------------------------------------------------------
    def claim(self) -> None:
        """Controller, before anything runs: a resumed campaign is opened and locked for this session, a
        baseline read; either failing is a SessionError naming the option."""
        from pytest_agent_eval.campaign import baseline

        cfg = self.cfg
        try:
            if cfg.resume is not None:
                campaign = Campaign.open(cfg.resume)
                self._held.enter_context(campaign.resuming())
        except StoreError as exc:
            raise SessionError(f"--agent-eval-resume: {exc}") from None
        assert cfg.out is not None
        try:
            if cfg.compare is not None:
                self.compare_path = baseline.find(cfg.compare, cfg.out, exclude=cfg.resume)
                load_records(self.compare_path)
        except StoreError as exc:
            raise SessionError(f"--agent-eval-compare: {exc}") from None
        try:
            if cfg.replay is not None:
                self.replay_path = baseline.find(cfg.replay, cfg.out, exclude=cfg.resume)
                if not (self.replay_path / MANIFEST).is_file():
                    raise StoreError(f"{self.replay_path}: replay needs a saved baseline or a campaign folder")
                load_records(self.replay_path)
        except StoreError as exc:
            raise SessionError(f"--agent-eval-replay: {exc}") from None
        self.campaign_dir = cfg.resume

    def invoked_with(self, args: Sequence[str], keyword: str, markexpr: str, pyargs: bool = False) -> None:
        """The command line's selection (the test paths it named, ``-k``, ``-m``, ``--pyargs``), kept in the
        manifest."""
        self.selection.update(
            args=[str(a) for a in args], keyword=keyword or "", markexpr=markexpr or "", pyargs=bool(pyargs)
        )

    def select(self, items: Sequence[tuple[str, EvalCase]]) -> set[str]:
        """After ``-k``/``-m``: the ids of the items this session runs — those a resumed campaign selected, and of
        them this shard's (:mod:`pytest_agent_eval.campaign.shard`)."""
        if self.keep_only is not None:
            items = [(item_id, case) for item_id, case in items if item_id in self.keep_only]
        self.selection["selected"] = [item_id for item_id, _ in items]
        shard = self.cfg.shard
        if shard is None:
            return {item_id for item_id, _ in items}
        from pytest_agent_eval.campaign.shard import partition

        self.shard_ids = partition(items, shard.count)[shard.index - 1]
        return set(self.shard_ids)

    @property
    def empty_shard(self) -> bool:
        """This session's shard holds none of the items selected: as good an outcome as any for a CI job."""
        return self.cfg.shard is not None and self.shard_ids == [] and bool(self.selection["selected"])

    def selection_record(self) -> dict[str, Any]:
        """The manifest's ``selection`` and ``shard`` keys; plain data, so a worker can hand it to the controller."""
        shard = self.cfg.shard
        return {
            "selection": dict(self.selection),
            "shard": {**shard.to_dict(), "ids": self.shard_ids} if shard is not None else None,
        }

    def note_selection(self, record: Any) -> None:
        """Controller under xdist: what a worker's collection selected (every worker selects the same)."""
        if isinstance(record, dict) and self.selection["selected"] is None:
            self.selection = dict(record["selection"])
            self.shard_ids = (record.get("shard") or {}).get("ids")

    def share(
        self, campaign_dir: str | None, replay_dir: str | None, out: str, corpus: str, started: float, nonce: str
    ) -> None:
        """Under xdist, in the controller and every worker, when its session is made: write into one campaign —
        the one the controller resolved (a resumed one), else the one each process names alike in the controller's
        out folder from the session's start, its id and the config hash, made by the first item that runs (a
        session without an agent item leaves nothing on disk) — and replay the baseline the controller resolved
        (``latest`` on a worker would find the session's own campaign). Workers with their own copy of the
        project (``--rsyncdir``) resolve their paths elsewhere: the campaign's config names the corpus as the
        controller does, so that every process hashes, and the manifest keeps, the same config."""
        self.corpus_name = corpus
        if campaign_dir:
            self.campaign_dir = Path(campaign_dir)
        elif self.campaign_dir is None:
            digest = config_hash(self._campaign_config())
            self.campaign_dir = Path(out) / campaign_name(digest, started, nonce)
        if replay_dir:
            self.replay_path = Path(replay_dir)

    def start(self) -> Campaign:
        """A new campaign folder under ``--agent-eval-out``, which this session then writes."""
        assert self.cfg.out is not None
        campaign = Campaign.create(self.cfg.out, self._campaign_config(), versions={}, extra=self._manifest_extra())
        self.campaign_dir = campaign.path
        return campaign

    def _manifest_extra(self) -> dict[str, Any]:
        """The manifest's keys outside the hashed config: the corpus hash, the selection and the shard."""
        cfg = self.cfg
        return {
            "corpus_hash": corpus_hash(cfg.corpus),
            "thresholds": thresholds_record(cfg.thresholds_file),
            **self.selection_record(),
            "plugins": plugins_of(cfg),
        }

    def _campaign_config(self) -> dict[str, Any]:
        try:
            entries = select_campaign(load_corpus(self.cfg.corpus), self.cfg.campaign)
        except CorpusError:
            entries = []  # collection reports the corpus error; the manifest still says what was asked
        config = campaign_config(self.cfg, entries)
        return {**config, "corpus": self.corpus_name} if self.corpus_name is not None else config

    def item_campaign(self) -> Campaign:
        """The campaign this process's items write into: new (the first item without xdist), or the shared one
        (made by whichever worker's item comes first)."""
        if self.campaign_dir is None:
            return self.start()
        if not (self.campaign_dir / MANIFEST).is_file():
            return Campaign.create_shared(self.campaign_dir, self._campaign_config(), self._manifest_extra())
        return Campaign.open(self.campaign_dir)

    def resumed(self) -> dict[str, ItemRecord]:
        """With --agent-eval-resume: the records of the items the campaign completed, by id (else empty)."""
        if self._resumed is None:
            self._resumed = {}
            if self.cfg.resume is not None:
                campaign = self.item_campaign()
                done = campaign.complete_ids()
                self._resumed = {r.id: r for r in campaign.items() if r.id in done}
        return self._resumed

    def close(self) -> None:
        """Release the resume lock."""
        self._held.close()

    # -- records ---------------------------------------------------------------------------------------------
    def finish_item(
        self,
        record: ItemRecord,
        *,
        outcome: str,
        error: str | None,
        ran_s: float,
    ) -> dict[str, Any]:
        """An item's last report: complete its record, append it to the campaign (unless it was resumed, and so
        is there already), and return it as the plain data xdist carries to the controller."""
        record.outcome = outcome
        record.error = error
        driver = record.driver or {}
        # A resumed item keeps the times of the session that ran it.
        if record.wall_s is None:
            record.wall_s = round(ran_s, 3)
        if record.agent_s is None:
            record.agent_s = round(sum(driver.get("wall_s") or []), 3)
        # Not before the campaign exists: an item whose setup failed ahead of it (an xdist worker's first item,
        # an out folder that cannot be made) has nowhere to be recorded, and says why in its own report.
        if self.campaign_dir is not None and not record.resumed and (self.campaign_dir / MANIFEST).is_file():
            campaign = Campaign.open(self.campaign_dir)
            record.segments = [str(p.relative_to(campaign.path)) for p in campaign.segments_on_disk(record.id)]
            campaign.record(record)
        return json.loads(json.dumps(record.to_dict(stored=False), default=str))

    def collect(self, nodeid: str, data: Any) -> None:
        """Controller: a record from a report (local or a worker's)."""
        if isinstance(data, dict):
            self.records[nodeid] = ItemRecord.from_dict(data)

    def ordered(self) -> list[ItemRecord]:
        """The records in the order every report reads them (corpus order, then agent, arm and run): the
        reports' own, whatever order the items finished in."""
        from pytest_agent_eval.report.aggregate import reading_order

        records = list(self.records.values())
        return sorted(records, key=reading_order(self.entry_order(), self.arm_order(), records))

    def entry_order(self) -> list[str]:
        return [e.name for e in self._corpus()]

    def arm_order(self) -> list[str]:
        return [arm.label for arm in self.cfg.arms]

    # -- the end ---------------------------------------------------------------------------------------------
    def finish(self) -> bool:
        """Write the campaign's versions, summary and report, apply the compare gate; True if the gate failed (a
        figure regressed, a verdict was undecided, or it compared too little). A session that selected no agent
        item is no evaluation (an ini ``agent_eval_compare`` applies to unit-test sessions too): it is warned
        about, not failed; any agent item that ran, skipped or errored has a record, and takes part."""
        from pytest_agent_eval.harness.writes import WriteFailed

        cfg = self.cfg
        if not (self.campaign_dir is not None and (self.campaign_dir / MANIFEST).is_file()):
            self.records.clear()  # no item got as far as the campaign: each one's error says why
        if not self.records:
            if self.compare_path is not None:
                self.problems.append(f"--agent-eval-compare {cfg.compare}: no agent item ran, nothing was compared")
            return False
        try:
            return self._write_outputs()
        except WriteFailed as exc:
            # A full disk: one line naming the folder and the space left; what was written stays whole (the
            # manifest, summary, report and latest are each replaced whole or left as they were), and a resume
            # writes them once there is space.
            self.problems.append(f"the campaign's outputs were not all written: {exc}")
            return True

    def _write_outputs(self) -> bool:
        """:meth:`finish`'s writing: the manifest's versions, the summary, the report, ``latest``, the baseline."""
        from pytest_agent_eval.campaign import baseline
        from pytest_agent_eval.harness import runtimes
        from pytest_agent_eval.report import compare as compare_gate
        from pytest_agent_eval.report.html import write_html
        from pytest_agent_eval.report.terminal import model_fields, summary

        cfg = self.cfg
        assert self.campaign_dir is not None
        self.campaign = Campaign.open(self.campaign_dir)
        records = self.ordered()
        finish_manifest(self.campaign, records, cfg.tool.name)
        if self.selection["selected"] is not None:  # known once collection ran here, or a worker said
            update_manifest(self.campaign, self.selection_record())
        if not self.campaign.manifest.get("corpus_hash"):
            update_manifest(self.campaign, {"corpus_hash": corpus_hash(cfg.corpus)})
        meta = {
            "campaign": self.campaign.id,
            "corpus": str(cfg.corpus),
            "arms": [arm.label for arm in cfg.arms],
            "runs": cfg.runs,
            **model_fields(records, cfg.model),
            "effort": cfg.effort,
            "backend": cfg.backend,
            "tool": cfg.tool.name,
            "tool_version": cfg.default_tool_spec,
            "runtimes": runtimes.found(),  # which bwrap and node: the machine's ("system") or "bundled"
        }
        if self.replay_path is not None:
            meta["replay_of"] = str(self.replay_path)
        if self.compare_path is not None:
            before = load_records(self.compare_path, self.problems)
            self.gate = compare_gate.gate(before, records, cfg.compare_fail, cfg.compare_min_pairs)
            meta["gate"] = {"baseline": str(self.compare_path), **compare_gate.gate_summary(self.gate)}
        path = self.campaign.path / SUMMARY
        found = summary(records, meta, cfg.include_contaminated, self.entry_order(), self.arm_order())
        text = json.dumps(found, indent=2, default=str) + "\n"
        write_atomic(path, text)
        compared = str(self.compare_path) if self.compare_path else None
        html = write_html(
            self.campaign, self.gate, compared, cfg.include_contaminated, self.entry_order(), self.arm_order()
        )
        self.written = [path, html]
        if cfg.json_path is not None:  # a known path for CI, whatever the campaign folder is called
            try:
                cfg.json_path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(cfg.json_path, text)
            except OSError as exc:  # checked as the session started, but a folder may refuse only when written
                self.problems.append(f"--agent-eval-json {cfg.json_path}: not written ({exc.strerror or exc})")
            else:
                self.written.append(cfg.json_path)
        point_latest(self.campaign.path)
        if cfg.save_baseline is not None:
            assert cfg.out is not None
            self.saved_baseline = baseline.save(self.campaign, cfg.save_baseline, cfg.out)
        return self.gate is not None and self.gate.failed

    def terminal_lines(self, verbose: bool = False) -> list[Line]:
        """The agent-eval section of the terminal summary (its caveats are :meth:`warnings`, issued apart)."""
        if not self.records:
            return []
        cfg = self.cfg
        records = self.ordered()
        lines = [Line(self._rendered(verbose)[0].rstrip()), *self._verdict_lines()]
        if self.replay_path is not None:
            from pytest_agent_eval.report.replay import replay_note

            lines += [Line(""), Line(replay_note(self.replay_path), {"yellow": True})]
        if self.gate is not None:
            lines += self._gate_lines(self.gate)
        campaign = self.campaign
        if campaign is not None:
            resumed = sum(1 for r in records if r.resumed)
            note = f" ({resumed} re-scored from the resumed campaign, not re-run)" if resumed else ""
            lines.append(Line(f"agent-eval: campaign {campaign.id}: {len(records)} run(s){note} in {campaign.path}"))
            selected = self.selection["selected"]
            if cfg.shard is not None and self.shard_ids is not None and selected is not None:
                lines.append(
                    Line(
                        f"agent-eval: shard {cfg.shard}: {len(self.shard_ids)} of {len(selected)} selected item(s); "
                        "join the shards' campaigns with: agent-eval merge OUT CAMPAIGN…"
                    )
                )
            lines += [Line(f"agent-eval: wrote {path}") for path in self.written]
        if self.saved_baseline is not None:
            from pytest_agent_eval.campaign import baseline

            note = baseline.size_note(self.saved_baseline)
            lines.append(Line(f"agent-eval: saved baseline {cfg.save_baseline} ({note}) in {self.saved_baseline}"))
        return lines

    def warnings(self) -> list[str]:
        """What a reader of this session's figures must know that does not stop it, once :meth:`finish` ran: a
        stand-in model behind the agent, medians over fewer than two runs, records or a baseline that could not be
        read, a resumed campaign's drifted settings. The plugin issues each as an AgentEvalWarning; the
        stand-in model is also named in every report (the tables' header, report.html, summary.json)."""
        problems = [*self.problems, *(self.campaign.problems if self.campaign is not None else [])]
        if not self.records:
            return problems
        from pytest_agent_eval.report.terminal import model_notes

        notes = [*model_notes(self.records.values()), *self._rendered(False)[1]]
        drift = self.config_drift()
        return [*notes, *problems, *([drift] if drift else [])]

    def _rendered(self, verbose: bool) -> tuple[str, list[str]]:
        """The tables as the terminal shows them, and the caveats on their figures (rendered once)."""
        if verbose not in self._tables:
            from pytest_agent_eval.report.terminal import terminal_report

            notes: list[str] = []
            text = terminal_report(
                self.ordered(),
                verbose=verbose,
                campaign=self.cfg.campaign is not None,
                include_contaminated=self.cfg.include_contaminated,
                entry_order=self.entry_order(),
                notes=notes,
                arm_order=self.arm_order(),
            )
            self._tables[verbose] = (text, notes)
        return self._tables[verbose]

    def _verdict_lines(self) -> list[Line]:
        """Which arm did better, a line per entry and one overall (:mod:`pytest_agent_eval.report.verdict`); with
        several agents, then a line per entry with the agents side by side (:mod:`pytest_agent_eval.report.agents`)."""
        from pytest_agent_eval.report.agents import side_by_side
        from pytest_agent_eval.report.aggregate import aggregate
        from pytest_agent_eval.report.terminal import tool_name
        from pytest_agent_eval.report.verdict import shown, verdicts

        found = aggregate(self.ordered(), entry_order=self.entry_order(), arm_order=self.arm_order())
        tool = tool_name(found.records)
        found_verdicts = shown(verdicts(found, self.cfg.include_contaminated))
        lines = [Line(f"agent-eval: {v.line(tool)}", {"bold": True}) for v in found_verdicts]
        lines += [Line(f"agent-eval: {v.power_line(tool)}") for v in found_verdicts if v.pairs]
        lines += [Line(f"agent-eval: agents on {on.line(tool)}", {"bold": True}) for on in side_by_side(found_verdicts)]
        return [Line(""), *lines] if lines else []

    def _gate_lines(self, result: GateResult) -> list[Line]:
        from pytest_agent_eval.report import compare as compare_gate
        from pytest_agent_eval.report.replay import caveat as replay_caveat

        flag = "--agent-eval-compare-fail"
        lines = [Line(""), Line(f"COMPARE — {self.compare_path} (before) → this session (after)")]
        caveat = replay_caveat if self.replay_path is not None else None
        lines.append(Line(compare_gate.render_comparison(result.rows, flag, caveat)))
        for problem in result.problems:
            lines.append(Line(f"agent-eval: GATE FAILED: {problem}", {"red": True, "bold": True}))
        for entry in dict.fromkeys(row.entry for row in result.regressions):
            what = ", ".join(f"{r.arm} {r.metric} ({r.rule})" for r in result.regressions if r.entry == entry)
            lines.append(Line(f"agent-eval: REGRESSION in {entry}: {what}", {"red": True, "bold": True}))
        for row in result.undecided:
            lines.append(Line(f"agent-eval: UNDECIDED {row.entry}/{row.arm} {row.rule}: n too small", {"yellow": True}))
        if result.failed:
            lines.append(Line(f"agent-eval: the session fails: {compare_gate.gate_line(result)}", {"red": True}))
        else:
            lines.append(Line(f"agent-eval: {compare_gate.gate_line(result)}", {"green": True}))
        return lines

    def config_drift(self) -> str | None:
        """A resumed campaign run with other settings mixes two configurations: say so, do not forbid it."""
        cfg = self.cfg
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

    def _corpus(self) -> list[CorpusEntry]:
        try:
            return load_corpus(self.cfg.corpus)
        except CorpusError:
            return []


def new_record(case: EvalCase, item_id: str, nodeid: str, cfg: AgentEvalConfig) -> ItemRecord:
    """The record an item starts with; the fixtures fill in what the harness and the scoring learn."""
    return ItemRecord(
        id=item_id,
        entry=case.entry.name,
        arm=case.arm.name,
        arm_label=case.arm.label,
        run=case.run,
        nodeid=nodeid,
        language=case.entry.language,
        questions=list(case.questions),
        turns=len(case.questions),
        model=cfg.model,
        effort=cfg.effort,
        agent=(case.agent or cfg.agent).name,  # known before it runs: an item that errors still has its agent
        agent_from=origin_of(case.agent or cfg.agent),
        tool=cfg.tool.name,
        tool_from=origin_of(cfg.tool),
    )
