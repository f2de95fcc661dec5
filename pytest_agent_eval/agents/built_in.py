"""The built-in agents, by name: each one's folder under ``agents/`` and the object describing it (``MODULE:ATTR``).

The one table of them: the registry (:mod:`pytest_agent_eval.agents.registry`) resolves these names and offers
installed distributions' agents beside them; nothing is imported before it is asked for (a record, the settings and
``agent-eval score`` read this table). A fifth agent needs no line here (docs/extending.md).
"""

BUILT_IN_AGENTS = {
    "claude-code": "pytest_agent_eval.agents.claude_code:CLAUDE_CODE",
    "codex": "pytest_agent_eval.agents.codex:CODEX",
    "gemini": "pytest_agent_eval.agents.gemini:GEMINI",
    "opencode": "pytest_agent_eval.agents.opencode:OPENCODE",
}
# What a campaign recorded before records named their agent ran with.
UNNAMED_AGENT = "claude-code"
