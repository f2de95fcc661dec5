"""The campaign store: every campaign gets its own folder, and nothing in it is ever overwritten.

Why: a harness that writes every campaign to the same folder loses the logs a published baseline was
derived from at the next run (docs/campaigns-and-ci.md, "The campaign folder"). Here a campaign is

    <out_dir>/<YYYYmmdd-HHMMSS>-<6 hex>/
        manifest.json     id, created, config, config_hash, backend, versions — written once
        items.jsonl       one item record per line, appended (a re-run of an item appends again)
        items/<item id>/  the item's transcript segments, written by the harness

An item record (:mod:`pytest_agent_eval.campaign.record`) is one corpus entry × arm × run. Appends take a file lock
and are fsynced, so several xdist workers can record into one campaign at once, and a crash loses at most the line
being written; a full disk loses not even that much of what was there (a line is appended whole or cut back, a file
replaced whole or left as it was: :mod:`pytest_agent_eval.harness.writes`). Reading never trusts the folder: a line
torn mid-character, a record of the wrong shape or a segment path leading outside the campaign is a problem named
by file and line (or item), never a traceback, and nothing outside the campaign folder is ever read. A campaign
being resumed is locked, so two sessions cannot interleave their transcripts in it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from pytest_agent_eval.campaign.record import ItemRecord, RecordError
from pytest_agent_eval.harness.writes import append_line, replace_whole
from pytest_agent_eval.transcript import is_later_segment, segment_files

if TYPE_CHECKING:
    from pytest_agent_eval.agents.base import CodingAgent

LATEST = "latest"  # the out folder's pointer to the newest campaign
MANIFEST = "manifest.json"
ITEMS = "items.jsonl"
ITEM_DIRS = "items"
PROBE_FOLDER = "block-probe"  # in an item's folder: the transcript of the harness's check that the CLI is blocked
_LOCK = ".items.jsonl.lock"
RESUME_LOCK = ".resume.lock"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class StoreError(ValueError):
    """A campaign folder or records file that cannot be read; the message names it."""


def campaign_name(digest: str, at: float | None = None, nonce: str | None = None) -> str:
    """``<UTC time>-<6 hex>``: 3 of the config hash (equal configs sort together) and 3 random. ``at`` (a time)
    and ``nonce`` (random hex) given, the name is the same in every process that has them (xdist's workers)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(at))
    return f"{stamp}-{digest[:3]}{(nonce or secrets.token_hex(2))[:3]}"


def make_out_dir(out_dir: Path) -> None:
    """The folder of campaigns; made here, it carries a ``.gitignore`` of everything, as ``.pytest_cache`` does."""
    if out_dir.is_dir():
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    ignore = out_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# Created by pytest-retrieval-ab automatically.\n*\n", encoding="utf-8")


def config_hash(config: dict[str, Any]) -> str:
    """A stable digest of the configuration: campaigns run with equal configs share it."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class Campaign:
    path: Path
    manifest: dict[str, Any]
    problems: list[str] = field(default_factory=list)  # what the last read of items.jsonl had to skip

    @property
    def id(self) -> str:
        return str(self.manifest.get("id") or self.path.name)

    @property
    def items_file(self) -> Path:
        return self.path / ITEMS

    # -- life cycle ------------------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        out_dir: str | Path,
        config: dict[str, Any],
        backend: Any = None,
        versions: dict[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Campaign:
        """A new, empty campaign folder under ``out_dir``; never reuses one that exists.

        ``backend`` and ``versions`` default to the config's keys of the same name; ``extra`` adds manifest keys
        outside the hashed config (the selection, the shard). The folder's 6 hex are 3 of the config hash (equal
        configs sort together) and 3 random, and ``mkdir`` without ``exist_ok`` is the guard: two processes
        starting in the same second cannot both get one folder.
        """
        out_dir = Path(out_dir)
        make_out_dir(out_dir)
        digest = config_hash(config)
        for _ in range(100):
            path = out_dir / campaign_name(digest)
            try:
                path.mkdir()
            except FileExistsError:
                continue
            break
        else:  # pragma: no cover - 100 collisions of 12 random bits in one second
            raise StoreError(f"{out_dir}: could not find a free campaign folder name")
        try:
            return cls._begin(path, config, backend, versions, extra)
        except OSError:
            path.rmdir()  # no manifest, no campaign: not a folder a later session would take for one
            raise

    @classmethod
    def create_at(
        cls,
        path: str | Path,
        config: dict[str, Any],
        backend: Any = None,
        versions: dict[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Campaign:
        """A new campaign in exactly ``path`` (``agent-eval merge OUT``), which must not exist or be empty."""
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise StoreError(f"{path}: exists and is not an empty folder; a campaign is never written over")
        path.mkdir(parents=True, exist_ok=True)
        return cls._begin(path, config, backend, versions, extra)

    @classmethod
    def create_shared(
        cls, path: str | Path, config: dict[str, Any], extra: Mapping[str, Any] | None = None
    ) -> Campaign:
        """The campaign at a path chosen beforehand (an xdist controller names it, a worker's first item makes
        it): whoever makes the folder writes the manifest, the others wait for it and open it."""
        path = Path(path)
        make_out_dir(path.parent)
        try:
            path.mkdir()
        except FileExistsError:
            deadline = time.monotonic() + 30
            while not (path / MANIFEST).is_file() and time.monotonic() < deadline:
                time.sleep(0.05)
            return cls.open(path)
        return cls._begin(path, config, None, {}, extra)

    @classmethod
    def _begin(
        cls,
        path: Path,
        config: dict[str, Any],
        backend: Any,
        versions: dict[str, Any] | None,
        extra: Mapping[str, Any] | None,
    ) -> Campaign:
        manifest = {
            "id": path.name,
            # microseconds: two sessions can start within one second, and their folder names do not order them
            "created": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            "config": config,
            "config_hash": config_hash(config),
            "backend": backend if backend is not None else config.get("backend"),
            "versions": versions if versions is not None else config.get("versions") or {},
            **(extra or {}),
        }
        write_atomic(path / MANIFEST, json.dumps(manifest, indent=2, default=str) + "\n")
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | Path) -> Campaign:
        path = Path(path)
        manifest_file = path / MANIFEST
        if not manifest_file.is_file():
            raise StoreError(f"{path}: not a campaign folder (no {MANIFEST})")
        try:
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(f"{manifest_file}: unreadable manifest: {exc}") from None
        if not isinstance(manifest, dict):
            raise StoreError(f"{manifest_file}: the manifest is not a JSON object")
        return cls(path, manifest)

    # -- writing ---------------------------------------------------------------------------------------------
    def item_dir(self, item_id: str) -> Path:
        """The folder for one item's segments (created); ids are made safe as one path component."""
        path = self.path / ITEM_DIRS / safe_name(item_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def segments_on_disk(self, item_id: str) -> list[Path]:
        """The segments the harness wrote into an item's folder, in turn order (a run that died early has none)."""
        folder = self.path / ITEM_DIRS / safe_name(item_id)
        firsts = sorted(p for p in folder.glob("run-*.jsonl") if not is_later_segment(p))
        return segment_files(firsts[0]) if firsts else []

    def record(self, item_record: ItemRecord | Mapping[str, Any]) -> None:
        """Append one item record as one line, durably, under a lock shared by every process; a record of the
        wrong shape is a RecordError before anything is written."""
        if not isinstance(item_record, ItemRecord):
            item_record = ItemRecord.from_dict(item_record)
        line = json.dumps(item_record.to_dict(), ensure_ascii=False, default=str) + "\n"
        with FileLock(str(self.path / _LOCK)):
            # whole or not at all: on a full disk the records before it stay readable (harness/writes.py)
            append_line(self.items_file, line.encode("utf-8"), sync=True)

    # -- reading ---------------------------------------------------------------------------------------------
    def items(self) -> list[ItemRecord]:
        """Every item, the last record of each id winning (a resumed or re-run item appends again).

        Lines that cannot be read are skipped and named in :attr:`problems`.
        """
        self.problems = []
        if not self.items_file.exists():
            return []
        return _last_per_id(_read_jsonl(self.items_file, self.problems))

    def resolve(self, segment: str | Path) -> Path:
        """A record's segment path, which must lie inside the campaign folder; StoreError if it does not."""
        return inside(self.path, segment)

    def segments(self, item: ItemRecord) -> list[Path]:
        """The item's segment files, every one checked to lie inside the campaign."""
        return [self.resolve(s) for s in item.segments]

    def complete_ids(self) -> set[str]:
        """Items that need no re-run: not an error, and every segment on disk ends a turn, as its agent says.

        An item whose segments cannot be read (outside the campaign), or whose agent cannot be found, is not
        complete: it runs again.
        """
        from pytest_agent_eval.campaign.made_by import agent_of

        done = set()
        for item in self.items():
            if item.outcome == "error" or not item.segments:
                continue
            try:
                files = self.segments(item)
                agent = agent_of(item)
            except (StoreError, ValueError) as exc:
                self.problems.append(f"{item.id}: {exc}")
                continue
            if all(ends_with_result(path, agent) for path in files):
                done.add(item.id)
        return done

    @contextlib.contextmanager
    def resuming(self) -> Iterator[None]:
        """Hold the campaign for one resuming session; a second one gets StoreError at once, not a wait."""
        lock = FileLock(str(self.path / RESUME_LOCK))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise StoreError(
                f"{self.path}: another session is resuming this campaign (lock {self.path / RESUME_LOCK}); "
                "wait for it to finish"
            ) from None
        try:
            yield
        finally:
            lock.release()


def inside(root: str | Path, segment: str | Path) -> Path:
    """``root / segment``, which must stay inside ``root`` (no ``..`` or absolute path out); StoreError if not."""
    base = Path(root).resolve()
    target = (base / segment).resolve()
    if not target.is_relative_to(base):
        raise StoreError(f"segment {str(segment)!r} lies outside the campaign folder {root}: not read")
    return target


def safe_name(item_id: str) -> str:
    return _UNSAFE.sub("_", item_id).strip("._") or "item"


def ends_with_result(path: Path, agent: CodingAgent) -> bool:
    """Whether a segment of ``agent``'s finished: its last JSON line ends a turn (:meth:`CodingAgent.ends_turn`)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    for line in reversed(lines):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            return False  # a torn last line: the agent was killed mid-write
        return isinstance(event, dict) and agent.ends_turn(event)
    return False


def load_records(path: str | Path, problems: list[str] | None = None) -> list[ItemRecord]:
    """Item records from a campaign folder, an ``items.jsonl``, or a JSON file (``{"items": […]}`` or a list).

    ``summary.json`` files that call the list ``records`` are read too. Records that cannot be read are
    skipped and named in ``problems``.
    """
    path = Path(path)
    problems = problems if problems is not None else []
    if path.is_dir():
        if (path / MANIFEST).is_file():
            campaign = Campaign.open(path)
            records = campaign.items()
            problems += campaign.problems
            return records
        if (path / ITEMS).is_file():
            return _last_per_id(_read_jsonl(path / ITEMS, problems))
        raise StoreError(f"{path}: not a campaign folder (no {MANIFEST} or {ITEMS})")
    if not path.exists():
        raise StoreError(f"{path}: no such file or folder")
    if not path.is_file():  # a pipe or a device: it may never end
        raise StoreError(f"{path}: not a regular file, nor a campaign folder")
    if path.suffix == ".jsonl":
        return _last_per_id(_read_jsonl(path, problems))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: not a JSON file: {exc}") from None
    if isinstance(data, dict):
        data = data.get("items", data.get("records"))
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise StoreError(f"{path}: expected a list of item records, or an object with an 'items' list")
    records = []
    for index, item in enumerate(data):
        try:
            records.append(ItemRecord.from_dict(item))
        except RecordError as exc:
            problems.append(f"{path}: record {index + 1}: {exc}: skipped")
    return records


def _read_jsonl(path: Path, problems: list[str]) -> Iterator[ItemRecord]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"{path}: {exc}") from None
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line.decode("utf-8"))
        except ValueError:  # UnicodeDecodeError too: a line torn mid-character by a crash
            problems.append(f"{path}:{number}: a torn line (not complete JSON): skipped")
            continue
        try:
            yield ItemRecord.from_dict(data)
        except RecordError as exc:
            problems.append(f"{path}:{number}: not an item record: {exc}: skipped")


def _last_per_id(records: Iterable[ItemRecord]) -> list[ItemRecord]:
    latest: dict[str, ItemRecord] = {}
    for record in records:
        latest[record.id] = record  # keeps the position of the id's first record: the order items ran
    return list(latest.values())


def write_atomic(path: Path, text: str) -> None:
    """``path`` replaced whole, or left as it was and no temporary file behind: WriteFailed (an OSError) names the
    folder and its free space (harness/writes.py)."""
    replace_whole(path, text.encode("utf-8"))


def point_latest(campaign: Path) -> None:
    """``<out>/latest``: a text file naming the campaign just written, which ``latest`` (``--agent-eval-compare``)
    reads. A file, not a link: a link would make ``<out>/*/summary.json`` find the newest campaign twice."""
    write_atomic(campaign.parent / LATEST, campaign.name + "\n")


def latest_pointer(out: Path) -> Path | None:
    """The campaign ``<out>/latest`` names, if it still is one."""
    with contextlib.suppress(OSError):
        name = (out / LATEST).read_text(encoding="utf-8").strip()
        if name and "/" not in name and (out / name / MANIFEST).is_file():
            return out / name
    return None
