"""A pytester project run against a stand-in ``claude``: the corpus, the eval test, a conftest that replaces
provisioning, cloning and indexing, and the stand-in itself, which prints the transcripts a test scripts for each
(arm, question) and logs how it was called."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from support.paths import REPO
from support.sessions import with_clean, without_clean
from support.synth import Transcript

SECRET_KEY = "sk-ant-api03-" + "Q7rT9vLm2Xw8Kp4Zn6Bd" * 3

# The stand-in's side of a pytester conftest: claude is the stand-in, unsealed, with no hook to prove.
STANDIN_FIXTURES = """
from pathlib import Path

import pytest

from pytest_agent_eval.harness.provision import Provisioned

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def agent_build():
    return Provisioned("claude", HERE / "standin" / "claude", "standin", "standin")

@pytest.fixture
def agent_sandbox():
    return None  # the stand-in claude reads its transcripts from this test's tmp folder, which the sandbox hides


@pytest.fixture
def agent_block_proven():
    return None  # the stand-in claude runs no hooks: there is nothing to prove through it


@pytest.fixture
def tool_warm():
    return None  # the stand-in claude starts no MCP server: there is none to warm up
"""


def repo_fixture(name: str) -> str:
    """A conftest fixture ``name`` giving a one-file repository (lib/response.js)."""
    return f"""

