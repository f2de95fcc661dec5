"""The text blocks of one scored session (docs/report.md): a header, then one block per metric."""

from __future__ import annotations

from pytest_agent_eval.metrics.scorecard import Scorecard
from pytest_agent_eval.report.blocks.allocation import render_allocation
from pytest_agent_eval.report.blocks.answers import render_answers
from pytest_agent_eval.report.blocks.contamination import render_contamination
from pytest_agent_eval.report.blocks.evidence import render_evidence
from pytest_agent_eval.report.blocks.occupancy import render_occupancy
from pytest_agent_eval.report.blocks.sufficiency import render_sufficiency
from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.transcript import Session


def render_scorecard(card: Scorecard, brief: bool = False, envelope: bool = False) -> str:
    """Every metric's block (``brief``: one line a metric)."""
    blocks = [header(card)]
    if brief:
        blocks.append(brief_lines(card))
    else:
        blocks += [
            render_occupancy(card.occupancy, card.tool),
            render_sufficiency(card.sufficiency),
            render_allocation(card.allocation, envelope=envelope),
            render_contamination(card.contamination),
        ]
        if card.evidence is not None:
            blocks.append(render_evidence(card.evidence, card.tool.name))
        if card.answers is not None:
            blocks.append(render_answers(card.answers))
    return "\n\n".join(blocks) + "\n"


def header(card: Scorecard) -> str:
    session = card.session
    tools = ", ".join(f"{name} {n}" for name, n in session.tool_counts().items()) or "none"
    skipped = session.parse.bad_lines
    bad = f" ({skipped} bad line{'s' if skipped > 1 else ''} skipped)" if skipped else ""
    lines = [
        f"Session: {len(session.files) or 1} segment(s), {session.parse.events} events{bad}",
        verdict_lines(session, card.tool),
        f"tools: {tools}",
    ]
    # Each of these is worked out from every message: once.
    models, stand_in, infra_error = session.models, session.stand_in, session.infra_error
    if models:
        lines.append(f"model: {', '.join(models)}")
    if stand_in:
        lines.append(
            f"STAND-IN MODEL ({stand_in}): these figures measure the pipeline and the tool's responses, not a model"
        )
    if infra_error:
        lines.append(f"INFRASTRUCTURE: {infra_error}")
    for name in session.parse.unfinished:
        lines.append(f"NOTICE: {name} ends mid-turn (no result event): cut off; the figures cover what was written")
    return "\n".join(lines)


def brief_lines(card: Scorecard) -> str:
    occ, suf, alloc, con = card.occupancy, card.sufficiency, card.allocation, card.contamination
    eff = "n/a" if alloc.efficiency is None else f"{alloc.efficiency:.1%}"
    answered = sum(suf.counts.values())
    share = f"{suf.counts['sufficient'] / answered:.0%}" if answered else "n/a"
    return "\n".join(
        [
            f"occupancy: final ctx {occ.ctx_final:,} tok · {card.tool.name} residual "
            f"{occ.residual['tool']:,} tok · file-access residual {occ.file_access:,} tok",
            f"sufficiency: {answered} answered calls, {share} moved on",
            f"allocation: efficiency {eff}",
            f"contamination: {len(con.leaks)} results carried {card.tool.name} output; "
            f"{con.cli_calls} CLI calls, {con.cli_blocked} {con.denial}",
        ]
    )


def verdict_lines(session: Session, tool: RetrievalTool) -> str:
    """``VERDICT: <explore> used Nx | Read N | Grep/Bash N`` and ``TOKENS:`` summed once per API request.

    Every thread counts, subagents included: that is what the interactive arm is run to see. Usage is taken
    once per message id (the CLI repeats it on every content block of a message).
    """
    counts = session.tool_counts()
    explore = sum(n for name, n in counts.items() if tool.is_explore(name))
    reads = counts.get("Read", 0) + counts.get("NotebookRead", 0)
    searches = counts.get("Grep", 0) + counts.get("Glob", 0) + counts.get("Bash", 0)
    usages = {}
    for message in session.messages(None):
        if message.usage is not None:
            usages.setdefault(message.id, message.usage)
    total_in = out = read = write = 0
    for usage in usages.values():  # the four sums in one pass
        total_in += usage.input
        out += usage.output
        read += usage.cache_read
        write += usage.cache_creation
    return (
        f"VERDICT: {tool.explore} used {explore}x | Read {reads} | Grep/Bash {searches}\n"
        f"TOKENS: in {total_in:,} | out {out:,} | cache read {read:,} | cache write {write:,}"
        f" | {len(usages)} request{'' if len(usages) == 1 else 's'}"
    )
