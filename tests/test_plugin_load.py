"""The plugin is a light guest (docs/benchmarks.md, the load goal): pytest imports it in every session of every
project it is installed in, so loading it, and a session that runs no agent item, import only what registers the
options, the marker, the hooks and the fixtures. What that costs in time is measured by bench/load_bench.py, not
here: these tests check which modules load, which does not depend on the machine's load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What registering needs: the option table and the plugin's thin layer (its hooks, its fixtures' declarations).
# Everything else loads with the first agent item.
AT_LOAD = {"pytest_agent_eval", "pytest_agent_eval.plugin", "pytest_agent_eval.settings",
           "pytest_agent_eval.settings.options"}  # fmt: skip
# An xdist controller names the campaign and follows its workers' progress from the start: the hooks' bodies,
# and the settings (defaults need no parser; the cache folder's is the harness's; `auto`'s key checks are plain
# string tests in model/keys.py, under a model package that loads nothing until asked).
FOR_XDIST = {"pytest_agent_eval.plugin.hooks", "pytest_agent_eval.plugin.items", "pytest_agent_eval.harness",
             "pytest_agent_eval.harness.progress", "pytest_agent_eval.harness.cache",
             "pytest_agent_eval.settings.config", "pytest_agent_eval.corpus",
             "pytest_agent_eval.corpus.cases", "pytest_agent_eval.model",
             "pytest_agent_eval.model.keys"}  # fmt: skip
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
@pytest.mark.parametrize(
    ("flags", "allowed"),
    [(["-q"], {"controller": AT_LOAD}),
     ([], {"controller": AT_LOAD}),
     (["-n", "2"], {"controller": AT_LOAD | FOR_XDIST, "gw0": AT_LOAD, "gw1": AT_LOAD})],
    ids=["quiet", "local", "xdist"],
)  # fmt: skip
def test_a_session_without_an_agent_item_loads_nothing_more(pytester: pytest.Pytester, monkeypatch, flags, allowed):
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
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "one or without", *flags)
    result.assert_outcomes(passed=1)
    files = {path.stem.removeprefix("loaded-"): path for path in pytester.path.glob("loaded-*.json")}
    assert set(files) == set(allowed)
    for name, path in files.items():
        loaded = set(json.loads(path.read_text()))
        extra = sorted(loaded - allowed[name])
        assert not extra, f"imported by a session without agent items ({name}): {extra}"
        assert "pytest_agent_eval.plugin" in loaded  # the plugin did run in that process
    if not flags:  # no settings given, no agent item: nothing of the plugin's in the header or after collection
        assert not [line for line in result.outlines if line.startswith("agent-eval")]


def test_every_fixture_declared_by_the_plugin_has_a_body_of_the_same_parameters():
    # pytest reads what a fixture requests from the declaration (plugin.py); its body (fixtures.py) is called with
    # exactly those values, by name: a parameter added to one and not the other would fail only when set up.
    import ast
    import inspect

    from pytest_agent_eval import plugin
    from pytest_agent_eval.plugin import fixtures

    tree = ast.parse(inspect.getsource(plugin))
    declared = {
        node.name: [arg.arg for arg in node.args.args]
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name != "_body" and "_body(" in ast.unparse(node)
    }
    assert len(declared) > 15
    bodies = {name: list(inspect.signature(getattr(fixtures, name)).parameters) for name in declared}
    assert bodies == declared


def test_one_plugin_object_owns_an_evaluating_sessions_state(pytester: pytest.Pytester):
    # The hooks of a session that evaluates are the methods of one object, registered with its first agent item;
    # each agent item keeps its own state (here: its campaign id) in one stash key. A session without agent items
    # registers nothing.
    pytester.makeconftest(
        """
import json

def pytest_collection_finish(session):
    from pytest_agent_eval.plugin.hooks import ITEM_KEY

    plugin = session.config.pluginmanager.get_plugin("agent_eval_session")
    ids = {item.name: item.stash[ITEM_KEY].item_id for item in session.items if ITEM_KEY in item.stash}
    with open("state.json", "w") as out:
        json.dump({"plugin": type(plugin).__name__ if plugin is not None else None, "ids": ids}, out)
"""
    )
    pytester.makepyfile(
        test_evals="def test_ab(agent_result):\n    pass\n\ndef test_again(agent_result):\n    pass\n",
        test_unit="def test_one():\n    assert True\n",
    )
    state = pytester.path / "state.json"
    pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", "test_unit.py").assert_outcomes()
    assert json.loads(state.read_text()) == {"plugin": None, "ids": {}}
    args = ["test_evals.py", "-k", "express and with and not without", "--agent-eval-runs", "1"]
    pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q", *args).assert_outcomes()
    assert json.loads(state.read_text()) == {
        "plugin": "AgentEvalPlugin",
        # two tests with the same case: the campaign tells them apart by the test's name
        "ids": {
            "test_ab[express-with-1]": "test_ab.express-with-1",
            "test_again[express-with-1]": "test_again.express-with-1",
        },
    }
