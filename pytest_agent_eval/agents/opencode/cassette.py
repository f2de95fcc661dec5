"""Replay a recorded OpenCode run over the Messages API: the model's turns come from its ``--format json`` streams.

OpenCode speaks the Messages API, so the Messages cassette's rules hold (model/cassette.py): the N-th request gets the
N-th recorded step, N counted from the assistant messages already in the request, so a retried request gets the same
answer and ``opencode run --session`` continues where the recording did. OpenCode records none of the model's
response ids, but each call's id is the model's (``toolu_…``) and its name and input are kept as OpenCode received
them (``bash``, ``codegraph_<tool>``), so the calls are sent back as the model sent them and the CLI's results pair up.

OpenCode's request for a session title (it offers no tools) is no step of the recording: it is answered with a
title naming the replay. The stream names no working directory: the harness keeps the run's beside its first segment
(``run-<label>.cwd``, :func:`~pytest_agent_eval.agents.opencode.transcript.kept_cwd`) and the recorded directory in
the calls is rewritten to the replaying CLI's; a recording without it is replayed with its paths as recorded, and
:meth:`OpenCodeCassetteBackend.describe` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agent_eval.agents.opencode.transcript import kept_cwd, read_opencode
from pytest_agent_eval.model.cassette import CassetteBackend
from pytest_agent_eval.model.sse import Reply
from pytest_agent_eval.transcript import Session

REPLAY_TITLE = "Cassette replay"


class OpenCodeCassetteBackend(CassetteBackend):
    """A cassette of an OpenCode run: answers ``/v1/messages``."""

    def read(self, paths: list[Path]) -> Session:
        return read_opencode(paths)

    def recorded_cwd(self, session: Session) -> str | None:
        try:
            return kept_cwd(self.paths[0]).read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def describe(self) -> str:
        paths = "" if self.cwd else f" (no {kept_cwd(self.paths[0]).name} beside it: paths replayed as recorded)"
        return super().describe() + paths

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        if not request.get("tools"):  # the session-title request: OpenCode records no step for it
            return Reply.text(REPLAY_TITLE)
        return super().respond(request, headers)
