"""The command that finishes an interrupted campaign: the session's own command line plus the resume flag."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

RESUME_FLAG = "--agent-eval-resume"


def resume_command(program: str, args: Sequence[str], campaign: Path) -> str:
    """``pytest <args> --agent-eval-resume <campaign>``, any resume flag of ``args`` replaced; ``program`` is
    how pytest was started (``sys.argv[0]``): a ``python -m pytest`` run is written that way."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == RESUME_FLAG:
            skip = True  # and its value
        elif not arg.startswith(f"{RESUME_FLAG}="):
            kept.append(arg)
    runner = "python -m pytest" if Path(program).name == "__main__.py" else "pytest"
    return " ".join([runner, *(shlex.quote(a) for a in kept), RESUME_FLAG, shlex.quote(str(campaign))])
