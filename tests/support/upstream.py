"""A fake model API on 127.0.0.1 standing in for the real one behind the harness's forwarders: it records what
reached it (path, headers, body) and answers each POST with what ``answer(path, body)`` gives, after the
``failures`` it was given (one per request, in order: the API's transient errors)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str, Any], tuple[bytes, str]]  # (path, body) → (the answer's bytes, its content type)
Failure = tuple[int, bytes, dict[str, str]]  # an error's status (0: no answer), JSON body and headers (retry-after)


@dataclass
class Upstream:
    """What the fake API received: (path, headers with lower-cased names, body) per request."""

    url: str
    seen: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)


@contextmanager
def fake_api(answer: Answer, failures: Sequence[Failure] = ()) -> Iterator[Upstream]:
    """Serve :data:`Answer` on a free loopback port until the block ends, each of ``failures`` first."""
    upstream = Upstream("")
    pending = list(failures)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            upstream.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status, headers = 200, {}
            if pending:
                status, data, headers = pending.pop(0)
                kind = "application/json"
            else:
                data, kind = answer(self.path, body)
            if status == 0:  # the connection closed before any answer
                self.close_connection = True
                return
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    upstream.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield upstream
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
