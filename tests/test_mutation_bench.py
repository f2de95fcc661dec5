"""bench/mutation.py without running mutmut: which tests a module is mutated against, how a survivor is read off
mutmut's diff, and that every judgement bench/mutation.yaml keeps names a function of its module and finds its
survivor (docs/benchmarks.md, "Mutation testing")."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mutation_bench", ROOT / "bench" / "mutation.py")
bench = sys.modules["mutation_bench"] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
spec.loader.exec_module(bench)


@pytest.mark.parametrize(
    "name", ["metrics/sufficiency.py", "pytest_agent_eval/metrics/sufficiency.py", "metrics.sufficiency"]
)
def test_a_module_is_named_by_path_or_dotted(name):
    assert bench.module_path(name) == Path("pytest_agent_eval/metrics/sufficiency.py")


def test_an_unknown_module_is_a_clear_error():
    with pytest.raises(SystemExit, match=r"no module 'metrics/nothing\.py'"):
        bench.module_path("metrics/nothing.py")


def test_the_tests_are_the_files_that_import_the_module_unless_the_config_names_them():
    config = bench.load_config()
    assert "tests/test_sufficiency.py" in bench.test_files(bench.module_path("metrics/sufficiency.py"), config)
    assert "tests/test_allocation.py" not in bench.test_files(bench.module_path("metrics/sufficiency.py"), config)
    # `from pytest_agent_eval.harness.untrusted import …` and the config's own list
    assert "tests/test_escape.py" in bench.importers(bench.module_path("harness/untrusted.py"))
    assert bench.test_files(bench.module_path("tool/cli_matcher.py"), config) == ["tests/test_cli_matcher.py"]


DIFF = """\
--- pytest_agent_eval/metrics/sufficiency.py
+++ pytest_agent_eval/metrics/sufficiency.py
@@ -1,3 +1,3 @@
 def _bare_name(name: str) -> str:
-    return name.rsplit("__", 1)[-1] if name.startswith("mcp__") else name
+    return name.rsplit("__", 2)[-1] if name.startswith("mcp__") else name
"""


def test_a_survivor_is_the_line_it_changed_and_a_judgement_finds_it_by_function_and_line():
    removed, added = bench.diff_lines(DIFF)
    assert removed == ['return name.rsplit("__", 1)[-1] if name.startswith("mcp__") else name']
    assert added == ['return name.rsplit("__", 2)[-1] if name.startswith("mcp__") else name']
    name = "pytest_agent_eval.metrics.sufficiency.x__bare_name__mutmut_3"
    assert bench.function_of(name) == "_bare_name"
    assert bench.function_of("pytest_agent_eval.metrics.allocation.xǁAllocationǁby_file__mutmut_9") == (
        "Allocation.by_file"
    )
    score = bench.Score("pytest_agent_eval/metrics/sufficiency.py", [])
    score.survivors = [bench.Survivor(name, "survived", "_bare_name", removed, added)]
    elsewhere = {"module": "metrics/sufficiency.py", "function": "_query", "line": added[0], "why": "no"}
    config = {"equivalent": [dict(elsewhere, function="_bare_name", why="same last part"), elsewhere]}
    bench.judge(score, Path("pytest_agent_eval/metrics/sufficiency.py"), config)
    assert score.survivors[0].judgement == "same last part"
    assert score.stale == [elsewhere]  # another function's line: no such survivor
    report = bench.report(score)
    assert "# equivalent: same last part" in report and "stale judgement (_query:" in report


def test_every_kept_judgement_names_a_function_of_its_module():
    for judgement in bench.load_config()["equivalent"]:
        path = ROOT / "pytest_agent_eval" / judgement["module"]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert judgement["function"].rsplit(".", 1)[-1] in functions, judgement
