"""The contamination block printed under every arm: read it before any other number (seed 004)."""

from __future__ import annotations

from pytest_agent_eval.metrics.contamination import Contamination


def render_contamination(c: Contamination, indent: str = "") -> str:
    lines = [
        f"{indent}Contamination ({c.cli} CLI through Bash):",
        f"{indent}  CLI calls that RETURNED output {c.cli_returned_output:>4}"
        + ("   !! this arm reached the CLI — its numbers are void" if c.contaminated else ""),
        f"{indent}  CLI attempts blocked           {c.cli_blocked:>4}",
        f"{indent}  exposed tools: {', '.join(c.exposed_tools) if c.exposed_tools else 'none'}",
    ]
    if c.cold_start_race:
        lines.append(
            f"{indent}  cold-start race: a tool call got 'No such tool available' "
            "(the MCP server was not ready; the agent may have fallen back to Read/grep)"
        )
    return "\n".join(lines)
