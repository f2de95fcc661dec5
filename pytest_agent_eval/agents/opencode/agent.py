"""OpenCode as a :class:`~pytest_agent_eval.agents.base.CodingAgent`: ``OPENCODE``.

What is OpenCode's own lives in this package: its config (:mod:`.config`: the config file, its environment, the
deny of the tool's CLI as a permission rule), its driver (:mod:`.driver`: ``opencode run --format json``,
``--session`` for later turns), its transcript reader (:mod:`.transcript`), its block probe (:mod:`.probe`). The
harness, the sandbox and the metrics are the same as the other agents'. The driver, the reader and the probe are
imported when first used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.base import HEADLESS, AgentConfig, AgentSetup, CodingAgent, Drive, ModelApi
from pytest_agent_eval.agents.opencode.config import (
    AGENT_ENV,
    RUN_AGENT,
    XDG_DIRS,
    config_json,
    environment,
    home_files,
    write_config,
)
from pytest_agent_eval.harness.binds import HOME_FILES, make_dirs, seal_home
from pytest_agent_eval.tool import HOOK_DENY_MARKER

if TYPE_CHECKING:
    from pytest_agent_eval.agents.opencode.transcript import OpenCodeSession
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.transcript import Session
    from pytest_agent_eval.transcript.sample import Sample

_CHECK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class OpenCodeAgent(CodingAgent):
    """OpenCode, pinned, driven headless with ``opencode run --format json``; speaks the Messages API (its
    ``anthropic`` provider pointed at the harness's model server)."""

    name: str = "opencode"
    title: str = "OpenCode"
    package: str = "opencode-ai"
    version: str = "1.18.33"
    executable: str = "opencode"
    api: ModelApi = "messages"
    stand_in: str | None = "opencode"  # the scripted stand-in speaks its tools (CodingAgent.stand_in)
    modes: tuple[str, ...] = (HEADLESS,)
    runtimes: tuple[str, ...] = ()  # a native binary (the platform package's, linked in by its postinstall)
    passed_env: frozenset[str] = frozenset()
    # OpenCode runs its shell commands itself, behind no prefix the jail could take, through $SHELL (the passwd
    # entry is not looked at): the sandbox sets the jail's there.
    shell_prefix_var: str | None = None
    shell_from: str | None = "SHELL"
    # The machine's managed config (read last, over the harness's).
    managed_paths: tuple[Path, ...] = field(default=(Path("/etc/opencode"),))

    def environment(self, model_url: str) -> dict[str, str]:
        """No model list fetched, no updates, no sharing, no project config (:data:`.config.AGENT_ENV`). The model
        URL and the placeholder key are in the config file, written by :meth:`configure`."""
        return dict(AGENT_ENV)

    def configure(self, setup: AgentSetup) -> AgentConfig:
        """The config file in the item's config folder (shown read-only), the attempt's XDG folders in its HOME, and
        OpenCode's global config folders there (``$XDG_CONFIG_HOME/opencode``, ``~/.opencode``) empty and read-only:
        the harness's empty folders bound over them (:mod:`pytest_agent_eval.harness.binds`), so no turn installs
        instructions, an agent, a plugin or an MCP server for the next."""
        config = config_json(setup.model_url, setup.mcp_servers, setup.denied_cli, setup.deny_reason)
        path = write_config(setup.config_dir, config)
        binds = seal_home(setup.config_dir / HOME_FILES, setup.home, home_files())
        for relative in XDG_DIRS.values():
            make_dirs(setup.home, relative)
        env = environment(setup.home, path, setup.denied_cli, setup.deny_reason)
        return AgentConfig(files={"config": path}, env=env, readable=(path,), binds=binds)

    def check_deny(self, config: AgentConfig, cli: str, env: Mapping[str, str], proven: set[str]) -> list[str]:
        """OpenCode's own resolution of its permissions (``opencode debug agent build``, in the agent's environment),
        read as OpenCode applies them (the last matching rule wins): ``<cli> --version`` must be denied, with a
        rule bearing the harness's mark (which OpenCode's refusal lists), ``ls`` allowed."""
        import hashlib  # here: agent-eval score loads this description to ask it whose a record is
        import shutil

        path = Path(config.files["config"])
        key = f"opencode permission {hashlib.sha256(path.read_bytes() + json.dumps(dict(env)).encode()).hexdigest()}"
        if key in proven:
            return []
        binary = shutil.which(self.executable, path=env.get("PATH"))
        if binary is None:
            return [f"{self.executable} is not on the agent's PATH: the deny cannot be checked"]
        rules, said = _resolved_rules(binary, path.parent, env)
        if rules is None:
            return [f"opencode debug agent {RUN_AGENT} failed with {path}: {said}"]
        marker = HOOK_DENY_MARKER.format(cli=cli)
        problems = []
        for command, wanted in ((f"{cli} --version", "deny"), ("ls", "allow")):
            action = bash_action(rules, command)
            if action != wanted:
                problems.append(f"{path}: OpenCode's bash permission for `{command}` is {action}, not {wanted}")
        if not any(r.get("permission") == "bash" and marker in str(r.get("pattern")) for r in rules):
            problems.append(f"{path}: no bash rule carries the mark {marker!r}: OpenCode's refusal would not say it")
        if not problems:
            proven.add(key)
        return problems

    def block_probe(self, command: str) -> Any:
        from pytest_agent_eval.agents.opencode.probe import ProbeModel

        return ProbeModel(command)

    def run_session(self, run: Drive) -> RunRecord:
        from pytest_agent_eval.agents.opencode.driver import OpenCodeOptions, run_opencode

        for var, value in run.config.env.items():
            if run.env.get(var) != value:
                raise ValueError(f"the agent's environment does not set {var} as its config does ({value})")
        options = run.options
        opencode = OpenCodeOptions(opencode=str(run.build.bin), config=Path(run.config.files["config"]),
                                   timeout_s=options.timeout_s, stall_s=options.stall_s,
                                   sandbox=options.sandbox)  # fmt: skip
        return run_opencode(run.questions, label=run.label, out_dir=run.out_dir, cwd=run.cwd, env=run.env,
                            options=opencode)  # fmt: skip

    def record_files(self, segments: Sequence[Path]) -> list[Path]:
        """The turns' streams, and the config, working directory and subagents' steps the driver kept beside the first
        (the reader names the MCP tools from the config and reads the subagents, a cassette rewrites the directory)."""
        from pytest_agent_eval.agents.opencode.transcript import kept_config, kept_cwd, kept_subagents

        kept = (kept_config, kept_cwd, kept_subagents)
        return [*segments, *(keep(segments[0]) for keep in kept)] if segments else []

    def recognise(self, sample: Sample) -> str | None:
        from pytest_agent_eval.agents.opencode.transcript import recognise

        return recognise(sample)

    def read_record(self, files: Sequence[Path], kind: str, companion: Path | None = None) -> list[Session]:
        """An export, one session's streams, or a log of several runs appended: one session each
        (:func:`~.transcript.read_opencode_record`)."""
        from pytest_agent_eval.agents.opencode.transcript import read_opencode_record

        return list(read_opencode_record(list(files), kind))

    def read_transcript(self, segments: Sequence[Path]) -> OpenCodeSession:
        """The turns' ``--format json`` streams, with the MCP servers of the config kept beside the first; an export
        given as the only segment is read as one."""
        from pytest_agent_eval.agents.opencode.transcript import EXPORT_KIND, read_export, read_opencode, recognise
        from pytest_agent_eval.transcript.sample import sample

        paths = list(segments)
        if len(paths) == 1 and recognise(sample(paths[0])) == EXPORT_KIND:
            return read_export(paths[0])
        return read_opencode(paths)

    def speech(self) -> Any:
        from pytest_agent_eval.agents.opencode.stand_in import SPEECH

        return SPEECH

    def cassette(self, segments: Sequence[Path]) -> Any:
        """Its ``--format json`` streams replayed over the Messages API, in its own tools (:mod:`.cassette`)."""
        from pytest_agent_eval.agents.opencode.cassette import OpenCodeCassetteBackend

        return OpenCodeCassetteBackend(segments, self)

    def ends_turn(self, event: Mapping[str, Any]) -> bool:
        """Also a ``step_finish`` of an answer (not of tool calls): OpenCode's turn end."""
        from pytest_agent_eval.agents.opencode.transcript import ends_turn

        return super().ends_turn(event) or ends_turn(dict(event))


def _resolved_rules(binary: str, cwd: Path, env: Mapping[str, str]) -> tuple[list[dict[str, Any]] | None, str]:
    """The permission rules OpenCode resolved for its ``run`` agent (None when it could not say), and what it said."""
    import subprocess

    argv = [binary, "debug", "agent", RUN_AGENT, "--pure"]
    try:
        done = subprocess.run(argv, env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=_CHECK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    start = done.stdout.find("{")
    try:
        agent = json.loads(done.stdout[start:]) if start >= 0 else None
    except ValueError:
        agent = None
    rules = agent.get("permission") if isinstance(agent, dict) else None
    if not isinstance(rules, list):
        return None, (done.stderr or done.stdout).strip()[-300:]
    return [r for r in rules if isinstance(r, dict)], ""


def wildcard(pattern: str, text: str) -> bool:
    """OpenCode's match of a permission pattern: ``*`` any run of characters, ``?`` one, the rest literal; a
    trailing `` *`` also matches nothing (``ls *`` matches ``ls``)."""
    optional_tail = pattern.endswith(" *")
    stem = pattern[:-2] if optional_tail else pattern
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in stem)
    return re.fullmatch(body + ("(?: .*)?" if optional_tail else ""), text, re.S) is not None


def bash_action(rules: Sequence[Mapping[str, Any]], command: str) -> str:
    """The action of the last rule for ``bash`` matching ``command`` (``ask`` when none does, as OpenCode)."""
    action = "ask"
    for rule in rules:
        if wildcard(str(rule.get("permission")), "bash") and wildcard(str(rule.get("pattern")), command):
            action = str(rule.get("action"))
    return action


OPENCODE = OpenCodeAgent()
