"""``--dist loadgroup`` that groups by ``xdist_group`` marks on pytest versions whose node ids xdist cannot suffix.

pytest-xdist's loadgroup has each worker append ``@<group>`` to the node id of every item with an
``xdist_group`` mark, and its scheduler reads the group back from that suffix. It writes the suffix into the
legacy ``Item._nodeid``, which pytest 9.2 no longer reads (node ids are structured): the suffix is lost, and
every item is scheduled alone — the marks the plugin sets per (repository, tool build) no longer keep one
worker's clone and index (pytest-dev/pytest-xdist#1386; the fix, #1388, is not released: 3.8.0 is the newest).

So with ``--dist loadgroup`` the plugin hands xdist this scheduler. Each worker writes the groups of the items
it collected to a file the controller named (:func:`write_groups`) before it reports its collection, and the
scheduler takes an item's group from there. An id that does carry xdist's suffix (an xdist with the fix) is
read as xdist reads it, so this changes nothing once xdist works again. Any test's marks are honoured, not
only the plugin's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadGroupScheduling


def group_of(marks: Iterable[Any]) -> str | None:
    """The group xdist gives an item with these ``xdist_group`` marks (their names, sorted, joined by ``_``)."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
    return "_".join(sorted(names)) if names else None


def write_groups(path: Path, groups: dict[str, str]) -> None:
    """A worker's collected groups, by node id; written whole (every worker collects the same items)."""
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups), encoding="utf-8")
    os.replace(partial, path)


class GroupScheduling(LoadGroupScheduling):
    """xdist's loadgroup scheduling, with the groups the workers wrote to ``groups_path``."""

    def __init__(self, config: Any, log: Any, groups_path: Path) -> None:
        super().__init__(config, log)
        self.groups_path = groups_path
        self.groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist's own suffix: it works here
            return super()._split_scope(nodeid)
        if self.groups is None:  # read once, after the workers reported their collections
            try:
                self.groups = json.loads(self.groups_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                self.groups = {}
        return self.groups.get(nodeid, nodeid)
