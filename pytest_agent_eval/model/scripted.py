"""A deterministic policy agent: the stand-in model that makes the whole pipeline run without an API.

It decides from the request alone (tools offered + conversation), so retries and ``--resume``
need no server-side state. Per user question:

* **with-arm** (the retrieval tool's explore tool, ``explore``, is offered, MCP-prefixed or bare): explore
  with the question; if the
  response was trimmed, follow up once (Read the first trimmed file, or explore again with the
  elided names); then answer citing the section paths and the ``name`` symbols of their headers.
* **without-arm**: Grep a keyword of the question, Read the top file(s), try the tool's CLI (``cli``)
  once through Bash (so the contamination check sees an attempt), then answer citing what it read.
* **subagent** requests (Agent/Task; the CLI marks their system prompt ``cc_is_subagent=true``):
  one Grep, then a text summary of the files found. With ``delegate=True`` the main agent first
  hands each question to such a subagent, so the subagent path runs too.

What real models do to the context, on request (so occupancy's truth covers it): thinking before a tool call that
is counted but streamed empty or only summarised (``hidden_thinking``, ``summarised``), long visible thinking
(``visible_thinking``), and the summary Claude Code asks for when it compacts the conversation (the question is
carried in it, so the policy goes on after the boundary).

Its figures measure the harness and the retrieval tool's responses, never a model's judgment.

The policy (:meth:`ScriptedBackend.decide`) reads a :class:`Turn` and decides in the common tool vocabulary, the
names the transcript metrics read (``Read``, ``Grep``, ``Bash``, ``mcp__NAME__tool``, ``Agent``). The Messages API
is spoken in those names, so its reply goes out as decided; the Responses API (Codex CLI) reads its requests into
a Turn and renders the decision in its own tools (:mod:`.responses`). An agent that offers the Messages API's tools
under names of its own declares them (:class:`SpokenTool`, given as ``speaks``): its requests are heard in the
common names and the replies spoken in its own (docs/extending.md, "The stand-in model and a new agent").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any, ClassVar

from ..tool import CODEGRAPH
from ..tool.explore_answer import file_sections, same_file
from ..transcript import DELEGATION_TOOLS
from .sse import Reply, new_id, tool_use
from .usage import hidden_signature, server_context_id

FOLLOW_UPS = ("read", "explore", "none")
# How the stand-in answers (docs/metrics/answers.md): cite what it saw, name the corpus's answer key, name nothing,
# or name a wrong file; the grades must tell them apart.
ANSWER_POLICIES = ("cite", "key", "none", "wrong")
NO_ANSWER = "I looked, but I cannot say how this works."
SPOKEN = ("Read", "Grep", "Bash")  # the common tools the without-arm's policy asks for
# After this many tool calls for one question the agent answers with what it has.
MAX_STEPS = 8

# Claude Code's request for a summary when it compacts, and how the conversation it continues with opens.
COMPACT_INSTRUCTION = "Your task is to create a detailed summary of the conversation so far"
CONTINUATION = "This session is being continued from a previous conversation"
_CARRIED_QUESTION_RE = re.compile(r"^Current question: (.+)$", re.M)
# Words of the stand-in's visible thinking: prose, as a model's reasoning reads.
_THINKING_WORDS = (
    "the question asks where this is handled so I should look at the code that decides it before answering "
    "and check which function calls which since the flow matters more than any single line here"
).split()
_REMINDER_RE = re.compile(r"<system-reminder>.*?</system-reminder>", re.S)
_LOCAL_TAG_RE = re.compile(r"<(local-command-\w+|command-\w+)>.*?</\1>", re.S)
_CWD_RE = re.compile(r"(?:Primary working directory|Working directory):\s*(\S+)")
_SUBAGENT_RE = re.compile(r"cc_is_subagent=true|You are a file search specialist|You are an agent for Claude Code")
_GAP_LINE_RE = re.compile(r"^\.\.\. \(gap: (.*)\) \.\.\.$", re.M)
_GAP_NAME_RE = re.compile(r"([\w$.]+) \(([^():\s]+):\d+\)")
_WORD_RE = re.compile(r"[A-Za-z_$][\w$]*(?:[.-][A-Za-z_$][\w$]*)*")
_DEF_RES = (
    re.compile(r"^\s*(?:async\s+)?function\s+([\w$]+)", re.M),
    re.compile(r"^\s*([\w$]+(?:\.[\w$]+)+)\s*=\s*(?:async\s+)?function", re.M),
    re.compile(r"^\s*(?:export\s+)?(?:async\s+)?(?:def|class|func|fn)\s+([\w$]+)", re.M),
)
_LINE_NUMBER_RE = re.compile(r"^\s*\d+(?:\t|→)", re.M)
_NOT_SOURCE = frozenset({".md", ".txt", ".json", ".yml", ".yaml", ".lock", ".toml", ".cfg", ".ini", ".rst", ""})
_STOPWORDS = frozenset(
    "a an and are as at be by can does do for from how in into is it its of on or the this that to what when "
    "where which who why with without does decide work works handle handles happen explain show".split()
)


# -- reading a request --------------------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text_of(b.get("text") if b.get("type") == "text" else b.get("content"))
            for b in content
            if isinstance(b, dict)
        )
    return ""


def _system_text(request: dict[str, Any]) -> str:
    parts = [_text_of(request.get("system"))]
    parts += [_text_of(m.get("content")) for m in request.get("messages") or [] if m.get("role") == "system"]
    return "\n".join(parts)


def working_directory(request: dict[str, Any]) -> str:
    """The working directory the CLI's system prompt names ('' when it names none)."""
    found = _CWD_RE.search(_system_text(request))
    return found.group(1) if found else ""


