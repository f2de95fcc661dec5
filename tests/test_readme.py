"""README's and docs/'s examples run as written: every command of their ``bash`` blocks works on an offline machine
as printed, or says next to it what it needs (a ``# needs: …`` comment on its line, or on a comment line above it in the
block, for the commands that follow).

What is checked, per command:

* a command printed verbatim as a line of ``.ci/run`` is CI's to run (the install + main job, the test suite);
* ``pytest …`` without ``# needs:`` is collected as printed (``-n`` left out), and must collect without errors
  and select only corpus entries that have an offline ``source`` — collecting is what can be checked here without
  running agents, and an entry without one would need a clone;
* ``agent-eval …`` runs as printed; a ``score`` whose transcripts it ``needs`` runs on transcripts put at the
  printed paths (cheap, so it is run rather than trusted);
* a command that ``needs`` something only uses options its program has (``pytest --help``, ``agent-eval … --help``);
* every ``python`` block runs, in a folder holding the transcripts it reads.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from support.sessions import two_turn_run
from support.synth import write_grep_session
from support.transcripts import agent_records

from pytest_agent_eval.corpus.load import load_corpus

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").rglob("*.md")))  # README first: its first commands are the headline ones
CI = ROOT / ".ci" / "run"
NEEDS = re.compile(r"\bneeds:\s*(.+)$")
PLACEHOLDER = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Example:
    """One command of a page's bash blocks: where it is, the command as printed, its comment, what it needs."""

    line: int
    command: str
    comment: str
    needs: str | None
    page: Path = README

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {self.command}"


def split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing ``# comment``: the first ``#`` outside quotes that starts a word."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def blocks(language: str, page: Path = README) -> list[tuple[int, list[str]]]:
    """A page's fenced blocks of ``language``: the line number of each block's first line, and its lines."""
    found, current, start = [], None, 0
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if current is None and line.strip() == f"```{language}":
            current, start = [], number + 1
        elif current is not None and line.strip() == "```":
            found.append((start, current))
            current = None
        elif current is not None:
            current.append(line)
    return found


@cache
def examples() -> tuple[Example, ...]:
    """Every page's commands, README's first."""
    return tuple(e for page in PAGES for start, lines in blocks("bash", page) for e in commands(start, lines, page))


def python_blocks() -> list[tuple[Path, int, list[str]]]:
    return [(page, start, lines) for page in PAGES for start, lines in blocks("python", page)]


def commands(start: int, lines: list[str], page: Path = README) -> list[Example]:
    """The commands of one bash block, continuation lines joined. What a command needs is said by ``needs:`` in
    its own trailing comment, or in the comment lines right above it, which speak for every command below them up
    to the next comment."""
    found: list[Example] = []
    group_needs: str | None = None
    after_command = True
    pending, first = "", 0
    for offset, line in enumerate(lines):
        if not pending and line.lstrip().startswith("#"):
            if after_command:
                group_needs, after_command = None, False
            group_needs = needs_in(line.lstrip()[1:]) or group_needs
            continue
        if not pending:
            first = start + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command, comment = split_comment(pending + line)
        pending, after_command = "", True
        if command.strip():
            found.append(Example(first, " ".join(command.split()), comment, needs_in(comment) or group_needs, page))
    return found


def needs_in(comment: str) -> str | None:
    marker = NEEDS.search(comment)
    return marker.group(1).strip() if marker else None


def ci_lines() -> set[str]:
    return {line.strip() for line in CI.read_text(encoding="utf-8").splitlines()}


def by_ci(example: Example) -> bool:
    return example.command in ci_lines()


def offline_entries() -> dict[str, bool]:
    """Corpus entry name → whether it has an offline source."""
    return {entry.name: bool(entry.source) for entry in load_corpus(ROOT / "corpus.json")}


def entry_of(item_id: str, names: dict[str, bool]) -> str:
    """The corpus entry an item id (``express-with-1``, ``test_x.express-with:1.6.0-2``) belongs to."""
    matches = [name for name in names if re.match(rf"(\w+\.)?{re.escape(name)}-", item_id)]
    assert matches, f"{item_id}: no corpus entry"
    return max(matches, key=len)


def without_workers(argv: list[str]) -> list[str]:
    """The command without ``-n N``: collecting needs no workers."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "-n":
            skip = True
        elif not re.fullmatch(r"-n\d+|--numprocesses=\S+", arg):
            out.append(arg)
    return out


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A README command with this venv's executables first on PATH, so ``pytest`` and ``agent-eval`` are ours."""
    env = {**os.environ, **(env or {})}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("ANTHROPIC_API_KEY", None)  # offline means no key, too
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


