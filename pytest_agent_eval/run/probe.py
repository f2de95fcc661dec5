"""Prove the CLI block through the agent itself: a short session whose shell call of the tool must come back
denied by the agent's own deny (its hook, rules or policy).

:func:`pytest_agent_eval.harness.isolation.self_check` checks the deny without the agent; that proves the
program or the rules, not that the agent applies them under the flags and sandbox a run gets (a settings source
that is skipped, a hook the sandbox cannot start). This probe starts the real agent, in the run's sandbox, with
the run's deny, against a one-purpose stand-in model on loopback (:meth:`CodingAgent.block_probe`) that asks
for exactly that shell call.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agent_eval.agents.base import HEADLESS, AgentSetup, CodingAgent, Drive, DriveOptions
from pytest_agent_eval.harness.isolation import IsolationError
from pytest_agent_eval.harness.provision import Provisioned
from pytest_agent_eval.harness.relay import carried
from pytest_agent_eval.harness.sandbox import sealed_binds
from pytest_agent_eval.model.server import serve

if TYPE_CHECKING:
    from pytest_agent_eval.harness.drivers import RunRecord

PROBE_TIMEOUT_S = 120.0
SHELL = "Bash"  # the shell tool's name in the common vocabulary every reader writes


def prove_block(
    agent: CodingAgent,
    build: Provisioned,
    setup: AgentSetup,
    options: DriveOptions,
    *,
    cwd: Path,
    env: Mapping[str, str],
    deny_marker: str,
) -> None:
    """Run the probe session; raise IsolationError unless the agent ran the shell call through its deny, which
    denied it (the result carries ``deny_marker``). ``setup`` is the run's, with the probe's own folder as
    ``config_dir`` (the transcript lands there too); ``options`` the run's (its sandbox); ``env`` the run's
    environment, whose model endpoint the probe's replaces."""
    command = f"{setup.denied_cli} --version"
    record, results = shell_probe(agent, build, setup, options, command, cwd=cwd, env=env, label="block-probe")
    if not results:
        raise IsolationError(f"block probe: {agent.title} never ran the shell call `{command}` ({record.segments[0]})")
    if not any(deny_marker in text for text in results):
        raise IsolationError(
            f"block probe: {agent.title} ran `{command}` and its deny did not deny it; the agent saw: "
            f"{results[0][:300]!r} ({record.segments[0]})"
        )


def shell_probe(
    agent: CodingAgent,
    build: Provisioned,
    setup: AgentSetup,
    options: DriveOptions,
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    label: str,
) -> tuple[RunRecord, list[str]]:
    """A session of the agent, in ``options``' sandbox, whose stand-in model (:meth:`CodingAgent.block_probe`) asks
    for one shell call of ``command``: the driver's record (the run ``run-<label>…`` in ``setup.config_dir``) and
    what the shell calls returned, as the agent's reader gives them (none when it never ran one)."""
    out_dir = setup.config_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    with serve(agent.block_probe(command)) as server, ExitStack() as stack:
        probe_setup = replace(setup, model_url=server.url, mcp_servers=())
        config = agent.configure(probe_setup)
        probe_env = {**env, **agent.environment(server.url), **config.env}
        probe = replace(options, timeout_s=PROBE_TIMEOUT_S, max_budget_usd=1.0)
        if probe.sandbox is not None:  # no network: carry the probe's port in, instead of the run's model or API
            relay = stack.enter_context(carried(server.url))
            # and show its config: of the run folder the sandbox shows only the files the agent is given
            readable = (*probe.sandbox.readable, *config.readable)
            # and its own files where the CLI reads them in HOME, over the run's
            binds = sealed_binds((*probe.sandbox.binds, *config.binds), probe.sandbox.writable)
            probe = replace(probe, sandbox=replace(probe.sandbox, relay=relay, readable=readable, binds=binds))
        record = agent.drive(Drive(build, [f"agent-eval {label.replace('-', ' ')}"], mode=HEADLESS, config=config,
                                   options=probe, label=label, out_dir=out_dir, cwd=cwd, env=probe_env))  # fmt: skip
    calls = [c for c in agent.read_transcript(record.segments).calls if c.name == SHELL]
    return record, [c.result.text for c in calls if c.result is not None]
