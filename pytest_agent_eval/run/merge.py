"""``agent-eval merge OUT SHARD…``: the campaigns of shards 1..N (``--agent-eval-shard I/N``) made into one.

The merged campaign is an ordinary one: its manifest keeps the shards' config (and hash), versions, backend,
corpus hash and selection, its ``shard`` says what it was merged from, ``items.jsonl`` holds every shard's
records and ``items/`` their transcripts; ``summary.json`` and ``report.html`` are rendered by the same
:class:`~pytest_agent_eval.run.evaluation.EvalSession` the plugin uses. So ``agent-eval rescore``, ``agent-eval
compare`` and ``--agent-eval-compare`` read it like any other.

Shards merge only when their results are comparable: a field they disagree on is a MergeError naming the field,
both values and both shards; so is a shard missing, given twice, or an item two shards both ran.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.selection import manifest_options
from pytest_agent_eval.campaign.store import ITEM_DIRS, MANIFEST, Campaign, StoreError, safe_name
from pytest_agent_eval.run.evaluation import EvalSession
from pytest_agent_eval.settings.config import AgentEvalConfig, OptionError, resolve


class MergeError(ValueError):
    """Shards that cannot be merged into one campaign; the message names the field or the shard."""


def merge(out: str | Path, folders: Sequence[str | Path]) -> EvalSession:
    """Merge shard campaigns into a new campaign at ``out``; the returned session holds its records and the
    files it wrote (``session.written``), as after a pytest session.

    Everything is checked before ``out`` is written; a write that fails even so leaves ``out`` as it was (missing,
    or empty), so the merge can be run again into it."""
    shards = _shards(folders)
    for shard in shards:  # a campaign inside a shard would be read as part of it (and its ``latest`` moved)
        if Path(out).resolve().is_relative_to(shard.path.resolve()):
            raise MergeError(f"{out}: inside {_name(shard)} ({shard.path}): write the merged campaign elsewhere")
    first = shards[0]
    for other in shards[1:]:
        for name, mine, theirs in _disagreements(first.manifest, other.manifest):
            raise MergeError(
                f"shards disagree on {name}: {mine!r} in {_name(first)} ({first.path}) but {theirs!r} in "
                f"{_name(other)} ({other.path}); their results are not comparable"
            )
    records = _records(shards)
    cfg = _config_of(first)
    manifest = first.manifest
    # each shard by its own index, of the count the shards were made for (one that held no item wrote no campaign)
    indexed = [(_checked(shard), shard.id) for shard in shards]
    count = indexed[0][0][1]
    merged_from = [{"index": index, "campaign": campaign} for (index, _), campaign in indexed]
    made = not Path(out).exists()
    try:
        campaign = Campaign.create_at(
            out,
            manifest["config"],
            backend=manifest.get("backend"),
            versions=manifest.get("versions"),
            extra={
                "corpus_hash": manifest.get("corpus_hash"),
                "selection": manifest.get("selection"),
                "plugins": manifest.get("plugins"),  # where its agents and tool came from (campaign/made_by.py)
                "shard": {"count": count, "merged_from": merged_from},
            },
        )
    except StoreError as exc:
        raise MergeError(str(exc)) from None
    # From here on all that is in out is this merge's: create_at took only a missing or an empty folder.
    try:
        return _write(campaign, records, cfg)
    except OSError as exc:
        _discard(campaign.path, made)
        raise MergeError(f"{campaign.path}: the merged campaign could not be written: {exc}") from None
    except BaseException:
        _discard(campaign.path, made)
        raise


def _write(campaign: Campaign, records: list[tuple[Campaign, ItemRecord]], cfg: AgentEvalConfig) -> EvalSession:
    """The shards' transcripts and records into the new campaign, then its summary and report."""
    for shard, record in records:
        source = shard.path / ITEM_DIRS / safe_name(record.id)
        if source.is_dir():
            shutil.copytree(source, campaign.path / ITEM_DIRS / safe_name(record.id))
        if isinstance(record.scores, dict) and record.scores.get("files"):
            # the transcripts the scores were read from, where they now are (the shard's machine is gone)
            record.scores["files"] = [str(campaign.resolve(segment)) for segment in record.segments]
        campaign.record(record)
    session = EvalSession(cfg)
    session.campaign_dir = campaign.path
    session.records = {record.nodeid or record.id: record for _, record in records}
    session.finish()
    return session


