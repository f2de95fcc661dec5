"""The sandbox's only ways out: loopback ports carried in through Unix sockets.

The sandbox has a network namespace of its own, with nothing in it but loopback, so no registry, mirror or
download site can be reached whatever ``--registry``, proxy flag or address the agent tries. What the CLI
must still reach is carried in, one loopback port each: the harness serves a Unix socket, the socket is bound
into the sandbox (read-only), and inside it ``python -m pytest_agent_eval.harness.relay --carry P=S … -- command…``
listens on ``127.0.0.1:P`` of the sandbox's loopback, forwards each connection to socket ``S``, and runs the
command. Behind a socket stands the stand-in model server, or the harness's forwarder to the real API (which
holds the key outside the sandbox; docs/model-boundary.md), on the harness's loopback (:func:`carried`).
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
        return _status(process.wait())
    except KeyboardInterrupt:
        process.kill()
        return _status(process.wait())


def _status(code: int) -> int:
    """The command's exit status as this process passes it on: a death by signal N as 128 + N, as bubblewrap and a
    shell pass it (``sys.exit(-9)`` would read as ``exited 247``)."""
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
