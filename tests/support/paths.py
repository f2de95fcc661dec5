"""Where the repository and the tests' data are, for helpers and tests that read files by path."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
