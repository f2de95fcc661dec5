"""Replaying an agent's recorded run through the cassette over HTTP: its segments, and a request posted as the CLI
posts it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def segments(folder: Path) -> list[Path]:
    """A recorded run's event streams, in turn order (``events.jsonl``, ``events.t2.jsonl``…)."""
    return sorted(folder.glob("events*.jsonl"), key=lambda path: (len(path.suffixes), len(path.name), path.name))


def post(url: str, body: dict[str, Any], path: str) -> tuple[int, bytes]:
    """POST ``body`` to the server at ``url`` + ``path``: the status and the body it answered."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