# -- the README says what each command needs -----------------------------------------------------------------
def test_the_readme_has_commands_and_the_headline_ones_are_run_by_ci():
    commands = [e.command for e in examples()]
    assert len(commands) >= 25, commands  # the parser found the blocks
    pages = {e.page.relative_to(ROOT).as_posix() for e in examples()}
    assert {"README.md", "docs/usage.md", "docs/campaigns-and-ci.md", "docs/extending.md"} <= pages
    install_and_main_job, four_agents, tests = commands[0], commands[2], commands[3]
    assert install_and_main_job.endswith(
        "pytest evals -k express --agent-eval-backend scripted --agent-eval-offline -v"
    )
    assert four_agents == (
        "pytest evals -k express --agent-eval-agents claude-code,codex,gemini,opencode --arms with,without "
        "--agent-eval-backend scripted --agent-eval-offline -n 4"
    )
    assert tests == "pytest tests -n 2"
    assert all(by_ci(examples()[i]) for i in (0, 2, 3)), f"{CI} runs README's headline commands verbatim"
    assert examples()[3].page == README


def test_every_command_runs_offline_as_printed_or_says_what_it_needs():
    unclear = []
    for example in examples():
        if by_ci(example) or example.needs:
            continue
        program = example.argv[0]
        if program not in ("pytest", "agent-eval"):
            unclear.append(f"{example}  (neither pytest nor agent-eval, not run by CI, and no '# needs:')")
        elif PLACEHOLDER.search(example.command):
            unclear.append(f"{example}  (a <placeholder> to fill in: say what it needs)")
    assert not unclear, "\n".join(unclear)


def test_an_eval_command_that_needs_nothing_says_offline_and_scripted():
    """Without ``--agent-eval-offline`` an eval command calls the real models whenever a key is in the environment
    (the README's four-agent headline once did): one printed as needing nothing says both."""
    online = [
        str(e)
        for e in examples()
        if e.argv[:2] == ["pytest", "evals"] and not e.needs
        and not {"--agent-eval-offline", "--agent-eval-backend"} <= set(e.argv)
    ]  # fmt: skip
    assert not online, "\n".join(online)


def test_needs_are_read_from_the_line_or_the_comment_lines_above():
    sample = [
        "pytest evals -k express --agent-eval-offline   # an A/B",
        "# record once",
        "# needs: a key",
        "pytest evals -k express \\",
        "       --agent-eval-runs 3",
        "agent-eval score run.jsonl   # score it; needs: a transcript",
        "# a plain comment ends what the lines above said",
        'pytest -k "a # b" --x',
    ]
    found = commands(10, sample)
    assert [(e.line, e.command, e.needs) for e in found] == [
        (10, "pytest evals -k express --agent-eval-offline", None),
        (13, "pytest evals -k express --agent-eval-runs 3", "a key"),
        (15, "agent-eval score run.jsonl", "a transcript"),
        (17, 'pytest -k "a # b" --x', None),
    ]
    gin = next(e for e in examples() if " -k gin " in f" {e.command} ")
    assert "ANTHROPIC_API_KEY" in gin.needs and "network" in gin.needs


# -- the commands run ----------------------------------------------------------------------------------------
EVAL_COMMANDS = [e for e in examples() if e.argv[0] == "pytest" and not by_ci(e) and not e.needs]
IDS = {id(e): f"{e.page.stem}-line{e.line}" for e in examples()}


@pytest.mark.slow
@pytest.mark.parametrize("example", EVAL_COMMANDS, ids=[IDS[id(e)] for e in EVAL_COMMANDS])
def test_eval_commands_collect_only_entries_with_an_offline_source(example: Example):
    argv = [*without_workers(example.argv), "--collect-only", "-q", "-p", "no:cacheprovider"]
    done = run(argv, ROOT)
    assert done.returncode == 0, f"{example}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    summary = done.stdout.strip().splitlines()[-1]
    assert "error" not in summary, done.stdout[-2000:]
    ids = re.findall(r"::test_\w+\[(.+)\]$", done.stdout, re.M)
    assert ids, f"{example}: selected no agent item\n{done.stdout[-2000:]}"
    names = offline_entries()
    needing_network = sorted({entry_of(i, names) for i in ids if not names[entry_of(i, names)]})
    assert not needing_network, f"{example}: selects entries without an offline source: {needing_network}"


