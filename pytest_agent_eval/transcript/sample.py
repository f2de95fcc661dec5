"""What a record file begins with, for the agents to say whether it is theirs (``CodingAgent.recognise``).

A user gives ``agent-eval score`` whatever their agent wrote: a JSON-lines stream (perhaps a terminal capture, a shell
prompt and the CLI's own complaints around it), a session file, or one JSON object (an older Gemini CLI chat record, an
OpenCode export). The sample holds the JSON objects among the file's first lines, the non-JSON lines stepped over
counted, and the file as one JSON object when it is one: never the first line alone, which noise may hide.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

SAMPLE_RECORDS = 64  # JSON objects enough for every agent's tell, well before a long run's bulk
SAMPLE_LINES = 512  # lines looked at, at most: noise around a stream is a few dozen lines
LINE_MAX_BYTES = 1 << 20  # a longer line is stepped over (a Claude Code tool result may be megabytes)
WHOLE_MAX_BYTES = 64 << 20  # a one-object record (a chat record, an export) is read whole below this


@dataclass(frozen=True)
class Sample:
    """The start of a record file: ``records`` the JSON objects among its first lines, ``noise`` the non-JSON lines
    stepped over among them, ``whole`` the file as one JSON object when it is one (else None)."""

    path: Path
    records: tuple[dict[str, Any], ...] = ()
    noise: int = 0
    whole: dict[str, Any] | None = None


def _open(path: Path) -> BinaryIO:
    if path.suffix == ".gz":  # an archived transcript (run.jsonl.gz) is read as it is
        import gzip

        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def sample(path: str | Path) -> Sample:
    """The sample of ``path``; an empty one for what is no regular file (a FIFO may never end) or cannot be read."""
    path = Path(path)
    if not path.is_file():
        return Sample(path)
    records: list[dict[str, Any]] = []
    noise, lines, opened = 0, 0, None  # opened: whether the first line opens an object it does not close
    try:
        with _open(path) as handle:
            while len(records) < SAMPLE_RECORDS and lines < SAMPLE_LINES:
                line = handle.readline(LINE_MAX_BYTES)
                if not line:
                    break
                lines += 1
                if not line.endswith(b"\n") and len(line) >= LINE_MAX_BYTES:
                    while (rest := handle.readline(LINE_MAX_BYTES)) and not rest.endswith(b"\n"):
                        pass  # a line too long to sample: stepped over whole
                    continue
                text = line.strip().lstrip(b"\xef\xbb\xbf")
                if not text:
                    continue
                record = _object(text)
                if opened is None:
                    opened = record is None and text.startswith(b"{")
                if record is None:
                    noise += 1
                else:
                    records.append(record)
    except (OSError, EOFError, ValueError, zlib.error):  # a broken .gz: its reader says so
        return Sample(path, tuple(records), noise)
    if opened:  # an indented object: the lines inside it that parse are parts of it, not records
        whole = _whole(path)
        if whole is not None:
            return Sample(path, (), 0, whole)
    alone = len(records) == 1 and not noise and lines < SAMPLE_LINES  # the file's only line is one object
    return Sample(path, tuple(records), noise, records[0] if alone else None)


def _object(text: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # a line nested past the decoder's depth is no record to look at
        return None
    return value if isinstance(value, dict) else None


def _whole(path: Path) -> dict[str, Any] | None:
    """The file as one JSON object (written indented over many lines), when it is one and not too large."""
    try:
        if path.stat().st_size > WHOLE_MAX_BYTES:
            return None
        with _open(path) as handle:
            value = json.loads(handle.read())
    except (OSError, EOFError, ValueError, RecursionError, zlib.error):
        return None
    return value if isinstance(value, dict) else None


def whole_object(path: Path, what: str) -> dict[str, Any]:
    """``path`` read as one JSON object (``what`` names the record in the error); raises TranscriptError."""
    from pytest_agent_eval.transcript import TranscriptError

    try:
        with _open(path) as handle:
            value = json.loads(handle.read())
    except FileNotFoundError:
        raise TranscriptError(f"{path}: no such file") from None
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:
        raise TranscriptError(f"{path}: not {what} (not one JSON object: {exc})") from None
    if not isinstance(value, dict):
        raise TranscriptError(f"{path}: not {what} (its JSON is a {type(value).__name__}, not an object)")
    return value
