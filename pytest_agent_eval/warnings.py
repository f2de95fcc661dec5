"""The plugin's own warning class, so ``-W`` and ``filterwarnings`` can name it:

pytest evals/ -W error::pytest_agent_eval.warnings.AgentEvalWarning     # a warning fails the session
filterwarnings = ignore::pytest_agent_eval.warnings.AgentEvalWarning     # or silences it
"""

from __future__ import annotations


class AgentEvalWarning(UserWarning):
    """Something the evaluation's figures should be read with: too few runs, a stand-in model, a fallback, records
    that could not be read, a resumed campaign run with other settings."""