def _discard(path: Path, made: bool) -> None:
    """Undo a failed merge's writes: the folder it made, or what it put into the empty one it was given."""
    if made:
        shutil.rmtree(path, ignore_errors=True)
        return
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _shards(folders: Sequence[str | Path]) -> list[Campaign]:
    """The campaigns in shard order, checked to be shards 1..N of one count, each exactly once."""
    by_index: dict[int, Campaign] = {}
    count = None
    for folder in folders:
        if not Path(folder).exists():
            raise MergeError(f"{folder}: no such folder")
        try:
            campaign = Campaign.open(folder)
        except StoreError as exc:
            raise MergeError(str(exc)) from None
        index, of = _checked(campaign)
        if count is None:
            count = of
        elif of != count:
            raise MergeError(f"shards disagree on shard count: {count} and {of} ({folder})")
        if index in by_index:
            raise MergeError(f"shard {index}/{count} given twice: {by_index[index].path} and {folder}")
        by_index[index] = campaign
    assert count is not None, "merge needs at least one campaign"
    missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in by_index]
    shards = [by_index[i] for i in sorted(by_index)]
    # A shard that held no item wrote no campaign: the others are the whole campaign when their items are all of it.
    if missing and not _whole_selection(shards):
        given = ", ".join(f"{i}/{count}" for i in sorted(by_index))
        raise MergeError(f"shard {', '.join(missing)} missing: given {given}")
    return shards


def _whole_selection(shards: list[Campaign]) -> bool:
    """Whether these shards' items, as their manifests list them, are every item the campaign selected."""
    selected = (shards[0].manifest.get("selection") or {}).get("selected")
    held = [(shard.manifest.get("shard") or {}).get("ids") for shard in shards]
    if not isinstance(selected, list) or any(not isinstance(ids, list) for ids in held):
        return False  # a campaign from before the manifest listed them: nothing to tell an empty shard by
    return {item for ids in held for item in ids} == set(selected)


