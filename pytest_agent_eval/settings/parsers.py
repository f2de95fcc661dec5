"""How a setting's text becomes its value: one parser per kind of option (the option table names it).

Nothing here touches the network or npm: it only parses text. An error is an :class:`OptionError` whose
message the caller prefixes with the flag or ini key it came from.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pytest_agent_eval.corpus.cases import ARM_NAMES, Arm
from pytest_agent_eval.settings.options import BACKENDS, EFFORTS, MODES, STAND_IN_ANSWERS, Option, OptionError

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent
    from pytest_agent_eval.settings.shard import Shard
    from pytest_agent_eval.tool import RetrievalTool


def parse_arms(text: str) -> list[Arm]:
    arms: list[Arm] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, spec = part.partition("@")
        if name not in ARM_NAMES:
            raise OptionError(
                f"unknown arm {name!r} in {text!r} (arms are 'with' and 'without', optionally @<version>)"
            )
        if "@" in part and not spec:
            raise OptionError(f"arm {part!r} has an empty version after '@'")
        if spec.startswith("local:") and not spec[len("local:") :]:
            raise OptionError(f"arm {part!r}: local: needs a path")
        arms.append(Arm(name, spec or None))
    if not arms:
        raise OptionError(f"no arm in {text!r}")
    labels = [a.label for a in arms]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise OptionError(f"arm {duplicates[0]!r} given twice in {text!r}")
    return arms


def parse_positive_int(text: str) -> int:
    return _whole_number(text, least=1, what="a positive integer")


def parse_count(text: str) -> int:
    return _whole_number(text, least=0, what="a whole number >= 0")


def _whole_number(text: str, least: int, what: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(f"expected {what}, got {text!r}") from None
    if value < least:
        raise OptionError(f"expected {what}, got {text!r}")
    return value


class Rule(NamedTuple):
    """One regression rule of compare-fail (pytest-benchmark's UX): ``residual_tokens:+20%``.

    The sign is the direction that fails: the figure's bad direction (``-`` a drop of a higher-is-better figure,
    ``+`` a rise of a lower-is-better one), which it may leave out;
    ``pt`` is percentage points of a share, ``%`` a change relative to the baseline. With ``@95``
    (``confidence``) the rule is noise-aware: it fails only when the change's 95% interval (the verdict's:
    report/stats.py ``mean_interval`` over the paired runs) lies entirely beyond the threshold, and cannot decide
    over fewer than three pairs.
    """

    metric: str
    threshold: float  # in the unit's terms: 5 means 5pt or 5%
    unit: str  # "pt" | "%"
    direction: int  # -1 a drop fails, +1 a rise fails
    confidence: int | None = None  # percent; None: the point change decides

    def __str__(self) -> str:
        level = f"@{self.confidence}" if self.confidence is not None else ""
        return f"{self.metric}:{'+' if self.direction > 0 else '-'}{self.threshold:g}{self.unit}{level}"

    def change(self, before: float, after: float) -> float:
        """The change in the rule's unit: points of a share, or percent of the baseline."""
        if self.unit == "pt":
            return (after - before) * 100
        if before == 0:
            return 0.0 if after == 0 else math.copysign(math.inf, after)
        return (after / before - 1) * 100

    def fails(self, change: float) -> bool:
        """A regression of the threshold or more fails; no change never does (so ``:-0pt`` fails any drop). A
        hair of tolerance so that a change of exactly the threshold fails despite float rounding."""
        regression = change * self.direction
        return regression > 1e-9 and regression >= self.threshold - 1e-9


# Patterns, compiled (and cached by re) when first matched: most sessions never read a rule or a name.
_RULE_PATTERN = r"^(?P<metric>[a-z_]+):(?P<sign>[+-]?)(?P<number>\d+(?:\.\d+)?)(?P<unit>pt|%)(?:@(?P<confidence>\d+))?$"


def parse_rules(text: str) -> list[Rule]:
    """``"allocation:-5pt,residual_tokens:+20%"`` → rules; the error names the first token it cannot read.

    A rule names a figure of :mod:`pytest_agent_eval.metrics.figures` that has a better direction (an old
    spelling such as ``residual`` or ``sufficient`` is read as today's name).
    """
    from pytest_agent_eval.metrics.figures import FIGURES, lookup  # the catalogue loads only when a rule is read

    rules = []
    for token in (t.strip() for t in str(text).split(",")):
        if not token:
            continue
        match = re.match(_RULE_PATTERN, token)
        if match is None:
            raise OptionError(
                f"cannot read {token!r}: expected METRIC:[+|-]NUMBER(pt|%)[@CONFIDENCE], "
                "e.g. allocation:-5pt, residual_tokens:+20% or allocation:-5pt@95"
            )
        figure = lookup(match["metric"])
        if figure is None or figure.better is None:
            known = ", ".join(f.name for f in FIGURES.values() if f.better is not None)
            if figure is not None:  # a count that describes a run, not one that is better high or low
                raise OptionError(
                    f"{token!r}: {figure.name} has no better direction, so it cannot regress; gated: {known}"
                )
            raise OptionError(f"unknown metric in {token!r}; known: {known}")
        if match["unit"] == "pt" and not figure.is_share:
            raise OptionError(
                f"{token!r}: {figure.name} is not a share, so points mean nothing; "
                f"use a relative threshold like {figure.name}:+20%"
            )
        confidence = int(match["confidence"]) if match["confidence"] else None
        if confidence is not None and not 50 <= confidence <= 99:
            raise OptionError(f"{token!r}: the confidence after '@' is a percent between 50 and 99, e.g. @95")
        # The sign, when given, must name the figure's bad direction: the other would gate on improvements only.
        bad = "+" if figure.better < 0 else "-"
        if match["sign"] and match["sign"] != bad:
            raise OptionError(
                f"{token!r}: {match['sign']} is an improvement of {figure.name} "
                f"({'lower' if figure.better < 0 else 'higher'} is better); a regression is "
                f"{figure.name}:{bad}{match['number']}{match['unit']}"
            )
        direction = -figure.better
        rules.append(Rule(figure.name, float(match["number"]), match["unit"], direction, confidence))
    if not rules:
        raise OptionError(f"no rule in {text!r}")
    return rules


