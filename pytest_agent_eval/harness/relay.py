"""Carry one loopback TCP port into a sandbox that has no network: the stand-in model server's.

With a network of its own the sandbox reaches no registry, whatever ``--registry`` or proxy flag the agent
tries; but the CLI must still reach the model server on ``127.0.0.1:<port>``. So the harness serves a Unix
socket that forwards to that port (:class:`UnixToTcp`), the socket's folder is bound into the sandbox, and
inside it ``python -m pytest_agent_eval.harness.relay --port P --socket S -- command…`` listens on
``127.0.0.1:P`` of the sandbox's loopback, forwards each connection to the socket, and runs the command.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from pytest_agent_eval.harness.process import die_with_parent

_CHUNK = 65536


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


def _handler(connect: Callable[[], socket.socket]) -> type[socketserver.BaseRequestHandler]:
    class Forward(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                upstream = connect()
            except OSError:
                return
            with upstream:
                back = threading.Thread(target=_pipe, args=(upstream, self.request), daemon=True)
                back.start()
                _pipe(self.request, upstream)
                back.join()

    return Forward


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _TcpServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class UnixToTcp:
    """The harness's side: a Unix socket at ``path`` whose connections go to ``127.0.0.1:port``."""

    def __init__(self, path: Path, port: int) -> None:
        self.path = Path(path)
        self.port = port
        self._server = _UnixServer(str(self.path), _handler(lambda: socket.create_connection(("127.0.0.1", port))))
        self._thread = threading.Thread(target=self._server.serve_forever, name="model-relay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.path.unlink(missing_ok=True)


@contextmanager
def carried(url: str) -> Iterator[tuple[int, Path]]:
    """Serve a relay to the loopback server at ``url``; yields the ``(port, socket)`` a sandbox carries in.

    The socket lives in a short folder of its own: a Unix socket path may not exceed about 100 bytes.
    """
    port = urlsplit(url).port
    if port is None:
        raise ValueError(f"no port in {url!r}")
    folder = Path(tempfile.mkdtemp(prefix="agent-eval-relay-"))
    relay = UnixToTcp(folder / "model.sock", port)
    try:
        yield port, relay.path
    finally:
        relay.stop()
        shutil.rmtree(folder, ignore_errors=True)


def relay_command(port: int, path: Path, command: Sequence[str]) -> list[str]:
    """``command`` behind the sandbox's side of the relay."""
    return [sys.executable, "-m", __name__, "--port", str(port), "--socket", str(path), "--", *command]


def _connect_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_agent_eval.harness.relay")
    parser.add_argument("--port", type=int, required=True, help="the loopback port to listen on")
    parser.add_argument("--socket", required=True, help="the Unix socket each connection goes to")
    parser.add_argument("command", nargs="+", help="what to run once the port listens")
    args = parser.parse_args(argv)
    server = _TcpServer(("127.0.0.1", args.port), _handler(lambda: _connect_unix(args.socket)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    process = subprocess.Popen(args.command, preexec_fn=die_with_parent())
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.kill()
        return process.wait()


if __name__ == "__main__":
    sys.exit(main())
