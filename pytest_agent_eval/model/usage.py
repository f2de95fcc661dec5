"""Usage figures for a stand-in model, counted the way the real API counts a prompt.

**The counting model** (deterministic, so a test can hold occupancy to it). The API tokenises the
whole serialised request, structure included, so every piece is counted: the system prompt, the tool
definitions and every message content block, each as the JSON value it is (``cache_control`` markers
removed: the CLI moves them between requests). A JSON value costs

* a string: its text's tokens plus one for the quotes; a number, ``true``/``false``/``null``: one;
* an object: two for the braces, and per member its key's tokens plus two (quotes, colon) and its value;
* an array: two for the brackets plus its items;

and a message adds :data:`MESSAGE_FRAME_TOKENS` for its role. Text is cut BPE-style into pieces: a run
of letters (one token per :data:`~.tokenizers.LETTERS_PER_TOKEN` letters, so ``the`` is one and
``sendOptionsResponse`` four), up to three digits, one other character, or a run of whitespace, each
optionally led by a space. Dense, line-numbered source comes out near 2.5 characters a token and prose
near 4.5, as on the real tokenizer, so no single chars/token ratio prices both exactly; and a
tool_result's framing (type, ``tool_use_id``, content array) costs a few dozen tokens whatever its size.

Split: the longest prefix (in whole units: system, tools, then each content block) shared with an
earlier request (of the same item: the server gives each item a :class:`UsageModel` of its own) is
``cache_read``; of the new part, a few tokens are plain ``input`` (what follows the
client's last cache breakpoint) and the rest ``cache_creation``. So ``input + cache_read +
cache_creation`` is the whole prompt, as in the real API.

**Hidden thinking.** A real model counts thinking it streams only summarised, or not at all: the block the
client sends back holds the summary (or nothing) and a signature, while the prompt is priced on the whole
thinking. The stand-in does the same, honestly: a thinking block whose signature was made by
:func:`hidden_signature` costs its serialised form plus the tokens the signature declares, and the truth
(:attr:`PromptCount.hidden`) names them, so what it counts is always what the request holds plus what it says
it hid. A Responses API ``reasoning`` item (Codex) declares its hidden tokens the same way, in its
``encrypted_content``, and costs the reasoning it carries when it comes back: its summary's text and what it hid (its
id and encryption are no tokens the model reads).

**Server-side context.** A real API can count context beside a tool result that no transcript shows. The
stand-in's policy declares it in the call's id (:func:`server_context_id`): the tool_result that answers such a call
costs its own tokens plus the declared ones, which the truth counts among the ``hidden`` and not as the result's.

**Other counting models.** This is the ``stand-in`` counting model; :mod:`.tokenizers` has the others (uniform
chars/token, real BPE), chosen by ``AGENT_EVAL_TOKENIZER``. Whatever the model, a request and the output declared
for it are counted alike, and hidden thinking and server-side context cost what they declare.

The truth a stand-in knows: :meth:`UsageModel.count_prompt` gives, per request, the prompt's tokens, each
tool_result block's tokens by ``tool_use_id`` (what occupancy estimates from the outside) and the hidden
thinking among them, and of each tool result's tokens the *session context* the client moved into it
(:func:`moved_context`): after a compaction Claude Code 2.1.332 appends the first message's context reminders
(environment, model, agents, skills, MCP instructions) to the last message it keeps, a tool result's content.

A Responses-API request (Codex) is counted the same way: its instructions, tools, then each ``input`` item as
a unit, a ``function_call_output``'s tokens by its ``call_id``; a Gemini API request (Gemini CLI) likewise: its
``systemInstruction``, tools, then each ``contents`` turn's role and parts, a ``functionResponse`` part's tokens by
its ``id``.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .tokenizers import tokenizer

MESSAGE_FRAME_TOKENS = 4
# Tokens after the client's last cache breakpoint; Claude Code's requests show single digits here.
FRESH_INPUT_TOKENS = 4
# Earlier prompts remembered for prefix matching (a cache holds many conversations at once).
REMEMBERED_PROMPTS = 64
# Counted units remembered by their serialised form: each request repeats every earlier block.
REMEMBERED_UNITS = 4096

# A stand-in's thinking signature that declares hidden tokens: "stand-in-hidden-thinking:<tokens>:<nonce>".
HIDDEN_SIGNATURE = "stand-in-hidden-thinking"
_HIDDEN_RE = re.compile(rf"^{HIDDEN_SIGNATURE}:(\d+):")
# A call id that declares server-side context beside its result: "toolu_ctx<tokens>_<nonce>".
_SERVER_CONTEXT_RE = re.compile(r"^toolu_ctx(\d+)_")

# Where a prompt's tool result names its call: a Messages ``tool_result``, a Responses ``function_call_output``.
_RESULT_ID_KEYS = {"tool_result": "tool_use_id", "function_call_output": "call_id"}


def text_tokens(text: str) -> int:
    """Tokens of a piece of text under the counting model in force (:func:`~.tokenizers.tokenizer`)."""
    return tokenizer().text(text)


def count_tokens(value: Any) -> int:
    """Tokens of a JSON value, structure included, under the counting model in force (see the module docstring)."""
    return tokenizer().value(value)


def hidden_signature(tokens: int, nonce: str) -> str:
    """The signature of a thinking block that hides ``tokens`` tokens of thinking (see the module docstring)."""
    return f"{HIDDEN_SIGNATURE}:{tokens}:{nonce}"


def server_context_id(tokens: int, nonce: str) -> str:
    """The id of a call whose result the server counts ``tokens`` of context beside (see the module docstring)."""
    return f"toolu_ctx{tokens}_{nonce}"


def declared_server_context(block: Any) -> int:
    """The server-side context tokens a tool_result's call id declares (0 for any other block)."""
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return 0
    found = _SERVER_CONTEXT_RE.match(str(block.get("tool_use_id") or ""))
    return int(found.group(1)) if found else 0


