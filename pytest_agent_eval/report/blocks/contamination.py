"""The contamination block printed under every arm: read it before any other number (docs/metrics/contamination.md)."""

from __future__ import annotations

from pytest_agent_eval.metrics.contamination import Contamination, describe_leak


def render_contamination(c: Contamination, indent: str = "") -> str:
    lines = [
        f"{indent}Contamination ({c.cli} output the agent saw; {c.cli} CLI calls):",
        f"{indent}  {'results carrying ' + c.cli + ' output':<32}{len(c.leaks):>4}"
        + ("   !! a without-arm with these is void" if c.contaminated else ""),
    ]
    lines += [f"{indent}    {describe_leak(leak.to_dict())}" for leak in c.leaks]
    lines += [
        f"{indent}  {'CLI calls (command matcher)':<32}{c.cli_calls:>4}",
        f"{indent}  {'of those, ' + c.denial:<32}{c.cli_blocked:>4}",
    ]
    if c.printed:  # rare enough to take a line only when it happens
        lines.append(
            f"{indent}  {'ran unblocked and printed':<32}{len(c.printed):>4}   !! a without-arm with these is void"
        )
    lines.append(f"{indent}  exposed tools: {', '.join(c.exposed_tools) if c.exposed_tools else 'none'}")
    if c.cold_start_race:
        lines.append(
            f"{indent}  cold-start race: a tool call got 'No such tool available' "
            "(the MCP server was not ready; the agent may have fallen back to Read/grep)"
        )
    return "\n".join(lines)
