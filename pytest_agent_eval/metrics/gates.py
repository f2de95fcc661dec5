"""Gates: what makes a scored run FAIL.

Two kinds. The contamination gate is always on: a without-arm whose agent received any of the tool's output
(a tool result carrying one of its fingerprints), or whose init listed one of the tool's MCP tools, measured the
tool after all, so its numbers are void; the failure names each leaking call and fingerprint. Where the model
server kept a record of the run (``evidence`` in the score, :mod:`pytest_agent_eval.metrics.evidence`), a result
the model received with the tool's output counts as well, and a transcript that disagrees with the record is an
integrity failure: of the item whatever its arm (the ``integrity`` gate), and no without-arm with one is cleared.
Thresholds are opt-in, from ``agent-eval.yaml``::

    allocation: {min: 0.7}            # global: every entry, every arm (figures: metrics/figures.py)
    sufficient_share: {min: 0.2}
    residual_tokens: {max: 60000}
    arms:
      without: {residual_tokens: {max: 80000}}
    entries:
      express:
        residual_tokens: {max: 40000}
        arms:
          with: {allocation: {min: 0.8}}

The most specific bound wins, per figure and per side (min/max): entry+arm > entry > arm > global. An arm key
is the arm's name (``with``) or its full label (``with@1.6.1``, which beats the name). A figure the run has no
value for (allocation without an explore call) is not gated. Earlier spellings of a figure's name
(``codegraph_calls``) are read as today's (``retrieval_calls``).

An infrastructure failure is not a gate: it never reaches here (the fixtures raise it as an error).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agent_eval.corpus.cases import ARM_NAMES, Arm
from pytest_agent_eval.metrics.contamination import describe_leak
from pytest_agent_eval.metrics.figures import FIGURES, HIGHER, lookup
from pytest_agent_eval.metrics.format import show
from pytest_agent_eval.tool import RetrievalTool


class ThresholdError(ValueError):
    """A bad thresholds file; the message names the file and the key."""


@dataclass(frozen=True)
class Bound:
    min: float | None = None
    max: float | None = None


@dataclass
class Thresholds:
    """Bounds by scope; :meth:`for_run` merges them for one entry and arm."""

    source: Path | None = None
    global_: dict[str, Bound] = field(default_factory=dict)
    arms: dict[str, dict[str, Bound]] = field(default_factory=dict)
    entries: dict[str, dict[str, Bound]] = field(default_factory=dict)
    entry_arms: dict[tuple[str, str], dict[str, Bound]] = field(default_factory=dict)

    def unknown_entry(self, names: Iterable[str]) -> str | None:
        """The first entry these thresholds name that is not among ``names`` (a typo would gate nothing), as
        an error naming the file and key; None when the corpus has every one."""
        known = set(names)
        for entry in [*self.entries, *(entry for entry, _ in self.entry_arms)]:
            if entry not in known:
                return f"{self.source}: entries.{entry}: no such corpus entry"
        return None

    def for_run(self, entry: str, arm_name: str, arm_label: str) -> dict[str, Bound]:
        scopes = [self.global_]
        scopes += [self.arms.get(key, {}) for key in dict.fromkeys((arm_name, arm_label))]
        scopes.append(self.entries.get(entry, {}))
        scopes += [self.entry_arms.get((entry, key), {}) for key in dict.fromkeys((arm_name, arm_label))]
        merged: dict[str, Bound] = {}
        for scope in scopes:
            for name, bound in scope.items():
                old = merged.get(name, Bound())
                merged[name] = Bound(
                    min=bound.min if bound.min is not None else old.min,
                    max=bound.max if bound.max is not None else old.max,
                )
        return merged


@dataclass(frozen=True)
class Verdict:
    gate: str
    passed: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "passed": self.passed, "message": self.message}


def load_thresholds(path: Path | None) -> Thresholds:
    """Read ``agent-eval.yaml``; None or a missing default file means no thresholds."""
    if path is None:
        return Thresholds()
    import yaml  # here, not at the top: the scorecard's blocks import this module, and yaml is slow to load

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThresholdError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ThresholdError(f"{path}: not valid YAML ({exc})") from None
    return parse_thresholds(data, source=Path(path))


def parse_thresholds(data: Any, source: Path | None = None) -> Thresholds:
    where = str(source or "thresholds")
    thresholds = Thresholds(source=source)
    if data is None:
        return thresholds
    if not isinstance(data, dict):
        raise ThresholdError(f"{where}: expected a mapping of figures, got {type(data).__name__}")
    arms = data.get("arms") or {}
    entries = data.get("entries") or {}
    thresholds.global_ = _bounds({k: v for k, v in data.items() if k not in ("arms", "entries")}, where, "")
    for arm, body in _mapping(arms, where, "arms").items():
        thresholds.arms[_arm(arm, where, "arms")] = _bounds(body, where, f"arms.{arm}.")
    for entry, body in _mapping(entries, where, "entries").items():
        body = _mapping(body, where, f"entries.{entry}")
        thresholds.entries[str(entry)] = _bounds(
            {k: v for k, v in body.items() if k != "arms"}, where, f"entries.{entry}."
        )
        for arm, arm_body in _mapping(body.get("arms") or {}, where, f"entries.{entry}.arms").items():
            key = (str(entry), _arm(arm, where, f"entries.{entry}.arms"))
            thresholds.entry_arms[key] = _bounds(arm_body, where, f"entries.{entry}.arms.{arm}.")
    return thresholds


def _arm(name: Any, where: str, key: str) -> str:
    """An arm's name, or its label (``with@1.6.1``): a typo there would gate nothing."""
    if str(name).partition("@")[0] not in ARM_NAMES:
        raise ThresholdError(f"{where}: {key}.{name}: unknown arm (known: {', '.join(ARM_NAMES)}, or with@VERSION)")
    return str(name)


