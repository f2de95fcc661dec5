"""The model's side of the evidence, printed under the contamination block when the server kept a record."""

from __future__ import annotations

from pytest_agent_eval.metrics.contamination import describe_leak
from pytest_agent_eval.metrics.evidence import Evidence


def render_evidence(e: Evidence, tool: str, indent: str = "") -> str:
    lines = [
        f"{indent}Model's record ({e.requests} message request(s) the model server received, outside the sandbox):",
        f"{indent}  {'refused at the boundary':<32}{len(e.refused):>4}",
    ]
    lines += [f"{indent}    {reason}" for reason in e.refused]
    lines.append(
        f"{indent}  {'transcript disagreements':<32}{len(e.problems):>4}"
        + ("   !! the transcript is not what the model saw: the item fails" if e.problems else "")
    )
    lines += [f"{indent}    {problem}" for problem in e.problems]
    if e.unchecked:  # a prompt size one side does not record: said, not guessed
        lines.append(f"{indent}  {'prompt sizes not checked':<32}{len(e.unchecked):>4}")
        lines += [f"{indent}    {note}" for note in e.unchecked]
    if e.leaks:  # only what the transcript did not already show
        lines.append(f"{indent}  {'received results with ' + tool + ' output':<32}{len(e.leaks):>4}")
        lines += [f"{indent}    {describe_leak(leak.to_dict())}" for leak in e.leaks]
    return "\n".join(lines)