def declared_hidden(block: Any) -> int:
    """The hidden thinking tokens a thinking block's signature declares, or a Responses API reasoning item's
    ``encrypted_content`` (0 for any other block)."""
    if not isinstance(block, dict):
        return 0
    if block.get("type") in ("thinking", "redacted_thinking"):
        carrier = block.get("signature")
    elif block.get("type") == "reasoning":
        carrier = block.get("encrypted_content")
    else:
        return 0
    return signed_hidden(carrier)


def signed_hidden(signature: Any) -> int:
    """The hidden thinking tokens a stand-in's signature declares (:func:`hidden_signature`; 0 for anything else)."""
    found = _HIDDEN_RE.match(str(signature or ""))
    return int(found.group(1)) if found else 0


# A reminder the client adds to a message. The one that counts down the tokens left rides on the latest tool result
# (part of what a result costs); any other inside a tool result is the session's context the client moved there (its
# reminders, files it restores after a compaction), not the tool's output.
_LAST_REMINDER_RE = re.compile(r"\s*<system-reminder>(?:(?!<system-reminder>).)*</system-reminder>\s*\Z", re.DOTALL)
_TOKENS_LEFT_RE = re.compile(
    r"\s*<system-reminder>\s*<total_tokens>\d+ tokens left</total_tokens>\s*</system-reminder>\s*"
)


def moved_context(block: Any) -> int:
    """Tokens of a tool_result block that are session context the client moved into it, not the tool's output: the
    ``<system-reminder>`` sections it appended (at the end of a text, or as text items of their own) but the tokens-left
    one (0 for any other block). Only what ends the text is the client's: a file may quote a reminder."""
    if not isinstance(block, dict) or block.get("type") != "tool_result":
        return 0
    content = block.get("content")
    if isinstance(content, str):
        body, tokens_left = content, ""
        while found := _LAST_REMINDER_RE.search(body):
            body = body[: found.start()]
            if _TOKENS_LEFT_RE.fullmatch(found.group(0)):
                tokens_left = found.group(0) + tokens_left
        return count_tokens(content) - count_tokens(body + tokens_left)
    if isinstance(content, list):
        return sum(count_tokens(item) for item in content if _is_moved(item))
    return 0


def _is_moved(item: Any) -> bool:
    text = str(item.get("text") or "") if isinstance(item, dict) and item.get("type") == "text" else ""
    return text.lstrip().startswith("<system-reminder>") and not _TOKENS_LEFT_RE.fullmatch(text)


def _unit_tokens(value: Any) -> int:
    """What one unit of a prompt costs: its JSON (see the module docstring) and the thinking it declares hidden; a
    Responses API reasoning item costs the reasoning it carries, its summary's text and what it hid (its id and
    encryption are no tokens the model reads: the API decrypts the reasoning)."""
    if isinstance(value, dict) and value.get("type") == "reasoning":
        summary = [part.get("text") for part in value.get("summary") or [] if isinstance(part, dict)]
        return count_tokens(summary) + declared_hidden(value)
    return count_tokens(value) + declared_hidden(value) + declared_server_context(value)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


@dataclass(frozen=True)
class Unit:
    """One piece of a prompt: ``key`` (its serialised form) decides cache hits, ``tokens`` its size."""

    key: str
    tokens: int
    tool_use_id: str | None = None  # set on a tool_result block
    hidden: int = 0  # of the tokens, thinking the block's signature declares hidden (or context its call id does)
    context: int = 0  # of a tool_result's tokens, the session context the client moved into it (moved_context)


@dataclass
class PromptCount:
    """The truth about one request: its prompt's tokens, each tool_result's by ``tool_use_id``, of the prompt's
    tokens the hidden ones (thinking, :func:`hidden_signature`; server-side context, :func:`server_context_id`), and
    of each tool_result's tokens the session context the client moved into it (:func:`moved_context`, only where
    there is some)."""

    tokens: int
    results: dict[str, int] = field(default_factory=dict)
    hidden: int = 0
    context: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        record = {"tokens": self.tokens, "results": dict(self.results), "hidden": self.hidden}
        return record | ({"context": dict(self.context)} if self.context else {})