AGENT_EVAL_COMMANDS = [e for e in examples() if e.argv[0] == "agent-eval" and not by_ci(e)]
TRANSCRIPT = re.compile(r"^[\w.-]+\.jsonl$")


def supply_transcripts(example: Example, folder: Path) -> dict[str, str]:
    """Transcripts at the paths a ``score`` command names (its segment files, its ``--session`` folder under a
    HOME of the test's own); returns the environment to run it in."""
    two_turn_run(folder)  # run-with-1.jsonl + run-with-1.t2.jsonl
    records = {p.name.split("__", 1)[-1]: p for p in agent_records().rglob("*") if p.is_file()}
    for name in (arg for arg in example.argv if arg in records):  # another agent's record: the real one
        shutil.copyfile(records[name], folder / name)
    for name in (arg for arg in example.argv if TRANSCRIPT.match(arg) and not (folder / arg).exists()):
        shutil.copyfile(folder / ("run-with-1.t2.jsonl" if ".t2." in name else "run-with-1.jsonl"), folder / name)
    env = {"HOME": str(folder / "home")}
    if "--session" in example.argv:
        project = Path(example.argv[example.argv.index("--session") + 1].replace("~", env["HOME"], 1))
        project.mkdir(parents=True)
        write_grep_session(project / "0b7c.jsonl")
    return env


PLUGINS = ROOT / "tests" / "data" / "plugins"


@pytest.mark.slow
@pytest.mark.parametrize("example", AGENT_EVAL_COMMANDS, ids=[IDS[id(e)] for e in AGENT_EVAL_COMMANDS])
def test_agent_eval_commands_run_or_use_options_that_exist(example: Example, tmp_path: Path):
    argv = example.argv
    if argv[1:2] == ["score"] or not example.needs:
        env = supply_transcripts(example, tmp_path) if example.needs else {}
        argv = [a.replace("~", env["HOME"], 1) if a.startswith("~/") else a for a in argv]
        tool = next((a.split(":") for a in argv if re.fullmatch(r"\w+:[A-Z_]+", a)), None)
        if tool is not None:  # the README's own tool description, saved where the command imports it from
            module, attribute = tool
            (tmp_path / f"{module}.py").write_text(python_block_defining(attribute), encoding="utf-8")
            env["PYTHONPATH"] = str(tmp_path)
        if "example-agent" in argv:  # docs/extending.md's example distribution of plug-ins, installed
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(PLUGINS)]))
        done = run(argv, tmp_path, env)
        assert done.returncode == 0, f"{example}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert done.stdout.strip(), example
        return
    assert_options_exist(example, agent_eval_help(argv[1]))


@pytest.mark.slow
def test_commands_that_need_something_use_options_that_exist():
    for example in (e for e in examples() if e.argv[0] == "pytest" and e.needs and not by_ci(e)):
        assert_options_exist(example, pytest_help())


def assert_options_exist(example: Example, help_text: str) -> None:
    options = {arg.split("=", 1)[0] for arg in example.argv[1:] if arg.startswith("--")}
    unknown = sorted(o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", help_text))
    assert not unknown, f"{example}: no such option {unknown}"


@cache
def pytest_help() -> str:
    done = run(["pytest", "--help", "-p", "no:cacheprovider"], ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


@cache
def agent_eval_help(command: str) -> str:
    done = run(["agent-eval", command, "--help"], ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- the python blocks ---------------------------------------------------------------------------------------
def python_block_defining(name: str) -> str:
    """The python block that assigns ``name`` (``MYTOOL = RetrievalTool(…)``)."""
    return next("\n".join(lines) for _, _, lines in python_blocks() if any(x.startswith(f"{name} =") for x in lines))


@pytest.mark.parametrize(
    "page, start, lines", python_blocks(), ids=[f"{page.stem}-line{start}" for page, start, _ in python_blocks()]
)
def test_python_blocks_run(
    page: Path, start: int, lines: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
):
    two_turn_run(tmp_path)
    shutil.copyfile(tmp_path / "run-with-1.jsonl", tmp_path / "run.jsonl")
    shutil.copyfile(tmp_path / "run-with-1.t2.jsonl", tmp_path / "run.t2.jsonl")
    monkeypatch.chdir(tmp_path)
    code_text = "\n".join(lines)
    where = f"{page.relative_to(ROOT)}:{start}"
    code = compile(code_text, where, "exec")
    exec(code, {"__name__": f"doc_{page.stem}_{start}"})
    if re.search(r"\bprint\(", code_text):
        assert capsys.readouterr().out.strip(), f"{where}: printed nothing"
