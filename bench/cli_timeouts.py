"""How long the pinned Claude Code CLI waits on a model that stops answering, and whether the run shows it.

    python bench/cli_timeouts.py              # both cases side by side: about six minutes, almost no CPU
    python bench/cli_timeouts.py --stall 420  # how long the stand-in's stream stays silent (longer than the CLI waits)

The issue-13 "280 s stall": one scripted turn took minutes and turned into "time saved 94%". The CLI recovers
from a model that stops answering on its own timers, and the turn then succeeds with the wait in its wall time.
Two cases, each one ``claude -p`` turn against the stand-in server with an injected fault on its first request:

* ``stall``: the SSE stream stops after its first delta (``Faults`` kind ``"stall"``) — the CLI's stream idle
  timeout, which 2.1.332 never lets go below 300 s;
* ``hang``: no response at all (kind ``"hang"``) — the CLI's request timeout, ``API_TIMEOUT_MS`` unset.

Printed per case: the turn's longest silence and the line it followed, the ``api_retry`` events stream-json
showed, the requests the server saw, and whether the driver flagged the turn stalled (threshold: the stand-in's).
Measured with 2.1.332: stall 300 s with no api_retry event (the retry is silent), hang 360 s with one.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
from pathlib import Path

from tabulate import tabulate

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, RunRecord, run_headless
from pytest_agent_eval.harness.drivers.watch import STALL_S_STAND_IN
from pytest_agent_eval.model import Faults, serve
from pytest_agent_eval.run.backends import make_backend
from pytest_agent_eval.settings.config import cache_root


def one_turn(claude: Path, root: Path, faults: Faults) -> tuple[RunRecord | Exception, int]:
    """One question, no MCP server, an isolated HOME; the driver's record (or its error) and the requests sent."""
    for folder in ("home", "tmp", "repo"):
        (root / folder).mkdir(parents=True)
    (root / "repo" / "send.js").write_text("function send(body) { return body }\n")
    (root / "mcp.json").write_text('{"mcpServers": {}}')
    (root / "settings.json").write_text("{}")
    options = HeadlessOptions(
        claude=str(claude), mcp_config=root / "mcp.json", settings=root / "settings.json", timeout_s=900.0,
        stall_s=STALL_S_STAND_IN,
    )  # fmt: skip
    base = {k: v for k, v in os.environ.items() if not k.startswith("CLAUDE_")}  # the CLI's own retry defaults
    base.update(HOME=str(root / "home"), TMPDIR=str(root / "tmp"))
    with serve(make_backend("scripted"), faults=faults) as server:
        try:
            run: RunRecord | Exception = run_headless(
                ["How does send work?"], label="t", out_dir=root / "out", cwd=root / "repo",
                env=CLAUDE_CODE.process_environment(base, server.url), options=options,
            )  # fmt: skip
        except Exception as exc:  # reported in the table: the case still says what it measured
            run = exc
        return run, len(server.requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stall", type=float, default=420.0, help="seconds the stalled stream stays silent")
    args = parser.parse_args()
    claude = CLAUDE_CODE.provision(cache_root(), CLAUDE_CODE.version).bin
    cases = {"stall": Faults({1: "stall"}, stall_s=args.stall), "hang": Faults({1: "hang"})}
    results: dict[str, tuple[RunRecord | Exception, int]] = {}
    with tempfile.TemporaryDirectory(prefix="cli-timeouts-") as tmp:
        threads = [
            threading.Thread(target=lambda n=name, f=faults: results.__setitem__(n, one_turn(claude, Path(tmp) / n, f)))
            for name, faults in cases.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    rows = []
    for name in cases:
        run, requests = results[name]
        if isinstance(run, Exception):
            rows.append([name, f"error: {run}", "", "", requests, ""])
            continue
        rows.append(
            [name, f"{run.longest_silence_s[0]:.1f}", run.silence_after[0], run.api_retries[0], requests,
             "yes" if run.stalled_turns else "no"]
        )  # fmt: skip
    print(f"Claude Code {CLAUDE_CODE.version}, one turn each against the stand-in model")
    headers = ["fault", "longest silence s", "after", "api_retry events", "requests", "flagged stalled"]
    print(tabulate(rows, headers=headers))


if __name__ == "__main__":
    main()
