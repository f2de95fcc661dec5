"""The shared turn runner (pytest_agent_eval/harness/drivers/turns.py): a driver that runs its turns through it gets
the hardening without copying it — its command started in the run's sandbox, its streams sockets the agent's shell
cannot reopen through /proc — and check-agent's stdout probe tells such a driver from one that bypasses it
(docs/extending.md, "A driver of your own" and "Checking a new agent")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from pytest_agent_eval.agents.base import AgentConfig, Drive, DriveOptions
from pytest_agent_eval.harness.drivers import TurnError
from pytest_agent_eval.harness.drivers.turns import Turns
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.run.conformance import FORGED, forged_lines, stdout_probe_command

RESULT = json.dumps({"type": "result"})
# A CLI played by a shell: it runs the agent's shell command ($0) as its child, as a CLI runs its shell tool, and
# prints what the command said as one event of its own, then the line that ends its turn.
CLI = (
    'out=$(sh -c "$0" 2>&1); '
    'printf \'{"type":"tool","said":"%s"}\\n\' "$(echo "$out" | tr "\\n\\"" "|\'")"; '
    "echo '@RESULT@'"
)


def _cli(command: str) -> list[str]:
    return ["sh", "-c", CLI.replace("@RESULT@", RESULT), command]


def _probe() -> str:
    return stdout_probe_command(os.getpid(), os.readlink("/proc/self/ns/pid"))


def _ends(raw: bytes) -> tuple[str, bool]:
    return "line", json.loads(raw).get("type") == "result"


def _turns(tmp_path: Path, questions: tuple[str, ...] = ("q",), sandbox: object = None) -> Turns:
    build = Provisioned("cli", tmp_path / "cli", "1", "1")
    options = DriveOptions(timeout_s=30.0, stall_s=30.0, sandbox=sandbox)  # type: ignore[arg-type]
    run = Drive(build, questions, mode="headless", config=AgentConfig(), options=options, label="with-1",
                out_dir=tmp_path / "out", cwd=tmp_path, env={"PATH": os.environ["PATH"]})  # fmt: skip
    return Turns.of(run, name="cli")


def test_through_the_runner_the_shell_cannot_reopen_the_cli_streams_and_nothing_forged_is_recorded(
    tmp_path: Path,
) -> None:
    turns = _turns(tmp_path)
    turn = next(iter(turns))
    outcome = turns.run(turn, _cli(_probe()), _ends)
    assert outcome.ended
    said = json.loads(turn.segment.read_text().splitlines()[0])["said"]
    cli = "/proc/" + said.split("/proc/", 1)[1].split("/", 1)[0]  # the first process tried: the CLI
    assert f"refused {cli}/fd/1 (sh): No such device or address" in said, said  # a socket: ENXIO
    assert f"refused {cli}/fd/2 (sh): No such device or address" in said, said
    assert forged_lines(turns.out_dir, "with-1") == [] and FORGED not in turn.stderr.read_text()


def test_a_driver_that_bypasses_the_runner_records_what_the_shell_forged_and_the_probe_names_where(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with (out / "run-with-1.jsonl").open("wb") as segment:  # a CLI's stdout straight into its segment: a file
        subprocess.run(_cli(_probe()), stdout=segment, stderr=subprocess.DEVNULL, timeout=30, check=True)
    said = json.loads((out / "run-with-1.jsonl").read_text().splitlines()[-2])["said"].replace("|", "\n")
    forged = forged_lines(out, "with-1", said)
    assert forged and forged[0][1] == "run-with-1.jsonl" and forged[0][0].endswith("/fd/1 (sh)"), (forged, said)
    with (out / "run-with-1.jsonl").open("ab") as segment:  # opened to append: the forged line itself is recorded
        subprocess.run(_cli(_probe()), stdout=segment, stderr=subprocess.DEVNULL, timeout=30, check=True)
    assert ("/fd/1 (sh)" in into for into, _ in forged_lines(out, "with-1"))


def test_outside_a_sandbox_the_probe_writes_into_nothing_that_is_not_below_the_harness(tmp_path: Path) -> None:
    """A shell the harness did not start (here: the harness's pid is another process's) leaves every stream alone."""
    other = subprocess.Popen(["sleep", "60"])  # a process of this namespace that is no ancestor of the shell
    try:
        command = stdout_probe_command(other.pid, os.readlink("/proc/self/ns/pid"))
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30)
    finally:
        other.kill()
        other.wait()
    assert "not below the harness" in done.stdout, done.stdout
    assert "opened" not in done.stdout and "refused" not in done.stdout, done.stdout


class _Sandbox:
    """Stands in for the run's sandbox: wraps each command, as bubblewrap's argv would."""

    def __init__(self) -> None:
        self.wrapped: list[list[str]] = []

    def wrap(self, command: list[str]) -> list[str]:
        self.wrapped.append(command)
        return ["env", "SANDBOXED=1", *command]


def test_a_plugin_driver_built_on_the_runner_starts_every_turn_in_the_run_sandbox_and_words_failures_alike(
    tmp_path: Path,
) -> None:
    sandbox = _Sandbox()
    turns = _turns(tmp_path, ("q1", "q2", "q3"), sandbox)
    commands = []
    for turn in turns:
        command = ["sh", "-c", f"echo \"$SANDBOXED\" >&2; echo '{RESULT}'; exit {3 if turn.number == 2 else 0}"]
        commands.append(command)
        outcome = turns.run(turn, command, _ends if turn.number == 1 else lambda raw: ("line", False))
        if turn.number == 2:
            error = turns.unended(turn, outcome)
            break
    assert sandbox.wrapped == commands and turns.record.exit_codes == [0, 3]
    assert str(error) == (
        f"turn 2: cli exited 3 without ending the turn ({turns.out_dir / 'run-with-1.t2.jsonl'}); stderr: 1"
        "; turns 3-3 not run"
    )
    assert isinstance(error, TurnError) and error.run is turns.record
