"""Provisioning for real: codegraph and Claude Code from the npm registry, corpus repositories from
their offline sources (npm, PyPI) or a local git clone, a real codegraph index, and workspaces."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agent_eval.agents.claude_code import CLAUDE_CODE
from pytest_agent_eval.corpus.load import CorpusEntry
from pytest_agent_eval.corpus.repos import fallback_warning, fetch_repo, fetched_source
from pytest_agent_eval.harness.index import indexed_copy
from pytest_agent_eval.harness.provenance import git_state
from pytest_agent_eval.harness.provision import (
    Provisioned,
    ProvisionError,
    provision_tool,
    read_builds,
)
from pytest_agent_eval.harness.workspace import make_workspace
from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.warnings import AgentEvalWarning

REPO_ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # npm installs, registry downloads and index builds

EXPRESS = CorpusEntry(
    name="express",
    language="JavaScript",
    repo="https://github.com/expressjs/express",
    size="Small",
    files=140,
    questions=["How does res.send decide the Content-Type and ETag?"],
    source="npm:express@4.21.2",
)


@pytest.fixture(scope="session")
def codegraph_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Provisioned]]:
    """codegraph 1.6.1 installed once for the whole session (about 10 s)."""
    cache = tmp_path_factory.mktemp("cache")
    yield cache, provision_tool(CODEGRAPH, "1.6.1", cache)
    shutil.rmtree(cache, ignore_errors=True)  # an install is ~300 MB of bundled runtimes


@pytest.fixture(scope="session")
def express_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fetch_repo(EXPRESS, tmp_path_factory.mktemp("corpus"), offline=True)


def _installs(cache: Path) -> list[dict]:
    return [b for b in read_builds(cache) if b["kind"] == "install"]


def _indexes(cache: Path) -> list[dict]:
    return [b for b in read_builds(cache) if b["kind"] == "index"]


# --- codegraph ---------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_codegraph_installs_into_the_cache(codegraph_cache: tuple[Path, Provisioned]) -> None:
    cache, cg = codegraph_cache
    assert cg.name == "codegraph" and cg.version == "1.6.1" and cg.spec == "1.6.1"
    assert cg.bin == cache / "codegraph" / "1.6.1" / "node_modules" / ".bin" / "codegraph"
    out = subprocess.run([str(cg.bin), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1.6.1"
    (install,) = _installs(cache)
    assert install["what"] == "@colbymchenry/codegraph@1.6.1" and install["seconds"] > 0
    # A second request is served from the cache: same binary, no new install.
    assert provision_tool(CODEGRAPH, "1.6.1", cache) == cg
    assert len(_installs(cache)) == 1


@pytest.mark.timeout(300)
def test_parallel_workers_install_once(tmp_path: Path) -> None:
    """Two processes (as two xdist workers would) asking at once: one installs, the other waits and reuses."""
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from pytest_agent_eval.harness.provision import provision_tool
        from pytest_agent_eval.tool import CODEGRAPH
        print(provision_tool(CODEGRAPH, "1.6.1", Path(sys.argv[1])).bin)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for _ in range(2)
    ]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], [err.decode()[-2000:] for _, err in outs]
    bins = {out.decode().strip() for out, _ in outs}
    assert bins == {str(tmp_path / "codegraph" / "1.6.1" / "node_modules" / ".bin" / "codegraph")}
    assert len(_installs(tmp_path)) == 1
    shutil.rmtree(tmp_path / "codegraph")


@pytest.mark.timeout(300)
def test_unknown_version_is_a_provision_error_with_npm_stderr(tmp_path: Path) -> None:
    with pytest.raises(ProvisionError) as info:
        provision_tool(CODEGRAPH, "0.0.999", tmp_path)
    assert "npm install @colbymchenry/codegraph@0.0.999 failed" in str(info.value)
    assert "ETARGET" in str(info.value) or "No matching version" in str(info.value)
    # The failed install leaves nothing that a later call could mistake for a finished one.
    assert not (tmp_path / "codegraph" / "0.0.999").exists()
    assert _installs(tmp_path) == []


@pytest.mark.timeout(300)
def test_latest_resolves_to_a_concrete_version(tmp_path: Path) -> None:
    cg = provision_tool(CODEGRAPH, "latest", tmp_path)
    published = subprocess.run(
        ["npm", "view", "@colbymchenry/codegraph@latest", "version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert cg.spec == "latest" and cg.version == published
    # Installed under its version, so a later "latest" or an exact request for it reuses the install.
    assert cg.bin == tmp_path / "codegraph" / published / "node_modules" / ".bin" / "codegraph"
    assert provision_tool(CODEGRAPH, published, tmp_path).bin == cg.bin
    assert len(_installs(tmp_path)) == 1
    shutil.rmtree(tmp_path / "codegraph")


def test_bad_spec_is_rejected_before_npm(tmp_path: Path) -> None:
    with pytest.raises(ProvisionError, match="unknown version spec 'newest'"):
        provision_tool(CODEGRAPH, "newest", tmp_path)
    with pytest.raises(ProvisionError, match="not a codegraph checkout"):
        provision_tool(CODEGRAPH, f"local:{tmp_path}", tmp_path / "cache")


@pytest.mark.timeout(300)
def test_local_checkout_is_built_in_a_copy(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (checkout / "package.json").write_text(
        json.dumps(
            {
                "name": "codegraph-dev",
                "version": "9.8.7-dev",
                "private": True,
                "bin": {"codegraph": "dist/cli.js"},
                "scripts": {"build": "node build.js"},
            }
        )
    )
    (checkout / "src" / "cli.js").write_text(
        "#!/usr/bin/env node\nif (process.argv[2] === '--version') console.log(require('../package.json').version);\n"
    )
    (checkout / "build.js").write_text(
        "const fs = require('fs');\n"
        "fs.mkdirSync('dist', {recursive: true});\n"
        "fs.copyFileSync('src/cli.js', 'dist/cli.js');\n"
        "fs.copyFileSync('package.json', 'dist/package.json');\n"
    )
    cache = tmp_path / "cache"
    cg = provision_tool(CODEGRAPH, f"local:{checkout}", cache)
    assert cg.version == "9.8.7-dev" and cg.spec == f"local:{checkout}"
    assert cg.bin.is_relative_to(cache) and cg.bin.name == "cli.js"
    # The user's checkout is not touched: no node_modules, no dist.
    assert sorted(p.name for p in checkout.iterdir()) == ["build.js", "package.json", "src"]
    assert provision_tool(CODEGRAPH, f"local:{checkout}", cache) == cg
    assert len(_installs(cache)) == 1
    # An edited checkout is a different build.
    (checkout / "package.json").write_text((checkout / "package.json").read_text().replace("9.8.7-dev", "9.8.8-dev"))
    assert provision_tool(CODEGRAPH, f"local:{checkout}", cache).version == "9.8.8-dev"
    assert len(_installs(cache)) == 2


# --- claude --------------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_claude_pinned_install_and_path_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    # No claude on PATH: the pinned release is installed into the cache.
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not _has_claude(p)))
    try:
        claude = CLAUDE_CODE.provision(cache, None)
        assert claude.version == CLAUDE_CODE.version
        assert claude.bin == cache / "claude" / CLAUDE_CODE.version / "node_modules" / ".bin" / "claude"
        # With that claude on PATH, spec=None uses it and installs nothing.
        monkeypatch.setenv("PATH", f"{claude.bin.parent}{os.pathsep}{os.environ['PATH']}")
        other = tmp_path / "other-cache"
        found = CLAUDE_CODE.provision(other, None)
        assert (found.bin, found.version, found.spec) == (claude.bin, CLAUDE_CODE.version, "PATH")
        assert not other.exists()
    finally:
        shutil.rmtree(cache, ignore_errors=True)  # ~400 MB of native binaries


def _has_claude(directory: str) -> bool:
    return bool(directory) and os.access(os.path.join(directory, "claude"), os.X_OK)


# --- repositories --------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_fetch_express_offline_from_npm(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / ".express.partial-dead" / "repo").mkdir(parents=True)  # a fetch that died half-way
    repo = fetch_repo(EXPRESS, corpus, offline=True)
    assert repo == corpus / "express"
    assert "res.send = function send(body)" in (repo / "lib" / "response.js").read_text()
    assert json.loads((repo / "package.json").read_text())["version"] == "4.21.2"
    assert json.loads((corpus / ".express.fetched").read_text()) == {
        "how": "source",
        "from": "npm:express@4.21.2",
        "source": {"kind": "npm", "spec": "npm:express@4.21.2", "version": "4.21.2"},
    }
    assert fetched_source(repo) == {"kind": "npm", "spec": "npm:express@4.21.2", "version": "4.21.2"}
    assert fallback_warning(repo, offline=True) is None  # offline asked for the source: no fallback
    assert not list(corpus.glob(".express.partial-*"))
    # Reused: a file added to the fetched copy survives a second fetch.
    (repo / "marker.txt").write_text("kept")
    assert fetch_repo(EXPRESS, corpus, offline=True) == repo
    assert (repo / "marker.txt").read_text() == "kept"


@pytest.mark.timeout(300)
def test_fetch_falls_back_to_the_source_when_the_clone_fails(tmp_path: Path) -> None:
    entry = dataclasses.replace(EXPRESS, repo=f"file://{tmp_path}/no-such-repo.git")
    with pytest.warns(
        AgentEvalWarning, match=r"express: the code under test is the offline source npm:express@4\.21\.2"
    ):
        repo = fetch_repo(entry, tmp_path / "corpus")
    assert (repo / "lib" / "response.js").is_file()
    assert json.loads((tmp_path / "corpus" / ".express.fetched").read_text())["how"] == "source"
    source = fetched_source(repo)
    assert (source["kind"], source["spec"], source["version"]) == ("npm", "npm:express@4.21.2", "4.21.2")
    assert "git clone" in source["fallback"] and "no-such-repo.git" in source["fallback"]
    # Reusing the fallback copy warns again: every session that tests it must hear it is not the clone.
    with pytest.warns(AgentEvalWarning, match="not a clone"):
        assert fetch_repo(entry, tmp_path / "corpus") == repo


@pytest.mark.timeout(300)
def test_fetch_pypi_sdist(tmp_path: Path) -> None:
    entry = CorpusEntry(
        name="requests",
        language="Python",
        repo="https://github.com/psf/requests",
        size="Small",
        files=90,
        questions=["How does requests.get send a request?"],
        source="pypi:requests==2.32.3",
    )
    repo = fetch_repo(entry, tmp_path, offline=True)
    assert "class Session" in (repo / "src" / "requests" / "sessions.py").read_text()
    assert "2.32.3" in (repo / "PKG-INFO").read_text()


@pytest.mark.timeout(120)
def test_fetch_clones_a_git_url(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "main.go").write_text("package main\n")
    git_env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "first"]):
        subprocess.run(cmd, cwd=upstream, env=git_env, check=True)
    entry = CorpusEntry("tiny", "Go", f"file://{upstream}", "Small", 1, ["What is here?"])
    repo = fetch_repo(entry, tmp_path / "corpus")
    assert (repo / "main.go").read_text() == "package main\n"
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=repo, capture_output=True, text=True)
    assert shallow.stdout.strip() == "true"
    assert json.loads((tmp_path / "corpus" / ".tiny.fetched").read_text())["how"] == "clone"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=upstream, capture_output=True, text=True).stdout.strip()
    assert fetched_source(repo) == {"kind": "clone", "url": f"file://{upstream}", "commit": head}
    # Offline with no source: an error that says why.
    with pytest.raises(ProvisionError, match="no offline source"):
        fetch_repo(CorpusEntry("other", "Go", f"file://{upstream}", "Small", 1, ["?"]), tmp_path / "c2", offline=True)


@pytest.mark.timeout(60)
def test_fetch_without_source_reports_the_git_error(tmp_path: Path) -> None:
    entry = CorpusEntry("gone", "Go", f"file://{tmp_path}/missing.git", "Small", 1, ["?"])
    with pytest.raises(ProvisionError) as info:
        fetch_repo(entry, tmp_path / "corpus")
    assert "git clone" in str(info.value) and "missing.git" in str(info.value)
    assert not (tmp_path / "corpus" / "gone").exists()
    assert not (tmp_path / "corpus" / ".gone.fetched").exists()


def test_fetch_adopts_a_checkout_already_there(tmp_path: Path) -> None:
    (tmp_path / "express" / "lib").mkdir(parents=True)
    (tmp_path / "express" / "lib" / "response.js").write_text("// the user's own clone\n")
    repo = fetch_repo(EXPRESS, tmp_path, offline=True)
    assert (repo / "lib" / "response.js").read_text() == "// the user's own clone\n"


def test_fetch_copies_a_local_source(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "lib").mkdir(parents=True)
    (checkout / "lib" / "a.js").write_text("module.exports = 1\n")
    entry = CorpusEntry("local", "JavaScript", "https://example.invalid/x.git", "Small", 1, ["?"], str(checkout))
    repo = fetch_repo(entry, tmp_path / "corpus", offline=True)
    assert (repo / "lib" / "a.js").read_text() == "module.exports = 1\n"
    assert repo != checkout
    assert fetched_source(repo) == {"kind": "local", "path": str(checkout), "git_state": None}  # not a git tree


def test_a_cached_copy_is_reused_only_when_its_origin_is_what_the_entry_asks(tmp_path: Path) -> None:
    checkout = tmp_path / "v1"
    (checkout / "lib").mkdir(parents=True)
    (checkout / "lib" / "a.js").write_text("// v1\n")
    entry = CorpusEntry("local", "JavaScript", "https://example.invalid/x.git", "Small", 1, ["?"], str(checkout))
    repo = fetch_repo(entry, tmp_path / "corpus", offline=True)
    (repo / "kept.txt").write_text("a copy of what was asked is reused")
    assert fetch_repo(entry, tmp_path / "corpus", offline=True) == repo and (repo / "kept.txt").exists()
    # The entry now pins another source: the cached copy of the old one is not it.
    other = tmp_path / "v2"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "a.js").write_text("// v2\n")
    moved = dataclasses.replace(entry, source=str(other))
    assert fetch_repo(moved, tmp_path / "corpus", offline=True) == repo
    assert (repo / "lib" / "a.js").read_text() == "// v2\n" and not (repo / "kept.txt").exists()
    assert fetched_source(repo)["path"] == str(other)


def test_git_state_says_commit_and_dirt(tmp_path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}  # fmt: skip
    (tmp_path / "a.js").write_text("1\n")
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "first"]):
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "new.js").write_text("2\n")  # untracked files are indexed too
    assert git_state(tmp_path) == {"commit": head, "dirty": True}
    assert git_state(tmp_path.parent / "nowhere") is None


# --- index and workspace -------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_indexed_copy_builds_once(
    codegraph_cache: tuple[Path, Provisioned], express_repo: Path, tmp_path: Path
) -> None:
    _, cg = codegraph_cache
    cache = tmp_path / "cache"
    source = tmp_path / "express"
    shutil.copytree(express_repo, source)
    (source / ".codegraph").mkdir()
    (source / ".codegraph" / "stale.db").write_text("from another version")
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(indexed_copy(source, CODEGRAPH, cg, cache))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert len(results) == 2 and results[0] == results[1]
    indexed = results[0]
    assert indexed != source and (indexed / ".codegraph" / "codegraph.db").is_file()
    assert not (indexed / ".codegraph" / "stale.db").exists()
    assert (source / ".codegraph" / "stale.db").exists()  # the corpus copy itself is not touched
    assert indexed_copy(source, CODEGRAPH, cg, cache) == indexed
    (build,) = _indexes(cache)
    assert build["version"] == "1.6.1" and build["repo"] == str(source.resolve()) and build["seconds"] > 0
    status = _codegraph(cg, "status", indexed)
    assert "Index is up to date" in status


@pytest.mark.timeout(120)
def test_index_failure_names_repo_and_version(tmp_path: Path, express_repo: Path) -> None:
    broken = tmp_path / "codegraph"
    broken.write_text("#!/bin/sh\necho 'parser crashed on lib/router' >&2\nexit 3\n")
    broken.chmod(0o755)
    cg = Provisioned("codegraph", broken, "0.0.1", "broken build")
    with pytest.raises(ProvisionError) as info:
        indexed_copy(express_repo, CODEGRAPH, cg, tmp_path / "cache")
    text = str(info.value)
    assert "codegraph 0.0.1" in text and str(express_repo) in text and "parser crashed on lib/router" in text
    assert _indexes(tmp_path / "cache") == []


@pytest.mark.timeout(300)
def test_workspace_is_a_separate_copy(codegraph_cache: tuple[Path, Provisioned], express_repo: Path) -> None:
    cache, cg = codegraph_cache
    indexed = indexed_copy(express_repo, CODEGRAPH, cg, cache)
    dest = cache.parent / "ws"
    ws = make_workspace(indexed, dest)
    assert (ws.repo, ws.home, ws.tmp) == (dest / "repo", dest / "home", dest / "tmp")
    assert list(ws.home.iterdir()) == [] and list(ws.tmp.iterdir()) == []
    # The copied index works from its new place.
    assert "Index is up to date" in _codegraph(cg, "status", ws.repo)
    edited = ws.repo / "lib" / "response.js"
    edited.write_text("// the agent rewrote this\n")
    assert "res.send" in (indexed / "lib" / "response.js").read_text()
    assert "Index is up to date" in _codegraph(cg, "status", indexed)
    env = ws.env({"PATH": "/usr/bin", "HOME": "/root", "XDG_CONFIG_HOME": "/root/.config"})
    assert env == {
        "PATH": "/usr/bin",
        "HOME": str(ws.home),
        "TMPDIR": str(ws.tmp),
        "TMP": str(ws.tmp),
        "TEMP": str(ws.tmp),
    }
    with pytest.raises(FileExistsError):
        make_workspace(indexed, dest)


def _codegraph(cg: Provisioned, command: str, repo: Path) -> str:
    home = repo.parent / f"{repo.name}-home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "DO_NOT_TRACK": "1", "CODEGRAPH_NO_DAEMON": "1"}
    proc = subprocess.run(
        [str(cg.bin), command, str(repo)], cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return proc.stdout


def test_long_tool_runs_are_announced_and_quick_queries_are_not():
    from pytest_agent_eval.harness.progress import listen
    from pytest_agent_eval.harness.provision import run_tool

    heard: list[str] = []
    stop = listen(heard.append)
    try:
        run_tool([sys.executable, "-c", "print('ok')"], "npm install demo@1")
        run_tool([sys.executable, "-c", "print('1.0.0')"], "demo --version", quiet=True)
    finally:
        stop()
    assert heard[0] == "npm install demo@1 …"
    assert re.fullmatch(r"npm install demo@1: done in \d+\.\ds", heard[1])
    assert len(heard) == 2
    run_tool([sys.executable, "-c", "pass"], "after stop")
    assert len(heard) == 2
