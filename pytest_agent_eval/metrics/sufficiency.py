"""Explore sufficiency: was an explore response *enough*, read off what the agent did next.

The agent votes after every explore call: it explores again, reads a file, searches, or moves
on. Each vote lands in one of five buckets (:data:`BUCKETS`, worst → best), and each bucket
points at a different fix. Eight rules keep the vote honest; each is named below where it is
applied:

1. only a later message counts — a file access fired after the explore in its own message
   predates the response, so it is stepped over and counted ``concurrent`` (once per explore
   it was stepped over for: a Read beside two explores counts twice);
2. bookkeeping (ToolSearch, TodoWrite) is stepped over;
3. reactions are matched within one thread (a subagent's calls are not the parent's verdict);
4. a delegation is judged by the subagent's first substantive call (``Agent → …``), without
   following nested delegations; one that never runs a tool is "moved on";
5. shell reads and searches count like Read and Grep; a shell write is moving on;
6. *returned* means the response carried the file's ``**`path`**`` section — a file it only
   named is a recall miss, flagged ``(named, not returned)``;
7. a file an earlier explore of the same thread shipped still counts as returned;
8. an explore that errored or never got a result is counted in ``errors``, not bucketed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pytest_agent_eval.tool import RetrievalTool
from pytest_agent_eval.tool.explore_answer import FileSection, explore_sections, mentioned_paths, same_file
from pytest_agent_eval.transcript import DELEGATION_TOOLS, MAIN, Message, Session, ToolCall
from pytest_agent_eval.transcript.file_access import bash_access

# read_returned is glossed "excerpt", not "allocation" (docs/metrics/sufficiency.md, "read_returned"): allocation
# names another metric (allocation efficiency: returned bytes on files the answer cited) that can read
# 100% in the same run: the agent cited the file, and still had to read the part the excerpt left out.
BUCKETS: tuple[tuple[str, str, str], ...] = (
    ("explore_again", "explore again", "insufficient: did not answer"),
    ("read_returned", "Read a file we returned", "excerpt: right file, not the part needed"),
    ("read_missed", "Read a file we did not return", "recall: file never surfaced"),
    ("search", "Grep/Glob", "recall (weak): still hunting for the file"),
    ("sufficient", "moved on / answered", "sufficient"),
)
BUCKET_KEYS = tuple(key for key, _, _ in BUCKETS)

# Rule 2: pulling a deferred tool schema or ticking a checklist says nothing about the response.
BOOKKEEPING_TOOLS = frozenset({"ToolSearch", "TodoWrite"})
READ_TOOLS = frozenset({"Read", "NotebookRead"})
SEARCH_TOOLS = frozenset({"Grep", "Glob"})

NAMED_NOT_RETURNED = "(named, not returned)"
RETURNED_EARLIER = "(returned by an earlier explore)"
FINAL_ANSWER = "final answer"
MOVED_ON = "moved on"


@dataclass
class CallVerdict:
    """One explore call and the reaction that judged it; ``bucket`` is None when it errored."""

    query: str
    files: int
    bucket: str | None
    reaction: str
    note: str = ""
    thread: str = MAIN
    call_id: str = ""  # the judged call's tool_use id: reports join verdicts to calls by it, not by position

    def to_dict(self) -> dict[str, Any]:
        return {
            "call": self.call_id,
            "query": self.query,
            "files": self.files,
            "bucket": self.bucket,
            "reaction": self.reaction,
            "note": self.note,
            "thread": self.thread,
        }


@dataclass
class Sufficiency:
    calls: list[CallVerdict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BUCKET_KEYS, 0))
    errors: int = 0
    concurrent: int = 0
    explore: str = field(kw_only=True)  # the tool's explore tool, as the tool declares it

    @property
    def answered(self) -> int:
        return sum(self.counts.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "calls": [c.to_dict() for c in self.calls],
            "errors": self.errors,
            "concurrent": self.concurrent,
            "answered": self.answered,
        }


@dataclass
class _Reaction:
    bucket: str
    reaction: str
    note: str = ""


@dataclass
class _Response:
    """What one explore shipped, plus what earlier explores of its thread shipped (rule 7)."""

    text: str
    returned: list[str]
    earlier: list[str]

    @cached_property
    def mentioned(self) -> set[str]:
        """Every path the response names; read only when a Read missed, as most verdicts never need it
        and a large response names tens of thousands of dotted tokens."""
        return mentioned_paths(self.text)


def sufficiency(
    session: Session, tool: RetrievalTool, sections_by_call: Mapping[str, list[FileSection]] | None = None
) -> Sufficiency:
    """Bucket every explore call of ``tool`` in the session by what the agent did next; ``sections_by_call``:
    :func:`~pytest_agent_eval.tool.explore_answer.explore_sections` of the session, when the caller has them."""
    if sections_by_call is None:
        sections_by_call = explore_sections(session.calls, tool)
    out = Sufficiency(explore=tool.explore)
    explores = [call for call in session.calls if tool.is_explore(call.name)]
    if not explores:  # nothing to judge (a without-arm): the threads need not be indexed
        return out
    messages_by_thread: dict[str, list[Message]] = {}
    position: dict[str, int] = {}  # call id → index of its message in its thread
    for message in session.messages(None):
        thread_messages = messages_by_thread.setdefault(message.thread, [])
        for c in message.calls:
            position[c.id] = len(thread_messages)
        thread_messages.append(message)
    shipped: dict[str, list[str]] = {}  # thread → files earlier explores of it returned

    for call in explores:
        query = _query(call)
        # Rule 8: no response, nothing to judge.
        if call.result is None or call.result.is_error:
            out.errors += 1
            reaction = "errored" if call.result is not None else "no response"
            out.calls.append(CallVerdict(query, 0, None, reaction, "(not bucketed)", call.thread, call.id))
            continue
        text = call.result.text
        earlier = shipped.setdefault(call.thread, [])
        response = _Response(text, [section.path for section in sections_by_call[call.id]], list(earlier))
        earlier.extend(response.returned)

        thread_messages = messages_by_thread[call.thread]
        index = position[call.id]
        # Rule 1: a file access issued after the explore in its own message is stepped over, not a verdict:
        # counted once per explore it was stepped over for (docs/metrics/sufficiency.md, rule 1).
        siblings = thread_messages[index].calls
        after = next(i for i, sibling in enumerate(siblings) if sibling is call) + 1
        out.concurrent += sum(_is_file_access(sibling) for sibling in siblings[after:])
        next_call = _next_call(thread_messages[index + 1 :])
        if next_call is None:
            verdict = _Reaction("sufficient", FINAL_ANSWER)
        elif next_call.name in DELEGATION_TOOLS:
            verdict = _through_delegation(next_call, messages_by_thread, response, tool)
        else:
            verdict = _reaction(next_call, response, tool)
        out.counts[verdict.bucket] += 1
        out.calls.append(
            CallVerdict(
                query, len(response.returned), verdict.bucket, verdict.reaction, verdict.note, call.thread, call.id
            )
        )
    return out


def _next_call(later: list[Message]) -> ToolCall | None:
    """The first substantive call in a later message of the same thread (rules 1–3).

    A message without a tool call ends the agent's turn: that is the answer, and whatever
    follows in a later turn answers a new question, not this response.
    """
    for message in later:
        if not message.calls:
            return None
        for candidate in message.calls:
            if candidate.name not in BOOKKEEPING_TOOLS:
                return candidate
    return None


def _through_delegation(
    delegation: ToolCall, messages_by_thread: dict[str, list[Message]], response: _Response, tool: RetrievalTool
) -> _Reaction:
    """Rule 4: the subagent's first substantive call is the verdict; nested delegations are skipped."""
    for message in messages_by_thread.get(delegation.id, []):
        for candidate in message.calls:
            if candidate.name in BOOKKEEPING_TOOLS or candidate.name in DELEGATION_TOOLS:
                continue
            inner = _reaction(candidate, response, tool)
            return _Reaction(inner.bucket, f"{delegation.name} → {inner.reaction}", inner.note)
    return _Reaction("sufficient", f"{delegation.name} → {MOVED_ON}")


