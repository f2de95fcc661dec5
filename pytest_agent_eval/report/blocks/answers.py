"""The answers block: each turn's answer against the corpus's key, and what the agent saw of the key's files
(docs/metrics/answers.md)."""

from __future__ import annotations

from pytest_agent_eval.metrics.answers import AnswerGrade


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def render_answers(grade: AnswerGrade) -> str:
    if not grade.graded:
        return "Answers: not graded (the corpus entry has no answer key)"
    key = grade.key
    lines = [
        f"Answers against the key (holds for {key.version if key else '?'}):",
        f"  {'answer key recall':<24}{_share(grade.recall):>6}",
        f"  {'key files seen':<24}{_share(grade.seen_share):>6}",
        f"  {'key files read':<24}{_share(grade.read_recall):>6}",
        f"  {'reads on key files':<24}{_share(grade.read_precision):>6}   ({len(grade.files_read)} file(s) read)",
        f"  {'rank of first key file':<24}{'n/a' if grade.rank is None else grade.rank:>6}",
    ]
    for turn in grade.turns:
        named = [f for f, hit in {**turn.files, **turn.symbols, **turn.facts}.items() if hit]
        missed = [f for f, hit in {**turn.files, **turn.symbols, **turn.facts}.items() if not hit]
        lines.append(
            f"  turn {turn.turn}: {turn.hits}/{turn.items} named" + (f"; missed {', '.join(missed)}" if missed else "")
        )
        if named:
            lines.append(f"    named {', '.join(named)}")
        unseen = [f for f, how in turn.seen.items() if not how]
        if unseen:
            lines.append(f"    key files never seen: {', '.join(unseen)}")
    return "\n".join(lines)
