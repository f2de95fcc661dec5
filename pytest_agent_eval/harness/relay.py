"""The sandbox's only ways out: loopback ports carried in through Unix sockets.

The sandbox has a network namespace of its own, with nothing in it but loopback, so no registry, mirror or
download site can be reached whatever ``--registry``, proxy flag or address the agent tries. What the CLI
must still reach is carried in, one loopback port each: the harness serves a Unix socket, the socket is bound
into the sandbox (read-only), and inside it ``python -m pytest_agent_eval.harness.relay --carry P=S … -- command…``
listens on ``127.0.0.1:P`` of the sandbox's loopback, forwards each connection to socket ``S``, and runs the
command. Two servers can stand behind a socket:

* :func:`carried`: a stand-in model server on the harness's loopback (:class:`UnixToTcp`);
* :func:`api_proxy`: for the real API, an HTTP proxy (:class:`ApiProxy`) that opens a connection to the API's
  ``host:port`` and to nothing else — a ``CONNECT`` tunnel (what an ``https://`` API is reached by) or a
  forwarded request (an ``http://`` gateway). The sandbox points ``HTTPS_PROXY`` and ``HTTP_PROXY`` at it;
  Claude Code sends all its traffic through them (its docs: "Claude Code respects standard proxy environment
  variables"). The proxy runs outside the sandbox, so nothing the agent does in there changes what it allows;
  behind a proxy of its own (``HTTPS_PROXY`` of the harness) it tunnels through that one.
"""

from __future__ import annotations

import argparse
import base64
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pytest_agent_eval.harness.process import die_with_parent

_CHUNK = 65536
DEFAULT_API_URL = "https://api.anthropic.com"
_HEAD_LIMIT = 65536  # a request head longer than this is refused, not buffered
_HEAD_TIMEOUT_S = 30.0


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until ``source`` ends, then tell ``sink`` no more is coming."""
    try:
        while data := source.recv(_CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _splice(client: socket.socket, upstream: socket.socket) -> None:
    """Copy both ways until both sides are done."""
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()


def _handler(connect: Callable[[], socket.socket]) -> type[socketserver.BaseRequestHandler]:
    class Forward(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                upstream = connect()
            except OSError:
                return
            with upstream:
                _splice(self.request, upstream)

    return Forward


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _TcpServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Served:
    """A threaded Unix-socket server at ``path``, stopped (and its socket removed) by :meth:`stop`."""

    def __init__(self, path: Path, handler: type[socketserver.BaseRequestHandler], name: str) -> None:
        self.path = Path(path)
        self._server = _UnixServer(str(self.path), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.path.unlink(missing_ok=True)


class UnixToTcp(_Served):
    """The harness's side of a carried model port: a Unix socket at ``path`` whose connections go to
    ``127.0.0.1:port``."""

    def __init__(self, path: Path, port: int) -> None:
        self.port = port
        super().__init__(path, _handler(lambda: socket.create_connection(("127.0.0.1", port))), "model-relay")


def api_address(url: str | None) -> tuple[str, int]:
    """``(host, port)`` of the API at ``url`` (``ANTHROPIC_BASE_URL``; the public API when unset)."""
    parts = urlsplit(url or DEFAULT_API_URL)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"ANTHROPIC_BASE_URL must be an http(s) URL with a host, not {url!r}")
    return parts.hostname.lower(), parts.port or (443 if parts.scheme == "https" else 80)


class ApiProxy(_Served):
    """The harness's side of the real API's way out: an HTTP proxy on a Unix socket at ``path`` that connects
    to ``allowed`` (``(host, port)``) and refuses every other target with ``403``. ``refused`` lists the targets
    it refused, in order (what an agent tried to reach)."""

    def __init__(self, path: Path, allowed: tuple[str, int]) -> None:
        self.allowed = (allowed[0].lower(), allowed[1])
        self.refused: list[str] = []
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.request)

        super().__init__(path, Handler, "api-proxy")

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(_HEAD_TIMEOUT_S)
        try:
            head, rest = _read_head(client)
        except (OSError, ValueError):
            return
        client.settimeout(None)
        method, target = _request_target(head)
        address = _target_address(method, target)
        if address != self.allowed:
            self.refused.append(target or "(no request line)")
            host, port = self.allowed
            _answer(client, 403, f"agent-eval: this sandbox reaches {host}:{port} only, not {target}")
            return
        try:
            upstream = _open_upstream(address)
        except OSError as exc:
            _answer(client, 502, f"agent-eval: cannot reach {address[0]}:{address[1]}: {exc}")
            return
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                pending = rest
            else:  # a forwarded request: the connection is bound to the allowed host, whatever follows on it
                pending = head + rest
            if pending:
                upstream.sendall(pending)
            _splice(client, upstream)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The request head (through its blank line) and whatever came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(_CHUNK)
        if not chunk or len(data) > _HEAD_LIMIT:
            raise ValueError("no complete request head")
        data += chunk
    end = data.index(b"\r\n\r\n") + 4
    return data[:end], data[end:]


def _request_target(head: bytes) -> tuple[str, str]:
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    return (parts[0].upper(), parts[1]) if len(parts) == 3 else ("", "")


def _target_address(method: str, target: str) -> tuple[str, int] | None:
    """Where a request asks to go: ``host:port`` of a CONNECT, the URL of a forwarded ``http://`` request."""
    try:
        if method == "CONNECT":
            parts = urlsplit(f"//{target}")
            return (parts.hostname or "", parts.port) if parts.port else None
        parts = urlsplit(target)
        if parts.scheme == "http" and parts.hostname:
            return parts.hostname, parts.port or 80
    except ValueError:
        pass
    return None


