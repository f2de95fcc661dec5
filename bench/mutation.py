"""Mutation testing, one module at a time: how much of a module's behaviour its tests pin.

    pip install 'mutmut>=3.8,<4'
    python bench/mutation.py pytest_agent_eval/metrics/sufficiency.py     # or metrics/sufficiency.py
    python bench/mutation.py metrics/allocation.py tool/cli_matcher.py   # one after another, never side by side

mutmut 3 changes the module one small edit at a time (a ``+=`` made ``=``, a ``<`` made ``<=``, a string
altered, a ``continue`` made ``break``…) and runs, for each of these mutants, the tests that reach the function
it changed; a mutant no test fails on *survived*: a change of behaviour the suite would let through. The tests
are the fast test files that import the module (``-m "not slow"``), or the ones bench/mutation.yaml lists for it;
each mutant's tests are stopped after mutmut's time limit (a multiple of their clean run, bench/mutation.yaml),
and one mutant runs at a time (``--jobs``).

Each module is mutated in a scratch copy of the package and its tests (``$TMPDIR/pytest-agent-eval-mutation/``,
never the work tree), and prints its score, killed (or timed out) over the mutants tested, and every survivor as
the line it changed. A survivor that no input can tell from the original is *equivalent*: its judgement is kept in
bench/mutation.yaml (the function and the mutated line, and why), and printed under it. A judgement whose line no
longer survives is reported stale. The scores and the date go in docs/benchmarks.md, "Mutation testing".
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "pytest_agent_eval"
CONFIG = REPO / "bench" / "mutation.yaml"
# Outside the work tree: tests that walk the repository (tests/test_contamination.py) must not find the copies.
SCRATCH = Path(tempfile.gettempdir()) / "pytest-agent-eval-mutation"
KILLED = {"killed", "timeout", "caught by type check"}
COUNTER = re.compile(r"\d+/\d+\s")  # mutmut's "done/total  🎉 killed … 🙁 survived" line
PROGRESS_S = 20.0


@dataclass
class Survivor:
    name: str  # mutmut's: <dotted module>.x_<function>__mutmut_<n>
    status: str  # survived, no tests, suspicious…
    function: str
    removed: list[str]
    added: list[str]
    judgement: str | None = None


@dataclass
class Score:
    module: str
    tests: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[Survivor] = field(default_factory=list)
    stale: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tested(self) -> int:
        return sum(n for status, n in self.counts.items() if status != "skipped")

    @property
    def killed(self) -> int:
        return sum(self.counts.get(status, 0) for status in KILLED)

    @property
    def score(self) -> float:
        return 100.0 * self.killed / self.tested if self.tested else 0.0


def module_path(name: str) -> Path:
    """``metrics/sufficiency.py``, ``pytest_agent_eval/metrics/sufficiency.py`` or ``metrics.sufficiency``: the
    module's file, relative to the repository."""
    text = name.removeprefix(f"{PACKAGE}/").removeprefix(f"{PACKAGE}.")
    if not text.endswith(".py"):
        text = text.replace(".", "/") + ".py"
    path = Path(PACKAGE) / text
    if not (REPO / path).is_file():
        raise SystemExit(f"bench/mutation.py: no module {name!r} (looked for {path})")
    return path


def dotted(path: Path) -> str:
    return ".".join(path.with_suffix("").parts)


def load_config() -> dict[str, Any]:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8")) or {}
    for n, judgement in enumerate(config.get("equivalent") or [], 1):
        missing = {"module", "function", "line", "why"} - set(judgement)
        if missing:
            raise SystemExit(f"{CONFIG.relative_to(REPO)}: equivalent #{n} lacks {', '.join(sorted(missing))}")
    return config


