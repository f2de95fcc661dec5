"""A Messages-API server on loopback, so the real Claude Code CLI can talk to a stand-in model; it answers
the Responses API (``POST /v1/responses``, :mod:`.responses`) and the Gemini API (:mod:`.gemini`) too, from the same
policy. A request in an agent's own tools is read for the policy, and the decision spoken back in them, by the speech
its agent declares (:mod:`.speech`: the server routes by the API a request came on and the speech that claims it).

The CLI only needs ``POST /v1/messages`` with ``stream: true``; the server also answers the
non-streaming form, ``/v1/messages/count_tokens``, and GET/HEAD probes, so nothing the CLI might
try fails for a reason that is not the model's. Faults (HTTP errors, a stream broken mid-message,
a request left hanging) are injected by request number, to see what the client does with them.

It knows the truth occupancy estimates: every answered message request is counted (:mod:`.usage`), and
the count — the prompt's tokens and each tool result's — is kept per reply (:attr:`RunningServer.truth`)
and, with ``truth_log`` (or ``AGENT_EVAL_TRUTH_LOG`` in the environment), appended to a JSON-lines file
keyed by the reply's message id, which the transcript records too.

It keeps the evidence of what the model saw: with a :class:`~.record.RequestLog` every request it received, and
what it answered, is appended to the log's file (see :mod:`.record`). It refuses, with HTTP 400, a request of any
of the three APIs that would have the API run tools on its own side (:mod:`.refusal`), and, in front of a
forwarder, any request the forwarder's allow-list does not hold (``forward_refusal``: another path, method, query
or model), and lists what it refused (:attr:`RunningServer.refused`).

The stand-in's simulated prompt cache is per item: a server serves one item at a time (its request log pointed at
the item's record), and the cache is emptied when the log is pointed elsewhere, so ``cache_read_input_tokens``
never confirms a block of another item's prompt.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..harness.writes import WriteFailed, append_line
from .gemini import COUNT, GENERATE, STREAM, model_method, stream_frames, usage_metadata
from .gemini import assemble as assemble_gemini
from .gemini import response_json as gemini_response_json
from .record import RequestLog
from .refusal import gemini_refusal, refusal, responses_refusal
from .responses import as_requested, assemble_response, response_json, usage_json
from .responses import stream_events as response_events
from .retry import TRANSIENT_STATUSES, RetryPolicy
from .scripted import StandInError
from .speech import Speech, known_speeches, speech_for
from .sse import IdSource, Reply, assemble, ids_from, message_json, new_id, stream_events
from .usage import PromptCount, UsageModel

_API_TITLES = {"messages": "Messages", "responses": "Responses", "gemini": "Gemini"}  # as errors name them
FAULT_KINDS = frozenset({"500", "529", "429", "break", "stall", "hang"})
_ERROR_TYPES = {500: "api_error", 529: "overloaded_error", 429: "rate_limit_error"}
# Where a server started without ``truth_log`` appends its truth (so a harness run can keep it).
TRUTH_LOG_ENV = "AGENT_EVAL_TRUTH_LOG"


@dataclass
class Passthrough:
    """A response produced elsewhere (the real API), relayed byte for byte."""

    status: int
    headers: dict[str, str]
    body: Iterator[bytes]


class Unreachable(Exception):
    """A forwarder could not reach the real API (a connection refused, or closed before it answered): transient, as
    its 5xx are. A timeout is not one: the server does not retry a model that does not answer."""


class Backend(Protocol):
    def respond(self, request: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply | Passthrough:
        """The reply to one message request; ``headers`` are the client's (a forwarding backend needs its betas).
        A backend with a ``count_tokens`` method of the same form answers ``/v1/messages/count_tokens`` too.

        The Responses API (``/v1/responses``) is answered by a backend with ``respond_responses`` (same form, giving
        the response's output items or a :class:`Passthrough`), or with a policy, ``decide(Turn) -> Reply``
        (:mod:`.responses` reads the request into the Turn and renders the Reply); any other answers it HTTP 400."""

    def describe(self) -> str: ...


@dataclass
class Faults:
    """Which ``POST /v1/messages`` (or ``/v1/responses``) requests (numbered from 1; under a retry policy each try
    is one: :mod:`.retry`) misbehave, and how.

    Kinds: ``"500"``, ``"529"``, ``"429"`` (an HTTP error with the API's JSON error body),
    ``"break"`` (the SSE stream stops after the first text delta and the connection closes),
    ``"stall"`` (the SSE stream goes silent after the first text delta for ``stall_s`` seconds, then
    finishes: a response that stops arriving, as a loaded or throttled upstream does),
    ``"hang"`` (no answer at all until the server stops). ``default`` applies to every request
    not in ``plan`` — e.g. ``Faults(default="500")`` for an API that is down.
    """

    plan: dict[int, str] = field(default_factory=dict)
    default: str | None = None
    stall_s: float = 10.0

    def __post_init__(self) -> None:
        for kind in [*self.plan.values(), self.default]:
            if kind is not None and kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault {kind!r}; expected one of {sorted(FAULT_KINDS)}")

    def for_request(self, number: int) -> str | None:
        return self.plan.get(number, self.default)

    @classmethod
    def coerce(cls, faults: Faults | Mapping[int, str] | None) -> Faults:
        if isinstance(faults, Faults):
            return faults
        return cls(plan={int(k): str(v) for k, v in (faults or {}).items()})


@dataclass
class Truth:
    """What the server counted for one answered message request; ``message_id`` is its reply's."""

    message_id: str
    count: PromptCount

    def to_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, **self.count.to_dict()}


@dataclass
class Hit:
    """One HTTP request the server received (any path), for reports on what a client calls.

    ``status`` 0 means it was never answered (a ``hang`` fault), or a try the retry policy made was cut (``break``)
    or could not reach the real API (:class:`Unreachable`)."""

    method: str
    path: str
    status: int
    fault: str | None = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        backend: Backend,
        faults: Faults,
        truth_log: Path | None,
        log: RequestLog,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.backend = backend
        self.retry = retry
        self.log = log
        self.refused: list[str] = []
        self.faults = faults
        self.truth_log = truth_log
        self._usage_model, self._ids, self._cache_owner = UsageModel(), _ids_for(log.path), log.path
        self.truth: list[Truth] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.token_counts: list[dict[str, Any]] = []
        self.hits: list[Hit] = []
        self.errors: list[str] = []
        self._speeches: tuple[Speech, ...] | None = None

    def speech(self, api: str, request: dict[str, Any]) -> Speech | None:
        """The speech of the agent whose tools ``request`` (of ``api``) is in: of those the agents' package provides
        (:func:`.speech.provide`: the built-in agents', one of which an agent's ``stand_in`` names), read when a
        policy first needs one."""
        with self.lock:
            if self._speeches is None:
                self._speeches = known_speeches()
        return speech_for(api, request, self._speeches)

    @property
    def usage_model(self) -> UsageModel:
        """The simulated prompt cache of the item being served: a fresh one whenever the request log is pointed at
        another item's record (see the module docstring)."""
        return self._item_state()[0]

    @property
    def ids(self) -> IdSource | None:
        """Where the item being served draws its ids from (seeded by its folder's name); None outside an item."""
        return self._item_state()[1]

    def _item_state(self) -> tuple[UsageModel, IdSource | None]:
        with self.lock:
            if self.log.path != self._cache_owner:
                self._usage_model, self._ids, self._cache_owner = UsageModel(), _ids_for(self.log.path), self.log.path
            return self._usage_model, self._ids

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-stream (a CLI timing out, a test's broken read) is not a server error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _ids_for(record: Path | None) -> IdSource | None:
    """An item's ids are seeded by its folder's name (``express-with-1``): the same in every campaign."""
    return IdSource(record.parent.name) if record is not None else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    body: Any = None  # the request's JSON body, once read

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the hit log replaces stderr noise."""

    # -- plumbing ---------------------------------------------------------------------------
    def _record(self, status: int, fault: str | None = None, response: Any = None, logged: bool = True) -> bool:
        """Note the answer as a hit and, unless ``logged`` is False (a relay logs what it relayed once done), in
        the request log; False when the log could not be written (:meth:`_unrecorded` answers then)."""
        with self.server.lock:
            self.server.hits.append(Hit(self.command, self.path, status, fault))
        return self._log(status, response, fault=fault) if logged else True

    def _log(
        self, status: int, response: Any, refused: str | None = None, fault: str | None = None, **more: Any
    ) -> bool:
        entry = {
            "method": self.command, "path": self.path, "status": status, "request": self.body,
            "response": response, "refused": refused, "fault": fault, "at": round(time.time(), 3), **more,
        }  # fmt: skip
        try:
            self.server.log.write(entry)
        except WriteFailed:  # a full disk; the log keeps why (RequestLog.failure)
            return False
        return True

    def _unrecorded(self) -> None:
        """What the model says to a request the request record could not keep (a full disk): an error no agent
        retries (HTTP 400), so it ends the turn at once rather than wait or retry on its own clock, and the harness
        names the folder and its free space (ItemLife.run reads RequestLog.failure)."""
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": _UNRECORDED}}
        data = json.dumps(body).encode()
        with self.server.lock:
            self.server.hits.append(Hit(self.command, self.path, 400, None))
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, body: Any, head_only: bool = False) -> None:
        data = json.dumps(body).encode()
        if not self._record(status, response=body):  # before the client can see the answer and send its next one
            self._unrecorded()
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", new_id("req"))
        self.end_headers()
        if not head_only:
            self.wfile.write(data)

    def _send_error(self, status: int, message: str, fault: str | None = None, refused: str | None = None) -> None:
        error_type = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
        request_id = new_id("req")
        body = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}
        data = json.dumps(body).encode()
        with self.server.lock:
            self.server.hits.append(Hit(self.command, self.path, status, fault))
        if not self._log(status, body, refused, fault):  # before the client can see the answer and send its next one
            self._unrecorded()
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", request_id)
        if status in (429, 529):
            self.send_header("retry-after", "0")
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw or b"{}")

    # -- verbs --------------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.body = None
        self._send_json(200, {}, head_only=True)

    def do_GET(self) -> None:
        self.body = None
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/v1/models":
            self._send_json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
        elif path in ("", "/v1"):
            self._send_json(200, {})
        else:
            self._send_error(404, f"Not found: {path}")

    def do_POST(self) -> None:
        with ids_from(self.server.ids):
            self._post()

    def _post(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        self.body = None
        try:
            body = self.body = self._read_json()
        except ValueError:
            self._send_error(400, "request body is not JSON")
            return
        reason = refusal(body) if path in ("/v1/messages", "/v1/messages/count_tokens") else None
        reason = responses_refusal(body) if path == "/v1/responses" else reason
        reason = gemini_refusal(body) if model_method(path) is not None else reason
        allowed = getattr(self.server.backend, "forward_refusal", None)  # a forwarder's allow-list
        if reason is None and callable(allowed):
            reason = allowed(self.path, body)
        if reason is not None:
            with self.server.lock:
                self.server.refused.append(f"{self.command} {path}: {reason}")
            self._send_error(400, f"agent-eval: refused: {reason}", refused=reason)
            return
        counter = getattr(self.server.backend, "count_tokens", None)
        if path == "/v1/messages/count_tokens" and callable(counter):
            self._relay(counter(body, dict(self.headers.items())))
        elif path == "/v1/messages/count_tokens":
            with self.server.lock:
                self.server.token_counts.append(body)
            self._send_json(200, {"input_tokens": self.server.usage_model.count(body)})
        elif path == "/v1/messages":
            self._messages(body)
        elif path == "/v1/responses":
            self._responses(body)
        elif (method := model_method(path)) is not None:
            self._gemini(*method, body)
        else:
            self._send_error(404, f"Not found: {path}")

    def _tried(self, request: dict[str, Any], produce: Callable[[], Any]) -> tuple[Any, str] | None:
        """The model's answer to ``request`` (``produce()``: the backend's reply) and the fault of the try that gave
        it; None when an error was sent instead, or no answer ever will be (hang).

        Each try is counted (``requests``; the faults are numbered by it). Under the server's retry policy
        (:mod:`.retry`) a transient failure — an injected 5xx/429 or cut stream, or the real API's transient status
        relayed by a forwarder — is recorded (``retried``), waited out and tried again; when the tries are spent the
        server gives up (:meth:`_give_up`). Without one, the fault is the agent's to meet."""
        policy = self.server.retry
        tries = policy.tries if policy is not None else 1
        started = time.monotonic()
        for attempt in range(1, tries + 1):
            with self.server.lock:
                self.server.requests.append(request)
                number = len(self.server.requests)
            fault = self.server.faults.for_request(number)
            if fault == "hang":
                self._record(0, fault)
                self.close_connection = True
                self.server.stopping.wait()
                return None
            failed = _injected(fault) if policy is not None or fault != "break" else None
            reply = None
            if failed is None:
                try:
                    reply = produce()
                except Unreachable as error:  # the real API, through a forwarder: transient under a policy
                    if policy is None:
                        self._backend_failed()
                        return None
                    failed = 0, str(error), None
                except Exception:
                    self._backend_failed()
                    return None
                if policy is not None and isinstance(reply, Passthrough) and reply.status in TRANSIENT_STATUSES:
                    failed = _relayed_failure(reply)
            if failed is None:
                return reply, fault or ""
            status, body, retry_after = failed
            if policy is None:  # the agent meets the fault itself
                self._send_error(status, "Injected fault", fault)
                return None
            if attempt == tries:
                self._give_up(status, body, fault, tries, time.monotonic() - started)
                return None
            with self.server.lock:
                self.server.hits.append(Hit(self.command, self.path, status, fault))
            self._log(status, body, fault=fault, retried=attempt)
            if self.server.stopping.wait(policy.wait_s(attempt, retry_after)):
                return None
        return None  # pragma: no cover - the loop returns on its last try

    def _give_up(self, status: int, body: Any, fault: str | None, tries: int, spent_s: float) -> None:
        """The model kept failing: an error no agent retries (HTTP 400) naming the model's last status and
        message, also kept in the request log (``gave_up``, and RequestLog.gave_up for the harness)."""
        said = _error_text(body) if status else body or "its stream was cut"  # a forwarder's Unreachable says why
        last = f"HTTP {status} ({said})" if status else said
        reason = f"the model kept failing: {last}, {tries} tries over {spent_s:.1f}s"
        self.server.log.gave_up = reason
        answer = {"type": "error", "error": {"type": "invalid_request_error", "message": _GAVE_UP}}
        with self.server.lock:
            self.server.hits.append(Hit(self.command, self.path, 400, fault))
        self._log(400, answer, fault=fault, gave_up=reason)
        data = json.dumps(answer).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _backend_failed(self) -> None:
        with self.server.lock:
            self.server.errors.append(traceback.format_exc())
        failure = sys.exc_info()[1]
        if isinstance(failure, StandInError):  # the agent's own mistake, said to it (and in the request record)
            self._send_error(400, f"agent-eval: {failure}", refused=str(failure))
            return
        self._send_error(500, "backend failed")

    def _model(self, request: dict[str, Any]) -> str:
        # A stand-in names itself in every message, so any transcript it produced says so when scored.
        return getattr(self.server.backend, "stand_in_model", None) or str(request.get("model") or "stand-in")

    def _messages(self, request: dict[str, Any]) -> None:
        answered = self._tried(request, lambda: self._reply(request))
        if answered is None:
            return
        reply, fault = answered
        if isinstance(reply, Passthrough):
            self._relay(reply)
            return
        model = self._model(request)
        usage, count = self.server.usage_model.usage(request)
        message_id = new_id("msg")
        self._keep_truth(Truth(message_id, count))
        message = message_json(reply, model, usage, message_id)
        if not request.get("stream"):
            self._send_json(200, message)
            return
        self._stream(list(stream_events(reply, model, usage, message_id)), fault, message)

    def _reply(self, request: dict[str, Any]) -> Reply | Passthrough:
        """The backend's reply to a Messages request; one in an agent's own tools (OpenCode's), where the backend has
        a policy, decided on the turn its speech reads in the common vocabulary and rendered back in its tools."""
        backend = self.server.backend
        decide, explore = getattr(backend, "decide", None), getattr(backend, "explore", None)
        speech = self.server.speech("messages", request) if decide is not None and isinstance(explore, str) else None
        if speech is not None:
            return speech.render(request, decide(speech.read_turn(request, explore)), explore)
        return backend.respond(request, dict(self.headers.items()))

    def _responses(self, request: dict[str, Any]) -> None:
        """The Responses API (Codex CLI): the backend answers the request (``respond_responses``: a cassette's output
        items, or the forwarder's relay), or its policy decides on the turn read from it (``decide``)."""
        replied = self._answer_or_decide(request, "responses", "respond_responses")
        if replied is None:
            return
        items, fault = replied
        if isinstance(items, Passthrough):
            self._relay(items, assemble_response)
            return
        model = self._model(request)
        usage, count = self.server.usage_model.usage(request)
        response_id = new_id("resp")
        self._keep_truth(Truth(response_id, count))
        cached = usage["cache_read_input_tokens"]
        body_usage = usage_json(count.tokens, cached, items)
        items = as_requested(request, items)  # counted whole: the reasoning's encrypted content only where asked
        response = response_json(items, model, body_usage, response_id, "completed")
        if not request.get("stream"):
            self._send_json(200, response)
            return
        self._stream(list(response_events(items, model, body_usage, response_id)), fault, response)

    def _answer_or_decide(self, request: dict[str, Any], api: str, answer_name: str) -> tuple[Any, str] | None:
        """The backend's reply to a request of ``api``, and the fault the request was admitted with: the backend's
        own answer (``answer_name``: a cassette's, or a forwarder's relay) or its policy's decision on the request
        read, and rendered, by the speech that claims it. None when an error was sent instead (no way to answer, a
        fault, the backend failed)."""
        answer = getattr(self.server.backend, answer_name, None)
        decide = getattr(self.server.backend, "decide", None)
        speech = self.server.speech(api, request) if answer is None and decide is not None else None
        if answer is None and speech is None:
            title = _API_TITLES[api]
            self._send_error(400, f"this backend does not answer the {title} API: {self.server.backend.describe()}")
            return None
        if answer is not None:
            return self._tried(request, lambda: answer(request, dict(self.headers.items())))
        assert speech is not None and decide is not None
        explore = getattr(self.server.backend, "explore", None)
        return self._tried(request, lambda: speech.render(request, decide(speech.read_turn(request, explore)), explore))

    def _gemini(self, model: str, method: str, request: dict[str, Any]) -> None:
        """The Gemini API (Gemini CLI): ``:streamGenerateContent`` and ``:generateContent`` answered by the backend
        (``respond_gemini``: a cassette's recorded parts) or its policy on the turn read from the request,
        ``:countTokens`` by the counting model."""
        forward = getattr(self.server.backend, "forward_gemini", None)
        if callable(forward):  # the real API, through the harness's forwarder (pytest_agent_eval.model.google)
            relayed = functools.partial(forward, self.path, request, dict(self.headers.items()))
            if method == COUNT:  # a token count is relayed as it comes, as the Messages forwarder's count_tokens
                self._relay(relayed())
                return
            answered = self._tried(request, relayed)  # the harness's retry policy, as for Messages and Responses
            if answered is not None:
                self._relay(answered[0])
            return
        if method == COUNT:
            inner = request.get("generateContentRequest")
            self._send_json(200, {"totalTokens": self.server.usage_model.count(inner or request)})
            return
        if method not in (STREAM, GENERATE):
            self._send_error(404, f"Not found: {model}:{method}")
            return
        replied = self._answer_or_decide(request, "gemini", "respond_gemini")  # a cassette's recorded parts
        if replied is None:
            return
        parts, fault = replied
        name = getattr(self.server.backend, "stand_in_model", None) or model
        usage, count = self.server.usage_model.usage(request)
        response_id = new_id("gemini")
        self._keep_truth(Truth(response_id, count))
        body_usage = usage_metadata(count.tokens, usage["cache_read_input_tokens"], parts)
        response = gemini_response_json(parts, name, body_usage, response_id)
        if method == GENERATE:
            self._send_json(200, response)
            return
        self._stream(list(stream_frames(parts, name, body_usage, response_id)), fault, response)

    def _stream(self, frames: list[bytes], fault: str, response: dict[str, Any]) -> None:
        if not self._record(200, fault or None, response):
            self._unrecorded()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", new_id("req"))
        self.end_headers()
        # "break" and "stall" cut in after message_start, ping, the first block's start and its first delta
        cut = min(4, len(frames) - 1) if fault in ("break", "stall") else len(frames)
        for frame in frames[:cut]:
            self._chunk(frame)
        if fault == "stall":
            # silent, then the rest; a client that gave up meanwhile makes the writes fail (see handle_error)
            self.server.stopping.wait(self.server.faults.stall_s)
            for frame in frames[cut:]:
                self._chunk(frame)
        if fault == "break":
            self.close_connection = True
            return
        self._chunk(b"")

    def _keep_truth(self, truth: Truth) -> None:
        with self.server.lock:
            self.server.truth.append(truth)
            if self.server.truth_log is not None:
                with contextlib.suppress(WriteFailed):  # a full disk: the request record's failure says so
                    append_line(self.server.truth_log, (json.dumps(truth.to_dict()) + "\n").encode())

    def _relay(self, reply: Passthrough, read_stream: Callable[[bytes], Any] = assemble) -> None:
        """Send on what the backend relayed, byte for byte; the record keeps it as ``read_stream`` reads a stream
        back (the Messages API's message, or the Responses API's response)."""
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            if name.lower() not in ("transfer-encoding", "content-length", "connection", "content-encoding"):
                self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._record(reply.status, logged=False)
        relayed = bytearray()
        try:
            for data in reply.body:
                relayed += data
                self._chunk(data)
        except BaseException:  # what reached the client before it hung up mid-stream
            self._log(reply.status, _read_back(bytes(relayed), reply.headers, read_stream))
            raise
        # Logged before the stream's last chunk: once the client has the whole answer it may send its next request,
        # or the harness may close the item's record (a record written after that was lost 1 run in 10).
        self._log(reply.status, _read_back(bytes(relayed), reply.headers, read_stream))
        self._chunk(b"")


# What the agent reads when the server gives up on the model or cannot record a request: words alone, since an agent
# may retry an error whose message holds a status, "rate limit", "server error" and the like (OpenCode 1.18 does, on
# its own clock); the harness names the status, the API's message or the folder in the item's error.
_GAVE_UP = "agent-eval: the model kept failing and the harness gave up on it; the item's error says why"
_UNRECORDED = "agent-eval: the harness could not record this request, so it is not answered; the item's error says why"


def _injected(fault: str | None) -> tuple[int, Any, str | None] | None:
    """An injected transient failure as the model would answer it (status 0: a cut stream); None for none."""
    if fault in ("500", "529", "429"):
        status = int(fault)
        body = {"type": "error", "error": {"type": _ERROR_TYPES[status], "message": "Injected fault"}}
        return status, body, "0" if status in (429, 529) else None
    if fault == "break":
        return 0, None, None
    return None


def _relayed_failure(reply: Passthrough) -> tuple[int, Any, str | None]:
    """The real API's transient error, read whole (an error body is short), with its ``retry-after``."""
    data = b"".join(reply.body)
    retry_after = next((v for k, v in reply.headers.items() if k.lower() == "retry-after"), None)
    try:
        body: Any = json.loads(data)
    except ValueError:
        body = data.decode("utf-8", "replace")
    return reply.status, body, retry_after


def _error_text(body: Any) -> str:
    """``type: message`` of an API's error body (Messages, Responses and Gemini shapes), else the body itself."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind = error.get("type") or error.get("status") or error.get("code")
        message = error.get("message") or ""
        return f"{kind}: {message}" if kind else str(message)
    return str(body)[:200]


def _read_back(data: bytes, headers: Mapping[str, str], read_stream: Callable[[bytes], Any]) -> Any:
    """A relayed body as the request log keeps it: what ``read_stream`` reads off a stream, the JSON of a JSON
    body."""
    kind = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if "event-stream" in kind and data.lstrip().startswith(b"data:"):  # the Gemini API's frames have no event names
        return assemble_gemini(data)
    if "event-stream" in kind:
        return read_stream(data)
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class ModelEndpoint:
    """Where the agent's API requests go: a loopback server of the harness (a stand-in, or the forwarder to the
    real API); ``log`` points its request record at an item's folder."""

    backend: str
    description: str
    url: str
    replay: str | None = None  # the baseline a replayed item's recording came from
    log: RequestLog | None = field(default=None, compare=False, repr=False)

    @property
    def real(self) -> bool:
        """The real model answers (through a forwarder)."""
        return self.backend in ("anthropic", "openai", "gemini")

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.backend, "description": self.description, "url": self.url}
        return {**data, "replay": self.replay} if self.replay else data


