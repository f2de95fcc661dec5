"""The package's imports go one way: no module imports (at its top, inside a function, or for type checking) a
module that imports it back, and the pytest layer's direction is options → settings → plugin → the rest
(docs/architecture.md draws it)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_agent_eval"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Every module of the package → the modules of the package it imports, wherever the import statement is
    (``from pytest_agent_eval.plugin import hooks`` imports both the package and its submodule)."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, node.module] if node.module else base)
                found.add(module)
                found.update(f"{module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {module for module in found if module in modules and module != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_the_package_imports_one_that_imports_it_back():
    assert _cycles(_imports()) == []


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_the_pytest_layer_imports_one_way():
    graph = _imports()
    # The thin module pytest loads in every session imports the plugin object and the fixtures' bodies, never
    # the other way: they reach the session's state through the plugin object alone.
    for module in ("pytest_agent_eval.plugin.hooks", "pytest_agent_eval.plugin.fixtures"):
        assert "pytest_agent_eval.plugin" not in graph[module], module
    assert "pytest_agent_eval.plugin.fixtures" not in graph["pytest_agent_eval.plugin.hooks"]
    # Settings know nothing of pytest's layer, nor the option table of how its texts are parsed.
    settings = [name for name in graph if name.startswith("pytest_agent_eval.settings")]
    assert not [(name, dep) for name in settings for dep in graph[name] if dep.startswith("pytest_agent_eval.plugin")]
    assert graph["pytest_agent_eval.settings.options"] == set()
    assert "pytest_agent_eval.settings.config" not in graph["pytest_agent_eval.settings.parsers"]


def test_the_registry_is_below_what_reads_campaigns_back():
    """The registry (settings/registry.py) finds agents and tools for the campaign, report, CLI and harness
    layers; it imports none of them, and only the agents' base and the tool description of what it finds."""
    graph = _imports()
    found = graph["pytest_agent_eval.settings.registry"]
    assert found <= {
        "pytest_agent_eval.settings.reference",
        "pytest_agent_eval.agents.base",
        "pytest_agent_eval.tool",
    }, found
    readers = ("campaign.made_by", "campaign.rescore", "report.html", "cli", "settings.parsers")
    for reader in readers:  # each resolves through it, none by a table of its own
        module = f"pytest_agent_eval.{reader}"
        assert graph[module] & {"pytest_agent_eval.settings.registry", "pytest_agent_eval.campaign.made_by"}, module
