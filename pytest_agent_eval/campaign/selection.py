"""What a campaign selected and with which settings — kept in its manifest so a resume or a merge gets them back.

The manifest's ``config`` (hashed) says what was measured; next to it, unhashed, so every shard of one campaign
shares the config hash:

    "corpus_hash": sha256 of the corpus file's bytes
    "selection":   {"args": [the test paths named], "pyargs": false, "keyword": "-k text", "markexpr": "-m text",
                    "mode": "headless",
                    "selected": [every selected item id, before sharding] (once collection has run),
                    "options": {"tool": "MODULE:ATTR", "agent": "MODULE:ATTR", "agents": "claude-code,codex",
                                "replay": "NAME",
                                "cassettes": "/abs/a.jsonl,...",
                                "offline": "true"}}
                   ("options": what else decides what a run measures — the tool and agent under test, the recording a
                   replay's model plays, the cassettes, where the code under test came from — as the option texts
                   that set it again; only those given, but ``offline`` always: ``false`` too)
    "thresholds":  {"file": the thresholds file the gates read, "sha256": of its bytes}, or null
    "shard":       {"index": 2, "count": 3, "ids": [this shard's item ids]}, or null;
                   a merged campaign: {"count": 3, "merged_from": [{"index": 1, "campaign": "<id>"}, ...]}

``pytest evals --agent-eval-resume FOLDER`` alone re-creates the session from these (:func:`resume_options`): a
flag given that contradicts the manifest is an error naming the flag and both values.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_agent_eval.settings.config import AgentEvalConfig, OptionError
from pytest_agent_eval.settings.options import OPTIONS
from pytest_agent_eval.settings.parsers import parser_of

# The settings a resume takes from the manifest (config attrs): those its config holds as they were typed, those
# it holds otherwise (arms, mode, shard), and the selection's options as they were given.
_AS_TYPED = (
    "runs",
    "turns",
    "tool_version",
    "corpus",
    "model",
    "effort",
    "max_budget_usd",
    "agent_timeout",
    "backend",
    "campaign",
)
_AS_GIVEN = ("tool", "agent", "agents", "replay", "cassettes")
# Kept whatever its value, so that a manifest without it (from before it was kept) says nothing of it: a resume with
# the flag given then takes it as given. Offline decides which copy of the code is measured (docs/usage.md).
_ALWAYS_KEPT = ("offline",)
_RESTORED = ("arms", *_AS_TYPED, "mode", "shard", *_AS_GIVEN, *_ALWAYS_KEPT)


class ResumeError(ValueError):
    """A flag that contradicts the campaign being resumed; the message names the flag and both values."""


@dataclass
class Restored:
    """What a resume takes back from the manifest: option texts (attr → text), ``-k``/``-m``, and the item ids
    the campaign selected before sharding (None if it never recorded them). Plain data: xdist hands it to workers."""

    options: dict[str, str]
    keyword: str
    markexpr: str
    selected: list[str] | None
    args: list[str] = field(default_factory=list)  # the test paths the campaign's command line named
    pyargs: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Restored:
        return cls(
            dict(data["options"]), data["keyword"], data["markexpr"], data["selected"], data["args"], data["pyargs"]
        )


def restore(
    manifest: Mapping[str, Any], given: Callable[[str], Any], keyword: str, markexpr: str, cwd: Path | None = None
) -> Restored:
    """Everything a resume re-creates from the manifest; ResumeError names a flag that contradicts it."""
    options = resume_options(manifest, given, cwd)
    keyword, markexpr = resume_selection(manifest, keyword, markexpr)
    selection = manifest.get("selection") or {}
    selected = selection.get("selected")
    args = [str(arg) for arg in selection.get("args") or []]
    return Restored(
        options,
        keyword,
        markexpr,
        list(selected) if selected is not None else None,
        args,
        selection.get("pyargs") is True,
    )


def corpus_hash(path: str | Path) -> str | None:
    """sha256 of the corpus file (None if it cannot be read: collection reports that)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def manifest_options(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The manifest's settings as the option texts that would re-create them (attr → text); unset ones left out."""
    config = manifest.get("config") or {}
    selection = manifest.get("selection") or {}
    shard = manifest.get("shard") or {}
    texts: dict[str, str] = {}
    arms = config.get("arms") or []
    if arms:
        # A pinned arm's label differs from its name; its tool_spec is the full spec (a local path in full).
        texts["arms"] = ",".join(
            a["name"] if a["label"] == a["name"] else f"{a['name']}@{a['tool_spec']}" for a in arms
        )
    for attr in _AS_TYPED:
        if config.get(attr) is not None:
            texts[attr] = str(config[attr])
    if selection.get("mode"):
        texts["mode"] = str(selection["mode"])
    if shard.get("index") is not None:
        texts["shard"] = f"{shard['index']}/{shard['count']}"
    given = selection.get("options") or {}
    texts.update({attr: str(given[attr]) for attr in (*_AS_GIVEN, *_ALWAYS_KEPT) if given.get(attr)})
    return texts


def given_options(cfg: AgentEvalConfig) -> dict[str, str]:
    """The manifest's ``selection.options`` for this session (see the module docstring)."""
    texts = {
        "tool": cfg.tool_reference,
        "agent": cfg.agent_reference,
        "agents": cfg.agents_reference,
        "replay": cfg.replay,
        "cassettes": ",".join(str(p) for p in cfg.cassettes),
    }
    return {**{attr: text for attr, text in texts.items() if text}, "offline": "true" if cfg.offline else "false"}


def resume_options(manifest: Mapping[str, Any], given: Callable[[str], Any], cwd: Path | None = None) -> dict[str, str]:
    """The option texts a resume sets (attr → text): the manifest's settings, checked against the flags given.

    ``given(attr)`` is the flag's text on this command line (None if not given). A flag whose value differs from
    the manifest's is a ResumeError naming the flag and both values; one that agrees changes nothing. A campaign
    from before the manifest kept the selection's options says nothing of them: those flags are taken as given.
    """
    cwd = cwd or Path.cwd()
    texts = manifest_options(manifest)
    options = {option.attr: option for option in OPTIONS}
    kept = (manifest.get("selection") or {}).get("options")
    unknown = (*(() if kept is not None else _AS_GIVEN), *(a for a in _ALWAYS_KEPT if a not in (kept or {})))
    for attr in _RESTORED:
        raw = given(attr)
        if raw is None or attr in unknown:
            continue
        option = options[attr]
        now = _parsed(parser_of(option), raw, cwd)
        then = _parsed(parser_of(option), texts[attr], cwd) if attr in texts else None
        if now != then and option.is_flag:  # given as the flag alone: it reads true
            ran = option.flag if then else f"without {option.flag}"
            raise ResumeError(
                f"{option.flag} contradicts the resumed campaign, which ran {ran}; "
                "resume without it (the campaign's settings are restored) or start a new campaign"
            )
        if now != then:
            shown = texts.get(attr, "not set")
            raise ResumeError(
                f"{option.flag} {raw} contradicts the resumed campaign, which ran with {option.flag} {shown}; "
                "resume without it (the campaign's settings are restored) or start a new campaign"
            )
    return texts


def thresholds_record(path: Path | None) -> dict[str, str] | None:
    """The manifest's ``thresholds``: the file the gates read and a digest of it (None: no file, the built-in
    defaults)."""
    if path is None:
        return None
    try:
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None  # the session reports a thresholds file it cannot read
    return {"file": str(path), "sha256": digest}


def thresholds_drift(manifest: Mapping[str, Any], path: Path | None) -> str | None:
    """What differs between the thresholds the campaign was gated with and ``path`` (this session's), naming both;
    None when they agree, or the campaign did not keep them (from before they were kept). A resume re-gates every
    item, re-scored or run, with this session's thresholds (docs/campaigns-and-ci.md), so the difference is said,
    not refused."""
    if "thresholds" not in manifest:
        return None
    then, now = manifest.get("thresholds"), thresholds_record(path)
    if then == now:
        return None

    def shown(record: Any) -> str:
        return f"{record['file']} (sha256 {str(record['sha256'])[:12]})" if isinstance(record, dict) else "none"

    return (
        f"the thresholds {shown(now)} differ from those the resumed campaign was gated with, {shown(then)}: "
        "every item is gated with this session's"
    )


def resume_selection(manifest: Mapping[str, Any], keyword: str, markexpr: str) -> tuple[str, str]:
    """The ``-k`` and ``-m`` expressions of the resumed campaign; a different one given is a ResumeError."""
    selection = manifest.get("selection") or {}
    restored = []
    for flag, now in (("-k", keyword), ("-m", markexpr)):
        then = selection.get("keyword" if flag == "-k" else "markexpr") or ""
        if now and now != then:
            raise ResumeError(
                f"{flag} {now!r} contradicts the resumed campaign, which selected with {flag} {then!r}; "
                "resume without it or start a new campaign"
            )
        restored.append(then)
    return restored[0], restored[1]


def _parsed(parse: Callable[[Any], Any], text: str, cwd: Path) -> Any:
    try:
        value = parse(text)
    except OptionError:
        return text
    if isinstance(value, Path):
        return Path(os.path.normpath(cwd / value))
    if isinstance(value, list):
        return [Path(os.path.normpath(cwd / v)) if isinstance(v, Path) else v for v in value]
    return value
