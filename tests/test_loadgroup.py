"""The loadgroup scheduler the plugin gives xdist (pytest_agent_eval/plugin/loadgroup.py): the groups come from the
workers' file; an id carrying xdist's own ``@group`` suffix is read as xdist reads it."""

from __future__ import annotations

import pytest

from pytest_agent_eval.plugin.loadgroup import GroupScheduling, group_of, write_groups


def test_an_items_group_is_named_as_xdist_names_it():
    assert group_of([pytest.mark.xdist_group("b").mark, pytest.mark.xdist_group(name="a").mark]) == "a_b"
    assert group_of([pytest.mark.xdist_group().mark]) == "default"
    assert group_of([]) is None


def test_the_scheduler_takes_groups_from_the_workers_file(pytester, tmp_path):
    config = pytester.parseconfig("--tx", "2*popen", "--dist", "loadgroup")
    groups = tmp_path / "groups.json"
    write_groups(groups, {"e.py::t[express-with-1]": "express@1.6.1", "e.py::t[express-without-1]": "express@1.6.1"})
    scheduler = GroupScheduling(config, None, groups)
    scopes = {scheduler._split_scope(f"e.py::t[express-{arm}-1]") for arm in ("with", "without")}
    assert scopes == {"express@1.6.1"}
    assert scheduler._split_scope("e.py::t[gin-with-1]") == "e.py::t[gin-with-1]"  # no group: alone
    assert scheduler._split_scope("e.py::t[x]@mine") == "mine"  # xdist's suffix, where xdist can write it
    assert list(tmp_path.iterdir()) == [groups]  # written whole, no partial file left