class UsageModel:
    """Remembers recent prompts and prices each new one against the longest shared prefix."""

    def __init__(self) -> None:
        self._seen: deque[list[str]] = deque(maxlen=REMEMBERED_PROMPTS)
        self._counted: dict[str, int] = {}
        self._lock = threading.Lock()

    def _unit(self, prefix: str, value: Any) -> Unit:
        clean = _without_cache_control(value)
        key = prefix + json.dumps(clean, ensure_ascii=False, sort_keys=True)
        with self._lock:
            tokens = self._counted.get(key)
        hidden = declared_hidden(clean) + declared_server_context(clean)
        if tokens is None:
            tokens = _unit_tokens(clean)
            with self._lock:
                if len(self._counted) >= REMEMBERED_UNITS:
                    self._counted.clear()
                self._counted[key] = tokens
        result_id = clean.get(_RESULT_ID_KEYS.get(clean.get("type"), "")) if isinstance(clean, dict) else None
        if isinstance(clean, dict) and isinstance(clean.get("functionResponse"), dict):  # a Gemini API result part
            result_id = clean["functionResponse"].get("id")
        result_id = result_id if isinstance(result_id, str) else None
        return Unit(key, tokens, result_id, hidden, moved_context(clean) if result_id else 0)

    def prompt_units(self, request: dict[str, Any]) -> list[Unit]:
        """The prompt as an ordered list of units; a cached prefix is a run of equal leading units."""
        if "input" in request and "messages" not in request:
            return self._responses_units(request)
        if "contents" in request and "messages" not in request:
            return self._gemini_units(request)
        system = request.get("system") or []
        system = [{"type": "text", "text": system}] if isinstance(system, str) else system
        units = [self._unit("system:", system), self._unit("tools:", request.get("tools") or [])]
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            # A string and a one-text-block list are the same prompt (the CLI sends either for one message).
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            role = f"{message.get('role')}:"
            units.append(Unit(role, MESSAGE_FRAME_TOKENS))
            units.extend(self._unit(role, block) for block in blocks)
        return units

    def _responses_units(self, request: dict[str, Any]) -> list[Unit]:
        """A Responses-API prompt: its instructions, its tools, then each input item whole (a message's role, a
        call, a call's output; each is one JSON object of the request, as a Messages content block is)."""
        units = [
            self._unit("instructions:", request.get("instructions") or ""),
            self._unit("tools:", request.get("tools") or []),
        ]
        items = request.get("input")
        items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items or []
        units.extend(self._unit("input:", item) for item in items)
        return units

    def _gemini_units(self, request: dict[str, Any]) -> list[Unit]:
        """A Gemini API prompt: its system instruction, its tools, then per ``contents`` turn its role and each part
        (a text, a call, a call's result: each one JSON object of the request, as a Messages content block is)."""
        units = [
            self._unit("system:", request.get("systemInstruction") or {}),
            self._unit("tools:", request.get("tools") or []),
        ]
        for content in request.get("contents") or []:
            if not isinstance(content, dict):
                continue
            role = f"{content.get('role')}:"
            units.append(Unit(role, MESSAGE_FRAME_TOKENS))
            units.extend(self._unit(role, part) for part in content.get("parts") or [])
        return units

    def count_prompt(self, request: dict[str, Any]) -> PromptCount:
        """The whole prompt's tokens and each tool result's, without touching the cache."""
        return _truth(self.prompt_units(request))

    def usage(self, request: dict[str, Any]) -> tuple[dict[str, int], PromptCount]:
        """The usage a caching API reports for ``request``, and the truth it was computed from."""
        units = self.prompt_units(request)
        keys = [u.key for u in units]
        with self._lock:
            shared = max((_shared_prefix(keys, old) for old in self._seen), default=0)
            self._seen.append(keys)
        truth = _truth(units)
        cached = min(truth.tokens, sum(u.tokens for u in units[:shared]))
        fresh = min(truth.tokens - cached, FRESH_INPUT_TOKENS)
        usage = {
            "input_tokens": fresh,
            "cache_creation_input_tokens": truth.tokens - cached - fresh,
            "cache_read_input_tokens": cached,
        }
        return usage, truth

    def count(self, request: dict[str, Any]) -> int:
        """What ``/v1/messages/count_tokens`` answers: the whole prompt, without touching the cache."""
        return self.count_prompt(request).tokens


def _truth(units: list[Unit]) -> PromptCount:
    # A result carried twice occupies the prompt twice (Gemini CLI 0.61.0 repeats results in history it rewrote).
    results: dict[str, int] = {}
    context: dict[str, int] = {}
    for u in units:
        if u.tool_use_id is not None:
            results[u.tool_use_id] = results.get(u.tool_use_id, 0) + u.tokens - u.hidden  # beside it, not its
            if u.context:
                context[u.tool_use_id] = context.get(u.tool_use_id, 0) + u.context
    return PromptCount(max(1, sum(u.tokens for u in units)), results, sum(u.hidden for u in units), context)


def _shared_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
