"""``agent-eval``: score transcripts that already exist, without pytest.

agent-eval score run-with-1.jsonl                 # later segments (.t2.jsonl, …) are found
agent-eval score ~/.codex/sessions/2026/02/23/rollout-….jsonl   # any agent's record: whose it is is read from it
agent-eval score run.jsonl run.t2.jsonl --json     # segments given in order
agent-eval score --session ~/.claude/projects/-tmp-express/
agent-eval score codex-events.jsonl --rollout ~/.codex/sessions/2026/12/03/rollout-….jsonl   # a Codex CLI run
agent-eval score gemini-events.jsonl --chat ~/.gemini/tmp/express/chats/session-….jsonl   # a Gemini CLI run
agent-eval rescore agent-eval-out/20260801-101500-3fa9c2/   # a campaign or a folder of run-*.jsonl
agent-eval compare BASELINE CURRENT --compare-fail "allocation:-5pt,residual_tokens:+20%"
agent-eval merge merged/ shard-1/ shard-2/ shard-3/     # the campaigns of --agent-eval-shard 1/3 … 3/3 as one
agent-eval check-agent mypkg.agent:MY_AGENT   # a short conformance run of a new agent: PASS/FAIL, each with why
agent-eval compare recorded latest --compare-fail allocation:-5pt@95   # a saved baseline vs the newest campaign
agent-eval plan latest --change 10%     # how many paired runs tell a 10% change from noise, from an earlier campaign

compare exits 0 when the gate passes, 1 when it fails (a regression, an undecided noise-aware rule, or fewer
(entry, arm) pairs compared than asked — nothing compared always fails), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.built_in import UNNAMED_AGENT
from pytest_agent_eval.agents.recognition import read_given, recognise
from pytest_agent_eval.agents.registry import UNNAMED_TOOL, resolve_agent, resolve_tool
from pytest_agent_eval.metrics.occupancy import WINDOW_TOKENS
from pytest_agent_eval.metrics.scorecard import score
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.transcript import (
    Session,
    TranscriptError,
    missing_segments,
    segment_files,
)

# `score` imports only what scoring needs: it should start about as fast as decoding the file does
# (bench/load_bench.py); the campaign, config, report and compare modules load in the commands that use them.


def json_text(data: Any) -> str:
    """Strict JSON: a figure with no defined value (NaN, ±Infinity) is null, never the non-JSON ``NaN``."""
    return json.dumps(_finite(data), indent=2, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _add_scoring_options(cmd: argparse.ArgumentParser) -> None:
    """What every scoring command takes: the window and the retrieval tool under test."""
    cmd.add_argument(
        "--window",
        type=_positive_int,
        default=WINDOW_TOKENS,
        metavar="N",
        help=f"context window in tokens (default {WINDOW_TOKENS:,})",
    )
    cmd.add_argument(
        "--tool",
        type=_tool_reference,
        default=None,
        help="retrieval tool: a built-in tool's name (codegraph), an installed entry point's "
        "(pytest_agent_eval.tools) or MODULE:ATTR naming a RetrievalTool (default: the one a campaign's records "
        f"name; for a transcript without a record, {UNNAMED_TOOL})",
    )
    cmd.add_argument("--explore-tool", default=None, help="its explore tool (default: the tool's own)")
    cmd.add_argument("--cli-name", default=None, help="its CLI executable (default: the tool's own)")


def _tool_reference(text: str) -> RetrievalTool:
    """The RetrievalTool a name or MODULE:ATTR names, from the registry (agents/registry.py)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give the tool's MCP server name, or MODULE:ATTR")
    try:
        return resolve_tool(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _agent_reference(text: str) -> Any:
    """The CodingAgent a name or MODULE:ATTR names, from the registry (agents/registry.py)."""
    try:
        return resolve_agent(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tool_of(args: argparse.Namespace) -> RetrievalTool | None:
    """The tool ``--tool`` names, with ``--explore-tool`` and ``--cli-name`` over its own; None: the recorded one
    (without either override)."""
    tool = args.tool
    if tool is None and not (args.explore_tool or args.cli_name):
        return None
    tool = tool or resolve_tool(UNNAMED_TOOL)
    return replace(tool, explore=args.explore_tool or tool.explore, cli=args.cli_name or tool.cli)


def plain(text: str) -> str:
    """reST as a terminal shows it: ````agent-eval```` and ``:func:`x``` as ``agent-eval`` and ``x``."""
    return re.sub(r"(?::\w+:)?`+([^`]+)`+", r"\1", text)


def build_parser() -> argparse.ArgumentParser:
    head, *rest = plain(__doc__ or "").split("\n\n")
    parser = argparse.ArgumentParser(
        prog="agent-eval",
        description=head,
        epilog="examples:\n" + "\n\n".join(rest).strip(),  # the module's own examples, as printed there
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser("score", help="score one session's transcript")
    cmd.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="one session's record: any agent's, recognised from its content (a rollout, an events stream, a chat "
        "record, a session file, an export…); segment files in order (a single file brings its .tN segments)",
    )
    cmd.add_argument(
        "--session", metavar="FILE_OR_DIR", help="an interactive session file, or its project folder (newest session)"
    )
    cmd.add_argument(
        "--rollout",
        metavar="FILE",
        help="with Codex CLI --json events FILEs (one per turn): the session's rollout (default: "
        "rollout-*<thread id>.jsonl beside the first FILE)",
    )
    cmd.add_argument(
        "--chat",
        metavar="FILE",
        help="with Gemini CLI stream-json events FILEs (one per turn): the session's chat record (default: "
        "session-*<session id prefix>.jsonl beside the first FILE)",
    )
    cmd.add_argument(
        "--agent",
        type=_agent_reference,
        default=None,
        help="the agent whose transcript FILEs are: a built-in agent's name, an installed entry point's "
        "(pytest_agent_eval.agents) or MODULE:ATTR naming a CodingAgent (default: told from the first FILE)",
    )
    cmd.add_argument("--brief", action="store_true", help="one line per metric")
    cmd.add_argument("--envelope", action="store_true", help="also print how each explore response was divided")
    cmd.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="GLOB",
        help="hand-specified answer files: score allocation against these instead of citations",
    )
    cmd.add_argument("--json", action="store_true", help="print one JSON object instead of the text blocks")
    _add_scoring_options(cmd)
    cmd.set_defaults(usage_error=cmd.error)  # a mistake across its options is told with score's own usage

    cmd = commands.add_parser("rescore", help="score a campaign's or an old folder's transcripts with today's metrics")
    cmd.add_argument(
        "folder",
        metavar="CAMPAIGN_OR_FOLDER",
        help="a campaign folder, a saved baseline, or a folder of run-<label>.jsonl (+ .tN.jsonl) segment files",
    )
    cmd.add_argument("--json", action="store_true", help="print the item records as JSON instead of the table")
    cmd.add_argument("--out", metavar="FILE", help='also write the records as JSON ({"items": [...]}) to FILE')
    _add_scoring_options(cmd)

    cmd = commands.add_parser("compare", help="compare two campaigns (or JSON files of item records)")
    where = "a saved baseline's name, 'latest', a campaign folder, items.jsonl or summary.json"
    cmd.add_argument("baseline", metavar="BASELINE", help=where)
    cmd.add_argument("current", metavar="CURRENT", help=where)
    cmd.add_argument(
        "--compare-fail",
        metavar="RULES",
        default=None,
        help="fail (exit 1) when a figure regresses, e.g. allocation:-5pt,sufficient_share:-10pt,residual_tokens:+20%%;"
        " @95 after a rule: only when the change's 95%% interval (the verdict's) lies beyond the threshold",
    )
    cmd.add_argument(
        "--min-pairs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="fail unless N (entry, arm) pairs were compared (default with rules: every pair the baseline scored)",
    )
    # No default here: the config module it lives in is not worth importing for a score command's start-up.
    cmd.add_argument("--out", metavar="DIR", help="where baselines and 'latest' are (default: --agent-eval-out's)")

    cmd = commands.add_parser(
        "check-agent", help="a short conformance run of a coding agent against the stand-in model: PASS/FAIL, why"
    )
    cmd.add_argument(
        "agent", type=_agent_reference, metavar="AGENT", help="a built-in name, an entry point or MODULE:ATTR"
    )
    cmd.add_argument(
        "--tool", type=_tool_reference, default=None, help=f"the retrieval tool to deny it (default {UNNAMED_TOOL})"
    )

    cmd = commands.add_parser("plan", help="how many paired runs a campaign needs, from an earlier one's spread")
    cmd.add_argument("earlier", metavar="CAMPAIGN", help=where)
    cmd.add_argument(
        "--change", type=_share, default=0.1, metavar="N%", help="the change to tell from noise (default 10%%)"
    )
    cmd.add_argument("--power", type=_share, default=0.8, metavar="N%", help="the chance to see it (default 80%%)")
    cmd.add_argument("--json", action="store_true", help="print the plan as JSON")
    cmd.add_argument("--out", metavar="DIR", help="where baselines and 'latest' are (default: --agent-eval-out's)")

    cmd = commands.add_parser("merge", help="merge the campaigns of shards 1..N (--agent-eval-shard I/N) into one")
    cmd.add_argument("out", metavar="OUT", help="the merged campaign's folder (new, or an empty one)")
    cmd.add_argument("campaigns", nargs="+", metavar="CAMPAIGN", help="the shards' campaign folders, any order")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "rescore":
        return _rescore(args)
    if args.command == "compare":
        return _compare(args)
    if args.command == "merge":
        return _merge(args)
    if args.command == "check-agent":
        return _check_agent(args)
    if args.command == "plan":
        return _plan(args)
    if bool(args.files) == bool(args.session):
        args.usage_error("score takes FILE… or --session FILE_OR_DIR (one of the two)")
    if args.agent is not None and not args.files:
        args.usage_error("--agent goes with FILEs (an agent's transcript segments)")
    try:  # a campaign's transcript: the agent and tool its record says made it, unless named
        named = args.files and not (args.rollout or args.chat)  # a record kept beside it, named: read as given
        recorded_agent, recorded_tool = _made_by(args.files[0]) if named else (None, None)
    except ValueError as exc:
        print(f"agent-eval: error: {exc}", file=sys.stderr)
        return 2
    args.agent = args.agent or recorded_agent
    tool = tool_of(args) or recorded_tool or resolve_tool(UNNAMED_TOOL)
    try:
        if args.session:
            # an interactive session file is Claude Code's, the agent of runs that name none
            sessions = [resolve_agent(UNNAMED_AGENT).read_interactive(Path(args.session))]
            _warn(_reading_problems(sessions[0]))
        else:  # a resumed session's later turns are its .tN.jsonl, whichever agent's they are
            files = segment_files(args.files[0]) if len(args.files) == 1 else args.files
            _check_companion(files[0], args)
            # A named agent reads its own record; else each agent's own "is this mine?" tells whose it is.
            sessions = read_given(files, args.rollout or args.chat, args.agent)[1]
            for session in sessions:
                _warn(_reading_problems(session, files))
    except TranscriptError as exc:
        print(f"agent-eval: error: {exc}", file=sys.stderr)
        return 2
    cards = []
    for number, session in enumerate(sessions, start=1):
        card = score(session, tool, args.window, args.answer)
        _warn([f"--answer {g!r} matches no file the tool returned" for g in card.allocation.unmatched(args.answer)])
        data = card.to_dict()
        if session.missing:  # what the record does not hold: said beside the figures, never read as zero
            data["missing"] = dict(session.missing)
        cards.append(data)
        if args.json:
            continue
        from pytest_agent_eval.report.blocks import render_scorecard

        if len(sessions) > 1:
            sys.stdout.write(f"== session {number} of {len(sessions)} in {args.files[0]}: {_session_name(session)}\n")
        sys.stdout.write(render_scorecard(card, brief=args.brief, envelope=args.envelope))
        for figure, why in session.missing.items():
            sys.stdout.write(f"not in this record ({figure}): {why}\n")
    if args.json:
        sys.stdout.write(json_text(cards[0] if len(cards) == 1 else cards) + "\n")
    return 0


def _check_companion(first: str | Path, args: argparse.Namespace) -> None:
    """``--rollout`` goes with a Codex record, ``--chat`` with a Gemini CLI one: a usage error naming what the file
    is, otherwise."""
    companions = (("--rollout", args.rollout, "codex", "Codex CLI --json events FILEs"),
                  ("--chat", args.chat, "gemini", "Gemini CLI stream-json events FILEs"))  # fmt: skip
    for option, value, agent, what in companions:
        if value and (found := recognise(first)).agent.name != agent:
            args.usage_error(f"{option} goes with {what} ({first} is {found.describe()})")


def _session_name(session: Session) -> str:
    """A session's own id, as its records name it (the first of those it has)."""
    for name in ("session_id", "thread_id"):
        value = getattr(session, name, "")
        if value:
            return str(value)
    return ", ".join(session.session_ids) or "?"


def _made_by(first: str | Path) -> tuple[Any, RetrievalTool | None]:
    """The agent and tool a campaign's record says made the transcript ``first`` (a segment of one of its items),
    found where they came from; (None, None) for a file outside a campaign, or one no record names."""
    from pytest_agent_eval.campaign.store import MANIFEST

    path = Path(first).resolve()
    campaign_dir = next((p for p in list(path.parents)[:4] if (p / MANIFEST).is_file()), None)
    if campaign_dir is None:
        return None, None
    from pytest_agent_eval.campaign.made_by import agent_of, tool_of
    from pytest_agent_eval.campaign.store import Campaign

    campaign = Campaign.open(campaign_dir)
    for record in campaign.items():
        if any((campaign_dir / segment).resolve() == path for segment in record.segments):
            return agent_of(record, campaign.manifest), tool_of(record, campaign.manifest)
    return None, None


class _Version(argparse.Action):
    """``--version``, looked up only when asked: reading the package metadata is slow to import."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from pytest_agent_eval import DISTRIBUTION

        try:
            text = version(DISTRIBUTION)
        except PackageNotFoundError:  # a checkout on sys.path, not installed
            text = "unknown"
        print(f"{parser.prog} {text}")
        parser.exit()


def _rescore(args: argparse.Namespace) -> int:
    import tempfile

    from pytest_agent_eval.campaign import baseline
    from pytest_agent_eval.campaign.rescore import rescore
    from pytest_agent_eval.campaign.store import LATEST, StoreError, latest_pointer, write_atomic
    from pytest_agent_eval.report.terminal import render_rescore

    folder = Path(args.folder)
    if not folder.exists():
        print(f"agent-eval: error: {folder}: no such file or folder", file=sys.stderr)
        return 2
    if folder.name == LATEST and folder.is_file():  # <out>/latest names the newest campaign: rescore that one
        campaign = latest_pointer(folder.parent)
        if campaign is None:
            print(f"agent-eval: error: {folder}: names no campaign in {folder.parent}", file=sys.stderr)
            return 2
        folder = campaign
    out = Path(args.out) if args.out else None
    refused = _refused_out(out, folder) if out is not None else None
    if refused:  # before any scoring: a mistyped --out must not cost the work, nor overwrite the input
        print(f"agent-eval: error: --out {out}: {refused}", file=sys.stderr)
        return 2
    tool = tool_of(args)
    problems: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="agent-eval-baseline-") as unpacked:
            # A saved baseline keeps its transcripts in one archive: rescore reads them unpacked.
            records = rescore(baseline.unpack(folder, unpacked), tool, args.window, problems)
    except StoreError as exc:
        print(f"agent-eval: error: {exc}", file=sys.stderr)
        return 2
    _warn(problems)
    if not records:
        print(f"agent-eval: error: {folder}: no run-*.jsonl transcripts and no campaign items", file=sys.stderr)
        return 2
    data = [record.to_dict() for record in records]
    if args.json:
        sys.stdout.write(json_text(data) + "\n")
    else:
        sys.stdout.write(render_rescore(records))
    if out is not None:  # after the output: a write that fails still leaves the records printed
        try:
            write_atomic(out, json_text({"items": data}) + "\n")
        except OSError as exc:
            print(f"agent-eval: error: --out {out}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    if all(record.outcome == "error" for record in records):
        print(f"agent-eval: error: {folder}: none of its {len(records)} session(s) could be scored", file=sys.stderr)
        return 2
    return 0


def _refused_out(out: Path, folder: Path) -> str | None:
    """Why ``rescore --out`` may not write there: a folder, a missing folder, or (a file of) the input itself."""
    from pytest_agent_eval.campaign.store import MANIFEST

    if out.is_dir():
        return "is a folder (give a file name)"
    if not out.parent.is_dir():
        return f"no folder {out.parent}"
    target, source = out.resolve(), folder.resolve()
    if target == source:
        return "is the input being rescored"
    # Every file of a campaign (or saved baseline) is its own; in a plain folder the transcripts are the .jsonl.
    if source.is_dir() and target.is_relative_to(source) and ((source / MANIFEST).is_file() or out.suffix == ".jsonl"):
        return f"lies inside {folder} and would overwrite what is being rescored: write the records elsewhere"
    return None


def _compare(args: argparse.Namespace) -> int:
    from pytest_agent_eval.campaign import baseline
    from pytest_agent_eval.campaign.store import StoreError, load_records
    from pytest_agent_eval.report.compare import gate, render_gate
    from pytest_agent_eval.report.terminal import model_notes
    from pytest_agent_eval.settings.config import DEFAULT_OUT, OptionError
    from pytest_agent_eval.settings.parsers import parse_rules

    try:
        rules = parse_rules(args.compare_fail) if args.compare_fail is not None else []
    except OptionError as exc:
        print(f"agent-eval: error: --compare-fail: {exc}", file=sys.stderr)
        return 2
    sides = []
    problems: list[str] = []
    for spec in (args.baseline, args.current):
        try:
            sides.append(load_records(baseline.find(spec, args.out or DEFAULT_OUT), problems))
        except StoreError as exc:
            print(f"agent-eval: error: {exc}", file=sys.stderr)
            return 2
    _warn(problems)
    result = gate(sides[0], sides[1], rules, args.min_pairs)
    for side, records in zip(("baseline", "current"), sides, strict=True):  # a stand-in model says so here too
        for note in model_notes(records):
            print(f"{side}: {note}")
    print(render_gate(result))
    return 1 if result.failed else 0


def _check_agent(args: argparse.Namespace) -> int:
    """Exit 0 when every check passes, 1 when one fails (each printed, PASS or FAIL, with why)."""
    import tempfile

    from pytest_agent_eval.run.conformance import check_agent

    with tempfile.TemporaryDirectory(prefix="agent-eval-check-") as folder:
        checks = check_agent(args.agent, args.tool or resolve_tool(UNNAMED_TOOL), Path(folder))
    for check in checks:
        print(check.line())
    failed = [check.name for check in checks if not check.passed]
    print(f"agent-eval: {args.agent.name}: " + (f"FAILED ({', '.join(failed)})" if failed else "conforms"))
    return 1 if failed else 0


def _share(text: str) -> float:
    """``10%`` or ``0.1``: a share strictly between 0 and 1."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a share: {text!r} (give 10% or 0.1)") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must lie between 0 and 100%: {text!r}")
    return value


