"""``-k`` for agent items: pytest's keyword expressions (``and``, ``or``, ``not``, parentheses, case-insensitive
substrings), except that the bare words ``with`` and ``without`` name an arm exactly.

pytest matches ``-k`` words as substrings of an item's names, so ``-k with`` selects both arms ("with" is in
"without") and ``-k "not with"`` neither. The plugin evaluates the expression again for the agent items pytest
kept and deselects those whose arm does not match (so ``-k "not with"`` still selects no agent item: pytest
already dropped them). The grammar is pytest's
(``expr := or_expr; or_expr := and_expr ("or" and_expr)*; and_expr := not_expr ("and" not_expr)*;
not_expr := "not" not_expr | "(" expr ")" | ident``); it is written out here because pytest keeps its
evaluator private.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from pytest_agent_eval.corpus.cases import ARM_NAMES

ARM_WORD = re.compile(r"(?<![\w:+\-.\[\]\\/])(?:with|without)(?![\w:+\-.\[\]\\/])", re.IGNORECASE)
_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class KeywordSyntaxError(ValueError):
    """An expression this evaluator cannot read (pytest has already rejected worse)."""


def keyword_match(expression: str, matches: Callable[[str], bool]) -> bool:
    """Evaluate a ``-k`` expression, each identifier answered by ``matches``."""
    tokens = _TOKEN.findall(expression)
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise KeywordSyntaxError(f"-k {expression!r}: unexpected end")
        position += 1
        return tokens[position - 1]

    def or_expr() -> bool:
        value = and_expr()
        while peek() == "or":
            take()
            value = and_expr() or value
        return value

    def and_expr() -> bool:
        value = not_expr()
        while peek() == "and":
            take()
            value = not_expr() and value
        return value

    def not_expr() -> bool:
        token = take()
        if token == "not":
            return not not_expr()
        if token == "(":
            value = or_expr()
            if take() != ")":
                raise KeywordSyntaxError(f"-k {expression!r}: expected ')'")
            return value
        return matches(token)

    value = or_expr()
    if position != len(tokens):
        raise KeywordSyntaxError(f"-k {expression!r}: unexpected {tokens[position]!r}")
    return value


def arm_keyword_matcher(item: Any, arm: str) -> Callable[[str], bool]:
    """pytest's matching (a case-insensitive substring of the item's keywords), ``with``/``without`` exactly."""
    names = [name.lower() for name in _keywords(item)]

    def matches(word: str) -> bool:
        if word.lower() in ARM_NAMES:
            return word.lower() == arm
        return any(word.lower() in name for name in names)

    return matches


def _keywords(item: Any) -> Iterable[str]:
    return [*item.keywords, *(node.name for node in item.listchain())]
