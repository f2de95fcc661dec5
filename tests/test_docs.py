"""The documentation holds true: docs/options.md is rendered from the option table, and what the code cites is in
the repository (a docs page, and the section a citation names), never a document it does not have."""

from __future__ import annotations

import ast
import io
import re
import runpy
import tokenize
from pathlib import Path

from pytest_agent_eval.settings.options import OPTIONS

ROOT = Path(__file__).resolve().parents[1]


def test_options_page_is_the_option_table_rendered_again():
    generator = runpy.run_path(str(ROOT / "docs" / "make_options.py"))
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert page == generator["render"](), "docs/options.md is stale: run `python docs/make_options.py`"
    for option in OPTIONS:  # every option, with its ini key, on a row of its own
        assert f"| `{option.flag}`" in page and f"| `{option.ini}` |" in page


# Citations of documents the repository does not hold: the specification's numbered files, issue numbers.
FOREIGN_CITATION = re.compile(
    r"\b[Ss]eeds?\s+\d|\bseeds?/|\b[Tt]he\s+seeds?\b|\bseed's\b|\bseeds'|\b[Ii]ssue\s*#?\s*\d|\b[Ii]ssue\s+#"
)
# A docs page a comment cites, and the section it names when one follows in quotes: docs/x.md, "A title".
DOCS_CITATION = re.compile(r'\b(docs/[\w/.-]+\.md)(?:#[\w-]+)?(?:\)|,)?(?:\s*\\?"([^"\\\n]+)\\?")?')


def cited_sources() -> list[Path]:
    """The package, the benches and the tests, their data aside (recorded transcripts quote whatever they quote),
    and this module aside, whose examples spell out what the patterns find."""
    files = [*(ROOT / "pytest_agent_eval").rglob("*"), *(ROOT / "bench").rglob("*"), *(ROOT / "tests").rglob("*")]
    return [
        p
        for p in files
        if p.suffix in (".py", ".md", ".yaml", ".toml")
        and "data" not in p.relative_to(ROOT).parts[1:-1]
        and "__pycache__" not in p.parts
        and p != Path(__file__).resolve()
    ] + [ROOT / "agent-eval.yaml", ROOT / "pyproject.toml"]


def test_the_citation_patterns_tell_a_foreign_document_from_a_page_of_ours():
    for foreign in ("seed 004", "Seed 001 records why", "seeds/000", "as the seeds print it", "the seed's classifier",
                    "issue 25, finding 5", "Issue 13, points 5-7", "issue #12", "(issue 10.5)"):  # fmt: skip
        assert FOREIGN_CITATION.search(foreign), foreign
    for ours in ("random.Random(seed)", "PYTHONHASHSEED", "thinking_text(chars, seed)", "an issue with the index",
                 "docs/metrics/sufficiency.md, rule 1"):  # fmt: skip
        assert not FOREIGN_CITATION.search(ours), ours
    found = DOCS_CITATION.findall('(docs/metrics/sufficiency.md, "read_returned") and docs/sandbox.md).')
    assert found == [("docs/metrics/sufficiency.md", "read_returned"), ("docs/sandbox.md", "")]


def test_nothing_cites_a_document_the_repository_does_not_have():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in [*cited_sources(), *(ROOT / "docs").rglob("*.md")]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FOREIGN_CITATION.search(line)
    ]
    assert found == [], "cite the repository's own page (docs/metrics/…) instead:\n" + "\n".join(found)


def prose(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of what a file says to its reader: a Python module's comments and docstrings, every
    line of any other file (test data in a string literal cites nothing)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), 1))
    lines = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(text).readline)
             if token.type == tokenize.COMMENT]  # fmt: skip
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines += [(first.lineno + i, line) for i, line in enumerate(first.value.value.splitlines())]
    return lines


def test_every_docs_page_the_code_cites_exists_with_the_section_it_names():
    cited = 0
    for path in cited_sources():
        for n, line in prose(path):
            for page, section in DOCS_CITATION.findall(line):
                cited += 1
                where = f"{path.relative_to(ROOT)}:{n}"
                assert (ROOT / page).is_file(), f"{where} cites {page}, which does not exist"
                if section:
                    text = (ROOT / page).read_text(encoding="utf-8")
                    assert section in text, f'{where} cites {page}, "{section}", which it does not hold'
    assert cited > 20  # the metrics modules, the gates, the harness and the tests cite their pages