def importers(path: Path) -> list[str]:
    """The test files that import the module, by name (``import a.b.c``, ``from a.b.c import``, ``from a.b import
    c``); their slow tests are deselected when they run."""
    parent, name = dotted(path).rsplit(".", 1)
    pattern = re.compile(
        rf"^\s*(?:from|import)\s+{re.escape(dotted(path))}\b|^\s*from\s+{re.escape(parent)}\s+import\s+[^\n]*\b{name}\b",
        re.M,
    )
    return sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "tests").glob("test_*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    )


def module_settings(path: Path, config: dict[str, Any]) -> dict[str, Any]:
    return (config.get("modules") or {}).get(str(path.relative_to(PACKAGE))) or {}


def test_files(path: Path, config: dict[str, Any]) -> list[str]:
    return module_settings(path, config).get("tests") or importers(path)


def prepare(path: Path, tests: list[str], config: dict[str, Any], folder: Path) -> None:
    """A scratch copy of the package and its tests, with a pyproject.toml whose [tool.mutmut] mutates this module
    only (mutmut reads its config from the folder it runs in, and copies what it tests into ``mutants/``)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / PACKAGE, folder / PACKAGE, ignore=ignore)
    shutil.copytree(REPO / "tests", folder / "tests", ignore=ignore)
    data = list(module_settings(path, config).get("copy", []))  # what the tests read besides themselves
    for name in data:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, folder / name, ignore=ignore)
        else:
            shutil.copy2(source, folder / name)
    settings = config.get("mutmut") or {}
    table = {
        "also_copy": data,
        "source_paths": [PACKAGE],
        "only_mutate": [str(path)],
        "pytest_add_cli_args": [
            *(config.get("pytest_args") or []),
            *module_settings(path, config).get("pytest_args", []),
        ],
        "pytest_add_cli_args_test_selection": tests,
        **settings,
    }
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    lines = [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    (folder / "pyproject.toml").write_text(pyproject + "\n[tool.mutmut]\n" + "\n".join(lines) + "\n", encoding="utf-8")


def mutmut(folder: Path, *args: str, progress: bool = False) -> str:
    """mutmut's output; with ``progress``, its counter (mutants done, killed, survived) every ``PROGRESS_S``
    seconds in place of its spinner."""
    process = subprocess.Popen(
        [sys.executable, "-m", "mutmut", *args],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert process.stdout is not None
    kept, line, shown = [], [], 0.0
    while chunk := process.stdout.read(1):
        if chunk not in "\r\n":
            line.append(chunk)
            continue
        text = "".join(line).strip(" ⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
        line = []
        kept.append(text)
        if progress and COUNTER.match(text) and time.monotonic() - shown >= PROGRESS_S:
            print(f"   {text}", flush=True)
            shown = time.monotonic()
    kept.append("".join(line))
    if process.wait() != 0:
        tail = "\n".join(kept[-40:])
        raise SystemExit(f"mutmut {' '.join(args)} failed in {folder} (exit {process.returncode}):\n{tail}")
    return "\n".join(kept)


def statuses(folder: Path, path: Path) -> dict[str, str]:
    """Each mutant's status, from mutmut's record of the run (``mutants/<module>.meta``)."""
    from mutmut.stats import status_by_exit_code  # only here: the bench's one outside requirement

    meta = json.loads((folder / "mutants" / f"{path}.meta").read_text(encoding="utf-8"))
    return {name: status_by_exit_code[code] for name, code in meta["exit_code_by_key"].items()}


def mutant_sources(mutated: Path) -> dict[str, list[str]]:
    """Each function mutmut wrote into the mutated module (the original, ``…__mutmut_orig``, and every mutant), as
    its lines with the ``def`` line's name made the same, so a diff of two shows only the mutation."""
    lines = mutated.read_text(encoding="utf-8").splitlines(keepends=True)
    found: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse("".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            body = lines[node.lineno - 1 : node.end_lineno]
            found[node.name] = [body[0].replace(node.name, "f", 1), *body[1:]]
    return found


def diff_lines(text: str) -> tuple[list[str], list[str]]:
    removed = [line[1:].strip() for line in text.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return removed, added


def function_of(name: str) -> str:
    """``….x_f__mutmut_3`` → ``f``; a method's ``….xǁClassǁmethod__mutmut_3`` → ``Class.method``."""
    mangled = re.sub(r"__mutmut_\d+$", "", name.rsplit(".", 1)[-1])
    if mangled.startswith("xǁ"):
        return mangled.removeprefix("xǁ").replace("ǁ", ".")
    return mangled.removeprefix("x_")


def judge(score: Score, path: Path, config: dict[str, Any]) -> None:
    """Attach each kept judgement to the survivor it names (same function, same mutated line); the rest are stale."""
    kept = [j for j in config.get("equivalent") or [] if j["module"] == str(path.relative_to(PACKAGE))]
    used: set[int] = set()
    for survivor in score.survivors:
        for n, j in enumerate(kept):
            if j["function"] == survivor.function and j["line"].strip() in survivor.added:
                survivor.judgement = j["why"]
                used.add(n)
                break
    score.stale = [j for n, j in enumerate(kept) if n not in used]


def refresh_tests(folder: Path) -> None:
    """The tests as they are now, in place of the copy the last run made (mutmut collects the new ones' stats)."""
    shutil.rmtree(folder / "tests")
    shutil.copytree(REPO / "tests", folder / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def run(path: Path, config: dict[str, Any], jobs: int, again: bool = False, last: bool = False) -> Score:
    tests = test_files(path, config)
    folder = SCRATCH / dotted(path)
    score = Score(str(path), tests)
    print(f"== {path}: mutating against {len(tests)} test file(s): {' '.join(tests)}", flush=True)
    started = time.monotonic()
    copied = folder / path
    if last and (folder / "mutants" / f"{path}.meta").is_file():
        print("   the last run's results, judged again", flush=True)
    elif again and copied.is_file() and copied.read_bytes() == (REPO / path).read_bytes():
        # The module as the last run mutated it: only what survived then can change its status now.
        refresh_tests(folder)
        left = [name for name, status in statuses(folder, path).items() if status not in KILLED | {"skipped"}]
        print(f"   again: the last run's {len(left)} survivor(s) against the tests as they are now", flush=True)
        if left:
            mutmut(folder, "run", "--max-children", str(jobs), *left, progress=True)
    else:
        if again:
            print("   again: the module changed since the last run (or none was made): every mutant", flush=True)
        prepare(path, tests, config, folder)
        mutmut(folder, "run", "--max-children", str(jobs), progress=True)
    score.seconds = time.monotonic() - started
    found = statuses(folder, path)
    for status in found.values():
        score.counts[status] = score.counts.get(status, 0) + 1
    sources = mutant_sources(folder / "mutants" / path)
    for name, status in sorted(found.items(), key=lambda item: mutant_order(item[0])):
        if status in KILLED or status == "skipped":
            continue
        local = name.rsplit(".", 1)[-1]
        original = sources.get(re.sub(r"__mutmut_\d+$", "__mutmut_orig", local))
        if local in sources and original is not None:
            text = "".join(difflib.unified_diff(original, sources[local], "a", "b", n=0))
        else:  # not laid out as this version of mutmut did: ask it
            text = mutmut(folder, "show", name)
        removed, added = diff_lines(text)
        score.survivors.append(Survivor(name, status, function_of(name), removed, added))
    judge(score, path, config)
    return score


def mutant_order(name: str) -> tuple[str, int]:
    head, _, n = name.rpartition("__mutmut_")
    return head, int(n) if n.isdigit() else 0


def report(score: Score) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(score.counts.items()))
    judged = sum(1 for s in score.survivors if s.judgement and not s.judgement.startswith("NOT equivalent"))
    lines = [
        f"{score.module}: {score.score:.1f}% ({score.killed}/{score.tested} killed; {counts}; "
        f"{len(score.survivors)} not killed, {judged} judged equivalent; {score.seconds:.0f} s)"
    ]
    for s in score.survivors:
        change = f"{' / '.join(s.removed) or '?'}  ->  {' / '.join(s.added) or '(removed)'}"
        lines.append(f"  {s.status:9} {s.function}: {change}")
        if s.judgement:
            said = s.judgement if s.judgement.startswith("NOT equivalent") else f"equivalent: {s.judgement}"
            lines.append(f"            # {said}")
    for j in score.stale:
        lines.append(f"  stale judgement ({j['function']}: {j['line']}): no such survivor now")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", metavar="MODULE", help="e.g. metrics/sufficiency.py")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run side by side (default 1: shared cores)")
    parser.add_argument("--json", type=Path, help="also write the scores and survivors here")
    parser.add_argument(
        "--again",
        action="store_true",
        help="after adding tests: re-run only the last run's survivors (when the module itself is unchanged)",
    )
    parser.add_argument("--last", action="store_true", help="print the last run's results again, judged anew")
    args = parser.parse_args(argv)
    try:
        import mutmut  # noqa: F401
    except ImportError:
        raise SystemExit("bench/mutation.py needs mutmut 3: pip install 'mutmut>=3.8,<4'") from None
    config = load_config()
    paths = [module_path(name) for name in args.modules]
    scores = []
    for path in paths:
        scores.append(run(path, config, args.jobs, args.again, args.last))
        print(report(scores[-1]), flush=True)
    print(f"\n{time.strftime('%Y-%m-%d')}, mutmut {_version()}:")
    for score in scores:
        print(f"  {score.module:45} {score.score:5.1f}%  ({score.killed}/{score.tested})")
    if args.json:
        args.json.write_text(json.dumps([s.__dict__ | {"score": s.score} for s in scores], default=vars, indent=1))
    return 0


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


if __name__ == "__main__":
    sys.exit(main())
