"""What the end-to-end tests share: running pytest in a subprocess against the real tools, reading the campaign
it wrote, and finding the processes it left behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_agent_eval.harness.provision import Provisioned
from support.paths import REPO

TAG_VAR = "AGENT_EVAL_E2E_TAG"  # every process a test starts inherits it, so leftovers can be told apart
RUN_TIMEOUT = 420.0


@dataclass(frozen=True)
class RealTools:
    """The parts a user has for real: Claude Code and codegraph from npm, express indexed by that codegraph."""

    cache: Path
    claude: Provisioned
    codegraph: Provisioned
    express: Path  # an indexed copy: copy it before use


def leftovers(tag: str, tmp_path: Path) -> list[tuple[int, str]]:
    """``pgrep -f 'claude|codegraph|tinygrep'`` narrowed to this test's processes: its tag in the environment, or its
    tmp folder on the command line (an MCP server may get a trimmed environment but always its --path)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if not re.search(r"claude|codegraph|tinygrep", cmdline):
            continue
        if f"{TAG_VAR}={tag}".encode() in environ or str(tmp_path) in cmdline:
            found.append((int(proc.name), cmdline))
    return found


def inner_env(tools: RealTools, tag: str, **extra: str) -> dict[str, str]:
    """The inner pytest's environment: the pinned claude first on PATH, the shared cache, no real key, no
    CLAUDE_*/ANTHROPIC_* or outer-pytest settings leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "PYTEST_"))}
    env["PATH"] = os.pathsep.join([str(tools.claude.bin.parent), env.get("PATH", "")])
    env["AGENT_EVAL_CACHE"] = str(tools.cache)
    env[TAG_VAR] = tag
    env.update(extra)
    return env


def run_pytest(
    args: list[str], cwd: Path, env: dict[str, str], tmp_path: Path, wrapper: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    """``python -m pytest args`` (behind ``wrapper``, a command prefix, when given)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    options = ["-p", "no:cacheprovider", f"--basetemp={tmp_path / 'bt'}"]
    command = [*wrapper, sys.executable, "-m", "pytest", *args, *options]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    print(done.stdout[-6000:], done.stderr[-3000:], sep="\n")
    return done


def summary(out: Path) -> dict[str, dict]:
    """The records of the one campaign a session wrote under ``--agent-eval-out``, by item id."""
    (path,) = out.glob("*/summary.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    return {record["id"]: record for record in data["records"]}


def package_venv(python: Path, folder: Path) -> Path:
    """A virtual environment of ``python`` with this package (editable) and its dependencies; its interpreter."""
    subprocess.run([str(python), "-m", "venv", str(folder)], check=True, capture_output=True, timeout=120)
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "-e", str(REPO)], check=True, capture_output=True, timeout=600)
    return folder / "bin" / "python"
