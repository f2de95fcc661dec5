"""Where the harness keeps what it provisions across runs: the agents' and tools' installs, indexes, corpus clones."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where provisioned CLIs, indexes and the corpus clones live across runs."""
    if os.environ.get("AGENT_EVAL_CACHE"):
        return Path(os.environ["AGENT_EVAL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-agent-eval"
