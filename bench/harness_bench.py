"""Harness overhead and throughput of ``pytest evals`` with the scripted model, at several xdist worker counts.

    python bench/harness_bench.py                  # -n 1, 2, 4; express; 4 runs per arm; warm caches
    python bench/harness_bench.py --cold           # each -n session starts from an empty cache of its own
    python bench/harness_bench.py --hardening      # the sandbox's hardening layers on against off: their cost

Each session runs ``pytest evals -k <entry> --agent-eval-backend scripted --agent-eval-offline`` from the
repository root into a fresh ``--agent-eval-out``. Per item it prints the harness overhead: the item's wall time
(setup + call, as the plugin records ``wall_s``) minus the agent processes' own wall time (``agent_s``, the sum of
the driver's per-turn ``wall_s``), and that overhead as a share of the agent's time. Per session it prints the
installs and index builds ``builds.log`` gained (:func:`~pytest_agent_eval.harness.provision.read_builds`) and the
throughput.

``--hardening`` measures what the sandbox's hardening layers (user namespace, read-only /proc, seccomp, Landlock;
see docs/sandbox.md) cost: a sandboxed process's start with and without them, and, inside one hardened sandbox, a
Bash command through the jail against a plain ``bash -c``, each timed many times alternating; then whole ``-n 1``
sessions alternating hardened and not (the layers taken off through an internal variable, never a user option).
It prints the ratios hardened/unhardened, and the run-to-run noise they are held against: how far apart one side's
sessions are (the slowest session's median item time over the fastest's).

Goals: overhead ≤ 5% of the agent's time; one index build per (repository, codegraph version) whatever -n is;
hardening costs no measurable time per item (its item-time ratio within the sessions' own spread).
Warm mode provisions the pinned Claude Code and codegraph, the entry and its index first, so every session
should build nothing; ``--cold`` gives each session an empty cache, so each must install and index exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.corpus.load import load_corpus
from pytest_agent_eval.corpus.repos import fetch_repo
from pytest_agent_eval.harness.index import indexed_copy
from pytest_agent_eval.harness.provision import provision_tool, read_builds
from pytest_agent_eval.harness.sandbox import LAYERS, LAYERS_VAR, Sandbox, runtime_paths
from pytest_agent_eval.settings.config import AgentEvalConfig, cache_root
from pytest_agent_eval.tool import CODEGRAPH

REPO = Path(__file__).resolve().parents[1]
GOAL_SHARE = 0.05
JAIL_BATCH = 50  # Bash commands per timed round of --hardening's jail figure


def warm(cache: Path, entry_name: str) -> Path:
    """Provision the pinned tools, the entry and its index into ``cache``; returns the claude bin folder."""
    claude = CLAUDE_CODE.provision(cache, CLAUDE_CODE.version)
    codegraph = provision_tool(CODEGRAPH, CODEGRAPH.version, cache)
    entry = next(e for e in load_corpus(REPO / "corpus.json") if e.name == entry_name)
    indexed_copy(fetch_repo(entry, AgentEvalConfig().corpus_dir, offline=True), CODEGRAPH, codegraph, cache)
    return claude.bin.parent


def junit_times(path: Path) -> dict[str, float]:
    """Item id → junit ``time`` (setup + call + teardown), the fallback when a record has no ``wall_s``."""
    if not path.is_file():
        return {}
    times = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[" in name:
            times[name[name.index("[") + 1 : -1]] = float(case.get("time") or 0.0)
    return times


def session(workers: int, args: argparse.Namespace, out: Path, env: dict[str, str], cache: Path) -> dict[str, Any]:
    """One ``pytest evals`` session: its items' times, its builds, its wall time."""
    junit = out.parent / f"{out.name}.junit.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "evals",
        "-k",
        args.k,
        "-n",
        str(workers),
        "--agent-eval-runs",
        str(args.runs),
    ]
    command += [
        "--agent-eval-backend",
        "scripted",
        "--agent-eval-offline",
        f"--agent-eval-out={out}",
        f"--junitxml={junit}",
    ]
    command += ["-p", "no:cacheprovider", "-q", f"--basetemp={out.parent / f'{out.name}.tmp'}"]
    before = len(read_builds(cache))
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    builds = read_builds(cache)[before:]
    summaries = sorted(out.rglob("summary.json"))
    if not summaries:
        sys.exit(f"-n {workers}: no summary.json (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    records = json.loads(summaries[-1].read_text(encoding="utf-8"))["records"]
    fallback = junit_times(junit)
    items = []
    for record in records:
        agent = record.get("agent_s")
        if agent is None:
            agent = sum((record.get("driver") or {}).get("wall_s") or [])
        item_wall, source = record.get("wall_s"), "record"
        if item_wall is None:
            item_wall, source = fallback.get(record["id"]), "junit"
        overhead = None if item_wall is None else item_wall - agent
        items.append(
            {
                "id": record["id"],
                "outcome": record.get("outcome"),
                "wall_s": item_wall,
                "agent_s": agent,
                "overhead_s": overhead,
                "share": overhead / agent if overhead is not None and agent else None,
                "source": source,
            }
        )
    return {"workers": workers, "wall": wall, "exit": done.returncode, "items": items, "builds": builds}


def _fmt(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else format(value, pattern)


def totals(result: dict[str, Any]) -> dict[str, Any]:
    """A session's pooled figures: agent and overhead seconds, their ratio, builds per kind and per key."""
    measured = [i for i in result["items"] if i["overhead_s"] is not None]
    agent = sum(i["agent_s"] for i in measured)
    overhead = sum(i["overhead_s"] for i in measured)
    index = Counter((Path(b["repo"]).name, b["version"]) for b in result["builds"] if b["kind"] == "index")
    return {
        "agent": agent,
        "overhead": overhead,
        "share": overhead / agent if agent else None,
        "median": statistics.median(i["overhead_s"] for i in measured) if measured else None,
        "per_minute": len(result["items"]) / result["wall"] * 60,
        "installs": sum(1 for b in result["builds"] if b["kind"] == "install"),
        "index": index,
    }


def print_session(result: dict[str, Any]) -> None:
    items, pooled = result["items"], totals(result)
    print(f"\n-n {result['workers']}: {len(items)} items in {result['wall']:.1f} s (pytest exit {result['exit']})")
    rows = [
        [i["id"], i["outcome"], _fmt(i["wall_s"], ".2f"), _fmt(i["agent_s"], ".2f"), _fmt(i["overhead_s"], ".2f"),
         _fmt(i["share"], ".1%"), i["source"]]
        for i in items
    ]  # fmt: skip
    rows.append(["total", "", "", f"{pooled['agent']:.2f}", f"{pooled['overhead']:.2f}", _fmt(pooled["share"], ".1%")])
    headers = ["item", "outcome", "wall_s", "agent_s", "overhead_s", "overhead/agent", "wall from"]
    print(tabulate(rows, headers=headers, disable_numparse=True))
    keys = ", ".join(f"{repo}@codegraph {version}: {n}" for (repo, version), n in sorted(pooled["index"].items()))
    index = sum(pooled["index"].values())
    print(f"builds: {pooled['installs']} install(s), {index} index build(s) (per repository × version: {keys or '-'})")


def print_summary(results: list[dict[str, Any]], cold: bool) -> None:
    pooled = [totals(r) for r in results]
    base = pooled[0]["per_minute"]
    rows = [
        [f"-n {r['workers']}", len(r["items"]), f"{r['wall']:.1f}", f"{t['per_minute']:.1f}",
         f"{t['per_minute'] / base:.2f}x", _fmt(t["median"], ".2f"), _fmt(t["share"], ".1%"), t["installs"],
         sum(t["index"].values()), max(t["index"].values(), default=0)]
        for r, t in zip(results, pooled, strict=True)
    ]  # fmt: skip
    headers = ["workers", "items", "session_s", "items/min", "vs first", "median overhead_s", "overhead/agent",
               "installs", "index builds", "max per repo×version"]  # fmt: skip
    print("\nSUMMARY" + (" (cold: an empty cache per session)" if cold else " (warm caches)"))
    print(tabulate(rows, headers=headers, disable_numparse=True))
    met = all(t["share"] is not None and t["share"] <= GOAL_SHARE for t in pooled)
    shares = ", ".join(_fmt(t["share"], ".1%") for t in pooled)
    print(f"goal: harness overhead <= {GOAL_SHARE:.0%} of the agent's time: {'met' if met else 'NOT met'} ({shares})")
    want = 1 if cold else 0  # warm: the warm-up built the index; cold: each session builds it once
    once = all(max(t["index"].values(), default=0) == want for t in pooled)
    verdict = "met" if once else "NOT met"
    print(f"goal: one index build per (repository, version) per session, {want} expected here: {verdict}")


def _median_s(command: list[str], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return times


def hardening_micro(rounds: int) -> None:
    """A sandboxed ``true`` with every layer and with none; then, inside one hardened sandbox, a batch of Bash
    commands as Claude Code runs them (through the jail) against the same batch of plain ``bash -c``: the jail's
    own cost per command. Alternating rounds; medians and their ratio."""
    from pytest_agent_eval.harness.jail import launcher

    readable = tuple(p.resolve() for p in runtime_paths())
    hardened = Sandbox(hidden=(), readable=readable, writable=())
    bare = Sandbox(hidden=(), readable=readable, writable=(), layers=())
    loop = f'i=0; while [ $i -lt {JAIL_BATCH} ]; do "$@" true; i=$((i+1)); done'
    jailed, plain = (hardened.wrap(["sh", "-c", loop, "sh", *run]) for run in ([launcher()], ["bash", "-c"]))
    cases = [("sandbox start (true)", hardened.wrap(["true"]), bare.wrap(["true"]), 1),
             ("a Bash command (jail / bash -c)", jailed, plain, JAIL_BATCH)]  # fmt: skip
    rows = []
    for name, on, off, per in cases:
        on_s, off_s = [], []
        for _ in range(rounds):  # alternating, so drift on a shared machine hits both alike
            on_s += _median_s(on, 1)
            off_s += _median_s(off, 1)
        a, b = statistics.median(on_s) / per, statistics.median(off_s) / per
        rows.append([name, f"{a * 1000:.2f}", f"{b * 1000:.2f}", f"{(a - b) * 1000:+.2f}", f"{a / b:.2f}x"])
    print(f"\nHARDENING, per process ({rounds} alternating rounds; medians; Bash commands {JAIL_BATCH} a round)")
    print(tabulate(rows, headers=["what", "hardened ms", "unhardened ms", "cost ms", "hardened/unhardened"],
                   disable_numparse=True))  # fmt: skip


def hardening_sessions(args: argparse.Namespace, scratch: Path, env: dict[str, str], cache: Path) -> None:
    """``-n 1`` sessions alternating hardened (every layer) and unhardened (none); the ratio of median item time
    and of median harness overhead, with each side's spread."""
    sides: dict[str, list[dict[str, Any]]] = {"hardened": [], "unhardened": []}
    per_session: dict[str, list[float]] = {side: [] for side in sides}  # each session's median item time
    for k in range(args.rounds):
        for side in sides:
            layers = ",".join(LAYERS) if side == "hardened" else ""
            result = session(1, args, scratch / f"{side}-{k}", {**env, LAYERS_VAR: layers}, cache)
            passed = [i for i in result["items"] if i["wall_s"] is not None and i["outcome"] == "passed"]
            sides[side] += passed
            if passed:
                per_session[side].append(statistics.median(i["wall_s"] for i in passed))
    rows, medians = [], {}
    for side, items in sides.items():
        walls = [i["wall_s"] for i in items]
        medians[side] = (statistics.median(walls), statistics.median(i["overhead_s"] for i in items))
        rows.append([side, len(items), f"{medians[side][0]:.2f}", f"{min(walls):.2f}-{max(walls):.2f}",
                     f"{medians[side][1]:.2f}"])  # fmt: skip
    print(f"\nHARDENING, per item (-n 1, {args.rounds} alternating session pairs; passed items)")
    print(tabulate(rows, headers=["sandbox", "items", "median item s", "range", "median overhead s"],
                   disable_numparse=True))  # fmt: skip
    (wall_on, over_on), (wall_off, over_off) = medians["hardened"], medians["unhardened"]
    print(f"hardened/unhardened: item time {wall_on / wall_off:.3f}x ({wall_on - wall_off:+.2f} s), "
          f"harness overhead {over_on - over_off:+.2f} s per item")  # fmt: skip
    # run-to-run noise: how far apart the sessions of one side are, each session's median item time
    for side, medians_s in per_session.items():
        print(f"{side} sessions' median item s: {', '.join(f'{m:.2f}' for m in medians_s)}")
    same = [max(m) / min(m) for m in per_session.values() if len(m) > 1]
    if same:
        noise = max(same)
        verdict = "within" if max(wall_on / wall_off, wall_off / wall_on) <= noise else "OUTSIDE"
        print(f"run-to-run noise (a side's slowest session over its fastest): {noise:.3f}x; "
              f"hardened/unhardened {wall_on / wall_off:.3f}x is {verdict} it")  # fmt: skip
    # the same item (same questions) against itself: per id, the ratio of its median times
    by_id = {side: {} for side in sides}
    for side, items in sides.items():
        for item in items:
            by_id[side].setdefault(item["id"], []).append(item["wall_s"])
    ratios = sorted(statistics.median(by_id["hardened"][i]) / statistics.median(by_id["unhardened"][i])
                    for i in by_id["hardened"].keys() & by_id["unhardened"].keys())  # fmt: skip
    if ratios:
        print(
            f"per item id, hardened/unhardened: median {statistics.median(ratios):.3f}x "
            f"(items {ratios[0]:.2f}x-{ratios[-1]:.2f}x)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="comma-separated -n values (default 1,2,4)")
    parser.add_argument("--runs", type=int, default=4, help="runs per arm (default 4: 8 items)")
    parser.add_argument("-k", default="express", help="corpus entry to run (default express)")
    parser.add_argument("--cold", action="store_true", help="give every session an empty cache of its own")
    parser.add_argument("--hardening", action="store_true", help="the sandbox's hardening layers on against off")
    parser.add_argument("--rounds", type=int, default=2, help="--hardening: session pairs (default 2)")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="harness-bench-"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "PYTEST_"))}
    results = []
    if not args.cold:
        cache = cache_root()
        started = time.monotonic()
        before = len(read_builds(cache))
        claude_bin = warm(cache, args.k)
        fresh = len(read_builds(cache)) - before
        print(f"warm-up: {fresh} install/index build(s) in {time.monotonic() - started:.1f} s into {cache}")
    print(
        f"harness bench: pytest evals -k {args.k} --agent-eval-runs {args.runs} "
        "--agent-eval-backend scripted --agent-eval-offline; "
        f"claude {CLAUDE_CODE.version}, codegraph {CODEGRAPH.version}; {os.cpu_count()} CPUs; out {scratch}"
    )
    if args.hardening:
        if args.cold:
            sys.exit("--hardening measures with warm caches: leave --cold out")
        hardening_micro(rounds=30)
        env = {**base_env, "AGENT_EVAL_CACHE": str(cache), "PATH": os.pathsep.join([str(claude_bin), base_env["PATH"]])}
        hardening_sessions(args, scratch, env, cache)
        return 0
    for n in workers:
        env = dict(base_env)
        if args.cold:
            cache = scratch / f"cache-n{n}"
            env["AGENT_EVAL_CACHE"] = str(cache)  # claude comes from PATH if there is one, else it is installed
        else:
            env["AGENT_EVAL_CACHE"] = str(cache)
            env["PATH"] = os.pathsep.join([str(claude_bin), env.get("PATH", "")])  # the pinned CLI, not another
        result = session(n, args, scratch / f"n{n}", env, cache)
        print_session(result)
        results.append(result)
    print_summary(results, args.cold)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
