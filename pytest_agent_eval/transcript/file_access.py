"""What a Bash command does to files: read one, search, or write.

Agents reach for ``sed -n '100,200p' lib/x.js`` as readily as for the Read tool, so the
sufficiency metric has to see shell reads and searches too. A heredoc or a ``> file``
redirect is writing, never reading.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Literal

# A command position: the start, after a separator, or inside $( … ) / backticks.
_POSITION = r"(?:^|[;&|(]|\$\(|`)\s*(?:sudo\s+)?"
_READ_RE = re.compile(_POSITION + r"(?:cat|bat|head|tail|less|more|nl|sed|awk)\s+([^\n|;&]*)", re.M)
_SEARCH_RE = re.compile(_POSITION + r"(?:grep|egrep|fgrep|rg|ag|ack|find|fd|ls|tree)\b", re.M)
# Both are looked for with quoted text emptied (``grep '=> {'`` redirects nothing); a quoted heredoc delimiter
# (``<<'EOF'``) is then an empty pair of quotes.
_HEREDOC_RE = re.compile(r"<<-?\s*(?:''|\"\"|\w)")
# A stdout redirect into a file; ``2>/dev/null`` and ``2>&1`` are not writing.
_REDIRECT_RE = re.compile(r"(?<![0-9&>])>>?\s*(?![&>])(?!/dev/null)\S")
_QUOTED_RE = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_PATH_TOKEN_RE = re.compile(r"^[\w./~@+-]*[\w~@+-]$")
_NUMBERISH_RE = re.compile(r"^[\d,+\-$p]+$")

Access = Literal["read", "search", "write"]


@dataclass(frozen=True)
class ShellAccess:
    kind: Access
    path: str | None = None


def bash_access(command: str) -> ShellAccess | None:
    """Classify a Bash command as a file read (with the file), a search, or a write."""
    if ">" in command or "<<" in command:  # most commands hold neither: no quotes to take out then
        unquoted = _QUOTED_RE.sub(lambda m: m.group()[0] * 2, command)
        if _HEREDOC_RE.search(unquoted) or _REDIRECT_RE.search(unquoted):
            return ShellAccess("write")
    for match in _READ_RE.finditer(command):
        path = _last_path(match.group(1))
        if path:
            return ShellAccess("read", path)
    if _SEARCH_RE.search(command):
        return ShellAccess("search")
    return None


def _last_path(arguments: str) -> str | None:
    """The last path-shaped argument, flags and numbers (``-n``, ``'100,200p'``) stripped."""
    try:
        tokens = shlex.split(arguments, comments=False)
    except ValueError:
        tokens = arguments.split()
    # A read inside ``$( … )`` or backticks (quoted, too): the closing marks stick to its last argument.
    tokens = [t.rstrip(")`\"'") for t in tokens]
    paths = [
        t
        for t in tokens
        if not t.startswith("-") and not _NUMBERISH_RE.match(t) and _PATH_TOKEN_RE.match(t) and ("." in t or "/" in t)
    ]
    return paths[-1] if paths else None
