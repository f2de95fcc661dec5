"""Which tests are agent items, how each is marked, and which of them a session runs: evals are opt-in (an agent
item runs when its file or folder is named, or with ``--agent-eval``), and ``-k with`` / ``-k without`` name one
arm each (:mod:`pytest_agent_eval.plugin.keywords`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_agent_eval.corpus.cases import EvalCase

if TYPE_CHECKING:
    from pytest_agent_eval.settings.config import AgentEvalConfig

SETUP_MARGIN_S = 900.0  # installs, the clone and the index, on top of the agent's own limit
OPT_IN_HINT = "name their file or folder (pytest evals/) or pass --agent-eval to run them"


def marks_for(cfg: AgentEvalConfig, case: EvalCase) -> list[pytest.MarkDecorator]:
    """Every item: the marker itself; an xdist group per (repository, tool build), so ``--dist loadgroup`` keeps
    one worker's clone and index; and a pytest-timeout limit from its own agent limit, so a project-wide
    ``timeout =`` does not kill it mid-run."""
    limit = cfg.agent_timeout * len(case.questions) * (1 + cfg.retries) + SETUP_MARGIN_S
    return [
        pytest.mark.agent_eval,
        pytest.mark.xdist_group(name=f"{case.entry.name}@{cfg.tool_spec(case.arm)}"),
        pytest.mark.timeout(limit),
    ]


def case_of(item: pytest.Item) -> EvalCase | None:
    """The agent item's entry × arm × run; None for any other test."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("agent_case") if callspec is not None else None
    return case if isinstance(case, EvalCase) else None


def deselect_other_arms(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``-k with`` / ``-k without`` select one arm each: pytest matches substrings, and "with" is one of
    "without", so the expression is evaluated again for agent items with those two words naming the arm."""
    expression = config.getoption("keyword")
    if not expression or not any(case_of(item) for item in items):
        return
    from pytest_agent_eval.plugin.keywords import ARM_WORD, KeywordSyntaxError, arm_keyword_matcher, keyword_match

    if not ARM_WORD.search(expression):
        return
    keep, dropped = [], []
    for item in items:
        case = case_of(item)
        try:
            wanted = case is None or keyword_match(expression, arm_keyword_matcher(item, case.arm.name))
        except KeywordSyntaxError:
            return  # a form this reader does not know: pytest's own selection stands
        (keep if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def opt_in(config: pytest.Config, items: list[pytest.Item]) -> int:
    """Evals are opt-in: an agent item runs when its path is named (or --agent-eval); the rest are deselected.
    Returns how many agent items were deselected so."""
    run_all = config.getoption("agent_eval_run") or config.getoption("agent_eval_only")
    named = _named_paths(config)
    keep, dropped = [], []
    for item in items:
        if case_of(item) is None:
            wanted = not config.getoption("agent_eval_only")
        elif config.getoption("agent_eval_skip"):
            wanted = False
        else:
            wanted = run_all or _is_named(item, named, config)
        (keep if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    return sum(1 for item in dropped if case_of(item) is not None)


def _named_paths(config: pytest.Config) -> list[str]:
    """The paths (and --pyargs modules) the command line names; none when pytest chose them (testpaths, cwd)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    return [arg.split("::")[0] for arg in config.args]


def _is_named(item: pytest.Item, named: list[str], config: pytest.Config) -> bool:
    """The item's file, a folder holding it, or (with --pyargs) its module or package is named."""
    here = config.invocation_params.dir
    item_paths = {Path(os.path.abspath(item.path)), item.path.resolve()}  # evals/test_ab.py may be a symlink
    module = getattr(getattr(item, "module", None), "__name__", "")
    for arg in named:
        if config.option.pyargs and (module == arg or module.startswith(arg + ".")):
            return True
        arg_paths = {Path(os.path.abspath(here / arg)), (here / arg).resolve()}
        if any(a == p or a in p.parents for a in arg_paths for p in item_paths):
            return True
    return False
