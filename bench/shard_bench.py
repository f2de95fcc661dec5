"""Sharding overhead: provisioning repeated per shard, and wall time, of N shards against one unsharded session.

    python bench/shard_bench.py                     # express, requests, flask; 1 run per arm; 3 shards
    python bench/shard_bench.py -k "express or django" --shards 2 --runs 2

Every session runs ``pytest evals -k … --agent-eval-backend scripted --agent-eval-offline`` with a cache of its
own, as a fresh CI machine has: its corpus clones and index builds start empty. The tool installs (Claude Code,
codegraph; ~1 GB) are linked in from the shared cache, as a CI cache step restores them, so they are not counted
as builds here; a shard without such a cache installs each tool once more (the summary says how many that is).
The shards run one after another (this machine's cores are shared); ``max shard s`` is the wall time when they run
side by side on N machines, ``sum shards s`` the machine time they cost together. Index builds are read from each
session's ``<cache>/builds.log`` (:func:`~pytest_agent_eval.harness.provision.read_builds`): sharding keeps a
repository on one shard, so the goal is the unsharded session's count, not N times it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.harness.provision import provision_tool, read_builds
from pytest_agent_eval.run.merge import merge
from pytest_agent_eval.settings.config import cache_root
from pytest_agent_eval.tool import CODEGRAPH

REPO = Path(__file__).resolve().parents[1]


def seeded_cache(folder: Path, shared: Path) -> Path:
    """An empty cache but for the tool installs, linked from the shared one (what a CI cache step restores)."""
    folder.mkdir(parents=True)
    for tool in ("claude", "codegraph"):
        (folder / tool).mkdir()
        for install in (shared / tool).iterdir():
            if install.is_dir():
                (folder / tool / install.name).symlink_to(install)
    return folder


def session(name: str, args: argparse.Namespace, scratch: Path, env: dict[str, str], shard: str | None) -> dict:
    cache = seeded_cache(scratch / f"{name}.cache", cache_root())
    out = scratch / f"{name}.out"
    command = [sys.executable, "-m", "pytest", "evals", "-k", args.k, "--agent-eval-runs", str(args.runs)]
    command += ["--agent-eval-backend", "scripted", "--agent-eval-offline", f"--agent-eval-out={out}"]
    command += ["-p", "no:cacheprovider", "-q", f"--basetemp={scratch / f'{name}.tmp'}"]
    if shard is not None:
        command.append(f"--agent-eval-shard={shard}")
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=REPO, env={**env, "AGENT_EVAL_CACHE": str(cache)}, capture_output=True, text=True
    )
    wall = time.monotonic() - started
    campaigns = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
    if done.returncode not in (0, 1) or not campaigns:
        sys.exit(f"{name}: pytest exit {done.returncode}, no campaign:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    builds = read_builds(cache)
    index = Counter(Path(b["repo"]).name for b in builds if b["kind"] == "index")
    return {
        "name": name,
        "wall": wall,
        "campaign": campaigns[0],
        "items": sum(1 for line in (campaigns[0] / "items.jsonl").read_text().splitlines() if line.strip()),
        "installs": sum(1 for b in builds if b["kind"] == "install"),
        "index": index,
        "index_s": sum(b.get("seconds") or 0.0 for b in builds if b["kind"] == "index"),
    }


def row(result: dict[str, Any]) -> list[Any]:
    repos = ", ".join(f"{repo}×{n}" for repo, n in sorted(result["index"].items())) or "-"
    return [result["name"], result["items"], f"{result['wall']:.1f}", result["installs"],
            sum(result["index"].values()), f"{result['index_s']:.1f}", repos]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="express or requests or flask", help="the selection (default 3 repositories)")
    parser.add_argument("--shards", type=int, default=3, help="number of shards (default 3)")
    parser.add_argument("--runs", type=int, default=1, help="runs per arm (default 1)")
    args = parser.parse_args()
    CLAUDE_CODE.provision(cache_root(), CLAUDE_CODE.version)  # the installs every session links in
    provision_tool(CODEGRAPH, CODEGRAPH.version, cache_root())
    scratch = Path(tempfile.mkdtemp(prefix="shard-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "PYTEST_"))}
    print(f"shard bench: pytest evals -k {args.k!r} --agent-eval-runs {args.runs}, scripted model, in {scratch}")
    whole = session("unsharded", args, scratch, env, None)
    shards = [session(f"shard {i}/{args.shards}", args, scratch, env, f"{i}/{args.shards}") for i in
              range(1, args.shards + 1)]  # fmt: skip
    started = time.monotonic()
    merged = merge(scratch / "merged", [s["campaign"] for s in shards])
    merge_s = time.monotonic() - started
    headers = ["session", "items", "wall s", "installs", "index builds", "index s", "index builds per repository"]
    print(tabulate([row(whole), *map(row, shards)], headers=headers, disable_numparse=True))

    index_whole = sum(whole["index"].values())
    index_shards = sum(sum(s["index"].values()) for s in shards)
    slowest = max(s["wall"] for s in shards)
    total = sum(s["wall"] for s in shards)
    print(f"\nmerge: {len(merged.records)} items in {merge_s:.2f} s (unsharded: {whole['items']})")
    ratio = index_shards / index_whole if index_whole else 0.0
    print(f"index builds: {index_whole} unsharded, {index_shards} over {args.shards} shards ({ratio:.2f}x; goal 1.00x)")
    print(f"tool installs a shard without a CI cache adds: 2 (Claude Code, codegraph) x {args.shards - 1} machines")
    side = slowest / whole["wall"]
    print(f"wall: unsharded {whole['wall']:.1f} s; shards side by side {slowest:.1f} s ({side:.2f}x)")
    print(f"machine time over the shards {total:.1f} s ({total / whole['wall']:.2f}x: the start-up each shard repeats)")
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
