"""Progress of long harness work (installs, clones, downloads, index builds) for whoever shows it.

The harness announces; the pytest plugin listens and writes to the terminal. Plain Python callers
see nothing unless they listen.

Under pytest-xdist the work runs in worker processes, whose output pytest does not show, and xdist has no
channel for a plugin's own messages before an item ends. So a worker's listener appends each announcement as
a line to a file the controller names (:func:`append_to`), and the controller follows that file from a thread
(:func:`follow`) and shows each line as it comes, as pytest's live logging shows a thread's records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

_listeners: list[Callable[[str], None]] = []
FOLLOW_INTERVAL_S = 0.2


def listen(callback: Callable[[str], None]) -> Callable[[], None]:
    """Call ``callback`` with every announcement; returns the function that stops it."""
    _listeners.append(callback)
    return lambda: _listeners.remove(callback) if callback in _listeners else None


def announce(text: str) -> None:
    for callback in list(_listeners):
        callback(text)


def append_to(path: Path, prefix: str = "") -> Callable[[str], None]:
    """A listener that appends each announcement to ``path`` as one line, after ``prefix`` (a worker's name).

    One ``write`` of one short line to a file opened for appending: lines of several workers do not mix. A file
    that cannot be written (a remote worker, where the path means nothing) loses the line, never the work.
    """

    def append(text: str) -> None:
        line = prefix + " ".join(text.splitlines()) + "\n"
        try:
            with open(path, "a", encoding="utf-8") as out:
                out.write(line)
        except OSError:
            pass

    return append


def follow(path: Path, show: Callable[[str], None], interval_s: float = FOLLOW_INTERVAL_S) -> Callable[[], None]:
    """Show every line appended to ``path`` (which need not exist yet), from a daemon thread that looks every
    ``interval_s``; returns the function that stops it, after showing the lines written until then."""
    stop = threading.Event()
    offset, partial = 0, b""

    def drain() -> None:
        nonlocal offset, partial
        try:
            with open(path, "rb") as source:
                source.seek(offset)
                data = source.read()
        except FileNotFoundError:
            return
        offset += len(data)
        *lines, partial = (partial + data).split(b"\n")
        for line in lines:
            show(line.decode("utf-8", errors="replace"))

    def run() -> None:
        while not stop.wait(interval_s):
            drain()

    thread = threading.Thread(target=run, name=f"agent-eval progress {path.name}", daemon=True)
    thread.start()

    def stop_following() -> None:
        stop.set()
        thread.join()
        drain()

    return stop_following
