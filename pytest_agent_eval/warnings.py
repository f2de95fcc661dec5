"""The plugin's warning class: something about a campaign a reader must know, that does not stop it.

Raised with :func:`warnings.warn`, so pytest lists it in its warnings summary (xdist forwards workers'
warnings), ``-W error::pytest_agent_eval.warnings.AgentEvalWarning`` turns it into an error, and the harness
also records the text on the item it concerns.
"""

from __future__ import annotations


class AgentEvalWarning(UserWarning):
    """A campaign ran, but not quite as asked (e.g. the corpus came from its offline source, not a clone)."""
