"""What the plugin costs a suite that runs no eval, and how fast ``agent-eval score`` starts.

    python bench/load_bench.py [--runs N] [--instructions] [--wheel] [FILE]   # FILE: a transcript (bench/data's first)

Like hyperfine: N rounds that run each command once, in turn (so load from other processes weighs on both alike);
the plugin's cost is the median of the rounds' differences in CPU time, the score start-up the ratio of the
medians. Goals (docs/benchmarks.md): the plugin adds at most 20 ms to a one-test suite (``pytest`` vs
``pytest -p no:agent_eval``), and ``agent-eval score FILE`` takes at most 1.5× a bare ``python -c`` that decodes
the same file.

What is timed is what a user runs: the ``agent-eval`` console script, with the package's byte code compiled, as
``pip install`` leaves it (and as the standard library that ``python -c`` imports always is). Without that, under
``PYTHONDONTWRITEBYTECODE`` or from a read-only checkout, every run would compile the package from source again.

``--wheel`` measures the package as a user's project has it: the checkout's wheel installed into a fresh venv.
The checkout's own editable install hides a cost: pytest rewrites the asserts of an installed plugin's modules
and loads them through its own, slower reader, in every session.

``--instructions`` also counts the instructions each command executes (valgrind's callgrind, one run each): the
same count whatever else the machine is doing, where CPU times on a loaded machine swing by a tenth or more. It
also divides the score start-up into stages, each a ``python -c`` that imports what the score path imports (found
by running it): the standard modules alone, then the package's modules too, against the whole command.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
PACKAGE = Path(__file__).resolve().parent.parent / "pytest_agent_eval"
PLUGIN_BUDGET_S = 0.020
SCORE_RATIO = 1.5


# An installed package's modules are byte-compiled (pip does it at install); with PYTHONDONTWRITEBYTECODE set
# (as in some shells and CI images) every run would compile the checkout's sources again, and measure that.
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str], cwd: Path) -> float:
    """The command's CPU time (user + system): on a machine shared with other work, wall time measures the
    neighbours as much as the command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def rounds(commands: dict[str, list[str]], runs: int, cwd: Path) -> dict[str, list[float]]:
    """Each command's CPU times, one per round; a round runs every command once, in turn (the order alternating
    from round to round), so that what else the machine does weighs on both alike."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # warm-up: byte-code caches, the page cache
        timed(command, cwd)
    for round_ in range(runs):
        order = list(commands.items())
        for name, command in order if round_ % 2 == 0 else reversed(order):
            times[name].append(timed(command, cwd))
    return times


def median_difference(after: list[float], before: list[float]) -> float:
    """The median of the rounds' differences: steadier than the difference of two medians when the machine's
    load drifts between rounds."""
    return statistics.median(a - b for a, b in zip(after, before, strict=True))


def instructions(command: list[str], cwd: Path) -> int:
    """The instructions the command executes, as callgrind counts them."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        cwd=cwd,
        env=ENV,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return int(re.search(r"Collected : (\d+)", done.stderr).group(1))  # type: ignore[union-attr]


# Run in the measured interpreter: what scoring FILE imports, beyond what the interpreter had loaded at start.
_IMPORTS_PROBE = """\
import contextlib, io, sys
before = set(sys.modules)
from pytest_agent_eval.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["score", sys.argv[1]])
added = sorted(m for m in set(sys.modules) - before if sys.modules[m] is not None)
print(" ".join(m for m in added if m.partition(".")[0] in sys.stdlib_module_names))
print(" ".join(m for m in added if m.startswith("pytest_agent_eval")))
"""


def score_path_stages(python: str, transcript: Path) -> dict[str, str]:
    """``python -c`` programs that import what ``agent-eval score FILE`` imports, in two steps: the standard
    modules (with ``re`` and ``json``, which the decoding baseline and pip's console script import too), then the
    package's modules as well. What is left over the second is parsing the options, reading, scoring, printing."""
    done = subprocess.run(
        [python, "-c", _IMPORTS_PROBE, str(transcript)], env=ENV, check=True, capture_output=True, text=True
    )
    standard, package = (line.split() for line in done.stdout.splitlines())
    standard_imports = f"import re, json, {', '.join(standard)}"
    return {
        f"+ the {len(standard)} standard modules it imports": standard_imports,
        f"+ its {len(package)} modules of this package": f"{standard_imports}, {', '.join(package)}",
    }


