"""Keep the retrieval tool's CLI out of the agent's reach: the two-layer block (docs/sandbox.md).

The without-arm has a shell, and the repo carries the index the with-arm needs; with the CLI on
PATH, agents run it (docs/metrics/contamination.md). So both arms run with:

1. a PATH where every directory holding the CLI is replaced, in place, by a folder of symlinks to
   everything else in it — the CLI usually sits next to the agent's executable and ``node``, so a directory
   cannot simply be dropped, and keeping the position keeps precedence;
2. the agent's own deny of shell commands running the CLI by any other route (absolute path, ``npx``,
   ``node …/codegraph.js``): a hook, a rules file, a policy (:meth:`~pytest_agent_eval.agents.base.CodingAgent.
   configure`).

Prevention fails silently when the binary moves, so :func:`self_check` probes both layers before any run
(the agent's with :meth:`~pytest_agent_eval.agents.base.CodingAgent.check_deny`), and the contamination metric
re-reads every shell command after.

Text matching cannot be complete (a quoted name, a Python subprocess), so these two layers only make the
agent's attempts visible; what seals the without-arm is the sandbox it runs in, where the tool does not
exist (:mod:`pytest_agent_eval.harness.sandbox`), and the probe through the agent itself
(:mod:`pytest_agent_eval.run.probe`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


class IsolationError(RuntimeError):
    """The CLI block is not in place; the message names every layer that failed."""


@dataclass(frozen=True)
class CliBlock:
    """The PATH layer: the agent's PATH without the tool's CLI, and the folder of the mirrors it names."""

    path: str
    folder: Path


def shim_path(path_env: str, cli: str, shim_root: Path) -> str:
    """``path_env`` with each directory that holds an executable ``cli`` swapped for a symlink mirror without it."""
    entries = path_env.split(os.pathsep)
    shimmed = []
    for directory in entries:
        if directory and _is_executable(Path(directory) / cli):
            shimmed.append(str(_mirror(Path(directory), cli, Path(shim_root))))
        else:
            shimmed.append(directory)
    return os.pathsep.join(shimmed)


def _is_executable(path: Path) -> bool:
    try:
        return path.is_file() and os.access(path, os.X_OK)
    except PermissionError:  # a folder this user cannot search (root's ~/.cargo/bin): nothing in it runs for them
        return False


def _mirror(directory: Path, cli: str, shim_root: Path) -> Path:
    """A folder of symlinks to every entry of ``directory`` except ``cli``; rebuilt on every call."""
    digest = hashlib.sha256(str(directory).encode()).hexdigest()[:12]
    mirror = shim_root / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', directory.name) or 'root'}-{digest}"
    if mirror.exists():
        shutil.rmtree(mirror)
    try:
        entries = sorted(os.listdir(directory))
    except PermissionError as error:
        raise IsolationError(
            f"PATH folder {directory} holds `{cli}` but this user cannot list it, so no copy of it without `{cli}` "
            "can be put on the agent's PATH; make the folder readable or take it off PATH"
        ) from error
    mirror.mkdir(parents=True)
    for entry in entries:
        if entry != cli:
            # The link names the original path, so relative links inside the directory still resolve.
            (mirror / entry).symlink_to(directory / entry)
    return mirror


def self_check(
    path_env: str, cli: str, required: Sequence[str], deny_problems: Callable[[dict[str, str]], list[str]]
) -> None:
    """Refuse to start a run whose CLI block leaks: ``cli`` must not resolve on ``path_env`` and every
    ``required`` tool must; ``deny_problems`` checks the agent's own deny, given the environment its check runs
    in (this process's, with ``path_env``), and returns what it found wrong."""
    problems: list[str] = []
    found = shutil.which(cli, path=path_env)
    if found is not None:
        problems.append(f"PATH layer: `{cli}` still resolves to {found}")
    missing = [tool for tool in required if shutil.which(tool, path=path_env) is None]
    problems += [f"PATH layer: required tool `{tool}` is not found" for tool in missing]
    problems += deny_problems({**os.environ, "PATH": path_env})
    if problems:
        raise IsolationError("CLI isolation self-check failed: " + "; ".join(problems))
