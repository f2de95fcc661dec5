"""The session's caveats (a stand-in model, n=1, a record that could not be read) issued as warnings of the
plugin's own class, under the filters the user gave (``-W``, the ini's ``filterwarnings``)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest


def warn_raised(text: str, where: Path | None) -> bool:
    """Issue a warning of the plugin's class, located in ``where`` (the campaign's summary.json: the warning is
    about it, not about a line of this plugin) at the line it is about (:func:`line_of`); True when a filter naming
    :class:`AgentEvalWarning` made it an error, which the caller turns into a failed session rather than an
    internal error.

    A filter that makes *every* warning an error (a project's ``filterwarnings = error``, ``-W error``) is about
    the project's own code: under it these caveats of a campaign (a stand-in model, n=1) are listed in the
    warnings summary as they are without it, and fail nothing."""
    from pytest_agent_eval.warnings import AgentEvalWarning

    module = __name__  # a filter naming the plugin's modules (ignore::...:pytest_agent_eval.*) applies too
    with warnings.catch_warnings():  # pytest's own capture (record) stays: only the filters are restored
        action, category = _deciding_filter(AgentEvalWarning, text, module)
        if action == "error" and not issubclass(category, AgentEvalWarning):
            warnings.filterwarnings("always", category=AgentEvalWarning)
        try:
            line = line_of(where, text) if where is not None else 1
            warnings.warn_explicit(AgentEvalWarning(text), AgentEvalWarning, str(where or "agent-eval"), line, module)
        except AgentEvalWarning:
            return True
    return False


def line_of(path: Path, text: str) -> int:
    """The first line of ``path`` that holds what a caveat is about — its subject (``express / with`` names an
    entry), else its first words — so a warning points at a line that exists (``summary.json:42``), not ``:0``;
    line 1 when none does, or the file cannot be read."""
    subject = text.removeprefix("agent-eval: warning: ").split(":")[0]
    wanted = [f'"{part.strip()}' for part in subject.split("/")[:1]] + [subject[:40]]
    try:
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    except OSError:
        return 1
    for needle in wanted:
        found = next((n for n, line in enumerate(lines, start=1) if needle in line), None)
        if found is not None:
            return found
    return 1


def _deciding_filter(category: type[Warning], text: str, module: str) -> tuple[str, type[Warning]]:
    """The action and category of the first warnings filter that matches, as :mod:`warnings` picks it."""
    for action, message, filtered, named, line in warnings.filters:
        if _matched(message, text) and _matched(named, module) and issubclass(category, filtered) and line == 0:
            return action, filtered
    return warnings.defaultaction, Warning


def _matched(pattern: Any, value: str) -> bool:
    """A filter's message or module matches as :mod:`warnings` has it: None always, a plain string exactly (the
    interpreter's own default filters), else a regex from its start."""
    if pattern is None or isinstance(pattern, str):
        return pattern is None or pattern == value
    return pattern.match(value) is not None


def error_filter(config: pytest.Config) -> str:
    """Where the filter that made the plugin's warnings errors was given: ``-W …`` (first: the command line wins),
    else the ini file's ``filterwarnings``."""
    for spec in config.known_args_namespace.pythonwarnings or []:
        if spec.startswith("error") and "AgentEvalWarning" in spec:
            return f"-W {spec}"
    for spec in config.getini("filterwarnings"):
        if spec.strip().startswith("error") and "AgentEvalWarning" in spec:
            ini = config.inipath.name if config.inipath else "the ini file"
            return f"filterwarnings = {spec.strip()} in {ini}"
    return "a warnings filter naming AgentEvalWarning"
