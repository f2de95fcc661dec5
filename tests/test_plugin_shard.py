"""Sharded campaigns through the plugin, with pytester and the stand-in ``claude`` of :mod:`test_plugin`.

Three shards run side by side (each its own out folder, as on three CI machines), merged, give the items,
figures, report and compare output of one unsharded session; a resume takes the campaign's selection and
settings from its manifest, on a shard too; xdist workers with their own cwd and cache write the same campaign.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.sessions import api_error, with_clean, without_clean
from support.standin import Project, entry

from pytest_agent_eval.campaign.store import Campaign
from pytest_agent_eval.cli import main as agent_eval

pytestmark = pytest.mark.slow  # pytester sessions in subprocesses that run the stand-in claude

QUESTIONS = {
    "express": ("Small", "How does res.send decide the Content-Type?"),
    "gin": ("Medium", "How does gin route requests?"),
    "django": ("Large", "How does Django resolve a URL to a view?"),
    "ky": ("Small", "Where does ky apply retries?"),
    "flask": ("Medium", "How does Flask dispatch a request?"),
}
TIMES = {"duration_s", "wall_s", "agent_s"}  # what two sessions never share


@pytest.fixture
def project(pytester: pytest.Pytester) -> Project:
    entries = [{**entry(name, question), "size": size} for name, (size, question) in QUESTIONS.items()]
    project = Project(pytester, entries)
    for _, question in QUESTIONS.values():
        project.script("with", question, with_clean())
        project.script("without", question, without_clean())
    return project


def base_args(out: str, *args: str) -> list[str]:
    return ["evals", "-p", "no:cacheprovider", "--agent-eval-backend", "scripted", "--agent-eval-out", out, *args]


def comparable(campaign: Path) -> dict[str, dict]:
    """Each item's outcome and figures, without the times no two sessions share."""
    records = {}
    for record in Campaign.open(campaign).items():
        figures = {k: v for k, v in record.figures.items() if k not in TIMES}
        files = [Path(f).relative_to(campaign.resolve()) for f in record.scores.pop("files")]
        records[record.id] = {"outcome": record.outcome, "figures": figures, "scores": record.scores, "files": files}
    return records


def untimed(data: object) -> object:
    """``data`` without the keys that hold times."""
    if isinstance(data, dict):
        return {k: untimed(v) for k, v in data.items() if k not in TIMES and not k.endswith("_s")}
    if isinstance(data, list):
        return [untimed(v) for v in data]
    return data


def agent_eval_output(capsys, *argv: str) -> tuple[int, str]:
    code = agent_eval(list(argv))
    return code, capsys.readouterr().out


def only_campaign(folder: Path) -> Path:
    [campaign] = [p for p in folder.iterdir() if p.is_dir()]
    return campaign


