"""Does a change to scoring change what ``agent-eval score`` prints? Save its outputs, change the code, compare.

    python bench/score_diff.py save DIR [FILE_OR_DIR …]    # before: every output written under DIR
    python bench/score_diff.py check DIR [FILE_OR_DIR …]   # after: differences listed, exit 1 if any

Under each ``--json`` output that differs, ``check`` lists what moved: each figure whose value changed (``before →
after``; the pricing's figures too, ``chars_per_token``, ``family_chars_per_token``, ``calibration``, which say why),
and the figures one side alone has.

Default corpus: bench/data/transcripts and tests/data/transcripts (``.gz`` files unpacked). Every transcript file
is scored as ``agent-eval score FILE`` would (a first segment brings its later ones; an interactive session file
brings its subagents) in each output form (:data:`FORMS`): ``--json``, the text blocks, ``--brief``, ``--envelope``,
another tool, ``--answer``. The outputs live outside the repository (DIR): they are a before/after check of one
change, not a golden test.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from pytest_agent_eval import cli
from pytest_agent_eval.transcript import is_later_segment

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOTS = (REPO / "bench" / "data" / "transcripts", REPO / "tests" / "data" / "transcripts")
SUFFIXES = (".jsonl", ".txt", ".ndjson")
MOVED_SHOWN = 12  # figures listed under each output that differs
FORMS = {
    "json": ["--json"],
    "text": [],
    "brief": ["--brief"],
    "envelope": ["--envelope"],
    # another retrieval tool (the tests' transcripts use Sourcegraph's MCP server), and allocation by globs
    "sourcegraph": ["--json", "--tool", "sourcegraph_tool:SOURCEGRAPH"],  # bench/sourcegraph_tool.py
    "globs": ["--json", "--answer", "lib/*.js", "--answer", "*.py"],
}


def unpacked(root: Path, scratch: Path) -> Path:
    """``root`` itself, or a copy with every ``.gz`` file unpacked beside where it was."""
    if not any(root.rglob("*.gz")):
        return root
    copy = scratch / root.name
    for source in root.rglob("*"):
        if not source.is_file():
            continue
        target = copy / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.suffix == ".gz":
            with gzip.open(source, "rb") as packed, target.with_suffix("").open("wb") as plain:
                shutil.copyfileobj(packed, plain)
        else:
            shutil.copyfile(source, target)
    return copy


def _label(root: Path) -> str:
    """A root's name in DIR: its path in the repository, or its absolute path without the leading slash."""
    return str(root.relative_to(REPO) if root.is_relative_to(REPO) else root.relative_to(root.anchor))


def outputs(roots: list[Path]) -> dict[str, str]:
    """``<root>/<file>.<form>`` → what the command printed (stdout, stderr and exit code), paths made relative."""
    found: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="agent-eval-score-diff-") as scratch:
        for given in roots:
            root = unpacked(given, Path(scratch))
            files = sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES and not is_later_segment(p))
            for path in files:
                name = f"{_label(given)}/{path.relative_to(root)}"
                for form, flags in FORMS.items():
                    out, err = io.StringIO(), io.StringIO()
                    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                        code = cli.main(["score", str(path), *flags])
                    text = f"{out.getvalue()}\n--- stderr\n{err.getvalue()}\n--- exit {code}\n"
                    found[f"{name}.{form}"] = text.replace(str(root), "<root>")
    return found


def _figures(value: Any, at: str = "") -> dict[str, Any]:
    """Every leaf of a JSON value by its dotted path."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _figures(item, f"{at}.{key}" if at else key).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _figures(item, f"{at}[{i}]").items()}
    return {at: value}


def moved(before: str, after: str) -> list[str]:
    """What moved between two outputs of a ``--json`` form: each figure whose value changed (before → after), then
    the figures one side alone has; nothing for a text form (its lines are the diff)."""
    try:
        old, new = (_figures(json.loads(text.split("\n--- stderr")[0])) for text in (before, after))
    except ValueError:
        return []
    changed = [f"{k}: {old[k]} → {new[k]}" for k in old if k in new and old[k] != new[k]]
    return [*changed, *(f"new: {k} = {new[k]}" for k in new if k not in old),
            *(f"gone: {k} (was {old[k]})" for k in old if k not in new)]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("save", "check"))
    parser.add_argument("dir", type=Path, help="where the outputs are saved (outside the repository)")
    parser.add_argument("roots", nargs="*", type=Path, help="transcript folders (default: bench's and the tests')")
    args = parser.parse_args()
    found = outputs([r.resolve() for r in args.roots] or list(DEFAULT_ROOTS))
    if args.mode == "save":
        for name, text in found.items():
            target = args.dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        print(f"saved {len(found)} outputs under {args.dir}")
        return 0
    saved = {str(p.relative_to(args.dir)): p for p in args.dir.rglob("*") if p.is_file()}
    differ = sorted(n for n in found if n in saved and saved[n].read_text(encoding="utf-8") != found[n])
    missing, new = sorted(set(saved) - set(found)), sorted(set(found) - set(saved))
    for label, names in (("differs", differ), ("not produced now", missing), ("not saved before", new)):
        for name in names:
            print(f"{label}: {name}")
            if label == "differs":
                for line in moved(saved[name].read_text(encoding="utf-8"), found[name])[:MOVED_SHOWN]:
                    print(f"    {line}")
    print(f"{len(found)} outputs, {len(differ)} differ, {len(missing)} missing, {len(new)} new")
    return 1 if differ or missing or new else 0


if __name__ == "__main__":
    sys.exit(main())
