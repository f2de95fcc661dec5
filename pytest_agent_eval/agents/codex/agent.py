"""Codex CLI as a :class:`~pytest_agent_eval.agents.base.CodingAgent`: ``CODEX``.

What is Codex's own lives in this package: its config (:mod:`.config`: ``CODEX_HOME``, the deny rules), its driver
(:mod:`.driver`: ``codex exec --json``, ``exec resume``, the rollout copied out), its transcript reader
(:mod:`.transcript`), how the stand-in speaks its tools (:mod:`.stand_in`), its cassette (:mod:`.cassette`). The
harness, the sandbox and the metrics are the same as Claude Code's. The driver and the reader are imported when first
used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.base import HEADLESS, AgentConfig, AgentSetup, CodingAgent, Drive, ModelApi
from pytest_agent_eval.agents.codex.config import (
    KEY_VAR,
    STANDIN_API_KEY,
    codex_home,
    protected_files,
    write_codex_home,
)
from pytest_agent_eval.harness.binds import HOME_FILES
from pytest_agent_eval.tool import HOOK_DENY_MARKER

if TYPE_CHECKING:
    from pytest_agent_eval.agents.codex.transcript import CodexSession
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.transcript import Session
    from pytest_agent_eval.transcript.sample import Sample

# The model Codex is configured to ask for: one it has no metadata for. For every model it knows, Codex offers MCP
# tools only behind a tool_search tool; an unknown one gets the MCP namespace in the first request (and a warning
# item in the event stream, which the reader keeps as a notice). It is the scripted stand-in's own name.
CONFIGURED_MODEL = "stand-in-scripted"
_CHECK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CodexAgent(CodingAgent):
    """OpenAI's Codex CLI, pinned, driven headless with ``codex exec --json``; speaks the Responses API."""

    name: str = "codex"
    title: str = "Codex CLI"
    package: str = "@openai/codex"
    version: str = "0.171.0"
    executable: str = "codex"
    api: ModelApi = "responses"
    stand_in: str | None = "codex"  # the scripted stand-in speaks its tools (CodingAgent.stand_in)
    modes: tuple[str, ...] = (HEADLESS,)
    runtimes: tuple[str, ...] = ("node",)  # bin/codex.js starts the native binary of the platform package
    passed_env: frozenset[str] = frozenset()
    # Codex runs its shell commands itself, behind no prefix the jail could take, through the shell its user's
    # password entry names (by absolute path; $SHELL and PATH are not looked at): the sandbox names the jail's there.
    shell_prefix_var: str | None = None
    shell_from: str | None = "passwd"
    # The machine's managed config and requirements (/etc/codex/managed_config.toml, requirements.toml).
    managed_paths: tuple[Path, ...] = field(default=(Path("/etc/codex"),))
    model: str = CONFIGURED_MODEL

    def environment(self, model_url: str) -> dict[str, str]:
        """No telemetry; the placeholder key Codex's provider reads (``env_key``). The model URL is in the config
        file, written by :meth:`configure`."""
        return {"DO_NOT_TRACK": "1", KEY_VAR: STANDIN_API_KEY}

    def configure(self, setup: AgentSetup) -> AgentConfig:
        """A fresh ``CODEX_HOME`` in the attempt's HOME (:mod:`.config`); the harness's config file and rules folder
        (Codex loads every ``rules/*.rules``: a file the agent added would be loaded by the next turn, and one that
        does not parse stops it) and its empty user configuration are written in the item's config folder and bound
        read-only over their places there; the rest of it (sessions, state) is the agent's."""
        source = setup.config_dir / HOME_FILES
        binds = write_codex_home(
            source,
            setup.home,
            model_url=setup.model_url,
            model=self.model,
            mcp_servers=setup.mcp_servers,
            denied_cli=setup.denied_cli,
            deny_reason=setup.deny_reason,
        )
        config, rules = protected_files(source)
        folder = codex_home(setup.home)
        return AgentConfig(
            files={"codex_home": folder, "config": config, "rules": rules},
            env={"CODEX_HOME": str(folder)},
            binds=binds,
        )

    def check_deny(self, config: AgentConfig, cli: str, env: Mapping[str, str], proven: set[str]) -> list[str]:
        """Codex's own policy engine (``codex execpolicy check``) on the rules file: ``<cli> --version`` must be
        forbidden with the harness's reason (the mark the contamination metric reads), ``ls`` allowed."""
        import hashlib  # here: agent-eval score loads this description to ask it whose a record is
        import shutil

        rules = Path(config.files["rules"])
        key = f"codex rules {hashlib.sha256(rules.read_bytes()).hexdigest()}"
        if key in proven:
            return []
        binary = shutil.which(self.executable, path=env.get("PATH"))
        if binary is None:
            return [f"{self.executable} is not on the agent's PATH: the deny rules cannot be checked"]
        marker = HOOK_DENY_MARKER.format(cli=cli)
        problems = []
        for command, forbidden in (([cli, "--version"], True), (["ls"], False)):
            decision, said = _policy_decision(binary, rules, command, env)
            if decision is None:
                problems.append(f"codex execpolicy check on {rules} failed for `{' '.join(command)}`: {said}")
            elif (decision == "forbidden") != forbidden:
                problems.append(f"{rules}: `{' '.join(command)}` is {decision or 'allowed'} ({said})")
            elif forbidden and marker not in said:
                problems.append(f"{rules}: `{' '.join(command)}` is refused without the mark {marker!r} ({said})")
        if not problems:
            proven.add(key)
        return problems

    def block_probe(self, command: str) -> Any:
        from pytest_agent_eval.model.probe import TurnProbe  # its call spoken in Codex's tools (stand_in.py)

        return TurnProbe(command)

    def run_session(self, run: Drive) -> RunRecord:
        from pytest_agent_eval.agents.codex.driver import CodexOptions, run_codex

        home = Path(run.config.files["codex_home"]).parent
        if Path(run.env.get("HOME", "")) != home:
            raise ValueError(f"the CODEX_HOME {codex_home(home)} is not in the agent's HOME {run.env.get('HOME')}")
        options = run.options
        codex = CodexOptions(
            codex=str(run.build.bin), timeout_s=options.timeout_s, stall_s=options.stall_s, sandbox=options.sandbox
        )
        return run_codex(run.questions, label=run.label, out_dir=run.out_dir, cwd=run.cwd, env=run.env, options=codex)

    def record_files(self, segments: Sequence[Path]) -> list[Path]:
        """The turns' streams and the rollouts the driver kept beside the first (``run-<label>.rollout``, and the
        subagents' ``run-<label>.subagents``)."""
        from pytest_agent_eval.agents.codex.transcript import kept_rollout, kept_subagents

        return [*segments, kept_rollout(segments[0]), kept_subagents(segments[0])] if segments else []

    def recognise(self, sample: Sample) -> str | None:
        from pytest_agent_eval.agents.codex.transcript import recognise

        return recognise(sample)

    def read_record(self, files: Sequence[Path], kind: str, companion: Path | None = None) -> list[Session]:
        """A rollout alone, or the turns' ``--json`` streams with their rollout (``companion``, or found beside the
        first), or the streams alone, read as far as they go (:func:`~.transcript.read_codex_record`)."""
        from pytest_agent_eval.agents.codex.transcript import read_codex_record

        return [read_codex_record(list(files), kind, companion)]

    def read_transcript(self, segments: Sequence[Path]) -> CodexSession:
        """The turns' ``--json`` streams and the rollout the driver kept beside the first
        (:func:`~.transcript.find_rollout`); a rollout given as the only segment is read alone."""
        from pytest_agent_eval.agents.codex.transcript import EVENTS_KIND, read_codex_record, recognise
        from pytest_agent_eval.transcript.sample import sample

        paths = list(segments)
        kind = recognise(sample(paths[0])) if paths else None
        return read_codex_record(paths, kind or EVENTS_KIND)

    def speech(self) -> Any:
        from pytest_agent_eval.agents.codex.stand_in import SPEECH

        return SPEECH

    def cassette(self, segments: Sequence[Path]) -> Any:
        """Its run replayed over the Responses API from the rollout beside its streams (:mod:`.cassette`)."""
        from pytest_agent_eval.agents.codex.cassette import ResponsesCassetteBackend

        return ResponsesCassetteBackend(segments)


def _policy_decision(binary: str, rules: Path, command: list[str], env: Mapping[str, str]) -> tuple[str | None, str]:
    """(decision, what Codex said): ``""`` when no rule matched, None when the check itself failed."""
    import subprocess

    argv = [binary, "execpolicy", "check", "--rules", str(rules), "--", *command]
    try:
        done = subprocess.run(argv, env=dict(env), capture_output=True, text=True, timeout=_CHECK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return None, (done.stderr or done.stdout).strip()[-300:]
    said = "; ".join(
        str(match.get("prefixRuleMatch", {}).get("justification", "")) for match in answer.get("matchedRules") or []
    )
    return str(answer.get("decision") or ""), said


CODEX = CodexAgent()
