"""Gemini CLI as a :class:`~pytest_agent_eval.agents.base.CodingAgent`: ``GEMINI``.

What is Gemini CLI's own lives in this package: its config (:mod:`.config`: ``~/.gemini``'s settings and deny
policy), its driver (:mod:`.driver`: ``gemini -p --output-format stream-json``, ``--resume``, the chat record copied
out), its transcript reader (:mod:`.transcript`). The harness, the sandbox and the metrics are the same as Claude
Code's; its block probe's model is Codex's (one shell call, decided in the common vocabulary, rendered in the Gemini
API by the model server). The driver and the reader are imported when first used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agent_eval.agents.base import HEADLESS, AgentConfig, AgentSetup, CodingAgent, Drive, ModelApi
from pytest_agent_eval.agents.gemini.config import (
    BASE_URL_VAR,
    KEY_VAR,
    PINNED_ENV,
    STANDIN_API_KEY,
    SYSTEM_DIR,
    gemini_dir,
    home_env,
    protected_files,
    write_gemini_dir,
)
from pytest_agent_eval.agents.gemini.transcript import SHELL_TOOL
from pytest_agent_eval.harness.binds import HOME_FILES
from pytest_agent_eval.tool import HOOK_DENY_MARKER

if TYPE_CHECKING:
    from pytest_agent_eval.agents.gemini.transcript import GeminiSession
    from pytest_agent_eval.harness.drivers import RunRecord
    from pytest_agent_eval.transcript import Session
    from pytest_agent_eval.transcript.sample import Sample

# The model Gemini CLI is told to ask for (``-m``): the scripted stand-in's own name, so a session's records name
# the stand-in (the chat record names the model asked for, not the one that answered).
CONFIGURED_MODEL = "stand-in-scripted"
# What Gemini CLI tells the model of a call its policy denied (``denyMessage`` follows).
POLICY_DENIAL = "Tool execution denied by policy."


@dataclass(frozen=True)
class GeminiAgent(CodingAgent):
    """Google's Gemini CLI, pinned, driven headless with ``gemini -p --output-format stream-json``; speaks the
    Gemini API."""

    name: str = "gemini"
    title: str = "Gemini CLI"
    package: str = "@google/gemini-cli"
    version: str = "0.61.0"
    executable: str = "gemini"
    api: ModelApi = "gemini"
    stand_in: str | None = "gemini"  # the scripted stand-in speaks its tools (CodingAgent.stand_in)
    modes: tuple[str, ...] = (HEADLESS,)
    runtimes: tuple[str, ...] = ("node",)
    passed_env: frozenset[str] = frozenset()
    # Gemini CLI runs its shell commands itself (bash -c), behind no prefix the jail could take, through the `bash`
    # PATH finds first (the passwd entry and $SHELL are not looked at): the sandbox puts the jail's first there.
    shell_prefix_var: str | None = None
    shell_from: str | None = "PATH"
    # The machine's system settings and admin policies (/etc/gemini-cli/settings.json, policies/).
    managed_paths: tuple[Path, ...] = field(default=(SYSTEM_DIR,))
    model: str = CONFIGURED_MODEL

    def environment(self, model_url: str) -> dict[str, str]:
        """The model endpoint and the placeholder key Gemini CLI reads; no telemetry, no update check, no colour; the
        variables a repository's ``.env`` would otherwise set (:data:`.config.PINNED_ENV`)."""
        return {
            **PINNED_ENV,
            BASE_URL_VAR: model_url.rstrip("/"),
            KEY_VAR: STANDIN_API_KEY,
            "DO_NOT_TRACK": "1",
            "GEMINI_CLI_NO_RELAUNCH": "true",  # one process: the stream's writer is the process the driver started
            "NO_COLOR": "1",
        }

    def configure(self, setup: AgentSetup) -> AgentConfig:
        """A fresh ``~/.gemini`` in the attempt's HOME (:mod:`.config`): the harness's settings (and an empty user
        configuration) written in the item's config folder and bound read-only over their places there, its policy
        and trusted-folders files shown read-only at their own paths and named by a flag and the environment; the
        rest of it (sessions, state) is the agent's."""
        source = setup.config_dir / HOME_FILES
        binds = write_gemini_dir(source, setup.home, mcp_servers=setup.mcp_servers, denied_cli=setup.denied_cli,
                                 deny_reason=setup.deny_reason)  # fmt: skip
        settings, policy, trusted_folders = protected_files(source)
        return AgentConfig(
            files={
                "gemini_dir": gemini_dir(setup.home),
                "settings": settings,
                "policy": policy,
                "trusted_folders": trusted_folders,
            },
            env=home_env(setup.home, source),
            readable=(policy, trusted_folders),
            binds=binds,
        )

    def check_deny(self, config: AgentConfig, cli: str, env: Mapping[str, str], proven: set[str]) -> list[str]:
        """The policy file read as Gemini CLI's policy engine reads it: a ``run_shell_command`` rule must deny
        ``<cli> --version`` with the harness's reason (the mark the contamination metric reads), none may deny
        ``ls``. (Gemini CLI has no command that checks a policy file: the block probe proves the deny through it.)"""
        policy = Path(config.files["policy"])
        marker = HOOK_DENY_MARKER.format(cli=cli)
        try:
            rules = read_rules(policy.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return [f"{policy}: not a policy file Gemini CLI reads ({exc})"]
        problems = []
        for command, denied in (f"{cli} --version", True), ("ls", False):
            matched = [r for r in rules if isinstance(r, dict) and _matches(r, command)]
            decision = max(matched, key=lambda r: r.get("priority", 0)).get("decision") if matched else "allow"
            if (decision == "deny") != denied:
                problems.append(f"{policy}: `{command}` is {decision}")
            elif denied and not any(marker in str(r.get("denyMessage") or "") for r in matched):
                problems.append(f"{policy}: `{command}` is denied without the mark {marker!r}")
        return problems

    def block_probe(self, command: str) -> Any:
        from pytest_agent_eval.model.probe import TurnProbe  # its call spoken in Gemini CLI's tools (stand_in.py)

        return TurnProbe(command)

    def run_session(self, run: Drive) -> RunRecord:
        from pytest_agent_eval.agents.gemini.driver import GeminiOptions, run_gemini

        env = run.env
        home = Path(run.config.files["gemini_dir"]).parent
        if Path(env.get("HOME", "")) != home:
            raise ValueError(f"the settings folder {gemini_dir(home)} is not in the agent's HOME {env.get('HOME')}")
        model_url = env.get(BASE_URL_VAR)
        if not model_url:
            raise ValueError(f"the agent's environment names no model ({BASE_URL_VAR}): see GeminiAgent.environment")
        options = run.options
        gemini = GeminiOptions(gemini=str(run.build.bin), model=self.model, model_url=model_url,
                               policy=Path(run.config.files["policy"]), timeout_s=options.timeout_s,
                               stall_s=options.stall_s, sandbox=options.sandbox)  # fmt: skip
        return run_gemini(run.questions, label=run.label, out_dir=run.out_dir, cwd=run.cwd, env=env, options=gemini)

    def record_files(self, segments: Sequence[Path]) -> list[Path]:
        """The turns' streams and the chat records the driver kept beside the first (``run-<label>.chat``, and its
        subagents' ``run-<label>.sub-<agent id>.chat``)."""
        from pytest_agent_eval.agents.gemini.transcript import kept_chat, kept_subagent_chat

        if not segments:
            return []
        chat = kept_chat(segments[0])
        return [*segments, chat, *sorted(chat.parent.glob(kept_subagent_chat(chat, "*").name))]

    def recognise(self, sample: Sample) -> str | None:
        from pytest_agent_eval.agents.gemini.transcript import recognise

        return recognise(sample)

    def read_record(self, files: Sequence[Path], kind: str, companion: Path | None = None) -> list[Session]:
        """A chat record alone (JSON lines, or the older one JSON object), or the turns' stream-json events with their
        chat record (``companion``, or found beside the first), or the events alone
        (:func:`~.transcript.read_gemini_record`)."""
        from pytest_agent_eval.agents.gemini.transcript import read_gemini_record

        return [read_gemini_record(list(files), kind, companion)]

    def read_transcript(self, segments: Sequence[Path]) -> GeminiSession:
        """The turns' stream-json events and the chat record the driver kept beside the first
        (:func:`~.transcript.find_chat`); a chat record given as the only segment is read alone."""
        from pytest_agent_eval.agents.gemini.transcript import EVENTS_KIND, read_gemini_record, recognise
        from pytest_agent_eval.transcript.sample import sample

        paths = list(segments)
        kind = recognise(sample(paths[0])) if paths else None
        return read_gemini_record(paths, kind or EVENTS_KIND)

    def speech(self) -> Any:
        from pytest_agent_eval.agents.gemini.stand_in import SPEECH

        return SPEECH

    def cassette(self, segments: Sequence[Path]) -> Any:
        """Its run replayed over the Gemini API from the chat record beside its streams (:mod:`.cassette`)."""
        from pytest_agent_eval.agents.gemini.cassette import GeminiCassetteBackend

        return GeminiCassetteBackend(segments)


def read_rules(text: str) -> list[dict[str, Any]]:
    """The ``[[rule]]`` tables of a policy file as :func:`~.config.deny_policy` writes them: ``key = value`` lines
    whose values are JSON (a TOML basic string, integer or array of strings is one); raises ValueError naming the line
    for anything else (Python 3.10 has no TOML reader)."""
    rules: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line == "[[rule]]":
            rules.append({})
            continue
        key, equals, value = line.partition("=")
        try:
            if not equals or not rules:
                raise ValueError("not a key = value line of a [[rule]]")
            rules[-1][key.strip()] = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return rules


def _matches(rule: dict[str, Any], command: str) -> bool:
    """Whether ``rule`` applies to a ``run_shell_command`` of ``command``, as Gemini CLI 0.61.0 matches it: its
    ``commandPrefix`` becomes a pattern over the call's arguments as stable JSON (``buildArgsPatterns``)."""
    names = rule.get("toolName")
    if SHELL_TOOL not in (names if isinstance(names, list) else [names]) and names != "*":
        return False
    args = json.dumps({"command": command}, separators=(",", ":"), ensure_ascii=False)
    prefixes = rule.get("commandPrefix")
    if prefixes is None:
        pattern = rule.get("argsPattern") or (f'"command":"{rule["commandRegex"]}' if rule.get("commandRegex") else "")
        return not pattern or re.search(pattern, args) is not None
    for prefix in prefixes if isinstance(prefixes, list) else [prefixes]:
        opened = json.dumps(str(prefix), ensure_ascii=False)[:-1]
        if re.search(re.escape(f'"command":{opened}') + r'(?:[\s"]|\\")', args):
            return True
    return False


GEMINI = GeminiAgent()