def _plan(args: argparse.Namespace) -> int:
    from pytest_agent_eval.campaign import baseline
    from pytest_agent_eval.campaign.store import StoreError, load_records
    from pytest_agent_eval.report.plan import plan
    from pytest_agent_eval.settings.config import DEFAULT_OUT

    problems: list[str] = []
    try:
        found = baseline.find(args.earlier, args.out or DEFAULT_OUT)
        records = load_records(found, problems)
    except StoreError as exc:
        print(f"agent-eval: error: {exc}", file=sys.stderr)
        return 2
    _warn(problems)
    text, data = plan(records, args.change, args.power)
    sys.stdout.write(json_text({"campaign": str(found), **data}) + "\n" if args.json else f"from {found}\n{text}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from pytest_agent_eval.run.merge import MergeError, merge

    try:
        session = merge(args.out, args.campaigns)
    except MergeError as exc:
        print(f"agent-eval: error: merge: {exc}", file=sys.stderr)
        return 2
    campaign = session.campaign
    assert campaign is not None
    print(f"agent-eval: merged {len(args.campaigns)} shard(s), {len(session.records)} run(s), into {campaign.path}")
    for path in session.written:
        print(f"agent-eval: wrote {path}")
    return 0


def _reading_problems(session: Session, files: Sequence[str | Path] = ()) -> list[str]:
    """What makes the figures doubtful, though they were read: lines stepped over; and of segment files, a turn
    missing between them, or init events naming more than one session (``--resume`` keeps the id)."""
    problems = [f"{where}: skipped" for where in session.parse.bad_at]
    if session.parse.bad_lines > len(session.parse.bad_at):
        problems.append(f"… {session.parse.bad_lines - len(session.parse.bad_at)} more bad line(s) skipped")
    missing = missing_segments(files) if files else []
    if missing:
        turns = ", ".join(f".t{n}" for n in missing)
        problems.append(f"{files[0]}: no segment for turn(s) {turns}: the figures leave those turns out")
    if len(session.session_ids) > 1:
        problems.append(
            f"the segments name {len(session.session_ids)} sessions ({', '.join(session.session_ids)}): "
            "scored as one, though they may not be one session's turns"
        )
    return problems


def _warn(problems: list[str]) -> None:
    """What did not stop the command (a record skipped, a doubtful segment), each named on stderr."""
    for problem in problems:
        print(f"agent-eval: warning: {problem}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