@pytest.fixture
def {name}(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    (repo / "lib").mkdir()
    (repo / "lib" / "response.js").write_text("function send() {{}}\\n")
    return repo
"""


# ... and a codegraph that is never started, over a repository with nothing to index.
CONFTEST = (
    STANDIN_FIXTURES
    + """

@pytest.fixture
def tool_build(agent_case):
    # Never started: the stand-in claude does not launch MCP servers, and tool_warm skips the warm-up.
    return Provisioned("codegraph", Path("/opt/codegraph-not-here/bin/codegraph"), "1.6.1", "1.6.1")
"""
    + repo_fixture("indexed_repo")
)

# How many times the stand-in was called for one (arm, question), this call included. Two items of one question run
# side by side under xdist (two shards, -n 2): a bare read-then-write let one read the file the other had just
# truncated ('' is no number: the stand-in died, its shard exited 1), or both read the same count. The lock
# makes the read and the write one step.
NEXT_CALL = """
def next_call(counter):
    with open(counter.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        n = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(n))
    return n
"""

STANDIN = '''#!{python}
"""Stand-in claude: prints the transcript recorded for (arm, question); logs its argv and env.

The n-th call for one (arm, question) prints <arm>-<key>.call<n>.jsonl when that file exists; the index
the workspace carries says which codegraph built it (.codegraph/built-by, written by a fake codegraph).
"""
import fcntl, hashlib, json, os, sys, time
from pathlib import Path
{next_call}
root = Path(__file__).parent
argv = sys.argv[1:]


def opt(name):
    return argv[argv.index(name) + 1] if name in argv else None


arm = "with" if "codegraph" in Path(opt("--mcp-config")).name else "without"
keys = ("HOME", "TMPDIR", "PATH", "ANTHROPIC_BASE_URL", "CODEGRAPH_NO_PROMPT_HOOK", "DO_NOT_TRACK",
        "CODEGRAPH_NO_DAEMON", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER", "IS_SANDBOX", "ENABLE_TOOL_SEARCH", "CLAUDE_CODE_ENABLE_TASKS")
built_by = Path(".codegraph", "built-by")
record = {{"argv": argv, "cwd": os.getcwd(), "arm": arm, "env": {{k: os.environ.get(k) for k in keys}},
          "real_key": os.environ.get("ANTHROPIC_API_KEY") == {secret!r},
          "built_by": built_by.read_text().strip() if built_by.exists() else None}}
with open(root / "calls.jsonl", "a") as log:
    log.write(json.dumps(record) + "\\n")
key = hashlib.sha1(opt("-p").encode()).hexdigest()[:10]
counter = root / f"count-{{arm}}-{{key}}"
n = next_call(counter)
nth = root / f"{{arm}}-{{key}}.call{{n}}.jsonl"
lines = (nth if nth.exists() else root / f"{{arm}}-{{key}}.jsonl").read_text().splitlines()
mode = lines.pop(0)[1:] if lines and lines[0].startswith("#") else ""
for line in lines:
    if mode == "stall" and json.loads(line).get("type") == "result":
        time.sleep(600)
    if mode.startswith("pause") and json.loads(line).get("type") == "result":
        time.sleep(float(mode[len("pause"):]))  # silent, then done: a turn that stalled and recovered
    print(line, flush=True)
if mode == "hang":
    time.sleep(600)
'''.replace("{next_call}", NEXT_CALL)


def entry(name: str, question: str, language: str = "JavaScript") -> dict:
    return {
        "name": name,
        "repo": f"https://github.com/example/{name}",
        "size": "Small",
        "files": 10,
        "question": question,
        "_language": language,
    }


class Project:
    """A pytester folder with a corpus, the eval test, the stand-in claude and its transcripts."""

    def __init__(self, pytester: pytest.Pytester, entries: list[dict]) -> None:
        self.pytester = pytester
        self.path = pytester.path
        corpus: dict[str, list] = {}
        for item in entries:
            corpus.setdefault(item.pop("_language"), []).append(item)
        (self.path / "corpus.json").write_text(json.dumps(corpus, indent=2))
        pytester.makeconftest(CONFTEST)
        (self.path / "evals").mkdir()
        (self.path / "evals" / "test_ab.py").write_text((REPO / "evals" / "test_ab.py").read_text())
        self.standin = self.path / "standin"
        self.standin.mkdir()
        claude = self.standin / "claude"
        claude.write_text(STANDIN.format(python=sys.executable, secret=SECRET_KEY))
        claude.chmod(0o755)

    def script(
        self,
        arm: str,
        question: str,
        transcript: Transcript,
        mode: str = "",
        call: int | None = None,
        folder: Path | None = None,
    ) -> None:
        """What the stand-in prints for (arm, question): always, or only on its ``call``-th call for them; the
        stand-in in ``folder`` (another agent's) instead of the stand-in claude's."""
        key = hashlib.sha1(question.encode()).hexdigest()[:10]
        lines = ([f"#{mode}"] if mode else []) + transcript.lines()
        name = f"{arm}-{key}.call{call}.jsonl" if call else f"{arm}-{key}.jsonl"
        (folder or self.standin).joinpath(name).write_text("\n".join(lines) + "\n")

    def calls(self) -> list[dict]:
        log = self.standin / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def run(self, *args: str, in_subprocess: bool = False) -> pytest.RunResult:
        base = ["evals", "-p", "no:cacheprovider", "--agent-eval-backend", "scripted", "--agent-eval-out", "out", *args]
        if in_subprocess:
            return self.pytester.runpytest_subprocess(*base)
        return self.pytester.runpytest(*base)

    def campaigns(self) -> list[Path]:
        """The campaign folders under out/, oldest first by their manifests (names only order whole seconds)."""
        out = self.path / "out"
        folders = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
        return sorted(folders, key=lambda p: json.loads((p / "manifest.json").read_text())["created"])

    def campaign(self) -> Path:
        """The newest campaign folder."""
        return self.campaigns()[-1]

    def item_dir(self, item_id: str) -> Path:
        return self.campaign() / "items" / item_id

    def summary(self) -> dict:
        return json.loads((self.campaign() / "summary.json").read_text())


Q_EXPRESS = "How does res.send decide the Content-Type?"
Q_GIN = "How does gin route requests?"


def clean_scripts(project: Project) -> None:
    for question in (Q_EXPRESS, Q_GIN):
        project.script("with", question, with_clean())
        project.script("without", question, without_clean())