def _checked(campaign: Campaign) -> tuple[int, int]:
    """The shard's index and count, once its manifest is seen to hold what a merge reads, of the types it reads it
    as: a hand-edited or damaged manifest is a MergeError naming the file and the key, not a traceback."""
    manifest = campaign.manifest
    where = campaign.path / MANIFEST
    shard = manifest.get("shard")
    if not shard or (isinstance(shard, dict) and shard.get("index") is None):
        raise MergeError(
            f"{campaign.path}: not a shard's campaign (its manifest has no shard; run with --agent-eval-shard I/N)"
        )
    if not isinstance(shard, dict):
        raise MergeError(f"{where}: shard is {shard!r}, not an object with index and count")
    count, index = shard.get("count"), shard["index"]
    if not _whole(count) or count < 1:
        shown = "missing" if count is None else repr(count)
        raise MergeError(f"{where}: shard.count is {shown}, not a positive whole number")
    if not _whole(index) or not 1 <= index <= count:
        raise MergeError(f"{where}: shard.index is {index!r}, not a whole number from 1 to {count}")
    config, selection = manifest.get("config"), manifest.get("selection")
    if not isinstance(config, dict):
        raise MergeError(f"{where}: config is {config!r}, not an object")
    if selection is not None and not isinstance(selection, dict):
        raise MergeError(f"{where}: selection is {selection!r}, not an object")
    selection = selection or {}
    versions, options, selected = manifest.get("versions"), selection.get("options"), selection.get("selected")
    ids, arms = shard.get("ids"), config.get("arms")
    for key, value, fits, expected in (
        ("versions", versions, isinstance(versions, dict), "an object"),
        ("selection.options", options, isinstance(options, dict), "an object"),
        ("selection.selected", selected, _ids(selected), "a list of item ids"),
        ("shard.ids", ids, _ids(ids), "a list of item ids"),
        ("config.arms", arms, _arms(arms), "a list of arms (objects with label, name and tool_spec)"),
    ):
        if value is not None and not fits:  # missing is no error: a campaign from before the key was kept
            raise MergeError(f"{where}: {key} is {value!r}, not {expected}")
    return index, count


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ids(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _arms(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(arm, dict) and {"label", "name", "tool_spec"} <= arm.keys() for arm in value
    )


def _comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """What must be equal for two shards' results to be one campaign's (flattened: name → value)."""
    backend = manifest.get("backend")
    fields: dict[str, Any] = {
        "config_hash": manifest.get("config_hash"),
        "corpus_hash": manifest.get("corpus_hash"),
        # the session's url differs per shard; which model answered must not
        **(
            {f"backend.{k}": backend.get(k) for k in ("name", "description")}
            if isinstance(backend, dict)
            else {"backend.name": backend}
        ),
        "selection": (manifest.get("selection") or {}).get("selected"),
        "-k": (manifest.get("selection") or {}).get("keyword"),
        "-m": (manifest.get("selection") or {}).get("markexpr"),
    }
    for tool, value in (manifest.get("versions") or {}).items():
        if isinstance(value, dict):
            fields.update({f"versions.{tool}.{label}": version for label, version in value.items()})
        else:
            fields[f"versions.{tool}"] = value
    return fields


# A version or backend detail one shard never learnt (no item of that arm ran there) is no conflict.
_UNRESOLVED = ("versions.", "backend.")


def _disagreements(mine: dict[str, Any], theirs: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Fields both manifests have and hold differently."""
    a, b = _comparable(mine), _comparable(theirs)
    return [
        (name, a[name], b[name])
        for name in a
        if name in b and a[name] != b[name] and not (name.startswith(_UNRESOLVED) and None in (a[name], b[name]))
    ]


def _records(shards: list[Campaign]) -> list[tuple[Campaign, ItemRecord]]:
    """Every shard's records, checked: each item in one shard only, and together exactly the selection."""
    owner: dict[str, Campaign] = {}
    records = []
    for shard in shards:
        try:
            items = shard.items()
        except StoreError as exc:
            raise MergeError(f"{_name(shard)}: {exc}") from None
        for record in items:
            try:
                shard.segments(record)  # the merge copies them to the same place in its own folder
            except StoreError as exc:
                raise MergeError(f"{_name(shard)}: item {record.id}: {exc}") from None
            if record.id in owner:
                raise MergeError(
                    f"item {record.id} is in two shards: {_name(owner[record.id])} ({owner[record.id].path}) "
                    f"and {_name(shard)} ({shard.path})"
                )
            owner[record.id] = shard
            records.append((shard, record))
        if shard.problems:
            raise MergeError(f"{_name(shard)} ({shard.path}): {shard.problems[0]}")
    selected = (shards[0].manifest.get("selection") or {}).get("selected")
    if selected is None:
        raise MergeError(f"{shards[0].path}: its manifest has no selection (was the shard interrupted? resume it)")
    for shard in shards:
        unfinished = [i for i in (shard.manifest.get("shard") or {}).get("ids") or [] if i not in owner]
        if unfinished:
            raise MergeError(
                f"{_name(shard)} ({shard.path}) has no record of {len(unfinished)} of its items "
                f"({', '.join(unfinished[:5])}); finish it with --agent-eval-resume first"
            )
    stray = sorted(set(owner) - set(selected))
    if stray:
        raise MergeError(f"items outside the shards' selection: {', '.join(stray[:5])} ({_name(owner[stray[0]])})")
    missing = sorted(set(selected) - set(owner))
    if missing:
        raise MergeError(f"selected items no shard ran: {', '.join(missing[:5])} (a shard is missing or unfinished)")
    order = {item_id: index for index, item_id in enumerate(selected)}
    return sorted(records, key=lambda pair: order[pair[1].id])  # the order one unsharded session runs them


def _config_of(shard: Campaign) -> AgentEvalConfig:
    """The settings the shards ran with, resolved from a shard's manifest as a resume would (and before the merge
    writes anything: settings that cannot be read name that manifest, and leave nothing to clear away)."""
    texts = manifest_options(shard.manifest)
    texts.pop("shard", None)
    try:
        return resolve(texts.get, lambda key: "", Path.cwd())
    except OptionError as exc:
        raise MergeError(f"{shard.path / MANIFEST} ({_name(shard)}): its settings cannot be read: {exc}") from None


def _name(campaign: Campaign) -> str:
    shard = campaign.manifest.get("shard") or {}
    return f"shard {shard.get('index')}/{shard.get('count')}"