def _answer(client: socket.socket, status: int, text: str) -> None:
    reason = {403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (text + "\n").encode()
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
    try:
        client.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)
    except OSError:
        pass


def _open_upstream(address: tuple[str, int]) -> socket.socket:
    """A connection to ``address``: direct, or tunnelled through the harness's own HTTPS proxy."""
    host, port = address
    proxy = urllib.request.getproxies().get("https")
    if not proxy or urllib.request.proxy_bypass(host):
        return socket.create_connection(address, timeout=_HEAD_TIMEOUT_S)
    parts = urlsplit(proxy if "//" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        raise OSError(f"unsupported upstream proxy {proxy!r} (an http:// proxy is needed)")
    sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=_HEAD_TIMEOUT_S)
    request = f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    if parts.username:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        request += f"Proxy-Authorization: Basic {base64.b64encode(credentials.encode()).decode()}\r\n"
    sock.sendall((request + "\r\n").encode())
    head, rest = _read_head(sock)
    status = head.split(b" ", 2)[1:2]
    if not status or not status[0].startswith(b"2") or rest:
        sock.close()
        raise OSError(f"upstream proxy {parts.hostname} refused the tunnel: {head.splitlines()[0]!r}")
    sock.settimeout(None)
    return sock


@contextmanager
def _socket_folder() -> Iterator[Path]:
    """A short folder of its own: a Unix socket path may not exceed about 100 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="agent-eval-relay-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def carried(url: str) -> Iterator[tuple[int, Path]]:
    """Serve a relay to the loopback server at ``url``; yields the ``(port, socket)`` a sandbox carries in."""
    port = urlsplit(url).port
    if port is None:
        raise ValueError(f"no port in {url!r}")
    with _socket_folder() as folder:
        relay = UnixToTcp(folder / "model.sock", port)
        try:
            yield port, relay.path
        finally:
            relay.stop()


PROXY_PORT = 3128  # the proxy's port inside the sandbox, whose loopback holds nothing else


@contextmanager
def api_proxy(url: str | None) -> Iterator[ApiProxy]:
    """Serve :class:`ApiProxy` for the API at ``url`` (``ANTHROPIC_BASE_URL``, or the public API); a sandbox
    carries it in as ``(PROXY_PORT, proxy.path)``."""
    allowed = api_address(url)
    with _socket_folder() as folder:
        proxy = ApiProxy(folder / "api-proxy.sock", allowed)
        try:
            yield proxy
        finally:
            proxy.stop()


def relay_command(carry: Sequence[tuple[int, Path]], command: Sequence[str]) -> list[str]:
    """``command`` behind the sandbox's side of the relay, listening on each ``(port, socket)`` of ``carry``."""
    flags = [f"--carry={port}={path}" for port, path in carry]
    # isolated (-I): it starts in the agent's repository, where -m would import a module the agent wrote first
    return [sys.executable, "-I", "-m", __name__, *flags, "--", *command]


def _connect_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return sock


def _carry(value: str) -> tuple[int, str]:
    port, _, path = value.partition("=")
    if not port.isdigit() or not path:
        raise argparse.ArgumentTypeError(f"expected PORT=SOCKET, got {value!r}")
    return int(port), path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_agent_eval.harness.relay")
    parser.add_argument(
        "--carry", type=_carry, action="append", required=True, metavar="PORT=SOCKET",
        help="listen on this loopback port and forward each connection to this Unix socket (repeatable)",
    )  # fmt: skip
    parser.add_argument("command", nargs="+", help="what to run once the ports listen")
    args = parser.parse_args(argv)
    for port, path in args.carry:
        server = _TcpServer(("127.0.0.1", port), _handler(lambda path=path: _connect_unix(path)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
    process = subprocess.Popen(args.command, preexec_fn=die_with_parent())
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.kill()
        return process.wait()


if __name__ == "__main__":
    sys.exit(main())
