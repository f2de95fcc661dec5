"""The contamination scan sees the tool's output through a transform that keeps its words
(docs/metrics/contamination.md)."""

from __future__ import annotations

import json

import pytest
from support.codegraph_outputs import EXPLORE, REAL, REAL_OUTPUTS, read_tool_view
from support.paths import DATA, REPO
from support.synth import Transcript
from support.transcripts import transcripts

from pytest_agent_eval.metrics.contamination import contamination, scan
from pytest_agent_eval.metrics.transforms import normalised
from pytest_agent_eval.tool import CODEGRAPH

CCB = transcripts() / "ccb"


def _lines(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


_GREEN, _RESET = "\x1b[1;32m", "\x1b[0m"
TRANSFORMS = {
    "| before each line": lambda t: _lines(t, "| "),
    "> before each line": lambda t: _lines(t, "> "),
    "# before each line": lambda t: _lines(t, "# "),
    "cat -n, then | before each line": lambda t: "\n".join(
        f"{n:>6}\t| {line}" for n, line in enumerate(t.splitlines(), 1)
    ),
    "nl-style numbers and a blank": lambda t: "\n".join(f"{n} {line}" for n, line in enumerate(t.splitlines(), 1)),
    "grep -n style numbers": lambda t: "\n".join(f"{n}:{line}" for n, line in enumerate(t.splitlines(), 1)),
    "json.dumps of the whole": json.dumps,
    "json.dumps twice": lambda t: json.dumps(json.dumps(t)),
    "jq -R: a JSON string a line": lambda t: "\n".join(json.dumps(line) for line in t.splitlines()),
    "inside a JSON object": lambda t: json.dumps({"stdout": t, "exit": 0}),
    "ANSI colours": lambda t: "\n".join(_GREEN + line.replace(" ", " " + _RESET) + _RESET for line in t.splitlines()),
    "blanks widened": lambda t: t.replace(" ", "   "),
    "tabs for blanks": lambda t: t.replace(" ", "\t"),
    "CRLF line ends": lambda t: t.replace("\n", "\r\n"),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_a_transformed_explore_answer_is_still_a_leak(transform):
    t = Transcript()
    t.init(tools=["Bash"])
    call = t.call("Bash", command="bash /tmp/x.sh")  # the matcher sees no codegraph: only the content can tell
    t.reply(call, TRANSFORMS[transform](EXPLORE))
    report = contamination(t.session(), tool=CODEGRAPH)
    assert [leak.call_id for leak in report.leaks] == [call] and report.contaminated, transform


@pytest.mark.parametrize("name", sorted(REAL_OUTPUTS))
@pytest.mark.parametrize("transform", ["| before each line", "json.dumps of the whole", "ANSI colours"])
def test_every_real_output_is_found_through_a_transform(name, transform):
    assert scan(TRANSFORMS[transform]((REAL / name).read_text()), tool=CODEGRAPH) is not None, (name, transform)


def test_the_excerpt_is_the_line_with_the_transform_undone():
    fingerprint, excerpt = scan(_lines(EXPLORE, "| "), tool=CODEGRAPH)
    assert fingerprint.name == "explore heading"
    assert excerpt == "**Exploration: How does res.send decide the Content-Type and ETag**"


def test_normalising_undoes_prefixes_escapes_colours_and_blanks():
    assert normalised("| > # **A**\n  12\t| b") == "**A**\nb"
    assert normalised('"line one\\nline \\"two\\""') == 'line one\nline "two"'
    assert normalised("\x1b[31mred\x1b[0m  and\t\tplain\r\n") == "red and plain\n"
    assert normalised("## Code Context") == "## Code Context"  # a heading's own hashes stay


def test_source_that_quotes_the_headings_stays_quiet_after_normalising():
    """Source whose string literals hold the headings and "\\n" escapes is no JSON document: no leak appears."""
    source = (
        "lines.push(`**Exploration: ${query}**`);\n"
        'out += "\\n**Exploration: " + q + "**\\n";\n'
        "  # **Location:** is printed below\n"
        'const s = "Found " + n + " symbols across " + m + " files.\\n\\n**";\n'
    )
    for seen in (source, read_tool_view(source), _lines(source, "| ")):
        assert scan(seen, tool=CODEGRAPH) is None, seen


def test_the_scan_stays_quiet_on_this_repository_and_the_real_transcripts():
    root = REPO
    files = [p for p in root.glob("**/*") if p.is_file() and p.suffix in (".py", ".md", ".json", ".yaml", ".toml")]
    files = [p for p in files if DATA not in p.parents and ".venv" not in p.parts and ".git" not in p.parts]
    files += [p for p in sorted(CCB.parent.glob("**/*")) if p.is_file()]
    assert len(files) > 40
    for path in files:
        text = path.read_text(errors="replace")
        assert scan(read_tool_view(text), tool=CODEGRAPH) is None, path
        assert (
            scan("\n".join(f"{path.name}:{n}:{line}" for n, line in enumerate(text.splitlines(), 1)), tool=CODEGRAPH)
            is None
        ), path