def installed_wheel(venv: Path) -> str:
    """A fresh venv with this checkout's wheel installed (its dependencies from the index), as a user's project has
    it; its interpreter. Unlike the editable install of a checkout, pytest rewrites the asserts of an installed
    plugin's modules, and reads them back through its own, slower loader, in every session."""
    wheels = venv.parent / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(PACKAGE.parent)],
                   check=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", *map(str, wheels.glob("*.whl"))], check=True)
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--instructions", action="store_true", help="also count instructions (needs valgrind)")
    parser.add_argument(
        "--wheel", action="store_true", help="measure the package as a user has it: its wheel, in a fresh venv"
    )
    parser.add_argument("file", nargs="?", type=Path, default=None)
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (apt-get install valgrind)")
    transcript = (args.file or sorted(DATA.rglob("*.jsonl"))[0]).resolve()
    with tempfile.TemporaryDirectory() as folder:
        if args.wheel:
            python = installed_wheel(Path(folder) / "venv")  # pip compiled its byte code at install
        else:
            python = sys.executable
            compileall.compile_dir(PACKAGE, quiet=1)  # the byte code an install leaves (see the module docstring)
        # The console script beside the interpreter, as the user runs it; a checkout not installed runs the module.
        script = Path(python).with_name("agent-eval")
        agent_eval = [str(script)] if script.is_file() else [python, "-m", "pytest_agent_eval.cli"]
        suite = Path(folder) / "suite"
        suite.mkdir()
        (suite / "test_one.py").write_text("def test_one():\n    assert True\n")
        # As a user runs it, header included: pytest reads every plugin's metadata for it (-q would skip that).
        pytest = [python, "-m", "pytest", "-p", "no:cacheprovider", "test_one.py"]
        plugin_commands = {"without": [*pytest, "-p", "no:agent_eval"], "with": pytest}
        plugin_times = rounds(plugin_commands, args.runs, suite)
        plugin = {name: statistics.median(values) for name, values in plugin_times.items()}
        if args.instructions:
            plugin_counts = {name: instructions(command, suite) for name, command in plugin_commands.items()}
        decode = f"import json\nfor line in open({str(transcript)!r}, encoding='utf-8'):\n    json.loads(line)"
        score_commands = {
            "python -c": [python, "-c", decode],
            "agent-eval score": [*agent_eval, "score", str(transcript)],
        }
        score_times = rounds(score_commands, args.runs, Path.cwd())
        if args.instructions:
            counts = {name: instructions(command, Path.cwd()) for name, command in score_commands.items()}
            stages = {
                name: instructions([python, "-c", program], Path.cwd())
                for name, program in score_path_stages(python, transcript).items()
            }
    score = {name: statistics.median(values) for name, values in score_times.items()}
    added = median_difference(plugin_times["with"], plugin_times["without"])
    ratio = score["agent-eval score"] / score["python -c"]
    print(
        f"one-test suite, median of {args.runs}: -p no:agent_eval {plugin['without'] * 1000:.0f} ms, "
        f"with the plugin {plugin['with'] * 1000:.0f} ms; the plugin adds {added * 1000:+.0f} ms, the median of the "
        f"rounds' differences (goal ≤ {PLUGIN_BUDGET_S * 1000:.0f})"
    )
    print(
        f"{transcript.name}, median of {args.runs}: python -c decoding {score['python -c'] * 1000:.0f} ms, "
        f"agent-eval score {score['agent-eval score'] * 1000:.0f} ms: {ratio:.2f}× (goal ≤ {SCORE_RATIO}×)"
    )
    if args.instructions:
        extra = plugin_counts["with"] - plugin_counts["without"]
        # In ms at the suite's own rate (its median CPU time over its instructions): a figure no neighbour moves.
        rate = plugin["without"] / plugin_counts["without"]
        print(
            f"one-test suite, instructions: -p no:agent_eval {plugin_counts['without'] / 1e6:.0f} M, with the plugin "
            f"{plugin_counts['with'] / 1e6:.0f} M: +{extra / 1e6:.0f} M, ≈ {extra * rate * 1000:.0f} ms at the "
            "suite's rate"
        )
        print(
            f"{transcript.name}, instructions: python -c decoding {counts['python -c'] / 1e6:.0f} M, "
            f"agent-eval score {counts['agent-eval score'] / 1e6:.0f} M: "
            f"{counts['agent-eval score'] / counts['python -c']:.2f}×"
        )
        # Where the start-up goes: each stage as a multiple of the baseline, against the goal's budget.
        baseline = counts["python -c"]
        print(f"agent-eval score's start-up by stage (the goal allows {baseline * SCORE_RATIO / 1e6:.0f} M):")
        for name, count in [("python -c decoding the file", baseline), *stages.items(),
                            ("agent-eval score FILE", counts["agent-eval score"])]:  # fmt: skip
            print(f"  {name:<48} {count / 1e6:6.0f} M  {count / baseline:.2f}×")
    return 0 if added <= PLUGIN_BUDGET_S and ratio <= SCORE_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
