"""Named baselines: a campaign kept compactly for the compare gate and for replay.

    <out>/baselines/<NAME>/
        manifest.json       the campaign's manifest, plus ``baseline`` (name, source campaign, saved at)
        items.jsonl         the item records as the campaign holds them (read as they are: compare needs no more)
        transcripts.tar.gz  every record's segment files, at the paths the records name (items/<id>/run-*.jsonl),
                            and what its agent's reader reads beside them (Codex's run-*.rollout)

Why a folder with one tarball: the records stay plain JSON lines, so ``agent-eval compare NAME`` and a reviewer's
``git diff`` read them with no unpacking, while the transcripts — nearly all of a campaign's bytes, and needed only
to rescore or replay — compress several times over in one archive. Nothing else of the campaign is kept (stderr,
MCP configs, score.json, report.html, set-aside attempts): they are derived or diagnostic.

A baseline is found by :func:`find`: a saved name first, then ``latest`` (the newest campaign in the out
folder), then a folder or records file; the error names everything it tried.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import tarfile
import zlib
from datetime import datetime, timezone
from pathlib import Path

from pytest_agent_eval.campaign.made_by import agent_of
from pytest_agent_eval.campaign.record import ItemRecord
from pytest_agent_eval.campaign.store import (
    ITEMS,
    LATEST,
    MANIFEST,
    Campaign,
    StoreError,
    inside,
    latest_pointer,
    write_atomic,
)

BASELINES = "baselines"
TRANSCRIPTS = "transcripts.tar.gz"


def baselines_dir(out: str | Path) -> Path:
    return Path(out) / BASELINES


def save(campaign: Campaign, name: str, out: str | Path) -> Path:
    """Copy the campaign's records and the segments they name into ``<out>/baselines/<name>``, replacing a
    baseline of that name only once the new one is complete."""
    target = baselines_dir(out) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{name}.saving")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    records = campaign.items()
    manifest = dict(campaign.manifest)
    manifest["baseline"] = {
        "name": name,
        "campaign": campaign.id,
        "source": str(campaign.path),
        "saved": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_atomic(staging / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
    lines = [json.dumps(record.to_dict(), ensure_ascii=False, default=str) for record in records]
    write_atomic(staging / ITEMS, "".join(line + "\n" for line in lines))
    with tarfile.open(staging / TRANSCRIPTS, "w:gz") as archive:
        for record in records:
            for path, arcname in _record_files(campaign, record):
                if path.is_file():
                    archive.add(path, arcname=arcname)
    old = target.with_name(f".{name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def _record_files(campaign: Campaign, record: ItemRecord) -> list[tuple[Path, str]]:
    """The files a record's transcript is read from, each with its name in the archive: the segments, at the paths
    the record names, and what its agent's reader reads beside them (Codex's rollout), beside the first. The agent is
    the one the record says made it (campaign/made_by.py); where it cannot be loaded here, its segments are what
    it names."""
    files = [(campaign.resolve(segment), str(Path(segment))) for segment in record.segments]
    try:
        agent = agent_of(record, campaign.manifest)
    except ValueError:
        return files
    segments = [path for path, _ in files]
    for extra in agent.record_files(segments):
        if extra not in segments:
            name = str(Path(record.segments[0]).parent / extra.name)
            files.append((campaign.resolve(name), name))
    return files


def is_baseline(path: str | Path) -> bool:
    return (Path(path) / TRANSCRIPTS).is_file()


def unpack(baseline: str | Path, into: str | Path) -> Path:
    """A baseline's records and transcripts laid out as a campaign folder under ``into`` (a campaign folder is
    returned as it is); members that would land outside ``into`` are refused."""
    baseline = Path(baseline)
    if not is_baseline(baseline):
        return baseline
    for name in (MANIFEST, ITEMS):
        if not (baseline / name).is_file():
            raise StoreError(f"saved baseline {baseline}: no {name} (it is incomplete: save it again)")
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    for name in (MANIFEST, ITEMS):
        shutil.copyfile(baseline / name, into / name)
    try:
        with tarfile.open(baseline / TRANSCRIPTS, "r:gz") as archive:
            for member in archive.getmembers():
                if not member.isfile():
                    continue
                try:
                    target = inside(into, member.name)
                except StoreError:  # ../ or an absolute path: named in the baseline, not in the folder it unpacks into
                    raise StoreError(
                        f"saved baseline {baseline}: {TRANSCRIPTS} holds {member.name!r}, outside the campaign: "
                        "not unpacked"
                    ) from None
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                if source is None:
                    continue
                with source, target.open("wb") as handle:
                    shutil.copyfileobj(source, handle)
    # A junk archive fails as it is opened, a truncated or damaged one only as its members are read.
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise StoreError(
            f"saved baseline {baseline}: {TRANSCRIPTS} is not a readable .tar.gz ({exc}): save it again"
        ) from None
    return into


def latest(out: str | Path, exclude: str | Path | None = None) -> Path | None:
    """The newest campaign in the out folder other than ``exclude``: its ``latest`` pointer if it has one,
    else by manifest ``created``."""
    out = Path(out)
    skip = Path(exclude).resolve() if exclude is not None else None
    pointer = latest_pointer(out)
    if pointer is not None and pointer.resolve() != skip:
        return pointer
    found: list[tuple[str, str, Path]] = []
    for folder in out.iterdir() if out.is_dir() else []:
        if folder.is_symlink() or folder.resolve() == skip:
            continue
        if folder.is_dir() and folder.name != BASELINES and (folder / MANIFEST).is_file():
            with contextlib.suppress(StoreError):
                created = str(Campaign.open(folder).manifest.get("created") or "")
                found.append((created, folder.name, folder))
    return max(found)[2] if found else None


def find(spec: str | Path, out: str | Path, exclude: str | Path | None = None) -> Path:
    """Resolve ``--agent-eval-compare`` / ``--agent-eval-replay`` / ``agent-eval compare`` arguments: a saved
    baseline's name, then ``latest``, then a campaign folder or records file. ``exclude`` is a campaign that may
    not count as ``latest`` (the session's own). StoreError names what was tried."""
    text = str(spec)
    tried = []
    named = baselines_dir(out) / text
    if "/" not in text and text not in (".", ".."):
        if (named / MANIFEST).is_file():
            return named
        tried.append(f"no baseline named {text!r} in {baselines_dir(out)}")
    if text == LATEST:
        newest = latest(out, exclude)
        if newest is not None:
            return newest
        tried.append(f"no campaign in {out} for 'latest'")
    path = Path(text)
    if path.name == LATEST and path.is_file():  # <out>/latest names the newest campaign: that one
        named_campaign = latest_pointer(path.parent)
        if named_campaign is not None:
            return named_campaign
        tried.append(f"{path}: names no campaign in {path.parent}")
    elif path.exists():
        return path
    else:
        tried.append(f"{path}: no such file or folder")
    raise StoreError(f"cannot find baseline {text!r}: " + "; ".join(tried))


def size_note(path: str | Path) -> str:
    """``N records, M kB`` of a saved baseline, for the line that says where it went."""
    path = Path(path)
    records = sum(1 for line in (path / ITEMS).read_text(encoding="utf-8").splitlines() if line.strip())
    size = sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    return f"{records} record(s), {size / 1024:.0f} kB"


def recording(
    campaign: Campaign, item_id: str, entry: str, arm: str, run: int | None, test: str | None = None
) -> list[Path]:
    """The segments a replayed item's model replays: the recorded item of the same id, else of the same entry,
    arm and run (an id that pins a build, ``express-with:local:x-1``, still finds ``express-with-1``) — and of the
    same ``test`` function when the recording ran that entry in several, so no test replays another's run."""
    records = campaign.items()
    found = next((r for r in records if r.id == item_id), None)
    if found is None:
        same = [r for r in records if (r.entry, r.arm, r.run) == (entry, arm, run)]
        tests = {r.test for r in same}
        found = next((r for r in same if r.test == test), None) or (same[0] if len(tests) == 1 else None)
    if found is None:
        ids = ", ".join(r.id for r in records[:8]) + (" …" if len(records) > 8 else "")
        raise StoreError(f"{campaign.path}: no recording of {item_id} (it recorded: {ids or 'nothing'})")
    segments = campaign.segments(found)
    if found.outcome == "error" or not segments or not all(p.is_file() for p in segments):
        raise StoreError(f"{campaign.path}: the recording of {found.id} is incomplete (outcome {found.outcome})")
    return segments
