"""Rules of the repository's layout that no linter holds: test modules share helpers through tests/support/ only,
and every module of the package says its one job on its first line."""

from __future__ import annotations

import ast
import re

from support.paths import REPO

TESTS = REPO / "tests"
# An import of a test module or of conftest, at any indentation (inside a function, or in a script a test runs).
TEST_MODULE_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+(test_\w+|conftest)\b", re.M)


def imports_of_test_modules(text: str) -> list[str]:
    return TEST_MODULE_IMPORT.findall(text)


def test_the_check_sees_every_way_a_test_module_is_imported():
    script = 'SCRIPT = """\nimport sys\nfrom test_shard import selection\n"""\n'
    assert imports_of_test_modules(script) == ["test_shard"]
    assert imports_of_test_modules("def f():\n    from conftest import RealTools\n") == ["conftest"]
    assert imports_of_test_modules("import test_cli as cli\nfrom support.synth import Transcript\n") == ["test_cli"]
    assert imports_of_test_modules("from support.records import with_run  # test_compare's once\n") == []


def test_no_test_module_imports_another_or_conftest():
    """Shared helpers live in tests/support/; a test module imported by another runs its tests' module code twice
    and ties one module's refactoring to every module that borrowed from it."""
    sources = [p for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts]
    assert len(sources) > 50 and TESTS / "support" / "synth.py" in sources
    found = {str(p.relative_to(REPO)): names for p in sources if (names := imports_of_test_modules(p.read_text()))}
    assert found == {}


def test_every_package_module_starts_with_a_docstring_saying_its_job():
    """A newcomer opening any module reads first what it is for; an empty ``__init__.py`` says nothing."""
    modules = sorted((REPO / "pytest_agent_eval").rglob("*.py"))
    assert len(modules) > 50
    wanting = []
    for path in modules:
        text = path.read_text(encoding="utf-8")
        body = ast.parse(text).body
        first = body[0] if body else None
        is_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        docstring = first.value.value if is_docstring and isinstance(first.value.value, str) else ""
        # the docstring is the file's very first line (no comment or shebang above it) and that line is its job
        if not (text.startswith('"""') and docstring.strip() and docstring.splitlines()[0].strip()):
            wanting.append(str(path.relative_to(REPO)))
    assert wanting == []
