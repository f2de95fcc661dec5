"""The plugin is a light guest (issue 10.5): pytest imports it in every session of every project it is installed
in, so loading it, and a session that runs no agent item, import only what registers the options, the marker, the
hooks and the fixtures. What that costs in time is measured by bench/load_bench.py, not here: these tests check
which modules load, which does not depend on the machine's load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What registering needs: the option table (config, and the arms it parses), the fixtures' definitions, the
# progress channel the plugin listens on. Everything else loads with the first agent item.
AT_LOAD = {
    "pytest_agent_eval",
    "pytest_agent_eval.plugin",
    "pytest_agent_eval.config",
    "pytest_agent_eval.cases",
    "pytest_agent_eval.fixtures",
    "pytest_agent_eval.harness",
    "pytest_agent_eval.harness.progress",
}
HEAVY_LIBRARIES = {"filelock", "yaml", "tabulate", "msgspec", "ahocorasick_rs"}
LOADED = f"sorted(m for m in sys.modules if m.split('.')[0] == 'pytest_agent_eval' or m in {HEAVY_LIBRARIES!r})"


def test_importing_the_plugin_loads_only_what_registering_needs():
    code = f"import sys, pytest, pytest_agent_eval.plugin, json; print(json.dumps({LOADED}))"
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert set(loaded) <= AT_LOAD, f"imported at load: {sorted(set(loaded) - AT_LOAD)}"


def test_what_loads_with_the_plugin_defines_no_dataclass():
    # A dataclass generates its methods from source when its class is made: about five times what a named tuple
    # costs, and for the thirty settings more than the option table itself (bench/load_bench.py --instructions).
    code = (
        "import dataclasses, json, sys, pytest, pytest_agent_eval.plugin\n"
        "print(json.dumps(sorted(f'{m.__name__}.{name}' for m in list(sys.modules.values())"
        " if m.__name__.startswith('pytest_agent_eval') for name, value in vars(m).items()"
        " if isinstance(value, type) and value.__module__ == m.__name__ and dataclasses.is_dataclass(value))))"
    )
    made = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert made == []


@pytest.mark.slow  # a pytest subprocess
@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["local", "xdist"])
def test_a_session_without_an_agent_item_loads_nothing_more(pytester: pytest.Pytester, monkeypatch, xdist):
    # A real-looking key: the report header decides what `auto` means without loading the model package.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-" + "q" * 40)
    # Under xdist the controller (which collects nothing) and each worker write what they loaded: a worker at
    # its session's finish, since the controller may end it once it has reported, before its unconfigure ran.
    pytester.makeconftest(
        f"""
import json, sys

def dump(name):
    with open(f"loaded-{{name}}.json", "w") as out:
        json.dump({LOADED}, out)

def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        dump(session.config.workerinput["workerid"])

def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        dump("controller")
"""
    )
    pytester.makepyfile(test_unrelated="def test_one():\n    assert True\n")
    # -k with an arm's word: the plugin's own -k reading must not load for a suite without agent items
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "one or without", *xdist)
    result.assert_outcomes(passed=1)
    processes = {"controller", "gw0", "gw1"} if xdist else {"controller"}
    files = {path.stem.removeprefix("loaded-"): path for path in pytester.path.glob("loaded-*.json")}
    assert set(files) == processes
    for name, path in files.items():
        loaded = set(json.loads(path.read_text()))
        assert loaded <= AT_LOAD, f"imported by a session without agent items ({name}): {sorted(loaded - AT_LOAD)}"
        assert "pytest_agent_eval.plugin" in loaded  # the plugin did run in that process