def test_three_shards_side_by_side_merge_into_the_unsharded_campaign(project, capsys):
    pytester = project.pytester
    pytester.runpytest(*base_args("whole", "--agent-eval-runs", "2")).assert_outcomes(passed=20)
    unsharded = only_campaign(project.path / "whole")

    shards = [
        pytester.popen(
            [
                sys.executable,
                "-m",
                "pytest",
                *base_args(f"shard{i}", "--agent-eval-runs=2", f"--agent-eval-shard={i}/3"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for i in (1, 2, 3)
    ]
    outputs = [process.communicate(timeout=300)[0].decode() for process in shards]
    assert [process.returncode for process in shards] == [0, 0, 0], outputs
    folders = [only_campaign(project.path / f"shard{i}") for i in (1, 2, 3)]

    # every shard ran whole repositories, and their manifests say which shard and what was selected
    selected = json.loads((folders[0] / "manifest.json").read_text())["selection"]["selected"]
    assert sorted(selected) == sorted(comparable(unsharded))
    seen: list[str] = []
    for index, folder in enumerate(folders, start=1):
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["shard"]["index"] == index and manifest["shard"]["count"] == 3
        assert manifest["selection"]["selected"] == selected
        ids = [r.id for r in Campaign.open(folder).items()]
        assert sorted(ids) == sorted(manifest["shard"]["ids"])
        assert ids, f"shard {index} ran nothing"
        entries = {i.rsplit("-", 2)[0] for i in ids}
        assert not entries & {i.rsplit("-", 2)[0] for i in seen}  # an entry's repository on one shard only
        seen += ids
        assert re.search(rf"{len(selected) - len(ids)} deselected", outputs[index - 1])
        assert f"agent-eval: shard {index}/3: {len(ids)} of {len(selected)} selected item(s)" in outputs[index - 1]
    assert sorted(seen) == sorted(selected)

    code, text = agent_eval_output(capsys, "merge", "merged", *map(str, reversed(folders)))
    assert code == 0 and f"merged 3 shard(s), {len(selected)} run(s), into merged" in text
    merged = project.path / "merged"
    assert comparable(merged) == comparable(unsharded)
    assert [r.id for r in Campaign.open(merged).items()] == [r.id for r in Campaign.open(unsharded).items()]
    for name in ("express-with-1", "django-without-2"):
        [segment] = Campaign.open(merged).segments(next(r for r in Campaign.open(merged).items() if r.id == name))
        assert segment.read_bytes() == (unsharded / "items" / name / segment.name).read_bytes()

    # the merged campaign is an input like any other: summary, compare, rescore, and the gate
    def summary(campaign: Path) -> dict:
        return untimed(json.loads((campaign / "summary.json").read_text())["entries"])

    assert summary(merged) == summary(unsharded)
    assert (
        agent_eval_output(capsys, "compare", str(unsharded), str(merged), "--compare-fail", "allocation:-1pt")[0] == 0
    )
    same = [agent_eval_output(capsys, "compare", str(unsharded), str(c))[1] for c in (unsharded, merged)]
    assert same[0] == same[1]
    rescored = [agent_eval_output(capsys, "rescore", str(c))[1] for c in (unsharded, merged)]
    assert rescored[0] == rescored[1]
    result = project.run(
        "--agent-eval-runs", "1", "-k", "express", "--agent-eval-compare", str(merged),
        "--agent-eval-compare-fail", "allocation:-5pt",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*COMPARE — *merged (before) → this session (after)*"])

    # report.html: the same page but for the campaign's name, times and the model server's port
    def page(campaign: Path) -> str:
        text = (campaign / "report.html").read_text().replace(Campaign.open(campaign).id, "ID")
        text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", "WHEN", text)
        text = re.sub(r"127\.0\.0\.1:\d+", "HOST", text)  # each session's model server
        text = re.sub(r'(data-figure="duration_s"[^>]*>)[^<]*', r"\1T", text)  # every duration's change, as printed
        text = re.sub(r"duration (\d+|unknown \(n=\d+\)) · ", "", text)  # the pairs its spread needs
        text = re.sub(r'(<p class="hint verdict-reading">)([^<]*)', lambda m: m.group(1) + timeless(m.group(2)), text)
        return re.sub(r"\d+(\.\d+)? ?s\b", "T", text)

    def timeless(reading: str) -> str:
        """What a verdict rests on and what points the other way, duration (a time) left out of both: which side
        a duration falls on is the machine's load, not the campaign's."""
        head, _, rest = reading.partition(": ")
        on, _, other = rest.partition("; the other way: ")
        kept = [[f for f in part.split(", ") if f not in ("duration", "no figure", "")] for part in (on, other)]
        return f"{head}: {', '.join(kept[0])}; the other way: {', '.join(kept[1])}"

    assert page(merged) == page(unsharded)


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["local", "xdist"])
def test_a_shard_with_nothing_to_run_says_so_and_passes(project, xdist):
    # express alone, in two shards: one repository is one shard's, so the other has nothing to run.
    args = base_args("out", "-k", "express", "--agent-eval-runs", "1", "--collect-only", "-q")
    owner = next(
        i for i in (1, 2) if "express" in project.pytester.runpytest(*args, f"--agent-eval-shard={i}/2").stdout.str()
    )
    empty = 3 - owner
    result = project.pytester.runpytest_subprocess(
        *base_args("out", "-k", "express", "--agent-eval-runs", "1", f"--agent-eval-shard={empty}/2", *xdist)
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"agent-eval: shard {empty}/2 holds none of the 2 selected item(s)"])
    assert project.calls() == []


def test_resume_restores_the_selection_and_settings_of_the_campaign(project):
    express = QUESTIONS["express"][1]
    project.script("without", express, api_error())
    first = project.run("-k", "express", "--agent-eval-runs", "3", "--agent-eval-turns", "1")
    first.assert_outcomes(passed=3, errors=3, deselected=24)
    [campaign] = project.campaigns()
    project.script("without", express, without_clean())

    calls = len(project.calls())
    result = project.run("--agent-eval-resume", str(campaign))  # as the README writes it: nothing else
    result.assert_outcomes(passed=6, deselected=24)
    ran = project.calls()[calls:]
    assert [c["arm"] for c in ran] == ["without"] * 3  # only the unfinished runs; no gin, no runs 1-2 default
    ids = sorted(r.id for r in Campaign.open(campaign).items())
    assert ids == sorted(f"express-{arm}-{run}" for arm in ("with", "without") for run in (1, 2, 3))
    assert project.campaigns() == [campaign]
    assert "settings differ" not in result.stdout.str()

    for flags, message in [
        (("--agent-eval-runs", "4"), "--agent-eval-runs 4 contradicts the resumed campaign, which ran with "
                                     "--agent-eval-runs 3"),
        (("-k", "gin"), "-k 'gin' contradicts the resumed campaign, which selected with -k 'express'"),
        (("--arms", "with"), "--agent-eval-arms with contradicts the resumed campaign, which ran with "
                             "--agent-eval-arms with,without"),
    ]:  # fmt: skip
        refused = project.run("--agent-eval-resume", str(campaign), *flags)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        assert message in refused.stderr.str()
    # a flag that agrees is fine
    project.run("--agent-eval-resume", str(campaign), "--agent-eval-runs", "3").assert_outcomes(passed=6, deselected=24)
    assert len(project.calls()) == calls + 3


def test_resume_gives_back_the_tool_under_test(project):
    """The tool is not in the hashed config (its name is): resumed without --agent-eval-tool, the rest of the
    campaign still evaluates the tool it began with, not codegraph."""
    (project.path / "mytool.py").write_text(
        "import dataclasses\nfrom pytest_agent_eval import CODEGRAPH\n"
        "MINE = dataclasses.replace(CODEGRAPH, explore='codegraph_search')\n"
    )
    project.pytester.makeini("[pytest]\npythonpath = .\n")
    express = QUESTIONS["express"][1]
    project.script("without", express, api_error())
    project.run("-k", "express", "--agent-eval-runs", "1", "--agent-eval-tool", "mytool:MINE").assert_outcomes(
        passed=1, errors=1, deselected=8
    )
    [campaign] = project.campaigns()
    project.script("without", express, without_clean())
    project.run("--agent-eval-resume", str(campaign)).assert_outcomes(passed=2, deselected=8)
    explore = {record.id: record.scores["explore"] for record in Campaign.open(campaign).items()}
    assert explore == {"express-with-1": "codegraph_search", "express-without-1": "codegraph_search"}
    refused = project.run("--agent-eval-resume", str(campaign), "--agent-eval-tool", "pytest_agent_eval:CODEGRAPH")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "which ran with --agent-eval-tool mytool:MINE" in refused.stderr.str()


def test_a_shard_resumes_as_itself_under_xdist(project):
    gin = QUESTIONS["gin"][1]
    project.script("with", gin, api_error())
    first = project.run("--agent-eval-runs", "1", "--agent-eval-shard", "2/2", "-n", "2", in_subprocess=True)
    [campaign] = project.campaigns()
    manifest = json.loads((campaign / "manifest.json").read_text())
    shard_ids = manifest["shard"]["ids"]  # recorded by the controller from its workers' collection
    assert manifest["shard"]["index"] == 2 and len(manifest["selection"]["selected"]) == 10
    assert "gin-with-1" in shard_ids and 0 < len(shard_ids) < 10
    first.assert_outcomes(passed=len(shard_ids) - 1, errors=1)
    project.script("with", gin, with_clean())

    calls = len(project.calls())
    result = project.run("--agent-eval-resume", str(campaign), "-n", "2", in_subprocess=True)
    result.assert_outcomes(passed=len(shard_ids))
    assert [(c["arm"], gin in " ".join(c["argv"])) for c in project.calls()[calls:]] == [("with", True)]
    assert sorted(r.id for r in Campaign.open(campaign).items()) == sorted(shard_ids)


def test_xdist_workers_with_their_own_cwd_and_cache_write_the_campaign(project, tmp_path):
    """``--tx popen//chdir=…`` workers run from their own copy of the project (rsynced, as ``--tx ssh=…`` ones
    do), with their own cwd and cache: what they record reaches the campaign the controller made."""
    project.pytester.makeini("[pytest]\n")  # a project's rootdir is where its ini is, on every machine
    specs = []
    for name in ("w1", "w2"):
        specs += ["--tx", f"popen//chdir={tmp_path / name}//env:AGENT_EVAL_CACHE={tmp_path / name / 'cache'}"]
    rsync = [f"--rsyncdir={project.path}", "--rsyncignore=out"]
    # xdist maps an argument that is a path under an rsync root to the worker's copy (and refuses other paths)
    args = [str(project.path / "evals"), "-p", "no:cacheprovider", "--agent-eval-backend=scripted"]
    args += [f"--agent-eval-out={project.path / 'out'}", "--agent-eval-runs=1", "-k", "express or gin"]
    result = project.pytester.runpytest_subprocess(*args, "--dist=load", *specs, *rsync)
    result.assert_outcomes(passed=4)
    [campaign] = project.campaigns()
    records = Campaign.open(campaign).items()
    assert sorted(r.id for r in records) == ["express-with-1", "express-without-1", "gin-with-1", "gin-without-1"]
    for record in records:
        assert all(path.is_file() for path in Campaign.open(campaign).segments(record))
    # each worker had its own copy of the project to start from
    assert all((tmp_path / name / project.path.name / "corpus.json").is_file() for name in ("w1", "w2"))
    # yet every process named and described the campaign alike: by the corpus as the controller names it
    manifest = Campaign.open(campaign).manifest
    assert manifest["config"]["corpus"] == str(project.path / "corpus.json")
    assert campaign.name[-6:-3] == manifest["config_hash"][:3]