def _mapping(value: Any, where: str, key: str) -> dict:
    if not isinstance(value, dict):
        raise ThresholdError(f"{where}: {key}: expected a mapping, got {type(value).__name__}")
    return value


def _bounds(body: Any, where: str, prefix: str) -> dict[str, Bound]:
    bounds: dict[str, Bound] = {}
    for name, spec in _mapping(body, where, prefix.rstrip(".") or "top level").items():
        key = f"{prefix}{name}"
        figure = lookup(str(name))
        if figure is None:
            raise ThresholdError(f"{where}: {key}: unknown figure (known: {', '.join(FIGURES)})")
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):  # ``allocation: 0.7``: which bound?
            side = "min" if figure.better == HIGHER else "max"
            raise ThresholdError(
                f"{where}: {key}: {spec} is no bound by itself: write {name}: {{{side}: {spec}}} "
                f"({'the least' if side == 'min' else 'the most'} it may be; min and max both work)"
            )
        spec = _mapping(spec, where, key)
        unknown = set(spec) - {"min", "max"}
        if unknown or not spec:
            raise ThresholdError(f"{where}: {key}: expected {{min: N}} and/or {{max: N}}, got {spec}")
        for side, value in spec.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ThresholdError(f"{where}: {key}.{side}: expected a number, got {value!r}")
            if figure.is_share and not 0 <= value <= 1:
                raise ThresholdError(f"{where}: {key}.{side}: a share lies between 0 and 1 (0.7 is 70%), got {value}")
        bounds[figure.name] = Bound(min=spec.get("min"), max=spec.get("max"))
    return bounds


# -- gates ---------------------------------------------------------------------------------------------------
SHOWN_LEAKS = 3  # the gate's message names this many leaks, then counts the rest