class RunningServer:
    """A started server; a context manager that stops it. ``requests`` holds every message request body."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="model-server", daemon=True
        )  # a short poll so stop() returns at once
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def host(self) -> str:
        return self._server.server_address[0]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def backend(self) -> Backend:
        return self._server.backend

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of ``POST /v1/messages`` and ``/v1/responses`` in arrival order (faulted ones included; under a
        retry policy, once per try)."""
        with self._server.lock:
            return list(self._server.requests)

    @property
    def token_counts(self) -> list[dict[str, Any]]:
        """Bodies of ``POST /v1/messages/count_tokens``."""
        with self._server.lock:
            return list(self._server.token_counts)

    @property
    def truth(self) -> list[Truth]:
        """What the server counted for each answered message request, in arrival order."""
        with self._server.lock:
            return list(self._server.truth)

    @property
    def hits(self) -> list[Hit]:
        with self._server.lock:
            return list(self._server.hits)

    @property
    def refused(self) -> list[str]:
        """Requests refused at the boundary (``METHOD path: why``), in order."""
        with self._server.lock:
            return list(self._server.refused)

    @property
    def log(self) -> RequestLog:
        """The request record (see :mod:`.record`)."""
        return self._server.log

    @property
    def errors(self) -> list[str]:
        """Tracebacks of backend failures (each was answered with HTTP 500)."""
        with self._server.lock:
            return list(self._server.errors)

    def stop(self) -> None:
        self._server.stopping.set()  # releases hanging requests
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_LOOPBACK = ("127.0.0.1", "localhost")


def serve(
    backend: Backend,
    host: str = "127.0.0.1",
    port: int = 0,
    faults: Faults | Mapping[int, str] | None = None,
    truth_log: str | Path | None = None,
    log: RequestLog | None = None,
    retry: RetryPolicy | None = None,
) -> RunningServer:
    """Start serving ``backend`` in a background thread; ``port=0`` picks a free port.

    ``truth_log`` (default: ``$AGENT_EVAL_TRUTH_LOG`` if set): a JSON-lines file each answered request's
    :class:`Truth` is appended to. ``log``: where every request and its answer are recorded (none by default).
    ``retry``: the policy the model's transient failures are retried by (:mod:`.retry`; none by default: every
    fault reaches the client as injected)."""
    if host not in _LOOPBACK:
        raise ValueError(f"the model server binds loopback only, not {host!r}")
    truth = truth_log or os.environ.get(TRUTH_LOG_ENV) or None
    truth_path = Path(truth) if truth else None
    server = _Server((host, port), backend, Faults.coerce(faults), truth_path, log or RequestLog(), retry)
    return RunningServer(server)


__all__ = ["TRUTH_LOG_ENV", "Backend", "Faults", "Hit", "Passthrough", "RunningServer", "Truth", "serve"]
