"""Progress of long harness work (installs, clones, downloads, index builds) for whoever shows it.

The harness announces; the pytest plugin listens and writes to the terminal. Plain Python callers
see nothing unless they listen.
"""

from __future__ import annotations

from collections.abc import Callable

_listeners: list[Callable[[str], None]] = []


def listen(callback: Callable[[str], None]) -> Callable[[], None]:
    """Call ``callback`` with every announcement; returns the function that stops it."""
    _listeners.append(callback)
    return lambda: _listeners.remove(callback) if callback in _listeners else None


def announce(text: str) -> None:
    for callback in list(_listeners):
        callback(text)
