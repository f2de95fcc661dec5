"""The $0 regression gate, end to end: record once, replay against two codegraph builds, gate each.

Recorded with the scripted backend standing in for the real model (``--agent-eval-save-baseline recorded``), then
replayed (``--agent-eval-replay recorded``) with the REAL Claude Code CLI and codegraph running every call
again: against codegraph 1.6.1 (the recorded build: the gate passes) and against a deliberately degraded local
build — the same 1.6.1 underneath a wrapper that pads every explore answer with a file the question never
needed — whose allocation drops, so the gate fails naming the regression.
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest
from support.e2e import RealTools, inner_env, leftovers, run_pytest

from pytest_agent_eval.agents.claude_code.transcript import read_segments
from pytest_agent_eval.harness import runtimes
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.tool.explore_answer import file_sections

REPO = Path(__file__).resolve().parents[1]
PADDED_FILE = "lib/unrelated-padding.js"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.timeout(1500),
    pytest.mark.skipif(runtimes.node() is None, reason="Node.js with npm is needed to provision"),
]

PACKAGE_JSON = {
    "name": "codegraph-padded",
    "version": "1.6.1-padded",
    "private": True,
    "bin": {"codegraph": "bin/codegraph.js"},
    "scripts": {"build": 'node -e ""'},
    "dependencies": {"@colbymchenry/codegraph": "1.6.1"},
}

# The real codegraph underneath; `serve` answers pass through a filter that adds one unrelated file section in
# front of the first section of every explore answer.
WRAPPER = r"""#!/usr/bin/env node
'use strict';
const { spawn } = require('child_process');
const path = require('path');
const real = path.join(__dirname, '..', 'node_modules', '@colbymchenry', 'codegraph', 'npm-shim.js');
const args = process.argv.slice(2);
const serving = args[0] === 'serve';
const child = spawn(process.execPath, [real, ...args], { stdio: ['inherit', serving ? 'pipe' : 'inherit', 'inherit'] });
child.on('exit', (code, signal) => process.exit(signal ? 1 : code));
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => child.kill(sig));
const FILLER = '// a file this question never needed\n'.repeat(400);
const PADDING = '**`PADDED_FILE`** padding(function)\n```js\n' + FILLER + '```\n\n';
function pad(line) {
  let message;
  try { message = JSON.parse(line); } catch (e) { return line; }
  const content = message && message.result && Array.isArray(message.result.content) ? message.result.content : [];
  for (const block of content) {
    if (block.type !== 'text' || typeof block.text !== 'string') continue;
    const at = block.text.startsWith('**`') ? 0 : block.text.indexOf('\n**`') + 1;
    if (at > 0 || block.text.startsWith('**`')) block.text = block.text.slice(0, at) + PADDING + block.text.slice(at);
  }
  return JSON.stringify(message);
}
if (serving) {
  let buffer = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      process.stdout.write(pad(buffer.slice(0, nl)) + '\n');
      buffer = buffer.slice(nl + 1);
    }
  });
  child.stdout.on('end', () => { if (buffer) process.stdout.write(pad(buffer)); });
}
""".replace("PADDED_FILE", PADDED_FILE)


def degraded_checkout(root: Path) -> Path:
    """A local 'checkout' of the degraded build; files are rewritten only when they change, so the build (keyed
    by the checkout's path and files) is made once per machine."""
    files = {"package.json": json.dumps(PACKAGE_JSON, indent=2) + "\n", "bin/codegraph.js": WRAPPER}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    return root


def newest(out: Path) -> Path:
    return max((p.parent for p in out.glob("*/summary.json")), key=lambda p: p.name)


def records_of(campaign: Path) -> dict[str, dict]:
    data = json.loads((campaign / "summary.json").read_text())
    return {record["id"]: record for record in data["records"]}


def explores(record: dict) -> list:
    session = read_segments([Path(p) for p in record["driver"]["segments"]])
    return [c for c in session.calls if CODEGRAPH.is_explore(c.name)]


def test_record_once_then_replay_gates_two_builds(real_tools: RealTools, tag: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = inner_env(real_tools, tag)
    common = ["evals", "-k", "express", "--arms", "with", "--agent-eval-runs", "1", "--agent-eval-turns", "2"]
    common += ["--agent-eval-offline", f"--agent-eval-out={out}"]

    # 1. record (the scripted backend stands in for the real model) and keep it as a named baseline
    done = run_pytest([*common, "--agent-eval-backend", "scripted", "--agent-eval-save-baseline", "recorded"],
                      REPO, env, tmp_path / "record")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    saved = out / "baselines" / "recorded"
    assert "agent-eval: saved baseline recorded (1 record(s), " in done.stdout
    with tarfile.open(saved / "transcripts.tar.gz") as archive:
        assert sorted(archive.getnames()) == [
            "items/express-with-1/run-with-1.jsonl",
            "items/express-with-1/run-with-1.t2.jsonl",
        ]
    recorded = records_of(newest(out))["express-with-1"]
    assert recorded["figures"]["allocation"] > 0.5

    gate = ["--agent-eval-replay", "recorded", "--agent-eval-compare", "recorded"]
    gate += ["--agent-eval-compare-fail", "allocation:-5pt"]

    # 2. replay against the recorded build: the same calls get the same answers, and the gate passes
    done = run_pytest([*common, *gate], REPO, env, tmp_path / "same")
    assert done.returncode == 0, done.stdout[-4000:]
    assert f"REPLAY of {saved}: every model turn is the recorded one" in done.stdout
    assert re.search(r"agent-eval: gate: passed — 1 of 1 baseline \(entry, arm\) pair\(s\) compared", done.stdout)
    same_campaign = newest(out)
    same = records_of(same_campaign)["express-with-1"]
    assert same["backend"]["name"] == "cassette" and same["backend"]["replay"] == str(saved)
    assert [c.result.text for c in explores(same)] == [c.result.text for c in explores(recorded)]
    assert same["figures"]["allocation"] == recorded["figures"]["allocation"]
    page = (same_campaign / "report.html").read_text()
    assert 'id="replay-note"' in page and 'data-gate="passed"' in page

    # 3. replay against the degraded build: the recorded calls now get padded answers; allocation drops
    checkout = degraded_checkout(real_tools.cache / "e2e-fixtures" / "codegraph-padded")
    done = run_pytest([*common, *gate, f"--agent-eval-tool-version=local:{checkout}"], REPO, env, tmp_path / "bad")
    assert done.returncode == 1, done.stdout[-4000:]
    # the item fails its own allocation floor (agent-eval.yaml), and the session its comparison with the baseline
    assert re.search(r"\b1 failed\b", done.stdout) and "agent-eval gate failed for express / with" in done.stdout
    assert re.search(r"express +with +allocation .* FAILED allocation:-5pt", done.stdout)
    assert re.search(r"express +with +cost_usd .* \(not measured under replay\)", done.stdout)
    assert "agent-eval: REGRESSION in express: with allocation (allocation:-5pt)" in done.stdout
    assert "agent-eval: the session fails: gate: FAILED — 1 of 1 baseline (entry, arm) pair(s) compared" in (
        done.stdout
    )
    degraded_campaign = newest(out)
    assert degraded_campaign != same_campaign
    degraded = records_of(degraded_campaign)["express-with-1"]
    assert degraded["tool_spec"] == f"local:{checkout}"
    padded = explores(degraded)
    assert len(padded) == len(explores(recorded)) >= 2
    assert all(PADDED_FILE in [s.path for s in file_sections(c.result.text)] for c in padded)
    assert degraded["figures"]["allocation"] < recorded["figures"]["allocation"] - 0.05
    page = (degraded_campaign / "report.html").read_text()
    assert 'data-gate="failed"' in page and "FAILED allocation:-5pt" in page
    assert leftovers(tag, tmp_path) == []
