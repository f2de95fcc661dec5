"""Try each provisioning step once per session: a clone, an npm install or a local build that failed is not
tried again by the next item, which errors at once with the first failure's message.

Under pytest-xdist the items of one session run in several processes, so the memo is on disk, in the
provisioning cache: ``<cache>/failures/<session id>/<hash of the key>.json`` holding the key and the error.
The session id is made by the controller and handed to its workers, so every worker sees every failure of
this session and none of an earlier one (a new session, or a resume, tries again). A step runs under the
key's file lock, so two workers asking for the same thing at once do not both try it: the second waits and
then reads the first one's failure (or, on success, finds the step's own on-disk cache warm). The controller
removes its session's folder at the end; folders older than :data:`STALE_S` are left by sessions that died
and are removed by the next one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from filelock import FileLock

from pytest_agent_eval.harness.drivers import AgentInfraError

FAILURES_DIR = "failures"
STALE_S = 7 * 24 * 3600.0
EARLIER = "(failed earlier in this session; not tried again)"

T = TypeVar("T")


class FailureMemo:
    """The failures of one session, by key (what was asked: ``codegraph 1.6.1``, ``repo express …``)."""

    def __init__(self, cache: Path, session_id: str) -> None:
        self.session_id = session_id
        self.root = Path(cache) / FAILURES_DIR / session_id

    def attempt(self, key: str, action: Callable[[], T]) -> T:
        """``action()``, unless ``key`` failed earlier in this session: then AgentInfraError with that message.

        Only an AgentInfraError is remembered (every harness step raises one); anything else — an interrupt, a
        bug — propagates and is tried again.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        with FileLock(str(path.with_suffix(".lock"))):
            earlier = self.failure(key)
            if earlier is not None:
                raise AgentInfraError(f"{earlier} {EARLIER}")
            try:
                return action()
            except AgentInfraError as exc:
                partial = path.with_suffix(".partial")
                partial.write_text(json.dumps({"key": key, "error": str(exc)}), encoding="utf-8")
                os.replace(partial, path)
                raise

    def failure(self, key: str) -> str | None:
        """The error ``key`` failed with in this session, or None."""
        try:
            known = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return str(known["error"]) if known.get("key") == key else None

    def _path(self, key: str) -> Path:
        return self.root / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"

    def clear(self) -> None:
        """Forget this session's failures, and the folders of sessions that died long ago."""
        shutil.rmtree(self.root, ignore_errors=True)
        parent = self.root.parent
        if not parent.is_dir():
            return
        cutoff = time.time() - STALE_S
        for folder in parent.iterdir():
            try:
                if folder.is_dir() and folder.stat().st_mtime < cutoff:
                    shutil.rmtree(folder, ignore_errors=True)
            except OSError:
                continue
