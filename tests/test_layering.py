"""The package's imports go one way: no module imports (at its top, inside a function, or for type checking) a
module that imports it back, no first-level package imports one that imports it back (directly or through
others), and the pytest layer's direction is options → settings → plugin → the rest (docs/architecture.md draws
it)."""

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
    """The registry (agents/registry.py) finds agents and tools for the campaign, report, CLI and harness
    layers; it imports none of them, and only the agents' base, the one table of built-in agents and the tool
    description of what it finds."""
    graph = _imports()
    found = graph["pytest_agent_eval.agents.registry"]
    assert found <= {
        "pytest_agent_eval.reference",
        "pytest_agent_eval.agents.base",
        "pytest_agent_eval.agents.built_in",
        "pytest_agent_eval.tool",
    }, found
    readers = ("campaign.made_by", "campaign.rescore", "report.html", "cli", "settings.parsers")
    for reader in readers:  # each resolves through it, none by a table of its own
        module = f"pytest_agent_eval.{reader}"
        assert graph[module] & {"pytest_agent_eval.agents.registry", "pytest_agent_eval.campaign.made_by"}, module


AGENTS = "pytest_agent_eval.agents"
# The agents' package itself: the protocol (base), the one table of built-in agents, the registry that finds them
# and the plug-ins, whose-record-is-this (the rest of agents/ is one folder per agent).
AGENT_PROTOCOL = {AGENTS, f"{AGENTS}.base", f"{AGENTS}.built_in", f"{AGENTS}.registry", f"{AGENTS}.recognition"}


def _agent_folder(module: str) -> str | None:
    """The particular agent's folder ``module`` is in (``pytest_agent_eval.agents.codex``), None for any other."""
    parts = module.split(".")
    folder = ".".join(parts[:3])
    return folder if len(parts) > 2 and parts[1] == "agents" and folder not in AGENT_PROTOCOL else None


def _package(module: str) -> str:
    """The package ``module`` belongs to at the level the direction rules speak of (docs/architecture.md): a
    top-level package, the agents' protocol (``agents``), or a particular agent's folder (``agents.<name>``)."""
    folder = _agent_folder(module)
    return folder.removeprefix("pytest_agent_eval.") if folder else module.split(".")[1] if "." in module else "."


def test_no_module_outside_an_agents_folder_imports_it():
    """What is particular to an agent lives in its folder (docs/architecture.md, "An agent is one folder"): nothing
    else imports it, not even another agent; generic code asks the agent object, found through the registry."""
    graph = _imports()
    outside = sorted(
        (module, imported)
        for module, found in graph.items()
        for imported in found
        if _agent_folder(imported) and _agent_folder(imported) != _agent_folder(module)
    )
    assert outside == []


def test_an_agent_folder_imports_only_the_packages_below_it():
    """A particular agent is above the generic parts it is made of — the agents' protocol, the harness, the model
    server and its APIs, the tool's description, the common transcript — and below what reads or runs it (campaign,
    metrics, report, settings, the CLI, the plugin), which reach it only through the registry."""
    below = {"agents", "harness", "model", "tool", "transcript"}
    graph = _imports()
    above = sorted(
        (module, imported)
        for module, found in graph.items()
        if _agent_folder(module)
        for imported in found
        if _package(imported) != _package(module) and _package(imported) not in below
    )
    assert above == []


def test_the_generic_model_code_is_below_the_agents():
    """The model server, its APIs and the generic cassette know no particular agent: they import of ``agents/``
    the protocol alone (the types, whose-record-is-this), and route by what an agent object declares (its speech,
    its cassette)."""
    graph = _imports()
    model = [name for name in graph if name.split(".")[1:2] == ["model"]]
    reached = {imported for name in model for imported in graph[name] if imported.startswith(f"{AGENTS}")}
    assert reached <= AGENT_PROTOCOL, reached


# An upward import between first-level packages not cut yet: (importer, imported), each with why. The direction
# test sets these aside and refuses any other cycle among the packages; an entry that no longer holds is refused too.
ALLOWED_UPWARD: set[tuple[str, str]] = set()  # a pair of packages one may import upward, and why: none


def _first_level(module: str) -> str:
    """The first-level package (or top-level module: ``cli``, ``reference``) ``module`` is in; ``.`` for the
    package's own ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "."


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto the first-level packages: a package imports another when one of its modules
    imports one of the other's."""
    packages: dict[str, set[str]] = {_first_level(module): set() for module in graph}
    for module, found in graph.items():
        packages[_first_level(module)].update(_first_level(imported) for imported in found)
    return {package: found - {package} for package, found in packages.items()}


def test_the_first_level_packages_import_one_way():
    """No two first-level packages import each other, directly or through others (docs/architecture.md draws
    their order): what two packages share moves down, what composes them (run/) sits above both."""
    packages = _package_graph(_imports())
    assert sorted(edge for edge in ALLOWED_UPWARD if edge[1] not in packages[edge[0]]) == []
    one_way = {package: found - {b for a, b in ALLOWED_UPWARD if a == package} for package, found in packages.items()}
    assert _cycles(one_way) == []


def test_the_package_graph_folds_a_cycle_through_a_third_package():
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": {"p.c"}, "p.c": {"p.a.w"}, "p.a.w": set(), "p.d": {"p.a.x"}}
    assert _cycles(_package_graph(graph)) == [["a", "b", "c"]]
