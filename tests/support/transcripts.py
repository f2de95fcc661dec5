"""Real records nobody here wrote: Claude Code transcripts in tests/data/transcripts, and other agents' records in
tests/data/agent-records (sources in each folder's README.md).

The largest files are stored gzipped to keep the checkout small. The tests read and glob them by their plain names
(``*.jsonl``), so the first call unpacks the whole tree once per process into a temporary folder (removed at exit)
that tests read and glob as-is (``agent-eval score`` reads a ``.gz`` as it is too: tests/test_cli.py).
"""

from __future__ import annotations

import atexit
import functools
import gzip
import shutil
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
RECORDS = DATA.parent / "agent-records"


@functools.cache
def transcripts() -> Path:
    """The transcripts folder, every ``.gz`` unpacked beside where it was; fails loudly if the data is missing."""
    return _unpacked(DATA)


@functools.cache
def agent_records() -> Path:
    """The agent-records folder (codex/, gemini/, opencode/, claude-code/), unpacked as :func:`transcripts` is."""
    return _unpacked(RECORDS)


def _unpacked(data: Path) -> Path:
    if not (data / "README.md").is_file():
        raise FileNotFoundError(f"test data missing: {data} (it is part of the repository and of the sdist)")
    unpacked = Path(tempfile.mkdtemp(prefix=f"agent-eval-{data.name}-"))
    atexit.register(shutil.rmtree, unpacked, ignore_errors=True)
    for source in data.rglob("*"):
        if not source.is_file() or source.name == "README.md":
            continue
        target = unpacked / source.relative_to(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.suffix == ".gz":
            with gzip.open(source, "rb") as packed, open(target.with_suffix(""), "wb") as plain:
                shutil.copyfileobj(packed, plain)
        else:
            shutil.copyfile(source, target)
    return unpacked