def user_question(message: dict[str, Any]) -> str | None:
    """The text a person typed, or None for tool results and CLI-injected reminders."""
    if message.get("role") != "user":
        return None
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    texts = [b.get("text") or "" for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    texts = [t for t in texts if COMPACT_INSTRUCTION not in t]  # the CLI's request for a summary is not a question
    text = _LOCAL_TAG_RE.sub("", _REMINDER_RE.sub("", "\n".join(texts))).strip()
    if CONTINUATION in text:  # after a compaction the question is the one the summary carries
        carried = _CARRIED_QUESTION_RE.search(text)
        return carried.group(1).strip() if carried else None
    return text or None


def compaction_requested(request: dict[str, Any]) -> bool:
    """The CLI asks for a summary of the conversation (it is compacting it)."""
    messages = request.get("messages") or []
    last = messages[-1] if messages else None
    return isinstance(last, dict) and COMPACT_INSTRUCTION in _text_of(last.get("content"))


def thinking_text(chars: int, seed: str) -> str:
    """``chars`` characters of prose-like reasoning, varied by ``seed`` (deterministic)."""
    words, n = [], sum(map(ord, seed))
    while sum(map(len, words)) + len(words) < chars:
        words.append(_THINKING_WORDS[n % len(_THINKING_WORDS)])
        n = n * 31 + 7 + len(words)
    return " ".join(words)[:chars]


@dataclass
class Step:
    name: str
    input: dict[str, Any]
    result: str = ""
    is_error: bool = False


@dataclass
class Turn:
    """The conversation as the policy sees it: the current question and the calls made for it."""

    question: str
    steps: list[Step] = field(default_factory=list)
    cwd: str = ""
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    subagent: bool = False
    delegated: list[Step] = field(default_factory=list)
    compacted: bool = False  # the question is the one a compaction's summary carried

    @classmethod
    def from_request(cls, request: dict[str, Any]) -> Turn:
        messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
        start, question, compacted = 0, "", False
        for i, message in enumerate(messages):
            text = user_question(message)
            if text is not None:
                start, question = i, text
                compacted = CONTINUATION in _text_of(message.get("content"))
        steps: dict[str, Step] = {}
        for message in messages[start:]:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    steps[block.get("id", "")] = Step(block.get("name", ""), block.get("input") or {})
                elif block.get("type") == "tool_result" and block.get("tool_use_id") in steps:
                    step = steps[block["tool_use_id"]]
                    step.result, step.is_error = _text_of(block.get("content")), bool(block.get("is_error"))
        system = _system_text(request)
        tools = {t["name"]: t for t in request.get("tools") or [] if isinstance(t, dict) and "name" in t}
        own = [s for s in steps.values() if s.name not in DELEGATION_TOOLS]
        delegated = [s for s in steps.values() if s.name in DELEGATION_TOOLS]
        subagent = bool(_SUBAGENT_RE.search(system))
        return cls(question, own, working_directory(request), tools, subagent, delegated, compacted)

    def tool(self, suffix: str) -> str | None:
        return next((name for name in self.tools if name == suffix or name.endswith(suffix)), None)

    def absolute(self, path: str) -> str:
        return path if path.startswith("/") or not self.cwd else str(PurePosixPath(self.cwd) / path)

    def relative(self, path: str) -> str:
        prefix = self.cwd.rstrip("/") + "/"
        return path[len(prefix) :] if self.cwd and path.startswith(prefix) else path


@dataclass(frozen=True)
class SpokenTool:
    """One of the tools the policy asks for (:data:`SPOKEN`) as an agent offers it under a name of its own: ``name``,
    and ``args``, (the policy's argument, the agent's), for its arguments named otherwise (``Bash``'s ``command``,
    ``Read``'s ``file_path``, ``Grep``'s ``pattern``). The policy's other arguments are sent only where the tool's
    schema has them."""

    common: str
    name: str
    args: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.common not in SPOKEN:
            raise ValueError(
                f"SpokenTool {self.name!r}: the stand-in asks for {', '.join(SPOKEN)}, not {self.common!r}"
            )

    def heard(self, tool_input: dict[str, Any]) -> dict[str, Any]:
        """A call's input as the agent sent it, in the policy's argument names."""
        theirs = {agent: common for common, agent in self.args}
        return {theirs.get(key, key): value for key, value in tool_input.items()}

    def said(self, tool_input: dict[str, Any], schema: Any) -> dict[str, Any]:
        """The policy's input in the agent's argument names, kept to the properties ``schema`` has (all of them when
        it names none)."""
        ours = dict(self.args)
        spoken = {ours.get(key, key): value for key, value in tool_input.items()}
        known = schema.get("properties") if isinstance(schema, dict) else None
        return {key: value for key, value in spoken.items() if not isinstance(known, dict) or key in known}


def _heard(request: dict[str, Any], spoken: list[SpokenTool]) -> dict[str, Any]:
    """``request`` with the tools of ``spoken`` (their calls, and the tools offered) in the common names."""
    by_name = {tool.name: tool for tool in spoken}

    def block(b: Any) -> Any:
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in by_name:
            tool = by_name[b["name"]]
            return {**b, "name": tool.common, "input": tool.heard(b.get("input") or {})}
        return b

    def message(m: Any) -> Any:
        content = m.get("content") if isinstance(m, dict) else None
        return {**m, "content": [block(b) for b in content]} if isinstance(content, list) else m

    tools = [{**t, "name": by_name[t["name"]].common} if isinstance(t, dict) and t.get("name") in by_name else t
             for t in request.get("tools") or []]  # fmt: skip
    return {**request, "tools": tools, "messages": [message(m) for m in request.get("messages") or []]}


def _said(reply: Reply, spoken: list[SpokenTool], request: dict[str, Any]) -> Reply:
    """``reply``'s calls of the tools of ``spoken`` in the agent's names and arguments."""
    by_common = {tool.common: tool for tool in spoken}
    schemas = {t.get("name"): t.get("input_schema") for t in request.get("tools") or [] if isinstance(t, dict)}
    blocks = []
    for b in reply.blocks:
        tool = by_common.get(b.get("name")) if b.get("type") == "tool_use" else None
        blocks.append(
            b if tool is None else {**b, "name": tool.name, "input": tool.said(b["input"], schemas[tool.name])}
        )
    return replace(reply, blocks=blocks)


class StandInError(ValueError):
    """A request the stand-in cannot act on: the agent offers none of the tools its policy asks for."""


# -- small pieces of judgment -------------------------------------------------------------------
def keywords(question: str) -> list[str]:
    """Search terms, most code-like first: dotted/snake/camel identifiers, then the longest words."""
    words = [w for w in dict.fromkeys(_WORD_RE.findall(question)) if w.lower() not in _STOPWORDS and len(w) > 2]

    def rank(word: str) -> tuple[int, int]:
        if "." in word or "_" in word or "$" in word or (word[0].islower() and word[1:] != word[1:].lower()):
            kind = 0  # an identifier: res.send, max_age, sendFile
        elif "-" in word or word[1:] != word[1:].lower():
            kind = 1  # a term of art: Content-Type, ETag
        else:
            kind = 2
        return (kind, -len(word))

    return sorted(words, key=rank)


def grep_files(result: str) -> list[str]:
    """Paths from a Grep ``files_with_matches`` result (first line is ``Found N files``)."""
    lines = [line.strip() for line in result.splitlines()]
    return [line for line in lines if line and not line.startswith(("Found ", "No files")) and " " not in line]


def defined_symbols(source: str, terms: list[str] = (), limit: int = 4) -> list[str]:
    """Names defined in a Read result (its ``N\\t`` / ``N→`` line-number prefixes removed)."""
    source = _LINE_NUMBER_RE.sub("", source)
    names: list[str] = []
    for pattern in _DEF_RES:
        names += pattern.findall(source)
    fragments = {f.lower() for term in terms for f in re.split(r"[.\-]", term) if len(f) > 2}
    unique = list(dict.fromkeys(names))
    unique.sort(key=lambda name: not any(f in name.lower() for f in fragments))  # stable: on-topic names first
    return unique[:limit]


def _read_order(path: str) -> tuple[bool, bool, str]:
    """Code before docs/config, implementation before tests, then by path: Grep lists files by
    modification time, which ties in a fresh copy and then comes out in varying order."""
    is_test = bool(re.search(r"(^|/)(tests?|__tests__|spec)/|[._-](test|spec)\.", path))
    return (PurePosixPath(path).suffix.lower() in _NOT_SOURCE, is_test, path)


def _explore_input(schema_tool: dict[str, Any], query: str) -> dict[str, Any]:
    """The explore tool's input: the query goes into its first required string property."""
    schema = schema_tool.get("input_schema") or {}
    props = schema.get("properties") or {}
    names = [n for n in schema.get("required") or props if (props.get(n) or {}).get("type") == "string"]
    return {(names[0] if names else "query"): query}


def _delegation_input(schema_tool: dict[str, Any], question: str) -> dict[str, Any]:
    """A foreground search subagent, with only the fields this CLI's Agent/Task schema knows."""
    wanted = {"description": "Search the codebase", "prompt": question, "subagent_type": "Explore",
              "run_in_background": False}  # fmt: skip
    props = (schema_tool.get("input_schema") or {}).get("properties")
    return {k: v for k, v in wanted.items() if not props or k in props}


def _one_line(tool_input: dict[str, Any]) -> str:
    return " ".join(str(v) for v in tool_input.values())[:120].replace("\n", " ")


def _shell_quote(text: str) -> str:
    return '"' + re.sub(r'(["\\$`])', r"\\\1", text) + '"'


# -- the policy -----------------------------------------------------------------------------------
@dataclass
class ScriptedBackend:
    """``follow_up``: what to do after a trimmed explore response (``read``, ``explore`` or ``none``);
    ``reads``: how many grep hits the without-arm reads; ``thinking``: emit a thinking block per turn;
    ``delegate``: hand each question to a foreground subagent first (Agent/Task), then go on as usual;
    ``explore`` and ``cli``: the retrieval tool's explore tool and CLI (its ``RetrievalTool`` names them);
    ``answers``: how it answers (:data:`ANSWER_POLICIES`), ``key`` from ``keys``, each question's text → what its
    answer key names (files, symbols, facts' sentences).

    What a real model adds, by the index of a question's tool-calling step (0: its first call; none past the end):
    ``hidden_thinking`` tokens of thinking counted but streamed empty (or, ``summarised``, as a summary of a few
    dozen characters); ``visible_thinking`` characters of thinking streamed whole; ``server_context`` tokens of
    context the server adds beside that step's result (its call's id declares them, :func:`~.usage.server_context_id`;
    the prompt grows by them from the result on, with no thinking and nothing the transcript shows). 0 is none."""

    follow_up: str = "read"
    reads: int = 2
    thinking: bool = False
    delegate: bool = False
    hidden_thinking: tuple[int, ...] = ()
    summarised: bool = False
    visible_thinking: tuple[int, ...] = ()
    server_context: tuple[int, ...] = ()
    explore: str = CODEGRAPH.explore
    cli: str = CODEGRAPH.cli
    answers: str = "cite"
    keys: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    speaks: tuple[SpokenTool, ...] = ()  # the agent's own names of the tools the policy asks for (SpokenTool)
    stand_in_model: ClassVar[str] = "stand-in-scripted"

    def __post_init__(self) -> None:
        if self.follow_up not in FOLLOW_UPS:
            raise ValueError(f"follow_up must be one of {FOLLOW_UPS}, not {self.follow_up!r}")
        if self.answers not in ANSWER_POLICIES:
            raise ValueError(f"answers must be one of {ANSWER_POLICIES}, not {self.answers!r}")

    def describe(self) -> str:
        answers = f", answers={self.answers}" if self.answers != "cite" else ""
        return (
            f"scripted policy agent (follow_up={self.follow_up}, reads={self.reads}{answers}) — its figures measure "
            "the pipeline and the tool's responses, not a model"
        )

    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        offered = {t.get("name") for t in request.get("tools") or [] if isinstance(t, dict)}
        spoken = [tool for tool in self.speaks if tool.name in offered and tool.common not in offered]
        turn = Turn.from_request(_heard(request, spoken) if spoken else request)
        if compaction_requested(request):
            return Reply.text(self._summary(turn))
        return _said(self.decide(turn), spoken, request) if spoken else self.decide(turn)

    def decide(self, turn: Turn) -> Reply:
        """The next assistant message for ``turn``, in the common tool vocabulary (``Read``, ``Grep``, ``Bash``,
        ``mcp__NAME__tool``) whichever API the turn was read from; each API renders it (:mod:`.responses`)."""
        if not turn.tools or not turn.question:
            return Reply.text("OK.")
        delegation = next((name for name in DELEGATION_TOOLS if name in turn.tools), None)
        if turn.subagent:
            blocks = self._subagent(turn)
        elif self.delegate and delegation and not turn.delegated:
            blocks = [tool_use(delegation, _delegation_input(turn.tools[delegation], turn.question))]
        elif len(turn.steps) >= MAX_STEPS or turn.compacted:  # after a compaction: answer with what is kept
            blocks = [self._answer(turn)]
        elif self._explore_tool(turn):
            blocks = self._with_arm(turn)
        elif not any(turn.tool(name) for name in SPOKEN):
            raise StandInError(
                f"the scripted stand-in asks for {', '.join(SPOKEN)} or the retrieval tool's {self.explore}, and the "
                f"agent offered none of them ({', '.join(sorted(turn.tools))}): it would answer without a tool call; "
                "give the agent the stand_in dialect whose tools it offers, or declare which of its tools are these "
                "(stand_in=StandIn(dialect, tools=(SpokenTool(...), ...)): docs/extending.md)"
            )
        else:
            blocks = self._without_arm(turn)
        if self.thinking and blocks and blocks[0].get("type") == "tool_use":
            plan = f"Next: {', '.join(b['name'] for b in blocks)} for: {turn.question[:200]}"
            blocks = [{"type": "thinking", "thinking": plan, "signature": ""}, *blocks]
        if blocks and blocks[0].get("type") == "tool_use" and not turn.subagent:
            blocks = self._model_thinking(turn) + self._server_context(turn, blocks)
        return Reply(blocks)

    def _server_context(self, turn: Turn, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The step's first call, its id declaring the server-side context beside its result (class docstring)."""
        step = len(turn.steps)
        tokens = self.server_context[step] if step < len(self.server_context) else 0
        if not tokens:
            return blocks
        return [{**blocks[0], "id": server_context_id(tokens, new_id("ctx"))}, *blocks[1:]]

    def _model_thinking(self, turn: Turn) -> list[dict[str, Any]]:
        """The thinking a real model would put before this step's call (see the class docstring)."""
        step = len(turn.steps)
        hidden = self.hidden_thinking[step] if step < len(self.hidden_thinking) else 0
        visible = self.visible_thinking[step] if step < len(self.visible_thinking) else 0
        blocks = []
        if hidden:
            summary = f"Planning step {step + 1} for: {turn.question[:40]}" if self.summarised else ""
            signature = hidden_signature(hidden, new_id("sig"))
            blocks.append({"type": "thinking", "thinking": summary, "signature": signature})
        if visible:
            text = thinking_text(visible, f"{turn.question}{step}")
            blocks.append({"type": "thinking", "thinking": text, "signature": new_id("sig")})
        return blocks

    def _summary(self, turn: Turn) -> str:
        """What the CLI keeps of the conversation when it compacts it: what was done, and the question, carried."""
        done = "; ".join(f"{s.name} {_one_line(s.input)}" for s in turn.steps) or "nothing yet"
        return (
            "<analysis>The user asked a question about the code; tools were called to find the answer.</analysis>\n"
            f"<summary>\n1. Primary Request and Intent: answer the question below.\n2. Steps so far: {done}\n"
            f"Current question: {turn.question}\n</summary>"
        )

    def _explore_tool(self, turn: Turn) -> str | None:
        """The offered name of the explore tool (``mcp__<server>__<explore>``, or bare)."""
        return next((n for n in turn.tools if n == self.explore or n.endswith("__" + self.explore)), None)

    # each step function returns the next message's blocks
    def _with_arm(self, turn: Turn) -> list[dict[str, Any]]:
        explore = self._explore_tool(turn)
        assert explore is not None
        explores = [s for s in turn.steps if s.name == explore]
        if not explores:
            return [tool_use(explore, _explore_input(turn.tools[explore], turn.question))]
        if not any(file_sections(s.result) for s in explores):
            return self._without_arm(turn, try_cli=False)  # nothing returned: fall back to search
        if len(turn.steps) == 1 and self.follow_up != "none":
            follow = self._follow_up(turn, explore, explores[0].result)
            if follow:
                return [follow]
        return [self._answer(turn)]

    def _follow_up(self, turn: Turn, explore: str, result: str) -> dict[str, Any] | None:
        """After a trimmed response: Read the first trimmed file, or explore its elided names."""
        trimmed = "trimmed" in result[result.rfind("\n> ") :] if "\n> " in result else False
        gaps = [gap for line in _GAP_LINE_RE.findall(result) for gap in _GAP_NAME_RE.findall(line)]
        if not (trimmed or gaps):
            return None
        if self.follow_up == "explore" and gaps:
            names = list(dict.fromkeys(name for name, _ in gaps))[:4]
            return tool_use(explore, _explore_input(turn.tools[explore], " ".join(names)))
        sections = file_sections(result)
        path = gaps[0][1] if gaps else (sections[0].path if sections else None)
        if path is None or not turn.tool("Read"):
            return None
        return tool_use("Read", {"file_path": turn.absolute(path)})

    def _without_arm(self, turn: Turn, try_cli: bool = True) -> list[dict[str, Any]]:
        greps = [s for s in turn.steps if s.name == "Grep"]
        reads = [s for s in turn.steps if s.name == "Read"]
        hits = [f for s in greps for f in grep_files(s.result) if not s.is_error]
        terms = keywords(turn.question)
        if turn.tool("Grep") and not hits and len(greps) < min(3, len(terms)):
            return [tool_use("Grep", {"pattern": re.escape(terms[len(greps)]), "-i": True})]
        if turn.tool("Read") and hits and not reads:
            ranked = sorted(set(hits), key=_read_order)[: self.reads]
            return [tool_use("Read", {"file_path": turn.absolute(path)}) for path in ranked]
        if try_cli and turn.tool("Bash") and not any(s.name == "Bash" for s in turn.steps):
            command = f"{self.cli} explore {_shell_quote(turn.question)}"
            return [tool_use("Bash", {"command": command, "description": f"Ask {self.cli} about the question"})]
        return [self._answer(turn)]

    def _subagent(self, turn: Turn) -> list[dict[str, Any]]:
        terms = keywords(turn.question)
        if turn.tool("Grep") and terms and not turn.steps:
            return [tool_use("Grep", {"pattern": re.escape(terms[0]), "-i": True})]
        files = sorted({turn.relative(f) for s in turn.steps for f in grep_files(s.result)}, key=_read_order)
        found = ", ".join(f"`{f}`" for f in files[:5]) or "no matching files"
        return [{"type": "text", "text": f"Searched for {', '.join(terms[:1]) or 'the task'}: {found}."}]

    def _answer(self, turn: Turn) -> dict[str, Any]:
        """Answer by the ``answers`` policy: name the key, nothing, a wrong file, or (``cite``) what it saw."""
        if self.answers == "none":
            return {"type": "text", "text": NO_ANSWER}
        key = self._key(turn.question)
        if self.answers == "key" and key:
            files, symbols, facts = key
            lines = [f"- `{path}`" for path in files] + [f"- `{name}`" for name in symbols] + list(facts)
            return {"type": "text", "text": "The answer:\n" + "\n".join(lines)}
        cited = self._cited(turn)
        if self.answers == "wrong":
            keyed = key[0] if key else ()
            wrong = next((p for p in cited if not any(same_file(p, k) for k in keyed)), "README.md")
            return {"type": "text", "text": f"It is all in `{wrong}`."}
        if not cited:
            return {"type": "text", "text": f"I could not find code answering: {turn.question}"}
        lines = [f"Answer to: {turn.question}", ""]
        for path, names in cited.items():
            symbols = ", ".join(f"`{n}`" for n in dict.fromkeys(names))
            lines.append(f"- `{path}`" + (f": {symbols}" if symbols else ""))
        return {"type": "text", "text": "\n".join(lines)}

    def _key(self, question: str) -> tuple[tuple[str, ...], ...] | None:
        """What the answer key names for ``question`` (the CLI may add to the text a person typed)."""
        return next((key for text, key in self.keys.items() if text and text in question), None)

    def _cited(self, turn: Turn) -> dict[str, list[str]]:
        """Every file seen with its symbols: section headers for explore, definitions for Read."""
        cited: dict[str, list[str]] = {}
        for step in turn.steps:
            if step.is_error:
                continue
            if step.name == self.explore or step.name.endswith("__" + self.explore):
                for section in file_sections(step.result):
                    cited.setdefault(section.path, []).extend(name for name, _ in section.symbols[:3])
            elif step.name == "Read" and step.input.get("file_path"):
                path = turn.relative(str(step.input["file_path"]))
                cited.setdefault(path, []).extend(defined_symbols(step.result, keywords(turn.question)))
        return cited