def contamination_verdict(score: dict[str, Any], arm_has_tool: bool, tool: RetrievalTool) -> Verdict:
    """A without-arm that reached the tool anyway is void; a with-arm is never contaminated by its own tool."""
    con = score.get("contamination") or {}
    if arm_has_tool:
        return Verdict("contamination", True, "with-arm: the tool is the variable under test")
    reasons = []
    leaks = con.get("leaks") or []
    if leaks:
        named = "; ".join(describe_leak(leak) for leak in leaks[:SHOWN_LEAKS])
        more = f"; and {len(leaks) - SHOWN_LEAKS} more" if len(leaks) > SHOWN_LEAKS else ""
        reasons.append(f"{len(leaks)} tool result(s) carried {tool.name} output: {named}{more}")
    printed = [c.get("call_id") for c in con.get("commands") or [] if isinstance(c, dict) and c.get("printed")]
    if printed:
        reasons.append(
            f"{len(printed)} {tool.cli} CLI call(s) ran unblocked and printed output (its fingerprints may not "
            f"survive a pipe): {', '.join(map(str, printed))}"
        )
    mcp_calls = con.get("mcp_calls") or []
    if mcp_calls:
        reasons.append(f"{len(mcp_calls)} call(s) to {tool.name}'s MCP tools: {', '.join(map(str, mcp_calls))}")
    exposed = con.get("exposed_tools") or []
    if exposed:
        reasons.append(f"init listed {tool.name} tool(s): {', '.join(map(str, exposed))}")
    evidence = score.get("evidence") or {}
    received = [leak for leak in evidence.get("leaks") or [] if isinstance(leak, dict)]
    if received:
        named = "; ".join(describe_leak(leak) for leak in received[:SHOWN_LEAKS])
        more = f"; and {len(received) - SHOWN_LEAKS} more" if len(received) > SHOWN_LEAKS else ""
        reasons.append(f"{len(received)} tool result(s) the model received carried {tool.name} output: {named}{more}")
    if evidence.get("problems"):
        reasons.append(f"the transcript disagrees with what the model received ({_problems(evidence)})")
    # Fail safe: a line the reader stepped over (torn, or over 64 MiB) may have held a leak no scan saw.
    unread = (score.get("parse") or {}).get("bad_lines") or 0
    if unread:
        reasons.append(f"{unread} transcript line(s) could not be read, so what they showed the agent is unknown")
    if reasons:
        return Verdict("contamination", False, "without-arm contaminated: " + "; ".join(reasons))
    return Verdict("contamination", True, "clean")


def integrity_verdict(score: dict[str, Any]) -> Verdict | None:
    """Whether the transcript agrees with the model server's record of the run; None without a record."""
    evidence = score.get("evidence")
    if not isinstance(evidence, dict):
        return None
    if evidence.get("problems"):
        return Verdict(
            "integrity", False, f"the transcript disagrees with what the model received: {_problems(evidence)}"
        )
    requests = evidence.get("requests", 0)
    return Verdict("integrity", True, f"the transcript agrees with the model's {requests} request(s)")


def _problems(evidence: dict[str, Any]) -> str:
    problems = [str(p) for p in evidence.get("problems") or []]
    more = f"; and {len(problems) - SHOWN_LEAKS} more" if len(problems) > SHOWN_LEAKS else ""
    return "; ".join(problems[:SHOWN_LEAKS]) + more


def evaluate(
    score: dict[str, Any],
    figs: dict[str, Any],
    *,
    entry: str,
    arm_name: str,
    arm_label: str,
    thresholds: Thresholds,
    tool: RetrievalTool,
) -> list[Verdict]:
    """Every gate that applies to this run, passed or not, contamination first."""
    verdicts = [contamination_verdict(score, Arm(arm_name).has_tool, tool)]
    integrity = integrity_verdict(score)
    if integrity is not None:
        verdicts.append(integrity)
    for name, bound in sorted(thresholds.for_run(entry, arm_name, arm_label).items()):
        value = figs.get(name)
        if value is None:
            continue
        shown = show(name, value)
        if bound.min is not None and value < bound.min:
            mine, limit = _side_by_side(name, value, bound.min)
            verdicts.append(Verdict(name, False, f"{name} {mine} is below the minimum {limit}"))
        elif bound.max is not None and value > bound.max:
            mine, limit = _side_by_side(name, value, bound.max)
            verdicts.append(Verdict(name, False, f"{name} {mine} is above the maximum {limit}"))
        else:
            verdicts.append(Verdict(name, True, f"{name} {shown} within {_range(name, bound)}"))
    return verdicts


def failure_message(verdicts: list[Verdict], entry: str, arm_label: str) -> str | None:
    failed = [v for v in verdicts if not v.passed]
    if not failed:
        return None
    lines = [f"agent-eval gate failed for {entry} / {arm_label}:"] + [f"  {v.gate}: {v.message}" for v in failed]
    return "\n".join(lines)


def _side_by_side(name: str, value: float, limit: float) -> tuple[str, str]:
    """A value and its limit as tables print them (``61.2k``), exact too when rounding makes them look equal."""
    shown, limit_shown = show(name, value), show(name, limit)
    if shown == limit_shown:
        return f"{shown} ({value:,})", f"{limit_shown} ({limit:,})"
    return shown, limit_shown


def _range(name: str, bound: Bound) -> str:
    low = show(name, bound.min) if bound.min is not None else "-inf"
    high = show(name, bound.max) if bound.max is not None else "+inf"
    return f"[{low}, {high}]"