def _reaction(call: ToolCall, response: _Response, tool: RetrievalTool) -> _Reaction:
    if tool.owns(call.name):
        return _Reaction("explore_again", _bare_name(call.name))
    if call.name in READ_TOOLS:
        path = call.input.get("file_path") or call.input.get("notebook_path") or ""
        return _read(str(path), "Read", response)
    if call.name in SEARCH_TOOLS:
        return _Reaction("search", call.name)
    if call.name == "Bash":
        # Rule 5: the shell is a second Read and Grep.
        access = bash_access(str(call.input.get("command") or ""))
        if access is not None and access.kind == "read" and access.path:
            return _read(access.path, "Bash Read", response)
        if access is not None and access.kind == "search":
            return _Reaction("search", "Bash search")
        if access is not None and access.kind == "write":
            return _Reaction("sufficient", "Bash write")
    return _Reaction("sufficient", call.name)


def _read(path: str, verb: str, response: _Response) -> _Reaction:
    """Rules 6 and 7: returned (here or earlier), named only, or never surfaced."""
    label = f"{verb} {path.rstrip('/').rsplit('/', 1)[-1]}".rstrip()
    if any(same_file(path, r) for r in response.returned):
        return _Reaction("read_returned", label)
    if any(same_file(path, r) for r in response.earlier):
        return _Reaction("read_returned", label, RETURNED_EARLIER)
    if any(same_file(path, m) for m in response.mentioned):
        return _Reaction("read_missed", label, NAMED_NOT_RETURNED)
    return _Reaction("read_missed", label)


def _is_file_access(call: ToolCall) -> bool:
    if call.name in READ_TOOLS or call.name in SEARCH_TOOLS:
        return True
    if call.name == "Bash":
        access = bash_access(str(call.input.get("command") or ""))
        return access is not None and access.kind in ("read", "search")
    return False


def _query(call: ToolCall) -> str:
    query = call.input.get("query")
    if isinstance(query, str):
        return query
    return next((v for v in call.input.values() if isinstance(v, str)), "")


def _bare_name(name: str) -> str:
    """``mcp__codegraph__codegraph_explore`` → ``codegraph_explore``."""
    return name.rsplit("__", 1)[-1] if name.startswith("mcp__") else name
