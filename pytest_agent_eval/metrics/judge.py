"""A judge for what an answer key cannot grade (docs/metrics/answers.md, "A judge").

A judge is a plug-in, as the tool and the agent are: ``--agent-eval-judge MODULE:ATTR`` names an object with a
``name`` and ``judge(question, answer, key) -> Judgement`` (``key``: the turn's key as a dict, or None). The
built-in ``model`` judge asks a real model through the harness's forwarder (the Messages API, ``ANTHROPIC_API_KEY``
or ``ANTHROPIC_AUTH_TOKEN`` set; the key stays in the harness, as it does for the agent's requests).

Every judgement — the prompt, the model's reply and the grade — is kept in the run's record
(``scores["judge"]``). A rescore, a resumed item and a report read it from there: a judge is asked once per run,
never again. Without a judge (offline, no key) the record has none and the report says no judge ran.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_agent_eval.corpus.keys import AnswerKey

JUDGE_MODEL = "claude-sonnet-4-5"
_GRADE_RE = re.compile(r"GRADE:\s*([01](?:\.\d+)?)", re.I)


@dataclass(frozen=True)
class Judgement:
    """A grade in [0, 1], why, and what was asked and answered (kept so a rescore need not ask again)."""

    grade: float
    reason: str = ""
    prompt: str = ""
    reply: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"grade": self.grade, "reason": self.reason, "prompt": self.prompt, "reply": self.reply}


class Judge(Protocol):
    name: str

    def judge(self, question: str, answer: str, key: dict[str, Any] | None) -> Judgement: ...


class NoJudge(Exception):
    """The judge cannot run here (no real key for the model judge): the report says no judge ran, and why."""


def load_judge(reference: str) -> Judge:
    """``model`` (the built-in model judge) or ``MODULE:ATTR``; ValueError naming the reference otherwise."""
    if reference == "model":
        return ModelJudge()
    module_name, _, attr = reference.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--agent-eval-judge {reference}: cannot load it: {exc}") from exc
    if not callable(getattr(found, "judge", None)):
        raise ValueError(f"--agent-eval-judge {reference}: {type(found).__name__} has no judge(question, answer, key)")
    return found


def judge_run(judge: Judge, questions: Sequence[str], answers: Sequence[str], key: AnswerKey | None) -> dict[str, Any]:
    """Each turn's judgement and their mean, as the record keeps it (``scores["judge"]``)."""
    turns = []
    for n, question in enumerate(questions):
        turn_key = key.turns[n].to_dict() if key is not None and n < len(key.turns) else None
        answer = answers[n] if n < len(answers) else ""
        turns.append({"question": question, **judge.judge(question, answer, turn_key).to_dict()})
    grades = [t["grade"] for t in turns]
    return {"judge": judge.name, "grade": sum(grades) / len(grades) if grades else None, "turns": turns}


def prompt_of(question: str, answer: str, key: dict[str, Any] | None) -> str:
    """What the model judge is asked: the question, the answer, and the key when there is one."""
    reference = f"\nA right answer names at least:\n{json.dumps(key, indent=1)}\n" if key else ""
    return (
        "You grade an answer to a question about a code repository.\n"
        f"Question: {question}\n{reference}\nAnswer:\n{answer}\n\n"
        "Is the answer right and specific? Reply with one line of reasoning, then GRADE: a number from 0 to 1."
    )


def parse_reply(reply: str) -> Judgement:
    """The grade in a model's reply (``GRADE: 0.8``); a reply without one grades 0 and says so."""
    found = _GRADE_RE.search(reply)
    if found is None:
        return Judgement(0.0, "the judge's reply had no GRADE line", reply=reply)
    return Judgement(min(1.0, float(found.group(1))), reply.split("\n", 1)[0].strip(), reply=reply)


class ModelJudge:
    """The built-in judge: one Messages request per turn through the forwarder to the real API."""

    name = "model"

    def __init__(self, send: Callable[[dict[str, Any]], str] | None = None, model: str = JUDGE_MODEL) -> None:
        self._send = send
        self.model = model

    def judge(self, question: str, answer: str, key: dict[str, Any] | None) -> Judgement:
        prompt = prompt_of(question, answer, key)
        request = {"model": self.model, "max_tokens": 300, "messages": [{"role": "user", "content": prompt}]}
        reply = (self._send or _forwarded)(request)
        found = parse_reply(reply)
        return Judgement(found.grade, found.reason, prompt, reply)


def _forwarded(request: dict[str, Any]) -> str:
    """The text of the real API's reply to ``request``, through the harness's forwarder (its key, never the
    agent's); :class:`NoJudge` without a real key."""
    from pytest_agent_eval.model import AnthropicBackend

    try:
        backend = AnthropicBackend()
    except ValueError as exc:
        raise NoJudge(str(exc)) from None
    reply = backend.respond(request)
    body = b"".join(reply.body)
    if reply.status != 200:
        raise NoJudge(f"the judge's model answered HTTP {reply.status}: {body[:200]!r}")
    content = json.loads(body).get("content") or []
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))
