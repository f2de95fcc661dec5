"""A plug-in named on the command line as ``MODULE:ATTR`` (``--agent-eval-tool``, ``--agent-eval-agent``)."""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

T = TypeVar("T")


def load_reference(reference: str, kind: type[T]) -> T:
    """The ``kind`` object that ``MODULE:ATTR`` names (``MODULE`` importable: installed, or on pytest's
    ``pythonpath``); raises ValueError saying what is wrong."""
    module_name, sep, attr = reference.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:ATTR naming a {kind.__name__}, got {reference!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r} for {reference!r}: {exc}") from None
    found: Any = module
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ValueError(f"{module_name!r} has no attribute {attr!r}")
        found = getattr(found, part)
    if not isinstance(found, kind):
        raise ValueError(f"{reference} is a {type(found).__name__}, not a {kind.__name__}")
    return found