def parse_positive_float(text: str) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise OptionError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise OptionError(f"expected a positive number, got {text!r}")
    return value


def parse_version(text: str) -> str:
    value = str(text).strip()
    if not value or any(c.isspace() for c in value):
        raise OptionError(f"expected a version ('1.6.1', 'latest' or 'local:<path>'), got {text!r}")
    if value == "local:":
        raise OptionError("local: needs a path")
    return value


def parse_tool(text: str) -> RetrievalTool:
    """A built-in tool's name (``codegraph``), an installed entry point's (``pytest_agent_eval.tools``) or
    ``MODULE:ATTR``."""
    from pytest_agent_eval.agents.registry import resolve_tool

    try:
        return resolve_tool(str(text))
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def parse_agent(text: str) -> CodingAgent:
    """A built-in agent's name (``codex``), an installed entry point's (``pytest_agent_eval.agents``) or
    ``MODULE:ATTR``."""
    from pytest_agent_eval.agents.registry import resolve_agent

    try:
        return resolve_agent(str(text))
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def parse_agents(text: str) -> list[CodingAgent]:
    """``claude-code,codex``: each as :func:`parse_agent` reads it; no agent twice (their items' ids would meet)."""
    agents = [parse_agent(part) for part in str(text).split(",") if part.strip()]
    if not agents:
        raise OptionError(f"no agent in {text!r}")
    names = [agent.name for agent in agents]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise OptionError(f"agent {twice!r} given twice in {text!r}")
    return agents


def parse_word(text: str) -> str:
    value = str(text).strip()
    if not value or any(c.isspace() for c in value):
        raise OptionError(f"expected a single word, got {text!r}")
    return value


def parse_backend(text: str) -> str:
    return _one_of(text, BACKENDS)


def parse_mode(text: str) -> str:
    return _one_of(text, MODES)


def parse_stand_in_answers(text: str) -> str:
    return _one_of(text, STAND_IN_ANSWERS)


def parse_judge(text: str) -> str:
    """``model`` or ``MODULE:ATTR`` (loaded when the session starts, as the tool and the agent are)."""
    value = str(text).strip()
    if value != "model" and (":" not in value or not all(value.split(":", 1))):
        raise OptionError(f"expected 'model' or MODULE:ATTR naming a judge, got {text!r}")
    return value


def parse_effort(text: str) -> str:
    return _one_of(text, EFFORTS)


def _one_of(text: str, choices: tuple[str, ...]) -> str:
    value = str(text).strip()
    if value not in choices:
        raise OptionError(f"expected one of {', '.join(choices)}, got {text!r}")
    return value


_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def parse_name(text: str) -> str:
    """A baseline's name: one safe path component."""
    value = str(text).strip()
    if not re.match(_NAME_PATTERN, value):
        raise OptionError(f"expected a name of letters, digits, '.', '_' or '-', got {text!r}")
    return value


def parse_baseline(text: str) -> str:
    """A baseline as given (a name, 'latest' or a path): :func:`pytest_agent_eval.campaign.baseline.find`
    resolves it once the out folder is known."""
    value = os.path.expanduser(str(text).strip())
    if not value:
        raise OptionError("expected a baseline name, 'latest' or a folder, got an empty value")
    return value


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise OptionError(f"expected true or false, got {text!r}")


def parse_path(text: str) -> Path:
    value = str(text).strip()
    if not value:
        raise OptionError("expected a path, got an empty value")
    return Path(os.path.expanduser(value))


def parse_paths(text: str) -> list[Path]:
    paths = [parse_path(part) for part in str(text).split(",") if part.strip()]
    if not paths:
        raise OptionError("expected one or more comma-separated paths")
    return paths


def parse_shard_option(text: str) -> Shard:
    from pytest_agent_eval.settings.shard import ShardError, parse_shard

    try:
        return parse_shard(text)
    except ShardError as exc:
        raise OptionError(str(exc)) from None


def parser_of(option: Option) -> Callable[[Any], Any]:
    """How the option's text becomes a value: ``parse_<kind>`` here (the option table names it by kind)."""
    return globals()[f"parse_{option.kind}"]
