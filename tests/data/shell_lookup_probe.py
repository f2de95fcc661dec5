"""How an agent without a prefix variable starts its shell, and what that shell reaches of the agent's process:
one shell call, sealed in the harness's sandbox, lists its ancestors (path, command line) and tries each one's
``/proc/<pid>/mem`` and ``environ`` (docs/sandbox.md, "the jailed shell where they look it up").

    PYTHONPATH=tests python tests/data/shell_lookup_probe.py AGENT CACHE OUT [--no-jail]

AGENT: ``codex``, ``gemini`` or ``opencode``, its pinned release provisioned in CACHE (the harness's cache folder,
express under ``corpus/``); OUT: a fresh folder. ``--no-jail`` takes the Landlock layer off (the agent's shell as it
was before ``CodingAgent.shell_from``). Measured 2026-12-03 (Codex 0.171.0, Gemini CLI 0.61.0, OpenCode 1.18.33):
with the jail each agent's own process answers ``mem=refused environ=refused``; without, ``mem=OPENED
environ=READ``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from support.agent_cli import run_arm  # tests/ on sys.path: run from the repository root with PYTHONPATH=tests

from pytest_agent_eval.agents.codex import CODEX
from pytest_agent_eval.agents.gemini import GEMINI
from pytest_agent_eval.agents.opencode import OPENCODE
from pytest_agent_eval.harness import sandbox

# No command substitution: Gemini CLI refuses one.
PROBE = (
    'echo "argv0=$0 SHELL=$SHELL"; grep ":$UID:" /etc/passwd; p=$$; while [ "$p" -gt 1 ]; do echo "ancestor $p"; '
    "readlink /proc/$p/exe; tr '\\0' ' ' < /proc/$p/cmdline | cut -c1-200; echo; "
    "(exec 3</proc/$p/mem) 2>/dev/null && m=OPENED || m=refused; "
    'head -c1 /proc/$p/environ >/dev/null 2>&1 && e=READ || e=refused; echo "mem=$m environ=$e"; '
    "read _ _ _ pp _ < /proc/$p/stat; p=$pp; done"
)
AGENTS = {"codex": CODEX, "gemini": GEMINI, "opencode": OPENCODE}


def main() -> int:
    name, cache, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if "--no-jail" in sys.argv[4:]:
        os.environ[sandbox.LAYERS_VAR] = ",".join(layer for layer in sandbox.LAYERS if layer != sandbox.LANDLOCK)
    agent = AGENTS[name]
    build = agent.provision(cache)
    arm = run_arm(agent, out, cache / "corpus" / "express", build, cache, model=agent.block_probe(PROBE))
    for call in arm.session.calls:
        print(call.result.text if call.result is not None else "(no result)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
